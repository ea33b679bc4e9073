// SPDX-License-Identifier: Apache-2.0
#include "colod/daemon/cgroup_discovery.h"

#include <gtest/gtest.h>
#include <stdlib.h>
#include <sys/stat.h>

#include <filesystem>

#include "colod/daemon/cgroup_path.h"
#include "colod/policy/tier.h"
#include "colod/testing/result_matchers.h"

namespace colod::daemon {
namespace {

const std::string kId = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";
const std::string kId2 = "fedcba9876543210fedcba9876543210fedcba9876543210fedcba9876543210";

TEST(ParseKubepodsPath, CgroupfsLayout) {
  auto b = parseKubepodsPath("/kubepods/burstable/pod1234-abcd/" + kId);
  ASSERT_TRUE(b.has_value());
  EXPECT_EQ(b->id, kId);
  EXPECT_EQ(b->pod_uid, "1234-abcd");
  EXPECT_EQ(b->qos, PodQos::Burstable);
  EXPECT_FALSE(b->systemd);
  EXPECT_EQ(b->pod_cgroup, "/kubepods/burstable/pod1234-abcd");
  EXPECT_EQ(b->rel, "/kubepods/burstable/pod1234-abcd/" + kId);
  EXPECT_EQ(runtimeCgroupsPath(*b), b->rel);

  auto be = parseKubepodsPath("/kubepods/besteffort/pod99/" + kId);
  ASSERT_TRUE(be.has_value());
  EXPECT_EQ(be->qos, PodQos::BestEffort);
  // Guaranteed pods sit directly under kubepods.
  auto g = parseKubepodsPath("/kubepods/pod77/" + kId);
  ASSERT_TRUE(g.has_value());
  EXPECT_EQ(g->qos, PodQos::Guaranteed);
  EXPECT_EQ(g->pod_uid, "77");
  // CRI-O with the cgroupfs driver.
  auto crio = parseKubepodsPath("/kubepods/besteffort/pod99/crio-" + kId);
  ASSERT_TRUE(crio.has_value());
  EXPECT_EQ(crio->id, kId);
  EXPECT_EQ(crio->runtime, "crio");
  // Under a prefix (a nested kubelet, a test's private tree).
  auto nested = parseKubepodsPath("/colod-test-1/kubepods/pod77/" + kId);
  ASSERT_TRUE(nested.has_value());
  EXPECT_EQ(nested->prefix, "/colod-test-1");
  EXPECT_EQ(nested->pod_cgroup, "/colod-test-1/kubepods/pod77");
}

TEST(ParseKubepodsPath, SystemdLayout) {
  auto b = parseKubepodsPath(
      "/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod12_34_ab.slice/"
      "cri-containerd-" +
      kId + ".scope");
  ASSERT_TRUE(b.has_value());
  EXPECT_EQ(b->id, kId);
  EXPECT_EQ(b->runtime, "cri-containerd");
  EXPECT_EQ(b->pod_uid, "12-34-ab");  // systemd's escaped dashes turned back
  EXPECT_EQ(b->qos, PodQos::Burstable);
  EXPECT_TRUE(b->systemd);
  EXPECT_EQ(b->pod_slice, "kubepods-burstable-pod12_34_ab.slice");
  EXPECT_EQ(b->pod_cgroup,
            "/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod12_34_ab.slice");
  // The runtime's own cgroups_path, which the daemon resolves back to the same directory.
  EXPECT_EQ(runtimeCgroupsPath(*b), "kubepods-burstable-pod12_34_ab.slice:cri-containerd:" + kId);
  EXPECT_EQ(ASSERT_OK(containerCgroupRel(runtimeCgroupsPath(*b), CgroupDriver::Auto, "")), b->rel);

  auto be = parseKubepodsPath(
      "/kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-pod9.slice/crio-" + kId2 +
      ".scope");
  ASSERT_TRUE(be.has_value());
  EXPECT_EQ(be->qos, PodQos::BestEffort);
  EXPECT_EQ(be->runtime, "crio");
  auto g = parseKubepodsPath("/kubepods.slice/kubepods-pod7.slice/docker-" + kId + ".scope");
  ASSERT_TRUE(g.has_value());
  EXPECT_EQ(g->qos, PodQos::Guaranteed);
  // With a prefix: the daemon prepends daemon.systemd_cgroup_prefix to systemd paths.
  auto nested =
      parseKubepodsPath("/peer-1/kubepods.slice/kubepods-pod7.slice/crio-" + kId + ".scope");
  ASSERT_TRUE(nested.has_value());
  EXPECT_EQ(
      ASSERT_OK(containerCgroupRel(runtimeCgroupsPath(*nested), CgroupDriver::Systemd, "/peer-1")),
      nested->rel);
}

TEST(ParseKubepodsPath, WhatIsNotAContainer) {
  for (const std::string& rel : std::vector<std::string>{
           std::string("/"),
           std::string("/kubepods"),
           std::string("/kubepods/burstable"),
           std::string("/kubepods/burstable/pod1"),
           "/kubepods/burstable/pod1/" + kId + "/child",  // a container's own sub-cgroup
           "/kubepods/burstable/notapod/" + kId,
           std::string("/kubepods/burstable/pod1/short"),
           "/kubepods/burstable/pod1/" + kId.substr(0, 11),
           "/kubepods/burstable/pod/" + kId,  // no uid
           "/kubepods/burstable/podXYZ/" + kId,
           "/kubepods/../kubepods/pod1/" + kId,
           std::string("/kubepods.slice"),
           std::string("/kubepods.slice/kubepods-burstable.slice"),
           std::string("/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod1.slice"),
           // CRI-O's monitor scope.
           "/kubepods.slice/kubepods-pod1.slice/crio-conmon-" + kId + ".scope",
           "/kubepods.slice/kubepods-pod1.slice/cri-containerd-" + kId,  // no .scope
           "/kubepods.slice/kubepods-pod1.slice/unknown-" + kId + ".scope",
           // A pod slice that does not match its QoS slice.
           "/kubepods.slice/kubepods-burstable.slice/kubepods-besteffort-pod1.slice/crio-" + kId +
               ".scope",
           std::string("/system.slice/containerd.service"),
           "/system.slice/cri-containerd-" + kId + ".scope",
       }) {
    EXPECT_FALSE(parseKubepodsPath(rel).has_value()) << rel;
  }
}

// The pod's cgroup parent is what the tier classifier reads: burstable and guaranteed are LS,
// besteffort is BE, in both layouts.
TEST(DiscoveredRegistry, PodsCarryTheirQosForTheTierClassifier) {
  std::vector<KubepodsContainer> found = {
      *parseKubepodsPath("/kubepods/besteffort/pod1/" + kId),
      *parseKubepodsPath("/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod2.slice/"
                         "cri-containerd-" +
                         kId2 + ".scope"),
  };
  auto snap = discoveredRegistry(found, 7);
  EXPECT_EQ(snap->generation, 7U);
  EXPECT_FALSE(snap->synchronized);
  ASSERT_EQ(snap->containers.size(), 2U);
  ASSERT_EQ(snap->pods.size(), 2U);
  const nri::Container* be = snap->container(kId);
  ASSERT_NE(be, nullptr);
  EXPECT_EQ(be->state, nri::ContainerState::Running);
  EXPECT_EQ(be->name, kId.substr(0, 12));
  const nri::PodSandbox* be_pod = snap->pod(be->pod_sandbox_id);
  ASSERT_NE(be_pod, nullptr);
  EXPECT_EQ(be_pod->uid, "1");
  EXPECT_EQ(policy::qosFromCgroupParent(be_pod->cgroup_parent), policy::K8sQos::BestEffort);
  const nri::PodSandbox* ls_pod = snap->pod(snap->container(kId2)->pod_sandbox_id);
  ASSERT_NE(ls_pod, nullptr);
  EXPECT_EQ(policy::qosFromCgroupParent(ls_pod->cgroup_parent), policy::K8sQos::Burstable);
  EXPECT_EQ(policy::qosFromCgroupParent(
                discoveredRegistry({*parseKubepodsPath("/kubepods/pod3/" + kId)}, 1)
                    ->pod("kubepods:3")
                    ->cgroup_parent),
            policy::K8sQos::Guaranteed);
}

class FakeKubepods : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/colod-discovery-XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl), nullptr);
    root_ = tmpl;
  }
  void TearDown() override { std::filesystem::remove_all(root_); }
  void mkdir(const std::string& rel) { std::filesystem::create_directories(root_ + rel); }
  std::string root_;
};

