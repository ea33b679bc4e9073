// SPDX-License-Identifier: Apache-2.0
// PairDeltas from packed reads, as MapReader holds them: deltas of moved pairs only, the
// positional match while the kernel's order holds and the hash when it does not, skipped keys,
// re-created pairs, forgetting gone and dead ones, and a drained map's reads.
#include "pair_deltas.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <vector>

namespace colod::collect::detail {
namespace {

struct Read {
  std::vector<colod_pair_key> keys;
  std::vector<uint64_t> values;
  void add(uint64_t victim, uint64_t aggressor, uint64_t v) {
    keys.push_back(colod_pair_key{.victim = victim, .aggressor = aggressor});
    values.push_back(v);
  }
};

using M = std::map<std::pair<uint64_t, uint64_t>, uint64_t>;

// The last update's deltas, by (victim, aggressor).
M deltasOf(const PairDeltas& p) {
  M out;
  for (const auto& [k, d] : p.deltas()) {
    out[{k.victim, k.aggressor}] = d;
  }
  return out;
}

M apply(PairDeltas& p, const Read& r, uint64_t tick, const PairKeySet& skip = {}) {
  p.update(reinterpret_cast<const uint8_t*>(r.keys.data()),
           reinterpret_cast<const uint8_t*>(r.values.data()), r.keys.size(), skip, tick);
  return deltasOf(p);
}

TEST(PairDeltas, MovedPairsOnlyFoundByPositionWhileTheOrderHolds) {
  static_assert(sizeof(colod_pair_key) == 16);
  PairDeltas p;
  Read r;
  r.add(1, 2, 5);
  r.add(1, 3, 7);
  r.add(4, 2, 1);
  EXPECT_EQ(apply(p, r, 1), (M{{{1, 2}, 5}, {{1, 3}, 7}, {{4, 2}, 1}})) << "new: whole counts";
  EXPECT_EQ(p.positionalHits(), 0u);
  r.values = {5, 9, 1};
  EXPECT_EQ(apply(p, r, 2), (M{{{1, 3}, 2}}));
  EXPECT_EQ(p.positionalHits(), 3u);
  // A pair added at the front shifts the order: it is found by hash, the others in step.
  Read s;
  s.add(9, 9, 4);
  s.add(1, 2, 6);
  s.add(1, 3, 9);
  s.add(4, 2, 3);
  EXPECT_EQ(apply(p, s, 3), (M{{{9, 9}, 4}, {{1, 2}, 1}, {{4, 2}, 2}}));
  EXPECT_EQ(p.positionalHits(), 3u);
  // Kernel order changed entirely (a resize): same deltas as by hash.
  Read t;
  t.add(4, 2, 3);
  t.add(1, 3, 10);
  t.add(9, 9, 4);
  t.add(1, 2, 6);
  EXPECT_EQ(apply(p, t, 4), (M{{{1, 3}, 1}}));
  EXPECT_EQ(apply(p, t, 5), M{});
  EXPECT_EQ(p.positionalHits(), 4u);
}

// The kernel puts a new pair at the head of its bucket, so a walk meets it just before pairs it
// met last time; pairs removed leave a gap. Either way the rest is met in step after one hash
// lookup, as at 1000 containers where new pairs arrive at every tick (issue 17).
TEST(PairDeltas, PairsAddedOrRemovedInTheMiddleCostOneHashLookupEach) {
  PairDeltas p;
  Read r;
  for (uint64_t v = 1; v <= 6; ++v) {
    r.add(v, 100, 10);
  }
  apply(p, r, 1);
  Read added;  // 1 2 (7) 3 4 (8) 5 6
  for (uint64_t v : {1, 2, 7, 3, 4, 8, 5, 6}) {
    added.add(v, 100, v == 7 || v == 8 ? 1 : 11);
  }
  EXPECT_EQ(apply(p, added, 2).size(), 8u) << "every count moved";
  EXPECT_EQ(p.positionalHits(), 6u);
  Read removed;  // 1 (2 7 3 gone) 4 8 (5 gone) 6
  for (uint64_t v : {1, 4, 8, 6}) {
    removed.add(v, 100, v == 8 ? 2 : 12);
  }
  EXPECT_EQ(apply(p, removed, 3), (M{{{1, 100}, 1}, {{4, 100}, 1}, {{8, 100}, 1}, {{6, 100}, 1}}));
  EXPECT_EQ(p.positionalHits(), 2u) << "1, then 8 after 4's lookup";
}

TEST(PairDeltas, SkippedKeysAndRecreatedPairs) {
  PairDeltas p;
  Read r;
  r.add(1, 2, 5);
  r.add(3, 4, 8);
  apply(p, r, 1);
  // A key whose deletion is pending is not reported, and the next one is still matched.
  const PairKeySet skip{colod_pair_key{.victim = 1, .aggressor = 2}};
  r.values = {50, 9};
  EXPECT_EQ(apply(p, r, 2, skip), (M{{{3, 4}, 1}}));
  EXPECT_EQ(p.positionalHits(), 1u);
  // A count that went down: the pair was deleted and re-created; all of it is new.
  r.values = {5, 2};
  EXPECT_EQ(apply(p, r, 3), (M{{{3, 4}, 2}}));
}

TEST(PairDeltas, ForgetsGoneAndDeadPairsAndPrunesTheDead) {
  PairDeltas p;
  Read r;
  r.add(1, 2, 5);
  r.add(3, 4, 8);
  r.add(5, 6, 1);
  apply(p, r, 1);
  Read s;  // (5,6) gone from the map
  s.add(1, 2, 6);
  s.add(3, 4, 9);
  apply(p, s, 2);
  std::vector<uint64_t> pruned;
  p.forget([](const colod_pair_key& k) { return k.victim == 3; },
           [&](const colod_pair_key& k) { pruned.push_back(k.victim); });
  EXPECT_EQ(pruned, (std::vector<uint64_t>{3}));
  EXPECT_EQ(p.size(), 1u);
  ASSERT_EQ(p.deltas().size(), 1u) << "the dead pair's delta is dropped";
  EXPECT_EQ(p.deltas()[0].first.victim, 1u);
  // After forgetting, the positions are rebuilt from the hash; (1,2) keeps its count.
  Read t;
  t.add(1, 2, 8);
  EXPECT_EQ(apply(p, t, 3), (M{{{1, 2}, 2}}));
  EXPECT_EQ(p.positionalHits(), 0u);
  EXPECT_EQ(apply(p, t, 4), M{});
  EXPECT_EQ(p.positionalHits(), 1u);
}

// Issue 17: pairs that stood still for idle_ticks are handed out for deletion and forgotten; a
// move keeps a pair; one re-created after its deletion is new.
TEST(PairDeltas, PairsIdleForLongAreTakenAndComeBackWhole) {
  PairDeltas p;
  Read r;
  r.add(1, 2, 5);
  r.add(1, 3, 7);
  r.add(4, 2, 1);
  apply(p, r, 10);
  std::vector<colod_pair_key> idle;
  EXPECT_EQ(p.takeIdle(12, 5, idle), 0u) << "read at 10: two ticks only";
  r.values = {6, 7, 1};  // (1,2) moved at 13
  apply(p, r, 13);
  r.values = {6, 7, 2};  // (4,2) moved at 14
  apply(p, r, 14);
  apply(p, r, 15);
  EXPECT_EQ(p.takeIdle(15, 5, idle), 1u) << "(1,3): still since 10";
  ASSERT_EQ(idle.size(), 1u);
  EXPECT_EQ(idle[0].victim, 1u);
  EXPECT_EQ(idle[0].aggressor, 3u);
  EXPECT_EQ(p.size(), 2u);
  // The BPF side re-creates it at the next preemption: its count is new, whole.
  Read s;
  s.add(1, 2, 6);
  s.add(4, 2, 2);
  s.add(1, 3, 1);
  EXPECT_EQ(apply(p, s, 16), (M{{{1, 3}, 1}}));
  EXPECT_EQ(p.takeIdle(17, 5, idle), 0u) << "(1,2) moved at 13, (4,2) at 14, (1,3) new at 16";
  EXPECT_EQ(p.takeIdle(17, 2, idle), 2u);
  EXPECT_EQ(p.size(), 1u) << "(1,3) stays";
}

// A drained map's read: every entry is what its pair gained since the last drain, reported
// whole, and nothing is kept; what a kept map knew is dropped (the map was switched).
TEST(PairDeltas, ADrainedReadIsItsOwnDeltas) {
  PairDeltas p;
  Read r;
  r.add(1, 2, 5);
  r.add(1, 3, 7);
  apply(p, r, 1);
  EXPECT_EQ(p.size(), 2u);
  Read d;
  d.add(1, 2, 3);
  d.add(4, 2, 0);  // created and not counted yet: nothing to report
  d.add(9, 9, 1);
  p.drained(reinterpret_cast<const uint8_t*>(d.keys.data()),
            reinterpret_cast<const uint8_t*>(d.values.data()), d.values.size());
  EXPECT_EQ(deltasOf(p), (M{{{1, 2}, 3}, {{9, 9}, 1}}));
  EXPECT_EQ(p.size(), 0u);
  p.drained(reinterpret_cast<const uint8_t*>(d.keys.data()),
            reinterpret_cast<const uint8_t*>(d.values.data()), d.values.size());
  EXPECT_EQ(deltasOf(p), (M{{{1, 2}, 3}, {{9, 9}, 1}})) << "the same again: nothing is kept";
  std::vector<colod_pair_key> idle;
  EXPECT_EQ(p.takeIdle(100, 1, idle), 0u);
  p.forget([](const colod_pair_key& k) { return k.victim == 9; },
           [](const colod_pair_key&) { ADD_FAILURE() << "nothing kept, nothing to prune"; });
  EXPECT_EQ(deltasOf(p), (M{{{1, 2}, 3}})) << "the dead victim's delta is dropped";
}

}  // namespace
}  // namespace colod::collect::detail
