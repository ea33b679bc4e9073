// SPDX-License-Identifier: Apache-2.0
#include "colod/policy/testing/synthetic.h"

#include <utility>

#include "colod/base/check.h"
#include "colod/policy/tier.h"

namespace colod::policy::testing {
namespace {

std::vector<int> range(int n) {
  std::vector<int> out;
  for (int i = 0; i < n; ++i) {
    out.push_back(i);
  }
  return out;
}

ContainerInfo base(const std::string& id, const std::string& parent, int cpus) {
  ContainerInfo c;
  c.id = id;
  c.pod_name = id + "-pod";
  c.pod_namespace = "default";
  c.pod_uid = "uid-" + id;
  c.container_name = "main";
  c.cgroup_parent = parent;
  c.resources.cpuset_cpus = formatCpuList(range(cpus));
  c.resources.cpu_period = 100'000;
  c.resources.cpu_quota = -1;
  return c;
}

uint64_t splitmix(uint64_t x) {
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

}  // namespace

ContainerInfo lsInfo(const std::string& id, int cpus) {
  ContainerInfo c = base(id, "kubepods-burstable-pod" + id + ".slice", cpus);
  c.resources.cpu_shares = 1024;
  return c;
}

ContainerInfo beInfo(const std::string& id, int cpus, uint64_t shares) {
  ContainerInfo c = base(id, "kubepods-besteffort-pod" + id + ".slice", cpus);
  c.resources.cpu_shares = shares;
  return c;
}

ContainerInfo systemInfo(const std::string& id, int cpus) {
  ContainerInfo c = base(id, "kubepods-burstable-pod" + id + ".slice", cpus);
  c.pod_annotations["colod.io/tier"] = "system";
  c.resources.cpu_shares = 1024;
  return c;
}

ContainerInfo exclusiveInfo(const std::string& id, std::vector<int> cpuset) {
  ContainerInfo c = base(id, "kubepods-pod" + id + ".slice", 0);
  c.resources.cpuset_cpus = formatCpuList(cpuset);
  c.resources.cpu_quota = static_cast<int64_t>(cpuset.size()) * 100'000;
  c.resources.cpu_shares = 1024 * cpuset.size();
  c.cpuset = std::move(cpuset);
  c.exclusive_cpus = true;
  return c;
}

ContainerSample lsSample(const std::string& id,
                         uint64_t p99_us,
                         std::vector<Preemption> preempted_by) {
  ContainerSample s;
  s.id = id;
  s.runq_count = 500;
  s.runq_p50_us = p99_us / 8;
  s.runq_p90_us = p99_us / 2;
  s.runq_p99_us = p99_us;
  s.runq_max_us = p99_us * 2;
  s.preempted_by = std::move(preempted_by);
  s.oncpu_ns = 30'000'000;  // 30 % of one CPU
  return s;
}

ContainerSample beSample(const std::string& id, uint64_t oncpu_ns) {
  ContainerSample s;
  s.id = id;
  s.runq_count = 100;
  s.runq_p99_us = 5000;  // BE waits a lot; never a victim
  s.oncpu_ns = oncpu_ns;
  return s;
}

Sim::Sim(Config config, int cpus)
    : engine_([&] {
        auto e = Engine::create(std::move(config));
        COLOD_CHECK(e.has_value());
        return std::move(e).value();
      }()),
      cpus_(cpus) {}

void Sim::add(ContainerInfo info) { engine_.upsertContainer(std::move(info)); }

RoundResult Sim::step(std::vector<ContainerSample> samples) {
  return advance(std::move(samples), kIntervalNs, false);
}

RoundResult Sim::eventStep(std::vector<ContainerSample> samples, int64_t interval_ns) {
  return advance(std::move(samples), interval_ns, true);
}

RoundResult Sim::timerStep(std::vector<ContainerSample> samples, int64_t interval_ns) {
  return advance(std::move(samples), interval_ns, false);
}

RoundResult Sim::advance(std::vector<ContainerSample> samples,
                         int64_t interval_ns,
                         bool event_round) {
  ++round_;
  now_ += interval_ns;
  Snapshot snap;
  snap.now_ns = now_;
  snap.interval_ns = interval_ns;
  snap.event_round = event_round;
  snap.node_cpus = cpus_;
  snap.containers = std::move(samples);
  RoundResult r = engine_.evaluate(snap);
  decisions_.insert(decisions_.end(), r.decisions.begin(), r.decisions.end());
  return r;
}

Fleet makeFleet(int n_ls, int n_be, int victims, int aggressors, int cpus, uint64_t seed) {
  Fleet f;
  f.n_ls = n_ls;
  f.n_be = n_be;
  f.victims = victims;
  f.aggressors = aggressors;
  f.cpus = cpus;
  f.seed = seed;
  for (int i = 0; i < n_ls; ++i) {
    f.infos.push_back(lsInfo("ls-" + std::to_string(i), cpus));
  }
  for (int i = 0; i < n_be; ++i) {
    f.infos.push_back(beInfo("be-" + std::to_string(i), cpus));
  }
  return f;
}

Snapshot Fleet::snapshot(int round) const {
  Snapshot s;
  s.now_ns = static_cast<int64_t>(round) * kIntervalNs;
  s.interval_ns = kIntervalNs;
  s.node_cpus = cpus;
  s.containers.reserve(static_cast<size_t>(n_ls + n_be));
  uint64_t rng = splitmix(seed ^ static_cast<uint64_t>(round) * 0x1234567ULL);
  auto next = [&rng]() { return rng = splitmix(rng); };
  for (int i = 0; i < n_ls; ++i) {
    const uint64_t noise = next() % 400;
    if (i < victims) {
      std::vector<Preemption> pre;
      for (int a = 0; a < aggressors; ++a) {
        pre.push_back(
            {"be-" + std::to_string(a), 50 + next() % 50, 2'000'000 + next() % 1'000'000});
      }
      pre.push_back({"ls-" + std::to_string(i), 5, 100'000});
      auto sample = lsSample("ls-" + std::to_string(i), 4000 + noise * 10, std::move(pre));
      for (uint32_t& slot : sample.runq_hist) {
        slot = static_cast<uint32_t>(next() % 64);
      }
      s.containers.push_back(std::move(sample));
    } else {
      auto sample = lsSample("ls-" + std::to_string(i), 200 + noise,
                             {{"ls-" + std::to_string((i + 1) % n_ls), 3, 20'000}});
      for (uint32_t& slot : sample.runq_hist) {
        slot = static_cast<uint32_t>(next() % 64);
      }
      s.containers.push_back(std::move(sample));
    }
  }
  for (int i = 0; i < n_be; ++i) {
    const uint64_t cpu = i < aggressors ? 80'000'000 : (next() % 5'000'000);
    s.containers.push_back(beSample("be-" + std::to_string(i), cpu));
  }
  return s;
}

bool restricted(const Engine& e, const std::string& id, std::optional<Lever> lever) {
  for (const auto& a : e.applied()) {
    if (a.target_id == id && (!lever || a.lever == *lever)) {
      return true;
    }
  }
  return false;
}

}  // namespace colod::policy::testing
