// SPDX-License-Identifier: Apache-2.0
// The collector's BPF side: loading the objects (sized to the slots), reading their maps each
// snapshot (cg_sched summed in the kernel where it can be), and removing vanished cgroups'
// state from them, retried until the kernel takes it.
#include <algorithm>
#include <cstring>
#include <string>

#include "collector_impl.h"

namespace colod::collect {

using detail::roundUp8;

Result<void> Collector::Impl::load(AttachKind kind) {
  const uint32_t cg_mode = mode == CgroupMode::V2 ? COLOD_CGMODE_V2 : COLOD_CGMODE_V1CPU;
  const bool btf = kind == AttachKind::TpBtf;

  auto s = bpf::openSkeleton<cgsched, &cgsched__destroy>(&cgsched__open, "sched");
  if (!s) {
    return std::move(s).error();
  }
  // rodata knobs and map sizes: between open() and load() (style rule 24).
  (*s)->rodata->cg_mode = cg_mode;
  // cg_sched is an array of slots, cg_slots maps ids to them, free_slots recycles them,
  // cg_pending counts each slot's preempted tasks: all four hold max_cgroups
  // (bpf/cgsched.bpf.c).
  (*s)->rodata->max_slots = opts.max_cgroups;
  (*s)->rodata->sched_cpus = sched_cpus;
  (*s)->rodata->mark_changes = opts.changed_only && !opts.legacy_reads ? 1 : 0;
  // The diagnostics (zero-read waits, wakeup depth) only when asked for: otherwise cg_diag is
  // one unused entry, not 24 B x possible CPUs x slots.
  (*s)->rodata->diag = opts.wakeup_depth ? 1 : 0;
  // Every per-slot map (cg_named, cg_dirty, cg_watch included) holds max_cgroups; the pairs
  // maps and the removal queue have their own bounds.
  const std::pair<bpf_map*, uint32_t> sizes[] = {
      {(*s)->maps.cg_sched, opts.max_cgroups * sched_cpus},
      {(*s)->maps.cg_slots, opts.max_cgroups},
      {(*s)->maps.free_slots, opts.max_cgroups},
      {(*s)->maps.cg_pending, opts.max_cgroups},
      {(*s)->maps.cg_watch, opts.max_cgroups},
      {(*s)->maps.cg_dirty, opts.max_cgroups},
      {(*s)->maps.cg_named, opts.max_cgroups},
      {(*s)->maps.cg_cpus, opts.max_cgroups},
      {(*s)->maps.pairs, opts.max_pairs},
      {(*s)->maps.named_pairs, opts.max_named_pairs},
      {(*s)->maps.gone, opts.removal_queue},
      {(*s)->maps.cg_diag, opts.wakeup_depth ? opts.max_cgroups : 1},
  };
  for (const auto& [map, entries] : sizes) {
    if (const int rc = bpf_map__set_max_entries(map, entries); rc < 0) {
      return COLOD_ERR(-rc, "sched: sizing ", bpf_map__name(map));
    }
  }
  (*s)->rodata->watch_window_ns = static_cast<uint64_t>(opts.watch_window.count());
  auto set = [](bpf_program* p, bool on) { bpf_program__set_autoload(p, on); };
  set((*s)->progs.handle_sched_switch, btf);
  set((*s)->progs.handle_sched_switch_raw, !btf);
  set((*s)->progs.handle_cgroup_attach_task, btf);
  set((*s)->progs.handle_cgroup_attach_task_raw, !btf);
  set((*s)->progs.handle_cgroup_rmdir, btf);
  set((*s)->progs.handle_cgroup_rmdir_raw, !btf);
  set((*s)->progs.handle_sched_wakeup, btf && opts.wakeup_depth);
  set((*s)->progs.handle_sched_wakeup_new, btf && opts.wakeup_depth);
  set((*s)->progs.handle_sched_wakeup_raw, !btf && opts.wakeup_depth);
  set((*s)->progs.handle_sched_wakeup_new_raw, !btf && opts.wakeup_depth);
  COLOD_TRY_VOID(bpf::check(cgsched__load(s->get()), "loading sched programs"), "sched");
  // The summing iterator loads on cgsched's maps, which exist from here; whether it did decides
  // the CPU marks, which must be on before the first switch is counted (a copy written before
  // its CPU's mark would be summed only from that CPU's next write to the slot on).
  sums.reset();
  cpu_marks_on = false;
  if (opts.kernel_sums && !opts.legacy_reads) {
    Result<detail::KernelSums> k =
        opts.kernel_sums_refusal != 0
            ? Result<detail::KernelSums>(
                  COLOD_ERR(opts.kernel_sums_refusal, "loading the summing iterator (injected)"))
            : detail::KernelSums::open({.cg_slots = bpf_map__fd((*s)->maps.cg_slots),
                                        .cg_sched = bpf_map__fd((*s)->maps.cg_sched),
                                        .cg_dirty = bpf_map__fd((*s)->maps.cg_dirty),
                                        .cg_cpus = bpf_map__fd((*s)->maps.cg_cpus)},
                                       sched_cpus, opts.max_cgroups, cpuMarksWanted());
    if (k) {
      sums.emplace(std::move(k).value());
      cpu_marks_on = cpuMarksWanted();
      (*s)->bss->mark_cpus = cpuMarks() ? 1 : 0;
      read_note = "collector: cg_sched summed in the kernel (schedsum iterator) over " +
                  (cpuMarks() ? "the CPUs each cgroup ran on, of " + std::to_string(sched_cpus)
                              : "all " + std::to_string(sched_cpus) + " CPUs");
      if (opts.user_read_budget_bytes > 0) {
        read_note += ", or read from userspace while every live cgroup's CPU copies take " +
                     std::to_string(opts.user_read_budget_bytes) + " bytes or less";
      }
    } else {
      read_note = "collector: cg_sched read from userspace (" + std::to_string(sched_cpus) +
                  " CPU copies a cgroup): the kernel's summing iterator did not load (needs "
                  "kernel 5.17+): " +
                  k.error().message();
    }
  } else {
    read_note = "collector: cg_sched read from userspace (kernel sums off)";
  }
  COLOD_TRY_VOID(bpf::check(cgsched__attach(s->get()), "attaching sched programs"), "sched");

  ReclaimSkel r{nullptr, nullptr};
  if (opts.reclaim) {
    auto rs = bpf::openSkeleton<reclaim, &reclaim__destroy>(&reclaim__open, "reclaim");
    if (!rs) {
      return std::move(rs).error();
    }
    (*rs)->rodata->cg_mode = cg_mode;
    COLOD_TRY_VOID(bpf::check(bpf_map__set_max_entries((*rs)->maps.cg_reclaim, opts.max_cgroups),
                              "sizing cg_reclaim"),
                   "reclaim");
    set((*rs)->progs.handle_direct_reclaim_begin, btf);
    set((*rs)->progs.handle_direct_reclaim_end, btf);
    set((*rs)->progs.handle_memcg_reclaim_begin, btf);
    set((*rs)->progs.handle_memcg_reclaim_end, btf);
    set((*rs)->progs.handle_direct_reclaim_begin_raw, !btf);
    set((*rs)->progs.handle_direct_reclaim_end_raw, !btf);
    set((*rs)->progs.handle_memcg_reclaim_begin_raw, !btf);
    set((*rs)->progs.handle_memcg_reclaim_end_raw, !btf);
    COLOD_TRY_VOID(bpf::check(reclaim__load(rs->get()), "loading reclaim programs"), "reclaim");
    COLOD_TRY_VOID(bpf::check(reclaim__attach(rs->get()), "attaching reclaim programs"), "reclaim");
    r = ReclaimSkel(rs->release(), &reclaim__destroy);
  }
  auto w = detail::Watch::create({.cg_slots = bpf_map__fd((*s)->maps.cg_slots),
                                  .cg_watch = bpf_map__fd((*s)->maps.cg_watch),
                                  .wakeups = bpf_map__fd((*s)->maps.wakeups),
                                  .watched = &(*s)->bss->watched,
                                  .slots_gen = &(*s)->bss->slots_gen,
                                  .attach_gen = &(*s)->bss->attach_gen});
  if (!w) {
    return std::move(w).error();
  }
  watch.reset();
  auto marks = bpf::MappedWords::map(bpf_map__fd((*s)->maps.cg_dirty), opts.max_cgroups);
  if (!marks) {
    return std::move(marks).error().wrap("cg_dirty");
  }
  dirty = std::move(marks).value();
  auto named = bpf::MappedWords::map(bpf_map__fd((*s)->maps.cg_named), opts.max_cgroups);
  if (!named) {
    return std::move(named).error().wrap("cg_named");
  }
  named_marks = std::move(named).value();
  named_slots.clear();
  pair_maps[kRestPairs].name = "pairs";
  pair_maps[kRestPairs].fd = bpf_map__fd((*s)->maps.pairs);
  pair_maps[kRestPairs].max_entries = opts.max_pairs;
  pair_maps[kNamedPairs].name = "named_pairs";
  pair_maps[kNamedPairs].fd = bpf_map__fd((*s)->maps.named_pairs);
  pair_maps[kNamedPairs].full = &(*s)->bss->named_pairs_full;
  pair_maps[kNamedPairs].drain = true;
  pair_maps[kNamedPairs].max_entries = opts.max_named_pairs;
  last_full_sched_tick.reset();
  sched_skel = SchedSkel(s->release(), &cgsched__destroy);
  reclaim_skel = std::move(r);
  watch.emplace(std::move(w).value());
  attach = kind;
  return {};
}

void Collector::Impl::initReaders() {
  const bool legacy = opts.legacy_reads;
  slots_reader = bpf::MapReader(sizeof(uint64_t), sizeof(uint32_t), legacy);
  for (PairMap& m : pair_maps) {
    m.reader = bpf::MapReader(sizeof(colod_pair_key), sizeof(uint64_t), legacy);
  }
  behind_reader = bpf::MapReader(sizeof(colod_pair_key), sizeof(colod_behind), legacy);
  reclaim_reader = bpf::MapReader(sizeof(uint64_t), sizeof(colod_cg_reclaim), legacy);
}

// Kernel memory of every map of both objects (.bss/.rodata and the ring buffer included), as the
// kernel accounts it. A map whose fdinfo cannot be read counts 0: the number is a report.
uint64_t Collector::Impl::sumMapBytes() const {
  uint64_t total = 0;
  auto add = [&](const bpf_object* obj) {
    const bpf_map* m = nullptr;
    bpf_object__for_each_map(m, obj) {
      if (auto b = bpf::mapMemlockBytes(bpf_map__fd(m)); b) {
        total += *b;
      }
    }
  };
  add(sched_skel->obj);
  if (reclaim_skel) {
    add(reclaim_skel->obj);
  }
  return total;
}

// Per-cgroup scheduler aggregates: ids and slots from cg_slots, values from the slots of the
// array cg_sched (a copy per CPU of each slot). Every live slot at a full read (in one pass up
// to the highest slot ever handed out); otherwise only the slots the BPF side marked changed
// since the last read.
// Whether this snapshot's cg_sched read goes through the kernel's summing iterator: only where
// reading every live slot's CPU copies from userspace would copy more than
// user_read_budget_bytes (CollectorOptions). Sized by the slots handed out (a high-water mark of
// the live cgroups, known before any read), so a first read on a big node never copies them all
// out.
bool Collector::Impl::kernelSumsPay() const {
  if (opts.user_read_budget_bytes == 0) {
    return true;
  }
  const uint64_t used = __atomic_load_n(&sched_skel->bss->slots_used, __ATOMIC_ACQUIRE);
  const uint64_t live = std::min<uint64_t>(used, opts.max_cgroups);
  const uint64_t stride = sizeof(colod_cg_sched) * static_cast<uint64_t>(sched_cpus);
  return live * stride > opts.user_read_budget_bytes;
}

Result<Collector::Impl::SchedRead> Collector::Impl::readSched() {
  SchedRead r;
  r.entries = sched_maps.take();
  // Loaded before any walk: a slot handed out after it moves the counter past it.
  const uint64_t g = __atomic_load_n(&sched_skel->bss->slots_gen, __ATOMIC_ACQUIRE);
  r.slots_gen = g;
  // Every slot at first, when a cgroup got or lost a slot (a new one must be read whatever its
  // mark, and slot_ids must name it), and every full_read_every_n_ticks snapshots, which bounds
  // how late a write that raced a mark's clear can be (bpf/common/cg_maps.bpf.h).
  const bool marks = opts.changed_only && !opts.legacy_reads && !dirty.words().empty();
  stats.sched_cpu_copies = 0;
  const bool periodic =
      !last_full_sched_tick ||
      tick - *last_full_sched_tick >= std::max<uint32_t>(opts.full_read_every_n_ticks, 1);
  auto fullRead = [&] {
    last_full_sched_tick = tick;
    ++stats.sched_full_reads;
  };
  if (sums && kernelSumsPay()) {
    const bool all = !marks || periodic || sums_slots_gen.due(g);
    if (auto n = sums->read(r.entries, sched_maps, all); n) {
      r.all = all;
      if (all) {
        sums_slots_gen.walked(g);
        fullRead();
      }
      sched_read_bytes = sums->lastReadBytes();
      stats.sched_entries_read = *n;
      stats.sched_cpu_copies = sums->lastCpuCopies();
      ++stats.sched_kernel_reads;
      return r;
    } else {
      // Not expected once loaded; the userspace read gives the same sums, so carry on with it.
      read_note =
          "collector: cg_sched read from userspace: the kernel's summing iterator failed (" +
          n.error().message() + ")";
      ++stats.kernel_sum_errors;
      sums.reset();
      r.entries.clear();
    }
  } else if (marks && !periodic && !slots_gen.due(g)) {
    auto changed = readChangedSlots(r.entries);
    if (!changed) {
      return std::move(changed).error();
    }
    if (*changed) {
      r.all = false;
      return r;
    }
    // Most slots changed: one batch read of all of them is cheaper than a lookup each.
  }
  auto n = readIfChanged(slots_reader, slots_gen, &sched_skel->bss->slots_gen,
                         bpf_map__fd(sched_skel->maps.cg_slots));
  if (!n) {
    return std::move(n).error().wrap("reading cg_slots");
  }
  fullRead();
  const std::size_t slots = *n;
  sched_read_bytes = slots_reader.lastReadBytes();
  stats.sched_entries_read = 0;
  if (slots == 0) {
    sched_copies.clear();
    sched_copies.shrink_to_fit();
    slot_ids.clear();
    return r;
  }
  const uint64_t used = __atomic_load_n(&sched_skel->bss->slots_used, __ATOMIC_ACQUIRE);
  const std::size_t top = static_cast<std::size_t>(std::min<uint64_t>(used, opts.max_cgroups));
  if (marks) {
    // Cleared before the values are read: a write this read misses marks its slot again.
    bpf::clearMarks(dirty.words().first(std::min(top, dirty.words().size())));
  }
  // The legacy read (the baseline of scripts/bench/scale.sh) copies every slot out, into a
  // buffer of its own each time, as the collector did before issue 17.
  const bpf::IndexRun all{0, static_cast<uint32_t>(opts.legacy_reads ? opts.max_cgroups : top)};
  if (opts.legacy_reads) {
    sched_copies = {};
  }
  if (auto ok = readSchedCopies(all, sched_copies); !ok) {
    return std::move(ok).error();
  }
  sched_read_bytes +=
      static_cast<uint64_t>(all.count) * sched_cpus * (sizeof(uint32_t) + sizeof(colod_cg_sched));
  const std::size_t region = static_cast<std::size_t>(all.count) * sizeof(colod_cg_sched);
  slot_ids.assign(top, 0);
  detail::SchedMapPool::reserve(r.entries, slots);
  for (std::size_t i = 0; i < slots; ++i) {
    uint64_t id = 0;
    uint32_t slot = 0;
    std::memcpy(&id, slots_reader.key(i), sizeof(id));
    std::memcpy(&slot, slots_reader.value(i), sizeof(slot));
    // A slot above `top` was handed out after slots_used was read: next snapshot.
    if (slot < top) {
      const uint8_t* v =
          sched_copies.data() + static_cast<std::size_t>(slot) * sizeof(colod_cg_sched);
      sched_maps.put(r.entries, id,
                     detail::SchedEntry{
                         slot, detail::sumSchedPerCpu(v, static_cast<int>(sched_cpus), region)});
      slot_ids[slot] = id;
    }
  }
  stats.sched_entries_read = r.entries.size();
  return r;
}

// The slots marked changed since the last read, in runs of adjacent slots read by one batch
// call each (a short gap of unchanged slots is read through and dropped: cheaper than another
// syscall, bpf::planRuns), into `out` (empty, from the pool: the caller's, so that the map
// goes back to the pool whichever read fills it). Returns false, having read nothing, when one
// batch read of every live slot costs less: the caller reads them all instead.
Result<bool> Collector::Impl::readChangedSlots(detail::SchedMap& out) {
  changed_slots.clear();
  const std::size_t top = std::min(slot_ids.size(), dirty.words().size());
  bpf::takeMarks(dirty.words().first(top), changed_slots);
  // A slot's bytes over its CPU copies: the runs are planned and costed as if a slot were one
  // value (a run costs a call per CPU, but so does the full read it is weighed against).
  const std::size_t stride = sizeof(colod_cg_sched) * static_cast<std::size_t>(sched_cpus);
  bpf::planRuns(changed_slots, stride, slot_runs);
  if (bpf::runsCost(slot_runs, stride) >= bpf::walkCost(prev_sched.size(), stride)) {
    return false;
  }
  detail::SchedMapPool::reserve(out, changed_slots.size());
  std::size_t next = 0;  // into changed_slots, which the runs cover in order
  std::size_t copied = 0;
  for (const bpf::IndexRun& run : slot_runs) {
    if (auto ok = readSchedCopies(run, slot_value); !ok) {
      return std::move(ok).error();
    }
    copied += run.count;
    const std::size_t region = static_cast<std::size_t>(run.count) * sizeof(colod_cg_sched);
    for (; next < changed_slots.size() && changed_slots[next] < run.first + run.count; ++next) {
      const uint32_t slot = changed_slots[next];
      const uint64_t id = slot_ids[slot];
      if (id == 0) {
        continue;  // not handed out at the last full read: slots_gen moved, the next read is full
      }
      const uint8_t* v =
          slot_value.data() + static_cast<std::size_t>(slot - run.first) * sizeof(colod_cg_sched);
      sched_maps.put(out, id,
                     detail::SchedEntry{
                         slot, detail::sumSchedPerCpu(v, static_cast<int>(sched_cpus), region)});
    }
  }
  sched_read_bytes = copied * sched_cpus * (sizeof(uint32_t) + sizeof(colod_cg_sched));
  stats.sched_entries_read = out.size();
  stats.sched_read_calls += slot_runs.size() * sched_cpus;
  return true;
}

// Every CPU's copies of the slots in `run`, CPU-major into `out`: CPU c's copy of slot s at
// (c x run.count + s - run.first) x sizeof(colod_cg_sched). One range read per CPU (its region
// of cg_sched: index c x max_cgroups + slot, bpf/common/cg_maps.bpf.h).
Result<void> Collector::Impl::readSchedCopies(bpf::IndexRun run, std::vector<uint8_t>& out) {
  const std::size_t region = static_cast<std::size_t>(run.count) * sizeof(colod_cg_sched);
  out.resize(region * sched_cpus);
  if (run.count == 0) {
    return {};  // nothing to read (a batch of 0 would read as "no batch support")
  }
  const int fd = bpf_map__fd(sched_skel->maps.cg_sched);
  for (uint32_t c = 0; c < sched_cpus; ++c) {
    const bpf::IndexRun cpu_run{c * opts.max_cgroups + run.first, run.count};
    if (auto ok = bpf::readArrayRange(fd, cpu_run, sizeof(colod_cg_sched), run_keys, cpu_values,
                                      batch_reads);
        !ok) {
      return std::move(ok).error().wrap("cg_sched");
    }
    std::memcpy(out.data() + c * region, cpu_values.data(), region);
  }
  return {};
}

Result<std::size_t> Collector::Impl::readIfChanged(bpf::MapReader& reader,
                                                   bpf::MapGeneration& seen,
                                                   const __u64* gen,
                                                   int fd) {
  // Loaded before the walk: a write the walk misses moves the counter past it.
  const uint64_t g = __atomic_load_n(gen, __ATOMIC_ACQUIRE);
  if (!opts.legacy_reads && !seen.due(g)) {
    reader.reuse();
    ++stats.map_walks_skipped;
    return reader.count();
  }
  auto n = reader.read(fd, opts.max_cgroups);
  if (n) {
    seen.walked(g);
  }
  return n;
}

// Slots quarantined at the previous snapshot: zero them (on every CPU, and their count of
// pending preemption marks) and return them to the BPF side. A failure would leak the slot, so
// it is counted and retried next time.
void Collector::Impl::releaseSlots() {
  unreleased_slots = 0;
  if (quarantined_slots.empty()) {
    return;
  }
  // Long enough for any of the zeroed values: a cg_cpus value is not longer than cg_pending's,
  // and cg_diag's per-CPU copies (possible CPUs) are the longest of the rest.
  const std::size_t diag_stride = roundUp8(sizeof(colod_cg_diag)) * static_cast<std::size_t>(ncpu);
  const std::vector<uint8_t> zeros(
      std::max({diag_stride, sizeof(colod_cg_pending), sizeof(colod_cg_sched)}), 0);
  const int sched_fd = bpf_map__fd(sched_skel->maps.cg_sched);
  const int pending_fd = bpf_map__fd(sched_skel->maps.cg_pending);
  const int cpus_fd = bpf_map__fd(sched_skel->maps.cg_cpus);
  const int free_fd = bpf_map__fd(sched_skel->maps.free_slots);
  const int diag_fd = opts.wakeup_depth ? bpf_map__fd(sched_skel->maps.cg_diag) : -1;
  static_assert(sizeof(colod_cg_cpus) <= sizeof(colod_cg_pending));
  std::vector<uint32_t> keep;
  for (const uint32_t slot : quarantined_slots) {
    // Zeroing twice is harmless, so a retry redoes them all; a slot must reach free_slots
    // once only (twice, two cgroups would share it), and it is the last write. The CPU marks
    // (no program writes the slot any more) say which copies hold values: only those are
    // zeroed (192 calls a slot on a 192-CPU node otherwise), every copy without the marks (or
    // when they cannot be read). The marks go after the values, so a retry after a failure
    // between finds them still set.
    std::optional<colod_cg_cpus> marks;
    if (cpuMarks()) {
      colod_cg_cpus m{};
      if (bpf_map_lookup_elem(cpus_fd, &slot, &m) == 0) {
        marks = m;
      }
    }
    const bool ok =
        cleanupWrite(
            "cg_sched",
            [&] {
              // Its copy on every CPU that wrote one (index c x max_cgroups + slot): with the
              // CPU marks, the marked ones (the others are zero), else all of them.
              for (uint32_t c = 0; c < sched_cpus; ++c) {
                if (marks && !markedCpu(*marks, c)) {
                  continue;
                }
                const uint32_t key = c * opts.max_cgroups + slot;
                if (const int rc = bpf_map_update_elem(sched_fd, &key, zeros.data(), BPF_ANY);
                    rc != 0) {
                  return rc;
                }
              }
              return 0;
            }) &&
        cleanupWrite("cg_cpus",
                     [&] { return bpf_map_update_elem(cpus_fd, &slot, zeros.data(), BPF_ANY); }) &&
        cleanupWrite(
            "cg_pending",
            [&] { return bpf_map_update_elem(pending_fd, &slot, zeros.data(), BPF_ANY); }) &&
        (diag_fd < 0 ||
         cleanupWrite(
             "cg_diag",
             [&] { return bpf_map_update_elem(diag_fd, &slot, zeros.data(), BPF_ANY); })) &&
        cleanupWrite("free_slots", [&] { return bpf_map_update_elem(free_fd, nullptr, &slot, 0); });
    if (!ok) {
      keep.push_back(slot);
    }
  }
  quarantined_slots = std::move(keep);
  unreleased_slots = quarantined_slots.size();
}

// The slot's cg_diag value summed over the CPUs (only with opts.wakeup_depth): one lookup, the
// per-CPU copies of the cgroups read this snapshot only, so it stays a diagnostic's cost.
std::optional<colod_cg_diag> Collector::Impl::readDiag(uint32_t slot) {
  diag_buf.resize(roundUp8(sizeof(colod_cg_diag)) * static_cast<std::size_t>(ncpu));
  if (bpf_map_lookup_elem(bpf_map__fd(sched_skel->maps.cg_diag), &slot, diag_buf.data()) != 0) {
    ++stats.diag_read_errors;
    return std::nullopt;
  }
  return detail::sumDiagPerCpu(diag_buf.data(), ncpu);
}

// One map write of the cleanup of a vanished cgroup (write() returns 0 or -errno, libbpf
// style), through the test fault hook. ENOENT is success (the entry is already gone); any
// other failure is counted.
bool Collector::Impl::cleanupWrite(std::string_view map, const std::function<int()>& write) {
  int rc = 0;
  if (opts.cleanup_fault) {
    if (const int err = opts.cleanup_fault(map); err != 0) {
      rc = -err;
    }
  }
  if (rc == 0) {
    rc = write();
  }
  if (rc < 0 && rc != -ENOENT) {
    ++stats.map_delete_errors;
    return false;
  }
  return true;
}

bool Collector::Impl::deleteKey(std::string_view map, int fd, const void* key) {
  return cleanupWrite(map, [&] {
    auto r = bpf::deleteKey(fd, key);
    return r ? 0 : -r.error().errnoValue();
  });
}

// Deleting a vanished cgroup's key from cg_slots. Its slot may still be cached per CPU: on
// success it is quarantined for one snapshot and `released` says attach_gen must be bumped
// (every CPU then looks its running cgroup up again). On failure it is kept for a retry.
void Collector::Impl::pruneSlot(uint64_t id, uint32_t slot, bool& released) {
  if (deleteKey("cg_slots", bpf_map__fd(sched_skel->maps.cg_slots), &id)) {
    slots_gen.invalidate();
    sums_slots_gen.invalidate();
    undeleted_slots.erase(id);
    quarantined_slots.push_back(slot);
    released = true;
    ++stats.pruned_cgroups;
  } else if (undeleted_slots.size() < opts.max_cgroups) {
    undeleted_slots.emplace(id, slot);
  }
  // Else the set is full, which needs more failed keys than the map holds (cannot happen while
  // the collector is the only deleter): the entry stays in the map, is seen again at the next
  // rescan as a dead id and pruned then. Counted above either way.
}

void Collector::Impl::pruneReclaim(uint64_t id) {
  if (deleteKey("cg_reclaim", bpf_map__fd(reclaim_skel->maps.cg_reclaim), &id)) {
    reclaim_gen.invalidate();
    undeleted_reclaim.erase(id);
    ++stats.pruned_cgroups;
  } else if (undeleted_reclaim.size() < opts.max_cgroups) {
    undeleted_reclaim.insert(id);
  }
}

void Collector::Impl::prunePair(PairMap& m, const colod_pair_key& key) {
  if (deleteKey(m.name, m.fd, &key)) {
    m.undeleted.erase(key);
  } else if (m.undeleted.size() < m.max_entries) {
    m.undeleted.insert(key);
  }
}

Result<void> Collector::Impl::readPairs() {
  pairs_read_bytes = 0;
  COLOD_TRY_VOID(readPairMap(pair_maps[kNamedPairs]), "reading named_pairs");
  // The rest at the files' cadence, walked whole: its deltas are the whole span since its last
  // read (the counts are cumulative).
  const uint64_t every = std::max<uint32_t>(opts.files_every_n_ticks, 1);
  if (tick % every == 0) {
    COLOD_TRY_VOID(readPairMap(pair_maps[kRestPairs]), "reading pairs");
  } else {
    pair_maps[kRestPairs].deltas.unread();
  }
  return {};
}

Result<void> Collector::Impl::readPairMap(PairMap& m) {
  if (m.drain) {
    // Read and kept, the named map was walked whole at almost every snapshot: a new pair moved
    // its generation that often with 1000 live containers (1000 pairs a walk, a seventh of
    // colod's CPU). Drained, it holds the pairs of one interval, and the BPF side re-creates a
    // pair at its next preemption.
    auto n = m.reader.drain(m.fd, m.max_entries);
    if (!n) {
      return std::move(n).error();
    }
    if (m.full != nullptr && *n < m.max_entries && __atomic_load_n(m.full, __ATOMIC_RELAXED) != 0) {
      __atomic_store_n(m.full, 0, __ATOMIC_RELAXED);  // room again
    }
    stats.map_delete_errors += m.reader.lastDeleteErrors();
    m.deltas.drained(m.reader.key(0), m.reader.value(0), *n);
    pairs_read_bytes += m.reader.lastReadBytes();
    return {};
  }
  auto n = m.reader.read(m.fd, m.max_entries);
  if (!n) {
    return std::move(n).error();
  }
  m.deltas.update(m.reader.key(0), m.reader.value(0), *n, m.undeleted, tick);
  pairs_read_bytes += m.reader.lastReadBytes();
  // At most once every files_every_n_ticks snapshots, after the walk.
  if (opts.pair_idle_ticks > 0 &&
      tick - m.aged_at >= std::max<uint32_t>(opts.files_every_n_ticks, 1)) {
    m.aged_at = tick;
    agePairs(m);
  }
  return {};
}

void Collector::Impl::agePairs(PairMap& m) {
  idle_pairs.clear();
  if (m.deltas.takeIdle(tick, opts.pair_idle_ticks, idle_pairs) == 0) {
    return;
  }
  // One call for all of them; where it stops (a key it could not delete), the rest one by one,
  // a failure kept pending like any prune: a forgotten pair left in the map would be met as
  // new, its whole count taken for one interval's.
  auto count = static_cast<uint32_t>(idle_pairs.size());
  LIBBPF_OPTS(bpf_map_batch_opts, bo);
  if (bpf_map_delete_batch(m.fd, idle_pairs.data(), &count, &bo) != 0) {
    count = std::min(count, static_cast<uint32_t>(idle_pairs.size()));
    for (std::size_t i = count; i < idle_pairs.size(); ++i) {
      prunePair(m, idle_pairs[i]);
    }
  }
  stats.pairs_aged += idle_pairs.size();
}

// The marks follow the named set and the named cgroups' slots. A cgroup's slot changes only
// when the BPF side hands one out (slots_gen: loaded before this snapshot's read, so one handed
// out during it is seen at the next), or when the collector moves or releases one (attach_gen,
// bumped by this snapshot's prunes before this call and by the moves after it). While neither
// moved and the named set stands, the marks stand: this pass looked up every named cgroup at
// every tick (8 % of the snapshot's CPU at 1000 containers, session 42).
void Collector::Impl::syncNamedSlots(const std::unordered_map<uint64_t, detail::SchedEntry>& cur,
                                     uint64_t read_slots_gen) {
  const uint64_t gen =
      read_slots_gen + __atomic_load_n(&sched_skel->bss->attach_gen, __ATOMIC_ACQUIRE);
  if (!named_gen.due(gen)) {
    return;
  }
  named_gen.walked(gen);
  ++stats.named_slot_syncs;
  const std::span<uint64_t> marks = named_marks.words();
  std::vector<uint32_t> want;
  want.reserve(every_tick.size());
  for (const uint64_t id : every_tick) {
    if (auto it = cur.find(id); it != cur.end() && it->second.slot < marks.size()) {
      want.push_back(it->second.slot);
    }
  }
  std::sort(want.begin(), want.end());
  // Cleared first where no longer named, then set: a slot is never briefly unmarked while its
  // cgroup stays named (its pairs would go to the map read at the cadence).
  for (const uint32_t slot : named_slots) {
    if (!std::binary_search(want.begin(), want.end(), slot)) {
      __atomic_store_n(&marks[slot], 0, __ATOMIC_RELAXED);
    }
  }
  for (const uint32_t slot : want) {
    if (__atomic_load_n(&marks[slot], __ATOMIC_RELAXED) == 0) {
      __atomic_store_n(&marks[slot], 1, __ATOMIC_RELAXED);
    }
  }
  named_slots = std::move(want);
}

// The behind map holds watched cgroups' entries only, and only what was added since the last
// drain: the BPF side re-creates an entry at its next wait (issue 17: read and kept, the map
// filled with every pair that ever waited, 4096 of them with 1000 containers, walked and
// hashed at every tick, and new pairs were dropped). Without a watch nothing is added, so
// nothing is read once the last watch's tail is drained.
Result<void> Collector::Impl::readBehind() {
  const bool watched = __atomic_load_n(&sched_skel->bss->watched, __ATOMIC_RELAXED) != 0;
  behind_read_bytes = 0;
  if (watched) {
    behind_drains_left = 2;
  } else if (behind_drains_left == 0) {
    behind_reader.clear();
    return {};
  } else {
    --behind_drains_left;
  }
  auto n = behind_reader.drain(bpf_map__fd(sched_skel->maps.behind), COLOD_DEFAULT_MAX_BEHIND);
  if (!n) {
    behind_reader.clear();
    return std::move(n).error().wrap("reading behind");
  }
  stats.map_delete_errors += behind_reader.lastDeleteErrors();
  behind_read_bytes = behind_reader.lastReadBytes();
  if (!watched) {
    behind_reader.clear();  // waits of a watch that has ended: not reported
  }
  return {};
}

// The deletions that failed before, once per snapshot (after releaseSlots, so a slot freed
// here is quarantined for a full interval like any other).
void Collector::Impl::retryDeletes() {
  bool released = false;
  for (const auto& [id, slot] :
       std::vector<std::pair<uint64_t, uint32_t>>(undeleted_slots.begin(), undeleted_slots.end())) {
    pruneSlot(id, slot, released);
  }
  if (released) {
    __atomic_fetch_add(&sched_skel->bss->attach_gen, 1, __ATOMIC_SEQ_CST);
  }
  if (reclaim_skel) {
    for (const uint64_t id :
         std::vector<uint64_t>(undeleted_reclaim.begin(), undeleted_reclaim.end())) {
      pruneReclaim(id);
    }
  }
  for (PairMap& m : pair_maps) {
    for (const auto& key : std::vector<colod_pair_key>(m.undeleted.begin(), m.undeleted.end())) {
      prunePair(m, key);
    }
  }
}

}  // namespace colod::collect
