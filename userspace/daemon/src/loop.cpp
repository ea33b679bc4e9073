// SPDX-License-Identifier: Apache-2.0
// One tick of the loop: registry diff, collector snapshot, engine, decisions, the view.
#include <algorithm>

#include "colod/base/version.h"
#include "daemon_impl.h"

namespace colod::daemon {

void Daemon::Impl::syncRegistry(RoundReason reason) {
  // Observe-only without NRI: until the runtime has synchronized once, the node's containers come
  // from the kubepods cgroup tree (rescanned about once a second); then the runtime's view wins.
  auto source = registry_source_.choose(stub_->registry().snapshot(),
                                        {.hierarchy_root = hierarchy_root_,
                                         .prefix = cfg()->daemon.systemd_cgroup_prefix,
                                         .max_cgroups = cfg()->daemon.max_cgroups},
                                        reason == RoundReason::Timer && tick_no_ % 10 == 1);
  if (!source.note.empty()) {
    log()->info("{}", source.note);
  }
  const auto snap = std::move(source.snapshot);
  if (snap->generation == registry_generation_) {
    return;
  }
  registry_generation_ = snap->generation;
  actuator_->kick();                   // the runtime said something: the actuator compares again
  std::set<std::string_view> present;  // views into `snap`, alive for this function
  std::vector<const Known*> upserted;  // for the trace lines (known_ nodes are stable)
  std::vector<std::string> removed;
  std::size_t changed = 0;
  for (const auto& [id, ctr] : snap->containers) {
    if (ctr->state == nri::ContainerState::Stopped) {
      continue;
    }
    present.insert(id);
    auto pod_it = snap->pods.find(ctr->pod_sandbox_id);
    std::shared_ptr<const nri::PodSandbox> pod =
        pod_it != snap->pods.end() ? pod_it->second : nullptr;
    auto it = known_.find(id);
    if (it != known_.end() && it->second.ctr == ctr && it->second.pod == pod) {
      continue;  // the registry's objects are immutable: same objects, same container
    }
    auto info = engineInfo(pod.get(), *ctr);
    // New objects may carry the same content (a resync replaces every object): the engine only
    // hears about real changes, so its per-container windows survive a reconnect.
    if (it != known_.end() && it->second.ctr != nullptr && fullInfo(it->second) == info) {
      it->second.ctr = ctr;
      it->second.pod = std::move(pod);
      continue;
    }
    ++changed;
    if (it == known_.end()) {
      it = known_.emplace(std::string(id), Known{}).first;
      log()->info("container {}/{}/{} ({}) known", info.pod_namespace, info.pod_name,
                  info.container_name, id.substr(0, 12));
    }
    Known& k = it->second;
    const bool path_changed = k.ctr == nullptr || k.cgroupPath() != info.cgroup_path;
    k.ctr = ctr;
    k.pod = std::move(pod);
    k.tier =
        std::string(policy::tierName(info.tier ? *info.tier : policy::classifyTier(info).tier));
    k.display = info.pod_namespace + "/" + info.pod_name + "/" + info.container_name;
    if (path_changed) {
      if (k.cgroup_id != 0) {
        by_cgroup_.erase(k.cgroup_id);
      }
      k.cgroup_id = 0;
      k.resolve_tick = 0;
    }
    upserted.push_back(&k);
    keepPolicyKeys(info);
    std::lock_guard lk(engine_mu_);
    engine_->upsertContainer(std::move(info));
  }
  for (auto it = known_.begin(); it != known_.end();) {
    if (present.count(it->first) != 0) {
      ++it;
      continue;
    }
    log()->info("container {} ({}) gone", it->second.display, it->first.substr(0, 12));
    if (it->second.cgroup_id != 0) {
      by_cgroup_.erase(it->second.cgroup_id);
    }
    removed.push_back(it->first);
    awaiting_.erase(it->first);
    {
      std::lock_guard lk(engine_mu_);
      engine_->removeContainer(it->first);
    }
    it = known_.erase(it);
  }
  {
    // One critical section for the lines and the prefix, so a recording that starts meanwhile
    // sees every change exactly once (in its prefix or as a line). Lines are encoded only for
    // live recordings: ~2 KB of JSON a container otherwise built for nobody.
    recorders_.withLock([&](bool active, const TraceRecorders::Broadcast& send) {
      if (active) {
        for (const Known* k : upserted) {
          send(policy::encodeUpsert(fullInfo(*k)), false);
        }
        for (const auto& id : removed) {
          send(policy::encodeRemove(id), false);
        }
      }
      trace_prefix_.clear();
      trace_prefix_.reserve(known_.size());
      for (const auto& [id, k] : known_) {
        trace_prefix_.emplace_back(k.pod, k.ctr);
      }
    });
  }
  if (changed > 0 || !removed.empty()) {
    ++watch_inputs_gen_;  // a tier, a cgroup path or the set of containers changed
  }
  if (changed >= kTrimAfterChanges) {
    // A (re)synchronize just replaced the registry and rebuilt the tables: hand the transient
    // peak (request buffer, decoded copies, old registry, trace lines) back to the kernel
    // instead of keeping it as free heap for the life of the process. Milliseconds, here on the
    // loop thread, not on the NRI reply path.
    ::malloc_trim(0);
  }
  resolveCgroups(true);
  if (snap->synchronized && !reconciled_) {
    reconcileJournal(
        std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now().time_since_epoch())
            .count());
  }
}

