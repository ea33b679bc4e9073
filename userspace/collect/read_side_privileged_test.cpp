// SPDX-License-Identifier: Apache-2.0
// Privileged tests of the collector's read side (issue 17) over real cgroups: the control-file
// cache (cgroups removed while cached, the quota-aware cadence), the map walks skipped or
// limited to what changed, removals, drops and the BPF map memory report. The pairs' two maps
// and their aging: pair_maps_privileged_test.cpp; the map readers alone, over maps made by the
// tests: map_reader_privileged_test.cpp.
#include <bpf/bpf.h>
#include <dirent.h>
#include <sys/resource.h>

#include <fstream>
#include <iterator>
#include <map>
#include <sstream>

#include "bpf_util.h"
#include "cgsched.h"
#include "collector_test_fixture.h"
#include "entry_delta.h"
#include "file_cache.h"
#include "sched_sums.h"

namespace colod::collect {
namespace {

using namespace std::chrono_literals;

// Open fds of this process (/proc/self/fd, minus the one the listing itself holds).
std::size_t openFdCount() {
  std::size_t n = 0;
  for (const auto& e : fs::directory_iterator("/proc/self/fd")) {
    (void)e;
    ++n;
  }
  return n - 1;
}

class ReadSideTest : public CollectorTest {
 protected:
  // The cpu hierarchy, and on a hybrid host the unified one too: removing a cgroup there fires
  // cgroup_rmdir once per hierarchy, and only the measured one's id may be queued.
  [[nodiscard]] std::vector<std::string> rmdirRoots() const {
    std::vector<std::string> roots{cpuRoot()};
    if (!v2() && !hier_.unified.empty()) {
      roots.push_back(hier_.unified);
    }
    return roots;
  }
  // n cgroups, each with one process that ran once (so each holds a slot) and sleeps: with them
  // around, reading a few changed slots costs less than walking every live one
  // (bpf::runsCost against bpf::walkCost). The sleepers are declared last, so killed before their
  // cgroups go.
  struct IdleNeighbours {
    std::vector<std::unique_ptr<TestCgroup>> cgroups;
    std::vector<std::unique_ptr<Child>> sleepers;
  };
  [[nodiscard]] IdleNeighbours idleNeighbours(int n, const std::string& name) const {
    IdleNeighbours idle;
    for (int i = 0; i < n; ++i) {
      idle.cgroups.push_back(std::make_unique<TestCgroup>(std::vector<std::string>{cpuRoot()},
                                                          uniqueName(name + std::to_string(i))));
      idle.sleepers.push_back(std::make_unique<Child>(*idle.cgroups.back(), -1, [] { ::pause(); }));
    }
    return idle;
  }
};

// The kernel's control files come whole in one pread (kernfs single-record seq files): the
// text equals what a plain stream read of the file gives, in one syscall a read.
TEST_F(ReadSideTest, ControlFilesAreReadInOnePread) {
  std::vector<std::string> roots{cpuRoot()};
  if (!v2() && !hier_.unified.empty()) {
    roots.push_back(hier_.unified);
  }
  TestCgroup cg(roots, uniqueName("onepread"));
  const std::string dir = cg.dirIn(cpuRoot());
  const uint64_t id = ASSERT_OK(cgroup::cgroupId(dir));
  detail::CgroupFileCache cache(16);
  std::vector<std::pair<detail::CgroupFile, std::string>> files{{detail::CgroupFile::CpuStat, dir}};
  const std::string psi_root = v2() ? cpuRoot() : hier_.unified;
  if (!psi_root.empty() && ::access((cg.dirIn(psi_root) + "/cpu.pressure").c_str(), R_OK) == 0) {
    files.emplace_back(detail::CgroupFile::CpuPressure, cg.dirIn(psi_root));
    files.emplace_back(detail::CgroupFile::MemoryPressure, cg.dirIn(psi_root));
  }
  for (const auto& [file, d] : files) {
    const uint64_t before = cache.reads();
    const std::string text(ASSERT_OK(cache.read(id, file, d, d == dir)));
    EXPECT_EQ(cache.reads() - before, 1u) << detail::fileName(file);
    std::ifstream in(d + "/" + detail::fileName(file));
    const std::string whole((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    // Counters may move between the two reads: the same lines, in the same order.
    auto firstWords = [](const std::string& t) {
      std::vector<std::string> w;
      std::istringstream ss(t);
      for (std::string line; std::getline(ss, line);) {
        w.push_back(line.substr(0, line.find(' ')));
      }
      return w;
    };
    EXPECT_FALSE(text.empty()) << detail::fileName(file);
    EXPECT_EQ(firstWords(text), firstWords(whole)) << detail::fileName(file);
  }
}

// Real cgroups (v1 cpu hierarchy and the unified one, or the one v2 tree): files read and
// cached, the cgroups removed, read again: errors are the expected ENODEV/ENOENT, nothing is
// kept and no fd leaks.
TEST_F(ReadSideTest, FileCacheSurvivesRmdirWithoutLeakingFds) {
  std::vector<std::string> roots{cpuRoot()};
  if (!v2() && !hier_.unified.empty()) {
    roots.push_back(hier_.unified);
  }
  const std::size_t base_fds = openFdCount();
  {
    detail::CgroupFileCache cache(64);
    std::vector<std::unique_ptr<TestCgroup>> cgs;
    std::vector<uint64_t> ids;
    for (int i = 0; i < 5; ++i) {
      cgs.push_back(std::make_unique<TestCgroup>(roots, uniqueName("fc" + std::to_string(i))));
      ids.push_back(ASSERT_OK(cgroup::cgroupId(cgs.back()->dirIn(cpuRoot()))));
    }
    std::vector<std::string> dirs;
    for (const auto& cg : cgs) {
      dirs.push_back(cg->dirIn(cpuRoot()));
    }
    // PSI lives in the unified hierarchy (absent when the kernel runs with psi=0).
    const std::string psi_root = v2() ? cpuRoot() : hier_.unified;
    const bool psi = !psi_root.empty() &&
                     ::access((cgs[0]->dirIn(psi_root) + "/cpu.pressure").c_str(), R_OK) == 0;
    auto readAll = [&](std::size_t i) -> int {
      int failures = 0;
      auto r = cache.read(ids[i], detail::CgroupFile::CpuStat, dirs[i], true);
      failures += r ? 0 : 1;
      if (psi) {
        auto p = cache.read(ids[i], detail::CgroupFile::CpuPressure, cgs[i]->dirIn(psi_root), v2());
        failures += p ? 0 : 1;
      }
      return failures;
    };
    for (int tick = 0; tick < 3; ++tick) {
      cache.beginTick();
      for (std::size_t i = 0; i < cgs.size(); ++i) {
        EXPECT_EQ(readAll(i), 0);
      }
    }
    const std::size_t per = psi ? 2 : 1;
    EXPECT_EQ(cache.openFiles(), cgs.size() * per);
    EXPECT_EQ(cache.opens(), cgs.size() * per) << "re-reads must not reopen";
    EXPECT_EQ(openFdCount(), base_fds + cgs.size() * per);

    // Remove two: their cached fds now fail (ENODEV); the reopen fails (ENOENT): dropped.
    cgs[1]->removeNow();
    cgs[3]->removeNow();
    cache.beginTick();
    for (const std::size_t i : {std::size_t{1}, std::size_t{3}}) {
      auto r = cache.read(ids[i], detail::CgroupFile::CpuStat, dirs[i], true);
      ASSERT_FALSE(r.has_value());
      EXPECT_TRUE(r.error().errnoValue() == ENOENT || r.error().errnoValue() == ENODEV)
          << r.error().message();
    }
    // Recreated under the same name: a new inode, so the old id does not read it.
    TestCgroup again({cpuRoot()}, uniqueName("fc1"));
    EXPECT_ERR(cache.read(ids[1], detail::CgroupFile::CpuStat, dirs[1], true), ENOENT, "gone");
    // The survivors still read from their cached fds.
    const uint64_t opens = cache.opens();
    for (const std::size_t i : {std::size_t{0}, std::size_t{2}, std::size_t{4}}) {
      EXPECT_EQ(readAll(i), 0);
    }
    EXPECT_EQ(cache.opens(), opens);
    // The failed cpu.stat reads dropped their entries; erase() closes the rest (cpu.pressure).
    cache.erase(ids[1]);
    cache.erase(ids[3]);
    EXPECT_EQ(cache.openFiles(), 3 * per);
    EXPECT_EQ(openFdCount(), base_fds + 3 * per);
  }
  EXPECT_EQ(openFdCount(), base_fds) << "fds leaked";
}

// Through the collector: active cgroups' files are kept open between snapshots; removing the
// cgroups neither fails a snapshot nor counts a read error, and their fds are closed.
TEST_F(ReadSideTest, CollectorKeepsFilesOpenAndClosesThemWhenCgroupsVanish) {
  const std::size_t base_fds = openFdCount();
  std::size_t loaded_fds = 0;
  {
    MAKE_COLLECTOR_OR_SKIP(col);
    loaded_fds = openFdCount();
    auto cgs = std::make_unique<std::vector<std::unique_ptr<TestCgroup>>>();
    std::vector<std::unique_ptr<Child>> kids;
    std::vector<uint64_t> ids;
    std::vector<std::string> roots{cpuRoot()};
    if (!v2() && !hier_.unified.empty()) {
      roots.push_back(hier_.unified);
    }
    for (int i = 0; i < 4; ++i) {
      cgs->push_back(std::make_unique<TestCgroup>(roots, uniqueName("cv" + std::to_string(i))));
      ids.push_back(ASSERT_OK(cgroup::cgroupId(cgs->back()->dirIn(cpuRoot()))));
      kids.push_back(std::make_unique<Child>(*cgs->back(), -1, [] { sleeper(600000ms, 200us); }));
    }
    Snapshot s;
    for (int i = 0; i < 5; ++i) {
      std::this_thread::sleep_for(100ms);
      s = ASSERT_OK(col.snapshot());
    }
    for (const uint64_t id : ids) {
      ASSERT_NE(find(s, id), nullptr) << "no sample for an active test cgroup";
      EXPECT_TRUE(find(s, id)->throttling.has_value() || find(s, id)->cpu_pressure.has_value());
    }
    const uint64_t opens = s.stats.cgroup_file_opens;
    EXPECT_GE(s.stats.cgroup_files_open, ids.size());
    std::this_thread::sleep_for(100ms);
    s = ASSERT_OK(col.snapshot());
    EXPECT_EQ(s.stats.cgroup_file_opens, opens) << "files reopened although cached";
    EXPECT_GT(s.stats.read_bytes_last_tick, 0u);
    EXPECT_GT(s.stats.bpf_map_bytes, 0u);
    const uint64_t errors = s.stats.file_read_errors;

    kids.clear();  // killed and reaped
    cgs.reset();   // removed
    for (int i = 0; i < 12; ++i) {
      std::this_thread::sleep_for(100ms);
      s = ASSERT_OK(col.snapshot());
    }
    EXPECT_EQ(s.stats.file_read_errors, errors);
    for (const uint64_t id : ids) {
      EXPECT_EQ(find(s, id), nullptr);
    }
    // The cache may hold other cgroups' files, never more fds than it reports.
    EXPECT_LE(openFdCount(), loaded_fds + s.stats.cgroup_files_open);
  }
  EXPECT_EQ(openFdCount(), base_fds) << "the collector leaked fds";
}

// Issue 17: cg_slots and cg_reclaim are walked again only when their BPF generation counters
// moved. Quiet snapshots skip the walks, and a cgroup created afterwards is still seen (its slot
// insert bumps slots_gen), as is its removal (the collector's delete invalidates its copy): a
// cached walk that missed either would leave the new cgroup unreported or the old one tracked.
TEST_F(ReadSideTest, UnchangedSlotAndReclaimMapsAreNotWalkedAgain) {
  CollectorOptions opts;
  opts.kernel_sums = false;  // the userspace read walks cg_slots (the kernel's iterator does not)
  MAKE_COLLECTOR_OR_SKIP(col, opts);
  Snapshot s = ASSERT_OK(col.snapshot());
  const uint64_t skipped0 = s.stats.map_walks_skipped;
  for (int i = 0; i < 10; ++i) {
    std::this_thread::sleep_for(20ms);
    s = ASSERT_OK(col.snapshot());
  }
  // Both maps would have to change before every one of 10 snapshots for this to fail; on an
  // idle node neither does.
  EXPECT_GT(s.stats.map_walks_skipped, skipped0) << "every snapshot walked both hash maps";
  std::printf("walks skipped in 10 snapshots: %llu\n",
              static_cast<unsigned long long>(s.stats.map_walks_skipped - skipped0));

  auto cg = std::make_unique<TestCgroup>(std::vector<std::string>{cpuRoot()}, uniqueName("gen"));
  const uint64_t id = ASSERT_OK(cgroup::cgroupId(cg->dirIn(cpuRoot())));
  {
    Child c(*cg, -1, [] { spinFor(50ms); });
    ASSERT_EQ(c.wait(), 0);
  }
  std::this_thread::sleep_for(50ms);
  s = ASSERT_OK(col.snapshot());
  ASSERT_NE(find(s, id), nullptr) << "a cgroup created after quiet snapshots was not read";
  EXPECT_GT(find(s, id)->oncpu_ns, 0u);
  auto ids = ASSERT_OK(col.trackedCgroupIds());
  ASSERT_TRUE(std::binary_search(ids.begin(), ids.end(), id));

  cg->removeNow();
  bool gone = false;
  for (int i = 0; i < 15 && !gone; ++i) {
    std::this_thread::sleep_for(20ms);
    s = ASSERT_OK(col.snapshot());
    ids = ASSERT_OK(col.trackedCgroupIds());
    gone = !std::binary_search(ids.begin(), ids.end(), id);
  }
  ASSERT_TRUE(gone) << "removed cgroup still tracked";
  // After the deletion the next snapshot walks cg_slots again, and a cached copy with the dead
  // id in it would bring it back as an unknown id.
  for (int i = 0; i < 3; ++i) {
    std::this_thread::sleep_for(20ms);
    s = ASSERT_OK(col.snapshot());
    EXPECT_EQ(find(s, id), nullptr);
  }
  ids = ASSERT_OK(col.trackedCgroupIds());
  EXPECT_FALSE(std::binary_search(ids.begin(), ids.end(), id));
}

// Issue 17: a removed cgroup is known from the BPF side's rmdir queue and pruned at the very
// next snapshot, with no stat() of the tracked cgroups (that check ran every 10th snapshot
// before: a removal then took up to 10 snapshots to prune). Both attach kinds.
TEST_F(ReadSideTest, RemovedCgroupIsPrunedAtTheNextSnapshot) {
  for (const bool raw : {false, true}) {
    SCOPED_TRACE(raw ? "raw_tp" : "tp_btf");
    CollectorOptions opts;
    opts.force_raw_tp = raw;
    MAKE_COLLECTOR_OR_SKIP(col, opts);
    for (int round = 0; round < 3; ++round) {
      auto cg =
          std::make_unique<TestCgroup>(rmdirRoots(), uniqueName("rm" + std::to_string(round)));
      const uint64_t id = ASSERT_OK(cgroup::cgroupId(cg->dirIn(cpuRoot())));
      {
        Child c(*cg, -1, [] { spinFor(20ms); });
        ASSERT_EQ(c.wait(), 0);
      }
      std::this_thread::sleep_for(30ms);
      Snapshot s = ASSERT_OK(col.snapshot());
      auto ids = ASSERT_OK(col.trackedCgroupIds());
      ASSERT_TRUE(std::binary_search(ids.begin(), ids.end(), id));
      const uint64_t pruned = s.stats.pruned_cgroups;
      cg->removeNow();
      s = ASSERT_OK(col.snapshot());
      ids = ASSERT_OK(col.trackedCgroupIds());
      EXPECT_FALSE(std::binary_search(ids.begin(), ids.end(), id))
          << "round " << round << ": not pruned at the snapshot after its removal";
      EXPECT_GT(s.stats.pruned_cgroups, pruned);
      EXPECT_EQ(s.stats.removals_lost, 0u);
    }
  }
}

// More removals between two snapshots than the queue holds: the overflow is counted, and that
// snapshot checks every tracked cgroup instead, so none of them is left behind either.
TEST_F(ReadSideTest, RemovalsBeyondTheQueueAreFoundByCheckingEveryCgroup) {
  constexpr int kCgroups = 6;
  CollectorOptions opts;
  opts.removal_queue = 2;
  MAKE_COLLECTOR_OR_SKIP(col, opts);
  std::vector<std::unique_ptr<TestCgroup>> cgs;
  std::vector<uint64_t> ids;
  for (int i = 0; i < kCgroups; ++i) {
    cgs.push_back(std::make_unique<TestCgroup>(rmdirRoots(), uniqueName("q" + std::to_string(i))));
    ids.push_back(ASSERT_OK(cgroup::cgroupId(cgs.back()->dirIn(cpuRoot()))));
    Child c(*cgs.back(), -1, [] { spinFor(10ms); });
    ASSERT_EQ(c.wait(), 0);
  }
  std::this_thread::sleep_for(30ms);
  ASSERT_OK(col.snapshot());
  auto tracked = ASSERT_OK(col.trackedCgroupIds());
  for (const uint64_t id : ids) {
    ASSERT_TRUE(std::binary_search(tracked.begin(), tracked.end(), id));
  }
  cgs.clear();  // all removed
  const Snapshot s = ASSERT_OK(col.snapshot());
  EXPECT_GE(s.stats.removals_lost, static_cast<uint64_t>(kCgroups - 2));
  tracked = ASSERT_OK(col.trackedCgroupIds());
  for (const uint64_t id : ids) {
    EXPECT_FALSE(std::binary_search(tracked.begin(), tracked.end(), id))
        << "a removal that did not fit in the queue was not found";
  }
}

// A full slot map is counted, not silent: with 2 slots and more cgroups running than that,
// map_drops rises (COLOD_DROP_CG_ENTRY, read from the programs' .bss), and lock skips stay apart.
TEST_F(ReadSideTest, FullSlotMapIsCountedAsDrops) {
  CollectorOptions opts;
  opts.max_cgroups = 2;
  MAKE_COLLECTOR_OR_SKIP(col, opts);
  const Snapshot before = ASSERT_OK(col.snapshot());
  std::vector<std::unique_ptr<TestCgroup>> cgs;
  for (int i = 0; i < 4; ++i) {
    cgs.push_back(std::make_unique<TestCgroup>(std::vector<std::string>{cpuRoot()},
                                               uniqueName("full" + std::to_string(i))));
    Child c(*cgs.back(), -1, [] { spinFor(5ms); });
    ASSERT_EQ(c.wait(), 0);
  }
  const Snapshot after = ASSERT_OK(col.snapshot());
  std::printf("drops %llu -> %llu, lock skips %llu\n",
              static_cast<unsigned long long>(before.stats.map_drops),
              static_cast<unsigned long long>(after.stats.map_drops),
              static_cast<unsigned long long>(after.stats.map_lock_skips));
  EXPECT_GE(after.stats.map_drops, before.stats.map_drops + 2)
      << "at least two of four new cgroups found no slot";
  EXPECT_LE(col.slots(), 2u);
}

// Issue 17: with files_every_n_ticks N and pressure_every_n_ticks P, a cgroup named in
// setEveryTick() that has a CFS quota has its cpu.stat read at every snapshot, another with a
// quota at about one in N (spread by id); one without a quota (it cannot be throttled) has it
// read once, for a baseline, named or not. PSI and the quota are read at about one in P, named
// or not. All are busy throughout, so all are reported at every snapshot. cpu.stat's throttling
// is reported from the second read. A quota set on the named cgroup that had none is seen at
// its next pressure read, and its cpu.stat is read at every snapshot from then on.
TEST_F(ReadSideTest, FilesOfNamedCgroupsEveryTickOthersAtTheCadence) {
  constexpr uint32_t kEvery = 3;
  constexpr uint32_t kSlow = 6;
  constexpr int kSnaps = 24;
  CollectorOptions opts;
  opts.files_every_n_ticks = kEvery;
  opts.pressure_every_n_ticks = kSlow;
  MAKE_COLLECTOR_OR_SKIP(col, opts);
  std::vector<std::string> roots{cpuRoot()};
  if (!v2() && !hier_.unified.empty()) {
    roots.push_back(hier_.unified);  // where PSI is on a hybrid host
  }
  TestCgroup named(roots, uniqueName("every"));
  TestCgroup unlimited(roots, uniqueName("noquota"));
  TestCgroup other(roots, uniqueName("cadence"));
  TestCgroup other_unlimited(roots, uniqueName("cadence-noquota"));
  // Two CPUs' worth: set, and never reached by a sleeper.
  auto setQuota = [&](const TestCgroup& cg) {
    const std::string d = cg.dirIn(cpuRoot());
    std::ofstream(v2() ? d + "/cpu.max" : d + "/cpu.cfs_quota_us")
        << (v2() ? "200000 100000" : "200000");
  };
  setQuota(named);
  setQuota(other);
  const bool psi = !hier_.unified.empty() &&
                   ::access((named.dirIn(hier_.unified) + "/cpu.pressure").c_str(), R_OK) == 0;
  const uint64_t named_id = ASSERT_OK(cgroup::cgroupId(named.dirIn(cpuRoot())));
  const uint64_t unlimited_id = ASSERT_OK(cgroup::cgroupId(unlimited.dirIn(cpuRoot())));
  const uint64_t other_id = ASSERT_OK(cgroup::cgroupId(other.dirIn(cpuRoot())));
  const uint64_t other_unlimited_id = ASSERT_OK(cgroup::cgroupId(other_unlimited.dirIn(cpuRoot())));
  const std::vector<uint64_t> ids{named_id, unlimited_id, other_id, other_unlimited_id};
  col.setEveryTick({named_id, unlimited_id});
  Child a(named, -1, [] { sleeper(60000ms, 300us); });
  Child b(other, -1, [] { sleeper(60000ms, 300us); });
  Child c(unlimited, -1, [] { sleeper(60000ms, 300us); });
  Child d(other_unlimited, -1, [] { sleeper(60000ms, 300us); });
  std::this_thread::sleep_for(50ms);
  ASSERT_OK(col.snapshot());
  struct Count {
    int reported = 0;
    int cpu_stat = 0;
    int psi = 0;
  };
  auto run = [&](std::map<uint64_t, Count>& n) {
    for (int i = 0; i < kSnaps; ++i) {
      std::this_thread::sleep_for(30ms);
      const Snapshot s = ASSERT_OK(col.snapshot());
      for (const uint64_t id : ids) {
        if (const CgroupSample* x = find(s, id); x != nullptr) {
          ++n[id].reported;
          n[id].cpu_stat += x->throttling.has_value() ? 1 : 0;
          n[id].psi += x->cpu_pressure.has_value() ? 1 : 0;
        }
      }
    }
  };
  std::map<uint64_t, Count> n;
  const uint64_t skipped0 = col.snapshot().value().stats.cpu_stat_reads_skipped;
  run(n);
  const Count& x = n[named_id];
  const Count& u = n[unlimited_id];
  const Count& y = n[other_id];
  const Count& z = n[other_unlimited_id];
  std::printf(
      "of %d/%d/%d/%d snapshots reported: cpu.stat named %d, named without quota %d, other %d, "
      "other without quota %d; PSI %d/%d/%d/%d (every %u, pressure every %u)\n",
      x.reported, u.reported, y.reported, z.reported, x.cpu_stat, u.cpu_stat, y.cpu_stat,
      z.cpu_stat, x.psi, u.psi, y.psi, z.psi, kEvery, kSlow);
  ASSERT_GE(std::min({x.reported, u.reported, y.reported, z.reported}), kSnaps / 2)
      << "the busy test cgroups were not reported";
  // The named cgroup's first read only primes the throttling delta.
  EXPECT_GE(x.cpu_stat, x.reported - 1);
  EXPECT_GE(y.cpu_stat, 1) << "the other cgroup's files were never read";
  EXPECT_LE(y.cpu_stat, y.reported / static_cast<int>(kEvery) + 1);
  EXPECT_EQ(u.cpu_stat, 0) << "no quota: nothing to report past the baseline";
  EXPECT_EQ(z.cpu_stat, 0) << "no quota: nothing to report past the baseline";
  const Snapshot mid = ASSERT_OK(col.snapshot());
  // The named one without a quota skips all but its baseline read, the other one all of its
  // cadence reads.
  EXPECT_GE(mid.stats.cpu_stat_reads_skipped - skipped0,
            static_cast<uint64_t>(u.reported - 1 + z.reported / static_cast<int>(kEvery) - 1));
  // PSI, even of the named cgroups, at the pressure cadence only (the kernel updates it every
  // 2 s).
  for (const Count* k : {&x, &u, &y, &z}) {
    EXPECT_LE(k->psi, k->reported / static_cast<int>(kSlow) + 1);
    if (psi) {
      EXPECT_GE(k->psi, 1) << "PSI was never read";
    }
  }
  // A quota set now is read at the cgroup's next pressure read (one in kSlow snapshots that
  // report it); every snapshot reads cpu.stat after that.
  setQuota(unlimited);
  setQuota(other_unlimited);
  for (uint32_t i = 0; i <= kSlow; ++i) {
    std::this_thread::sleep_for(30ms);  // busy in each, so reported (files are read then only)
    ASSERT_OK(col.snapshot());
  }
  std::map<uint64_t, Count> later;
  run(later);
  EXPECT_GE(later[unlimited_id].cpu_stat, later[unlimited_id].reported - 1)
      << "a quota set later was not seen";
  EXPECT_GE(later[other_unlimited_id].cpu_stat, 1)
      << "a quota set later on a cgroup read at the cadence was not seen";
}

// With pressure_of_named_only (the daemon's setting: its policy reads its victims' PSI alone),
// only the cgroups named in setEveryTick() have their pressure files read.
TEST_F(ReadSideTest, PressureOfNamedCgroupsOnlyWhenAsked) {
  CollectorOptions opts;
  opts.pressure_every_n_ticks = 2;
  opts.pressure_of_named_only = true;
  MAKE_COLLECTOR_OR_SKIP(col, opts);
  std::vector<std::string> roots{cpuRoot()};
  if (!v2() && !hier_.unified.empty()) {
    roots.push_back(hier_.unified);
  }
  TestCgroup named(roots, uniqueName("psi-named"));
  TestCgroup other(roots, uniqueName("psi-other"));
  if (hier_.unified.empty() ||
      ::access((named.dirIn(hier_.unified) + "/cpu.pressure").c_str(), R_OK) != 0) {
    GTEST_SKIP() << "no cpu.pressure in the unified hierarchy (kernel without PSI, or psi=0)";
  }
  const uint64_t named_id = ASSERT_OK(cgroup::cgroupId(named.dirIn(cpuRoot())));
  const uint64_t other_id = ASSERT_OK(cgroup::cgroupId(other.dirIn(cpuRoot())));
  col.setEveryTick({named_id});
  Child a(named, -1, [] { sleeper(60000ms, 300us); });
  Child b(other, -1, [] { sleeper(60000ms, 300us); });
  std::map<uint64_t, int> reported;
  std::map<uint64_t, int> psi;
  for (int i = 0; i < 12; ++i) {
    std::this_thread::sleep_for(30ms);
    const Snapshot s = ASSERT_OK(col.snapshot());
    for (const uint64_t id : {named_id, other_id}) {
      if (const CgroupSample* x = find(s, id); x != nullptr) {
        ++reported[id];
        psi[id] += x->cpu_pressure.has_value() ? 1 : 0;
      }
    }
  }
  ASSERT_GE(std::min(reported[named_id], reported[other_id]), 6) << "not reported: not busy";
  EXPECT_GE(psi[named_id], 2) << "the named cgroup's PSI, one snapshot in two";
  EXPECT_EQ(psi[other_id], 0) << "the other's PSI was read";
}

TEST_F(ReadSideTest, BpfMapBytesReportedAndGrowWithMaxCgroups) {
  CollectorOptions small;
  small.max_cgroups = 1024;
  small.max_pairs = 4096;
  uint64_t small_bytes = 0;
  {
    MAKE_COLLECTOR_OR_SKIP(col, small);
    small_bytes = col.bpfMapBytes();
    const Snapshot s = ASSERT_OK(col.snapshot());
    EXPECT_EQ(s.stats.bpf_map_bytes, small_bytes);
  }
  EXPECT_GT(small_bytes, 0u);
  CollectorOptions big = small;
  big.max_cgroups = 8192;
  MAKE_COLLECTOR_OR_SKIP(col, big);
  const uint64_t big_bytes = col.bpfMapBytes();
  std::printf("bpf map bytes: max_cgroups=1024 %llu, 8192 %llu\n",
              static_cast<unsigned long long>(small_bytes),
              static_cast<unsigned long long>(big_bytes));
  // cg_sched alone holds 136 B x its CPU copies more per extra slot.
  const Snapshot s = ASSERT_OK(col.snapshot());
  ASSERT_GE(s.stats.sched_cpus, 1u);
  EXPECT_GE(big_bytes, small_bytes + (8192 - 1024) * 136 * uint64_t{s.stats.sched_cpus});
}

// Issue 17: between full reads only the cgroups that ran are copied out (their slots marked
// by the BPF side), and no CPU time is lost doing so: a cgroup that runs in short bursts with
// idle snapshots between them is reported at the snapshot after each burst, and its on-CPU
// time over all snapshots is the CPU time its processes used.
TEST_F(ReadSideTest, OnlyCgroupsThatRanAreReadAndNoRunIsLost) {
  CollectorOptions opts;
  opts.full_read_every_n_ticks = 1000;  // only the first read and slot changes read every slot
  opts.read_files = false;
  MAKE_COLLECTOR_OR_SKIP(col, opts);
  const IdleNeighbours idle = idleNeighbours(30, "idle");
  auto cg = std::make_unique<TestCgroup>(std::vector<std::string>{cpuRoot()}, uniqueName("marks"));
  const uint64_t id = ASSERT_OK(cgroup::cgroupId(cg->dirIn(cpuRoot())));
  std::this_thread::sleep_for(50ms);
  auto childCpu = [] {
    rusage ru{};
    ::getrusage(RUSAGE_CHILDREN, &ru);
    auto us = [](const timeval& tv) { return tv.tv_sec * 1'000'000LL + tv.tv_usec; };
    return std::chrono::microseconds(us(ru.ru_utime) + us(ru.ru_stime));
  };
  Snapshot s = ASSERT_OK(col.snapshot());
  const uint64_t full0 = s.stats.sched_full_reads;
  const uint64_t made0 = s.stats.sched_maps_made;
  const auto cpu0 = childCpu();
  uint64_t oncpu_ns = 0;
  uint64_t snapshots = 0;
  uint64_t partial_entries = 0;
  uint64_t partial_reads = 0;
  constexpr int kBursts = 5;
  static constexpr auto kBurst = 20ms;
  for (int round = 0; round < kBursts; ++round) {
    {
      // 20 ms of CPU in the cgroup (the child joins it before its body), however slow the CPU.
      Child c(*cg, -1, [] { spinCpuFor(kBurst); });
      ASSERT_EQ(c.wait(), 0);
    }
    for (int i = 0; i < 3; ++i) {
      std::this_thread::sleep_for(20ms);
      const uint64_t full_before = s.stats.sched_full_reads;
      s = ASSERT_OK(col.snapshot());
      ++snapshots;
      if (s.stats.sched_full_reads == full_before) {
        ++partial_reads;
        partial_entries += s.stats.sched_entries_read;
      }
      const CgroupSample* c = find(s, id);
      oncpu_ns += c != nullptr ? c->oncpu_ns : 0;
      if (i == 0 && round > 0) {
        // Its slot was assigned in round 0, so from round 1 on this is a read of marked slots
        // (unless another cgroup of the host got a slot meanwhile).
        ASSERT_NE(c, nullptr) << "round " << round << ": the burst was not reported at once";
        EXPECT_GT(c->oncpu_ns, 10'000'000u) << "round " << round;
      }
    }
  }
  const auto used = std::chrono::duration_cast<std::chrono::nanoseconds>(childCpu() - cpu0);
  std::printf(
      "on-CPU seen %.1f ms, used %.1f ms; %llu of %llu snapshots read marked slots only, "
      "%.1f entries each; %zu cgroups tracked\n",
      static_cast<double>(oncpu_ns) / 1e6, static_cast<double>(used.count()) / 1e6,
      static_cast<unsigned long long>(partial_reads), static_cast<unsigned long long>(snapshots),
      partial_reads ? static_cast<double>(partial_entries) / static_cast<double>(partial_reads)
                    : 0.0,
      ASSERT_OK(col.trackedCgroupIds()).size());
  EXPECT_GT(partial_reads, 0u) << "every snapshot read every slot";
  EXPECT_LT(s.stats.sched_full_reads - full0, snapshots);
  // A read of marked slots fills a map from the pool, which goes back to it: the pool makes a
  // map or two while the full and the partial reads first meet, not one a snapshot.
  EXPECT_LE(s.stats.sched_maps_made - made0, 2u) << "of " << snapshots << " snapshots";
  // Every burst's CPU time in the cgroup is seen (a lost one is 20 % of it). rusage is no floor:
  // it also counts the child's fork and cgroup move before it joined, which under an emulator
  // took ~7 ms a child (the guest's CI run saw 141 ms of 177 ms). The collector's sum is
  // under rusage's, not over.
  const auto bursts_ns = std::chrono::duration_cast<std::chrono::nanoseconds>(kBurst).count();
  EXPECT_GE(static_cast<double>(oncpu_ns), 0.9 * static_cast<double>(kBursts * bursts_ns));
  EXPECT_LE(static_cast<double>(oncpu_ns), 1.05 * static_cast<double>(used.count()) + 1e6);
}

// The kernel sums cg_sched only where reading the live slots' per-CPU copies from userspace
// would copy more than user_read_budget_bytes: never under a budget no host reaches, at every
// snapshot with none.
TEST_F(ReadSideTest, KernelSumsOnlyPastTheUserReadBudget) {
  CollectorOptions roomy;
  roomy.read_files = false;
  roomy.user_read_budget_bytes = uint64_t{1} << 40;
  CollectorOptions none;
  none.read_files = false;
  none.user_read_budget_bytes = 0;
  MAKE_COLLECTOR_OR_SKIP(user_col, roomy);
  MAKE_COLLECTOR_OR_SKIP(kernel_col, none);
  if (!kernel_col.kernelSums()) {
    GTEST_SKIP() << "this kernel cannot sum cg_sched (needs 5.17+): " << kernel_col.readNote();
  }
  EXPECT_NE(kernel_col.readNote().find("in the kernel"), std::string::npos)
      << kernel_col.readNote();
  Snapshot u, k;
  for (int i = 0; i < 5; ++i) {
    u = ASSERT_OK(user_col.snapshot());
    k = ASSERT_OK(kernel_col.snapshot());
  }
  EXPECT_EQ(u.stats.sched_kernel_reads, 0u);
  EXPECT_EQ(k.stats.sched_kernel_reads, k.stats.snapshots);
}

// Two collectors see the same switches: one reading only the marked slots between full reads
// and draining the named victim's pairs, the other every slot and every pair at every snapshot.
// Over the same run, with idle neighbours around, they report the same totals. The marked
// collector reads cg_sched as colod chooses on this host (the parameter false: from userspace
// while the live slots' per-CPU copies are small, as here) or always through the kernel's
// summing iterator (true: user_read_budget_bytes 0, as on a big node).
class MarkedReadsTest : public ReadSideTest, public ::testing::WithParamInterface<bool> {};

INSTANTIATE_TEST_SUITE_P(Sums,
                         MarkedReadsTest,
                         ::testing::Values(false, true),
                         [](const ::testing::TestParamInfo<bool>& p) {
                           return p.param ? "KernelSums" : "AsChosen";
                         });

TEST_P(MarkedReadsTest, ReportWhatFullReadsDo) {
  const bool kernel = GetParam();
  CollectorOptions every;
  every.changed_only = false;
  every.read_files = false;
  CollectorOptions marked;
  marked.read_files = false;
  if (kernel) {
    marked.user_read_budget_bytes = 0;
  }
  MAKE_COLLECTOR_OR_SKIP(full_col, every);
  MAKE_COLLECTOR_OR_SKIP(marked_col, marked);
  if (kernel && !marked_col.kernelSums()) {
    GTEST_SKIP() << "this kernel cannot sum cg_sched (needs 5.17+): " << marked_col.readNote();
  }
  const IdleNeighbours idle = idleNeighbours(30, "quiet");
  TestCgroup v({cpuRoot()}, uniqueName("victim"));
  TestCgroup h({cpuRoot()}, uniqueName("hog"));
  const uint64_t v_id = ASSERT_OK(cgroup::cgroupId(v.dirIn(cpuRoot())));
  const uint64_t h_id = ASSERT_OK(cgroup::cgroupId(h.dirIn(cpuRoot())));
  // Named: its pairs are in named_pairs, drained at every snapshot (the others' are walked).
  marked_col.setEveryTick({v_id});
  struct Totals {
    uint64_t oncpu = 0, invol = 0, waits = 0, by_hog = 0;
  };
  std::map<std::string, std::map<uint64_t, Totals>> totals;
  auto add = [&](const std::string& who, const Snapshot& s) {
    for (const uint64_t id : {v_id, h_id}) {
      const CgroupSample* c = find(s, id);
      if (c == nullptr) {
        continue;
      }
      Totals& t = totals[who][id];
      t.oncpu += c->oncpu_ns;
      t.invol += c->involuntary_switches;
      t.waits += c->runq.count;
      for (const auto& a : c->preempted_by) {
        t.by_hog += a.cgroup_id == h_id ? a.preemptions : 0;
      }
    }
  };
  auto both = [&] {
    add("full", ASSERT_OK(full_col.snapshot()));
    add("marked", ASSERT_OK(marked_col.snapshot()));
  };
  both();
  const Snapshot start = ASSERT_OK(marked_col.snapshot());
  add("marked", start);
  {
    Child hog_child(h, kCpu, [] { hog(); });
    Child victim(v, kCpu, [] { sleeper(60000ms, 10000us); });
    for (int i = 0; i < 40; ++i) {
      std::this_thread::sleep_for(50ms);
      both();
    }
  }
  // Both children are gone; a full read of the marked collector (every 10th) comes within 11.
  for (int i = 0; i < 11; ++i) {
    std::this_thread::sleep_for(20ms);
    both();
  }
  const Snapshot end = ASSERT_OK(marked_col.snapshot());
  add("marked", end);
  add("full", ASSERT_OK(full_col.snapshot()));
  const uint64_t partial = (end.stats.snapshots - start.stats.snapshots) -
                           (end.stats.sched_full_reads - start.stats.sched_full_reads);
  std::printf("marked collector: %llu of %llu snapshots read marked slots only\n",
              static_cast<unsigned long long>(partial),
              static_cast<unsigned long long>(end.stats.snapshots - start.stats.snapshots));
  EXPECT_GT(partial, 10u);
  if (kernel) {
    // The kernel's iterator reads the marked slots itself: every snapshot went through it.
    EXPECT_EQ(end.stats.sched_kernel_reads - start.stats.sched_kernel_reads,
              end.stats.snapshots - start.stats.snapshots);
    EXPECT_EQ(end.stats.sched_read_calls, start.stats.sched_read_calls);
  } else if (end.stats.sched_kernel_reads == start.stats.sched_kernel_reads) {
    EXPECT_GT(end.stats.sched_read_calls, start.stats.sched_read_calls) << "no run was read";
  }
  for (const uint64_t id : {v_id, h_id}) {
    const Totals& f = totals["full"][id];
    const Totals& m = totals["marked"][id];
    std::printf(
        "%s: oncpu %llu / %llu, invol %llu / %llu, waits %llu / %llu, by hog %llu / %llu "
        "(full / marked)\n",
        id == v_id ? "victim" : "hog", static_cast<unsigned long long>(f.oncpu),
        static_cast<unsigned long long>(m.oncpu), static_cast<unsigned long long>(f.invol),
        static_cast<unsigned long long>(m.invol), static_cast<unsigned long long>(f.waits),
        static_cast<unsigned long long>(m.waits), static_cast<unsigned long long>(f.by_hog),
        static_cast<unsigned long long>(m.by_hog));
    // The same switches, counted by two programs; a hash update that met a held bucket lock
    // (counted in map_lock_skips) is the only way they can differ.
    EXPECT_TRUE(sameCount(f.oncpu, m.oncpu)) << f.oncpu << " vs " << m.oncpu;
    EXPECT_TRUE(sameCount(f.invol, m.invol)) << f.invol << " vs " << m.invol;
    EXPECT_TRUE(sameCount(f.waits, m.waits)) << f.waits << " vs " << m.waits;
    EXPECT_TRUE(sameCount(f.by_hog, m.by_hog)) << f.by_hog << " vs " << m.by_hog;
  }
  EXPECT_GT(totals["full"][v_id].by_hog, 0u) << "the victim was never preempted by the hog";
}

// Pairs of a victim named every tick (setEveryTick) are reported at every snapshot, those of
// another victim at the files' cadence only (its map is read then); over the run both total
// what a collector reading every pair at every tick counts.
TEST_F(ReadSideTest, NamedVictimsPairsEveryTickOthersAtTheCadence) {
  constexpr uint32_t kEvery = 5;
  CollectorOptions every;
  every.read_files = false;
  CollectorOptions cadence;
  cadence.read_files = false;
  cadence.files_every_n_ticks = kEvery;
  MAKE_COLLECTOR_OR_SKIP(ref, every);
  MAKE_COLLECTOR_OR_SKIP(col, cadence);
  TestCgroup named({cpuRoot()}, uniqueName("named"));
  TestCgroup other({cpuRoot()}, uniqueName("unnamed"));
  TestCgroup h({cpuRoot()}, uniqueName("hog"));
  const uint64_t named_id = ASSERT_OK(cgroup::cgroupId(named.dirIn(cpuRoot())));
  const uint64_t other_id = ASSERT_OK(cgroup::cgroupId(other.dirIn(cpuRoot())));
  const uint64_t h_id = ASSERT_OK(cgroup::cgroupId(h.dirIn(cpuRoot())));
  std::map<std::string, std::map<uint64_t, uint64_t>> by_hog;     // who -> victim -> count
  std::map<std::string, std::map<uint64_t, int>> snaps_with_hog;  // who -> victim -> snapshots
  auto add = [&](const std::string& who, const Snapshot& s) {
    for (const uint64_t id : {named_id, other_id}) {
      const CgroupSample* c = find(s, id);
      if (c == nullptr) {
        continue;
      }
      for (const auto& a : c->preempted_by) {
        if (a.cgroup_id == h_id) {
          by_hog[who][id] += a.preemptions;
          ++snaps_with_hog[who][id];
        }
      }
    }
  };
  CollectorStats col_last;
  auto both = [&] {
    add("ref", ASSERT_OK(ref.snapshot()));
    const Snapshot s = ASSERT_OK(col.snapshot());
    col_last = s.stats;
    add("col", s);
  };
  both();
  col.setEveryTick({named_id});
  both();  // the named victim's slot is marked from here on
  const CollectorStats col_start = col_last;
  by_hog.clear();
  snaps_with_hog.clear();
  int snaps = 0;
  {
    Child hog_child(h, kCpu, [] { hog(); });
    Child a(named, kCpu, [] { sleeper(60000ms, 10000us); });
    Child b(other, kCpu, [] { sleeper(60000ms, 10000us); });
    // 40 snapshots, or more until the reference has seen the unnamed victim preempted in
    // enough of them for the cadence bound below to mean something (the TCG guest once gave 8
    // of 46 where 10 were needed).
    for (; snaps < 40 ||
           (snaps_with_hog["ref"][other_id] < 2 * static_cast<int>(kEvery) + 2 && snaps < 120);
         ++snaps) {
      std::this_thread::sleep_for(50ms);
      both();
    }
  }
  // The children are gone; the unnamed victim's map is read within kEvery more snapshots.
  for (uint32_t i = 0; i <= kEvery; ++i) {
    std::this_thread::sleep_for(20ms);
    both();
  }
  auto& ref_n = snaps_with_hog["ref"];
  auto& col_n = snaps_with_hog["col"];
  std::printf(
      "by the hog (every tick / cadence): named %llu / %llu in %d / %d snapshots, unnamed %llu / "
      "%llu in %d / %d, of %d\n",
      static_cast<unsigned long long>(by_hog["ref"][named_id]),
      static_cast<unsigned long long>(by_hog["col"][named_id]), ref_n[named_id], col_n[named_id],
      static_cast<unsigned long long>(by_hog["ref"][other_id]),
      static_cast<unsigned long long>(by_hog["col"][other_id]), ref_n[other_id], col_n[other_id],
      snaps + static_cast<int>(kEvery) + 1);
  // In every snapshot where the reference saw the named victim preempted by the hog, but for a
  // few: one interval may go to the cadence read while its slot's mark is being set, and the
  // two collectors read moments apart, so a preemption between their reads shows one snapshot
  // later in one of them (the 6.1 guest under TCG in CI: 29 of 31, the totals equal, 61 / 61).
  // A read at the cadence would show about ref / kEvery.
  EXPECT_GE(col_n[named_id], ref_n[named_id] - std::max(2, ref_n[named_id] / 10))
      << "the named victim's pairs every tick";
  EXPECT_GE(ref_n[other_id], 2 * static_cast<int>(kEvery))
      << "the unnamed one was seldom preempted";
  EXPECT_GE(col_n[other_id], 1);
  EXPECT_LE(col_n[other_id], (snaps + static_cast<int>(kEvery) + 1) / static_cast<int>(kEvery) + 1)
      << "the unnamed victim's pairs at the cadence";
  for (const uint64_t id : {named_id, other_id}) {
    EXPECT_GT(by_hog["ref"][id], 0u);
    EXPECT_TRUE(sameCount(by_hog["ref"][id], by_hog["col"][id]))
        << by_hog["ref"][id] << " vs " << by_hog["col"][id] << " for " << id;
  }
  // The named cgroup got its slot after setEveryTick() (its first task ran later), and its pairs
  // came every tick all the same, though the marks are synced only when a slot was handed out,
  // moved or released, or the named set changed, not at every snapshot. (How many of the
  // snapshots saw a slot handed out depends on the cgroups the rest of the host starts.)
  const uint64_t syncs = col_last.named_slot_syncs - col_start.named_slot_syncs;
  const uint64_t snapshots = col_last.snapshots - col_start.snapshots;
  std::printf("named slot syncs %llu in %llu snapshots\n", static_cast<unsigned long long>(syncs),
              static_cast<unsigned long long>(snapshots));
  EXPECT_GE(syncs, 1u) << "no sync after the named cgroup's slot was handed out in the window";
}

// The legacy read (benchmarks only) gives the same data as the default one.
TEST_F(ReadSideTest, LegacyReadsStillWork) {
  CollectorOptions o;
  o.legacy_reads = true;
  MAKE_COLLECTOR_OR_SKIP(col, o);
  std::this_thread::sleep_for(100ms);
  const Snapshot s = ASSERT_OK(col.snapshot());
  EXPECT_GT(s.stats.read_buffer_bytes, 4096u * 128);  // cg_reclaim at max_entries at least
  EXPECT_EQ(s.stats.cgroup_files_open, 0u);
}

}  // namespace
}  // namespace colod::collect
