// SPDX-License-Identifier: Apache-2.0
#include "colod/collect/collector.h"

#include <bpf/btf.h>
#include <linux/btf.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <map>
#include <type_traits>
#include <unordered_map>
#include <unordered_set>

#include "bpf_util.h"
#include "cgsched.h"
#include "cgsched.skel.h"
#include "colod/cgroup/cgroup.h"
#include "colod/cgroup/parse.h"
#include "colod/collect/map_budget.h"
#include "entry_delta.h"
#include "file_cache.h"
#include "reclaim.h"
#include "reclaim.skel.h"
#include "watch.h"

// The shared headers are the ABI between the BPF programs and this file (style rule 21).
static_assert(sizeof(colod_cg_sched) == 184);
static_assert(sizeof(colod_cg_reclaim) == 128);
static_assert(sizeof(colod_pair_key) == 16);
static_assert(sizeof(colod_cg_pending) == 64);
static_assert(std::is_trivially_copyable_v<colod_cg_pending>);
static_assert(std::is_trivially_copyable_v<colod_cg_sched>);
static_assert(std::is_trivially_copyable_v<colod_cg_reclaim>);
static_assert(colod::collect::kHistSlots == COLOD_HIST_SLOTS);

namespace colod::collect {

using SchedSkel = bpf::Skeleton<cgsched, &cgsched__destroy>;
using ReclaimSkel = bpf::Skeleton<reclaim, &reclaim__destroy>;

namespace {

// Rescan the cgroup tree at least this often to notice vanished cgroups (and on unknown ids).
// A full walk of the hierarchy (the cost that grows with the number of cgroups) happens on
// an unknown id and at least every kRescanEveryTicks; every kVerifyEveryTicks only the cgroups
// present in the maps are checked (one stat each) so a removed one is pruned within ~1 s.
constexpr uint64_t kRescanEveryTicks = 100;
constexpr uint64_t kVerifyEveryTicks = 10;

struct PairKeyHash {
  std::size_t operator()(const colod_pair_key& k) const {
    return std::hash<uint64_t>()(k.victim * 0x9E3779B97F4A7C15ULL ^ k.aggressor);
  }
};
struct PairKeyEq {
  bool operator()(const colod_pair_key& a, const colod_pair_key& b) const {
    return a.victim == b.victim && a.aggressor == b.aggressor;
  }
};

using detail::roundUp8;

// u64 counters (pairs, cpu.stat) never wrap: a decrease means the entry (or the cgroup) was
// re-created.
uint64_t sub(uint64_t cur, uint64_t prev) { return cur >= prev ? cur - prev : cur; }

Psi toPsi(const cgroup::Psi& p) {
  Psi out;
  out.some = PsiLine{p.some.avg10, p.some.avg60, p.some.avg300, p.some.total_us};
  if (p.full) {
    out.full = PsiLine{p.full->avg10, p.full->avg60, p.full->avg300, p.full->total_us};
  }
  return out;
}

bool kernelHasBtfType(const char* name) {
  struct btf* btf = btf__load_vmlinux_btf();
  if (btf == nullptr) {
    return false;
  }
  const bool found = btf__find_by_name_kind(btf, name, BTF_KIND_TYPEDEF) > 0;
  btf__free(btf);
  return found;
}

}  // namespace

class Collector::Impl {
 public:
  CollectorOptions opts;
  cgroup::Hierarchies hier;
  CgroupMode mode = CgroupMode::V1Cpu;
  AttachKind attach = AttachKind::TpBtf;
  std::string id_root;  // hierarchy whose inodes are the ids
  int ncpu = 1;
  SchedSkel sched_skel;
  ReclaimSkel reclaim_skel;
  // After the skeletons: destroyed first (its ring buffer reads a map of sched_skel).
  std::optional<detail::Watch> watch;

