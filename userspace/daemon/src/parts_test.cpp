// SPDX-License-Identifier: Apache-2.0
// The daemon's parts that other threads read, from data: the decision log, the trace
// recorders, the view builder and the control backend over a view and hooks.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <thread>

#include "colod/daemon/control_backend.h"
#include "colod/daemon/decision_log.h"
#include "colod/daemon/recorder.h"
#include "colod/daemon/view.h"
#include "colod/testing/result_matchers.h"

namespace colod::daemon {
namespace {

using namespace std::chrono_literals;
namespace v1 = control::v1;

v1::Decision decision(uint64_t seq, const std::string& id, const std::string& reason = "") {
  v1::Decision d;
  d.set_seq(seq);
  d.set_container_id(id);
  d.set_reason(reason);
  d.set_outcome("pending");
  return d;
}

TEST(DecisionLog, IsBoundedKeepsOutcomesAndCounts) {
  DecisionLog log(3);
  for (uint64_t i = 1; i <= 5; ++i) {
    log.add(decision(i, i % 2 == 0 ? "a" : "b"), i == 5 ? "relax" : "engage");
  }
  auto all = log.recent(0);
  ASSERT_EQ(all.size(), 3U);
  EXPECT_EQ(all.front().seq(), 3U);
  EXPECT_EQ(log.recent(2).front().seq(), 4U);
  log.setOutcome(4, "applied");
  log.setOutcome(1, "applied");  // gone from the ring: ignored
  log.setOutcome(0, "applied");
  EXPECT_EQ(log.recent(0)[1].outcome(), "applied");
  EXPECT_EQ(log.countsByKind().at("engage"), 4U);
  EXPECT_EQ(log.countsByKind().at("relax"), 1U);
  log.add(decision(6, "c", "because of a victim b"), "engage");
  EXPECT_EQ(log.about("b").size(), 2U) << "as target and named in a reason";
  log.setKept(1);
  EXPECT_EQ(log.recent(0).size(), 1U);
}

TEST(TraceRecorders, ASessionGetsItsHeadThenTheLinesAndEndsWhenClosed) {
  TraceRecorders rec;
  EXPECT_FALSE(rec.active());
  std::string got;
  std::atomic<bool> started{false};
  std::thread t([&] {
    auto r = rec.serve(
        0,
        [&] {
          started = true;
          return std::string("head\n");
        },
        [&](const RecordChunk& c) {
          got += c.data;
          return true;
        },
        [] { return false; });
    EXPECT_TRUE(r.has_value());
  });
  while (!started || !rec.active()) {
    std::this_thread::sleep_for(1ms);
  }
  rec.broadcast("one", false);
  rec.withLock([](bool active, const TraceRecorders::Broadcast& send) {
    EXPECT_TRUE(active);
    send("two", true);
  });
  std::this_thread::sleep_for(300ms);
  rec.closeAll();
  t.join();
  EXPECT_EQ(got, "head\none\ntwo\n");
  EXPECT_FALSE(rec.active());
}

TEST(TraceRecorders, ASlowSessionLosesLinesNotMemory) {
  TraceRecorders rec(10);  // bytes per session
  std::thread t([&] {
    (void)rec.serve(
        0, [] { return std::string(); },
        [&](const RecordChunk&) {
          std::this_thread::sleep_for(50ms);
          return true;
        },
        [] { return false; });
  });
  while (!rec.active()) {
    std::this_thread::sleep_for(1ms);
  }
  for (int i = 0; i < 50; ++i) {
    rec.broadcast("0123456789", false);  // 11 bytes each with its newline: never fits
  }
  rec.closeAll();
  t.join();
  SUCCEED() << "bounded: no line fit, nothing grew";
}

TEST(TraceRecorders, ASessionEndsAtItsDeadlineOrWhenTheClientLeaves) {
  TraceRecorders rec;
  const auto t0 = std::chrono::steady_clock::now();
  ASSERT_OK(rec.serve(
      1, [] { return std::string("h\n"); }, [](const RecordChunk&) { return true; },
      [] { return false; }));
  EXPECT_GE(std::chrono::steady_clock::now() - t0, 1s);
  int writes = 0;
  ASSERT_OK(rec.serve(
      0, [] { return std::string("h\n"); },
      [&](const RecordChunk&) {
        ++writes;
        return false;  // the client is gone
      },
      [] { return false; }));
  EXPECT_EQ(writes, 1);
}

// Inputs whose rows come from a table (the loop fills them from its own).
ViewInputs inputsOf(const std::vector<ViewRow>& rows) {
  ViewInputs in;
  in.row_count = rows.size();
  in.fill_row = [&rows](std::size_t i, ViewRow& r) { r = rows[i]; };
  return in;
}

ViewRow row(const std::string& id, const std::string& ns, const std::string& pod) {
  ViewRow r;
  r.id = id;
  r.name = "c";
  r.pod = pod;
  r.pod_namespace = ns;
  r.tier = "be";
  r.cgroup_id = 7;
  r.cgroup_rel = "/kubepods/" + id;
  r.resources.cpu_quota = 50000;
  r.resources.cpu_period = 100000;
  r.resources.cpu_shares = 2;
  return r;
}

TEST(BuildView, SortsByNameAndKeepsWhereEachRowCameFrom) {
  std::vector<ViewRow> rows = {row("id-z", "zeta", "p"), row("id-a", "alpha", "p")};
  collect::CgroupSample s;
  s.runq.p99_us = 1234;
  s.oncpu_ns = 50'000'000;
  s.runq_hist[3] = 9;
  rows[0].last = &s;
  rows[0].preempted_by = {{"jobs/b/hog", 4}, {"host", 1}};
  rows[1].cgroup_id = 0;
  ViewInputs in = inputsOf(rows);
  in.node_cpus = 2;
  in.interval_ms = 100;
  in.status.set_mode("act");
  auto v = buildView(in);
  ASSERT_EQ(v->containers.size(), 2U);
  EXPECT_EQ(v->containers[0].id(), "id-a");
  EXPECT_EQ(v->source[0], 1U);
  EXPECT_EQ(v->containers[0].cgroup_path(), "") << "unresolved";
  EXPECT_EQ(v->containers[1].runq_p99_us(), 1234U);
  EXPECT_DOUBLE_EQ(v->containers[1].cpu_util(), 0.5);
  ASSERT_EQ(v->containers[1].preempted_by_size(), 2);
  EXPECT_EQ(v->containers[1].preempted_by(0).container(), "jobs/b/hog");
  EXPECT_EQ((*v->last[v->source[1]])[3], 9U);
  EXPECT_FALSE(v->last[v->source[0]].has_value());
  EXPECT_DOUBLE_EQ(*v->metrics.containers[0].quota_cpus, 0.5);
  EXPECT_EQ(v->metrics.containers[0].cpuset_cpus, 2U) << "all of the node's";
  EXPECT_EQ(v->status.mode(), "act");
  ViewStore store;
  EXPECT_TRUE(store.take()->containers.empty());
  store.publish(v);
  EXPECT_EQ(store.take(), v);
}

// The loop builds a view only for a reader that asks (ViewStore::fresh): the reader gets one
// published after it asked, or the last one once the wait is over.
TEST(ViewStore, FreshWaitsForAViewPublishedAfterTheAsk) {
  ViewStore store;
  auto first = std::make_shared<View>();
  first->unix_ms = 1;
  store.publish(first);
  EXPECT_FALSE(store.wanted()) << "nobody asked";
  EXPECT_EQ(store.fresh(), first) << "no fresh wait set: the last view at once";
  EXPECT_FALSE(store.wanted());

  store.setFreshWait(10s);
  auto second = std::make_shared<View>();
  second->unix_ms = 2;
  std::thread loop([&] {  // as the daemon's loop: publishes at the end of a tick when asked
    while (!store.wanted()) {
      std::this_thread::sleep_for(1ms);
    }
    store.publish(second);
  });
  EXPECT_EQ(store.fresh(), second);
  loop.join();
  EXPECT_FALSE(store.wanted()) << "answered";

  store.setFreshWait(50ms);
  const auto t0 = std::chrono::steady_clock::now();
  EXPECT_EQ(store.fresh(), second) << "nothing published: the last view";
  EXPECT_GE(std::chrono::steady_clock::now() - t0, 50ms);
  EXPECT_TRUE(store.wanted()) << "still asked: the loop's next tick builds one";
  store.publish(first);
  EXPECT_FALSE(store.wanted());
}

class ControlBackendTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::vector<ViewRow> rows = {row("aaaa1111", "prod", "web"), row("bbbb2222", "jobs", "hog")};
    rows[1].managed = true;
    views_.publish(buildView(inputsOf(rows)));
    log_.add(decision(1, "bbbb2222", "engage for prod/web"), "engage");
    hooks_.config_path = "/etc/colod/colod.yaml";
    hooks_.config = [] { return std::make_shared<const Config>(); };
    hooks_.describe = [](const std::string& id) -> Result<policy::ContainerView> {
      return COLOD_ERR(ENOENT, "no container ", id);
    };
    hooks_.applied = [] { return std::vector<policy::AppliedAction>{}; };
    hooks_.overlays = [this] { return overlays_; };
    hooks_.reload = []() -> Result<bool> { return COLOD_ERR(EINVAL, "bad file"); };
    hooks_.trace_head = [] { return std::string("head\n"); };
    hooks_.self_stats = [] { return SelfStats{.cpu_seconds = 1.5, .rss_bytes = 4096}; };
    hooks_.now_ns = [] { return int64_t{5'000'000'000}; };
  }
  ControlBackend backend() { return ControlBackend(views_, log_, rec_, hooks_); }

  ViewStore views_;
  DecisionLog log_{16};
  TraceRecorders rec_;
  ControlHooks hooks_;
  std::vector<ReconcileEntry> overlays_;
};

TEST_F(ControlBackendTest, StatusListDecisionsAndHistogram) {
  auto b = backend();
  auto st = ASSERT_OK(b.status());
  EXPECT_EQ(st.rss_bytes(), 4096U);
  EXPECT_EQ(ASSERT_OK(b.listContainers()).containers_size(), 2);
  EXPECT_EQ(ASSERT_OK(b.decisions(0)).decisions_size(), 1);
  auto h = ASSERT_OK(b.histogram("web/c"));
  EXPECT_EQ(h.container().id(), "aaaa1111");
  EXPECT_EQ(h.runq_slots_size(), static_cast<int>(collect::kHistSlots));
  EXPECT_ERR(b.histogram("nosuch"), ENOENT, "nosuch");
}

TEST_F(ControlBackendTest, ExplainSaysWhatColodHoldsFromTheActuator) {
  ReconcileEntry e;
  e.id = "bbbb2222";
  e.overlay.cpu_quota = 42187;
  e.base.cpu_quota = 130000;
  e.why = "cpu_quota rung 3 for victim aaaa1111";
  e.pending = true;
  e.pending_since_ns = 4'000'000'000;
  e.attempts = 2;
  e.last_error = "refused: NRI update of some containers failed";
  overlays_ = {e};
  auto b = backend();
  auto x = ASSERT_OK(b.explain("hog/c"));
  EXPECT_NE(x.text().find("held by colod: quota=42187"), std::string::npos) << x.text();
  EXPECT_NE(x.text().find("runtime's own: quota=130000"), std::string::npos) << x.text();
  EXPECT_NE(x.text().find("pending 1000 ms, 2 failed attempts"), std::string::npos) << x.text();
  EXPECT_EQ(x.decisions_size(), 1);
  auto web = ASSERT_OK(b.explain("web/c"));
  EXPECT_NE(web.text().find("held by colod: nothing"), std::string::npos) << web.text();
  EXPECT_NE(web.text().find("the engine does not track it"), std::string::npos);
}

TEST_F(ControlBackendTest, DumpConfigAndReload) {
  auto b = backend();
  auto d = ASSERT_OK(b.dump());
  EXPECT_NE(d.json().find("\"overlays\""), std::string::npos);
  auto show = ASSERT_OK(b.configShow());
  EXPECT_EQ(show.path(), "/etc/colod/colod.yaml");
  EXPECT_NE(show.yaml().find("built-in defaults"), std::string::npos);
  v1::ConfigCheckRequest bad;
  bad.set_yaml("daemon:\n  nosuch: 1\n");
  auto chk = ASSERT_OK(b.configCheck(bad));
  EXPECT_FALSE(chk.ok());
  EXPECT_NE(chk.error().find("nosuch"), std::string::npos);
  auto rl = ASSERT_OK(b.configReload());
  EXPECT_FALSE(rl.ok());
  EXPECT_NE(rl.error().find("bad file"), std::string::npos);
}

// config show: the effective values with their sources, and when the configuration was loaded
// (colod's start for the built-in defaults).
TEST_F(ControlBackendTest, ConfigShowFillsTheEffectiveValues) {
  auto conf = std::make_shared<Config>(
      ASSERT_OK(parseConfig("daemon:\n  interval_ms: 200\n", "/etc/colod/colod.yaml")));
  conf->loaded_unix_ms = 1'700'000'000'123;
  hooks_.overrides.log_level = "debug";
  conf->daemon.log_level = "debug";
  hooks_.config = [conf] { return conf; };
  hooks_.started_unix_ms = 1'600'000'000'000;
  auto b = backend();
  auto show = ASSERT_OK(b.configShow());
  EXPECT_EQ(show.loaded_unix_ms(), 1'700'000'000'123);
  ASSERT_GT(show.values_size(), 30);
  EXPECT_EQ(show.values(0).key(), "daemon.interval_ms");
  EXPECT_EQ(show.values(0).value(), "200");
  EXPECT_EQ(show.values(0).source(), v1::ConfigValue::SOURCE_FILE);
  bool saw_flag = false;
  for (const auto& v : show.values()) {
    if (v.key() == "daemon.log_level") {
      saw_flag = true;
      EXPECT_EQ(v.source(), v1::ConfigValue::SOURCE_COMMAND_LINE);
      EXPECT_EQ(v.flag(), "--log-level");
      EXPECT_EQ(v.value(), "debug");
    }
  }
  EXPECT_TRUE(saw_flag);

  hooks_.config = [] { return std::make_shared<const Config>(); };
  auto b2 = backend();
  auto defaults = ASSERT_OK(b2.configShow());
  EXPECT_EQ(defaults.loaded_unix_ms(), 1'600'000'000'000);
  EXPECT_EQ(defaults.values(0).source(), v1::ConfigValue::SOURCE_DEFAULT);
}

// An unchanged file: ok, changed=false (coloctl prints "unchanged").
TEST_F(ControlBackendTest, ReloadOfAnUnchangedFileSaysSo) {
  hooks_.reload = []() -> Result<bool> { return false; };
  auto b = backend();
  auto rl = ASSERT_OK(b.configReload());
  EXPECT_TRUE(rl.ok());
  EXPECT_FALSE(rl.changed());
  hooks_.reload = []() -> Result<bool> { return true; };
  auto b2 = backend();
  EXPECT_TRUE(ASSERT_OK(b2.configReload()).changed());
}

// explain: since_unix_ms is when the lever was first applied for the victim (the decision log),
// reset by an undo; unknown (0) once the decision has left the log.
TEST_F(ControlBackendTest, ExplainSaysSinceWhenARestrictionHolds) {
  auto dec = [](uint64_t seq, const std::string& kind, const std::string& lever, int64_t ms) {
    v1::Decision d = decision(seq, "bbbb2222");
    d.set_kind(kind + "/" + lever);
    d.set_lever(lever);
    d.set_victim_id("aaaa1111");
    d.set_unix_ms(ms);
    return d;
  };
  log_.add(dec(2, "engage", "cpu_quota", 1000), "engage");
  log_.add(dec(3, "undo", "cpu_quota", 2000), "undo");
  log_.add(dec(4, "engage", "cpu_quota", 3000), "engage");
  log_.add(dec(5, "escalate", "cpu_quota", 4000), "escalate");
  log_.add(dec(6, "engage", "cpuset", 3500), "engage");
  policy::AppliedAction held;
  held.target_id = "bbbb2222";
  held.victim_id = "aaaa1111";
  held.lever = policy::Lever::CpuQuota;
  held.rung = 2;
  held.applied_values.cpu_quota = 20000;
  hooks_.applied = [held] { return std::vector<policy::AppliedAction>{held}; };
  auto b = backend();
  auto x = ASSERT_OK(b.explain("web/c"));
  ASSERT_EQ(x.protections_size(), 1);
  EXPECT_EQ(x.protections(0).since_unix_ms(), 3000);  // after the undo, the second engage
  EXPECT_EQ(x.protections(0).rung(), 3U);
  // Only a later decision for that lever is left in the log: since is unknown.
  log_.setKept(1);
  auto b2 = backend();
  EXPECT_EQ(ASSERT_OK(b2.explain("web/c")).protections(0).since_unix_ms(), 0);
}

}  // namespace
}  // namespace colod::daemon
