// SPDX-License-Identifier: Apache-2.0
#include "colod/collect/collector.h"

#include <bpf/btf.h>
#include <linux/btf.h>
#include <malloc.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <numeric>
#include <type_traits>
#include <unordered_map>
#include <unordered_set>

#include "bpf_util.h"
#include "cgsched.h"
#include "collector_impl.h"
#include "colod/cgroup/cgroup.h"
#include "colod/cgroup/parse.h"
#include "colod/collect/map_budget.h"
#include "cpu_copies.h"
#include "entry_delta.h"
#include "file_cache.h"
#include "permute.h"
#include "reclaim.h"

// The shared headers are the ABI between the BPF programs and this file (style rule 21).
static_assert(sizeof(colod_cg_sched) == 136);
static_assert(sizeof(colod_cg_reclaim) == 128);
static_assert(sizeof(colod_pair_key) == 16);
static_assert(sizeof(colod_cg_pending) == 64);
static_assert(std::is_trivially_copyable_v<colod_cg_pending>);
static_assert(std::is_trivially_copyable_v<colod_cg_sched>);
static_assert(std::is_trivially_copyable_v<colod_cg_reclaim>);
static_assert(colod::collect::kHistSlots == COLOD_HIST_SLOTS);

namespace colod::collect {

namespace {

// A full walk of the hierarchy (the cost that grows with the number of cgroups) happens on an
// unknown id (a new cgroup) and at least every kRescanEveryTicks (a minute at 100 ms: a safety
// net, e.g. for a v1 cgroup renamed in place). Removals come from the BPF side's rmdir queue
// and are pruned at the next snapshot; only when that queue overflowed are the cgroups present
// in the maps checked, one stat() each (issue 17: that check every second, and the walk every
// 10 s, were an eighth of the collector's CPU at 1000 cgroups).
constexpr uint64_t kRescanEveryTicks = 600;

// A cgroup seen running long slices (CollectorOptions::long_slice_ns) has its CPU time read
// from its usage counter for the next kUsageTicks snapshots (a minute at 100 ms), counted again
// from each such slice.
constexpr uint64_t kUsageTicks = 600;

using detail::roundUp8;

using detail::sub;

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

void Collector::Impl::readFiles(
    CgroupSample& s, bool named, bool stat_due, bool slow_due, UsageState* use) {
  auto note = [this](const Error& e) {
    const int err = e.errnoValue();
    if (err != ENOENT && err != ENODEV) {
      ++stats.file_read_errors;
    }
  };
  // Throttling: cpu.stat of the cgroup that holds the cpu controller (v1 cpu hierarchy; v2).
  // Its directory's inode is the id, so a cgroup recreated at the same path is told apart.
  const std::string dir = cgroup::joinRel(id_root, s.path);
  auto& prev = prev_files[s.id];
  // A cgroup without a CFS quota is never throttled (most BE and many LS containers have
  // none): its cpu.stat is read once, for a baseline, and then only while it has a quota. The
  // quota itself is read at the slower cadence (and at first sight). Its counters are
  // cumulative and stand still while no quota is set, so a quota set in between is seen whole
  // at the next read after the quota's. Unknown (unreadable) counts as set; no quota file at
  // all (no cpu controller, or the v2 root) as none. The file cache remembers a missing file
  // and answers for it without a syscall, looking again after a minute (the cpu controller may
  // be enabled later in the parent's subtree_control).
  if (slow_due || !prev.quota) {
    const bool v2 = mode == CgroupMode::V2;
    auto text = files.read(s.id, v2 ? detail::CgroupFile::CpuMax : detail::CgroupFile::CfsQuotaUs,
                           dir, true);
    std::optional<bool> quota;
    prev.no_quota_file = !text && text.error().errnoValue() == ENOENT;
    if (prev.no_quota_file) {
      quota = false;  // (or the cgroup is gone: pruned at the next rescan)
    } else if (text && v2) {
      if (auto m = cgroup::parseCpuMax(*text); m) {
        quota = m->quota_us.has_value();
      }
    } else if (text) {
      if (auto q = cgroup::parseCfsQuotaUs(*text); q) {
        quota = q->has_value();
      }
    }
    prev.quota = quota.value_or(true);
  }
  const bool v2 = mode == CgroupMode::V2;
  const bool unthrottled = prev.quota == false && (prev.have || prev.no_quota_file);
  // On v2 the usage counter is in the same cpu.stat (a core file, there without the cpu
  // controller too): read for it, quota or not.
  const bool v2_usage = use != nullptr && v2;
  if (stat_due && unthrottled && !v2_usage) {
    ++stats.cpu_stat_reads_skipped;
  } else if (stat_due || v2_usage) {
    if (auto text = files.read(s.id, detail::CgroupFile::CpuStat, dir, true); text) {
      auto st = cgroup::parseCpuStat(*text);
      if (st && v2_usage && st->usage_ns) {
        creditUsage(s, *use, {detail::CgroupFile::CpuStat, *st->usage_ns});
      }
      if (st && st->nr_throttled && stat_due && !unthrottled) {
        if (prev.have) {
          Throttling t;
          t.nr_periods = sub(st->nr_periods.value_or(0), prev.cpu_stat.nr_periods.value_or(0));
          t.nr_throttled = sub(*st->nr_throttled, prev.cpu_stat.nr_throttled.value_or(0));
          t.throttled_ns =
              sub(st->throttled_ns.value_or(0), prev.cpu_stat.throttled_ns.value_or(0));
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
  }
  if (use != nullptr && !v2) {
    if (const auto now = readV1Usage(s, *use)) {
      creditUsage(s, *use, *now);
    }
  }
  // PSI is charged in the unified hierarchy even when limits live in v1; the cgroup exists
  // there only if the runtime created it (same relative path, another inode on hybrid hosts).
  if (!slow_due || hier.unified.empty() || (opts.pressure_of_named_only && !named)) {
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

std::optional<Collector::Impl::Usage> Collector::Impl::readV1Usage(const CgroupSample& s,
                                                                   UsageState& use) {
  // runc creates a container's cgroup under the same relative path in every hierarchy; the
  // cpuacct one may be the cpu one (co-mounted), whose inodes are the ids.
  const bool cpuacct_missing = use.no_cpuacct_since && tick - *use.no_cpuacct_since < kUsageTicks;
  if (!hier.cpuacct.empty() && !cpuacct_missing) {
    auto text = files.read(s.id, detail::CgroupFile::CpuacctUsage,
                           cgroup::joinRel(hier.cpuacct, s.path), hier.cpuacct == id_root);
    if (text) {
      if (auto v = cgroup::parseU64(*text); v) {
        return Usage{detail::CgroupFile::CpuacctUsage, *v};
      }
      ++stats.file_read_errors;
      return std::nullopt;
    }
    if (const int err = text.error().errnoValue(); err != ENOENT && err != ENODEV) {
      ++stats.file_read_errors;
      return std::nullopt;
    }
    use.no_cpuacct_since = tick;
  }
  // cgroup2 accounts every task's CPU time in the unified tree, controllers or not.
  if (hier.unified.empty()) {
    return std::nullopt;
  }
  auto text = files.read(s.id, detail::CgroupFile::UnifiedCpuStat,
                         cgroup::joinRel(hier.unified, s.path), false);
  if (!text) {
    return std::nullopt;
  }
  auto st = cgroup::parseCpuStat(*text);
  if (!st) {
    ++stats.file_read_errors;
    return std::nullopt;
  }
  if (!st->usage_ns) {
    return std::nullopt;
  }
  return Usage{detail::CgroupFile::UnifiedCpuStat, *st->usage_ns};
}

void Collector::Impl::creditUsage(CgroupSample& s, UsageState& use, Usage now) const {
  // Only the same counter read at the snapshot before covers this interval (two files count
  // from when the task joined each hierarchy); one that went back means another cgroup now
  // sits at this path (the cpuacct and unified dirs are not checked by id).
  if (use.last && use.last_tick + 1 == tick && use.last->file == now.file &&
      now.ns >= use.last->ns) {
    s.oncpu_ns = now.ns - use.last->ns;
    s.oncpu_from_usage = true;
  }
  use.last = now;
  use.last_tick = tick;
}

std::vector<uint64_t> Collector::Impl::drainRemovals(bool& lost) {
  std::vector<uint64_t> forgot;
  const int fd = bpf_map__fd(sched_skel->maps.gone);
  // Bounded by the queue's length: removals queued meanwhile wait for the next snapshot.
  for (uint32_t i = 0; i < opts.removal_queue; ++i) {
    uint64_t id = 0;
    if (bpf_map_lookup_and_delete_elem(fd, nullptr, &id) != 0) {
      break;  // ENOENT: empty
    }
    if (paths.erase(id) > 0) {
      forgot.push_back(id);
    }
  }
  const uint64_t n = __atomic_load_n(&sched_skel->bss->gone_lost, __ATOMIC_ACQUIRE);
  lost = n != gone_lost_seen;
  stats.removals_lost += n - gone_lost_seen;
  gone_lost_seen = n;
  return forgot;
}

Result<Snapshot> Collector::Impl::snapshot() {
  ++tick;
  Snapshot snap;
  snap.cgroups = std::move(spare_cgroups);  // empty (no capacity) unless one was recycled
  spare_cgroups = {};
  snap.cgroups.clear();
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
  stats.watch_slot_lookups = watch->slotLookups();
  auto sched = readSched();
  if (!sched) {
    return std::move(sched).error().wrap("reading cg_sched");
  }
  // The snapshot can fail only from here to the merge below, and a failed one leaves the last
  // snapshot's state whole (a cgroup missing from it would report its whole cumulative count as
  // one interval's). The marks this read took are gone, so the next read is a full one.
  auto failed = [&](Error e) {
    last_full_sched_tick.reset();
    return e;
  };
  std::size_t reclaim_n = 0;
  if (reclaim_skel) {
    auto r = readIfChanged(reclaim_reader, reclaim_gen, &reclaim_skel->bss->reclaim_gen,
                           bpf_map__fd(reclaim_skel->maps.cg_reclaim));
    if (!r) {
      return failed(std::move(r).error().wrap("reading cg_reclaim"));
    }
    reclaim_n = *r;
  }
  SchedRead& read = *sched;
  if (auto r = readPairs(); !r) {
    return failed(std::move(r).error());
  }
  if (auto r = readBehind(); !r) {
    return failed(std::move(r).error());
  }
  // cur_sched: every live cgroup's entry now. After a read of the changed slots only, the others
  // stand as the last snapshot left them, and prev_sched keeps only the read ones' old entries
  // (their deltas are all this snapshot has).
  std::unordered_map<uint64_t, detail::SchedEntry> cur_sched;
  if (read.all) {
    cur_sched = std::move(read.entries);
  } else {
    detail::SchedMap before = sched_maps.take();
    detail::SchedMapPool::reserve(before, read.entries.size());
    cur_sched = std::move(prev_sched);
    for (const auto& [id, e] : read.entries) {
      if (auto it = cur_sched.find(id); it != cur_sched.end()) {
        sched_maps.put(before, id, it->second);
        it->second = e;
      } else {
        sched_maps.put(cur_sched, id, e);
      }
    }
    prev_sched = std::move(before);
  }
  // The cgroups read this snapshot: only they can have new ids or activity.
  auto forEachRead = [&](const auto& fn) {
    for (const auto& [id, e] : read.all ? cur_sched : read.entries) {
      fn(id);
    }
  };
  // Entries whose deletion failed (and failed again just now) belong to dead cgroups: not
  // reported, and not unknown ids that would trigger a rescan.
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

  // Removed cgroups (kernfs ids are never reused): their paths go, and their state is pruned
  // below like any id the tree no longer has.
  bool lost = false;
  const std::vector<uint64_t> removed = drainRemovals(lost);
  auto wasRemoved = [&](uint64_t id) {
    return std::find(removed.begin(), removed.end(), id) != removed.end();
  };

  // Resolve ids to paths; an unknown id means a new cgroup (rescan) or a dead one (prune).
  bool unknown = false;
  forEachRead([&](uint64_t id) {
    unknown = unknown || (cur_sched.contains(id) && !paths.contains(id) && !wasRemoved(id));
  });
  for (const auto& [id, v] : cur_reclaim) {
    unknown = unknown || (!paths.contains(id) && !wasRemoved(id));
  }
  bool fresh = false;
  if (unknown || tick - last_rescan_tick >= kRescanEveryTicks || paths.empty()) {
    if (auto r = rescan(); r) {
      fresh = true;
    }
  } else if (lost) {
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
  } else if (!removed.empty()) {
    // Every id in the maps was in paths (no unknown id), and the queue dropped exactly the
    // removed ones: what is missing now is dead.
    fresh = true;
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
        prev_diag.erase(it->first);
        prev_files.erase(it->first);
        usage.erase(it->first);
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
    for (PairMap& m : pair_maps) {
      m.deltas.forget(dead, [&](const colod_pair_key& k) { prunePair(m, k); });
    }
  } else {
    for (const auto& [id, v] : cur_sched) {
      stats.unresolved_ids += paths.contains(id) ? 0 : 1;
    }
  }

  // prev_sched holds the moved cgroups' entries in their old slots still (pruned ids aside).
  const auto moved_tails = readMovedTails();
  quarantineMovedSlots();  // recycled one interval from now

  // The samples, built in place: a reference sample() returns is not held across another
  // sample() call (the vector may grow).
  std::vector<CgroupSample>& out = snap.cgroups;
  out.reserve((read.all ? cur_sched.size() : read.entries.size()) + cur_reclaim.size());
  sample_index.clear();
  auto sample = [&](uint64_t id) -> CgroupSample& {
    auto [it, inserted] = sample_index.try_emplace(id, out.size());
    if (inserted) {
      CgroupSample& s = out.emplace_back();
      s.id = id;
      auto p = paths.find(id);
      s.path = p == paths.end() ? std::string() : p->second;
    }
    return out[it->second];
  };
  forEachRead([&](uint64_t id) {
    const auto c = cur_sched.find(id);
    if (c == cur_sched.end()) {
      return;  // pruned above, or a dead cgroup's entry awaiting its deletion
    }
    const auto p = prev_sched.find(id);
    colod_cg_sched d = detail::schedDelta(c->second, p == prev_sched.end() ? nullptr : &p->second);
    if (const auto t = moved_tails.find(id); t != moved_tails.end()) {
      detail::addSched(d, t->second);  // the new slot counts from zero, the old one's last gain
    }
    colod_cg_diag dg{};
    if (opts.wakeup_depth) {
      if (const auto now = readDiag(c->second.slot)) {
        const detail::DiagEntry e{c->second.slot, *now};
        const auto pd = prev_diag.find(id);
        dg = detail::diagDelta(e, pd == prev_diag.end() ? nullptr : &pd->second);
        prev_diag.insert_or_assign(id, e);
      }
    }
    if (d.count == 0 && d.oncpu_ns == 0 && d.invol == 0 && dg.wakeups == 0) {
      return;  // idle this interval
    }
    // Slices of long_slice_ns or more on average: a task that keeps its CPU, credited in lumps.
    if (opts.usage_of_long_slices &&
        d.oncpu_ns >= opts.long_slice_ns * std::max<uint64_t>(d.count, 1)) {
      usage[id].until = tick + kUsageTicks;
    }
    CgroupSample& s = sample(id);
    s.runq_hist = detail::toHist(d.hist);
    s.runq = summarize(s.runq_hist, d.total_ns);
    s.runq_stale = dg.stale;
    s.involuntary_switches = d.invol;
    s.preempted_wait_ns = d.preempt_wait_ns;
    s.preempted_waits = d.preempt_waits;
    s.oncpu_ns = d.oncpu_ns;
    s.wakeups = dg.wakeups;
    s.runq_depth_sum = dg.depth_sum;
    // Preemptions by the cgroup's own tasks are counted in its slot, not in the pairs hash
    // (cheaper at every such switch): reported as the pair victim == aggressor, as before.
    if (d.self_preempt > 0) {
      s.preempted_by.push_back(Aggressor{id, s.path, d.self_preempt});
    }
  });
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
  // The rest first: a victim named since its last read may have a pair in both maps, reported
  // as one aggressor (searched for only then).
  std::unordered_set<uint64_t> in_rest;
  for (const std::size_t which : {kRestPairs, kNamedPairs}) {
    for (const auto& [k, d] : pair_maps[which].deltas.deltas()) {
      CgroupSample& s = sample(k.victim);
      if (which == kRestPairs) {
        in_rest.insert(k.victim);
      } else if (in_rest.contains(k.victim)) {
        auto same = std::find_if(s.preempted_by.begin(), s.preempted_by.end(),
                                 [&](const Aggressor& a) { return a.cgroup_id == k.aggressor; });
        if (same != s.preempted_by.end()) {
          same->preemptions += d;
          continue;
        }
      }
      auto p = paths.find(k.aggressor);
      s.preempted_by.push_back(
          Aggressor{k.aggressor, p == paths.end() ? std::string() : p->second, d});
    }
  }
  for (std::size_t i = 0; i < behind_reader.count(); ++i) {
    colod_pair_key k{};
    colod_behind d{};
    std::memcpy(&k, behind_reader.key(i), sizeof(k));
    std::memcpy(&d, behind_reader.value(i), sizeof(d));
    if (!paths.contains(k.victim)) {
      continue;  // not known yet (the next rescan names it) or dead
    }
    CgroupSample& s = sample(k.victim);
    auto p = paths.find(k.aggressor);
    s.waited_behind.push_back(WaitedBehind{
        k.aggressor, p == paths.end() ? std::string() : p->second, d.waits, d.wait_ns});
  }
  // A cgroup whose tasks kept their CPUs has no BPF entry this interval (slices are credited
  // at switch-out) but used CPU: sampled here for its usage counter, and dropped again below if
  // that says it did not run.
  const std::size_t usage_only = out.size();
  for (auto it = usage.begin(); it != usage.end();) {
    if (it->second.until < tick || !paths.contains(it->first)) {
      it = usage.erase(it);
      continue;
    }
    if (opts.read_files && !sample_index.contains(it->first)) {
      sample(it->first);
    }
    ++it;
  }
  if (opts.read_files) {
    files.beginTick();
    const uint64_t every = std::max<uint32_t>(opts.files_every_n_ticks, 1);
    const uint64_t slow = opts.pressure_every_n_ticks > 0 ? opts.pressure_every_n_ticks : every;
    for (CgroupSample& s : out) {
      const uint64_t id = s.id;
      // The cadences are spread by id, so each tick reads about 1/every of the rest. A named
      // cgroup has its cpu.stat read at every tick (its throttling is per interval) and its PSI
      // at the slower cadence like any other: the kernel recomputes the avg10/60/300 averages
      // every 2 s, so reading them every 100 ms costs formatting and tells nothing new
      // (issue 17).
      const bool named = every_tick.contains(id);
      const bool stat_due = every == 1 || (tick + id) % every == 0 || named;
      const bool slow_due = slow == 1 || (tick + id) % slow == 0;
      const auto u = usage.find(id);
      UsageState* use = u == usage.end() ? nullptr : &u->second;
      if (!s.path.empty() && (stat_due || slow_due || use != nullptr)) {
        readFiles(s, named, stat_due, slow_due, use);
      }
    }
  }
  out.erase(std::remove_if(out.begin() + static_cast<std::ptrdiff_t>(usage_only), out.end(),
                           [](const CgroupSample& s) { return s.oncpu_ns == 0; }),
            out.end());
  for (CgroupSample& s : out) {
    std::sort(s.preempted_by.begin(), s.preempted_by.end(),
              [](const Aggressor& a, const Aggressor& b) { return a.preemptions > b.preemptions; });
  }
  // By path, through an index: a sample is ~800 bytes, and a sort moves each many times.
  sample_order.resize(out.size());
  std::iota(sample_order.begin(), sample_order.end(), uint32_t{0});
  std::sort(sample_order.begin(), sample_order.end(),
            [&](uint32_t a, uint32_t b) { return out[a].path < out[b].path; });
  detail::permuteInPlace(out, sample_order);

  // Drops: counters in both programs' .bss, read through the skeletons' mmapped memory. Lock
  // skips (EBUSY) are kept apart: they say nothing about the maps' size (bpf/colod_common.h).
  uint64_t drops = 0;
  uint64_t lock_skips = 0;
  auto sumDrops = [&](const __u64(&counts)[COLOD_DROP_MAX]) {
    for (uint32_t i = 0; i < COLOD_DROP_MAX; ++i) {
      const uint64_t x = __atomic_load_n(&counts[i], __ATOMIC_RELAXED);
      if (i == COLOD_DROP_CPU) {
        stats.unmeasured_cpus += x;
      } else {
        (i == COLOD_DROP_BUSY ? lock_skips : drops) += x;
      }
    }
  };
  stats.unmeasured_cpus = 0;
  stats.sched_cpus = sched_cpus;
  sumDrops(sched_skel->bss->drop_counts);
  if (reclaim_skel) {
    sumDrops(reclaim_skel->bss->drop_counts);
  }
  stats.map_drops = drops;
  stats.map_lock_skips = lock_skips;
  stats.map_deletes_pending = undeleted_slots.size() + undeleted_reclaim.size() +
                              pair_maps[kRestPairs].undeleted.size() +
                              pair_maps[kNamedPairs].undeleted.size() + unreleased_slots;
  stats.read_bytes_last_tick = sched_read_bytes + pairs_read_bytes +
                               (reclaim_skel ? reclaim_reader.lastReadBytes() : 0) +
                               behind_read_bytes;
  stats.read_buffer_bytes = (sums ? sums->bufferBytes()
                                  : slots_reader.bufferBytes() + sched_copies.capacity() +
                                        slot_value.capacity() + cpu_values.capacity()) +
                            pair_maps[kRestPairs].reader.bufferBytes() +
                            pair_maps[kNamedPairs].reader.bufferBytes() +
                            reclaim_reader.bufferBytes() + behind_reader.bufferBytes();
  stats.bpf_map_bytes = map_bytes;
  stats.sched_maps_made = sched_maps.made();
  stats.cgroup_file_opens = files.opens();
  stats.cgroup_file_misses_cached = files.missingHits();
  stats.cgroup_files_open = files.openFiles();
  stats.cgroup_file_reads = files.reads();
  stats.named_pairs_full =
      __atomic_load_n(&sched_skel->bss->named_pairs_full, __ATOMIC_RELAXED) != 0;
  ++stats.snapshots;
  snap.stats = stats;

  syncNamedSlots(cur_sched, read.slots_gen);
  sched_maps.give(std::move(prev_sched));
  if (!read.all) {
    sched_maps.give(std::move(read.entries));  // else it became cur_sched
  }
  prev_sched = std::move(cur_sched);
  prev_reclaim = std::move(cur_reclaim);
  moveCrowdedSlots(prev_sched);
  return snap;
}

Result<Collector> Collector::create(const CollectorOptions& options) {
  auto impl = std::make_unique<Impl>();
  impl->opts = options;
  if (impl->opts.max_cgroups == 0 || impl->opts.max_pairs == 0 || impl->opts.max_named_pairs == 0 ||
      impl->opts.removal_queue == 0) {
    return COLOD_ERR(EINVAL,
                     "max_cgroups, max_pairs, max_named_pairs and removal_queue must be > 0");
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
  // cg_sched's copies: the present CPUs (cpu_copies.h), unless a test or probe asks otherwise.
  // Asked for, the copies are bounded the same way as the present CPUs (and sysfs is not read).
  const Result<uint32_t> present =
      options.sched_cpus ? Result<uint32_t>(*options.sched_cpus) : detail::presentCpuEnd();
  impl->sched_cpus = detail::schedCopies(present, static_cast<uint32_t>(ncpu));
  if (!present) {
    impl->sizing_note = "collector: " + present.error().message() +
                        ": cg_sched sized for every possible CPU (" + std::to_string(ncpu) + ")";
  }
  // The maps grow with the CPUs: as many slots as fit the budget.
  const MapCpus cpus{.copies = impl->sched_cpus, .possible = static_cast<uint32_t>(ncpu)};
  impl->sizing = sizeSlots(slotCost(options.reclaim, options.wakeup_depth), impl->opts.max_cgroups,
                           cpus, options.map_budget_bytes, kMinSlots);
  impl->opts.max_cgroups = impl->sizing.slots;
  if (uint64_t{impl->opts.max_cgroups} * impl->sched_cpus > UINT32_MAX) {
    return COLOD_ERR(EINVAL, "max_cgroups ", impl->opts.max_cgroups, " x ", impl->sched_cpus,
                     " CPUs: more cg_sched entries than an array map indexes");
  }
  if (std::string note =
          describeSizing(impl->sizing, options.max_cgroups, cpus, options.map_budget_bytes);
      !note.empty()) {
    impl->sizing_note = impl->sizing_note.empty() ? note : impl->sizing_note + "; " + note;
  }
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
  // Loading parsed the kernel's BTF (several MiB, freed since): give that heap back now.
  ::malloc_trim(0);
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
void Collector::recycle(Snapshot&& used) {
  // The larger buffer is kept: a reader that recycles only some snapshots loses nothing.
  if (used.cgroups.capacity() > impl_->spare_cgroups.capacity()) {
    impl_->spare_cgroups = std::move(used.cgroups);
  }
}
void Collector::setEveryTick(std::vector<uint64_t> ids) {
  impl_->every_tick = std::unordered_set<uint64_t>(ids.begin(), ids.end());
  impl_->named_gen.invalidate();
}
uint64_t Collector::bpfMapBytes() const { return impl_->map_bytes; }

uint32_t Collector::slots() const { return impl_->sizing.slots; }

const std::string& Collector::sizingNote() const { return impl_->sizing_note; }

bool Collector::kernelSums() const { return impl_->sums.has_value(); }

const std::string& Collector::readNote() const { return impl_->read_note; }
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
