// SPDX-License-Identifier: Apache-2.0
// The collector's state, shared by its two parts: collector.cpp (snapshot, cgroup tree and
// files, the public API) and collector_maps.cpp (loading the BPF objects, reading their maps,
// and cleaning up after vanished cgroups). Private to colod::collect.
#pragma once

#include <array>
#include <bit>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <unordered_set>
#include <utility>
#include <vector>

#include "bpf_util.h"
#include "cgsched.h"
#include "cgsched.skel.h"
#include "colod/cgroup/cgroup.h"
#include "colod/cgroup/parse.h"
#include "colod/collect/collector.h"
#include "colod/collect/map_budget.h"
#include "entry_delta.h"
#include "file_cache.h"
#include "pair_deltas.h"
#include "reclaim.h"
#include "reclaim.skel.h"
#include "sched_map_pool.h"
#include "sched_sums.h"
#include "watch.h"

namespace colod::collect {

// A slot's CPU marks (cg_cpus, bpf/cgsched.h): whether CPU c is marked, and how many are.
inline bool markedCpu(const colod_cg_cpus& m, uint32_t c) {
  return c < COLOD_CPU_MARK_WORDS * 64 && ((m.w[c / 64] >> (c % 64)) & 1U) != 0;
}
inline uint32_t markedCount(const colod_cg_cpus& m) {
  uint32_t n = 0;
  for (const uint64_t w : m.w) {
    n += static_cast<uint32_t>(std::popcount(w));
  }
  return n;
}

// Owners held in a class shared by two files: bpftool's destroy functions are static inline
// (internal linkage), so they cannot be template arguments here; the pointer is set in load().
using SchedSkel = std::unique_ptr<cgsched, void (*)(cgsched*)>;
using ReclaimSkel = std::unique_ptr<reclaim, void (*)(reclaim*)>;

class Collector::Impl {
 public:
  CollectorOptions opts;
  cgroup::Hierarchies hier;
  CgroupMode mode = CgroupMode::V1Cpu;
  AttachKind attach = AttachKind::TpBtf;
  std::string id_root;  // hierarchy whose inodes are the ids
  int ncpu = 1;         // possible CPUs: the per-CPU maps' copies
  // cg_sched's copies of each slot (the present CPUs, cpu_copies.h): its index is
  // cpu x opts.max_cgroups + slot (bpf/common/cg_maps.bpf.h).
  uint32_t sched_cpus = 1;
  SchedSkel sched_skel{nullptr, nullptr};
  ReclaimSkel reclaim_skel{nullptr, nullptr};
  // The summing iterator on sched_skel's maps (destroyed before them); empty: userspace sums.
  std::optional<detail::KernelSums> sums;
  bool cpu_marks_on = false;  // cgsched writes the CPU marks (cpuMarks())
  std::string read_note;
  // After the skeletons: destroyed first (its ring buffer reads a map of sched_skel).
  std::optional<detail::Watch> watch;

