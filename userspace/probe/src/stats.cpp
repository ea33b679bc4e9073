// SPDX-License-Identifier: Apache-2.0
#include "colod/probe/stats.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <numeric>

namespace colod::probe {

int64_t Schedule::due(uint64_t i) const {
  return start_ns + phase_ns + static_cast<int64_t>(i) * period_ns;
}

uint64_t Schedule::count() const {
  const int64_t first = start_ns + phase_ns;
  if (period_ns <= 0 || end_ns <= first) {
    return 0;
  }
  // Requests due at first, first + p, ... strictly before end_ns.
  return static_cast<uint64_t>((end_ns - first - 1) / period_ns) + 1;
}

std::vector<uint64_t> missedLatencies(const Schedule& schedule,
                                      uint64_t first_unserved,
                                      int64_t stop_ns) {
  std::vector<uint64_t> out;
  const uint64_t n = schedule.count();
  if (first_unserved >= n) {
    return out;
  }
  out.reserve(n - first_unserved);
  for (uint64_t i = first_unserved; i < n; ++i) {
    if (!schedule.recorded(i)) {
      continue;
    }
    const int64_t waited = stop_ns - schedule.due(i);
    out.push_back(waited > 0 ? static_cast<uint64_t>(waited) : 0);
  }
  return out;
}

uint64_t percentileSorted(std::span<const uint64_t> sorted, double q) {
  if (sorted.empty()) {
    return 0;
  }
  q = std::clamp(q, 0.0, 1.0);
  const auto n = static_cast<double>(sorted.size());
  auto rank = static_cast<std::size_t>(std::ceil(q * n - 1e-9));  // 1-based nearest rank
  rank = std::clamp<std::size_t>(rank, 1, sorted.size());
  return sorted[rank - 1];
}

Summary summarize(std::vector<uint64_t>& latencies_ns, uint64_t missed) {
  Summary s;
  s.requests = latencies_ns.size();
  s.missed = missed;
  if (latencies_ns.empty()) {
    return s;
  }
  std::sort(latencies_ns.begin(), latencies_ns.end());
  const std::span<const uint64_t> v(latencies_ns);
  s.p50_us = percentileSorted(v, 0.50) / 1000;
  s.p90_us = percentileSorted(v, 0.90) / 1000;
  s.p99_us = percentileSorted(v, 0.99) / 1000;
  s.p999_us = percentileSorted(v, 0.999) / 1000;
  s.max_us = v.back() / 1000;
  // Sum in long double: 10^7 samples of up to 10^10 ns overflow nothing but lose precision.
  const long double sum = std::accumulate(
      v.begin(), v.end(), 0.0L,
      [](long double acc, uint64_t x) { return acc + static_cast<long double>(x); });
  s.mean_us = static_cast<double>(sum / static_cast<long double>(v.size()) / 1000.0L);
  return s;
}

std::string formatLine(const RunInfo& info, const Summary& summary) {
  std::array<char, 512> buf{};
  std::snprintf(buf.data(), buf.size(),
                "probe: threads=%u period_us=%lld work_us=%lld duration_s=%.1f requests=%llu "
                "missed=%llu p50_us=%llu p90_us=%llu p99_us=%llu p999_us=%llu max_us=%llu "
                "mean_us=%.1f cpu_pct_node=%.1f warmup_s=%.1f",
                info.threads, static_cast<long long>(info.period_us),
                static_cast<long long>(info.work_us), info.duration_s,
                static_cast<unsigned long long>(summary.requests),
                static_cast<unsigned long long>(summary.missed),
                static_cast<unsigned long long>(summary.p50_us),
                static_cast<unsigned long long>(summary.p90_us),
                static_cast<unsigned long long>(summary.p99_us),
                static_cast<unsigned long long>(summary.p999_us),
                static_cast<unsigned long long>(summary.max_us), summary.mean_us, info.cpu_pct_node,
                info.warmup_s);
  return buf.data();
}

std::string formatJson(const RunInfo& info, const Summary& summary) {
  nlohmann::json j = {
      {"threads", info.threads},           {"period_us", info.period_us},
      {"work_us", info.work_us},           {"duration_s", info.duration_s},
      {"iters_per_us", info.iters_per_us}, {"cpu_pct_node", info.cpu_pct_node},
      {"requests", summary.requests},      {"missed", summary.missed},
      {"p50_us", summary.p50_us},          {"p90_us", summary.p90_us},
      {"p99_us", summary.p99_us},          {"p999_us", summary.p999_us},
      {"max_us", summary.max_us},          {"mean_us", summary.mean_us},
      {"warmup_s", info.warmup_s},
  };
  return j.dump();
}

}  // namespace colod::probe
