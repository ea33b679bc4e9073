// SPDX-License-Identifier: Apache-2.0
// detection.cpp alone: victim intervals (p99, the wait signal), the K of N window and the quiet
// baseline.
#include <gtest/gtest.h>

#include "colod/policy/testing/synthetic.h"
#include "engine_state.h"

namespace colod::policy {
namespace {

class DetectionTest : public ::testing::Test {
 protected:
  DetectionTest() : s_(Config{}) {
    v_.info.id = "web";
    v_.tier = Tier::Ls;
    s_.resetWindow(v_);
  }
  void observe(const ContainerSample& s) { s_.observe(v_, &s, testing::kIntervalNs); }

  EngineState s_;
  Tracked v_;
};

TEST_F(DetectionTest, KOfNWindow) {
  const auto& det = Config{}.detection;  // K = 2 of N = 5
  observe(testing::lsSample("web", 5000));
  EXPECT_TRUE(v_.cpu_hit);
  EXPECT_EQ(v_.cpu_hits, 1);
  observe(testing::lsSample("web", 300));
  observe(testing::lsSample("web", 5000));
  EXPECT_EQ(v_.cpu_hits, det.hit_intervals);
  for (int i = 0; i < det.window_intervals; ++i) {
    observe(testing::lsSample("web", 300));
  }
  EXPECT_EQ(v_.cpu_hits, 0) << "hits leave the window after N intervals";
  EXPECT_EQ(v_.quiet_streak, det.window_intervals);
}

TEST_F(DetectionTest, TooFewSamplesAreNotAP99Hit) {
  auto s = testing::lsSample("web", 5000);
  s.runq_count = Config{}.detection.min_samples - 1;
  observe(s);
  EXPECT_FALSE(v_.cpu_hit);
  EXPECT_FALSE(v_.has_baseline) << "an untrusted p99 does not feed the baseline either";
}

TEST_F(DetectionTest, WaitSignalSeesAnAlwaysRunnableVictim) {
  auto s = testing::lsSample("web", 60'000);
  s.runq_count = 3;              // too few wake-ups for p99
  s.runq_wait_ns = 160'000'000;  // 1.6 tasks waiting on average
  s.oncpu_ns = 40'000'000;
  observe(s);
  EXPECT_TRUE(v_.cpu_hit);
  EXPECT_FALSE(v_.p99_hit);
  EXPECT_DOUBLE_EQ(v_.wait_load, 1.6);
  EXPECT_DOUBLE_EQ(v_.wait_share, 0.8);
  EXPECT_EQ(EngineState::cpuRule(v_, false), "runq_wait_over_threshold");
}

// A severe round: over threshold on the wait signal with the victim's tasks a whole task deep in
// the run queue. The depth is the wait over at least 20 ms: an event round a millisecond after a
// timer tick that credits one request's 3 ms wait is not a deep queue.
TEST_F(DetectionTest, ASevereRoundIsAWholeTaskDeepOverAtLeastTwentyMilliseconds) {
  auto busy = testing::lsSample("web", 60'000);
  busy.runq_wait_ns = 28'000'000;  // a 20 ms event round, 1.4 tasks waiting
  busy.oncpu_ns = 6'000'000;
  s_.observe(v_, &busy, 20'000'000);
  EXPECT_TRUE(v_.cpu_hit);
  EXPECT_DOUBLE_EQ(v_.queue_depth, 1.4);
  EXPECT_TRUE(v_.severe);

  auto one = testing::lsSample("web", 3000);
  one.runq_wait_ns = 3'000'000;
  one.oncpu_ns = 500'000;
  s_.observe(v_, &one, 2'000'000);
  EXPECT_TRUE(v_.cpu_hit);
  EXPECT_DOUBLE_EQ(v_.wait_load, 1.5) << "over the round's 2 ms";
  EXPECT_DOUBLE_EQ(v_.queue_depth, 0.15) << "over 20 ms";
  EXPECT_FALSE(v_.severe);

  auto p99 = testing::lsSample("web", 60'000);  // over threshold on p99 alone
  s_.observe(v_, &p99, testing::kIntervalNs);
  EXPECT_TRUE(v_.cpu_hit);
  EXPECT_FALSE(v_.severe) << "only the wait signal's depth is severe";

  Config off;
  off.detection.severe_wait_load = 0;
  EngineState s(off);
  Tracked v = v_;
  s.resetWindow(v);
  s.observe(v, &busy, 20'000'000);
  EXPECT_TRUE(v.cpu_hit);
  EXPECT_FALSE(v.severe) << "severe_wait_load 0 disables it";
}

TEST_F(DetectionTest, QuietIntervalsBuildTheBaselineThatLowersTheThreshold) {
  for (int i = 0; i < 20; ++i) {
    observe(testing::lsSample("web", 100));
  }
  ASSERT_TRUE(v_.has_baseline);
  EXPECT_NEAR(v_.baseline, 100.0, 1e-6);
  observe(testing::lsSample("web", 1500));
  // min(2000, max(100, 250) * 4) = 1000 µs
  EXPECT_EQ(v_.threshold, 1000u);
  EXPECT_TRUE(v_.cpu_hit);
}

}  // namespace
}  // namespace colod::policy