  std::unordered_map<uint64_t, detail::SchedEntry> prev_sched;
  // cg_sched slots of cgroups pruned at the previous snapshot: zeroed and handed back to the
  // BPF side (free_slots) one interval later, when no program run can still be using them.
  std::vector<uint32_t> quarantined_slots;
  std::size_t unreleased_slots = 0;  // of those, how many failed to go back last time
  std::unordered_map<uint64_t, colod_cg_reclaim> prev_reclaim;
  // Pairs are the largest map (thousands of entries on a busy node): their state is updated in
  // place at each read instead of rebuilt, and only the pairs that moved are carried to the
  // report. `seen` is the tick of the last read that had the key; keys not seen are dropped at
  // the next verified tick (only the collector deletes pairs, so a dropped key cannot return).
  struct PairState {
    uint64_t value = 0;
    uint64_t seen = 0;
  };
  std::unordered_map<colod_pair_key, PairState, PairKeyHash, PairKeyEq> pairs_state;
  std::vector<std::pair<colod_pair_key, uint64_t>> pair_deltas;  // this tick's, reused
  // Entries of vanished cgroups whose deletion failed (rule 15b: counted, and retried at every
  // snapshot until it succeeds). Each is a key still present in its map, so each set is bounded
  // by that map's max_entries (enforced in prune*()). Their ids are known dead: they are
  // not reported and do not trigger rescans meanwhile.
  std::unordered_map<uint64_t, uint32_t> undeleted_slots;  // cg_slots id -> its slot
  std::unordered_set<uint64_t> undeleted_reclaim;          // cg_reclaim ids
  std::unordered_set<colod_pair_key, PairKeyHash, PairKeyEq> undeleted_pairs;
  struct FileState {
    cgroup::CpuStat cpu_stat;
    bool have = false;
  };
  std::unordered_map<uint64_t, FileState> prev_files;
  std::unordered_map<uint64_t, std::string> paths;  // live cgroups: id -> rel path
  // Map readers whose buffers live across snapshots (issue 17), set up in create().
  bpf::MapReader slots_reader{sizeof(uint64_t), sizeof(uint32_t)};
  bpf::MapReader sched_reader{sizeof(uint32_t), 0};
  bpf::MapReader pairs_reader{sizeof(colod_pair_key), sizeof(uint64_t)};
  bpf::MapReader reclaim_reader{sizeof(uint64_t), 0};
  std::vector<const uint8_t*> slot_values;  // cg_sched value of each slot (readSched)
  std::vector<uint64_t> drops_buf;          // one per-CPU drops counter
  detail::CgroupFileCache files{0};
  std::unordered_set<uint64_t> every_tick;  // setEveryTick()
  uint64_t map_bytes = 0;
  SlotSizing sizing;
  std::string sizing_note;
  uint64_t tick = 0;
  uint64_t last_rescan_tick = 0;
  std::chrono::steady_clock::time_point last;
  CollectorStats stats;

  Result<void> load(AttachKind kind);
  Result<void> rescan();
  void initReaders();
  [[nodiscard]] uint64_t sumMapBytes() const;
  Result<std::unordered_map<uint64_t, detail::SchedEntry>> readSched();
  void releaseSlots();
  bool cleanupWrite(std::string_view map, const std::function<int()>& write);
  bool deleteKey(std::string_view map, int fd, const void* key);
  void pruneSlot(uint64_t id, uint32_t slot, bool& released);
  void pruneReclaim(uint64_t id);
  void prunePair(const colod_pair_key& key);
  void retryDeletes();
  void readFiles(CgroupSample& s);
  Result<Snapshot> snapshot();
};

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
  COLOD_TRY_VOID(bpf::check(bpf_map__set_max_entries((*s)->maps.cg_sched, opts.max_cgroups),
                            "sizing cg_sched"),
                 "sched");
  COLOD_TRY_VOID(bpf::check(bpf_map__set_max_entries((*s)->maps.cg_slots, opts.max_cgroups),
                            "sizing cg_slots"),
                 "sched");
  COLOD_TRY_VOID(bpf::check(bpf_map__set_max_entries((*s)->maps.free_slots, opts.max_cgroups),
                            "sizing free_slots"),
                 "sched");
  COLOD_TRY_VOID(bpf::check(bpf_map__set_max_entries((*s)->maps.cg_pending, opts.max_cgroups),
                            "sizing cg_pending"),
                 "sched");
  COLOD_TRY_VOID(bpf::check(bpf_map__set_max_entries((*s)->maps.cg_watch, opts.max_cgroups),
                            "sizing cg_watch"),
                 "sched");
  COLOD_TRY_VOID(
      bpf::check(bpf_map__set_max_entries((*s)->maps.pairs, opts.max_pairs), "sizing pairs"),
      "sched");
  (*s)->rodata->watch_window_ns = static_cast<uint64_t>(opts.watch_window.count());
  auto set = [](bpf_program* p, bool on) { bpf_program__set_autoload(p, on); };
  set((*s)->progs.handle_sched_switch, btf);
  set((*s)->progs.handle_sched_switch_raw, !btf);
  set((*s)->progs.handle_cgroup_attach_task, btf);
  set((*s)->progs.handle_cgroup_attach_task_raw, !btf);
  set((*s)->progs.handle_sched_wakeup, btf && opts.wakeup_depth);
  set((*s)->progs.handle_sched_wakeup_new, btf && opts.wakeup_depth);
  set((*s)->progs.handle_sched_wakeup_raw, !btf && opts.wakeup_depth);
  set((*s)->progs.handle_sched_wakeup_new_raw, !btf && opts.wakeup_depth);
  COLOD_TRY_VOID(bpf::check(cgsched__load(s->get()), "loading sched programs"), "sched");
  COLOD_TRY_VOID(bpf::check(cgsched__attach(s->get()), "attaching sched programs"), "sched");

