// SPDX-License-Identifier: Apache-2.0
// The ladder: engage, verify, undo, escalate; BE that joins a restriction in force.
#include <algorithm>
#include <cmath>
#include <sstream>

#include "colod/policy/tier.h"
#include "engine_state.h"

namespace colod::policy {

namespace {

// The victim's on-CPU under an uncontrolled cap, against before it, from which the cap helped.
constexpr double kCapCpuGain = 1.2;

}  // namespace

// A rung goes to its antagonists together: while one of them that it would change cools down
// from its last change (it was just relaxed, say), the others wait with it. Applied to the rest
// alone, the rung restricted only the weaker ones (blame.sh cache t1: 100 ms after the
// antagonist's placement was relaxed, a light BE with a quarter of the evidence was moved alone
// while the antagonist waited out its cooldown).
bool EngineState::anyCooling(const std::vector<Antagonist>& antagonists,
                             Lever lever,
                             bool replacing) const {
  // Weights move CPU only inside a pod (see applyRung): a cross-pod antagonist is not changed.
  if (replacing || lever == Lever::CpuShares) {
    return false;
  }
  for (const Antagonist& a : antagonists) {
    auto it = tracked_.find(a.id);
    if (it == tracked_.end() || !touchable(it->second)) {
      continue;
    }
    if (auto rt = restrictions_.find(a.id);
        rt != restrictions_.end() && rt->second.count(lever) != 0) {
      continue;  // already restricted on this lever: shared, not changed
    }
    if (round_ - it->second.last_change_round < config_.actions.change_cooldown_intervals) {
      return true;
    }
  }
  return false;
}

// Applies ladder rung `rung` of episode ep: restricts the antagonists. NothingToDo when every
// antagonist is already at or below the rung (try the next one); Deferred when the changes
// wait for a cooldown or the round's budget (retry the same rung later).
EngineState::RungResult EngineState::applyRung(Episode& ep,
                                               const std::string& key,
                                               Tracked& victim,
                                               int rung,
                                               const std::vector<Antagonist>& antagonists,
                                               DecisionKind kind,
                                               bool replacing,
                                               std::vector<Decision>& out,
                                               std::vector<Finding>& findings) {
  bool deferred = false;
  const Lever lever = ladder(ep.memory)[static_cast<size_t>(rung)];
  if (anyCooling(antagonists, lever, replacing)) {
    return RungResult::Deferred;
  }
  if (lever == Lever::CpuQuota) {
    return applyQuotaRung(ep, key, victim, rung, antagonists, kind, replacing, out, findings);
  }
  Step step;
  step.lever = lever;
  step.rung = rung;
  step.antagonists = antagonists;
  for (const Antagonist& a : antagonists) {
    auto it = tracked_.find(a.id);
    if (it == tracked_.end()) {
      continue;
    }
    Tracked& t = it->second;
    if (lever == Lever::CpuShares && !victim.info.pod_uid.empty() && !t.info.pod_uid.empty() &&
        victim.info.pod_uid != t.info.pod_uid) {
      // CFS is hierarchical and NRI cannot change pod cgroups: the pod cgroup keeps kubelet's
      // weight, so a container's weight only redistributes CPU inside its own pod.
      findings.push_back(
          {t.info.id, "shares_ineffective",
           displayName(t.info) +
               ": cpu_shares skipped: its pod cgroup keeps "
               "kubelet's weight and CFS is hierarchical, so a container weight only "
               "moves CPU inside its pod (" +
               t.info.pod_uid + "), not to " + displayName(victim.info) + " in pod " +
               victim.info.pod_uid});
      continue;
    }
    auto& levers = restrictions_[t.info.id];
    if (auto jt = levers.find(lever); jt != levers.end()) {
      // Already restricted on this lever for another victim: share it.
      if (jt->second.owners.insert(key).second) {
        step.targets.push_back(t.info.id);
      }
      continue;
    }
    // An undo followed by the next rung in the same round is one replacement, not two changes.
    const bool cooling =
        !replacing && round_ - t.last_change_round < config_.actions.change_cooldown_intervals;
    if (cooling || !budget()) {
      deferred = true;
      if (levers.empty()) {
        restrictions_.erase(t.info.id);
      }
      continue;
    }
    auto values = restricted(t, victim, lever);
    if (!values) {
      findings.push_back({t.info.id, "at_floor",
                          displayName(t.info) + ": " + std::string(leverName(lever)) +
                              " cannot restrict it further (" +
                              describeValues(current(t, lever), lever) +
                              ": at or below the rung or floor, or unknown)"});
      if (levers.empty()) {
        restrictions_.erase(t.info.id);
      }
      continue;
    }
    Restriction r;
    r.lever = lever;
    r.rung = rung;
    r.applied = *values;
    r.original = originalOf(t.info.resources, lever, r.applied);
    // The registry may still show what we applied last time (it is refreshed after NRI
    // applies a change): then the true original is the one we remembered.
    if (auto lt = t.last_applied.find(lever);
        lt != t.last_applied.end() && lt->second == r.original) {
      r.original = t.last_original[lever];
    }
    t.last_applied[lever] = r.applied;
    t.last_original[lever] = r.original;
    r.owners.insert(key);
    std::ostringstream os;
    os << decisionKindName(kind) << " rung " << rung + 1 << " (" << leverName(lever)
       << "): " << victimPhrase(victim, ep.memory) << "; antagonist " << a.name << " ("
       << static_cast<int>(a.score * 100) << "% of the evidence";
    if (ep.memory) {
      os << ", grew " << a.memory_growth_bytes << " bytes";
    } else {
      os << " over the blame window: " << a.preemptions << " preemptions, " << a.wait_ns / 1000
         << " µs wait, " << a.oncpu_ns / 1000 << " µs on the victim's CPUs";
    }
    os << "); " << describeValues(current(t, lever), lever) << " -> "
       << describeValues(*values, lever) << moveNote(t, *values);
    t.last_change_round = round_;
    t.last_explanation = os.str();
    out.push_back(makeDecision(kind, lever, rung, t, *values,
                               restoreValues(r.original, lever, node_cpus_), &victim, &ep,
                               antagonists, cpuRule(victim, ep.memory), os.str()));
    levers.emplace(lever, std::move(r));
    step.targets.push_back(t.info.id);
    ++changes_this_round_;
  }
  if (step.targets.empty()) {
    return deferred ? RungResult::Deferred : RungResult::NothingToDo;
  }
  step.applied_tick = ticks_;
  ep.steps.push_back(std::move(step));
  return RungResult::Applied;
}

// The CFS quota another restriction on `id` keeps in force once `released` is given back: a
// cpuset move's quota and the quota rung's cap are one cgroup value (the daemon's overlay keeps
// the tighter), so "-> CFS quota max" alone said the opposite of what the container got.
std::string EngineState::quotaKeptNote(const std::string& id, Lever released) const {
  if (released != Lever::Cpuset && released != Lever::CpuQuota) {
    return {};
  }
  auto it = restrictions_.find(id);
  if (it == restrictions_.end()) {
    return {};
  }
  for (const auto& [lever, r] : it->second) {
    if (lever != released && (lever == Lever::Cpuset || lever == Lever::CpuQuota) &&
        r.applied.cpu_quota && *r.applied.cpu_quota > 0) {
      return " (" + describeValues(r.applied, Lever::CpuQuota) +
             " stays in force: " + std::string(leverName(lever)) + " rung " +
             std::to_string(r.rung + 1) + ")";
    }
  }
  return {};
}

// Removes the episode's ownership of one step; restores levers nobody else holds.
void EngineState::releaseStep(const std::string& key,
                              const Episode& ep,
                              const Step& step,
                              DecisionKind kind,
                              const std::string& rule,
                              const std::string& why,
                              const Tracked* victim,
                              std::vector<Decision>& out) {
  for (const std::string& id : step.targets) {
    auto it = restrictions_.find(id);
    if (it == restrictions_.end()) {
      continue;
    }
    auto jt = it->second.find(step.lever);
    if (jt == it->second.end()) {
      continue;
    }
    jt->second.owners.erase(key);
    if (!jt->second.owners.empty()) {
      continue;  // still needed by another victim
    }
    auto tt = tracked_.find(id);
    if (kind == DecisionKind::Relax && step.lever == Lever::Cpuset && tt != tracked_.end() &&
        holdIdle(ep, tt->second, jt->second)) {
      continue;  // idle: it stays off the victim's CPUs for the next episode (endIdleHolds)
    }
    if (tt != tracked_.end()) {
      Tracked& t = tt->second;
      const Resources orig = restoreValues(jt->second.original, step.lever, node_cpus_);
      std::string text = std::string(decisionKindName(kind)) + " " +
                         std::string(leverName(step.lever)) + " on " + displayName(t.info) + ": " +
                         why + "; " + describeValues(jt->second.applied, step.lever) + " -> " +
                         describeValues(orig, step.lever) + quotaKeptNote(id, step.lever);
      t.last_change_round = round_;
      t.last_explanation = text;
      out.push_back(makeDecision(kind, step.lever, step.rung, t, orig, orig, victim, &ep,
                                 step.antagonists, rule, std::move(text)));
    }
    it->second.erase(jt);
    if (it->second.empty()) {
      restrictions_.erase(it);
    }
  }
  if (step.lever == Lever::CpuQuota && !anyQuota()) {
    quota_budget_ = 0;
  }
}

// Adds the next rung on top of what is held; at the end of the ladder, tightens the quota.
// Returns whether something was changed; if not, ep.stop_why says why the ladder stops.
bool EngineState::escalateOrTighten(Episode& ep,
                                    const std::string& key,
                                    Tracked& v,
                                    std::vector<Decision>& out,
                                    std::vector<Finding>& findings) {
  if (!ep.exhausted && escalate(ep, key, v, DecisionKind::Escalate, out, findings)) {
    return true;
  }
  if (!ep.exhausted) {
    return false;
  }
  if (!ep.memory && behindUncontrolled(v)) {
    ep.stop_why = "the wait is behind work colod does not control";
    return false;
  }
  if (tightenQuota(ep, key, v, out, findings)) {
    return true;
  }
  ep.stop_why = holdsQuota(ep) ? "every rung was tried and the BE quota budget is at its floor"
                               : "every rung of the ladder was tried";
  return false;
}

// Tries rungs from ep.next_rung until one changes something. Returns true if one applied.
bool EngineState::escalate(Episode& ep,
                           const std::string& key,
                           Tracked& victim,
                           DecisionKind kind,
                           std::vector<Decision>& out,
                           std::vector<Finding>& findings,
                           bool replacing) {
  const auto lad = ladder(ep.memory);
  // On top of rungs in force, by the evidence gathered since the last one was applied.
  std::vector<Antagonist> antagonists = rank(victim, ep.memory, findings, !ep.steps.empty());
  if (antagonists.empty() && !ep.memory) {
    // Behind the host, with a split in force: the BE it holds still weigh on the victim's CPUs
    // through the parents they share (uncontrolled_cap.cpp). One quota step, verified.
    if (std::vector<Antagonist> held = uncontrolledCapTargets(ep, victim); !held.empty()) {
      const RungResult res =
          applyUncontrolledCap(ep, key, victim, held, kind, replacing, out, findings);
      if (res == RungResult::Deferred) {
        ++stats_.rate_limited;
        return false;
      }
      if (res == RungResult::Applied) {
        ++ep.next_rung;
        ++ep.escalations;
        victim.exhausted_said = false;
        startFreshEvidence(victim);
        startVerifying(key, ep, victim);
        return true;
      }
    }
  }
  if (antagonists.empty()) {
    ep.stop_why = behindUncontrolled(victim)
                      ? "the wait is behind work colod does not control"
                      : "no BE container is to blame (not enough evidence, or below the cut-off)";
    return false;
  }
  while (ep.next_rung < static_cast<int>(lad.size()) &&
         ep.escalations < config_.actions.max_escalations) {
    const int rung = ep.next_rung;
    std::string useless_why;
    if (!ep.memory &&
        judgedUseless(victim, lad[static_cast<size_t>(rung)], antagonists, &useless_why)) {
      // No engage -> undo -> engage loop (issue 15): the same evidence gets the same verdict.
      // Said once per judgement (a victim without an episode tries again every round).
      UselessRung& u = victim.useless[lad[static_cast<size_t>(rung)]];
      if (!u.said) {
        u.said = true;
        findings.push_back({victim.info.id, "rung_not_retried",
                            displayName(victim.info) + ": rung " + std::to_string(rung + 1) + " (" +
                                std::string(leverName(lad[static_cast<size_t>(rung)])) +
                                ") is not retried: " + useless_why +
                                ", and the evidence has not changed since"});
      }
      ++ep.next_rung;
      continue;
    }
    const RungResult res =
        applyRung(ep, key, victim, rung, antagonists, kind, replacing, out, findings);
    if (res == RungResult::Deferred) {
      ++stats_.rate_limited;
      return false;
    }
    ++ep.next_rung;
    ++ep.escalations;
    if (res == RungResult::Applied) {
      victim.exhausted_said = false;
      startFreshEvidence(victim);
      startVerifying(key, ep, victim);
      return true;
    }
  }
  ep.stop_why = ep.escalations >= config_.actions.max_escalations
                    ? "max_escalations (" + std::to_string(config_.actions.max_escalations) +
                          ") reached in this episode"
                    : "every rung of the ladder was tried";
  if (!ep.exhausted) {
    ep.exhausted = true;
    // Once per stretch of hurt: a victim whose new episode finds nothing to try again tries
    // every round.
    if (!victim.exhausted_said) {
      victim.exhausted_said = true;
      findings.push_back({victim.info.id, "ladder_exhausted",
                          displayName(victim.info) + ": " + ep.stop_why +
                              "; holding what helped (" + waitBehind(victim) + ")"});
    }
  }
  return false;
}

void EngineState::startVerifying(const std::string& key, Episode& ep, Tracked& victim) {
  Step& applied = ep.steps.back();
  // Who ran within the blame window is there already (a duty cycle is not a start). A BE
  // that another episode's cpuset holds off the victim's CPUs is benign only while that
  // hold lasts: this step shares the hold instead (session 19: relaxed by its owner, such a
  // BE went back beside this victim, and the step, believing it benign, let it stay). An
  // idle one too: released, it would join this step a round later (a flip for nothing).
  const int64_t since = ticks_ - config_.actions.blame_window_intervals;
  for (const auto& [id, t] : tracked_) {
    if (!touchable(t)) {
      continue;
    }
    if (applied.lever == Lever::Cpuset && heldCpusetShared(key, applied, t, victim)) {
      continue;
    }
    if (t.last_ran_tick >= since) {
      applied.running_at_apply.insert(id);
    }
  }
  applied.running_known = true;
  resetVerification(ep, victim);
}

void EngineState::resetVerification(Episode& ep, const Tracked& victim) const {
  ep.phase = Phase::Verifying;
  // In timer ticks: event rounds between them add data, not time.
  ep.verify_until = ticks_ + config_.actions.verify_intervals;
  ep.verify_hits = 0;
  ep.verify_intervals = 0;
  ep.verify_p99_sum = 0;
  ep.verify_wait_sum = 0;
  ep.verify_cpus_sum = 0;
  ep.start_p99 = victim.p99;
  ep.start_wait = windowWait(victim);
  ep.start_cpus = recentCpus(victim);
}

// Whether a cpuset restriction holds t (then t is not "running at apply" for `step`, a cpuset
// step of episode `key`). A hold that keeps t off `victim`'s CPUs (the victim spans the node, or
// the held CPUs are not its CPUs) is shared: the step owns it too, so t stays held while either
// episode needs it. A hold that puts t on the victim's CPUs is not shared: released, t joins
// the step (extendSteps).
bool EngineState::heldCpusetShared(const std::string& key,
                                   Step& step,
                                   const Tracked& t,
                                   const Tracked& victim) {
  auto it = restrictions_.find(t.info.id);
  if (it == restrictions_.end()) {
    return false;
  }
  auto jt = it->second.find(Lever::Cpuset);
  if (jt == it->second.end()) {
    return false;
  }
  Restriction& r = jt->second;
  if (r.owners.count(key) != 0) {
    return true;  // a target of this step already
  }
  const bool victim_pinned = !victim.cpus.empty() && victim.cpus.size() < node_cpus_.size();
  if (victim_pinned) {
    auto held = parseCpuList(r.applied.cpuset_cpus.value_or(""));
    if (!held || held->empty()) {
      r.idle_end_now = r.idleHold();
      return true;  // unknown: not benign either
    }
    for (int c : *held) {
      if (std::binary_search(victim.cpus.begin(), victim.cpus.end(), c)) {
        // On the victim's CPUs: joins when released. An idle hold nobody owns is released
        // this round (endIdleHolds), and joins the step with its CPUs the round after.
        r.idle_end_now = r.idleHold();
        return true;
      }
    }
  }
  // An idle hold a relax left in place is taken over as it is: no update at all (at 1000
  // containers, each episode moved ~330 idle BE off and back again 1-2 s later).
  r.idle_since_tick = kNever;
  r.idle_victim.clear();
  r.idle_end_now = false;
  r.owners.insert(key);
  step.targets.push_back(t.info.id);
  return true;
}

// A BE container that was not running when a cross-pod rung (cpuset, quota) was applied joins
// it while the rung protects a victim: otherwise, when it starts, it takes the CPUs the rung
// freed, the victim is hurt again, and a new backlog builds before the next detection
// (measured: the antagonist started mid-phase undid the cpuset split and forced the quota
// rung). Idle BE joins a cpuset at once, BE that starts running joins the quota budget. The
// restriction is owned by the same episode and released with it.
void EngineState::extendSteps(const std::string& key,
                              Episode& ep,
                              std::vector<Decision>& out,
                              std::vector<Finding>& findings) {
  if (ep.memory || ep.steps.empty()) {
    return;
  }
  auto vit = tracked_.find(ep.victim_id);
  if (vit == tracked_.end() || ep.victim_gone) {
    return;
  }
  Tracked& v = vit->second;
  for (Step& step : ep.steps) {
    if (step.lever != Lever::Cpuset && step.lever != Lever::CpuQuota) {
      continue;
    }
    if (!step.running_known) {
      // Seeded after a restart: who was benign is not known; what runs now stays as it is.
      for (const auto& [id, t] : tracked_) {
        if (touchable(t) && t.last_ran_round == round_) {
          step.running_at_apply.insert(id);
        }
      }
      step.running_known = true;
      continue;
    }
    std::vector<Tracked*> joining;
    for (auto& [id, t] : tracked_) {
      // Cpuset: idle BE joins too (a cpuset costs an idle container nothing, and when it
      // starts it is already off the victim's CPUs: no transient at all). Quota: only BE that
      // runs (an idle container's share of the budget would be a bare floor).
      const bool running = t.sampled && cpusUsed(t) >= kRunningCpuFraction;
      if (!touchable(t) || !t.sampled || step.running_at_apply.count(id) != 0 ||
          (step.lever == Lever::CpuQuota && !running)) {
        continue;
      }
      auto rit = restrictions_.find(id);
      if (rit != restrictions_.end() && rit->second.count(step.lever) != 0) {
        if (step.lever == Lever::Cpuset && rit->second.at(step.lever).idleHold()) {
          (void)heldCpusetShared(key, step, t, v);  // an idle hold: taken over as it is
        }
        continue;
      }
      joining.push_back(&t);
    }
    if (joining.empty()) {
      continue;
    }
    if (step.lever == Lever::CpuQuota) {
      const size_t before = step.targets.size();
      std::vector<std::string> ids;
      for (const Tracked* t : joining) {
        ids.push_back(t->info.id);
      }
      addQuotaTargets(key, step.rung, {}, ids, false, step);
      if (step.targets.size() != before) {
        std::ostringstream why;
        why << "BE started running while " << displayName(v.info)
            << " is protected by the BE quota budget: capped within it";
        redistributeQuota(DecisionKind::Escalate, "be_joined_restriction", why.str(), &v, &ep,
                          step.antagonists, out, findings);
      }
      continue;
    }
    for (Tracked* t : joining) {
      const bool cooling =
          round_ - t->last_change_round < config_.actions.change_cooldown_intervals;
      if (cooling || !budget()) {
        continue;
      }
      auto values = restricted(*t, v, Lever::Cpuset);
      if (!values) {
        continue;
      }
      Restriction r;
      r.lever = Lever::Cpuset;
      r.rung = step.rung;
      r.applied = *values;
      r.original = originalOf(t->info.resources, Lever::Cpuset, r.applied);
      if (auto lt = t->last_applied.find(Lever::Cpuset);
          lt != t->last_applied.end() && lt->second == r.original) {
        r.original = t->last_original[Lever::Cpuset];
      }
      t->last_applied[Lever::Cpuset] = r.applied;
      t->last_original[Lever::Cpuset] = r.original;
      r.owners.insert(key);
      std::ostringstream os;
      os << "extend rung " << step.rung + 1 << " (cpuset) to " << displayName(t->info) << ": "
         << (cpusUsed(*t) >= kRunningCpuFraction ? "it started running (" : "it is idle (")
         << static_cast<int>(cpusUsed(*t) * 100) << "% of a CPU) while " << displayName(v.info)
         << " is protected by it, so it starts off the victim's CPUs; "
         << describeValues(current(*t, Lever::Cpuset), Lever::Cpuset) << " -> "
         << describeValues(*values, Lever::Cpuset) << moveNote(*t, *values);
      t->last_change_round = round_;
      t->last_explanation = os.str();
      out.push_back(makeDecision(DecisionKind::Escalate, Lever::Cpuset, step.rung, *t, *values,
                                 restoreValues(r.original, Lever::Cpuset, node_cpus_), &v, &ep,
                                 step.antagonists, "be_joined_restriction", os.str()));
      restrictions_[t->info.id].emplace(Lever::Cpuset, std::move(r));
      step.targets.push_back(t->info.id);
      ++changes_this_round_;
    }
  }
}

void EngineState::stepEpisode(const std::string& key,
                              Episode& ep,
                              std::vector<Decision>& out,
                              std::vector<Finding>& findings) {
  auto vit = tracked_.find(ep.victim_id);
  if (ep.victim_gone || vit == tracked_.end()) {
    // Victim removed: give everything back.
    while (!ep.steps.empty()) {
      releaseStep(key, ep, ep.steps.back(), DecisionKind::Restore, "victim_removed",
                  "victim " + ep.victim_id + " is gone", nullptr, out);
      ep.steps.pop_back();
    }
    return;
  }
  Tracked& v = vit->second;
  if (!v.sampled) {
    return;  // no data this round: hold
  }
  const bool hit = ep.memory ? v.mem_hit : v.cpu_hit;
  const int hits = ep.memory ? v.mem_hits : v.cpu_hits;
  int quiet = ep.memory ? v.mem_quiet_streak : v.quiet_streak;
  if (ep.quiet_from_tick != kNever) {
    quiet = static_cast<int>(std::min<int64_t>(quiet, ticks_ - ep.quiet_from_tick));
  }
  if (ep.phase == Phase::Verifying) {
    ++ep.verify_intervals;
    ep.verify_hits += hit ? 1 : 0;
    ep.verify_p99_sum += v.p99;
    ep.verify_wait_sum += v.wait_load;
    ep.verify_cpus_sum += recentCpus(v);
    if (ticks_ < ep.verify_until) {
      return;
    }
    const auto mean = static_cast<double>(ep.verify_p99_sum) /
                      static_cast<double>(std::max(ep.verify_intervals, 1));
    const double mean_wait =
        ep.verify_wait_sum / static_cast<double>(std::max(ep.verify_intervals, 1));
    // A backlog built up before the action drains for seconds (p99 stays high), but the
    // victim's run-queue wait drops as soon as it gets CPU again: a clear drop counts.
    const bool wait_dropped = !ep.memory && ep.start_wait > 0 &&
                              ep.start_wait >= config_.detection.wait_load_min &&
                              mean_wait <= config_.actions.improve_ratio * ep.start_wait;
    // The cap taken against the host's wait is there to give the victim CPU back from the host:
    // its on-CPU rising says so, while a backlog that built up before it keeps its tasks queued
    // (colocation foreign phase, session 33: applied a second after the BE arrived, the probe's
    // wait load read 1.7 -> 1.49 as its queue grew, and the cap was undone for the phase).
    const bool cap_gave_cpu =
        !ep.memory && !ep.steps.empty() && ep.steps.back().uncontrolled_cap && ep.start_cpus > 0 &&
        ep.verify_cpus_sum / static_cast<double>(std::max(ep.verify_intervals, 1)) >=
            kCapCpuGain * ep.start_cpus;
    const bool improved =
        ep.verify_hits * 2 < ep.verify_intervals || wait_dropped || cap_gave_cpu ||
        (!ep.memory && mean <= config_.actions.improve_ratio * static_cast<double>(ep.start_p99));
    if (improved || ep.steps.empty()) {
      ep.phase = Phase::Holding;
      if (improved && !ep.steps.empty() && !ep.memory) {
        v.effective_rung = ep.steps.back().rung;
      }
      if (improved && hit && !ep.steps.empty() && budget()) {
        // Partially effective: keep it and add the next rung on top (never undo a rung that
        // reduced the victim's wait).
        // The finding says what follows: an escalation, or why the ladder stops there.
        std::ostringstream why;
        why << displayName(v.info) << ": rung " << ep.steps.back().rung + 1 << " ("
            << leverName(ep.steps.back().lever) << ") helped (wait load "
            << std::round(ep.start_wait * 100) / 100 << " -> " << std::round(mean_wait * 100) / 100
            << ", p99 mean " << static_cast<uint64_t>(mean)
            << " µs) but the victim is still over threshold: kept, ";
        std::vector<Finding> after;
        if (escalateOrTighten(ep, key, v, out, after)) {
          why << "escalating on top";
        } else {
          why << "and the ladder stops: " << ep.stop_why << " (" << waitBehind(v) << ")";
          ep.stop_said = true;
        }
        findings.push_back({v.info.id, "rung_partially_effective", why.str()});
        findings.insert(findings.end(), after.begin(), after.end());
      }
      return;
    }
    // Not improved, but the top rung is the quota budget and it can still shrink: tighten
    // instead of undoing (a loose first budget may not bind yet). Not against uncontrolled
    // work: a tighter BE budget cannot help there.
    if (!ep.memory && ep.steps.back().lever == Lever::CpuQuota && canTighten(ep) && budget() &&
        !behindUncontrolled(v)) {
      tightenQuota(ep, key, v, out, findings);
      return;
    }
    // Not improved: undo this rung, then try the next one.
    if (!budget()) {
      ++stats_.rate_limited;
      return;
    }
    const Step failed = ep.steps.back();
    ep.steps.pop_back();
    std::ostringstream why;
    why << "rung " << failed.rung + 1 << " did not help within " << config_.actions.verify_intervals
        << " intervals (" << ep.verify_hits << " of " << ep.verify_intervals
        << " still over threshold";
    if (!ep.memory && ep.start_wait > 0) {
      why << ", wait load " << std::round(ep.start_wait * 100) / 100 << " -> "
          << std::round(mean_wait * 100) / 100;
    }
    why << ")";
    if (!ep.memory) {
      // Judged useless on this evidence: not retried for this victim until it changes.
      UselessRung& u = v.useless[failed.lever];
      u.antagonists.clear();
      for (const Antagonist& a : failed.antagonists) {
        u.antagonists.insert(a.id);
      }
      u.foreign_share = foreignShare(v);
      std::ostringstream judged;
      judged << "it did not help in round " << round_ << " against the same antagonists";
      if (u.foreign_share > 0) {
        judged << " with " << static_cast<int>(std::lround(u.foreign_share * 100))
               << "% of the wait behind uncontrolled work";
      }
      u.why = judged.str();
      why << "; not retried for this victim until the evidence changes";
    }
    const size_t before = out.size();
    releaseStep(key, ep, failed, DecisionKind::Undo, "rung_not_effective", why.str(), &v, out);
    changes_this_round_ += static_cast<int>(out.size() - before);
    ep.phase = Phase::Holding;
    // The next rung only if the victim is still hurt now; otherwise hold (the episode ends
    // once the window is quiet, or escalates from the next rung if it is hurt again).
    if (hit) {
      escalate(ep, key, v, DecisionKind::Escalate, out, findings, true);
    }
    return;
  }
  holdEpisode(key, ep, v, hit, hits, quiet, out, findings);
}

}  // namespace colod::policy
