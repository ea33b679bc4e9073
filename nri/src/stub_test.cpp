// SPDX-License-Identifier: Apache-2.0
// The stub against an in-process fake runtime (style rule 38).
#include "colod/nri/stub.h"

#include <gtest/gtest.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <thread>

#include "colod/nri/testing/fake_runtime.h"
#include "colod/nri/testing/realistic.h"
#include "colod/testing/result_matchers.h"

namespace colod::nri {
namespace {

using namespace std::chrono_literals;
using testing::FakeRuntime;
namespace pb = ::nri::pkg::api::v1alpha1;

class TestPlugin : public Plugin,
                   public SynchronizeHandler,
                   public CreateContainerHandler,
                   public RemoveContainerHandler {
 public:
  Result<std::vector<ContainerUpdate>> synchronize(const std::vector<PodSandbox>& pods,
                                                   const std::vector<Container>& ctrs) override {
    syncs++;
    last_sync_pods = pods.size();
    last_sync_ctrs = ctrs.size();
    std::vector<ContainerUpdate> u;
    if (!ctrs.empty()) {
      ContainerUpdate x{.container_id = ctrs[0].id, .resources = {}, .ignore_failure = false};
      x.resources.cpu.cpus = "0-1";
      u.push_back(x);
    }
    return u;
  }
  Result<CreateContainerResult> createContainer(const PodSandbox&, const Container& c) override {
    CreateContainerResult r;
    r.adjust.annotations["colod"] = "seen";
    // A handler must not call updateContainers(): the stub refuses (EDEADLK).
    if (stub != nullptr) {
      auto u = stub->updateContainers({});
      deadlock_refused = !u.has_value() && u.error().errnoValue() == EDEADLK;
    }
    created = c.id;
    return r;
  }
  Result<void> removeContainer(const PodSandbox&, const Container&) override {
    return COLOD_ERR(EIO, "remove handler says no");
  }
  Stub* stub = nullptr;
  std::atomic<int> syncs{0};
  std::size_t last_sync_pods = 0;
  std::size_t last_sync_ctrs = 0;
  std::string created;
  std::atomic<bool> deadlock_refused{false};
};

pb::ConfigureRequest configureReq(const std::string& nri_version) {
  pb::ConfigureRequest c;
  c.set_runtime_name("containerd");
  c.set_runtime_version("v2.1.0");
  c.set_registration_timeout(5000);
  c.set_request_timeout(2000);
  c.set_nri_version(nri_version);
  return c;
}

TEST(StubOptions, NameAndIndexResolution) {
  TestPlugin p;
  auto s = ASSERT_OK(Stub::create(p, {.argv0 = "/opt/nri/plugins/42-colod", .use_environment = false}));
  EXPECT_EQ(s->pluginName(), "colod");
  EXPECT_EQ(s->pluginIdx(), "42");
  EXPECT_ERR(Stub::create(p, {.plugin_name = "bad name", .plugin_idx = "10", .use_environment = false}),
             EINVAL, "plugin name");
  EXPECT_ERR(Stub::create(p, {.plugin_name = "ok", .plugin_idx = "1", .use_environment = false}),
             EINVAL, "two digits");
  EXPECT_EQ(s->handledEvents(),
            kRegistryEvents | eventBit(Event::CreateContainer) | eventBit(Event::RemoveContainer));
}

// Started by the runtime (brief §1.4): NRI_PLUGIN_SOCKET is honoured even with use_environment
// off (how colod's daemon builds its stub), and the runtime's name/index replace the options.
TEST(StubOptions, InheritedSocketFromTheRuntime) {
  TestPlugin p;
  int sv[2];
  ASSERT_EQ(::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
  ::close(sv[1]);
  const std::string fd = std::to_string(sv[0]);
  ::setenv("NRI_PLUGIN_SOCKET", fd.c_str(), 1);  // NOLINT(concurrency-mt-unsafe): test only
  ::setenv("NRI_PLUGIN_NAME", "colod", 1);       // NOLINT(concurrency-mt-unsafe)
  ::setenv("NRI_PLUGIN_IDX", "90", 1);           // NOLINT(concurrency-mt-unsafe)
  {
    auto s = ASSERT_OK(Stub::create(
        p, {.plugin_name = "colod-cfg", .plugin_idx = "50", .use_environment = false}));
    EXPECT_TRUE(s->launched());
    EXPECT_EQ(s->pluginName(), "colod");
    EXPECT_EQ(s->pluginIdx(), "90");
    // The trunk's peer end is closed: run() ends (it cannot redial an inherited fd).
    EXPECT_FALSE(s->run().has_value());
    auto off = ASSERT_OK(Stub::create(p, {.plugin_name = "colod-cfg",
                                          .plugin_idx = "50",
                                          .use_environment = false,
                                          .adopt_inherited_socket = false}));
    EXPECT_FALSE(off->launched());
    EXPECT_EQ(off->pluginName(), "colod-cfg");
    ::setenv("NRI_PLUGIN_SOCKET", "three", 1);  // NOLINT(concurrency-mt-unsafe)
    EXPECT_ERR(Stub::create(p, {.plugin_name = "x", .plugin_idx = "50", .use_environment = false}),
               EINVAL, "NRI_PLUGIN_SOCKET");
  }
  ::unsetenv("NRI_PLUGIN_SOCKET");  // NOLINT(concurrency-mt-unsafe)
  ::unsetenv("NRI_PLUGIN_NAME");    // NOLINT(concurrency-mt-unsafe)
  ::unsetenv("NRI_PLUGIN_IDX");     // NOLINT(concurrency-mt-unsafe)
}

TEST(StubMask, ValidMaskPerRuntimeVersion) {
  EXPECT_EQ(validEventMask({.runtime_name = "containerd", .runtime_version = "v2.1.3"}), 0x7FFU);
  EXPECT_EQ(validEventMask({.runtime_name = "containerd", .runtime_version = "v2.2.1"}), 0x3FFFU);
  EXPECT_EQ(validEventMask({.runtime_name = "cri-o", .runtime_version = "1.33.2"}), 0x1FFFU);
  EXPECT_EQ(validEventMask({.nri_version = "v0.12.0"}), 0x3FFFU);
  EXPECT_EQ(validEventMask({.nri_version = "v0.8.0"}), 0x7FFU);
  EXPECT_EQ(validEventMask({}), 0x7FFU);
}

struct Pair {
  UniqueFd runtime;
  int plugin = -1;
  Pair() {
    int sv[2];
    EXPECT_EQ(::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
    runtime = UniqueFd(sv[0]);
    plugin = sv[1];
  }
};

TEST(Stub, FullLifecycleOnSocketpair) {
  Pair pr;
  TestPlugin p;
  std::vector<ConnectionState> states;
  std::mutex smu;
  auto stub = ASSERT_OK(Stub::create(
      p, {.plugin_name = "colod", .plugin_idx = "50", .connection_fd = pr.plugin,
          .use_environment = false,
          .on_connection = [&](const ConnectionEvent& e) {
            std::lock_guard l(smu);
            states.push_back(e.state);
          }}));
  p.stub = stub.get();
  FakeRuntime rt(std::move(pr.runtime));
  ASSERT_OK(rt.start());
  ASSERT_OK(stub->start());
  auto reg = ASSERT_OK(rt.waitRegistered(5s));
  EXPECT_EQ(reg.plugin_name(), "colod");
  EXPECT_EQ(reg.plugin_idx(), "50");

  // v0.8-style runtime: mask must stay within 0x7FF and never be 0.
  auto conf = ASSERT_OK(rt.configure(configureReq("")));
  EXPECT_NE(conf.events(), 0);
  EXPECT_EQ(conf.events() & ~0x7FF, 0);
  EXPECT_EQ(static_cast<uint32_t>(conf.events()),
            kRegistryEvents | eventBit(Event::CreateContainer) | eventBit(Event::RemoveContainer));
  EXPECT_ERR(stub->updateContainers({}), ENOTCONN, "not synchronized");

  // Chunked Synchronize: 4 pods + 40 containers, 7 objects per chunk.
  std::vector<pb::PodSandbox> pods;
  std::vector<pb::Container> ctrs;
  testing::realisticNode(4, 10, pods, ctrs);
  auto sync = ASSERT_OK(rt.synchronize(pods, ctrs, 7));
  EXPECT_FALSE(sync.more());
  ASSERT_EQ(sync.update_size(), 1);
  EXPECT_EQ(sync.update(0).linux().resources().cpu().cpus(), "0-1");
  EXPECT_EQ(p.syncs.load(), 1) << "chunks delivered once";
  EXPECT_EQ(p.last_sync_ctrs, 40U);
  ASSERT_TRUE(stub->waitSynchronized(5s));
  auto snap = stub->registry().snapshot();
  EXPECT_EQ(snap->pods.size(), 4U);
  EXPECT_EQ(snap->containers.size(), 40U);
  EXPECT_EQ(snap->container(ctrs[0].id())->resources.cpu.cpus, "0-1");

  // Events: dedicated RunPodSandbox, CreateContainer, StateChange(START), StopContainer.
  pb::PodSandbox newpod = testing::realisticPod(77);
  pb::RunPodSandboxRequest run;
  *run.mutable_pod() = newpod;
  auto rr = ASSERT_OK(rt.call("RunPodSandbox", run.SerializeAsString()));
  EXPECT_TRUE(rr.status.ok());
  pb::Container nc = testing::realisticContainer(770, newpod);
  nc.set_state(pb::CONTAINER_UNKNOWN);
  pb::CreateContainerRequest cr;
  *cr.mutable_pod() = newpod;
  *cr.mutable_container() = nc;
  auto crr = ASSERT_OK(rt.call("CreateContainer", cr.SerializeAsString()));
  ASSERT_TRUE(crr.status.ok()) << crr.status.message;
  pb::CreateContainerResponse cresp;
  ASSERT_TRUE(cresp.ParseFromArray(crr.payload.data(), static_cast<int>(crr.payload.size())));
  EXPECT_EQ(cresp.adjust().annotations(0).key(), "colod");
  EXPECT_TRUE(p.deadlock_refused.load());
  EXPECT_EQ(stub->registry().snapshot()->container(nc.id())->state, ContainerState::Created);
  pb::StateChangeEvent sc;
  sc.set_event(pb::START_CONTAINER);
  *sc.mutable_pod() = newpod;
  nc.set_state(pb::CONTAINER_RUNNING);
  *sc.mutable_container() = nc;
  auto scr = ASSERT_OK(rt.call("StateChange", sc.SerializeAsString()));
  EXPECT_TRUE(scr.status.ok());
  EXPECT_EQ(stub->registry().snapshot()->container(nc.id())->state, ContainerState::Running);
  pb::StopContainerRequest st;
  *st.mutable_pod() = newpod;
  *st.mutable_container() = nc;
  ASSERT_TRUE(ASSERT_OK(rt.call("StopContainer", st.SerializeAsString())).status.ok());
  EXPECT_EQ(stub->registry().snapshot()->container(nc.id())->state, ContainerState::Stopped);
  // A handler error is reported to the runtime as a status, and the container still leaves.
  pb::RemoveContainerRequest rm;
  *rm.mutable_pod() = newpod;
  *rm.mutable_container() = nc;
  auto rmr = ASSERT_OK(rt.call("RemoveContainer", rm.SerializeAsString()));
  EXPECT_EQ(rmr.status.code, 2);
  EXPECT_EQ(stub->registry().snapshot()->container(nc.id()), nullptr);
  // Unsubscribed-to RPCs are UNIMPLEMENTED so v0.12 runtimes fall back.
  auto vr = ASSERT_OK(rt.call("ValidateContainerAdjustment", ""));
  EXPECT_EQ(vr.status.code, 12);

  // UpdateContainers: success is recorded; an error status is "some failed".
  ContainerUpdate u{.container_id = ctrs[1].id(), .resources = {}, .ignore_failure = false};
  u.resources.cpu.quota = 25000;
  ASSERT_OK(stub->updateContainers({u}));
  EXPECT_EQ(stub->registry().snapshot()->container(ctrs[1].id())->resources.cpu.quota, 25000);
  ASSERT_EQ(rt.receivedUpdates().size(), 1U);
  // A reply that does not decode is no success: the outcome is unknown.
  rt.setUpdateReplyPayload(std::string("\x0a\xff\xff", 3));
  EXPECT_ERR(stub->updateContainers({u}), EBADMSG, "outcome unknown");
  rt.setUpdateReplyPayload("");
  rt.setUpdateStatus(2, "NRI update of some containers failed");
  EXPECT_ERR(stub->updateContainers({u}), EREMOTEIO, "some container updates failed");

  // Runtime goes away: an fd-based stub cannot reconnect; run() ends with the error.
  rt.close();
  for (int i = 0; i < 200 && stub->stats().connected; ++i) {
    std::this_thread::sleep_for(10ms);
  }
  EXPECT_FALSE(stub->stats().connected);
  EXPECT_ERR(stub->updateContainers({u}), ENOTCONN, "");
  stub->stop();
  std::lock_guard l(smu);
  EXPECT_NE(std::find(states.begin(), states.end(), ConnectionState::Synchronized), states.end());
  EXPECT_EQ(states.back(), ConnectionState::Stopped);
}

TEST(Stub, ReconnectsAndResyncsAfterRuntimeRestart) {
  auto l = ASSERT_OK(testing::FakeRuntimeListener::create());
  TestPlugin p;
  std::atomic<uint64_t> reconnects{0};
  auto stub = ASSERT_OK(Stub::create(
      p, {.socket_path = l->path(), .plugin_name = "colod", .plugin_idx = "50",
          .use_environment = false,
          .backoff = {.initial = 20ms, .max = 200ms, .multiplier = 2.0, .jitter = 0.2},
          .on_connection = [&](const ConnectionEvent& e) { reconnects = e.reconnects; }}));
  ASSERT_OK(stub->start());
  for (int round = 0; round < 3; ++round) {
    auto fd = ASSERT_OK(l->accept(10s));
    FakeRuntime rt(std::move(fd));
    ASSERT_OK(rt.start());
    ASSERT_OK(rt.waitRegistered(10s));
    ASSERT_OK(rt.configure(configureReq("v0.12.0")));
    std::vector<pb::PodSandbox> pods;
    std::vector<pb::Container> ctrs;
    testing::realisticNode(1 + round, 2, pods, ctrs);
    ASSERT_OK(rt.synchronize(pods, ctrs));
    ASSERT_TRUE(stub->waitSynchronized(10s));
    EXPECT_EQ(stub->registry().snapshot()->containers.size(), ctrs.size()) << "rebuilt";
    if (round == 1) {
      // The socket disappears for a while: the stub keeps retrying with back-off.
      l->shutdown();
      rt.close();
      std::this_thread::sleep_for(300ms);
      ASSERT_OK(l->reopen());
    } else {
      rt.close();
    }
  }
  stub->stop();
  EXPECT_GE(reconnects.load(), 2U);
  EXPECT_EQ(p.syncs.load(), 3);
  EXPECT_FALSE(stub->registry().snapshot()->synchronized);
}

TEST(Stub, GarbageFromRuntimeDropsTheConnectionWithoutCrashing) {
  Pair pr;
  TestPlugin p;
  auto stub = ASSERT_OK(Stub::create(p, {.plugin_name = "colod", .plugin_idx = "50",
                                         .connection_fd = pr.plugin, .use_environment = false}));
  ASSERT_OK(stub->start());
  // A frame header announcing 2 GiB: the plugin must drop the trunk, not allocate.
  const unsigned char bad[] = {0, 0, 0, 1, 0x7f, 0xff, 0xff, 0xff, 1, 2, 3};
  ASSERT_EQ(::send(pr.runtime.get(), bad, sizeof bad, MSG_NOSIGNAL), static_cast<ssize_t>(sizeof bad));
  char buf[4096];
  // The plugin first sends RegisterPlugin, then closes: read until EOF.
  ssize_t n = 0;
  int reads = 0;
  while ((n = ::recv(pr.runtime.get(), buf, sizeof buf, 0)) > 0 && ++reads < 100) {
  }
  EXPECT_EQ(n, 0) << "the plugin closed the trunk";
  for (int i = 0; i < 200 && stub->stats().connected; ++i) {
    std::this_thread::sleep_for(10ms);
  }
  EXPECT_FALSE(stub->stats().connected) << "fd-based stubs cannot reconnect";
  stub->stop();
}

// A plugin without handlers (the daemon's shape): every call is served inline on the reader
// thread. Pod state follows Run/StopPodSandbox; updateContainers() works from another thread.
class PlainPlugin : public Plugin {};

TEST(Stub, InlineServingPodStateAndUpdates) {
  Pair pr;
  PlainPlugin p;
  auto stub = ASSERT_OK(Stub::create(
      p, {.plugin_name = "colod", .plugin_idx = "50", .connection_fd = pr.plugin,
          .use_environment = false}));
  FakeRuntime rt(std::move(pr.runtime));
  ASSERT_OK(rt.start());
  ASSERT_OK(stub->start());
  ASSERT_OK(rt.waitRegistered(5s));
  ASSERT_OK(rt.configure(configureReq("v0.12.0")));
  std::vector<pb::PodSandbox> pods;
  std::vector<pb::Container> ctrs;
  testing::realisticNode(2, 2, pods, ctrs);
  ASSERT_OK(rt.synchronize(pods, ctrs));
  ASSERT_TRUE(stub->waitSynchronized(5s));
  auto snap = stub->registry().snapshot();
  EXPECT_TRUE(snap->synchronized);
  ASSERT_NE(snap->pod(pods[0].id()), nullptr);
  EXPECT_EQ(snap->pod(pods[0].id())->state, PodState::Unknown);
  EXPECT_TRUE(snap->container(ctrs[0].id())->args.empty()) << "registry drops args";

  pb::RunPodSandboxRequest run;
  *run.mutable_pod() = testing::realisticPod(9);
  ASSERT_TRUE(ASSERT_OK(rt.call("RunPodSandbox", run.SerializeAsString())).status.ok());
  EXPECT_EQ(stub->registry().snapshot()->pod(run.pod().id())->state, PodState::Running);
  pb::StopPodSandboxRequest stop;
  *stop.mutable_pod() = run.pod();
  ASSERT_TRUE(ASSERT_OK(rt.call("StopPodSandbox", stop.SerializeAsString())).status.ok());
  EXPECT_EQ(stub->registry().snapshot()->pod(run.pod().id())->state, PodState::Stopped);
  pb::StateChangeEvent sc;
  sc.set_event(pb::STOP_POD_SANDBOX);
  *sc.mutable_pod() = pods[1];
  ASSERT_TRUE(ASSERT_OK(rt.call("StateChange", sc.SerializeAsString())).status.ok());
  EXPECT_EQ(stub->registry().snapshot()->pod(pods[1].id())->state, PodState::Stopped);

  ContainerUpdate u{.container_id = ctrs[1].id(), .resources = {}, .ignore_failure = false};
  u.resources.cpu.shares = 7;
  ASSERT_OK(stub->updateContainers({u}));
  EXPECT_EQ(stub->registry().snapshot()->container(ctrs[1].id())->resources.cpu.shares, 7U);
  stub->stop();
}

// Reported by the interop author: a slow Synchronize answered after the peer closed must not make
// the stub (or its registry) report synchronized, not even briefly.
class SlowSyncPlugin : public Plugin, public SynchronizeHandler {
 public:
  Result<std::vector<ContainerUpdate>> synchronize(const std::vector<PodSandbox>&,
                                                   const std::vector<Container>&) override {
    entered = true;
    std::this_thread::sleep_for(300ms);
    return std::vector<ContainerUpdate>{};
  }
  std::atomic<bool> entered{false};
};

TEST(Stub, SlowSynchronizeAfterPeerClosedNeverReportsSynchronized) {
  Pair pr;
  SlowSyncPlugin p;
  auto stub = ASSERT_OK(Stub::create(
      p, {.plugin_name = "colod", .plugin_idx = "50", .connection_fd = pr.plugin,
          .use_environment = false}));
  auto rt = std::make_unique<FakeRuntime>(std::move(pr.runtime));
  ASSERT_OK(rt->start());
  ASSERT_OK(stub->start());
  ASSERT_OK(rt->waitRegistered(5s));
  ASSERT_OK(rt->configure(configureReq("v0.12.0")));
  std::vector<pb::PodSandbox> pods;
  std::vector<pb::Container> ctrs;
  testing::realisticNode(1, 2, pods, ctrs);
  pb::SynchronizeRequest req;
  for (auto& x : pods) *req.add_pods() = x;
  for (auto& x : ctrs) *req.add_containers() = x;
  EXPECT_FALSE(rt->call("Synchronize", req.SerializeAsString(), 50ms).has_value());  // times out
  rt->close();  // the runtime gives up on the plugin while its handler still runs
  ASSERT_TRUE(p.entered.load());
  // Watch across the moment the slow reply goes out (and for a while after).
  for (auto until = std::chrono::steady_clock::now() + 600ms;
       std::chrono::steady_clock::now() < until;) {
    EXPECT_FALSE(stub->stats().synchronized);
    EXPECT_FALSE(stub->registry().snapshot()->synchronized);
    std::this_thread::sleep_for(2ms);
  }
  EXPECT_FALSE(stub->waitSynchronized(10ms));
  EXPECT_ERR(stub->updateContainers({}), ENOTCONN, "not synchronized");
  stub->stop();
}

}  // namespace
}  // namespace colod::nri
