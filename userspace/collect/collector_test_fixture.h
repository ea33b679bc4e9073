// SPDX-License-Identifier: Apache-2.0
// The privileged collector tests' fixture and helpers (real cgroups, forked workloads pinned to
// a CPU), shared by collector_test.cpp and wakeup_test.cpp. Test-only.
#pragma once

#include <fcntl.h>
#include <gtest/gtest.h>
#include <linux/magic.h>
#include <sched.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <functional>
#include <memory>
#include <mutex>
#include <new>
#include <optional>
#include <set>
#include <sstream>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "colod/cgroup/cgroup.h"
#include "colod/collect/collector.h"
#include "colod/collect/format.h"
#include "colod/testing/result_matchers.h"

namespace colod::collect {
namespace {  // one copy per test file; not every file uses every helper

using namespace std::chrono_literals;
namespace fs = std::filesystem;

constexpr int kCpu = 1;  // the CPU the contention test pins to (the host has 2)

[[maybe_unused]] std::string uniqueName(const std::string& what) {
  return "colod-test-collect-" + std::to_string(::getpid()) + "-" + what;
}

// The kernel's own CPU time of a cgroup (ns), from the file named: cpuacct.usage (v1, ns) or a
// cpu.stat's usage_usec (v2, and the unified hierarchy of a hybrid host). 0 if unreadable.
[[maybe_unused]] uint64_t usageNsIn(const std::string& file) {
  std::ifstream in(file);
  uint64_t v = 0;
  if (file.ends_with("cpuacct.usage")) {
    in >> v;
    return v;
  }
  std::string key;
  while (in >> key >> v) {
    if (key == "usage_usec") {
      return v * 1000;
    }
  }
  return 0;
}

[[maybe_unused]] bool writeFile(const std::string& path, const std::string& value) {
  std::ofstream f(path);
  f << value;
  f.flush();
  return static_cast<bool>(f);
}

[[maybe_unused]] std::string readFirstLine(const std::string& path) {
  std::ifstream f(path);
  std::string line;
  std::getline(f, line);
  return line;
}

// Two programs' counts of the same switches: equal but for a hash update that met a held
// bucket lock (counted in map_lock_skips), within 1 % + 2.
[[maybe_unused]] bool sameCount(uint64_t a, uint64_t b) {
  const auto d = static_cast<double>(a > b ? a - b : b - a);
  return d <= 0.01 * static_cast<double>(std::max(a, b)) + 2;
}

// The same relative cgroup in several v1/v2 hierarchies; removed (with retries, tasks
// having exited) when destroyed, so a failing test leaves nothing behind.
class TestCgroup {
 public:
  TestCgroup(std::vector<std::string> roots, const std::string& name) {
    for (auto& r : roots) {
      const std::string d = r + "/" + name;
      if (::mkdir(d.c_str(), 0755) == 0 || errno == EEXIST) {
        dirs_.push_back(d);
      } else {
        ADD_FAILURE() << "mkdir " << d << ": " << std::strerror(errno);
      }
    }
  }
  ~TestCgroup() {
    for (auto it = dirs_.rbegin(); it != dirs_.rend(); ++it) {
      for (int i = 0; i < 100 && ::rmdir(it->c_str()) != 0 && errno == EBUSY; ++i) {
        std::this_thread::sleep_for(20ms);
      }
    }
  }
  TestCgroup(const TestCgroup&) = delete;
  TestCgroup& operator=(const TestCgroup&) = delete;

  [[nodiscard]] const std::vector<std::string>& dirs() const { return dirs_; }
  [[nodiscard]] std::string dirIn(const std::string& root) const {
    for (const auto& d : dirs_) {
      if (d.rfind(root + "/", 0) == 0) {
        return d;
      }
    }
    return {};
  }
  // Removes the directories now (the vanish test); the destructor then has nothing to do.
  void removeNow() {
    for (auto it = dirs_.rbegin(); it != dirs_.rend(); ++it) {
      for (int i = 0; i < 100 && ::rmdir(it->c_str()) != 0 && errno == EBUSY; ++i) {
        std::this_thread::sleep_for(20ms);
      }
    }
    dirs_.clear();
  }