  std::unordered_map<uint64_t, detail::SchedEntry> prev_sched;
  // A recycled snapshot's samples (Collector::recycle): the next snapshot's buffer.
  std::vector<CgroupSample> spare_cgroups;
  // cg_diag's last read of each cgroup reported (opts.wakeup_depth only), and its buffer.
  std::unordered_map<uint64_t, detail::DiagEntry> prev_diag;
  std::vector<uint8_t> diag_buf;
  detail::SchedMapPool sched_maps;  // the per-tick maps' buckets and nodes, reused
  // What readSched() read: every live cgroup's entry (all), or only those of cgroups whose slot
  // was marked changed, the rest standing as prev_sched holds them.
  struct SchedRead {
    std::unordered_map<uint64_t, detail::SchedEntry> entries;
    bool all = true;
    uint64_t slots_gen = 0;  // the BPF side's slots_gen when the read began
  };
  // cg_dirty's change marks, mapped (bpf/common/cg_maps.bpf.h); empty: every slot every time.
  bpf::MappedWords dirty;
  std::vector<uint32_t> changed_slots;   // reused: the marks taken by this snapshot
  std::vector<uint64_t> slot_ids;        // slot -> cgroup id at the last full read (0: none)
  std::vector<uint8_t> slot_value;       // reused: one run of slots' CPU copies
  std::vector<bpf::IndexRun> slot_runs;  // reused: the runs the changed slots are read in
  std::vector<uint32_t> run_keys;        // reused: a batch read's keys
  bool batch_reads = true;               // the kernel reads array ranges in one call
  bpf::MapGeneration sums_slots_gen;     // cg_slots at the kernel sums' last full read
  std::optional<uint64_t> last_full_sched_tick;
  uint64_t sched_read_bytes = 0;  // what the last readSched() copied out
  // The two pairs maps (bpf/cgsched.bpf.c): `pairs`, read at the files' cadence, and
  // `named_pairs`, the pairs of the cgroups named every tick (cg_named), drained at every
  // snapshot (MapReader::drain: it holds only the pairs since the last one).
  struct PairMap {
    const char* name = "";
    bool drain = false;  // read and deleted at every read (named_pairs)
    int fd = -1;
    __u64* full = nullptr;  // named_pairs_full (.bss): cleared when a drain finds room
    uint32_t max_entries = 0;
    uint64_t aged_at = 0;    // tick of the last look for idle pairs (agePairs)
    detail::PairDeltas deltas;
    detail::PairKeySet undeleted;  // deletions that failed, retried at every snapshot
    bpf::MapReader reader{sizeof(colod_pair_key), sizeof(uint64_t)};
  };
  std::array<PairMap, 2> pair_maps;  // kRestPairs, kNamedPairs
  static constexpr std::size_t kRestPairs = 0;
  static constexpr std::size_t kNamedPairs = 1;
  std::vector<colod_pair_key> idle_pairs;                         // reused (agePairs)
  std::unordered_map<uint64_t, uint32_t> sample_index;            // reused: id -> snapshot sample
  std::vector<uint32_t> sample_order;                             // reused: the samples by path
  uint64_t pairs_read_bytes = 0;  // what the last readPairs() copied out
  // cg_named's marks, mapped: nonzero for the slots of the cgroups named every tick.
  bpf::MappedWords named_marks;
  std::vector<uint32_t> named_slots;  // the slots marked now
  // The marks' last sync (syncNamedSlots), at slots_gen + attach_gen (both only grow, so the
  // sum stands still only while both do); invalidated by setEveryTick().
  bpf::MapGeneration named_gen;
  // cg_sched slots of cgroups pruned at the previous snapshot: zeroed and handed back to the
  // BPF side (free_slots) one interval later, when no program run can still be using them.
  std::vector<uint32_t> quarantined_slots;
  // Cgroups moved to a fresh slot at the last snapshot (slot_moves.cpp): id -> the old slot,
  // read once more and quarantined at the next snapshot.
  std::unordered_map<uint64_t, uint32_t> moved_slots;
  std::size_t unreleased_slots = 0;  // of those, how many failed to go back last time
  std::unordered_map<uint64_t, colod_cg_reclaim> prev_reclaim;
  // The behind map is drained at every snapshot while a watch is set (readBehind): what a
  // drain returns is the waits since the last one. After the watch ends it is drained
  // `behind_drains_left` more times, so waits recorded as it ended are not read at the next.
  uint64_t behind_read_bytes = 0;  // what the last snapshot's drain copied
  int behind_drains_left = 0;
  // Entries of vanished cgroups whose deletion failed (rule 15b: counted, and retried at every
  // snapshot until it succeeds). Each is a key still present in its map, so each set is bounded
  // by that map's max_entries (enforced in prune*()). Their ids are known dead: they are
  // not reported and do not trigger rescans meanwhile.
  std::unordered_map<uint64_t, uint32_t> undeleted_slots;  // cg_slots id -> its slot
  std::unordered_set<uint64_t> undeleted_reclaim;          // cg_reclaim ids
  struct FileState {
    cgroup::CpuStat cpu_stat;
    bool have = false;
    // Whether a CFS quota is set, read at the pressure files' cadence (unknown: treated as
    // set).
    std::optional<bool> quota;
    // The cgroup had no quota file at the last look (no cpu controller, or the v2 root): it
    // cannot be throttled, and its cpu.stat is not read while that lasts (the file cache
    // answers the quota file's absence without a syscall and looks again after a minute).
    bool no_quota_file = false;
  };
  std::unordered_map<uint64_t, FileState> prev_files;
  // A usage counter as read, and the file it came from.
  struct Usage {
    detail::CgroupFile file;
    uint64_t ns;
  };
  // A cgroup whose CPU time is read from its usage counter: one seen running long slices
  // (CgroupSample::oncpu_ns), until snapshot `until`, pushed back at each such slice.
  struct UsageState {
    uint64_t until = 0;
    std::optional<Usage> last;  // the counter as read at snapshot `last_tick`
    uint64_t last_tick = 0;
    // The cgroup had no cpuacct directory at this snapshot: the unified counter is read without
    // looking for it again for kUsageTicks (the file cache remembers a missing file, not a
    // missing directory: without this, one failed open a tick).
    std::optional<uint64_t> no_cpuacct_since;
  };
  std::unordered_map<uint64_t, UsageState> usage;
  std::unordered_map<uint64_t, std::string> paths;  // live cgroups: id -> rel path
  // Map readers whose buffers live across snapshots (issue 17), set up in create().
  bpf::MapReader slots_reader{sizeof(uint64_t), sizeof(uint32_t)};
  bpf::MapReader pairs_reader{sizeof(colod_pair_key), sizeof(uint64_t)};
  bpf::MapReader behind_reader{sizeof(colod_pair_key), sizeof(colod_behind)};
  bpf::MapReader reclaim_reader{sizeof(uint64_t), 0};
  // cg_slots and cg_reclaim change rarely (a new cgroup, a reclaim episode): walked again only
  // when their BPF generation counters moved or a deletion here changed them.
  bpf::MapGeneration slots_gen;
  bpf::MapGeneration reclaim_gen;
  // Every live slot's CPU copies at a full read (readSchedCopies' layout), kept across reads.
  std::vector<uint8_t> sched_copies;
  std::vector<uint8_t> cpu_values;  // reused: one CPU's region of a run
  detail::CgroupFileCache files{0};
  std::unordered_set<uint64_t> every_tick;  // setEveryTick()
  uint64_t map_bytes = 0;
  SlotSizing sizing;
  std::string sizing_note;
  uint64_t tick = 0;
  uint64_t last_rescan_tick = 0;
  uint64_t gone_lost_seen = 0;  // sched_skel->bss->gone_lost at the last drain
  std::chrono::steady_clock::time_point last;
  CollectorStats stats;

