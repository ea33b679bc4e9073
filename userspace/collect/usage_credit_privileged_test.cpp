// SPDX-License-Identifier: Apache-2.0
// Privileged tests of the CPU time the collector reports for cgroups whose tasks keep their
// CPUs, over real cgroups and real spinners. BPF credits a slice at switch-out, so a task that
// keeps its CPU is credited in lumps, up to a second apart on a quiet CPU, and reads 0 in
// between: a busy LS read as idle spared a batch job at admission (session 35), and a busy BE
// read as idle let a new one be placed onto its CPU without a quota (session 36). A cgroup seen
// running long slices has its time read from its usage counter, which the kernel advances at
// every scheduler tick: v2 cpu.stat usage_usec, v1 cpuacct.usage, or the unified cpu.stat on a
// hybrid host whose cgroup has no cpuacct directory.
#include <sched.h>
#include <unistd.h>

#include <sstream>
#include <utility>
#include <vector>

#include "collector_test_fixture.h"

namespace colod::collect {
namespace {

using namespace std::chrono_literals;

enum class Where {
  HostLayout,     // the host's own layout (v1 hybrid here: cpuacct.usage)
  V1NoCpuacct,    // v1, the cgroup made in the cpu and unified hierarchies only
  ForcedUnified,  // the collector in v2 mode over the unified hierarchy of a hybrid host
};

// The spinner runs on the last CPU and this thread (the snapshots) on the first: nothing of the
// test preempts the spinner, so BPF sees it switch out only when something else runs there.
class UsageTest : public CollectorTest {
 protected:
  void SetUp() override {
    CollectorTest::SetUp();
    const int ncpu = static_cast<int>(::sysconf(_SC_NPROCESSORS_ONLN));
    spin_cpu_ = ncpu > 1 ? ncpu - 1 : -1;
    if (spin_cpu_ > 0 && ::sched_getaffinity(0, sizeof(saved_), &saved_) == 0) {
      cpu_set_t first;
      CPU_ZERO(&first);
      CPU_SET(0, &first);
      pinned_ = ::sched_setaffinity(0, sizeof(first), &first) == 0;
    }
  }
  void TearDown() override {
    if (pinned_) {
      ::sched_setaffinity(0, sizeof(saved_), &saved_);
    }
  }
  // One spinner's sample of snapshot `i`: reported, with some CPU time. True when that time
  // came from the usage counter. The bound of one CPU's time is checked over the run (below).
  bool checkSpinner(const Snapshot& s, const CgroupSample* x, int i) {
    if (x == nullptr) {
      ADD_FAILURE() << "snapshot " << i << ": the spinner was not reported";
      return false;
    }
    EXPECT_GT(x->oncpu_ns, 0u) << "snapshot " << i;
    credited_.push_back(
        {static_cast<double>(x->oncpu_ns), static_cast<double>(s.interval.count())});
    return x->oncpu_from_usage;
  }
  // At most one CPU's time: each interval within 10 % of its length (the interval is the
  // snapshots' own, a late wakeup here lengthens it). The counter and the clock are read at
  // slightly different moments, and a slow guest (TCG) stretches that gap, moving time from one
  // interval to the next (99 then 128 ms in 112 ms, CI of session 43): an interval over the
  // bound passes when it and its neighbour together are within 5 % of their length. Time
  // counted twice doubles a pair and still fails.
  void expectAtMostOneCpu() const {
    for (std::size_t i = 0; i < credited_.size(); ++i) {
      const auto [ns, len] = credited_[i];
      if (ns <= 1.1 * len) {
        continue;
      }
      bool evened = false;
      for (std::size_t j : {i - 1, i + 1}) {
        if (j < credited_.size() && ns + credited_[j].first <= 1.05 * (len + credited_[j].second)) {
          evened = true;
        }
      }
      EXPECT_TRUE(evened)
          << "snapshot " << i << ": " << ns / 1e6 << " ms in a " << len / 1e6
          << "-ms interval, not evened out by a neighbour: more than one CPU's time";
    }
  }
  int spin_cpu_ = -1;

