// SPDX-License-Identifier: Apache-2.0
// Scenarios of issue 15 item 3 (do no harm), on synthetic traces with synthetic time (100 ms
// intervals, 2 CPUs unless said): a victim waiting behind work colod does not control, a BE
// turning busy beside such a victim, and the engage -> undo -> engage loop.
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

// Issue 15 item 3: the victim waits mostly behind work colod does not control (host tasks, a
// system container, another LS). Said once per episode, counted, nothing restricted.
TEST(DoNoHarmScenario, UncontrolledWaitIsSaidOnceAndNothingEscalates) {
  Sim sim{Config{}};
  sim.add(lsInfo("web"));
  sim.add(lsInfo("api"));
  sim.add(testing::systemInfo("sys"));
  sim.add(beInfo("hog"));
  std::vector<RoundResult> rounds;
  for (int r = 1; r <= 200; ++r) {
    auto web = lsSample("web", r > 5 ? kHurtP99 : kQuietP99,
                        {{"", 40, 12'000'000},
                         {"sys", 20, 6'000'000},
                         {"api", 10, 3'000'000},
                         {"hog", 30, 5'000'000}});
    rounds.push_back(sim.step({web, lsSample("api", kQuietP99), beSample("sys", 10'000'000),
                               beSample("hog", 90'000'000)}));
  }
  EXPECT_TRUE(sim.decisions().empty());
  EXPECT_EQ(countFindings(rounds, "uncontrolled_wait"), 1);
  const Finding* f = findFinding(rounds, "uncontrolled_wait");
  ASSERT_NE(f, nullptr);
  EXPECT_NE(f->message.find("waits behind uncontrolled work"), std::string::npos);
  EXPECT_NE(f->message.find("host"), std::string::npos) << f->message;
  EXPECT_EQ(sim.engine().stats().foreign_wait_episodes, 1u);
}

// Issue 15 (reaction_busy): the LS has waited behind the host for seconds, nothing to restrict;
// then an idle BE turns busy and is behind two thirds of its wait. The blame window still
// remembered the host's share, and the engage waited ~12 rounds (1.3 s in the colocation busy
// phase) for it to fade. The split over the last rounds says who the victim waits behind now.
TEST(DoNoHarmScenario, ABeTurningBusyIsNotHiddenByTheHostsPastShare) {
  Config config;
  config.actions.cpu_ladder = {Lever::Cpuset, Lever::CpuQuota};
  Sim sim{config};
  sim.add(lsInfo("web"));
  sim.add(beInfo("hog"));
  std::vector<RoundResult> rounds;
  int engaged = -1;
  for (int r = 1; r <= 40 && engaged < 0; ++r) {
    std::vector<Preemption> by = {{"", 5, 4'000'000}};
    if (r > 20) {
      by.push_back({"hog", 10, 8'000'000});
    }
    rounds.push_back(
        sim.step({lsSample("web", kHurtP99, by), beSample("hog", r > 20 ? 150'000'000 : 0)}));
    if (!rounds.back().decisions.empty()) {
      EXPECT_EQ(rounds.back().decisions[0].target_id, "hog");
      engaged = r;
    }
  }
  EXPECT_EQ(countFindings(rounds, "uncontrolled_wait"), 1) << "said while only the host was there";
  ASSERT_GT(engaged, 20);
  EXPECT_LE(engaged, 23) << "the hog is behind 2/3 of the wait from its first round";

  // The other way: a BE behind a small part of the wait now is still not restricted.
  Sim steady{config};
  steady.add(lsInfo("web"));
  steady.add(beInfo("hog"));
  for (int r = 1; r <= 40; ++r) {
    (void)steady.step({lsSample("web", kHurtP99, {{"", 5, 6'000'000}, {"hog", 10, 3'000'000}}),
                       beSample("hog", 150'000'000)});
  }
  EXPECT_TRUE(steady.decisions().empty());

  // Nor a light BE that preempts it a little in a lull of a heavy wait behind the host and
  // itself (blame.sh light, session 15: capped on two such rounds).
  Sim lull{config};
  lull.add(lsInfo("web"));
  lull.add(beInfo("light"));
  for (int r = 1; r <= 35; ++r) {
    std::vector<Preemption> by = {{"light", 2, 2'000'000}};
    if (r <= 20) {
      by = {{"", 5, 20'000'000}, {"web", 5, 10'000'000}};
    }
    (void)lull.step({lsSample("web", kHurtP99, by), beSample("light", 5'000'000)});
  }
  EXPECT_TRUE(lull.decisions().empty()) << lull.decisions()[0].explanation;
}