 private:
  std::vector<std::string> dirs_;
};

// A forked workload that joins the given cgroups first. Killed and reaped on destruction.
class Child {
 public:
  Child(const TestCgroup& cg, int cpu, std::function<void()> body) {
    pid_ = ::fork();
    if (pid_ == 0) {
      for (const auto& d : cg.dirs()) {
        const std::string procs = d + "/cgroup.procs";
        if (!writeFile(procs, std::to_string(::getpid()))) {
          std::fprintf(stderr, "cannot join %s\n", procs.c_str());
          ::_exit(2);
        }
      }
      if (cpu >= 0) {
        cpu_set_t set;
        CPU_ZERO(&set);
        CPU_SET(cpu, &set);
        ::sched_setaffinity(0, sizeof(set), &set);
      }
      body();
      ::_exit(0);
    }
  }
  ~Child() {
    if (pid_ > 0) {
      ::kill(pid_, SIGKILL);
      ::waitpid(pid_, nullptr, 0);
    }
  }
  Child(const Child&) = delete;
  Child& operator=(const Child&) = delete;
  // Sends sig to the child (SIGSTOP/SIGCONT to freeze and resume a workload).
  void signal(int sig) const {
    if (pid_ > 0) {
      ::kill(pid_, sig);
    }
  }
  [[nodiscard]] pid_t pid() const { return pid_; }
  // Waits for a normal exit; returns the exit status (or -1).
  int wait() {
    int st = 0;
    if (pid_ <= 0 || ::waitpid(pid_, &st, 0) != pid_) {
      return -1;
    }
    pid_ = -1;
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
  }

 private:
  pid_t pid_ = -1;
};

[[maybe_unused]] void spinFor(std::chrono::microseconds d) {
  const auto end = std::chrono::steady_clock::now() + d;
  while (std::chrono::steady_clock::now() < end) {
  }
}

// Spins until this thread has used `d` of CPU time: the same work whatever else runs on the
// CPU (a test that bounds what was measured from below must not depend on the machine's load).
[[maybe_unused]] void spinCpuFor(std::chrono::microseconds d) {
  auto used = [] {
    timespec ts{};
    ::clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return std::chrono::seconds(ts.tv_sec) + std::chrono::nanoseconds(ts.tv_nsec);
  };
  const auto end = used() + d;
  while (used() < end) {
  }
}

// A T shared between a test and the children it forks (an anonymous shared mapping): what a
// child saw of itself, reported back without a pipe.
template <typename T>
class SharedWithChildren {
 public:
  SharedWithChildren()
      : p_(::mmap(nullptr, sizeof(T), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0)) {
    if (p_ != MAP_FAILED) {
      new (p_) T{};
    }
  }
  ~SharedWithChildren() {
    if (p_ != MAP_FAILED) {
      ::munmap(p_, sizeof(T));
    }
  }
  SharedWithChildren(const SharedWithChildren&) = delete;
  SharedWithChildren& operator=(const SharedWithChildren&) = delete;
  [[nodiscard]] bool ok() const { return p_ != MAP_FAILED; }
  T* operator->() { return static_cast<T*>(p_); }

