// SPDX-License-Identifier: Apache-2.0
// The quota step on the BE a split holds while the victim waits behind the host
// (uncontrolled_cap.cpp), on synthetic traces: taken once and verified, kept when the wait
// drops, undone and not retried when it does not, never against another pod.
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

// Two CPUs: the LS "web" runs, the batch job "batch" (a 16-CPU request, which the weights do
// not hold back) is placed at creation on the CPU the split leaves to BE.
void placeBatch(Sim& sim) {
  sim.add(lsInfo("web", 2));
  (void)sim.step({lsSample("web", 200)});
  const RoundResult placed = sim.engine().admit(beInfo("batch", 2, 16384), sim.now());
  ASSERT_EQ(placed.decisions.size(), 1u);
  ASSERT_EQ(placed.decisions[0].lever, Lever::Cpuset);
}

// placeBatch, then the LS starving behind the host until the held job is capped.
void placeAndCap(Sim& sim) {
  ASSERT_NO_FATAL_FAILURE(placeBatch(sim));
  for (int i = 0; i < 40 && !restricted(sim.engine(), "batch", Lever::CpuQuota); ++i) {
    (void)sim.step({starved("web", "", 1.6), beSample("batch", 100'000'000)});
  }
  ASSERT_TRUE(restricted(sim.engine(), "batch", Lever::CpuQuota));
}

std::vector<Decision> ofRule(const std::vector<Decision>& all, const std::string& rule) {
  std::vector<Decision> out;
  for (const auto& d : all) {
    if (d.rule == rule) {
      out.push_back(d);
    }
  }
  return out;
}

