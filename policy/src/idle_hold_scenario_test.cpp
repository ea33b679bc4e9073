// SPDX-License-Identifier: Apache-2.0
// Scenarios of idle holds (actions.idle_hold_intervals): a cpuset split relaxed while a BE it
// moved is idle leaves that BE where it is, for the next victim, instead of moving it back and
// off again (scale.sh acting at 1000 containers: ~660 runtime updates per episode, one victim
// after another). Synthetic traces, synthetic time (100 ms intervals, 2 CPUs).
#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "colod/policy/engine.h"
#include "colod/policy/testing/synthetic.h"
#include "scenario_support.h"

namespace colod::policy {
namespace {

using testing::beInfo;
using testing::beSample;
using testing::lsInfo;
using testing::lsSample;
using testing::restricted;
using testing::Sim;
using namespace scenario;

// The cpuset moves of `id` (off the victim's CPUs and back), in order; a moved BE's quota
// resized on the CPUs it was moved to (move_quota_resized) is not a move.
std::vector<Decision> cpusetDecisions(const Sim& sim, const std::string& id) {
  std::vector<Decision> out;
  for (const Decision& d : sim.decisions()) {
    if (d.target_id == id && d.lever == Lever::Cpuset && d.rule != "move_quota_resized") {
      out.push_back(d);
    }
  }
  return out;
}

bool up(const Decision& d) {
  return d.kind == DecisionKind::Engage || d.kind == DecisionKind::Escalate;
}

int count(const std::vector<Decision>& ds, bool restricting) {
  return static_cast<int>(
      std::count_if(ds.begin(), ds.end(), [&](const Decision& d) { return up(d) == restricting; }));
}

const std::vector<Preemption> kBehindHog = {{"hog", 40, 12'000'000}};

struct Node {
  explicit Node(int hold) : sim(config(hold)) {
    sim.add(lsInfo("web"));
    sim.add(lsInfo("api"));
    sim.add(beInfo("hog"));
    sim.add(beInfo("idle1"));
  }
  static Config config(int hold) {
    Config c;
    c.actions.cpu_ladder = {Lever::Cpuset, Lever::CpuQuota};
    c.actions.idle_hold_intervals = hold;
    return c;
  }
  // One round: web and/or api hurt behind hog, hog busy, idle1 at `idle1_ns` on-CPU.
  void step(bool web_hurt, bool api_hurt, uint64_t idle1_ns = 0) {
    sim.step({lsSample("web", web_hurt ? kHurtP99 : kQuietP99,
                       web_hurt ? kBehindHog : std::vector<Preemption>{}),
              lsSample("api", api_hurt ? kHurtP99 : kQuietP99,
                       api_hurt ? kBehindHog : std::vector<Preemption>{}),
              beSample("hog", 90'000'000), beSample("idle1", idle1_ns)});
  }
  Sim sim;
};

// web is hurt, then quiet: its split is relaxed; idle1, idle all along, stays off its CPUs. api
// is hurt 6 s later: its split takes idle1 over as it is (no update). After api's relax idle1
// stays again until the hold ends, and is then given back: one move each way in all.
TEST(IdleHoldScenario, TheNextVictimFindsTheIdleBeInPlace) {
  Node n(/*hold=*/150);
  bool idle1_held_while_nobody_hurt = false;
  bool hog_relaxed_for_web = false;
  for (int r = 1; r <= 400; ++r) {
    const bool web_hurt = r >= 5 && r < 9;
    const bool api_hurt = r >= 70 && r < 74;
    n.step(web_hurt, api_hurt);
    if (r > 30 && r < 70 && !restricted(n.sim.engine(), "hog", Lever::Cpuset)) {
      hog_relaxed_for_web = true;
      idle1_held_while_nobody_hurt =
          idle1_held_while_nobody_hurt || restricted(n.sim.engine(), "idle1", Lever::Cpuset);
    }
  }
  const auto idle1 = cpusetDecisions(n.sim, "idle1");
  const auto hog = cpusetDecisions(n.sim, "hog");
  ASSERT_GE(count(hog, true), 2) << "hog was not moved for both victims: the scenario does not "
                                    "run";
  ASSERT_TRUE(hog_relaxed_for_web) << "web's split was never relaxed";
  EXPECT_TRUE(idle1_held_while_nobody_hurt) << "idle1 was given back at web's relax";
  EXPECT_EQ(count(idle1, true), 1) << "idle1 was moved off " << count(idle1, true) << " times";
  ASSERT_EQ(count(idle1, false), 1) << "idle1 was given back " << count(idle1, false) << " times";
  const Decision& back = idle1.back();
  EXPECT_EQ(back.rule, "idle_hold_ended") << formatDecision(back);
  EXPECT_NE(back.explanation.find("held idle for"), std::string::npos) << back.explanation;
  EXPECT_FALSE(restricted(n.sim.engine(), "idle1", Lever::Cpuset));
  EXPECT_TRUE(n.sim.engine().applied().empty()) << "a restriction outlived every hold";
}

// With the hold off, the same trace moves idle1 back and forth once per victim: what the hold
// saves.
TEST(IdleHoldScenario, WithoutTheHoldEachVictimMovesTheIdleBeAgain) {
  Node n(/*hold=*/0);
  for (int r = 1; r <= 400; ++r) {
    n.step(r >= 5 && r < 9, r >= 70 && r < 74);
  }
  const auto idle1 = cpusetDecisions(n.sim, "idle1");
  EXPECT_EQ(count(idle1, true), 2);
  EXPECT_EQ(count(idle1, false), 2);
  for (const Decision& d : idle1) {
    EXPECT_NE(d.rule, "idle_hold_ended") << formatDecision(d);
  }
}

// A held BE that starts running is given back at once: it may want the CPUs, and no victim is
// protected.
TEST(IdleHoldScenario, AHeldBeThatRunsIsGivenBackAtOnce) {
  Node n(/*hold=*/600);
  int wake = 0;
  int back_at = 0;
  for (int r = 1; r <= 200; ++r) {
    const bool web_hurt = r >= 5 && r < 9;
    const bool held = restricted(n.sim.engine(), "idle1", Lever::Cpuset) &&
                      !restricted(n.sim.engine(), "hog", Lever::Cpuset);
    if (wake == 0 && held && r > 20) {
      wake = r;  // idle1 wakes while only its idle hold is left
    }
    n.step(web_hurt, false, wake != 0 ? 50'000'000 : 0);
    if (wake != 0 && back_at == 0 && !restricted(n.sim.engine(), "idle1", Lever::Cpuset)) {
      back_at = r;
    }
  }
  ASSERT_NE(wake, 0) << "idle1 was never held idle after web's relax";
  ASSERT_NE(back_at, 0) << "idle1 runs and is still held";
  EXPECT_LE(back_at - wake, 1) << "given back " << back_at - wake << " rounds after it ran";
  const auto idle1 = cpusetDecisions(n.sim, "idle1");
  ASSERT_FALSE(idle1.empty());
  EXPECT_EQ(idle1.back().rule, "idle_hold_ended");
  EXPECT_NE(idle1.back().explanation.find("runs again"), std::string::npos)
      << idle1.back().explanation;
}

// A hold is journaled under the victim it was held for (the daemon's overlays and journal come
// from Engine::applied()), and a restarted engine takes it back as that victim's step; when the
// victim is removed the hold ends.
TEST(IdleHoldScenario, AHoldIsJournaledAndEndsWithItsVictim) {
  Node n(/*hold=*/600);
  int r = 1;
  for (; r <= 60; ++r) {
    n.step(r >= 5 && r < 9, false);
  }
  ASSERT_FALSE(restricted(n.sim.engine(), "hog", Lever::Cpuset)) << "web's split not relaxed";
  const auto applied = n.sim.engine().applied();
  ASSERT_EQ(applied.size(), 1u);
  EXPECT_EQ(applied[0].target_id, "idle1");
  EXPECT_EQ(applied[0].victim_id, "web");
  EXPECT_EQ(applied[0].lever, Lever::Cpuset);

  Node restarted(/*hold=*/600);
  restarted.step(false, false);
  ASSERT_TRUE(restarted.sim.engine().seedApplied(applied, restarted.sim.now()));
  EXPECT_EQ(restarted.sim.engine().applied(), applied);

  n.sim.engine().removeContainer("web");
  n.step(false, false);
  EXPECT_FALSE(restricted(n.sim.engine(), "idle1", Lever::Cpuset));
  const auto idle1 = cpusetDecisions(n.sim, "idle1");
  ASSERT_FALSE(idle1.empty());
  EXPECT_EQ(idle1.back().rule, "idle_hold_ended");
  EXPECT_NE(idle1.back().explanation.find("is gone"), std::string::npos)
      << idle1.back().explanation;
}

}  // namespace
}  // namespace colod::policy