// The walk over a fake tree (plain directories: the walk is the same on cgroupfs; the
// privileged test runs it on the real one).
TEST_F(FakeKubepods, ListsBothLayoutsUnderThePrefix) {
  mkdir("/p/kubepods/burstable/pod1/" + kId);
  mkdir("/p/kubepods/burstable/pod1/" + kId + "/sub");  // not a container
  mkdir("/p/kubepods/besteffort");
  mkdir("/p/kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-pod2.slice/crio-" + kId2 +
        ".scope");
  mkdir("/p/kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-pod2.slice/crio-conmon-" +
        kId2 + ".scope");
  mkdir("/kubepods/pod9/" + kId);  // outside the prefix
  auto found =
      ASSERT_OK(discoverKubepods({.hierarchy_root = root_, .prefix = "/p", .max_cgroups = 4096}));
  ASSERT_EQ(found.size(), 2U);
  EXPECT_EQ(found[0].id, kId);
  EXPECT_EQ(found[0].qos, PodQos::Burstable);
  EXPECT_EQ(found[0].rel, "/p/kubepods/burstable/pod1/" + kId);
  struct stat st {};
  ASSERT_EQ(::stat((root_ + found[0].rel).c_str(), &st), 0);
  EXPECT_EQ(found[0].cgroup_id, st.st_ino);  // the id is the directory's inode
  EXPECT_EQ(found[1].id, kId2);
  EXPECT_EQ(found[1].qos, PodQos::BestEffort);
  EXPECT_TRUE(found[1].systemd);
  // No kubepods at all: nothing, not an error.
  EXPECT_TRUE(
      ASSERT_OK(discoverKubepods({.hierarchy_root = root_, .prefix = "/none", .max_cgroups = 4096}))
          .empty());
  // Bounded.
  EXPECT_ERR(discoverKubepods({.hierarchy_root = root_, .prefix = "/p", .max_cgroups = 3}), E2BIG,
             "");
}

