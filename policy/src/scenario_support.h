// SPDX-License-Identifier: Apache-2.0
// Helpers shared by the blame and do-no-harm scenario tests (synthetic traces, synthetic time).
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

}  // namespace colod::policy::scenario
