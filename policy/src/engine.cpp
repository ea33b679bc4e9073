// SPDX-License-Identifier: Apache-2.0
// The decision engine: the facade, the registry and one round. Time is counted in rounds (one
// evaluate() per interval); now_ns only stamps decisions. Every container map is an ordered
// std::map so iteration order, and so the output, depends only on the input (determinism).
// The parts of a round live beside this file; engine_state.h lists them.
#include "colod/policy/engine.h"

#include <algorithm>
#include <array>
#include <cerrno>
#include <cmath>
#include <sstream>

#include "colod/policy/tier.h"
#include "engine_state.h"

namespace colod::policy {

// --- registry --------------------------------------------------------------------------
void EngineState::upsert(ContainerInfo info, bool registered) {
  auto [it, inserted] = tracked_.try_emplace(info.id);
  Tracked& t = it->second;
  t.registered = t.registered || registered;
  if (registered) {
    admitted_unlisted_.erase(info.id);  // created: the registry lists it
  }
  if (inserted) {
    index_.emplace(std::string_view(it->first), &t);
  }
  TierResult tr = classifyTier(info);
  for (const auto& u : tr.unknown) {
    pending_findings_.push_back({info.id, "unknown_tier",
                                 "unknown value \"" + u.value + "\" of " + u.key + " (" + u.where +
                                     ") on " + displayName(info) + "; ignored"});
  }
  if (tr.tier == Tier::Unknown && inserted) {
    pending_findings_.push_back({info.id, "unclassified",
                                 displayName(info) +
                                     " has no tier (no annotation/label, cgroup parent \"" +
                                     info.cgroup_parent + "\"): never a victim or target"});
  }
  t.tier = tr.tier;
  t.tier_source = tr.source;
  std::vector<std::string> problems;
  t.thresholds = effectiveThresholds(config_, t.tier, info, &problems);
  for (auto& p : problems) {
    pending_findings_.push_back({info.id, "bad_annotation", std::move(p)});
  }
  // Kept once, here: a copy left in t.info was the node's whole CPU list for every container
  // without a cpuset of its own (768 bytes each on a 192-CPU node). describe() puts it back.
  t.cpus = std::move(info.cpuset);
  info.cpuset.clear();
  if (t.cpus.empty() && info.resources.cpuset_cpus) {
    auto parsed = parseCpuList(*info.resources.cpuset_cpus);
    if (parsed) {
      t.cpus = std::move(*parsed);
    } else {
      pending_findings_.push_back({info.id, "bad_cpuset", parsed.error().message()});
    }
  }
  std::sort(t.cpus.begin(), t.cpus.end());
  if (t.cpus == node_cpus_) {
    t.cpus = std::vector<int>();  // every CPU of the node: "all", buffer freed (setNodeCpus())
  }
  t.info = std::move(info);
  if (inserted) {
    resetWindow(t);
  }
  // A container that became untouchable loses its restrictions' tracking (we never touch it,
  // not even to restore: its owner decided for it).
  if (!touchable(t)) {
    dropTarget(t.info.id);
  }
}

void EngineState::setNodeCpus(std::vector<int> cpus) {
  std::sort(cpus.begin(), cpus.end());
  if (cpus == node_cpus_) {
    return;
  }
  node_cpus_ = std::move(cpus);
  // A container on every CPU of the node keeps an empty list, which every reader takes as "all
  // of the node" (a container without a cpuset of its own): the daemon hands the engine the
  // node's whole list for those, 768 bytes each on a 192-CPU node.
  for (auto& [id, t] : tracked_) {
    if (t.cpus == node_cpus_) {
      t.cpus = std::vector<int>();  // frees the buffer (clear() and "= {}" keep it)
    }
  }
}

void EngineState::forgetNeverCreated(int64_t now_ns, std::vector<Finding>& findings) {
  for (auto it = admitted_unlisted_.begin(); it != admitted_unlisted_.end();) {
    const std::string id = it->first;
    auto t = tracked_.find(id);
    // Gone, registered, or measured this round (only a created container has a cgroup that
    // runs): nothing to forget.
    const bool settled = t == tracked_.end() || t->second.registered || t->second.sample != nullptr;
    if (settled || now_ns - it->second < kCreationGraceNs) {
      it = settled ? admitted_unlisted_.erase(it) : std::next(it);
      continue;
    }
    it = admitted_unlisted_.erase(it);
    findings.push_back({id, "never_created",
                        displayName(t->second.info) + " was seen created (CreateContainer) but " +
                            "not listed by the runtime " +
                            std::to_string(kCreationGraceNs / 1'000'000'000) +
                            " s later: its creation failed; forgotten, with what colod placed"});
    remove(id);
  }
}

void EngineState::remove(std::string_view id) {
  // By iterator: erasing by a string_view key needs C++23.
  if (auto a = admitted_unlisted_.find(id); a != admitted_unlisted_.end()) {
    admitted_unlisted_.erase(a);
  }
  dropTarget(id);
  for (auto& [key, ep] : episodes_) {
    if (ep.victim_id == id) {
      ep.victim_gone = true;
    }
  }
  if (auto it = tracked_.find(id); it != tracked_.end()) {
    index_.erase(std::string_view(it->first));
    tracked_.erase(it);
  }
  // The evidence against it goes with it (bounded: one entry per BE per victim).
  for (auto& [vid, v] : tracked_) {
    if (auto bt = v.blame.find(id); bt != v.blame.end()) {
      v.blame.erase(bt);
    }
  }
}

void EngineState::dropTarget(std::string_view id) {
  auto it = restrictions_.find(id);
  if (it == restrictions_.end()) {
    return;
  }
  restrictions_.erase(it);
  for (auto& [key, ep] : episodes_) {
    for (auto& step : ep.steps) {
      std::erase(step.targets, std::string(id));
    }
  }
  if (!anyQuota()) {
    quota_budget_ = 0;
  }
}

void EngineState::resetWindow(Tracked& t) const {
  const auto n = static_cast<size_t>(config_.detection.window_intervals);
  t.cpu_ring.assign(n, 0);
  t.wait_ring.assign(n, 0.0);
  t.mem_ring.assign(n, 0);
  t.ring_pos = 0;
  t.cpu_hits = 0;
  t.mem_hits = 0;
}

RoundResult EngineState::evaluate(const Snapshot& snap) {
  RoundResult result;
  ++round_;
  event_round_ = snap.event_round;
  if (!snap.event_round) {
    ++ticks_;
    // The span since the previous timer round, not this round's interval: a timer round can
    // follow an event round by well under a millisecond (0.47 ms in the colocation benchmark),
    // and the on-CPU rates (updateRate()) would then span that alone: two BE pods filling a
    // CPU read 0 in it, and the split holding them was given back.
    tick_ns_ = last_tick_now_ns_ > 0 && snap.now_ns > last_tick_now_ns_
                   ? snap.now_ns - last_tick_now_ns_
                   : snap.interval_ns;
    last_tick_now_ns_ = snap.now_ns;
  }
  ++stats_.rounds;
  now_ns_ = snap.now_ns;
  interval_ns_ = snap.interval_ns;
  changes_this_round_ = 0;
  std::vector<int> node = snap.node_cpu_list;
  if (node.empty()) {
    for (int c = 0; c < snap.node_cpus; ++c) {
      node.push_back(c);
    }
  }
  setNodeCpus(std::move(node));
  result.findings = std::move(pending_findings_);
  pending_findings_.clear();

  // Samples by id (last one wins on duplicates). Between rounds every t.sample is null (the
  // round's last walk clears it; a new entry starts so): only the sampled are set here, and one
  // walk of tracked_ below does the rest (with 1000 containers, each walk of the map is a cache
  // miss a container: issue 17).
  for (const ContainerSample& s : snap.containers) {
    attribution_seen_ = attribution_seen_ || !s.preempted_by.empty();
    auto it = index_.find(std::string_view(s.id));
    if (it == index_.end()) {
      ++stats_.unknown_samples;
      continue;
    }
    it->second->sample = &s;
  }
  if (!admitted_unlisted_.empty()) {
    forgetNeverCreated(snap.now_ns, result.findings);
  }
  // Absent and unmeasured (no cgroup yet) is not quiet: marked for the walk below.
  for (const std::string& id : snap.unmeasured) {
    if (auto it = index_.find(std::string_view(id));
        it != index_.end() && it->second->sample == nullptr) {
      it->second->sample = &unmeasured_mark_;
    }
  }
  exclusive_cpus_.clear();
  reserved_cpus_.clear();
  running_be_.clear();
  victims_.clear();
  // Evidence of a victim no longer hurt is brought to now once in a while (below).
  const int64_t sweep_ticks = kEvidenceSweepWindows * config_.actions.blame_window_intervals;
  for (auto& [id, t] : tracked_) {
    const ContainerSample* s = t.sample;
    if (s == &unmeasured_mark_) {
      s = nullptr;
    } else if (s == nullptr && snap.absent_quiet && t.registered) {
      s = &quiet_sample_;
    }
    observe(t, s, snap.interval_ns);
    if (t.info.exclusive_cpus) {
      exclusive_cpus_.insert(exclusive_cpus_.end(), t.cpus.begin(), t.cpus.end());
    } else if (isVictimTier(t.tier) && !t.cpus.empty() && t.cpus.size() < node_cpus_.size()) {
      // A protected container pinned to a strict subset of the node (a topology-aware plugin
      // or the kubelet gave it those: issue #18): BEs are never placed there.
      reserved_cpus_.insert(reserved_cpus_.end(), t.cpus.begin(), t.cpus.end());
    }
    if (t.sampled && t.sample->nr_throttled > 0) {
      t.last_throttled_tick = ticks_;
    }
    if (touchable(t) && t.sampled && t.sample->oncpu_ns > 0) {
      running_be_.push_back(&t);  // in id order, as tracked_
      if (cpusUsed(t) >= kRunningCpuFraction) {
        t.last_ran_round = round_;
        t.last_ran_tick = ticks_;
      }
    }
    if (t.sampled && isVictimTier(t.tier) && !t.info.exclusive_cpus) {
      victims_.push_back(&t);  // in id order, as tracked_
    }
    // A victim no longer hurt keeps the evidence of its last hurt, one entry per BE that ran
    // then, until it is hurt again: over days, every LS an entry for every BE (1000 containers,
    // 2/3 of them LS: 2.2 MB after a minute). Brought to now once in a while instead, which
    // erases what has decayed away (the same values a later accumulation would find).
    if (t.evidence_tick != kNever && ticks_ - t.evidence_tick >= sweep_ticks &&
        (!t.blame.empty() || !t.waits.foreign_by.empty())) {
      decayEvidence(t);
    }
  }
  std::sort(exclusive_cpus_.begin(), exclusive_cpus_.end());
  // CPUs a BE is never placed onto: exclusive ones, and those a protected container is pinned to.
  reserved_cpus_.insert(reserved_cpus_.end(), exclusive_cpus_.begin(), exclusive_cpus_.end());
  std::sort(reserved_cpus_.begin(), reserved_cpus_.end());
  reserved_cpus_.erase(std::unique(reserved_cpus_.begin(), reserved_cpus_.end()),
                       reserved_cpus_.end());
  // Blame evidence of every victim that is, or was lately, over its threshold (the others' only
  // decays, lazily): what each BE did where it waits, summed over the blame window.
  for (Tracked* tp : victims_) {
    Tracked& t = *tp;
    if (t.cpu_hits > 0 || hasEpisode(t.info.id, false)) {
      accumulateEvidence(t);
      // A new foreign episode once the foreign share has fallen below half of the wait.
      if (t.foreign_said && foreignShare(t) < 0.5) {
        t.foreign_said = false;
      }
    } else {
      t.exhausted_said = false;  // a quiet window: the next stretch of hurt is a new one
      if (t.foreign_said && t.quiet_streak >= config_.detection.window_intervals) {
        t.foreign_said = false;
      }
    }
    // Rungs judged useless are forgotten once the victim has been quiet for long.
    if (!t.useless.empty() && t.quiet_streak >= 4 * config_.actions.quiet_intervals) {
      t.useless.clear();
    }
  }
  // Existing episodes first (undo/escalate/relax), then new victims.
  for (auto& [key, ep] : episodes_) {
    stepEpisode(key, ep, result.decisions, result.findings);
    extendSteps(key, ep, result.decisions, result.findings);
  }
  // An episode without restrictions ends once its victim is gone or no longer in violation
  // (an exhausted episode of a victim still in violation stays, so rungs are not retried
  // every round).
  std::erase_if(episodes_, [this](const auto& kv) {
    const Episode& ep = kv.second;
    if (!ep.steps.empty()) {
      return false;
    }
    if (ep.victim_gone) {
      return true;
    }
    auto it = tracked_.find(ep.victim_id);
    if (it == tracked_.end()) {
      return true;
    }
    const int hits = ep.memory ? it->second.mem_hits : it->second.cpu_hits;
    return ep.phase == Phase::Holding && hits < config_.detection.hit_intervals;
  });
  startEpisodes(result.decisions, result.findings);
  endIdleHolds(result.decisions);  // after the new episodes took over the holds they need
  refreshMoveQuotas(result.decisions);
  for (const Finding& f : result.findings) {
    if (auto it = tracked_.find(f.container_id); it != tracked_.end()) {
      it->second.last_explanation = f.message;
    }
  }
  const double peak_decay =
      1.0 - 1.0 / static_cast<double>(kPeakMemoryWindows *
                                      std::max(config_.actions.blame_window_intervals, 1));
  for (auto& [id, t] : tracked_) {
    // Decay the relax backoff of containers long quiet without an episode.
    if (t.relax_backoff > 1 && t.sampled &&
        t.quiet_streak >= 4 * config_.actions.quiet_intervals * t.relax_backoff &&
        !hasEpisode(id, false)) {
      t.relax_backoff = 1;
    }
    // Recent demand for admission (read between rounds): the on-CPU rate over about the last
    // tick (reported in this round or not), or a memory of a busier one that decays per timer
    // tick. An event round of a few ms in which a busy LS did not switch does not report it;
    // decaying per such round made a busy LS read idle after a burst of them (session 35).
    t.last_cpus = std::max(recentCpus(t), snap.event_round ? t.last_cpus : t.last_cpus * 0.7);
    // Decays per timer tick: event rounds between ticks do not make a peak forgotten sooner.
    t.peak_cpus = std::max(t.sampled ? cpusUsed(t) : 0.0,
                           snap.event_round ? t.peak_cpus : t.peak_cpus * peak_decay);
    t.sample = nullptr;  // the snapshot is not ours to keep
  }
  running_be_.clear();  // pointers into tracked_: not kept across registry changes
  victims_.clear();
  stats_.tracked_containers = tracked_.size();
  stats_.active_episodes = episodes_.size();
  return result;
}

bool EngineState::hasEpisode(std::string_view victim, bool memory) const {
  if (episodes_.empty()) {
    return false;
  }
  const std::string_view suffix = memory ? "#mem" : "#cpu";
  std::array<char, 256> buf{};
  if (victim.size() + suffix.size() > buf.size()) {
    return episodes_.count(episodeKey(victim, memory)) != 0;
  }
  std::copy(victim.begin(), victim.end(), buf.begin());
  std::copy(suffix.begin(), suffix.end(), buf.begin() + static_cast<std::ptrdiff_t>(victim.size()));
  return episodes_.find(std::string_view(buf.data(), victim.size() + suffix.size())) !=
         episodes_.end();
}

std::vector<Decision> EngineState::restoreAll(int64_t now_ns) {
  now_ns_ = now_ns;
  std::vector<Decision> out;
  for (auto& [id, levers] : restrictions_) {
    auto tt = tracked_.find(id);
    if (tt == tracked_.end()) {
      continue;
    }
    for (auto& [lever, r] : levers) {
      const Resources orig = restoreValues(r.original, lever, node_cpus_);
      std::string text = "restore " + std::string(leverName(lever)) + " on " +
                         displayName(tt->second.info) +
                         " (colod stopping): " + describeValues(r.applied, lever) + " -> " +
                         describeValues(orig, lever);
      Decision d = makeDecision(DecisionKind::Restore, lever, r.rung, tt->second, orig, orig,
                                nullptr, nullptr, {}, "restore_all", std::move(text));
      out.push_back(std::move(d));
    }
  }
  restrictions_.clear();
  episodes_.clear();
  quota_budget_ = 0;
  stats_.active_episodes = 0;
  return out;
}

Result<void> EngineState::seed(std::span<const AppliedAction> actions, int64_t now_ns) {
  now_ns_ = now_ns;
  // Validate everything first so a bad journal leaves the engine unchanged.
  for (const AppliedAction& a : actions) {
    auto t = tracked_.find(a.target_id);
    if (t == tracked_.end()) {
      return COLOD_ERR(EINVAL, "seed: unknown target container ", a.target_id);
    }
    if (!touchable(t->second)) {
      return COLOD_ERR(ENOTSUP, "seed: container ", a.target_id,
                       " is not a BE container colod may restrict (tier ", tierName(t->second.tier),
                       t->second.info.exclusive_cpus ? ", exclusive CPUs" : "", ")");
    }
    if (tracked_.count(a.victim_id) == 0) {
      return COLOD_ERR(EINVAL, "seed: unknown victim container ", a.victim_id);
    }
    const auto lad = ladder(a.lever == Lever::MemoryLimit);
    if (std::find(lad.begin(), lad.end(), a.lever) == lad.end()) {
      return COLOD_ERR(EINVAL, "seed: lever ", leverName(a.lever),
                       " is not in the configured ladder");
    }
  }
  for (const AppliedAction& a : actions) {
    const bool memory = a.lever == Lever::MemoryLimit;
    const std::string key = episodeKey(a.victim_id, memory);
    auto [eit, inserted] = episodes_.try_emplace(key);
    Episode& ep = eit->second;
    if (inserted) {
      ep.victim_id = a.victim_id;
      ep.memory = memory;
      ep.phase = Phase::Holding;
    }
    const auto lad = ladder(memory);
    const int rung = static_cast<int>(std::find(lad.begin(), lad.end(), a.lever) - lad.begin());
    auto& levers = restrictions_[a.target_id];
    auto [rit, rnew] = levers.try_emplace(a.lever);
    if (rnew) {
      rit->second.lever = a.lever;
      rit->second.rung = rung;
      rit->second.applied = a.applied_values;
      rit->second.original = a.original_values;
    }
    rit->second.owners.insert(key);
    auto sit = std::find_if(ep.steps.begin(), ep.steps.end(),
                            [&](const Step& s) { return s.lever == a.lever; });
    if (sit == ep.steps.end()) {
      Step s;
      s.lever = a.lever;
      s.rung = rung;
      s.applied_tick = ticks_;
      s.seeded = true;
      ep.steps.push_back(std::move(s));
      sit = ep.steps.end() - 1;
    }
    if (std::find(sit->targets.begin(), sit->targets.end(), a.target_id) == sit->targets.end()) {
      sit->targets.push_back(a.target_id);
    }
    // The step is one: any of its targets journaled as the cap marks it (never tightened).
    sit->uncontrolled_cap = sit->uncontrolled_cap || a.uncontrolled_cap;
    std::sort(ep.steps.begin(), ep.steps.end(),
              [](const Step& x, const Step& y) { return x.rung < y.rung; });
    ep.next_rung = ep.steps.back().rung + 1;
    ep.escalations = static_cast<int>(ep.steps.size());
  }
  // A seeded quota rung: the budget in force is the sum of the applied quotas.
  quota_budget_ = 0;
  for (const auto& [id, levers] : restrictions_) {
    if (auto jt = levers.find(Lever::CpuQuota); jt != levers.end()) {
      const Resources& a = jt->second.applied;
      if (a.cpu_quota && *a.cpu_quota > 0 && a.cpu_period && *a.cpu_period > 0) {
        quota_budget_ += static_cast<double>(*a.cpu_quota) / static_cast<double>(*a.cpu_period);
      }
    }
  }
  stats_.active_episodes = episodes_.size();
  return ok();
}

void EngineState::applyFailed(const Decision& d) {
  if (d.kind != DecisionKind::Engage && d.kind != DecisionKind::Escalate) {
    return;  // a failed undo/relax/restore: the container is most likely gone
  }
  auto it = restrictions_.find(d.target_id);
  if (it == restrictions_.end()) {
    return;
  }
  auto jt = it->second.find(d.lever);
  if (jt == it->second.end() || jt->second.applied != d.new_values) {
    return;
  }
  it->second.erase(jt);
  if (it->second.empty()) {
    restrictions_.erase(it);
  }
  for (auto& [key, ep] : episodes_) {
    for (auto& step : ep.steps) {
      if (step.lever == d.lever) {
        std::erase(step.targets, d.target_id);
      }
    }
    std::erase_if(ep.steps, [](const Step& s) { return s.targets.empty(); });
  }
  if (!anyQuota()) {
    quota_budget_ = 0;
  }
}

std::vector<AppliedAction> EngineState::appliedList() const {
  std::vector<AppliedAction> out;
  for (const auto& [id, levers] : restrictions_) {
    for (const auto& [lever, r] : levers) {
      for (const std::string& owner : r.owners) {
        auto e = episodes_.find(owner);
        AppliedAction a;
        a.target_id = id;
        a.victim_id = e != episodes_.end() ? e->second.victim_id : "";
        a.lever = lever;
        a.rung = r.rung;
        a.applied_values = r.applied;
        a.original_values = r.original;
        if (e != episodes_.end()) {
          const auto& steps = e->second.steps;
          a.uncontrolled_cap = std::any_of(steps.begin(), steps.end(), [&](const Step& s) {
            return s.lever == lever && s.uncontrolled_cap;
          });
        }
        out.push_back(std::move(a));
      }
      if (r.owners.empty() && r.idleHold()) {
        // Owned by no episode: journaled under the victim it was held for (a reseed after a
        // restart makes it that victim's step again, relaxed by the same quiet rule).
        AppliedAction a;
        a.target_id = id;
        a.victim_id = r.idle_victim;
        a.lever = lever;
        a.rung = r.rung;
        a.applied_values = r.applied;
        a.original_values = r.original;
        out.push_back(std::move(a));
      }
    }
  }
  return out;
}

Result<Engine> Engine::create(Config config) {
  COLOD_TRY_VOID(validateConfig(config, "<config>"), "creating policy engine");
  return Engine(std::make_unique<EngineState>(std::move(config)));
}

Engine::Engine(std::unique_ptr<EngineState> state) : state_(std::move(state)) {}
Engine::Engine(Engine&&) noexcept = default;
Engine& Engine::operator=(Engine&&) noexcept = default;
Engine::~Engine() = default;

Result<void> Engine::setConfig(Config config) {
  COLOD_TRY_VOID(validateConfig(config, "<config>"), "new policy config rejected");
  const bool window_changed =
      config.detection.window_intervals != state_->config_.detection.window_intervals;
  state_->config_ = std::move(config);
  for (auto& [id, t] : state_->tracked_) {
    std::vector<std::string> problems;
    t.thresholds = effectiveThresholds(state_->config_, t.tier, t.info, &problems);
    if (window_changed) {
      state_->resetWindow(t);
    }
  }
  // Rungs beyond a shorter ladder cannot be escalated to; existing steps stay until relaxed.
  for (auto& [key, ep] : state_->episodes_) {
    const auto n = static_cast<int>(state_->ladder(ep.memory).size());
    ep.next_rung = std::min(ep.next_rung, n);
  }
  return ok();
}

const Config& Engine::config() const { return state_->config_; }

void Engine::upsertContainer(ContainerInfo info) { state_->upsert(std::move(info), true); }

void Engine::removeContainer(std::string_view id) { state_->remove(id); }

void Engine::setNodeCpus(std::vector<int> cpus) { state_->setNodeCpus(std::move(cpus)); }

RoundResult Engine::evaluate(const Snapshot& snapshot) { return state_->evaluate(snapshot); }

std::vector<Decision> Engine::restoreAll(int64_t now_ns) { return state_->restoreAll(now_ns); }

Result<void> Engine::seedApplied(std::span<const AppliedAction> actions, int64_t now_ns) {
  return state_->seed(actions, now_ns);
}

void Engine::reportApplyFailure(const Decision& decision) { state_->applyFailed(decision); }

std::vector<AppliedAction> Engine::applied() const { return state_->appliedList(); }

EngineStats Engine::stats() const { return state_->stats_; }

}  // namespace colod::policy
