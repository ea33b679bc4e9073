// SPDX-License-Identifier: Apache-2.0
// Pure parsers of cgroup and /proc files (style rules 14, 38). No I/O: every function takes
// the file's text and returns a value or an Error with errno EINVAL ("malformed") or ENODATA
// ("required key missing"). None of them throws; input is never trusted.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "colod/base/result.h"

namespace colod::cgroup {

// A decimal unsigned integer, surrounding whitespace (incl. the trailing "\n") allowed.
Result<uint64_t> parseU64(std::string_view text);

// A value that may be "max" (cpu.max, memory.max, pids.max): std::nullopt means "max".
Result<std::optional<uint64_t>> parseU64OrMax(std::string_view text);

// cpu.stat on v1 (nr_periods, nr_throttled, throttled_time [ns]) and v2 (usage_usec, ...,
// nr_periods, nr_throttled, throttled_usec). Fields the file lacks stay std::nullopt; unknown
// keys are ignored (the kernel adds keys over time). Error if a known key has a bad value or
// the text has no "key value" line at all.
struct CpuStat {
  std::optional<uint64_t> usage_ns;  // v2 usage_usec * 1000
  std::optional<uint64_t> nr_periods;
  std::optional<uint64_t> nr_throttled;
  std::optional<uint64_t> throttled_ns;  // v1 throttled_time, v2 throttled_usec * 1000
};
Result<CpuStat> parseCpuStat(std::string_view text);

// PSI: "some avg10=0.12 avg60=0.05 avg300=0.00 total=12345" and optionally a "full ..." line.
// Error (EINVAL) if a line is truncated or a number is malformed, ENODATA if "some" is missing.
struct PsiLine {
  double avg10 = 0;
  double avg60 = 0;
  double avg300 = 0;
  uint64_t total_us = 0;
};
struct Psi {
  PsiLine some;
  std::optional<PsiLine> full;
};
Result<Psi> parsePsi(std::string_view text);

// cpu.max (v2): "max 100000" or "50000 100000". quota std::nullopt means unlimited.
struct CpuMax {
  std::optional<uint64_t> quota_us;
  uint64_t period_us = 100000;
};
Result<CpuMax> parseCpuMax(std::string_view text);
// cpu.cfs_quota_us (v1): "-1" (unlimited, std::nullopt) or the quota in microseconds.
Result<std::optional<uint64_t>> parseCfsQuotaUs(std::string_view text);

// "key value" files (memory.stat, cpu.stat): the value for key, ENODATA if absent.
Result<uint64_t> parseKeyedU64(std::string_view text, std::string_view key);

}  // namespace colod::cgroup
