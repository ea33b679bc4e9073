// SPDX-License-Identifier: Apache-2.0
#include "colod/daemon/journal.h"

#include <gtest/gtest.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>

#include "colod/testing/result_matchers.h"

namespace colod::daemon {
namespace {

JournalContainer container(const std::string& id) {
  JournalContainer c;
  c.state.id = id;
  c.state.name = "jobs/batch/" + id;
  c.state.base.cpu_quota = 150000;
  c.state.base.cpu_period = 100000;
  c.state.base.cpuset_cpus = "0-1";
  c.state.overlay.cpu_quota = 50000;
  c.state.overlay.cpu_period = 100000;
  c.state.overlay.cpuset_cpus = "1";
  c.state.why = "rung 3 for prod/web/probe";
  c.state.sent = {{"cpu_quota", {"60000", "50000"}}, {"cpuset_cpus", {"1"}}};
  c.actions.push_back({.target_id = id,
                       .victim_id = "victim-1",
                       .lever = policy::Lever::CpuQuota,
                       .rung = 2,
                       .applied_values = {},
                       .original_values = {}});
  c.actions.back().applied_values.cpu_quota = 50000;
  c.actions.back().applied_values.cpu_period = 100000;
  return c;
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
  j.containers = {container("a"), container("b")};
  j.containers[1].state.overlay = {};  // a release in flight
  j.containers[1].actions.clear();
  const std::string text = encodeJournal(j);
  EXPECT_EQ(text.rfind(R"({"version":2,)", 0), 0u) << text;
  // One line per container: the head, two containers, the tail.
  EXPECT_EQ(std::count(text.begin(), text.end(), '\n'), 4) << text;
  EXPECT_EQ(ASSERT_OK(decodeJournal(text)), j);
  EXPECT_EQ(ASSERT_OK(decodeJournal(encodeJournal(Journal{}))), Journal{});
}

// The encoder that keeps each container's text writes what encodeJournal writes, byte for byte,
// through changes, removals, additions and an empty journal, and encodes only the containers
// whose entry changed (an action's values included).
TEST(JournalEncoderTest, EncodesOnlyWhatChangedAndWritesWhatEncodeJournalWrites) {
  JournalEncoder enc;
  Journal j;
  j.containers = {container("a"), container("b"), container("c")};
  EXPECT_EQ(enc.encode(j), encodeJournal(j));
  EXPECT_EQ(enc.encodedLast(), 3u);

  EXPECT_EQ(enc.encode(j), encodeJournal(j));
  EXPECT_EQ(enc.encodedLast(), 0u) << "nothing changed";

  j.containers[1].state.overlay.cpu_quota = 25000;              // b: its overlay
  j.containers[2].actions[0].applied_values.cpu_quota = 25000;  // c: only its restriction
  j.containers.push_back(container("d"));
  j.containers.erase(j.containers.begin());  // a: released
  const std::string& text = enc.encode(j);
  EXPECT_EQ(text, encodeJournal(j));
  EXPECT_EQ(enc.encodedLast(), 3u) << "b, c and d";
  EXPECT_EQ(ASSERT_OK(decodeJournal(text)), j);

  EXPECT_EQ(enc.encode(Journal{}), encodeJournal(Journal{}));
  EXPECT_EQ(enc.encodedLast(), 0u);
  // What it kept went with the journal that no longer lists it (the memory is the last
  // journal's): the same containers again are encoded again.
  EXPECT_EQ(enc.encode(j), encodeJournal(j));
  EXPECT_EQ(enc.encodedLast(), 3u);

  // An id listed twice with two contents (the actuator's ids are unique; a caller's may not
  // be): each keeps its own line.
  j.containers.push_back(j.containers[0]);
  j.containers.back().state.why = "another";
  EXPECT_EQ(enc.encode(j), encodeJournal(j));
}

// The cap taken behind the host is never tightened: a reseed after a restart must know it, so
// the mark survives the journal; a journal written before it existed reads as a plain step.
TEST(JournalCodec, KeepsTheUncontrolledCapMark) {
  Journal j;
  j.containers = {container("a")};
  j.containers[0].actions[0].uncontrolled_cap = true;
  const std::string text = encodeJournal(j);
  EXPECT_NE(text.find(R"("uncontrolled_cap":true)"), std::string::npos) << text;
  const Journal back = ASSERT_OK(decodeJournal(text));
  ASSERT_EQ(back.containers.size(), 1u);
  ASSERT_EQ(back.containers[0].actions.size(), 1u);
  EXPECT_TRUE(back.containers[0].actions[0].uncontrolled_cap);

  j.containers[0].actions[0].uncontrolled_cap = false;
  const std::string plain = encodeJournal(j);
  EXPECT_EQ(plain.find("uncontrolled_cap"), std::string::npos) << plain;
  EXPECT_FALSE(ASSERT_OK(decodeJournal(plain)).containers[0].actions[0].uncontrolled_cap);
  EXPECT_ERR(decodeJournal(R"({"version": 2, "containers": [{"id": "a", "base": {},
      "overlay": {}, "actions": [{"lever": "cpu_quota", "applied": {},
      "uncontrolled_cap": "yes"}]}]})"),
             EINVAL, "journal");
}

