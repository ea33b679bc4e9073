// SPDX-License-Identifier: Apache-2.0
// Engine API: restore, seed (journal reconcile), registry changes, apply failures, config
// reload, bounded state, describe, rate limit.
#include "colod/policy/engine.h"

#include <gtest/gtest.h>

#include "colod/policy/testing/synthetic.h"
#include "colod/testing/result_matchers.h"

namespace colod::policy {
namespace {

using testing::beInfo;
using testing::beSample;
using testing::lsInfo;
using testing::lsSample;
using testing::Sim;

std::vector<ContainerSample> hurt(const std::string& victim = "web",
                                  const std::string& hog = "hog") {
  return {lsSample(victim, 5000, {{hog, 50, 5'000'000}}), beSample(hog, 90'000'000)};
}
std::vector<ContainerSample> quiet() { return {lsSample("web", 200), beSample("hog", 90'000'000)}; }

// A BE sidecar in web's pod: the case where the cpu_shares rung acts (CFS is hierarchical, a
// container weight only moves CPU inside its pod).
ContainerInfo sidecarInfo(const std::string& id = "hog") {
  ContainerInfo c = beInfo(id);
  c.pod_uid = "uid-web";
  return c;
}

Sim engagedSim() {
  Sim sim{Config{}};
  sim.add(lsInfo("web"));
  sim.add(sidecarInfo());
  for (int i = 0; i < 3; ++i) {
    (void)sim.step(hurt());
  }
  return sim;
}

// Event rounds (the daemon's wakeup rounds, tens of ms apart) add data to a rung's verification,
// not time: a victim kept over threshold by its backlog for 15 event rounds right after the rung
// was applied still gets verify_intervals timer ticks before the rung is judged (they were
// counted as intervals: busy phases of the colocation benchmark undid a cpuset move 195 ms
// after applying it, and it was not retried).
TEST(EngineTest, EventRoundsDoNotShortenARungsVerification) {
  Sim sim = engagedSim();
  ASSERT_EQ(sim.engine().applied().size(), 1u);
  const std::size_t before = sim.decisions().size();
  for (int i = 0; i < 15; ++i) {
    (void)sim.eventStep(hurt(), 20'000'000);
  }
  EXPECT_EQ(sim.decisions().size(), before) << "the rung was judged within event rounds";
  EXPECT_EQ(sim.engine().applied().size(), 1u);
  int ticks = 0;
  while (sim.decisions().size() == before && ticks < 30) {
    (void)sim.step(hurt());
    ++ticks;
  }
  ASSERT_GT(sim.decisions().size(), before);
  EXPECT_EQ(sim.decisions()[before].kind, DecisionKind::Undo) << "still hurt: undone";
  const int v = Config{}.actions.verify_intervals;
  EXPECT_LE(ticks, v);
  EXPECT_GE(ticks, v - 3) << "judged early: the event rounds counted as ticks";
}

// colocation.sh busy: a BE turning busy puts the LS's tasks 1.4 deep in the run queue at once,
// waiting behind the hog (it rarely preempts). That round starts the episode alone, and the
// waits behind the hog are evidence from a lower minimum at that depth: the BE is restricted in
// the first event round, not an event round to a tick later.
TEST(EngineTest, ASevereRoundEngagesAlone) {
  auto busy = [](uint64_t behind_ns) {
    auto ls = lsSample("web", 800);  // p99 under the threshold: the wait signal's round
    ls.runq_wait_ns = 28'000'000;
    ls.oncpu_ns = 6'000'000;
    ls.preempted_by = {{.aggressor_id = "hog", .behind_waits = 10, .behind_ns = behind_ns}};
    return std::vector<ContainerSample>{ls, beSample("hog", 38'000'000)};
  };
  Sim sim{Config{}};
  sim.add(lsInfo("web"));
  sim.add(sidecarInfo());
  for (int i = 0; i < 5; ++i) {
    (void)sim.step(quiet());
  }
  (void)sim.eventStep(busy(9'000'000), 20'000'000);
  ASSERT_EQ(sim.decisions().size(), 1u) << "engaged on the first severe round";
  const Decision& d = sim.decisions().front();
  EXPECT_EQ(d.kind, DecisionKind::Engage);
  EXPECT_EQ(d.target_id, "hog");
  EXPECT_EQ(d.evidence.hits, 1);
  EXPECT_EQ(d.rule, "runq_wait_over_threshold");

  // The same round with the severe rule off waits for a second hit.
  Config off;
  off.detection.severe_wait_load = 0;
  Sim k{off};
  k.add(lsInfo("web"));
  k.add(sidecarInfo());
  for (int i = 0; i < 5; ++i) {
    (void)k.step(quiet());
  }
  (void)k.eventStep(busy(9'000'000), 20'000'000);
  EXPECT_TRUE(k.decisions().empty());
  (void)k.eventStep(busy(9'000'000), 20'000'000);
  ASSERT_EQ(k.decisions().size(), 1u);
  EXPECT_EQ(k.decisions().front().evidence.hits, 2);
}

// A hurt victim whose signal comes at the ticks (a p99 over its threshold, no deep queue) on a
// node where another LS's wait wakes colod four times a tick. In those wakeup rounds web's
// sample holds too few requests to judge (min_samples): counted as quiet intervals, they filled
// its K-of-N window between two ticks' hits, and web was never protected. A wakeup round
// records a hit; one that is not is no evidence of quiet, as for the quiet streak.
TEST(EngineTest, WakeupRoundsOfAnotherVictimDoNotHideAHurtOne) {
  Sim sim{Config{}};
  sim.add(lsInfo("web"));
  sim.add(lsInfo("api"));
  sim.add(beInfo("hog"));
  const auto hog_restricted = [&] { return !sim.engine().applied().empty(); };
  int engaged_tick = 0;
  for (int tick = 1; tick <= 40 && engaged_tick == 0; ++tick) {
    const bool hurt = tick >= 5;
    (void)sim.step({lsSample("web", hurt ? 5000 : 200,
                             hurt ? std::vector<Preemption>{{"hog", 40, 12'000'000}}
                                  : std::vector<Preemption>{}),
                    lsSample("api", 200), beSample("hog", 90'000'000)});
    if (hog_restricted()) {
      engaged_tick = tick;
      break;
    }
    for (int e = 0; e < 4; ++e) {
      // 5 ms each: two of web's requests, api's quiet ones, the hog running.
      auto web = lsSample("web", hurt ? 5000 : 200);
      web.runq_count = 2;
      web.oncpu_ns = 1'500'000;
      auto api = lsSample("api", 200);
      api.oncpu_ns = 1'500'000;
      (void)sim.eventStep({web, api, beSample("hog", 4'500'000)}, 5'000'000);
    }
  }
  ASSERT_NE(engaged_tick, 0) << "web, hurt at every tick from tick 5, was never protected";
  EXPECT_LE(engaged_tick, 7) << "K of N ticks' hits: tick 6, a round of slack";
  EXPECT_EQ(sim.decisions().front().target_id, "hog");
}

TEST(EngineTest, CreateRejectsInvalidConfig) {
  Config c;
  c.floors.be_min_cpu_shares = 0;
  EXPECT_ERR(Engine::create(c), EINVAL, "be_min_cpu_shares");
}

TEST(EngineTest, RestoreAllReturnsOriginals) {
  Sim sim = engagedSim();
  ASSERT_EQ(sim.engine().applied().size(), 1u);
  auto restore = sim.engine().restoreAll(sim.now());
  ASSERT_EQ(restore.size(), 1u);
  EXPECT_EQ(restore[0].kind, DecisionKind::Restore);
  EXPECT_EQ(restore[0].target_id, "hog");
  EXPECT_EQ(restore[0].new_values.cpu_shares, 1024u);
  EXPECT_EQ(restore[0].rule, "restore_all");
  EXPECT_TRUE(sim.engine().applied().empty());
  EXPECT_TRUE(sim.engine().restoreAll(sim.now()).empty());
  EXPECT_EQ(sim.engine().stats().active_episodes, 0u);
}

TEST(EngineTest, SeedAppliedThenRelaxesToSeededOriginal) {
  Sim sim{Config{}};
  sim.add(lsInfo("web"));
  ContainerInfo hog = beInfo("hog");
  hog.resources.cpuset_cpus = "1";  // the registry sees the applied value after a crash
  sim.add(hog);
  AppliedAction a;
  a.target_id = "hog";
  a.victim_id = "web";
  a.lever = Lever::Cpuset;
  a.applied_values.cpuset_cpus = "1";
  a.original_values.cpuset_cpus = "0-1";
  ASSERT_OK(sim.engine().seedApplied(std::vector<AppliedAction>{a}, 0));
  EXPECT_EQ(sim.engine().applied(), (std::vector<AppliedAction>{[&] {
              AppliedAction b = a;
              b.rung = 1;  // its index in the default ladder
              return b;
            }()}));
  std::optional<Decision> relax;
  for (int i = 0; i < 30 && !relax; ++i) {
    for (const auto& d : sim.step(quiet()).decisions) {
      relax = d;
    }
  }
  ASSERT_TRUE(relax.has_value());
  EXPECT_EQ(relax->kind, DecisionKind::Relax);
  EXPECT_EQ(relax->new_values.cpuset_cpus, "0-1");
  EXPECT_TRUE(sim.engine().applied().empty());
}

TEST(EngineTest, SeedRejectsWhatColodMustNotTouch) {
  Sim sim{Config{}};
  sim.add(lsInfo("web"));
  sim.add(lsInfo("other-ls"));
  sim.add(testing::exclusiveInfo("pinned", {1}));
  AppliedAction a;
  a.target_id = "other-ls";
  a.victim_id = "web";
  EXPECT_ERR(sim.engine().seedApplied(std::vector<AppliedAction>{a}, 0), ENOTSUP,
             "not a BE container");
  a.target_id = "pinned";
  EXPECT_ERR(sim.engine().seedApplied(std::vector<AppliedAction>{a}, 0), ENOTSUP,
             "not a BE container");
  a.target_id = "ghost";
  EXPECT_ERR(sim.engine().seedApplied(std::vector<AppliedAction>{a}, 0), EINVAL,
             "unknown target container ghost");
  EXPECT_TRUE(sim.engine().applied().empty());
}

TEST(EngineTest, VictimRemovedRestoresItsRestrictions) {
  Sim sim = engagedSim();
  sim.engine().removeContainer("web");
  auto r = sim.step({beSample("hog", 90'000'000)});
  ASSERT_EQ(r.decisions.size(), 1u);
  EXPECT_EQ(r.decisions[0].kind, DecisionKind::Restore);
  EXPECT_EQ(r.decisions[0].rule, "victim_removed");
  EXPECT_EQ(r.decisions[0].new_values.cpu_shares, 1024u);
  EXPECT_TRUE(sim.engine().applied().empty());
  EXPECT_EQ(sim.engine().stats().active_episodes, 0u);
}

// The evidence a victim gathered while hurt does not outlive it: once it is quiet, what has
// decayed away is erased even though it is never hurt again (it was kept until then, one entry
// per BE that ran, for every LS that had ever been hurt).
TEST(EngineTest, AQuietVictimsEvidenceIsForgotten) {
  Sim sim = engagedSim();
  ASSERT_FALSE(ASSERT_OK(sim.engine().describe("hog")).blame.empty());
  const int window = Config{}.actions.blame_window_intervals;
  int rounds = 0;
  for (; rounds < 40 * window; ++rounds) {
    (void)sim.step(quiet());
    if (ASSERT_OK(sim.engine().describe("hog")).blame.empty()) {
      break;
    }
  }
  EXPECT_TRUE(sim.engine().applied().empty()) << "not relaxed";
  EXPECT_LE(rounds, 25 * window) << "web's evidence against hog outlived it";
}

// A snapshot that says the absent containers were quiet (absent_quiet, the daemon's way) is
// the same to the engine as one with an all-zero sample for each of them, and a container
// named unmeasured the same as one left out of the latter. Both engines go through a hurt
// victim, its restriction, a BE admitted at its creation (placed: not measured until the daemon
// registers it), the BE gone quiet and absent, the victim quiet and mostly absent, and the
// relaxation (which needs the victim's quiet intervals: without absent_quiet, none).
TEST(EngineTest, AbsentQuietIsTheSameAsAnAllZeroSampleForEach) {
  auto make = [] {
    auto created = Engine::create(Config{});
    Engine e = std::move(created).value();
    e.upsertContainer(lsInfo("web"));
    e.upsertContainer(sidecarInfo());
    e.upsertContainer(beInfo("batch"));
    e.upsertContainer(beInfo("nocgroup"));
    return e;
  };
  Engine explicit_zero = make();
  Engine absent = make();
  int64_t now = 0;
  std::size_t decided = 0;
  // "arriving" is admitted at its creation while web is hurt, and registered 7 rounds later:
  // until then the daemon does not measure it (not in its registry), in both forms.
  std::vector<std::string> ids{"web", "hog", "batch"};
  for (int round = 0; round < 200; ++round) {
    now += 100'000'000;
    if (round == 3) {
      const RoundResult ra = explicit_zero.admit(beInfo("arriving"), now);
      const RoundResult rb = absent.admit(beInfo("arriving"), now);
      ASSERT_EQ(ra.decisions, rb.decisions);
      decided += ra.decisions.size();
    }
    if (round == 10) {
      explicit_zero.upsertContainer(beInfo("arriving"));
      absent.upsertContainer(beInfo("arriving"));
      ids.emplace_back("arriving");
    }
    // After the hurt, web wakes only now and then: its quiet intervals are mostly absent ones.
    std::vector<ContainerSample> active = hurt();
    if (round >= 5) {
      active.clear();
      if (round % 3 == 0) {
        active.push_back(lsSample("web", 200));
      }
    }
    if (round % 7 == 0) {
      active.push_back(beSample("batch", 30'000'000));
    }
    Snapshot a;
    a.now_ns = now;
    a.interval_ns = 100'000'000;
    a.node_cpus = 2;
    Snapshot b = a;
    a.containers = active;
    for (const std::string& id : ids) {
      if (std::none_of(active.begin(), active.end(),
                       [&](const ContainerSample& c) { return c.id == id; })) {
        ContainerSample zero;
        zero.id = id;
        a.containers.push_back(zero);
      }
    }
    b.containers = active;
    b.absent_quiet = true;
    b.unmeasured = {"nocgroup"};
    const RoundResult ra = explicit_zero.evaluate(a);
    const RoundResult rb = absent.evaluate(b);
    ASSERT_EQ(ra.decisions, rb.decisions) << "round " << round;
    ASSERT_EQ(ra.findings.size(), rb.findings.size()) << "round " << round;
    for (std::size_t i = 0; i < ra.findings.size(); ++i) {
      EXPECT_EQ(ra.findings[i].rule, rb.findings[i].rule) << "round " << round;
      EXPECT_EQ(ra.findings[i].container_id, rb.findings[i].container_id) << "round " << round;
    }
    decided += ra.decisions.size();
  }
  EXPECT_GE(decided, 2u) << "the scenario engaged and relaxed";
  EXPECT_TRUE(absent.applied().empty()) << "relaxed with the victim quiet";
  for (const char* id : {"web", "hog", "batch", "nocgroup", "arriving"}) {
    const ContainerView va = ASSERT_OK(explicit_zero.describe(id));
    const ContainerView vb = ASSERT_OK(absent.describe(id));
    EXPECT_EQ(va.baseline_p99_us, vb.baseline_p99_us) << id;
    EXPECT_EQ(va.hits_in_window, vb.hits_in_window) << id;
    EXPECT_EQ(va.victim, vb.victim) << id;
    EXPECT_EQ(va.last_explanation, vb.last_explanation) << id;
    EXPECT_EQ(va.blame.size(), vb.blame.size()) << id;
  }
}

TEST(EngineTest, TargetRemovedIsForgottenWithoutDecision) {
  Sim sim = engagedSim();
  sim.engine().removeContainer("hog");
  EXPECT_TRUE(sim.engine().applied().empty());
  auto r = sim.step({lsSample("web", 200)});
  EXPECT_TRUE(r.decisions.empty());
  EXPECT_TRUE(sim.engine().restoreAll(0).empty());
}

TEST(EngineTest, ApplyFailureForgetsTheRestriction) {
  Sim sim = engagedSim();
  ASSERT_EQ(sim.decisions().size(), 1u);
  sim.engine().reportApplyFailure(sim.decisions()[0]);
  EXPECT_TRUE(sim.engine().applied().empty());
  EXPECT_TRUE(sim.engine().restoreAll(0).empty());
}

TEST(EngineTest, InvalidNewConfigKeepsTheOld) {
  Sim sim{Config{}};
  Config bad;
  bad.actions.cpu_ladder.clear();
  EXPECT_ERR(sim.engine().setConfig(bad), EINVAL, "cpu_ladder");
  EXPECT_EQ(sim.engine().config(), Config{});
  Config good;
  good.dry_run = true;
  ASSERT_OK(sim.engine().setConfig(good));
  EXPECT_TRUE(sim.engine().config().dry_run);
}

TEST(EngineTest, StateIsBoundedByTheRegistry) {
  Sim sim{Config{}};
  for (int round = 0; round < 50; ++round) {
    std::vector<ContainerSample> samples;
    for (int i = 0; i < 20; ++i) {
      const std::string id = "c" + std::to_string(round * 20 + i);
      sim.add(i % 2 == 0 ? lsInfo(id) : beInfo(id));
      samples.push_back(i % 2 == 0 ? lsSample(id, 300) : beSample(id, 1'000'000));
    }
    samples.push_back(beSample("not-registered", 1));
    (void)sim.step(samples);
    for (int i = 0; i < 20; ++i) {
      sim.engine().removeContainer("c" + std::to_string(round * 20 + i));
    }
  }
  EXPECT_EQ(sim.engine().stats().tracked_containers, 20u);  // as of the last round
  (void)sim.step({});
  EXPECT_EQ(sim.engine().stats().tracked_containers, 0u);
  EXPECT_EQ(sim.engine().stats().unknown_samples, 50u);
}

TEST(EngineTest, DescribeExplains) {
  Sim sim = engagedSim();
  auto web = ASSERT_OK(sim.engine().describe("web"));
  EXPECT_TRUE(web.victim);
  EXPECT_EQ(web.tier, Tier::Ls);
  EXPECT_EQ(web.tier_source, "cgroup parent (burstable)");
  EXPECT_EQ(web.hits_in_window, 3);
  auto hog = ASSERT_OK(sim.engine().describe("hog"));
  ASSERT_EQ(hog.restrictions.size(), 1u);
  EXPECT_EQ(hog.restrictions[0].victim_id, "web");
  EXPECT_NE(hog.last_explanation.find("cpu.shares 1024 -> cpu.shares 2"), std::string::npos);
  EXPECT_ERR(sim.engine().describe("nope"), ENOENT, "no container nope");
}

// The engine keeps a container's parsed cpuset once (Tracked::cpus); describe() shows it as
// given, from the parsed list or from the cpuset string.
TEST(EngineTest, DescribeShowsTheCpusetGivenEitherWay) {
  Sim sim{Config{}, 4};
  ContainerInfo parsed = lsInfo("parsed", 4);
  parsed.cpuset = {3, 1};
  sim.add(parsed);
  ContainerInfo text = beInfo("text", 4);
  text.cpuset.clear();
  text.resources.cpuset_cpus = "0-2";
  sim.add(text);
  EXPECT_EQ(ASSERT_OK(sim.engine().describe("parsed")).info.cpuset, (std::vector<int>{1, 3}));
  EXPECT_EQ(ASSERT_OK(sim.engine().describe("text")).info.cpuset, (std::vector<int>{0, 1, 2}));
  // On every CPU of the node: kept as "all" once the node's CPUs are known (from the first
  // round, or told before it), shown as the list.
  sim.add(beInfo("everywhere", 4));
  (void)sim.step({});
  sim.add(beInfo("later", 4));
  Sim told{Config{}, 4};
  told.engine().setNodeCpus({3, 2, 1, 0});
  told.add(beInfo("told", 4));
  EXPECT_EQ(ASSERT_OK(told.engine().describe("told")).info.cpuset, (std::vector<int>{0, 1, 2, 3}));
  for (const char* id : {"everywhere", "later"}) {
    EXPECT_EQ(ASSERT_OK(sim.engine().describe(id)).info.cpuset, (std::vector<int>{0, 1, 2, 3}))
        << id;
  }
}

TEST(EngineTest, UnknownTierIsReportedNotGuessed) {
  Sim sim{Config{}};
  ContainerInfo c = beInfo("odd");
  c.cgroup_parent = "/system.slice/odd";
  c.pod_annotations["colod.io/tier"] = "gold";
  sim.add(c);
  auto r = sim.step({beSample("odd", 1)});
  ASSERT_GE(r.findings.size(), 2u);
  EXPECT_EQ(r.findings[0].rule, "unknown_tier");
  EXPECT_NE(r.findings[0].message.find("\"gold\" of colod.io/tier (pod annotation)"),
            std::string::npos);
  EXPECT_EQ(r.findings[1].rule, "unclassified");
  EXPECT_EQ(ASSERT_OK(sim.engine().describe("odd")).tier, Tier::Unknown);
}

TEST(EngineTest, PinnedVictimSplitsBeAwayFromItsCpus) {
  Config c;
  c.actions.cpu_ladder = {Lever::Cpuset};
  Sim sim{c, 4};
  ContainerInfo web = lsInfo("web", 4);
  web.resources.cpuset_cpus = "0-1";
  sim.add(web);
  sim.add(beInfo("hog", 4));
  for (int i = 0; i < 3; ++i) {
    (void)sim.step(hurt());
  }
  ASSERT_EQ(sim.decisions().size(), 1u);
  EXPECT_EQ(sim.decisions()[0].new_values.cpuset_cpus, "2-3");
  EXPECT_EQ(sim.decisions()[0].original_values.cpuset_cpus, "0-3");
}

TEST(EngineTest, RateLimitDefersChanges) {
  Config c;
  c.actions.max_changes_per_round = 1;
  Sim sim{c};
  sim.add(lsInfo("web"));
  sim.add(lsInfo("api"));
  sim.add(beInfo("hog"));
  sim.add(beInfo("hog2"));
  auto samples = [] {
    return std::vector<ContainerSample>{lsSample("web", 5000, {{"hog", 50, 5'000'000}}),
                                        lsSample("api", 5000, {{"hog2", 50, 5'000'000}}),
                                        beSample("hog", 90'000'000), beSample("hog2", 90'000'000)};
  };
  // Both become victims in round K; one change per round.
  for (int i = 0; i < Config{}.detection.hit_intervals; ++i) {
    auto r = sim.step(samples());
    EXPECT_LE(r.decisions.size(), 1u);
  }
  EXPECT_EQ(sim.decisions().size(), 1u);
  auto r = sim.step(samples());
  EXPECT_EQ(r.decisions.size(), 1u);
  EXPECT_GE(sim.engine().stats().rate_limited, 1u);
}

TEST(EngineTest, SharedAntagonistIsReleasedOnlyWhenNoVictimNeedsIt) {
  Sim sim{Config{}};
  sim.add(lsInfo("web"));
  sim.add(lsInfo("api"));
  sim.add(beInfo("hog"));
  auto both = [] {
    return std::vector<ContainerSample>{lsSample("web", 5000, {{"hog", 50, 5'000'000}}),
                                        lsSample("api", 5000, {{"hog", 50, 5'000'000}}),
                                        beSample("hog", 90'000'000)};
  };
  for (int i = 0; i < 3; ++i) {
    (void)sim.step(both());
  }
  ASSERT_EQ(sim.decisions().size(), 1u);  // one change, shared by two victims
  EXPECT_EQ(sim.engine().applied().size(), 2u);
  // web recovers, api does not: hog stays restricted for api.
  for (int i = 0; i < 4; ++i) {
    (void)sim.step({lsSample("web", 200), lsSample("api", 200), beSample("hog", 90'000'000)});
  }
  for (int i = 0; i < 20; ++i) {
    (void)sim.step({lsSample("web", 200), lsSample("api", 5000, {{"hog", 50, 5'000'000}}),
                    beSample("hog", 90'000'000)});
  }
  bool relaxed_hog_shares = false;
  for (const auto& d : sim.decisions()) {
    if (d.kind == DecisionKind::Relax && d.lever == Lever::CpuShares) {
      relaxed_hog_shares = true;
    }
  }
  EXPECT_FALSE(relaxed_hog_shares);
}

}  // namespace
}  // namespace colod::policy

