// SPDX-License-Identifier: Apache-2.0
// The fault suite (issue 14): the real colod against the real Go runtime peer (colod-testpeer)
// with real cgroups and real workloads, while the runtime fails in the ways a node's runtime
// does: away for seconds, refusing updates, losing replies, resized by the kubelet, containers
// churning or vanishing mid-update, colod itself killed or doubled. Each scenario ends by
// asserting the cgroup values against the runtime's spec (the peer's `state` op): after colod
// lets go, cgroup == spec == what the kubelet asked for; while it restricts, cgroup == spec and
// they differ from the kubelet's values only in the fields colod's journal says it overlays.
//
// Restrictions are made fast and deterministic: the LS probe and a 2-worker stress-ng BE hog
// share CPU 1, the BE with 4x the LS CPU request; the policy flags the victim after 2 of 3
// intervals over 500 us, goes straight to the CFS quota rung and tightens it by 10 % every 3
// intervals while the victim hurts (about 15 steps, 4.5 s, before the floor, where the policy
// may undo a rung that did not help); it never relaxes within a test (quiet_intervals 600), so a
// restriction is released only by what the scenario does (the LS container leaving). Where the
// policy may still have changed its mind, the checks are against colod's own desired state (its
// journal), not against "still restricted".
//
// Each run records leaked / clobbered / converge_ms (fault_support.h) and appends them as one
// JSON line to $COLOD_FAULTS_RESULTS when set (scripts/bench/faults.sh). Every wait is a bounded
// poll; the only sleeps are the kill points of the SIGKILL sweep (they define the scenario).
#include <algorithm>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <set>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "fault_support.h"
#include "harness.h"

namespace {

namespace fs = std::filesystem;
using colod::e2e::ColodFixture;
using colod::e2e::ColodProcess;
using colod::e2e::ContainerSpec;
using colod::e2e::journalOverlays;
using colod::e2e::metricValue;
using colod::e2e::slurp;
using colod::e2e::waitFor;
using colod::faults::ContainerState;
using colod::faults::Res;
using json = nlohmann::json;
using namespace std::chrono_literals;

// See the file comment. Keys: policy/config/default.yaml.
constexpr const char* kPolicy =
    "  thresholds:\n"
    "    runq_p99_us: 500\n"
    "  detection:\n"
    "    window_intervals: 3\n"
    "    hit_intervals: 2\n"
    "  actions:\n"
    "    cpu_ladder: [cpu_quota]\n"
    "    verify_intervals: 3\n"
    "    quiet_intervals: 600\n"
    "    change_cooldown_intervals: 1\n"
    "  levers:\n"
    "    quota_step_fraction: 0.1\n";

// The CPU the LS probe and the BE hogs share (the other one runs colod, the peer and the test).
constexpr const char* kSharedCpu = "1";

// Bounds of the waits (each test stays well under CTest's 90 s on a 2-CPU machine).
constexpr auto kEngageTimeout = 45s;   // workloads started -> first restriction in the cgroup
constexpr auto kReleaseTimeout = 20s;  // colod lets go -> cgroup and spec at the kubelet's values
constexpr auto kJournalTimeout = 10s;  // release confirmed -> journal without overlays
constexpr auto kPoll = 20ms;

double msSince(int64_t since_ns) {
  return static_cast<double>(colod::faults::realtimeNs() - since_ns) / 1e6;
}

bool fromColod(const json& e) {
  return e.contains("plugin") && e["plugin"].is_string() &&
         e["plugin"].get<std::string>().find("colod") != std::string::npos;
}

int64_t tsOf(const json& e) { return e.is_object() ? e.value("ts_ns", int64_t{0}) : 0; }

std::string join(const std::vector<std::string>& v) {
  std::string out;
  for (const auto& s : v) {
    out += (out.empty() ? "" : ",") + s;
  }
  return out.empty() ? "-" : out;
}

// A container the test created, with what the kubelet asked for.
struct Tracked {
  ContainerSpec spec;
  Res base;                         // the kubelet's current values
  std::vector<Res> previous_bases;  // kubelet values a later kubelet update replaced
  std::string id;
};

class FaultTest : public ColodFixture {
 protected:
  FaultTest() : ColodFixture("colod-faults") {}

  void SetUp() override {
    t_start_ = std::chrono::steady_clock::now();
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    rec_.test = std::string(info->test_suite_name()) + "." + info->name();
    rec_.scenario = rec_.test;
    ColodFixture::SetUp();
  }

