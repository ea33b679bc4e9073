// SPDX-License-Identifier: Apache-2.0
// The `behind` map read at every snapshot: a protected cgroup's waits after a wakeup, by the
// cgroup it waited behind (bpf/cgsched.h, struct colod_behind), as deltas since the last read.
//
// Private to colod::collect. Pure: the map's entries come in as the read returned them. The map
// holds only watched (protected) cgroups' entries, a few per victim, so a hash lookup per entry
// is cheap; pair_deltas.h is the large map's positional version.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <span>
#include <unordered_map>
#include <vector>

#include "cgsched.h"
#include "pair_deltas.h"

namespace colod::collect::detail {

struct BehindEntry {
  colod_pair_key key{};
  colod_behind value{};
};

class BehindDeltas {
 public:
  // One read of the map: its entries. Keys in `skip` (deletions still pending) are left out.
  // deltas() then holds the entries whose waits moved, by how much (a new or re-created entry:
  // its whole value). Entries absent from the read are forgotten (only the collector deletes).
  void update(std::span<const BehindEntry> read, const PairKeySet& skip);

  // Calls prune for every known entry `dead` names (prune deletes it from the map) and
  // forgets it; drops dead ones from deltas().
  void forget(const std::function<bool(const colod_pair_key&)>& dead,
              const std::function<void(const colod_pair_key&)>& prune);

  [[nodiscard]] const std::vector<BehindEntry>& deltas() const { return deltas_; }
  [[nodiscard]] std::size_t size() const { return state_.size(); }

 private:
  std::unordered_map<colod_pair_key, colod_behind, PairKeyHash, PairKeyEq> state_;
  std::vector<BehindEntry> deltas_;
};

}  // namespace colod::collect::detail
