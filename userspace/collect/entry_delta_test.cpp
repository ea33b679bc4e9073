// SPDX-License-Identifier: Apache-2.0
// The collector's per-entry arithmetic over the real BPF value layouts: per-CPU copies summed,
// u32 histogram buckets crossing 2^32 (one CPU's, or only their sum), and real resets.
#include "entry_delta.h"

#include <gtest/gtest.h>

#include <cstring>
#include <vector>

namespace colod::collect::detail {
namespace {

// The bytes a per-CPU map lookup returns for one key: one copy per CPU, roundUp8 apart.
template <typename V>
std::vector<uint8_t> perCpu(const std::vector<V>& copies) {
  std::vector<uint8_t> out(roundUp8(sizeof(V)) * copies.size(), 0xA5);  // padding: garbage
  for (std::size_t c = 0; c < copies.size(); ++c) {
    std::memcpy(out.data() + c * roundUp8(sizeof(V)), &copies[c], sizeof(V));
  }
  return out;
}

SchedEntry readSched(uint32_t slot, const std::vector<colod_cg_sched>& copies) {
  const auto bytes = perCpu(copies);
  return SchedEntry{slot, sumSchedPerCpu(bytes.data(), static_cast<int>(copies.size()))};
}

// One CPU's copy with `n` waits of `wait_us` in the matching slot (count and total as BPF keeps
// them: count is the u64 total of the same events).
colod_cg_sched waits(uint32_t slot_of_wait, uint32_t bucket, uint64_t count) {
  colod_cg_sched v{};
  v.hist[slot_of_wait] = bucket;
  v.count = count;
  v.total_ns = count * 5000;
  v.oncpu_ns = count * 100;
  return v;
}

TEST(SumSchedPerCpu, AddsEveryCounterOfEveryCpu) {
  colod_cg_sched a{}, b{};
  a.count = 1, a.total_ns = 2, a.oncpu_ns = 3, a.invol = 4, a.self_preempt = 5;
  a.preempt_wait_ns = 7, a.preempt_waits = 8;
  b = a;
  a.hist[0] = 1;
  b.hist[COLOD_SCHED_HIST_SLOTS - 1] = 2;
  const SchedEntry e = readSched(0, {a, b});
  EXPECT_EQ(e.sum.count, 2u);
  EXPECT_EQ(e.sum.total_ns, 4u);
  EXPECT_EQ(e.sum.oncpu_ns, 6u);
  EXPECT_EQ(e.sum.invol, 8u);
  EXPECT_EQ(e.sum.self_preempt, 10u);
  EXPECT_EQ(e.sum.preempt_wait_ns, 14u);
  EXPECT_EQ(e.sum.preempt_waits, 16u);
  EXPECT_EQ(e.sum.hist[0], 1u);
  EXPECT_EQ(e.sum.hist[COLOD_SCHED_HIST_SLOTS - 1], 2u);
}

// cg_sched's histogram is shorter than a Log2Hist: its slots land where they belong, the rest
// stay empty, and a wait in its open-ended last slot reads as at least 2^19 us.
TEST(ToHist, TheShorterSchedHistogramFillsTheFirstSlots) {
  colod_cg_sched v{};
  v.hist[0] = 7;
  v.hist[COLOD_SCHED_HIST_SLOTS - 1] = 1;
  const Log2Hist h = toHist(v.hist);
  EXPECT_EQ(h[0], 7u);
  EXPECT_EQ(h[COLOD_SCHED_HIST_SLOTS - 1], 1u);
  for (std::size_t i = COLOD_SCHED_HIST_SLOTS; i < kHistSlots; ++i) {
    EXPECT_EQ(h[i], 0u) << "slot " << i;
  }
  const LatencySummary s = summarize(h, 7 * 500 + 2'000'000'000ull);
  EXPECT_GE(s.max_us, 1u << (COLOD_SCHED_HIST_SLOTS - 1));
}

std::vector<uint8_t> diagBytes(const std::vector<colod_cg_diag>& copies) { return perCpu(copies); }

TEST(SumDiagPerCpu, AddsEveryCounterOfEveryCpu) {
  const auto bytes = diagBytes({{1, 2, 3}, {10, 20, 30}});
  const colod_cg_diag d = sumDiagPerCpu(bytes.data(), 2);
  EXPECT_EQ(d.stale, 11u);
  EXPECT_EQ(d.wakeups, 22u);
  EXPECT_EQ(d.depth_sum, 33u);
}

TEST(DiagDelta, SubtractsAndRestartsLikeTheSchedEntry) {
  const DiagEntry prev{4, {6, 9, 10}};
  const colod_cg_diag d = diagDelta(DiagEntry{4, {66, 99, 110}}, &prev);
  EXPECT_EQ(d.stale, 60u);
  EXPECT_EQ(d.wakeups, 90u);
  EXPECT_EQ(d.depth_sum, 100u);
  EXPECT_EQ(diagDelta(DiagEntry{5, {1, 2, 3}}, &prev).wakeups, 2u) << "another slot: new entry";
  EXPECT_EQ(diagDelta(DiagEntry{4, {7, 4, 20}}, &prev).wakeups, 4u) << "a counter went down";
  EXPECT_EQ(diagDelta(DiagEntry{4, {1, 2, 3}}, nullptr).depth_sum, 3u) << "no previous read";
}

// Slot 2 ([4, 8) us) of one CPU passes 2^32 between two reads: the interval shows the 36
// waits that happened, not 4 billion (what a "decrease means reset" rule reported).
TEST(SchedDelta, BucketCrossingTwoToThe32OnOneCpuGivesTheTrueDelta) {
  constexpr uint64_t kBefore = 0xFFFFFFF0ull;  // waits so far in CPU 0's slot 2
  const SchedEntry prev =
      readSched(3, {waits(2, static_cast<uint32_t>(kBefore), kBefore), waits(2, 10, 10)});
  // CPU 0: 31 more waits (the bucket wraps to 0xF); CPU 1: 5 more.
  const SchedEntry cur =
      readSched(3, {waits(2, static_cast<uint32_t>((kBefore + 31) & 0xFFFFFFFFu), kBefore + 31),
                    waits(2, 15, 15)});
  ASSERT_LT(cur.sum.hist[2], prev.sum.hist[2]) << "the test must cross 2^32";
  const colod_cg_sched d = schedDelta(cur, &prev);
  EXPECT_EQ(d.hist[2], 36u);
  EXPECT_EQ(d.count, 36u);
  EXPECT_EQ(d.total_ns, 36u * 5000);
  for (std::size_t i = 0; i < COLOD_SCHED_HIST_SLOTS; ++i) {
    if (i != 2) {
      EXPECT_EQ(d.hist[i], 0u) << "slot " << i;
    }
  }
  const LatencySummary s = summarize(toHist(d.hist), d.total_ns);
  EXPECT_EQ(s.count, 36u);
  EXPECT_EQ(s.p99_us, 8u);
  EXPECT_EQ(s.max_us, 8u);
}

// No CPU's bucket wraps, but their u32 sum does (2^32 waits in one slot over all CPUs: minutes
// on a 96-CPU node): same result.
TEST(SchedDelta, SumOverCpusCrossingTwoToThe32GivesTheTrueDelta) {
  const SchedEntry prev =
      readSched(0, {waits(0, 0xC0000000u, 0xC0000000ull), waits(0, 0x3FFFFFF0u, 0x3FFFFFF0ull)});
  const SchedEntry cur = readSched(
      0, {waits(0, 0xC0000007u, 0xC0000007ull), waits(0, 0x40000009u, 0x40000009ull)});  // +7, +25
  ASSERT_LT(cur.sum.hist[0], prev.sum.hist[0]) << "the sum must cross 2^32";
  const colod_cg_sched d = schedDelta(cur, &prev);
  EXPECT_EQ(d.hist[0], 32u);
  EXPECT_EQ(d.count, 32u);
}

// A real reset: the cgroup was deleted and its id came back with another slot (or the slot
// was recycled): the new entry is measured from zero, not against the old one's counts.
TEST(SchedDelta, NewSlotIsARealResetAndCountsFromZero) {
  const SchedEntry prev = readSched(3, {waits(4, 1000, 1000), waits(4, 500, 500)});
  const SchedEntry cur = readSched(9, {waits(4, 2, 2), waits(4, 0, 0)});
  const colod_cg_sched d = schedDelta(cur, &prev);
  EXPECT_EQ(d.hist[4], 2u);  // modulo arithmetic across the reset would give 2^32 - 1498
  EXPECT_EQ(d.count, 2u);
  EXPECT_EQ(d.total_ns, 2u * 5000);
}

// A restart the collector did not see coming (same slot, zeroed): the u64 counters went down,
// which they never do otherwise, so the whole entry is new.
TEST(SchedDelta, CounterGoingDownIsARealReset) {
  const SchedEntry prev = readSched(3, {waits(4, 1000, 1000)});
  const SchedEntry cur = readSched(3, {waits(4, 3, 3)});
  const colod_cg_sched d = schedDelta(cur, &prev);
  EXPECT_EQ(d.hist[4], 3u);
  EXPECT_EQ(d.count, 3u);
  // Any u64 counter, not only count.
  colod_cg_sched p{}, c{};
  p.preempt_waits = 10;
  c.preempt_waits = 4;
  c.hist[1] = 1;
  c.count = 1;
  const SchedEntry before{1, p};
  const colod_cg_sched d2 = schedDelta(SchedEntry{1, c}, &before);
  EXPECT_EQ(d2.preempt_waits, 4u);
  EXPECT_EQ(d2.hist[1], 1u);
}

TEST(SchedDelta, WithoutAPreviousReadEverythingIsNew) {
  const SchedEntry cur = readSched(5, {waits(7, 9, 9)});
  const colod_cg_sched d = schedDelta(cur, nullptr);
  EXPECT_EQ(d.hist[7], 9u);
  EXPECT_EQ(d.count, 9u);
}

TEST(SchedDelta, SubtractsEveryCounter) {
  colod_cg_sched p{}, c{};
  p.count = 1, p.total_ns = 2, p.oncpu_ns = 3, p.invol = 4, p.self_preempt = 5;
  p.preempt_wait_ns = 7, p.preempt_waits = 8;
  c.count = 11, c.total_ns = 22, c.oncpu_ns = 33, c.invol = 44, c.self_preempt = 55;
  c.preempt_wait_ns = 77, c.preempt_waits = 88;
  const SchedEntry prev{2, p};
  const colod_cg_sched d = schedDelta(SchedEntry{2, c}, &prev);
  EXPECT_EQ(d.count, 10u);
  EXPECT_EQ(d.total_ns, 20u);
  EXPECT_EQ(d.oncpu_ns, 30u);
  EXPECT_EQ(d.invol, 40u);
  EXPECT_EQ(d.self_preempt, 50u);
  EXPECT_EQ(d.preempt_wait_ns, 70u);
  EXPECT_EQ(d.preempt_waits, 80u);
}

colod_cg_reclaim stalls(uint32_t slot, uint32_t bucket, uint64_t count) {
  colod_cg_reclaim v{};
  v.hist[slot] = bucket;
  v.count = count;
  v.total_ns = count * 1000;
  v.pages = count * 32;
  return v;
}

// cg_reclaim is one shared entry per cgroup: its u32 bucket wraps as the kernel adds to it.
TEST(ReclaimDelta, BucketCrossingTwoToThe32GivesTheTrueDelta) {
  const colod_cg_reclaim prev = stalls(6, 0xFFFFFFFFu, 0xFFFFFFFFull);
  const colod_cg_reclaim cur = stalls(6, 4u, 0x100000004ull);
  const colod_cg_reclaim d = reclaimDelta(cur, &prev);
  EXPECT_EQ(d.hist[6], 5u);
  EXPECT_EQ(d.count, 5u);
  EXPECT_EQ(d.pages, 5u * 32);
}

// cg_reclaim is a hash: a deleted and re-created entry has no previous read (the collector
// forgets it with the deletion), and one it did not see go shows in its u64 counters.
TEST(ReclaimDelta, RealResetCountsFromZero) {
  const colod_cg_reclaim prev = stalls(6, 40, 40);
  const colod_cg_reclaim cur = stalls(6, 2, 2);
  EXPECT_EQ(reclaimDelta(cur, nullptr).hist[6], 2u);
  const colod_cg_reclaim d = reclaimDelta(cur, &prev);
  EXPECT_EQ(d.hist[6], 2u);
  EXPECT_EQ(d.count, 2u);
  EXPECT_EQ(d.total_ns, 2000u);
}

}  // namespace
}  // namespace colod::collect::detail
