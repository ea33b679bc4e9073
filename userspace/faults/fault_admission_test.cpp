// SPDX-License-Identifier: Apache-2.0
// Admission placement (issue #8) on real cgroups through the peer: a BE container created while
// a protected LS runs starts off the LS's CPUs -- its cgroup has the restricted cpuset from the
// creation on, carried by colod's CreateContainer reply, not by a later update -- and the
// placement is an overlay like any other: journaled before the reply, released to the runtime's
// own value when colod is killed and a new colod starts (reconcile: restore). A cpuset the
// kubelet already set is not set again at creation (two writers of one field at creation fail
// the container's creation with a second plugin): colod places it by an update instead.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <future>

#include "fault_fixture.h"

namespace colod::faults::suite {
namespace {

// Admission case 2 needs the cpuset rung; nothing relaxes during a test (quiet_intervals).
constexpr const char* kAdmissionPolicy =
    "  thresholds:\n"
    "    runq_p99_us: 500\n"
    "  detection:\n"
    "    window_intervals: 3\n"
    "    hit_intervals: 2\n"
    "  actions:\n"
    "    cpu_ladder: [cpuset, cpu_quota]\n"
    "    verify_intervals: 3\n"
    "    quiet_intervals: 600\n"
    "    admission: restrict\n";

// A big batch job (16 CPUs asked, cpu.shares 16384 against the LS's 1024): the CPU weights alone
// would leave the busy LS less than it uses even when a loaded CI machine lets it run only a
// third of a CPU, so colod places it. A BestEffort BE at cpu.shares 2 is held back by the
// weights and not placed (policy/src/admission.cpp).
constexpr int kBeRequestMilli = 16000;

class AdmissionFaultTest : public FaultTest {
 protected:
  std::string admissionConfig() const {
    return daemonConfig("  restore_on_stop: true\n  reconcile: restore\n", kAdmissionPolicy);
  }
  // A protected LS that runs (one busy worker: the LS demand admission reacts to), on `cpus`
  // ("": the node's). The worker spins alone on a quiet CPU, so BPF credits its CPU time in
  // lumps up to a second apart: colod reads a cgroup it has seen run such long slices from its
  // usage counter (userspace/collect/README.md), and before it did, read this LS at 0.09 CPUs
  // between two lumps and spared the batch job (session 35).
  void startBusyLs(const std::string& cpus = "") {
    addPod("web", "prod", "ls");
    define({.name = "server",
            .pod = "web",
            .command = hogLoop("stop-ls", 1),
            .cpu_request_milli = 1000,
            .cpu_limit_milli = 0,
            .cpus = cpus});
    peer_->mustControl({{"op", "run_pod"}, {"pod", "web"}});
    start("server");
  }
  void defineBe(const std::string& cpus) {
    addPod("batch", "jobs", "be");
    define({.name = "hog",
            .pod = "batch",
            .command = hogLoop("stop-be", 2),
            .cpu_request_milli = kBeRequestMilli,
            .cpu_limit_milli = 0,
            .cpus = cpus});
    peer_->mustControl({{"op", "run_pod"}, {"pod", "batch"}});
  }
  // colod saw the LS run: `coloctl list` reports it using a third of a CPU (a fixed sleep raced
  // colod's first samples of it on a loaded host: the coexist test's CI failure, session 17).
  void waitLsSeen() {
    ASSERT_TRUE(waitFor([&] { return metricValue(colod_->scrape(), "colod_nri_connected") == 1; },
                        20s, kPoll));
    std::string last;
    EXPECT_TRUE(waitListed(
        "server", [](const json& c) { return c.value("cpu_util", 0.0) >= 0.3; }, 1, &last))
        << "colod does not report the LS running; last `coloctl list`: " << last;
  }
  // Idle holds on real cgroups: the LS is never over a threshold (it runs, so the BE is placed,
  // but whatever a loaded host makes it wait is no hurt here): the placement is relaxed
  // quiet_intervals after it is made. By then the new BE has been idle over the blame window
  // (its start runs a little; a BE that ran lately is given back, not held). The quiet is
  // counted in timer ticks: in rounds, a loaded host's wakeup rounds made it 20 in 0.37 s,
  // before the new BE was first measured (one not yet measured is given back, not held).
  std::string idleHoldConfig(const std::string& reconcile) const {
    return daemonConfig("  restore_on_stop: true\n  reconcile: " + reconcile + "\n",
                        "  thresholds:\n"
                        "    runq_p99_us: 60000000\n"
                        "    baseline_factor: 1000\n"
                        "  detection:\n"
                        "    wait_load_min: 1000\n"
                        "    severe_wait_load: 1000\n"
                        "  actions:\n"
                        "    cpu_ladder: [cpuset, cpu_quota]\n"
                        "    quiet_intervals: 20\n"
                        "    blame_window_intervals: 5\n"
                        "    admission: restrict\n");
  }
  // The node of the idle-hold tests: colod with idleHoldConfig(reconcile), the busy LS it has
  // seen, and the BE's pod.
  void startIdleHoldNode(const std::string& reconcile) {
    startPeer();
    startColod(idleHoldConfig(reconcile));
    startBusyLs();
    waitLsSeen();
    addPod("batch", "jobs", "be");
  }
  // The held BE "hog" has started running: given back to the kubelet's values because it runs,
  // nothing left in the journal, and a clean stop leaves the kubelet's values.
  void expectGivenBackWhenItRuns() {
    EXPECT_TRUE(waitFor([&] { return atBase("hog"); }, kReleaseTimeout, kPoll))
        << "hog on " << cpusOf("hog") << "\n"
        << diagnostics();
    EXPECT_NE(slurp(colod_->logPath()).find("idle hold ended): it runs again"), std::string::npos)
        << diagnostics();
    expectJournalEmpty();
    touchStopFile("stop-be");
    EXPECT_EQ(colod_->kill(SIGTERM, 20s), 0);
    EXPECT_TRUE(atBase("hog")) << cpusOf("hog");
  }
  // The LS is quiet: the placement's rung is relaxed, and the idle BE is held where it is.
  void waitHeldWhileIdle(const std::string& name) {
    std::string why;
    EXPECT_TRUE(waitFor(
        [&] {
          why = explain(name);
          return why.find("held while idle") != std::string::npos;
        },
        kReleaseTimeout, kPoll))
        << why << "\n"
        << diagnostics();
  }
  std::string cpusOf(const std::string& name) {
    const ContainerState st = state(name);
    return st.ok && st.cgroup.cpus ? *st.cgroup.cpus : std::string("?");
  }
  static std::string nodeCpus() {
    std::string s = slurp("/sys/devices/system/cpu/online");
    s.erase(s.find_last_not_of(" \n") + 1);
    return s;
  }
  // Updates colod sent that changed `id` (the peer's log: source "update" = UpdateContainers),
  // or only those that set `field` (the peer's name, e.g. "CPUSetCPUs").
  size_t updatesFor(const std::string& id, const std::string& field = "") {
    return peer_->countEvents([&](const json& e) {
      if (e.value("event", "") != "container-updated" || e.value("id", "") != id ||
          e.value("source", "") != "update" || !fromColod(e)) {
        return false;
      }
      if (field.empty()) {
        return true;
      }
      const json fields = e.value("fields", json::array());
      return std::find(fields.begin(), fields.end(), field) != fields.end();
    });
  }
};

TEST_F(AdmissionFaultTest, BePlacedAtCreationThenReleasedAfterColodIsKilled) {
  startPeer();
  startColod(admissionConfig());
  startBusyLs();
  waitLsSeen();
  // A trace recorded across the creation replays to the same placement (`coloctl record`, then
  // `coloctl replay`): the admission is in it, in order with the rounds.
  const std::string trace = colod_->dir() + "/admission.trace";
  auto recording = std::async(std::launch::async,
                              [&] { return colod_->coloctl("record --seconds 3 " + trace); });
  std::this_thread::sleep_for(1s);  // the recording holds a few rounds before the creation
  defineBe("");
  start("hog");
  const std::string id = tracked("hog").id;
  const colod::e2e::CmdResult recorded = recording.get();
  ASSERT_EQ(recorded.exit_code, 0) << recorded.out;
  EXPECT_NE(slurp(trace).find(R"("type":"admit")"), std::string::npos) << slurp(trace);
  const colod::e2e::CmdResult replayed =
      colod_->coloctl("replay --config " + colod_->configPath() + " " + trace);
  EXPECT_EQ(replayed.exit_code, 0) << replayed.out;
  EXPECT_NE(replayed.out.find("rule=admission"), std::string::npos) << replayed.out;
  EXPECT_NE(replayed.out.find("target=" + id), std::string::npos) << replayed.out;
  const std::string all = nodeCpus();
  // From the creation on: the cgroup never had the node's CPUs.
  const std::string placed = cpusOf("hog");
  note("hog created with cpuset " + placed + " (node " + all + ")");
  EXPECT_NE(placed, all) << "not placed at creation\n" << diagnostics();
  EXPECT_NE(placed, "?");
  // Only the cpuset: in the 3 s of the recording a loaded machine can hold the LS over its
  // threshold, and colod may then try the quota rung on top of the placement (and undo it).
  EXPECT_EQ(updatesFor(id, "CPUSetCPUs"), 0U) << "placed by the creation reply, not by an update";
  // Journaled with the runtime's own value to return to.
  const auto entry = colod::faults::journalEntry(colod_->journalPath(), id);
  ASSERT_TRUE(entry && entry->is_object()) << slurp(colod_->journalPath());
  EXPECT_NE(entry->dump().find("cpuset"), std::string::npos) << entry->dump();
  EXPECT_NE(slurp(colod_->logPath()).find("placed at creation because"), std::string::npos);
  EXPECT_TRUE(waitFor([&] { return metricValue(colod_->scrape(), "colod_admissions_total") >= 1; },
                      5s, kPoll));

  // colod killed; the next colod (reconcile: restore) returns the BE to the runtime's value.
  EXPECT_EQ(colod_->kill(SIGKILL, 10s), 128 + SIGKILL);
  touchStopFile("stop-ls");
  remove("server");
  ASSERT_TRUE(colod_->start()) << diagnostics();
  EXPECT_TRUE(waitFor([&] { return cpusOf("hog") == all; }, kReleaseTimeout, kPoll))
      << "hog still on " << cpusOf("hog") << " after a restart\n"
      << diagnostics();
  expectJournalEmpty();
}

TEST_F(AdmissionFaultTest, KubeletCpusetIsNotSetAgainAtCreation) {
  startPeer();
  startColod(admissionConfig());
  startBusyLs();
  waitLsSeen();
  const std::string all = nodeCpus();
  defineBe(all);  // the kubelet's CPU manager gives the shared pool explicitly
  start("hog");   // the creation succeeds
  const std::string id = tracked("hog").id;
  // Placed by an update once the container exists.
  EXPECT_TRUE(waitFor([&] { return cpusOf("hog") != all && updatesFor(id) > 0; }, 10s, kPoll))
      << "hog on " << cpusOf("hog") << "\n"
      << diagnostics();
  EXPECT_NE(slurp(colod_->logPath()).find("left out of the creation reply"), std::string::npos);
  // The view coloctl reads is published each round: the new container is in it within a tick.
  std::string explained;
  EXPECT_TRUE(waitFor(
      [&] {
        explained = colod_->coloctl("explain hog").out;
        return explained.find("left out of the creation reply") != std::string::npos;
      },
      5s, 100ms))
      << explained;
  EXPECT_TRUE(
      waitFor([&] { return metricValue(colod_->scrape(), "colod_admission_deferred_total") >= 1; },
              5s, kPoll));
  std::string why;
  EXPECT_TRUE(waitFor([&] { return consistent("hog", &why); }, 5s, kPoll)) << why;
  // A clean stop releases it.
  EXPECT_EQ(colod_->kill(SIGTERM, 20s), 0);
  EXPECT_TRUE(waitFor([&] { return cpusOf("hog") == all; }, kReleaseTimeout, kPoll))
      << cpusOf("hog");
}

// The vm e2e's sequence, which once ended with the BE restricted and nothing in the journal: a
// placement by update (the kubelet set the cpuset), relaxed once the LS is quiet after it, the
// BE turning busy beside the LS (colod may restrict it again), then idle again. At every sample
// the cgroup is what the runtime's spec says and differs from the kubelet's values only where
// the journal overlays; at the end, and after a clean stop, it holds the kubelet's values.
TEST_F(AdmissionFaultTest, PlacementRelaxedBackToTheRuntimesValuesAndNothingLeftBehind) {
  startPeer();
  std::string yaml = admissionConfig();
  yaml.replace(yaml.find("quiet_intervals: 600"), 20, "quiet_intervals: 5");
  // The relax itself, not an idle hold (the BE waits idle for go-be here; the test below).
  yaml += "    idle_hold_intervals: 0\n";
  startColod(yaml);
  startBusyLs();
  waitLsSeen();
  const std::string all = nodeCpus();
  addPod("batch", "jobs", "be");
  define(
      {.name = "hog",
       .pod = "batch",
       .command = "while [ ! -e " + dir_ + "/go-be ]; do sleep 0.1; done; " + hogLoop("stop-be", 2),
       .cpu_request_milli = kBeRequestMilli,
       .cpu_limit_milli = 0,
       .cpus = all});
  peer_->mustControl({{"op", "run_pod"}, {"pod", "batch"}});
  start("hog");
  const std::string id = tracked("hog").id;
  // Placed by an update, then given back once the LS was quiet for quiet_intervals after it.
  EXPECT_TRUE(waitFor([&] { return updatesFor(id) > 0; }, 10s, kPoll)) << diagnostics();
  EXPECT_TRUE(waitFor([&] { return atBase("hog") && journalOverlays(colod_->journalPath()) == 0; },
                      kReleaseTimeout, kPoll))
      << "hog on " << cpusOf("hog") << "\n"
      << slurp(colod_->journalPath()) << diagnostics();
  EXPECT_NE(slurp(colod_->logPath()).find("kind=relax"), std::string::npos) << diagnostics();

  // Busy beside the LS: whatever colod does, nothing it does is unaccounted for.
  touchStopFile("go-be");
  std::string why;
  int inconsistent = 0;
  const auto until = std::chrono::steady_clock::now() + 6s;
  while (std::chrono::steady_clock::now() < until) {
    // A change is seen between the runtime's spec and the cgroup write: only a lasting
    // difference counts.
    if (!consistent("hog", &why) && !waitFor([&] { return consistent("hog", &why); }, 2s, kPoll)) {
      ++inconsistent;
      break;
    }
    std::this_thread::sleep_for(100ms);
  }
  EXPECT_EQ(inconsistent, 0) << why << "\n" << diagnostics();

  // Idle again: back to the kubelet's values, journal empty; a clean stop leaves them.
  touchStopFile("stop-be");
  EXPECT_TRUE(waitFor([&] { return atBase("hog"); }, kReleaseTimeout, kPoll))
      << "hog " << cpusOf("hog") << "\n"
      << diagnostics();
  expectJournalEmpty();
  EXPECT_EQ(colod_->kill(SIGTERM, 20s), 0);
  EXPECT_TRUE(atBase("hog")) << cpusOf("hog");
}

// An idle hold (actions.idle_hold_intervals, issue 17): a BE placed at creation that has not run
// keeps its placement when the LS is quiet -- an overlay like any other: journaled, consistent
// with the runtime's spec, explained -- and is given back to the kubelet's values as soon as it
// runs; a clean stop leaves the kubelet's values.
TEST_F(AdmissionFaultTest, AnIdleHoldIsJournaledAndGivenBackWhenTheBeRuns) {
  startIdleHoldNode("restore");
  // Idle for 8 s, then busy: one sleeping process (a polling loop's forks read 1-5 % of a CPU
  // on a loaded host, and that is running).
  define({.name = "hog",
          .pod = "batch",
          .command = "sleep 8; " + hogLoop("stop-be", 2),
          .cpu_request_milli = kBeRequestMilli,
          .cpu_limit_milli = 0,
          .cpus = nodeCpus()});  // the kubelet's cpuset: what the hold must give back
  peer_->mustControl({{"op", "run_pod"}, {"pod", "batch"}});
  start("hog");
  ASSERT_TRUE(waitFor(
      [&] { return slurp(colod_->logPath()).find("target=jobs/batch/hog") != std::string::npos; },
      10s, kPoll))
      << "hog was not placed at creation\n"
      << diagnostics();
  waitHeldWhileIdle("hog");
  EXPECT_TRUE(restricted("hog")) << cpusOf("hog");
  EXPECT_GE(journalOverlays(colod_->journalPath()), 1u) << slurp(colod_->journalPath());
  std::string why;
  EXPECT_TRUE(consistent("hog", &why)) << why;

  // It runs: given back, nothing left in the journal.
  expectGivenBackWhenItRuns();
}

// colod killed during an idle hold, the next one started with `reconcile: reseed`: the journal
// hands the hold back to the engine as the step of the victim it was held for, the BE is not
// moved back onto the LS's CPUs and off again across the restart, the hold is taken up again
// once the LS is quiet, and the BE is given back to the kubelet's values when it runs.
TEST_F(AdmissionFaultTest, AnIdleHoldOutlivesAKillWithReseedAndIsGivenBackWhenTheBeRuns) {
  startIdleHoldNode("reseed");
  // Idle until the test says so: the shell blocks opening a FIFO, which is not running at all
  // (a polling loop's forks read 1-5 % of a CPU on a loaded host, and that is running).
  const std::string go = dir_ + "/go-be";
  ASSERT_EQ(::mkfifo(go.c_str(), 0600), 0) << go << ": " << std::strerror(errno);
  define({.name = "hog",
          .pod = "batch",
          .command = "read _ < " + go + "; " + hogLoop("stop-be", 2),
          .cpu_request_milli = kBeRequestMilli,
          .cpu_limit_milli = 0,
          .cpus = nodeCpus()});  // the kubelet's cpuset: what the hold must give back
  peer_->mustControl({{"op", "run_pod"}, {"pod", "batch"}});
  start("hog");
  const std::string id = tracked("hog").id;
  waitHeldWhileIdle("hog");
  ASSERT_TRUE(restricted("hog")) << cpusOf("hog") << "\n" << diagnostics();
  const std::string held = cpusOf("hog");
  const size_t updates_before = updatesFor(id, "CPUSetCPUs");

  EXPECT_EQ(colod_->kill(SIGKILL, 10s), 128 + SIGKILL);
  EXPECT_TRUE(restricted("hog")) << "a killed colod changes nothing: " << cpusOf("hog");
  ASSERT_TRUE(colod_->start()) << diagnostics();
  ASSERT_TRUE(waitFor(
      [&] {
        return slurp(colod_->logPath()).find("restrictions handed back to the engine") !=
               std::string::npos;
      },
      kReleaseTimeout, kPoll))
      << "the journal did not reseed the engine\n"
      << diagnostics();
  // The hold is the victim's step again, relaxed by the same quiet rule into a hold: the BE stays
  // where it was, with no update in between (a release and a new placement would be two).
  waitHeldWhileIdle("hog");
  EXPECT_EQ(cpusOf("hog"), held);
  EXPECT_EQ(updatesFor(id, "CPUSetCPUs"), updates_before) << "the BE was moved across the restart\n"
                                                          << diagnostics();
  EXPECT_GE(journalOverlays(colod_->journalPath()), 1u) << slurp(colod_->journalPath());
  std::string why;
  EXPECT_TRUE(consistent("hog", &why)) << why;

  // It runs: given back, nothing left in the journal.
  const int fd = ::open(go.c_str(), O_WRONLY | O_NONBLOCK);
  ASSERT_GE(fd, 0) << "nobody reads " << go << ": " << std::strerror(errno);
  EXPECT_EQ(::write(fd, "\n", 1), 1);
  ::close(fd);
  expectGivenBackWhenItRuns();
}

// Issue 19 (blame.sh's other-cpus trials): the placement lands the new BE on the CPUs another BE
// is pinned to and keeps busy, and with an equal pod weight it would take a share of them. It
// is created with a CFS quota of what that BE leaves idle (the quota floor on a busy machine),
// in the creation reply, journaled; when colod is killed, the next colod returns the cpuset and
// the quota to the runtime's values.
TEST_F(AdmissionFaultTest, PlacementOntoABusyBesCpusCarriesAQuotaAndIsReleasedAfterAKill) {
  const std::string all = nodeCpus();
  const long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
  if (ncpu < 2 || all != "0-" + std::to_string(ncpu - 1)) {
    GTEST_SKIP() << "needs two or more online CPUs numbered from 0 (online: " << all << ")";
  }
  const std::string last = std::to_string(ncpu - 1);
  const std::string rest = ncpu == 2 ? "0" : "0-" + std::to_string(ncpu - 2);
  startPeer();
  startColod(admissionConfig());
  startBusyLs(last);
  addPod("other", "jobs", "be");
  define({.name = "away",
          .pod = "other",
          .command = hogLoop("stop-away", static_cast<int>(ncpu - 1)),
          .cpu_request_milli = 1000,
          .cpu_limit_milli = 0,
          .cpus = rest});
  peer_->mustControl({{"op", "run_pod"}, {"pod", "other"}});
  start("away");
  waitLsSeen();
  // colod reads the other BE busy, steadily (three ticks in a row: each `coloctl list` is
  // answered with a view built at the end of the next tick): it is a spinner alone on its CPUs,
  // credited by BPF only when switched out, so colod reads its CPU time from its usage counter
  // once it has seen it run a long slice. Before that, colod read it idle at the creation and
  // placed the new BE there without a quota (session 36, 1 in 25 runs).
  std::string listed;
  EXPECT_TRUE(waitListed(
      "away", [](const json& c) { return c.value("cpu_util", 0.0) >= 0.5; }, 3, &listed))
      << "colod does not read the other BE busy; last `coloctl list`: " << listed;
  defineBe("");
  start("hog");
  const std::string id = tracked("hog").id;
  const ContainerState placed = state("hog");
  ASSERT_TRUE(placed.ok) << placed.error;
  note("hog created with cgroup " + colod::faults::describe(placed.cgroup));
  EXPECT_EQ(placed.cgroup.cpus, rest) << "placed off the LS's CPU\n" << diagnostics();
  ASSERT_TRUE(placed.cgroup.cpu_quota.has_value());
  EXPECT_GT(*placed.cgroup.cpu_quota, 0) << "no quota: it would take the busy BE's CPU\n"
                                         << diagnostics();
  EXPECT_LT(*placed.cgroup.cpu_quota, placed.cgroup.cpu_period.value_or(100000) * (ncpu - 1))
      << "less than the CPUs it was placed on";
  EXPECT_EQ(updatesFor(id), 0U) << "set by the creation reply, not by an update";
  const auto entry = colod::faults::journalEntry(colod_->journalPath(), id);
  ASSERT_TRUE(entry && entry->is_object()) << slurp(colod_->journalPath());
  EXPECT_NE(entry->dump().find("cpu_quota"), std::string::npos) << entry->dump();
  EXPECT_NE(slurp(colod_->logPath()).find("the move takes only what they leave idle"),
            std::string::npos)
      << diagnostics();
  EXPECT_EQ(state("away").cgroup.cpus, rest) << "the innocent is not touched";
  EXPECT_TRUE(atBase("away")) << colod::faults::describe(state("away").cgroup);

  EXPECT_EQ(colod_->kill(SIGKILL, 10s), 128 + SIGKILL);
  touchStopFile("stop-ls");
  remove("server");
  ASSERT_TRUE(colod_->start()) << diagnostics();
  EXPECT_TRUE(waitFor([&] { return atBase("hog"); }, kReleaseTimeout, kPoll))
      << "hog still " << colod::faults::describe(state("hog").cgroup) << " after a restart\n"
      << diagnostics();
  expectJournalEmpty();
  touchStopFile("stop-away");
  touchStopFile("stop-be");
}

TEST_F(AdmissionFaultTest, OffLeavesTheCreationAlone) {
  startPeer();
  std::string yaml = admissionConfig();
  yaml.replace(yaml.find("admission: restrict"), 19, "admission: off");
  startColod(yaml);
  startBusyLs();
  waitLsSeen();
  defineBe("");
  start("hog");
  EXPECT_EQ(cpusOf("hog"), nodeCpus());
  EXPECT_EQ(metricValue(colod_->scrape(), "colod_admissions_total"), 0);
}

}  // namespace
}  // namespace colod::faults::suite
