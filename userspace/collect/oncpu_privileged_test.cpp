// SPDX-License-Identifier: Apache-2.0
// Privileged tests of the on-CPU time the switch handler credits when it did not see the
// task's switch-in: the first switch after attach, or a switch the kernel left untraced (this
// project's sandbox kernel fires no sched_switch when a thread of its agent switches out, so
// whoever runs next on that CPU comes in unseen: bpf/README.md, known limits). Real BPF, a real
// cgroup, a real spinner; its own CPU clock is the reference.
#include <fstream>

#include "collector_test_fixture.h"

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

// The task's CPU time so far, by the kernel (/proc/<pid>/schedstat, first field, ns).
uint64_t ranNs(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/schedstat");
  uint64_t ns = 0;
  in >> ns;
  return ns;
}

// A spinner already running when the collector attaches: its switch-in is not in the
// handler's per-CPU record, and its first switch seen is its exit. The slice is counted from
// the kernel's arrival stamp, not from se.prev_sum_exec_runtime, which the kernel resets
// during the exit (the build before credited tens of microseconds of it).
TEST_P(OnCpuTest, ASliceWhoseSwitchInWasNotSeenIsCountedWhole) {
  std::string root;
  {
    MAKE_COLLECTOR_OR_SKIP(probe, options());
    root = probe.hierarchyRoot();
  }
  TestCgroup cg({root}, uniqueName("unseen"));
  SharedWithChildren<CpuTimeSplit> split;
  ASSERT_TRUE(split.ok());
  Child spinner(cg, 0, [&split] { spinCpuForOn(600ms, 0, split.operator->()); });
  std::this_thread::sleep_for(50ms);
  MAKE_COLLECTOR_OR_SKIP(col, options());
  EXPECT_EQ(col.attachKind(), GetParam() ? AttachKind::RawTp : AttachKind::TpBtf);
  // What it had run by the time the programs were attached: the rest runs under them.
  const uint64_t before_ns = ranNs(spinner.pid());
  const uint64_t id = ASSERT_OK(cgroup::cgroupId(cg.dirIn(root)));
  ASSERT_EQ(spinner.wait(), 0);
  const uint64_t total_ns = split->on_ns + split->elsewhere_ns;
  ASSERT_GT(total_ns, before_ns + 200'000'000u)
      << "the spinner was nearly done before the collector attached: nothing to measure";
  // Its last slice lands at its final switch, which can come after the parent is woken.
  uint64_t ns = 0;
  for (int i = 0; i < 20 && ns < (total_ns - before_ns) * 9 / 10; ++i) {
    const Snapshot s = ASSERT_OK(col.snapshot());
    if (const CgroupSample* c = find(s, id); c != nullptr) {
      ns += c->oncpu_ns;
    }
    std::this_thread::sleep_for(20ms);
  }
  std::printf("unseen switch-in: bpf oncpu=%llu us, ran %llu us (%llu us before attach)\n",
              static_cast<unsigned long long>(ns / 1000),
              static_cast<unsigned long long>(total_ns / 1000),
              static_cast<unsigned long long>(before_ns / 1000));
  // At least what it ran under the programs; at most all it ran (the slice may have begun
  // before the attach) and the interrupts the rq clock counts in it.
  EXPECT_GE(ns, (total_ns - before_ns) * 9 / 10);
  EXPECT_LE(ns, total_ns * 11 / 10);
}

INSTANTIATE_TEST_SUITE_P(AttachKinds,
                         OnCpuTest,
                         ::testing::Bool(),
                         [](const ::testing::TestParamInfo<bool>& p) {
                           return p.param ? "RawTp" : "TpBtf";
                         });

}  // namespace
}  // namespace colod::collect
