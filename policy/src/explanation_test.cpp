// SPDX-License-Identifier: Apache-2.0
// explanation.cpp alone: how values read (describeValues). "No quota" is written one way
// everywhere: "max"; a quota reads "<quota>/<period> µs" only when one is set.
#include <gtest/gtest.h>

#include "engine_state.h"

namespace colod::policy {
namespace {

Resources quota(std::optional<int64_t> q, std::optional<uint64_t> period) {
  Resources r;
  r.cpu_quota = q;
  r.cpu_period = period;
  return r;
}

TEST(DescribeValuesTest, NoQuotaIsMaxWhicheverWayItIsSaid) {
  EXPECT_EQ(describeValues(quota(std::nullopt, std::nullopt), Lever::CpuQuota), "CFS quota max");
  EXPECT_EQ(describeValues(quota(-1, 100'000), Lever::CpuQuota), "CFS quota max");
  EXPECT_EQ(describeValues(quota(-1, std::nullopt), Lever::CpuQuota), "CFS quota max");
  EXPECT_EQ(describeValues(quota(0, 100'000), Lever::CpuQuota), "CFS quota max");
}

TEST(DescribeValuesTest, QuotaReadsQuotaOverPeriodWhenSet) {
  EXPECT_EQ(describeValues(quota(20'000, 100'000), Lever::CpuQuota), "CFS quota 20000/100000 µs");
  EXPECT_EQ(describeValues(quota(5'000, 10'000), Lever::CpuQuota), "CFS quota 5000/10000 µs");
  // A period that is not known is the kernel default.
  EXPECT_EQ(describeValues(quota(50'000, std::nullopt), Lever::CpuQuota),
            "CFS quota 50000/100000 µs");
}

TEST(DescribeValuesTest, OtherLevers) {
  Resources r;
  EXPECT_EQ(describeValues(r, Lever::CpuShares), "cpu.shares unset");
  EXPECT_EQ(describeValues(r, Lever::Cpuset), "cpuset unset");
  EXPECT_EQ(describeValues(r, Lever::MemoryLimit), "memory limit max");
  r.cpu_shares = 2;
  r.cpuset_cpus = "0-1";
  r.memory_limit = 256LL << 20;
  EXPECT_EQ(describeValues(r, Lever::CpuShares), "cpu.shares 2");
  EXPECT_EQ(describeValues(r, Lever::Cpuset), "cpuset 0-1");
  EXPECT_EQ(describeValues(r, Lever::MemoryLimit), "memory limit 268435456");
  r.memory_limit = -1;
  EXPECT_EQ(describeValues(r, Lever::MemoryLimit), "memory limit max");
}

TEST(DescribeValuesTest, RestoreOfAnUnknownQuotaReadsMax) {
  // restoreValues turns an unknown original into -1/100000: it must read as "max" too.
  const Resources restored = restoreValues(Resources{}, Lever::CpuQuota, {0, 1});
  EXPECT_EQ(restored.cpu_quota, -1);
  EXPECT_EQ(describeValues(restored, Lever::CpuQuota), "CFS quota max");
}

TEST(DisplayNameTest, PodPathOrId) {
  ContainerInfo c;
  c.id = "abc";
  EXPECT_EQ(displayName(c), "abc");
  c.pod_namespace = "ns";
  c.pod_name = "pod";
  c.container_name = "main";
  EXPECT_EQ(displayName(c), "ns/pod/main");
}

}  // namespace
}  // namespace colod::policy