  void TearDown() override {
    rec_.skipped = IsSkipped();
    rec_.passed = !HasFailure() && !rec_.skipped;
    std::printf("[ faults   ] %s\n", rec_.toJson().dump().c_str());
    if (!rec_.append()) {
      ADD_FAILURE() << "cannot append to $COLOD_FAULTS_RESULTS";
    }
    if (HasFailure()) {
      std::printf("%s\n", diagnostics().c_str());
    }
    ColodFixture::TearDown();
  }

  // restore_on_stop and reconcile: restore are the defaults; said here because the scenarios
  // depend on them.
  [[nodiscard]] std::string faultConfig(const std::string& extra_daemon = "") const {
    return daemonConfig("  restore_on_stop: true\n  reconcile: restore\n" + extra_daemon, kPolicy);
  }

  // ---- containers ----

  void define(const ContainerSpec& spec) {
    addContainer(spec);
    Tracked t;
    t.spec = spec;
    t.base = colod::faults::kubeletBase(spec, colod::nri::interop::isCgroupV2Host());
    tracked_[spec.name] = std::move(t);
  }
  void start(const std::string& name) {
    const json c = createStart(name);
    tracked_[name].id = c.value("id", "");
  }
  void remove(const std::string& name) { removeContainer(name); }
  const Tracked& tracked(const std::string& name) { return tracked_.at(name); }

  // The colocation workload: LS probe "server" (pod web, ns prod) and BE hog "hog" (pod batch,
  // ns jobs), both on the shared CPU; the BE optionally with a CPU limit.
  void startWorkloads(int64_t be_limit_milli = 0) {
    addPod("web", "prod", "ls");
    addPod("batch", "jobs", "be");
    define({.name = "server",
            .pod = "web",
            .command = probeLoop("stop-ls"),
            .cpu_request_milli = 1000,
            .cpus = kSharedCpu});
    define({.name = "hog",
            .pod = "batch",
            .command = hogLoop("stop-be", 2),
            .cpu_request_milli = 4000,
            .cpu_limit_milli = be_limit_milli,
            .cpus = kSharedCpu});
    peer_->mustControl({{"op", "run_pod"}, {"pod", "web"}});
    peer_->mustControl({{"op", "run_pod"}, {"pod", "batch"}});
    start("server");
    start("hog");
  }

  // A kubelet resize of the CPU limit (UpdateContainer relayed to colod, its adjustment merged,
  // applied, PostUpdateContainer).
  void kubeletSetCpuLimit(const std::string& name, int64_t milli) {
    peer_->mustControl(
        {{"op", "update"}, {"container", name}, {"resources", {{"cpu_limit_milli", milli}}}});
    auto& t = tracked_[name];
    t.previous_bases.push_back(t.base);
    colod::faults::applyKubeletLimit(t.base, milli);
  }

  // ---- observations ----

  ContainerState state(const std::string& name) { return colod::faults::queryState(*peer_, name); }

  // The spec or the cgroup differs from the kubelet's values.
  bool restricted(const std::string& name) {
    const ContainerState st = state(name);
    const Res& base = tracked(name).base;
    return st.ok && (!colod::faults::diffFields(st.spec, base).empty() ||
                     !colod::faults::diffFields(st.cgroup, base).empty());
  }

  bool atBase(const std::string& name) {
    const ContainerState st = state(name);
    const Res& base = tracked(name).base;
    return st.ok && colod::faults::diffFields(st.spec, base).empty() &&
           colod::faults::diffFields(st.cgroup, base).empty();
  }

