// SPDX-License-Identifier: Apache-2.0
// The interference detector and decision engine. Pure: registry changes and snapshots in,
// decisions out; no clock, no I/O, no globals, no threads. Not thread-safe: one owner calls it.
#pragma once

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

  // One round. Samples for ids not in the registry are ignored (counted). Deterministic: the
  // same sequence of calls gives the same output.
  [[nodiscard]] RoundResult evaluate(const Snapshot& snapshot);

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
