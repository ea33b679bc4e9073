// SPDX-License-Identifier: Apache-2.0
// levers.cpp alone: the restricted value of the cpuset lever (move, don't only shrink).
#include <gtest/gtest.h>

#include "colod/policy/tier.h"
#include "engine_state.h"

namespace colod::policy {
namespace {

struct CpusetMoveCase {
  const char* name;
  std::vector<int> node;
  std::vector<int> exclusive;  // CPUs exclusive to another container
  std::vector<int> victim;     // empty: not pinned
  std::vector<int> be;
  int min_cpus;
  std::optional<std::string> want;  // nullopt: cannot restrict it further
};

class CpusetMoveTest : public ::testing::TestWithParam<CpusetMoveCase> {};

TEST_P(CpusetMoveTest, Places) {
  const CpusetMoveCase& c = GetParam();
  Config config;
  config.floors.be_min_cpus = c.min_cpus;
  EngineState s(config);
  s.node_cpus_ = c.node;
  s.exclusive_cpus_ = c.exclusive;
  s.reserved_cpus_ = c.exclusive;
  Tracked v;
  v.info.id = "web";
  v.cpus = c.victim;
  Tracked t;
  t.info.id = "be";
  t.tier = Tier::Be;
  t.cpus = c.be;
  auto got = s.restricted(t, v, Lever::Cpuset);
  if (!c.want) {
    EXPECT_FALSE(got.has_value()) << got->cpuset_cpus.value_or("");
    return;
  }
  ASSERT_TRUE(got.has_value());
  EXPECT_EQ(got->cpuset_cpus, c.want);
}

const CpusetMoveCase kMoveCases[] = {
    // Issue 19: pinned to exactly the victim's CPU with be_min_cpus 1 -> moved (was at_floor).
    {"PinnedOnVictimCpuMoves", {0, 1}, {}, {1}, {1}, 1, "0"},
    {"MovesToHighestFreeCpu", {0, 1, 2, 3}, {}, {1}, {1}, 1, "3"},
    {"NeverOntoExclusiveCpus", {0, 1, 2, 3}, {2, 3}, {1}, {1}, 1, "0"},
    {"FloorOfTwoFilledAwayFromVictim", {0, 1, 2, 3}, {}, {0, 1}, {1, 2}, 2, "2-3"},
    {"ShrinksWhenItHasCpusAway", {0, 1, 2, 3}, {}, {0, 1}, {0, 1, 2, 3}, 1, "2-3"},
    {"AlreadyAway", {0, 1}, {}, {1}, {0}, 1, std::nullopt},
    // Nowhere to go: every other CPU is exclusive; it keeps its CPU (floor).
    {"NowhereToGo", {0, 1, 2}, {0, 2}, {1}, {1}, 1, std::nullopt},
    // Victim not pinned: nothing is "away"; a single-CPU BE stays at its floor.
    {"UnpinnedVictimSingleCpuBe", {0, 1}, {}, {}, {1}, 1, std::nullopt},
    {"UnpinnedVictimHalves", {0, 1, 2, 3}, {}, {}, {}, 1, "2-3"},
};

INSTANTIATE_TEST_SUITE_P(Table, CpusetMoveTest, ::testing::ValuesIn(kMoveCases), [](const auto& p) {
  return std::string(p.param.name);
});

// A moved container's CFS quota and the quota rung's cap are one cgroup value: releasing one
// rung leaves the other's quota in force, and the decision says so (it said "-> CFS quota max"
// while the move's quota stayed).
TEST(ReleaseText, TheQuotaAnotherRungKeepsIsSaid) {
  EngineState s{Config{}};
  s.node_cpus_ = {0, 1};
  Tracked& t = s.tracked_["hog"];
  t.info.id = "hog";
  t.tier = Tier::Be;
  Resources moved;
  moved.cpuset_cpus = "0";
  moved.cpu_quota = 40'000;
  moved.cpu_period = 100'000;
  Resources capped;
  capped.cpu_quota = 20'000;
  capped.cpu_period = 100'000;
  Resources runtime;
  runtime.cpuset_cpus = "0-1";
  runtime.cpu_quota = -1;
  runtime.cpu_period = 100'000;
  auto& levers = s.restrictions_["hog"];
  levers[Lever::Cpuset] = {Lever::Cpuset, 1, moved, runtime, {"ep-cpuset"}, 0};
  levers[Lever::CpuQuota] = {Lever::CpuQuota, 2, capped, runtime, {"ep-quota"}, 1};
  Episode ep;
  Step step;
  step.lever = Lever::CpuQuota;
  step.rung = 2;
  step.targets = {"hog"};
  std::vector<Decision> out;
  s.releaseStep("ep-quota", ep, step, DecisionKind::Relax, "victim_quiet", "quiet", nullptr, out);
  ASSERT_EQ(out.size(), 1u);
  EXPECT_NE(out[0].explanation.find("-> CFS quota max (CFS quota 40000/100000 µs stays in force: "
                                    "cpuset rung 2)"),
            std::string::npos)
      << out[0].explanation;

  // Nothing else held: nothing more is said.
  Step cpuset;
  cpuset.lever = Lever::Cpuset;
  cpuset.rung = 1;
  cpuset.targets = {"hog"};
  out.clear();
  s.releaseStep("ep-cpuset", ep, cpuset, DecisionKind::Relax, "victim_quiet", "quiet", nullptr,
                out);
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].explanation.find("stays in force"), std::string::npos) << out[0].explanation;
}

}  // namespace
}  // namespace colod::policy
