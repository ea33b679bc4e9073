// SPDX-License-Identifier: Apache-2.0
#include "roles.h"

#include <gtest/gtest.h>

namespace colod::nri::testplugin {
namespace {

PodSandbox pod(std::string_view qos, std::string_view exclusive = "") {
  PodSandbox p;
  p.name = "p";
  if (!qos.empty()) {
    p.labels = StringMap{{std::string(kQosLabel), std::string(qos)}};
  }
  if (!exclusive.empty()) {
    p.annotations = StringMap{{std::string(kExclusiveAnnotation), std::string(exclusive)}};
  }
  return p;
}

Container ctr(std::string id) {
  Container c;
  c.id = std::move(id);
  c.name = "c";
  return c;
}

TEST(TestPluginRoles, KoordinatorSetsLsCpusetAndBeShares) {
  Roles r({.role = Role::Koordinator, .ls_cpus = "0-1"});
  auto ls = r.adjust(pod("LS"), ctr("a"));
  ASSERT_TRUE(ls);
  EXPECT_EQ(ls->cpu.cpus, "0-1");
  EXPECT_FALSE(ls->cpu.shares);
  EXPECT_EQ(r.adjust(pod("LSR"), ctr("b"))->cpu.cpus, "0-1");
  auto be = r.adjust(pod("BE"), ctr("c"));
  ASSERT_TRUE(be);
  EXPECT_EQ(be->cpu.shares, 2U);
  EXPECT_TRUE(be->cpu.cpus.empty());
  EXPECT_FALSE(r.adjust(pod(""), ctr("d")));
  EXPECT_FALSE(r.adjust(pod("LSE"), ctr("e")));
}

TEST(TestPluginRoles, TopologyHandsOutExclusiveCpusUntilThePoolIsEmpty) {
  Roles r({.role = Role::Topology, .pool = {1, 2, 3}});
  EXPECT_EQ(r.adjust(pod("LS", "2"), ctr("a"))->cpu.cpus, "1-2");
  EXPECT_FALSE(r.adjust(pod("LS", "2"), ctr("b")));  // one CPU left
  EXPECT_EQ(r.adjust(pod("LS", "1"), ctr("c"))->cpu.cpus, "3");
  EXPECT_FALSE(r.adjust(pod("LS"), ctr("d")));       // no annotation
  EXPECT_FALSE(r.adjust(pod("BE", "1"), ctr("e")));  // not LS
  r.release("a");
  EXPECT_EQ(r.adjust(pod("LSR", "2"), ctr("f"))->cpu.cpus, "1-2");
}

TEST(TestPluginRoles, ObserveNeverAdjusts) {
  Roles r({.role = Role::Observe});
  EXPECT_FALSE(r.adjust(pod("LS", "1"), ctr("a")));
  EXPECT_FALSE(r.adjust(pod("BE"), ctr("b")));
}

TEST(TestPluginRoles, ConfigAndCpuLists) {
  auto cfg = parseConfig("# pre-installed\nrole: topology\npool: \"1-2,4\"\nls_cpus: 0\n", {});
  ASSERT_TRUE(cfg) << cfg.error().message();
  EXPECT_EQ(cfg->role, Role::Topology);
  EXPECT_EQ(cfg->pool, (std::set<int>{1, 2, 4}));
  EXPECT_EQ(formatCpuList(cfg->pool), "1-2,4");
  EXPECT_FALSE(parseConfig("role: kubelet\n", {}));
  EXPECT_FALSE(parseConfig("colour: red\n", {}));
  EXPECT_FALSE(parseConfig("be_shares: 1\n", {}));
  EXPECT_FALSE(parseCpuList("3-1"));
  EXPECT_FALSE(parseCpuList("a"));
}

}  // namespace
}  // namespace colod::nri::testplugin