  ReclaimSkel r;
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
    r = std::move(*rs);
  }
  auto w = detail::Watch::create({.cg_slots = bpf_map__fd((*s)->maps.cg_slots),
                                  .cg_watch = bpf_map__fd((*s)->maps.cg_watch),
                                  .wakeups = bpf_map__fd((*s)->maps.wakeups),
                                  .watched = &(*s)->bss->watched});
  if (!w) {
    return std::move(w).error();
  }
  watch.reset();
  sched_skel = std::move(*s);
  reclaim_skel = std::move(r);
  watch.emplace(std::move(w).value());
  attach = kind;
  return {};
}

void Collector::Impl::initReaders() {
  const bool legacy = opts.legacy_reads;
  const auto cpus = static_cast<std::size_t>(ncpu);
  slots_reader = bpf::MapReader(sizeof(uint64_t), sizeof(uint32_t), legacy);
  sched_reader = bpf::MapReader(sizeof(uint32_t), roundUp8(sizeof(colod_cg_sched)) * cpus, legacy);
  pairs_reader = bpf::MapReader(sizeof(colod_pair_key), sizeof(uint64_t), legacy);
  reclaim_reader = bpf::MapReader(sizeof(uint64_t), sizeof(colod_cg_reclaim), legacy);
  drops_buf.resize(cpus);
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
// per-CPU array cg_sched, read in one pass up to the highest slot ever handed out.
Result<std::unordered_map<uint64_t, detail::SchedEntry>> Collector::Impl::readSched() {
  std::unordered_map<uint64_t, detail::SchedEntry> out;
  auto slots = slots_reader.read(bpf_map__fd(sched_skel->maps.cg_slots), opts.max_cgroups);
  if (!slots) {
    return std::move(slots).error().wrap("reading cg_slots");
  }
  if (*slots == 0) {
    sched_reader.clear();
    return out;
  }
  const uint64_t used = __atomic_load_n(&sched_skel->bss->slots_used, __ATOMIC_ACQUIRE);
  const std::size_t top = static_cast<std::size_t>(std::min<uint64_t>(used, opts.max_cgroups));
  auto vals = sched_reader.read(bpf_map__fd(sched_skel->maps.cg_sched), top);
  if (!vals) {
    return std::move(vals).error();
  }
  slot_values.assign(top, nullptr);
  for (std::size_t i = 0; i < *vals; ++i) {
    uint32_t slot = 0;
    std::memcpy(&slot, sched_reader.key(i), sizeof(slot));
    if (slot < top) {
      slot_values[slot] = sched_reader.value(i);
    }
  }
  out.reserve(*slots);
  for (std::size_t i = 0; i < *slots; ++i) {
    uint64_t id = 0;
    uint32_t slot = 0;
    std::memcpy(&id, slots_reader.key(i), sizeof(id));
    std::memcpy(&slot, slots_reader.value(i), sizeof(slot));
    // A slot above `top` was handed out after slots_used was read: next snapshot.
    if (slot < top && slot_values[slot] != nullptr) {
      out[id] = detail::SchedEntry{slot, detail::sumSchedPerCpu(slot_values[slot], ncpu)};
    }
  }
  return out;
}

// Slots quarantined at the previous snapshot: zero them (on every CPU, and their count of
// pending preemption marks) and return them to the BPF side. A failure would leak the slot, so
// it is counted and retried next time.
void Collector::Impl::releaseSlots() {
  unreleased_slots = 0;
  if (quarantined_slots.empty()) {
    return;
  }
  const std::size_t stride = roundUp8(sizeof(colod_cg_sched)) * static_cast<std::size_t>(ncpu);
  const std::vector<uint8_t> zeros(std::max(stride, sizeof(colod_cg_pending)), 0);
  const int sched_fd = bpf_map__fd(sched_skel->maps.cg_sched);
  const int pending_fd = bpf_map__fd(sched_skel->maps.cg_pending);
  const int free_fd = bpf_map__fd(sched_skel->maps.free_slots);
  std::vector<uint32_t> keep;
  for (const uint32_t slot : quarantined_slots) {
    // Zeroing twice is harmless, so a retry redoes all three; a slot must reach free_slots
    // once only (twice, two cgroups would share it), and it is the last write.
    const bool ok =
        cleanupWrite("cg_sched",
                     [&] { return bpf_map_update_elem(sched_fd, &slot, zeros.data(), BPF_ANY); }) &&
        cleanupWrite(
            "cg_pending",
            [&] { return bpf_map_update_elem(pending_fd, &slot, zeros.data(), BPF_ANY); }) &&
        cleanupWrite("free_slots", [&] { return bpf_map_update_elem(free_fd, nullptr, &slot, 0); });
    if (!ok) {
      keep.push_back(slot);
    }
  }
  quarantined_slots = std::move(keep);
  unreleased_slots = quarantined_slots.size();
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
    undeleted_reclaim.erase(id);
    ++stats.pruned_cgroups;
  } else if (undeleted_reclaim.size() < opts.max_cgroups) {
    undeleted_reclaim.insert(id);
  }
}