 private:
  void* p_;
};

// Where a spinning child's CPU time went, as it saw it: on the CPU it was pinned to, or
// elsewhere (its affinity overridden: a v1 cpuset rewrite, a hotplug).
struct CpuTimeSplit {
  uint64_t on_ns = 0;
  uint64_t elsewhere_ns = 0;
};

// Spins until the calling thread has run `d` on a CPU (a wall-clock spin would share its time
// with whatever else runs there), charging each step of its CPU clock to the CPU it ran on.
[[maybe_unused]] void spinCpuForOn(std::chrono::microseconds d, int cpu, CpuTimeSplit* split) {
  auto cpuNow = [] {
    timespec ts{};
    ::clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return static_cast<uint64_t>(ts.tv_sec) * 1'000'000'000u + static_cast<uint64_t>(ts.tv_nsec);
  };
  const uint64_t start = cpuNow();
  const auto want = static_cast<uint64_t>(d.count()) * 1000u;
  uint64_t last = start;
  while (last - start < want) {
    const int here = ::sched_getcpu();
    const uint64_t now = cpuNow();
    (here == cpu ? split->on_ns : split->elsewhere_ns) += now - last;
    last = now;
  }
}

// The kernel's account of a task so far (/proc/<pid>/schedstat, CONFIG_SCHED_INFO): its CPU
// time and its run-queue waits, ns, and how many times it was given a CPU. The waits are added
// when the task gets the CPU, so a wait still going on is not in them. A zombie's still reads
// (before the reap).
struct TaskSchedstat {
  uint64_t ran_ns = 0;
  uint64_t waited_ns = 0;
  uint64_t slices = 0;
};
[[maybe_unused]] TaskSchedstat taskSchedstat(pid_t pid) {
  TaskSchedstat st;
  std::ifstream in("/proc/" + std::to_string(pid) + "/schedstat");
  in >> st.ran_ns >> st.waited_ns >> st.slices;
  return st;
}

// The time the hypervisor took from `cpu` since boot (/proc/stat's steal, in USER_HZ ticks), ns;
// 0 when not reported. The rq clock runs on through it, a task's sum_exec_runtime does not.
[[maybe_unused]] uint64_t cpuStealNs(int cpu) {
  std::ifstream in("/proc/stat");
  const std::string want = "cpu" + std::to_string(cpu);
  std::string line;
  while (std::getline(in, line)) {
    std::istringstream fields(line);
    std::string name;
    fields >> name;
    if (name != want) {
      continue;
    }
    uint64_t v[8] = {};
    for (auto& x : v) {
      fields >> x;
    }
    return fields ? v[7] * (1'000'000'000u / static_cast<uint64_t>(::sysconf(_SC_CLK_TCK))) : 0;
  }
  return 0;
}

[[maybe_unused]] uint64_t monotonicNs() {
  return static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(
                                   std::chrono::steady_clock::now().time_since_epoch())
                                   .count());
}

// A task's scheduler state (/proc/<pid>/stat: R running or runnable, S sleeping, ...), or 0
// when it cannot be read.
[[maybe_unused]] char taskState(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
  std::string line;
  std::getline(in, line);
  const auto paren = line.rfind(')');  // the command name may hold spaces and parentheses
  return paren != std::string::npos && paren + 2 < line.size() ? line[paren + 2] : '\0';
}

// A watched cgroup's waits after wakeups by whom (CgroupSample::waited_behind): behind cgroup
// `id`, and behind anyone.
struct BehindSplit {
  uint64_t of_ns = 0;
  uint64_t of_waits = 0;
  uint64_t all_ns = 0;
};
[[maybe_unused]] BehindSplit behindOf(const CgroupSample& s, uint64_t id) {
  BehindSplit b;
  for (const auto& w : s.waited_behind) {
    b.all_ns += w.wait_ns;
    if (w.cgroup_id == id) {
      b.of_ns += w.wait_ns;
      b.of_waits += w.waits;
    }
  }
  return b;
}

// The test names of a suite run over both attach kinds (its bool parameter: force_raw_tp).
[[maybe_unused]] std::string attachKindName(const ::testing::TestParamInfo<bool>& p) {
  return p.param ? "RawTp" : "TpBtf";
}

// Sleeps 1 ms, works 3 ms, for `total`: a latency-sensitive service in miniature. The work
// is longer than an EEVDF base slice (0.75 ms * (1 + log2(ncpu))), so a competitor with a
// higher weight preempts it: the preemption matrix then has something to show.
[[maybe_unused]] void sleeper(std::chrono::milliseconds total,
                              std::chrono::microseconds burst = 3000us) {
  const auto end = std::chrono::steady_clock::now() + total;
  while (std::chrono::steady_clock::now() < end) {
    const timespec ts{0, 1000 * 1000};
    ::nanosleep(&ts, nullptr);
    spinFor(burst);
  }
}

[[noreturn, maybe_unused]] void hog() {
  while (true) {
    spinFor(1s);
  }
}

// Writes `bytes` to a file on disk (page cache, reclaimable without swap), then removes it.
[[maybe_unused]] void writer(const std::string& path, std::size_t bytes) {
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (fd < 0) {
    ::_exit(3);
  }
  std::vector<char> buf(1 << 20, 'x');
  for (std::size_t done = 0; done < bytes; done += buf.size()) {
    if (::write(fd, buf.data(), buf.size()) != static_cast<ssize_t>(buf.size())) {
      ::_exit(4);
    }
  }
  ::close(fd);  // NOLINT: a forked child's last act; no RAII owner outlives it
  ::unlink(path.c_str());
}

// Touches `mib` MiB of anonymous memory, 1 MiB at a time, then exits (freeing it).
[[maybe_unused]] void toucher(int mib) {
  constexpr std::size_t kChunk = std::size_t{1} << 20;
  std::vector<std::unique_ptr<char[]>> chunks;
  for (int i = 0; i < mib; ++i) {
    chunks.push_back(std::make_unique_for_overwrite<char[]>(kChunk));
    // Volatile stores, one per page: the compiler may not drop the allocation as unused.
    volatile char* p = chunks.back().get();
    for (std::size_t off = 0; off < kChunk; off += 4096) {
      p[off] = 1;
    }
  }
}

// Progress lines with the time since the test started: under TCG (vmtests) a phase can take
// many times longer than on the host, and this says which one.
class Phases {
 public:
  void operator()(const char* what) const {
    std::printf("[+%.1fs] %s\n",
                std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count(),
                what);
    std::fflush(stdout);
  }

