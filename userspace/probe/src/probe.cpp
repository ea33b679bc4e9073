// SPDX-License-Identifier: Apache-2.0
#include "colod/probe/probe.h"

#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <ctime>
#include <system_error>
#include <thread>
#include <vector>

namespace colod::probe {
namespace {

int64_t clockNs(clockid_t clock) {
  timespec ts{};
  clock_gettime(clock, &ts);
  return static_cast<int64_t>(ts.tv_sec) * 1'000'000'000 + ts.tv_nsec;
}

int64_t nowNs() { return clockNs(CLOCK_MONOTONIC); }

void sleepUntil(int64_t t_ns) {
  timespec ts{};
  ts.tv_sec = static_cast<time_t>(t_ns / 1'000'000'000);
  ts.tv_nsec = static_cast<long>(t_ns % 1'000'000'000);
  // EINTR: retry; the due time is absolute, so no drift accumulates.
  while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, nullptr) == EINTR) {
  }
}

double processCpuSeconds() {
  rusage ru{};
  getrusage(RUSAGE_SELF, &ru);
  return static_cast<double>(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) +
         static_cast<double>(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) / 1e6;
}

struct ThreadResult {
  std::vector<uint64_t> latencies_ns;
  uint64_t missed = 0;
  std::vector<LateRequest> late;  // due in CLOCK_MONOTONIC until runProbe converts it
};

struct LateWatch {
  uint64_t over_ns = 0;  // 0: off
  size_t max = 0;        // per thread
};

// One probe thread: serve requests in due order until all are served or the run's end passed.
void runThread(const Schedule& schedule, uint64_t iters, LateWatch watch, ThreadResult& out) {
  const uint64_t n = schedule.count();
  out.latencies_ns.reserve(n);
  uint64_t i = 0;
  for (; i < n; ++i) {
    const int64_t due = schedule.due(i);
    int64_t now = nowNs();
    if (now >= schedule.end_ns) {
      break;  // the run is over; what is still queued is missed
    }
    if (now < due) {
      sleepUntil(due);
    }
    spin(iters);
    now = nowNs();
    const auto latency = static_cast<uint64_t>(now - due);
    if (schedule.recorded(i)) {
      out.latencies_ns.push_back(latency);
    }
    if (watch.over_ns > 0 && latency > watch.over_ns && out.late.size() < watch.max) {
      out.late.push_back({due, latency});
    }
  }
  std::vector<uint64_t> missed = missedLatencies(schedule, i, nowNs());
  out.missed = missed.size();
  out.latencies_ns.insert(out.latencies_ns.end(), missed.begin(), missed.end());
}

}  // namespace

uint64_t spin(uint64_t iters) {
  uint64_t x = 0x9E3779B97F4A7C15ULL;
  for (uint64_t i = 0; i < iters; ++i) {
    x = x * 6364136223846793005ULL + 1442695040888963407ULL;
    // An empty asm that "uses" x: the loop cannot be folded into a closed form.
    asm volatile("" : "+r"(x));
  }
  return x;
}

Result<double> calibrateItersPerUs(unsigned trials) {
  if (trials == 0) {
    return COLOD_ERR(EINVAL, "calibration needs at least one trial");
  }
  // Grow the trial until one run takes >= 2 ms: long enough to dwarf the clock reads, short
  // enough to often run without preemption.
  uint64_t iters = 1 << 14;
  for (int guard = 0; guard < 30; ++guard) {
    const int64_t t0 = nowNs();
    spin(iters);
    if (nowNs() - t0 >= 2'000'000) {
      break;
    }
    iters *= 2;
  }
  int64_t best = INT64_MAX;
  for (unsigned t = 0; t < trials; ++t) {
    const int64_t t0 = nowNs();
    spin(iters);
    best = std::min(best, nowNs() - t0);
  }
  best = std::max<int64_t>(best, 1);
  return static_cast<double>(iters) / (static_cast<double>(best) / 1000.0);
}

Result<ProbeReport> runProbe(const ProbeOptions& o) {
  if (o.threads == 0 || o.threads > 256) {
    return COLOD_ERR(EINVAL, "threads must be in [1, 256], got ", o.threads);
  }
  if (o.period_us <= 0 || o.work_us <= 0 || o.work_us > o.period_us * 100) {
    return COLOD_ERR(EINVAL, "need period_us > 0 and 0 < work_us <= 100 * period_us, got ",
                     o.period_us, " and ", o.work_us);
  }
  if (!(o.duration_s > 0.0) || o.duration_s > 86400.0) {
    return COLOD_ERR(EINVAL, "duration must be in (0, 86400] s, got ", o.duration_s);
  }
  if (o.late_us < 0) {
    return COLOD_ERR(EINVAL, "late_us must be >= 0, got ", o.late_us);
  }
  if (!(o.warmup_s >= 0.0) || !(o.warmup_s < o.duration_s)) {
    return COLOD_ERR(EINVAL, "warm-up must be in [0, duration) s, got ", o.warmup_s,
                     " for a duration of ", o.duration_s, " s");
  }
  double ipu = o.iters_per_us;
  if (!(ipu > 0.0)) {
    auto cal = calibrateItersPerUs(o.calibration_trials);
    if (!cal) {
      return std::move(cal).error().wrap("calibrating");
    }
    ipu = *cal;
  }
  const auto iters = static_cast<uint64_t>(std::llround(ipu * static_cast<double>(o.work_us)));

  const int64_t period_ns = o.period_us * 1000;
  // Start a little in the future so every thread is running before its first request is due.
  const int64_t start = nowNs() + 20'000'000;
  const int64_t end = start + static_cast<int64_t>(o.duration_s * 1e9);
  const double cpu0 = processCpuSeconds();

  const LateWatch watch{.over_ns = static_cast<uint64_t>(o.late_us) * 1000,
                        .max = o.max_late / o.threads};
  std::vector<ThreadResult> results(o.threads);
  std::vector<std::thread> threads;
  threads.reserve(o.threads);
  for (unsigned t = 0; t < o.threads; ++t) {
    const Schedule schedule{.start_ns = start,
                            .end_ns = end,
                            .period_ns = period_ns,
                            .phase_ns = period_ns * t / o.threads,
                            .record_from_ns = start + static_cast<int64_t>(o.warmup_s * 1e9)};
    try {
      threads.emplace_back(runThread, schedule, iters, watch, std::ref(results[t]));
    } catch (const std::system_error& e) {
      for (auto& th : threads) {
        th.join();
      }
      return COLOD_ERR(e.code().value(), "starting probe thread ", t);
    }
  }
  for (auto& th : threads) {
    th.join();
  }
  const double wall_s = static_cast<double>(nowNs() - start) / 1e9;
  const double cpu_s = processCpuSeconds() - cpu0;

  // Due times are monotonic; other processes log the wall clock. The offset is read once, after
  // the run: a clock step during it would shift every late request alike.
  const int64_t to_unix = clockNs(CLOCK_REALTIME) - nowNs();
  std::vector<uint64_t> all;
  uint64_t missed = 0;
  ProbeReport report;
  for (auto& r : results) {
    all.insert(all.end(), r.latencies_ns.begin(), r.latencies_ns.end());
    missed += r.missed;
    for (const LateRequest& x : r.late) {
      report.late.push_back({x.due_unix_ns + to_unix, x.latency_ns});
    }
  }
  std::sort(report.late.begin(), report.late.end(), [](const LateRequest& a, const LateRequest& b) {
    return a.due_unix_ns < b.due_unix_ns;
  });
  report.summary = summarize(all, missed);
  const long cpus = sysconf(_SC_NPROCESSORS_ONLN);
  report.info = RunInfo{
      .threads = o.threads,
      .period_us = o.period_us,
      .work_us = o.work_us,
      .duration_s = o.duration_s,
      .warmup_s = o.warmup_s,
      .iters_per_us = ipu,
      .cpu_pct_node =
          wall_s > 0 && cpus > 0 ? cpu_s / (wall_s * static_cast<double>(cpus)) * 100.0 : 0.0,
  };
  return report;
}

}  // namespace colod::probe