void Collector::Impl::prunePair(const colod_pair_key& key) {
  if (deleteKey("pairs", bpf_map__fd(sched_skel->maps.pairs), &key)) {
    undeleted_pairs.erase(key);
  } else if (undeleted_pairs.size() < opts.max_pairs) {
    undeleted_pairs.insert(key);
  }
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
  for (const auto& key :
       std::vector<colod_pair_key>(undeleted_pairs.begin(), undeleted_pairs.end())) {
    prunePair(key);
  }
}

Result<void> Collector::Impl::rescan() {
  auto all = cgroup::listCgroups(id_root, std::size_t{opts.max_cgroups} * 4);
  if (!all) {
    return std::move(all).error().wrap("rescanning cgroups");
  }
  paths.clear();
  for (auto& e : *all) {
    paths.emplace(e.id, std::move(e.rel));
  }
  // Files of cgroups gone from the tree are closed now, not when the cache evicts them.
  files.retainIf([this](uint64_t id) { return paths.contains(id); });
  last_rescan_tick = tick;
  return {};
}

void Collector::Impl::readFiles(CgroupSample& s) {
  auto note = [this](const Error& e) {
    const int err = e.errnoValue();
    if (err != ENOENT && err != ENODEV) {
      ++stats.file_read_errors;
    }
  };
  // Throttling: cpu.stat of the cgroup that holds the cpu controller (v1 cpu hierarchy; v2).
  // Its directory's inode is the id, so a cgroup recreated at the same path is told apart.
  const std::string dir = cgroup::joinRel(id_root, s.path);
  if (auto text = files.read(s.id, detail::CgroupFile::CpuStat, dir, true); text) {
    if (auto st = cgroup::parseCpuStat(*text); st && st->nr_throttled) {
      auto& prev = prev_files[s.id];
      if (prev.have) {
        Throttling t;
        t.nr_periods = sub(st->nr_periods.value_or(0), prev.cpu_stat.nr_periods.value_or(0));
        t.nr_throttled = sub(*st->nr_throttled, prev.cpu_stat.nr_throttled.value_or(0));
        t.throttled_ns = sub(st->throttled_ns.value_or(0), prev.cpu_stat.throttled_ns.value_or(0));
        s.throttling = t;
      }
      prev.cpu_stat = *st;
      prev.have = true;
    } else if (!st) {
      note(st.error());
    }
  } else {
    note(text.error());
  }
  // PSI is charged in the unified hierarchy even when limits live in v1; the cgroup exists
  // there only if the runtime created it (same relative path, another inode on hybrid hosts).
  if (hier.unified.empty()) {
    return;
  }
  const std::string udir = cgroup::joinRel(hier.unified, s.path);
  const bool same = hier.unified == id_root;
  for (const auto f : {detail::CgroupFile::CpuPressure, detail::CgroupFile::MemoryPressure}) {
    auto text = files.read(s.id, f, udir, same);
    if (!text) {
      note(text.error());
      continue;
    }
    if (auto p = cgroup::parsePsi(*text); p) {
      (f == detail::CgroupFile::CpuPressure ? s.cpu_pressure : s.memory_pressure) = toPsi(*p);
    } else {
      note(p.error());
    }
  }
}

