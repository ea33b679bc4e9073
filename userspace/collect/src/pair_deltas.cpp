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
  for (std::size_t i = 0; i < n; ++i) {
    colod_pair_key k{};
    uint64_t v = 0;
    std::memcpy(&k, keys + i * sizeof(k), sizeof(k));
    std::memcpy(&v, values + i * sizeof(v), sizeof(v));
    State* st = nullptr;
    if (skip.empty() || !skip.contains(k)) {
      if (i < order_.size() && order_[i].second != nullptr && PairKeyEq()(order_[i].first, k)) {
        st = order_[i].second;
        ++hits_;
      } else {
        st = &state_.try_emplace(k).first->second;
      }
      const uint64_t d = st->seen == 0 ? v : sub(v, st->value);
      *st = State{v, tick};
      if (d != 0) {
        deltas_.emplace_back(k, d);
      }
    }
    next_.emplace_back(k, st);
  }
  std::swap(order_, next_);
}

void PairDeltas::forget(uint64_t tick,
                        const std::function<bool(const colod_pair_key&)>& dead,
                        const std::function<void(const colod_pair_key&)>& prune) {
  const std::size_t before = state_.size();
  for (auto it = state_.begin(); it != state_.end();) {
    if (it->second.seen != tick) {
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
