// SPDX-License-Identifier: Apache-2.0
// Privileged tests: real BPF programs, real cgroups, real workloads (style rule 36).
//
// Every assertion has a wide margin: other builds and tests share the 2 CPUs, so nothing
// here depends on absolute timing; contention is made certain with cgroup weights instead.
#include <bpf/libbpf.h>

#include <algorithm>

#include "collector_test_fixture.h"

namespace colod::collect {
namespace {

using namespace std::chrono_literals;

TEST_F(CollectorTest, ContendedSleeperSeesHogAsAggressorAndHighRunqLatency) {
  if (const std::string why = noCpuController(); !why.empty()) {
    GTEST_SKIP() << why;
  }
  const Phases phase;
  MAKE_COLLECTOR_OR_SKIP(col);
  phase("collector loaded");
  ASSERT_EQ(col.mode(), expectedMode());
  const std::string cpu_root = cpuRoot();
  TestCgroup s(cpuRoots(), uniqueName("sleeper"));
  TestCgroup h(cpuRoots(), uniqueName("hog"));
  // The hogs' cgroup gets the maximum weight so that it, not the other builds sharing the
  // machine (each a full-weight task in the root cgroup), takes the CPU from the sleeper.
  ASSERT_TRUE(setWeight(h.dirIn(cpu_root), 262144));
  if (v2() ? v2Controller("cpuset") : !hier_.cpuset.empty()) {
    for (const auto* cg : {&s, &h}) {
      ASSERT_TRUE(pinCpuset(cg->dirIn(cpusetRoot()), kCpu));
    }
  }
  const std::string s_cpu = s.dirIn(cpu_root);
  const uint64_t s_id = ASSERT_OK(cgroup::cgroupId(s_cpu));
  const uint64_t h_id = ASSERT_OK(cgroup::cgroupId(h.dirIn(cpu_root)));

  // Alone: the sleeper's cgroup gets the maximum weight, so the builds that share this
  // machine cannot make the baseline look contended.
  ASSERT_TRUE(setWeight(s_cpu, 262144));
  ASSERT_OK(col.snapshot());
  {
    Child c(s, kCpu, [] { sleeper(1500ms); });
    ASSERT_EQ(c.wait(), 0);
  }
  const Snapshot alone = ASSERT_OK(col.snapshot());
  phase("alone measured");
  const CgroupSample* a = find(alone, s_id);
  ASSERT_NE(a, nullptr) << "no sample for the sleeper's cgroup";
  EXPECT_EQ(a->path, "/" + uniqueName("sleeper"));
  EXPECT_GT(a->runq.count, 100u);
  EXPECT_GE(alone.cgroups.size(), 2u) << "the host's own cgroups run too";
  EXPECT_TRUE(
      std::is_sorted(alone.cgroups.begin(), alone.cgroups.end(),
                     [](const CgroupSample& x, const CgroupSample& y) { return x.path < y.path; }))
      << "a snapshot's samples are sorted by path";

  // Contended: two hogs on the same CPU, the sleeper's weight at the minimum (2). A starved
  // sleeper may not reach its own end, so the window is bounded here (children are killed).
  ASSERT_TRUE(setWeight(s_cpu, 2));
  Child hog1(h, kCpu, [] { hog(); });
  Child hog2(h, kCpu, [] { hog(); });
  std::this_thread::sleep_for(200ms);
  ASSERT_OK(col.snapshot());
  {
    std::vector<std::unique_ptr<Child>> sleepers;
    for (int i = 0; i < 4; ++i) {
      sleepers.push_back(std::make_unique<Child>(s, kCpu, [] { sleeper(60000ms); }));
    }
    std::this_thread::sleep_for(2500ms);
    // A starved task needs CPU to die. Lifting its weight is not enough on CFS (6.1): the
    // group's vruntime ran far ahead at weight 1 and keeps it behind the hogs for a minute
    // (seen under vmtests). So the hogs are frozen while the sleepers are killed.
    (void)setWeight(s_cpu, 262144);
    hog1.signal(SIGSTOP);
    hog2.signal(SIGSTOP);
  }
  // Snapshot only now, the sleepers reaped: a wait is recorded when it ends (at switch-in),
  // so a sleeper starved for the whole window reports its wait only when it runs to die.
  // Taken before that, the window could hold 2 short waits and no starved one (seen here,
  // 2 runs in 5 on a 6.18 host: contended n=2, p99 64 us).
  Result<Snapshot> contended_r = col.snapshot();
  phase("contended measured");
  hog1.signal(SIGCONT);
  hog2.signal(SIGCONT);
  ASSERT_TRUE(contended_r.has_value()) << contended_r.error().message();
  const Snapshot contended = std::move(contended_r).value();
  const CgroupSample* b = find(contended, s_id);
  ASSERT_NE(b, nullptr);
  const CgroupSample* hs = find(contended, h_id);
  ASSERT_NE(hs, nullptr) << "no sample for the hogs' cgroup";
  std::printf("alone: n=%llu p50=%lluus p99=%lluus | contended: n=%llu p50=%lluus p99=%lluus\n",
              static_cast<unsigned long long>(a->runq.count),
              static_cast<unsigned long long>(a->runq.p50_us),
              static_cast<unsigned long long>(a->runq.p99_us),
              static_cast<unsigned long long>(b->runq.count),
              static_cast<unsigned long long>(b->runq.p50_us),
              static_cast<unsigned long long>(b->runq.p99_us));
  std::printf("contended sleeper:\n%s", formatLog2Hist(b->runq_hist, "usecs").c_str());
  ASSERT_GT(b->runq.count, 0u);
  // "Far higher", in orders of magnitude: the mean wait (exact, from total_ns) at least 8x the
  // baseline's, and a p99 of at least 4 ms. Not a p99 ratio: under TCG (vmtests) a vCPU the
  // host deschedules for a few ms puts single multi-ms waits into the baseline's tail.
  const uint64_t mean_alone_ns = a->runq.total_ns / a->runq.count;
  const uint64_t mean_contended_ns = b->runq.total_ns / b->runq.count;
  std::printf("mean wait: alone %lluus contended %lluus\n",
              static_cast<unsigned long long>(mean_alone_ns / 1000),
              static_cast<unsigned long long>(mean_contended_ns / 1000));
  EXPECT_GE(mean_contended_ns, 8 * mean_alone_ns);
  EXPECT_GE(b->runq.p99_us, 4096u);
  // The hogs got the CPU: far more on-CPU time than the starved sleepers.
  EXPECT_GT(hs->oncpu_ns, 10 * b->oncpu_ns);
  EXPECT_GT(hs->oncpu_ns, 500000000u);  // > 0.5 s of a 2.5 s window on their CPU
  // The two hogs share a cgroup and a CPU, so they take it from each other at slice ends:
  // reported as the hogs' cgroup preempted by itself (counted in its slot, not the pairs hash).
  const auto self = std::find_if(hs->preempted_by.begin(), hs->preempted_by.end(),
                                 [&](const Aggressor& ag) { return ag.cgroup_id == h_id; });
  ASSERT_NE(self, hs->preempted_by.end()) << "hogs not reported as preempted by their own cgroup";
  EXPECT_EQ(self->path, "/" + uniqueName("hog"));
  EXPECT_GT(self->preemptions, 10u);

  // Preemption matrix, in a fresh cgroup (the one above carries vruntime debt from weight 2),
  // at a weight the sleeper runs with: 65536 vs the hogs' 262144 gives it
  // a share of the CPU, so it runs and is preempted often, while the hogs dwarf any build task
  // in the root cgroup.
  // v2 (CFS on 6.1): at 6400 vs 10000 the victim's slice (~4.7 ms of a 12 ms period) outlasts
  // its 3 ms bursts and it is never preempted at a tick; 2500 (25600 shares) makes it ~2 ms.
  TestCgroup v(cpuRoots(), uniqueName("victim"));
  ASSERT_TRUE(setWeight(v.dirIn(cpu_root), v2() ? 25600 : 65536));
  if (v2() ? v2Controller("cpuset") : !hier_.cpuset.empty()) {
    ASSERT_TRUE(pinCpuset(v.dirIn(cpusetRoot()), kCpu));
  }
  const uint64_t v_id = ASSERT_OK(cgroup::cgroupId(v.dirIn(cpu_root)));
  ASSERT_OK(col.snapshot());
  {
    // Two sleepers on v1 hosts (6.18 EEVDF, shared with other builds: one alone was sometimes
    // never preempted in the window); one on v2 (6.1 CFS: two preempt each other about as often
    // as the hogs preempt them).
    std::vector<std::unique_ptr<Child>> victims;
    for (int i = 0; i < (v2() ? 1 : 2); ++i) {
      // 10 ms bursts: longer than a slice plus a tick (4 ms at HZ=250), so every burst that
      // gets the CPU is preempted at a tick. With 3 ms bursts a 6.1 guest under TCG on an idle
      // host saw 1-2 preemptions in 10 s (most bursts ended before the tick that would have
      // preempted them), and wake-ups of root-cgroup kernel threads outnumbered the hogs.
      victims.push_back(std::make_unique<Child>(v, kCpu, [] { sleeper(60000ms, 10000us); }));
    }
    std::this_thread::sleep_for(1500ms);
    // Bounded wait (10 s) for the kernel's own count of the victims' preemptions to reach 20:
    // whether a 3 ms burst outlives its slice at a tick is chance (0 in 1.5 s seen once under
    // TCG; 1 by a hog vs 2 by root-cgroup tasks once on this host), and with 20 the hogs'
    // share dominates any noise from the rest of the machine.
    const auto preemptions = [&victims] {
      uint64_t n = 0;
      for (const auto& c : victims) {
        n += nonvoluntarySwitches(c->pid());
      }
      return n;
    };
    for (int i = 0; i < 40 && preemptions() < 20; ++i) {
      std::this_thread::sleep_for(250ms);
    }
    hog1.signal(SIGSTOP);  // as above: the victim exits promptly
    hog2.signal(SIGSTOP);
  }
  hog1.signal(SIGCONT);
  hog2.signal(SIGCONT);
  const Snapshot matrix = ASSERT_OK(col.snapshot());
  phase("matrix measured");
  const CgroupSample* m = find(matrix, v_id);
  ASSERT_NE(m, nullptr);
  for (const auto& ag : m->preempted_by) {
    std::printf("  preempted by %s (%llu): %llu\n", ag.path.c_str(),
                static_cast<unsigned long long>(ag.cgroup_id),
                static_cast<unsigned long long>(ag.preemptions));
  }
  EXPECT_GT(m->involuntary_switches, 0u);
  ASSERT_FALSE(m->preempted_by.empty());
  EXPECT_EQ(m->preempted_by.front().cgroup_id, h_id);
  EXPECT_EQ(m->preempted_by.front().path, "/" + uniqueName("hog"));
  EXPECT_GT(m->preempted_wait_ns, 0u);
  phase("checked; cleaning up");
}

TEST_F(CollectorTest, MemoryLimitedCgroupShowsReclaimStallUnlimitedDoesNot) {
  if (v2() ? !v2Controller("memory") : (hier_.memory.empty() || hier_.cpu.empty())) {
    GTEST_SKIP() << (v2() ? "cgroup2 root does not delegate the memory controller"
                          : "no v1 memory/cpu controller on this host");
  }
  MAKE_COLLECTOR_OR_SKIP(col);
  // v1: the collector keys by the cpu hierarchy, the limit lives in the memory hierarchy.
  std::vector<std::string> roots{cpuRoot()};
  if (!v2()) {
    roots.push_back(memRoot());
  }
  TestCgroup lim(roots, uniqueName("memlimited"));
  TestCgroup unl(roots, uniqueName("memfree"));
  const std::string lim_mem = lim.dirIn(memRoot());
  ASSERT_TRUE(writeFile(lim_mem + (v2() ? "/memory.max" : "/memory.limit_in_bytes"),
                        std::to_string(64 << 20)));
  const uint64_t lim_id = ASSERT_OK(cgroup::cgroupId(lim.dirIn(cpuRoot())));
  const uint64_t unl_id = ASSERT_OK(cgroup::cgroupId(unl.dirIn(cpuRoot())));
  // Reclaimable memory needs page cache on a disk: /var/tmp on a host. A guest booted from an
  // initramfs (tmpfs/ramfs root, no swap) has nothing reclaimable, so there the limited group
  // touches anonymous memory past memory.high instead: every charge above it enters memcg
  // reclaim (and stalls in it) although no page can be freed.
  const std::string dir = "/var/tmp";
  struct statfs fs {};
  const bool disk =
      ::statfs(dir.c_str(), &fs) == 0 && fs.f_type != TMPFS_MAGIC && fs.f_type != RAMFS_MAGIC;
  if (!disk && !v2()) {
    GTEST_SKIP() << dir << " is not disk-backed and v1 has no memory.high: nothing to reclaim";
  }
  ASSERT_OK(col.snapshot());
  uint64_t count = 0;
  uint64_t stall_ns = 0;
  uint64_t pages = 0;
  uint64_t unl_count = 0;
  uint64_t unl_stall_ns = 0;
  // Sums both groups over every snapshot taken from here on.
  auto take = [&]() -> Result<void> {
    auto r = col.snapshot();
    if (!r) {
      return std::move(r).error();
    }
    const Snapshot& snap = *r;
    if (const CgroupSample* l = find(snap, lim_id); l != nullptr) {
      count += l->reclaim_count;
      stall_ns += l->reclaim_stall_ns;
      pages += l->reclaim_pages;
    }
    if (const CgroupSample* u = find(snap, unl_id); u != nullptr) {
      unl_count += u->reclaim_count;
      unl_stall_ns += u->reclaim_stall_ns;
    }
    return {};
  };
  if (disk) {
    const std::string base = dir + "/" + uniqueName("file");
    {
      Child w1(lim, -1, [&] { writer(base + "1", std::size_t{256} << 20); });
      Child w2(unl, -1, [&] { writer(base + "2", std::size_t{32} << 20); });
      ASSERT_EQ(w1.wait(), 0);
      ASSERT_EQ(w2.wait(), 0);
    }
    ASSERT_OK(take());
  } else {
    // memory.high throttles the toucher (up to 2 s per return to user space once far above
    // it), so it never finishes quickly: hold it above the limit and poll until reclaim shows,
    // at most 20 s, then kill it.
    std::printf("%s is not disk-backed (initramfs guest): anonymous memory past memory.high\n",
                dir.c_str());
    ASSERT_TRUE(writeFile(lim_mem + "/memory.high", std::to_string(8 << 20)));
    Child w1(lim, -1, [] {
      toucher(16);
      ::pause();
    });
    Child w2(unl, -1, [] { toucher(16); });
    ASSERT_EQ(w2.wait(), 0);
    for (int i = 0; i < 80 && count == 0; ++i) {
      std::this_thread::sleep_for(250ms);
      ASSERT_OK(take());
    }
  }
  std::printf(
      "limited: reclaims=%llu stall=%lluus pages=%llu\n", static_cast<unsigned long long>(count),
      static_cast<unsigned long long>(stall_ns / 1000), static_cast<unsigned long long>(pages));
  EXPECT_GT(count, 0u);
  EXPECT_GT(stall_ns, 0u);
  if (disk) {
    EXPECT_GT(pages, 0u);  // clean page cache is always reclaimable
  }
  EXPECT_EQ(unl_count, 0u);
  EXPECT_EQ(unl_stall_ns, 0u);
}

TEST_F(CollectorTest, V2ModeKeysByUnifiedCgroupInode) {
  if (hier_.unified.empty()) {
    GTEST_SKIP() << "no cgroup2 hierarchy mounted";
  }
  CollectorOptions opts;
  opts.force_mode = CgroupMode::V2;
  MAKE_COLLECTOR_OR_SKIP(col, opts);
  EXPECT_EQ(col.hierarchyRoot(), hier_.unified);
  TestCgroup v2({hier_.unified}, uniqueName("v2"));
  const std::string dir = v2.dirIn(hier_.unified);
  const uint64_t id = ASSERT_OK(cgroup::cgroupId(dir));
  EXPECT_EQ(id, ASSERT_OK(cgroup::cgroupIdFromHandle(dir)));
  ASSERT_OK(col.snapshot());
  {
    Child c(v2, -1, [] { spinFor(300ms); });
    ASSERT_EQ(c.wait(), 0);
  }
  // An exiting task wakes its parent (exit_notify) before its own last switch, which is where
  // BPF accounts its last slice: under TCG that gap is milliseconds, so wait it out.
  std::this_thread::sleep_for(100ms);
  const Snapshot snap = ASSERT_OK(col.snapshot());
  EXPECT_EQ(snap.mode, CgroupMode::V2);
  const CgroupSample* s = find(snap, id);
  ASSERT_NE(s, nullptr) << "no sample keyed by the unified cgroup's inode";
  EXPECT_EQ(s->path, "/" + uniqueName("v2"));
  // The kernel's own account of the same CPU time (cpu.stat usage_usec, cgroup2 core file):
  // the BPF sum of ended slices must agree with it. Not "most of the 300 ms spin": under TCG
  // a loaded host can leave the guest task only a few percent of the wall time.
  const uint64_t usage_us = usageNsIn(dir + "/cpu.stat") / 1000;
  std::printf("v2 spinner: bpf oncpu=%lluus cpu.stat usage=%lluus\n",
              static_cast<unsigned long long>(s->oncpu_ns / 1000),
              static_cast<unsigned long long>(usage_us));
  ASSERT_GT(usage_us, 1000u) << "the spinner ran";
  EXPECT_GE(s->oncpu_ns, usage_us * 1000 / 2);
  EXPECT_LE(s->oncpu_ns, usage_us * 1000 * 3 / 2);
  EXPECT_GT(s->runq.count, 0u);
  // PSI is read from the unified hierarchy when present.
  if (::access((dir + "/cpu.pressure").c_str(), R_OK) == 0) {
    EXPECT_TRUE(s->cpu_pressure.has_value());
  }
}

TEST_F(CollectorTest, VanishedCgroupsLeaveNoMapEntries) {
  MAKE_COLLECTOR_OR_SKIP(col);
  const std::string root = col.hierarchyRoot();
  auto cg = std::make_unique<TestCgroup>(std::vector<std::string>{root}, uniqueName("vanish"));
  const uint64_t id = ASSERT_OK(cgroup::cgroupId(cg->dirIn(root)));
  {
    Child c(*cg, -1, [] { spinFor(100ms); });
    ASSERT_EQ(c.wait(), 0);
  }
  const Snapshot before = ASSERT_OK(col.snapshot());
  ASSERT_NE(find(before, id), nullptr);
  auto ids = ASSERT_OK(col.trackedCgroupIds());
  ASSERT_TRUE(std::binary_search(ids.begin(), ids.end(), id));
  const uint64_t pruned_before = before.stats.pruned_cgroups;
  cg->removeNow();
  bool gone = false;
  for (int i = 0; i < 15 && !gone; ++i) {
    std::this_thread::sleep_for(20ms);
    const Snapshot s = ASSERT_OK(col.snapshot());
    EXPECT_EQ(find(s, id), nullptr) << "a removed cgroup must not be reported";
    ids = ASSERT_OK(col.trackedCgroupIds());
    gone = !std::binary_search(ids.begin(), ids.end(), id);
    if (gone) {
      EXPECT_GT(s.stats.pruned_cgroups, pruned_before);
    }
  }
  EXPECT_TRUE(gone) << "map entry for removed cgroup " << id << " was not pruned";
}

// cg_sched is an array of max_cgroups slots; a vanished cgroup's slot must come back (zeroed)
// for new cgroups, or a node with container churn runs out after max_cgroups creations.
// Creates more cgroups than there are slots in all, a batch at a time (so it fails without
// recycling even if no existing cgroup ever takes a slot), and checks that every one is
// measured from zero and nothing is dropped. Run twice: with the kernel's sums as this kernel
// allows them, and with the summing iterator refused (then cgsched writes no CPU marks, and the
// hand-back must zero every CPU's copy: session 41's 6.18 guest refused it, and a recycled slot
// kept its last cgroup's counts, 2-3x the kernel's usage).
void CollectorTest::slotsAreReusedFromZero(int kernel_sums_refusal) {
  const std::string root = cpuRoot();
  auto existing = cgroup::listCgroups(root, 1 << 20);
  ASSERT_TRUE(existing.has_value()) << existing.error().message();
  constexpr uint32_t kSpare = 24;
  constexpr uint32_t kBatch = 8;
  CollectorOptions opts;
  opts.max_cgroups = static_cast<uint32_t>(existing->size()) + kSpare;
  opts.kernel_sums_refusal = kernel_sums_refusal;
  const uint32_t rounds = opts.max_cgroups / kBatch + 2;
  MAKE_COLLECTOR_OR_SKIP(col, opts);
  if (kernel_sums_refusal != 0) {
    ASSERT_FALSE(col.kernelSums()) << col.readNote();
  }
  // The kernel's own CPU time of each cgroup: cpu.stat usage_usec on v2, cpuacct.usage (ns)
  // on v1, where cpuacct may be a hierarchy of its own.
  std::vector<std::string> roots{root};
  const std::string acct = v2() || hier_.cpuacct.empty() ? root : hier_.cpuacct;
  if (acct != root) {
    roots.push_back(acct);
  }
  auto usageNs = [&](const TestCgroup& cg) -> uint64_t {
    return usageNsIn(v2() ? cg.dirIn(root) + "/cpu.stat" : cg.dirIn(acct) + "/cpuacct.usage");
  };
  const uint64_t drops_before = ASSERT_OK(col.snapshot()).stats.map_drops;
  for (uint32_t round = 0; round < rounds; ++round) {
    std::vector<std::unique_ptr<TestCgroup>> cgs;
    std::vector<uint64_t> ids;
    for (uint32_t i = 0; i < kBatch; ++i) {
      cgs.push_back(std::make_unique<TestCgroup>(
          roots, uniqueName("slot" + std::to_string(round) + "-" + std::to_string(i))));
      ids.push_back(ASSERT_OK(cgroup::cgroupId(cgs.back()->dirIn(root))));
      Child c(*cgs.back(), -1, [] { spinFor(10ms); });
      ASSERT_EQ(c.wait(), 0);
    }
    // An exiting task's last slice is accounted at its last switch, after it woke its parent
    // (milliseconds later under TCG): wait it out.
    std::this_thread::sleep_for(100ms);
    const Snapshot s = ASSERT_OK(col.snapshot());
    for (uint32_t i = 0; i < kBatch; ++i) {
      const CgroupSample* cs = find(s, ids[i]);
      ASSERT_NE(cs, nullptr) << "round " << round << " cgroup " << i << " not measured";
      // Its own CPU time only: a recycled slot's leftovers (another such spinner's time)
      // would push it well past the kernel's account of this cgroup.
      const uint64_t usage = usageNs(*cgs[i]);
      EXPECT_GT(cs->oncpu_ns, 0U) << "round " << round << " cgroup " << i;
      EXPECT_LE(cs->oncpu_ns, usage * 3 / 2 + 1'000'000U)
          << "round " << round << " cgroup " << i << " kernel usage " << usage << " ns";
    }
    for (auto& cg : cgs) {
      cg->removeNow();
    }
    // The first snapshot prunes the ids, the next hands their slots back.
    for (int i = 0; i < 3; ++i) {
      std::this_thread::sleep_for(20ms);
      ASSERT_OK(col.snapshot());
    }
  }
  EXPECT_EQ(ASSERT_OK(col.snapshot()).stats.map_drops, drops_before)
      << "slots of removed cgroups were not recycled";
}

// A snapshot handed back (Collector::recycle) lends the next one its buffer and nothing else:
// a cgroup that ran before it and not since reports no activity in the next, and one that ran
// again reports its new interval alone, under its own path.
TEST_F(CollectorTest, ARecycledSnapshotCarriesNothingIntoTheNext) {
  MAKE_COLLECTOR_OR_SKIP(col);
  const std::string root = col.hierarchyRoot();
  TestCgroup a(std::vector<std::string>{root}, uniqueName("recycle-a"));
  TestCgroup b(std::vector<std::string>{root}, uniqueName("recycle-b"));
  const uint64_t a_id = ASSERT_OK(cgroup::cgroupId(a.dirIn(root)));
  const uint64_t b_id = ASSERT_OK(cgroup::cgroupId(b.dirIn(root)));
  for (TestCgroup* cg : {&a, &b}) {
    Child c(*cg, -1, [] { spinFor(50ms); });
    ASSERT_EQ(c.wait(), 0);
  }
  std::this_thread::sleep_for(100ms);  // an exiting task's last slice is counted at its switch
  Snapshot first = ASSERT_OK(col.snapshot());
  ASSERT_NE(find(first, a_id), nullptr);
  ASSERT_NE(find(first, b_id), nullptr);
  const CgroupSample* buffer = first.cgroups.data();
  const size_t capacity = first.cgroups.capacity();
  col.recycle(std::move(first));

  {
    Child c(b, -1, [] { spinFor(10ms); });
    ASSERT_EQ(c.wait(), 0);
  }
  std::this_thread::sleep_for(100ms);
  const Snapshot second = ASSERT_OK(col.snapshot());
  if (second.cgroups.size() <= capacity) {
    EXPECT_EQ(second.cgroups.data(), buffer) << "the recycled buffer was not reused";
  }
  if (const CgroupSample* sa = find(second, a_id); sa != nullptr) {
    EXPECT_EQ(sa->oncpu_ns, 0U) << "a's first interval carried into the second";
    EXPECT_EQ(sa->involuntary_switches, 0U);
  }
  const CgroupSample* sb = find(second, b_id);
  ASSERT_NE(sb, nullptr);
  EXPECT_GT(sb->oncpu_ns, 0U);
  // Its 10 ms of this interval, not the 50 ms of the last one on top.
  EXPECT_LT(sb->oncpu_ns, 40'000'000U);
  EXPECT_NE(sb->path.find("recycle-b"), std::string::npos) << sb->path;
}

TEST_F(CollectorTest, SlotsOfVanishedCgroupsAreReusedFromZero) { slotsAreReusedFromZero(0); }

TEST_F(CollectorTest, SlotsOfVanishedCgroupsAreReusedFromZeroWithoutTheKernelsSums) {
  slotsAreReusedFromZero(EPERM);
}

// A BPF map deletion can fail (the kernel returns ENOMEM/EBUSY under pressure); the collector
// must count it, keep the entry's id out of the reports, retry at every snapshot, and finish the
// job once the kernel lets it: the entry deleted and the cgroup's slot handed back. The
// failures are injected through CollectorOptions::cleanup_fault, in front of the real maps.
TEST_F(CollectorTest, FailedMapDeletionsAreCountedAndRetriedUntilDone) {
  struct Fault {
    std::atomic<int> err{0};             // errno to fail with; 0: no fault
    std::atomic<bool> only_free{false};  // fail only the slot's hand-back (free_slots)
    std::mutex mu;
    std::set<std::string> seen;  // maps the collector wrote to while faults were on
  };
  auto fault = std::make_shared<Fault>();
  CollectorOptions opts;
  opts.cleanup_fault = [fault](std::string_view map) {
    const int err = fault->err.load();
    if (err == 0 || (fault->only_free.load() && map != "free_slots")) {
      return 0;
    }
    std::lock_guard<std::mutex> lock(fault->mu);
    fault->seen.emplace(map);
    return err;
  };
  MAKE_COLLECTOR_OR_SKIP(col, opts);
  const std::string root = col.hierarchyRoot();
  auto cg = std::make_unique<TestCgroup>(std::vector<std::string>{root}, uniqueName("undeletable"));
  const uint64_t id = ASSERT_OK(cgroup::cgroupId(cg->dirIn(root)));
  {
    Child c(*cg, -1, [] { spinFor(100ms); });
    ASSERT_EQ(c.wait(), 0);
  }
  std::this_thread::sleep_for(50ms);
  const Snapshot before = ASSERT_OK(col.snapshot());
  ASSERT_NE(find(before, id), nullptr);
  const uint64_t drops_before = before.stats.map_drops;
  auto tracked = [&col](uint64_t want) {
    auto ids = col.trackedCgroupIds();
    return ids.has_value() && std::binary_search(ids->begin(), ids->end(), want);
  };
  ASSERT_TRUE(tracked(id));

  // Every cleanup write fails: the pruning (within kVerifyEveryTicks snapshots) fails.
  fault->err = EBUSY;
  cg->removeNow();
  Snapshot s = ASSERT_OK(col.snapshot());
  for (int i = 0; i < 20 && s.stats.map_delete_errors == before.stats.map_delete_errors; ++i) {
    std::this_thread::sleep_for(20ms);
    s = ASSERT_OK(col.snapshot());
    EXPECT_EQ(find(s, id), nullptr) << "a removed cgroup must not be reported";
  }
  ASSERT_GT(s.stats.map_delete_errors, before.stats.map_delete_errors)
      << "the removed cgroup was never pruned";
  EXPECT_GE(s.stats.map_deletes_pending, 1u);
  EXPECT_TRUE(tracked(id)) << "the entry is still in the map (its deletion failed)";
  // Retried at every snapshot, still failing: counted each time, still pending, not reported,
  // and not counted as pruned.
  for (int i = 0; i < 3; ++i) {
    const Snapshot again = ASSERT_OK(col.snapshot());
    EXPECT_GT(again.stats.map_delete_errors, s.stats.map_delete_errors) << "not retried";
    EXPECT_GE(again.stats.map_deletes_pending, 1u);
    EXPECT_EQ(again.stats.pruned_cgroups, s.stats.pruned_cgroups);
    EXPECT_EQ(find(again, id), nullptr);
    s = again;
  }
  EXPECT_TRUE(tracked(id));
  {
    std::lock_guard<std::mutex> lock(fault->mu);
    EXPECT_TRUE(fault->seen.contains("cg_slots"));
  }

  // The kernel lets go, except for the slot's hand-back: the deletion lands at the next
  // snapshot (the id leaves the map) and the slot goes to quarantine; the snapshot after that
  // tries to hand it back and fails, and keeps trying.
  fault->only_free = true;
  s = ASSERT_OK(col.snapshot());
  EXPECT_FALSE(tracked(id)) << "the retried deletion did not land";
  EXPECT_GT(s.stats.pruned_cgroups, before.stats.pruned_cgroups);
  uint64_t errors = s.stats.map_delete_errors;
  for (int i = 0; i < 2; ++i) {
    s = ASSERT_OK(col.snapshot());
    EXPECT_GT(s.stats.map_delete_errors, errors) << "the slot's hand-back was not retried";
    EXPECT_GE(s.stats.map_deletes_pending, 1u);
    errors = s.stats.map_delete_errors;
  }
  {
    std::lock_guard<std::mutex> lock(fault->mu);
    EXPECT_TRUE(fault->seen.contains("free_slots"));
  }

  // All clear: the slot goes back, nothing is pending, and the error count stops growing.
  fault->err = 0;
  s = ASSERT_OK(col.snapshot());
  EXPECT_EQ(s.stats.map_deletes_pending, 0u);
  errors = s.stats.map_delete_errors;
  for (int i = 0; i < 2; ++i) {
    std::this_thread::sleep_for(20ms);
    s = ASSERT_OK(col.snapshot());
  }
  EXPECT_EQ(s.stats.map_delete_errors, errors);
  EXPECT_EQ(s.stats.map_deletes_pending, 0u);
  EXPECT_EQ(s.stats.map_drops, drops_before);
}

// A preempted task can resume on another CPU: the balancer (or a setaffinity, here) moves it
// while it waits. Its wait after the preemption must be counted once, in full (from the
// preemption, not from its arrival on the new CPU's queue, where the kernel restarts
// sched_info.last_queued), and in its own cgroup. The victim spins behind a hog of 256x its
// weight on CPU 1 and is moved to CPU 0 and back, 10 times; the kernel's own sum of its
// run-queue waits (/proc/<pid>/schedstat run_delay, which does add the part before each move)
// is the reference.
TEST_F(CollectorTest, PreemptedVictimMigratedToAnotherCpuKeepsItsWait) {
  if (const std::string why = noCpuController(); !why.empty()) {
    GTEST_SKIP() << why;
  }
  cpu_set_t mine;
  CPU_ZERO(&mine);
  if (::sched_getaffinity(0, sizeof(mine), &mine) != 0 || !CPU_ISSET(0, &mine) ||
      !CPU_ISSET(kCpu, &mine)) {
    GTEST_SKIP() << "needs CPUs 0 and " << kCpu << " to move the victim between them";
  }
  if (::access("/proc/self/schedstat", R_OK) != 0) {
    GTEST_SKIP() << "no /proc/<pid>/schedstat (CONFIG_SCHED_INFO): no reference to compare with";
  }
  MAKE_COLLECTOR_OR_SKIP(col);
  const std::string cpu_root = cpuRoot();
  TestCgroup v(cpuRoots(), uniqueName("migrated-victim"));
  TestCgroup h(cpuRoots(), uniqueName("migrated-hog"));
  ASSERT_TRUE(setWeight(h.dirIn(cpu_root), 262144));
  if (v2() ? v2Controller("cpuset") : !hier_.cpuset.empty()) {
    // The victim's cpuset must allow both CPUs (v1: a new cpuset is empty).
    const std::string vdir = v.dirIn(cpusetRoot());
    ASSERT_TRUE(writeFile(vdir + "/cpuset.cpus", "0," + std::to_string(kCpu)));
    ASSERT_TRUE(v2() ||
                writeFile(vdir + "/cpuset.mems", readFirstLine(hier_.cpuset + "/cpuset.mems")));
    ASSERT_TRUE(pinCpuset(h.dirIn(cpusetRoot()), kCpu));
  }
  const uint64_t v_id = ASSERT_OK(cgroup::cgroupId(v.dirIn(cpu_root)));
  auto affinity = [](pid_t pid) {
    cpu_set_t set;
    CPU_ZERO(&set);
    if (::sched_getaffinity(pid, sizeof(set), &set) != 0) {
      return -1;
    }
    return CPU_COUNT(&set) == 1 && CPU_ISSET(kCpu, &set) ? kCpu : -1;
  };

  // The victim first, alone: it joins its cgroup and pins itself to CPU 1, and what it waited
  // before that (in the parent's cgroup) is taken out of the reference (rd0).
  Child victim(v, kCpu, [] { hog(); });
  for (int i = 0; i < 200 && affinity(victim.pid()) != kCpu; ++i) {
    std::this_thread::sleep_for(5ms);
  }
  ASSERT_EQ(affinity(victim.pid()), kCpu) << "the victim did not set itself up";
  std::this_thread::sleep_for(20ms);
  const uint64_t rd0 = taskSchedstat(victim.pid()).waited_ns;
  ASSERT_OK(col.snapshot());

  uint64_t invol = 0, waits = 0, preempted_wait_ns = 0, total_ns = 0, drops = 0;
  auto add = [&](const Snapshot& snap) {
    drops = snap.stats.map_drops;
    if (const CgroupSample* c = find(snap, v_id); c != nullptr) {
      invol += c->involuntary_switches;
      waits += c->preempted_waits;
      preempted_wait_ns += c->preempted_wait_ns;
      total_ns += c->runq.total_ns;
    }
  };
  add(ASSERT_OK(col.snapshot()));
  const uint64_t drops_before = drops;
  invol = waits = preempted_wait_ns = total_ns = 0;  // from here on, compared with rd - rd0
  Child hogger(h, kCpu, [] { hog(); });
  auto moveTo = [&victim](int cpu) {
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(cpu, &set);
    return ::sched_setaffinity(victim.pid(), sizeof(set), &set) == 0;
  };
  constexpr int kMoves = 10;
  for (int i = 0; i < kMoves; ++i) {
    std::this_thread::sleep_for(250ms);  // on CPU 1, mostly queued behind the hog
    add(ASSERT_OK(col.snapshot()));
    ASSERT_TRUE(moveTo(0)) << std::strerror(errno);
    std::this_thread::sleep_for(100ms);
    add(ASSERT_OK(col.snapshot()));
    ASSERT_TRUE(moveTo(kCpu)) << std::strerror(errno);
  }
  // The victim dies where it is (behind the hog, or still on CPU 0): the hog is stopped so
  // that it gets the CPU to exit. Its schedstat is read from the zombie, before the reap.
  hogger.signal(SIGSTOP);
  victim.signal(SIGKILL);
  siginfo_t info{};
  ASSERT_EQ(::waitid(P_PID, static_cast<id_t>(victim.pid()), &info, WEXITED | WNOWAIT), 0);
  const TaskSchedstat st = taskSchedstat(victim.pid());
  const uint64_t exec_ns = st.ran_ns;
  const uint64_t rd1 = st.waited_ns;
  const uint64_t kernel_invol = nonvoluntarySwitches(victim.pid());
  hogger.signal(SIGCONT);
  std::this_thread::sleep_for(50ms);
  add(ASSERT_OK(col.snapshot()));
  const uint64_t ref_ns = rd1 - rd0;
  std::printf(
      "victim: involuntary=%llu (kernel %llu) preempted_waits=%llu "
      "preempted_wait=%.1fms runq_total=%.1fms | kernel run_delay=%.1fms "
      "(%.1fms before the test) on-cpu=%.1fms\n",
      static_cast<unsigned long long>(invol), static_cast<unsigned long long>(kernel_invol),
      static_cast<unsigned long long>(waits), static_cast<double>(preempted_wait_ns) / 1e6,
      static_cast<double>(total_ns) / 1e6, static_cast<double>(ref_ns) / 1e6,
      static_cast<double>(rd0) / 1e6, static_cast<double>(exec_ns) / 1e6);
  ASSERT_GT(ref_ns, 1'000'000'000u) << "the victim hardly waited: no contention on CPU 1";
  ASSERT_GT(invol, 2u * kMoves);
  // Each preemption's wait is counted once, whichever CPU the victim resumed on. Not exactly:
  // on this host the program is, now and then, not run for a switch at all (seen: a handful of
  // consecutive switches on one CPU missing from a log of every switch, while the kernel's own
  // counters have them; no recursion miss counted), and a switch-in it did not see leaves that
  // preemption's wait uncounted. Counted per CPU instead (the design before), a victim that
  // resumed on the other CPU was missed each time that CPU's count of its cgroup read 0.
  // (+1: a preemption just before the first counted snapshot is resumed just after it.) Under
  // CI's parallel load up to 4 of ~50 were seen missed (3 allowed before), and 9 of 53 in
  // session 51's CI on a host with other guests' steal (the wait sums below agreed to 0.1 ms):
  // the per-CPU design lost about half, so a fifth still tells them apart, and the wait sums
  // below are the check.
  EXPECT_LE(waits, invol + 1);
  EXPECT_LE(invol, waits + std::max<uint64_t>(5, invol / 5));
  // In full: all of the victim's waiting here followed a preemption (it never sleeps), so the
  // sums agree with the kernel's (the same rq clocks; what differs is the moves' own µs, clock
  // skew between CPUs, and the odd missed switch). Counted from the arrival on the new CPU
  // instead, the wait before each move to CPU 0 (most of the 250 ms) is lost: about 0.6 of it.
  EXPECT_GE(static_cast<double>(preempted_wait_ns), 0.85 * static_cast<double>(ref_ns));
  EXPECT_LE(preempted_wait_ns, total_ns);
  EXPECT_GE(static_cast<double>(total_ns), 0.85 * static_cast<double>(ref_ns));
  EXPECT_LE(static_cast<double>(total_ns), 1.05 * static_cast<double>(ref_ns) + 5e6);
  EXPECT_EQ(drops, drops_before);
}

TEST_F(CollectorTest, RawTpFallbackLoadsAndMeasures) {
  CollectorOptions opts;
  opts.force_raw_tp = true;
  opts.wakeup_depth = true;
  MAKE_COLLECTOR_OR_SKIP(col, opts);
  EXPECT_EQ(col.attachKind(), AttachKind::RawTp);
  std::this_thread::sleep_for(200ms);
  const Snapshot s = ASSERT_OK(col.snapshot());
  uint64_t waits = 0;
  uint64_t wakeups = 0;
  for (const auto& c : s.cgroups) {
    waits += c.runq.count;
    wakeups += c.wakeups;
  }
  // Lock skips are not drops: a wakeup program run in an interrupt that lands inside the
  // snapshot's batch read of cg_slots on the same CPU is refused one update (seen once in CI,
  // in the guest, among ~20 wakeups). Reported, and rare next to what was measured: a refusal
  // at every new cgroup's first update would show as one per cgroup.
  std::printf("waits=%llu wakeups=%llu lock_skips=%llu\n", static_cast<unsigned long long>(waits),
              static_cast<unsigned long long>(wakeups),
              static_cast<unsigned long long>(s.stats.map_lock_skips));
  EXPECT_GT(waits, 0u);
  EXPECT_GT(wakeups, 0u);
  EXPECT_EQ(s.stats.map_drops, 0u);
  EXPECT_LE(s.stats.map_lock_skips, 2 + wakeups / 100);
}

// The run-queue diagnostics (wakeup depth, zero-read waits) live in their own per-CPU map,
// sized for every slot only when asked for: without them no wakeup is counted and the maps are
// smaller by at least 24 B x possible CPUs per slot; with them the wakeups are read.
TEST_F(CollectorTest, RunqDiagnosticsAreCountedAndPaidForOnlyWhenAskedFor) {
  CollectorOptions plain;
  plain.max_cgroups = 1024;
  uint64_t plain_bytes = 0;
  {
    MAKE_COLLECTOR_OR_SKIP(col, plain);
    std::this_thread::sleep_for(200ms);
    const Snapshot s = ASSERT_OK(col.snapshot());
    uint64_t waits = 0;
    for (const auto& c : s.cgroups) {
      waits += c.runq.count;
      EXPECT_EQ(c.wakeups, 0u) << c.path;
      EXPECT_EQ(c.runq_depth_sum, 0u) << c.path;
      EXPECT_EQ(c.runq_stale, 0u) << c.path;
    }
    EXPECT_GT(waits, 0u);
    plain_bytes = col.bpfMapBytes();
  }
  CollectorOptions diag = plain;
  diag.wakeup_depth = true;
  MAKE_COLLECTOR_OR_SKIP(col, diag);
  std::this_thread::sleep_for(200ms);
  const Snapshot s = ASSERT_OK(col.snapshot());
  uint64_t wakeups = 0;
  uint64_t depth = 0;
  for (const auto& c : s.cgroups) {
    wakeups += c.wakeups;
    depth += c.runq_depth_sum;
  }
  EXPECT_GT(wakeups, 0u);
  EXPECT_GE(depth, wakeups) << "the woken task is on its run queue: depth >= 1 at each wakeup";
  EXPECT_EQ(s.stats.diag_read_errors, 0u);
  const auto ncpu = static_cast<uint64_t>(libbpf_num_possible_cpus());
  EXPECT_GE(col.bpfMapBytes(), plain_bytes + 24 * ncpu * (1024 - 1));
}

// cg_sched keeps a copy per present CPU (CollectorOptions::sched_cpus). A CPU past them, as one
// brought online after colod started, is counted once in unmeasured_cpus and what runs there is
// not measured (nor written out of the array); the CPUs within are measured as before.
TEST_F(CollectorTest, ACpuPastTheCopiesIsCountedAndNotMeasured) {
  if (::sysconf(_SC_NPROCESSORS_ONLN) < 2) {
    GTEST_SKIP() << "needs CPUs 0 and 1 online";
  }
  CollectorOptions opts;
  opts.sched_cpus = 1;
  MAKE_COLLECTOR_OR_SKIP(col, opts);
  const std::string root = col.hierarchyRoot();
  TestCgroup on0({root}, uniqueName("cpu0"));
  TestCgroup on1({root}, uniqueName("cpu1"));
  const uint64_t id0 = ASSERT_OK(cgroup::cgroupId(on0.dirIn(root)));
  const uint64_t id1 = ASSERT_OK(cgroup::cgroupId(on1.dirIn(root)));
  SharedWithChildren<CpuTimeSplit> split;
  ASSERT_TRUE(split.ok());
  {
    Child a(on0, 0, [&split] { spinCpuForOn(200ms, 0, split.operator->()); });
    Child b(on1, 1, [] { spinFor(200ms); });
    ASSERT_EQ(a.wait(), 0);
    ASSERT_EQ(b.wait(), 0);
  }
  const Snapshot s = ASSERT_OK(col.snapshot());
  EXPECT_EQ(s.stats.sched_cpus, 1u);
  EXPECT_EQ(s.stats.unmeasured_cpus, 1u) << "CPU 1, once, however many switches it made";
  EXPECT_EQ(s.stats.map_drops, 0u) << "not a full map";
  // A child's last slice is credited at its final switch, which may come after its parent was
  // woken by its exit: the intervals are summed until it has landed.
  auto oncpu = [](const Snapshot& snap, uint64_t id) {
    const CgroupSample* c = find(snap, id);
    return c == nullptr ? uint64_t{0} : c->oncpu_ns;
  };
  ASSERT_NE(find(s, id0), nullptr);
  uint64_t a_ns = oncpu(s, id0);
  uint64_t b_ns = oncpu(s, id1);
  // What the child ran on CPU 0 by its own clock: it stays there (its affinity holds).
  const uint64_t on0_ns = split->on_ns;
  for (int i = 0; i < 40 && a_ns < on0_ns * 9 / 10; ++i) {
    std::this_thread::sleep_for(50ms);
    const Snapshot more = ASSERT_OK(col.snapshot());
    a_ns += oncpu(more, id0);
    b_ns += oncpu(more, id1);
  }
  EXPECT_GE(on0_ns, 150'000'000u) << "the child ran " << split->elsewhere_ns / 1'000'000
                                  << " ms off CPU 0 despite its affinity";
  // All of it, within a tenth (a test that asserted only "some" hid a real undercount for two
  // sessions: a preempted child's last switch-in went untraced on the sandbox kernel, and the
  // slice was credited from a start the kernel had reset; see unseen_switch_privileged_test.cpp).
  EXPECT_GE(a_ns, on0_ns * 9 / 10) << "child on CPU 0: " << on0_ns / 1'000'000 << " ms";
  // Only what ran on CPU 0 before the child pinned itself to CPU 1 (fork, cgroup join).
  EXPECT_LT(b_ns, 20'000'000u);
}

}  // namespace
}  // namespace colod::collect
