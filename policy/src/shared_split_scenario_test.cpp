// SPDX-License-Identifier: Apache-2.0
// Scenarios of a cpuset split that protects more than one victim at once (issue 17: at 1000
// containers every episode moves some 330 idle BE off the victims' CPUs and back, one runtime
// update each, so a split given back while another victim still stands on it would cost 660
// updates for nothing and leave the BE on that victim's CPUs in between). Synthetic traces,
// synthetic time (100 ms intervals, 2 CPUs).
#include <gtest/gtest.h>

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

struct Timeline {
  int restricts = 0;         // Engage or Escalate of the container's cpuset
  int releases = 0;          // Relax or Undo of it
  std::string released_for;  // the victim of the last release
};

Timeline cpusetTimeline(const Sim& sim, const std::string& id) {
  Timeline t;
  for (const Decision& d : sim.decisions()) {
    if (d.target_id != id || d.lever != Lever::Cpuset) {
      continue;
    }
    const bool up = d.kind == DecisionKind::Engage || d.kind == DecisionKind::Escalate;
    t.restricts += up ? 1 : 0;
    t.releases += up ? 0 : 1;
    if (!up) {
      t.released_for = d.victim_id;
    }
  }
  return t;
}

// web is hurt behind hog: its episode moves hog and the idle BE off its CPUs. api is hurt
// behind hog while web's episode holds, and is quiet later than web. web's relax gives back
// only what api's episode does not stand on: the idle BE stay where they are until api is
// quiet too, and move once each way.
TEST(SharedSplitScenario, AnIdleBeStaysOffWhileAnotherVictimStandsOnTheSplit) {
  Config config;
  config.actions.cpu_ladder = {Lever::Cpuset, Lever::CpuQuota};
  config.actions.idle_hold_intervals = 0;  // the split's own sharing, without idle holds
  Sim sim{config};
  sim.add(lsInfo("web"));
  sim.add(lsInfo("api"));
  sim.add(beInfo("hog"));
  sim.add(beInfo("idle1"));
  sim.add(beInfo("idle2"));
  const std::vector<Preemption> behind_hog = {{"hog", 40, 12'000'000}};
  bool idle_back_while_api_held = false;
  for (int r = 1; r <= 200; ++r) {
    const bool web_hurt = r >= 5 && r < 9;
    const bool api_hurt = r >= 12 && r < 16;
    sim.step({lsSample("web", web_hurt ? kHurtP99 : kQuietP99,
                       web_hurt ? behind_hog : std::vector<Preemption>{}),
              lsSample("api", api_hurt ? kHurtP99 : kQuietP99,
                       api_hurt ? behind_hog : std::vector<Preemption>{}),
              beSample("hog", 90'000'000), beSample("idle1", 0), beSample("idle2", 0)});
    if (r >= 10 && r < 24 && restricted(sim.engine(), "hog", Lever::Cpuset) &&
        !restricted(sim.engine(), "idle1", Lever::Cpuset)) {
      idle_back_while_api_held = true;
    }
  }
  const Timeline idle1 = cpusetTimeline(sim, "idle1");
  const Timeline hog = cpusetTimeline(sim, "hog");
  ASSERT_GE(hog.restricts, 1) << "web's episode never moved hog: the scenario does not start";
  ASSERT_GE(idle1.restricts, 1) << "the idle BE was never moved off web's CPUs";
  EXPECT_FALSE(idle_back_while_api_held)
      << "idle1 went back onto the CPUs while api's episode still held the split";
  EXPECT_EQ(idle1.restricts, 1) << "idle1 was moved off " << idle1.restricts << " times";
  EXPECT_EQ(idle1.releases, 1) << "idle1 was given back " << idle1.releases << " times";
  EXPECT_EQ(idle1.released_for, "api") << "given back when web was quiet, not api";
  EXPECT_FALSE(restricted(sim.engine(), "idle1", Lever::Cpuset))
      << "idle1 was not given back once both victims were quiet";
}

}  // namespace
}  // namespace colod::policy