// Colocation foreign phase (session 33): held on CPU 1, the BE used it whole and the LS on CPU
// 0 lost to a hog at a system slice's weight; the BE capped one step gave the LS its CPU back.
TEST(UncontrolledCapTest, TheBeASplitHoldsIsCappedOneStepWhenTheLsWaitsBehindTheHost) {
  Sim sim{Config{}};
  placeBatch(sim);
  const Config defaults;
  int capped_at = -1;
  for (int i = 1; i <= 40 && capped_at < 0; ++i) {
    const RoundResult r = sim.step({starved("web", "", 1.6), beSample("batch", 100'000'000)});
    if (!ofRule(r.decisions, "uncontrolled_cap").empty()) {
      capped_at = i;
    }
  }
  ASSERT_GT(capped_at, 0) << "never capped";
  EXPECT_GE(capped_at, defaults.actions.verify_intervals) << "on top of a placement not settled";
  const auto caps = ofRule(sim.decisions(), "uncontrolled_cap");
  ASSERT_EQ(caps.size(), 1u);
  const Decision& cap = caps[0];
  EXPECT_EQ(cap.target_id, "batch");
  EXPECT_EQ(cap.lever, Lever::CpuQuota);
  EXPECT_EQ(cap.kind, DecisionKind::Escalate);
  // One step below the CPU it used (1.0): 0.75 CPU.
  ASSERT_TRUE(cap.new_values.cpu_quota.has_value());
  EXPECT_EQ(*cap.new_values.cpu_quota, 75'000);
  EXPECT_NE(cap.explanation.find("behind the host"), std::string::npos) << cap.explanation;
  EXPECT_NE(cap.explanation.find("weight"), std::string::npos) << cap.explanation;
  EXPECT_TRUE(restricted(sim.engine(), "batch", Lever::Cpuset)) << "the split stays";

  // The LS, still over its threshold, waits half as much under it: kept through the
  // verification, never tightened.
  for (int i = 0; i < 3 * defaults.actions.verify_intervals; ++i) {
    (void)sim.step({starved("web", "", 0.6), beSample("batch", 75'000'000)});
  }
  EXPECT_TRUE(restricted(sim.engine(), "batch", Lever::CpuQuota));
  for (const auto& d : sim.decisions()) {
    EXPECT_NE(d.kind, DecisionKind::Undo) << d.explanation;
    EXPECT_NE(d.rule, "quota_budget_tightened") << d.explanation;
  }
}

// Its backlog keeps the LS's tasks queued, so its wait does not drop, but it runs half as much
// again under the cap: that is what the cap is for, and it is kept (colocation foreign phase,
// session 33: judged by the wait alone, a cap taken a second after the BE arrived was undone for
// the phase).
TEST(UncontrolledCapTest, KeptWhenTheLsRunsMoreThoughItsQueueStays) {
  Sim sim{Config{}};
  ASSERT_NO_FATAL_FAILURE(placeAndCap(sim));
  const Config defaults;
  for (int i = 0; i < 3 * defaults.actions.verify_intervals; ++i) {
    ContainerSample web = starved("web", "", 1.6);
    web.oncpu_ns = 60'000'000;  // 0.4 -> 0.6 CPU
    (void)sim.step({web, beSample("batch", 75'000'000)});
  }
  EXPECT_TRUE(restricted(sim.engine(), "batch", Lever::CpuQuota));
  EXPECT_TRUE(ofRule(sim.decisions(), "rung_not_effective").empty())
      << ofRule(sim.decisions(), "rung_not_effective")[0].explanation;
}

// The host's work does not yield to it: undone after verify_intervals, and not tried again on
// the same evidence (no engage -> undo -> engage loop), the split kept throughout.
TEST(UncontrolledCapTest, UndoneAndNotRetriedWhenTheWaitDoesNotDrop) {
  Sim sim{Config{}};
  placeBatch(sim);
  std::vector<RoundResult> rounds;
  for (int i = 0; i < 300; ++i) {
    rounds.push_back(sim.step({starved("web", "", 1.6), beSample("batch", 100'000'000)}));
  }
  EXPECT_EQ(ofRule(sim.decisions(), "uncontrolled_cap").size(), 1u);
  const auto undone = ofRule(sim.decisions(), "rung_not_effective");
  ASSERT_EQ(undone.size(), 1u);
  EXPECT_EQ(undone[0].lever, Lever::CpuQuota);
  EXPECT_NE(undone[0].explanation.find("not retried"), std::string::npos) << undone[0].explanation;
  EXPECT_FALSE(restricted(sim.engine(), "batch", Lever::CpuQuota));
  EXPECT_TRUE(restricted(sim.engine(), "batch", Lever::Cpuset)) << "the split stays";
  EXPECT_TRUE(ofRule(sim.decisions(), "quota_budget_tightened").empty());
  EXPECT_LE(countFindings(rounds, "rung_not_retried"), 1);
}

// One step, whatever follows: a victim still hurt under the cap, now behind the held BE it
// meets on their CPU, does not tighten it (colocation foreign phase, session 33: a second
// victim's episode tightened it to 0.56 CPU and BE lost a quarter of its work).
TEST(UncontrolledCapTest, TheCapIsNeverTightened) {
  Sim sim{Config{}};
  ASSERT_NO_FATAL_FAILURE(placeAndCap(sim));
  for (int i = 0; i < 60; ++i) {
    (void)sim.step({starved("web", "batch", 1.6), beSample("batch", 75'000'000)});
  }
  EXPECT_TRUE(ofRule(sim.decisions(), "quota_budget_tightened").empty())
      << ofRule(sim.decisions(), "quota_budget_tightened")[0].explanation;
}

// After a restart with `reconcile: reseed` the journal hands the cap back to a new engine: it is
// still the cap, never tightened. The same steps handed back as a plain quota step are tightened
// by the same rounds, which is what the mark prevents.
TEST(UncontrolledCapTest, TheCapHandedBackAfterARestartIsStillNeverTightened) {
  Sim sim{Config{}};
  ASSERT_NO_FATAL_FAILURE(placeAndCap(sim));
  const std::vector<AppliedAction> journaled = sim.engine().applied();
  int caps = 0;
  for (const auto& a : journaled) {
    EXPECT_EQ(a.uncontrolled_cap, a.lever == Lever::CpuQuota) << leverName(a.lever);
    caps += a.uncontrolled_cap ? 1 : 0;
  }
  ASSERT_EQ(caps, 1);

  const auto tightenedAfterReseed = [&](bool keep_mark) {
    Sim after{Config{}};
    after.add(lsInfo("web", 2));
    ContainerInfo batch = beInfo("batch", 2, 16384);
    std::vector<AppliedAction> seeded = journaled;
    for (auto& a : seeded) {
      // The registry sees what was applied.
      const Resources& v = a.applied_values;
      batch.resources.cpuset_cpus = v.cpuset_cpus ? v.cpuset_cpus : batch.resources.cpuset_cpus;
      batch.resources.cpu_quota = v.cpu_quota ? v.cpu_quota : batch.resources.cpu_quota;
      batch.resources.cpu_period = v.cpu_period ? v.cpu_period : batch.resources.cpu_period;
      a.uncontrolled_cap = keep_mark && a.uncontrolled_cap;
    }
    after.add(batch);
    EXPECT_TRUE(after.engine().seedApplied(seeded, after.now()).has_value());
    EXPECT_EQ(after.engine().applied(), keep_mark ? journaled : seeded);
    for (int i = 0; i < 60; ++i) {
      (void)after.step({starved("web", "batch", 1.6), beSample("batch", 75'000'000)});
    }
    return ofRule(after.decisions(), "quota_budget_tightened");
  };
  const auto with_mark = tightenedAfterReseed(true);
  EXPECT_TRUE(with_mark.empty()) << with_mark[0].explanation;
  EXPECT_FALSE(tightenedAfterReseed(false).empty()) << "the rounds do not tighten a plain step";
}

// Over its threshold by its p99 alone, the LS's tasks hardly wait: there is no CPU to give back
// and nothing is capped (blame.sh duty, session 34: capped at a wait load of 0.01, undone as
// useless a second later). The same rounds with its tasks waiting are capped (the first test).
TEST(UncontrolledCapTest, NothingIsCappedWhenTheLsHardlyWaits) {
  Sim sim{Config{}};
  placeBatch(sim);
  std::vector<RoundResult> rounds;
  for (int i = 0; i < 100; ++i) {
    ContainerSample web = lsSample("web", kHurtP99, {{"", 4, 4'000'000, 40, 4'000'000}});
    web.runq_wait_ns = 1'000'000;  // a wait load of 0.01
    rounds.push_back(sim.step({web, beSample("batch", 100'000'000)}));
  }
  EXPECT_TRUE(ofRule(sim.decisions(), "uncontrolled_cap").empty())
      << ofRule(sim.decisions(), "uncontrolled_cap")[0].explanation;
  EXPECT_FALSE(restricted(sim.engine(), "batch", Lever::CpuQuota));
  EXPECT_TRUE(restricted(sim.engine(), "batch", Lever::Cpuset)) << "the split stays";
  EXPECT_GT(countFindings(rounds, "uncontrolled_wait"), 0) << "the host's wait is still said";
}

// Half of the wait behind the host, half behind itself (the colod phase's probe, no hog: the
// host's odd tasks): not what the step is for, nothing is capped.
TEST(UncontrolledCapTest, NothingIsCappedWhenTheHostIsOnlyHalfTheWait) {
  Sim sim{Config{}};
  placeBatch(sim);
  for (int i = 0; i < 100; ++i) {
    (void)sim.step(
        {lsSample("web", kHurtP99,
                  {{"", 4, 2'000'000, 20, 20'000'000}, {"web", 4, 2'000'000, 20, 20'000'000}}),
         beSample("batch", 100'000'000)});
  }
  EXPECT_TRUE(ofRule(sim.decisions(), "uncontrolled_cap").empty())
      << ofRule(sim.decisions(), "uncontrolled_cap")[0].explanation;
  EXPECT_TRUE(restricted(sim.engine(), "batch", Lever::Cpuset));
}

// Behind another pod (an LS here), the BE's load elsewhere does not tip the weights against the
// victim: nothing is capped.
TEST(UncontrolledCapTest, NothingIsCappedWhenTheLsWaitsBehindAnotherPod) {
  Sim sim{Config{}};
  sim.add(lsInfo("api", 2));
  placeBatch(sim);
  for (int i = 0; i < 100; ++i) {
    (void)sim.step({lsSample("web", kHurtP99, {{"api", 4, 4'000'000, 40, 40'000'000}}),
                    lsSample("api", kQuietP99), beSample("batch", 100'000'000)});
  }
  for (const auto& d : sim.decisions()) {
    EXPECT_NE(d.lever, Lever::CpuQuota) << d.explanation;
  }
  EXPECT_TRUE(restricted(sim.engine(), "batch", Lever::Cpuset));
}

}  // namespace
}  // namespace colod::policy
