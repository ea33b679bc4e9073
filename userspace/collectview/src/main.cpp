// SPDX-License-Identifier: Apache-2.0
// colod-collect: watch per-cgroup run-queue latency, contention and reclaim live.
#include <sys/stat.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <iostream>
#include <thread>

#include "colod/collect/collector.h"
#include "colod/collectview/view.h"

namespace {

// Exit code 3: a startup condition a restart will not fix (style rule 15a).
constexpr int kExitCantRecover = 3;

std::string explain(const colod::Error& e) {
  switch (e.errnoValue()) {
    case EPERM:
    case EACCES:
      return "not permitted to load BPF programs: run as root (CAP_BPF + CAP_PERFMON)";
    case ENOENT:
      return "kernel support missing: " + e.message();
    case EOPNOTSUPP:
    case EINVAL:
      return "this kernel cannot run the colod BPF programs: " + e.message();
    default:
      return e.message();
  }
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"colod-collect: per-cgroup run-queue latency, preemption and reclaim, live"};
  int interval_ms = 1000;
  int count = 0;
  bool json = false;
  bool hist = false;
  bool verbose = false;
  bool raw_tp = false;
  bool wakeup_depth = false;
  bool no_reclaim = false;
  bool every_slot = false;
  bool no_cpu_marks = false;
  std::vector<std::string> watch_paths;
  int watch_threshold_us = 3000;
  std::string filter;
  std::string cgroup_root = "/sys/fs/cgroup";
  app.add_option("-i,--interval", interval_ms, "Interval in milliseconds")
      ->check(CLI::Range(10, 3600000));
  app.add_option("-n,--count", count, "Exit after N snapshots (0: run until interrupted)")
      ->check(CLI::NonNegativeNumber);
  app.add_flag("--json", json, "One JSON object per snapshot, one per line");
  app.add_flag("--hist", hist, "Print run-queue latency histograms (runqlat style)");
  app.add_option("--cgroup", filter, "Show only cgroups whose path contains this substring");
  app.add_option("--cgroup-root", cgroup_root, "cgroupfs root");
  app.add_flag("--raw-tp", raw_tp, "Use raw_tp attachment instead of tp_btf");
  app.add_flag("--wakeup-depth", wakeup_depth,
               "Attach sched_wakeup for run-queue depth (~80 ns/wakeup) and count zero-read "
               "waits (stale) per cgroup");
  app.add_flag("--no-reclaim", no_reclaim, "Do not attach the vmscan reclaim programs");
  app.add_flag("--every-slot", every_slot,
               "No change marks: read every cgroup's scheduler counters at every snapshot "
               "(compares the marks' cost in scripts/bench/bpf-overhead.sh)");
  app.add_flag("--no-cpu-marks", no_cpu_marks,
               "No CPU marks: the kernel's sum adds every possible CPU's copy (compares the "
               "marks' cost in scripts/bench/bpf-overhead.sh)");
  app.add_option("--watch", watch_paths,
                 "Watch this cgroup (path under the id hierarchy) for wakeups: its run-queue "
                 "wait within 10 ms reaching --watch-threshold-us posts an event (counted on "
                 "stderr at exit)");
  app.add_option("--watch-threshold-us", watch_threshold_us, "Wait that posts a wakeup")
      ->check(CLI::Range(1, 10000000));
  app.add_flag("-v,--verbose", verbose, "libbpf debug output");
  CLI11_PARSE(app, argc, argv);

  if (::geteuid() != 0) {
    std::fprintf(stderr, "colod-collect: must run as root: it loads BPF programs (try: sudo %s)\n",
                 argv[0]);
    return kExitCantRecover;
  }
  colod::collect::CollectorOptions opts;
  opts.cgroup_root = cgroup_root;
  opts.force_raw_tp = raw_tp;
  opts.wakeup_depth = wakeup_depth;
  opts.reclaim = !no_reclaim;
  opts.changed_only = !every_slot;
  opts.cpu_marks = !no_cpu_marks;
  opts.log = [verbose](int level, const std::string& msg) {
    if (level == 0 || verbose) {
      std::fprintf(stderr, "libbpf: %s\n", msg.c_str());
    }
  };
  auto collector = colod::collect::Collector::create(opts);
  if (!collector) {
    std::fprintf(stderr, "colod-collect: %s\n", explain(collector.error()).c_str());
    return kExitCantRecover;
  }
  if (!json) {
    std::printf("colod-collect: cgroup mode %s (ids from %s), attached via %s; Ctrl-C to stop\n",
                colod::collect::toString(collector->mode()), collector->hierarchyRoot().c_str(),
                colod::collect::toString(collector->attachKind()));
    std::fflush(stdout);
  }
  if (!watch_paths.empty()) {
    std::vector<colod::collect::WatchedCgroup> watched;
    for (const auto& p : watch_paths) {
      // A cgroup's id is its directory's inode number.
      const std::string dir = collector->hierarchyRoot() + "/" + p;
      struct stat st {};
      if (::stat(dir.c_str(), &st) != 0) {
        std::fprintf(stderr, "colod-collect: --watch %s: %s\n", dir.c_str(), std::strerror(errno));
        return kExitCantRecover;
      }
      watched.push_back(
          {.id = st.st_ino, .threshold = std::chrono::microseconds(watch_threshold_us)});
    }
    if (auto r = collector->setWatched(watched); !r) {
      std::fprintf(stderr, "colod-collect: %s\n", r.error().message().c_str());
      return 1;
    }
  }
  uint64_t wakeups = 0;
  const auto interval = std::chrono::milliseconds(interval_ms);
  auto next = std::chrono::steady_clock::now() + interval;
  for (int n = 0; count == 0 || n < count; ++n) {
    std::this_thread::sleep_until(next);
    next += interval;
    if (auto ev = collector->consumeWakeups(); ev) {
      wakeups += ev->size();
    }
    auto snap = collector->snapshot();
    if (!snap) {
      std::fprintf(stderr, "colod-collect: %s\n", snap.error().message().c_str());
      return 1;
    }
    auto shown = colod::collectview::filter(std::move(*snap), filter);
    if (json) {
      std::cout << colod::collectview::toJson(shown).dump() << '\n' << std::flush;
    } else if (hist) {
      std::cout << colod::collectview::renderHistograms(shown) << std::flush;
    } else {
      std::cout << "\n" << colod::collectview::renderTable(shown) << std::flush;
    }
  }
  if (!watch_paths.empty()) {
    std::fprintf(stderr, "colod-collect: %llu wakeups\n", static_cast<unsigned long long>(wakeups));
  }
  return 0;
}
