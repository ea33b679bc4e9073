// SPDX-License-Identifier: Apache-2.0
// How many cgroup slots the collector's BPF maps get. cg_sched holds a value per cgroup slot and
// CPU: its memory is slots x CPUs x 136 B, charged to colod's memory cgroup (kernels >= 5.11).
// 4096 slots take 36 MiB on a 64-CPU node, 104 MiB on a 192-CPU one and 138 MiB on a 256-CPU
// one, beside colod's own memory under the DaemonSet's 128 MiB limit: the slots are sized to a
// memory budget instead. The CPUs are the present ones (cg_sched's copies, cpu_copies.h); only
// the optional diagnostics' map (cg_diag) is a per-CPU map sized by the possible ones.
// Pure: no syscalls; the collector passes the possible CPUs it counted.
#pragma once

#include <cstdint>
#include <string>

namespace colod::collect {

// The fewest slots a budget may leave: a node's containers, pause containers and system
// services (a 250-pod node has ~850 running cgroups; 256 is for small budgets on huge nodes).
inline constexpr uint32_t kMinSlots = 256;

// The maps' bytes per cgroup slot: per CPU copy (cg_sched), per possible CPU (per-CPU maps)
// and once (hash elements, the slot's array entries). An estimate of the kernel's allocation
// (value sizes rounded up to 8, a hash element's header); colod_bpf_map_bytes reports what it
// charged.
struct SlotCost {
  uint64_t per_copy = 0;
  uint64_t per_possible = 0;
  uint64_t shared = 0;
};

// The cost of one slot with the sched maps, the reclaim map when `reclaim`, and the
// diagnostics' map when `diag` (CollectorOptions::wakeup_depth).
SlotCost slotCost(bool reclaim, bool diag);

// The CPUs the maps are sized by: cg_sched's copies (the present CPUs) and the possible CPUs.
struct MapCpus {
  uint32_t copies = 1;
  uint32_t possible = 1;
};

// The maps' bytes for `slots` slots.
uint64_t slotBytes(const SlotCost& cost, uint32_t slots, MapCpus cpus);

struct SlotSizing {
  uint32_t slots = 0;         // what the maps are sized to
  uint64_t bytes = 0;         // their estimated memory
  uint64_t wanted_bytes = 0;  // the memory of the slots asked for
  bool capped = false;        // fewer than asked for, to fit the budget
  bool over_budget = false;   // even min_slots does not fit: min_slots it is
};

// At most `wanted` slots, as many as fit `budget_bytes` (0: no budget), never fewer than
// `min_slots` (a collector that sees too few cgroups is worse than one over its budget).
SlotSizing sizeSlots(
    const SlotCost& cost, uint32_t wanted, MapCpus cpus, uint64_t budget_bytes, uint32_t min_slots);

// One line for the log when the sizing differs from what was asked for (empty otherwise).
std::string describeSizing(const SlotSizing& s,
                           uint32_t wanted,
                           MapCpus cpus,
                           uint64_t budget_bytes);

}  // namespace colod::collect
