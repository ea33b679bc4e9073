// SPDX-License-Identifier: Apache-2.0
// A short real run of the probe: the schedule is honoured (every due request accounted for),
// the calibrated work takes about the requested CPU time, and bad options are rejected.
#include "colod/probe/probe.h"

#include <gtest/gtest.h>

#include <chrono>

#include "colod/testing/result_matchers.h"

namespace colod::probe {
namespace {

TEST(Probe, CalibratedSpinTakesAboutTheRequestedTime) {
  const double ipu = ASSERT_OK(calibrateItersPerUs(10));
  ASSERT_GT(ipu, 0.0);
  const auto iters = static_cast<uint64_t>(ipu * 5000.0);  // 5 ms of work
  const auto t0 = std::chrono::steady_clock::now();
  const uint64_t sink = spin(iters);
  const auto us =
      std::chrono::duration_cast<std::chrono::microseconds>(std::chrono::steady_clock::now() - t0)
          .count();
  EXPECT_NE(sink, 0U);
  // Calibration keeps the fastest trial, so a run can only be slower (preemption), never much
  // faster; 0.6 leaves room for frequency changes between the two.
  EXPECT_GE(us, 3000);
}

TEST(Probe, ShortRunAccountsForEveryRequest) {
  const ProbeOptions o{.threads = 2, .period_us = 2000, .work_us = 100, .duration_s = 0.5};
  const ProbeReport r = ASSERT_OK(runProbe(o));
  // 0.5 s / 2 ms = 250 requests per thread, each either served or counted missed.
  EXPECT_EQ(r.summary.requests, 500U);
  EXPECT_LE(r.summary.missed, r.summary.requests);
  // A request cannot complete before its work is done: latency >= work (minus rounding).
  EXPECT_GE(r.summary.p50_us, 60U);
  EXPECT_LE(r.summary.p50_us, r.summary.p90_us);
  EXPECT_LE(r.summary.p90_us, r.summary.p99_us);
  EXPECT_LE(r.summary.p99_us, r.summary.p999_us);
  EXPECT_LE(r.summary.p999_us, r.summary.max_us);
  EXPECT_GT(r.info.iters_per_us, 0.0);
  EXPECT_GT(r.info.cpu_pct_node, 0.0);
  EXPECT_EQ(r.info.threads, 2U);
}

TEST(Probe, OverloadCountsMissedRequestsWithGrowingLatency) {
  // One thread asked for 200% of a CPU: half the requests cannot be served in the window, and
  // the served ones queue ever longer. Missed requests must appear, and the tail must reflect
  // the queueing (far above the 2 ms of work) rather than only the service time.
  const ProbeOptions o{.threads = 1, .period_us = 1000, .work_us = 2000, .duration_s = 0.4};
  const ProbeReport r = ASSERT_OK(runProbe(o));
  EXPECT_EQ(r.summary.requests, 400U);
  EXPECT_GE(r.summary.missed, 150U);
  EXPECT_GE(r.summary.p99_us, 100'000U);
}

TEST(Probe, WarmUpIsServedButNotRecorded) {
  // 0.5 s at 2 ms per request per thread, the first 0.2 s not recorded: 150 of 250 per thread.
  const ProbeOptions o{
      .threads = 2, .period_us = 2000, .work_us = 100, .duration_s = 0.5, .warmup_s = 0.2};
  const ProbeReport r = ASSERT_OK(runProbe(o));
  EXPECT_EQ(r.summary.requests, 300U);
  EXPECT_DOUBLE_EQ(r.info.warmup_s, 0.2);
  EXPECT_GE(r.summary.p50_us, 60U);
}

// The overloaded thread of the test above: every request after the first few is late. They are
// listed by due time on the wall clock of the run, bounded by max_late; a threshold no request
// reaches lists none.
TEST(Probe, LateRequestsAreListedOnTheWallClock) {
  const auto unix_ns = [] {
    return std::chrono::duration_cast<std::chrono::nanoseconds>(
               std::chrono::system_clock::now().time_since_epoch())
        .count();
  };
  const int64_t before = unix_ns();
  // At full speed ~195 of its ~200 requests are late; the bound is well under that so a thread
  // that gets a quarter of a CPU (ctest -j2 beside other tests) still reaches it (50 of 0.2 s
  // read 49 so).
  const ProbeOptions o{.threads = 1,
                       .period_us = 1000,
                       .work_us = 2000,
                       .duration_s = 0.4,
                       .late_us = 5000,
                       .max_late = 20};
  const ProbeReport r = ASSERT_OK(runProbe(o));
  const int64_t after = unix_ns();
  ASSERT_EQ(r.late.size(), 20U) << "bounded by max_late";
  for (size_t i = 0; i < r.late.size(); ++i) {
    EXPECT_GT(r.late[i].latency_ns, 5'000'000U);
    EXPECT_GT(r.late[i].due_unix_ns, before);
    EXPECT_LT(r.late[i].due_unix_ns, after);
    if (i > 0) {
      EXPECT_LE(r.late[i - 1].due_unix_ns, r.late[i].due_unix_ns);
    }
  }
  const ProbeOptions never{
      .threads = 1, .period_us = 2000, .work_us = 100, .duration_s = 0.1, .late_us = 10'000'000};
  const ProbeReport quiet = ASSERT_OK(runProbe(never));
  EXPECT_TRUE(quiet.late.empty());
}

TEST(Probe, RejectsInvalidOptions) {
  EXPECT_ERR(runProbe({.threads = 0}), EINVAL, "threads");
  EXPECT_ERR(runProbe({.threads = 1, .period_us = 0}), EINVAL, "period_us");
  EXPECT_ERR(runProbe({.threads = 1, .period_us = 10, .work_us = -1}), EINVAL, "work_us");
  EXPECT_ERR(runProbe({.threads = 1, .duration_s = 0.0}), EINVAL, "duration");
  EXPECT_ERR(runProbe({.threads = 1, .duration_s = 1.0, .warmup_s = 1.0}), EINVAL, "warm-up");
  EXPECT_ERR(runProbe({.threads = 1, .duration_s = 1.0, .warmup_s = -0.5}), EINVAL, "warm-up");
  EXPECT_ERR(runProbe({.threads = 1, .duration_s = 1.0, .late_us = -1}), EINVAL, "late_us");
  EXPECT_ERR(calibrateItersPerUs(0), EINVAL, "trial");
}

}  // namespace
}  // namespace colod::probe
