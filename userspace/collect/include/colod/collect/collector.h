// SPDX-License-Identifier: Apache-2.0
// colod::collect — the per-cgroup scheduler/memory collector over the BPF skeletons.
//
// A Collector loads and attaches the BPF programs (open -> set rodata/map sizes -> load ->
// attach), and each call to snapshot() turns the in-kernel aggregates accumulated since the
// previous call into one Snapshot: per cgroup run-queue latency percentiles (from log2
// histogram deltas), preemptions by aggressor cgroup, on-CPU time, involuntary switches,
// memory-reclaim stall, plus what the cgroup files say (cpu.stat throttling, PSI).
//
// Threading: a Collector is not thread-safe; call snapshot() from one thread. It is movable.
// Errors: create() returns EPERM when BPF may not be loaded (not root / lockdown), ENOENT when
// the kernel has no BTF (/sys/kernel/btf/vmlinux), EOPNOTSUPP when no attach type works.
#pragma once

#include <array>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "colod/base/result.h"

namespace colod::collect {

// Number of log2 slots of every histogram (slot i counts values in [2^i, 2^(i+1)) units;
// slot 0 also counts 0). Same as bpf/colod_common.h COLOD_HIST_SLOTS.
inline constexpr std::size_t kHistSlots = 26;
using Log2Hist = std::array<uint32_t, kHistSlots>;

// Which cgroup a task is charged to in the BPF programs (probed at start, reported).
enum class CgroupMode {
  V2,     // the task's default-hierarchy (cgroup2) cgroup; ids are cgroup2 inode numbers
  V1Cpu,  // v1/hybrid: the cgroup of the cpu controller; ids are inodes in the v1 cpu hierarchy
};
const char* toString(CgroupMode mode);

// How the scheduler programs were attached (tp_btf preferred, raw_tp fallback).
enum class AttachKind { TpBtf, RawTp };
const char* toString(AttachKind kind);

// Percentiles in microseconds estimated from a log2 histogram (upper bound of the slot that
// holds the percentile, so a p99 of 16 means "below 16 us"). All zero when count == 0.
struct LatencySummary {
  uint64_t count = 0;
  uint64_t p50_us = 0;
  uint64_t p90_us = 0;
  uint64_t p99_us = 0;
  uint64_t max_us = 0;    // upper bound of the highest non-empty slot
  uint64_t total_ns = 0;  // sum of all waits this interval (exact, not from slots)
};

// Who took the CPU from this cgroup's tasks during the interval.
struct Aggressor {
  uint64_t cgroup_id = 0;
  std::string path;          // "" if the aggressor cgroup vanished or is unknown
  uint64_t preemptions = 0;  // involuntary switches victim -> aggressor
};

// Whom a protected (watched) cgroup's tasks waited behind after their wakeups: the cgroup of
// the task that held the CPU until the waiter got it. Waits under 50 µs are left out.
struct WaitedBehind {
  uint64_t cgroup_id = 0;
  std::string path;  // "" if the cgroup vanished or is unknown
  uint64_t waits = 0;
  uint64_t wait_ns = 0;
};

// A PSI file (cpu.pressure / memory.pressure): "some" and "full" lines. full is absent for
// cpu.pressure on old kernels. total_us values are cumulative counters as the kernel reports.
struct PsiLine {
  double avg10 = 0;
  double avg60 = 0;
  double avg300 = 0;
  uint64_t total_us = 0;
};
struct Psi {
  PsiLine some;
  std::optional<PsiLine> full;
};

// cpu.stat throttling, normalised across v1 (throttled_time, ns) and v2 (throttled_usec).
// Deltas over the interval.
struct Throttling {
  uint64_t nr_periods = 0;
  uint64_t nr_throttled = 0;
  uint64_t throttled_ns = 0;
};

struct CgroupSample {
  uint64_t id = 0;   // inode of the cgroup dir in the hierarchy given by Snapshot::mode
  std::string path;  // relative to the hierarchy root, "/" for the root; "" if unresolved

