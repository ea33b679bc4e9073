// SPDX-License-Identifier: Apache-2.0
// The probe's accounting math, pure (no clock, no I/O) so tests feed it data: the open-loop
// schedule of one thread, the lower-bound latencies of requests a run never served, and the
// nearest-rank percentile summary printed as the result line.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

namespace colod::probe {

// The requests of one probe thread: request i is due at start_ns + phase_ns + i * period_ns,
// and only requests due strictly before end_ns belong to the run.
struct Schedule {
  int64_t start_ns = 0;
  int64_t end_ns = 0;
  int64_t period_ns = 1;  // > 0
  int64_t phase_ns = 0;   // in [0, period_ns): spreads threads over the period
  // Requests due before this are served but not recorded (the warm-up: the system under test
  // settles, e.g. a controller reacts to a load that started with the run). 0: record all.
  int64_t record_from_ns = 0;

  // Due time of request i (i >= 0).
  [[nodiscard]] int64_t due(uint64_t i) const;
  // Number of requests due in [start_ns + phase_ns, end_ns); 0 for an empty or inverted window.
  [[nodiscard]] uint64_t count() const;
  // Whether request i's latency is recorded (due at or after record_from_ns).
  [[nodiscard]] bool recorded(uint64_t i) const { return due(i) >= record_from_ns; }
};

// Requests [first_unserved, schedule.count()) were still queued when the run stopped at stop_ns:
// each is "missed" and gets the latency it had accumulated by then, stop_ns - due (0 if not yet
// due), a lower bound. Counting them keeps a saturated run's percentiles from looking better
// than a healthy one's (the coordinated-omission trap). Returns them in ns, in schedule order;
// requests in the warm-up (not recorded()) are left out.
[[nodiscard]] std::vector<uint64_t> missedLatencies(const Schedule& schedule,
                                                    uint64_t first_unserved,
                                                    int64_t stop_ns);

// Latency summary in µs (rounded down). Percentiles use the nearest-rank definition: the value
// at rank ceil(q * n) of the sorted sample, so p99 of 100 samples is the 99th smallest.
struct Summary {
  uint64_t requests = 0;  // samples summarised (served + missed)
  uint64_t missed = 0;    // of which missed (lower-bound latency)
  uint64_t p50_us = 0;
  uint64_t p90_us = 0;
  uint64_t p99_us = 0;
  uint64_t p999_us = 0;
  uint64_t max_us = 0;
  double mean_us = 0.0;
};

// Nearest-rank percentile of an ascending-sorted sample; q in (0, 1]. 0 for an empty sample.
[[nodiscard]] uint64_t percentileSorted(std::span<const uint64_t> sorted, double q);

// Summarises latencies in ns (any order; the vector is sorted in place). `missed` is how many of
// them are lower bounds of unserved requests; it is copied into the summary.
[[nodiscard]] Summary summarize(std::vector<uint64_t>& latencies_ns, uint64_t missed);

// The parameters a result line reports next to the summary.
struct RunInfo {
  unsigned threads = 0;
  int64_t period_us = 0;
  int64_t work_us = 0;
  double duration_s = 0.0;
  double warmup_s = 0.0;  // the first warmup_s of duration_s were not recorded
  double iters_per_us = 0.0;
  double cpu_pct_node = 0.0;  // probe CPU time / (wall time * online CPUs) * 100
};

// "probe: threads=2 period_us=1000 work_us=300 duration_s=10.0 requests=... missed=...
//  p50_us=... p90_us=... p99_us=... p999_us=... max_us=... mean_us=... cpu_pct_node=...
//  warmup_s=..."
[[nodiscard]] std::string formatLine(const RunInfo& info, const Summary& summary);
// The same fields as one JSON object (no trailing newline).
[[nodiscard]] std::string formatJson(const RunInfo& info, const Summary& summary);

}  // namespace colod::probe
