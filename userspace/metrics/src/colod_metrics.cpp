// SPDX-License-Identifier: Apache-2.0
#include "colod/metrics/colod_metrics.h"

#include <functional>

#include "colod/metrics/prom_text.h"

namespace colod::metrics {

namespace {

Labels containerLabels(const ContainerMetrics& c) {
  return {
      {"pod", c.pod}, {"namespace", c.namespace_}, {"container", c.container}, {"tier", c.tier}};
}

void perContainer(TextWriter& w,
                  std::span<const ContainerMetrics> containers,
                  const char* name,
                  MetricType type,
                  const char* help,
                  const std::function<std::optional<double>(const ContainerMetrics&)>& get) {
  w.family(name, type, help);
  for (const auto& c : containers) {
    if (auto v = get(c)) {
      w.sample(name, containerLabels(c), *v);
    }
  }
}

}  // namespace

std::string formatColodMetrics(const MetricsView& view) {
  TextWriter w;
  writeColodMetrics(view.daemon, view.containers, w);
  return w.take();
}

void writeColodMetrics(const DaemonMetrics& d,
                       std::span<const ContainerMetrics> containers,
                       TextWriter& w) {
  w.family("colod_runqueue_latency_seconds", MetricType::Histogram,
           "Time tasks of the container waited runnable on a run queue before running.");
  for (const auto& c : containers) {
    w.log2Histogram("colod_runqueue_latency_seconds", containerLabels(c), c.runq_slots, 1e-6,
                    c.runq_sum_seconds);
  }
  w.family("colod_nri_update_duration_seconds", MetricType::Histogram,
           "UpdateContainers calls the runtime answered, from colod's send to the reply.");
  w.log2Histogram("colod_nri_update_duration_seconds", {}, d.update_rtt_slots, 1e-6,
                  d.update_rtt_sum_seconds);
  perContainer(w, containers, "colod_preemptions_total", MetricType::Counter,
               "Involuntary context switches of the container's runnable tasks.",
               [](const ContainerMetrics& c) { return static_cast<double>(c.preemptions); });
  perContainer(w, containers, "colod_throttled_periods_total", MetricType::Counter,
               "CFS periods in which the container was throttled (cpu.stat nr_throttled).",
               [](const ContainerMetrics& c) { return static_cast<double>(c.throttled_periods); });
  perContainer(w, containers, "colod_throttled_seconds_total", MetricType::Counter,
               "Time the container spent throttled by its CFS quota.",
               [](const ContainerMetrics& c) { return c.throttled_seconds; });
  perContainer(w, containers, "colod_reclaim_stall_seconds_total", MetricType::Counter,
               "Time the container's tasks stalled in memory reclaim.",
               [](const ContainerMetrics& c) { return c.reclaim_stall_seconds; });
  perContainer(w, containers, "colod_cpuset_cpus", MetricType::Gauge,
               "Number of CPUs in the container's current cpuset.",
               [](const ContainerMetrics& c) -> std::optional<double> {
                 if (c.cpuset_cpus) {
                   return static_cast<double>(*c.cpuset_cpus);
                 }
                 return std::nullopt;
               });
  perContainer(w, containers, "colod_cpu_quota_cpus", MetricType::Gauge,
               "The container's CFS quota in CPUs (quota/period); absent when unlimited.",
               [](const ContainerMetrics& c) { return c.quota_cpus; });
  perContainer(w, containers, "colod_cpu_shares", MetricType::Gauge,
               "The container's CPU shares (weight), as last known.",
               [](const ContainerMetrics& c) -> std::optional<double> {
                 if (c.cpu_shares) {
                   return static_cast<double>(*c.cpu_shares);
                 }
                 return std::nullopt;
               });

  w.family("colod_decisions_total", MetricType::Counter, "Decisions taken, by kind.");
  for (const auto& [kind, n] : d.decisions_by_kind) {
    w.sample("colod_decisions_total", {{"kind", kind}}, static_cast<double>(n));
  }

  struct Scalar {
    const char* name;
    MetricType type;
    const char* help;
    double value;
  };
  const Scalar scalars[] = {
      {"colod_nri_connected", MetricType::Gauge, "1 when connected to the runtime over NRI.",
       d.nri_connected ? 1.0 : 0.0},
      {"colod_nri_reconnects_total", MetricType::Counter, "NRI connections re-established.",
       static_cast<double>(d.nri_reconnects)},
      {"colod_nri_updates_sent_total", MetricType::Counter,
       "Container updates sent to the runtime.", static_cast<double>(d.updates_sent)},
      {"colod_nri_update_failures_total", MetricType::Counter,
       "UpdateContainers calls that failed (each attempt counts; see "
       "colod_reconcile_failures_total for why).",
       static_cast<double>(d.update_failures)},
      {"colod_nri_updates_dropped_total", MetricType::Counter,
       "Overlays refused because the bound on tracked containers was reached.",
       static_cast<double>(d.updates_dropped)},
      {"colod_admissions_total", MetricType::Counter,
       "Containers placed by colod's CreateContainer reply (admission placement).",
       static_cast<double>(d.admissions)},
      {"colod_admission_deferred_total", MetricType::Counter,
       "Admission placements (partly) left out of the creation reply -- a field the kubelet or "
       "another plugin set, or a decision after the reply -- and applied by an update instead.",
       static_cast<double>(d.admission_deferred)},
      {"colod_reconcile_tracked", MetricType::Gauge,
       "Containers on which colod holds or is releasing an overlay.",
       static_cast<double>(d.reconcile_tracked)},
      {"colod_reconcile_pending", MetricType::Gauge,
       "Containers whose runtime spec differs from what colod wants (updates pending).",
       static_cast<double>(d.reconcile_pending)},
      {"colod_reconcile_oldest_pending_seconds", MetricType::Gauge,
       "Age of the oldest pending container update (0 when none).",
       d.reconcile_oldest_pending_seconds},
      {"colod_reconcile_external_changes_total", MetricType::Counter,
       "Changes to fields colod overlays made by someone else (kubelet resizes), taken as the "
       "new base.",
       static_cast<double>(d.reconcile_external_changes)},
      {"colod_journal_errors_total", MetricType::Counter,
       "Journal writes that failed (new restrictions are not sent until one succeeds).",
       static_cast<double>(d.journal_errors)},
      {"colod_bpf_dropped_events_total", MetricType::Counter,
       "BPF map updates that failed because a map was full.",
       static_cast<double>(d.bpf_dropped_events)},
      {"colod_bpf_lock_skips_total", MetricType::Counter,
       "BPF map updates the kernel refused because the CPU already held the map's bucket lock "
       "(a program run in an interrupt met a map operation in progress): one event each, rare, "
       "not a full map.",
       static_cast<double>(d.bpf_lock_skips)},
      {"colod_bpf_unmeasured_cpus", MetricType::Gauge,
       "CPUs running past the ones colod's BPF maps were sized for at start (the present CPUs "
       "then; one brought online since): what runs there is not measured until colod restarts.",
       static_cast<double>(d.bpf_unmeasured_cpus)},
      {"colod_bpf_delete_errors_total", MetricType::Counter,
       "Failed removals of a vanished cgroup's state from the BPF maps (each is retried).",
       static_cast<double>(d.bpf_delete_errors)},
      {"colod_bpf_deletes_pending", MetricType::Gauge,
       "Removals from the BPF maps waiting for their retry.",
       static_cast<double>(d.bpf_deletes_pending)},
      {"colod_bpf_slots_moved_total", MetricType::Counter,
       "Cgroups moved to a fresh BPF map slot because theirs was marked on many CPUs (the "
       "kernel's sum then adds only the CPUs they ran on since).",
       static_cast<double>(d.bpf_slots_moved)},
      {"colod_bpf_slot_move_errors_total", MetricType::Counter,
       "Slot moves the kernel refused (the cgroup stays in its slot), and old slots whose last "
       "read failed (what they gained after their last read is not counted).",
       static_cast<double>(d.bpf_slot_move_errors)},
      {"colod_bpf_kernel_sum_errors_total", MetricType::Counter,
       "Reads of the in-kernel summing iterator that failed; after the first, colod sums the "
       "per-CPU copies in userspace for the rest of its run (more bytes read per tick).",
       static_cast<double>(d.bpf_kernel_sum_errors)},
      {"colod_bpf_map_bytes", MetricType::Gauge,
       "Kernel memory of colod's BPF maps (per-CPU values for every possible CPU included), as "
       "the kernel reports it (memlock); charged to colod's memory cgroup, not in its RSS.",
       static_cast<double>(d.bpf_map_bytes)},
      {"colod_ticks_total", MetricType::Counter, "Policy evaluation ticks.",
       static_cast<double>(d.ticks)},
      {"colod_tick_overruns_total", MetricType::Counter,
       "Ticks that took longer than the interval.", static_cast<double>(d.tick_overruns)},
      {"colod_event_wakeups_total", MetricType::Counter,
       "Wakeups from the BPF side: a protected container's run-queue wait crossed the threshold.",
       static_cast<double>(d.event_wakeups)},
      {"colod_event_rounds_total", MetricType::Counter,
       "Decision rounds run on a wakeup, between ticks (at most one per 20 ms).",
       static_cast<double>(d.event_rounds)},
      {"colod_realtime_priority", MetricType::Gauge,
       "SCHED_FIFO priority of colod's reaction path (loop, actuator, NRI); 0: SCHED_OTHER "
       "(daemon.realtime_priority 0, refused at start, or demoted by the watchdog).",
       static_cast<double>(d.realtime_priority)},
      {"colod_realtime_demotions_total", MetricType::Counter,
       "Times the watchdog moved colod's realtime threads back to SCHED_OTHER (a thread ran "
       "200 ms without blocking).",
       static_cast<double>(d.realtime_demotions)},
      {"colod_watched_cgroups", MetricType::Gauge,
       "Protected cgroups whose run-queue wait wakes colod between ticks.",
       static_cast<double>(d.watched_cgroups)},
      {"colod_every_tick_cgroups", MetricType::Gauge,
       "Cgroups whose cpu.stat is read at every tick (the victims and the containers colod "
       "restricts); the others at a slower cadence.",
       static_cast<double>(d.every_tick_cgroups)},
      {"colod_config_reloads_total", MetricType::Counter, "Successful configuration reloads.",
       static_cast<double>(d.config_reloads)},
      {"colod_config_reload_failures_total", MetricType::Counter,
       "Rejected configuration reloads (the running configuration was kept).",
       static_cast<double>(d.config_reload_failures)},
      {"colod_unresolved_containers", MetricType::Gauge,
       "Known containers whose cgroup could not be found.",
       static_cast<double>(d.unresolved_containers)},
      {"colod_containers", MetricType::Gauge, "Containers known from the runtime.",
       static_cast<double>(d.containers)},
      {"colod_process_cpu_seconds_total", MetricType::Counter,
       "CPU time (user+system) used by colod itself.", d.cpu_seconds},
      {"colod_process_resident_memory_bytes", MetricType::Gauge, "Resident memory of colod.",
       static_cast<double>(d.rss_bytes)},
  };
  for (const auto& s : scalars) {
    w.family(s.name, s.type, s.help);
    w.sample(s.name, {}, s.value);
  }
  w.family("colod_reconcile_failures_total", MetricType::Counter,
           "Failed convergence attempts, by reason (refused by the runtime, outcome unknown, "
           "runtime not connected). Every one is retried.");
  for (const char* reason : {"refused", "unknown", "not_connected"}) {
    auto it = d.reconcile_failures.find(reason);
    w.sample("colod_reconcile_failures_total", {{"reason", reason}},
             it == d.reconcile_failures.end() ? 0.0 : static_cast<double>(it->second));
  }
  w.family("colod_plugin_conflicts_total", MetricType::Counter,
           "Fields colod left to another NRI plugin that owns them (the runtime reported the "
           "owner, or refused colod's write naming it), by that plugin.");
  for (const auto& [plugin, n] : d.plugin_conflicts) {
    w.sample("colod_plugin_conflicts_total", {{"plugin", plugin}}, static_cast<double>(n));
  }
  w.family("colod_mode", MetricType::Gauge, "The operating mode (1 for the current one).");
  for (const char* m : {"act", "dry-run", "observe-only"}) {
    w.sample("colod_mode", {{"mode", m}}, d.mode == m ? 1.0 : 0.0);
  }
  w.finish();
}

}  // namespace colod::metrics
