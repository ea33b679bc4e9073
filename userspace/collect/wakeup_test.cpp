// SPDX-License-Identifier: Apache-2.0
// Privileged tests of the wakeup watch (issue 15, event-driven detection): a protected cgroup's
// run-queue wait crossing its threshold within a window wakes the reader through the ring
// buffer's epoll fd; an unprotected one never does. Real BPF, real cgroups, a real busy
// process beside a waiting one on one CPU.
#include <sys/epoll.h>

#include "collector_test_fixture.h"
#include "colod/base/unique_fd.h"

namespace colod::collect {
namespace {

using namespace std::chrono_literals;

class WakeupTest : public CollectorTest {
 protected:
  void protectedWakesUnprotectedDoesNot(const CollectorOptions& opts);
  // The LS and its busy neighbour on kCpu, the neighbour at 8x the LS weight: the LS waits
  // behind it at nearly every wakeup.
  void pinPair(const TestCgroup& ls, const TestCgroup& be) {
    if (v2() ? v2Controller("cpuset") : !hier_.cpuset.empty()) {
      for (const auto* cg : {&ls, &be}) {
        ASSERT_TRUE(pinCpuset(cg->dirIn(cpusetRoot()), kCpu));
      }
    }
    ASSERT_TRUE(setWeight(ls.dirIn(cpuRoot()), 1024));
    ASSERT_TRUE(setWeight(be.dirIn(cpuRoot()), 8192));
  }
};

// Waits up to `budget` on the wakeup fd and collects events of cgroup `id`; returns when one
// arrives (or the budget is spent). Events of other cgroups are dropped.
std::vector<WakeupEvent> waitForEvents(Collector& col,
                                       uint64_t id,
                                       std::chrono::milliseconds budget) {
  UniqueFd ep(::epoll_create1(EPOLL_CLOEXEC));
  EXPECT_TRUE(ep) << std::strerror(errno);
  epoll_event ev{};
  ev.events = EPOLLIN;
  ev.data.fd = col.wakeupFd();
  EXPECT_EQ(::epoll_ctl(ep.get(), EPOLL_CTL_ADD, col.wakeupFd(), &ev), 0) << std::strerror(errno);
  std::vector<WakeupEvent> out;
  const auto end = std::chrono::steady_clock::now() + budget;
  while (out.empty()) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        end - std::chrono::steady_clock::now());
    if (left.count() <= 0) {
      break;
    }
    epoll_event got{};
    (void)::epoll_wait(ep.get(), &got, 1, static_cast<int>(left.count()));
    auto events = col.consumeWakeups();
    EXPECT_TRUE(events.has_value()) << events.error().message();
    if (!events) {
      break;
    }
    for (const auto& e : *events) {
      if (e.cgroup_id == id) {
        out.push_back(e);
      }
    }
  }
  return out;
}

void WakeupTest::protectedWakesUnprotectedDoesNot(const CollectorOptions& opts) {
  if (const std::string why = noCpuController(); !why.empty()) {
    GTEST_SKIP() << why;
  }
  const Phases phase;
  MAKE_COLLECTOR_OR_SKIP(col, opts);
  const std::string cpu_root = cpuRoot();
  TestCgroup ls(cpuRoots(), uniqueName("wake-ls"));
  TestCgroup be(cpuRoots(), uniqueName("wake-be"));
  ASSERT_NO_FATAL_FAILURE(pinPair(ls, be));
  const uint64_t ls_id = ASSERT_OK(cgroup::cgroupId(ls.dirIn(cpu_root)));

  // The LS runs first, so its cgroup has a slot when it is watched.
  Child service(ls, kCpu, [] { sleeper(60000ms, 300us); });
  std::this_thread::sleep_for(200ms);
  ASSERT_OK(col.snapshot());

  // Not protected: the same contention posts nothing.
  {
    Child busy(be, kCpu, [] { hog(); });
    const auto events = waitForEvents(col, ls_id, 500ms);
    EXPECT_TRUE(events.empty()) << events.size() << " events for an unprotected cgroup";
  }
  phase("unprotected: no event");
  std::this_thread::sleep_for(200ms);  // the LS alone again

  ASSERT_OK(col.setWatched({{.id = ls_id, .threshold = 1ms}}));
  (void)col.consumeWakeups();  // anything from the quiet interval before is not the busy BE's
  const auto t0 = std::chrono::steady_clock::now();
  Child busy(be, kCpu, [] { hog(); });
  const auto events = waitForEvents(col, ls_id, 2000ms);
  const auto took = std::chrono::steady_clock::now() - t0;
  ASSERT_FALSE(events.empty()) << "no wakeup within 2 s of the neighbour turning busy";
  const double ms = std::chrono::duration<double, std::milli>(took).count();
  std::printf("first wakeup %.1f ms after the neighbour turned busy: waited %.2f ms in %.2f ms\n",
              ms, static_cast<double>(events.front().waited_ns) / 1e6,
              static_cast<double>(events.front().at_ns - events.front().window_start_ns) / 1e6);
  EXPECT_LT(ms, 100.0);
  EXPECT_GE(events.front().waited_ns, 1'000'000u);
  // At most one event per window: the window is 10 ms by default.
  EXPECT_LE(events.front().at_ns - events.front().window_start_ns, 10'000'000u + 1'000'000u);
  phase("protected: woken");

  // Unwatched again: the contention goes on, and no more events come.
  ASSERT_OK(col.setWatched({}));
  (void)col.consumeWakeups();
  const auto after = waitForEvents(col, ls_id, 300ms);
  EXPECT_TRUE(after.empty()) << after.size() << " events after the watch was cleared";
  const Snapshot s = ASSERT_OK(col.snapshot());
  EXPECT_EQ(s.stats.watch_write_errors, 0u);
}