  // Run-queue latency of this cgroup's tasks (wakeup/new/preempted -> running), this interval.
  LatencySummary runq;
  Log2Hist runq_hist{};  // delta histogram, microsecond slots
  // Waits that read exactly 0 because the scheduler skipped the rq clock update after a
  // preempting wakeup (a known under-estimate of short waits, bpf/README.md). Included in runq.
  // Counted only with CollectorOptions::wakeup_depth (a diagnostic; 0 otherwise).
  uint64_t runq_stale = 0;

  // Contention: switches where a task of this cgroup was preempted while runnable.
  uint64_t involuntary_switches = 0;
  // Run-queue wait after preemptions: from each preemption to the task's next switch-in, on
  // whichever CPU that is (a victim the balancer moved while it waited keeps its whole wait).
  uint64_t preempted_wait_ns = 0;
  uint64_t preempted_waits = 0;         // the waits summed in preempted_wait_ns
  std::vector<Aggressor> preempted_by;  // sorted by preemptions, descending
  // Waits after wakeups by whom they waited behind; only for watched cgroups (setWatched).
  std::vector<WaitedBehind> waited_behind;
  // CPU time of this cgroup's tasks this interval. BPF credits a slice when its task switches
  // out, so a task that keeps its CPU (a spinner alone on a quiet CPU) is credited in lumps, up
  // to 0.99 s at once seen here, and reads 0 in between. For a cgroup seen running slices of
  // 20 ms or more on average, for a minute after each, it is the cgroup's own usage counter
  // instead (v2 cpu.stat usage_usec; v1 cpuacct.usage, or the unified cpu.stat on a hybrid
  // host), which the kernel advances at every scheduler tick: oncpu_from_usage says so. Such a
  // cgroup is reported at every snapshot where it used CPU. The interval of the first long
  // slice still holds that slice whole (the counter's first read only sets its base).
  uint64_t oncpu_ns = 0;
  bool oncpu_from_usage = false;
  uint64_t wakeups = 0;         // wakeups seen (depth samples); with wakeup_depth only
  uint64_t runq_depth_sum = 0;  // sum of run-queue depth seen at those wakeups

  // Memory reclaim stall (direct + memcg reclaim) this interval.
  uint64_t reclaim_count = 0;
  uint64_t reclaim_stall_ns = 0;
  uint64_t reclaim_pages = 0;
  Log2Hist reclaim_hist{};  // microsecond slots