void Daemon::Impl::resolveCgroups(bool force) {
  // Resolves k's cgroup if it is time to try; true once it has one.
  auto resolve = [&](KnownEntry& entry) {
    Known& k = entry.second;
    if (k.cgroup_id != 0) {
      return true;
    }
    // Unresolved containers (not started yet, or cgroup not created) are retried every ~1 s.
    if (!force && tick_no_ - k.resolve_tick < 10) {
      return false;
    }
    k.resolve_tick = tick_no_;
    auto rel = containerCgroupRel(k.cgroupPath(), cfg()->daemon.cgroup_driver,
                                  cfg()->daemon.systemd_cgroup_prefix);
    if (!rel) {
      k.resolve_error = rel.error().message();
      return false;
    }
    k.rel = *rel;
    struct stat st {};
    const std::string dir = hierarchy_root_ + k.rel;
    if (::stat(dir.c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) {
      k.resolve_error = "no cgroup directory " + dir;
      return false;
    }
    k.cgroup_id = st.st_ino;
    k.resolve_error.clear();
    ++watch_inputs_gen_;
    by_cgroup_[k.cgroup_id] = &entry;
    log()->debug("container {} -> cgroup {} (id {})", k.display, k.rel, k.cgroup_id);
    return true;
  };
  std::size_t unresolved = 0;
  for (KnownEntry& entry : known_) {
    unresolved += resolve(entry) ? 0 : 1;
  }
  // Exact until the next call: a container's cgroup is set here only, and syncRegistry, which
  // adds containers and forgets cgroups, ends with a call.
  unresolved_ = unresolved;
}

void Daemon::Impl::tick(RoundReason reason) {
  const auto t0 = Clock::now();
  // An event round (wakeup.cpp) is a round, not a tick: the tick cadence (per-10-tick work,
  // liveness, overruns) stays the timer's.
  if (reason == RoundReason::Timer) {
    ++tick_no_;
    ++ticks_;
    last_tick_ns_ =
        std::chrono::duration_cast<std::chrono::nanoseconds>(t0.time_since_epoch()).count();
    if (t0 - last_tick_ > cfg()->daemon.interval * 3) {
      ++tick_overruns_;
    }
    last_tick_ = t0;
  }
  if (const uint64_t demoted = realtimeDemotions(); demoted != realtime_demotions_logged_) {
    realtime_demotions_logged_ = demoted;
    log()->warn(
        "a thread of colod ran {} ms under SCHED_FIFO without blocking: the reaction "
        "path is back under SCHED_OTHER until colod restarts",
        kRealtimeBudget.count());
  }
  refreshNriState();
  syncRegistry(reason);
  if (tick_no_ % 10 == 0) {
    resolveCgroups(false);
  }
  auto snap = collector_->snapshot();
  if (!snap) {
    if (snapshot_errors_++ % 100 == 0) {
      log()->warn("collector snapshot failed ({} so far): {}", snapshot_errors_.load(),
                  snap.error().message());
    }
    if (views_.wanted()) {
      publish();
    }
    return;
  }
  // publish() below reads this round's samples from the snapshot; nothing may read it after,
  // and the collector gets its buffer back for the next one.
  round_snapshot_ = &*snap;
  struct ClearRoundSnapshot {
    const collect::Snapshot*& p;
    collect::Collector& collector;
    collect::Snapshot& snap;
    ~ClearRoundSnapshot() {
      p = nullptr;
      collector.recycle(std::move(snap));
    }
  } clear_round_snapshot{round_snapshot_, *collector_, *snap};
  bpf_drops_ = snap->stats.map_drops;
  bpf_lock_skips_ = snap->stats.map_lock_skips;
  if (snap->stats.unmeasured_cpus > bpf_unmeasured_cpus_) {
    log()->warn(
        "{} CPU(s) run past the {} colod's BPF maps were sized for at start (brought online "
        "since): what runs there is not measured until colod restarts",
        snap->stats.unmeasured_cpus, snap->stats.sched_cpus);
  }
  bpf_unmeasured_cpus_ = snap->stats.unmeasured_cpus;
  if (snap->stats.kernel_sum_errors > bpf_kernel_sum_errors_) {
    // The summing iterator failed mid-run: the collector has fallen back to userspace sums.
    log()->warn("{}", collector_->readNote());
  }
  bpf_kernel_sum_errors_ = snap->stats.kernel_sum_errors;
  bpf_delete_errors_ = snap->stats.map_delete_errors;
  bpf_deletes_pending_ = snap->stats.map_deletes_pending;
  bpf_slots_moved_ = snap->stats.slots_moved;
  bpf_slot_move_errors_ = snap->stats.slot_move_errors;
  bpf_map_bytes_ = snap->stats.bpf_map_bytes;

  policy::Snapshot ps;
  ps.containers = std::move(spare_samples_);
  spare_samples_ = {};
  ps.containers.clear();
  ps.containers.reserve(snap->cgroups.size());
  ps.now_ns =
      std::chrono::duration_cast<std::chrono::nanoseconds>(snap->now.time_since_epoch()).count();
  ps.interval_ns = snap->interval.count();
  ps.event_round = reason != RoundReason::Timer;
  ps.node_cpus = static_cast<int>(node_cpus_.size());
  ps.node_cpu_list = node_cpus_;
  auto container_of = [this](uint64_t cgid) -> std::string {
    auto it = by_cgroup_.find(cgid);
    return it == by_cgroup_.end() ? std::string() : it->second->first;
  };
  ++rounds_;
  run_ns_.clear();
  for (const auto& cg : snap->cgroups) {
    if (const uint64_t run = meanRunNs(cg); run > 0) {
      run_ns_.emplace_back(cg.id, run);
    }
  }
  std::sort(run_ns_.begin(), run_ns_.end());
  auto run_ns_of = [this](uint64_t cgid) -> uint64_t {
    auto it =
        std::lower_bound(run_ns_.begin(), run_ns_.end(), std::pair<uint64_t, uint64_t>{cgid, 0});
    return it != run_ns_.end() && it->first == cgid ? it->second : 0;
  };
  for (const auto& cg : snap->cgroups) {
    auto it = by_cgroup_.find(cg.id);
    if (it == by_cgroup_.end()) {
      continue;
    }
    const std::string& id = it->second->first;
    Known& k = it->second->second;
    double psi_span = 1.0;
    if (cg.cpu_pressure && k.cpu_some_total_us != 0 && snap->interval.count() > 0) {
      psi_span = std::chrono::duration<double>(snap->now - k.cpu_some_at) /
                 std::chrono::duration<double>(snap->interval);
    }
    auto sample = toContainerSample(id, cg, container_of, k.cpu_some_total_us, psi_span, run_ns_of);
    if (cg.cpu_pressure) {
      k.cpu_some_total_us = cg.cpu_pressure->some.total_us;
      k.cpu_some_at = snap->now;
    }
    for (std::size_t i = 0; i < collect::kHistSlots; ++i) {
      k.runq_slots[i] += cg.runq_hist[i];
    }
    k.runq_sum_ns += cg.runq.total_ns;
    k.preemptions += cg.involuntary_switches;
    if (cg.throttling) {
      k.throttled_periods += cg.throttling->nr_throttled;
      k.throttled_ns += cg.throttling->throttled_ns;
    }
    k.reclaim_ns += cg.reclaim_stall_ns;
    if (!cg.preempted_by.empty()) {
      k.aggressors = cg.preempted_by;
      k.aggressors_round = rounds_;
    }
    k.last_index = static_cast<uint32_t>(&cg - snap->cgroups.data());
    k.last_round = rounds_;
    ps.containers.push_back(std::move(sample));
  }
  // A known container without activity had a quiet interval: the engine must see it (relaxing
  // needs quiet intervals of the victim). One without a cgroup was not measured at all.
  ps.absent_quiet = true;
  if (unresolved_ > 0) {  // else no walk of every container each tick
    for (const auto& [id, k] : known_) {
      if (k.cgroup_id == 0) {
        ps.unmeasured.push_back(id);
      }
    }
  }
  if (recorders_.active()) {
    recorders_.broadcast(policy::encodeSnapshot(ps), true);
  }

  policy::RoundResult round;
  {
    std::lock_guard lk(engine_mu_);
    round = engine_->evaluate(ps);
  }
  handleDecisions(round);
  spare_samples_ = std::move(ps.containers);  // the engine holds no sample past evaluate()
  // Publishing copies every container's view: only for a reader waiting for one (ViewStore),
  // here, where this round's samples are at hand.
  if (views_.wanted()) {
    publish();
  }
  if (reason == RoundReason::Timer && tick_no_ % 10 == 0) {
    // Once a second: the collector's per-tick map dumps (~1.5 MB with 1000 containers) and
    // any view given up are free heap now; without a trim glibc keeps those pages resident
    // for the life of the process (1000 containers: RSS 35.2 -> 33.4 MiB). Well under a
    // millisecond; the pages fault back in as the next tick reuses them.
    ::malloc_trim(0);
  }
  const auto took = Clock::now() - t0;
  if (took > cfg()->daemon.interval) {
    ++tick_overruns_;
    log()->debug("tick took {} ms",
                 std::chrono::duration_cast<std::chrono::milliseconds>(took).count());
  }
}

void Daemon::Impl::handleDecisions(const policy::RoundResult& round) {
  for (const auto& f : round.findings) {
    // Each finding once until it stops being reported (a finding repeats every interval).
    if (findings_seen_.emplace(f.container_id, f.rule).second) {
      log()->info("finding container={} rule={} {}", f.container_id.substr(0, 12), f.rule,
                  f.message);
    }
  }
  if (findings_seen_.size() > 4096) {
    findings_seen_.clear();
  }
  if (round.decisions.empty()) {
    commitOverlays(&round);  // confirmed releases and base changes still reach the journal
    return;
  }
  const auto conf = cfg();
  // Containers listed from the cgroup tree (no runtime has synchronized yet) are observed only:
  // their tier is a guess from the QoS class and nothing may be queued for a runtime that has
  // never said what it runs.
  const Mode mode = registry_source_.discovering() ? Mode::ObserveOnly : conf->daemon.mode;
  for (const auto& d : round.decisions) {
    const std::string kind(policy::decisionKindName(d.kind));
    const std::string values = describeResources(d.new_values);
    std::string outcome;
    if (d.dry_run || mode == Mode::DryRun) {
      outcome = "dry-run";
    } else if (mode == Mode::ObserveOnly) {
      outcome = "observe-only";
    } else if (!nri_connected_) {
      // Kept, journaled and sent when the runtime is back: nothing decided is lost.
      outcome = "pending (runtime away)";
    } else {
      outcome = "pending";
    }
    // Every decision is logged exactly once, with its reason.
    log()->info(
        "decision seq={} kind={} lever={} target={} victim={} values=\"{}\" rule={} outcome={} "
        "reason=\"{}\"",
        d.seq, kind, policy::leverName(d.lever),
        d.target_name.empty() ? d.target_id : d.target_name,
        d.victim_name.empty() ? d.victim_id : d.victim_name, values, d.rule, outcome,
        d.explanation);
    v1::Decision p;
    p.set_unix_ms(unixMs());
    p.set_seq(d.seq);
    p.set_container_id(d.target_id);
    p.set_container(d.target_name);
    p.set_kind(kind + "/" + std::string(policy::leverName(d.lever)));
    p.set_reason(d.explanation.empty() ? d.rule : d.explanation);
    p.set_values(values);
    p.set_outcome(outcome);
    p.set_victim_id(d.victim_id);
    p.set_victim(d.victim_name);
    p.set_lever(std::string(policy::leverName(d.lever)));
    p.set_rung(static_cast<uint32_t>(d.rung + 1));
    decisions_.add(std::move(p), kind);
    if (outcome == "observe-only") {
      // Not applied: the engine must not believe it is in force.
      std::lock_guard lk(engine_mu_);
      engine_->reportApplyFailure(d);
    } else if (outcome.rfind("pending", 0) == 0) {
      auto& seqs = awaiting_[d.target_id];
      seqs.push_back(d.seq);
      if (seqs.size() > 64) {
        seqs.erase(seqs.begin());  // bounded: a container that never converges keeps the newest
      }
    }
  }
  commitOverlays(&round);
}

// ---------------------------------------------------------------------------------------------
// Publishing (end of tick) and the control API

void Daemon::Impl::publish() {
  const auto conf = cfg();
  ViewInputs in;
  in.unix_ms = unixMs();
  in.node_cpus = node_cpus_.size();
  in.interval_ms = conf->daemon.interval.count();
  std::set<std::string> managed;
  for (const auto& e : actuator_->entries()) {
    managed.insert(e.id);
  }
  const ReconcileStats rs = actuator_->stats();
  std::vector<const std::pair<const std::string, Known>*> order;
  order.reserve(known_.size());
  for (const auto& entry : known_) {
    order.push_back(&entry);
  }
  in.row_count = order.size();
  in.fill_row = [&](std::size_t i, ViewRow& row) {
    const auto& [id, k] = *order[i];
    row.id = id;
    row.name = k.containerName();
    row.pod = std::string(k.podName());
    row.pod_namespace = std::string(k.podNamespace());
    row.pod_uid = std::string(k.podUid());
    row.tier = k.tier;
    row.cgroup_id = k.cgroup_id;
    row.cgroup_rel = k.rel;
    // What the runtime has now (colod's overlay included), not the engine's base view; the CPU
    // fields the view shows only (toPolicyResources copies the unified map too, per row).
    const nri::CpuResources& cpu = k.ctr->resources.cpu;
    row.resources.cpu_shares = cpu.shares;
    row.resources.cpu_quota = cpu.quota ? cpu.quota : std::optional<int64_t>(-1);
    row.resources.cpu_period = cpu.period;
    row.resources.cpuset_cpus.reset();
    if (!cpu.cpus.empty()) {
      row.resources.cpuset_cpus = cpu.cpus;
    }
    if (row.resources.cpuset_cpus) {
      if (auto cpus = policy::parseCpuList(*row.resources.cpuset_cpus)) {
        row.cpuset_cpus = cpus->size();
      }
    }
    row.managed = managed.count(id) != 0;
    row.runq_slots = k.runq_slots;
    row.runq_sum_ns = k.runq_sum_ns;
    row.preemptions = k.preemptions;
    row.throttled_periods = k.throttled_periods;
    row.throttled_ns = k.throttled_ns;
    row.reclaim_ns = k.reclaim_ns;
    if (round_snapshot_ != nullptr && k.last_round != 0 && k.last_round == rounds_ &&
        k.last_index < round_snapshot_->cgroups.size()) {
      row.last = &round_snapshot_->cgroups[k.last_index];
    }
    if (aggressorsCurrent(k.aggressors_round, rounds_, kFilesEveryNTicks)) {
      for (const auto& a : k.aggressors) {
        if (row.preempted_by.size() >= 3) {
          break;
        }
        auto it = by_cgroup_.find(a.cgroup_id);
        row.preempted_by.emplace_back(it != by_cgroup_.end() ? it->second->second.display
                                                             : (a.path.empty() ? "host" : a.path),
                                      a.preemptions);
      }
    }
  };
  auto& d = in.daemon;
  d.decisions_by_kind = decisions_.countsByKind();
  d.nri_connected = nri_connected_;
  d.nri_reconnects = nri_reconnects_;
  d.updates_sent = rs.updates_applied;
  {
    const UpdateLatency lat = actuator_->updateLatency();
    static_assert(kUpdateLatencySlots == metrics::kLog2Slots);
    std::copy(lat.slots.begin(), lat.slots.end(), d.update_rtt_slots.begin());
    d.update_rtt_sum_seconds = lat.sum_seconds;
  }
  {
    uint64_t failed = 0;
    for (const auto& [reason, n] : rs.failures) {
      failed += reason == "not_connected" ? 0 : n;
    }
    d.update_failures = failed;
  }
  d.updates_dropped = updates_dropped_ + rs.dropped_full;
  d.admissions = admissions_;
  d.admission_deferred = admission_deferred_;
  {
    std::lock_guard lk(conflicts_mu_);
    d.plugin_conflicts = plugin_conflicts_;
  }
  d.reconcile_tracked = rs.tracked;
  d.reconcile_pending = rs.pending;
  d.reconcile_oldest_pending_seconds = static_cast<double>(rs.oldest_pending_ns) / 1e9;
  d.reconcile_failures = rs.failures;
  d.reconcile_external_changes = rs.external_changes;
  d.journal_errors = journal_errors_;
  d.bpf_dropped_events = bpf_drops_;
  d.bpf_lock_skips = bpf_lock_skips_;
  d.bpf_unmeasured_cpus = bpf_unmeasured_cpus_;
  d.bpf_kernel_sum_errors = bpf_kernel_sum_errors_;
  d.bpf_delete_errors = bpf_delete_errors_;
  d.bpf_deletes_pending = bpf_deletes_pending_;
  d.bpf_slots_moved = bpf_slots_moved_;
  d.bpf_slot_move_errors = bpf_slot_move_errors_;
  d.bpf_map_bytes = bpf_map_bytes_;
  d.ticks = ticks_;
  d.tick_overruns = tick_overruns_;
  d.event_wakeups = event_wakeups_;
  d.watched_cgroups = watched_.size();
  d.every_tick_cgroups = every_tick_.size();
  d.event_rounds = event_rounds_;
  d.realtime_demotions = realtimeDemotions();
  d.realtime_priority = d.realtime_demotions == 0 ? realtime_priority_ : 0;
  d.config_reloads = reloads_;
  d.config_reload_failures = reload_failures_;
  d.unresolved_containers = unresolved_;
  d.containers = known_.size();
  d.mode = std::string(modeName(effectiveMode()));

  auto& st = in.status;
  st.set_version(std::string(colod::kVersion));
  st.set_mode(d.mode);
  st.set_nri_connected(d.nri_connected);
  st.set_nri_reconnects(d.nri_reconnects);
  st.set_containers(d.containers);
  st.set_ticks(d.ticks);
  st.set_started_unix_ms(started_unix_ms_);
  st.set_config_path(options_.config_path);
  st.set_cgroup_mode(collect::toString(collector_->mode()));
  st.set_updates_sent(d.updates_sent);
  st.set_update_failures(d.update_failures);
  st.set_journal_entries(journal_entries_);
  st.set_reconcile_pending(rs.pending);
  st.set_reconcile_oldest_pending_ms(rs.oldest_pending_ns / 1000000);
  st.set_reconcile_tracked(rs.tracked);
  st.set_interval_ms(conf->daemon.interval.count());
  st.set_bpf_map_bytes(d.bpf_map_bytes);
  for (uint64_t n : d.update_rtt_slots) {
    st.add_update_rtt_slots(n);
  }
  views_.publish(buildView(in));
}

}  // namespace colod::daemon
