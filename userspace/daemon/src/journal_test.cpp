// SPDX-License-Identifier: Apache-2.0
#include "colod/daemon/journal.h"

#include <gtest/gtest.h>
#include <stdlib.h>
#include <sys/stat.h>

#include <filesystem>
#include <fstream>

#include "colod/testing/result_matchers.h"

namespace colod::daemon {
namespace {

JournalEntry entry(const std::string& target, policy::Lever lever) {
  JournalEntry e;
  e.action.target_id = target;
  e.action.victim_id = "victim-1";
  e.action.lever = lever;
  e.action.rung = 1;
  e.target_name = "jobs/batch/" + target;
  if (lever == policy::Lever::CpuShares) {
    e.action.applied_values.cpu_shares = 2;
    e.action.original_values.cpu_shares = 1024;
  } else if (lever == policy::Lever::CpuQuota) {
    e.action.applied_values.cpu_quota = 50000;
    e.action.applied_values.cpu_period = 100000;
    e.action.original_values.cpu_quota = -1;
    e.action.original_values.cpu_period = 100000;
  } else {
    e.action.applied_values.cpuset_cpus = "1";
    e.action.original_values.cpuset_cpus = "";
    e.action.original_values.unified = {{"cpu.idle", "0"}};
  }
  return e;
}

class JournalTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/colod-journal-XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  std::string dir_;
};

TEST(JournalCodec, RoundTrips) {
  Journal j;
  j.entries = {entry("a", policy::Lever::CpuShares), entry("a", policy::Lever::CpuQuota),
               entry("b", policy::Lever::Cpuset)};
  j.entries[2].restore_pending = true;
  auto back = ASSERT_OK(decodeJournal(encodeJournal(j)));
  EXPECT_EQ(back, j);
  EXPECT_EQ(ASSERT_OK(decodeJournal(encodeJournal(Journal{}))).entries.size(), 0U);
}

TEST(JournalCodec, RejectsBadInput) {
  EXPECT_ERR(decodeJournal("{"), EINVAL, "journal");
  EXPECT_ERR(decodeJournal(R"({"version":2,"entries":[]})"), EINVAL, "unsupported version");
  EXPECT_ERR(decodeJournal(R"({"version":1,"entries":[{"target_id":"a","lever":"nope",)"
                           R"("applied":{},"original":{}}]})"),
             EINVAL, "unknown lever 'nope'");
  EXPECT_ERR(decodeJournal(R"({"version":1,"entries":[{"lever":"cpuset"}]})"), EINVAL, "journal");
  EXPECT_ERR(decodeJournal(R"({"version":1,"entries":[{"target_id":"a","lever":"cpuset",)"
                           R"("applied":{"cpu_shares":"x"},"original":{}}]})"),
             EINVAL, "journal: applied: cpu_shares: expected an unsigned integer");
  EXPECT_ERR(decodeJournal(R"({"version":1,"entries":[{"target_id":"a","lever":"cpuset",)"
                           R"("applied":{},"original":{"cpuset_cpus":3}}]})"),
             EINVAL, "journal: original: cpuset_cpus");
  EXPECT_ERR(decodeJournal(R"({"version":1,"entries":[{"target_id":"a","lever":"cpuset",)"
                           R"("applied":[],"original":{}}]})"),
             EINVAL, "journal: applied: resources: expected an object");
}

TEST_F(JournalTest, AtomicWriteAndRead) {
  const std::string path = dir_ + "/state/journal.json";
  EXPECT_EQ(ASSERT_OK(readJournal(path)).entries.size(), 0U);  // missing = empty
  Journal j;
  j.entries = {entry("a", policy::Lever::CpuShares)};
  ASSERT_OK(writeJournal(path, j, 16));
  EXPECT_EQ(ASSERT_OK(readJournal(path)), j);
  EXPECT_FALSE(std::filesystem::exists(path + ".tmp"));
  struct stat st {};
  ASSERT_EQ(::stat(path.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600U);
  // Bounded.
  j.entries.push_back(entry("b", policy::Lever::Cpuset));
  EXPECT_ERR(writeJournal(path, j, 1), E2BIG, "bound is 1");
  EXPECT_EQ(ASSERT_OK(readJournal(path)).entries.size(), 1U);  // old content intact
  // Corrupt content is an error, not an empty journal.
  std::ofstream(path) << "garbage";
  EXPECT_ERR(readJournal(path), EINVAL, "journal .*journal.json");
}

TEST(Reconcile, PlansRestoreReseedDrop) {
  Journal j;
  j.entries = {entry("a", policy::Lever::CpuShares), entry("gone", policy::Lever::CpuQuota),
               entry("b", policy::Lever::Cpuset)};
  j.entries[2].restore_pending = true;
  const std::set<std::string> present = {"a", "b"};
  auto restore = planReconcile(j, present, Reconcile::Restore);
  EXPECT_EQ(restore.restore.size(), 2U);
  EXPECT_EQ(restore.reseed.size(), 0U);
  ASSERT_EQ(restore.dropped.size(), 1U);
  EXPECT_EQ(restore.dropped[0].action.target_id, "gone");
  auto reseed = planReconcile(j, present, Reconcile::Reseed);
  ASSERT_EQ(reseed.reseed.size(), 1U);
  EXPECT_EQ(reseed.reseed[0].action.target_id, "a");
  ASSERT_EQ(reseed.restore.size(), 1U);  // a restore in flight is finished in any mode
  EXPECT_EQ(reseed.restore[0].action.target_id, "b");
}

TEST(Reconcile, OriginalValuesMergeAcrossLevers) {
  std::vector<JournalEntry> es = {entry("a", policy::Lever::CpuShares),
                                  entry("a", policy::Lever::CpuQuota),
                                  entry("b", policy::Lever::Cpuset)};
  auto a = originalValuesOf("a", es);
  EXPECT_EQ(a.cpu_shares, 1024U);
  EXPECT_EQ(a.cpu_quota, -1);
  EXPECT_EQ(a.cpu_period, 100000U);
  EXPECT_FALSE(a.cpuset_cpus.has_value());
  auto b = originalValuesOf("b", es);
  EXPECT_EQ(b.cpuset_cpus, "");
  EXPECT_EQ(b.unified.at("cpu.idle"), "0");
  EXPECT_EQ(originalValuesOf("zzz", es), policy::Resources{});
}

}  // namespace
}  // namespace colod::daemon
