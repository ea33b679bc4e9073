// SPDX-License-Identifier: Apache-2.0
#include "colod/nri/codec.h"

#include <gtest/gtest.h>

#include "colod/nri/testing/realistic.h"
#include "colod/testing/result_matchers.h"
#include "nri/proto/api.pb.h"
#include "testutil.h"

namespace colod::nri::codec {
namespace {

using testutil::hex;
namespace pb = ::nri::pkg::api::v1alpha1;

TEST(CodecGolden, ConfigureRequestAndReply) {
  // Appendix A3 payload.
  auto req = ASSERT_OK(decodeConfigureRequest(
      hex("120f \"harness-runtime\" 1a06 \"v0.0.1\" 20 8827 28 d00f")));
  EXPECT_EQ(req.runtime_name, "harness-runtime");
  EXPECT_EQ(req.runtime_version, "v0.0.1");
  EXPECT_EQ(req.registration_timeout_ms, 5000);
  EXPECT_EQ(req.request_timeout_ms, 2000);
  // Appendix A4: events = 0x689.
  EXPECT_EQ(encodeConfigureResponse(0x689), hex("10 89 0d"));
}

TEST(CodecGolden, SynchronizeReplyWithOneUpdate) {
  ContainerUpdate u{.container_id = "ctr0", .resources = {}, .ignore_failure = false};
  u.resources.cpu.cpus = "0-1";
  EXPECT_EQ(encodeSynchronizeResponse({u}, false),
            hex("0a 11 0a 04 \"ctr0\" 12 09 0a 07 12 05 32 03 \"0-1\""));
  auto chunk = encodeSynchronizeResponse({}, true);
  EXPECT_EQ(chunk, hex("10 01"));
}

TEST(CodecGolden, CreateContainerReply) {
  CreateContainerResult r;
  r.adjust.annotations["harness"] = "yes";
  LinuxResources res;
  res.cpu.cpus = "2-3";
  r.adjust.resources = res;
  ContainerUpdate u{.container_id = "ctr0", .resources = {}, .ignore_failure = true};
  u.resources.cpu.shares = 512;
  r.updates.push_back(u);
  EXPECT_EQ(encodeCreateContainerResponse(r),
            hex("0a 1b 12 0e 0a 07 \"harness\" 12 03 \"yes\" 32 09 12 07 12 05 32 03 \"2-3\" "
                "12 13 0a 04 \"ctr0\" 12 09 0a 07 12 05 0a 03 08 80 04 18 01"));
}

TEST(CodecGolden, UpdateContainersRequest) {
  ContainerUpdate a{.container_id = "ctr0", .resources = {}, .ignore_failure = false};
  a.resources.memory.limit = int64_t{1} << 30;
  ContainerUpdate b{.container_id = "ctr2", .resources = {}, .ignore_failure = false};
  b.resources.cpu.quota = 50000;
  b.resources.cpu.period = 100000;
  EXPECT_EQ(encodeUpdateContainers({a, b}),
            hex("0a14 0a04 \"ctr0\" 120c 0a0a 0a08 0a06 08 8080808004 "
                "0a18 0a04 \"ctr2\" 1210 0a0e 120c 1204 08 d08603 1a04 08 a08d06"));
}

TEST(CodecGolden, StateChangeRunPodSandbox) {
  pb::PodSandbox pod = testing::realisticPod(3);
  pb::StateChangeEvent ev;
  ev.set_event(pb::RUN_POD_SANDBOX);
  *ev.mutable_pod() = pod;
  auto bytes = ev.SerializeAsString();
  ASSERT_EQ(bytes.substr(0, 2), std::string("\x08\x01", 2)) << "event=1 first (Appendix A6)";
  auto sc = ASSERT_OK(decodeStateChange(std::as_bytes(std::span(bytes.data(), bytes.size()))));
  EXPECT_EQ(sc.event, Event::RunPodSandbox);
  EXPECT_EQ(sc.pod.id, pod.id());
  EXPECT_EQ(sc.pod.namespace_name, "ns-3");
  EXPECT_EQ(sc.pod.labels.get("app"), "app-003");
  EXPECT_EQ(sc.pod.cgroup_parent, "/kubepods/burstable/pod" + pod.uid());
  EXPECT_EQ(sc.pod.pod_resources.cpu.quota, 200000);
  EXPECT_FALSE(sc.container.has_value());
}

TEST(Codec, ContainerFieldsUnknownFieldsAndDuplicates) {
  pb::PodSandbox pod = testing::realisticPod(0);
  pb::Container c = testing::realisticContainer(5, pod);
  pb::CreateContainerRequest req;
  *req.mutable_pod() = pod;
  *req.mutable_container() = c;
  std::string bytes = req.SerializeAsString();
  // A field from a future NRI (container field 99) and a duplicate label key (last wins).
  pb::Container extra;
  auto* l = extra.add_labels();
  l->set_key("io.kubernetes.container.name");
  l->set_value("renamed");
  std::string e = extra.SerializeAsString() + std::string("\x98\x06\x07", 3);  // field 99 varint
  std::string wrapped;
  wrapped.push_back('\x12');
  wrapped.push_back(static_cast<char>(e.size()));
  bytes += wrapped + e;  // a repeated occurrence of field 2 merges into the container
  auto ev = ASSERT_OK(decodeContainerEvent(std::as_bytes(std::span(bytes.data(), bytes.size()))));
  EXPECT_EQ(ev.container.id, c.id());
  EXPECT_EQ(ev.container.state, ContainerState::Running);
  EXPECT_EQ(ev.container.labels.get("io.kubernetes.container.name"), "renamed");
  EXPECT_EQ(ev.container.resources.cpu.shares, 102U);
  EXPECT_EQ(ev.container.resources.memory.limit, int64_t{256} << 20);
  EXPECT_EQ(ev.container.resources.unified.get("memory.oom.group"), "1");
  EXPECT_EQ(ev.container.cgroups_path, c.linux().cgroups_path());
  EXPECT_EQ(ev.container.oom_score_adj, 999);
  // protoc keeps the unknown field: a re-encode carries it.
  pb::Container parsed;
  ASSERT_TRUE(parsed.ParseFromString(e));
  EXPECT_NE(parsed.SerializeAsString().find(std::string("\x98\x06\x07", 3)), std::string::npos);
}

TEST(Codec, GarbageAndTruncationAreErrors) {
  pb::PodSandbox pod = testing::realisticPod(1);
  pb::RunPodSandboxRequest r;
  *r.mutable_pod() = pod;
  auto s = r.SerializeAsString();
  for (std::size_t cut : {std::size_t{1}, s.size() / 2, s.size() - 1}) {
    auto b = std::as_bytes(std::span(s.data(), cut));
    EXPECT_FALSE(decodePodEvent(b).has_value()) << cut;
  }
  EXPECT_ERR(decodeSynchronizeRequest(hex("0a ff ff ff ff 0f")), EPROTO, "SynchronizeRequest");
  EXPECT_ERR(decodeConfigureRequest(hex("12")), EPROTO, "ConfigureRequest");
}

TEST(Codec, RealisticSyncSizeMatchesTheBrief) {
  std::vector<pb::PodSandbox> pods;
  std::vector<pb::Container> ctrs;
  testing::realisticNode(100, 10, pods, ctrs);
  pb::SynchronizeRequest req;
  for (auto& p : pods) *req.add_pods() = p;
  for (auto& c : ctrs) *req.add_containers() = c;
  auto s = req.SerializeAsString();
  // ~3.3 MB per realistic-nri-objects.md; allow a wide band.
  EXPECT_GT(s.size(), 2'800'000U);
  EXPECT_LT(s.size(), 3'900'000U);
  auto sync = ASSERT_OK(decodeSynchronizeRequest(std::as_bytes(std::span(s.data(), s.size()))));
  EXPECT_EQ(sync.pods.size(), 100U);
  EXPECT_EQ(sync.containers.size(), 1000U);
}

}  // namespace
}  // namespace colod::nri::codec