TEST(JournalCodec, RejectsBadInput) {
  EXPECT_ERR(decodeJournal("not json"), EINVAL, "journal");
  EXPECT_ERR(decodeJournal("[]"), EINVAL, "not a JSON object");
  EXPECT_ERR(decodeJournal(R"({"version": 9, "containers": []})"), EINVAL, "unsupported version 9");
  EXPECT_ERR(decodeJournal(R"({"version": 2, "containers": [{"id": ""}]})"), EINVAL, "without id");
  EXPECT_ERR(decodeJournal(R"({"version": 2, "containers": [{"id": "a", "base": {},
      "overlay": {"cpu_quota": "x"}}]})"),
             EINVAL, "overlay");
  EXPECT_ERR(decodeJournal(R"({"version": 2, "containers": [{"id": "a", "base": {},
      "overlay": {}, "actions": [{"lever": "nope", "applied": {}}]}]})"),
             EINVAL, "unknown lever 'nope'");
  EXPECT_ERR(decodeJournal(R"({"version": 2, "containers": [{"id": "a"}]})"), EINVAL, "journal");
}

// A journal written by the previous version (one entry per restriction with a stored original)
// still brings every restriction back to a known value.
TEST(JournalCodec, ReadsVersionOne) {
  const char* v1 = R"({"version": 1, "entries": [
    {"target_id": "be", "target_name": "jobs/b/be", "victim_id": "v", "lever": "cpu_quota",
     "rung": 2, "applied": {"cpu_quota": 56250, "cpu_period": 100000},
     "original": {"cpu_period": 100000}, "restore_pending": false},
    {"target_id": "be", "target_name": "jobs/b/be", "victim_id": "v", "lever": "cpu_shares",
     "rung": 0, "applied": {"cpu_shares": 2}, "original": {"cpu_shares": 1024},
     "restore_pending": false},
    {"target_id": "gone", "lever": "cpuset", "applied": {"cpuset_cpus": "1"},
     "original": {}, "restore_pending": true}]})";
  const Journal j = ASSERT_OK(decodeJournal(v1));
  ASSERT_EQ(j.containers.size(), 2U);
  const auto& be = j.containers[0].state;
  EXPECT_EQ(be.id, "be");
  EXPECT_EQ(be.base.cpu_quota, -1) << "an unset original quota is unlimited";
  EXPECT_EQ(be.base.cpu_shares, 1024U);
  EXPECT_EQ(be.overlay.cpu_quota, 56250);
  EXPECT_EQ(be.overlay.cpu_shares, 2U);
  EXPECT_EQ(j.containers[0].actions.size(), 2U);
  const auto& gone = j.containers[1];
  EXPECT_EQ(gone.state.base.cpuset_cpus, "") << "all CPUs";
  EXPECT_FALSE(gone.state.overlay.cpuset_cpus) << "its restore was in flight";
  EXPECT_TRUE(gone.actions.empty());
}

