// SPDX-License-Identifier: Apache-2.0
// The interference detector and decision engine. Pure: registry changes and snapshots in,
// decisions out; no clock, no I/O, no globals, no threads. Not thread-safe: one owner calls it.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "colod/base/result.h"
#include "colod/policy/config.h"
#include "colod/policy/decision.h"
#include "colod/policy/types.h"

namespace colod::policy {

// How long a container admitted at its creation may stay unregistered before it is taken as
// never created (its creation failed after colod's reply): the actuator's creation grace
// (ReconcilerOptions::creation_grace_ns), which drops the overlay placed on it at that moment.
inline constexpr int64_t kCreationGraceNs = 30'000'000'000;

class EngineState;  // private

// Counters for metrics export.
struct EngineStats {
  uint64_t rounds = 0;
  uint64_t decisions = 0;
  uint64_t victim_intervals = 0;
  uint64_t rate_limited = 0;     // changes deferred by max_changes_per_round / cooldowns
  uint64_t self_inflicted = 0;   // victim intervals explained by the victim itself
  uint64_t unknown_samples = 0;  // samples for containers not in the registry (ignored)
  uint64_t tracked_containers = 0;
  uint64_t active_episodes = 0;
  uint64_t episodes_started = 0;
  uint64_t admissions = 0;  // containers placed at creation (admission placement)
  // Episodes of a victim waiting mostly behind work colod does not control (host, system,
  // unlabelled or unknown cgroups, other LS): BE is left where it is and nothing escalates.
  uint64_t foreign_wait_episodes = 0;
};

// The evidence against one BE container for one victim over the blame window (decayed sums),
// and whether it was blamed: what `coloctl explain <be>` shows.
struct BlameView {
  std::string victim_id;
  std::string victim_name;
  double preemptions = 0;     // preemptions of the victim by it
  uint64_t wait_ns = 0;       // victim run-queue wait attributed to it
  uint64_t overlap_ns = 0;    // its run time on the CPUs the victim may use
  double score = 0;           // share of the evidence, 0..1 (latest ranking)
  bool blamed = false;        // ranked as an antagonist (restricted if a rung acts on it)
  bool restricted = false;    // a restriction for this victim is in force on it
  std::string why;            // why it was or was not blamed / restricted

  friend bool operator==(const BlameView&, const BlameView&) = default;
};

// Current view of a container, for `coloctl explain`.
struct ContainerView {
  ContainerInfo info;
  Tier tier = Tier::Unknown;
  std::string tier_source;
  Thresholds thresholds;
  uint64_t baseline_p99_us = 0;
  int hits_in_window = 0;
  bool victim = false;                      // in an active episode as the victim
  std::vector<AppliedAction> restrictions;  // applied to it (as a target)
  std::string last_explanation;             // last decision or finding sentence about it
  std::vector<BlameView> blame;             // a BE: the evidence against it, per victim
};

class Engine {
 public:
  // Validates the config (EINVAL on a bad one, see validateConfig()).
  [[nodiscard]] static Result<Engine> create(Config config);

  Engine(Engine&&) noexcept;
  Engine& operator=(Engine&&) noexcept;
  Engine(const Engine&) = delete;
  Engine& operator=(const Engine&) = delete;
  ~Engine();

  // Replaces the configuration if it is valid; otherwise returns EINVAL and keeps the old one.
  // Applied restrictions stay; new thresholds/ladders apply from the next round.
  [[nodiscard]] Result<void> setConfig(Config config);
  [[nodiscard]] const Config& config() const;

  // Registry changes. upsert adds or replaces (tier is re-classified). remove forgets the
  // container: restrictions it held as a victim are relaxed at the next evaluate(); restrictions
  // on it as a target are dropped without a decision (it no longer exists).
  void upsertContainer(ContainerInfo info);
  void removeContainer(std::string_view id);
  // The node's CPUs before the first evaluate() (each snapshot's list replaces them). A
  // container on all of them is then kept as "all" from its first upsert, not as a list of its
  // own (768 bytes a container on a 192-CPU node).
  void setNodeCpus(std::vector<int> cpus);

  // One round. Samples for ids not in the registry are ignored (counted). Deterministic: the
  // same sequence of calls gives the same output.
  [[nodiscard]] RoundResult evaluate(const Snapshot& snapshot);

  // Admission placement (issue #8): `info` is a container being created (registered here, as by
  // upsertContainer). When it is BE and admission is on, the decisions that place it where the
  // restrictions in force (or a running protected LS) say it must start: kind Engage, rule
  // "admission", already applied in the engine's view (applied() lists them). Empty: created as
  // asked. Off, not BE, or before the first evaluate() (the node's CPUs are unknown): empty.
  // A container admitted here that upsertContainer() has not registered kCreationGraceNs later
  // was never created: the evaluate() after that forgets it, with what it placed (a finding,
  // rule "never_created").
  [[nodiscard]] RoundResult admit(ContainerInfo info, int64_t now_ns);

  // Decisions that return every restricted container to its original values and clear all
  // episodes (for a clean daemon stop). Kind Restore, ordered by target id.
  [[nodiscard]] std::vector<Decision> restoreAll(int64_t now_ns);

  // Seeds already-applied restrictions (journal reconcile after a crash). Targets and victims
  // must be registered first; EINVAL for an unknown container, ENOTSUP for a container colod
  // must never touch (not Be, or exclusive CPUs) — the caller should then restore it itself.
  [[nodiscard]] Result<void> seedApplied(std::span<const AppliedAction> actions, int64_t now_ns);

  // Tells the engine an applied decision failed (e.g. container gone, NRI error): the engine
  // forgets that restriction so it is not relaxed later and may retry at a later round.
  void reportApplyFailure(const Decision& decision);

  // Restrictions currently in force (what the daemon journals), ordered by target id, lever.
  [[nodiscard]] std::vector<AppliedAction> applied() const;

  // The view of one container, or ENOENT.
  [[nodiscard]] Result<ContainerView> describe(std::string_view id) const;

  [[nodiscard]] EngineStats stats() const;

 private:
  explicit Engine(std::unique_ptr<EngineState> state);
  std::unique_ptr<EngineState> state_;
};

}  // namespace colod::policy
