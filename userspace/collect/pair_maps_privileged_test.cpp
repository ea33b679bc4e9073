// SPDX-License-Identifier: Apache-2.0
// Privileged tests of the victim <- aggressor pairs' two maps (issue 17) over real cgroups and
// workloads: the named victims' map overflowing into the other, and pairs idle for long
// deleted and met again whole. Each against a reference collector that keeps every pair.
#include <map>
#include <string>

#include "collector_test_fixture.h"

namespace colod::collect {
namespace {

using namespace std::chrono_literals;

class PairMapsTest : public CollectorTest {
 protected:
  // The pairs are the BPF maps' alone: no cgroup file is read.
  static CollectorOptions mapsOnly(uint32_t files_every_n_ticks = 1) {
    CollectorOptions o;
    o.read_files = false;
    o.files_every_n_ticks = files_every_n_ticks;
    return o;
  }
};

// A named victim whose pairs do not fit its map: the overflow goes to the other map (read at
// the cadence) and the BPF side stops trying the full one; nothing is lost against a collector
// with room for every pair.
TEST_F(PairMapsTest, NamedPairsBeyondTheirMapGoToTheOtherAndAreNotLost) {
  constexpr uint32_t kEvery = 5;
  const CollectorOptions every = mapsOnly();
  CollectorOptions small = mapsOnly(kEvery);
  small.max_named_pairs = 1;
  MAKE_COLLECTOR_OR_SKIP(ref, every);
  MAKE_COLLECTOR_OR_SKIP(col, small);
  TestCgroup v({cpuRoot()}, uniqueName("victim"));
  TestCgroup h1({cpuRoot()}, uniqueName("hog1"));
  TestCgroup h2({cpuRoot()}, uniqueName("hog2"));
  const uint64_t v_id = ASSERT_OK(cgroup::cgroupId(v.dirIn(cpuRoot())));
  const uint64_t hog_ids[] = {ASSERT_OK(cgroup::cgroupId(h1.dirIn(cpuRoot()))),
                              ASSERT_OK(cgroup::cgroupId(h2.dirIn(cpuRoot())))};
  std::map<std::string, std::map<uint64_t, uint64_t>> by;  // who -> aggressor -> count
  auto add = [&](const std::string& who, const Snapshot& s) {
    if (const CgroupSample* c = find(s, v_id); c != nullptr) {
      for (const auto& a : c->preempted_by) {
        by[who][a.cgroup_id] += a.preemptions;
      }
    }
  };
  auto both = [&] {
    add("ref", ASSERT_OK(ref.snapshot()));
    add("col", ASSERT_OK(col.snapshot()));
  };
  both();
  col.setEveryTick({v_id});
  both();
  by.clear();
  bool full = false;
  {
    Child a(h1, kCpu, [] { hog(); });
    Child b(h2, kCpu, [] { hog(); });
    Child victim(v, kCpu, [] { sleeper(60000ms, 10000us); });
    for (int i = 0; i < 30; ++i) {
      std::this_thread::sleep_for(50ms);
      add("ref", ASSERT_OK(ref.snapshot()));
      const Snapshot s = ASSERT_OK(col.snapshot());
      add("col", s);
      full = full || s.stats.named_pairs_full;
    }
  }
  for (uint32_t i = 0; i <= kEvery; ++i) {
    std::this_thread::sleep_for(20ms);
    both();
  }
  EXPECT_EQ(ASSERT_OK(col.snapshot()).stats.map_drops, 0u) << "a pair that did not fit was dropped";
  std::printf("by hog1 %llu / %llu, by hog2 %llu / %llu (reference / named map of 1)\n",
              static_cast<unsigned long long>(by["ref"][hog_ids[0]]),
              static_cast<unsigned long long>(by["col"][hog_ids[0]]),
              static_cast<unsigned long long>(by["ref"][hog_ids[1]]),
              static_cast<unsigned long long>(by["col"][hog_ids[1]]));
  EXPECT_TRUE(full) << "one slot for two pairs: the named map must have been full";
  for (const uint64_t h : hog_ids) {
    EXPECT_GT(by["ref"][h], 0u) << "the victim was never preempted by " << h;
    const uint64_t a = by["ref"][h];
    const uint64_t b = by["col"][h];
    EXPECT_TRUE(sameCount(a, b)) << a << " vs " << b;
  }
}

// Pairs that stood still for pair_idle_ticks are deleted from `pairs` (the named victim's map is
// drained at every snapshot: nothing there stands still); when the aggressor comes back the BPF
// side re-creates them, and the counts over the whole run are a reference collector's, the
// named victim's too: nothing lost, nothing counted twice (a forgotten pair left in its map
// would be met as new, its whole count taken again).
TEST_F(PairMapsTest, PairsIdleForLongAreDeletedAndComeBackWhole) {
  constexpr uint32_t kEvery = 5;
  constexpr uint32_t kIdle = 4;
  const CollectorOptions every = mapsOnly();
  CollectorOptions aging = mapsOnly(kEvery);
  aging.pair_idle_ticks = kIdle;
  aging.full_read_every_n_ticks = kEvery;
  MAKE_COLLECTOR_OR_SKIP(ref, every);
  MAKE_COLLECTOR_OR_SKIP(col, aging);
  TestCgroup named({cpuRoot()}, uniqueName("named-victim"));
  TestCgroup other({cpuRoot()}, uniqueName("other-victim"));
  TestCgroup h({cpuRoot()}, uniqueName("hog"));
  const uint64_t named_id = ASSERT_OK(cgroup::cgroupId(named.dirIn(cpuRoot())));
  const uint64_t other_id = ASSERT_OK(cgroup::cgroupId(other.dirIn(cpuRoot())));
  const uint64_t hog_id = ASSERT_OK(cgroup::cgroupId(h.dirIn(cpuRoot())));
  std::map<std::string, std::map<uint64_t, uint64_t>> by;  // who -> victim -> count by the hog
  auto add = [&](const std::string& who, const Snapshot& s) {
    for (const uint64_t v : {named_id, other_id}) {
      if (const CgroupSample* c = find(s, v); c != nullptr) {
        for (const auto& a : c->preempted_by) {
          by[who][v] += a.cgroup_id == hog_id ? a.preemptions : 0;
        }
      }
    }
  };
  auto both = [&](std::chrono::milliseconds gap) {
    std::this_thread::sleep_for(gap);
    add("ref", ASSERT_OK(ref.snapshot()));
    add("col", ASSERT_OK(col.snapshot()));
  };
  both(0ms);
  col.setEveryTick({named_id});
  both(0ms);
  by.clear();
  Child v1(named, kCpu, [] { sleeper(60000ms, 10000us); });
  Child v2(other, kCpu, [] { sleeper(60000ms, 10000us); });
  auto busy = [&] {
    const std::map<uint64_t, uint64_t> before = by["ref"];
    const auto grew = [&](uint64_t v) {
      const auto it = before.find(v);
      return by["ref"][v] > (it == before.end() ? 0 : it->second);
    };
    Child hog_child(h, kCpu, [] { hog(); });
    // A second at least, and on until the hog has preempted both victims: under TCG the vm set
    // once saw no preemption of one victim in the first second. Bounded (10 s).
    for (int i = 0; i < 200 && (i < 20 || !grew(named_id) || !grew(other_id)); ++i) {
      both(50ms);
    }
  };
  busy();
  std::map<uint64_t, uint64_t> first = by["ref"];  // a copy: by[] goes on counting
  // The hog gone: its pairs stand still and are aged (the victims still run, alone).
  uint64_t aged = 0;
  for (uint32_t i = 0; i < 4 * (kIdle + kEvery); ++i) {
    std::this_thread::sleep_for(20ms);
    add("ref", ASSERT_OK(ref.snapshot()));
    const Snapshot s = ASSERT_OK(col.snapshot());
    add("col", s);
    aged = s.stats.pairs_aged;
  }
  EXPECT_GE(aged, 1u) << "the other victim's pair with the hog stood still for " << kIdle * 4
                      << " snapshots";
  busy();
  for (uint32_t i = 0; i <= kEvery; ++i) {
    both(20ms);
  }
  const Snapshot last = ASSERT_OK(col.snapshot());
  EXPECT_EQ(last.stats.map_drops, 0u);
  EXPECT_EQ(last.stats.map_deletes_pending, 0u);
  for (const uint64_t v : {named_id, other_id}) {
    std::printf(
        "victim %llu by the hog: %llu before the pause, %llu / %llu in all (reference / "
        "aging)\n",
        static_cast<unsigned long long>(v), static_cast<unsigned long long>(first[v]),
        static_cast<unsigned long long>(by["ref"][v]),
        static_cast<unsigned long long>(by["col"][v]));
    EXPECT_GT(first[v], 0u) << "the victim was never preempted by the hog";
    EXPECT_GT(by["ref"][v], first[v]) << "nor after the pause";
    EXPECT_TRUE(sameCount(by["ref"][v], by["col"][v])) << by["ref"][v] << " vs " << by["col"][v];
  }
}

}  // namespace
}  // namespace colod::collect