TEST_F(JournalTest, AtomicWriteAndRead) {
  const std::string path = dir_ + "/state/journal.json";
  EXPECT_EQ(ASSERT_OK(readJournal(path)).containers.size(), 0U);  // missing = empty
  Journal j;
  j.containers = {container("a")};
  ASSERT_OK(writeJournal(path, j, 16));
  EXPECT_EQ(ASSERT_OK(readJournal(path)), j);
  EXPECT_FALSE(std::filesystem::exists(path + ".tmp"));
  struct stat st {};
  ASSERT_EQ(::stat(path.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600U);
  // Bounded.
  j.containers.push_back(container("b"));
  EXPECT_ERR(writeJournal(path, j, 1), E2BIG, "bound is 1");
  EXPECT_EQ(ASSERT_OK(readJournal(path)).containers.size(), 1U);  // old content intact
  // Corrupt content is an error, not an empty journal.
  std::ofstream(path) << "garbage";
  EXPECT_ERR(readJournal(path), EINVAL, "journal .*journal.json");
}

TEST_F(JournalTest, ASecondHolderIsRefusedWithTheFirstOnesPid) {
  const std::string path = dir_ + "/state/journal.json";
  auto first = ASSERT_OK(JournalLock::acquire(path));
  EXPECT_EQ(first.path(), path + ".lock");
  std::ifstream in(first.path());
  pid_t written = 0;
  in >> written;
  EXPECT_EQ(written, ::getpid());
  // flock conflicts between open file descriptions, even in one process.
  EXPECT_ERR(JournalLock::acquire(path), EBUSY,
             "in use by colod pid " + std::to_string(::getpid()));
}

TEST_F(JournalTest, TheLockGoesWithItsHolder) {
  const std::string path = dir_ + "/journal.json";
  { auto held = ASSERT_OK(JournalLock::acquire(path)); }
  auto again = ASSERT_OK(JournalLock::acquire(path));
  (void)again;
  // A holder that dies (however) releases it: a child takes it and exits.
  const std::string other = dir_ + "/other.json";
  const pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    auto r = JournalLock::acquire(other);
    ::_exit(r ? 0 : 1);
  }
  int status = 0;
  ASSERT_EQ(::waitpid(child, &status, 0), child);
  ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  auto after = ASSERT_OK(JournalLock::acquire(other));
  (void)after;
}

TEST(JournalLockPid, ParsesWhatTheHolderWrote) {
  EXPECT_EQ(parseLockPid("1234\n"), 1234);
  EXPECT_EQ(parseLockPid(""), 0);
  EXPECT_EQ(parseLockPid("x"), 0);
  EXPECT_EQ(parseLockPid("-5"), 0);
}

}  // namespace
}  // namespace colod::daemon

namespace colod::daemon {
namespace {

TEST(JournalOf, KeepsDesiredStateAndTheRestrictionsBehindIt) {
  ReconcileEntry e;
  e.id = "be";
  e.name = "jobs/b/be";
  e.base.cpu_quota = 150000;
  e.overlay.cpu_quota = 50000;
  e.spec.cpu_quota = 50000;  // runtime-side: not journaled
  e.pending = true;
  e.attempts = 3;
  e.sent = {{"cpu_quota", {"60000"}}};
  policy::AppliedAction mine{.target_id = "be",
                             .victim_id = "v",
                             .lever = policy::Lever::CpuQuota,
                             .rung = 2,
                             .applied_values = {},
                             .original_values = {}};
  policy::AppliedAction other = mine;
  other.target_id = "other";
  const Journal j = journalOf({e}, {mine, other});
  ASSERT_EQ(j.containers.size(), 1U);
  EXPECT_EQ(j.containers[0].state.overlay.cpu_quota, 50000);
  EXPECT_EQ(j.containers[0].state.base.cpu_quota, 150000);
  EXPECT_FALSE(j.containers[0].state.spec.cpu_quota);
  EXPECT_FALSE(j.containers[0].state.pending);
  EXPECT_EQ(j.containers[0].state.attempts, 0U);
  EXPECT_EQ(j.containers[0].state.sent.at("cpu_quota"), std::vector<std::string>{"60000"})
      << "colod's own past values are journaled, so a restart recognises them";
  ASSERT_EQ(j.containers[0].actions.size(), 1U);
  EXPECT_EQ(j.containers[0].actions[0].target_id, "be");
}

}  // namespace
}  // namespace colod::daemon