  // cgroup == spec, and they differ from the kubelet's values only in fields colod's journal
  // overlays (nothing changed that colod does not know it changed). `why` says what is off.
  bool consistent(const std::string& name, std::string* why) {
    const ContainerState st = state(name);
    if (!st.ok) {
      *why = "state: " + st.error;
      return false;
    }
    const auto cg_vs_spec = colod::faults::diffFields(st.cgroup, st.spec);
    if (!cg_vs_spec.empty()) {
      *why = "cgroup != spec in " + join(cg_vs_spec) + ": cgroup " +
             colod::faults::describe(st.cgroup) + ", spec " + colod::faults::describe(st.spec);
      return false;
    }
    std::string jwhy;
    const auto overlay = colod::faults::journalOverlay(colod_->journalPath(), st.id, &jwhy);
    if (!overlay) {
      *why = jwhy;
      return false;
    }
    const auto fields = colod::faults::overlayFields(*overlay);
    const std::set<std::string> overlaid(fields.begin(), fields.end());
    for (const auto& f : colod::faults::diffFields(st.cgroup, tracked(name).base)) {
      if (overlaid.count(f) == 0) {
        *why = f + " is " + colod::faults::fieldText(st.cgroup, f) +
               " (kubelet's: " + colod::faults::fieldText(tracked(name).base, f) +
               ") but the journal overlays " + join(fields) + " for " + st.id.substr(0, 12);
        return false;
      }
    }
    return true;
  }

  // The cgroup is at colod's desired state: consistent, and cgroup == desired (the kubelet's
  // values with the journal's overlay).
  bool atDesired(const std::string& name, std::string* why) {
    if (!consistent(name, why)) {
      return false;
    }
    const ContainerState st = state(name);
    const auto overlay = colod::faults::journalOverlay(colod_->journalPath(), st.id);
    if (!st.ok || !overlay) {
      *why = "state or journal unreadable";
      return false;
    }
    const Res desired =
        colod::faults::overlayOnto(tracked(name).base, colod::faults::resFromJournal(*overlay));
    const auto off = colod::faults::diffFields(st.cgroup, desired);
    if (!off.empty()) {
      *why = "cgroup != desired in " + join(off) + ": cgroup " +
             colod::faults::describe(st.cgroup) + ", desired " + colod::faults::describe(desired);
      return false;
    }
    return true;
  }

  // colod knows it: connected to the runtime, nothing pending (an absent gauge does not block
  // here; OutageMidEscalation checks it is exported).
  bool settled(std::string* why) {
    const std::string m = colod_->scrape();
    if (metricValue(m, "colod_nri_connected") != 1) {
      *why = "colod not connected to the runtime";
      return false;
    }
    if (metricValue(m, "colod_reconcile_pending") > 0) {
      *why = "colod_reconcile_pending > 0";
      return false;
    }
    return true;
  }

  bool converged(const std::string& name, std::string* why) {
    return atDesired(name, why) && settled(why);
  }

  // Polls until the cgroup is at desired and colod has settled; records the time from
  // `since_ns` to the start of the final stretch in which the cgroup was at desired (colod's
  // own bookkeeping, e.g. a reconnect, is required but not timed).
  void expectConverges(const std::string& name,
                       int64_t since_ns,
                       std::chrono::milliseconds timeout) {
    std::string why;
    int64_t streak_ns = 0;
    const bool ok = waitFor(
        [&] {
          if (!atDesired(name, &why)) {
            streak_ns = 0;
            return false;
          }
          if (streak_ns == 0) {
            streak_ns = colod::faults::realtimeNs();
          }
          return settled(&why);
        },
        timeout, kPoll);
    EXPECT_TRUE(ok) << name << " did not converge within " << timeout.count() << " ms: " << why;
    if (ok) {
      rec_.converge_ms.push_back(static_cast<double>(streak_ns - since_ns) / 1e6);
      note(name + " at desired " + std::to_string(rec_.converge_ms.back()) +
           " ms after the fault, colod settled " + std::to_string(msSince(since_ns)) +
           " ms after: " + cgroupOf(name));
    }
  }

