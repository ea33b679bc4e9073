// SPDX-License-Identifier: Apache-2.0
// Explanation: the sentences, evidence and values a person reads, and Engine::describe.
#include <algorithm>
#include <cmath>
#include <sstream>

#include "colod/policy/tier.h"
#include "engine_state.h"

namespace colod::policy {

std::string episodeKey(std::string_view victim, bool memory) {
  return std::string(victim) + (memory ? "#mem" : "#cpu");
}

std::string displayName(const ContainerInfo& info) {
  if (info.pod_name.empty()) {
    return info.id;
  }
  return info.pod_namespace + "/" + info.pod_name + "/" + info.container_name;
}

std::string describeValues(const Resources& r, Lever lever) {
  std::ostringstream os;
  switch (lever) {
    case Lever::CpuShares:
      os << "cpu.shares " << (r.cpu_shares ? std::to_string(*r.cpu_shares) : "unset");
      break;
    case Lever::Cpuset:
      os << "cpuset " << (r.cpuset_cpus ? *r.cpuset_cpus : "unset");
      if (r.cpu_quota) {  // a move onto CPUs other BE use carries a quota (moveQuota())
        os << " with " << describeValues(r, Lever::CpuQuota);
      }
      break;
    case Lever::CpuQuota:
      // No quota is written one way everywhere: "max" (as cgroup v2 cpu.max does), whether the
      // value is unset, -1 or 0; a quota is "<quota>/<period> µs" only when it is set.
      os << "CFS quota ";
      if (r.cpu_quota && *r.cpu_quota > 0) {
        os << *r.cpu_quota << "/" << r.cpu_period.value_or(100'000) << " µs";
      } else {
        os << "max";
      }
      break;
    case Lever::MemoryLimit:
      os << "memory limit ";
      if (r.memory_limit && *r.memory_limit > 0) {
        os << *r.memory_limit;
      } else {
        os << "max";
      }
      break;
  }
  return os.str();
}

Evidence EngineState::evidence(const Tracked& v, const Episode* ep, bool memory) const {
  Evidence e;
  e.victim_p99_us = v.p99;
  e.threshold_us = v.threshold;
  e.baseline_p99_us = v.has_baseline ? static_cast<uint64_t>(v.baseline) : 0;
  e.engaged_p99_us = ep != nullptr ? ep->engaged_p99 : v.p99;
  if (v.sample != nullptr) {
    if (v.sample->psi_cpu_some) {
      e.psi_cpu_some_avg10 = v.sample->psi_cpu_some->avg10;
    }
    e.reclaim_stall_ns = v.sample->reclaim_stall_ns;
    e.victim_throttled_ns = v.sample->throttled_ns;
  }
  e.hits = memory ? v.mem_hits : v.cpu_hits;
  e.window = config_.detection.window_intervals;
  e.quiet_intervals = memory ? v.mem_quiet_streak : v.quiet_streak;
  e.victim_wait_load = v.wait_load;
  e.wait_load_before = ep != nullptr ? ep->start_wait : windowWait(v);
  e.quota_budget_cpus = quota_budget_;
  return e;
}

std::string EngineState::victimPhrase(const Tracked& v, bool memory) const {
  std::ostringstream os;
  if (memory) {
    os << tierName(v.tier) << " " << displayName(v.info) << " stalls in memory reclaim ("
       << (v.sample ? v.sample->reclaim_stall_ns / 1000 : 0) << " µs this interval) in "
       << v.mem_hits << " of " << config_.detection.window_intervals << " intervals";
  } else {
    os << tierName(v.tier) << " " << displayName(v.info) << " run-queue p99 " << v.p99
       << (v.p99_hit ? " µs > threshold " : " µs (threshold ") << v.threshold
       << (v.p99_hit ? " µs" : " µs)");
    if (v.wait_load > 0) {
      os << ", wait load " << std::round(v.wait_load * 100) / 100 << " tasks ("
         << static_cast<int>(v.wait_share * 100) << "% of runnable time waiting)";
    }
    os << ", over in " << v.cpu_hits << " of " << config_.detection.window_intervals
       << " intervals";
  }
  return os.str();
}

Decision EngineState::makeDecision(DecisionKind kind,
                                   Lever lever,
                                   int rung,
                                   const Tracked& target,
                                   Resources new_values,
                                   Resources original,
                                   const Tracked* victim,
                                   const Episode* ep,
                                   std::vector<Antagonist> antagonists,
                                   std::string rule,
                                   std::string explanation) {
  Decision d;
  d.seq = ++seq_;
  d.at_ns = now_ns_;
  d.kind = kind;
  d.lever = lever;
  d.rung = rung;
  d.target_id = target.info.id;
  d.target_name = displayName(target.info);
  d.new_values = std::move(new_values);
  d.original_values = std::move(original);
  if (victim != nullptr) {
    d.victim_id = victim->info.id;
    d.victim_name = displayName(victim->info);
    d.evidence = evidence(*victim, ep, ep != nullptr && ep->memory);
  } else if (ep != nullptr) {
    d.victim_id = ep->victim_id;
  }
  d.antagonists = std::move(antagonists);
  d.rule = std::move(rule);
  d.explanation = std::move(explanation);
  d.dry_run = config_.dry_run;
  ++stats_.decisions;
  return d;
}

Result<ContainerView> Engine::describe(std::string_view id) const {
  auto it = state_->tracked_.find(id);
  if (it == state_->tracked_.end()) {
    return COLOD_ERR(ENOENT, "no container ", id);
  }
  const Tracked& t = it->second;
  ContainerView v;
  v.info = t.info;
  // upsert() keeps the parsed cpuset in Tracked::cpus only, empty for the node's every CPU.
  v.info.cpuset = t.cpus.empty() ? state_->node_cpus_ : t.cpus;
  v.tier = t.tier;
  v.tier_source = t.tier_source;
  v.thresholds = t.thresholds;
  v.baseline_p99_us = t.has_baseline ? static_cast<uint64_t>(t.baseline) : 0;
  v.hits_in_window = t.cpu_hits;
  v.victim = state_->hasEpisode(id, false) || state_->hasEpisode(id, true);
  for (const AppliedAction& a : state_->appliedList()) {
    if (a.target_id == id) {
      v.restrictions.push_back(a);
    }
  }
  v.last_explanation = t.last_explanation;
  if (EngineState::touchable(t)) {
    v.blame = state_->blameViews(t);
  }
  return v;
}

// For a BE: the evidence against it per victim that is (or lately was) hurt, and why it was or
// was not restricted for it.
std::vector<BlameView> EngineState::blameViews(const Tracked& be) const {
  std::vector<BlameView> out;
  const std::string& id = be.info.id;
  for (const auto& [vid, w] : tracked_) {
    const std::string key = episodeKey(vid, false);
    const bool episode = episodes_.count(key) != 0;
    if (w.blame.empty() && !episode) {
      continue;
    }
    BlameView b;
    b.victim_id = vid;
    b.victim_name = displayName(w.info);
    if (auto rit = restrictions_.find(id); rit != restrictions_.end()) {
      for (const auto& [lever, r] : rit->second) {
        b.restricted = b.restricted || r.owners.count(key) != 0;
      }
    }
    auto e = w.blame.find(id);
    if (e == w.blame.end()) {
      b.why = "no evidence: it neither preempted " + b.victim_name +
              " nor ran on its CPUs over the blame window";
    } else {
      b.preemptions = e->second.preemptions;
      b.wait_ns = static_cast<uint64_t>(e->second.wait_ns);
      b.overlap_ns = static_cast<uint64_t>(e->second.overlap_ns);
      b.score = e->second.score;
      b.blamed = e->second.verdict == Verdict::Blamed;
      const std::string verdict = verdictText(e->second);
      if (b.blamed) {
        b.why = std::string(b.restricted ? "blamed and restricted: " : "blamed: ") + verdict;
      } else {
        b.why = std::string(b.restricted ? "restricted (joined a restriction in force); " : "") +
                "not blamed: " + verdict;
      }
    }
    out.push_back(std::move(b));
  }
  return out;
}

}  // namespace colod::policy
