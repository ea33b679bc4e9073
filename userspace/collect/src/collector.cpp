// SPDX-License-Identifier: Apache-2.0
#include "colod/collect/collector.h"

#include <bpf/btf.h>
#include <linux/btf.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <map>
#include <type_traits>
#include <unordered_map>
#include <unordered_set>

#include "bpf_util.h"
#include "colod/cgroup/cgroup.h"
#include "colod/cgroup/parse.h"
#include "cgsched.h"
#include "reclaim.h"
#include "reclaim.skel.h"
#include "cgsched.skel.h"

// The shared headers are the ABI between the BPF programs and this file (style rule 21).
static_assert(sizeof(colod_cg_sched) == 184);
static_assert(sizeof(colod_cg_reclaim) == 128);
static_assert(sizeof(colod_pair_key) == 16);
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

// Per-CPU values are laid out value_size rounded up to 8, once per possible CPU.
constexpr std::size_t roundUp8(std::size_t n) {
  return (n + 7) & ~std::size_t{7};
}

template <typename V>
V sumPerCpu(const uint8_t* base, int ncpu);

template <>
colod_cg_sched sumPerCpu<colod_cg_sched>(const uint8_t* base, int ncpu) {
  colod_cg_sched s{};
  for (int c = 0; c < ncpu; ++c) {
    colod_cg_sched v{};
    std::memcpy(&v, base + static_cast<std::size_t>(c) * roundUp8(sizeof(v)), sizeof(v));
    for (std::size_t i = 0; i < kHistSlots; ++i) {
      s.hist[i] += v.hist[i];
    }
    s.count += v.count;
    s.total_ns += v.total_ns;
    s.stale += v.stale;
    s.invol += v.invol;
    s.self_preempt += v.self_preempt;
    s.preempt_wait_ns += v.preempt_wait_ns;
    s.oncpu_ns += v.oncpu_ns;
    s.wakeups += v.wakeups;
    s.depth_sum += v.depth_sum;
  }
  return s;
}

template <>
colod_cg_reclaim sumPerCpu<colod_cg_reclaim>(const uint8_t* base, int ncpu) {
  colod_cg_reclaim s{};
  for (int c = 0; c < ncpu; ++c) {
    colod_cg_reclaim v{};
    std::memcpy(&v, base + static_cast<std::size_t>(c) * roundUp8(sizeof(v)), sizeof(v));
    for (std::size_t i = 0; i < kHistSlots; ++i) {
      s.hist[i] += v.hist[i];
    }
    s.count += v.count;
    s.total_ns += v.total_ns;
    s.pages += v.pages;
  }
  return s;
}

uint64_t sub(uint64_t cur, uint64_t prev) {
  return cur >= prev ? cur - prev : cur;  // a decrease means the entry was re-created
}

