// SPDX-License-Identifier: Apache-2.0
// The one quota step taken while a victim waits behind the host with a cpuset split in force.
//
// The split keeps BE off the victim's CPUs, and the victim then waits behind host work there (a
// system daemon, a process outside any pod). No rung removes that work, but the BE still weigh
// on those CPUs: CFS gives a group cgroup (kubepods) a weight on each CPU in proportion to its
// load there, so the BE's load on their own CPUs lowers what the victim's parents weigh on the
// victim's CPUs against the host. Measured (colocation foreign phase, session 33): BE held on
// CPU 1 used it whole, the LS got 0.28 CPU on CPU 0 beside a hog at the weight of a system
// slice, against 0.33 CPU with no split at all; its p99 was 1.09x what it was without colod.
// The same BE capped at 0.75 of what they used: LS p99 0.61x, BE work 0.92x.
//
// So one step, on the BE the split holds: their aggregate quota at (1 - quota_step_fraction) of
// what they use, verified like a rung: kept if the victim's wait drops, otherwise undone and
// not retried on the same evidence. Never tightened while the wait is behind the host (a
// tighter budget takes from BE what the host, not the victim, gets).
#include <algorithm>
#include <cmath>
#include <set>
#include <sstream>
#include <string_view>

#include "colod/policy/tier.h"
#include "engine_state.h"

namespace colod::policy {

namespace {

// The host's share of the victim's wait (over the window and over the last rounds) from which the
// step is taken. The foreign phase's LS waited 88-100 % behind the hog; in the colod phase, with
// no hog, the probe's wait was at times half behind the host's odd tasks, and a step taken there
// cost BE work for nothing (colocation, session 33: the cap in 4 of 5 colod rounds).
constexpr double kHostShare = 0.8;

}  // namespace

// The BE a cpuset step of ep holds off the victim's CPUs and that run, as the step's antagonists
// (score: share of their CPU use), when the victim's tasks wait for a CPU (wait load at least
// wait_load_min), mostly behind the host, and the quota rung is next; empty otherwise.
std::vector<Antagonist> EngineState::uncontrolledCapTargets(const Episode& ep,
                                                            const Tracked& victim) const {
  std::vector<Antagonist> held;
  const auto lad = ladder(false);
  if (ep.memory || ep.next_rung < 0 || ep.next_rung >= static_cast<int>(lad.size()) ||
      lad[static_cast<size_t>(ep.next_rung)] != Lever::CpuQuota ||
      ep.escalations >= config_.actions.max_escalations || holdsQuota(ep) ||
      !behindUncontrolled(victim)) {
    return held;
  }
  // The step gives the victim CPU back: a victim over its threshold by its p99 alone, whose
  // tasks hardly wait, has none to get back (blame.sh duty, session 34: capped at a wait load
  // of 0.01, undone as useless a second later).
  const double waiting = windowWait(victim);
  if (waiting <= 0 || waiting < config_.detection.wait_load_min) {
    return held;
  }
  const WaitSplit& w = victim.waits;
  const double total = w.total();
  // Behind the host: another pod (an LS, a system pod) shares the victim's parents, and the
  // BE's load does not tip the weights against it. Over the window and now: the host's wait
  // from before the split says nothing about what the split left the victim.
  const double recent = w.recent_be_ns + w.recent_other_ns;
  if (total <= 0 || w.hostNs() < kHostShare * total || recent <= 0 ||
      w.recent_host_ns < kHostShare * recent) {
    return held;
  }
  double use = 0;
  std::set<std::string_view> seen;  // a BE two cpuset steps hold counts once
  for (const Step& step : ep.steps) {
    if (step.lever != Lever::Cpuset) {
      continue;
    }
    for (const std::string& id : step.targets) {
      auto it = tracked_.find(id);
      if (it == tracked_.end() || !seen.insert(id).second || !touchable(it->second) ||
          recentCpus(it->second) < kRunningCpuFraction) {
        continue;
      }
      Antagonist a;
      a.id = id;
      a.name = displayName(it->second.info);
      a.score = recentCpus(it->second);
      use += a.score;
      held.push_back(std::move(a));
    }
  }
  // A step of a cap at the floor takes nothing from them.
  if (held.empty() || (1.0 - config_.levers.quota_step_fraction) * use <= quotaFloor(held.size())) {
    return {};
  }
  for (Antagonist& a : held) {
    a.score /= use;
  }
  return held;
}

EngineState::RungResult EngineState::applyUncontrolledCap(Episode& ep,
                                                          const std::string& key,
                                                          Tracked& victim,
                                                          const std::vector<Antagonist>& held,
                                                          DecisionKind kind,
                                                          bool replacing,
                                                          std::vector<Decision>& out,
                                                          std::vector<Finding>& findings) {
  const int rung = ep.next_rung;
  std::string useless_why;
  if (judgedUseless(victim, Lever::CpuQuota, held, &useless_why)) {
    UselessRung& u = victim.useless[Lever::CpuQuota];
    if (!u.said) {
      u.said = true;
      findings.push_back({victim.info.id, "rung_not_retried",
                          displayName(victim.info) + ": rung " + std::to_string(rung + 1) +
                              " (cpu_quota) on the BE the split holds is not retried: " +
                              useless_why + ", and the evidence has not changed since"});
    }
    return RungResult::NothingToDo;
  }
  if (anyCooling(held, Lever::CpuQuota, replacing)) {
    return RungResult::Deferred;
  }
  Step step;
  step.lever = Lever::CpuQuota;
  step.rung = rung;
  step.antagonists = held;
  const bool complete = addQuotaTargets(key, rung, held, {}, replacing, step);
  if (step.targets.empty()) {
    return complete ? RungResult::NothingToDo : RungResult::Deferred;
  }
  double use = 0;
  for (const std::string& id : step.targets) {
    if (auto it = tracked_.find(id); it != tracked_.end()) {
      use += recentCpus(it->second);
    }
  }
  const double was = quota_budget_;
  if (quota_budget_ <= 0) {
    quota_budget_ =
        std::max(quotaFloor(quotaTargets()), (1.0 - config_.levers.quota_step_fraction) * use);
  }
  const WaitSplit& w = victim.waits;
  const double total = w.total();
  // uncontrolledCapTargets() found the held BE in a cpuset step of ep.
  const auto split = std::find_if(ep.steps.begin(), ep.steps.end(),
                                  [](const Step& s) { return s.lever == Lever::Cpuset; });
  const int split_rung = split == ep.steps.end() ? rung : split->rung + 1;
  std::ostringstream why;
  why << displayName(victim.info) << " waits behind the host on its CPUs ("
      << std::lround(100.0 * w.hostNs() / std::max(total, 1.0)) << "% of its wait) while rung "
      << split_rung << " (cpuset) holds BE off them: a parent cgroup's CPU weight is split over "
      << "the CPUs by its load, so the held BE's load on their CPUs lowers what its parents "
      << "weigh against the host on its own; one step, verified: BE budget "
      << std::round(use * 100) / 100 << " -> " << std::round(quota_budget_ * 100) / 100 << " CPUs";
  if (was > 0) {
    why << " (joining the BE budget in force)";
  }
  redistributeQuota(kind, "uncontrolled_cap", why.str(), &victim, &ep, held, out, findings);
  step.uncontrolled_cap = true;
  return pushQuotaStep(ep, std::move(step));
}

}  // namespace colod::policy