// Issue 15 item 3, the loop: a constant foreign load (40 % of the wait behind host tasks) that
// no rung can remove, and a victim that is now and then quiet long enough for its episode to
// end. Every rung is tried once, judged useless and not retried on the same evidence: over 300
// rounds each rung is engaged at most once (it was engage -> undo -> engage for minutes).
TEST(DoNoHarmScenario, NoEngageUndoEngageLoopUnderConstantForeignLoad) {
  Sim sim{Config{}};
  ContainerInfo hog = beInfo("hog");
  hog.pod_uid = "uid-web";  // a sidecar: the shares rung acts too
  sim.add(lsInfo("web"));
  sim.add(hog);
  std::vector<RoundResult> rounds;
  for (int r = 1; r <= 300; ++r) {
    const bool quiet = r <= 5 || r % 60 >= 52;
    auto web = lsSample("web", quiet ? kQuietP99 : kHurtP99,
                        {{"", 40, 4'000'000}, {"hog", 60, 6'000'000}});
    rounds.push_back(sim.step({web, beSample("hog", 90'000'000)}));
  }
  std::map<Lever, std::set<int64_t>> engaged;  // rounds in which a rung was put in force
  for (const auto& d : sim.decisions()) {
    if ((d.kind == DecisionKind::Engage || d.kind == DecisionKind::Escalate) &&
        d.rule != "quota_budget_tightened") {
      engaged[d.lever].insert(d.at_ns);
    }
  }
  ASSERT_FALSE(engaged.empty());
  for (const auto& [lever, at] : engaged) {
    EXPECT_LE(at.size(), 1u) << leverName(lever) << " engaged " << at.size() << " times";
  }
  // Said once per judgement / stretch of hurt, not every round.
  EXPECT_LE(countFindings(rounds, "rung_not_retried"), 3);
  EXPECT_LE(countFindings(rounds, "ladder_exhausted"), 5);
  const Finding* again = findFinding(rounds, "rung_not_retried");
  ASSERT_NE(again, nullptr) << "the trace says why a rung is not tried again";
  EXPECT_NE(again->message.find("did not help"), std::string::npos) << again->message;
  bool undo_says = false;
  for (const auto& d : sim.decisions()) {
    undo_says = undo_says || (d.kind == DecisionKind::Undo &&
                              d.explanation.find("not retried") != std::string::npos);
  }
  EXPECT_TRUE(undo_says);
}

// The evidence changes (another antagonist): a rung judged useless is tried again for it.
TEST(DoNoHarmScenario, UselessRungIsRetriedWhenTheAntagonistChanges) {
  Config config;
  config.actions.cpu_ladder = {Lever::Cpuset};
  Sim sim{config};
  sim.add(lsInfo("web"));
  sim.add(beInfo("a"));
  sim.add(beInfo("b"));
  std::set<int> engage_rounds;
  for (int r = 1; r <= 120; ++r) {
    // a for 60 rounds (the split does not help: the victim stays hurt), then b.
    const std::string who = r <= 60 ? "a" : "b";
    const bool quiet = r <= 5 || (r > 50 && r <= 58);
    auto web = lsSample("web", quiet ? kQuietP99 : kHurtP99, {{who, 80, 8'000'000}});
    auto res = sim.step({web, beSample("a", who == "a" ? 150'000'000 : 0),
                         beSample("b", who == "b" ? 150'000'000 : 0)});
    for (const auto& d : res.decisions) {
      if (d.kind == DecisionKind::Engage) {
        engage_rounds.insert(r);
      }
    }
  }
  EXPECT_EQ(engage_rounds.size(), 2u) << "once against a, once more when b is to blame too";
}

}  // namespace
}  // namespace colod::policy
