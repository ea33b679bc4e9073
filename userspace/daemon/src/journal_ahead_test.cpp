// SPDX-License-Identifier: Apache-2.0
#include "colod/daemon/journal_ahead.h"

#include <gtest/gtest.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "colod/testing/result_matchers.h"

namespace colod::daemon {
namespace {

namespace fs = std::filesystem;

Journal journalOf(std::initializer_list<const char*> ids) {
  Journal j;
  for (const char* id : ids) {
    JournalContainer c;
    c.state.id = id;
    c.state.name = std::string("jobs/batch/") + id;
    c.state.base.cpuset_cpus = "0-1";
    c.state.overlay.cpuset_cpus = "1";
    c.state.why = "rung 2 for prod/web/probe";
    j.containers.push_back(std::move(c));
  }
  return j;
}

std::string slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

class JournalAheadTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/colod-ahead-XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
    path_ = dir_ + "/state/journal.json";
  }
  void TearDown() override { fs::remove_all(dir_); }
  std::string dir_;
  std::string path_;
};

TEST(JournalAheadCodec, SettledEmptyLiveAndTorn) {
  const Journal j = journalOf({"a", "b"});
  const std::string text = encodeJournal(j);
  EXPECT_EQ(ASSERT_OK(decodeJournalAhead("")), std::nullopt);
  EXPECT_EQ(ASSERT_OK(decodeJournalAhead(" " + text)), std::nullopt);  // settled
  EXPECT_EQ(ASSERT_OK(decodeJournalAhead("W" + text)), j);
  // A shorter journal written over a longer one is padded with spaces.
  EXPECT_EQ(ASSERT_OK(decodeJournalAhead("W" + text + std::string(300, ' '))), j);
  // Torn: a kill in the middle of the write left the head of the text only.
  EXPECT_ERR(decodeJournalAhead("W" + text.substr(0, text.size() / 2)), EINVAL,
             "write-ahead copy \\(live, torn\\)");
  EXPECT_ERR(decodeJournalAhead("Wgarbage"), EINVAL, "write-ahead copy");
}

TEST_F(JournalAheadTest, AWrittenCopyIsWhatARestartLoadsUntilSettled) {
  EXPECT_EQ(ASSERT_OK(readJournalAhead(path_)), std::nullopt);  // no copy at all
  JournalAhead ahead = ASSERT_OK(JournalAhead::open(path_));
  EXPECT_EQ(ahead.path(), path_ + ".next");
  EXPECT_FALSE(ahead.live());
  EXPECT_EQ(ASSERT_OK(readJournalAhead(path_)), std::nullopt);  // created empty: settled

  const Journal j = journalOf({"a", "b"});
  ASSERT_OK(ahead.write(j, 16));
  EXPECT_TRUE(ahead.live());
  EXPECT_EQ(ASSERT_OK(readJournalAhead(path_)), j);  // no journal yet: the copy is newer

  ASSERT_OK(writeJournal(path_, j, 16));
  ASSERT_OK(ahead.settle());
  EXPECT_FALSE(ahead.live());
  EXPECT_EQ(slurp(ahead.path()), "");
  EXPECT_EQ(ASSERT_OK(readJournalAhead(path_)), std::nullopt);
}

TEST_F(JournalAheadTest, AShorterJournalOverALongerOneReadsWhole) {
  JournalAhead ahead = ASSERT_OK(JournalAhead::open(path_));
  const Journal big = journalOf({"a", "b", "c", "d"});
  const Journal small = journalOf({"e"});
  ASSERT_OK(ahead.write(big, 16));
  const auto big_size = fs::file_size(ahead.path());
  ASSERT_OK(ahead.write(small, 16));  // not settled in between: padded, in place
  EXPECT_EQ(fs::file_size(ahead.path()), big_size);
  EXPECT_EQ(ASSERT_OK(readJournalAhead(path_)), small);
}

TEST_F(JournalAheadTest, PastTheBoundNothingIsWritten) {
  JournalAhead ahead = ASSERT_OK(JournalAhead::open(path_));
  const Journal one = journalOf({"a"});
  ASSERT_OK(ahead.write(one, 16));
  EXPECT_ERR(ahead.write(journalOf({"a", "b"}), 1), E2BIG, "bound is 1");
  EXPECT_EQ(ASSERT_OK(readJournalAhead(path_)), one);
}

// A copy left live by a colod that died, after which a colod that does not know of copies
// rewrote the journal: the copy is older than the journal and must not be loaded.
TEST_F(JournalAheadTest, ACopyOlderThanTheJournalIsIgnored) {
  {
    JournalAhead ahead = ASSERT_OK(JournalAhead::open(path_));
    ASSERT_OK(ahead.write(journalOf({"stale"}), 16));
  }
  ASSERT_OK(writeJournal(path_, journalOf({"fresh"}), 16));
  const auto now = fs::last_write_time(path_);
  fs::last_write_time(path_ + ".next", now - std::chrono::seconds(10));
  EXPECT_EQ(ASSERT_OK(readJournalAhead(path_)), std::nullopt);
  // The same coarse timestamp counts as newer: the copy precedes the journal it is ahead of.
  fs::last_write_time(path_ + ".next", now);
  EXPECT_EQ(ASSERT_OK(readJournalAhead(path_)), journalOf({"stale"}));
  // A reopened copy knows it is live (a restart before the journal was brought up to it).
  JournalAhead again = ASSERT_OK(JournalAhead::open(path_));
  EXPECT_TRUE(again.live());
}

// colod killed after the write-ahead and before the journal's replace: the copy in the page
// cache outlives the process, and a restart loads it, newer than the journal.
TEST_F(JournalAheadTest, ACopyWrittenByAKilledProcessIsLoaded) {
  ASSERT_OK(writeJournal(path_, journalOf({"before"}), 16));
  const Journal next = journalOf({"before", "sent"});
  const pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    auto ahead = JournalAhead::open(path_);
    if (!ahead || !ahead->write(next, 16)) {
      ::_exit(1);
    }
    ::kill(::getpid(), SIGKILL);  // before the journal takes it
    ::_exit(2);
  }
  int status = 0;
  ASSERT_EQ(::waitpid(child, &status, 0), child);
  ASSERT_TRUE(WIFSIGNALED(status)) << "child exit " << WEXITSTATUS(status);
  EXPECT_EQ(ASSERT_OK(readJournalAhead(path_)), next);
  EXPECT_EQ(ASSERT_OK(readJournal(path_)), journalOf({"before"}));
}

TEST_F(JournalAheadTest, ATornCopyIsAnErrorNotAJournal) {
  fs::create_directories(dir_ + "/state");
  const std::string text = encodeJournal(journalOf({"a"}));
  std::ofstream(path_ + ".next") << "W" << text.substr(0, 20);
  EXPECT_ERR(readJournalAhead(path_), EINVAL, "journal.json.next.*torn");
}

}  // namespace
}  // namespace colod::daemon
