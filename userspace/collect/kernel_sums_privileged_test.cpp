// SPDX-License-Identifier: Apache-2.0
// Privileged tests of the kernel's sum with CPU marks (issue 17): cgsched marks in cg_cpus the
// CPUs it writes a slot on, and the summing iterator adds only those CPUs' copies. A cgroup
// that moves from CPU to CPU must still be counted whole, against a collector that reads every
// CPU's copy from userspace, also when it is moved to fresh slots to clear its marks
// (slot_moves.cpp). (The marks alone, over maps made by the test:
// map_reader_privileged_test.cpp; the guest with 255 possible CPUs: vmtests/guest/scale_test.sh.)
#include <sched.h>

#include "collector_test_fixture.h"

namespace colod::collect {
namespace {

using namespace std::chrono_literals;

class KernelSumsTest : public CollectorTest {};

// Runs the calling thread on CPU c alone (in the forked movers).
void pinTo(int c) {
  cpu_set_t one;
  CPU_ZERO(&one);
  CPU_SET(c, &one);
  ::sched_setaffinity(0, sizeof(one), &one);
}

// The slot moves' tests: a cgroup marked on two CPUs or more, so two to run on.
class SlotMoveTest : public KernelSumsTest {
 protected:
  void SetUp() override {
    KernelSumsTest::SetUp();
    if (IsSkipped()) {
      return;
    }
    ASSERT_EQ(::sched_getaffinity(0, sizeof(online_), &online_), 0);
    if (CPU_COUNT(&online_) < 2) {
      GTEST_SKIP() << "one CPU to run on: a slot is never marked on more than one";
    }
  }
  // Options of a collector whose every read is summed in the kernel, over the marked CPUs.
  static CollectorOptions kernelSummed() {
    CollectorOptions o;
    o.read_files = false;
    o.user_read_budget_bytes = 0;
    return o;
  }
  cpu_set_t online_{};
};

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
    // 30 ms of CPU on each online CPU in turn, twice round, a snapshot between moves (CPU
    // time, not wall time: on a loaded machine a wall-time spin ran less than the floor below).
    Child mover(cg, -1, [&online] {
      for (int round = 0; round < 2; ++round) {
        for (int c = 0; c < CPU_SETSIZE; ++c) {
          if (!CPU_ISSET(c, &online)) {
            continue;
          }
          pinTo(c);
          spinCpuFor(30ms);
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

// A slot's CPU marks only grow while it lives, so a cgroup marked on many CPUs is moved to a
// fresh slot (slot_move_min_cpus). The mover runs on every online CPU, then only on the last
// one: it is moved while it roams (again each time its new slot is marked on a second CPU)
// and once it stays, after which its slot holds that CPU's mark alone. Side by side with a
// collector that never moves it (reading every CPU's copy from userspace), nothing is lost or
// counted twice across the moves: CPU time, run-queue waits and involuntary switches agree,
// also for what the mover did between its old slot's last read and the move.
TEST_F(SlotMoveTest, ACgroupMovedToAFreshSlotKeepsItsCountsAndOnlyItsNewMarks) {
  CollectorOptions still;
  still.read_files = false;
  still.user_read_budget_bytes = uint64_t{1} << 40;  // every read from userspace
  still.slot_move_min_cpus = 0;
  CollectorOptions moving = kernelSummed();
  moving.slot_move_every_ticks = 4;
  // The mover runs on between a slot's last read and the move: what it did there is in the
  // old slot only (without the old slot's last read, 8 % of its time and its waits went missing).
  moving.before_slot_moves = [] { std::this_thread::sleep_for(15ms); };
  MAKE_COLLECTOR_OR_SKIP(still_col, still);
  const cpu_set_t online = online_;
  // Any slot marked on two CPUs: once the mover stays on one, the next check moves it off a
  // slot marked where it roamed (with a higher bound, a slot marked on fewer CPUs than that
  // when the mover settled would keep those marks: 3 of 8 in a guest with 8 online CPUs).
  moving.slot_move_min_cpus = 2;
  MAKE_COLLECTOR_OR_SKIP(moving_col, moving);
  if (!moving_col.kernelSums()) {
    GTEST_SKIP() << "this kernel cannot sum cg_sched (needs 5.17+): " << moving_col.readNote();
  }
  int last = 0;
  for (int c = 0; c < CPU_SETSIZE; ++c) {
    last = CPU_ISSET(c, &online) ? c : last;
  }
  TestCgroup cg({cpuRoot()}, uniqueName("slot-mover"));
  const uint64_t id = ASSERT_OK(cgroup::cgroupId(cg.dirIn(cpuRoot())));
  struct Totals {
    uint64_t oncpu_ns = 0;
    uint64_t waits = 0;
    uint64_t invol = 0;
    void add(const CgroupSample* c) {
      if (c != nullptr) {
        oncpu_ns += c->oncpu_ns;
        waits += c->runq.count;
        invol += c->involuntary_switches;
      }
    }
  };
  Totals a;
  Totals b;
  uint64_t moved = 0;
  auto both = [&] {
    const Snapshot s = ASSERT_OK(still_col.snapshot());
    const Snapshot m = ASSERT_OK(moving_col.snapshot());
    a.add(find(s, id));
    b.add(find(m, id));
    moved = m.stats.slots_moved;
    EXPECT_EQ(m.stats.sched_kernel_reads, m.stats.snapshots) << "a read did not go through it";
  };
  both();
  {
    // 5-ms bursts with 2-ms sleeps (switches, run-queue waits), on each online CPU in turn for
    // 0.6 s, then on the last one for 0.6 s.
    Child mover(cg, -1, [&online, last] {
      auto burstsOn = [](int c, std::chrono::milliseconds for_ms) {
        pinTo(c);
        const auto end = std::chrono::steady_clock::now() + for_ms;
        while (std::chrono::steady_clock::now() < end) {
          spinFor(5ms);
          ::usleep(2'000);
        }
      };
      const auto roam_end = std::chrono::steady_clock::now() + 600ms;
      while (std::chrono::steady_clock::now() < roam_end) {
        for (int c = 0; c < CPU_SETSIZE; ++c) {
          if (CPU_ISSET(c, &online)) {
            burstsOn(c, 20ms);
          }
        }
      }
      burstsOn(last, 600ms);
    });
    for (int i = 0; i < 60 && !HasFailure(); ++i) {
      std::this_thread::sleep_for(25ms);
      both();
    }
    ASSERT_EQ(mover.wait(), 0);
  }
  for (int i = 0; i < 3; ++i) {
    both();
  }
  const auto marks = ASSERT_OK(moving_col.slotMarks(id));
  std::printf(
      "moves %llu; on-CPU %.1f / %.1f ms, waits %llu / %llu, involuntary %llu / %llu "
      "(still / moving); last slot %u marked on %zu CPU(s)\n",
      static_cast<unsigned long long>(moved), static_cast<double>(a.oncpu_ns) / 1e6,
      static_cast<double>(b.oncpu_ns) / 1e6, static_cast<unsigned long long>(a.waits),
      static_cast<unsigned long long>(b.waits), static_cast<unsigned long long>(a.invol),
      static_cast<unsigned long long>(b.invol), marks.slot, marks.cpus.size());
  EXPECT_GE(moved, 2U) << "moved while it roamed, and once it stayed";
  EXPECT_GE(a.oncpu_ns, 500'000'000U) << "the mover did not run";
  EXPECT_TRUE(sameCount(a.oncpu_ns, b.oncpu_ns)) << a.oncpu_ns << " vs " << b.oncpu_ns;
  EXPECT_TRUE(sameCount(a.waits, b.waits)) << a.waits << " vs " << b.waits;
  EXPECT_TRUE(sameCount(a.invol, b.invol)) << a.invol << " vs " << b.invol;
  EXPECT_EQ(marks.cpus, std::vector<int>{last}) << "the slot it ended in holds only its last CPU";
}

// A move the kernel refuses (cg_slots' update) leaves the cgroup in its slot, counted, and the
// fresh slot it was to get goes back to the free ones: no count is lost, none is doubled.
TEST_F(SlotMoveTest, ARefusedMoveLeavesTheCgroupInItsSlot) {
  const cpu_set_t online = online_;
  CollectorOptions opts = kernelSummed();
  opts.slot_move_min_cpus = 2;
  opts.slot_move_every_ticks = 2;
  opts.cleanup_fault = [](std::string_view what) { return what == "slot_move" ? EBUSY : 0; };
  MAKE_COLLECTOR_OR_SKIP(col, opts);
  if (!col.kernelSums()) {
    GTEST_SKIP() << "this kernel cannot sum cg_sched (needs 5.17+): " << col.readNote();
  }
  TestCgroup cg({cpuRoot()}, uniqueName("slot-refused"));
  const uint64_t id = ASSERT_OK(cgroup::cgroupId(cg.dirIn(cpuRoot())));
  Child mover(cg, -1, [&online] {
    const auto end = std::chrono::steady_clock::now() + 2s;
    while (std::chrono::steady_clock::now() < end) {
      for (int c = 0; c < CPU_SETSIZE; ++c) {
        if (CPU_ISSET(c, &online)) {
          pinTo(c);
          spinFor(3ms);
          ::usleep(1'000);
        }
      }
    }
  });
  std::optional<uint32_t> first_slot;
  Snapshot last;
  for (int i = 0; i < 30 && !HasFailure(); ++i) {
    std::this_thread::sleep_for(25ms);
    last = ASSERT_OK(col.snapshot());
    if (auto m = col.slotMarks(id); m && !first_slot) {
      first_slot = m->slot;
    }
  }
  ASSERT_TRUE(first_slot.has_value()) << "the mover never got a slot";
  const auto marks = ASSERT_OK(col.slotMarks(id));
  EXPECT_EQ(last.stats.slots_moved, 0U);
  EXPECT_GE(last.stats.slot_move_errors, 1U) << "the refused moves were not counted";
  EXPECT_EQ(marks.slot, *first_slot) << "the cgroup left the slot it could not be moved from";
  EXPECT_GE(marks.cpus.size(), 2U);
  // The fresh slots were handed back (to the quarantine, then free_slots) without a failure.
  EXPECT_EQ(last.stats.map_deletes_pending, 0U) << "a fresh slot is still waiting to go back";
}

// A deleted cgroup's slot is zeroed before it goes back to the free ones, on the CPUs its marks
// name (the others' copies were never written): a cgroup that ran on every CPU, once deleted,
// leaves nothing in its slot for the next cgroup to inherit.
TEST_F(SlotMoveTest, ARecycledSlotIsZeroedOnEveryCpuItRanOn) {
  const cpu_set_t online = online_;
  MAKE_COLLECTOR_OR_SKIP(col, kernelSummed());
  if (!col.kernelSums()) {
    GTEST_SKIP() << "this kernel cannot sum cg_sched (needs 5.17+): " << col.readNote();
  }
  auto cg = std::make_unique<TestCgroup>(std::vector<std::string>{cpuRoot()},
                                         uniqueName("slot-recycled"));
  const uint64_t id = ASSERT_OK(cgroup::cgroupId(cg->dirIn(cpuRoot())));
  {
    Child roamer(*cg, -1, [&online] {
      for (int round = 0; round < 3; ++round) {
        for (int c = 0; c < CPU_SETSIZE; ++c) {
          if (CPU_ISSET(c, &online)) {
            pinTo(c);
            spinFor(40ms);
            ::usleep(1'000);
          }
        }
      }
    });
    ASSERT_EQ(roamer.wait(), 0);
  }
  ASSERT_OK(col.snapshot());
  const auto marks = ASSERT_OK(col.slotMarks(id));
  ASSERT_EQ(marks.cpus.size(), static_cast<std::size_t>(CPU_COUNT(&online)))
      << "the roamer did not run on every CPU";
  const uint64_t held = ASSERT_OK(col.slotOncpuNs(marks.slot));
  ASSERT_GE(held, 200'000'000U) << "the roamer's time is not in its slot";
  cg->removeNow();
  // Pruned at a verified snapshot, quarantined one interval, then zeroed and handed back.
  bool released = false;
  for (int i = 0; i < 40 && !released; ++i) {
    std::this_thread::sleep_for(20ms);
    ASSERT_OK(col.snapshot());
    released = !col.slotMarks(id).has_value();
  }
  ASSERT_TRUE(released) << "the deleted cgroup kept its slot";
  for (int i = 0; i < 3; ++i) {
    ASSERT_OK(col.snapshot());
  }
  // Another cgroup may have taken the slot since and run a little: far below what was there.
  const uint64_t left = ASSERT_OK(col.slotOncpuNs(marks.slot));
  EXPECT_LT(left, held / 10) << "slot " << marks.slot << " kept " << left << " of " << held
                             << " ns after its cgroup was deleted";
}

}  // namespace
}  // namespace colod::collect