Log2Hist toHist(const uint32_t (&h)[COLOD_HIST_SLOTS]) {
  Log2Hist out{};
  std::copy(std::begin(h), std::end(h), out.begin());
  return out;
}

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

  std::unordered_map<uint64_t, colod_cg_sched> prev_sched;
  // cg_sched slots of cgroups pruned at the previous snapshot: zeroed and handed back to the
  // BPF side (free_slots) one interval later, when no program run can still be using them.
  std::vector<uint32_t> quarantined_slots;
  std::unordered_map<uint64_t, colod_cg_reclaim> prev_reclaim;
  std::unordered_map<colod_pair_key, uint64_t, PairKeyHash, PairKeyEq> prev_pairs;
  struct FileState {
    cgroup::CpuStat cpu_stat;
    bool have = false;
  };
  std::unordered_map<uint64_t, FileState> prev_files;
  std::unordered_map<uint64_t, std::string> paths;  // live cgroups: id -> rel path
  uint64_t tick = 0;
  uint64_t last_rescan_tick = 0;
  std::chrono::steady_clock::time_point last;
  CollectorStats stats;

  Result<void> load(AttachKind kind);
  Result<void> rescan();
  Result<bpf::MapDump> readSchedSlots() const;
  Result<std::unordered_map<uint64_t, colod_cg_sched>> readSched() const;
  void releaseSlots();
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
  // cg_sched is an array of slots, cg_slots maps ids to them, free_slots recycles them: all
  // three hold max_cgroups (bpf/cgsched.bpf.c).
  (*s)->rodata->max_slots = opts.max_cgroups;
  COLOD_TRY_VOID(bpf::check(bpf_map__set_max_entries((*s)->maps.cg_sched, opts.max_cgroups),
                            "sizing cg_sched"), "sched");
  COLOD_TRY_VOID(bpf::check(bpf_map__set_max_entries((*s)->maps.cg_slots, opts.max_cgroups),
                            "sizing cg_slots"), "sched");
  COLOD_TRY_VOID(bpf::check(bpf_map__set_max_entries((*s)->maps.free_slots, opts.max_cgroups),
                            "sizing free_slots"), "sched");
  COLOD_TRY_VOID(bpf::check(bpf_map__set_max_entries((*s)->maps.pairs, opts.max_pairs),
                            "sizing pairs"), "sched");
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
    auto rs = bpf::openSkeleton<reclaim, &reclaim__destroy>(&reclaim__open,
                                                                    "reclaim");
    if (!rs) {
      return std::move(rs).error();
    }
    (*rs)->rodata->cg_mode = cg_mode;
    COLOD_TRY_VOID(bpf::check(bpf_map__set_max_entries((*rs)->maps.cg_reclaim,
                                                       opts.max_cgroups),
                              "sizing cg_reclaim"), "reclaim");
    set((*rs)->progs.handle_direct_reclaim_begin, btf);
    set((*rs)->progs.handle_direct_reclaim_end, btf);
    set((*rs)->progs.handle_memcg_reclaim_begin, btf);
    set((*rs)->progs.handle_memcg_reclaim_end, btf);
    set((*rs)->progs.handle_direct_reclaim_begin_raw, !btf);
    set((*rs)->progs.handle_direct_reclaim_end_raw, !btf);
    set((*rs)->progs.handle_memcg_reclaim_begin_raw, !btf);
    set((*rs)->progs.handle_memcg_reclaim_end_raw, !btf);
    COLOD_TRY_VOID(bpf::check(reclaim__load(rs->get()), "loading reclaim programs"),
                   "reclaim");
    COLOD_TRY_VOID(bpf::check(reclaim__attach(rs->get()), "attaching reclaim programs"),
                   "reclaim");
    r = std::move(*rs);
  }
  sched_skel = std::move(*s);
  reclaim_skel = std::move(r);
  attach = kind;
  return {};
}

Result<bpf::MapDump> Collector::Impl::readSchedSlots() const {
  return bpf::dumpMap(bpf_map__fd(sched_skel->maps.cg_slots), sizeof(uint64_t), sizeof(uint32_t),
                      opts.max_cgroups);
}

// Per-cgroup scheduler aggregates: ids and slots from cg_slots, values from the slots of the
// per-CPU array cg_sched, read in one pass up to the highest slot ever handed out.
Result<std::unordered_map<uint64_t, colod_cg_sched>> Collector::Impl::readSched() const {
  std::unordered_map<uint64_t, colod_cg_sched> out;
  auto slots = readSchedSlots();
  if (!slots) {
    return std::move(slots).error().wrap("reading cg_slots");
  }
  if (slots->count == 0) {
    return out;
  }
  const uint64_t used = __atomic_load_n(&sched_skel->bss->slots_used, __ATOMIC_ACQUIRE);
  const std::size_t top = static_cast<std::size_t>(std::min<uint64_t>(used, opts.max_cgroups));
  const std::size_t stride = roundUp8(sizeof(colod_cg_sched)) * static_cast<std::size_t>(ncpu);
  auto vals = bpf::dumpMap(bpf_map__fd(sched_skel->maps.cg_sched), sizeof(uint32_t), stride, top);
  if (!vals) {
    return std::move(vals).error();
  }
  std::vector<const uint8_t*> at(top, nullptr);
  for (std::size_t i = 0; i < vals->count; ++i) {
    uint32_t slot = 0;
    std::memcpy(&slot, vals->keys.data() + i * sizeof(slot), sizeof(slot));
    if (slot < top) {
      at[slot] = vals->values.data() + i * stride;
    }
  }
  for (std::size_t i = 0; i < slots->count; ++i) {
    uint64_t id = 0;
    uint32_t slot = 0;
    std::memcpy(&id, slots->keys.data() + i * sizeof(id), sizeof(id));
    std::memcpy(&slot, slots->values.data() + i * sizeof(slot), sizeof(slot));
    // A slot above `top` was handed out after slots_used was read: next snapshot.
    if (slot < top && at[slot] != nullptr) {
      out[id] = sumPerCpu<colod_cg_sched>(at[slot], ncpu);
    }
  }
  return out;
}