Result<Snapshot> Collector::Impl::snapshot() {
  ++tick;
  Snapshot snap;
  snap.now = std::chrono::steady_clock::now();
  snap.interval = std::chrono::duration_cast<std::chrono::nanoseconds>(snap.now - last);
  last = snap.now;
  snap.mode = mode;

  releaseSlots();
  retryDeletes();
  // Watched cgroups that got a slot since (or a new one): bound now. A refused write is
  // counted and retried here at the next snapshot.
  if (auto r = watch->rebind(); !r) {
    ++stats.watch_write_errors;
  }
  const int pairs_fd = bpf_map__fd(sched_skel->maps.pairs);
  auto sched = readSched();
  if (!sched) {
    return std::move(sched).error().wrap("reading cg_sched");
  }
  auto pairs_n = pairs_reader.read(pairs_fd, opts.max_pairs);
  if (!pairs_n) {
    return std::move(pairs_n).error().wrap("reading pairs");
  }
  std::size_t reclaim_n = 0;
  if (reclaim_skel) {
    auto r = reclaim_reader.read(bpf_map__fd(reclaim_skel->maps.cg_reclaim), opts.max_cgroups);
    if (!r) {
      return std::move(r).error().wrap("reading cg_reclaim");
    }
    reclaim_n = *r;
  }

  // Entries whose deletion failed (and failed again just now) belong to dead cgroups: not
  // reported, and not unknown ids that would trigger a rescan.
  std::unordered_map<uint64_t, detail::SchedEntry>& cur_sched = *sched;
  for (const auto& [id, slot] : undeleted_slots) {
    cur_sched.erase(id);
  }
  std::unordered_map<uint64_t, colod_cg_reclaim> cur_reclaim;
  cur_reclaim.reserve(reclaim_n);
  for (std::size_t i = 0; i < reclaim_n; ++i) {
    uint64_t id = 0;
    std::memcpy(&id, reclaim_reader.key(i), sizeof(id));
    if (undeleted_reclaim.contains(id)) {
      continue;
    }
    colod_cg_reclaim v{};
    std::memcpy(&v, reclaim_reader.value(i), sizeof(v));
    cur_reclaim[id] = v;
  }
  pair_deltas.clear();
  for (std::size_t i = 0; i < *pairs_n; ++i) {
    colod_pair_key k{};
    uint64_t v = 0;
    std::memcpy(&k, pairs_reader.key(i), sizeof(k));
    std::memcpy(&v, pairs_reader.value(i), sizeof(v));
    if (undeleted_pairs.contains(k)) {
      continue;
    }
    auto [it, inserted] = pairs_state.try_emplace(k);
    const uint64_t d = inserted ? v : sub(v, it->second.value);
    it->second = PairState{v, tick};
    if (d != 0) {
      pair_deltas.emplace_back(k, d);
    }
  }

  // Resolve ids to paths; an unknown id means a new cgroup (rescan) or a dead one (prune).
  bool unknown = false;
  for (const auto& [id, v] : cur_sched) {
    unknown = unknown || !paths.contains(id);
  }
  for (const auto& [id, v] : cur_reclaim) {
    unknown = unknown || !paths.contains(id);
  }
  bool fresh = false;
  if (unknown || tick - last_rescan_tick >= kRescanEveryTicks || paths.empty()) {
    if (auto r = rescan(); r) {
      fresh = true;
    }
  } else if (tick % kVerifyEveryTicks == 0) {
    // The cgroup dir's inode is its id: a missing dir or a different inode at the same path
    // means the cgroup is gone (possibly recreated under the same name, with a new id).
    auto verify = [&](uint64_t id) {
      auto p = paths.find(id);
      if (p == paths.end()) {
        return;
      }
      auto cur = cgroup::cgroupId(cgroup::joinRel(id_root, p->second));
      if (!cur || *cur != id) {
        paths.erase(p);
      }
    };
    for (const auto& [id, v] : cur_sched) {
      verify(id);
    }
    for (const auto& [id, v] : cur_reclaim) {
      verify(id);
    }
    fresh = true;  // paths now holds only verified-live ids for everything in the maps
  }
  if (fresh) {
    // Only ids absent from a rescan done after the map read are dead: delete their entries
    // so deleted cgroups leave nothing behind in the kernel (failed deletions are retried at
    // the next snapshot: retryDeletes).
    bool released = false;
    for (auto it = cur_sched.begin(); it != cur_sched.end();) {
      if (!paths.contains(it->first)) {
        pruneSlot(it->first, it->second.slot, released);
        prev_sched.erase(it->first);
        prev_files.erase(it->first);
        files.erase(it->first);
        it = cur_sched.erase(it);
      } else {
        ++it;
      }
    }
    if (released) {
      __atomic_fetch_add(&sched_skel->bss->attach_gen, 1, __ATOMIC_SEQ_CST);
    }
    for (auto it = cur_reclaim.begin(); it != cur_reclaim.end();) {
      if (!paths.contains(it->first)) {
        pruneReclaim(it->first);
        prev_reclaim.erase(it->first);
        files.erase(it->first);
        it = cur_reclaim.erase(it);
      } else {
        ++it;
      }
    }
    auto dead = [&](const colod_pair_key& k) {
      return !paths.contains(k.victim) || !paths.contains(k.aggressor);
    };
    for (auto it = pairs_state.begin(); it != pairs_state.end();) {
      if (it->second.seen != tick) {
        it = pairs_state.erase(it);  // gone from the map
      } else if (dead(it->first)) {
        prunePair(it->first);
        it = pairs_state.erase(it);
      } else {
        ++it;
      }
    }
    std::erase_if(pair_deltas, [&](const auto& e) { return dead(e.first); });
  } else {
    for (const auto& [id, v] : cur_sched) {
      stats.unresolved_ids += paths.contains(id) ? 0 : 1;
    }
  }

  std::map<uint64_t, CgroupSample> out;
  auto sample = [&](uint64_t id) -> CgroupSample& {
    auto [it, inserted] = out.try_emplace(id);
    if (inserted) {
      it->second.id = id;
      auto p = paths.find(id);
      it->second.path = p == paths.end() ? std::string() : p->second;
    }
    return it->second;
  };
  for (const auto& [id, cur] : cur_sched) {
    const auto p = prev_sched.find(id);
    const colod_cg_sched d = detail::schedDelta(cur, p == prev_sched.end() ? nullptr : &p->second);
    if (d.count == 0 && d.oncpu_ns == 0 && d.invol == 0 && d.wakeups == 0) {
      continue;  // idle this interval
    }
    CgroupSample& s = sample(id);
    s.runq_hist = detail::toHist(d.hist);
    s.runq = summarize(s.runq_hist, d.total_ns);
    s.runq_stale = d.stale;
    s.involuntary_switches = d.invol;
    s.preempted_wait_ns = d.preempt_wait_ns;
    s.preempted_waits = d.preempt_waits;
    s.oncpu_ns = d.oncpu_ns;
    s.wakeups = d.wakeups;
    s.runq_depth_sum = d.depth_sum;
    // Preemptions by the cgroup's own tasks are counted in its slot, not in the pairs hash
    // (cheaper at every such switch): reported as the pair victim == aggressor, as before.
    if (d.self_preempt > 0) {
      s.preempted_by.push_back(Aggressor{id, s.path, d.self_preempt});
    }
  }
  for (const auto& [id, cur] : cur_reclaim) {
    const auto p = prev_reclaim.find(id);
    const colod_cg_reclaim d =
        detail::reclaimDelta(cur, p == prev_reclaim.end() ? nullptr : &p->second);
    if (d.count == 0) {
      continue;
    }
    CgroupSample& s = sample(id);
    s.reclaim_count = d.count;
    s.reclaim_stall_ns = d.total_ns;
    s.reclaim_pages = d.pages;
    s.reclaim_hist = detail::toHist(d.hist);
  }
  for (const auto& [k, d] : pair_deltas) {
    CgroupSample& s = sample(k.victim);
    auto p = paths.find(k.aggressor);
    s.preempted_by.push_back(
        Aggressor{k.aggressor, p == paths.end() ? std::string() : p->second, d});
  }
  if (opts.read_files) {
    files.beginTick();
    const uint64_t every = std::max<uint32_t>(opts.files_every_n_ticks, 1);
    for (auto& [id, s] : out) {
      // The slower cadence is spread by id, so each tick reads about 1/every of the rest.
      const bool due = every == 1 || every_tick.contains(id) || (tick + id) % every == 0;
      if (!s.path.empty() && due) {
        readFiles(s);
      }
    }
  }
  snap.cgroups.reserve(out.size());
  for (auto& [id, s] : out) {
    std::sort(s.preempted_by.begin(), s.preempted_by.end(),
              [](const Aggressor& a, const Aggressor& b) { return a.preemptions > b.preemptions; });
    snap.cgroups.push_back(std::move(s));
  }
  std::sort(snap.cgroups.begin(), snap.cgroups.end(),
            [](const CgroupSample& a, const CgroupSample& b) { return a.path < b.path; });

  // Drops: per-CPU counters in both programs, summed. Lock skips (EBUSY) are kept apart:
  // they say nothing about the maps' size (bpf/colod_common.h).
  uint64_t drops = 0;
  uint64_t lock_skips = 0;
  uint64_t drop_bytes = 0;
  auto sumDrops = [&](int fd) {
    for (uint32_t i = 0; i < COLOD_DROP_MAX; ++i) {
      if (bpf_map_lookup_elem(fd, &i, drops_buf.data()) == 0) {
        drop_bytes += sizeof(i) + drops_buf.size() * sizeof(uint64_t);
        uint64_t& into = i == COLOD_DROP_BUSY ? lock_skips : drops;
        for (uint64_t x : drops_buf) {
          into += x;
        }
      }
    }
  };
  sumDrops(bpf_map__fd(sched_skel->maps.drops));
  if (reclaim_skel) {
    sumDrops(bpf_map__fd(reclaim_skel->maps.drops));
  }
  stats.map_drops = drops;
  stats.map_lock_skips = lock_skips;
  stats.map_deletes_pending =
      undeleted_slots.size() + undeleted_reclaim.size() + undeleted_pairs.size() + unreleased_slots;
  stats.read_bytes_last_tick = slots_reader.lastReadBytes() + sched_reader.lastReadBytes() +
                               pairs_reader.lastReadBytes() +
                               (reclaim_skel ? reclaim_reader.lastReadBytes() : 0) + drop_bytes;
  stats.read_buffer_bytes = slots_reader.bufferBytes() + sched_reader.bufferBytes() +
                            pairs_reader.bufferBytes() + reclaim_reader.bufferBytes();
  stats.bpf_map_bytes = map_bytes;
  stats.cgroup_file_opens = files.opens();
  stats.cgroup_files_open = files.openFiles();
  ++stats.snapshots;
  snap.stats = stats;

  prev_sched = std::move(cur_sched);
  prev_reclaim = std::move(cur_reclaim);
  return snap;
}

