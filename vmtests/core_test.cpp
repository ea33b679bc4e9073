// SPDX-License-Identifier: Apache-2.0
// vm_core_test — CO-RE portability and the v2 paths of the collector, run inside the vmtests
// guest (another kernel, pure cgroup v2). The BPF objects were compiled on the build host
// against its vmlinux.h; here libbpf relocates them against the guest's /sys/kernel/btf/vmlinux.
//
// One short workload runs for the whole suite (SetUpTestSuite): CPU hogs in two cgroups on
// 2 vCPUs (one capped with cpu.max so it is throttled) and an allocator pushing a cgroup past
// memory.high (reclaim). Each TEST then checks one thing the Snapshot must show. Under TCG the
// guest is several times slower than the host, so checks are about presence and orders of
// magnitude, never exact values.
//
// Flags (before the gtest ones): --raw-tp forces the raw_tp fallback programs;
// --seconds N sets the workload length (default 3); --root DIR the cgroup2 root.
// This binary is not registered with CTest on the host: vmtests/run runs it in the guest.
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iostream>
#include <optional>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "colod/collect/collector.h"

namespace {

using colod::collect::CgroupSample;
using colod::collect::Collector;
using colod::collect::CollectorOptions;
using colod::collect::Snapshot;

struct Flags {
  bool raw_tp = false;
  int seconds = 3;
  std::string root = "/sys/fs/cgroup";
};
Flags g_flags;

constexpr const char* kLs = "vmcore-ls";    // two hogs, default weight
constexpr const char* kBe = "vmcore-be";    // two hogs, cpu.max 20% of one CPU
constexpr const char* kMem = "vmcore-mem";  // an allocator above memory.high

bool writeFile(const std::string& path, const std::string& value) {
  std::ofstream f(path);
  f << value;
  f.flush();
  return static_cast<bool>(f);
}

// Runs fn in a child placed in cgroup `name` (it moves itself by writing "0", as the kernel
// allows). The child exits when fn returns or is killed by the parent.
pid_t spawnIn(const std::string& name, void (*fn)(int), int arg) {
  pid_t pid = fork();
  if (pid == 0) {
    if (!writeFile(g_flags.root + "/" + name + "/cgroup.procs", "0")) {
      _exit(3);
    }
    fn(arg);
    _exit(0);
  }
  return pid;
}

void hog(int seconds) {
  auto end = std::chrono::steady_clock::now() + std::chrono::seconds(seconds);
  volatile uint64_t x = 0;
  while (std::chrono::steady_clock::now() < end) {
    for (int i = 0; i < 100000; ++i) {
      x = x + static_cast<uint64_t>(i);
    }
  }
}

// Sleeps and wakes often, so its run-queue waits behind the hogs are sampled at wakeup.
void napper(int seconds) {
  auto end = std::chrono::steady_clock::now() + std::chrono::seconds(seconds);
  while (std::chrono::steady_clock::now() < end) {
    usleep(2000);
  }
}

// Touches 1 MiB at a time up to mib MiB; past memory.high every charge enters memcg reclaim.
void allocator(int mib) {
  std::vector<char*> blocks;
  for (int i = 0; i < mib; ++i) {
    auto* p = static_cast<char*>(malloc(1 << 20));
    if (p == nullptr) {
      break;
    }
    memset(p, i, 1 << 20);
    blocks.push_back(p);
  }
  pause();  // holds the memory until killed
}

struct SuiteRun {
  std::optional<Collector> collector;
  std::string create_error;
  std::optional<Snapshot> mid;   // mid-workload
  std::optional<Snapshot> snap;  // end of the workload
  std::string snap_error;
  std::string links;  // bpftool output, for the record
  int bpftool_links = -1;
};
SuiteRun* g_run = nullptr;

std::string runCapture(const std::string& cmd, int* status) {
  std::string out;
  FILE* p = popen(cmd.c_str(), "r");
  if (p == nullptr) {
    *status = -1;
    return out;
  }
  char buf[4096];
  size_t n = 0;
  while ((n = fread(buf, 1, sizeof buf, p)) > 0) {
    out.append(buf, n);
  }
  *status = pclose(p);
  return out;
}

const CgroupSample* find(const Snapshot& snap, const std::string& rel) {
  for (const auto& c : snap.cgroups) {
    if (c.path == rel) {
      return &c;
    }
  }
  return nullptr;
}

void printSample(const CgroupSample& c) {
  std::printf(
      "core:   %-12s id=%llu runq n=%llu p50=%lluus p99=%lluus invol=%llu oncpu=%.1fms "
      "wakeups=%llu reclaim n=%llu stall=%.1fms",
      c.path.c_str(), static_cast<unsigned long long>(c.id),
      static_cast<unsigned long long>(c.runq.count), static_cast<unsigned long long>(c.runq.p50_us),
      static_cast<unsigned long long>(c.runq.p99_us),
      static_cast<unsigned long long>(c.involuntary_switches),
      static_cast<double>(c.oncpu_ns) / 1e6, static_cast<unsigned long long>(c.wakeups),
      static_cast<unsigned long long>(c.reclaim_count),
      static_cast<double>(c.reclaim_stall_ns) / 1e6);
  if (c.throttling) {
    std::printf(" throttled=%llu/%llu", static_cast<unsigned long long>(c.throttling->nr_throttled),
                static_cast<unsigned long long>(c.throttling->nr_periods));
  }
  if (c.cpu_pressure) {
    std::printf(" cpu.psi.some=%lluus",
                static_cast<unsigned long long>(c.cpu_pressure->some.total_us));
  }
  for (const auto& a : c.preempted_by) {
    std::printf(" by[%s]=%llu", a.path.c_str(), static_cast<unsigned long long>(a.preemptions));
  }
  std::printf("\n");
}

class Core : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    g_run = new SuiteRun();
    for (const char* name : {kLs, kBe, kMem}) {
      std::string dir = g_flags.root + "/" + name;
      rmdir(dir.c_str());
      if (mkdir(dir.c_str(), 0755) != 0) {
        g_run->create_error = "mkdir " + dir + ": " + std::strerror(errno);
        return;
      }
    }
    writeFile(g_flags.root + "/" + kBe + "/cpu.max", "20000 100000");
    writeFile(g_flags.root + "/" + kMem + "/memory.high", std::to_string(8 << 20));

