// SPDX-License-Identifier: Apache-2.0
// How many cgroup slots the collector's BPF maps get. The per-cgroup maps are per-CPU: their
// memory is slots x possible CPUs x value size, charged to colod's memory cgroup (kernels
// >= 5.11). 4096 slots take 36 MiB on a 64-CPU node, 104 MiB on a 192-CPU one and 138 MiB at
// 256 possible CPUs (cg_sched: 136 B per CPU), beside colod's own memory under the DaemonSet's
// 128 MiB limit: the slots are sized to a memory budget instead.
// Pure: no syscalls; the collector passes the possible CPUs it counted.
#pragma once

#include <cstdint>
#include <string>

namespace colod::collect {

// The fewest slots a budget may leave: a node's containers, pause containers and system
// services (a 250-pod node has ~850 running cgroups; 256 is for small budgets on huge nodes).
inline constexpr uint32_t kMinSlots = 256;

// The maps' bytes per cgroup slot: per possible CPU (the per-CPU values) and once (hash
// elements, the slot's array entries). An estimate of the kernel's allocation (value sizes
// rounded up to 8, a hash element's header); colod_bpf_map_bytes reports what it charged.
struct SlotCost {
  uint64_t per_cpu = 0;
  uint64_t shared = 0;
};

// The cost of one slot with the sched maps, the reclaim map when `reclaim`, and the
// diagnostics' map when `diag` (CollectorOptions::wakeup_depth).
SlotCost slotCost(bool reclaim, bool diag);

// The maps' bytes for `slots` slots on `possible_cpus` CPUs.
uint64_t slotBytes(const SlotCost& cost, uint32_t slots, uint32_t possible_cpus);

struct SlotSizing {
  uint32_t slots = 0;         // what the maps are sized to
  uint64_t bytes = 0;         // their estimated memory
  uint64_t wanted_bytes = 0;  // the memory of the slots asked for
  bool capped = false;        // fewer than asked for, to fit the budget
  bool over_budget = false;   // even min_slots does not fit: min_slots it is
};

// At most `wanted` slots, as many as fit `budget_bytes` (0: no budget), never fewer than
// `min_slots` (a collector that sees too few cgroups is worse than one over its budget).
SlotSizing sizeSlots(const SlotCost& cost,
                     uint32_t wanted,
                     uint32_t possible_cpus,
                     uint64_t budget_bytes,
                     uint32_t min_slots);

// One line for the log when the sizing differs from what was asked for (empty otherwise).
std::string describeSizing(const SlotSizing& s,
                           uint32_t wanted,
                           uint32_t possible_cpus,
                           uint64_t budget_bytes);

}  // namespace colod::collect