Result<Collector> Collector::create(const CollectorOptions& options) {
  auto impl = std::make_unique<Impl>();
  impl->opts = options;
  if (impl->opts.max_cgroups == 0 || impl->opts.max_pairs == 0) {
    return COLOD_ERR(EINVAL, "max_cgroups and max_pairs must be > 0");
  }
  if (impl->opts.watch_window.count() <= 0) {
    return COLOD_ERR(EINVAL, "watch_window must be > 0");
  }
  if (options.log) {
    bpf::setLibbpfLog(options.log);
  }
  if (::access("/sys/kernel/btf/vmlinux", R_OK) != 0) {
    return COLOD_ERR(ENOENT,
                     "kernel has no BTF (/sys/kernel/btf/vmlinux): CO-RE programs "
                     "cannot load");
  }
  auto hier = cgroup::probe(options.cgroup_root);
  if (!hier) {
    return std::move(hier).error().wrap("probing cgroup layout");
  }
  impl->hier = *hier;
  if (options.force_mode) {
    impl->mode = *options.force_mode;
  } else {
    // v1/hybrid hosts keep the cpu controller (and so the containers' cgroups) on v1, and
    // every task's cgroup2 id is the unified root there: key by the cpu controller's cgroup.
    impl->mode = (hier->layout == cgroup::Layout::V2 || hier->cpu.empty()) ? CgroupMode::V2
                                                                           : CgroupMode::V1Cpu;
  }
  impl->id_root = impl->mode == CgroupMode::V2 ? hier->unified : hier->cpu;
  if (impl->id_root.empty()) {
    return COLOD_ERR(ENOENT, "no ", toString(impl->mode), " hierarchy under ", options.cgroup_root);
  }
  const int ncpu = libbpf_num_possible_cpus();
  if (ncpu <= 0) {
    return COLOD_ERR(ncpu < 0 ? -ncpu : EINVAL, "counting possible CPUs");
  }
  impl->ncpu = ncpu;
  // The per-CPU maps grow with the possible CPUs: as many slots as fit the budget.
  impl->sizing = sizeSlots(slotCost(options.reclaim), impl->opts.max_cgroups,
                           static_cast<uint32_t>(ncpu), options.map_budget_bytes, kMinSlots);
  impl->opts.max_cgroups = impl->sizing.slots;
  impl->sizing_note = describeSizing(impl->sizing, options.max_cgroups, static_cast<uint32_t>(ncpu),
                                     options.map_budget_bytes);
  impl->initReaders();
  std::size_t max_open = 0;
  if (options.max_open_files) {
    max_open = *options.max_open_files;
  } else if (rlimit rl{}; ::getrlimit(RLIMIT_NOFILE, &rl) == 0) {
    // Half the soft limit: the rest stays for the daemon's sockets, BPF objects and journal.
    max_open = rl.rlim_cur == RLIM_INFINITY ? std::size_t{1} << 20 : rl.rlim_cur / 2;
  }
  impl->files = detail::CgroupFileCache(options.legacy_reads ? 0 : max_open);

  // tp_btf when the kernel has the tracepoint's BTF type; raw_tp otherwise or on load error.
  AttachKind kind = (!options.force_raw_tp && kernelHasBtfType("btf_trace_sched_switch"))
                        ? AttachKind::TpBtf
                        : AttachKind::RawTp;
  auto r = impl->load(kind);
  if (!r && kind == AttachKind::TpBtf && r.error().errnoValue() != EPERM) {
    r = impl->load(AttachKind::RawTp);
  }
  if (!r) {
    return std::move(r).error();
  }
  impl->map_bytes = impl->sumMapBytes();
  impl->last = std::chrono::steady_clock::now();
  if (auto s = impl->rescan(); !s) {
    return std::move(s).error();
  }
  return Collector(std::move(impl));
}

