// SPDX-License-Identifier: Apache-2.0
// Interop at every NRI level x both launch modes: a plugin built on our stub (colod-testplugin,
// Koordinator role) against colod-testpeer emulating v0.6 (iSulad / containerd 1.7.16-25 /
// CRI-O 1.31), v0.8 (containerd 1.7.26-2.1), v0.11 (containerd 2.2, CRI-O 1.35/1.36) and v0.12
// (containerd 2.3), connecting itself (external) or started by the runtime from its plugin
// directory with an inherited fd (pre-installed). Every container must start, with the plugin's
// adjustment in its spec and its cgroup, also after a runtime restart.
#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "colod/nri/stub.h"
#include "colod/testing/result_matchers.h"
#include "peer_process.h"
#include "plugin_process.h"

#ifndef COLOD_TESTPLUGIN_BIN
#error "COLOD_TESTPLUGIN_BIN must be defined by the build"
#endif

namespace colod::nri::interop {
namespace {

using namespace std::chrono_literals;
using nlohmann::json;

enum class Launch { External, PreInstalled };

// One node: the peer at `version` with the Koordinator-role plugin "20-koord" (LS cpuset "0",
// BE shares 2), launched the given way.
struct Node {
  Node(const std::string& version, Launch launch) {
    std::vector<std::string> args = {"--nri-version", version};
    if (launch == Launch::PreInstalled) {
      plugins.add("20", "koord", COLOD_TESTPLUGIN_BIN, "role: koordinator\nls_cpus: 0\n");
      auto extra = plugins.peerArgs();
      args.insert(args.end(), extra.begin(), extra.end());
    }
    peer = std::make_unique<PeerProcess>(args);
    if (launch == Launch::External && peer->started()) {
      plugin = std::make_unique<PluginProcess>(
          std::vector<std::string>{COLOD_TESTPLUGIN_BIN, "--role", "koordinator", "--ls-cpus", "0",
                                   "--socket", peer->socketPath(), "--name", "koord", "--idx",
                                   "20"},
          plugins.stderrLog());
    }
  }
  PluginDir plugins;
  std::unique_ptr<PeerProcess> peer;
  std::unique_ptr<PluginProcess> plugin;
};

json stateOf(PeerProcess& peer, const std::string& ctr) {
  return peer.mustControl({{"op", "state"}, {"container", ctr}});
}

// A pod with one real `sleep` container, Koordinator QoS label `qos` ("" = none).
void addPod(PeerProcess& peer,
            const std::string& name,
            const std::string& qos,
            const std::string& kube_qos) {
  json labels = json::object();
  if (!qos.empty()) {
    labels["koordinator.sh/qosClass"] = qos;
  }
  peer.mustControl(
      {{"op", "add_pod"},
       {"pod_spec",
        {{"name", name}, {"namespace", "interop"}, {"qos", kube_qos}, {"labels", labels}}}});
  json res = kube_qos == "besteffort" ? json::object()
                                      : json{{"cpu_request_milli", 200}, {"cpu_limit_milli", 500}};
  peer.mustControl({{"op", "add_container"},
                    {"container_spec",
                     {{"name", name + "-c"},
                      {"pod", name},
                      {"command", {"sleep", "300"}},
                      {"resources", res}}}});
  peer.mustControl({{"op", "run_pod"}, {"pod", name}});
}

class LevelsTest : public ::testing::TestWithParam<std::string> {};

TEST_P(LevelsTest, EveryContainerStartsWithThePluginsAdjustment) {
  if (::geteuid() != 0) {
    GTEST_SKIP() << "needs root: the peer creates real cgroups";
  }
  const std::string version = GetParam().substr(0, GetParam().find(' '));
  const Launch launch = GetParam().ends_with("external") ? Launch::External : Launch::PreInstalled;
  Node node(version, launch);
  ASSERT_TRUE(node.peer->started());
  PeerProcess& peer = *node.peer;
  const json synced = peer.control({{"op", "wait_plugins"}, {"count", 1}, {"timeout_ms", 15000}});
  ASSERT_TRUE(synced.value("ok", false)) << "plugin never synchronized: " << synced.dump()
                                         << "; plugin log: " << node.plugins.stderrLog();
  auto reg =
      peer.waitEvent([](const json& e) { return e.value("event", "") == "plugin-registered"; }, 5s);
  ASSERT_FALSE(reg.is_null());
  EXPECT_EQ(reg.value("plugin", ""), "20-koord");
  EXPECT_EQ(reg.value("launched", false), launch == Launch::PreInstalled);
  if (launch == Launch::PreInstalled) {
    // The stub took its identity from NRI_PLUGIN_NAME / NRI_PLUGIN_IDX, not from argv0.
    EXPECT_EQ(reg.value("registered_as", ""), "20-koord");
  }
  // The mask fits the level (a bit outside it would have closed the plugin).
  auto cfg =
      peer.waitEvent([](const json& e) { return e.value("event", "") == "plugin-configured"; }, 5s);
  ASSERT_FALSE(cfg.is_null());
  const long mask = std::stol(cfg.value("events", "0x0"), nullptr, 16);
  const long valid = (version == "v0.6" || version == "v0.8") ? 0x7FF : 0x3FFF;
  EXPECT_EQ(mask & ~valid, 0) << cfg.dump();

  addPod(peer, "ls", "LS", "burstable");
  addPod(peer, "be", "BE", "besteffort");
  addPod(peer, "plain", "", "burstable");
  for (const char* c : {"ls-c", "be-c", "plain-c"}) {
    auto r = peer.control({{"op", "create_start"}, {"container", c}});
    ASSERT_TRUE(r.value("ok", false)) << c << ": " << r.dump();
  }
  json ls = stateOf(peer, "ls-c");
  EXPECT_EQ(ls["spec"]["cpus"], "0") << ls.dump();
  EXPECT_EQ(ls["cgroup"]["cpus"], "0") << ls.dump();
  json be = stateOf(peer, "be-c");
  EXPECT_EQ(be["spec"]["cpu_shares"], 2) << be.dump();
  json plain = stateOf(peer, "plain-c");
  EXPECT_EQ(plain["spec"]["cpus"], nullptr) << plain.dump();

  // Dedicated RPC at v0.12, StateChange below it.
  const std::string start_rpc = version == "v0.12" ? "StartContainer" : "StateChange";
  EXPECT_GT(peer.countEvents([&](const json& e) {
    return e.value("event", "") == "event-relayed" && e.value("rpc", "") == start_rpc;
  }),
            0U);

  // A runtime restart: the external plugin redials, the pre-installed one is started again.
  peer.mustControl({{"op", "restart_runtime"}, {"delay_ms", 200}});
  ASSERT_TRUE(peer.control({{"op", "wait_plugins"}, {"count", 1}, {"timeout_ms", 15000}})["ok"]);
  if (launch == Launch::PreInstalled) {
    EXPECT_EQ(
        peer.countEvents([](const json& e) { return e.value("event", "") == "plugin-launched"; }),
        2U);
  }
  addPod(peer, "ls2", "LSR", "burstable");
  auto r = peer.control({{"op", "create_start"}, {"container", "ls2-c"}});
  ASSERT_TRUE(r.value("ok", false)) << r.dump();
  EXPECT_EQ(stateOf(peer, "ls2-c")["cgroup"]["cpus"], "0");
  EXPECT_EQ(peer.countEvents(
                [](const json& e) { return e.value("event", "") == "container-create-failed"; }),
            0U);
}

// Field ownership through our stub (report_ownership): beside a topology-aware plugin (index 20)
// that makes an LS container's cpuset exclusive, a stub plugin at index 50 learns the owners from
// the v0.10+ validation report, leaves the owned cpuset out of its later UpdateContainers and
// reports that through on_conflict with the other plugin's name; its other fields go through.
// Setting the same field at creation makes the runtime fail the creation and log both names.
class StepAside : public Plugin, public CreateContainerHandler {
 public:
  Result<CreateContainerResult> createContainer(const PodSandbox& /*pod*/,
                                                const Container& ctr) override {
    CreateContainerResult r;
    if (clash.load() && ctr.name == "clash-c") {
      LinuxResources res;
      res.cpu.cpus = "1";
      r.adjust.resources = res;
    }
    return r;
  }
  std::atomic<bool> clash{false};
};

bool waitUntil(const std::function<bool()>& pred, std::chrono::milliseconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (!pred()) {
    if (std::chrono::steady_clock::now() > deadline) {
      return false;
    }
    std::this_thread::sleep_for(10ms);
  }
  return true;
}

class OwnershipTest : public ::testing::TestWithParam<std::string> {};

TEST_P(OwnershipTest, StubLearnsOwnersAndStepsAside) {
  if (::geteuid() != 0) {
    GTEST_SKIP() << "needs root: the peer creates real cgroups";
  }
  const std::string version = GetParam();
  const bool reported = version != "v0.8";  // owners are reported from v0.10
  PeerProcess peer({"--nri-version", version});
  ASSERT_TRUE(peer.started());
  PluginDir logs;
  PluginProcess topo({COLOD_TESTPLUGIN_BIN, "--role", "topology", "--pool", "0-1", "--socket",
                      peer.socketPath(), "--name", "topology", "--idx", "20"},
                     logs.stderrLog());
  ASSERT_TRUE(peer.control({{"op", "wait_plugins"}, {"count", 1}, {"timeout_ms", 15000}})["ok"]);

  StepAside plugin;
  std::mutex mu;
  std::vector<OwnershipConflict> conflicts;
  std::atomic<int> owner_reports{0};
  StubOptions o;
  o.socket_path = peer.socketPath();
  o.plugin_name = "colod";
  o.plugin_idx = "50";
  o.use_environment = false;
  o.report_ownership = true;
  o.on_owners = [&](const ContainerOwners&) { owner_reports.fetch_add(1); };
  o.on_conflict = [&](const OwnershipConflict& c) {
    std::lock_guard lock(mu);
    conflicts.push_back(c);
  };
  auto stub = ASSERT_OK(Stub::create(plugin, o));
  ASSERT_OK(stub->start());
  ASSERT_TRUE(stub->waitSynchronized(10s));
  ASSERT_TRUE(peer.control({{"op", "wait_plugins"}, {"count", 2}, {"timeout_ms", 15000}})["ok"]);

  peer.mustControl({{"op", "add_pod"},
                    {"pod_spec",
                     {{"name", "ls"},
                      {"qos", "burstable"},
                      {"labels", {{"koordinator.sh/qosClass", "LS"}}},
                      {"annotations", {{"topology.colod.io/exclusive-cpus", "1"}}}}}});
  for (const char* c : {"ls-c", "clash-c"}) {
    peer.mustControl({{"op", "add_container"},
                      {"container_spec",
                       {{"name", c},
                        {"pod", "ls"},
                        {"command", {"sleep", "300"}},
                        {"resources", {{"cpu_request_milli", 100}, {"cpu_limit_milli", 500}}}}}});
  }
  peer.mustControl({{"op", "run_pod"}, {"pod", "ls"}});
  const std::string id = peer.mustControl({{"op", "create_start"}, {"container", "ls-c"}})["id"];
  ASSERT_EQ(stateOf(peer, "ls-c")["cgroup"]["cpus"], "0");
  if (reported) {
    ASSERT_TRUE(waitUntil([&] { return stub->fieldOwner(id, Field::CPUSetCPUs).has_value(); }, 5s));
    EXPECT_EQ(stub->fieldOwner(id, Field::CPUSetCPUs), "20-topology");
    EXPECT_GT(owner_reports.load(), 0);
  } else {
    EXPECT_FALSE(stub->fieldOwner(id, Field::CPUSetCPUs));
  }
  ASSERT_TRUE(waitUntil([&] { return stub->registry().snapshot()->container(id) != nullptr; }, 5s));

  ContainerUpdate u{.container_id = id};
  u.resources.cpu.cpus = "1";
  u.resources.cpu.quota = 30000;
  ASSERT_OK(stub->updateContainers({u}));
  json st = stateOf(peer, "ls-c");
  EXPECT_EQ(st["cgroup"]["cpu_quota"], 30000) << st.dump();
  {
    std::lock_guard lock(mu);
    if (reported) {
      // Stepped aside: the exclusive cpuset stays, the conflict names the owner.
      EXPECT_EQ(st["cgroup"]["cpus"], "0") << st.dump();
      ASSERT_EQ(conflicts.size(), 1U);
      EXPECT_EQ(conflicts[0].other_plugin, "20-topology");
      EXPECT_EQ(conflicts[0].field, "CPUSetCPUs");
      EXPECT_EQ(conflicts[0].source, "owned");
    } else {
      // v0.8 reports no owners: nothing to step aside from (the daemon must read the spec).
      EXPECT_EQ(st["cgroup"]["cpus"], "1") << st.dump();
      EXPECT_TRUE(conflicts.empty());
    }
  }
  EXPECT_EQ(stub->stats().ownership_conflicts, reported ? 1U : 0U);

  // Both plugins set the cpuset at creation: the runtime fails it and logs both names.
  plugin.clash = true;
  auto r = peer.control({{"op", "create_start"}, {"container", "clash-c"}});
  EXPECT_FALSE(r.value("ok", true)) << r.dump();
  EXPECT_NE(r.value("error", "").find(R"(plugins "50-colod" and "20-topology" both tried to set)"),
            std::string::npos)
      << r.dump();
  auto ev = peer.waitEvent(
      [](const json& e) { return e.value("event", "") == "ownership-conflict"; }, 5s);
  ASSERT_FALSE(ev.is_null());
  EXPECT_EQ(ev.value("plugin", ""), "50-colod");
  EXPECT_EQ(ev.value("other", ""), "20-topology");
  EXPECT_EQ(ev.value("container", ""), "clash-c");
  stub->stop();
}

INSTANTIATE_TEST_SUITE_P(Levels, OwnershipTest, ::testing::Values("v0.8", "v0.11", "v0.12"));

// One string per case, "<level> <launch>": gtest 1.12's name-generator path trips -Wshadow, so
// the cases are numbered and the parameter says which is which.
INSTANTIATE_TEST_SUITE_P(AllLevels,
                         LevelsTest,
                         ::testing::Values("v0.6 external",
                                           "v0.6 preinstalled",
                                           "v0.8 external",
                                           "v0.8 preinstalled",
                                           "v0.11 external",
                                           "v0.11 preinstalled",
                                           "v0.12 external",
                                           "v0.12 preinstalled"));

}  // namespace
}  // namespace colod::nri::interop
