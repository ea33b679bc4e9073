// SPDX-License-Identifier: Apache-2.0
#include "pair_deltas.h"

#include <algorithm>
#include <cstring>

#include "entry_delta.h"

namespace colod::collect::detail {

void PairDeltas::update(const uint8_t* keys,
                        const uint8_t* values,
                        std::size_t n,
                        const PairKeySet& skip,
                        uint64_t tick) {
  deltas_.clear();
  next_.clear();
  hits_ = 0;
  const uint64_t last = full_tick_;  // a pair it had is at State::pos of order_
  full_tick_ = tick;
  // The previous read's position expected next. A pair added since is met before it (the
  // kernel puts a new entry at the head of its bucket's list) and found by hash, the cursor
  // staying; a known pair met elsewhere (pairs removed, or another order) puts the cursor
  // after its old position, so the rest is met in step again.
  std::size_t j = 0;
  for (std::size_t i = 0; i < n; ++i) {
    colod_pair_key k{};
    uint64_t v = 0;
    std::memcpy(&k, keys + i * sizeof(k), sizeof(k));
    std::memcpy(&v, values + i * sizeof(v), sizeof(v));
    State* st = nullptr;
    if (skip.empty() || !skip.contains(k)) {
      if (j < order_.size() && order_[j].second != nullptr && PairKeyEq()(order_[j].first, k)) {
        st = order_[j].second;
        ++hits_;
        ++j;
      } else {
        auto [it, inserted] = state_.try_emplace(k);
        st = &it->second;
        if (!inserted && st->seen == last) {
          j = st->pos + 1;
        }
      }
      const uint64_t d = st->seen == 0 ? v : sub(v, st->value);
      *st = State{v, tick, static_cast<uint32_t>(i), d != 0 || st->seen == 0 ? tick : st->moved};
      if (d != 0) {
        deltas_.emplace_back(k, d);
      }
    } else if (j < order_.size() && PairKeyEq()(order_[j].first, k)) {
      ++j;  // skipped in step
    }
    next_.emplace_back(k, st);
  }
  std::swap(order_, next_);
}

std::size_t PairDeltas::takeIdle(uint64_t tick,
                                 uint64_t idle_ticks,
                                 std::vector<colod_pair_key>& out) {
  const std::size_t before = out.size();
  idle_ticks = std::max<uint64_t>(idle_ticks, 1);
  for (auto it = state_.begin(); it != state_.end();) {
    // Only pairs the last full read had: the others are gone already (forget() drops them).
    if (it->second.seen == full_tick_ && tick - it->second.moved >= idle_ticks) {
      out.push_back(it->first);
      it = state_.erase(it);
    } else {
      ++it;
    }
  }
  const std::size_t n = out.size() - before;
  if (n > 0) {
    order_.clear();  // its pointers would dangle
  }
  // deltas() names none of them: a pair that moved at `tick` is not idle (idle_ticks >= 1).
  return n;
}

void PairDeltas::drained(const uint8_t* keys, const uint8_t* values, std::size_t n) {
  if (!state_.empty()) {
    state_.clear();
    order_.clear();
  }
  deltas_.clear();
  for (std::size_t i = 0; i < n; ++i) {
    colod_pair_key k{};
    uint64_t v = 0;
    std::memcpy(&k, keys + i * sizeof(colod_pair_key), sizeof(k));
    std::memcpy(&v, values + i * sizeof(uint64_t), sizeof(v));
    if (v > 0) {
      deltas_.emplace_back(k, v);
    }
  }
}

void PairDeltas::forget(const std::function<bool(const colod_pair_key&)>& dead,
                        const std::function<void(const colod_pair_key&)>& prune) {
  const std::size_t before = state_.size();
  for (auto it = state_.begin(); it != state_.end();) {
    if (it->second.seen != full_tick_) {
      it = state_.erase(it);  // gone from the map
    } else if (dead(it->first)) {
      prune(it->first);
      it = state_.erase(it);
    } else {
      ++it;
    }
  }
  if (state_.size() != before) {
    order_.clear();
  }
  std::erase_if(deltas_, [&](const Delta& e) { return dead(e.first); });
}

}  // namespace colod::collect::detail
