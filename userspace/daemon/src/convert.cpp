// SPDX-License-Identifier: Apache-2.0
#include "colod/daemon/convert.h"

#include <map>
#include <utility>

#include "colod/policy/tier.h"

namespace colod::daemon {

policy::ContainerInfo toContainerInfo(const nri::PodSandbox* pod,
                                      const nri::Container& ctr,
                                      std::span<const int> node_cpus) {
  policy::ContainerInfo info;
  info.id = ctr.id;
  info.container_name = ctr.name;
  info.container_labels = ctr.labels.toStdMap();
  info.container_annotations = ctr.annotations.toStdMap();
  info.cgroup_path = ctr.cgroups_path;
  if (pod != nullptr) {
    info.pod_name = pod->name;
    info.pod_namespace = pod->namespace_name;
    info.pod_uid = pod->uid;
    info.pod_labels = pod->labels.toStdMap();
    info.pod_annotations = pod->annotations.toStdMap();
    info.cgroup_parent = pod->cgroup_parent;
  }
  const auto& cpu = ctr.resources.cpu;
  info.resources.cpu_shares = cpu.shares;
  // NRI leaves unset fields absent; for the engine (and every later restore) absent must not
  // mean "unknown": an unset quota is unlimited (-1) and an unset cpuset is every node CPU.
  info.resources.cpu_quota = cpu.quota ? cpu.quota : std::optional<int64_t>(-1);
  info.resources.cpu_period = cpu.period;
  if (!cpu.cpus.empty()) {
    info.resources.cpuset_cpus = cpu.cpus;
    if (auto parsed = policy::parseCpuList(cpu.cpus)) {
      info.cpuset = std::move(parsed).value();
    }
  } else if (!node_cpus.empty()) {
    info.resources.cpuset_cpus = policy::formatCpuList(node_cpus);
    info.cpuset.assign(node_cpus.begin(), node_cpus.end());
  }
  if (!cpu.mems.empty()) {
    info.resources.cpuset_mems = cpu.mems;
  }
  info.resources.memory_limit = ctr.resources.memory.limit;
  info.resources.unified = ctr.resources.unified.toStdMap();
  info.exclusive_cpus = policy::inferExclusiveCpus(info, node_cpus, {});
  return info;
}

void keepPolicyKeys(policy::ContainerInfo& info) {
  for (auto* map : {&info.pod_labels, &info.pod_annotations, &info.container_labels,
                    &info.container_annotations}) {
    std::erase_if(*map, [](const auto& kv) { return !policy::isPolicyKey(kv.first); });
  }
}

nri::LinuxResources toLinuxResources(const policy::Resources& v, std::string_view all_cpus) {
  nri::LinuxResources r;
  r.cpu.shares = v.cpu_shares;
  r.cpu.quota = v.cpu_quota;
  r.cpu.period = v.cpu_period;
  if (v.cpuset_cpus) {
    r.cpu.cpus = v.cpuset_cpus->empty() ? std::string(all_cpus) : *v.cpuset_cpus;
  }
  if (v.cpuset_mems) {
    r.cpu.mems = *v.cpuset_mems;
  }
  r.memory.limit = v.memory_limit;
  r.unified = nri::StringMap::from(v.unified);
  return r;
}

policy::Resources completeOriginals(const policy::Resources& original,
                                    const policy::Resources& applied) {
  policy::Resources out = original;
  if (applied.cpu_quota && !out.cpu_quota) {
    out.cpu_quota = -1;
  }
  if (applied.cpuset_cpus && !out.cpuset_cpus) {
    out.cpuset_cpus = "";  // all CPUs (see toLinuxResources)
  }
  if (applied.memory_limit && !out.memory_limit) {
    out.memory_limit = -1;
  }
  return out;
}

policy::Resources toPolicyResources(const nri::LinuxResources& r) {
  policy::Resources out;
  out.cpu_shares = r.cpu.shares;
  out.cpu_quota = r.cpu.quota;
  out.cpu_period = r.cpu.period;
  if (!r.cpu.cpus.empty()) {
    out.cpuset_cpus = r.cpu.cpus;
  }
  if (!r.cpu.mems.empty()) {
    out.cpuset_mems = r.cpu.mems;
  }
  out.memory_limit = r.memory.limit;
  out.unified = r.unified.toStdMap();
  return out;
}

std::string describeResources(const policy::Resources& v) {
  std::string out;
  auto add = [&out](const std::string& s) { out += (out.empty() ? "" : " ") + s; };
  if (v.cpu_shares) {
    add("shares=" + std::to_string(*v.cpu_shares));
  }
  if (v.cpu_quota) {
    add("quota=" + (*v.cpu_quota < 0 ? std::string("max") : std::to_string(*v.cpu_quota)) +
        (v.cpu_period ? "/" + std::to_string(*v.cpu_period) : ""));
  } else if (v.cpu_period) {
    add("period=" + std::to_string(*v.cpu_period));
  }
  if (v.cpuset_cpus) {
    add("cpus=" + (v.cpuset_cpus->empty() ? std::string("all") : *v.cpuset_cpus));
  }
  if (v.cpuset_mems) {
    add("mems=" + *v.cpuset_mems);
  }
  if (v.memory_limit) {
    add("memory=" + std::to_string(*v.memory_limit));
  }
  for (const auto& [k, val] : v.unified) {
    add(k + "=" + val);
  }
  return out.empty() ? "-" : out;
}

uint64_t meanRunNs(const collect::CgroupSample& s) {
  return s.runq.count > 0 ? s.oncpu_ns / s.runq.count : 0;
}

policy::ContainerSample toContainerSample(
    const std::string& container_id,
    const collect::CgroupSample& s,
    const std::function<std::string(uint64_t cgroup_id)>& container_of,
    uint64_t prev_cpu_some_total_us,
    double psi_span_intervals,
    const std::function<uint64_t(uint64_t cgroup_id)>& run_ns_of) {
  policy::ContainerSample out;
  out.id = container_id;
  static_assert(policy::kRunqSlots == collect::kHistSlots);
  for (std::size_t i = 0; i < policy::kRunqSlots; ++i) {
    out.runq_hist[i] = s.runq_hist[i];
  }
  out.runq_count = s.runq.count;
  out.runq_p50_us = s.runq.p50_us;
  out.runq_p90_us = s.runq.p90_us;
  out.runq_p99_us = s.runq.p99_us;
  out.runq_max_us = s.runq.max_us;
  // Total run-queue wait this interval: the policy's wait-load signal, which still works when an
  // always-runnable victim rarely wakes and so yields few latency samples.
  out.runq_wait_ns = s.runq.total_ns;
  // Several aggressor cgroups may belong to one container (or to none): merge by container.
  // The wait after preemptions is split by preemptions x the preemptor's mean run (header).
  double known_weight = 0;
  double known_count = 0;
  if (run_ns_of) {
    for (const auto& a : s.preempted_by) {
      if (const uint64_t run = run_ns_of(a.cgroup_id); run > 0) {
        known_weight += static_cast<double>(a.preemptions) * static_cast<double>(run);
        known_count += static_cast<double>(a.preemptions);
      }
    }
  }
  const double unknown_run = known_count > 0 ? known_weight / known_count : 1.0;
  struct Aggressor {
    policy::Preemption p;
    double weight = 0;  // its preemptions x their runs: its part of the wait after them
  };
  std::map<std::string, Aggressor> by;
  double total = 0;
  for (const auto& a : s.preempted_by) {
    const std::string who = container_of(a.cgroup_id);
    Aggressor& g = by[who];
    g.p.aggressor_id = who;
    g.p.count += a.preemptions;
    const uint64_t run = run_ns_of ? run_ns_of(a.cgroup_id) : 0;
    const double w =
        static_cast<double>(a.preemptions) * (run > 0 ? static_cast<double>(run) : unknown_run);
    g.weight += w;
    total += w;
  }
  for (auto& [who, g] : by) {
    if (total > 0) {
      g.p.wait_ns =
          static_cast<uint64_t>(static_cast<double>(s.preempted_wait_ns) * g.weight / total);
    }
  }
  // A protected container's waits after its wakeups, by whom each waited behind (the collector
  // measures them for watched cgroups only): most of the wait when a busy neighbour holds the
  // CPU a woken request needs (a hog rarely preempts anyone; the victim queues behind it).
  for (const auto& b : s.waited_behind) {
    const std::string who = container_of(b.cgroup_id);
    policy::Preemption& p = by[who].p;
    p.aggressor_id = who;
    p.behind_waits += b.waits;
    p.behind_ns += b.wait_ns;
  }
  for (auto& [who, g] : by) {
    out.preempted_by.push_back(std::move(g.p));
  }
  out.oncpu_ns = s.oncpu_ns;
  out.nr_involuntary = s.involuntary_switches;
  if (s.throttling) {
    out.nr_throttled = s.throttling->nr_throttled;
    out.throttled_ns = s.throttling->throttled_ns;
  }
  out.reclaim_stall_ns = s.reclaim_stall_ns;
  if (s.cpu_pressure) {
    const auto& some = s.cpu_pressure->some;
    uint64_t delta = 0;
    if (some.total_us >= prev_cpu_some_total_us && prev_cpu_some_total_us != 0) {
      delta = some.total_us - prev_cpu_some_total_us;
      if (psi_span_intervals > 1.0) {
        delta = static_cast<uint64_t>(static_cast<double>(delta) / psi_span_intervals);
      }
    }
    out.psi_cpu_some = policy::Psi{.avg10 = some.avg10, .total_delta_us = delta};
  }
  if (s.memory_pressure) {
    out.psi_memory_some = policy::Psi{.avg10 = s.memory_pressure->some.avg10, .total_delta_us = 0};
    if (s.memory_pressure->full) {
      out.psi_memory_full =
          policy::Psi{.avg10 = s.memory_pressure->full->avg10, .total_delta_us = 0};
    }
  }
  return out;
}

}  // namespace colod::daemon
