// SPDX-License-Identifier: Apache-2.0
// colod-collect-scale: runs the collector at a fixed interval for scripts/bench/scale.sh and
// prints one line with its cost: snapshot time percentiles, bytes read from BPF per tick, map
// memory, RSS and CPU. --legacy selects the pre-issue-17 read side (CollectorOptions::
// legacy_reads) so one run can show before and after. Not installed.
#include <sys/resource.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <charconv>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "colod/collect/collector.h"

namespace {

constexpr int kExitCantRecover = 3;

// kB value of a /proc/self/status line ("VmRSS:", "VmHWM:"); 0 if absent.
uint64_t statusKib(const std::string& key) {
  std::ifstream in("/proc/self/status");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind(key, 0) == 0) {
      return std::strtoull(line.c_str() + key.size(), nullptr, 10);
    }
  }
  return 0;
}

double cpuSeconds() {
  rusage ru{};
  ::getrusage(RUSAGE_SELF, &ru);
  auto sec = [](const timeval& t) {
    return static_cast<double>(t.tv_sec) + static_cast<double>(t.tv_usec) / 1e6;
  };
  return sec(ru.ru_utime) + sec(ru.ru_stime);
}

double percentile(std::vector<double> v, double q) {
  if (v.empty()) {
    return 0;
  }
  std::sort(v.begin(), v.end());
  const auto i = static_cast<std::size_t>(q * static_cast<double>(v.size() - 1) + 0.5);
  return v[std::min(i, v.size() - 1)];
}

