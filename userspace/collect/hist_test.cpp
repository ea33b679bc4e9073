// SPDX-License-Identifier: Apache-2.0
#include <gtest/gtest.h>

#include "colod/collect/collector.h"

namespace colod::collect {
namespace {

TEST(Log2Percentile, EmptyIsZero) {
  EXPECT_EQ(log2Percentile(Log2Hist{}, 0.99), 0u);
  const auto s = summarize(Log2Hist{}, 0);
  EXPECT_EQ(s.count, 0u);
  EXPECT_EQ(s.p99_us, 0u);
}

TEST(Log2Percentile, SingleSlotGivesItsUpperBound) {
  Log2Hist h{};
  h[3] = 10;  // [8, 16) us
  EXPECT_EQ(log2Percentile(h, 0.5), 16u);
  EXPECT_EQ(log2Percentile(h, 1.0), 16u);
  h = {};
  h[0] = 1;  // [0, 2)
  EXPECT_EQ(log2Percentile(h, 0.5), 2u);
}

TEST(Log2Percentile, RanksAcrossSlots) {
  Log2Hist h{};
  h[1] = 50;  // [2,4)
  h[4] = 40;  // [16,32)
  h[10] = 9;  // [1024,2048)
  h[14] = 1;  // [16384,32768)
  const auto s = summarize(h, 12345);
  EXPECT_EQ(s.count, 100u);
  EXPECT_EQ(s.p50_us, 4u);     // rank 50 is the last of slot 1
  EXPECT_EQ(s.p90_us, 32u);    // rank 90 is the last of slot 4
  EXPECT_EQ(s.p99_us, 2048u);  // rank 99 is the last of slot 10
  EXPECT_EQ(s.max_us, 32768u);
  EXPECT_EQ(s.total_ns, 12345u);
  EXPECT_EQ(log2Percentile(h, 0.51), 32u);
  EXPECT_EQ(log2Percentile(h, 0.0), 4u);   // clamped to rank 1
  EXPECT_EQ(log2Percentile(h, 7.0), 32768u);  // clamped to 1
}

TEST(Log2Percentile, LastSlotSaturates) {
  Log2Hist h{};
  h[kHistSlots - 1] = 3;
  EXPECT_EQ(log2Percentile(h, 0.99), uint64_t{1} << kHistSlots);
}

TEST(HistDelta, Subtracts) {
  Log2Hist prev{}, cur{};
  prev[2] = 5;
  cur[2] = 8;
  cur[5] = 1;
  const auto d = histDelta(cur, prev);
  EXPECT_EQ(d[2], 3u);
  EXPECT_EQ(d[5], 1u);
  EXPECT_EQ(d[0], 0u);
}

// A bucket that passed 2^32 is lower than before: that is a wrap, and the delta is what was
// added (the old rule took any decrease for a reset and returned the whole cumulative count:
// ~4e9 waits in one interval, a false latency spike). Resets are the caller's to say
// (entry_delta_test.cpp).
TEST(HistDelta, IsModuloTwoToThe32) {
  Log2Hist prev{}, cur{};
  prev[3] = 0xFFFFFF00u;
  cur[3] = 0x00000010u;  // 0x100 + 0x10 more waits, across the wrap
  prev[4] = 7;
  cur[4] = 7;
  const auto d = histDelta(cur, prev);
  EXPECT_EQ(d[3], 0x110u);
  EXPECT_EQ(d[4], 0u);
  const auto s = summarize(d, 0);
  EXPECT_EQ(s.count, 0x110u);
  EXPECT_EQ(s.max_us, 16u);  // slot 3's upper bound, not a spike
}

TEST(EnumNames, AreStable) {
  EXPECT_STREQ(toString(CgroupMode::V2), "v2");
  EXPECT_STREQ(toString(CgroupMode::V1Cpu), "v1-cpu");
  EXPECT_STREQ(toString(AttachKind::TpBtf), "tp_btf");
  EXPECT_STREQ(toString(AttachKind::RawTp), "raw_tp");
}

}  // namespace
}  // namespace colod::collect
