// SPDX-License-Identifier: Apache-2.0
// The fault suite, colod's own faults: killed at ten points of an escalation (e), stopped with
// the runtime away (f), a second colod on its journal (g), reloads (h), churn (i), a corrupt
// journal (k), killed between the journal's write-ahead copy and the journal (l). The fixture and
// what every scenario asserts: fault_fixture.h, fault_runtime_test.cpp.
#include "fault_fixture.h"

namespace colod::faults::suite {

using namespace std::chrono_literals;

// e. colod is SIGKILLed at k x 100 ms after the restriction starts (k = 0..9, in two tests of five
// points), in the middle of its escalation. At each point the journal already knows every field
// the cgroup has changed (write-ahead), and the next colod returns the BE to the kubelet's
// values (reconcile: restore) with an empty journal.
void FaultTest::killSweep(int first, int last) {
  startPeer();
  startColod(faultConfig());
  addPod("web", "prod", "ls");
  addPod("batch", "jobs", "be");
  define({.name = "hog",
          .pod = "batch",
          .command = hogLoop("stop-be", 2),
          .cpu_request_milli = 4000,
          .cpus = kSharedCpu});
  peer_->mustControl({{"op", "run_pod"}, {"pod", "web"}});
  peer_->mustControl({{"op", "run_pod"}, {"pod", "batch"}});
  start("hog");
  for (int k = first; k <= last; ++k) {
    SCOPED_TRACE("kill point k=" + std::to_string(k) + " (" + std::to_string(k * 100) +
                 " ms after the restriction started)");
    // A fresh LS container each round: the previous one left while colod was dead.
    const std::string ls = "server-" + std::to_string(k);
    define({.name = ls,
            .pod = "web",
            .command = probeLoop("stop-" + ls),
            .cpu_request_milli = 1000,
            .cpus = kSharedCpu});
    start(ls);
    ASSERT_TRUE(waitFor([&] { return restricted("hog"); }, kEngageTimeout, 10ms)) << diagnostics();
    const auto t0 = std::chrono::steady_clock::now();
    std::this_thread::sleep_until(t0 + std::chrono::milliseconds(100 * k));
    colod_->kill(SIGKILL);
    note("colod SIGKILLed at k=" + std::to_string(k) + ": hog " + cgroupOf("hog"));
    expectJournalCovers("hog");
    remove(ls);
    // The fault ends when colod is started again (its start-up is part of the convergence).
    const int64_t restarted = colod::faults::realtimeNs();
    ASSERT_TRUE(colod_->start()) << "colod did not restart:\n" << diagnostics();
    expectReleased({"hog"}, restarted);
    ASSERT_FALSE(HasFailure());
  }
}

}  // namespace colod::faults::suite

