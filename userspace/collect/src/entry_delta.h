// SPDX-License-Identifier: Apache-2.0
// One BPF map entry read twice: its per-CPU values summed, and what happened in between.
//
// Private to colod::collect (the collector and collect_test use it). Pure: no syscalls.
//
// Why the histogram buckets stay u32 and the deltas are modular (issue 17, part 3):
// a bucket is a u32 per CPU, and the collector sums the CPUs into a u32 as well. Both wrap:
// one CPU's slot 0 or 1 of a busy cgroup passes 2^32 in about half a day, and the sum over
// 96 CPUs in minutes. Wrapping is harmless as long as deltas are taken modulo 2^32 (unsigned
// subtraction): the sum of per-CPU values mod 2^32 is the true total mod 2^32, so the delta
// is exact while fewer than 2^32 events land in one bucket between two reads (4.3e9 per
// 100 ms tick: out of reach). Widening the buckets to u64 would add 80 bytes to every per-CPU
// value (cg_sched 136 -> 216 B, i.e. x1.59 of the largest map: 4096 slots x 256 CPUs = 143 ->
// 227 MB) and a cache line to the switch handler's working set, for no gain in
// correctness.
// What modular deltas cannot see is a real reset (the entry deleted and re-created, or its
// slot recycled): a bucket that went down could be a wrap or a restart. So resets are never
// inferred from the buckets; they come from what the collector knows:
//   - it forgets the previous read of every entry it deletes (no previous read: a new entry);
//   - a cgroup's cg_sched slot changed between reads (it was deleted and given another one);
//   - a u64 counter of the entry went down: u64 counters never wrap (2^64 ns is 584 years),
//     and `count` is the u64 sum of the very events the buckets count, so any restart that
//     the collector did not cause itself shows there (the safety net).
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>

#include "cgsched.h"
#include "colod/collect/collector.h"
#include "reclaim.h"

namespace colod::collect::detail {

// A u64 counter read twice (pairs, cpu.stat): u64 counters never wrap, so a decrease means the
// entry (or the cgroup) was re-created, and all of cur is new.
constexpr uint64_t sub(uint64_t cur, uint64_t prev) { return cur >= prev ? cur - prev : cur; }

// Per-CPU map values are laid out value_size rounded up to 8, once per possible CPU.
constexpr std::size_t roundUp8(std::size_t n) { return (n + 7) & ~std::size_t{7}; }

// Sums the ncpu copies at base, `stride` bytes apart (a per-CPU lookup's roundUp8(sizeof(V));
// cg_sched's CPU-major regions: the region's length). Histogram buckets are summed modulo 2^32
// (see the file comment), the u64 counters exactly.
colod_cg_sched sumSchedPerCpu(const uint8_t* base,
                              int ncpu,
                              std::size_t stride = roundUp8(sizeof(colod_cg_sched)));

// Adds v into `into`, field by field (histogram buckets modulo 2^32, as sumSchedPerCpu).
void addSched(colod_cg_sched& into, const colod_cg_sched& v);

// One cgroup's cg_sched entry as read: the slot of cg_sched it lives in, and its value
// summed over CPUs.
struct SchedEntry {
  uint32_t slot = 0;
  colod_cg_sched sum{};
};

// What accumulated in an entry between two reads, field by field (histograms modulo 2^32).
// prev == nullptr means the collector has no previous read (new entry, or one it deleted):
// the delta is then cur. A restart the collector did not cause (slot changed, a u64 counter
// went down) also gives cur, never a difference across the restart.
colod_cg_sched schedDelta(const SchedEntry& cur, const SchedEntry* prev);

// cg_diag (the diagnostics read only when asked for): the same, for its u64 counters.
colod_cg_diag sumDiagPerCpu(const uint8_t* base, int ncpu);
struct DiagEntry {
  uint32_t slot = 0;
  colod_cg_diag sum{};
};
colod_cg_diag diagDelta(const DiagEntry& cur, const DiagEntry* prev);
colod_cg_reclaim reclaimDelta(const colod_cg_reclaim& cur, const colod_cg_reclaim* prev);

// Copies a map value's u32 buckets into a Log2Hist. cg_sched's shorter histogram fills the
// first COLOD_SCHED_HIST_SLOTS slots; its last slot is open-ended (every wait from 2^19 us up),
// read as its own power-of-two range by the percentiles (an under-estimate past 1 s).
template <std::size_t N>
Log2Hist toHist(const uint32_t (&h)[N]) {
  static_assert(N <= kHistSlots);
  Log2Hist out{};
  std::memcpy(out.data(), h, sizeof(h));
  return out;
}

}  // namespace colod::collect::detail
