// SPDX-License-Identifier: Apache-2.0
// Output types of the policy engine: per-container decisions, and findings that explain a round.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "colod/policy/types.h"

namespace colod::policy {

// What a decision does.
enum class DecisionKind {
  Engage,    // first restriction of an antagonist for a victim
  Escalate,  // the previous rung did not help (verified) or not enough: next rung
  Undo,      // a rung that did not help is taken back (original values of that lever)
  Relax,     // the victim has been quiet: one rung is given back
  Restore,   // everything back to the original values (daemon stop, container gone, config)
};

// The lever a decision moves.
enum class Lever {
  CpuShares,    // cpu.shares / cpu.weight of the BE container
  Cpuset,       // cpuset.cpus of the BE container, away from the victim's CPUs
  CpuQuota,     // CFS quota/period of the BE container
  MemoryLimit,  // memory limit of the BE container (memory-pressure victims)
};

[[nodiscard]] std::string_view decisionKindName(DecisionKind kind);  // "engage", ...
[[nodiscard]] std::string_view leverName(Lever lever);  // "cpu_shares", "cpuset", "cpu_quota", ...

// One antagonist with the evidence that ranked it.
struct Antagonist {
  std::string id;
  std::string name;  // "namespace/pod/container" when known
  // CPU antagonists: the evidence over the blame window (actions.blame_window_intervals, decayed
  // sums): preemptions of the victim by it, the victim's wait attributed to it, and its run time
  // on the CPUs the victim may use.
  uint64_t preemptions = 0;
  uint64_t wait_ns = 0;
  uint64_t oncpu_ns = 0;
  uint64_t memory_growth_bytes = 0;  // memory victims: its growth this interval
  double score = 0.0;                // share of the evidence, 0..1

  friend bool operator==(const Antagonist&, const Antagonist&) = default;
};

// The numbers behind a decision (victim side), for `coloctl explain` and metrics.
struct Evidence {
  uint64_t victim_p99_us = 0;    // latest interval
  uint64_t threshold_us = 0;     // effective threshold (min of absolute and relative)
  uint64_t baseline_p99_us = 0;  // quiet baseline (EWMA), 0 if none yet
  uint64_t engaged_p99_us = 0;   // victim p99 when the episode began
  double psi_cpu_some_avg10 = 0.0;
  uint64_t reclaim_stall_ns = 0;
  uint64_t victim_throttled_ns = 0;
  int hits = 0;             // intervals over threshold in the window
  int window = 0;           // window length N
  int quiet_intervals = 0;  // consecutive quiet intervals (relax)
  // Run-queue wait load of the victim (average number of its tasks waiting: wait_ns /
  // interval_ns) in the latest interval, and its level before the current rung was applied.
  double victim_wait_load = 0.0;
  double wait_load_before = 0.0;
  double quota_budget_cpus = 0.0;  // aggregate BE quota budget in force (0 = none)

  friend bool operator==(const Evidence&, const Evidence&) = default;
};

// One change to one container. new_values holds only the fields to change; original_values
// holds the values to restore (the values before colod first touched the container).
struct Decision {
  uint64_t seq = 0;   // strictly increasing per engine
  int64_t at_ns = 0;  // Snapshot::now_ns of the round
  DecisionKind kind = DecisionKind::Engage;
  Lever lever = Lever::CpuShares;
  std::string target_id;
  std::string target_name;  // "namespace/pod/container" when known
  Resources new_values;
  Resources original_values;
  std::string victim_id;  // empty for Restore of everything
  std::string victim_name;
  std::vector<Antagonist> antagonists;  // ranked, best first
  Evidence evidence;
  int rung = 0;             // index in the ladder (0-based)
  std::string rule;         // the rule that fired, e.g. "runq_p99_over_threshold"
  std::string explanation;  // one sentence a person reads
  bool dry_run = false;     // computed and reported, must not be applied

  friend bool operator==(const Decision&, const Decision&) = default;
};

// Something the engine noticed that is not (or not only) a change: a victim, self-inflicted
// latency, an unknown tier value, a skipped action and why. For logs and `coloctl explain`.
struct Finding {
  std::string container_id;
  std::string rule;     // e.g. "self_inflicted_throttling", "unknown_tier", "floor_reached"
  std::string message;  // one sentence

  friend bool operator==(const Finding&, const Finding&) = default;
};

// The result of one round.
struct RoundResult {
  std::vector<Decision> decisions;
  std::vector<Finding> findings;
};

// A restriction already applied (e.g. from the daemon's journal after a crash), to seed the
// engine (Engine::seedApplied) and to list current state (Engine::applied).
struct AppliedAction {
  std::string target_id;
  std::string victim_id;
  Lever lever = Lever::CpuShares;
  int rung = 0;
  Resources applied_values;
  Resources original_values;
  // The one quota step taken while the victim waits behind the host (rule uncontrolled_cap):
  // never tightened, so a reseed after a restart must know it from a plain quota step.
  bool uncontrolled_cap = false;

  friend bool operator==(const AppliedAction&, const AppliedAction&) = default;
};

// Text of a decision for logs and the replay tool: one line.
[[nodiscard]] std::string formatDecision(const Decision& decision);
// Text of a finding made in the round at `at_ns` (the replay tool's --findings): one line.
[[nodiscard]] std::string formatFinding(const Finding& finding, int64_t at_ns);

}  // namespace colod::policy