    CollectorOptions opts;
    opts.cgroup_root = g_flags.root;
    opts.force_raw_tp = g_flags.raw_tp;
    // Off by default (cost per wakeup); on here so the wakeup programs prove they load too.
    opts.wakeup_depth = true;
    opts.log = [](int level, const std::string& msg) {
      if (level <= 1) {
        std::printf("core: libbpf[%d]: %s", level, msg.c_str());
        if (msg.empty() || msg.back() != '\n') {
          std::printf("\n");
        }
      }
    };
    auto start = std::chrono::steady_clock::now();
    auto c = Collector::create(opts);
    auto load_ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                       std::chrono::steady_clock::now() - start)
                       .count();
    if (!c.has_value()) {
      g_run->create_error = c.error().message();
      std::printf("core: Collector::create failed: %s\n", g_run->create_error.c_str());
      return;
    }
    g_run->collector.emplace(std::move(*c));
    std::printf("core: attached mode=%s attach=%s hierarchy=%s load+attach=%lldms\n",
                colod::collect::toString(g_run->collector->mode()),
                colod::collect::toString(g_run->collector->attachKind()),
                g_run->collector->hierarchyRoot().c_str(), static_cast<long long>(load_ms));

    // Independent evidence of what attached: the kernel's own list of BPF links.
    int status = 0;
    g_run->links = runCapture("bpftool link show 2>&1", &status);
    if (status == 0) {
      g_run->bpftool_links = 0;
      std::istringstream in(g_run->links);
      for (std::string line; std::getline(in, line);) {
        if (!line.empty() && std::isdigit(static_cast<unsigned char>(line[0])) != 0) {
          ++g_run->bpftool_links;
        }
      }
      std::printf("core: bpftool link show (%d links, %zu bytes):\n%s", g_run->bpftool_links,
                  g_run->links.size(), g_run->links.c_str());
      std::string progs = runCapture("bpftool prog show 2>&1 | grep -E '^[0-9]+: '", &status);
      std::printf("core: bpftool prog show:\n%s", progs.c_str());
    } else {
      std::printf("core: bpftool not available (status %d): link list not cross-checked\n", status);
    }

    // Throttling and PSI are deltas between snapshots: take the baseline now.
    if (auto base = g_run->collector->snapshot(); !base.has_value()) {
      g_run->snap_error = "baseline: " + base.error().message();
      return;
    }

    int secs = g_flags.seconds;
    std::vector<pid_t> kids = {spawnIn(kLs, hog, secs), spawnIn(kLs, napper, secs),
                               spawnIn(kBe, hog, secs), spawnIn(kBe, hog, secs)};
    pid_t mem = spawnIn(kMem, allocator, 32);
    // The collector reads cpu.stat deltas from the second interval a cgroup is active in, so
    // take one snapshot mid-workload; checks of counters sum both intervals.
    std::this_thread::sleep_for(std::chrono::milliseconds(secs * 400));
    if (auto mid = g_run->collector->snapshot(); mid.has_value()) {
      g_run->mid.emplace(std::move(*mid));
    } else {
      g_run->snap_error = "mid: " + mid.error().message();
    }
    for (pid_t k : kids) {
      int st = 0;
      waitpid(k, &st, 0);
    }
    kill(mem, SIGKILL);
    waitpid(mem, nullptr, 0);

    auto s = g_run->collector->snapshot();
    if (!s.has_value()) {
      g_run->snap_error = s.error().message();
      return;
    }
    g_run->snap.emplace(std::move(*s));
    std::printf("core: end snapshot interval=%.2fs cgroups=%zu drops=%llu unresolved=%llu\n",
                static_cast<double>(g_run->snap->interval.count()) / 1e9,
                g_run->snap->cgroups.size(),
                static_cast<unsigned long long>(g_run->snap->stats.map_drops),
                static_cast<unsigned long long>(g_run->snap->stats.unresolved_ids));
    for (const auto& sample : g_run->snap->cgroups) {
      if (sample.path.rfind("/vmcore-", 0) == 0 || sample.path == "/init.scope") {
        printSample(sample);
      }
    }
  }

  static void TearDownTestSuite() {
    delete g_run;
    g_run = nullptr;
    for (const char* name : {kLs, kBe, kMem}) {
      rmdir((g_flags.root + "/" + name).c_str());
    }
  }

  void SetUp() override {
    ASSERT_TRUE(g_run->collector.has_value()) << "Collector::create: " << g_run->create_error;
    ASSERT_TRUE(g_run->mid.has_value() && g_run->snap.has_value())
        << "snapshot: " << g_run->snap_error;
  }

  // A counter summed over both workload intervals.
  static uint64_t total(const char* name, uint64_t CgroupSample::*field) {
    uint64_t sum = 0;
    for (const auto* snap : {&*g_run->mid, &*g_run->snap}) {
      if (const CgroupSample* c = find(*snap, std::string("/") + name); c != nullptr) {
        sum += c->*field;
      }
    }
    return sum;
  }

  static const CgroupSample& sample(const char* name) {
    const CgroupSample* c = find(*g_run->snap, std::string("/") + name);
    if (c == nullptr) {
      static const CgroupSample kEmpty{};
      ADD_FAILURE() << "no sample for /" << name << " in the snapshot";
      return kEmpty;
    }
    return *c;
  }
};

