// SPDX-License-Identifier: Apache-2.0
#include "colod/policy/config.h"

#include <gtest/gtest.h>

#include <fstream>
#include <sstream>

#include "colod/testing/result_matchers.h"

namespace colod::policy {
namespace {

TEST(ConfigTest, DefaultYamlParsesToDefaults) {
  Config c = ASSERT_OK(parsePolicySection(defaultConfigYaml(), "default.yaml"));
  EXPECT_EQ(c, Config{});
}

TEST(ConfigTest, CommittedDefaultFileIsTheCompiledOne) {
  std::ifstream in(std::string(COLOD_POLICY_CONFIG_DIR) + "/default.yaml");
  ASSERT_TRUE(in) << "policy/config/default.yaml missing";
  std::ostringstream os;
  os << in.rdbuf();
  EXPECT_EQ(os.str(), std::string(defaultConfigYaml()));
}

TEST(ConfigTest, EmptyAndNullGiveDefaults) {
  EXPECT_EQ(ASSERT_OK(parsePolicySection("", "x.yaml")), Config{});
  EXPECT_EQ(ASSERT_OK(parseConfigDocument("daemon: {interval_ms: 100}\n", "x.yaml")), Config{});
}

TEST(ConfigTest, ParsesEverySection) {
  const char* yaml = R"(
dry_run: true
detection:
  window_intervals: 8
  hit_intervals: 4
  min_samples: 10
  baseline_alpha: 0.5
  victim_tiers: [ls, system]
  severe_wait_load: 0.8
thresholds:
  runq_p99_us: 1500
  psi_cpu_some_avg10: 20
tier_thresholds:
  system: {runq_p99_us: 5000}
actions:
  cpu_ladder: [cpuset, cpu_shares]
  verify_intervals: 3
  quiet_intervals: 20
  blame_window_intervals: 12
  idle_hold_intervals: 0
  min_blame_preemptions: 2.5
  min_blame_wait_us: 400
floors:
  be_min_cpus: 2
levers:
  be_cpu_shares: 8
)";
  Config c = ASSERT_OK(parsePolicySection(yaml, "p.yaml"));
  EXPECT_TRUE(c.dry_run);
  EXPECT_EQ(c.detection.window_intervals, 8);
  EXPECT_EQ(c.detection.hit_intervals, 4);
  EXPECT_EQ(c.detection.min_samples, 10u);
  EXPECT_DOUBLE_EQ(c.detection.baseline_alpha, 0.5);
  EXPECT_EQ(c.detection.victim_tiers, (std::vector<Tier>{Tier::Ls, Tier::System}));
  EXPECT_DOUBLE_EQ(c.detection.severe_wait_load, 0.8);
  EXPECT_EQ(c.thresholds.runq_p99_us, 1500u);
  EXPECT_DOUBLE_EQ(c.thresholds.psi_cpu_some_avg10, 20.0);
  ASSERT_EQ(c.tier_thresholds.count(Tier::System), 1u);
  EXPECT_EQ(c.tier_thresholds[Tier::System].runq_p99_us, 5000u);
  EXPECT_EQ(c.actions.cpu_ladder, (std::vector<Lever>{Lever::Cpuset, Lever::CpuShares}));
  EXPECT_EQ(c.actions.verify_intervals, 3);
  EXPECT_EQ(c.actions.quiet_intervals, 20);
  EXPECT_EQ(c.actions.blame_window_intervals, 12);
  EXPECT_EQ(c.actions.idle_hold_intervals, 0);
  EXPECT_DOUBLE_EQ(c.actions.min_blame_preemptions, 2.5);
  EXPECT_EQ(c.actions.min_blame_wait_us, 400u);
  EXPECT_EQ(c.floors.be_min_cpus, 2);
  EXPECT_EQ(c.levers.be_cpu_shares, 8u);
}

TEST(ConfigTest, DocumentWithPolicySection) {
  Config c =
      ASSERT_OK(parseConfigDocument("interval_ms: 100\npolicy:\n  dry_run: true\n", "d.yaml"));
  EXPECT_TRUE(c.dry_run);
}

struct BadCase {
  const char* name;
  const char* yaml;
  const char* pattern;  // regex on the message
};

class ConfigErrorTest : public ::testing::TestWithParam<BadCase> {};

TEST_P(ConfigErrorTest, PreciseMessage) {
  EXPECT_ERR(parsePolicySection(GetParam().yaml, "colod.yaml"), EINVAL, GetParam().pattern);
}

INSTANTIATE_TEST_SUITE_P(
    Table,
    ConfigErrorTest,
    ::testing::Values(
        BadCase{"unknown_top_key", "dry_run: false\nfoo: 1\n",
                R"(colod\.yaml:2:1: foo: unknown key \(allowed: dry_run detection)"},
        BadCase{"blame_window_zero", "actions:\n  blame_window_intervals: 0\n",
                R"(colod\.yaml:2:27: actions\.blame_window_intervals: "0": out of range)"},
        BadCase{"idle_hold_negative", "actions:\n  idle_hold_intervals: -1\n",
                R"(colod\.yaml:2:24: actions\.idle_hold_intervals: "-1": )"},
        BadCase{"unknown_nested_key", "detection:\n  windw_intervals: 3\n",
                R"(colod\.yaml:2:3: detection\.windw_intervals: unknown key)"},
        BadCase{"bad_type_bool", "dry_run: maybe\n",
                R"(colod\.yaml:1:10: dry_run: "maybe": expected true or false)"},
        BadCase{"bad_type_int", "detection:\n  window_intervals: five\n",
                R"(detection\.window_intervals: "five": expected an unsigned integer)"},
        BadCase{"negative", "thresholds:\n  runq_p99_us: -5\n",
                R"(thresholds\.runq_p99_us: "-5": expected an unsigned integer)"},
        BadCase{"out_of_range", "floors:\n  be_min_cpu_shares: 1\n",
                R"(colod\.yaml:2:22: floors\.be_min_cpu_shares: "1": out of range \[2, 262144\])"},
        BadCase{"zero_quota_floor", "floors:\n  be_min_quota_millicores: 0\n",
                R"(floors\.be_min_quota_millicores: "0": out of range)"},
        BadCase{"k_greater_than_n", "detection:\n  window_intervals: 3\n  hit_intervals: 4\n",
                R"(detection\.hit_intervals: "4": must not exceed window_intervals \(3\))"},
        BadCase{"unknown_lever", "actions:\n  cpu_ladder: [cpu_shares, nice]\n",
                R"(actions\.cpu_ladder\[1\]: "nice": unknown lever)"},
        BadCase{"duplicate_lever", "actions:\n  cpu_ladder: [cpuset, cpuset]\n",
                R"(actions\.cpu_ladder\[1\]: "cpuset": lever listed twice)"},
        BadCase{"memory_in_cpu_ladder", "actions:\n  cpu_ladder: [memory_limit]\n",
                R"(memory_limit belongs in memory_ladder)"},
        BadCase{"empty_ladder", "actions:\n  cpu_ladder: []\n",
                R"(actions\.cpu_ladder: "\[\]": at least one lever)"},
        BadCase{"bad_victim_tier", "detection:\n  victim_tiers: [be]\n",
                R"(detection\.victim_tiers\[0\]: "be": victim tiers are ls or system)"},
        BadCase{"not_a_mapping", "detection: 5\n", R"(detection: "5": expected a mapping)"},
        BadCase{"tier_thresholds_be", "tier_thresholds:\n  be: {runq_p99_us: 1}\n",
                R"(tier_thresholds\.be: unknown key)"},
        BadCase{"bad_yaml", "detection: [\n", R"(colod\.yaml:2:1: invalid YAML)"}),
    [](const auto& p) { return std::string(p.param.name); });

TEST(ConfigTest, DocumentKeyPathsArePrefixed) {
  EXPECT_ERR(parseConfigDocument("policy:\n  detection:\n    bogus: 1\n", "colod.yaml"), EINVAL,
             R"(colod\.yaml:3:5: policy\.detection\.bogus: unknown key)");
}

TEST(ConfigTest, ValidateRejectsHandBuiltNonsense) {
  Config c;
  c.floors.be_min_cpus = 0;
  EXPECT_ERR(validateConfig(c, "api"), EINVAL, R"(api: floors\.be_min_cpus: "0": must be >= 1)");
  Config d;
  d.detection.hit_intervals = 9;
  EXPECT_ERR(validateConfig(d, "api"), EINVAL, "hit_intervals");
}

TEST(ConfigTest, EffectiveThresholdsLayering) {
  Config c;
  c.thresholds.runq_p99_us = 2000;
  c.tier_thresholds[Tier::Ls].runq_p99_us = 1000;
  c.tier_thresholds[Tier::Ls].baseline_factor = 3.0;
  ContainerInfo info;
  info.pod_annotations[std::string(kAnnotationRunqP99)] = "700";
  info.container_annotations[std::string(kAnnotationRunqP99)] = "500";
  info.pod_annotations[std::string(kAnnotationBaselineFactor)] = "oops";
  std::vector<std::string> problems;
  Thresholds t = effectiveThresholds(c, Tier::Ls, info, &problems);
  EXPECT_EQ(t.runq_p99_us, 500u);            // container annotation wins
  EXPECT_DOUBLE_EQ(t.baseline_factor, 3.0);  // tier override; bad annotation ignored
  ASSERT_EQ(problems.size(), 1u);
  EXPECT_NE(problems[0].find("colod.io/baseline-factor=\"oops\" ignored"), std::string::npos);
  Thresholds be = effectiveThresholds(c, Tier::Be, ContainerInfo{}, nullptr);
  EXPECT_EQ(be.runq_p99_us, 2000u);
}

}  // namespace
}  // namespace colod::policy
