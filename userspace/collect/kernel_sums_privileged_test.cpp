// SPDX-License-Identifier: Apache-2.0
// Privileged test of the kernel's sum with CPU marks (issue 17): cgsched marks in cg_cpus the
// CPUs it writes a slot on, and the summing iterator adds only those CPUs' copies. A cgroup
// that moves from CPU to CPU must still be counted whole, against a collector that reads every
// CPU's copy from userspace. (The marks alone, over maps made by the test:
// map_reader_privileged_test.cpp; the guest with 255 possible CPUs: vmtests/guest/scale_test.sh.)
#include <sched.h>

#include "collector_test_fixture.h"

namespace colod::collect {
namespace {

using namespace std::chrono_literals;

class KernelSumsTest : public CollectorTest {};

TEST_F(KernelSumsTest, CountACgroupOnEveryCpuItMovesTo) {
  CollectorOptions user;
  user.read_files = false;
  user.user_read_budget_bytes = uint64_t{1} << 40;  // every read from userspace
  CollectorOptions kernel;
  kernel.read_files = false;
  kernel.user_read_budget_bytes = 0;  // every read summed in the kernel
  MAKE_COLLECTOR_OR_SKIP(user_col, user);
  MAKE_COLLECTOR_OR_SKIP(kernel_col, kernel);
  if (!kernel_col.kernelSums()) {
    GTEST_SKIP() << "this kernel cannot sum cg_sched (needs 5.17+): " << kernel_col.readNote();
  }
  cpu_set_t online;
  ASSERT_EQ(::sched_getaffinity(0, sizeof(online), &online), 0);
  const int cpus = CPU_COUNT(&online);
  if (cpus < 2) {
    GTEST_SKIP() << "one CPU to run on: nothing to move between";
  }
  TestCgroup cg({cpuRoot()}, uniqueName("mover"));
  const uint64_t id = ASSERT_OK(cgroup::cgroupId(cg.dirIn(cpuRoot())));
  uint64_t user_ns = 0;
  uint64_t kernel_ns = 0;
  uint64_t copies = 0;
  uint64_t entries = 0;
  auto both = [&] {
    const Snapshot u = ASSERT_OK(user_col.snapshot());
    const Snapshot k = ASSERT_OK(kernel_col.snapshot());
    if (const CgroupSample* c = find(u, id)) {
      user_ns += c->oncpu_ns;
    }
    if (const CgroupSample* c = find(k, id)) {
      kernel_ns += c->oncpu_ns;
    }
    copies += k.stats.sched_cpu_copies;
    entries += k.stats.sched_entries_read;
    EXPECT_EQ(k.stats.sched_kernel_reads, k.stats.snapshots) << "a read did not go through it";
  };
  both();
  {
    // 30 ms on each online CPU in turn, twice round, a snapshot between moves.
    Child mover(cg, -1, [&online] {
      for (int round = 0; round < 2; ++round) {
        for (int c = 0; c < CPU_SETSIZE; ++c) {
          if (!CPU_ISSET(c, &online)) {
            continue;
          }
          cpu_set_t one;
          CPU_ZERO(&one);
          CPU_SET(c, &one);
          ::sched_setaffinity(0, sizeof(one), &one);
          spinFor(30ms);
          ::usleep(20'000);
        }
      }
    });
    for (int i = 0; i < 4 * cpus && !HasFailure(); ++i) {
      std::this_thread::sleep_for(25ms);
      both();
    }
    ASSERT_EQ(mover.wait(), 0);
  }
  for (int i = 0; i < 3; ++i) {
    both();
  }
  std::printf("mover on-CPU: user %.1f ms, kernel %.1f ms; %llu copies for %llu records\n",
              static_cast<double>(user_ns) / 1e6, static_cast<double>(kernel_ns) / 1e6,
              static_cast<unsigned long long>(copies), static_cast<unsigned long long>(entries));
  EXPECT_GE(user_ns, 2u * static_cast<uint64_t>(cpus) * 25'000'000u);
  EXPECT_TRUE(sameCount(user_ns, kernel_ns)) << user_ns << " vs " << kernel_ns;
  // At most one copy per CPU a cgroup ran on: never more than the online CPUs a record.
  EXPECT_LE(copies, entries * static_cast<uint64_t>(cpus));
  EXPECT_GT(copies, 0u);
}

}  // namespace
}  // namespace colod::collect
