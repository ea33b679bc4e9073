// SPDX-License-Identifier: Apache-2.0
// Policy configuration: plain structs with the defaults (documented in policy/README.md and
// policy/config/default.yaml), parsed from YAML text and validated with precise errors.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "colod/base/result.h"
#include "colod/policy/decision.h"
#include "colod/policy/types.h"

namespace colod::policy {

// Victim thresholds. A victim interval is one where
//   runq_p99 > min(runq_p99_us, max(baseline, baseline_floor_us) * baseline_factor)
// (the relative term only once a baseline exists), or PSI cpu some avg10 > psi_cpu_some_avg10
// (when > 0). Memory victims: reclaim stall per second of interval > reclaim_stall_us_per_s.
struct Thresholds {
  uint64_t runq_p99_us = 2000;
  double baseline_factor = 4.0;
  uint64_t baseline_floor_us = 250;
  double psi_cpu_some_avg10 = 0.0;           // percent; 0 disables the PSI trigger
  uint64_t reclaim_stall_us_per_s = 50'000;  // 5 % of the time in reclaim; 0 disables

  friend bool operator==(const Thresholds&, const Thresholds&) = default;
};

// Partial override of Thresholds (per tier in the config, per pod via annotations).
struct ThresholdOverride {
  std::optional<uint64_t> runq_p99_us;
  std::optional<double> baseline_factor;
  std::optional<uint64_t> baseline_floor_us;
  std::optional<double> psi_cpu_some_avg10;
  std::optional<uint64_t> reclaim_stall_us_per_s;

  friend bool operator==(const ThresholdOverride&, const ThresholdOverride&) = default;
};

// Per-pod annotation keys (pod or container annotations) overriding Thresholds.
inline constexpr std::string_view kAnnotationRunqP99 = "colod.io/runq-p99-threshold-us";
inline constexpr std::string_view kAnnotationBaselineFactor = "colod.io/baseline-factor";
inline constexpr std::string_view kAnnotationPsiCpuSome = "colod.io/psi-cpu-some-threshold";
inline constexpr std::string_view kAnnotationReclaimStall = "colod.io/reclaim-stall-us-per-s";

struct DetectionConfig {
  int window_intervals = 5;     // N
  int hit_intervals = 2;        // K (1 <= K <= N)
  uint64_t min_samples = 5;     // fewer run-queue samples in an interval: p99 not trusted
  double baseline_alpha = 0.2;  // EWMA weight of a quiet interval's p99
  std::vector<Tier> victim_tiers = {Tier::Ls};  // Ls and/or System
  // Self-inflicted: the victim's own throttled time is above this share of the interval, or at
  // least this share of the attributed wait comes from itself / non-BE containers.
  double self_throttle_fraction = 0.05;
  double self_wait_fraction = 0.5;
  // Run-queue wait signal (ContainerSample::runq_wait_ns, else PSI cpu some total): an interval
  // is also over threshold when the victim's wait load (average number of its tasks waiting,
  // wait_ns / interval_ns) is >= wait_load_min AND its wait share wait / (wait + on-CPU) is
  // >= wait_share, i.e. its tasks wait more than they run. wait_share 0 disables the signal.
  double wait_share = 0.5;
  double wait_load_min = 0.2;
  // A round over threshold on the wait signal whose queue depth (its wait over at least 20 ms,
  // in tasks: one request's wait credited in a round that followed the last by a millisecond is
  // not a deep queue) is >= severe_wait_load starts an episode alone, without K of N hits: a BE
  // turning busy puts the LS's tasks 1.4 deep at once, and a second hit is 20 ms (an event
  // round) to a tick later. The blame's minimum evidence still applies. 0 disables.
  double severe_wait_load = 1.0;

