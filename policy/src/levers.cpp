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

}  // namespace colod::policy
