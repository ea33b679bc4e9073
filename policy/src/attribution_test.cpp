// SPDX-License-Identifier: Apache-2.0
// attribution.cpp alone: the evidence per (victim, BE) -- by CPU overlap, over a decaying
// window, split by whom the victim waited behind -- and the ranking's minimum evidence.
#include <gtest/gtest.h>

#include <cmath>

#include "colod/policy/testing/synthetic.h"
#include "engine_state.h"

namespace colod::policy {
namespace {

// An engine state with a 2-CPU node: web (LS, CPU 1), a BE on CPU 0 and a BE on CPU 1.
class AttributionTest : public ::testing::Test {
 protected:
  AttributionTest() : s_(Config{}) {
    s_.node_cpus_ = {0, 1};
    add("web", Tier::Ls, {1});
    add("far", Tier::Be, {0});
    add("near", Tier::Be, {1});
    add("sys", Tier::System, {0, 1});
  }

  Tracked& add(const std::string& id, Tier tier, std::vector<int> cpus) {
    Tracked& t = s_.tracked_[id];
    t.info.id = id;
    t.tier = tier;
    t.cpus = std::move(cpus);
    s_.index_.emplace(std::string_view(s_.tracked_.find(id)->first), &t);
    return t;
  }

  // One round: web's sample with `by`, and the BE run times.
  void round(std::vector<Preemption> by, uint64_t far_ns, uint64_t near_ns) {
    ++s_.round_;
    ++s_.ticks_;
    samples_ = {testing::lsSample("web", 5000, std::move(by)), testing::beSample("far", far_ns),
                testing::beSample("near", near_ns)};
    for (auto& s : samples_) {
      Tracked& t = s_.tracked_.at(s.id);
      t.sample = &s;
      t.sampled = true;
    }
    s_.running_be_.clear();
    for (auto& [id, t] : s_.tracked_) {
      if (t.tier == Tier::Be && t.sample != nullptr && t.sample->oncpu_ns > 0) {
        s_.running_be_.push_back(&t);
      }
    }
    s_.accumulateEvidence(web());
  }

  Tracked& web() { return s_.tracked_.at("web"); }