  // colod let go of `names`: each returns to the kubelet's values (spec and cgroup), which is
  // timed from `since_ns`; then the fields still off are counted (leaked, or clobbered when the
  // value is one a later kubelet update replaced) and the journal must hold no overlay.
  void expectReleased(const std::vector<std::string>& names, int64_t since_ns) {
    double worst = 0;
    bool all = true;
    for (const auto& name : names) {
      if (waitFor([&] { return atBase(name); }, kReleaseTimeout, kPoll)) {
        worst = std::max(worst, msSince(since_ns));
      } else {
        all = false;
      }
    }
    if (all) {
      rec_.converge_ms.push_back(worst);
      note("released " + join(names) + " " + std::to_string(worst) + " ms after colod let go");
    }
    for (const auto& name : names) {
      const ContainerState st = state(name);
      ASSERT_TRUE(st.ok) << st.error;
      const Tracked& t = tracked(name);
      std::set<std::string> off;
      for (const auto& f : colod::faults::diffFields(st.spec, t.base)) {
        off.insert(f);
      }
      for (const auto& f : colod::faults::diffFields(st.cgroup, t.base)) {
        off.insert(f);
      }
      for (const auto& f : off) {
        const bool old_kubelet_value =
            std::any_of(t.previous_bases.begin(), t.previous_bases.end(), [&](const Res& prev) {
              return colod::faults::fieldText(prev, f) == colod::faults::fieldText(st.spec, f);
            });
        if (old_kubelet_value) {
          ++rec_.clobbered;
        } else {
          ++rec_.leaked;
        }
        ADD_FAILURE() << name << ": " << f << " not back to the kubelet's value "
                      << colod::faults::fieldText(t.base, f) << " (spec "
                      << colod::faults::fieldText(st.spec, f) << ", cgroup "
                      << colod::faults::fieldText(st.cgroup, f) << ")"
                      << (old_kubelet_value ? ": an older kubelet value (clobbered)" : "");
      }
    }
    expectJournalEmpty();
  }

  void expectJournalEmpty() {
    const bool empty =
        waitFor([&] { return journalOverlays(colod_->journalPath()) == 0; }, kJournalTimeout, 50ms);
    std::string why;
    colod::e2e::readJournal(colod_->journalPath(), &why);
    EXPECT_TRUE(empty) << "journal still holds overlays (or is not v2: " << why << "):\n"
                       << slurp(colod_->journalPath());
  }

  // Write-ahead: every field in which the cgroup or the spec differs from the kubelet's values
  // is known to colod's journal for that container: in its overlay (colod wants it changed), or
  // in its base (colod is releasing it and recorded the value to return to).
  void expectJournalCovers(const std::string& name) {
    const ContainerState st = state(name);
    ASSERT_TRUE(st.ok) << st.error;
    std::string why;
    const auto entry = colod::faults::journalEntry(colod_->journalPath(), st.id, &why);
    ASSERT_TRUE(entry.has_value()) << why;
    std::set<std::string> known;
    if (entry->is_object()) {
      for (const char* part : {"overlay", "base"}) {
        for (const auto& f : colod::faults::overlayFields(entry->value(part, json::object()))) {
          known.insert(f);
        }
      }
    }
    std::set<std::string> off;
    for (const auto& f : colod::faults::diffFields(st.spec, tracked(name).base)) {
      off.insert(f);
    }
    for (const auto& f : colod::faults::diffFields(st.cgroup, tracked(name).base)) {
      off.insert(f);
    }
    for (const auto& f : off) {
      EXPECT_EQ(known.count(f), 1U)
          << name << ": " << f << " is " << colod::faults::fieldText(st.cgroup, f) << " (kubelet's "
          << colod::faults::fieldText(tracked(name).base, f) << ") but no journal knows it:\n"
          << slurp(colod_->journalPath());
    }
  }

  void waitRestricted(const std::string& name) {
    ASSERT_TRUE(waitFor([&] { return restricted(name); }, kEngageTimeout, kPoll))
        << name << " was never restricted (kubelet's values "
        << colod::faults::describe(tracked(name).base) << ")\n"
        << diagnostics();
    note(name + " restricted: " + cgroupOf(name) +
         " (kubelet's: " + colod::faults::describe(tracked(name).base) + ")");
  }

  void waitConsistent(const std::string& name) {
    std::string why;
    ASSERT_TRUE(waitFor([&] { return consistent(name, &why); }, 5s, kPoll)) << name << ": " << why;
  }

  // The first event after `after_ns` matching pred (null json on timeout).
  json waitEventAfter(int64_t after_ns,
                      const std::function<bool(const json&)>& pred,
                      std::chrono::milliseconds timeout) {
    return peer_->waitEvent([&](const json& e) { return tsOf(e) > after_ns && pred(e); }, timeout);
  }
  size_t countEventsAfter(int64_t after_ns, const std::function<bool(const json&)>& pred) {
    return peer_->countEvents([&](const json& e) { return tsOf(e) > after_ns && pred(e); });
  }

  std::string explain(const std::string& query) { return colod_->coloctl("explain " + query).out; }

  // Scenario e, kill points first..last (below).
  void killSweep(int first, int last);