// Where the window's cg_sched reads were summed: "kernel" (every one), "user" (none), "mixed".
const char* sumsWhere(uint64_t kernel_reads, int ticks) {
  if (kernel_reads == 0) {
    return "user";
  }
  // The window's first snapshot is its baseline: ticks - 1 reads lie between the two stats.
  return kernel_reads + 1 >= static_cast<uint64_t>(ticks) ? "kernel" : "mixed";
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"colod-collect-scale: the collector's cost per tick, for scripts/bench/scale.sh"};
  int seconds = 10;
  int warmup_ticks = 10;
  int interval_ms = 100;
  uint32_t max_cgroups = 4096;
  uint32_t map_budget_mib = 0;
  uint32_t files_every = 1;
  uint32_t pressure_every = 0;
  uint32_t every_tick_share = 0;
  bool legacy = false;
  bool user_sums = false;
  bool kernel_sums = false;
  bool no_cpu_marks = false;
  bool no_files = false;
  bool every_slot = false;
  bool pressure_named_only = false;
  bool no_usage = false;
  uint32_t slot_move_min_cpus = colod::collect::CollectorOptions{}.slot_move_min_cpus;
  uint64_t slot_move_every = colod::collect::CollectorOptions{}.slot_move_every_ticks;
  std::string cpu_copies_opt = "present";
  std::string cgroup_root = "/sys/fs/cgroup";
  app.add_option("--seconds", seconds, "Measured window")->check(CLI::Range(1, 3600));
  app.add_option("--warmup-ticks", warmup_ticks, "Snapshots before the window")
      ->check(CLI::Range(0, 1000));
  app.add_option("--interval-ms", interval_ms, "Snapshot interval")->check(CLI::Range(10, 10000));
  app.add_option("--map-budget-mib", map_budget_mib,
                 "CollectorOptions::map_budget_bytes in MiB (colod's default 46; 0: none)");
  app.add_option("--cpu-copies", cpu_copies_opt,
                 "CPUs cg_sched keeps a copy for: present (colod's choice), possible (the maps of "
                 "a node whose possible CPUs are all present), or a number "
                 "(CollectorOptions::sched_cpus)");
  app.add_option("--max-cgroups", max_cgroups, "CollectorOptions::max_cgroups")
      ->check(CLI::Range(1, 1 << 20));
  app.add_option("--files-every", files_every, "CollectorOptions::files_every_n_ticks")
      ->check(CLI::Range(1, 1000));
  app.add_option("--pressure-every", pressure_every,
                 "CollectorOptions::pressure_every_n_ticks (0: --files-every)")
      ->check(CLI::Range(0, 1000));
  app.add_flag("--pressure-named-only", pressure_named_only,
               "CollectorOptions::pressure_of_named_only (as the daemon reads them)");
  app.add_option("--every-tick-share", every_tick_share,
                 "Name one tracked cgroup in K (by id) for Collector::setEveryTick, as the daemon "
                 "names its victims (0: none)")
      ->check(CLI::Range(0, 1000));
  app.add_flag("--legacy", legacy, "The pre-issue-17 read side (full-size dumps, no fd cache)");
  app.add_flag("--every-slot", every_slot,
               "Copy out every live cgroup's cg_sched entry at every tick, not only the changed "
               "ones (changed_only off)");
  app.add_flag("--user-sums", user_sums,
               "Sum cg_sched's per-CPU copies in userspace, not in the kernel (kernel_sums off)");
  app.add_flag("--kernel-sums", kernel_sums,
               "Sum them in the kernel whatever they take (user_read_budget_bytes 0)")
      ->excludes("--user-sums");
  app.add_flag("--no-cpu-marks", no_cpu_marks,
               "The kernel's sum adds every possible CPU's copy (CollectorOptions::cpu_marks off)");
  app.add_flag("--no-files", no_files,
               "Read no cgroup files, only the BPF maps (CollectorOptions::read_files off)");
  app.add_flag("--no-usage", no_usage,
               "CPU time from BPF's switch-outs only, not from the usage counters of cgroups "
               "running long slices (CollectorOptions::usage_of_long_slices off: as before "
               "session 36)");
  app.add_option("--slot-move-min-cpus", slot_move_min_cpus,
                 "Move a cgroup marked on this many CPUs or more to a fresh slot "
                 "(CollectorOptions::slot_move_min_cpus; 0: never)");
  app.add_option("--slot-move-every", slot_move_every,
                 "Check for such cgroups every N ticks (CollectorOptions::slot_move_every_ticks)")
      ->check(CLI::Range(uint64_t{1}, uint64_t{1} << 32));
  app.add_option("--cgroup-root", cgroup_root, "cgroupfs root");
  CLI11_PARSE(app, argc, argv);

  if (::geteuid() != 0) {
    std::fprintf(stderr, "colod-collect-scale: must run as root (loads BPF programs)\n");
    return kExitCantRecover;
  }
  colod::collect::CollectorOptions opts;
  opts.cgroup_root = cgroup_root;
  opts.max_cgroups = max_cgroups;
  opts.map_budget_bytes = uint64_t{map_budget_mib} << 20;
  opts.max_pairs = max_cgroups * 4;
  opts.files_every_n_ticks = files_every;
  opts.pressure_every_n_ticks = pressure_every;
  opts.pressure_of_named_only = pressure_named_only;
  opts.legacy_reads = legacy;
  opts.kernel_sums = !user_sums;
  if (kernel_sums) {
    opts.user_read_budget_bytes = 0;
  }
  opts.changed_only = !every_slot;
  opts.cpu_marks = !no_cpu_marks;
  opts.read_files = !no_files;
  opts.usage_of_long_slices = !no_usage;
  opts.slot_move_min_cpus = slot_move_min_cpus;
  opts.slot_move_every_ticks = slot_move_every;
  if (cpu_copies_opt == "possible") {
    opts.sched_cpus = UINT32_MAX;  // clamped to the possible CPUs
  } else if (cpu_copies_opt != "present") {
    uint32_t n = 0;
    const auto [p, ec] =
        std::from_chars(cpu_copies_opt.data(), cpu_copies_opt.data() + cpu_copies_opt.size(), n);
    if (ec != std::errc() || p != cpu_copies_opt.data() + cpu_copies_opt.size() || n == 0) {
      std::fprintf(stderr,
                   "colod-collect-scale: --cpu-copies: present, possible or a number > 0\n");
      return 2;
    }
    opts.sched_cpus = n;
  }
  auto col = colod::collect::Collector::create(opts);
  if (!col) {
    std::fprintf(stderr, "colod-collect-scale: %s\n", col.error().message().c_str());
    return kExitCantRecover;
  }
  if (!col->sizingNote().empty()) {
    std::fprintf(stderr, "colod-collect-scale: %s\n", col->sizingNote().c_str());
  }
  const auto interval = std::chrono::milliseconds(interval_ms);
  auto next = std::chrono::steady_clock::now() + interval;
  auto tick = [&]() -> colod::Result<colod::collect::Snapshot> {
    std::this_thread::sleep_until(next);
    next += interval;
    return col->snapshot();
  };
  for (int i = 0; i < warmup_ticks; ++i) {
    if (auto s = tick(); !s) {
      std::fprintf(stderr, "colod-collect-scale: %s\n", s.error().message().c_str());
      return 1;
    }
  }
  std::size_t named = 0;
  if (every_tick_share > 0) {
    auto ids = col->trackedCgroupIds();
    if (!ids) {
      std::fprintf(stderr, "colod-collect-scale: %s\n", ids.error().message().c_str());
      return 1;
    }
    std::vector<uint64_t> every;
    for (std::size_t i = 0; i < ids->size(); i += every_tick_share) {
      every.push_back((*ids)[i]);
    }
    named = every.size();
    col->setEveryTick(std::move(every));
  }
  std::vector<double> ms;
  uint64_t read_bytes = 0;
  uint64_t reported = 0;
  colod::collect::CollectorStats first{};
  colod::collect::CollectorStats last{};
  uint64_t entries_read = 0;
  uint64_t cpu_copies = 0;
  const double cpu0 = cpuSeconds();
  const auto t0 = std::chrono::steady_clock::now();
  const int ticks = seconds * 1000 / interval_ms;
  for (int i = 0; i < ticks; ++i) {
    std::this_thread::sleep_until(next);
    next += interval;
    const auto a = std::chrono::steady_clock::now();
    auto s = col->snapshot();
    const auto b = std::chrono::steady_clock::now();
    if (!s) {
      std::fprintf(stderr, "colod-collect-scale: %s\n", s.error().message().c_str());
      return 1;
    }
    ms.push_back(std::chrono::duration<double, std::milli>(b - a).count());
    read_bytes += s->stats.read_bytes_last_tick;
    entries_read += s->stats.sched_entries_read;
    cpu_copies += s->stats.sched_cpu_copies;
    reported += s->cgroups.size();
    if (i == 0) {
      first = s->stats;
    }
    last = s->stats;
  }
  const double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  const double cpu = cpuSeconds() - cpu0;
  const auto n = static_cast<double>(std::max(ticks, 1));
  std::printf(
      "probe: read=%s sums=%s max_cgroups=%u slots=%u cpu_copies=%u ticks=%d "
      "cgroups_reported_per_tick=%.0f "
      "tick_p50_ms=%.2f tick_p99_ms=%.2f tick_max_ms=%.2f read_bytes_per_tick=%.0f "
      "read_buffer_bytes=%llu bpf_map_bytes=%llu rss_mib=%.1f hwm_mib=%.1f cpu_pct=%.2f "
      "file_opens_per_tick=%.1f files_open=%llu every_tick=%zu map_walks_skipped=%llu "
      "sched_entries_read_per_tick=%.1f sched_full_reads=%llu sched_read_calls_per_tick=%.1f "
      "file_reads_per_tick=%.1f sched_cpu_copies_per_tick=%.1f "
      "slots_moved=%llu\n",
      legacy ? "legacy" : (every_slot ? "every-slot" : "new"),
      sumsWhere(last.sched_kernel_reads - first.sched_kernel_reads, ticks), max_cgroups,
      col->slots(), last.sched_cpus, ticks, static_cast<double>(reported) / n, percentile(ms, 0.5),
      percentile(ms, 0.99), percentile(ms, 1.0), static_cast<double>(read_bytes) / n,
      static_cast<unsigned long long>(last.read_buffer_bytes),
      static_cast<unsigned long long>(last.bpf_map_bytes),
      static_cast<double>(statusKib("VmRSS:")) / 1024,
      static_cast<double>(statusKib("VmHWM:")) / 1024, cpu / wall * 100,
      static_cast<double>(last.cgroup_file_opens - first.cgroup_file_opens) / n,
      static_cast<unsigned long long>(last.cgroup_files_open), named,
      static_cast<unsigned long long>(last.map_walks_skipped - first.map_walks_skipped),
      static_cast<double>(entries_read) / n,
      static_cast<unsigned long long>(last.sched_full_reads - first.sched_full_reads),
      static_cast<double>(last.sched_read_calls - first.sched_read_calls) / n,
      static_cast<double>(last.cgroup_file_reads - first.cgroup_file_reads) / n,
      static_cast<double>(cpu_copies) / n,
      static_cast<unsigned long long>(last.slots_moved - first.slots_moved));
  return 0;
}
