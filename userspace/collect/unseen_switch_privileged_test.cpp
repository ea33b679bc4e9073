// SPDX-License-Identifier: Apache-2.0
// Privileged tests of what the switch handler does with a task whose switch-in it did not see:
// the first switch after attach, or a switch the kernel left untraced (this project's sandbox
// kernel fires no sched_switch when a thread of its agent switches out, so whoever runs next on
// that CPU comes in unseen: bpf/README.md, known limits). Its on-CPU time is credited from the
// kernel's arrival stamp, and it is in the per-CPU runner record from there. Real BPF, real
// cgroups, a real spinner; the spinner's own CPU clock is the reference.
#include <unistd.h>

#include "collector_test_fixture.h"
#include "colod/base/unique_fd.h"

namespace colod::collect {
namespace {

using namespace std::chrono_literals;

// Both handler builds: tp_btf (direct BTF loads) and raw_tp (CO-RE reads).
class OnCpuTest : public CollectorTest, public ::testing::WithParamInterface<bool> {
 protected:
  [[nodiscard]] static CollectorOptions options() {
    CollectorOptions opts;
    opts.force_raw_tp = GetParam();
    return opts;
  }
};

// A spinner the test stops, and where its CPU time went (by its own clock).
struct StoppableSpin {
  std::atomic<int> stop{0};
  CpuTimeSplit split;
};

// A spinner already running when the collector attaches: its switch-in is not in the
// handler's per-CPU record, and its first switch seen is often its exit. The slice is counted
// from the kernel's arrival stamp, not from se.prev_sum_exec_runtime, which the kernel resets
// during the exit (the build before credited 38-47 us of ~430 ms in 3 of 5 runs).
TEST_P(OnCpuTest, ASliceWhoseSwitchInWasNotSeenIsCountedWhole) {
  if (::access("/proc/self/schedstat", R_OK) != 0) {
    GTEST_SKIP() << "no /proc/<pid>/schedstat (CONFIG_SCHED_INFO): the slice has no arrival "
                    "stamp to start from, and the test no reference";
  }
  std::string root;
  {
    MAKE_COLLECTOR_OR_SKIP(probe, options());
    root = probe.hierarchyRoot();
  }
  TestCgroup cg({root}, uniqueName("unseen"));
  const uint64_t steal_before_ns = cpuStealNs(0);
  SharedWithChildren<StoppableSpin> spin;
  ASSERT_TRUE(spin.ok());
  StoppableSpin* c = spin.operator->();
  Child spinner(cg, 0, [c] {
    while (c->stop.load() == 0) {
      spinCpuForOn(1ms, 0, &c->split);
    }
  });
  std::this_thread::sleep_for(50ms);
  MAKE_COLLECTOR_OR_SKIP(col, options());
  EXPECT_EQ(col.attachKind(), GetParam() ? AttachKind::RawTp : AttachKind::TpBtf);
  // What it had run by the time the programs were attached: the rest runs under them (a wall
  // time, not a CPU time: the collector's load can take long under an emulator).
  const uint64_t before_ns = taskSchedstat(spinner.pid()).ran_ns;
  const uint64_t id = ASSERT_OK(cgroup::cgroupId(cg.dirIn(root)));
  std::this_thread::sleep_for(300ms);
  c->stop.store(1);
  ASSERT_EQ(spinner.wait(), 0);
  const uint64_t total_ns = c->split.on_ns + c->split.elsewhere_ns;
  ASSERT_GT(total_ns, before_ns + 30'000'000u)
      << "the spinner hardly ran in the 300 ms after the attach: nothing to measure";
  // Its last slice lands at its final switch, which can come after the parent is woken.
  uint64_t ns = 0;
  for (int i = 0; i < 20 && ns < (total_ns - before_ns) * 9 / 10; ++i) {
    const Snapshot s = ASSERT_OK(col.snapshot());
    if (const CgroupSample* sample = find(s, id); sample != nullptr) {
      ns += sample->oncpu_ns;
    }
    std::this_thread::sleep_for(20ms);
  }
  const uint64_t steal_ns = cpuStealNs(0) - steal_before_ns;
  std::printf(
      "unseen switch-in: bpf oncpu=%llu us, ran %llu us (%llu us before attach), the "
      "hypervisor took %llu us of CPU 0\n",
      static_cast<unsigned long long>(ns / 1000), static_cast<unsigned long long>(total_ns / 1000),
      static_cast<unsigned long long>(before_ns / 1000),
      static_cast<unsigned long long>(steal_ns / 1000));
  // At least what it ran under the programs; at most all it ran (the slice may have begun
  // before the attach) and the interrupts the rq clock counts in it, and the time the
  // hypervisor took from the vCPU in it: the unseen slice is the rq clock since its arrival,
  // which runs on through steal. One run in 70 here credited 306 ms for 197 ms run (116 ms of
  // it under the programs), likely a burst of steal: this host's vCPUs lose 10-30 ms in this
  // test's 0.6 s as a rule. Steal is counted in USER_HZ ticks: one more tick of slack.
  EXPECT_GE(ns, (total_ns - before_ns) * 9 / 10);
  EXPECT_LE(ns, total_ns * 11 / 10 + steal_ns + 10'000'000u);
}

// Whom a woken task waited behind, when the task it waited behind was switched in unseen: a hog
// spins on kCpu from before the attach, the LS task (SCHED_IDLE, so its wakeup does not preempt
// the hog) blocks on a pipe there, and after the attach and the watch the test wakes it. It waits
// until the hog's slice ends, at the first switch on kCpu the handler sees with a watch set: the
// hog is in no runner record. It is put in from its arrival stamp, and the wait is attributed
// to it. The build before attributed it to nobody in 16 of 16 rounds (the record restarted
// there: the first wait on each CPU once a victim was watched, and on this sandbox's kernel the
// wait that ended each slice of a task switched in after its agent's thread); the kernel's
// run_delay is the reference for the wait.
TEST_P(OnCpuTest, AWaitBehindATaskSwitchedInUnseenIsAttributedToIt) {
  if (const std::string why = noCpuController(); !why.empty()) {
    GTEST_SKIP() << why;
  }
  if (::access("/proc/self/schedstat", R_OK) != 0) {
    GTEST_SKIP() << "no /proc/<pid>/schedstat (CONFIG_SCHED_INFO): no arrival stamp";
  }
  const std::string cpu_root = cpuRoot();
  TestCgroup ls({cpu_root}, uniqueName("unseen-ls"));
  TestCgroup be({cpu_root}, uniqueName("unseen-be"));
  ASSERT_TRUE(setWeight(ls.dirIn(cpu_root), 1024));
  ASSERT_TRUE(setWeight(be.dirIn(cpu_root), 8192));
  const uint64_t ls_id = ASSERT_OK(cgroup::cgroupId(ls.dirIn(cpu_root)));
  const uint64_t be_id = ASSERT_OK(cgroup::cgroupId(be.dirIn(cpu_root)));
  // The test itself stays off kCpu: a switch to it there would make the hog's switch-in seen.
  cpu_set_t saved;
  ASSERT_EQ(::sched_getaffinity(0, sizeof(saved), &saved), 0);
  struct Restore {
    cpu_set_t* set;
    ~Restore() { ::sched_setaffinity(0, sizeof(*set), set); }
  } restore{&saved};
  cpu_set_t other;
  CPU_ZERO(&other);
  CPU_SET(1 - kCpu, &other);
  ASSERT_EQ(::sched_setaffinity(0, sizeof(other), &other), 0) << std::strerror(errno);
  // Rounds until kWanted of them had a wait worth attributing: a wakeup that comes as the hog's
  // slice ends waits too little to say anything (in one CI run 4 of 6 fixed rounds did).
  constexpr int kWanted = 3;
  constexpr int kMaxRounds = 12;
  int waited = 0;
  int missed = 0;  // rounds with a wait by the kernel's account and none recorded
  for (int round = 0; round < kMaxRounds && waited < kWanted; ++round) {
    int pipe_fds[2];
    ASSERT_EQ(::pipe2(pipe_fds, O_CLOEXEC), 0) << std::strerror(errno);
    UniqueFd rd(pipe_fds[0]);
    UniqueFd wr(pipe_fds[1]);
    const int rfd = rd.get();
    Child hogger(be, kCpu, [] { hog(); });
    // One byte, one wakeup; EOF ends it. SCHED_IDLE: a wakeup that preempted the hog would
    // wait ~0 (a single wakeup after a long sleep does, whatever the weights); this one waits
    // for the hog's slice to end.
    Child waiter(ls, kCpu, [rfd] {
      const sched_param prio{};
      if (::sched_setscheduler(0, SCHED_IDLE, &prio) != 0) {
        ::_exit(4);
      }
      char b = 0;
      while (::read(rfd, &b, 1) == 1) {
      }
    });
    std::this_thread::sleep_for(50ms);  // both on kCpu: the hog spinning, the waiter blocked
    // The waiter must be asleep on the pipe before the collector attaches, so that the write's
    // wakeup is its one wait under the watch. One still runnable from its fork (a loaded host
    // delays a SCHED_IDLE task behind the hog for long) first runs after the watch is set, and
    // that wait, from its fork through the collector's load, is recorded, rightly, but is
    // outside the kernel's reference below: CI of session 45 recorded 1415 ms in 2 waits
    // against the pipe wakeup's 3.5 ms when this check came after the attach.
    const auto asleep_by = std::chrono::steady_clock::now() + 2s;
    while (taskState(waiter.pid()) != 'S' && std::chrono::steady_clock::now() < asleep_by) {
      std::this_thread::sleep_for(5ms);
    }
    if (taskState(waiter.pid()) != 'S') {
      std::printf("round %d: the waiter is not asleep on the pipe after 2 s: skipped\n", round);
      continue;
    }
    MAKE_COLLECTOR_OR_SKIP(col, options());
    // The LS cgroup gets its slot from a task of it that runs on the other CPU, so the watch
    // can be set without a switch on kCpu.
    {
      Child slot_maker(ls, 1 - kCpu, [] { spinFor(2ms); });
      ASSERT_EQ(slot_maker.wait(), 0);
    }
    ASSERT_OK(col.snapshot());
    ASSERT_OK(col.setWatched({{.id = ls_id, .threshold = 10s}}));
    const TaskSchedstat waiter_before = taskSchedstat(waiter.pid());
    const uint64_t hog_before = taskSchedstat(hogger.pid()).ran_ns;
    const uint64_t wall_before = monotonicNs();
    ASSERT_EQ(::write(wr.get(), "x", 1), 1);
    // Until the waiter has had the CPU: the kernel adds a wait to run_delay only then. Most
    // rounds it gets kCpu in about a millisecond, but a SCHED_IDLE task in a group of weight
    // 1024 beside one of 8192 can wait far longer (up to 275 ms seen here): a fixed 100 ms look
    // found no wait and no sample in 12 of 80 runs (and once in CI).
    const auto ran_by = std::chrono::steady_clock::now() + 3s;
    while (taskSchedstat(waiter.pid()).slices == waiter_before.slices &&
           std::chrono::steady_clock::now() < ran_by) {
      std::this_thread::sleep_for(5ms);
    }
    std::this_thread::sleep_for(20ms);  // its read, and its switch out to sleep again
    const uint64_t delay_ns = taskSchedstat(waiter.pid()).waited_ns - waiter_before.waited_ns;
    const uint64_t hog_ns = taskSchedstat(hogger.pid()).ran_ns - hog_before;
    const uint64_t wall_ns = monotonicNs() - wall_before;
    std::printf("round %d: kernel run_delay %llu us; in %llu us the hog ran %llu us\n", round,
                static_cast<unsigned long long>(delay_ns / 1000),
                static_cast<unsigned long long>(wall_ns / 1000),
                static_cast<unsigned long long>(hog_ns / 1000));
    const Snapshot snap = ASSERT_OK(col.snapshot());
    const CgroupSample* l = find(snap, ls_id);
    ASSERT_NE(l, nullptr) << "round " << round << ": the LS task did not run";
    const BehindSplit behind = behindOf(*l, be_id);
    const uint64_t behind_be_ns = behind.of_ns;
    const uint64_t behind_all_ns = behind.all_ns;
    std::printf(
        "round %d: the LS waited %llu us in %llu waits; behind the hog %llu us, anyone "
        "%llu us\n",
        round, static_cast<unsigned long long>(l->runq.total_ns / 1000),
        static_cast<unsigned long long>(l->runq.count),
        static_cast<unsigned long long>(behind_be_ns / 1000),
        static_cast<unsigned long long>(behind_all_ns / 1000));
    if (delay_ns < 200'000) {
      // Woken as the hog's slice ended, or while the hog was off the CPU (a noisy host's vCPU
      // stalls do that): too little to attribute (behind_min 50 us), and a wait that short may
      // not be recorded at all. Such a round says nothing either way.
      continue;
    }
    if (l->runq.count == 0) {
      // Seen here only with stress-ng on both CPUs beside the test, or ctest -j2 (1 round in
      // ~24), with the waiter asleep on the pipe before the write. Likely this sandbox
      // kernel's untraced switch (bpf/README.md, known limits): no sched_switch fires when a
      // thread of the sandbox's agent (pid 1) switches out, so a waiter it hands kCpu to comes
      // in unseen and its wait is not recorded. One such round in six is tolerated and shown;
      // more fail.
      ++missed;
      std::printf("round %d: the kernel saw a wait of %llu us, none was recorded\n", round,
                  static_cast<unsigned long long>(delay_ns / 1000));
      continue;
    }
    ++waited;
    // Most of the kernel's delay is a recorded wait after the wakeup, and that wait is the
    // hog's: what is attributed to anyone else is at most what others ran on kCpu meanwhile
    // (on a loaded host a kworker or another test may take kCpu for a few ms, and a wait
    // behind it is rightly not the hog's; 2 of 50 runs here). With kCpu to the two tasks alone
    // that leaves the hog all of it but the clocks' read skew.
    EXPECT_GE(behind_all_ns, delay_ns / 2)
        << "round " << round << ": the wait after the wakeup was not recorded";
    std::string whom;
    for (const auto& w : l->waited_behind) {
      whom += " " + std::to_string(w.cgroup_id) + ":" + std::to_string(w.wait_ns / 1000) + "us";
    }
    EXPECT_GE(behind_be_ns, behind_all_ns * 9 / 10)
        << "round " << round << ": the wait behind the hog (cgroup " << be_id << ", LS " << ls_id
        << ") is not its; behind:" << whom;
    EXPECT_LE(behind_all_ns, delay_ns * 11 / 10 + 100'000) << "round " << round;
  }
  EXPECT_LE(missed, 1) << "waits the kernel saw went unrecorded in " << missed << " rounds";
  EXPECT_GE(waited, kWanted) << "too few rounds in which the LS waited behind the hog";
}

INSTANTIATE_TEST_SUITE_P(AttachKinds, OnCpuTest, ::testing::Bool(), attachKindName);

}  // namespace
}  // namespace colod::collect