TEST_F(Core, LoadsAndAttachesOnThisKernel) {
  EXPECT_EQ(g_run->collector->attachKind(), g_flags.raw_tp ? colod::collect::AttachKind::RawTp
                                                           : colod::collect::AttachKind::TpBtf)
      << "tp_btf is available on 6.1: the probe should have chosen it";
  if (g_run->bpftool_links >= 0) {
    // sched_switch at least; more with wakeup depth and the reclaim programs.
    EXPECT_GE(g_run->bpftool_links, 1) << g_run->links;
  }
}

TEST_F(Core, PureV2ModeAndIdsAreCgroup2Inodes) {
  EXPECT_EQ(g_run->collector->mode(), colod::collect::CgroupMode::V2);
  EXPECT_EQ(g_run->collector->hierarchyRoot(), g_flags.root);
  for (const char* name : {kLs, kBe}) {
    struct stat st {};
    ASSERT_EQ(stat((g_flags.root + "/" + name).c_str(), &st), 0);
    EXPECT_EQ(sample(name).id, static_cast<uint64_t>(st.st_ino)) << name;
  }
}

TEST_F(Core, RunQueueLatencyPerCgroup) {
  for (const char* name : {kLs, kBe}) {
    EXPECT_GT(total(name, &CgroupSample::oncpu_ns), 10'000'000U) << name << ": hogs ran for seconds";
    uint64_t waits = 0;
    for (const auto* snap : {&*g_run->mid, &*g_run->snap}) {
      if (const CgroupSample* c = find(*snap, std::string("/") + name); c != nullptr) {
        waits += c->runq.count;
      }
    }
    EXPECT_GT(waits, 0U) << name;
  }
  EXPECT_GT(total(kLs, &CgroupSample::wakeups), 0U) << "the napper wakes every 2 ms";
}