// Slots quarantined at the previous snapshot: zero them on every CPU and return them to the
// BPF side. A failure leaks the slot (counted nowhere else), so it is retried next time.
void Collector::Impl::releaseSlots() {
  if (quarantined_slots.empty()) {
    return;
  }
  const std::size_t stride = roundUp8(sizeof(colod_cg_sched)) * static_cast<std::size_t>(ncpu);
  const std::vector<uint8_t> zeros(stride, 0);
  std::vector<uint32_t> keep;
  for (const uint32_t slot : quarantined_slots) {
    if (bpf_map_update_elem(bpf_map__fd(sched_skel->maps.cg_sched), &slot, zeros.data(),
                            BPF_ANY) < 0 ||
        bpf_map_update_elem(bpf_map__fd(sched_skel->maps.free_slots), nullptr, &slot, 0) < 0) {
      keep.push_back(slot);
    }
  }
  quarantined_slots = std::move(keep);
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
  if (auto dir = cgroup::CgroupDir::open(cgroup::joinRel(id_root, s.path)); dir) {
    if (auto text = dir->read("cpu.stat"); text) {
      if (auto st = cgroup::parseCpuStat(*text); st && st->nr_throttled) {
        auto& prev = prev_files[s.id];
        if (prev.have) {
          Throttling t;
          t.nr_periods = sub(st->nr_periods.value_or(0), prev.cpu_stat.nr_periods.value_or(0));
          t.nr_throttled = sub(*st->nr_throttled, prev.cpu_stat.nr_throttled.value_or(0));
          t.throttled_ns = sub(st->throttled_ns.value_or(0),
                               prev.cpu_stat.throttled_ns.value_or(0));
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
  } else {
    note(dir.error());
  }
  // PSI is charged in the unified hierarchy even when limits live in v1; the cgroup exists
  // there only if the runtime created it (same relative path).
  if (hier.unified.empty()) {
    return;
  }
  auto udir = cgroup::CgroupDir::open(cgroup::joinRel(hier.unified, s.path));
  if (!udir) {
    note(udir.error());
    return;
  }
  if (auto text = udir->read("cpu.pressure"); text) {
    if (auto p = cgroup::parsePsi(*text); p) {
      s.cpu_pressure = toPsi(*p);
    } else {
      note(p.error());
    }
  } else {
    note(text.error());
  }
  if (auto text = udir->read("memory.pressure"); text) {
    if (auto p = cgroup::parsePsi(*text); p) {
      s.memory_pressure = toPsi(*p);
    } else {
      note(p.error());
    }
  } else {
    note(text.error());
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
  const int slots_fd = bpf_map__fd(sched_skel->maps.cg_slots);
  const int pairs_fd = bpf_map__fd(sched_skel->maps.pairs);
  auto sched = readSched();
  if (!sched) {
    return std::move(sched).error().wrap("reading cg_sched");
  }
  auto pd = bpf::dumpMap(pairs_fd, sizeof(colod_pair_key), sizeof(uint64_t), opts.max_pairs);
  if (!pd) {
    return std::move(pd).error().wrap("reading pairs");
  }
  bpf::MapDump rd;
  if (reclaim_skel) {
    auto r = bpf::dumpMap(bpf_map__fd(reclaim_skel->maps.cg_reclaim), sizeof(uint64_t),
                          roundUp8(sizeof(colod_cg_reclaim)) * static_cast<std::size_t>(ncpu),
                          opts.max_cgroups);
    if (!r) {
      return std::move(r).error().wrap("reading cg_reclaim");
    }
    rd = std::move(*r);
  }

  std::unordered_map<uint64_t, colod_cg_sched>& cur_sched = *sched;
  std::unordered_map<uint64_t, colod_cg_reclaim> cur_reclaim;
  for (std::size_t i = 0; i < rd.count; ++i) {
    uint64_t id = 0;
    std::memcpy(&id, rd.keys.data() + i * sizeof(id), sizeof(id));
    cur_reclaim[id] = sumPerCpu<colod_cg_reclaim>(
        rd.values.data() +
            i * roundUp8(sizeof(colod_cg_reclaim)) * static_cast<std::size_t>(ncpu),
        ncpu);
  }
  std::unordered_map<colod_pair_key, uint64_t, PairKeyHash, PairKeyEq> cur_pairs;
  for (std::size_t i = 0; i < pd->count; ++i) {
    colod_pair_key k{};
    uint64_t v = 0;
    std::memcpy(&k, pd->keys.data() + i * sizeof(k), sizeof(k));
    std::memcpy(&v, pd->values.data() + i * sizeof(v), sizeof(v));
    cur_pairs[k] = v;
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
    // so deleted cgroups leave nothing behind in the kernel.
    // A pruned id's slot may still be cached per CPU: bump attach_gen so that every CPU
    // looks its running cgroup up again, and recycle the slot only at the next snapshot.
    auto slots = readSchedSlots();
    std::unordered_map<uint64_t, uint32_t> slot_of;
    if (slots) {
      for (std::size_t i = 0; i < slots->count; ++i) {
        uint64_t id = 0;
        uint32_t slot = 0;
        std::memcpy(&id, slots->keys.data() + i * sizeof(id), sizeof(id));
        std::memcpy(&slot, slots->values.data() + i * sizeof(slot), sizeof(slot));
        slot_of.emplace(id, slot);
      }
    }
    bool released = false;
    for (auto it = cur_sched.begin(); it != cur_sched.end();) {
      if (!paths.contains(it->first)) {
        if (auto sl = slot_of.find(it->first); sl != slot_of.end()) {
          if (bpf::deleteKey(slots_fd, &it->first)) {
            quarantined_slots.push_back(sl->second);
            released = true;
          }
        }
        ++stats.pruned_cgroups;
        prev_sched.erase(it->first);
        prev_files.erase(it->first);
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
        (void)bpf::deleteKey(bpf_map__fd(reclaim_skel->maps.cg_reclaim), &it->first);
        ++stats.pruned_cgroups;
        prev_reclaim.erase(it->first);
        it = cur_reclaim.erase(it);
      } else {
        ++it;
      }
    }
    for (auto it = cur_pairs.begin(); it != cur_pairs.end();) {
      if (!paths.contains(it->first.victim) || !paths.contains(it->first.aggressor)) {
        (void)bpf::deleteKey(pairs_fd, &it->first);
        prev_pairs.erase(it->first);
        it = cur_pairs.erase(it);
      } else {
        ++it;
      }
    }
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
    colod_cg_sched prev{};
    if (auto p = prev_sched.find(id); p != prev_sched.end()) {
      prev = p->second;
    }
    const Log2Hist h = histDelta(toHist(cur.hist), toHist(prev.hist));
    const uint64_t oncpu = sub(cur.oncpu_ns, prev.oncpu_ns);
    const uint64_t count = sub(cur.count, prev.count);
    const uint64_t invol = sub(cur.invol, prev.invol);
    const uint64_t wakeups = sub(cur.wakeups, prev.wakeups);
    if (count == 0 && oncpu == 0 && invol == 0 && wakeups == 0) {
      continue;  // idle this interval
    }
    CgroupSample& s = sample(id);
    s.runq_hist = h;
    s.runq = summarize(h, sub(cur.total_ns, prev.total_ns));
    s.runq_stale = sub(cur.stale, prev.stale);
    s.involuntary_switches = invol;
    s.preempted_wait_ns = sub(cur.preempt_wait_ns, prev.preempt_wait_ns);
    s.oncpu_ns = oncpu;
    s.wakeups = wakeups;
    s.runq_depth_sum = sub(cur.depth_sum, prev.depth_sum);
    // Preemptions by the cgroup's own tasks are counted in its slot, not in the pairs hash
    // (cheaper at every such switch): reported as the pair victim == aggressor, as before.
    if (const uint64_t self = sub(cur.self_preempt, prev.self_preempt); self > 0) {
      s.preempted_by.push_back(Aggressor{id, s.path, self});
    }
  }
  for (const auto& [id, cur] : cur_reclaim) {
    colod_cg_reclaim prev{};
    if (auto p = prev_reclaim.find(id); p != prev_reclaim.end()) {
      prev = p->second;
    }
    const uint64_t count = sub(cur.count, prev.count);
    if (count == 0) {
      continue;
    }
    CgroupSample& s = sample(id);
    s.reclaim_count = count;
    s.reclaim_stall_ns = sub(cur.total_ns, prev.total_ns);
    s.reclaim_pages = sub(cur.pages, prev.pages);
    s.reclaim_hist = histDelta(toHist(cur.hist), toHist(prev.hist));
  }
  for (const auto& [k, cur] : cur_pairs) {
    uint64_t prev = 0;
    if (auto p = prev_pairs.find(k); p != prev_pairs.end()) {
      prev = p->second;
    }
    const uint64_t d = sub(cur, prev);
    if (d == 0) {
      continue;
    }
    CgroupSample& s = sample(k.victim);
    auto p = paths.find(k.aggressor);
    s.preempted_by.push_back(
        Aggressor{k.aggressor, p == paths.end() ? std::string() : p->second, d});
  }
  if (opts.read_files) {
    for (auto& [id, s] : out) {
      if (!s.path.empty()) {
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

  // Drops: per-CPU counters in both programs, summed.
  uint64_t drops = 0;
  auto sumDrops = [&](int fd) {
    std::vector<uint64_t> v(static_cast<std::size_t>(ncpu));
    for (uint32_t i = 0; i < COLOD_DROP_MAX; ++i) {
      if (bpf_map_lookup_elem(fd, &i, v.data()) == 0) {
        for (uint64_t x : v) {
          drops += x;
        }
      }
    }
  };
  sumDrops(bpf_map__fd(sched_skel->maps.drops));
  if (reclaim_skel) {
    sumDrops(bpf_map__fd(reclaim_skel->maps.drops));
  }
  stats.map_drops = drops;
  ++stats.snapshots;
  snap.stats = stats;

  prev_sched = std::move(cur_sched);
  prev_reclaim = std::move(cur_reclaim);
  prev_pairs = std::move(cur_pairs);
  return snap;
}

Result<Collector> Collector::create(const CollectorOptions& options) {
  auto impl = std::make_unique<Impl>();
  impl->opts = options;
  if (impl->opts.max_cgroups == 0 || impl->opts.max_pairs == 0) {
    return COLOD_ERR(EINVAL, "max_cgroups and max_pairs must be > 0");
  }
  if (options.log) {
    bpf::setLibbpfLog(options.log);
  }
  if (::access("/sys/kernel/btf/vmlinux", R_OK) != 0) {
    return COLOD_ERR(ENOENT, "kernel has no BTF (/sys/kernel/btf/vmlinux): CO-RE programs "
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
    return COLOD_ERR(ENOENT, "no ", toString(impl->mode), " hierarchy under ",
                     options.cgroup_root);
  }
  const int ncpu = libbpf_num_possible_cpus();
  if (ncpu <= 0) {
    return COLOD_ERR(ncpu < 0 ? -ncpu : EINVAL, "counting possible CPUs");
  }
  impl->ncpu = ncpu;

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

Result<Snapshot> Collector::snapshot() {
  return impl_->snapshot();
}
CgroupMode Collector::mode() const {
  return impl_->mode;
}
AttachKind Collector::attachKind() const {
  return impl_->attach;
}
const std::string& Collector::hierarchyRoot() const {
  return impl_->id_root;
}

Result<std::vector<uint64_t>> Collector::trackedCgroupIds() const {
  std::vector<uint64_t> ids;
  auto add = [&](int fd, std::size_t value_size) -> Result<void> {
    auto d = bpf::dumpMap(fd, sizeof(uint64_t),
                          roundUp8(value_size) * static_cast<std::size_t>(impl_->ncpu),
                          impl_->opts.max_cgroups);
    if (!d) {
      return std::move(d).error();
    }
    for (std::size_t i = 0; i < d->count; ++i) {
      uint64_t id = 0;
      std::memcpy(&id, d->keys.data() + i * sizeof(id), sizeof(id));
      ids.push_back(id);
    }
    return {};
  };
  auto slots = impl_->readSchedSlots();
  if (!slots) {
    return std::move(slots).error().wrap("reading cg_slots");
  }
  for (std::size_t i = 0; i < slots->count; ++i) {
    uint64_t id = 0;
    std::memcpy(&id, slots->keys.data() + i * sizeof(id), sizeof(id));
    ids.push_back(id);
  }
  if (impl_->reclaim_skel) {
    COLOD_TRY_VOID(
        add(bpf_map__fd(impl_->reclaim_skel->maps.cg_reclaim), sizeof(colod_cg_reclaim)),
        "reading cg_reclaim");
  }
  std::sort(ids.begin(), ids.end());
  ids.erase(std::unique(ids.begin(), ids.end()), ids.end());
  return ids;
}

}  // namespace colod::collect
