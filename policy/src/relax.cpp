// SPDX-License-Identifier: Apache-2.0
// Holding and relaxing: a quiet victim gives back one rung at a time, unless that would
// bring the contention straight back.
#include <algorithm>
#include <cmath>
#include <sstream>

#include "colod/policy/tier.h"
#include "engine_state.h"

namespace colod::policy {

// Why giving back the top cross-pod rung (cpuset, quota) now would bring the contention back,
// or nullopt when it may be given back. A quiet victim only shows that the rung works, not that
// it is no longer needed: relaxing while BE still runs flat out re-creates the backlog (the
// full loop measured a relax -> hurt -> re-engage cycle costing LS ~0.3 s of queueing each
// time). So the rung is held while (a) the BE containers it restricts use >= 90 % of what it
// leaves them, or queue for it (kQueuedBeTasks: they would take more), and (b) the LS demand
// (on-CPU of the non-BE containers) is more than 80 % of what the CPU weights would give LS against
// the running BE containers without it. It is given back as soon as BE stops or slows, or the LS
// demand falls.
std::optional<std::string> EngineState::relaxWouldHurt(const Step& top, const Tracked& v) const {
  if (top.lever != Lever::Cpuset && top.lever != Lever::CpuQuota) {
    return std::nullopt;
  }
  double be_used = 0;
  double be_waiting = 0;
  std::set<int> allowed_cpus;
  double capped = 0;  // what the cpuset step leaves them, a moved container's quota included
  bool throttled = false;
  for (const std::string& id : top.targets) {
    auto it = tracked_.find(id);
    if (it == tracked_.end()) {
      continue;
    }
    be_used += recentCpus(it->second);
    be_waiting += recentWaiting(it->second);
    if (top.lever == Lever::Cpuset) {
      const std::vector<int> cpus = targetCpus(it->second);
      allowed_cpus.insert(cpus.begin(), cpus.end());
      const Resources applied = current(it->second, Lever::Cpuset);
      const bool quota = applied.cpu_quota && *applied.cpu_quota > 0;
      capped += std::min(quotaCpus(applied), static_cast<double>(cpus.size()));
      // A moved container held to its quota says so by being throttled; its use over one tick
      // is not aligned with the CFS period and reads a little under the quota (blame.sh's
      // other-cpus trials gave the move back 1 s after it was made on 0.085 of a 0.1 quota).
      throttled = throttled || (quota && it->second.sample->nr_throttled > 0);
    }
  }
  const double allowance = top.lever == Lever::Cpuset
                               ? std::min(static_cast<double>(allowed_cpus.size()), capped)
                               : quota_budget_;
  const bool queued = be_waiting >= kQueuedBeTasks;
  if (allowance <= 0 || (be_used < kSaturatedFraction * allowance && !throttled && !queued)) {
    return std::nullopt;
  }
  auto beUse = [&] {
    std::ostringstream use;
    use << "the BE containers it restricts use " << std::round(be_used * 100) / 100 << " of the "
        << std::round(allowance * 100) / 100 << " CPUs it leaves them";
    if (queued) {
      use << " with " << std::round(be_waiting * 10) / 10 << " of their tasks queued";
    }
    return use.str();
  };
  if (v.relax_backoff > 1 && recentCpus(v) >= 0.5 * v.rehurt_cpus) {
    // A relax beside BE running like this already hurt the victim again soon after (the relax
    // backoff grew), and it asks for as much CPU as then: the weights did not protect it,
    // whatever share they promise. The colocation benchmark's busy phases went engage -> relax
    // -> engage every 1-4 s on the weight rule below, each cycle an LS p99 spike. Once its
    // demand has halved, the weight rule decides again (the BE harvests what it leaves).
    std::ostringstream why;
    why << displayName(v.info) << " is quiet, but " << leverName(top.lever)
        << " is held: " << beUse() << ", and the last relax beside them hurt it again within "
        << 2 * config_.actions.quiet_intervals * (v.relax_backoff / 2) << " intervals";
    return why.str();
  }
  // On the victim's CPUs (a pinned victim competes only there, as weightsProtect() counts at
  // admission; blame.sh's duty trials relaxed a placement 1-4 s after it was made because the
  // whole node's share was compared, and the LS was hurt again): the protected demand there,
  // against the running BE the relax would put there (the step's targets) or that is there.
  const std::vector<int>& vcpus = v.cpus.empty() ? node_cpus_ : v.cpus;
  auto overlaps = [&](const std::vector<int>& cpus) {
    const std::vector<int>& c = cpus.empty() ? node_cpus_ : cpus;
    return std::any_of(c.begin(), c.end(),
                       [&](int x) { return std::binary_search(vcpus.begin(), vcpus.end(), x); });
  };
  double ls_demand = 0;
  double ls_weight = 0;
  double be_weight = 0;
  // The victim's CPUs a running BE may use once the rung is gone. A cpuset rung's targets go
  // back to all of them; any other BE keeps the cpuset it has now: a quota rung on top of a
  // split leaves the split. A CPU no BE may use is the LS's whole, not a weighted share of it:
  // counted as shared, a quota taken on top of an admission split was held for a whole phase
  // (colocation colod phase, BE at 0.2 CPU and half its work) and for the last 10 % step of the
  // dynamic phase.
  std::vector<char> shared(vcpus.size(), 0);
  auto share = [&](const std::vector<int>& cpus) {
    for (int c : cpus.empty() ? node_cpus_ : cpus) {
      auto at = std::lower_bound(vcpus.begin(), vcpus.end(), c);
      if (at != vcpus.end() && *at == c) {
        shared[static_cast<size_t>(at - vcpus.begin())] = 1;
      }
    }
  };
  for (const auto& [id, t] : tracked_) {
    // Ran or queued over the last tick, in this round's snapshot or not (recentCpus()).
    if (!t.sampled && recentCpus(t) <= 0 && recentWaiting(t) <= 0) {
      continue;
    }
    if (t.info.exclusive_cpus) {
      continue;  // on CPUs of its own: neither competes on the shared ones
    }
    const double w = cpuWeight(t);
    if (t.tier == Tier::Be) {
      const bool targeted =
          std::find(top.targets.begin(), top.targets.end(), id) != top.targets.end();
      const bool running =
          recentCpus(t) >= kRunningCpuFraction || recentWaiting(t) >= kRunningCpuFraction;
      if (!running) {
        continue;
      }
      const std::vector<int> cpus = targetCpus(t);
      if (targeted || overlaps(cpus)) {
        be_weight += w;
        share(targeted && top.lever == Lever::Cpuset ? vcpus : cpus);
      }
    } else if (id == v.info.id || overlaps(t.cpus)) {
      ls_demand += recentCpus(t);
      ls_weight += w;
    }
  }
  const auto n_shared = static_cast<double>(std::count(shared.begin(), shared.end(), 1));
  const double free_cpus = static_cast<double>(vcpus.size()) - n_shared;
  const double ls_share = free_cpus + n_shared * ls_weight / std::max(ls_weight + be_weight, 1.0);
  if (ls_demand <= kFitsShareFraction * ls_share) {
    return std::nullopt;
  }
  std::ostringstream why;
  why << displayName(v.info) << " is quiet, but " << leverName(top.lever) << " is held: " << beUse()
      << ", and the non-BE demand of " << std::round(ls_demand * 100) / 100
      << " CPUs is above 80% of the " << std::round(ls_share * 100) / 100
      << " CPUs the weights would give it on its CPUs against the running BE without the rung";
  if (free_cpus > 0) {
    why << " (" << free_cpus << " of them with no BE)";
  }
  return why.str();
}

// What says the top rung holds nothing back, or nullopt: every BE it restricts has not run
// (kRunningCpuFraction of a CPU) for `need` rounds since the rung was applied. The victim may
// still be hurt, but not by them: the wait is behind something else, and keeping an idle BE
// restricted only costs it when it comes back (a vm e2e run kept a paused hog capped at the
// quota floor for a minute while the LS waited behind the harness).
std::optional<std::string> EngineState::targetsIdle(const Step& top, int64_t need) const {
  if (top.targets.empty()) {
    return std::nullopt;
  }
  int64_t idle_for = INT64_MAX;
  for (const std::string& id : top.targets) {
    auto it = tracked_.find(id);
    if (it == tracked_.end()) {
      continue;  // gone: holds nothing
    }
    const int64_t since = std::max(it->second.last_ran_tick, top.applied_tick);
    if (since == kNever) {
      return std::nullopt;  // not known when it last ran or when the rung came
    }
    idle_for = std::min(idle_for, ticks_ - since);
  }
  if (idle_for < need) {
    return std::nullopt;
  }
  std::ostringstream why;
  why << (top.targets.size() == 1 ? "the BE it restricts has"
                                  : "the BE containers it restricts have")
      << " not run for " << (idle_for == INT64_MAX ? need : idle_for)
      << " intervals: it holds nothing back";
  return why.str();
}

// Holding: escalate when hurt again, relax one rung after enough quiet intervals, or when the
// rung's BE has been idle for half the blame window.
void EngineState::holdEpisode(const std::string& key,
                              Episode& ep,
                              Tracked& v,
                              bool hit,
                              int hits,
                              int quiet,
                              std::vector<Decision>& out,
                              std::vector<Finding>& findings) {
  // A rung on BE that stopped running is given back even while the victim is still hurt (by
  // something else: with the BE idle, its wait is not theirs). Idle counts as in attribution
  // (half the blame window without running), so a bursty antagonist keeps its rung between
  // bursts; the relax backoff stretches it when the BE comes back and hurts again.
  const int need_quiet = config_.actions.quiet_intervals * v.relax_backoff;
  if (!ep.memory && !ep.steps.empty() && quiet < need_quiet &&
      ticks_ - ep.last_relax_tick >= config_.actions.relax_cooldown_intervals) {
    const int64_t idle_need =
        static_cast<int64_t>(
            std::max(config_.actions.blame_window_intervals / 2, config_.actions.quiet_intervals)) *
        v.relax_backoff;
    if (auto idle = targetsIdle(ep.steps.back(), idle_need); idle && budget()) {
      relaxTop(key, ep, v, "target_idle",
               displayName(v.info) +
                   (hit ? " is still over its threshold, but " : " is calmer, and ") + *idle,
               out);
      ep.stop_said = false;
      return;
    }
  }
  if (hits >= config_.detection.hit_intervals && hit) {
    // A rung on top only once the one below has been in force for verify_intervals, as long as
    // a rung the ladder applies is verified. An admission placement is held, not verified, and
    // the hits that start its climb may come from before it: the quota rung followed
    // placements within 150 ms, driven by an LS hurt behind the host before the BE arrived,
    // and capped every BE under its budget (colocation colod r5: BE -25 % at the same LS p99;
    // blame.sh light, 2 of 3 trials: the light innocent capped; session 29).
    // A step rebuilt from the journal after a restart has been in force since before it: the
    // ladder does not wait on it again (an incident colod restarted in would cost 1 s more).
    if (!ep.memory && !ep.steps.empty() && !ep.steps.back().seeded &&
        ticks_ - ep.steps.back().applied_tick < config_.actions.verify_intervals) {
      findings.push_back({v.info.id, "rung_settling",
                          displayName(v.info) + " is over its threshold under rung " +
                              std::to_string(ep.steps.back().rung + 1) + " (" +
                              std::string(leverName(ep.steps.back().lever)) + "), in force for " +
                              std::to_string(ticks_ - ep.steps.back().applied_tick) +
                              " intervals: nothing goes on top before " +
                              std::to_string(config_.actions.verify_intervals) +
                              " (verify_intervals)"});
      return;
    }
    if (!budget()) {
      return;
    }
    if (escalateOrTighten(ep, key, v, out, findings)) {
      ep.stop_said = false;
    } else if (!ep.stop_said && !ep.stop_why.empty()) {
      // Said once per hold: the victim is still hurt and nothing more follows, and why.
      ep.stop_said = true;
      findings.push_back({v.info.id, "ladder_stopped",
                          displayName(v.info) +
                              " is still over its threshold but the ladder "
                              "stops: " +
                              ep.stop_why + "; the remaining wait is " + waitBehind(v)});
    }
    return;
  }
  ep.stop_said = false;
  if (quiet >= need_quiet && !ep.steps.empty() &&
      ticks_ - ep.last_relax_tick >= config_.actions.relax_cooldown_intervals && budget()) {
    const Step& top = ep.steps.back();
    const double node = nodeCpus();
    if (!ep.memory) {
      if (auto held = relaxWouldHurt(top, v)) {
        if (!ep.relax_held) {
          ep.relax_held = true;
          findings.push_back({v.info.id, "relax_held", *held});
        }
        return;
      }
      ep.relax_held = false;
    }
    const double ceiling = top.lever == Lever::CpuQuota ? quotaCeiling() : node;
    if (top.lever == Lever::CpuQuota && quota_budget_ > 0 && quota_budget_ + 1e-6 < ceiling &&
        quota_budget_ + config_.levers.quota_step_fraction * node < node) {
      if (auto other = budgetStillNeeded(key)) {
        // Raised for this quiet victim, the budget is raised for that one too (colocation
        // foreign phase, session 33: a quiet redis gave the BE their CPU back in two steps
        // while the probe beside it, still hurt, relied on the same cap).
        if (!ep.budget_held) {
          ep.budget_held = true;
          findings.push_back({v.info.id, "relax_held",
                              displayName(v.info) +
                                  " is quiet, but the BE quota budget also "
                                  "protects " +
                                  *other +
                                  ", whose own relax rule does not give it back yet: kept"});
        }
        return;
      }
      ep.budget_held = false;
      // Give the quota back step by step: raise the aggregate budget, keep the rung. Not past
      // what the capped BE can use at all (their cpusets): there it holds nothing back, and
      // the next relax gives the rung back.
      const double was = quota_budget_;
      quota_budget_ = std::min(quota_budget_ + config_.levers.quota_step_fraction * node, ceiling);
      std::ostringstream why;
      why << displayName(v.info) << " quiet for " << quiet << " intervals: BE budget "
          << std::round(was * 100) / 100 << " -> " << std::round(quota_budget_ * 100) / 100
          << " CPUs";
      const std::vector<Antagonist> antagonists = top.antagonists;  // top may go below
      redistributeQuota(DecisionKind::Relax, "quota_budget_relaxed", why.str(), &v, &ep,
                        antagonists, out, findings);
      if (ep.steps.back().targets.empty()) {
        // Every cap it held was given back (none bound any more): the rung itself goes.
        relaxTop(key, ep, v, "victim_quiet", why.str(), out);
        return;
      }
      ep.last_relax_tick = ticks_;
      v.last_relax_tick = ticks_;
      return;
    }
    relaxTop(key, ep, v, "victim_quiet",
             displayName(v.info) + " quiet for " + std::to_string(quiet) + " intervals", out);
  }
}

// Whether a cpuset restriction its last owner (episode `ep`) relaxes stays in place as an idle
// hold. Only while the BE is idle: a cpuset costs an idle container nothing, and the next victim
// hurt finds it off its CPUs already (scale.sh acting at 1000 containers: each episode moved
// ~330 idle BE off the victim's CPUs and gave them all back 1-2 s later, ~660 runtime updates
// every ~10 s, each one a runc process behind a real containerd). A BE that runs is given back
// at once, as before: it may want the CPUs.
bool EngineState::holdIdle(const Episode& ep, Tracked& t, Restriction& r) {
  // Idle over the whole blame window: an antagonist that has just stopped is given back as
  // before (it was moved for what it did, and its owner may come back for it).
  const int hold = config_.actions.idle_hold_intervals;
  if (hold <= 0 || !t.sampled || runsOrQueues(t) || recentCpus(t) >= kRunningCpuFraction ||
      (t.last_ran_tick != kNever &&
       ticks_ - t.last_ran_tick < config_.actions.blame_window_intervals)) {
    return false;
  }
  r.idle_since_tick = ticks_;
  r.idle_victim = ep.victim_id;
  r.idle_end_now = false;
  std::ostringstream os;
  os << "cpuset held while idle: the rung that moved it off the CPUs of ";
  if (auto vit = tracked_.find(ep.victim_id); vit != tracked_.end()) {
    os << displayName(vit->second.info);
  } else {
    os << ep.victim_id;
  }
  os << " was relaxed, but it does not run, so it stays at "
     << describeValues(r.applied, Lever::Cpuset)
     << " for the next victim (no update); given back when it runs, or after " << hold
     << " intervals";
  t.last_explanation = os.str();
  return true;
}

// Gives back the idle holds that end this round: the BE runs (it may want the CPUs), the hold
// has lasted actions.idle_hold_intervals, the victim it protected is gone (a journal entry must
// name a victim colod knows), or it sits on a new victim's CPUs (heldCpusetShared).
void EngineState::endIdleHolds(std::vector<Decision>& out) {
  const int hold = config_.actions.idle_hold_intervals;
  for (auto it = restrictions_.begin(); it != restrictions_.end();) {
    auto jt = it->second.find(Lever::Cpuset);
    if (jt == it->second.end() || !jt->second.idleHold() || !jt->second.owners.empty()) {
      ++it;
      continue;
    }
    auto tt = tracked_.find(it->first);  // only for a hold: most restrictions are owned
    if (tt == tracked_.end()) {
      ++it;
      continue;
    }
    Restriction& r = jt->second;
    Tracked& t = tt->second;
    const bool runs = runsOrQueues(t);
    const int64_t held = ticks_ - r.idle_since_tick;
    const bool victim_gone = tracked_.count(r.idle_victim) == 0;
    std::string why;
    if (runs) {
      std::ostringstream os;
      os << "it runs again (" << static_cast<int>(cpusUsed(t) * 100) << "% of a CPU, "
         << std::round(recentWaiting(t) * 10) / 10
         << " tasks queued) and no victim's rung holds it";
      why = os.str();
    } else if (r.idle_end_now) {
      why = "it sits on the CPUs of a victim now protected: it joins that victim's rung instead";
    } else if (victim_gone) {
      why = "the victim it was held for is gone";
    } else if (hold <= 0 || held >= hold) {
      why = "held idle for " + std::to_string(held) + " intervals and no victim needed it";
    } else {
      ++it;
      continue;
    }
    if (!budget() || round_ - t.last_change_round < config_.actions.change_cooldown_intervals) {
      ++stats_.rate_limited;
      ++it;
      continue;
    }
    const Resources orig = restoreValues(r.original, Lever::Cpuset, node_cpus_);
    std::string text = "relax cpuset on " + displayName(t.info) + " (idle hold ended): " + why +
                       "; " + describeValues(r.applied, Lever::Cpuset) + " -> " +
                       describeValues(orig, Lever::Cpuset) +
                       quotaKeptNote(t.info.id, Lever::Cpuset);
    t.last_change_round = round_;
    t.last_explanation = text;
    out.push_back(makeDecision(DecisionKind::Relax, Lever::Cpuset, r.rung, t, orig, orig, nullptr,
                               nullptr, {}, "idle_hold_ended", std::move(text)));
    ++changes_this_round_;
    it->second.erase(jt);
    it = it->second.empty() ? restrictions_.erase(it) : std::next(it);
  }
}

std::optional<std::string> EngineState::budgetStillNeeded(const std::string& key) const {
  for (const auto& [k, ep] : episodes_) {
    if (k == key || ep.memory || ep.victim_gone || !holdsQuota(ep)) {
      continue;
    }
    auto vit = tracked_.find(ep.victim_id);
    if (vit == tracked_.end()) {
      continue;
    }
    // Not quiet by the rule its own episode gives a budget back by (a hit comes and goes round
    // by round; a quiet streak restarts at a placement, and a relax that hurt again asks more).
    const Tracked& o = vit->second;
    if (ep.phase == Phase::Verifying) {
      return displayName(o.info);  // its last step is being judged: not given back under it
    }
    int64_t quiet = o.quiet_streak;
    if (ep.quiet_from_tick != kNever) {
      quiet = std::min<int64_t>(quiet, ticks_ - ep.quiet_from_tick);
    }
    if (quiet < static_cast<int64_t>(config_.actions.quiet_intervals) * o.relax_backoff) {
      return displayName(o.info);
    }
  }
  return std::nullopt;
}

// Gives back the episode's top step (a Relax decision per target nobody else holds).
void EngineState::relaxTop(const std::string& key,
                           Episode& ep,
                           Tracked& v,
                           const std::string& rule,
                           const std::string& why,
                           std::vector<Decision>& out) {
  const Step last = ep.steps.back();
  ep.steps.pop_back();
  const size_t before = out.size();
  releaseStep(key, ep, last, DecisionKind::Relax, rule, why, &v, out);
  changes_this_round_ += static_cast<int>(out.size() - before);
  ep.last_relax_tick = ticks_;
  v.last_relax_tick = ticks_;
  // Let the next relax try the rung again later if it comes back.
  ep.next_rung = ep.steps.empty() ? 0 : ep.steps.back().rung + 1;
  ep.exhausted = false;
  ep.escalations = static_cast<int>(ep.steps.size());
}

}  // namespace colod::policy
