// SPDX-License-Identifier: Apache-2.0
// The colod metric set: a plain data view filled by the daemon each tick, and the pure
// formatter that turns it into the Prometheus text exposition (tested from data).
//
// Every per-container family carries the labels pod, namespace, container and tier. All
// counters are cumulative since colod started (the daemon accumulates the per-tick deltas).
#pragma once

#include <array>
#include <cstdint>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "colod/metrics/prom_text.h"

namespace colod::metrics {

inline constexpr std::size_t kLog2Slots = 26;

struct ContainerMetrics {
  std::string pod;
  std::string namespace_;
  std::string container;
  std::string tier;  // "ls", "be", "unknown" ... as the policy names it

  // Run-queue latency, microsecond log2 slots, cumulative counts since colod started.
  std::array<uint64_t, kLog2Slots> runq_slots{};
  double runq_sum_seconds = 0;
  uint64_t preemptions = 0;             // times a task of this container was preempted
  uint64_t throttled_periods = 0;       // cpu.stat nr_throttled
  double throttled_seconds = 0;         // cpu.stat throttled time
  double reclaim_stall_seconds = 0;     // direct + memcg reclaim stall
  std::optional<uint32_t> cpuset_cpus;  // number of CPUs in the current cpuset, if known
  std::optional<double> quota_cpus;     // quota / period, absent when unlimited
  std::optional<uint64_t> cpu_shares;
};

struct DaemonMetrics {
  std::map<std::string, uint64_t> decisions_by_kind;  // e.g. "throttle" -> 3
  bool nri_connected = false;
  uint64_t nri_reconnects = 0;
  uint64_t updates_sent = 0;
  uint64_t update_failures = 0;  // UpdateContainers attempts that failed
  uint64_t updates_dropped = 0;  // overlays refused by the tracked-container bound
  // UpdateContainers round trips (send -> the runtime's reply), microsecond log2 slots.
  std::array<uint64_t, kLog2Slots> update_rtt_slots{};
  double update_rtt_sum_seconds = 0;
  uint64_t admissions = 0;          // containers placed by the CreateContainer reply
  uint64_t admission_deferred = 0;  // placements left to an update after creation
  std::map<std::string, uint64_t> plugin_conflicts;  // other plugin ("NN-name") -> fields left
  // The reconciler (level-triggered actuator): containers whose runtime spec differs from what
  // colod wants, the age of the oldest, and failed convergence attempts by reason.
  uint64_t reconcile_tracked = 0;
  uint64_t reconcile_pending = 0;
  double reconcile_oldest_pending_seconds = 0;
  std::map<std::string, uint64_t> reconcile_failures;  // refused, unknown, not_connected
  uint64_t reconcile_external_changes = 0;
  uint64_t journal_errors = 0;
  uint64_t bpf_dropped_events = 0;     // BPF map updates that failed (maps full)
  uint64_t bpf_lock_skips = 0;         // BPF map updates refused for a held bucket lock (EBUSY)
  uint64_t bpf_unmeasured_cpus = 0;    // CPUs past the ones cg_sched was sized for (not measured)
  uint64_t bpf_delete_errors = 0;      // removals of vanished cgroups' map state that failed
  uint64_t bpf_deletes_pending = 0;    // those waiting for their retry now
  uint64_t bpf_slots_moved = 0;        // cgroups moved to a fresh slot to clear their CPU marks
  uint64_t bpf_slot_move_errors = 0;   // moves refused, and old slots whose last read failed
  uint64_t bpf_map_bytes = 0;          // kernel memory of colod's BPF maps (fdinfo memlock)
  uint64_t bpf_kernel_sum_errors = 0;  // reads of the summing iterator that failed (then userspace)
  uint64_t ticks = 0;
  uint64_t tick_overruns = 0;
  uint64_t event_wakeups = 0;       // wakeup events from the BPF side (protected cgroups waiting)
  uint64_t event_rounds = 0;        // decision rounds run on them (rate-limited)
  int realtime_priority = 0;        // SCHED_FIFO priority of the reaction path (0: SCHED_OTHER)
  uint64_t realtime_demotions = 0;  // times the watchdog moved it back to SCHED_OTHER
  uint64_t watched_cgroups = 0;     // protected cgroups whose wait wakes colod between ticks
  uint64_t every_tick_cgroups = 0;  // cgroups whose files are read every tick (victims, restricted)
  uint64_t config_reloads = 0;
  uint64_t config_reload_failures = 0;
  uint64_t unresolved_containers = 0;  // containers whose cgroup could not be found
  double cpu_seconds = 0;              // colod's own user+system CPU
  uint64_t rss_bytes = 0;
  uint64_t containers = 0;
  std::string mode;  // "act", "dry-run", "observe-only"
};

struct MetricsView {
  DaemonMetrics daemon;
  std::vector<ContainerMetrics> containers;
};

// Renders the whole exposition. Pure.
std::string formatColodMetrics(const MetricsView& view);
// The same document into `w` (with a sink: piece by piece), finished. Pure but for the sink.
void writeColodMetrics(const DaemonMetrics& daemon,
                       std::span<const ContainerMetrics> containers,
                       TextWriter& w);

}  // namespace colod::metrics
