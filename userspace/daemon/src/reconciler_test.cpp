// SPDX-License-Identifier: Apache-2.0
// The reconciler's bookkeeping from data: overlays, the runtime's reports, send results and time
// are all inputs, so every fault of issue #14 is a table of calls here.
#include "colod/daemon/reconciler.h"

#include <gtest/gtest.h>

#include <limits>

namespace colod::daemon {
namespace {

constexpr int64_t kMs = 1'000'000;

policy::Resources quota(int64_t q, uint64_t period = 100000) {
  policy::Resources r;
  r.cpu_quota = q;
  r.cpu_period = period;
  return r;
}

policy::Resources spec150() {
  policy::Resources r = quota(150000);
  r.cpu_shares = 2;
  r.cpuset_cpus = "0-1";
  return r;
}

ReconcilerState makeState() { return ReconcilerState({.all_cpus = "0-1", .max_batch = 4}); }

TEST(Reconciler, AnOverlayIsPlannedAndConvergesWhenApplied) {
  auto st = makeState();
  ASSERT_TRUE(st.setOverlay("be", "ns/p/be", quota(50000), spec150(), "rung 3", 0));
  auto plan = st.plan(0);
  ASSERT_EQ(plan.size(), 1U);
  EXPECT_EQ(plan[0].values.cpu_quota, 50000);
  EXPECT_EQ(plan[0].values.cpu_period, 100000U) << "the period travels with its quota";
  st.onSent(plan, SendOutcome::Applied, "", 1 * kMs);
  EXPECT_TRUE(st.plan(2 * kMs).empty());
  const auto* e = st.find("be");
  ASSERT_NE(e, nullptr);
  EXPECT_FALSE(e->pending);
  EXPECT_EQ(e->base.cpu_quota, 150000);
  EXPECT_EQ(st.stats(2 * kMs).pending, 0U);
}

TEST(Reconciler, ReleaseReturnsToTheBaseAndForgetsTheContainer) {
  auto st = makeState();
  ASSERT_TRUE(st.setOverlay("be", "", quota(50000), spec150(), "", 0));
  st.onSent(st.plan(0), SendOutcome::Applied, "", 0);
  ASSERT_TRUE(st.setOverlay("be", "", {}, quota(50000), "", kMs));
  auto plan = st.plan(kMs);
  ASSERT_EQ(plan.size(), 1U);
  EXPECT_EQ(plan[0].values.cpu_quota, 150000);
  st.onSent(plan, SendOutcome::Applied, "", 2 * kMs);
  EXPECT_EQ(st.find("be"), nullptr) << "released and confirmed: nothing left to track";
}

// A vm e2e run in CI: an admission placement's update was on its way (the actuator sends
// outside its lock) when the engine released the placement. The entry's spec still held the
// pre-send value, so the release looked converged and the entry was dropped; the update then
// landed and the BE stayed restricted with nothing in the journal. An entry with an update in
// flight is kept, and the release is sent once the in-flight result is known.
TEST(Reconciler, AReleaseWhileAnUpdateIsInFlightIsNotForgotten) {
  auto st = makeState();
  policy::Resources one;
  one.cpuset_cpus = "1";
  ASSERT_TRUE(st.setOverlay("be", "ns/p/be", one, spec150(), "admission", 0));
  const auto plan = st.plan(0);
  ASSERT_EQ(plan.size(), 1U);
  st.beginSend(plan);
  // Released while the call is out.
  ASSERT_TRUE(st.setOverlay("be", "", {}, spec150(), "released", kMs));
  const auto* e = st.find("be");
  ASSERT_NE(e, nullptr) << "dropped while its update was in flight";
  st.onSent(plan, SendOutcome::Applied, "", 2 * kMs);
  const auto release = st.plan(2 * kMs);
  ASSERT_EQ(release.size(), 1U) << "the landed update is not taken back";
  EXPECT_EQ(release[0].values.cpuset_cpus, "0-1");
  st.beginSend(release);
  st.onSent(release, SendOutcome::Applied, "", 3 * kMs);
  EXPECT_EQ(st.find("be"), nullptr) << "released and confirmed: nothing left to track";
}

// The same with a call whose outcome is unknown: the runtime may hold the value, so the release
// goes out (the resync would also tell).
TEST(Reconciler, AReleaseWhileAnUpdateIsLostIsStillSent) {
  auto st = makeState();
  policy::Resources one;
  one.cpuset_cpus = "1";
  ASSERT_TRUE(st.setOverlay("be", "", one, spec150(), "", 0));
  const auto plan = st.plan(0);
  st.beginSend(plan);
  ASSERT_TRUE(st.setOverlay("be", "", {}, spec150(), "released", kMs));
  st.onSent(plan, SendOutcome::Unknown, "reset", 2 * kMs);
  // The runtime reports what it holds: colod's value, which it must not take as the base.
  policy::Resources now = spec150();
  now.cpuset_cpus = "1";
  st.observeSpec("be", now, 3 * kMs);
  const auto* e = st.find("be");
  ASSERT_NE(e, nullptr);
  EXPECT_EQ(e->base.cpuset_cpus, "0-1");
  EXPECT_TRUE(e->pending);
}

TEST(Reconciler, AKubeletResizeBecomesTheBaseAndTheOverlayIsKeptInTheReply) {
  auto st = makeState();
  ASSERT_TRUE(st.setOverlay("be", "", quota(42187), spec150(), "", 0));
  st.onSent(st.plan(0), SendOutcome::Applied, "", 0);
  // The kubelet asks for 130000: colod answers with its overlay, the base is the kubelet's.
  auto adj = st.adjustUpdate("be", quota(130000), kMs);
  EXPECT_EQ(adj.cpu_quota, 42187);
  EXPECT_EQ(st.find("be")->base.cpu_quota, 130000);
  // PostUpdateContainer reports the merged result: colod's value, recognised as colod's own.
  st.observeSpec("be", quota(42187), 2 * kMs);
  EXPECT_EQ(st.find("be")->base.cpu_quota, 130000);
  EXPECT_TRUE(st.plan(2 * kMs).empty());
  // The LS leaves: the release goes to the kubelet's value, never to the older 150000.
  ASSERT_TRUE(st.setOverlay("be", "", {}, quota(42187), "", 3 * kMs));
  auto plan = st.plan(3 * kMs);
  ASSERT_EQ(plan.size(), 1U);
  EXPECT_EQ(plan[0].values.cpu_quota, 130000);
  EXPECT_FALSE(st.takeNotes().empty());
}

// colod only restricts: a kubelet resize below colod's cap (or a memory limit below colod's) stands
// -- the reply leaves the field to the kubelet and nothing is sent to loosen it -- and the cap is
// back in force once the kubelet loosens again.
TEST(Reconciler, AKubeletLimitTighterThanTheOverlayStands) {
  auto st = makeState();
  policy::Resources overlay = quota(42187);
  overlay.cpuset_cpus = "1";
  overlay.memory_limit = int64_t{1} << 30;
  policy::Resources spec = spec150();
  spec.memory_limit = int64_t{4} << 30;
  ASSERT_TRUE(st.setOverlay("be", "", overlay, spec, "", 0));
  st.onSent(st.plan(0), SendOutcome::Applied, "", 0);
  policy::Resources tight = quota(20000);
  tight.memory_limit = int64_t{512} << 20;
  auto adj = st.adjustUpdate("be", tight, kMs);
  EXPECT_FALSE(adj.cpu_quota.has_value()) << "colod's looser quota would overwrite the kubelet's";
  EXPECT_FALSE(adj.cpu_period.has_value());
  EXPECT_FALSE(adj.memory_limit.has_value());
  EXPECT_EQ(adj.cpuset_cpus, "1") << "the placement is still colod's";
  EXPECT_EQ(st.find("be")->base.cpu_quota, 20000);
  policy::Resources applied = tight;
  applied.cpu_shares = 2;
  applied.cpuset_cpus = "1";
  st.observeSpec("be", applied, 2 * kMs);
  EXPECT_TRUE(st.plan(2 * kMs).empty()) << "nothing is sent to loosen the kubelet's limits";
  // The kubelet loosens again: colod's cap rides in the reply and is what the runtime must hold.
  adj = st.adjustUpdate("be", quota(130000), 3 * kMs);
  EXPECT_EQ(adj.cpu_quota, 42187);
  st.observeSpec("be", quota(130000), 4 * kMs);
  auto plan = st.plan(4 * kMs);
  ASSERT_EQ(plan.size(), 1U);
  EXPECT_EQ(plan[0].values.cpu_quota, 42187);
}

TEST(Reconciler, FieldsColodDoesNotOverlayPassUntouched) {
  auto st = makeState();
  policy::Resources shares;
  shares.cpu_shares = 2;
  ASSERT_TRUE(st.setOverlay("be", "", shares, spec150(), "", 0));
  policy::Resources mem;
  mem.memory_limit = 1 << 30;
  EXPECT_EQ(st.adjustUpdate("be", mem, kMs), policy::Resources{});
  EXPECT_EQ(st.adjustUpdate("other", quota(1), kMs), policy::Resources{});
}

TEST(Reconciler, AChangeMadeWhileColodWasAwayIsTakenAsTheNewBase) {
  auto st = makeState();
  ASSERT_TRUE(st.setOverlay("be", "", quota(50000), spec150(), "", 0));
  st.onSent(st.plan(0), SendOutcome::Applied, "", 0);
  // A resync shows 90000: neither the base nor a value colod set.
  st.observeSpec("be", quota(90000), kMs);
  EXPECT_EQ(st.find("be")->base.cpu_quota, 90000);
  auto plan = st.plan(kMs);
  ASSERT_EQ(plan.size(), 1U);
  EXPECT_EQ(plan[0].values.cpu_quota, 50000) << "the overlay is re-applied on top";
  EXPECT_EQ(st.stats(kMs).external_changes, 1U);
}

TEST(Reconciler, RefusalsBackOffAndAreRetriedForever) {
  auto st = makeState();
  ASSERT_TRUE(st.setOverlay("be", "", quota(50000), spec150(), "", 0));
  int64_t now = 0;
  int64_t last_gap = 0;
  for (int i = 0; i < 20; ++i) {
    auto plan = st.plan(now);
    ASSERT_EQ(plan.size(), 1U) << "attempt " << i;
    st.onSent(plan, SendOutcome::Refused, "NRI update of some containers failed", now);
    const int64_t due = st.nextDueNs();
    EXPECT_GE(due - now, last_gap);
    EXPECT_LE(due - now, 5000 * kMs);
    last_gap = due - now;
    EXPECT_TRUE(st.plan(due - 1).empty());
    now = due;
  }
  EXPECT_EQ(last_gap, 5000 * kMs) << "capped";
  EXPECT_EQ(st.find("be")->attempts, 20U);
  EXPECT_EQ(st.stats(now).failures.at("refused"), 20U);
  st.onSent(st.plan(now), SendOutcome::Applied, "", now);
  EXPECT_FALSE(st.find("be")->pending);
  EXPECT_EQ(st.find("be")->attempts, 0U);
}

TEST(Reconciler, AnUnknownOutcomeIsReverifiedFromTheResync) {
  auto st = makeState();
  ASSERT_TRUE(st.setOverlay("be", "", quota(50000), spec150(), "", 0));
  st.onSent(st.plan(0), SendOutcome::Unknown, "connection reset", 0);
  // The reply was lost but the runtime applied it: the resync shows colod's value.
  st.observeSpec("be", quota(50000), kMs);
  EXPECT_FALSE(st.find("be")->pending);
  EXPECT_EQ(st.find("be")->base.cpu_quota, 150000) << "colod's value is not a new base";
}

TEST(Reconciler, NotConnectedWaitsWithoutCountingAttempts) {
  auto st = makeState();
  ASSERT_TRUE(st.setOverlay("be", "", quota(50000), spec150(), "", 0));
  st.onSent(st.plan(0), SendOutcome::NotConnected, "", 0);
  EXPECT_EQ(st.find("be")->attempts, 0U);
  EXPECT_TRUE(st.find("be")->pending);
  st.resetBackoff();
  EXPECT_EQ(st.plan(0).size(), 1U) << "a new session sends at once";
}

TEST(Reconciler, AFailedBatchIsRetriedOneContainerAtATime) {
  auto st = makeState();
  for (const char* id : {"a", "b", "c"}) {
    ASSERT_TRUE(st.setOverlay(id, "", quota(50000), spec150(), "", 0));
  }
  auto plan = st.plan(0);
  ASSERT_EQ(plan.size(), 3U);
  st.onSent(plan, SendOutcome::Refused, "x", 0);
  const int64_t later = st.nextDueNs();
  auto first = st.plan(later);
  ASSERT_EQ(first.size(), 1U);
  st.onSent(first, SendOutcome::Applied, "", later);
  EXPECT_EQ(st.plan(later).size(), 1U);
}

TEST(Reconciler, ABatchIsBoundedAndOldestFirst) {
  auto st = makeState();
  for (int i = 0; i < 6; ++i) {
    ASSERT_TRUE(
        st.setOverlay("c" + std::to_string(5 - i), "", quota(50000), spec150(), "", i * kMs));
  }
  auto plan = st.plan(10 * kMs);
  ASSERT_EQ(plan.size(), 4U);
  EXPECT_EQ(plan[0].id, "c5");
  EXPECT_EQ(plan[3].id, "c2");
}

TEST(Reconciler, AnUnsetBaseIsReleasedToItsExplicitMeaning) {
  auto st = makeState();
  policy::Resources spec;  // no quota, no cpuset
  policy::Resources ov = quota(20000);
  ov.cpuset_cpus = "1";
  ASSERT_TRUE(st.setOverlay("be", "", ov, spec, "", 0));
  st.onSent(st.plan(0), SendOutcome::Applied, "", 0);
  ASSERT_TRUE(st.setOverlay("be", "", {}, ov, "", kMs));
  auto plan = st.plan(kMs);
  ASSERT_EQ(plan.size(), 1U);
  EXPECT_EQ(plan[0].values.cpu_quota, -1);
  EXPECT_EQ(plan[0].values.cpuset_cpus, "0-1");
  st.onSent(plan, SendOutcome::Applied, "", kMs);
  EXPECT_EQ(st.find("be"), nullptr);
}

TEST(Reconciler, AContainerGoneMidUpdateIsDropped) {
  auto st = makeState();
  ASSERT_TRUE(st.setOverlay("be", "", quota(50000), spec150(), "", 0));
  auto plan = st.plan(0);
  st.containerGone("be");
  st.onSent(plan, SendOutcome::Refused, "gone", 0);
  EXPECT_EQ(st.find("be"), nullptr);
  EXPECT_EQ(st.stats(0).pending, 0U);
  EXPECT_EQ(st.takeNotes().size(), 1U);
}

TEST(Reconciler, JournalRestoreReleasesOnceTheRuntimeSaysWhatIsThere) {
  ReconcileEntry e;
  e.id = "be";
  e.name = "ns/p/be";
  e.base = quota(150000);
  e.overlay = quota(56250);
  auto st = makeState();
  st.load({e}, /*keep_overlay=*/false);
  EXPECT_TRUE(st.plan(0).empty()) << "nothing is sent before the resync";
  st.observeSpec("be", quota(56250), kMs);  // the dead colod's value, recognised as colod's
  auto plan = st.plan(kMs);
  ASSERT_EQ(plan.size(), 1U);
  EXPECT_EQ(plan[0].values.cpu_quota, 150000);
  st.onSent(plan, SendOutcome::Applied, "", kMs);
  EXPECT_EQ(st.find("be"), nullptr);
}

// SIGTERM with the runtime away left a release in the journal (empty overlay): the value colod
// had set is still in the runtime, and the next colod must know it is colod's.
TEST(Reconciler, ARestartRecognisesEveryValueColodSent) {
  auto st = makeState();
  ASSERT_TRUE(st.setOverlay("be", "", quota(100000), quota(-1), "", 0));
  st.onSent(st.plan(0), SendOutcome::Applied, "", 0);
  ASSERT_TRUE(st.setOverlay("be", "", quota(81346), quota(100000), "", kMs));
  st.onSent(st.plan(kMs), SendOutcome::Applied, "", kMs);
  ASSERT_TRUE(st.setOverlay("be", "", {}, quota(81346), "", 2 * kMs));
  st.onSent(st.plan(2 * kMs), SendOutcome::NotConnected, "", 2 * kMs);
  const auto journaled = st.entries();
  ASSERT_EQ(journaled.size(), 1U);
  EXPECT_EQ(journaled[0].sent.at("cpu_quota"), (std::vector<std::string>{"100000", "81346"}))
      << "the release never reached a runtime (NotConnected): not remembered";
  for (const int64_t left : {100000, 81346}) {
    auto next = makeState();
    next.load(journaled, /*keep_overlay=*/false);
    next.observeSpec("be", quota(left), 3 * kMs);
    EXPECT_EQ(next.find("be")->base.cpu_quota, -1) << left << " is colod's, not the runtime's";
    auto plan = next.plan(3 * kMs);
    ASSERT_EQ(plan.size(), 1U);
    EXPECT_EQ(plan[0].values.cpu_quota, -1);
  }
}

// Scenario a of the fault suite: many escalations while the runtime is away must not push the
// value applied before the outage out of colod's memory of its own values.
TEST(Reconciler, EscalationsWhileAwayDoNotForgetTheValueTheRuntimeHolds) {
  auto st = makeState();
  ASSERT_TRUE(st.setOverlay("be", "", quota(79823), quota(-1), "", 0));
  st.onSent(st.plan(0), SendOutcome::Applied, "", 0);
  int64_t now = kMs;
  for (int64_t q = 70000; q > 20000; q -= 2000) {  // 25 escalations, runtime away
    ASSERT_TRUE(st.setOverlay("be", "", quota(q), quota(79823), "", now));
    st.onSent(st.plan(now), SendOutcome::NotConnected, "", now);
    st.resetBackoff();
    st.onSent(st.plan(now), SendOutcome::Unknown, "reset", now);  // one that may have landed
    st.resetBackoff();
    now += kMs;
  }
  st.observeSpec("be", quota(79823), now);  // the resync shows what was applied before
  EXPECT_EQ(st.find("be")->base.cpu_quota, -1) << "79823 is colod's own value";
  EXPECT_LE(st.find("be")->sent.at("cpu_quota").size(), 16U) << "still bounded";
}

TEST(Reconciler, JournalReseedKeepsTheOverlay) {
  ReconcileEntry e;
  e.id = "be";
  e.base = quota(150000);
  e.overlay = quota(56250);
  auto st = makeState();
  st.load({e}, /*keep_overlay=*/true);
  st.observeSpec("be", quota(56250), kMs);
  EXPECT_TRUE(st.plan(kMs).empty());
  EXPECT_EQ(st.overlays().at("be").cpu_quota, 56250);
}

TEST(Reconciler, BaseViewShowsTheRuntimesOwnValues) {
  auto st = makeState();
  ASSERT_TRUE(st.setOverlay("be", "", quota(50000), spec150(), "", 0));
  policy::Resources now = spec150();
  now.cpu_quota = 50000;
  EXPECT_EQ(st.baseView("be", now), spec150());
  EXPECT_EQ(st.baseView("other", now), now);
}

TEST(Reconciler, TheTrackedSetIsBounded) {
  ReconcilerState st({.all_cpus = "0-1", .max_containers = 2});
  EXPECT_TRUE(st.setOverlay("a", "", quota(1), spec150(), "", 0));
  EXPECT_TRUE(st.setOverlay("b", "", quota(1), spec150(), "", 0));
  EXPECT_FALSE(st.setOverlay("c", "", quota(1), spec150(), "", 0));
  EXPECT_EQ(st.stats(0).dropped_full, 1U);
}

TEST(Reconciler, CanonicalValuesMeanWhatTheRuntimeMeans) {
  policy::Resources a;
  policy::Resources b;
  b.cpu_quota = -1;
  b.cpuset_cpus = "0,1";
  EXPECT_EQ(canonicalField(a, Field::CpuQuota, "0-1"), canonicalField(b, Field::CpuQuota, "0-1"));
  EXPECT_EQ(canonicalField(a, Field::CpusetCpus, "0-1"),
            canonicalField(b, Field::CpusetCpus, "0-1"));
  EXPECT_EQ(fieldName(Field::MemoryLimit), "memory_limit");
}

// --- admission placement (issue #8) ---------------------------------------------------------

policy::Resources cpus(const std::string& list) {
  policy::Resources r;
  r.cpuset_cpus = list;
  return r;
}

TEST(Reconciler, APlacementAtCreationIsColodsOwnAndConvergedWithoutAnUpdate) {
  auto st = makeState();
  policy::Resources handed;  // a BestEffort container: no cpuset, no quota
  handed.cpu_shares = 2;
  ASSERT_TRUE(st.setOverlay("be", "ns/p/be", cpus("1"), handed, "admission", 0));
  st.adjustedAtCreation("be", cpus("1"), 0);
  EXPECT_TRUE(st.awaitingCreation("be", kMs));
  EXPECT_TRUE(st.plan(kMs).empty()) << "the reply carried it: nothing to send";
  const auto* e = st.find("be");
  ASSERT_NE(e, nullptr);
  EXPECT_EQ(e->base.cpuset_cpus, "0-1") << "the runtime's own value: the node's CPUs";
  EXPECT_EQ(e->spec.cpuset_cpus, "1");
  EXPECT_EQ(e->sent.at("cpuset_cpus"), std::vector<std::string>{"1"});
  // The runtime lists it with colod's value: recognised as colod's, not an external change.
  st.observeSpec("be", cpus("1"), 2 * kMs);
  EXPECT_FALSE(st.awaitingCreation("be", 2 * kMs));
  EXPECT_EQ(st.stats(2 * kMs).external_changes, 0U);
  EXPECT_EQ(st.find("be")->base.cpuset_cpus, "0-1");
  // Released: back to the runtime's own value.
  ASSERT_TRUE(st.setOverlay("be", "", {}, cpus("1"), "released", 3 * kMs));
  auto plan = st.plan(3 * kMs);
  ASSERT_EQ(plan.size(), 1U);
  EXPECT_EQ(plan[0].values.cpuset_cpus, "0-1");
}

TEST(Reconciler, AFieldLeftOutOfTheReplyIsSentOnceTheContainerIsListed) {
  auto st = makeState();
  policy::Resources handed = cpus("0-1");  // the kubelet (or a plugin) set the cpuset
  policy::Resources overlay = cpus("1");
  ASSERT_TRUE(st.setOverlay("be", "", overlay, handed, "admission", 0));
  st.adjustedAtCreation("be", {}, 0);  // nothing went into the reply
  EXPECT_TRUE(st.plan(kMs).empty()) << "no update before the container exists";
  EXPECT_EQ(st.nextDueNs(), std::numeric_limits<int64_t>::max());
  st.observeSpec("be", handed, 2 * kMs);
  auto plan = st.plan(2 * kMs);
  ASSERT_EQ(plan.size(), 1U);
  EXPECT_EQ(plan[0].values.cpuset_cpus, "1");
}

TEST(Reconciler, ACreationThatNeverShowsUpStopsWaitingAfterTheGrace) {
  ReconcilerState st({.all_cpus = "0-1", .creation_grace_ns = 10 * kMs});
  ASSERT_TRUE(st.setOverlay("be", "", cpus("1"), {}, "admission", 0));
  st.adjustedAtCreation("be", cpus("1"), 0);
  EXPECT_TRUE(st.awaitingCreation("be", 9 * kMs));
  EXPECT_FALSE(st.awaitingCreation("be", 10 * kMs));
  EXPECT_FALSE(st.awaitingCreation("other", 0));
}

TEST(Reconciler, SetAtCreationTellsWhatTheHandedSpecAlreadySets) {
  policy::Resources none;
  for (Field f : kAllFields) {
    EXPECT_FALSE(setAtCreation(none, f)) << fieldName(f);
  }
  policy::Resources r;
  r.cpu_shares = 2;
  r.cpu_quota = -1;
  r.cpu_period = 100000;
  r.cpuset_cpus = "";
  r.memory_limit = 0;
  EXPECT_TRUE(setAtCreation(r, Field::CpuShares));
  EXPECT_FALSE(setAtCreation(r, Field::CpuQuota)) << "-1 is unlimited";
  EXPECT_FALSE(setAtCreation(r, Field::CpuPeriod)) << "a period without a quota sets nothing";
  EXPECT_FALSE(setAtCreation(r, Field::CpusetCpus)) << "an empty cpuset is unset";
  EXPECT_FALSE(setAtCreation(r, Field::MemoryLimit));
  r.cpu_quota = 50000;
  r.cpuset_cpus = "0-3";
  EXPECT_TRUE(setAtCreation(r, Field::CpuQuota));
  EXPECT_TRUE(setAtCreation(r, Field::CpuPeriod));
  EXPECT_TRUE(setAtCreation(r, Field::CpusetCpus));
  EXPECT_EQ(joinText({"a", "b", "c"}, ", "), "a, b, c");
  EXPECT_EQ(joinText({}, ", "), "");
}

}  // namespace
}  // namespace colod::daemon
