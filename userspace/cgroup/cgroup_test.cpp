// SPDX-License-Identifier: Apache-2.0
// Fake cgroup trees in a mkdtemp dir (style rule 37), root injected (rule 19).
#include "colod/cgroup/cgroup.h"

#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include <gtest/gtest.h>

#include "colod/cgroup/parse.h"
#include "colod/testing/result_matchers.h"

namespace colod::cgroup {
namespace {

namespace fs = std::filesystem;

class FakeTree : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string tmpl = (fs::temp_directory_path() / "colod-cgroup-test-XXXXXX").string();
    ASSERT_NE(::mkdtemp(tmpl.data()), nullptr);
    root_ = tmpl;
  }
  void TearDown() override {
    std::error_code ec;
    fs::remove_all(root_, ec);
  }
  void file(const std::string& rel, const std::string& text) {
    fs::create_directories(fs::path(root_ + rel).parent_path());
    std::ofstream(root_ + rel) << text;
  }
  void dir(const std::string& rel) { fs::create_directories(root_ + rel); }
  std::string root_;
};

TEST_F(FakeTree, ProbeHybrid) {
  file("/unified/cgroup.controllers", "");
  dir("/cpu");
  dir("/cpuacct");
  dir("/memory");
  dir("/cpuset");
  const auto h = ASSERT_OK(probe(root_));
  EXPECT_EQ(h.layout, Layout::Hybrid);
  EXPECT_EQ(h.unified, root_ + "/unified");
  EXPECT_EQ(h.cpu, root_ + "/cpu");
  EXPECT_EQ(h.memory, root_ + "/memory");
}

TEST_F(FakeTree, ProbeCombinedV1Controllers) {
  dir("/cpu,cpuacct");
  dir("/memory");
  const auto h = ASSERT_OK(probe(root_));
  EXPECT_EQ(h.layout, Layout::V1);
  EXPECT_EQ(h.cpu, root_ + "/cpu,cpuacct");
  EXPECT_EQ(h.cpuacct, root_ + "/cpu,cpuacct");
  EXPECT_TRUE(h.unified.empty());
}

TEST_F(FakeTree, ProbeV2) {
  file("/cgroup.controllers", "cpuset cpu io memory pids\n");
  const auto h = ASSERT_OK(probe(root_));
  EXPECT_EQ(h.layout, Layout::V2);
  EXPECT_EQ(h.unified, root_);
}

TEST_F(FakeTree, ProbeNothing) {
  EXPECT_ERR(probe(root_), ENOENT, "no cgroup hierarchy");
}

TEST_F(FakeTree, ListAndIdsMatchInodes) {
  file("/kubepods/pod1/cpu.stat", "nr_periods 1\nnr_throttled 0\nthrottled_time 0\n");
  dir("/kubepods/pod2");
  file("/kubepods/notadir", "x");
  const auto all = ASSERT_OK(listCgroups(root_, 100));
  ASSERT_EQ(all.size(), 4u);
  EXPECT_EQ(all[0].rel, "/");
  for (const auto& e : all) {
    EXPECT_EQ(e.id, ASSERT_OK(cgroupId(joinRel(root_, e.rel)))) << e.rel;
  }
  const uint64_t pod2 = ASSERT_OK(cgroupId(root_ + "/kubepods/pod2"));
  EXPECT_EQ(ASSERT_OK(findById(root_, pod2, 100)), "/kubepods/pod2");
  EXPECT_ERR(findById(root_, 1, 100), ENOENT, "no cgroup with id");
  EXPECT_ERR(listCgroups(root_, 2), E2BIG, "more than 2");
}

TEST_F(FakeTree, DirRelativeReads) {
  file("/a/cpu.stat", "nr_periods 5\nnr_throttled 1\nthrottled_time 99\n");
  const auto a = ASSERT_OK(CgroupDir::open(root_ + "/a"));
  const std::string text = ASSERT_OK(a.read("cpu.stat"));
  const auto st = ASSERT_OK(parseCpuStat(text));
  EXPECT_EQ(st.throttled_ns, 99u);
  EXPECT_ERR(a.read("cpu.pressure"), ENOENT, "cpu.pressure");
  ASSERT_OK(a.write("cpu.stat", "x"));
  EXPECT_EQ(ASSERT_OK(a.read("cpu.stat")), "x");
  EXPECT_ERR(CgroupDir::open(root_ + "/missing"), ENOENT, "missing");
}

TEST_F(FakeTree, RecreatedCgroupIsNotConfused) {
  file("/a/cpu.stat", "nr_periods 5\n");
  const auto old = ASSERT_OK(CgroupDir::open(root_ + "/a"));
  fs::remove_all(root_ + "/a");
  file("/a/cpu.stat", "nr_periods 7\n");
  // The old handle still refers to the removed directory: its files are gone.
  EXPECT_ERR(old.read("cpu.stat"), ENOENT, "cpu.stat");
  const auto fresh = ASSERT_OK(CgroupDir::open(root_ + "/a"));
  EXPECT_EQ(ASSERT_OK(fresh.read("cpu.stat")), "nr_periods 7\n");
}

TEST(RealCgroupfs, InodeAgreesWithFileHandle) {
  // Reads (never writes) the host's cgroupfs, whose ids the BPF programs use.
  for (const char* p : {"/sys/fs/cgroup/unified", "/sys/fs/cgroup/cpu", "/sys/fs/cgroup"}) {
    struct stat st {};
    if (::stat((std::string(p) + "/cgroup.procs").c_str(), &st) != 0) {
      continue;
    }
    EXPECT_EQ(ASSERT_OK(cgroupId(p)), ASSERT_OK(cgroupIdFromHandle(p))) << p;
    return;
  }
  GTEST_SKIP() << "no cgroupfs mounted at /sys/fs/cgroup{,/unified,/cpu}";
}

}  // namespace
}  // namespace colod::cgroup