  Result<void> load(AttachKind kind);
  Result<void> rescan();
  void initReaders();
  [[nodiscard]] uint64_t sumMapBytes() const;
  Result<SchedRead> readSched();
  [[nodiscard]] bool kernelSumsPay() const;
  // cgsched marks the CPUs each slot is written on (cg_cpus) for the kernel's sum to add only
  // those copies: when the kernel may sum and the marks hold every possible CPU.
  [[nodiscard]] bool cpuMarksWanted() const {
    return opts.cpu_marks && opts.kernel_sums && !opts.legacy_reads &&
           sched_cpus <= COLOD_CPU_MARK_WORDS * 64;
  }
  // The marks are written: wanted, and the summing iterator loaded (only then does cgsched get
  // mark_cpus). A kernel that refuses the iterator (EPERM on a 6.18 PVM guest, session 41) has
  // no marks, and a reader trusting them skipped every CPU copy: a recycled slot kept the last
  // cgroup's counts, and a moved cgroup's old slot was never read.
  [[nodiscard]] bool cpuMarks() const { return cpu_marks_on; }
  // Only the slots marked changed, from userspace (slot_ids names them).
  Result<bool> readChangedSlots(detail::SchedMap& out);
  Result<void> readSchedCopies(bpf::IndexRun run, std::vector<uint8_t>& out);
  // Reads a hash map through `reader` only when `gen` (its BPF generation counter in .bss)
  // moved or `seen` was invalidated; otherwise the last read stands. Returns the entry count.
  Result<std::size_t> readIfChanged(bpf::MapReader& reader,
                                    bpf::MapGeneration& seen,
                                    const __u64* gen,
                                    int fd);
  void releaseSlots();
  // slot_moves.cpp: moves the cgroups of `live` (id -> entry) whose slots are marked on
  // slot_move_min_cpus CPUs or more to fresh slots, when the check is due.
  void moveCrowdedSlots(const std::unordered_map<uint64_t, detail::SchedEntry>& live);
  std::optional<uint32_t> takeFreeSlot();
  // What each moved cgroup's old slot gained since its last read (prev_sched must still be the
  // last snapshot's), for its next delta; called once the snapshot can no longer fail. The old
  // slots are left for quarantineMovedSlots().
  std::unordered_map<uint64_t, colod_cg_sched> readMovedTails();
  void quarantineMovedSlots();
  std::optional<colod_cg_diag> readDiag(uint32_t slot);
  bool cleanupWrite(std::string_view map, const std::function<int()>& write);
  bool deleteKey(std::string_view map, int fd, const void* key);
  void pruneSlot(uint64_t id, uint32_t slot, bool& released);
  void pruneReclaim(uint64_t id);
  void prunePair(PairMap& m, const colod_pair_key& key);
  // The pairs maps into their PairDeltas: named_pairs drained at every snapshot, pairs walked
  // whole when the files' cadence comes round.
  Result<void> readPairs();
  Result<void> readPairMap(PairMap& m);
  // Deletes m's pairs idle for opts.pair_idle_ticks (right after a whole walk of m).
  void agePairs(PairMap& m);
  // Marks in cg_named the slots of the cgroups named every tick (cur: id -> entry, every live
  // one), and clears the marks of the others.
  void syncNamedSlots(const std::unordered_map<uint64_t, detail::SchedEntry>& cur,
                      uint64_t read_slots_gen);
  Result<void> readBehind();
  void retryDeletes();
  // cpu.stat when `stat_due` (and a quota is set, or no baseline was read yet); the quota, and
  // the PSI files (of `named` cgroups only with pressure_of_named_only), when `slow_due`; the
  // usage counter when `use` is not null (creditUsage).
  void readFiles(CgroupSample& s, bool named, bool stat_due, bool slow_due, UsageState* use);
  // A v1 cgroup's usage counter: cpuacct.usage, or the unified hierarchy's cpu.stat when the
  // cgroup is not in a cpuacct hierarchy. nullopt when neither can be read.
  std::optional<Usage> readV1Usage(const CgroupSample& s, UsageState& use);
  // Records the usage counter read now; when the previous one was read at the previous
  // snapshot, the difference replaces the sample's oncpu_ns.
  void creditUsage(CgroupSample& s, UsageState& use, Usage now) const;
  // Takes the removed cgroups' ids off the BPF queue and forgets their paths. Returns the ids
  // whose path it forgot; `lost` is set when removals did not fit in the queue.
  std::vector<uint64_t> drainRemovals(bool& lost);
  Result<Snapshot> snapshot();
};

}  // namespace colod::collect