  // From the cgroup files, when present (std::nullopt when missing/unreadable).
  std::optional<Throttling> throttling;
  std::optional<Psi> cpu_pressure;  // unified hierarchy (PSI lives there on hybrid hosts)
  std::optional<Psi> memory_pressure;
};

// Collector counters (style rule 15b: expected runtime conditions are counted).
struct CollectorStats {
  uint64_t snapshots = 0;
  uint64_t map_drops = 0;  // BPF map updates that failed (map full), summed over CPUs
  // BPF hash updates the kernel refused because this CPU held the bucket lock (an interrupt's
  // wakeup program inside a map operation on the same CPU): one event each, not a full map.
  uint64_t map_lock_skips = 0;
  uint64_t pruned_cgroups = 0;    // map entries of vanished cgroups deleted
  uint64_t unresolved_ids = 0;    // ids seen in maps with no live cgroup dir
  uint64_t file_read_errors = 0;  // cgroup file reads that failed (other than ENOENT)
  // Removing a vanished cgroup's state from the kernel maps failed (an entry's deletion, or
  // handing its cg_sched slot back): each failed attempt. Every one is retried at the next
  // snapshot until it succeeds, so nothing leaks; until then the entry stays in its map.
  uint64_t map_delete_errors = 0;
  uint64_t map_deletes_pending = 0;  // now: those waiting for their retry (bounded by map sizes)
  uint64_t kernel_sum_errors = 0;    // summing-iterator reads that failed (then userspace sums)
  uint64_t watch_write_errors = 0;   // cg_watch writes refused (retried at the next snapshot)
  uint64_t watch_slot_lookups = 0;   // cg_slots lookups binding the watched cgroups (cumulative)
  // Passes that synced the named cgroups' slot marks (cg_named) with their slots: only after a
  // slot was handed out, moved or released, or the named set changed (setEveryTick); cumulative.
  uint64_t named_slot_syncs = 0;
  uint64_t diag_read_errors = 0;     // cg_diag lookups that failed (wakeup_depth: those read 0)
  // CPUs seen running past cg_sched's copies (brought online after start, beyond the present
  // CPUs then): their switches are not measured until colod restarts. Kept out of map_drops.
  uint64_t unmeasured_cpus = 0;
  uint32_t sched_cpus = 0;  // the CPUs cg_sched keeps a copy for (CollectorOptions::sched_cpus)
  // The read side's cost (issue 17). Bytes copied out of the BPF maps by the last snapshot:
  // live entries x (key + value; per-CPU values x possible CPUs), not max_entries.
  uint64_t read_bytes_last_tick = 0;
  // Walks of cg_slots / cg_reclaim skipped because the BPF side wrote neither since the last
  // walk (their generation counters stood still); cumulative.
  uint64_t map_walks_skipped = 0;
  // Removals the BPF side could not queue (the queue was full); each time, the next snapshot
  // stat()s every tracked cgroup instead. Cumulative.
  uint64_t removals_lost = 0;
  // Bytes of the map read buffers held between snapshots (sized by the live entries). With
  // legacy_reads: the buffers allocated and zero-filled by the last snapshot.
  uint64_t read_buffer_bytes = 0;
  // Kernel memory of colod's BPF maps (sum of each map's fdinfo memlock; fixed after load).
  // Charged to colod's memory cgroup on current kernels, and not part of its RSS.
  uint64_t bpf_map_bytes = 0;
  // cgroups whose cg_sched entry the last snapshot copied out: those whose slot the BPF side
  // marked changed, or every live one at a full read (CollectorOptions::changed_only).
  uint64_t sched_entries_read = 0;
  uint64_t sched_full_reads = 0;  // snapshots that read every live slot; cumulative
  // Cgroups moved to a fresh slot to clear their CPU marks (slot_move_min_cpus); cumulative.
  uint64_t slots_moved = 0;
  // Moves that failed (cg_slots refused the new slot: the cgroup stays where it was), and old
  // slots whose last read failed (what they gained after their last read is not counted).
  uint64_t slot_move_errors = 0;
  // Snapshots whose cg_sched read the kernel summed (CollectorOptions::kernel_sums,
  // user_read_budget_bytes); cumulative.
  uint64_t sched_kernel_reads = 0;
  // Per-CPU copies of cg_sched the kernel's last sum added up (the CPUs each read cgroup ran
  // on since its slot was zeroed; every possible CPU without the marks); 0 when it did not sum.
  uint64_t sched_cpu_copies = 0;
  // Calls that read changed slots between full reads (one a run of adjacent slots); cumulative.
  uint64_t sched_read_calls = 0;
  // Per-snapshot maps of the read entries allocated afresh, not reused; cumulative. Flat after
  // the first snapshots: a map each snapshot is a bucket array and a rehash each.
  uint64_t sched_maps_made = 0;
  // The named victims' pairs map is full now: their new pairs are counted in the other map,
  // read at the slower cadence (CollectorOptions::max_named_pairs).
  bool named_pairs_full = false;
  // Pairs deleted from their maps after pair_idle_ticks without a move; cumulative.
  uint64_t pairs_aged = 0;
  uint64_t cgroup_file_opens = 0;  // cgroup control files opened (flat when all stay cached)
  // Reads of a control file found missing lately (psi=0 kernels, no cpu controller), answered
  // without a syscall; the file is looked for again after a minute.
  uint64_t cgroup_file_misses_cached = 0;
  uint64_t cgroup_files_open = 0;  // now: control files held open for re-reading
  uint64_t cgroup_file_reads = 0;  // pread calls on cgroup control files, cumulative
  // cpu.stat reads skipped because no CFS quota is set (the cgroup cannot be throttled);
  // cumulative.
  uint64_t cpu_stat_reads_skipped = 0;
};

struct Snapshot {
  std::chrono::steady_clock::time_point now;
  std::chrono::nanoseconds interval{0};  // time since the previous snapshot (or since attach)
  CgroupMode mode = CgroupMode::V1Cpu;
  std::vector<CgroupSample> cgroups;  // only cgroups with activity or file data; sorted by path
  CollectorStats stats;               // cumulative
};

// A protected cgroup whose run-queue wait wakes the reader (Collector::setWatched): when its
// tasks' waits summed within one window (CollectorOptions::watch_window) reach threshold, the
// BPF side posts one WakeupEvent (at most one per cgroup per window).
struct WatchedCgroup {
  uint64_t id = 0;  // as CgroupSample::id
  std::chrono::nanoseconds threshold{0};
  bool operator==(const WatchedCgroup&) const = default;
};

// One crossing of a watched cgroup's threshold. Times are the kernel's rq clock (sched_clock,
// ns): comparable with each other, not with steady_clock.
struct WakeupEvent {
  uint64_t cgroup_id = 0;
  uint64_t waited_ns = 0;        // waits summed in the window when the threshold was reached
  uint64_t window_start_ns = 0;  // rq clock at the window's first wait
  uint64_t at_ns = 0;            // rq clock of the wait that crossed the threshold
};

struct CollectorOptions {
  std::string cgroup_root = "/sys/fs/cgroup";  // style rule 19: injected root
  uint32_t max_cgroups = 4096;                 // bound of every per-cgroup map
  // Memory budget of the per-cgroup maps (0: none). They are per-CPU, so on a big node the
  // slots are cut to what fits (map_budget.h), never below kMinSlots; sizingNote() says so.
  uint64_t map_budget_bytes = 0;
  uint32_t max_pairs = 16384;  // bound of the victim<-aggressor map
  // Bound of the map of the pairs whose victim is named every tick (setEveryTick), read at every
  // snapshot while the other is read every files_every_n_ticks-th; beyond it they go to the
  // other, read late but not lost.
  uint32_t max_named_pairs = 4096;
  // A pair whose count has not moved for this many snapshots is deleted from its map (0:
  // never), looked for after a whole walk of the map at most once every files_every_n_ticks
  // snapshots: on a node whose containers live for days the victim <- aggressor pairs would
  // otherwise fill both maps, and new pairs (a BE job that just landed, preempting an LS)
  // would be dropped. A deleted pair that moves again
  // is re-created by the BPF side and reported whole. The deletion is one batch call; a
  // preemption landing between the walk that found the pair idle and that call is not counted
  // (the pair had stood still for the whole span before).
  uint32_t pair_idle_ticks = 0;
  // Ids of removed cgroups queued by the BPF side between two snapshots; beyond it every
  // tracked cgroup is checked with a stat() at the next snapshot (CollectorStats::removals_lost).
  uint32_t removal_queue = 1024;
  std::optional<CgroupMode> force_mode;  // skip probing (tests)
  bool force_raw_tp = false;             // skip the tp_btf probe (tests, old kernels)
  // The run-queue diagnostics no policy reads: sched_wakeup(_new) attached for the run-queue
  // depth at wakeup, and waits that read zero counted (CgroupSample::runq_stale). Off by
  // default: the wakeup programs cost ~80 ns per wakeup (bpf/README.md), which a pipe ping-pong
  // pays twice per round trip, and their per-CPU map (cg_diag) 24 B x possible CPUs a slot.
  bool wakeup_depth = false;
  // The CPUs cg_sched keeps a copy for (CPU ids below it are measured). nullopt: the present
  // CPUs (a VM's possible CPUs beyond them cost no memory). Tests and colod-collect-scale set
  // it: 1 to see a CPU past the copies counted, the possible CPUs (or more: clamped to them) to
  // size the maps as a node with all of them present.
  std::optional<uint32_t> sched_cpus;
  bool reclaim = true;     // attach the vmscan programs
  bool read_files = true;  // read cpu.stat / PSI per cgroup
  // Control files kept open between snapshots (cpu.stat, cpu.pressure, memory.pressure: up to
  // 3 per active cgroup). nullopt: half of RLIMIT_NOFILE's soft limit at create(). 0: open and
  // close at every read.
  std::optional<std::size_t> max_open_files;
  // Cadence of the cgroup file reads: cgroups not named in setEveryTick() have their cpu.stat
  // read every files_every_n_ticks-th snapshot only (spread over the ticks by id), and no file
  // data in the others; named ones have it read at every snapshot. 1 (the default) reads every
  // active cgroup's files at every snapshot.
  uint32_t files_every_n_ticks = 1;
  // Cadence of the pressure files (cpu.pressure, memory.pressure) and of the CFS quota, named
  // or not: every pressure_every_n_ticks-th snapshot (spread by id; 0: files_every_n_ticks).
  // The kernel recomputes the PSI averages every 2 s, and a quota changes when a container is
  // resized. cpu.stat is read only while a quota is set (or not known yet): without one a
  // cgroup is never throttled, and its counters stand still until one is set.
  uint32_t pressure_every_n_ticks = 0;
  // Read the pressure files of the cgroups named in setEveryTick() only (the daemon: its policy
  // reads the PSI of its victims alone, and nothing shows the others').
  bool pressure_of_named_only = false;
  // The CPU time of the cgroups seen running long slices from their usage counters
  // (CgroupSample::oncpu_ns). Off: BPF's credit at switch-out for every cgroup, as before
  // session 36 (for scale.sh, which prices the reads side by side).
  bool usage_of_long_slices = true;
  // A long slice: an interval's CPU time over the slices that began in it is this or more.
  // BPF credits a slice when it ends, so a task that keeps its CPU (a spinner alone on a quiet
  // CPU: lumps up to 0.99 s apart seen here) reads 0 between its switch-outs. CFS runs a task
  // that shares its CPU a few ms at a time, so a cgroup with 20-ms slices holds a CPU nobody
  // else wanted: such cgroups are few whatever the node's size, and those that wake and sleep
  // (most services) cost no read. Tests set 1 to mark every cgroup that ran.
  uint64_t long_slice_ns = 20'000'000;
  // Benchmarks only (scripts/bench/scale.sh "before"): the pre-issue-17 read side -- every map
  // dumped at max_entries into buffers allocated and zero-filled at each snapshot, and every
  // cgroup file opened and closed at each read.
  bool legacy_reads = false;
  // Sum cg_sched over the CPUs in the kernel (bpf/schedsum.bpf.c: an iterator, kernel 5.19+)
  // and read one record per live cgroup, instead of every possible CPU's copy of it. Falls back
  // to the userspace read where the kernel cannot (readNote() says why); off with legacy_reads.
  bool kernel_sums = true;
  // With kernel_sums, the snapshots still read cg_sched from userspace while that copies little:
  // while every live slot's per-CPU copies (136 B x possible CPUs each) come to at most this
  // many bytes. The kernel's iterator walks every live cgroup to find the changed ones, and on
  // a host with few possible CPUs that costs more than copying the changed slots out
  // (scripts/bench/scale.sh, 2 possible CPUs, 1000 containers: 0.80 % of a CPU against 0.96 %);
  // on a big node one slot is tens of KB and the kernel sums. 0: the kernel sums whenever it can.
  uint64_t user_read_budget_bytes = 1 << 20;
  // With kernel_sums: the BPF side marks the CPUs it writes each cgroup's entry on (cg_cpus),
  // and the kernel's sum adds only those CPUs' copies, not every possible CPU's (a VM often
  // has far more possible CPUs than online ones). Off: benchmarks only (the variant without).
  bool cpu_marks = true;
  // With cpu_marks: a cgroup whose slot is marked on this many CPUs or more is moved to a fresh
  // slot (checked every slot_move_every_ticks snapshots, at most slot_moves_per_check at a
  // time). A mark is never cleared while its slot lives (clearing it would race the CPU's
  // unlocked add to its copy), so without the move an unpinned container that has run on every
  // CPU of a big node is summed over every CPU's copy for good; after it, over the CPUs it ran
  // on since. What the old slot gained after its last read is added to the cgroup's next
  // interval, and the old slot is recycled as a deleted cgroup's. 0: never moved.
  uint32_t slot_move_min_cpus = 16;
  uint64_t slot_move_every_ticks = 3000;  // 5 minutes at a 100 ms tick
  uint32_t slot_moves_per_check = 64;
  // Copy out only the cg_sched entries of cgroups that ran since the last snapshot (the BPF
  // side marks each slot it writes, bpf/common/cg_maps.bpf.h), and every live one at the first
  // snapshot, after a cgroup got or lost a slot, and every full_read_every_n_ticks-th snapshot
  // (a write that raced a mark's clear is at most that late). Off: every live one every time,
  // and the BPF side sets no marks (scale.sh's and bpf-overhead.sh's before/after); off with
  // legacy_reads.
  bool changed_only = true;
  uint32_t full_read_every_n_ticks = 10;
  // Window of the wakeup watch's wait accumulator (setWatched).
  std::chrono::nanoseconds watch_window{std::chrono::milliseconds(10)};
  // Fault injection, for tests only (production leaves it empty): consulted before each map
  // write the collector makes to clean up after a vanished cgroup -- deleting its key from
  // "cg_slots", "cg_reclaim" or "pairs", and handing its slot back (zeroing it in "cg_sched"
  // and "cg_pending", pushing it to "free_slots"), and before pointing a cgroup at a fresh slot
  // ("slot_move", slot_move_min_cpus). A non-zero errno fails that write with it, as the kernel
  // can (ENOMEM, EBUSY), without calling the kernel.
  std::function<int(std::string_view map)> cleanup_fault;
  // Fault injection, for tests only (production leaves it 0): a non-zero errno refuses the
  // kernel's summing iterator with it, without loading it, as a kernel can (EPERM on a 6.18 PVM
  // guest, session 41): the collector must fall back to userspace sums with no CPU marks.
  int kernel_sums_refusal = 0;
  // Called when a check for crowded slots (slot_move_min_cpus) is due, before any is moved: a
  // test widens the window between a slot's last read and its move with it.
  std::function<void()> before_slot_moves;
  // libbpf diagnostics go here (style rule 16); nullptr drops them. level: 0 warn,1 info,2 debug
  std::function<void(int level, const std::string& msg)> log;
};

class Collector {
 public:
  // Opens, configures, loads and attaches the programs. See the file comment for errors.
  static Result<Collector> create(const CollectorOptions& options);

