// SPDX-License-Identifier: Apache-2.0
#include "rule.h"

#include <gtest/gtest.h>

#include "colod/testing/result_matchers.h"

namespace colod::suppress {
namespace {

// Verbatim /proc/stat head from this 2-CPU host (kernel 6.1).
constexpr const char* kProcStat =
    "cpu  4705 150 1120 16250 160 0 35 12 0 0\n"
    "cpu0 2391 73 571 8106 84 0 22 6 0 0\n"
    "cpu1 2314 77 549 8144 76 0 13 6 0 0\n"
    "intr 114930 0 9 0 0 0 0 0 0 0 0 0 0 0 0\n"
    "ctxt 244227\n";

TEST(SuppressParse, ProcStatAggregateLine) {
  const ProcStatCpu c = ASSERT_OK(parseProcStat(kProcStat));
  EXPECT_EQ(c.busy, 4705U + 150 + 1120 + 0 + 35 + 12);
  EXPECT_EQ(c.total, c.busy + 16250 + 160);
}

TEST(SuppressParse, ProcStatMalformed) {
  EXPECT_ERR(parseProcStat("cpu0 1 2 3 4 5 6 7 8\n"), EINVAL, "no aggregate cpu line");
  EXPECT_ERR(parseProcStat("cpu  1 2 3\n"), EINVAL, "fields");
  EXPECT_ERR(parseProcStat("cpu  1 2 3 x 5 6 7 8\n"), EINVAL, "bad number");
  EXPECT_ERR(parseProcStat(""), EINVAL, "no aggregate");
}

TEST(SuppressParse, CgroupUsage) {
  EXPECT_EQ(ASSERT_OK(parseCpuacctUsage("123456789\n")), 123456789U);
  EXPECT_ERR(parseCpuacctUsage(""), EINVAL, "not a number");
  EXPECT_ERR(parseCpuacctUsage("12 34\n"), EINVAL, "not a number");
  EXPECT_EQ(ASSERT_OK(parseCpuStatUsageNs("usage_usec 1500\nuser_usec 1000\nsystem_usec 500\n"
                                          "nr_periods 0\n")),
            1500000U);
  EXPECT_ERR(parseCpuStatUsageNs("user_usec 1000\n"), EINVAL, "no usage_usec");
  EXPECT_ERR(parseCpuStatUsageNs("usage_usec -1\n"), EINVAL, "bad usage_usec");
}

// koordlet's unit-test shape: node 2 CPUs x 65 % = 1.3; LS uses 0.6 and the system 0.2 -> 0.5,
// ceil 1 CPU for BE.
TEST(SuppressRule, FormulaAndCeil) {
  const RuleOutput o = suppressRule({.node_cpus = 2,
                                     .ls_used_cpus = 0.6,
                                     .pods_used_cpus = 2.0,
                                     .node_used_cpus = 2.2,
                                     .current_be_cpus = 2});
  EXPECT_NEAR(o.system_used_cpus, 0.2, 1e-9);
  EXPECT_NEAR(o.suppress_cpus, 0.5, 1e-9);
  EXPECT_EQ(o.be_cpus, 1);
}

TEST(SuppressRule, FloorAndSystemClampedAtZero) {
  // LS alone over the threshold: the formula is negative, BE keeps be_min_cpus.
  RuleOutput o = suppressRule({.node_cpus = 2,
                               .ls_used_cpus = 1.8,
                               .pods_used_cpus = 2.0,
                               .node_used_cpus = 1.9,
                               .current_be_cpus = 2});
  EXPECT_EQ(o.system_used_cpus, 0.0);
  EXPECT_LT(o.suppress_cpus, 0.0);
  EXPECT_EQ(o.be_cpus, 1);
  o = suppressRule({.node_cpus = 8, .ls_used_cpus = 8, .be_min_cpus = 2, .current_be_cpus = 2});
  EXPECT_EQ(o.be_cpus, 2);
}

TEST(SuppressRule, GrowsByAtMostTenPercentOfTheNodePerRound) {
  // An idle 16-CPU node allows ceil(10.4) = 11 CPUs; from 2 the step is ceil(1.6) = 2.
  const RuleOutput o = suppressRule({.node_cpus = 16, .current_be_cpus = 2});
  EXPECT_EQ(o.be_cpus, 4);
  // Shrinking is never stepped.
  EXPECT_EQ(suppressRule({.node_cpus = 16, .ls_used_cpus = 9, .current_be_cpus = 11}).be_cpus, 2);
  // The first round (nothing in force yet) is not stepped; never above the node.
  EXPECT_EQ(suppressRule({.node_cpus = 2, .slo_percent = 100}).be_cpus, 2);
}

TEST(SuppressRule, BeCpusetIsTheHighestNumberedCpus) {
  EXPECT_EQ(beCpuset(2, 1), "1");
  EXPECT_EQ(beCpuset(2, 2), "0-1");
  EXPECT_EQ(beCpuset(4, 2), "2-3");
  EXPECT_EQ(beCpuset(4, 0), "3");
  EXPECT_EQ(beCpuset(4, 9), "0-3");
  EXPECT_EQ(beCpuset(0, 1), "");
}

}  // namespace
}  // namespace colod::suppress
