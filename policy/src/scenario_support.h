// SPDX-License-Identifier: Apache-2.0
// Helpers shared by the scenario tests (synthetic traces, synthetic time).
#pragma once

#include <cstdint>
#include <set>
#include <string>
#include <vector>

#include "colod/policy/engine.h"
#include "colod/policy/testing/synthetic.h"

namespace colod::policy::scenario {

constexpr uint64_t kQuietP99 = 300;
constexpr uint64_t kHurtP99 = 5000;

inline ContainerInfo pinned(ContainerInfo info, const std::string& cpus) {
  info.resources.cpuset_cpus = cpus;
  return info;
}

inline std::set<std::string> targets(const testing::Sim& sim) {
  std::set<std::string> out;
  for (const auto& d : sim.decisions()) {
    out.insert(d.target_id);
  }
  return out;
}

inline int countFindings(const std::vector<RoundResult>& rounds, const std::string& rule) {
  int n = 0;
  for (const auto& r : rounds) {
    for (const auto& f : r.findings) {
      n += f.rule == rule ? 1 : 0;
    }
  }
  return n;
}

inline const Finding* findFinding(const std::vector<RoundResult>& rounds, const std::string& rule) {
  for (const auto& r : rounds) {
    for (const auto& f : r.findings) {
      if (f.rule == rule) {
        return &f;
      }
    }
  }
  return nullptr;
}

// A starved, always-runnable victim: its tasks rarely wake up, so the histogram has only a few
// samples, but they wait most of the time: wait_ns / interval = `wait_load` tasks waiting on
// average behind `by`, on-CPU 40 ms per 100 ms.
inline ContainerSample starved(const std::string& id,
                               const std::string& by,
                               double wait_load = 1.6) {
  auto s = testing::lsSample(id, 60'000, {{by, 3, 150'000'000}});
  s.runq_count = 3;
  s.runq_wait_ns = static_cast<uint64_t>(wait_load * static_cast<double>(testing::kIntervalNs));
  s.oncpu_ns = 40'000'000;
  return s;
}

}  // namespace colod::policy::scenario
