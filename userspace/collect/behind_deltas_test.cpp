// SPDX-License-Identifier: Apache-2.0
// BehindDeltas from reads: deltas of moved entries only, skipped keys, re-created entries,
// entries gone from the map, and dead ones pruned.
#include "behind_deltas.h"

#include <gtest/gtest.h>

#include <map>
#include <tuple>
#include <vector>

namespace colod::collect::detail {
namespace {

using M = std::map<std::pair<uint64_t, uint64_t>, std::pair<uint64_t, uint64_t>>;

BehindEntry entry(uint64_t victim, uint64_t aggressor, uint64_t waits, uint64_t ns) {
  return {colod_pair_key{.victim = victim, .aggressor = aggressor},
          colod_behind{.waits = waits, .wait_ns = ns}};
}

M apply(BehindDeltas& b, const std::vector<BehindEntry>& read, const PairKeySet& skip = {}) {
  b.update(read, skip);
  M out;
  for (const auto& e : b.deltas()) {
    out[{e.key.victim, e.key.aggressor}] = {e.value.waits, e.value.wait_ns};
  }
  return out;
}

TEST(BehindDeltas, NewEntriesWholeMovedOnesByTheirDelta) {
  BehindDeltas b;
  EXPECT_EQ(apply(b, {entry(1, 2, 3, 3000), entry(1, 9, 1, 500)}),
            (M{{{1, 2}, {3, 3000}}, {{1, 9}, {1, 500}}}));
  // (1, 9) did not move: not reported; (1, 2) by what it gained; (1, 1) new (its own tasks).
  EXPECT_EQ(apply(b, {entry(1, 2, 5, 7000), entry(1, 9, 1, 500), entry(1, 1, 2, 200)}),
            (M{{{1, 2}, {2, 4000}}, {{1, 1}, {2, 200}}}));
  EXPECT_EQ(b.size(), 3u);
}

TEST(BehindDeltas, ARecreatedEntryCountsWholeAndAGoneOneIsForgotten) {
  BehindDeltas b;
  apply(b, {entry(1, 2, 10, 10000), entry(3, 4, 1, 100)});
  // (1, 2) was deleted and came back smaller; (3, 4) left the map.
  EXPECT_EQ(apply(b, {entry(1, 2, 2, 900)}), (M{{{1, 2}, {2, 900}}}));
  EXPECT_EQ(b.size(), 1u);
  // (3, 4) back later: all of it is new.
  EXPECT_EQ(apply(b, {entry(1, 2, 2, 900), entry(3, 4, 1, 50)}), (M{{{3, 4}, {1, 50}}}));
}

TEST(BehindDeltas, SkippedKeysAreNotReportedAndDeadOnesArePruned) {
  BehindDeltas b;
  PairKeySet skip{colod_pair_key{.victim = 5, .aggressor = 6}};
  EXPECT_EQ(apply(b, {entry(5, 6, 4, 400), entry(7, 8, 1, 100), entry(7, 6, 2, 300)}, skip),
            (M{{{7, 8}, {1, 100}}, {{7, 6}, {2, 300}}}));
  std::vector<std::pair<uint64_t, uint64_t>> pruned;
  b.forget([](const colod_pair_key& k) { return k.aggressor == 6; },
           [&](const colod_pair_key& k) { pruned.emplace_back(k.victim, k.aggressor); });
  EXPECT_EQ(pruned, (std::vector<std::pair<uint64_t, uint64_t>>{{7, 6}}));
  EXPECT_EQ(b.deltas().size(), 1u) << "the dead entry's delta is dropped too";
  EXPECT_EQ(b.size(), 1u);
}

}  // namespace
}  // namespace colod::collect::detail
