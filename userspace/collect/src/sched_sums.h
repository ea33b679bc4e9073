// SPDX-License-Identifier: Apache-2.0
// cg_sched summed over CPUs in the kernel: the schedsum iterator (bpf/schedsum.bpf.c) walks
// cg_slots and writes one record per live cgroup, so a tick reads 152 B a cgroup instead of
// 136 B x possible CPUs, and userspace neither holds nor sums the per-CPU copies (issue 17).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <unordered_map>
#include <vector>

#include "colod/base/result.h"
#include "entry_delta.h"
#include "sched_map_pool.h"

struct schedsum;
struct bpf_link;

namespace colod::collect::detail {

class KernelSums {
 public:
  // Loads the iterator on the cgsched object's maps (by fd). An error when this kernel lacks
  // what it needs (bpf_loop: 5.17) or refuses it: the caller then reads the maps from
  // userspace.
  // The cgsched object's maps it reads (bpf/common/cg_maps.bpf.h).
  struct Maps {
    int cg_slots = -1;
    int cg_sched = -1;
    int cg_dirty = -1;  // the change marks
    int cg_cpus = -1;   // the CPUs each slot was written on
  };
  // sched_cpus, max_slots: cg_sched's shape (a copy per CPU of each slot, CPU-major: index
  // cpu x max_slots + slot). cpu_marks: cgsched marks CPUs in cg_cpus (its mark_cpus), so only
  // those copies are added; false: every CPU's.
  static Result<KernelSums> open(const Maps& maps,
                                 uint32_t sched_cpus,
                                 uint32_t max_slots,
                                 bool cpu_marks);

  KernelSums(KernelSums&&) noexcept;
  KernelSums& operator=(KernelSums&&) noexcept;
  ~KernelSums();

  // Live cgroups' entries, summed, into out (emptied first, its nodes to pool): id -> {slot,
  // sum}, in nodes from pool where it has them. all: every live cgroup; otherwise only those
  // whose slot is marked changed. Either way the marks of the slots read are cleared.
  Result<std::size_t> read(SchedMap& out, SchedMapPool& pool, bool all = true);

  [[nodiscard]] std::size_t lastReadBytes() const { return last_bytes_; }
  [[nodiscard]] std::size_t bufferBytes() const { return buf_.capacity(); }
  // CPU copies the last read added up, over all its records.
  [[nodiscard]] uint64_t lastCpuCopies() const { return last_copies_; }

 private:
  struct Owned;
  explicit KernelSums(std::unique_ptr<Owned> owned);

  std::unique_ptr<Owned> owned_;
  std::vector<uint8_t> buf_;  // kept across reads; grows with the live cgroups
  std::size_t last_bytes_ = 0;
  uint64_t last_copies_ = 0;
};

// Parses the iterator's output (whole colod_sched_sum records) into out, emptied first, its
// entries in nodes from pool (hundreds a tick at 1000 containers: allocated afresh they were
// ~6 % of the collector's CPU); an error on a partial record. Separate from the read for tests.
// cpu_copies (optional): set to the per-CPU copies summed into the records.
Result<std::size_t> parseSchedSums(const uint8_t* data,
                                   std::size_t len,
                                   SchedMap& out,
                                   SchedMapPool& pool,
                                   uint64_t* cpu_copies = nullptr);

}  // namespace colod::collect::detail