TEST_F(WakeupTest, ProtectedCgroupWaitingBehindBusyNeighbourWakesReaderUnprotectedDoesNot) {
  protectedWakesUnprotectedDoesNot({});
}

// Whom a protected cgroup waited behind (issue 15: the wait of a woken request queued behind a
// busy neighbour is the harm, and the hog rarely preempts anyone). The LS sleeper and a hog on
// one CPU: while the LS is watched, its waits after wakeups are attributed to the hog's cgroup
// and bounded by its total wait; the hog (not watched) has none; after the watch is cleared
// nothing more is attributed.
TEST_F(WakeupTest, AProtectedCgroupsWaitsAreAttributedToWhomItWaitedBehind) {
  if (const std::string why = noCpuController(); !why.empty()) {
    GTEST_SKIP() << why;
  }
  MAKE_COLLECTOR_OR_SKIP(col, {});
  const std::string cpu_root = cpuRoot();
  TestCgroup ls(cpuRoots(), uniqueName("behind-ls"));
  TestCgroup be(cpuRoots(), uniqueName("behind-be"));
  ASSERT_NO_FATAL_FAILURE(pinPair(ls, be));
  const uint64_t ls_id = ASSERT_OK(cgroup::cgroupId(ls.dirIn(cpu_root)));
  const uint64_t be_id = ASSERT_OK(cgroup::cgroupId(be.dirIn(cpu_root)));
  Child service(ls, kCpu, [] { sleeper(60000ms, 300us); });
  std::this_thread::sleep_for(200ms);
  ASSERT_OK(col.snapshot());
  // A threshold no wait reaches: the attribution does not depend on events being posted.
  ASSERT_OK(col.setWatched({{.id = ls_id, .threshold = 10s}}));
  Child busy(be, kCpu, [] { hog(); });
  std::this_thread::sleep_for(300ms);
  ASSERT_OK(col.snapshot());
  std::this_thread::sleep_for(400ms);
  const Snapshot snap = ASSERT_OK(col.snapshot());
  const CgroupSample* l = find(snap, ls_id);
  ASSERT_NE(l, nullptr) << "the LS had no activity in the interval";
  const BehindSplit behind = behindOf(*l, be_id);
  const uint64_t behind_be = behind.of_ns;
  const uint64_t behind_all = behind.all_ns;
  const uint64_t waits_be = behind.of_waits;
  std::printf("LS waited %.1f ms in %lu waits (%.1f ms of it behind the hog's cgroup in %lu)\n",
              static_cast<double>(l->runq.total_ns) / 1e6,
              static_cast<unsigned long>(l->runq.count), static_cast<double>(behind_be) / 1e6,
              static_cast<unsigned long>(waits_be));
  EXPECT_GE(waits_be, 5u) << "the LS waited behind the hog at its wakeups";
  EXPECT_GE(behind_be, 5'000'000u);
  // The two maps are read moments apart: a wait or two may land in one read and not the other.
  EXPECT_LE(behind_all, l->runq.total_ns + l->runq.total_ns / 5 + 30'000'000u)
      << "more attributed than it waited";
  EXPECT_GE(behind_be * 2, l->runq.total_ns) << "most of its wait is behind the hog";
  if (const CgroupSample* h = find(snap, be_id); h != nullptr) {
    EXPECT_TRUE(h->waited_behind.empty()) << "the hog's cgroup is not watched";
  }
  ASSERT_OK(col.setWatched({}));
  ASSERT_OK(col.snapshot());
  std::this_thread::sleep_for(200ms);
  const Snapshot after = ASSERT_OK(col.snapshot());
  if (const CgroupSample* a = find(after, ls_id); a != nullptr) {
    EXPECT_TRUE(a->waited_behind.empty()) << "attributed after the watch was cleared";
  }
}

// The raw_tp fallback shares the switch handler's code (on_switch): the same behaviour.
TEST_F(WakeupTest, RawTpFallbackWakesTheSame) {
  CollectorOptions opts;
  opts.force_raw_tp = true;
  protectedWakesUnprotectedDoesNot(opts);
}

}  // namespace
}  // namespace colod::collect