Collector::Collector(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Collector::Collector(Collector&&) noexcept = default;
Collector& Collector::operator=(Collector&&) noexcept = default;
Collector::~Collector() = default;

Result<Snapshot> Collector::snapshot() { return impl_->snapshot(); }
void Collector::setEveryTick(std::vector<uint64_t> ids) {
  impl_->every_tick = std::unordered_set<uint64_t>(ids.begin(), ids.end());
}
uint64_t Collector::bpfMapBytes() const { return impl_->map_bytes; }

uint32_t Collector::slots() const { return impl_->sizing.slots; }

const std::string& Collector::sizingNote() const { return impl_->sizing_note; }
Result<void> Collector::setWatched(const std::vector<WatchedCgroup>& cgroups) {
  return impl_->watch->set(cgroups);
}
int Collector::wakeupFd() const { return impl_->watch->fd(); }
Result<std::vector<WakeupEvent>> Collector::consumeWakeups() { return impl_->watch->consume(); }
CgroupMode Collector::mode() const { return impl_->mode; }
AttachKind Collector::attachKind() const { return impl_->attach; }
const std::string& Collector::hierarchyRoot() const { return impl_->id_root; }

Result<std::vector<uint64_t>> Collector::trackedCgroupIds() const {
  // Diagnostics: local readers, so the snapshot's buffers and counters are left alone.
  std::vector<uint64_t> ids;
  auto add = [&](int fd, std::size_t value_stride) -> Result<void> {
    bpf::MapReader r(sizeof(uint64_t), value_stride);
    auto n = r.read(fd, impl_->opts.max_cgroups);
    if (!n) {
      return std::move(n).error();
    }
    for (std::size_t i = 0; i < *n; ++i) {
      uint64_t id = 0;
      std::memcpy(&id, r.key(i), sizeof(id));
      ids.push_back(id);
    }
    return {};
  };
  COLOD_TRY_VOID(add(bpf_map__fd(impl_->sched_skel->maps.cg_slots), sizeof(uint32_t)),
                 "reading cg_slots");
  if (impl_->reclaim_skel) {
    COLOD_TRY_VOID(add(bpf_map__fd(impl_->reclaim_skel->maps.cg_reclaim),
                       roundUp8(sizeof(colod_cg_reclaim)) * static_cast<std::size_t>(impl_->ncpu)),
                   "reading cg_reclaim");
  }
  std::sort(ids.begin(), ids.end());
  ids.erase(std::unique(ids.begin(), ids.end()), ids.end());
  return ids;
}

}  // namespace colod::collect
