// SPDX-License-Identifier: Apache-2.0
// colod-probe: an open-loop latency-sensitive workload. Each of T threads has a request due
// every P µs; serving one takes W µs of CPU (a busy loop of a calibrated iteration count, so a
// descheduled thread does not finish its work "early" by reading the clock). Latency is
// completion - due time: a late request includes all the time it queued behind earlier ones,
// so there is no coordinated omission.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "colod/base/result.h"
#include "colod/probe/stats.h"

namespace colod::probe {

// Runs `iters` iterations of the calibrated busy loop. Returns a value derived from the loop so
// the compiler cannot drop it.
uint64_t spin(uint64_t iters);

// Measures iterations of spin() per µs on this CPU: the fastest of `trials` timed runs of about
// 2 ms each, so a trial that was preempted (a noisy neighbour) does not shrink the work.
// Fails (EINVAL) for trials == 0.
[[nodiscard]] Result<double> calibrateItersPerUs(unsigned trials);

struct ProbeOptions {
  unsigned threads = 2;
  int64_t period_us = 1000;
  int64_t work_us = 300;
  double duration_s = 10.0;
  // The first warmup_s of the run are not recorded (0 <= warmup_s < duration_s): the load runs
  // from the start, so what it provokes (a controller's reaction) happens, but the summary
  // describes the settled state after it.
  double warmup_s = 0.0;
  double iters_per_us = 0.0;  // 0: calibrate at start
  unsigned calibration_trials = 25;
  // Requests whose latency exceeds late_us are listed in ProbeReport::late (0: none are), at
  // most max_late of them (the earliest per thread): when the service was first hurt, for a
  // benchmark that times a controller's reaction from there.
  int64_t late_us = 0;
  size_t max_late = 100'000;
};

// A request that finished more than ProbeOptions::late_us after it was due.
struct LateRequest {
  int64_t due_unix_ns = 0;  // CLOCK_REALTIME, comparable with other processes' timestamps
  uint64_t latency_ns = 0;
};

struct ProbeReport {
  RunInfo info;
  Summary summary;
  std::vector<LateRequest> late;  // by due time
};

// Runs the probe for options.duration_s and returns the summary. Requests still queued at the
// end count as missed with lower-bound latencies (see missedLatencies). Fails with EINVAL on
// invalid options (threads 0 or > 256, period/work <= 0, work > period * 100, duration <= 0 or
// > 86400 s, warm-up negative or not below the duration, late_us negative) and with the errno of
// a failed thread start.
[[nodiscard]] Result<ProbeReport> runProbe(const ProbeOptions& options);

}  // namespace colod::probe
