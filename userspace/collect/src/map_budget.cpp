// SPDX-License-Identifier: Apache-2.0
#include "colod/collect/map_budget.h"

#include <algorithm>
#include <cmath>
#include <sstream>

#include "cgsched.h"
#include "reclaim.h"

namespace colod::collect {

namespace {

constexpr uint64_t round8(uint64_t n) { return (n + 7) / 8 * 8; }
// A hash element's header in the kernel (struct htab_elem: list node, hash, padding), taken
// generously; a per-CPU hash element holds a pointer to its per-CPU values instead of them.
constexpr uint64_t kHashElem = 48;

double mib(uint64_t b) { return std::round(static_cast<double>(b) / (1024.0 * 1024.0) * 10) / 10; }

}  // namespace

SlotCost slotCost(bool reclaim, bool diag) {
  SlotCost c;
  // cg_sched (an array: a value per slot and CPU). Its key counted too: kernels before 6.4
  // account an array element as round_up(key + value, 8) (bpf_map_memory_footprint: 144 B, not
  // the 136 B allocated), and colod_bpf_map_bytes reports that.
  c.per_copy = round8(sizeof(uint32_t) + sizeof(colod_cg_sched));
  if (diag) {
    c.per_possible = round8(sizeof(colod_cg_diag));  // cg_diag (per-CPU array, when asked for)
  }
  c.shared = kHashElem + round8(sizeof(uint64_t)) + round8(sizeof(uint32_t))  // cg_slots
             + sizeof(uint32_t)                                               // free_slots
             + round8(sizeof(colod_cg_pending))                               // cg_pending
             + round8(sizeof(colod_cg_watch))                                 // cg_watch
             + sizeof(uint64_t)                                               // cg_dirty
             + sizeof(colod_cg_cpus);                                         // cg_cpus
  if (reclaim) {
    // cg_reclaim (a shared hash: one value per cgroup, not per CPU)
    c.shared += kHashElem + round8(sizeof(uint64_t)) + round8(sizeof(colod_cg_reclaim));
  }
  return c;
}

uint64_t slotBytes(const SlotCost& cost, uint32_t slots, MapCpus cpus) {
  return static_cast<uint64_t>(slots) *
         (cost.per_copy * static_cast<uint64_t>(cpus.copies) +
          cost.per_possible * static_cast<uint64_t>(cpus.possible) + cost.shared);
}

SlotSizing sizeSlots(const SlotCost& cost,
                     uint32_t wanted,
                     MapCpus cpus,
                     uint64_t budget_bytes,
                     uint32_t min_slots) {
  SlotSizing s;
  s.wanted_bytes = slotBytes(cost, wanted, cpus);
  s.slots = wanted;
  const uint64_t per_slot = slotBytes(cost, 1, cpus);
  if (budget_bytes > 0 && per_slot > 0 && s.wanted_bytes > budget_bytes) {
    const uint64_t fit = budget_bytes / per_slot;
    const uint32_t floor = std::min(min_slots, wanted);
    if (fit < floor) {
      s.slots = floor;
      s.over_budget = true;
    } else {
      s.slots = static_cast<uint32_t>(std::min<uint64_t>(fit, wanted));
    }
    s.capped = s.slots < wanted;
  }
  s.bytes = slotBytes(cost, s.slots, cpus);
  return s;
}

std::string describeSizing(const SlotSizing& s,
                           uint32_t wanted,
                           MapCpus cpus,
                           uint64_t budget_bytes) {
  if (!s.capped) {
    return {};
  }
  std::ostringstream os;
  os << "collector: " << s.slots << " cgroup slots, not the " << wanted << " of max_cgroups: on "
     << cpus.copies << " CPUs (" << cpus.possible << " possible) they would take "
     << mib(s.wanted_bytes) << " MiB of BPF maps, above bpf_map_budget_mib " << mib(budget_bytes)
     << " (" << mib(s.bytes) << " MiB now";
  if (s.over_budget) {
    os << ", still above it: fewer slots would leave containers unseen";
  }
  os << "); cgroups beyond the slots are not measured (colod_bpf_dropped_events_total counts them)";
  return os.str();
}

}  // namespace colod::collect
