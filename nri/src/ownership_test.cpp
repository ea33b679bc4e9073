// SPDX-License-Identifier: Apache-2.0
#include "colod/nri/ownership.h"

#include <gtest/gtest.h>

namespace colod::nri {
namespace {

TEST(Ownership, ParsesTheV010ConflictWording) {
  auto c = parseConflictMessage(
      R"(NRI CreateContainer failed: plugins "50-colod" and "20-topology" both tried to set CPUSetCPUs)",
      "colod", "50-colod");
  ASSERT_TRUE(c);
  EXPECT_EQ(c->other_plugin, "20-topology");
  EXPECT_EQ(c->field, "CPUSetCPUs");
  EXPECT_EQ(c->container_id, "");
  EXPECT_EQ(c->source, "runtime");
  EXPECT_EQ(c->message.rfind("plugins ", 0), 0U);
}

TEST(Ownership, ParsesTheLegacyWordingAndPicksTheOtherPlugin) {
  // We are the earlier owner here: the other plugin is the first name.
  auto c = parseConflictMessage(
      R"(plugins "20-koord" and "50-colod" both tried to set CPU set cpus for container abc123)",
      "colod", "50-colod");
  ASSERT_TRUE(c);
  EXPECT_EQ(c->other_plugin, "20-koord");
  EXPECT_EQ(c->field, "CPU set cpus");
  EXPECT_EQ(c->container_id, "abc123");
  EXPECT_FALSE(parseConflictMessage("NRI update of some containers failed", "colod", "50-colod"));
  EXPECT_FALSE(parseConflictMessage(R"(plugins "a" and "b" disagree)", "a", "10-a"));
  EXPECT_FALSE(parseConflictMessage(R"(plugins "a)", "a", "10-a"));
}

TEST(Ownership, StripsOnlyFieldsAnotherPluginOwns) {
  OwnerTable t;
  t.record(
      {.container_id = "c1",
       .simple = {{static_cast<int32_t>(Field::CPUSetCPUs), "20-topology"},
                  {static_cast<int32_t>(Field::CPUQuota), "50-colod"}},
       .compound = {{static_cast<int32_t>(Field::CgroupsUnified), {{"cpu.idle", "20-topology"}}}}});
  EXPECT_EQ(t.owner("c1", Field::CPUSetCPUs), "20-topology");
  EXPECT_FALSE(t.owner("c1", Field::CPUShares));
  EXPECT_FALSE(t.owner("c2", Field::CPUSetCPUs));

  ContainerUpdate u{.container_id = "c1"};
  u.resources.cpu.cpus = "0";
  u.resources.cpu.quota = 50000;
  u.resources.cpu.shares = 2;
  u.resources.unified = StringMap{{"cpu.idle", "1"}, {"memory.high", "max"}};
  auto conflicts = t.stripOwnedByOthers(u, "colod", "50-colod");
  ASSERT_EQ(conflicts.size(), 2U);
  EXPECT_EQ(conflicts[0].other_plugin, "20-topology");
  EXPECT_EQ(conflicts[0].source, "owned");
  EXPECT_TRUE(u.resources.cpu.cpus.empty());
  EXPECT_EQ(u.resources.cpu.quota, 50000);  // ours
  EXPECT_EQ(u.resources.cpu.shares, 2U);    // nobody's
  EXPECT_EQ(u.resources.unified.get("cpu.idle"), std::nullopt);
  EXPECT_EQ(u.resources.unified.get("memory.high"), "max");

  ContainerUpdate other{.container_id = "c2"};
  other.resources.cpu.cpus = "1";
  EXPECT_TRUE(t.stripOwnedByOthers(other, "colod", "50-colod").empty());
  t.forget("c1");
  EXPECT_FALSE(t.owner("c1", Field::CPUSetCPUs));
}

TEST(Ownership, FieldsSetAndNames) {
  LinuxResources r;
  EXPECT_TRUE(fieldsSet(r).empty());
  r.cpu.mems = "0";
  r.memory.limit = 1;
  r.pids_limit = 5;
  EXPECT_EQ(fieldsSet(r),
            (std::vector<Field>{Field::CPUSetMems, Field::MemLimit, Field::PidsLimit}));
  EXPECT_EQ(fieldName(21), "CPUSetCPUs");
  EXPECT_EQ(fieldName(99), "Field(99)");
}

}  // namespace
}  // namespace colod::nri
