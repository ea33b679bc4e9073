// SPDX-License-Identifier: Apache-2.0
// The snapshot's per-tick maps of cgroup id -> SchedEntry, without the allocator.
//
// Private to colod::collect. Pure: no syscalls.
//
// Each snapshot fills one or two maps of the entries it read (hundreds at 1000 containers) and
// drops the last snapshot's. Allocated afresh, their bucket arrays and ~400-byte nodes were a
// tenth of the collector's CPU at 1000 containers (issue 17; glibc's per-thread cache holds
// only seven chunks of a size, so the rest of a burst goes to the slower bins). Maps given
// back here are kept, cleared, with their buckets; their nodes are kept apart and put() takes
// them before it allocates. Both stocks are bounded.
#pragma once

#include <cstddef>
#include <cstdint>
#include <unordered_map>
#include <utility>
#include <vector>

#include "entry_delta.h"

namespace colod::collect::detail {

using SchedMap = std::unordered_map<uint64_t, SchedEntry>;

class SchedMapPool {
 public:
  // max_nodes: nodes kept for reuse at most (the rest of a map given back is freed).
  explicit SchedMapPool(std::size_t max_nodes = 8192) : max_nodes_(max_nodes) {}

  // An empty map: one given back (its buckets kept) or a new one.
  [[nodiscard]] SchedMap take() {
    if (maps_.empty()) {
      ++made_;
      return {};
    }
    SchedMap m = std::move(maps_.back());
    maps_.pop_back();
    return m;
  }

  // Takes m back: its nodes go to the node stock (up to max_nodes), the map to the map stock.
  void give(SchedMap&& m) {
    recycle(m);
    if (maps_.size() < kMaxMaps) {
      maps_.push_back(std::move(m));
    }
  }

  // Empties m in place, its buckets kept: its nodes go to the node stock (up to max_nodes), for
  // the put()s that refill it.
  void recycle(SchedMap& m) {
    while (!m.empty() && nodes_.size() < max_nodes_) {
      nodes_.push_back(m.extract(m.begin()));
    }
    m.clear();
  }

  // Room for n entries in m without a rehash. Not m.reserve(n): libstdc++ rehashes to the
  // size asked for, down as well as up, so a count that varies by tick reallocated the bucket
  // array at nearly every snapshot.
  static void reserve(SchedMap& m, std::size_t n) {
    if (static_cast<float>(m.bucket_count()) * m.max_load_factor() < static_cast<float>(n)) {
      m.reserve(n);
    }
  }

  // m[id] = e, with a kept node where a new one is needed.
  void put(SchedMap& m, uint64_t id, const SchedEntry& e) {
    if (auto it = m.find(id); it != m.end()) {
      it->second = e;
      return;
    }
    if (nodes_.empty()) {
      m.emplace(id, e);
      return;
    }
    SchedMap::node_type n = std::move(nodes_.back());
    nodes_.pop_back();
    n.key() = id;
    n.mapped() = e;
    m.insert(std::move(n));
  }

  [[nodiscard]] std::size_t keptNodes() const { return nodes_.size(); }
  [[nodiscard]] std::size_t keptMaps() const { return maps_.size(); }
  // Maps take() had to make afresh (none kept): flat once a snapshot's maps all come back.
  [[nodiscard]] uint64_t made() const { return made_; }

 private:
  static constexpr std::size_t kMaxMaps = 4;  // a snapshot holds at most three at once
  std::size_t max_nodes_;
  uint64_t made_ = 0;
  std::vector<SchedMap> maps_;
  std::vector<SchedMap::node_type> nodes_;
};

}  // namespace colod::collect::detail