TEST_F(Core, ContentionAttributedToAggressors) {
  uint64_t invol = total(kLs, &CgroupSample::involuntary_switches) +
                   total(kBe, &CgroupSample::involuntary_switches);
  EXPECT_GT(invol, 0U) << "4 runnable tasks on 2 vCPUs must preempt each other";
  size_t aggressors = sample(kLs).preempted_by.size() + sample(kBe).preempted_by.size();
  EXPECT_GT(aggressors, 0U);
}

TEST_F(Core, ThrottlingFromCpuStat) {
  const auto& be = sample(kBe);
  ASSERT_TRUE(be.throttling.has_value()) << "cpu.stat not read for /" << kBe;
  EXPECT_GT(be.throttling->nr_throttled, 0U) << "cpu.max 20000/100000 with two hogs";
  EXPECT_GT(be.throttling->throttled_ns, 0U);
}

TEST_F(Core, PsiPerCgroup) {
  for (const char* name : {kLs, kBe}) {
    const auto& c = sample(name);
    ASSERT_TRUE(c.cpu_pressure.has_value()) << name;
    EXPECT_TRUE(c.memory_pressure.has_value()) << name;
  }
  EXPECT_GT(sample(kBe).cpu_pressure->some.total_us, 0U) << "throttled hogs wait";
}

TEST_F(Core, ReclaimStallPerCgroup) {
  EXPECT_GT(total(kMem, &CgroupSample::reclaim_count), 0U) << "32 MiB touched under memory.high=8M";
  EXPECT_GT(total(kMem, &CgroupSample::reclaim_stall_ns), 0U);
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<char*> rest = {argv[0]};
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--raw-tp") {
      g_flags.raw_tp = true;
    } else if (a == "--seconds" && i + 1 < argc) {
      g_flags.seconds = std::max(1, std::atoi(argv[++i]));
    } else if (a == "--root" && i + 1 < argc) {
      g_flags.root = argv[++i];
    } else {
      rest.push_back(argv[i]);
    }
  }
  int n = static_cast<int>(rest.size());
  ::testing::InitGoogleTest(&n, rest.data());
  return RUN_ALL_TESTS();
}