 private:
  cpu_set_t saved_{};
  bool pinned_ = false;
  std::vector<std::pair<double, double>> credited_;  // (ns credited, interval ns) per snapshot
};

class UsageCreditTest : public UsageTest, public ::testing::WithParamInterface<Where> {};

std::string whereName(const ::testing::TestParamInfo<Where>& p) {
  switch (p.param) {
    case Where::HostLayout:
      return "HostLayout";
    case Where::V1NoCpuacct:
      return "V1NoCpuacct";
    case Where::ForcedUnified:
      return "ForcedUnified";
  }
  return "Unknown";
}

// With every cgroup that ran marked (long_slice_ns 1), a spinner alone on a CPU is reported at
// every snapshot with the CPU time it used in that interval (at most the interval: one task,
// one CPU), from the usage counter; the sum over the run is the counter's own advance. Without
// the counter most snapshots of a quiet machine do not report it at all. A cgroup whose task
// sleeps is read too, and not reported (it did not run).
TEST_P(UsageCreditTest, ASpinnerIsCreditedWhatItUsedEveryInterval) {
  constexpr int kSnaps = 15;
  constexpr auto kInterval = 100ms;
  CollectorOptions opts;
  opts.long_slice_ns = 1;
  std::vector<std::string> roots;
  std::string id_root;
  std::string usage_root;  // where the test reads the counter the collector should
  std::string usage_file;
  switch (GetParam()) {
    case Where::HostLayout:
      // Not cpuset: a v1 cpuset cgroup takes no task before its cpus and mems are set.
      roots = {cpuRoot()};
      if (!v2()) {
        for (const auto& r : {hier_.cpuacct, hier_.unified}) {
          if (!r.empty() && r != hier_.cpu) {
            roots.push_back(r);
          }
        }
      }
      id_root = cpuRoot();
      usage_root = v2() ? cpuRoot() : hier_.cpuacct;
      usage_file = v2() ? "cpu.stat" : "cpuacct.usage";
      if (!v2() && hier_.cpuacct.empty()) {
        GTEST_SKIP() << "no v1 cpuacct hierarchy on this host";
      }
      break;
    case Where::V1NoCpuacct:
      if (v2() || hier_.unified.empty() || hier_.cpuacct.empty() || hier_.cpuacct == hier_.cpu) {
        GTEST_SKIP() << "needs a hybrid host with cpuacct apart from cpu (this one is "
                     << (v2() ? "pure cgroup2" : "v1 without it") << ")";
      }
      roots = {hier_.cpu, hier_.unified};
      id_root = hier_.cpu;
      usage_root = hier_.unified;
      usage_file = "cpu.stat";
      break;
    case Where::ForcedUnified:
      if (v2() || hier_.unified.empty()) {
        GTEST_SKIP() << "needs a hybrid host (a pure cgroup2 host is HostLayout's case)";
      }
      opts.force_mode = CgroupMode::V2;
      roots = {hier_.unified};
      id_root = hier_.unified;
      usage_root = hier_.unified;
      usage_file = "cpu.stat";
      break;
  }
  MAKE_COLLECTOR_OR_SKIP(col, opts);
  ASSERT_EQ(col.hierarchyRoot(), id_root);
  TestCgroup named(roots, uniqueName("usage-spin"));
  TestCgroup asleep(roots, uniqueName("usage-asleep"));
  const uint64_t named_id = ASSERT_OK(cgroup::cgroupId(named.dirIn(id_root)));
  const uint64_t asleep_id = ASSERT_OK(cgroup::cgroupId(asleep.dirIn(id_root)));
  Child spin(named, spin_cpu_, [] { spinFor(60s); });
  Child sleeper(asleep, -1, [] { ::pause(); });
  std::this_thread::sleep_for(200ms);  // both have run: each cgroup has its slot
  ASSERT_OK(col.snapshot());           // both marked (they ran), their counters read
  const std::string counter = named.dirIn(usage_root) + "/" + usage_file;
  const uint64_t before = usageNsIn(counter);
  const uint64_t opens_before = ASSERT_OK(col.snapshot()).stats.cgroup_file_opens;
  uint64_t opens_after = opens_before;
  std::vector<uint64_t> named_ms;
  uint64_t sum = 0;
  int from_usage = 0;
  int asleep_seen = 0;
  for (int i = 0; i < kSnaps; ++i) {
    std::this_thread::sleep_for(kInterval);
    const Snapshot s = ASSERT_OK(col.snapshot());
    const CgroupSample* n = find(s, named_id);
    asleep_seen += find(s, asleep_id) != nullptr ? 1 : 0;
    named_ms.push_back(n != nullptr ? n->oncpu_ns / 1'000'000 : 0);
    from_usage += checkSpinner(s, n, i) ? 1 : 0;
    sum += n != nullptr ? n->oncpu_ns : 0;
    opens_after = s.stats.cgroup_file_opens;
  }
  const uint64_t after = usageNsIn(counter);
  std::ostringstream line;
  for (std::size_t i = 0; i < named_ms.size(); ++i) {
    line << " " << named_ms[i];
  }
  std::printf("ms of the spinner (CPU %d) per %lld-ms interval:%s\n", spin_cpu_,
              static_cast<long long>(kInterval.count()), line.str().c_str());
  EXPECT_EQ(from_usage, kSnaps);
  expectAtMostOneCpu();
  EXPECT_EQ(asleep_seen, 0) << "a cgroup that did not run was reported";
  // Both cgroups' counters stay open; a missing cpuacct directory is not looked for each tick
  // (before: one failed open per marked cgroup and snapshot, 30 here).
  EXPECT_LT(opens_after - opens_before, static_cast<uint64_t>(kSnaps))
      << "control files opened again and again over " << kSnaps << " snapshots";
  // The counter as the test read it brackets the snapshots' reads of it.
  ASSERT_GT(after, before) << "the spinner did not run";
  EXPECT_LE(sum, after - before);
  EXPECT_GE(sum, (after - before) / 2);
}

class UsageSourceTest : public UsageTest {};

// At the collector's own threshold: a spinner alone on a CPU is marked by its first long slice
// and from then on credited at every snapshot. On a loaded machine it is preempted every few
// ms, its BPF credit comes every interval and it may never be marked: every interval is checked
// either way (how many came from the counter is printed).
TEST_F(UsageSourceTest, ASpinnerAloneOnItsCpuIsCreditedEveryInterval) {
  constexpr int kSnaps = 15;
  MAKE_COLLECTOR_OR_SKIP(col);
  const std::string root = col.hierarchyRoot();
  std::vector<std::string> roots{root};
  if (!v2()) {
    for (const auto& r : {hier_.cpuacct, hier_.unified}) {
      if (!r.empty() && r != hier_.cpu) {
        roots.push_back(r);
      }
    }
  }
  TestCgroup cg(roots, uniqueName("usage-alone"));
  const uint64_t id = ASSERT_OK(cgroup::cgroupId(cg.dirIn(root)));
  Child spin(cg, spin_cpu_, [] { spinFor(60s); });
  // Marked at its first switch-out after a long slice: up to a second on a quiet CPU.
  bool marked = false;
  for (int i = 0; i < 30 && !marked; ++i) {
    std::this_thread::sleep_for(100ms);
    const Snapshot s = ASSERT_OK(col.snapshot());
    const CgroupSample* x = find(s, id);
    marked = x != nullptr && x->oncpu_from_usage;
  }
  int from_usage = 0;
  std::ostringstream line;
  for (int i = 0; i < kSnaps; ++i) {
    std::this_thread::sleep_for(100ms);
    const Snapshot s = ASSERT_OK(col.snapshot());
    const CgroupSample* x = find(s, id);
    line << " " << (x != nullptr ? x->oncpu_ns / 1'000'000 : 0)
         << (x != nullptr && x->oncpu_from_usage ? "u" : "b");
    from_usage += checkSpinner(s, x, i) ? 1 : 0;
  }
  std::printf(
      "ms of the spinner (CPU %d) per 100-ms interval (u: usage counter, b: BPF):%s; "
      "marked in the warm-up: %s, %d of %d from the counter\n",
      spin_cpu_, line.str().c_str(), marked ? "yes" : "no", from_usage, kSnaps);
  expectAtMostOneCpu();
}

// A v1 cgroup read from cpuacct.usage whose cpuacct directory goes away is read from the
// unified cpu.stat from then on. The two count from when the task joined each hierarchy: here
// the unified one has 300 ms more, which must not be credited as one interval's CPU time.
TEST_F(UsageSourceTest, AUsageCounterFromAnotherFileIsNotSubtractedFromTheFirst) {
  if (v2() || hier_.unified.empty() || hier_.cpuacct.empty() || hier_.cpuacct == hier_.cpu) {
    GTEST_SKIP() << "needs a hybrid host with cpuacct apart from cpu (this one is "
                 << (v2() ? "pure cgroup2" : "v1 without it") << ")";
  }
  CollectorOptions opts;
  opts.long_slice_ns = 1;  // marked from its first snapshot
  MAKE_COLLECTOR_OR_SKIP(col, opts);
  const std::string name = uniqueName("usage-switch");
  TestCgroup named({hier_.cpu, hier_.unified}, name);
  const uint64_t id = ASSERT_OK(cgroup::cgroupId(named.dirIn(hier_.cpu)));
  Child spin(named, -1, [] { spinFor(60s); });
  std::this_thread::sleep_for(300ms);  // the unified counter runs ahead
  TestCgroup acct({hier_.cpuacct}, name);
  ASSERT_TRUE(writeFile(acct.dirIn(hier_.cpuacct) + "/cgroup.procs", std::to_string(spin.pid())));
  struct Seen {
    uint64_t ms = 0;
    bool from_usage = false;
    bool too_much = false;
  };
  auto take = [&](int n, std::vector<Seen>& out) {
    for (int i = 0; i < n; ++i) {
      std::this_thread::sleep_for(100ms);
      const Snapshot s = ASSERT_OK(col.snapshot());
      const CgroupSample* x = find(s, id);
      Seen e;
      if (x != nullptr) {
        e = {x->oncpu_ns / 1'000'000, x->oncpu_from_usage,
             static_cast<double>(x->oncpu_ns) > 1.1 * static_cast<double>(s.interval.count())};
      }
      out.push_back(e);
    }
  };
  ASSERT_OK(col.snapshot());
  std::vector<Seen> acct_phase;
  take(5, acct_phase);
  // Out of the cpuacct cgroup, which then goes: its counter is gone.
  ASSERT_TRUE(writeFile(hier_.cpuacct + "/cgroup.procs", std::to_string(spin.pid())));
  acct.removeNow();
  std::vector<Seen> unified_phase;
  take(5, unified_phase);
  std::ostringstream line;
  for (const auto* phase : {&acct_phase, &unified_phase}) {
    for (const Seen& e : *phase) {
      line << " " << e.ms << (e.from_usage ? "u" : "b");
    }
    line << " |";
  }
  std::printf("ms per 100-ms interval (u: usage counter, b: BPF), cpuacct | unified:%s\n",
              line.str().c_str());
  // From a usage counter, never more than one CPU's time (an interval that keeps the BPF
  // figure can hold a lump of earlier slices: that is why the counters are read).
  for (const auto* phase : {&acct_phase, &unified_phase}) {
    for (std::size_t i = 0; i < phase->size(); ++i) {
      EXPECT_FALSE((*phase)[i].from_usage && (*phase)[i].too_much)
          << "interval " << i << ": more than one CPU's time";
    }
  }
  for (std::size_t i = 0; i < acct_phase.size(); ++i) {
    EXPECT_TRUE(acct_phase[i].from_usage) << "cpuacct interval " << i;
  }
  // The first read of the unified counter only sets its base.
  EXPECT_FALSE(unified_phase[0].from_usage);
  for (std::size_t i = 1; i < unified_phase.size(); ++i) {
    EXPECT_TRUE(unified_phase[i].from_usage) << "unified interval " << i;
  }
}

// CollectorOptions::usage_of_long_slices off (scale.sh's --no-usage): every cgroup's CPU time is
// BPF's, also where the threshold would mark it (a task that sleeps and wakes every 300 us, so BPF
// sees it every interval).
TEST_F(UsageSourceTest, OffLeavesTheBpfCreditAlone) {
  CollectorOptions opts;
  opts.usage_of_long_slices = false;
  opts.long_slice_ns = 1;
  MAKE_COLLECTOR_OR_SKIP(col, opts);
  const std::string root = v2() ? hier_.unified : hier_.cpu;
  TestCgroup named({root}, uniqueName("usage-off"));
  const uint64_t id = ASSERT_OK(cgroup::cgroupId(named.dirIn(root)));
  Child busy(named, -1, [] { sleeper(60000ms, 300us); });
  std::this_thread::sleep_for(200ms);
  ASSERT_OK(col.snapshot());
  int reported = 0;
  for (int i = 0; i < 5; ++i) {
    std::this_thread::sleep_for(100ms);
    const Snapshot s = ASSERT_OK(col.snapshot());
    if (const CgroupSample* x = find(s, id); x != nullptr) {
      ++reported;
      EXPECT_FALSE(x->oncpu_from_usage) << "snapshot " << i;
    }
  }
  EXPECT_EQ(reported, 5) << "the waking task was not reported at every snapshot";
}

INSTANTIATE_TEST_SUITE_P(Layouts,
                         UsageCreditTest,
                         ::testing::Values(Where::HostLayout,
                                           Where::V1NoCpuacct,
                                           Where::ForcedUnified),
                         whereName);

}  // namespace
}  // namespace colod::collect