 private:
  std::chrono::steady_clock::time_point start_ = std::chrono::steady_clock::now();
};

// nonvoluntary_ctxt_switches of /proc/<pid>/status: the kernel's count of preemptions.
[[maybe_unused]] uint64_t nonvoluntarySwitches(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/status");
  std::string line;
  const std::string key = "nonvoluntary_ctxt_switches:";
  while (std::getline(in, line)) {
    if (line.rfind(key, 0) == 0) {
      return std::stoull(line.substr(key.size()));
    }
  }
  return 0;
}

[[maybe_unused]] const CgroupSample* find(const Snapshot& s, uint64_t id) {
  for (const auto& c : s.cgroups) {
    if (c.id == id) {
      return &c;
    }
  }
  return nullptr;
}

class CollectorTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (::geteuid() != 0) {
      GTEST_SKIP() << "not root: loading BPF needs CAP_BPF/CAP_PERFMON";
    }
    if (::access("/sys/kernel/btf/vmlinux", R_OK) != 0) {
      GTEST_SKIP() << "kernel has no BTF (/sys/kernel/btf/vmlinux)";
    }
    auto h = cgroup::probe("/sys/fs/cgroup");
    ASSERT_TRUE(h.has_value()) << h.error().message();
    hier_ = *h;
  }

  // Creates a collector or skips when the machine cannot load BPF.
  std::optional<Collector> makeCollector(CollectorOptions opts = {}) {
    auto c = Collector::create(opts);
    if (!c && (c.error().errnoValue() == EPERM || c.error().errnoValue() == EACCES)) {
      return std::nullopt;
    }
    EXPECT_TRUE(c.has_value()) << c.error().message();
    if (!c) {
      return std::nullopt;
    }
    return std::move(*c);
  }