  // A timeline line in the test output: ms since the test started, what happened.
  void note(const std::string& what) {
    const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                        std::chrono::steady_clock::now() - t_start_)
                        .count();
    std::printf("[ faults   ] %6lld ms  %s\n", static_cast<long long>(ms), what.c_str());
    std::fflush(stdout);
  }
  std::string cgroupOf(const std::string& name) {
    const ContainerState st = state(name);
    return st.ok ? colod::faults::describe(st.cgroup) : "state: " + st.error;
  }

  std::chrono::steady_clock::time_point t_start_;
  std::map<std::string, Tracked> tracked_;
  colod::faults::ScenarioRecord rec_;
};

// a. The runtime goes away for 3 s while colod is escalating a BE quota. Decisions made meanwhile
// are not lost: after the return the cgroup converges on colod's desired state; when the LS
// leaves, the BE returns to the kubelet's values.
TEST_F(FaultTest, OutageMidEscalation) {
  startPeer();
  startColod(faultConfig());
  startWorkloads();
  waitRestricted("hog");
  // The scenario is what it says: colod decides while the runtime is away (the first quota
  // leaves a BE pinned to one CPU almost unrestricted, so the victim still hurts and the budget
  // is tightened every verify window). The policy may also find nothing to change for 3 s (the
  // victim's intervals are noisy): then the outage is repeated, up to three times, each one
  // checked for convergence, until colod decided during one.
  size_t decided_while_away = 0;
  json back;
  for (int outage = 0; outage < 3 && decided_while_away == 0; ++outage) {
    const int64_t armed = colod::faults::realtimeNs();
    peer_->mustControl({{"op", "outage"}, {"ms", 3000}});
    note("runtime away for 3000 ms");
    back = waitEventAfter(
        armed, [](const json& e) { return e.value("event", "") == "outage-end"; }, 15s);
    ASSERT_FALSE(back.is_null()) << "the peer never logged outage-end";
    if (auto d = colod_->client().decisions(0)) {
      for (const auto& x : d->decisions()) {
        const int64_t at_ns = x.unix_ms() * 1'000'000;
        decided_while_away += at_ns > armed && at_ns < tsOf(back) ? 1 : 0;
      }
    }
    note(std::to_string(decided_while_away) + " decisions while the runtime was away");
    if (decided_while_away == 0) {
      expectConverges("hog", tsOf(back), 30s);
    }
  }
  EXPECT_GE(decided_while_away, 1U) << "no decision while the runtime was away in 3 outages";
  expectConverges("hog", tsOf(back), 30s);
  ASSERT_FALSE(HasFailure());
  // colod says what it holds.
  const auto overlay = colod::faults::journalOverlay(colod_->journalPath(), tracked("hog").id);
  const std::string why = explain("hog");
  if (overlay && !overlay->empty()) {
    EXPECT_EQ(why.find("held by colod: nothing"), std::string::npos) << why;
    EXPECT_NE(why.find("quota"), std::string::npos) << why;
  } else {
    note("colod released the BE before the explain check (the policy undid the rung)");
  }
  const std::string m = colod_->scrape();
  EXPECT_GE(metricValue(m, "colod_reconcile_pending"), 0) << "colod_reconcile_pending not exported";
  EXPECT_GE(metricValue(m, "colod_reconcile_oldest_pending_seconds"), 0)
      << "colod_reconcile_oldest_pending_seconds not exported";

  remove("server");
  expectReleased({"hog"}, colod::faults::realtimeNs());
}

