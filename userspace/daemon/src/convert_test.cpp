// SPDX-License-Identifier: Apache-2.0
#include "colod/daemon/convert.h"

#include <gtest/gtest.h>

#include <map>

#include "colod/daemon/self_stats.h"
#include "colod/policy/config.h"
#include "colod/policy/tier.h"

namespace colod::daemon {
namespace {

// The engine gets only the keys it reads: tier and thresholds come out the same as from the
// full kubelet-shaped maps, for every place a key can sit.
TEST(Convert, KeepPolicyKeysKeepsWhatThePolicyReads) {
  const std::vector<std::pair<std::string, std::string>> policy_keys = {
      {"colod.io/tier", "be"},
      {"koordinator.sh/qosClass", "LS"},
      {"katalyst.kubewharf.io/qos_level", "reclaimed_cores"},
      {std::string(policy::kAnnotationRunqP99), "5000"},
      {std::string(policy::kAnnotationBaselineFactor), "3.5"},
      {std::string(policy::kAnnotationPsiCpuSome), "bad"},  // reported as a problem either way
  };
  const policy::Config config;
  for (std::size_t where = 0; where < 4; ++where) {
    for (std::size_t k = 0; k < policy_keys.size(); ++k) {
      nri::PodSandbox pod;
      pod.name = "web-0";
      pod.cgroup_parent = "/kubepods/besteffort/podu1";
      pod.labels = {{"app", "web"}, {"io.kubernetes.pod.uid", "u1"}};
      pod.annotations = {{"kubernetes.io/config.seen", "2025-01-15T10:23:45Z"}};
      nri::Container c;
      c.id = "abc";
      c.labels = {{"io.kubernetes.container.name", "nginx"}};
      c.annotations = {{"io.kubernetes.container.hash", "8f2b9c1d"}};
      nri::StringMap* maps[] = {&pod.labels, &pod.annotations, &c.labels, &c.annotations};
      maps[where]->insert_or_assign(policy_keys[k].first, policy_keys[k].second);
      const auto full = toContainerInfo(&pod, c, {});
      auto kept = full;
      keepPolicyKeys(kept);
      const std::size_t entries = kept.pod_labels.size() + kept.pod_annotations.size() +
                                  kept.container_labels.size() + kept.container_annotations.size();
      EXPECT_EQ(entries, 1U) << policy_keys[k].first;
      const auto tier_full = policy::classifyTier(full);
      const auto tier_kept = policy::classifyTier(kept);
      EXPECT_EQ(tier_full.tier, tier_kept.tier) << policy_keys[k].first;
      EXPECT_EQ(tier_full.source, tier_kept.source) << policy_keys[k].first;
      std::vector<std::string> problems_full;
      std::vector<std::string> problems_kept;
      EXPECT_EQ(policy::effectiveThresholds(config, tier_full.tier, full, &problems_full),
                policy::effectiveThresholds(config, tier_kept.tier, kept, &problems_kept))
          << policy_keys[k].first;
      EXPECT_EQ(problems_full, problems_kept);
      // Everything else about the container is untouched.
      kept.pod_labels = full.pod_labels;
      kept.pod_annotations = full.pod_annotations;
      kept.container_labels = full.container_labels;
      kept.container_annotations = full.container_annotations;
      EXPECT_EQ(kept, full);
    }
  }
}

TEST(Convert, ContainerInfoFromRegistryObjects) {
  nri::PodSandbox pod;
  pod.name = "web-0";
  pod.namespace_name = "prod";
  pod.uid = "u1";
  pod.annotations = {{"colod.io/tier", "ls"}};
  pod.cgroup_parent = "/kubepods/burstable/podu1";
  nri::Container c;
  c.id = "abc";
  c.name = "nginx";
  c.cgroups_path = "/kubepods/burstable/podu1/abc";
  c.resources.cpu.shares = 512;
  c.resources.cpu.quota = 50000;
  c.resources.cpu.period = 100000;
  c.resources.cpu.cpus = "0-1";
  c.resources.memory.limit = 1 << 30;
  const std::vector<int> cpus = {0, 1};
  auto info = toContainerInfo(&pod, c, cpus);
  EXPECT_EQ(info.id, "abc");
  EXPECT_EQ(info.pod_name, "web-0");
  EXPECT_EQ(info.pod_namespace, "prod");
  EXPECT_EQ(info.container_name, "nginx");
  EXPECT_EQ(info.cgroup_parent, "/kubepods/burstable/podu1");
  EXPECT_EQ(info.resources.cpu_shares, 512U);
  EXPECT_EQ(info.resources.cpuset_cpus, "0-1");
  EXPECT_EQ(info.cpuset, (std::vector<int>{0, 1}));
  EXPECT_EQ(info.resources.memory_limit, 1 << 30);
  EXPECT_EQ(policy::classifyTier(info).tier, policy::Tier::Ls);
  // Unset quota/cpuset are explicit for the engine: unlimited, every node CPU.
  nri::Container unset = c;
  unset.resources.cpu.quota.reset();
  unset.resources.cpu.cpus.clear();
  auto u = toContainerInfo(&pod, unset, cpus);
  EXPECT_EQ(u.resources.cpu_quota, -1);
  EXPECT_EQ(u.resources.cpuset_cpus, "0-1");
  EXPECT_EQ(u.cpuset, (std::vector<int>{0, 1}));
  policy::Resources applied;
  applied.cpu_quota = 50000;
  applied.cpuset_cpus = "1";
  policy::Resources original;
  original.cpu_period = 100000;
  auto complete = completeOriginals(original, applied);
  EXPECT_EQ(complete.cpu_quota, -1);
  EXPECT_EQ(complete.cpuset_cpus, "");
  EXPECT_EQ(complete.cpu_period, 100000U);
  EXPECT_FALSE(complete.memory_limit.has_value());
  // Without a pod (raced with the pod event) the container is still usable.
  auto bare = toContainerInfo(nullptr, c, cpus);
  EXPECT_EQ(bare.pod_name, "");
  EXPECT_EQ(bare.id, "abc");
}

TEST(Convert, LinuxResourcesOnlySetFieldsAndAllCpusForEmptyCpuset) {
  policy::Resources v;
  v.cpu_shares = 2;
  auto r = toLinuxResources(v, "0-1");
  EXPECT_EQ(r.cpu.shares, 2U);
  EXPECT_FALSE(r.cpu.quota.has_value());
  EXPECT_EQ(r.cpu.cpus, "");  // unchanged
  v.cpuset_cpus = "";
  v.cpu_quota = -1;
  v.cpu_period = 100000;
  r = toLinuxResources(v, "0-1");
  EXPECT_EQ(r.cpu.cpus, "0-1");  // NRI cannot clear a cpuset: restore to all CPUs
  EXPECT_EQ(r.cpu.quota, -1);
  EXPECT_EQ(describeResources(v), "shares=2 quota=max/100000 cpus=all");
  EXPECT_EQ(describeResources({}), "-");
}

TEST(Convert, SampleMergesAggressorsByContainer) {
  collect::CgroupSample s;
  s.id = 10;
  s.runq.count = 40;
  s.runq.p99_us = 4096;
  s.runq_hist[12] = 40;
  s.preempted_wait_ns = 1000;
  s.preempted_by = {{.cgroup_id = 20, .path = "/a", .preemptions = 3},
                    {.cgroup_id = 21, .path = "/b", .preemptions = 1},
                    {.cgroup_id = 99, .path = "/host", .preemptions = 4}};
  s.throttling = collect::Throttling{.nr_periods = 10, .nr_throttled = 2, .throttled_ns = 5};
  collect::Psi psi;
  psi.some.avg10 = 3.5;
  psi.some.total_us = 1500;
  s.cpu_pressure = psi;
  auto owner = [](uint64_t id) -> std::string { return id == 20 || id == 21 ? "be1" : ""; };
  auto out = toContainerSample("ls1", s, owner, 1000);
  EXPECT_EQ(out.id, "ls1");
  EXPECT_EQ(out.runq_p99_us, 4096U);
  EXPECT_EQ(out.runq_hist[12], 40U);
  ASSERT_EQ(out.preempted_by.size(), 2U);
  EXPECT_EQ(out.preempted_by[0].aggressor_id, "");
  EXPECT_EQ(out.preempted_by[0].count, 4U);
  EXPECT_EQ(out.preempted_by[1].aggressor_id, "be1");
  EXPECT_EQ(out.preempted_by[1].count, 4U);
  EXPECT_EQ(out.preempted_by[1].wait_ns, 500U);
  EXPECT_EQ(out.nr_throttled, 2U);
  ASSERT_TRUE(out.psi_cpu_some.has_value());
  EXPECT_EQ(out.psi_cpu_some->total_delta_us, 500U);
  EXPECT_DOUBLE_EQ(out.psi_cpu_some->avg10, 3.5);
  // PSI read 10 intervals after the previous read: the delta is the average per interval.
  auto later = toContainerSample("ls1", s, owner, 1000, 10.0);
  ASSERT_TRUE(later.psi_cpu_some.has_value());
  EXPECT_EQ(later.psi_cpu_some->total_delta_us, 50U);
  // No previous read: no delta, whatever the span.
  EXPECT_EQ(toContainerSample("ls1", s, owner, 0, 10.0).psi_cpu_some->total_delta_us, 0U);
}

// The wait after preemptions goes to the preemptors by their preemptions x how long each then
// ran: a host's frequent short wakers do not take a wait spent behind a BE's long runs
// (colocation dynamic, session 24: "57 % behind uncontrolled work" stopped the ladder while the
// LS starved behind the BE).
TEST(Convert, PreemptionWaitSplitByPreemptionsTimesTheirRun) {
  collect::CgroupSample s;
  s.id = 10;
  s.preempted_wait_ns = 10'000'000;
  s.preempted_by = {{.cgroup_id = 20, .path = "/be", .preemptions = 2},
                    {.cgroup_id = 99, .path = "/host", .preemptions = 8},
                    {.cgroup_id = 98, .path = "/sys", .preemptions = 2}};
  auto owner = [](uint64_t id) -> std::string { return id == 20 ? "be1" : ""; };
  auto run = [](uint64_t id) -> uint64_t {
    return id == 20 ? 3'000'000 : id == 99 ? 20'000 : id == 98 ? 40'000 : 0;
  };
  auto split = [](const policy::ContainerSample& out) {
    std::map<std::string, policy::Preemption> by;
    for (const auto& p : out.preempted_by) {
      by[p.aggressor_id] = p;
    }
    return by;
  };
  // Weights: be1 2 x 3 ms = 6 ms; host 8 x 20 µs + 2 x 40 µs = 0.24 ms.
  auto by = split(toContainerSample("ls1", s, owner, 0, 1.0, run));
  ASSERT_EQ(by.size(), 2U);
  EXPECT_EQ(by["be1"].count, 2U);
  EXPECT_EQ(by[""].count, 10U);
  EXPECT_NEAR(static_cast<double>(by["be1"].wait_ns), 10e6 * 6.0 / 6.24, 2);
  EXPECT_NEAR(static_cast<double>(by[""].wait_ns), 10e6 * 0.24 / 6.24, 2);
  // Without runs: by counts (be1 2 of 12), as before.
  by = split(toContainerSample("ls1", s, owner, 0, 1.0));
  EXPECT_NEAR(static_cast<double>(by["be1"].wait_ns), 10e6 * 2 / 12, 2);
  // A preemptor whose run is unknown (it did not run this interval, as read) weighs the mean
  // run of the known ones: /sys unknown -> (2 x 3 ms + 8 x 20 µs) / 10 = 616 µs.
  auto partial = [](uint64_t id) -> uint64_t {
    return id == 20 ? 3'000'000 : id == 99 ? 20'000 : 0;
  };
  by = split(toContainerSample("ls1", s, owner, 0, 1.0, partial));
  const double host = 8 * 20e3 + 2 * 616e3;
  EXPECT_NEAR(static_cast<double>(by[""].wait_ns), 10e6 * host / (6e6 + host), 2);
  // None known: by counts.
  by = split(toContainerSample("ls1", s, owner, 0, 1.0, [](uint64_t) -> uint64_t { return 0; }));
  EXPECT_NEAR(static_cast<double>(by["be1"].wait_ns), 10e6 * 2 / 12, 2);
}

TEST(Convert, MeanRunIsOnCpuTimeOverTheRuns) {
  collect::CgroupSample s;
  EXPECT_EQ(meanRunNs(s), 0U);
  s.oncpu_ns = 9'000'000;
  s.runq.count = 3;
  EXPECT_EQ(meanRunNs(s), 3'000'000U);
}

// A protected container's waits after wakeups join its aggressors, by container, beside their
// preemptions (the policy reads them for the wait split).
TEST(Convert, WaitsBehindJoinTheAggressorsOfTheirContainer) {
  collect::CgroupSample s;
  s.id = 10;
  s.preempted_wait_ns = 1000;
  s.preempted_by = {{.cgroup_id = 20, .path = "/a", .preemptions = 1},
                    {.cgroup_id = 99, .path = "/host", .preemptions = 1}};
  s.waited_behind = {{.cgroup_id = 21, .path = "/b", .waits = 5, .wait_ns = 20'000'000},
                     {.cgroup_id = 10, .path = "/ls", .waits = 2, .wait_ns = 300'000},
                     {.cgroup_id = 30, .path = "/c", .waits = 1, .wait_ns = 60'000}};
  auto owner = [](uint64_t id) -> std::string {
    return id == 20 || id == 21 ? "be1" : id == 10 ? "ls1" : id == 30 ? "be2" : "";
  };
  auto out = toContainerSample("ls1", s, owner, 0);
  std::map<std::string, policy::Preemption> by;
  for (const auto& p : out.preempted_by) {
    by[p.aggressor_id] = p;
  }
  ASSERT_EQ(by.size(), 4U);
  EXPECT_EQ(by["be1"].count, 1U);
  EXPECT_EQ(by["be1"].wait_ns, 500U);
  EXPECT_EQ(by["be1"].behind_waits, 5U);
  EXPECT_EQ(by["be1"].behind_ns, 20'000'000U);
  EXPECT_EQ(by[""].count, 1U);
  EXPECT_EQ(by[""].wait_ns, 500U);
  EXPECT_EQ(by[""].behind_ns, 0U);
  EXPECT_EQ(by["ls1"].count, 0U) << "behind its own tasks: the policy reads it as its own wait";
  EXPECT_EQ(by["ls1"].behind_ns, 300'000U);
  EXPECT_EQ(by["be2"].behind_waits, 1U);
  EXPECT_EQ(by["be2"].behind_ns, 60'000U);
}

TEST(SelfStats, ParsesProcFiles) {
  // comm with a space and a parenthesis, as the kernel prints it.
  const std::string stat =
      "1234 (colod (x) y) S 1 1234 1234 0 -1 4194560 500 0 0 0 150 50 0 0 20 0 9 0 100 1000 300";
  auto s = parseSelfStats(stat, "2500 300 100 5 0 200 0\n", 100, 4096);
  EXPECT_DOUBLE_EQ(s.cpu_seconds, 2.0);
  EXPECT_EQ(s.rss_bytes, 300U * 4096U);
  auto bad = parseSelfStats("garbage", "", 100, 4096);
  EXPECT_EQ(bad.rss_bytes, 0U);
  EXPECT_DOUBLE_EQ(bad.cpu_seconds, 0.0);
}

}  // namespace
}  // namespace colod::daemon
