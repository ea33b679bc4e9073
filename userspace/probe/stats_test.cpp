// SPDX-License-Identifier: Apache-2.0
#include "colod/probe/stats.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

namespace colod::probe {
namespace {

TEST(Schedule, CountsRequestsDueBeforeEnd) {
  // Due at 100, 110, ..., 190: ten requests; 200 itself is outside [start, end).
  const Schedule s{.start_ns = 100, .end_ns = 200, .period_ns = 10, .phase_ns = 0};
  EXPECT_EQ(s.count(), 10U);
  EXPECT_EQ(s.due(0), 100);
  EXPECT_EQ(s.due(9), 190);
}

TEST(Schedule, PhaseShiftsAndTrims) {
  // Due at 105, 115, ..., 195: still ten.
  EXPECT_EQ((Schedule{.start_ns = 100, .end_ns = 200, .period_ns = 10, .phase_ns = 5}.count()),
            10U);
  // Due at 105 ... 195, end 196 -> ten; end 195 -> nine (195 excluded).
  EXPECT_EQ((Schedule{.start_ns = 100, .end_ns = 195, .period_ns = 10, .phase_ns = 5}.count()), 9U);
  EXPECT_EQ((Schedule{.start_ns = 0, .end_ns = 1, .period_ns = 1000, .phase_ns = 0}.count()), 1U);
}

TEST(Schedule, EmptyAndInvalidWindows) {
  EXPECT_EQ((Schedule{.start_ns = 100, .end_ns = 100, .period_ns = 10}.count()), 0U);
  EXPECT_EQ((Schedule{.start_ns = 100, .end_ns = 50, .period_ns = 10}.count()), 0U);
  EXPECT_EQ((Schedule{.start_ns = 0, .end_ns = 50, .period_ns = 0}.count()), 0U);
  EXPECT_EQ((Schedule{.start_ns = 0, .end_ns = 50, .period_ns = -5}.count()), 0U);
}

TEST(MissedLatencies, LowerBoundsForUnservedRequests) {
  const Schedule s{.start_ns = 0, .end_ns = 100, .period_ns = 10};  // due 0..90
  // Served 0..6; stopped at 100: 7, 8, 9 waited 30, 20, 10 ns.
  EXPECT_EQ(missedLatencies(s, 7, 100), (std::vector<uint64_t>{30, 20, 10}));
  // Stopped "before" a request was due (clock granularity): clamps to 0, never wraps.
  EXPECT_EQ(missedLatencies(s, 9, 85), (std::vector<uint64_t>{0}));
  EXPECT_TRUE(missedLatencies(s, 10, 100).empty());
  EXPECT_TRUE(missedLatencies(s, 99, 100).empty());
}

TEST(Schedule, WarmUpRequestsAreNotRecorded) {
  const Schedule s{.start_ns = 0, .end_ns = 100, .period_ns = 10, .record_from_ns = 35};
  EXPECT_FALSE(s.recorded(3));  // due 30
  EXPECT_TRUE(s.recorded(4));   // due 40
  // A stop inside the warm-up: only the recorded ones (due 40..90) count as missed.
  EXPECT_EQ(missedLatencies(s, 2, 100), (std::vector<uint64_t>{60, 50, 40, 30, 20, 10}));
}

TEST(Percentile, NearestRank) {
  std::vector<uint64_t> v;
  for (uint64_t i = 1; i <= 100; ++i) {
    v.push_back(i);
  }
  EXPECT_EQ(percentileSorted(v, 0.50), 50U);
  EXPECT_EQ(percentileSorted(v, 0.90), 90U);
  EXPECT_EQ(percentileSorted(v, 0.99), 99U);
  EXPECT_EQ(percentileSorted(v, 0.999), 100U);
  EXPECT_EQ(percentileSorted(v, 1.0), 100U);
  EXPECT_EQ(percentileSorted(v, 0.0), 1U);
  const std::vector<uint64_t> one{7};
  EXPECT_EQ(percentileSorted(one, 0.5), 7U);
  EXPECT_EQ(percentileSorted({}, 0.5), 0U);
}

TEST(Percentile, TenThousandSamples) {
  // p99.9 of 10000 is rank 9990, exactly: a float rounding of 0.999 * 10000 must not shift it.
  std::vector<uint64_t> v;
  for (uint64_t i = 1; i <= 10000; ++i) {
    v.push_back(i);
  }
  EXPECT_EQ(percentileSorted(v, 0.999), 9990U);
  EXPECT_EQ(percentileSorted(v, 0.99), 9900U);
}

TEST(Summarize, SortsConvertsAndCarriesMissed) {
  // 1000 samples: 990 at 100 µs, 9 at 5 ms, 1 at 2 s (unsorted).
  std::vector<uint64_t> v(990, 100'000);
  v.insert(v.begin(), 9, 5'000'000);
  v.insert(v.begin() + 500, 2'000'000'000);
  const Summary s = summarize(v, 3);
  EXPECT_EQ(s.requests, 1000U);
  EXPECT_EQ(s.missed, 3U);
  EXPECT_EQ(s.p50_us, 100U);
  EXPECT_EQ(s.p90_us, 100U);
  EXPECT_EQ(s.p99_us, 100U);    // rank 990
  EXPECT_EQ(s.p999_us, 5000U);  // rank 999
  EXPECT_EQ(s.max_us, 2'000'000U);
  EXPECT_NEAR(s.mean_us, (990 * 100.0 + 9 * 5000.0 + 2e6) / 1000.0, 1e-6);
}

TEST(Summarize, Empty) {
  std::vector<uint64_t> v;
  const Summary s = summarize(v, 0);
  EXPECT_EQ(s.requests, 0U);
  EXPECT_EQ(s.p99_us, 0U);
  EXPECT_EQ(s.max_us, 0U);
}

TEST(Format, LineAndJsonCarryTheSameNumbers) {
  const RunInfo info{.threads = 2,
                     .period_us = 1000,
                     .work_us = 300,
                     .duration_s = 10.0,
                     .iters_per_us = 812.5,
                     .cpu_pct_node = 30.2};
  const Summary s{.requests = 20000,
                  .missed = 1,
                  .p50_us = 310,
                  .p90_us = 320,
                  .p99_us = 450,
                  .p999_us = 900,
                  .max_us = 1200,
                  .mean_us = 312.25};
  EXPECT_EQ(formatLine(info, s),
            "probe: threads=2 period_us=1000 work_us=300 duration_s=10.0 requests=20000 "
            "missed=1 p50_us=310 p90_us=320 p99_us=450 p999_us=900 max_us=1200 mean_us=312.2 "
            "cpu_pct_node=30.2 warmup_s=0.0");
  const auto j = nlohmann::json::parse(formatJson(info, s));
  EXPECT_EQ(j.at("p99_us").get<uint64_t>(), 450U);
  EXPECT_EQ(j.at("missed").get<uint64_t>(), 1U);
  EXPECT_EQ(j.at("threads").get<unsigned>(), 2U);
  EXPECT_DOUBLE_EQ(j.at("iters_per_us").get<double>(), 812.5);
}

}  // namespace
}  // namespace colod::probe