// The runtime's view wins once it has synchronized; until then the tree, rescanned on request,
// with a new generation only when the content changed.
TEST(RegistrySource, CgroupTreeUntilTheRuntimeSynchronizes) {
  static std::vector<KubepodsContainer> tree;
  static int scans = 0;
  static bool fail = false;
  tree = {*parseKubepodsPath("/kubepods/besteffort/pod1/" + kId)};
  scans = 0;
  fail = false;
  RegistrySource src([](const DiscoveryOptions&) -> Result<std::vector<KubepodsContainer>> {
    ++scans;
    if (fail) {
      return COLOD_ERR(EACCES, "walk refused");
    }
    return tree;
  });
  DiscoveryOptions opts;
  opts.hierarchy_root = "/sys/fs/cgroup/unified";
  auto runtime = std::make_shared<nri::RegistrySnapshot>();  // not synchronized, empty

  EXPECT_TRUE(src.discovering());
  auto a = src.choose(runtime, opts, false);
  EXPECT_TRUE(a.discovered);
  EXPECT_EQ(scans, 1);  // the first call scans
  ASSERT_EQ(a.snapshot->containers.size(), 1U);
  EXPECT_NE(a.snapshot->generation & RegistrySource::kDiscoveredGeneration, 0U);
  EXPECT_NE(a.note.find("1 containers listed from the kubepods cgroup tree"), std::string::npos)
      << a.note;
  auto b = src.choose(runtime, opts, false);
  EXPECT_EQ(scans, 1);  // no rescan asked
  EXPECT_EQ(b.snapshot, a.snapshot);
  EXPECT_EQ(b.note, "");  // said once
  auto c = src.choose(runtime, opts, true);
  EXPECT_EQ(scans, 2);
  EXPECT_EQ(c.snapshot->generation, a.snapshot->generation);  // same content, same generation
  tree.push_back(*parseKubepodsPath("/kubepods/pod2/" + kId2));
  auto d = src.choose(runtime, opts, true);
  EXPECT_NE(d.snapshot->generation, a.snapshot->generation);
  EXPECT_EQ(d.snapshot->containers.size(), 2U);
  // A failing walk is said once and keeps the last list.
  fail = true;
  auto e = src.choose(runtime, opts, true);
  EXPECT_NE(e.note.find("walk refused"), std::string::npos) << e.note;
  EXPECT_EQ(e.snapshot, d.snapshot);
  EXPECT_EQ(src.choose(runtime, opts, true).note, "");
  fail = false;
  EXPECT_NE(src.choose(runtime, opts, true).note.find("works again"), std::string::npos);

  // The runtime synchronizes: its view from now on, even after a disconnect.
  auto synced = std::make_shared<nri::RegistrySnapshot>();
  synced->synchronized = true;
  synced->generation = 3;
  auto f = src.choose(synced, opts, true);
  EXPECT_FALSE(f.discovered);
  EXPECT_FALSE(src.discovering());
  EXPECT_EQ(f.snapshot, synced);
  EXPECT_NE(f.note.find("replaces the 2 containers"), std::string::npos) << f.note;
  const int scans_before = scans;
  auto lost = std::make_shared<nri::RegistrySnapshot>(*synced);
  lost->synchronized = false;
  auto g = src.choose(lost, opts, true);
  EXPECT_FALSE(g.discovered);
  EXPECT_EQ(g.snapshot, lost);
  EXPECT_EQ(g.note, "");
  EXPECT_EQ(scans, scans_before);
}

}  // namespace
}  // namespace colod::daemon
