// SPDX-License-Identifier: Apache-2.0
#include "colod/policy/tier.h"

#include <gtest/gtest.h>

#include "colod/policy/config.h"
#include "colod/testing/result_matchers.h"

namespace colod::policy {
namespace {

struct TierCase {
  const char* name;
  std::map<std::string, std::string> pod_annotations;
  std::map<std::string, std::string> pod_labels;
  std::map<std::string, std::string> container_annotations;
  std::string cgroup_parent;
  Tier want;
  size_t want_unknown;
};

class TierTest : public ::testing::TestWithParam<TierCase> {};

TEST_P(TierTest, Classifies) {
  const TierCase& c = GetParam();
  ContainerInfo info;
  info.id = "c1";
  info.pod_annotations = c.pod_annotations;
  info.pod_labels = c.pod_labels;
  info.container_annotations = c.container_annotations;
  info.cgroup_parent = c.cgroup_parent;
  TierResult r = classifyTier(info);
  EXPECT_EQ(r.tier, c.want) << r.source;
  EXPECT_EQ(r.unknown.size(), c.want_unknown);
  EXPECT_FALSE(r.source.empty());
}

INSTANTIATE_TEST_SUITE_P(
    Table,
    TierTest,
    ::testing::Values(
        TierCase{"colod_annotation_ls", {{"colod.io/tier", "ls"}}, {}, {}, "", Tier::Ls, 0},
        TierCase{"colod_label_be", {}, {{"colod.io/tier", "BE"}}, {}, "", Tier::Be, 0},
        TierCase{"colod_system", {{"colod.io/tier", "system"}}, {}, {}, "", Tier::System, 0},
        TierCase{"annotation_beats_label",
                 {{"colod.io/tier", "be"}},
                 {{"colod.io/tier", "ls"}},
                 {},
                 "",
                 Tier::Be,
                 0},
        TierCase{"container_annotation_beats_pod",
                 {{"colod.io/tier", "be"}},
                 {},
                 {{"colod.io/tier", "ls"}},
                 "",
                 Tier::Ls,
                 0},
        TierCase{"colod_beats_koordinator",
                 {{"colod.io/tier", "ls"}, {"koordinator.sh/qosClass", "BE"}},
                 {},
                 {},
                 "",
                 Tier::Ls,
                 0},
        TierCase{"koord_lse", {}, {{"koordinator.sh/qosClass", "LSE"}}, {}, "", Tier::Ls, 0},
        TierCase{"koord_lsr", {}, {{"koordinator.sh/qosClass", "LSR"}}, {}, "", Tier::Ls, 0},
        TierCase{"koord_ls", {}, {{"koordinator.sh/qosClass", "LS"}}, {}, "", Tier::Ls, 0},
        TierCase{"koord_be", {}, {{"koordinator.sh/qosClass", "BE"}}, {}, "", Tier::Be, 0},
        TierCase{"katalyst_dedicated",
                 {{"katalyst.kubewharf.io/qos_level", "dedicated_cores"}},
                 {},
                 {},
                 "",
                 Tier::Ls,
                 0},
        TierCase{"katalyst_shared",
                 {{"katalyst.kubewharf.io/qos_level", "shared_cores"}},
                 {},
                 {},
                 "",
                 Tier::Ls,
                 0},
        TierCase{"katalyst_reclaimed",
                 {{"katalyst.kubewharf.io/qos_level", "reclaimed_cores"}},
                 {},
                 {},
                 "",
                 Tier::Be,
                 0},
        TierCase{"katalyst_system",
                 {{"katalyst.kubewharf.io/qos_level", "system_cores"}},
                 {},
                 {},
                 "",
                 Tier::System,
                 0},
        TierCase{
            "qos_besteffort_systemd", {}, {}, {}, "kubepods-besteffort-podabc.slice", Tier::Be, 0},
        TierCase{"qos_burstable_cgroupfs", {}, {}, {}, "/kubepods/burstable/podabc", Tier::Ls, 0},
        TierCase{"qos_guaranteed_systemd", {}, {}, {}, "kubepods-podabc.slice", Tier::Ls, 0},
        TierCase{"qos_guaranteed_cgroupfs", {}, {}, {}, "/kubepods/podabc", Tier::Ls, 0},
        TierCase{"unknown_value_reported_then_qos",
                 {{"colod.io/tier", "gold"}},
                 {},
                 {},
                 "/kubepods/besteffort/podx",
                 Tier::Be,
                 1},
        TierCase{"unknown_koord_reported",
                 {},
                 {{"koordinator.sh/qosClass", "XX"}},
                 {},
                 "",
                 Tier::Unknown,
                 1},
        TierCase{"nothing", {}, {}, {}, "/system.slice/foo", Tier::Unknown, 0}),
    [](const auto& p) { return std::string(p.param.name); });

TEST(TierTest, UnknownValueNamesKeyAndWhere) {
  ContainerInfo info;
  info.pod_labels["colod.io/tier"] = "gold";
  TierResult r = classifyTier(info);
  ASSERT_EQ(r.unknown.size(), 1u);
  EXPECT_EQ(r.unknown[0].key, "colod.io/tier");
  EXPECT_EQ(r.unknown[0].value, "gold");
  EXPECT_EQ(r.unknown[0].where, "pod label");
  EXPECT_EQ(r.tier, Tier::Unknown);
}

TEST(TierTest, CallerTierWins) {
  ContainerInfo info;
  info.tier = Tier::System;
  info.cgroup_parent = "kubepods-besteffort-pod1.slice";
  EXPECT_EQ(classifyTier(info).tier, Tier::System);
}

TEST(PolicyKeyTest, CoversEveryKeyTheEngineReads) {
  for (std::string_view k :
       {kTierKey, kKoordinatorQosKey, kKatalystQosKey, kAnnotationRunqP99,
        kAnnotationBaselineFactor, kAnnotationPsiCpuSome, kAnnotationReclaimStall}) {
    EXPECT_TRUE(isPolicyKey(k)) << k;
  }
  EXPECT_FALSE(isPolicyKey("io.kubernetes.pod.name"));
  EXPECT_FALSE(isPolicyKey("app"));
  EXPECT_FALSE(isPolicyKey("koordinator.sh/other"));
  EXPECT_FALSE(isPolicyKey(""));
}

TEST(CpuListTest, ParsesAndFormats) {
  auto cpus = ASSERT_OK(parseCpuList("0-3,8,10-11\n"));
  EXPECT_EQ(cpus, (std::vector<int>{0, 1, 2, 3, 8, 10, 11}));
  EXPECT_EQ(formatCpuList(cpus), "0-3,8,10-11");
  EXPECT_EQ(ASSERT_OK(parseCpuList("")), std::vector<int>{});
  EXPECT_EQ(formatCpuList(std::vector<int>{5, 1, 2, 2, 3}), "1-3,5");
  EXPECT_EQ(formatCpuList(std::vector<int>{}), "");
}

TEST(CpuListTest, RejectsGarbage) {
  EXPECT_ERR(parseCpuList("0-"), EINVAL, "token \"0-\"");
  EXPECT_ERR(parseCpuList("3-1"), EINVAL, "token \"3-1\"");
  EXPECT_ERR(parseCpuList("a"), EINVAL, "bad CPU list");
  EXPECT_ERR(parseCpuList("1,,2"), EINVAL, "token \"\"");
  EXPECT_ERR(parseCpuList("99999"), EINVAL, "99999");
}

ContainerInfo guaranteed(const std::string& cpuset, int64_t quota) {
  ContainerInfo c;
  c.cgroup_parent = "kubepods-podx.slice";
  c.resources.cpuset_cpus = cpuset;
  c.resources.cpu_quota = quota;
  c.resources.cpu_period = 100000;
  return c;
}

TEST(ExclusiveCpusTest, InfersStaticCpuManagerPinning) {
  const std::vector<int> node{0, 1, 2, 3};
  EXPECT_TRUE(inferExclusiveCpus(guaranteed("2-3", 200000), node, std::vector<int>{0, 1}));
  EXPECT_TRUE(inferExclusiveCpus(guaranteed("3", 100000), node, {}));
  // Fractional CPU: shared pool.
  EXPECT_FALSE(inferExclusiveCpus(guaranteed("3", 150000), node, {}));
  // Whole node: not a strict subset.
  EXPECT_FALSE(inferExclusiveCpus(guaranteed("0-3", 400000), node, {}));
  // Overlaps the shared pool.
  EXPECT_FALSE(inferExclusiveCpus(guaranteed("1-2", 200000), node, std::vector<int>{0, 1}));
  // Count mismatch.
  EXPECT_FALSE(inferExclusiveCpus(guaranteed("2-3", 100000), node, {}));
  ContainerInfo burst = guaranteed("2-3", 200000);
  burst.cgroup_parent = "kubepods-burstable-podx.slice";
  EXPECT_FALSE(inferExclusiveCpus(burst, node, {}));
}

}  // namespace
}  // namespace colod::policy
