// SPDX-License-Identifier: Apache-2.0
// Privileged test of the preemption marks (bpf/cgsched.bpf.c, preempt_mark): a mark whose
// resume the handler did not take is stale, and must not turn into a wait later. Real BPF,
// real cgroups, real spinners on one CPU; the kernel's own run_delay is the reference.
#include "collector_test_fixture.h"

namespace colod::collect {
namespace {

using namespace std::chrono_literals;

// Both handler builds: tp_btf (marks in task storage) and raw_tp (marks keyed by pid).
class PreemptMarkTest : public CollectorTest, public ::testing::WithParamInterface<bool> {};

// A victim preempted in cgroup A (its mark holds A), moved to B while it waits, resumed there
// while nothing in B waited after a preemption (so the mark is not looked at), then asleep for
// 300 ms; meanwhile a spinner in B is preempted over and over, so B's marks are looked at when
// the victim wakes. Its mark, left from before the move, is stale: the build before took it
// and recorded a wait from the preemption in A to the wakeup (the victim's run and its whole
// sleep). The same stale mark comes from a resume the kernel did not trace (bpf/README.md,
// known limits), which a test cannot provoke. Three rounds: the victim is moved while it waits
// in about 8 of 9 (the hog has 8x its weight).
TEST_P(PreemptMarkTest, AMarkLeftFromBeforeAMoveIsNotAWaitAfterASleep) {
  if (const std::string why = noCpuController(); !why.empty()) {
    GTEST_SKIP() << why;
  }
  cpu_set_t mine;
  CPU_ZERO(&mine);
  if (::sched_getaffinity(0, sizeof(mine), &mine) != 0 || !CPU_ISSET(kCpu, &mine)) {
    GTEST_SKIP() << "needs CPU " << kCpu;
  }
  if (::access("/proc/self/schedstat", R_OK) != 0) {
    GTEST_SKIP() << "no /proc/<pid>/schedstat (CONFIG_SCHED_INFO): no reference to compare with";
  }
  CollectorOptions opts;
  opts.force_raw_tp = GetParam();
  MAKE_COLLECTOR_OR_SKIP(col, opts);
  const std::string cpu_root = cpuRoot();
  TestCgroup a(cpuRoots(), uniqueName("mark-a"));
  TestCgroup h(cpuRoots(), uniqueName("mark-hog"));
  ASSERT_TRUE(setWeight(h.dirIn(cpu_root), 8192));
  if (v2() ? v2Controller("cpuset") : !hier_.cpuset.empty()) {
    ASSERT_TRUE(pinCpuset(a.dirIn(cpusetRoot()), kCpu));
    ASSERT_TRUE(pinCpuset(h.dirIn(cpusetRoot()), kCpu));
  }
  Child hogger(h, kCpu, [] { hog(); });
  SharedWithChildren<std::atomic<int>> moved;
  ASSERT_TRUE(moved.ok());

  for (int round = 0; round < 3; ++round) {
    SCOPED_TRACE("round " + std::to_string(round));
    TestCgroup b(cpuRoots(), uniqueName("mark-b" + std::to_string(round)));
    if (v2() ? v2Controller("cpuset") : !hier_.cpuset.empty()) {
      ASSERT_TRUE(pinCpuset(b.dirIn(cpusetRoot()), kCpu));
    }
    const uint64_t b_id = ASSERT_OK(cgroup::cgroupId(b.dirIn(cpu_root)));
    moved->store(0);
    std::atomic<int>* flag = moved.operator->();
    // Spins (preempted by the hog) until moved, then sleeps at its first look, then idles.
    Child victim(a, kCpu, [flag] {
      while (flag->load() == 0) {
      }
      std::this_thread::sleep_for(300ms);
      while (true) {
        std::this_thread::sleep_for(1s);
      }
    });
    std::this_thread::sleep_for(100ms);
    for (const auto& d : b.dirs()) {
      ASSERT_TRUE(writeFile(d + "/cgroup.procs", std::to_string(victim.pid())));
    }
    const uint64_t victim_rd0 = taskSchedstat(victim.pid()).waited_ns;
    moved->store(1);
    ASSERT_OK(col.snapshot());
    std::this_thread::sleep_for(50ms);  // resumed in B, asleep
    uint64_t recorded_ns = 0;
    auto add = [&](const Snapshot& snap) {
      if (const CgroupSample* c = find(snap, b_id); c != nullptr) {
        recorded_ns += c->runq.total_ns;
      }
    };
    add(ASSERT_OK(col.snapshot()));
    Child spinner(b, kCpu, [] { hog(); });
    std::this_thread::sleep_for(350ms);  // the victim has woken in B
    const uint64_t reference_ns =
        taskSchedstat(victim.pid()).waited_ns - victim_rd0 + taskSchedstat(spinner.pid()).waited_ns;
    add(ASSERT_OK(col.snapshot()));
    std::printf("round %d: B recorded %llu us of waits, the kernel %llu us\n", round,
                static_cast<unsigned long long>(recorded_ns / 1000),
                static_cast<unsigned long long>(reference_ns / 1000));
    // A stale mark adds >= 300 ms (the sleep) to what the kernel saw B's tasks wait. Half of
    // that is the bound: a mark's time reads early after a preempting wakeup (bpf/README.md),
    // by 34 ms over ~100 preemptions in the TCG guest.
    EXPECT_LE(recorded_ns, reference_ns + 150'000'000u);
  }
}

INSTANTIATE_TEST_SUITE_P(AttachKinds, PreemptMarkTest, ::testing::Bool(), attachKindName);

}  // namespace
}  // namespace colod::collect