  Collector(Collector&&) noexcept;
  Collector& operator=(Collector&&) noexcept;
  Collector(const Collector&) = delete;
  Collector& operator=(const Collector&) = delete;
  ~Collector();

  // Reads and resets nothing in the kernel: computes deltas against the previous call.
  // Deletes map entries of cgroups that no longer exist. Errors: only if a BPF map cannot be
  // read at all (EBADF/EFAULT); vanished cgroups and missing files are not errors.
  Result<Snapshot> snapshot();
  // Hands a snapshot back once its reader is done with it: the next snapshot() fills its
  // samples' buffer instead of allocating one (1000 containers: ~600 KB, a large-block
  // allocation at every tick that consolidated the heap's small free chunks: 6 % of colod's CPU
  // at 1000 live containers, session 42). Optional; nothing is read from `used`.
  void recycle(Snapshot&& used);

  // Wakeup watch (event-driven detection, issue 15): replaces the set of watched cgroups.
  // A cgroup is watched from the moment the BPF side has given it a slot (its tasks ran once):
  // now if it has one, else from the first snapshot() after. Nothing is watched by default,
  // and then the switch handler pays one .bss load per wait (bpf/README.md).
  // Errors: a map write the kernel refused (the previous set stays partly in force).
  Result<void> setWatched(const std::vector<WatchedCgroup>& cgroups);
  // Readable (EPOLLIN) when wakeup events are waiting: add it to an epoll set.
  [[nodiscard]] int wakeupFd() const;
  // The events posted since the last call (non-blocking; empty when none).
  Result<std::vector<WakeupEvent>> consumeWakeups();

