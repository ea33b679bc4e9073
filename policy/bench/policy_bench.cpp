// SPDX-License-Identifier: Apache-2.0
// Times one decision round (Engine::evaluate) on a node with N containers: 30 % LS, 70 % BE,
// 1 % of the containers are victims of 3 BE aggressors (attributed preemptions), everyone else
// noisy but benign, 64 CPUs. The engine runs warm: episodes are active when timing starts.
// Snapshots are generated before timing; only evaluate() is inside the loop. BM_BusyRound: the
// same on a busy node (below).
#include <benchmark/benchmark.h>

#include <vector>

#include "colod/base/check.h"
#include "colod/policy/engine.h"
#include "colod/policy/testing/synthetic.h"

namespace {

using colod::policy::Config;
using colod::policy::Engine;
using colod::policy::Snapshot;

// Times evaluate() over `fleet`'s snapshots, after 20 rounds of warm-up (so episodes exist: the
// costly steady state).
void timeRounds(benchmark::State& state, const colod::policy::testing::Fleet& fleet) {
  auto engine = Engine::create(Config{});
  COLOD_CHECK(engine.has_value());
  for (const auto& info : fleet.infos) {
    engine->upsertContainer(info);
  }
  constexpr int kSnapshots = 32;
  std::vector<Snapshot> snaps;
  snaps.reserve(kSnapshots);
  for (int i = 0; i < kSnapshots; ++i) {
    snaps.push_back(fleet.snapshot(i));
  }
  int64_t round = 0;
  for (; round < 20; ++round) {
    auto& s = snaps[static_cast<size_t>(round % kSnapshots)];
    s.now_ns = round * colod::policy::testing::kIntervalNs;
    benchmark::DoNotOptimize(engine->evaluate(s));
  }
  size_t decisions = 0;
  for (auto _ : state) {
    auto& s = snaps[static_cast<size_t>(round % kSnapshots)];
    s.now_ns = round * colod::policy::testing::kIntervalNs;
    ++round;
    auto r = engine->evaluate(s);
    decisions += r.decisions.size();
    benchmark::DoNotOptimize(r);
  }
  state.counters["containers"] = fleet.n_ls + fleet.n_be;
  state.counters["episodes"] = static_cast<double>(engine->stats().active_episodes);
  state.counters["decisions"] = static_cast<double>(decisions);
}

void BM_Round(benchmark::State& state) {
  const auto n = static_cast<int>(state.range(0));
  const int n_ls = n * 3 / 10;
  const int victims = std::max(1, n / 100);
  timeRounds(state, colod::policy::testing::makeFleet(n_ls, n - n_ls, victims, 3, 64, 42));
}

BENCHMARK(BM_Round)->Arg(100)->Arg(1000)->Unit(benchmark::kMicrosecond);

// A busy node (issue 17; colod-scale.sh at 1000 containers on a 2-CPU guest, session 41): every
// BE runs a little, and 60 % of the LS are over their thresholds at once, each with evidence
// against every BE that ran on its CPUs. The rounds are a fixed count from the same start, so
// every run times the same episodes (a free-running count times a different mix of engages and
// relaxes each time, and read bimodal).
void BM_BusyRound(benchmark::State& state) {
  const auto n = static_cast<int>(state.range(0));
  const int n_ls = n * 2 / 3;
  timeRounds(state, colod::policy::testing::makeFleet(n_ls, n - n_ls, n_ls * 6 / 10, 3, 64, 42));
}

BENCHMARK(BM_BusyRound)->Arg(1000)->Iterations(300)->Unit(benchmark::kMicrosecond);

}  // namespace

BENCHMARK_MAIN();