  EngineState s_;
  std::vector<ContainerSample> samples_;
};

TEST_F(AttributionTest, RunTimeCountsOnlyOnTheVictimsCpus) {
  round({}, 90'000'000, 50'000'000);
  EXPECT_EQ(web().blame.count("far"), 0u) << "CPU 0 only: disjoint from web's CPU 1";
  ASSERT_EQ(web().blame.count("near"), 1u);
  EXPECT_DOUBLE_EQ(web().blame.at("near").overlap_ns, 50'000'000.0);
}

TEST_F(AttributionTest, EvidenceDecaysOverTheWindowAndABurstKeepsItsBlame) {
  round({{"near", 90, 20'000'000}}, 0, 90'000'000);
  for (int i = 0; i < 7; ++i) {
    round({}, 0, 0);  // 700 ms idle
  }
  s_.decayEvidence(web());
  const BlameEvidence& e = web().blame.at("near");
  const double d = std::pow(1.0 - 1.0 / Config{}.actions.blame_window_intervals, 7);
  EXPECT_NEAR(e.preemptions, 90 * d, 1e-9);
  EXPECT_NEAR(e.wait_ns, 20'000'000 * d, 1e-3);
  EXPECT_GT(e.preemptions / 90, 0.75) << "a 700 ms pause keeps most of the blame";
  // Long forgotten after many windows.
  for (int i = 0; i < 400; ++i) {
    round({}, 0, 0);
  }
  EXPECT_EQ(web().blame.count("near"), 0u);
}

TEST_F(AttributionTest, WaitIsSplitByWhomTheVictimWaitedBehind) {
  round({{"near", 10, 2'000'000},
         {"", 5, 3'000'000},
         {"sys", 5, 1'000'000},
         {"web", 2, 1'000'000},
         {"unknown-cgroup", 1, 1'000'000}},
        0, 0);
  const WaitSplit& w = web().waits;
  EXPECT_DOUBLE_EQ(w.be_ns, 2'000'000.0);
  EXPECT_DOUBLE_EQ(w.self_ns, 1'000'000.0);
  EXPECT_DOUBLE_EQ(w.foreign_ns, 5'000'000.0);
  EXPECT_DOUBLE_EQ(w.foreign_by.at("host"), 3'000'000.0);
  EXPECT_DOUBLE_EQ(s_.foreignShare(web()), 5.0 / 8.0);
  EXPECT_TRUE(s_.behindUncontrolled(web()));
  const std::string text = s_.waitBehind(web());
  EXPECT_NE(text.find("63% behind uncontrolled work (host 38%"), std::string::npos) << text;
}

// colocation dynamic at 60 % of the node (session 24): the cpuset split left the LS one CPU, its
// threads queued behind each other there while BE ran on the other, and "waits mostly behind
// itself" stopped the ladder. Its tasks waiting behind each other while its CPUs are full and BE
// holds half a CPU or more of them is BE's displacement; with BE light there, its own.
TEST_F(AttributionTest, OwnWaitWhileBeFillsItsCpusIsDisplacementNotItsOwn) {
  s_.interval_ns_ = 100'000'000;
  const Preemption self{.aggressor_id = "web", .count = 20, .wait_ns = 6'000'000};
  const Preemption host{.aggressor_id = "", .count = 10, .wait_ns = 2'000'000};
  // web ran 30 ms of its CPU's 100, near 65 ms there: full, and BE held 0.65 of it.
  round({self, host}, 0, 65'000'000);
  const WaitSplit& w = web().waits;
  EXPECT_DOUBLE_EQ(w.self_ns, 0.0);
  EXPECT_DOUBLE_EQ(w.displaced_ns, 6'000'000.0);
  EXPECT_DOUBLE_EQ(w.foreign_ns, 2'000'000.0);
  EXPECT_FALSE(s_.behindUncontrolled(web())) << s_.waitBehind(web());
  const std::string text = s_.waitBehind(web());
  EXPECT_NE(text.find("75% behind BE (near 75%) (75% of all its own tasks queued while BE held "
                      "CPUs they could use), 0% behind itself"),
            std::string::npos)
      << text;
  // near held the room: the displaced wait is its evidence, as waits behind it.
  EXPECT_DOUBLE_EQ(web().blame.at("near").behind_ns, 6'000'000.0);
  EXPECT_DOUBLE_EQ(web().blame.at("near").fresh_behind_ns, 6'000'000.0);
}

// far runs on CPU 0, which web may not use: its run time there displaces nothing.
TEST_F(AttributionTest, BeOnCpusTheVictimMayNotUseDisplacesNothing) {
  s_.interval_ns_ = 100'000'000;
  const Preemption self{.aggressor_id = "web", .count = 20, .wait_ns = 6'000'000};
  const Preemption host{.aggressor_id = "", .count = 10, .wait_ns = 2'000'000};
  round({self, host}, 65'000'000, 0);
  EXPECT_DOUBLE_EQ(web().waits.self_ns, 6'000'000.0);
  EXPECT_DOUBLE_EQ(web().waits.displaced_ns, 0.0);
  EXPECT_TRUE(s_.behindUncontrolled(web())) << s_.waitBehind(web());
}

// A light BE beside it (0.2 of its CPU): the wait behind its own tasks stays its own.
TEST_F(AttributionTest, OwnWaitBesideALightBeStaysItsOwn) {
  s_.interval_ns_ = 100'000'000;
  const Preemption self{.aggressor_id = "web", .count = 20, .wait_ns = 6'000'000};
  round({self}, 0, 20'000'000);
  EXPECT_DOUBLE_EQ(web().waits.self_ns, 6'000'000.0);
  EXPECT_DOUBLE_EQ(web().waits.displaced_ns, 0.0);
}

// colocation.sh busy (session 16): a hog rarely preempts anyone, the woken LS queues behind it.
// The host's few preemptions (colod's own event rounds among them) were all that was attributed,
// and "behind uncontrolled work" held the engage. Waits behind a runner count in the split, so
// the hog's share shows, and in the blame; alone (no preemptions) they are enough evidence only
// from 20 x min_blame_wait_us: a light BE's bursts put a woken request behind it now and then.
TEST_F(AttributionTest, WaitsBehindARunnerCountInTheSplitAndAsEvidenceFromAMinimum) {
  Preemption host{.aggressor_id = "", .count = 2, .wait_ns = 4'000'000};
  Preemption hog{.aggressor_id = "near", .behind_waits = 6, .behind_ns = 10'000'000};
  Preemption self{.aggressor_id = "web", .behind_waits = 1, .behind_ns = 1'000'000};
  std::vector<Finding> findings;
  round({host, hog, self}, 0, 0);
  const WaitSplit& w = web().waits;
  EXPECT_DOUBLE_EQ(w.be_ns, 10'000'000.0);
  EXPECT_DOUBLE_EQ(w.foreign_ns, 4'000'000.0);
  EXPECT_DOUBLE_EQ(w.self_ns, 1'000'000.0);
  EXPECT_FALSE(s_.behindUncontrolled(web())) << s_.waitBehind(web());
  EXPECT_TRUE(s_.rank(web(), false, findings).empty()) << "10 ms behind it: not yet evidence";
  EXPECT_EQ(web().blame.at("near").verdict, Verdict::Thin);
  round({host, hog}, 0, 0);
  hog.behind_ns = 15'000'000;
  round({hog}, 0, 0);
  const auto blamed = s_.rank(web(), false, findings);
  ASSERT_EQ(blamed.size(), 1U) << s_.verdictText(web().blame.at("near"));
  EXPECT_EQ(blamed[0].id, "near");
  EXPECT_EQ(blamed[0].preemptions, 0U);
  EXPECT_GT(blamed[0].wait_ns, 30'000'000U) << "the wait behind it is its wait";
}

// colocation.sh busy (session 19): the 20 ms of waits behind the hog its blame needed alone were
// most of colod's reaction, while the LS's tasks queued 1.4 deep. The minimum falls as the
// victim's queue deepens (this round, or the detection window's mean); a victim a light BE's
// bursts delay now and then (blame.sh light/cache: 0.04-0.23 tasks deep) needs the whole 20 ms.
TEST_F(AttributionTest, TheDeeperTheVictimQueuesTheLessWaitingBehindABeItTakes) {
  Preemption hog{.aggressor_id = "near", .behind_waits = 6, .behind_ns = 8'000'000};
  std::vector<Finding> findings;
  web().wait_ring.assign(5, 0.2);
  web().queue_depth = 0.2;
  EXPECT_DOUBLE_EQ(s_.behindMinimum(web()), 20'000'000.0);
  round({hog}, 0, 0);
  EXPECT_TRUE(s_.rank(web(), false, findings).empty()) << "0.2 tasks deep: 20 ms needed";
  EXPECT_EQ(web().blame.at("near").verdict, Verdict::Thin);
  const std::string thin = s_.verdictText(web().blame.at("near"));
  EXPECT_NE(thin.find("or 20000 µs waited behind it"), std::string::npos) << thin;

  web().wait_ring.assign(5, 0.5);
  EXPECT_DOUBLE_EQ(s_.behindMinimum(web()), 10'000'000.0);
  findings.clear();
  EXPECT_TRUE(s_.rank(web(), false, findings).empty()) << "0.5 deep: 10 ms, it has 8";

  // The busy phase's first event round: 1.4 deep now, the window still shallow. 8 ms behind the
  // hog is enough.
  web().wait_ring.assign(5, 0.1);
  web().queue_depth = 1.4;
  EXPECT_DOUBLE_EQ(s_.behindMinimum(web()), 20'000'000.0 * kBehindFloorShare);
  findings.clear();
  const auto blamed = s_.rank(web(), false, findings);
  ASSERT_EQ(blamed.size(), 1U) << s_.verdictText(web().blame.at("near"));
  EXPECT_EQ(blamed[0].id, "near");
  EXPECT_EQ(blamed[0].preemptions, 0U);
}

TEST_F(AttributionTest, MinimumEvidenceBeforeAnyoneIsBlamed) {
  std::vector<Finding> findings;
  round({{"near", 1, 15'000'000}}, 0, 10'000'000);
  EXPECT_TRUE(s_.rank(web(), false, findings).empty());
  ASSERT_FALSE(findings.empty());
  EXPECT_EQ(findings.back().rule, "not_enough_evidence");
  EXPECT_EQ(web().blame.at("near").verdict, Verdict::Thin);
  EXPECT_NE(s_.verdictText(web().blame.at("near")).find("not enough evidence"), std::string::npos);
  round({{"near", 3, 1'000'000}}, 0, 10'000'000);  // ~4 preemptions in the window now
  findings.clear();
  auto ranked = s_.rank(web(), false, findings);
  ASSERT_EQ(ranked.size(), 1u);
  EXPECT_EQ(ranked[0].id, "near");
  EXPECT_EQ(web().blame.at("near").verdict, Verdict::Blamed);
}

// Issue 19: once the wait is mostly behind the host, rank() returns before ranking; the verdict
// of the earlier ranking ("blamed") must not stay for `coloctl explain` to show.
TEST_F(AttributionTest, NoStaleVerdictWhenTheWaitIsBehindUncontrolledWork) {
  std::vector<Finding> findings;
  round({{"near", 10, 6'000'000}}, 0, 10'000'000);
  ASSERT_EQ(s_.rank(web(), false, findings).size(), 1u);
  ASSERT_EQ(web().blame.at("near").verdict, Verdict::Blamed);
  round({{"", 40, 200'000'000}}, 0, 10'000'000);
  findings.clear();
  EXPECT_TRUE(s_.rank(web(), false, findings).empty());
  ASSERT_FALSE(findings.empty());
  EXPECT_EQ(findings.back().rule, "uncontrolled_wait");
  EXPECT_EQ(web().blame.at("near").verdict, Verdict::OtherWait);
  EXPECT_NE(s_.verdictText(web().blame.at("near")).find("not ranked"), std::string::npos);
}

// blame.sh cache t2 (session 17): the antagonist had 71 % of the evidence, a light BE 28 %, and
// both were moved. A BE is blamed beside the top antagonist only with half of its score; two
// BE alike are blamed together.
TEST_F(AttributionTest, ABeFarBehindTheTopAntagonistIsNotBlamedBesideIt) {
  std::vector<Finding> findings;
  round({{"near", 10, 14'000'000}, {"far", 4, 5'000'000}}, 0, 0);
  auto ranked = s_.rank(web(), false, findings);
  ASSERT_EQ(ranked.size(), 1u) << s_.verdictText(web().blame.at("far"));
  EXPECT_EQ(ranked[0].id, "near");
  EXPECT_EQ(web().blame.at("far").verdict, Verdict::Secondary);
  EXPECT_NE(s_.verdictText(web().blame.at("far")).find("far behind the top antagonist: 26%"),
            std::string::npos)
      << s_.verdictText(web().blame.at("far"));
  round({{"near", 2, 1'000'000}, {"far", 8, 10'000'000}}, 0, 0);  // now alike
  findings.clear();
  ranked = s_.rank(web(), false, findings);
  ASSERT_EQ(ranked.size(), 2u);
  EXPECT_EQ(web().blame.at("far").verdict, Verdict::Blamed);
  EXPECT_EQ(web().blame.at("near").verdict, Verdict::Blamed);
}

TEST_F(AttributionTest, UselessRungUntilTheEvidenceChanges) {
  round({{"near", 10, 6'000'000}, {"", 10, 4'000'000}}, 0, 10'000'000);
  UselessRung u;
  u.antagonists = {"near"};
  u.foreign_share = s_.foreignShare(web());  // 0.4
  u.why = "it did not help";
  web().useless[Lever::Cpuset] = u;
  std::vector<Antagonist> same(1);
  same[0].id = "near";
  std::string why;
  EXPECT_TRUE(s_.judgedUseless(web(), Lever::Cpuset, same, &why));
  EXPECT_EQ(why, "it did not help");
  EXPECT_FALSE(s_.judgedUseless(web(), Lever::CpuQuota, same, nullptr)) << "another rung";
  std::vector<Antagonist> other(1);
  other[0].id = "far";
  EXPECT_FALSE(s_.judgedUseless(web(), Lever::Cpuset, other, nullptr)) << "another antagonist";
  // The foreign share falls below half of what it was: judged again.
  for (int i = 0; i < 60; ++i) {
    round({{"near", 10, 6'000'000}}, 0, 10'000'000);
  }
  EXPECT_LT(s_.foreignShare(web()), 0.2);
  EXPECT_FALSE(s_.judgedUseless(web(), Lever::Cpuset, same, nullptr));
}

}  // namespace
}  // namespace colod::policy
