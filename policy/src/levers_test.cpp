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
  Config config;
  config.actions.idle_hold_intervals = 0;  // hog reads idle here: given back, not held
  EngineState s{config};
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
  Restriction moved_r;
  moved_r.lever = Lever::Cpuset;
  moved_r.rung = 1;
  moved_r.applied = moved;
  moved_r.original = runtime;
  moved_r.owners = {"ep-cpuset"};
  levers[Lever::Cpuset] = moved_r;
  Restriction quota;
  quota.lever = Lever::CpuQuota;
  quota.rung = 2;
  quota.applied = capped;
  quota.original = runtime;
  quota.owners = {"ep-quota"};
  quota.blame = 1;
  levers[Lever::CpuQuota] = quota;
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

// A rung goes to its antagonists together: while the main one cools down from its last change
// (its placement was relaxed 100 ms before), the rung waits, instead of moving the light BE with
// a quarter of the evidence alone (blame.sh cache t1).
TEST(RungTogether, WaitsWhileOneOfItsAntagonistsCoolsDown) {
  Config config;
  config.actions.cpu_ladder = {Lever::Cpuset, Lever::CpuQuota};
  EngineState s{config};
  s.node_cpus_ = {0, 1};
  s.round_ = 100;
  auto add = [&](const std::string& id, Tier tier, std::vector<int> cpus) -> Tracked& {
    Tracked& t = s.tracked_[id];
    t.info.id = id;
    t.tier = tier;
    t.cpus = std::move(cpus);
    s.index_.emplace(std::string_view(s.tracked_.find(id)->first), &t);
    return t;
  };
  Tracked& web = add("web", Tier::Ls, {1});
  add("hog", Tier::Be, {0, 1}).last_change_round = 99;  // relaxed a round ago
  add("light", Tier::Be, {0, 1});
  Antagonist hog;
  hog.id = "hog";
  hog.score = 0.74;
  Antagonist light;
  light.id = "light";
  light.score = 0.26;
  Episode ep;
  ep.victim_id = "web";
  std::vector<Decision> out;
  std::vector<Finding> findings;
  for (int rung : {0, 1}) {  // cpuset, then the quota rung
    EXPECT_EQ(
        s.applyRung(ep, "web", web, rung, {hog, light}, DecisionKind::Engage, false, out, findings),
        EngineState::RungResult::Deferred);
    EXPECT_TRUE(out.empty()) << out[0].explanation;
    EXPECT_TRUE(s.restrictions_.empty());
  }
  // Once it has cooled down, both are moved.
  s.round_ = 102;
  EXPECT_EQ(
      s.applyRung(ep, "web", web, 0, {hog, light}, DecisionKind::Engage, false, out, findings),
      EngineState::RungResult::Applied);
  EXPECT_EQ(out.size(), 2u);
}

}  // namespace
}  // namespace colod::policy