// b. The kubelet resizes the BE (cpu limit 1500m -> 1300m) while colod restricts its quota: the
// restriction is re-applied in colod's UpdateContainer reply, and on release the quota returns
// to the kubelet's new 130000, not to the 150000 it had when the restriction began.
TEST_F(FaultTest, KubeletUpdateWhileRestricted) {
  startPeer();
  startColod(faultConfig());
  startWorkloads(/*be_limit_milli=*/1500);
  waitRestricted("hog");
  waitConsistent("hog");
  const auto held = colod::faults::journalOverlay(colod_->journalPath(), tracked("hog").id);
  ASSERT_TRUE(held.has_value() && held->contains("cpu_quota"))
      << "no quota overlay in the journal while restricted:\n"
      << slurp(colod_->journalPath());
  const int64_t t_update = colod::faults::realtimeNs();
  kubeletSetCpuLimit("hog", 1300);
  note("kubelet set hog's cpu limit to 1300m: cgroup " + cgroupOf("hog"));
  // Neither is lost: what the runtime wrote for the kubelet's update is colod's quota (its
  // overlay rode in the UpdateContainer reply), not the kubelet's 130000 ...
  std::string kubelet_wrote;
  for (const auto& e : peer_->events()) {
    const std::string file = e.value("file", "");
    if (tsOf(e) > t_update && e.value("event", "") == "cgroup-write" &&
        e.value("container", "") == "hog" && e.value("source", "") == "kubelet" &&
        (file.ends_with("cpu.cfs_quota_us") || file.ends_with("cpu.max"))) {
      kubelet_wrote = e.value("new", e.value("value", ""));
    }
  }
  EXPECT_FALSE(kubelet_wrote.empty()) << "the kubelet's update wrote no quota";
  EXPECT_NE(kubelet_wrote.rfind("130000", 0), 0U)
      << "colod's restriction was lost: the kubelet's update wrote " << kubelet_wrote;
  // ... and the runtime then holds exactly colod's desired state over the kubelet's new values.
  expectConverges("hog", t_update, 5s);

  remove("server");
  expectReleased({"hog"}, colod::faults::realtimeNs());
  const ContainerState st = state("hog");
  EXPECT_EQ(st.spec.cpu_quota.value_or(-1), 130000);
  EXPECT_EQ(st.cgroup.cpu_quota.value_or(-1), 130000);
}

// c. The runtime refuses the next 3 updates right before the LS leaves: colod keeps retrying
// (bounded backoff, no giving up) and the BE returns to the kubelet's values.
TEST_F(FaultTest, RefusedRestore) {
  startPeer();
  startColod(faultConfig());
  startWorkloads();
  waitRestricted("hog");
  waitConsistent("hog");
  const int64_t armed = colod::faults::realtimeNs();
  peer_->mustControl({{"op", "refuse_updates"}, {"count", 3}});
  remove("server");
  note("next 3 updates refused; LS removed");
  // The fault ends with the third refusal.
  const bool refused3 = waitFor(
      [&] {
        return countEventsAfter(armed, [](const json& e) {
                 return e.value("event", "") == "update-refused";
               }) >= 3;
      },
      kReleaseTimeout, 50ms);
  EXPECT_TRUE(refused3) << "colod did not retry after a refusal (fewer than 3 refused calls)";
  int64_t fault_end = armed;
  for (const auto& e : peer_->events()) {
    if (tsOf(e) > armed && e.value("event", "") == "update-refused") {
      fault_end = tsOf(e);
    }
  }
  expectReleased({"hog"}, fault_end);
  // Each refused call is a failed attempt (the counter is summed over its reasons).
  double failures = -1;
  EXPECT_TRUE(waitFor(
      [&] {
        failures = metricValue(colod_->scrape(), "colod_reconcile_failures_total");
        return failures >= 3;
      },
      5s, 100ms))
      << "3 refused calls, colod_reconcile_failures_total " << failures;
}

// d1. The reply to colod's first restricting UpdateContainers is lost (applied, then the
// connection drops): colod reconnects, re-verifies and converges; release still works.
TEST_F(FaultTest, LostReplyDuringRestriction) {
  startPeer();
  startColod(faultConfig());
  const int64_t armed = colod::faults::realtimeNs();
  peer_->mustControl({{"op", "lose_replies"}, {"count", 1}});
  startWorkloads();
  waitRestricted("hog");
  const json lost = waitEventAfter(
      armed, [](const json& e) { return e.value("event", "") == "update-reply-lost"; }, 15s);
  ASSERT_FALSE(lost.is_null()) << "no reply was lost";
  expectConverges("hog", tsOf(lost), 30s);
  remove("server");
  expectReleased({"hog"}, colod::faults::realtimeNs());
}