  // SlotsOfVanishedCgroupsAreReusedFromZero, with the kernel's sums refused with this errno
  // (CollectorOptions::kernel_sums_refusal) or not (0).
  void slotsAreReusedFromZero(int kernel_sums_refusal);

  // The layout decides which hierarchy carries the cpu and memory knobs: the v1 cpu (cpuset,
  // memory) controllers on hybrid/v1 hosts, the one cgroup2 tree on pure v2 hosts (the VM).
  [[nodiscard]] bool v2() const { return hier_.layout == cgroup::Layout::V2; }
  // Why this host cannot weigh or pin test cgroups' CPU ("" when it can).
  [[nodiscard]] std::string noCpuController() const {
    if (v2() ? !v2Controller("cpu") : hier_.cpu.empty()) {
      return v2() ? "cgroup2 root does not delegate the cpu controller"
                  : "no v1 cpu controller on this host";
    }
    return "";
  }
  [[nodiscard]] std::string cpuRoot() const { return v2() ? hier_.unified : hier_.cpu; }
  [[nodiscard]] std::string memRoot() const { return v2() ? hier_.unified : hier_.memory; }
  [[nodiscard]] std::string cpusetRoot() const { return v2() ? hier_.unified : hier_.cpuset; }
  [[nodiscard]] CgroupMode expectedMode() const {
    return v2() ? CgroupMode::V2 : CgroupMode::V1Cpu;
  }
  // Every hierarchy a workload cgroup needs for the cpu tests (one dir on v2).
  [[nodiscard]] std::vector<std::string> cpuRoots() const {
    std::vector<std::string> roots{cpuRoot()};
    if (!v2()) {
      for (const auto& r : {hier_.cpuacct, hier_.cpuset}) {
        if (!r.empty() && r != hier_.cpu) {
          roots.push_back(r);
        }
      }
    }
    return roots;
  }
  // A CPU weight on the v1 scale (cpu.shares, 2..262144, default 1024), written as cpu.shares
  // on v1 and as the equivalent cpu.weight (1..10000, default 100) on v2: the inverse of the
  // kernel's sched_weight_from_cgroup() (shares = weight * 1024 / 100), clamped to v2's range.
  [[nodiscard]] bool setWeight(const std::string& dir, uint64_t shares) const {
    if (!v2()) {
      return writeFile(dir + "/cpu.shares", std::to_string(shares));
    }
    const uint64_t w = std::clamp<uint64_t>(shares * 100 / 1024, 1, 10000);
    return writeFile(dir + "/cpu.weight", std::to_string(w));
  }
  // Pins a cgroup to one CPU (cpuset.cpus; v1 also needs cpuset.mems, v2 inherits it).
  [[nodiscard]] bool pinCpuset(const std::string& dir, int cpu) const {
    if (!writeFile(dir + "/cpuset.cpus", std::to_string(cpu))) {
      return false;
    }
    return v2() || writeFile(dir + "/cpuset.mems", readFirstLine(hier_.cpuset + "/cpuset.mems"));
  }
  // True when the cgroup2 root delegates this controller to its children.
  [[nodiscard]] bool v2Controller(const std::string& ctrl) const {
    std::istringstream in(readFirstLine(hier_.unified + "/cgroup.subtree_control"));
    std::string c;
    while (in >> c) {
      if (c == ctrl) {
        return true;
      }
    }
    return false;
  }

  cgroup::Hierarchies hier_;
};

#define MAKE_COLLECTOR_OR_SKIP(var, ...)                     \
  auto var##_opt = makeCollector(__VA_ARGS__);               \
  if (!var##_opt) {                                          \
    if (!HasFailure()) {                                     \
      GTEST_SKIP() << "BPF load not permitted here (EPERM)"; \
    }                                                        \
    return;                                                  \
  }                                                          \
  Collector& var = *var##_opt

}  // namespace
}  // namespace colod::collect
