// SPDX-License-Identifier: Apache-2.0
// colod-probe: the open-loop LS request probe. See README.md.
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <string>

#include "colod/probe/probe.h"

namespace {

int run(int argc, char** argv) {
  using colod::probe::ProbeOptions;
  CLI::App app{"colod-probe: open-loop latency probe (latency = completion - due time)"};
  ProbeOptions o;
  const long online = sysconf(_SC_NPROCESSORS_ONLN);
  const unsigned cpus = online > 0 ? static_cast<unsigned>(online) : 1;
  o.threads = cpus;
  o.period_us = 0;  // derived from --load unless given
  double load = 0.30;
  std::string json_path;
  std::string late_path;
  bool calibrate_only = false;
  app.add_option("-t,--threads", o.threads, "request threads (default: online CPUs)")
      ->check(CLI::Range(1U, 256U));
  app.add_option("-w,--work-us", o.work_us, "CPU work per request, µs")
      ->check(CLI::Range(int64_t{1}, int64_t{10'000'000}));
  app.add_option("-p,--period-us", o.period_us,
                 "a request due every P µs per thread (default: sized by --load)")
      ->check(CLI::Range(int64_t{1}, int64_t{100'000'000}));
  app.add_option("-l,--load", load,
                 "fraction of the node's CPUs to use when --period-us is not given")
      ->check(CLI::Range(0.001, 1.0));
  app.add_option("-d,--duration", o.duration_s, "run time, seconds")
      ->check(CLI::Range(0.01, 86400.0));
  app.add_option("--warmup", o.warmup_s,
                 "do not record the first S seconds of the run (S < duration)")
      ->check(CLI::Range(0.0, 86400.0));
  app.add_option("--iters-per-us", o.iters_per_us,
                 "busy-loop iterations per µs (skip calibration; reuse across runs)")
      ->check(CLI::PositiveNumber);
  app.add_option("--json", json_path, "also write the result as JSON to FILE ('-': stdout)");
  app.add_option("--late-us", o.late_us, "list requests later than this many µs (with --late-log)")
      ->check(CLI::Range(int64_t{1}, int64_t{100'000'000}));
  app.add_option("--late-log", late_path,
                 "write 'DUE_UNIX_NS LATENCY_US' per late request to FILE, by due time")
      ->needs("--late-us");
  app.add_flag("--calibrate-only", calibrate_only, "print iters_per_us=<x> and exit");
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    const int rc = app.exit(e);
    return rc == 0 ? 0 : 3;
  }

  if (calibrate_only) {
    auto cal = colod::probe::calibrateItersPerUs(o.calibration_trials);
    if (!cal) {
      std::fprintf(stderr, "colod-probe: %s\n", cal.error().message().c_str());
      return 1;
    }
    std::printf("iters_per_us=%.3f\n", *cal);
    return 0;
  }
  if (o.period_us == 0) {
    // threads * work / period = load * cpus.
    o.period_us = std::llround(static_cast<double>(o.threads) * static_cast<double>(o.work_us) /
                               (load * static_cast<double>(cpus)));
  }

  auto report = colod::probe::runProbe(o);
  if (!report) {
    std::fprintf(stderr, "colod-probe: %s\n", report.error().message().c_str());
    return report.error().errnoValue() == EINVAL ? 3 : 1;
  }
  std::printf("%s\n", colod::probe::formatLine(report->info, report->summary).c_str());
  if (!json_path.empty()) {
    const std::string js = colod::probe::formatJson(report->info, report->summary);
    if (json_path == "-") {
      std::printf("%s\n", js.c_str());
    } else {
      std::ofstream f(json_path);
      f << js << '\n';
      if (!f) {
        std::fprintf(stderr, "colod-probe: writing %s failed\n", json_path.c_str());
        return 1;
      }
    }
  }
  if (!late_path.empty()) {
    std::ofstream f(late_path);
    for (const auto& x : report->late) {
      f << x.due_unix_ns << ' ' << x.latency_ns / 1000 << '\n';
    }
    if (!f) {
      std::fprintf(stderr, "colod-probe: writing %s failed\n", late_path.c_str());
      return 1;
    }
  }
  std::fflush(stdout);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  // CLI11 and the std library may throw (bad_alloc, system_error): one clear line, exit 1.
  try {
    return run(argc, argv);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "colod-probe: %s\n", e.what());
    return 1;
  }
}
