// SPDX-License-Identifier: Apache-2.0
// Reorders a vector in place by an index: the snapshot's samples (~800 bytes each) are sorted
// by path through an index, then put in that order without a second vector a tick.
//
// Private to colod::collect. Pure.
#pragma once

#include <cstdint>
#include <utility>
#include <vector>

namespace colod::collect::detail {

// Afterwards v[i] holds what v[order[i]] held. `order` must be a permutation of 0..v.size()-1;
// it is consumed (left as the identity). Each cycle of the permutation costs one element moved
// per position and one held aside: n + cycles moves, no allocation.
template <typename T>
void permuteInPlace(std::vector<T>& v, std::vector<uint32_t>& order) {
  for (uint32_t i = 0; i < order.size(); ++i) {
    if (order[i] == i) {
      continue;  // in place already, or placed by an earlier cycle
    }
    T held = std::move(v[i]);
    uint32_t j = i;
    while (order[j] != i) {
      const uint32_t k = order[j];
      v[j] = std::move(v[k]);
      order[j] = j;
      j = k;
    }
    v[j] = std::move(held);
    order[j] = j;
  }
}

}  // namespace colod::collect::detail