  // The cgroups whose cpu.stat is read at every snapshot when files_every_n_ticks > 1 (the
  // policy's victims and the containers it restricts); replaces the previous set.
  void setEveryTick(std::vector<uint64_t> ids);

  // Kernel memory of colod's BPF maps in bytes, as CollectorStats::bpf_map_bytes.
  [[nodiscard]] uint64_t bpfMapBytes() const;
  // Cgroup slots of the per-cgroup maps: max_cgroups, or fewer to fit map_budget_bytes.
  [[nodiscard]] uint32_t slots() const;
  // Why slots() is below max_cgroups, for the log (empty when it is not).
  [[nodiscard]] const std::string& sizingNote() const;
  // Whether cg_sched can be summed in the kernel (CollectorOptions::kernel_sums: the iterator
  // loaded; CollectorStats::sched_kernel_reads counts the snapshots it did), and the log line
  // that says how it is read (and why not in the kernel, when not).
  [[nodiscard]] bool kernelSums() const;
  [[nodiscard]] const std::string& readNote() const;

  [[nodiscard]] CgroupMode mode() const;
  [[nodiscard]] AttachKind attachKind() const;
  // The hierarchy whose inode numbers are the ids: <root>/unified or <root> on v2-only hosts,
  // <root>/cpu (or cpu,cpuacct) on v1.
  [[nodiscard]] const std::string& hierarchyRoot() const;
  // The cg_sched slot of cgroup `id` and the CPUs marked for it (cg_cpus; empty without
  // cpu_marks): diagnostics and tests. ENOENT when the cgroup has no slot.
  struct SlotMarks {
    uint32_t slot = 0;
    std::vector<int> cpus;
  };
  [[nodiscard]] Result<SlotMarks> slotMarks(uint64_t id) const;
  // The CPU time held in cg_sched slot `slot`, summed over every CPU's copy (tests: a recycled
  // slot holds 0 until its next cgroup runs).
  [[nodiscard]] Result<uint64_t> slotOncpuNs(uint32_t slot) const;
  // Ids that currently have entries in the per-cgroup BPF maps (diagnostics and tests: a
  // deleted cgroup's id leaves this set within ~10 snapshots). Errors as snapshot().
  [[nodiscard]] Result<std::vector<uint64_t>> trackedCgroupIds() const;

  class Impl;

 private:
  explicit Collector(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

// Percentile estimation from a log2 histogram (pure, unit-tested). Slot i covers
// [2^i, 2^(i+1)) (slot 0: [0, 2)). Returns the upper bound 2^(i+1) of the slot that contains
// the q-quantile (0 < q <= 1), or 0 for an empty histogram.
uint64_t log2Percentile(const Log2Hist& hist, double q);
LatencySummary summarize(const Log2Hist& hist, uint64_t total_ns);

// Element-wise delta cur - prev modulo 2^32. The BPF buckets are u32 per CPU and so is their
// sum: they wrap, and a bucket lower than before is a wrap, not a reset. The delta is exact as
// long as fewer than 2^32 events land in one bucket between the two reads. A reset (the entry
// re-created) cannot be told from the buckets: the caller knows it and passes prev = {} (the
// collector: src/entry_delta.h). Pure.
Log2Hist histDelta(const Log2Hist& cur, const Log2Hist& prev);

}  // namespace colod::collect
