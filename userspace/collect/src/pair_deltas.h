// SPDX-License-Identifier: Apache-2.0
// A victim <- aggressor pairs map as read: what moved since the last read (`pairs`, read whole
// at the files' cadence), or a drained map's counts as they are (`named_pairs`).
//
// Private to colod::collect. Pure: the map's entries come in as the read returned them.
//
// Pairs are the largest map on a busy node (thousands of entries), so the state of every pair is
// kept and updated in place, and only the pairs whose count moved are reported. The kernel's
// batch read returns them in bucket order, which stays the same while no pair is added or
// removed: pair i of a read is looked for at position i of the previous one first, a sequential
// compare instead of a hash lookup per pair (those lookups were most of the snapshot's own time
// at 1000 cgroups, issue 17). A pair added or removed shifts the order: the added one is found
// by hash, and the compare goes on in step after it (a cursor into the previous order, set
// after a known pair's old position when it is met elsewhere).
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <unordered_map>
#include <unordered_set>
#include <utility>
#include <vector>

#include "cgsched.h"

namespace colod::collect::detail {

struct PairKeyHash {
  std::size_t operator()(const colod_pair_key& k) const {
    return std::hash<uint64_t>()(k.victim * 0x9E3779B97F4A7C15ULL ^ k.aggressor);
  }
};
struct PairKeyEq {
  bool operator()(const colod_pair_key& a, const colod_pair_key& b) const {
    return a.victim == b.victim && a.aggressor == b.aggressor;
  }
};
using PairKeySet = std::unordered_set<colod_pair_key, PairKeyHash, PairKeyEq>;

class PairDeltas {
 public:
  using Delta = std::pair<colod_pair_key, uint64_t>;

  // One read of the map at snapshot `tick` (> 0, increasing): n entries, keys and u64 values
  // packed as MapReader holds them. Keys in `skip` (deletions still pending) are left out.
  // deltas() then holds the pairs whose count moved, by how much (a new pair: its count).
  void update(const uint8_t* keys,
              const uint8_t* values,
              std::size_t n,
              const PairKeySet& skip,
              uint64_t tick);

  // A drained map's read (MapReader::drain: each entry is what its pair gained since the last
  // drain): every entry is its own delta, and nothing is kept (size() 0, no idle pairs).
  void drained(const uint8_t* keys, const uint8_t* values, std::size_t n);

  // Appends to `out` the pairs of the last full read whose count has not moved for idle_ticks
  // snapshots or more at `tick`, and forgets them: the caller deletes them from the map (or
  // marks them pending, as for prune). A pair that moves again is re-created by the BPF side
  // and met as new, its count whole. Returns how many.
  std::size_t takeIdle(uint64_t tick, uint64_t idle_ticks, std::vector<colod_pair_key>& out);

  // Forgets the pairs not in the last full read (gone from the map) and those `dead` names
  // (calling prune for each, which deletes it from the map), and drops dead ones from
  // deltas(). Only the collector deletes pairs, so a forgotten key cannot come back with an
  // old count.
  void forget(const std::function<bool(const colod_pair_key&)>& dead,
              const std::function<void(const colod_pair_key&)>& prune);

  // Not read this snapshot: nothing moved as far as it knows (deltas() empty).
  void unread() { deltas_.clear(); }

  [[nodiscard]] const std::vector<Delta>& deltas() const { return deltas_; }
  [[nodiscard]] std::size_t size() const { return state_.size(); }
  // Of the last update's entries, how many were found at their position (for tests).
  [[nodiscard]] std::size_t positionalHits() const { return hits_; }

 private:
  struct State {
    uint64_t value = 0;
    uint64_t seen = 0;   // tick of the last read that had the key; 0: new
    uint32_t pos = 0;    // its position in that read
    uint64_t moved = 0;  // tick its count last moved (or it was first read)
  };
  std::unordered_map<colod_pair_key, State, PairKeyHash, PairKeyEq> state_;
  // The last read's keys in its order, with their state (nullptr: skipped). Cleared whenever
  // state_ drops an entry (the pointers would dangle).
  std::vector<std::pair<colod_pair_key, State*>> order_;
  std::vector<std::pair<colod_pair_key, State*>> next_;
  std::vector<Delta> deltas_;
  std::size_t hits_ = 0;
  uint64_t full_tick_ = 0;  // tick of the last update()
};

}  // namespace colod::collect::detail
