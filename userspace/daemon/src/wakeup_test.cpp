// SPDX-License-Identifier: Apache-2.0
// Event-driven detection, the pure parts: the rate limit of event rounds, the watched set, and
// that the policy engine takes a short extra round between ticks (its own interval length).
#include "wakeup.h"

#include <gtest/gtest.h>

#include "colod/policy/engine.h"
#include "colod/policy/testing/synthetic.h"

namespace colod::daemon {
namespace {

using namespace std::chrono_literals;
using Clock = EventRoundLimiter::Clock;

TEST(EventRoundLimiter, FirstEventRunsAtOnceThenOneRoundPerGap) {
  EventRoundLimiter lim(20ms);
  const Clock::time_point t0{1s};
  EXPECT_FALSE(lim.untilDue(t0).has_value());
  ASSERT_TRUE(lim.onEvent(t0));
  lim.ran(t0);
  // Events within the gap make one pending round, due when the gap has passed.
  EXPECT_FALSE(lim.onEvent(t0 + 5ms));
  EXPECT_FALSE(lim.onEvent(t0 + 12ms));
  EXPECT_FALSE(lim.due(t0 + 12ms));
  ASSERT_TRUE(lim.untilDue(t0 + 12ms).has_value());
  EXPECT_EQ(*lim.untilDue(t0 + 12ms), 8ms);
  EXPECT_TRUE(lim.due(t0 + 20ms));
  EXPECT_EQ(*lim.untilDue(t0 + 25ms), 0ns);
  lim.ran(t0 + 20ms);
  EXPECT_FALSE(lim.due(t0 + 100ms));  // nothing pending after the round
  EXPECT_FALSE(lim.untilDue(t0 + 100ms).has_value());
  // After a quiet gap an event runs at once again.
  EXPECT_TRUE(lim.onEvent(t0 + 100ms));
}

TEST(EventRoundLimiter, NoPendingRoundWithoutAnEventInTheGap) {
  EventRoundLimiter lim(20ms);
  const Clock::time_point t0{1s};
  lim.ran(t0);
  EXPECT_FALSE(lim.due(t0 + 30ms));
  EXPECT_TRUE(lim.onEvent(t0 + 30ms));
}

TEST(WatchedCgroups, VictimTiersWithResolvedCgroupsOnlySortedAndUnique) {
  const std::vector<WatchCandidate> known{
      {.cgroup_id = 30, .tier = "ls"},     {.cgroup_id = 10, .tier = "ls"},
      {.cgroup_id = 20, .tier = "be"},     {.cgroup_id = 0, .tier = "ls"},  // unresolved
      {.cgroup_id = 40, .tier = "system"}, {.cgroup_id = 10, .tier = "ls"},
  };
  const std::vector<policy::Tier> ls_only{policy::Tier::Ls};
  const auto w = watchedCgroups(known, ls_only, 3ms);
  ASSERT_EQ(w.size(), 2u);
  EXPECT_EQ(w[0], (collect::WatchedCgroup{.id = 10, .threshold = 3ms}));
  EXPECT_EQ(w[1], (collect::WatchedCgroup{.id = 30, .threshold = 3ms}));
  const std::vector<policy::Tier> both{policy::Tier::Ls, policy::Tier::System};
  EXPECT_EQ(watchedCgroups(known, both, 3ms).size(), 3u);
  EXPECT_TRUE(watchedCgroups(known, {}, 3ms).empty());
}

// Issue 17: the files of victims and of restricted containers are read at every tick; an
// unrestricted BE, a system cgroup and an unresolved container are left to the slower cadence.
TEST(FileCadence, VictimsAndRestrictedContainersAreReadEveryTick) {
  const std::vector<WatchCandidate> known{
      {.cgroup_id = 30, .tier = "ls"},
      {.cgroup_id = 20, .tier = "be"},
      {.cgroup_id = 50, .tier = "be", .restricted = true},
      {.cgroup_id = 0, .tier = "ls"},
      {.cgroup_id = 0, .tier = "be", .restricted = true},
      {.cgroup_id = 40, .tier = "system"},
      {.cgroup_id = 10, .tier = "ls"},
      {.cgroup_id = 10, .tier = "ls"},  // two containers in one cgroup: named once
  };
  const std::vector<policy::Tier> ls_only{policy::Tier::Ls};
  EXPECT_EQ(everyTickCgroups(known, ls_only), (std::vector<uint64_t>{10, 30, 50}));
  const std::vector<policy::Tier> both{policy::Tier::Ls, policy::Tier::System};
  EXPECT_EQ(everyTickCgroups(known, both), (std::vector<uint64_t>{10, 30, 40, 50}));
  // No victim tier: only what colod restricts.
  EXPECT_EQ(everyTickCgroups(known, {}), (std::vector<uint64_t>{50}));
}

// An event round is a snapshot of its own (short) interval between two ticks: the engine
// normalises by interval_ns, so a 15 ms round with the LS waiting counts as a victim interval,
// and with the tick before it over threshold it reaches K = 2 of N there, one tick early.
TEST(FileCadence, AggressorsStandUntilTheNextReadOfTheSlowerPairsMap) {
  EXPECT_FALSE(aggressorsCurrent(0, 5, 10)) << "never reported";
  EXPECT_TRUE(aggressorsCurrent(5, 5, 10)) << "this round's";
  EXPECT_TRUE(aggressorsCurrent(5, 14, 10)) << "until the next read, 10 rounds on";
  EXPECT_FALSE(aggressorsCurrent(5, 15, 10)) << "that read found none";
  EXPECT_TRUE(aggressorsCurrent(7, 7, 1)) << "read every round: this round's only";
  EXPECT_FALSE(aggressorsCurrent(7, 8, 1));
}

TEST(FileCadence, PressureFilesEveryTwoSecondsNeverMoreOftenThanTheOthers) {
  EXPECT_EQ(pressureEveryNTicks(std::chrono::milliseconds(100), 10), 20u);
  EXPECT_EQ(pressureEveryNTicks(std::chrono::milliseconds(300), 10), 10u) << "7 ticks < 10";
  EXPECT_EQ(pressureEveryNTicks(std::chrono::milliseconds(300), 1), 7u) << "rounded up: 2.1 s";
  EXPECT_EQ(pressureEveryNTicks(std::chrono::milliseconds(5000), 0), 1u);
  EXPECT_EQ(pressureEveryNTicks(std::chrono::milliseconds(0), 1), 1000u) << "bounded";
}

TEST(FileCadence, PairsIdleForThirtySecondsAreAged) {
  EXPECT_EQ(pairIdleTicks(std::chrono::milliseconds(100)), 300u);
  EXPECT_EQ(pairIdleTicks(std::chrono::milliseconds(7)), 4286u) << "rounded up";
  EXPECT_EQ(pairIdleTicks(std::chrono::milliseconds(60000)), 1u);
  EXPECT_EQ(pairIdleTicks(std::chrono::milliseconds(0)), 30000u);
}

TEST(EventRound, EngineTakesAShortRoundBetweenTicksAndDecidesThere) {
  namespace pt = policy::testing;
  auto engine_r = policy::Engine::create(policy::Config{});
  ASSERT_TRUE(engine_r.has_value()) << engine_r.error().message();
  policy::Engine engine = std::move(engine_r).value();
  engine.upsertContainer(pt::lsInfo("ls"));
  engine.upsertContainer(pt::beInfo("be"));
  int64_t now = 0;
  auto round = [&](int64_t interval_ns, policy::ContainerSample ls, uint64_t be_oncpu_ns) {
    now += interval_ns;
    policy::Snapshot s;
    s.now_ns = now;
    s.interval_ns = interval_ns;
    s.node_cpus = 2;
    s.containers.push_back(std::move(ls));
    s.containers.push_back(pt::beSample("be", be_oncpu_ns));
    return engine.evaluate(s);
  };
  for (int i = 0; i < 5; ++i) {
    ASSERT_TRUE(round(pt::kIntervalNs, pt::lsSample("ls", 100), 10'000'000).decisions.empty());
  }
  // The BE turns busy late in a tick: that tick is the first victim interval.
  const policy::Preemption by_be{.aggressor_id = "be", .count = 40, .wait_ns = 30'000'000};
  EXPECT_TRUE(
      round(pt::kIntervalNs, pt::lsSample("ls", 6000, {by_be}), 100'000'000).decisions.empty());
  // The wakeup 15 ms later: a short round, over threshold again.
  auto ls = pt::lsSample(
      "ls", 6000, {policy::Preemption{.aggressor_id = "be", .count = 8, .wait_ns = 9'000'000}});
  ls.runq_count = 20;
  ls.oncpu_ns = 3'000'000;
  ls.runq_wait_ns = 9'000'000;
  const auto r = round(15'000'000, ls, 15'000'000);
  ASSERT_FALSE(r.decisions.empty()) << "the short round did not decide";
  EXPECT_EQ(r.decisions.front().kind, policy::DecisionKind::Engage);
  EXPECT_EQ(r.decisions.front().target_id, "be");
}

}  // namespace
}  // namespace colod::daemon
