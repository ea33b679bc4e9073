// SPDX-License-Identifier: Apache-2.0
// The fault suite's fixture (FaultTest), shared by fault_runtime_test.cpp (the runtime fails)
// and fault_colod_test.cpp (colod is killed, stopped, doubled, reloaded, its journal corrupt).
// See fault_runtime_test.cpp for what every scenario asserts.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "fault_support.h"
#include "harness.h"

namespace colod::faults::suite {

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
inline constexpr const char* kPolicy =
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
inline constexpr const char* kSharedCpu = "1";

// Bounds of the waits (each test stays well under CTest's 90 s on a 2-CPU machine).
inline constexpr auto kEngageTimeout = 45s;  // workloads started -> first restriction in the cgroup
inline constexpr auto kReleaseTimeout =
    20s;  // colod lets go -> cgroup and spec at the kubelet's values
inline constexpr auto kJournalTimeout = 10s;  // release confirmed -> journal without overlays
inline constexpr auto kPoll = 20ms;

inline double msSince(int64_t since_ns) {
  return static_cast<double>(colod::faults::realtimeNs() - since_ns) / 1e6;
}

inline bool fromColod(const json& e) {
  return e.contains("plugin") && e["plugin"].is_string() &&
         e["plugin"].get<std::string>().find("colod") != std::string::npos;
}

inline int64_t tsOf(const json& e) { return e.is_object() ? e.value("ts_ns", int64_t{0}) : 0; }

inline std::string join(const std::vector<std::string>& v) {
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
  [[nodiscard]] std::string faultConfig(const std::string& extra_daemon = "",
                                        const std::string& policy = kPolicy) const {
    return daemonConfig("  restore_on_stop: true\n  reconcile: restore\n" + extra_daemon, policy);
  }

  // faultConfig() with a rung verified over 60 s instead of 3 ticks, for a scenario that checks a
  // restriction is still held after something else happened. A rung that did not help within
  // verify_intervals is undone by design, and on a loaded machine the first quota (90 % of a
  // CPU) did not (SecondColodOnSameJournal, CI of session 45: undone 250 ms after it was made).
  [[nodiscard]] std::string heldFaultConfig() const {
    std::string policy = kPolicy;
    const std::string verify = "verify_intervals: 3";
    policy.replace(policy.find(verify), verify.size(), "verify_intervals: 600");
    return faultConfig("", policy);
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
  // ns jobs), both on the shared CPU; the BE optionally with a CPU limit. With `settled_ls`
  // the BE starts only once colod reads the LS running under its threshold: the probe's own
  // start-up backlog (several of its tasks queued behind each other) then is not in the wait
  // load colod sizes its first quota by.
  void startWorkloads(int64_t be_limit_milli = 0, bool settled_ls = false) {
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
    if (settled_ls) {
      waitLsSettled();
    }
    start("hog");
  }

  // Polls `coloctl list -o json` (bounded: 20 s) until the container named `name` satisfies
  // `pred` in `streak` reads in a row; `last` keeps the last listing for the failure message.
  bool waitListed(const std::string& name,
                  const std::function<bool(const json&)>& pred,
                  int streak,
                  std::string* last) {
    int run = 0;
    return waitFor(
        [&] {
          *last = colod_->coloctl("list -o json").out;
          const json doc = json::parse(*last, nullptr, /*allow_exceptions=*/false);
          bool ok = false;
          if (doc.is_object() && doc.contains("containers")) {
            for (const auto& c : doc["containers"]) {
              ok = ok || (c.value("name", "") == name && pred(c));
            }
          }
          run = ok ? run + 1 : 0;
          return run >= streak;
        },
        20s, kPoll);
  }

  // Waits (20 s at most) for colod to read the LS "server" running with a run-queue p99 under
  // kPolicy's 500 us threshold, three reads in a row. Where the host's own noise keeps the probe
  // over it (a CI run in session 42 read p99 2048 us with the LS alone on its CPU), the scenario
  // goes on: this only shapes the start, and the test's own checks still decide. Failing here
  // would fail colod for the machine's noise before anything of colod was tested.
  void waitLsSettled() {
    std::string last;
    const bool settled = waitListed(
        "server",
        [](const json& c) {
          return c.value("cpu_util", 0.0) > 0.01 && c.contains("runq") &&
                 c["runq"].value("p99_us", uint64_t{0}) < 500;
        },
        3, &last);
    if (!settled) {
      note(
          "the LS did not read settled within 20 s (the host's noise); going on. Last `coloctl "
          "list`: " +
          last);
    }
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

  // colod is connected to the runtime again and has no update pending (bounded poll).
  void expectReconnectedWithNothingPending() {
    EXPECT_TRUE(waitFor(
        [&] {
          const std::string m = colod_->scrape();
          return metricValue(m, "colod_nri_connected") == 1 &&
                 metricValue(m, "colod_reconcile_pending") <= 0;
        },
        kJournalTimeout, 50ms))
        << "colod did not reconnect or still has updates pending\n"
        << diagnostics();
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

  // The node running, "hog" (cpu limit `be_limit_milli`) restricted by colod, the runtime
  // consistent with it.
  void startWithHogHeld(int64_t be_limit_milli = 0) {
    startPeer();
    startColod(faultConfig());
    startWorkloads(be_limit_milli);
    waitRestricted("hog");
    waitConsistent("hog");
  }

  // The usual start of a kubelet-resize fault: startWithHogHeld() with a quota overlay in the
  // journal.
  void startWithHogQuotaHeld(int64_t be_limit_milli) {
    startWithHogHeld(be_limit_milli);
    const auto held = colod::faults::journalOverlay(colod_->journalPath(), tracked("hog").id);
    ASSERT_TRUE(held.has_value() && held->contains("cpu_quota"))
        << "no quota overlay in the journal while restricted:\n"
        << slurp(colod_->journalPath());
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

}  // namespace colod::faults::suite
