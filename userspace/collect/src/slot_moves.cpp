// SPDX-License-Identifier: Apache-2.0
// Moving a cgroup to a fresh cg_sched slot, which clears its CPU marks
// (CollectorOptions::slot_move_min_cpus; bpf/README.md, "A slot's CPU marks only grow").
//
// A mark in cg_cpus says "this CPU's copy of the slot is not zero": the kernel's sum must add
// that copy for as long as the slot lives, since the values are cumulative. Zeroing one CPU's
// copy from here would race that CPU's own unlocked add to it, so the marks are cleared by
// moving the cgroup instead:
//   snapshot k:   a fresh (zeroed) slot is pointed to by cg_slots, attach_gen is bumped so no CPU
//                 keeps the old slot cached, and the next read is a full one;
//   snapshot k+1: the old slot is read once more (every program run that could still write it
//                 has ended an interval ago) and what it gained since its last read is added to
//                 the cgroup's delta; the new slot counts from zero (schedDelta's slot change);
//                 the old slot is quarantined and recycled as a deleted cgroup's.
// Preemption marks pending on the old slot at the move lose their wait (the task's next resume
// looks at the new slot's count), as a task moved between cgroups while queued already does.
#include <algorithm>
#include <cerrno>
#include <cstring>

#include "collector_impl.h"

