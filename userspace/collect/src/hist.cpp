// SPDX-License-Identifier: Apache-2.0
// Pure histogram math: percentiles from log2 slots and deltas between snapshots.
#include <cmath>

#include "colod/collect/collector.h"

namespace colod::collect {

namespace {
// Upper bound of slot i: slot i holds [2^i, 2^(i+1)) (slot 0 also holds 0).
uint64_t slotUpper(std::size_t i) {
  return uint64_t{1} << (i + 1);
}
}  // namespace

uint64_t log2Percentile(const Log2Hist& hist, double q) {
  uint64_t total = 0;
  for (uint32_t c : hist) {
    total += c;
  }
  if (total == 0) {
    return 0;
  }
  if (!(q > 0)) {
    q = 0;
  }
  if (q > 1) {
    q = 1;
  }
  // The rank of the q-quantile, 1-based: the smallest k with k >= q * total.
  auto rank = static_cast<uint64_t>(std::ceil(q * static_cast<double>(total)));
  if (rank == 0) {
    rank = 1;
  }
  uint64_t cum = 0;
  for (std::size_t i = 0; i < hist.size(); ++i) {
    cum += hist[i];
    if (cum >= rank) {
      return slotUpper(i);
    }
  }
  return slotUpper(hist.size() - 1);
}

LatencySummary summarize(const Log2Hist& hist, uint64_t total_ns) {
  LatencySummary s;
  for (uint32_t c : hist) {
    s.count += c;
  }
  if (s.count == 0) {
    return s;
  }
  s.p50_us = log2Percentile(hist, 0.50);
  s.p90_us = log2Percentile(hist, 0.90);
  s.p99_us = log2Percentile(hist, 0.99);
  for (std::size_t i = hist.size(); i-- > 0;) {
    if (hist[i] != 0) {
      s.max_us = slotUpper(i);
      break;
    }
  }
  s.total_ns = total_ns;
  return s;
}

Log2Hist histDelta(const Log2Hist& cur, const Log2Hist& prev) {
  Log2Hist out{};
  for (std::size_t i = 0; i < cur.size(); ++i) {
    out[i] = cur[i] - prev[i];  // uint32_t: modulo 2^32, so a wrapped bucket reads right
  }
  return out;
}

const char* toString(CgroupMode mode) {
  return mode == CgroupMode::V2 ? "v2" : "v1-cpu";
}

const char* toString(AttachKind kind) {
  return kind == AttachKind::TpBtf ? "tp_btf" : "raw_tp";
}

}  // namespace colod::collect
