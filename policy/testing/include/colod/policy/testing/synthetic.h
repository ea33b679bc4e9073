// SPDX-License-Identifier: Apache-2.0
// Synthetic containers, samples and fleets for policy tests and the benchmark. Deterministic:
// all randomness comes from a seeded splitmix64.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "colod/policy/engine.h"
#include "colod/policy/types.h"

namespace colod::policy::testing {

inline constexpr int64_t kIntervalNs = 100'000'000;  // 100 ms

// Registry entries. LS are Burstable pods, BE BestEffort pods (by cgroup parent), system by
// annotation. shares/cpuset as kubelet would set them on a node with `cpus` CPUs.
ContainerInfo lsInfo(const std::string& id, int cpus = 2);
ContainerInfo beInfo(const std::string& id, int cpus = 2, uint64_t shares = 1024);
ContainerInfo systemInfo(const std::string& id, int cpus = 2);
// A Guaranteed pod pinned to `cpuset` with exclusive CPUs.
ContainerInfo exclusiveInfo(const std::string& id, std::vector<int> cpuset);

// Samples. p99 in µs; preempted_by attributes wait to aggressors.
ContainerSample lsSample(const std::string& id,
                         uint64_t p99_us,
                         std::vector<Preemption> preempted_by = {});
ContainerSample beSample(const std::string& id, uint64_t oncpu_ns);

// Whether the engine holds a restriction on `id` right now (of `lever`, when given).
bool restricted(const Engine& e, const std::string& id, std::optional<Lever> lever = {});

// A steady simulation: an engine, a clock in 100 ms steps, and every decision collected.
class Sim {
 public:
  explicit Sim(Config config, int cpus = 2);
  void add(ContainerInfo info);
  RoundResult step(std::vector<ContainerSample> samples);
  // A daemon event round: `interval_ns` after the previous round, between timer ticks.
  RoundResult eventStep(std::vector<ContainerSample> samples, int64_t interval_ns);
  // A timer round `interval_ns` after the previous round: the daemon's tick can follow an event
  // round by well under a millisecond.
  RoundResult timerStep(std::vector<ContainerSample> samples, int64_t interval_ns);
  Engine& engine() { return engine_; }
  [[nodiscard]] const std::vector<Decision>& decisions() const { return decisions_; }
  [[nodiscard]] int64_t now() const { return now_; }
  [[nodiscard]] int round() const { return round_; }

 private:
  RoundResult advance(std::vector<ContainerSample> samples, int64_t interval_ns, bool event_round);

  Engine engine_;
  int cpus_;
  int64_t now_ = 0;
  int round_ = 0;
  std::vector<Decision> decisions_;
};

// A node with many containers: n_ls LS, n_be BE; `victims` of the LS suffer from `aggressors`
// of the BE (attributed preemptions); everyone else is noisy but benign.
struct Fleet {
  std::vector<ContainerInfo> infos;
  int n_ls = 0;
  int n_be = 0;
  int victims = 0;
  int aggressors = 0;
  int cpus = 0;
  uint64_t seed = 1;
  // The snapshot of round `round` (deterministic in seed and round).
  [[nodiscard]] Snapshot snapshot(int round) const;
};
Fleet makeFleet(int n_ls, int n_be, int victims, int aggressors, int cpus, uint64_t seed);

}  // namespace colod::policy::testing