namespace colod::collect {

// A zeroed slot: a recycled one from free_slots, else the next never used one (the BPF side
// hands out the same way, cgsched.bpf.c cg_slot()). nullopt when every slot is taken.
std::optional<uint32_t> Collector::Impl::takeFreeSlot() {
  uint32_t slot = 0;
  if (bpf_map_lookup_and_delete_elem(bpf_map__fd(sched_skel->maps.free_slots), nullptr, &slot) ==
      0) {
    return slot;
  }
  const uint64_t top = __atomic_fetch_add(&sched_skel->bss->slots_used, 1, __ATOMIC_SEQ_CST);
  if (top >= opts.max_cgroups) {
    return std::nullopt;
  }
  return static_cast<uint32_t>(top);
}

void Collector::Impl::moveCrowdedSlots(
    const std::unordered_map<uint64_t, detail::SchedEntry>& live) {
  if (!cpuMarks() || opts.slot_move_min_cpus == 0 || opts.slot_move_every_ticks == 0 ||
      tick % opts.slot_move_every_ticks != 0 || !moved_slots.empty()) {
    return;
  }
  if (opts.before_slot_moves) {
    opts.before_slot_moves();
  }
  const int cpus_fd = bpf_map__fd(sched_skel->maps.cg_cpus);
  const int slots_fd = bpf_map__fd(sched_skel->maps.cg_slots);
  const std::span<uint64_t> named = named_marks.words();
  for (const auto& [id, e] : live) {
    if (moved_slots.size() >= opts.slot_moves_per_check) {
      break;
    }
    colod_cg_cpus marks{};
    if (undeleted_slots.contains(id) || bpf_map_lookup_elem(cpus_fd, &e.slot, &marks) != 0 ||
        markedCount(marks) < opts.slot_move_min_cpus) {
      continue;
    }
    const std::optional<uint32_t> fresh = takeFreeSlot();
    if (!fresh) {
      break;  // every slot is taken: nothing to move to
    }
    // Named before it is used: its preemptions' pairs keep going to named_pairs.
    if (e.slot < named.size() && *fresh < named.size() &&
        __atomic_load_n(&named[e.slot], __ATOMIC_RELAXED) != 0) {
      __atomic_store_n(&named[*fresh], 1, __ATOMIC_RELAXED);
      named_slots.push_back(*fresh);
    }
    const int injected = opts.cleanup_fault ? opts.cleanup_fault("slot_move") : 0;
    if (injected != 0 || bpf_map_update_elem(slots_fd, &id, &*fresh, BPF_EXIST) != 0) {
      // Not moved; the fresh slot is zeroed still: back to the quarantine, which frees it.
      ++stats.slot_move_errors;
      quarantined_slots.push_back(*fresh);
      continue;
    }
    moved_slots.emplace(id, e.slot);
  }
  if (moved_slots.empty()) {
    return;
  }
  stats.slots_moved += moved_slots.size();
  // No CPU keeps an old slot cached past its next switch (cpu_state.gen); the next read walks
  // cg_slots again and reads every live slot, so the moved cgroups are found at their new ones.
  __atomic_fetch_add(&sched_skel->bss->attach_gen, 1, __ATOMIC_SEQ_CST);
  slots_gen.invalidate();
  sums_slots_gen.invalidate();
  last_full_sched_tick.reset();
  if (auto r = watch->rebind(); !r) {
    ++stats.watch_write_errors;
  }
}

std::unordered_map<uint64_t, colod_cg_sched> Collector::Impl::readMovedTails() {
  std::unordered_map<uint64_t, colod_cg_sched> tails;
  if (moved_slots.empty()) {
    return tails;
  }
  // The old slots in runs (one batch call per CPU copy and run, gaps read through where that
  // is cheaper, as for the changed slots): a call per slot and CPU copy cost a guest with 64
  // copies 4096 calls for 64 moves.
  std::vector<uint32_t> olds;
  olds.reserve(moved_slots.size());
  for (const auto& [id, old] : moved_slots) {
    olds.push_back(old);
  }
  std::sort(olds.begin(), olds.end());
  std::vector<bpf::IndexRun> runs;
  bpf::planRuns(olds, sizeof(colod_cg_sched) * static_cast<std::size_t>(sched_cpus), runs);
  std::unordered_map<uint32_t, colod_cg_sched> last_of_old;
  std::size_t next = 0;  // into olds, which the runs cover in order
  for (const bpf::IndexRun& run : runs) {
    const bool ok = static_cast<bool>(readSchedCopies(run, slot_value));
    const std::size_t region = static_cast<std::size_t>(run.count) * sizeof(colod_cg_sched);
    for (; next < olds.size() && olds[next] < run.first + run.count; ++next) {
      if (!ok) {
        // A failed read costs these cgroups the old slot's last gain, not the snapshot: the
        // slot is recycled either way.
        ++stats.slot_move_errors;
        continue;
      }
      const uint8_t* v = slot_value.data() +
                         static_cast<std::size_t>(olds[next] - run.first) * sizeof(colod_cg_sched);
      last_of_old.emplace(olds[next],
                          detail::sumSchedPerCpu(v, static_cast<int>(sched_cpus), region));
    }
  }
  for (const auto& [id, old] : moved_slots) {
    const auto l = last_of_old.find(old);
    if (l == last_of_old.end()) {
      continue;
    }
    const auto p = prev_sched.find(id);
    const bool have_prev = p != prev_sched.end() && p->second.slot == old;
    tails.emplace(id, detail::schedDelta(detail::SchedEntry{old, l->second},
                                         have_prev ? &p->second : nullptr));
  }
  return tails;
}

void Collector::Impl::quarantineMovedSlots() {
  for (const auto& [id, old] : moved_slots) {
    quarantined_slots.push_back(old);
  }
  moved_slots.clear();
}

Result<Collector::SlotMarks> Collector::slotMarks(uint64_t id) const {
  SlotMarks out;
  if (bpf_map_lookup_elem(bpf_map__fd(impl_->sched_skel->maps.cg_slots), &id, &out.slot) != 0) {
    return COLOD_ERR(errno, "cgroup ", id, " has no slot in cg_slots");
  }
  colod_cg_cpus marks{};
  if (bpf_map_lookup_elem(bpf_map__fd(impl_->sched_skel->maps.cg_cpus), &out.slot, &marks) != 0) {
    return COLOD_ERR(errno, "reading cg_cpus slot ", out.slot);
  }
  for (uint32_t c = 0; c < COLOD_CPU_MARK_WORDS * 64; ++c) {
    if (markedCpu(marks, c)) {
      out.cpus.push_back(static_cast<int>(c));
    }
  }
  return out;
}

Result<uint64_t> Collector::slotOncpuNs(uint32_t slot) const {
  if (slot >= impl_->opts.max_cgroups) {
    return COLOD_ERR(ERANGE, "slot ", slot, " past the ", impl_->opts.max_cgroups, " slots");
  }
  const int fd = bpf_map__fd(impl_->sched_skel->maps.cg_sched);
  uint64_t sum = 0;
  for (uint32_t c = 0; c < impl_->sched_cpus; ++c) {
    const uint32_t key = c * impl_->opts.max_cgroups + slot;
    colod_cg_sched v{};
    if (bpf_map_lookup_elem(fd, &key, &v) != 0) {
      return COLOD_ERR(errno, "reading cg_sched index ", key);
    }
    sum += v.oncpu_ns;
  }
  return sum;
}

}  // namespace colod::collect
