// SPDX-License-Identifier: Apache-2.0
#include "colod/nri/registry.h"

#include <gtest/gtest.h>

namespace colod::nri {
namespace {

Container ctr(const std::string& id, const std::string& pod) {
  Container c;
  c.id = id;
  c.pod_sandbox_id = pod;
  c.state = ContainerState::Running;
  c.args = {"a", "b"};
  c.resources.cpu.shares = 100;
  return c;
}

TEST(Registry, ResetEventsUpdatesAndSnapshots) {
  Registry r;
  auto s0 = r.snapshot();
  EXPECT_FALSE(s0->synchronized);
  PodSandbox p;
  p.id = "p1";
  r.reset({p}, {ctr("c1", "p1"), ctr("c2", "p1")});
  auto s1 = r.snapshot();
  EXPECT_TRUE(s1->synchronized);
  EXPECT_EQ(s1->containers.size(), 2U);
  EXPECT_TRUE(s1->container("c1")->args.empty()) << "args are not kept";
  EXPECT_EQ(r.snapshot(), s1) << "cached until a change";

  ContainerUpdate u{.container_id = "c1", .resources = {}, .ignore_failure = false};
  u.resources.cpu.cpus = "0-1";
  u.resources.memory.limit = 1 << 20;
  r.applyUpdate(u);
  r.applyUpdate({.container_id = "nope", .resources = {}, .ignore_failure = false});
  auto s2 = r.snapshot();
  EXPECT_GT(s2->generation, s1->generation);
  EXPECT_EQ(s2->container("c1")->resources.cpu.cpus, "0-1");
  EXPECT_EQ(s2->container("c1")->resources.cpu.shares, 100U) << "unset fields kept";
  EXPECT_EQ(s1->container("c1")->resources.cpu.cpus, "") << "old snapshots are immutable";

  r.setContainerState("c2", ContainerState::Stopped);
  EXPECT_EQ(r.snapshot()->container("c2")->state, ContainerState::Stopped);
  EXPECT_EQ(r.snapshot()->containersOfPod("p1").size(), 2U);
  r.removeContainer("c2");
  EXPECT_EQ(r.snapshot()->container("c2"), nullptr);
  r.removePod("p1");
  EXPECT_TRUE(r.snapshot()->containers.empty()) << "pod removal drops its containers";
  r.markUnsynchronized();
  EXPECT_FALSE(r.snapshot()->synchronized);
}

TEST(Registry, Bounded) {
  Registry r({.max_pods = 2, .max_containers = 3});
  std::vector<Container> cs;
  for (int i = 0; i < 5; ++i) {
    cs.push_back(ctr("c" + std::to_string(i), "p"));
  }
  r.reset({}, cs);
  EXPECT_EQ(r.snapshot()->containers.size(), 3U);
  EXPECT_EQ(r.snapshot()->dropped, 2U);
  r.upsertContainer(ctr("c9", "p"));
  EXPECT_EQ(r.snapshot()->containers.size(), 3U);
  EXPECT_EQ(r.snapshot()->dropped, 3U);
}

bool colodKey(std::string_view key) { return key.starts_with("colod.io/"); }

// With keep_key, pods and containers keep only the labels and annotations it accepts, however
// they arrive (a Synchronize, an event); without it, all of them.
TEST(Registry, KeepsOnlyTheKeysAsked) {
  auto withKeys = [](Container c) {
    c.labels = {{"io.kubernetes.pod.name", "web-0"}, {"colod.io/tier", "ls"}};
    c.annotations = {{"io.kubernetes.cri.sandbox-id", std::string(64, 'a')},
                     {"colod.io/protect", "true"},
                     {"io.kubernetes.container.hash", "a1b2"}};
    return c;
  };
  PodSandbox p;
  p.id = "p1";
  p.labels = {{"app", "web"}, {"colod.io/tier", "be"}};
  p.annotations = {{"kubernetes.io/config.seen", "2026-12-03T12:00:00Z"}};

  Registry r({.keep_key = &colodKey});
  r.reset({p}, {withKeys(ctr("c1", "p1"))});
  auto s = r.snapshot();
  const Container* c1 = s->container("c1");
  ASSERT_NE(c1, nullptr);
  EXPECT_EQ(c1->labels, (StringMap{{"colod.io/tier", "ls"}}));
  EXPECT_EQ(c1->annotations, (StringMap{{"colod.io/protect", "true"}}));
  EXPECT_EQ(c1->resources.cpu.shares, 100U) << "only labels and annotations are filtered";
  EXPECT_EQ(s->pod("p1")->labels, (StringMap{{"colod.io/tier", "be"}}));
  EXPECT_TRUE(s->pod("p1")->annotations.empty());
  EXPECT_EQ(s->pod("p1")->annotations.heapBytes(), 0U) << "no text kept for dropped keys";

  PodSandbox p2 = p;
  p2.id = "p2";
  r.upsertPod(p2);
  r.upsertContainer(withKeys(ctr("c2", "p2")));
  s = r.snapshot();
  EXPECT_EQ(s->pod("p2")->labels, (StringMap{{"colod.io/tier", "be"}}));
  EXPECT_EQ(s->container("c2")->labels, (StringMap{{"colod.io/tier", "ls"}}));
  EXPECT_EQ(s->container("c2")->annotations.size(), 1U);

  Registry all;
  all.reset({p}, {withKeys(ctr("c1", "p1"))});
  EXPECT_EQ(all.snapshot()->container("c1")->annotations.size(), 3U);
  EXPECT_EQ(all.snapshot()->pod("p1")->labels.size(), 2U);
}

// Keys view the ids of the objects they map to: every way an object is replaced re-points its
// key, and a snapshot taken earlier stays readable (its entries keep their objects alive).
TEST(Registry, KeysFollowReplacedObjects) {
  Registry r;
  PodSandbox pod;
  pod.id = std::string(64, 'p');
  std::vector<Container> cs;
  for (int i = 0; i < 20; ++i) {
    cs.push_back(ctr(std::string(60, 'c') + std::to_string(1000 + i), pod.id));
  }
  cs.push_back(ctr(cs[3].id, pod.id));  // a duplicate id in one Synchronize: the later one wins
  cs.back().resources.cpu.shares = 7;
  r.reset({pod}, cs);
  auto before = r.snapshot();
  const std::string id = cs[3].id;
  EXPECT_EQ(before->container(id)->resources.cpu.shares, 7U);
  r.setContainerState(id, ContainerState::Paused);
  ContainerUpdate u;
  u.container_id = id;
  u.resources.cpu.quota = 5000;
  r.applyUpdate(u);
  r.upsertContainer(ctr(cs[4].id, pod.id));
  r.setPodState(pod.id, PodState::Stopped);
  PodSandbox pod2 = pod;
  pod2.name = "again";
  r.upsertPod(pod2);
  r.reset({pod}, cs);  // frees the previous content; `before` still holds what it viewed
  r.setContainerState(id, ContainerState::Stopped);
  auto after = r.snapshot();
  for (const auto* s : {before.get(), after.get()}) {
    ASSERT_EQ(s->containers.size(), 20U);
    for (const auto& [key, c] : s->containers) {
      EXPECT_EQ(key, c->id);
      EXPECT_EQ(s->container(key), c.get());
    }
    for (const auto& [key, p] : s->pods) {
      EXPECT_EQ(key, p->id);
    }
  }
  EXPECT_EQ(before->container(id)->state, ContainerState::Running);
  EXPECT_EQ(after->container(id)->state, ContainerState::Stopped);
  EXPECT_EQ(after->container(id)->resources.cpu.shares, 7U);
}

}  // namespace
}  // namespace colod::nri
