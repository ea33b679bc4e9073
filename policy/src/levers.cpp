// SPDX-License-Identifier: Apache-2.0
// Levers: the restricted value of one lever for one target (shares, cpuset, memory).
#include <algorithm>
#include <cmath>
#include <sstream>

#include "colod/policy/tier.h"
#include "engine_state.h"

namespace colod::policy {

Resources leverValues(const Resources& r, Lever lever) {
  Resources out;
  switch (lever) {
    case Lever::CpuShares:
      out.cpu_shares = r.cpu_shares;
      break;
    case Lever::Cpuset:
      out.cpuset_cpus = r.cpuset_cpus;
      break;
    case Lever::CpuQuota:
      out.cpu_quota = r.cpu_quota;
      out.cpu_period = r.cpu_period;
      break;
    case Lever::MemoryLimit:
      out.memory_limit = r.memory_limit;
      break;
  }
  return out;
}

// For restoring: an unknown original becomes the "unlimited"/default value of the lever, so a
// restore always carries a concrete value.
Resources restoreValues(const Resources& original, Lever lever, const std::vector<int>& node) {
  Resources out = original;
  switch (lever) {
    case Lever::CpuShares:
      if (!out.cpu_shares) {
        out.cpu_shares = 1024;
      }
      break;
    case Lever::Cpuset:
      if (!out.cpuset_cpus) {
        out.cpuset_cpus = formatCpuList(node);
      }
      break;
    case Lever::CpuQuota:
      if (!out.cpu_quota) {
        out.cpu_quota = -1;
      }
      if (!out.cpu_period) {
        out.cpu_period = 100'000;
      }
      break;
    case Lever::MemoryLimit:
      if (!out.memory_limit) {
        out.memory_limit = -1;
      }
      break;
  }
  return out;
}

// --- levers ----------------------------------------------------------------------------
// Current value of a lever on a target: the applied restriction if any, else the registry.
Resources EngineState::current(const Tracked& t, Lever lever) const {
  if (auto it = restrictions_.find(t.info.id); it != restrictions_.end()) {
    if (auto jt = it->second.find(lever); jt != it->second.end()) {
      return jt->second.applied;
    }
  }
  return leverValues(t.info.resources, lever);
}

std::vector<int> EngineState::targetCpus(const Tracked& t) const {
  if (auto it = restrictions_.find(t.info.id); it != restrictions_.end()) {
    if (auto jt = it->second.find(Lever::Cpuset); jt != it->second.end()) {
      auto parsed = parseCpuList(jt->second.applied.cpuset_cpus.value_or(""));
      if (parsed && !parsed->empty()) {
        return *parsed;
      }
    }
  }
  return t.cpus.empty() ? node_cpus_ : t.cpus;
}

// The restricted value of `lever` for target t protecting victim v, or nullopt when the lever
// would not restrict it further (already at or below the rung, or at its floor).
std::optional<Resources> EngineState::restricted(const Tracked& t,
                                                 const Tracked& v,
                                                 Lever lever) const {
  const auto& fl = config_.floors;
  const auto& lv = config_.levers;
  const Resources cur = current(t, lever);
  Resources out;
  switch (lever) {
    case Lever::CpuShares: {
      const uint64_t target = std::max(fl.be_min_cpu_shares, lv.be_cpu_shares);
      // Unknown shares: we could not restore them exactly, so we do not lower them.
      if (!cur.cpu_shares || *cur.cpu_shares <= target) {
        return std::nullopt;
      }
      out.cpu_shares = target;
      return out;
    }
    case Lever::Cpuset: {
      // Only CPUs of the node (the registry may list CPUs the snapshot's node does not have).
      std::vector<int> have;
      for (int c : targetCpus(t)) {
        if (std::binary_search(node_cpus_.begin(), node_cpus_.end(), c)) {
          have.push_back(c);
        }
      }
      if (have.empty()) {
        have = node_cpus_;
      }
      const auto min_cpus = static_cast<size_t>(fl.be_min_cpus);
      const std::vector<int>& vc = v.cpus;
      const bool victim_pinned = !vc.empty() && vc.size() < node_cpus_.size();
      if (have.size() <= min_cpus && !victim_pinned) {
        return std::nullopt;
      }
      std::vector<int> keep;
      if (victim_pinned) {
        auto away = [&](int c) {
          return !std::binary_search(vc.begin(), vc.end(), c) &&
                 !std::binary_search(reserved_cpus_.begin(), reserved_cpus_.end(), c);
        };
        for (int c : have) {
          if (away(c)) {
            keep.push_back(c);
          }
        }
        // Move, don't only shrink (issue 19): a BE that sits on the victim's CPUs with fewer
        // than the floor elsewhere is placed onto node CPUs away from them (never onto CPUs
        // exclusive to another container), highest-numbered first, up to the floor.
        for (auto c = node_cpus_.rbegin(); c != node_cpus_.rend() && keep.size() < min_cpus; ++c) {
          if (away(*c) && std::find(keep.begin(), keep.end(), *c) == keep.end()) {
            keep.push_back(*c);
          }
        }
      } else {
        const auto n = static_cast<size_t>(
            std::floor(static_cast<double>(have.size()) * lv.be_cpuset_max_fraction));
        // Never onto CPUs another container holds exclusively or a protected container is pinned
        // to, while enough others remain for the floor.
        std::vector<int> pool;
        for (int c : have) {
          if (!std::binary_search(reserved_cpus_.begin(), reserved_cpus_.end(), c)) {
            pool.push_back(c);
          }
        }
        if (pool.size() < min_cpus || pool.empty()) {
          pool = have;
        }
        // The highest-numbered CPUs: the kernel and most services favour low numbers.
        keep.assign(pool.end() - static_cast<std::ptrdiff_t>(std::min(n, pool.size())), pool.end());
      }
      // Not enough CPUs away from the victim: fill up to the floor with its CPUs, highest-
      // numbered first (BE never gets fewer than floors.be_min_cpus).
      for (auto c = have.rbegin(); c != have.rend() && keep.size() < min_cpus; ++c) {
        if (std::find(keep.begin(), keep.end(), *c) == keep.end()) {
          keep.push_back(*c);
        }
      }
      std::sort(keep.begin(), keep.end());
      if (keep == have || (keep.size() >= have.size() && !victim_pinned)) {
        return std::nullopt;
      }
      out.cpuset_cpus = formatCpuList(keep);
      if (auto mq = moveQuota(t, keep)) {
        out.cpu_quota = mq->quota_us;
        out.cpu_period = mq->period_us;
      }
      return out;
    }
    case Lever::CpuQuota:
      // The quota rung is one aggregate budget over all capped BE containers: see
      // applyQuotaRung() and redistributeQuota().
      return std::nullopt;
    case Lever::MemoryLimit: {
      if (!t.sample || !t.sample->memory_bytes) {
        return std::nullopt;
      }
      const auto usage = static_cast<double>(*t.sample->memory_bytes);
      auto limit = static_cast<int64_t>(usage * (1.0 - lv.memory_step_fraction));
      limit = std::max(limit, fl.be_min_memory_bytes);
      if (cur.memory_limit && *cur.memory_limit > 0 && *cur.memory_limit <= limit) {
        return std::nullopt;
      }
      out.memory_limit = limit;
      return out;
    }
  }
  return std::nullopt;
}

// One pass over the containers for moveQuota() (refreshMoveQuotas() sizes every moved
// container's quota from it, not with a pass per restriction).
EngineState::BeLoad EngineState::beLoad() const {
  BeLoad load;
  // A moved container counts in the split once it uses at least the quota floor.
  const double floor_cpus =
      static_cast<double>(minQuotaUs()) / static_cast<double>(config_.levers.quota_period_us);
  for (const auto& [id, x] : tracked_) {
    if (x.tier != Tier::Be || x.info.exclusive_cpus) {
      continue;
    }
    std::vector<int> xc = targetCpus(x);
    if (xc.empty()) {
      continue;
    }
    if (auto rt = restrictions_.find(id);
        rt != restrictions_.end() && rt->second.count(Lever::Cpuset) != 0) {
      if (x.peak_cpus >= floor_cpus) {
        std::sort(xc.begin(), xc.end());
        load.moved.push_back({&x, std::move(xc)});
      }
      continue;
    }
    const double per_cpu = x.peak_cpus / static_cast<double>(xc.size());
    for (int c : xc) {
      if (c < 0) {
        continue;
      }
      if (static_cast<size_t>(c) >= load.unmoved_by_cpu.size()) {
        load.unmoved_by_cpu.resize(static_cast<size_t>(c) + 1, 0.0);
      }
      load.unmoved_by_cpu[static_cast<size_t>(c)] += per_cpu;
    }
  }
  return load;
}

// What moving t onto `cpus` (sorted) would take from the BE containers already there: a move
// only shifts contention, and the BE on the destination never hurt the victim (issue 19: the
// antagonist moved off a pinned LS's CPU took a third of the CPU of an innocent pinned on the
// other one, whose pod weight it then matched). NRI cannot lower a pod's weight, so the moved
// container gets a CFS quota of what those CPUs leave idle after the BE colod did not move
// there (their peak demand, Tracked::peak_cpus), split among the containers colod moved there
// that use at least the quota floor (their weights share it among them); never below the quota
// floor. nullopt: no such BE, or the cap would barely bind.
std::optional<EngineState::MoveQuota> EngineState::moveQuota(const BeLoad& load,
                                                             const Tracked& t,
                                                             const std::vector<int>& cpus) const {
  if (cpus.empty()) {
    return std::nullopt;
  }
  MoveQuota mq;
  mq.moved = 1;
  for (int c : cpus) {
    if (c >= 0 && static_cast<size_t>(c) < load.unmoved_by_cpu.size()) {
      mq.others += load.unmoved_by_cpu[static_cast<size_t>(c)];
    }
  }
  const auto held = restrictions_.find(t.info.id);
  const bool t_moved = held != restrictions_.end() && held->second.count(Lever::Cpuset) != 0;
  if (!t_moved && t.tier == Tier::Be && !t.info.exclusive_cpus) {
    // Not moved yet: beLoad() spread t's own demand over its CPUs as well. Take it out.
    const std::vector<int> tc = targetCpus(t);
    const auto overlap = std::count_if(tc.begin(), tc.end(), [&](int c) {
      return std::binary_search(cpus.begin(), cpus.end(), c);
    });
    if (!tc.empty()) {
      mq.others -= t.peak_cpus * static_cast<double>(overlap) / static_cast<double>(tc.size());
    }
  }
  mq.others = std::max(0.0, mq.others);
  for (const auto& m : load.moved) {
    if (m.t == &t) {
      continue;
    }
    const bool overlaps = std::any_of(m.cpus.begin(), m.cpus.end(), [&](int c) {
      return std::binary_search(cpus.begin(), cpus.end(), c);
    });
    mq.moved += overlaps ? 1 : 0;  // moved there by colod too, and busy: they share what is left
  }
  if (mq.others < kRunningCpuFraction) {
    return std::nullopt;
  }
  const auto n = static_cast<double>(cpus.size());
  const double share = std::max(0.0, n - mq.others) / static_cast<double>(mq.moved);
  if (share >= kSaturatedFraction * n) {
    return std::nullopt;
  }
  const auto& own = t.info.resources;
  mq.period_us = static_cast<int64_t>(own.cpu_period.value_or(config_.levers.quota_period_us));
  if (mq.period_us <= 0) {
    mq.period_us = static_cast<int64_t>(config_.levers.quota_period_us);
  }
  mq.quota_us =
      std::max(static_cast<int64_t>(minQuotaUs()),
               static_cast<int64_t>(std::llround(share * static_cast<double>(mq.period_us))));
  if (own.cpu_quota && *own.cpu_quota > 0 &&
      static_cast<double>(*own.cpu_quota) / static_cast<double>(mq.period_us) <=
          static_cast<double>(mq.quota_us) / static_cast<double>(mq.period_us)) {
    return std::nullopt;  // its own limit is tighter already
  }
  return mq;
}

Resources EngineState::originalOf(const Resources& registry,
                                  Lever lever,
                                  const Resources& applied) {
  Resources out = leverValues(registry, lever);
  if (lever == Lever::Cpuset && applied.cpu_quota) {
    out.cpu_quota = registry.cpu_quota.value_or(-1);
    out.cpu_period = registry.cpu_period.value_or(100'000);
  }
  return out;
}

std::string EngineState::moveNote(const Tracked& t, const Resources& values) const {
  if (!values.cpu_quota || !values.cpuset_cpus) {
    return "";
  }
  auto cpus = parseCpuList(*values.cpuset_cpus);
  if (!cpus) {
    return "";
  }
  std::sort(cpus->begin(), cpus->end());
  const auto mq = moveQuota(t, *cpus);
  if (!mq) {
    return "";
  }
  std::ostringstream os;
  os << " (other BE on cpuset " << *values.cpuset_cpus << " need "
     << std::round(mq->others * 100) / 100 << " of its " << cpus->size()
     << " CPUs at their peak: the move takes only what they leave idle"
     << (mq->moved > 1 ? ", shared by the " + std::to_string(mq->moved) + " moved there" : "")
     << ")";
  return os.str();
}

void EngineState::refreshMoveQuotas(std::vector<Decision>& out) {
  if (restrictions_.empty()) {
    return;
  }
  const BeLoad load = beLoad();  // one pass over the containers, not one per restriction
  for (auto& [id, levers] : restrictions_) {
    auto jt = levers.find(Lever::Cpuset);
    auto tt = tracked_.find(id);
    if (jt == levers.end() || tt == tracked_.end() || !budget()) {
      continue;
    }
    Restriction& r = jt->second;
    Tracked& t = tt->second;
    if (round_ - t.last_change_round < config_.actions.change_cooldown_intervals) {
      continue;
    }
    auto cpus = parseCpuList(r.applied.cpuset_cpus.value_or(""));
    if (!cpus || cpus->empty()) {
      continue;
    }
    std::sort(cpus->begin(), cpus->end());
    const auto n = static_cast<double>(cpus->size());
    auto cpusOf = [&](const Resources& x) { return std::min(quotaCpus(x), n); };
    const auto mq = moveQuota(load, t, *cpus);
    const double have = cpusOf(r.applied);
    Resources next = r.applied;
    if (mq) {
      next.cpu_quota = mq->quota_us;
      next.cpu_period = mq->period_us;
    } else {
      next.cpu_quota.reset();  // the runtime's own quota comes back (the overlay drops it)
      next.cpu_period.reset();
    }
    const double want = cpusOf(next);
    if (!r.applied.cpu_quota && !mq) {
      continue;
    }
    // Small changes wait (each one is an UpdateContainers and a cooldown); lifting the cap does
    // not (nothing is left to protect).
    if (mq && std::abs(want - have) < std::max(0.1, 0.25 * std::min(want, have))) {
      continue;
    }
    const Resources before = r.applied;
    r.applied = next;
    if (!mq) {
      r.original.cpu_quota.reset();
      r.original.cpu_period.reset();
    } else if (!r.original.cpu_quota) {
      const Resources orig = originalOf(t.info.resources, Lever::Cpuset, next);
      r.original.cpu_quota = orig.cpu_quota;
      r.original.cpu_period = orig.cpu_period;
    }
    t.last_applied[Lever::Cpuset] = r.applied;
    t.last_original[Lever::Cpuset] = r.original;
    const Episode* ep = nullptr;
    const Tracked* victim = nullptr;
    if (!r.owners.empty()) {
      if (auto e = episodes_.find(*r.owners.begin()); e != episodes_.end()) {
        ep = &e->second;
        if (auto v = tracked_.find(ep->victim_id); v != tracked_.end()) {
          victim = &v->second;
        }
      }
    }
    std::ostringstream os;
    os << "resize the quota of " << displayName(t.info) << " on its cpuset "
       << r.applied.cpuset_cpus.value_or("") << ": ";
    if (mq) {
      os << "the BE colod did not move there now need " << std::round(mq->others * 100) / 100
         << " of its " << cpus->size() << " CPUs at their peak";
    } else {
      os << "the BE colod did not move there no longer need enough of its CPUs to cap it";
    }
    os << "; " << describeValues(before, Lever::Cpuset) << " -> "
       << describeValues(r.applied, Lever::Cpuset);
    t.last_change_round = round_;
    t.last_explanation = os.str();
    out.push_back(makeDecision(want < have ? DecisionKind::Escalate : DecisionKind::Relax,
                               Lever::Cpuset, r.rung, t, r.applied,
                               restoreValues(r.original, Lever::Cpuset, node_cpus_), victim, ep, {},
                               "move_quota_resized", os.str()));
    ++changes_this_round_;
  }
}

}  // namespace colod::policy