  friend bool operator==(const DetectionConfig&, const DetectionConfig&) = default;
};

// Admission placement (issue #8): a BE container created while LS containers need protection
// starts where the restriction in force would put it (restrict), or as the runtime asked (off).
enum class AdmissionMode : uint8_t { Restrict, Off };

struct ActionsConfig {
  std::vector<Lever> cpu_ladder = {Lever::CpuShares, Lever::Cpuset, Lever::CpuQuota};
  std::vector<Lever> memory_ladder = {Lever::MemoryLimit};
  int verify_intervals = 10;  // V: intervals to wait before judging a rung
  // Improved if fewer than half of the V intervals were hits, or the mean p99 <= ratio * p99 at
  // the rung, or the mean wait load <= ratio * wait load before the rung (backlog drains slowly).
  double improve_ratio = 0.7;
  int quiet_intervals = 10;           // M: quiet intervals before relaxing one rung
  int relax_cooldown_intervals = 5;   // between two relax steps of one victim
  int change_cooldown_intervals = 2;  // between two changes of one target
  int max_changes_per_round = 32;     // rate limit over the whole node
  int max_antagonists = 3;            // per victim
  double min_antagonist_score = 0.1;  // evidence share below which a BE is left alone
  int max_escalations = 8;            // per episode: rungs tried before giving up
  // A cpuset restriction of a BE that is idle when its rung is relaxed stays in place for up to
  // this many intervals (given back at once when the BE runs), so the next victim's episode
  // finds it there instead of moving it off and back again. 0: given back at the relax.
  int idle_hold_intervals = 600;
  // Blame (issue 19): evidence per (victim, BE) is summed over about this many intervals with
  // exponential decay (each interval weighs 1 - 1/N of the next), so a bursty antagonist keeps
  // its blame while idle. A BE is blamed only with at least min_blame_preemptions preemptions of
  // the victim and min_blame_wait_us of the victim's wait in that window (when the victim's
  // preemptions are attributed at all); below it nothing is restricted.
  int blame_window_intervals = 30;
  double min_blame_preemptions = 3;
  uint64_t min_blame_wait_us = 1000;
  AdmissionMode admission = AdmissionMode::Restrict;

  friend bool operator==(const ActionsConfig&, const ActionsConfig&) = default;
};

// Hard bounds: the engine never goes below them (BE must never starve).
struct FloorsConfig {
  uint64_t be_min_cpu_shares = 2;  // kernel minimum is 2
  int be_min_cpus = 1;
  uint64_t be_min_quota_millicores = 100;  // quota >= period * this / 1000, never 0
  // The aggregate BE quota budget never goes below this fraction of the node's CPUs.
  double be_min_quota_node_fraction = 0.1;
  int64_t be_min_memory_bytes = 256LL << 20;

  friend bool operator==(const FloorsConfig&, const FloorsConfig&) = default;
};

struct LeversConfig {
  uint64_t be_cpu_shares = 2;           // CpuShares rung target (clamped to the floor)
  double be_cpuset_max_fraction = 0.5;  // Cpuset rung when the victim is not pinned
  // CpuQuota rung: one aggregate budget for all BE containers capped, at most this fraction of
  // the node's CPUs and at most node CPUs - (LS demand + headroom); see policy/README.md.
  double be_quota_fraction = 0.5;
  double quota_headroom_fraction = 0.1;  // headroom kept above the LS demand, share of the node
  double quota_step_fraction = 0.25;     // tighten: budget *= 1 - step; relax: += step * node
  uint64_t quota_period_us = 100'000;
  double memory_step_fraction = 0.1;  // MemoryLimit rung: limit = usage * (1 - step)

  friend bool operator==(const LeversConfig&, const LeversConfig&) = default;
};

struct Config {
  bool dry_run = false;
  DetectionConfig detection;
  Thresholds thresholds;
  std::map<Tier, ThresholdOverride> tier_thresholds;  // Ls / System
  ActionsConfig actions;
  FloorsConfig floors;
  LeversConfig levers;

  friend bool operator==(const Config&, const Config&) = default;
};

// Checks cross-field constraints (ranges, K <= N, floors > 0, non-empty ladders without
// duplicates). EINVAL with "<file>: <key path>: <value>: <why>".
[[nodiscard]] Result<void> validateConfig(const Config& config, std::string_view file);

// Parses the policy section itself (the mapping with dry_run/detection/...). Missing keys take
// the defaults; unknown keys, wrong types and out-of-range values are EINVAL errors of the form
// "<file>:<line>:<col>: <key path>: <value>: <why>". `file` is only used in messages.
// `key_prefix` is prepended to key paths (e.g. "policy" when embedded in a daemon config).
[[nodiscard]] Result<Config> parsePolicySection(std::string_view yaml_text,
                                                std::string_view file,
                                                std::string_view key_prefix = "");

// Parses a whole document whose top level has a `policy:` mapping (other top-level keys are
// ignored: they belong to the daemon). A document without `policy:` gives the defaults.
[[nodiscard]] Result<Config> parseConfigDocument(std::string_view yaml_text, std::string_view file);

// Thresholds for a container: defaults, then the tier override, then pod and container
// annotations (container wins). Bad annotation values are ignored and reported in `problems`.
[[nodiscard]] Thresholds effectiveThresholds(const Config& config,
                                             Tier tier,
                                             const ContainerInfo& info,
                                             std::vector<std::string>* problems);

// The default configuration as commented YAML (same text as policy/config/default.yaml).
[[nodiscard]] std::string_view defaultConfigYaml();

// Parses lever / tier names used in the config ("cpu_shares", "ls", ...).
[[nodiscard]] std::optional<Lever> leverFromName(std::string_view name);
[[nodiscard]] std::optional<Tier> tierFromName(std::string_view name);

}  // namespace colod::policy
