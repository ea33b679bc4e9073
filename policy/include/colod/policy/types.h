// SPDX-License-Identifier: Apache-2.0
// Input types of the policy engine: per-interval measurements (Snapshot) and the container
// registry (ContainerInfo). Plain data, std only; the caller fills them (style rule 6).
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace colod::policy {

// Number of log2 µs slots of the run-queue histogram (bpf MAX_SLOTS, style rule 25).
inline constexpr std::size_t kRunqSlots = 26;

// Scheduling tier of a container.
enum class Tier {
  Unknown,  // not classified (an unknown value is reported, never guessed)
  Ls,       // latency-sensitive: may be a victim, never throttled
  Be,       // best-effort: the only tier colod ever restricts
  System,   // node/system services: never touched
};

// Preemptions a container suffered during the interval, attributed to the container whose task
// took the CPU ("aggressor"). aggressor_id is a container id, or "" for host/system tasks.
struct Preemption {
  std::string aggressor_id;
  uint64_t count = 0;    // times the aggressor preempted a task of the victim
  uint64_t wait_ns = 0;  // run-queue wait after those preemptions attributed to the aggressor
  // Waits of the victim's tasks after a wakeup while the aggressor held the CPU (measured for
  // protected containers). They say what the victim waits behind (the wait split: BE, itself,
  // uncontrolled work), most of it when a busy hog holds the CPU. Against one BE they are blame
  // only from a minimum (20 x min_blame_wait_us, less as the victim queues deeper): a light BE's
  // bursts put a woken request behind it now and then (blame.sh light).
  uint64_t behind_waits = 0;
  uint64_t behind_ns = 0;
};

// A pressure-stall (PSI) line: avg10 in percent and the delta of `total` (µs) over the interval.
struct Psi {
  double avg10 = 0.0;
  uint64_t total_delta_us = 0;
};

// Per-container measurements over one interval. All counters are deltas over the interval.
struct ContainerSample {
  std::string id;                                // container id (registry key)
  std::array<uint32_t, kRunqSlots> runq_hist{};  // slot i: latency in [2^i, 2^(i+1)) µs
  uint64_t runq_count = 0;                       // wake-ups measured (sum of runq_hist)
  uint64_t runq_p50_us = 0;
  uint64_t runq_p90_us = 0;
  uint64_t runq_p99_us = 0;
  uint64_t runq_max_us = 0;
  // Total run-queue wait of the container's tasks this interval (sum of all waits, exact; 0 =
  // unknown). runq_wait_ns / interval_ns = average number of its tasks waiting for a CPU: the
  // detection and verification signal that still works when its tasks are always runnable and
  // rarely wake up (few histogram samples).
  uint64_t runq_wait_ns = 0;
  std::vector<Preemption> preempted_by;  // may be empty when attribution is unavailable
  uint64_t oncpu_ns = 0;                 // CPU time consumed
  uint64_t nr_involuntary = 0;           // involuntary context switches
  uint64_t nr_throttled = 0;             // CFS periods throttled (cpu.stat nr_throttled delta)
  uint64_t throttled_ns = 0;             // CFS throttled time delta
  uint64_t reclaim_stall_ns = 0;         // direct-reclaim stall time of its tasks
  std::optional<Psi> psi_cpu_some;
  std::optional<Psi> psi_memory_some;
  std::optional<Psi> psi_memory_full;
  std::optional<uint64_t> memory_bytes;  // current memory usage
};

// One measurement interval. now_ns is supplied by the caller (the engine reads no clock) and
// must not go backwards between calls; interval_ns is the length of the measured interval.
struct Snapshot {
  int64_t now_ns = 0;
  int64_t interval_ns = 0;
  // A round run on a BPF wakeup between two timer ticks (the daemon's event rounds, tens of ms
  // apart): its data counts like any interval, but windows measured in ticks (a rung's
  // verification) count timer rounds only, or a burst of event rounds would judge a rung within
  // a fifth of its window.
  bool event_round = false;
  int node_cpus = 0;               // number of CPUs usable by containers
  std::vector<int> node_cpu_list;  // optional explicit list; empty means 0..node_cpus-1
  std::vector<ContainerSample> containers;
  // true: a registered container (Engine::upsertContainer) absent from `containers` had a
  // quiet interval (as if it came with an all-zero sample), except those named in
  // `unmeasured`, which were not measured at all (no cgroup yet); one only admitted
  // (Engine::admit, not in the caller's registry yet) was not measured either. false: an
  // absent container was not measured. The daemon sends the
  // containers that did something and says the rest were quiet, instead of an all-zero sample
  // for each (1000 containers: most of them, each a copied id, a hash lookup and ~300 bytes,
  // at every tick).
  bool absent_quiet = false;
  std::vector<std::string> unmeasured;
};

// Resource values of a container as NRI LinuxResources can carry them. An absent optional means
// "not set / unknown / not changed" (in a decision: leave as is).
struct Resources {
  std::optional<uint64_t> cpu_shares;      // cgroup v1 cpu.shares (v2 weight is derived)
  std::optional<int64_t> cpu_quota;        // µs per period; -1 = unlimited
  std::optional<uint64_t> cpu_period;      // µs
  std::optional<std::string> cpuset_cpus;  // kernel list format, e.g. "0-3,8"
  std::optional<std::string> cpuset_mems;
  std::optional<int64_t> memory_limit;         // bytes; -1 or absent = unlimited
  std::map<std::string, std::string> unified;  // cgroup v2 files (e.g. "cpu.idle")

  friend bool operator==(const Resources&, const Resources&) = default;
};

// The CFS quota of `r` in CPUs (quota / period, a 100 ms period when unset); no quota (unset, -1
// or 0) is unlimited: infinity. Compares caps set with different periods.
inline double quotaCpus(const Resources& r) {
  if (!r.cpu_quota || *r.cpu_quota <= 0) {
    return std::numeric_limits<double>::infinity();
  }
  const uint64_t period = r.cpu_period && *r.cpu_period > 0 ? *r.cpu_period : 100'000;
  return static_cast<double>(*r.cpu_quota) / static_cast<double>(period);
}

// What the registry knows about a container (from NRI). Keyed by id.
struct ContainerInfo {
  std::string id;
  std::string pod_name;
  std::string pod_namespace;
  std::string pod_uid;
  std::string container_name;
  std::map<std::string, std::string> pod_labels;
  std::map<std::string, std::string> pod_annotations;
  std::map<std::string, std::string> container_labels;
  std::map<std::string, std::string> container_annotations;
  std::string
      cgroup_parent;  // e.g. "kubepods-besteffort-pod<uid>.slice" or "/kubepods/burstable/pod<uid>"
  std::string cgroup_path;  // optional, informational
  // Tier set by the caller; when absent the engine classifies with classifyTier().
  std::optional<Tier> tier;
  Resources resources;      // current values (cpuset_cpus in list format)
  std::vector<int> cpuset;  // parsed resources.cpuset_cpus; empty = parse it / all CPUs
  // kubelet static CPU manager gave it exclusive CPUs: never touched (see inferExclusiveCpus).
  bool exclusive_cpus = false;

  friend bool operator==(const ContainerInfo&, const ContainerInfo&) = default;
};

}  // namespace colod::policy