namespace colod::policy {
namespace {

TEST(EngineTest, StaleRegistryDoesNotBecomeTheOriginal) {
  Sim sim{Config{}};
  sim.add(lsInfo("web"));
  sim.add(sidecarInfo());
  auto hurtRounds = [&](int n) {
    for (int i = 0; i < n; ++i) {
      (void)sim.step(
          {lsSample("web", 5000, {{"hog", 50, 5'000'000}}), beSample("hog", 90'000'000)});
    }
  };
  hurtRounds(3);
  ASSERT_EQ(sim.decisions().size(), 1u);
  // The daemon applied shares=2 and refreshed the registry with it.
  ContainerInfo applied = sidecarInfo();
  applied.resources.cpu_shares = 2;
  sim.add(applied);
  // Quiet until relaxed; the registry is not refreshed (still says 2).
  for (int i = 0; i < 20 && sim.decisions().size() < 2; ++i) {
    (void)sim.step({lsSample("web", 200), beSample("hog", 90'000'000)});
  }
  ASSERT_EQ(sim.decisions().size(), 2u);
  EXPECT_EQ(sim.decisions()[1].kind, DecisionKind::Relax);
  // Hurt again: the new restriction must remember 1024, not the stale 2.
  hurtRounds(40);
  bool saw = false;
  for (const auto& d : sim.decisions()) {
    if (d.lever == Lever::CpuShares) {
      EXPECT_EQ(d.original_values.cpu_shares, 1024u) << formatDecision(d);
      saw = true;
    }
  }
  EXPECT_TRUE(saw);
}

TEST(EngineTest, UnknownSharesAreNotLowered) {
  Config c;
  c.actions.cpu_ladder = {Lever::CpuShares};
  Sim sim{c};
  sim.add(lsInfo("web"));
  ContainerInfo hog = sidecarInfo();
  hog.resources.cpu_shares.reset();
  sim.add(hog);
  std::vector<Finding> findings;
  for (int i = 0; i < 5; ++i) {
    auto r = sim.step({lsSample("web", 5000, {{"hog", 50, 5'000'000}}), beSample("hog", 1)});
    findings.insert(findings.end(), r.findings.begin(), r.findings.end());
  }
  EXPECT_TRUE(sim.decisions().empty());
  ASSERT_FALSE(findings.empty());
  EXPECT_EQ(findings[0].rule, "at_floor");
}

}  // namespace
}  // namespace colod::policy
