// SPDX-License-Identifier: Apache-2.0
// Interop: our C++ plugin stub (colod::nri) against colod-testpeer, the Go runtime-side peer on
// Debian's ttrpc with its own upstream-like mux, which applies updates to real cgroups.
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <memory>
#include <string>
#include <thread>

#include <gtest/gtest.h>

#include "colod/nri/stub.h"
#include "colod/testing/result_matchers.h"
#include "peer_process.h"

namespace colod::nri::interop {
namespace {

using namespace std::chrono_literals;
using nlohmann::json;

class TestPlugin : public Plugin, public ConfigureHandler, public SynchronizeHandler {
 public:
  Result<EventMask> configure(const ConfigureRequest& req) override {
    nri_version = req.nri_version;
    configures.fetch_add(1);
    return EventMask{0};
  }
  Result<std::vector<ContainerUpdate>> synchronize(const std::vector<PodSandbox>& /*pods*/,
                                                   const std::vector<Container>& /*ctrs*/) override {
    int n = syncs.fetch_add(1);
    if (n < slow_syncs) {
      std::this_thread::sleep_for(slow_for);
    }
    return std::vector<ContainerUpdate>{};
  }
  std::string nri_version;
  std::atomic<int> configures{0};
  std::atomic<int> syncs{0};
  int slow_syncs = 0;
  std::chrono::milliseconds slow_for{0};
};

StubOptions stubOptions(const PeerProcess& peer) {
  StubOptions o;
  o.socket_path = peer.socketPath();
  o.plugin_name = "colod-interop";
  o.plugin_idx = "50";
  o.use_environment = false;
  o.backoff.initial = 20ms;
  o.backoff.max = 200ms;
  return o;
}

bool waitFor(const std::function<bool()>& pred, std::chrono::milliseconds timeout) {
  auto deadline = std::chrono::steady_clock::now() + timeout;
  while (std::chrono::steady_clock::now() < deadline) {
    if (pred()) {
      return true;
    }
    std::this_thread::sleep_for(10ms);
  }
  return pred();
}

auto eventIs(const std::string& name) {
  return [name](const json& e) { return e.value("event", "") == name; };
}

std::string uniq(const std::string& base) {
  static std::atomic<int> n{0};
  return base + "-" + std::to_string(::getpid()) + "-" + std::to_string(n.fetch_add(1));
}

// Defines and starts a pod with one real container running `sleep`; returns its "list" entry.
json startContainer(PeerProcess& peer, const std::string& pod, const std::string& ctr) {
  peer.mustControl({{"op", "add_pod"}, {"pod_spec", {{"name", pod}, {"namespace", "interop"},
                                                      {"labels", {{"app", pod}}}}}});
  peer.mustControl({{"op", "add_container"},
                    {"container_spec",
                     {{"name", ctr}, {"pod", pod}, {"command", {"sleep", "300"}},
                      {"resources", {{"cpu_request_milli", 250}, {"cpu_limit_milli", 500},
                                     {"memory_limit_bytes", 256 << 20}}}}}});
  peer.mustControl({{"op", "run_pod"}, {"pod", pod}});
  return peer.mustControl({{"op", "create_start"}, {"container", ctr}});
}

bool needRoot() { return ::geteuid() != 0; }

class LifecycleTest : public ::testing::TestWithParam<std::string> {};

TEST_P(LifecycleTest, RegisterConfigureSynchronizeAndEvents) {
  if (needRoot()) {
    GTEST_SKIP() << "needs root: the peer creates real cgroups";
  }
  const std::string version = GetParam();
  PeerProcess peer({"--nri-version", version});
  ASSERT_TRUE(peer.started());
  TestPlugin plugin;
  auto stub = ASSERT_OK(Stub::create(plugin, stubOptions(peer)));
  ASSERT_OK(stub->start());
  ASSERT_TRUE(stub->waitSynchronized(10s));

  auto stats = stub->stats();
  EXPECT_EQ(stats.runtime_name, "containerd");
  EXPECT_EQ(plugin.nri_version, version == "v0.12" ? "v0.12.0" : "");
  const EventMask valid = version == "v0.12" ? kValidEventsV010 : kValidEventsV02;
  EXPECT_NE(stats.mask, 0U);
  EXPECT_EQ(stats.mask & ~valid, 0U) << std::hex << stats.mask;
  auto configured = peer.waitEvent(eventIs("plugin-configured"), 5s);
  ASSERT_FALSE(configured.is_null());

  const std::string pod = uniq("web");
  const std::string ctr = uniq("web-main");
  json started = startContainer(peer, pod, ctr);
  const std::string id = started["id"];
  const int pid = started["pid"];
  ASSERT_GT(pid, 0);
  ASSERT_TRUE(waitFor(
      [&] {
        auto snap = stub->registry().snapshot();
        const Container* c = snap->container(id);
        return c != nullptr && c->state == ContainerState::Running && c->pid == static_cast<uint32_t>(pid);
      },
      10s))
      << "container never reached the registry as running with its pid";
  {
    auto snap = stub->registry().snapshot();
    const Container* c = snap->container(id);
    ASSERT_NE(c, nullptr);
    EXPECT_EQ(c->cgroups_path, started["cgroups_path"].get<std::string>());
    const PodSandbox* p = snap->pod(c->pod_sandbox_id);
    ASSERT_NE(p, nullptr);
    EXPECT_EQ(p->labels.get("app"), pod);
    EXPECT_NE(p->cgroup_parent.find("/kubepods/burstable/pod"), std::string::npos) << p->cgroup_parent;
  }
  // Which RPC carried StartContainer tells the version handling apart.
  auto rpcSeen = [&](const std::string& rpc) {
    return peer.countEvents([&](const json& e) {
             return e.value("event", "") == "event-relayed" && e.value("rpc", "") == rpc;
           }) > 0;
  };
  if (version == "v0.12") {
    EXPECT_TRUE(rpcSeen("StartContainer"));
    EXPECT_TRUE(rpcSeen("RunPodSandbox"));
  } else {
    EXPECT_TRUE(rpcSeen("StateChange"));
    EXPECT_FALSE(rpcSeen("StartContainer"));
  }

  peer.mustControl({{"op", "stop"}, {"container", ctr}});
  peer.mustControl({{"op", "remove"}, {"container", ctr}});
  peer.mustControl({{"op", "remove_pod"}, {"pod", pod}});
  EXPECT_TRUE(waitFor(
      [&] {
        auto snap = stub->registry().snapshot();
        return snap->container(id) == nullptr && snap->pods.empty();
      },
      10s));
  EXPECT_EQ(peer.countEvents(eventIs("plugin-closed")), 0U);
  stub->stop();
  EXPECT_EQ(peer.stop(), 0);
}

INSTANTIATE_TEST_SUITE_P(Versions, LifecycleTest, ::testing::Values("v0.8", "v0.12"));

TEST(InteropTest, ChunkedSynchronizeWithThousandsOfContainers) {
  PeerProcess peer({"--synth-pods", "100", "--synth-containers", "3000", "--sync-max-objects",
                    "500"},
                   /*control=*/false);
  ASSERT_TRUE(peer.started());
  TestPlugin plugin;
  auto stub = ASSERT_OK(Stub::create(plugin, stubOptions(peer)));
  ASSERT_OK(stub->start());
  ASSERT_TRUE(stub->waitSynchronized(30s));
  auto snap = stub->registry().snapshot();
  EXPECT_EQ(snap->pods.size(), 100U);
  EXPECT_EQ(snap->containers.size(), 3000U);
  EXPECT_EQ(plugin.syncs.load(), 1) << "chunks must reach the handler once, merged";
  auto synced = peer.waitEvent(eventIs("plugin-synchronized"), 5s);
  ASSERT_FALSE(synced.is_null());
  EXPECT_EQ(synced["messages"].get<int>(), 7);  // ceil(3100 / 500)
  EXPECT_EQ(peer.countEvents(eventIs("plugin-closed")), 0U);
  stub->stop();
}

TEST(InteropTest, UpdateContainersAppliedToRealCgroups) {
  if (needRoot()) {
    GTEST_SKIP() << "needs root: real cgroups";
  }
  PeerProcess peer({});
  ASSERT_TRUE(peer.started());
  TestPlugin plugin;
  auto stub = ASSERT_OK(Stub::create(plugin, stubOptions(peer)));
  ASSERT_OK(stub->start());
  ASSERT_TRUE(stub->waitSynchronized(10s));
  json started = startContainer(peer, uniq("batch"), uniq("batch-main"));
  const std::string id = started["id"];
  const std::string rel = started["cgroup_rel"];
  ASSERT_TRUE(waitFor([&] { return stub->registry().snapshot()->container(id) != nullptr; }, 10s));

  ContainerUpdate u;
  u.container_id = id;
  u.resources.cpu.shares = 64;
  u.resources.cpu.quota = 20000;
  u.resources.cpu.period = 100000;
  u.resources.cpu.cpus = "0";
  u.resources.memory.limit = 128 << 20;
  ASSERT_OK(stub->updateContainers({u}));

  if (isCgroupV2Host()) {
    EXPECT_EQ(readCgroupFile(rel, "cpu.max"), "20000 100000");
    EXPECT_EQ(readCgroupFile(rel, "cpu.weight"), "3");  // 1 + (64-2)*9999/262142
    EXPECT_EQ(readCgroupFile(rel, "memory.max"), std::to_string(128 << 20));
  } else {
    EXPECT_EQ(readCgroupFile(rel, "cpu.cfs_quota_us"), "20000");
    EXPECT_EQ(readCgroupFile(rel, "cpu.cfs_period_us"), "100000");
    EXPECT_EQ(readCgroupFile(rel, "cpu.shares"), "64");
    EXPECT_EQ(readCgroupFile(rel, "memory.limit_in_bytes"), std::to_string(128 << 20));
  }
  EXPECT_EQ(readCgroupFile(rel, "cpuset.cpus"), "0");
  auto write = peer.waitEvent(
      [](const json& e) {
        return e.value("event", "") == "cgroup-write" && e.value("source", "") == "update" &&
               e.value("new", "") == "0";
      },
      5s);
  EXPECT_FALSE(write.is_null()) << "no timestamped cgroup-write line for the cpuset update";
  EXPECT_EQ(stub->registry().snapshot()->container(id)->resources.cpu.cpus, "0");
  stub->stop();
  EXPECT_EQ(peer.stop(), 0);
}

TEST(InteropTest, FailedUpdateIsReportedAsError) {
  if (needRoot()) {
    GTEST_SKIP() << "needs root: real cgroups";
  }
  PeerProcess peer({});
  ASSERT_TRUE(peer.started());
  TestPlugin plugin;
  auto stub = ASSERT_OK(Stub::create(plugin, stubOptions(peer)));
  ASSERT_OK(stub->start());
  ASSERT_TRUE(stub->waitSynchronized(10s));
  json started = startContainer(peer, uniq("err"), uniq("err-main"));
  const std::string id = started["id"];
  ASSERT_TRUE(waitFor([&] { return stub->registry().snapshot()->container(id) != nullptr; }, 10s));

  // CPUs that do not exist: the kernel refuses the cpuset write (EINVAL), the runtime reports it.
  ContainerUpdate bad;
  bad.container_id = id;
  bad.resources.cpu.cpus = "0-4095";
  EXPECT_ERR(stub->updateContainers({bad}), EREMOTEIO, "NRI update of some containers failed");
  EXPECT_FALSE(peer.waitEvent(eventIs("cgroup-write-failed"), 5s).is_null());

  // The same update with ignore_failure succeeds, and an unknown id is ignored like containerd.
  bad.ignore_failure = true;
  ContainerUpdate unknown;
  unknown.container_id = std::string(64, 'f');
  unknown.resources.cpu.shares = 100;
  ASSERT_OK(stub->updateContainers({bad, unknown}));
  EXPECT_EQ(peer.countEvents(eventIs("plugin-closed")), 0U);
  stub->stop();
}

TEST(InteropTest, RuntimeRestartTwentyTimesReconnectsAndResyncs) {
  // --restart-when-synced: each restart comes 300 ms after the stub synchronized with the current
  // incarnation. With a plain timer (the first version of this test) a loaded machine could make
  // the stub miss a whole up-window, so one incarnation never saw a Synchronize and the ">= 21"
  // below could never become true; that, not the stub, was the intermittent failure.
  PeerProcess peer({"--synth-pods", "5", "--synth-containers", "40", "--restart-after", "300ms",
                    "--restart-when-synced", "--restart-count", "20", "--restart-delay", "100ms"},
                   /*control=*/false);
  ASSERT_TRUE(peer.started());
  TestPlugin plugin;
  std::atomic<int> disconnects{0};
  auto opts = stubOptions(peer);
  opts.on_connection = [&](const ConnectionEvent& ev) {
    if (ev.state == ConnectionState::Disconnected) {
      disconnects.fetch_add(1);
    }
  };
  auto stub = ASSERT_OK(Stub::create(plugin, std::move(opts)));
  ASSERT_OK(stub->start());
  ASSERT_TRUE(stub->waitSynchronized(10s));
  // 20 x (reconnect + resync + 300 ms + 100 ms down) ~ 10 s idle; bounded generously for load.
  ASSERT_FALSE(peer.waitEvent(
                       [](const json& e) {
                         return e.value("event", "") == "runtime-restart" && e.value("restart", 0) == 20;
                       },
                       120s)
                   .is_null());
  ASSERT_TRUE(waitFor(
      [&] {
        return peer.countEvents(eventIs("plugin-synchronized")) >= 21 && stub->stats().synchronized;
      },
      30s))
      << "synchronized " << peer.countEvents(eventIs("plugin-synchronized")) << " times";
  auto stats = stub->stats();
  EXPECT_GE(stats.reconnects, 20U);
  EXPECT_GE(stats.syncs, 21U);
  EXPECT_GE(disconnects.load(), 20);
  auto snap = stub->registry().snapshot();
  EXPECT_TRUE(snap->synchronized);
  EXPECT_EQ(snap->pods.size(), 5U);
  EXPECT_EQ(snap->containers.size(), 40U);
  stub->stop();
  EXPECT_EQ(peer.stop(), 0);
}

TEST(InteropTest, PluginSlowerThanRequestTimeoutIsClosedAndReconnects) {
  PeerProcess peer({"--synth-pods", "2", "--synth-containers", "4", "--request-timeout", "500ms"},
                   /*control=*/false);
  ASSERT_TRUE(peer.started());
  TestPlugin plugin;
  plugin.slow_syncs = 1;
  plugin.slow_for = 1500ms;
  auto stub = ASSERT_OK(Stub::create(plugin, stubOptions(peer)));
  ASSERT_OK(stub->start());
  auto closed = peer.waitEvent(eventIs("plugin-closed"), 10s);
  ASSERT_FALSE(closed.is_null());
  EXPECT_NE(closed.value("reason", "").find("Synchronize"), std::string::npos) << closed.dump();
  // The slow reply of the first connection may still land after the peer closed it; what counts
  // is a second, complete handshake on a new connection.
  ASSERT_TRUE(waitFor(
      [&] {
        // The stub counts itself synchronized when it sends its reply; the peer logs the event
        // when that reply arrives, a moment later, so wait for both.
        auto st = stub->stats();
        return plugin.syncs.load() >= 2 && st.reconnects >= 1 && st.synchronized &&
               peer.countEvents(eventIs("plugin-synchronized")) >= 1U;
      },
      20s))
      << "syncs " << plugin.syncs.load() << " reconnects " << stub->stats().reconnects
      << " peer synchronized events " << peer.countEvents(eventIs("plugin-synchronized"));
  EXPECT_EQ(stub->registry().snapshot()->containers.size(), 4U);
  stub->stop();
}

}  // namespace
}  // namespace colod::nri::interop