// d2. The reply to the release is lost: the BE is back at its values and colod, after the
// reconnect, knows it (journal empty, nothing pending).
TEST_F(FaultTest, LostReplyDuringRelease) {
  startPeer();
  startColod(faultConfig());
  startWorkloads();
  waitRestricted("hog");
  waitConsistent("hog");
  const int64_t armed = colod::faults::realtimeNs();
  peer_->mustControl({{"op", "lose_replies"}, {"count", 1}});
  remove("server");
  const json lost = waitEventAfter(
      armed, [](const json& e) { return e.value("event", "") == "update-reply-lost"; }, 15s);
  ASSERT_FALSE(lost.is_null()) << "no reply was lost";
  expectReleased({"hog"}, tsOf(lost));
  EXPECT_TRUE(waitFor(
      [&] {
        const std::string m = colod_->scrape();
        return metricValue(m, "colod_nri_connected") == 1 &&
               metricValue(m, "colod_reconcile_pending") <= 0;
      },
      kJournalTimeout, 50ms))
      << "colod did not reconnect or still has updates pending";
}

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
  startColod(faultConfig());
  startWorkloads();
  waitRestricted("hog");
  waitConsistent("hog");
  const size_t connects_before =
      peer_->countEvents([](const json& e) { return e.value("event", "") == "plugin-connected"; });
  const std::string second_dir = dir_ + "/second";
  fs::create_directories(second_dir);
  std::string yaml = faultConfig();
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
  startPeer();
  startColod(faultConfig());
  startWorkloads();
  waitRestricted("hog");
  waitConsistent("hog");
  colod_->kill(SIGKILL);
  {
    std::ofstream(colod_->journalPath(), std::ios::trunc) << "{\"version\": 2, \"containers\": [tor";
  }
  const auto st = colod::faults::queryState(*peer_, "hog");
  ASSERT_TRUE(st.ok) << st.error;
  const std::string rel = peer_->mustControl({{"op", "state"}, {"container", "hog"}})
                              .value("cgroup_rel", "");
  ASSERT_FALSE(rel.empty());
  const bool v2 = colod::nri::interop::isCgroupV2Host();
  const std::string file = v2 ? "/sys/fs/cgroup/" + rel + "/cpu.max"
                              : "/sys/fs/cgroup/cpu/" + rel + "/cpu.cfs_quota_us";
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
  EXPECT_TRUE(restricted("hog")) << "the restriction was dropped by the churn";
  remove("server");
  expectReleased({"hog", "c3", "c5"}, colod::faults::realtimeNs());
  auto l = colod_->client().listContainers();
  ASSERT_TRUE(l.has_value());
  std::set<std::string> names;
  for (const auto& c : l->containers()) {
    names.insert(c.name());
  }
  EXPECT_EQ(names, (std::set<std::string>{"hog", "c3", "c5"}));
  EXPECT_TRUE(waitFor([&] { return metricValue(colod_->scrape(), "colod_reconcile_pending") <= 0; },
                      kJournalTimeout, 50ms))
      << "colod_reconcile_pending stays "
      << metricValue(colod_->scrape(), "colod_reconcile_pending")
      << " with every container at its values and an empty journal";
}

// j. The BE is removed while colod's update for it is in flight and being refused: colod drops
// it (journal, pending) instead of retrying forever or keeping a ghost restriction.
TEST_F(FaultTest, ContainerRemovedMidUpdate) {
  startPeer();
  startColod(faultConfig());
  const int64_t armed = colod::faults::realtimeNs();
  peer_->mustControl({{"op", "refuse_updates"}, {"count", 5}});
  startWorkloads();
  const json refused = waitEventAfter(
      armed, [](const json& e) { return e.value("event", "") == "update-refused"; },
      kEngageTimeout);
  ASSERT_FALSE(refused.is_null()) << "colod never tried to restrict the BE\n" << diagnostics();
  note("colod's restriction refused; removing the BE");
  const std::string id = tracked("hog").id;
  remove("hog");
  const int64_t removed = colod::faults::realtimeNs();
  peer_->mustControl({{"op", "refuse_updates"}, {"count", 0}});
  const bool dropped = waitFor(
      [&] {
        const auto overlay = colod::faults::journalOverlay(colod_->journalPath(), id);
        if (!overlay || !overlay->empty()) {
          return false;
        }
        const std::string m = colod_->scrape();
        return metricValue(m, "colod_reconcile_pending") <= 0;
      },
      kJournalTimeout, 50ms);
  EXPECT_TRUE(dropped) << "colod still holds the removed container:\n"
                       << slurp(colod_->journalPath());
  if (dropped) {
    rec_.converge_ms.push_back(msSince(removed));
  } else {
    ++rec_.leaked;
  }
  auto l = colod_->client().listContainers();
  ASSERT_TRUE(l.has_value());
  for (const auto& c : l->containers()) {
    EXPECT_NE(c.id(), id) << "colod still lists the removed container";
  }
  remove("server");
  expectJournalEmpty();
}

}  // namespace
