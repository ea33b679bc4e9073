// SPDX-License-Identifier: Apache-2.0
#include "entry_delta.h"

#include <cstring>
#include <initializer_list>
#include <utility>

namespace colod::collect::detail {

namespace {

// Per-CPU copies at base, one every `stride` bytes, handed to add(sum, copy).
template <typename V, typename Add>
V sumCopies(const uint8_t* base, int ncpu, std::size_t stride, Add add) {
  V s{};
  for (int c = 0; c < ncpu; ++c) {
    V v{};
    std::memcpy(&v, base + static_cast<std::size_t>(c) * stride, sizeof(V));
    add(s, v);
  }
  return s;
}

// Buckets: unsigned arithmetic, so sums and differences are modulo 2^32 (entry_delta.h).
template <std::size_t N>
void addHist(uint32_t (&s)[N], const uint32_t (&v)[N]) {
  for (std::size_t i = 0; i < N; ++i) {
    s[i] += v[i];
  }
}
template <std::size_t N>
void subHist(uint32_t (&d)[N], const uint32_t (&cur)[N], const uint32_t (&prev)[N]) {
  for (std::size_t i = 0; i < N; ++i) {
    d[i] = cur[i] - prev[i];
  }
}

// True when any (cur, prev) pair of u64 counters went down: the entry restarted.
bool anyDown(std::initializer_list<std::pair<uint64_t, uint64_t>> counters) {
  for (const auto& [cur, prev] : counters) {
    if (cur < prev) {
      return true;
    }
  }
  return false;
}

}  // namespace

void addSched(colod_cg_sched& into, const colod_cg_sched& v) {
  addHist(into.hist, v.hist);
  into.count += v.count;
  into.total_ns += v.total_ns;
  into.oncpu_ns += v.oncpu_ns;
  into.invol += v.invol;
  into.self_preempt += v.self_preempt;
  into.preempt_wait_ns += v.preempt_wait_ns;
  into.preempt_waits += v.preempt_waits;
}

colod_cg_sched sumSchedPerCpu(const uint8_t* base, int ncpu, std::size_t stride) {
  return sumCopies<colod_cg_sched>(base, ncpu, stride, addSched);
}

colod_cg_diag sumDiagPerCpu(const uint8_t* base, int ncpu) {
  return sumCopies<colod_cg_diag>(base, ncpu, roundUp8(sizeof(colod_cg_diag)),
                                  [](colod_cg_diag& s, const colod_cg_diag& v) {
                                    s.stale += v.stale;
                                    s.wakeups += v.wakeups;
                                    s.depth_sum += v.depth_sum;
                                  });
}

colod_cg_sched schedDelta(const SchedEntry& cur, const SchedEntry* prev) {
  const colod_cg_sched& c = cur.sum;
  if (prev == nullptr || prev->slot != cur.slot) {
    return c;
  }
  const colod_cg_sched& p = prev->sum;
  if (anyDown({{c.count, p.count},
               {c.total_ns, p.total_ns},
               {c.oncpu_ns, p.oncpu_ns},
               {c.invol, p.invol},
               {c.self_preempt, p.self_preempt},
               {c.preempt_wait_ns, p.preempt_wait_ns},
               {c.preempt_waits, p.preempt_waits}})) {
    return c;
  }
  colod_cg_sched d{};
  subHist(d.hist, c.hist, p.hist);
  d.count = c.count - p.count;
  d.total_ns = c.total_ns - p.total_ns;
  d.oncpu_ns = c.oncpu_ns - p.oncpu_ns;
  d.invol = c.invol - p.invol;
  d.self_preempt = c.self_preempt - p.self_preempt;
  d.preempt_wait_ns = c.preempt_wait_ns - p.preempt_wait_ns;
  d.preempt_waits = c.preempt_waits - p.preempt_waits;
  return d;
}

colod_cg_diag diagDelta(const DiagEntry& cur, const DiagEntry* prev) {
  const colod_cg_diag& c = cur.sum;
  if (prev == nullptr || prev->slot != cur.slot) {
    return c;
  }
  const colod_cg_diag& p = prev->sum;
  if (anyDown({{c.stale, p.stale}, {c.wakeups, p.wakeups}, {c.depth_sum, p.depth_sum}})) {
    return c;
  }
  return colod_cg_diag{.stale = c.stale - p.stale,
                       .wakeups = c.wakeups - p.wakeups,
                       .depth_sum = c.depth_sum - p.depth_sum};
}

colod_cg_reclaim reclaimDelta(const colod_cg_reclaim& cur, const colod_cg_reclaim* prev) {
  if (prev == nullptr) {
    return cur;
  }
  const colod_cg_reclaim& p = *prev;
  if (anyDown({{cur.count, p.count}, {cur.total_ns, p.total_ns}, {cur.pages, p.pages}})) {
    return cur;
  }
  colod_cg_reclaim d{};
  subHist(d.hist, cur.hist, p.hist);
  d.count = cur.count - p.count;
  d.total_ns = cur.total_ns - p.total_ns;
  d.pages = cur.pages - p.pages;
  return d;
}

}  // namespace colod::collect::detail