namespace {

using namespace colod::faults::suite;  // NOLINT(google-build-using-namespace): the suite
using namespace std::chrono_literals;

TEST_F(FaultTest, SigkillSweepK0to4) { killSweep(0, 4); }
TEST_F(FaultTest, SigkillSweepK5to9) { killSweep(5, 9); }

// f. SIGTERM while the runtime is away for longer than colod's stop wait: colod exits (cleanly,
// bounded) keeping in its journal what the runtime did not confirm; the next colod restores it
// once the runtime is back.
TEST_F(FaultTest, SigtermWithRuntimeAway) {
  startPeer();
  startColod(faultConfig());
  startWorkloads();
  waitRestricted("hog");
  waitConsistent("hog");
  const int64_t armed = colod::faults::realtimeNs();
  peer_->mustControl({{"op", "outage"}, {"ms", 12000}});
  note("runtime away for 12000 ms; SIGTERM");
  EXPECT_EQ(colod_->kill(SIGTERM, 20s), 0) << "colod did not stop cleanly within 20 s";
  note("colod exited: hog " + cgroupOf("hog") + ", journal:\n" + slurp(colod_->journalPath()));
  // Whatever the runtime did not confirm is still in the journal.
  expectJournalCovers("hog");
  const bool still_away = countEventsAfter(armed, [](const json& e) {
                            return e.value("event", "") == "outage-end";
                          }) == 0;
  if (still_away) {
    const auto entry = colod::faults::journalEntry(colod_->journalPath(), tracked("hog").id);
    EXPECT_TRUE(entry && entry->is_object())
        << "colod stopped while the runtime was away and its journal forgot the restricted BE:\n"
        << slurp(colod_->journalPath());
  }
  remove("server");  // while colod is down: the next colod must not restrict again
  const json back = waitEventAfter(
      armed, [](const json& e) { return e.value("event", "") == "outage-end"; }, 20s);
  ASSERT_FALSE(back.is_null()) << "the peer never logged outage-end";
  ASSERT_TRUE(colod_->start()) << diagnostics();
  expectReleased({"hog"}, tsOf(back));
}

// g. A second colod on the same journal (own control socket and metrics port) exits 3 naming
// the first one's pid, and changes nothing: the first keeps its restriction and its journal.
TEST_F(FaultTest, SecondColodOnSameJournal) {
  startPeer();
  startColod(heldFaultConfig());  // the restriction is checked again after the second one ran
  startWorkloads();
  waitRestricted("hog");
  waitConsistent("hog");
  const size_t connects_before =
      peer_->countEvents([](const json& e) { return e.value("event", "") == "plugin-connected"; });
  const std::string second_dir = dir_ + "/second";
  fs::create_directories(second_dir);
  std::string yaml = heldFaultConfig();
  const std::string first_sock = dir_ + "/colod.sock";
  yaml.replace(yaml.find(first_sock), first_sock.size(), second_dir + "/colod.sock");
  ColodProcess second(second_dir, yaml);
  const int code = second.runToExit(30s);
  const std::string out = slurp(second.logPath());
  note("second colod exited " + std::to_string(code));
  EXPECT_EQ(code, 3) << out;
  EXPECT_NE(out.find("in use by colod pid " + std::to_string(colod_->pid())), std::string::npos)
      << out;
  EXPECT_TRUE(fs::exists(colod_->journalPath() + ".lock"));
  // Untouched: the first runs, holds its restriction, and its journal still says so.
  EXPECT_FALSE(colod_->exited());
  EXPECT_EQ(
      peer_->countEvents([](const json& e) { return e.value("event", "") == "plugin-connected"; }),
      connects_before)
      << "the second colod connected to the runtime";
  EXPECT_GE(journalOverlays(colod_->journalPath()), 1) << slurp(colod_->journalPath());
  EXPECT_TRUE(restricted("hog"));
  std::string why;
  EXPECT_TRUE(waitFor([&] { return converged("hog", &why); }, 5s, 50ms)) << why;

  remove("server");
  expectReleased({"hog"}, colod::faults::realtimeNs());
}

// k. A corrupt journal: colod keeps it for the operator (never deleted or overwritten), starts,
// and names every container whose cgroup differs from the runtime's spec -- a restriction made
// outside the runtime's knowledge, which colod can no longer prove it made. The hog's cgroup is
// written behind the runtime's back while colod is dead, as a restriction lost with a journal
// would look.
TEST_F(FaultTest, CorruptJournalIsKeptAndSuspectsAreNamed) {
  startWithHogHeld();
  colod_->kill(SIGKILL);
  {
    std::ofstream(colod_->journalPath(), std::ios::trunc)
        << "{\"version\": 2, \"containers\": [tor";
  }
  const auto st = colod::faults::queryState(*peer_, "hog");
  ASSERT_TRUE(st.ok) << st.error;
  const std::string rel =
      peer_->mustControl({{"op", "state"}, {"container", "hog"}}).value("cgroup_rel", "");
  ASSERT_FALSE(rel.empty());
  const bool v2 = colod::nri::interop::isCgroupV2Host();
  const std::string file =
      v2 ? "/sys/fs/cgroup/" + rel + "/cpu.max" : "/sys/fs/cgroup/cpu/" + rel + "/cpu.cfs_quota_us";
  std::ofstream(file) << (v2 ? "12345 100000" : "12345");
  ASSERT_TRUE(colod_->start()) << diagnostics();
  const std::string name = "jobs/batch/hog";
  EXPECT_TRUE(waitFor(
      [&] {
        const std::string log = slurp(colod_->logPath());
        return log.find("may still carry a restriction colod can no longer prove it made") !=
                   std::string::npos &&
               log.find(name) != std::string::npos;
      },
      20s, 100ms))
      << slurp(colod_->logPath());
  bool kept = false;
  for (const auto& e : fs::directory_iterator(fs::path(colod_->journalPath()).parent_path())) {
    if (e.path().filename().string().find("journal.json.corrupt-") == 0) {
      kept = slurp(e.path().string()).find("[tor") != std::string::npos;
    }
  }
  EXPECT_TRUE(kept) << "the corrupt journal was not kept for the operator";
  EXPECT_FALSE(colod_->exited()) << "colod must run on a corrupt journal";
  // Put the hog back to its runtime spec (the test's own write is not colod's to undo).
  const int64_t q = st.spec.cpu_quota.value_or(-1);
  std::ofstream(file) << (v2 ? (q < 0 ? std::string("max") : std::to_string(q)) + " 100000"
                             : std::to_string(q));
  remove("server");
}

// l. colod SIGKILLed between its two journal writes: the write-ahead copy (<journal>.next, the
// reaction path's write) holds the restriction, the journal not yet (journal_ahead.h). The next
// colod loads the copy and returns the BE to the kubelet's values. That instant is made by hand
// while colod is dead: the journal's content moved into a live copy, the journal emptied and
// dated before it. Loaded from the journal alone, the hog would keep colod's restriction.
TEST_F(FaultTest, KilledBetweenTheWriteAheadCopyAndTheJournal) {
  startWithHogHeld();
  ASSERT_FALSE(HasFatalFailure());
  colod_->kill(SIGKILL);
  const std::string journal = colod_->journalPath();
  // What a restart would load: the journal, or a copy still live if colod died between them.
  const std::string text = colod::e2e::loadedJournalText(journal);
  ASSERT_GE(journalOverlays(journal), 1) << text;
  std::ofstream(journal, std::ios::trunc) << "{\"version\": 2, \"containers\": []}\n";
  std::ofstream(journal + ".next", std::ios::trunc) << 'W' << text;
  fs::last_write_time(journal, fs::last_write_time(journal + ".next") - 5s);
  note("journal emptied, its content in a live write-ahead copy: hog " + cgroupOf("hog"));
  ASSERT_FALSE(atBase("hog")) << "the hog must still carry colod's restriction";
  remove("server");  // the LS leaves while colod is dead: nothing to protect at the restart
  const int64_t restarted = colod::faults::realtimeNs();
  ASSERT_TRUE(colod_->start()) << "colod did not restart:\n" << diagnostics();
  expectReleased({"hog"}, restarted);
  EXPECT_NE(slurp(colod_->logPath()).find("loaded from its write-ahead copy"), std::string::npos)
      << slurp(colod_->logPath());
  expectJournalEmpty();
  EXPECT_EQ(slurp(journal + ".next"), "") << "the copy is settled once the journal holds it";
}

// h. `--mode observe-only` on the command line survives reloads (a file change, then SIGHUP):
// colod keeps deciding (the victim hurts) and never sends an UpdateContainers.
TEST_F(FaultTest, ReloadKeepsObserveOnly) {
  startPeer();
  startColod(faultConfig(), {"--mode", "observe-only"});
  startWorkloads();
  auto reloads = [&] { return metricValue(colod_->scrape(), "colod_config_reloads_total"); };
  // colod reloads only a changed file (an unchanged one is not counted), so each reload writes
  // new content: the first is picked up from the file, the second is signalled (SIGHUP; the
  // file watch may win the race, either way it is one reload).
  colod_->writeConfig(faultConfig("  decisions_kept: 64\n"));
  ASSERT_TRUE(waitFor([&] { return reloads() >= 1; }, 20s)) << diagnostics();
  colod_->writeConfig(faultConfig("  decisions_kept: 128\n"));
  ::kill(colod_->pid(), SIGHUP);
  ASSERT_TRUE(waitFor([&] { return reloads() >= 2; }, 20s)) << diagnostics();
  note("reloaded twice (file change, SIGHUP)");
  auto st = colod_->client().status();
  ASSERT_TRUE(st.has_value());
  EXPECT_EQ(st->mode(), "observe-only");
  // A decision made after both reloads: colod would act now if it were in act mode.
  uint64_t seq_before = 0;
  if (auto d = colod_->client().decisions(0)) {
    for (const auto& x : d->decisions()) {
      seq_before = std::max(seq_before, x.seq());
    }
  }
  EXPECT_TRUE(waitFor(
      [&] {
        auto d = colod_->client().decisions(0);
        return d && std::any_of(d->decisions().begin(), d->decisions().end(),
                                [&](const auto& x) { return x.seq() > seq_before; });
      },
      30s))
      << "no decision after the reloads (the victim should hurt)\n"
      << diagnostics();
  EXPECT_EQ(peer_->countEvents([](const json& e) {
    return e.value("event", "") == "update-request" && fromColod(e);
  }),
            0U)
      << "colod sent UpdateContainers in observe-only mode";
  EXPECT_TRUE(atBase("hog")) << colod::faults::describe(state("hog").cgroup);
  const int leaked = atBase("hog") ? 0 : 1;
  rec_.leaked += leaked;
}

// i. BE containers come and go while a restriction is held (late ones join it, some are removed
// while restricted): when the LS leaves, every remaining BE returns to the kubelet's values and
// colod keeps nothing for the removed ones.
TEST_F(FaultTest, ChurnWhileRestricted) {
  startPeer();
  startColod(faultConfig());
  startWorkloads();
  waitRestricted("hog");
  const int64_t churn_from = colod::faults::realtimeNs();
  addPod("churn", "jobs", "be");
  peer_->mustControl({{"op", "run_pod"}, {"pod", "churn"}});
  auto seen = [&](const std::string& name, bool present) {
    return waitFor(
        [&] {
          auto l = colod_->client().listContainers();
          if (!l) {
            return false;
          }
          const bool found = std::any_of(l->containers().begin(), l->containers().end(),
                                         [&](const auto& c) { return c.name() == name; });
          return found == present;
        },
        10s);
  };
  // c0..c5: start two, remove one, ... (each step waits until colod has seen it).
  const std::vector<std::pair<std::string, bool>> steps = {
      {"c0", true},  {"c1", true},  {"c0", false}, {"c2", true}, {"c3", true},
      {"c1", false}, {"c2", false}, {"c4", true},  {"c5", true}, {"c4", false}};
  for (const auto& [name, add] : steps) {
    if (add) {
      define({.name = name,
              .pod = "churn",
              .command = hogLoop("stop-" + name, 1),
              .cpu_request_milli = 500,
              .cpus = kSharedCpu});
      start(name);
    } else {
      remove(name);
    }
    EXPECT_TRUE(seen(name, add)) << name << (add ? " never seen by colod" : " still listed");
  }
  // The churn must not make colod lose the restriction. The policy may still give it back for
  // its own reasons (a CI run: the quota at its floor "did not help" against the host's wait and
  // was undone), but only by a decision on the hog, and the cgroup then matches colod's account.
  if (!restricted("hog")) {
    bool released_by_decision = false;
    if (auto d = colod_->client().decisions(0)) {
      for (const auto& x : d->decisions()) {
        released_by_decision |= x.container_id() == tracked("hog").id &&
                                (x.kind().starts_with("undo/") || x.kind().starts_with("relax/")) &&
                                x.unix_ms() * 1'000'000 >= churn_from;
      }
    }
    EXPECT_TRUE(released_by_decision)
        << "the restriction was dropped by the churn without a decision\n"
        << diagnostics();
  }
  expectConverges("hog", colod::faults::realtimeNs(), 30s);
  remove("server");
  expectReleased({"hog", "c3", "c5"}, colod::faults::realtimeNs());
  // The releases may all be done before colod has seen the server go (nothing held on them).
  std::set<std::string> names;
  auto listed = [&] {
    names.clear();
    if (auto l = colod_->client().listContainers()) {
      for (const auto& c : l->containers()) {
        names.insert(c.name());
      }
    }
    return names == std::set<std::string>{"hog", "c3", "c5"};
  };

  EXPECT_TRUE(seen("server", false) && listed())
      << "colod lists " << ::testing::PrintToString(names);
  EXPECT_TRUE(waitFor([&] { return metricValue(colod_->scrape(), "colod_reconcile_pending") <= 0; },
                      kJournalTimeout, 50ms))
      << "colod_reconcile_pending stays "
      << metricValue(colod_->scrape(), "colod_reconcile_pending")
      << " with every container at its values and an empty journal";
}

}  // namespace
