// SPDX-License-Identifier: Apache-2.0
// The aggregate BE quota budget: who is capped, how the budget is split, tightened.
#include <algorithm>
#include <cmath>
#include <sstream>

#include "colod/policy/tier.h"
#include "engine_state.h"

namespace colod::policy {

namespace {

// Every capped container's weight in the budget split is at least this (on top of 1 - its
// share of the blame), so the most-blamed one still gets more than its bare floor.
constexpr double kQuotaWeightFloor = 0.1;
// A first cap binds when it is below this many times the container's peak use.
constexpr double kQuotaBindsFactor = 2.0;

}  // namespace

// --- the aggregate BE quota budget ------------------------------------------------------
bool EngineState::anyQuota() const {
  for (const auto& [id, levers] : restrictions_) {
    if (levers.count(Lever::CpuQuota) != 0) {
      return true;
    }
  }
  return false;
}

uint64_t EngineState::minQuotaUs() const {
  const uint64_t period = config_.levers.quota_period_us;
  return std::max<uint64_t>(1000, period * config_.floors.be_min_quota_millicores / 1000);
}

// The aggregate floor: a share of the node, and at least each capped container's own floor.
double EngineState::quotaFloor(size_t n_targets) const {
  const double per =
      static_cast<double>(minQuotaUs()) / static_cast<double>(config_.levers.quota_period_us);
  return std::max(config_.floors.be_min_quota_node_fraction * nodeCpus(),
                  per * static_cast<double>(n_targets));
}

// The CPUs t may run on: the cpuset colod holds it to, else its own, else the node's.
double EngineState::usableCpus(const Tracked& t) const {
  if (auto it = restrictions_.find(t.info.id); it != restrictions_.end()) {
    if (auto jt = it->second.find(Lever::Cpuset);
        jt != it->second.end() && jt->second.applied.cpuset_cpus) {
      if (auto held = parseCpuList(*jt->second.applied.cpuset_cpus); held && !held->empty()) {
        return std::min(static_cast<double>(held->size()), nodeCpus());
      }
    }
  }
  if (!t.cpus.empty()) {
    return std::min(static_cast<double>(t.cpus.size()), nodeCpus());
  }
  return nodeCpus();
}

// The most the capped set can use at all: the sum of its containers' usable CPUs, at most the
// node. A budget above it holds nothing back (a BE placed on one CPU, relaxed to a budget of
// 1.66 CPUs, was tightened to 1.24 first when the LS was hurt again: one verify window lost).
double EngineState::quotaCeiling() const {
  double sum = 0;
  for (const auto& [id, levers] : restrictions_) {
    if (levers.count(Lever::CpuQuota) == 0) {
      continue;
    }
    auto tt = tracked_.find(id);
    sum += tt == tracked_.end() ? nodeCpus() : usableCpus(tt->second);
  }
  return std::min(sum, nodeCpus());
}

size_t EngineState::quotaTargets() const {
  size_t n = 0;
  for (const auto& [id, levers] : restrictions_) {
    n += levers.count(Lever::CpuQuota);
  }
  return n;
}

// First budget: what the node has left after the LS demand (on-CPU of every non-BE container
// plus the victim's wait load: CPU it wanted and did not get) and the headroom, at most
// be_quota_fraction of the node, and one tighten step below what the capped set can use at all
// (quotaCeiling(): a first cap of 1 CPU on a BE held to one CPU binds nothing), never below the
// floor. The victim asks at most the CPUs it may run on: three of its tasks queued on its one
// CPU are a backlog, not three CPUs of demand (the fault suite's probe, held to one CPU, read a
// wait load of 2.4 the round a BE landed beside it, and the first cap went to the floor).
double EngineState::initialQuotaBudget(const Tracked& victim, size_t n_targets) const {
  const double node = nodeCpus();
  double demand = 0;
  for (const auto& [id, t] : tracked_) {
    if (&t == &victim) {
      demand += std::min(cpusUsed(t) + t.wait_load, usableCpus(t));
    } else if (t.sampled && t.tier != Tier::Be) {
      demand += cpusUsed(t);
    }
  }
  const auto& lv = config_.levers;
  const double b =
      std::min({lv.be_quota_fraction * node, node - demand - lv.quota_headroom_fraction * node,
                quotaCeiling() * (1.0 - lv.quota_step_fraction)});
  return std::clamp(b, quotaFloor(n_targets), node);
}

// Adds the running BE containers (and the antagonists) to the capped set, owned by `key`.
// Returns false when a new target had to wait (cooldown / round budget).
bool EngineState::addQuotaTargets(const std::string& key,
                                  int rung,
                                  const std::vector<Antagonist>& antagonists,
                                  const std::vector<std::string>& joining,
                                  bool replacing,
                                  Step& step) {
  bool deferred = false;
  // Quota by blame (issue 19): only the blamed containers (ranked, each above
  // min_antagonist_score) and BE that started running under the restriction (extendSteps) are
  // capped; a BE below the cut-off is never capped by this rung.
  std::map<std::string, double> want;
  for (const Antagonist& a : antagonists) {
    want[a.id] = a.score;
  }
  for (const std::string& id : joining) {
    want.emplace(id, 0.0);
  }
  for (const auto& [id, blame] : want) {
    auto it = tracked_.find(id);
    if (it == tracked_.end() || !touchable(it->second)) {
      continue;
    }
    Tracked& t = it->second;
    auto& levers = restrictions_[id];
    if (auto jt = levers.find(Lever::CpuQuota); jt != levers.end()) {
      jt->second.owners.insert(key);
      jt->second.blame = std::max(jt->second.blame, blame);
      if (std::find(step.targets.begin(), step.targets.end(), id) == step.targets.end()) {
        step.targets.push_back(id);
      }
      continue;
    }
    const bool cooling =
        !replacing && round_ - t.last_change_round < config_.actions.change_cooldown_intervals;
    if (cooling || !budget()) {
      deferred = true;
      if (levers.empty()) {
        restrictions_.erase(id);
      }
      continue;
    }
    Restriction r;
    r.lever = Lever::CpuQuota;
    r.rung = rung;
    r.original = leverValues(t.info.resources, Lever::CpuQuota);
    if (auto lt = t.last_applied.find(Lever::CpuQuota);
        lt != t.last_applied.end() && lt->second == r.original) {
      r.original = t.last_original[Lever::CpuQuota];
    }
    r.owners.insert(key);
    r.blame = blame;
    levers.emplace(Lever::CpuQuota, std::move(r));
    step.targets.push_back(id);
  }
  return !deferred;
}

// Takes container `id` out of the capped set (and out of every quota step's targets).
void EngineState::dropQuotaTarget(const std::string& id) {
  auto it = restrictions_.find(id);
  if (it != restrictions_.end()) {
    it->second.erase(Lever::CpuQuota);
    if (it->second.empty()) {
      restrictions_.erase(it);
    }
  }
  for (auto& [k, e] : episodes_) {
    for (auto& st : e.steps) {
      if (st.lever == Lever::CpuQuota) {
        std::erase(st.targets, id);
      }
    }
  }
}

// Whether t's CFS quota has not throttled it for `ticks` timer ticks (or ever).
bool EngineState::unthrottledFor(const Tracked& t, int64_t ticks) const {
  return t.last_throttled_tick == kNever || ticks_ - t.last_throttled_tick >= ticks;
}

// Gives t its own CFS quota back (a Relax decision): the cap r no longer binds. The caller
// takes t out of the capped set.
void EngineState::releaseQuotaCap(Tracked& t,
                                  const Restriction& r,
                                  const std::string& why,
                                  const Tracked* victim,
                                  const Episode* ep,
                                  const std::vector<Antagonist>& antagonists,
                                  std::vector<Decision>& out) {
  const Resources orig = restoreValues(r.original, Lever::CpuQuota, node_cpus_);
  std::ostringstream os;
  os << "relax rung " << r.rung + 1 << " (cpu_quota) on " << displayName(t.info) << ": " << why
     << "; " << describeValues(current(t, Lever::CpuQuota), Lever::CpuQuota) << " -> "
     << describeValues(orig, Lever::CpuQuota);
  t.last_change_round = round_;
  t.last_explanation = os.str();
  out.push_back(makeDecision(DecisionKind::Relax, Lever::CpuQuota, r.rung, t, orig, orig, victim,
                             ep, antagonists, "quota_cap_not_binding", os.str()));
  ++changes_this_round_;
}

// Splits quota_budget_ among the capped BE containers: each gets its floor, the rest by CPU
// use this interval; never looser than its own original quota. Emits a decision per container
// whose value changes. The set is coupled, so it is not cut by max_changes_per_round.
void EngineState::redistributeQuota(DecisionKind kind,
                                    const std::string& rule,
                                    const std::string& why,
                                    const Tracked* victim,
                                    const Episode* ep,
                                    const std::vector<Antagonist>& antagonists,
                                    std::vector<Decision>& out,
                                    std::vector<Finding>& findings) {
  struct Target {
    Tracked* t;
    Restriction* r;
    double weight;
  };
  std::vector<Target> targets;
  double wsum = 0;
  double rest = 0;
  const uint64_t period = config_.levers.quota_period_us;
  const uint64_t min_q = minQuotaUs();
  const double floor_cpus = static_cast<double>(min_q) / static_cast<double>(period);
  // Each target's share in CPUs: its floor, and the rest of the budget by weight.
  const auto share_of = [&](const Target& x) { return floor_cpus + rest * x.weight / wsum; };
  // A cap the target cannot reach is not applied: it would hold nothing back and help no one,
  // yet it is a restriction the batch team must be told about (blame.sh cache: the rung on top
  // of a placement capped a light BE at 0.41 CPU; it used 0.05). Dropping one gives the others
  // more of the budget, so the split is made again until it holds.
  for (;;) {
    targets.clear();
    double blame_sum = 0;
    for (auto& [id, levers] : restrictions_) {
      auto jt = levers.find(Lever::CpuQuota);
      auto tt = tracked_.find(id);
      if (jt == levers.end() || tt == tracked_.end()) {
        continue;
      }
      targets.push_back({&tt->second, &jt->second, 0.0});
      blame_sum += jt->second.blame;
    }
    if (targets.empty()) {
      return;
    }
    // Split by blame, not by this interval's CPU use: the more of the blame a container
    // carries, the smaller its share of the budget. Stable while the evidence is (a bursty
    // antagonist idle at the decision no longer hands its share to a steady neighbour).
    wsum = 0;
    for (Target& x : targets) {
      const double share = blame_sum > 0 ? x.r->blame / blame_sum : 0.0;
      x.weight = 1.0 - share + kQuotaWeightFloor;
      wsum += x.weight;
    }
    quota_budget_ = std::max(quota_budget_, quotaFloor(targets.size()));
    rest = std::max(0.0, quota_budget_ - floor_cpus * static_cast<double>(targets.size()));
    std::vector<std::string> loose;
    for (const Target& x : targets) {
      // Once applied, a cap stays through the container's lulls (no churn on a duty cycle),
      // unless the budget is being given back and it has not throttled the container for the
      // quiet stretch that led here: then it holds nothing back and goes (relaxed below).
      const double peak = std::max(x.t->peak_cpus, cpusUsed(*x.t));
      const double cpus = share_of(x);
      if (cpus < kQuotaBindsFactor * peak) {
        continue;
      }
      if (x.r->applied.cpu_quota) {
        if (kind == DecisionKind::Relax && unthrottledFor(*x.t, config_.actions.quiet_intervals)) {
          std::ostringstream os;
          os << "its share of the BE budget (" << std::round(cpus * 100) / 100
             << " CPUs) is more than " << kQuotaBindsFactor << "x what it uses at its peak ("
             << std::round(peak * 100) / 100 << " CPUs) and the cap has not throttled it for "
             << config_.actions.quiet_intervals << " intervals: it holds nothing back";
          releaseQuotaCap(*x.t, *x.r, why + "; " + os.str(), victim, ep, antagonists, out);
          loose.push_back(x.t->info.id);
        }
      } else {
        std::ostringstream os;
        os << displayName(x.t->info) << ": cpu_quota: its share of the BE budget ("
           << std::round(cpus * 100) / 100 << " CPUs) is more than " << kQuotaBindsFactor
           << "x what it uses at its peak (" << std::round(peak * 100) / 100
           << " CPUs): a cap would hold nothing back; not capped";
        findings.push_back({x.t->info.id, "quota_would_not_bind", os.str()});
        loose.push_back(x.t->info.id);
      }
    }
    if (loose.empty()) {
      break;
    }
    for (const std::string& id : loose) {
      dropQuotaTarget(id);
    }
  }
  std::vector<std::string> dropped;
  for (Target& x : targets) {
    const double cpus = share_of(x);
    auto quota = std::max(min_q, static_cast<uint64_t>(cpus * static_cast<double>(period)));
    Resources vals;
    vals.cpu_quota = static_cast<int64_t>(quota);
    vals.cpu_period = period;
    const Resources& orig = x.r->original;
    if (orig.cpu_quota && *orig.cpu_quota > 0 && orig.cpu_period && *orig.cpu_period > 0 &&
        static_cast<double>(*orig.cpu_quota) / static_cast<double>(*orig.cpu_period) <=
            static_cast<double>(quota) / static_cast<double>(period)) {
      // Its own quota is already tighter than its share: never loosen it.
      if (!x.r->applied.cpu_quota) {
        dropped.push_back(x.t->info.id);
        continue;
      }
      vals = restoreValues(orig, Lever::CpuQuota, node_cpus_);
    }
    if (x.r->applied == vals) {
      continue;
    }
    Tracked& t = *x.t;
    const Resources before = current(t, Lever::CpuQuota);
    std::ostringstream os;
    os << decisionKindName(kind) << " rung " << x.r->rung + 1 << " (cpu_quota): " << why
       << "; aggregate BE budget " << std::round(quota_budget_ * 100) / 100 << " of " << nodeCpus()
       << " CPUs over " << targets.size() << " BE containers; " << displayName(t.info) << " "
       << describeValues(before, Lever::CpuQuota) << " -> "
       << describeValues(vals, Lever::CpuQuota);
    x.r->applied = vals;
    t.last_applied[Lever::CpuQuota] = vals;
    t.last_original[Lever::CpuQuota] = x.r->original;
    t.last_change_round = round_;
    t.last_explanation = os.str();
    out.push_back(makeDecision(kind, Lever::CpuQuota, x.r->rung, t, vals,
                               restoreValues(x.r->original, Lever::CpuQuota, node_cpus_), victim,
                               ep, antagonists, rule, os.str()));
    ++changes_this_round_;
  }
  for (const std::string& id : dropped) {
    findings.push_back({id, "at_floor",
                        id + ": cpu_quota: its own CFS quota is already within its share of "
                             "the BE budget; left as is"});
    dropQuotaTarget(id);
  }
}

EngineState::RungResult EngineState::applyQuotaRung(Episode& ep,
                                                    const std::string& key,
                                                    Tracked& victim,
                                                    int rung,
                                                    const std::vector<Antagonist>& antagonists,
                                                    DecisionKind kind,
                                                    bool replacing,
                                                    std::vector<Decision>& out,
                                                    std::vector<Finding>& findings) {
  Step step;
  step.lever = Lever::CpuQuota;
  step.rung = rung;
  step.antagonists = antagonists;
  const bool complete = addQuotaTargets(key, rung, antagonists, {}, replacing, step);
  if (step.targets.empty()) {
    return complete ? RungResult::NothingToDo : RungResult::Deferred;
  }
  if (quota_budget_ <= 0) {
    quota_budget_ = initialQuotaBudget(victim, quotaTargets());
  }
  redistributeQuota(kind, cpuRule(victim, false), victimPhrase(victim, false), &victim, &ep,
                    antagonists, out, findings);
  return pushQuotaStep(ep, std::move(step));
}

// After redistributeQuota(): the step keeps the targets the split left capped (one whose own
// quota is within its share was dropped) and goes on the episode; none left, nothing was done.
EngineState::RungResult EngineState::pushQuotaStep(Episode& ep, Step step) {
  std::erase_if(step.targets, [&](const std::string& id) {
    auto it = restrictions_.find(id);
    return it == restrictions_.end() || it->second.count(Lever::CpuQuota) == 0;
  });
  if (step.targets.empty()) {
    if (!anyQuota()) {
      quota_budget_ = 0;
    }
    return RungResult::NothingToDo;
  }
  step.applied_tick = ticks_;
  ep.steps.push_back(std::move(step));
  return RungResult::Applied;
}

bool EngineState::holdsQuota(const Episode& ep) const {
  return std::any_of(ep.steps.begin(), ep.steps.end(),
                     [](const Step& st) { return st.lever == Lever::CpuQuota; });
}

bool EngineState::canTighten(const Episode& ep) const {
  // A cap taken against the host's wait is one step: tighter, it takes from BE what the host,
  // not the victim, gets (colocation foreign phase, session 33: a second victim's episode
  // tightened it to 0.56 CPU and BE lost a quarter of its work).
  const bool cap = std::any_of(ep.steps.begin(), ep.steps.end(), [](const Step& st) {
    return st.lever == Lever::CpuQuota && st.uncontrolled_cap;
  });
  return !ep.memory && !cap && holdsQuota(ep) && quota_budget_ > quotaFloor(quotaTargets()) + 1e-6;
}

// The victim still hurts with the quota rung in force: shrink the aggregate budget one step
// (capping BE containers that started running meanwhile too) and verify again.
bool EngineState::tightenQuota(Episode& ep,
                               const std::string& key,
                               Tracked& v,
                               std::vector<Decision>& out,
                               std::vector<Finding>& findings) {
  if (!canTighten(ep)) {
    return false;
  }
  auto sit = std::find_if(ep.steps.begin(), ep.steps.end(),
                          [](const Step& st) { return st.lever == Lever::CpuQuota; });
  addQuotaTargets(key, sit->rung, sit->antagonists, {}, false, *sit);
  // From what the capped set can use at all: the first step then binds.
  const double was = std::min(quota_budget_, quotaCeiling());
  quota_budget_ =
      std::max(quotaFloor(quotaTargets()), was * (1.0 - config_.levers.quota_step_fraction));
  std::ostringstream why;
  why << victimPhrase(v, false) << "; still hurt with the BE quota in force: budget "
      << std::round(was * 100) / 100 << " -> " << std::round(quota_budget_ * 100) / 100 << " CPUs";
  redistributeQuota(DecisionKind::Escalate, "quota_budget_tightened", why.str(), &v, &ep,
                    sit->antagonists, out, findings);
  resetVerification(ep, v);
  return true;
}

}  // namespace colod::policy
