// SPDX-License-Identifier: Apache-2.0
#include "behind_deltas.h"

#include <algorithm>

namespace colod::collect::detail {

void BehindDeltas::update(std::span<const BehindEntry> read, const PairKeySet& skip) {
  deltas_.clear();
  std::unordered_map<colod_pair_key, colod_behind, PairKeyHash, PairKeyEq> next;
  next.reserve(read.size());
  for (const BehindEntry& e : read) {
    if (skip.contains(e.key)) {
      continue;
    }
    next[e.key] = e.value;
    colod_behind d = e.value;
    if (auto it = state_.find(e.key); it != state_.end()) {
      // The counters only grow while the entry lives: a smaller one is a re-created entry
      // (deleted when a cgroup died, the id pair seen again), whose whole value is new.
      if (e.value.waits >= it->second.waits && e.value.wait_ns >= it->second.wait_ns) {
        d.waits = e.value.waits - it->second.waits;
        d.wait_ns = e.value.wait_ns - it->second.wait_ns;
      }
    }
    if (d.waits > 0 || d.wait_ns > 0) {
      deltas_.push_back({e.key, d});
    }
  }
  state_ = std::move(next);
}

void BehindDeltas::forget(const std::function<bool(const colod_pair_key&)>& dead,
                          const std::function<void(const colod_pair_key&)>& prune) {
  for (auto it = state_.begin(); it != state_.end();) {
    if (dead(it->first)) {
      prune(it->first);
      it = state_.erase(it);
    } else {
      ++it;
    }
  }
  std::erase_if(deltas_, [&](const BehindEntry& e) { return dead(e.key); });
}

}  // namespace colod::collect::detail
