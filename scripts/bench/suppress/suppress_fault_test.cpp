// SPDX-License-Identifier: Apache-2.0
// colod-suppress against colod-testpeer with real cgroups: every path that changes a container's
// resources, checked in the cgroup afterwards (the BE restriction, the admission of a new BE, the
// restore on SIGTERM, a refused UpdateContainers). Needs root and >= 2 CPUs.
#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <functional>
#include <memory>
#include <string>
#include <thread>

#include "peer_process.h"
#include "plugin_process.h"

#if !defined(COLOD_SUPPRESS_BIN)
#error "COLOD_SUPPRESS_BIN must be defined by the build"
#endif

namespace colod::nri::interop {
namespace {

using namespace std::chrono_literals;
using nlohmann::json;

bool waitFor(const std::function<bool()>& pred, std::chrono::milliseconds timeout) {
  const auto end = std::chrono::steady_clock::now() + timeout;
  while (std::chrono::steady_clock::now() < end) {
    if (pred()) {
      return true;
    }
    std::this_thread::sleep_for(20ms);
  }
  return pred();
}

class SuppressFault : public ::testing::Test {
 protected:
  void SetUp() override {
    if (::geteuid() != 0) {
      GTEST_SKIP() << "needs root (the peer creates cgroups)";
    }
    ncpu_ = static_cast<int>(::sysconf(_SC_NPROCESSORS_ONLN));
    if (ncpu_ < 2) {
      GTEST_SKIP() << "a BE cpuset smaller than the node needs >= 2 CPUs";
    }
    all_ = "0-" + std::to_string(ncpu_ - 1);
    be_set_ = std::to_string(ncpu_ - 1);  // --be-min-cpus 1: the highest-numbered CPU
    peer_ = std::make_unique<PeerProcess>(std::vector<std::string>{});
    ASSERT_TRUE(peer_->started());
    ls_rel_ = addRunning("web", "ls");
    be_rel_ = addRunning("batch", "be");
    ASSERT_EQ(readCgroupFile(be_rel_, "cpuset.cpus"), all_);
  }

  // A pod with one idle container of `tier` (colod.io/tier annotation); returns its cgroup_rel.
  std::string addRunning(const std::string& name, const std::string& tier) {
    peer_->mustControl(
        {{"op", "add_pod"},
         {"pod_spec", {{"name", name}, {"annotations", {{"colod.io/tier", tier}}}}}});
    peer_->mustControl({{"op", "add_container"},
                        {"container_spec",
                         {{"name", name},
                          {"pod", name},
                          {"command", {"sleep", "600"}},
                          {"annotations", {{"colod.io/tier", tier}}},
                          {"resources", {{"cpu_request_milli", 500}}}}}});
    peer_->mustControl({{"op", "run_pod"}, {"pod", name}});
    return peer_->mustControl({{"op", "create_start"}, {"container", name}})["cgroup_rel"];
  }

  // slo 1 %: the formula is negative on any node, so BE is held at --be-min-cpus 1.
  std::unique_ptr<PluginProcess> startSuppress() {
    return std::make_unique<PluginProcess>(
        std::vector<std::string>{COLOD_SUPPRESS_BIN, "--socket", peer_->socketPath(),
                                 "--slo-percent", "1", "--be-min-cpus", "1", "--interval-ms",
                                 "100"},
        "/dev/null");
  }

  std::string cpus(const std::string& rel) { return readCgroupFile(rel, "cpuset.cpus"); }

  int ncpu_ = 0;
  std::string all_, be_set_, ls_rel_, be_rel_;
  std::unique_ptr<PeerProcess> peer_;
};

TEST_F(SuppressFault, RestrictsOnlyBeAndRestoresItOnSigterm) {
  auto plugin = startSuppress();
  ASSERT_TRUE(plugin->started());
  EXPECT_TRUE(waitFor([&] { return cpus(be_rel_) == be_set_; }, 10s)) << cpus(be_rel_);
  EXPECT_EQ(cpus(ls_rel_), all_);
  plugin.reset();  // SIGTERM, waits for the exit
  EXPECT_EQ(cpus(be_rel_), all_) << "the BE container keeps the restriction after the rule stopped";
  EXPECT_EQ(cpus(ls_rel_), all_);
}

TEST_F(SuppressFault, NewBeIsPlacedAtCreation) {
  auto plugin = startSuppress();
  ASSERT_TRUE(waitFor([&] { return cpus(be_rel_) == be_set_; }, 10s));
  peer_->mustControl({{"op", "add_pod"},
                      {"pod_spec", {{"name", "job"}, {"annotations", {{"colod.io/tier", "be"}}}}}});
  peer_->mustControl({{"op", "add_container"},
                      {"container_spec",
                       {{"name", "job"},
                        {"pod", "job"},
                        {"command", {"sleep", "600"}},
                        {"annotations", {{"colod.io/tier", "be"}}}}}});
  peer_->mustControl({{"op", "run_pod"}, {"pod", "job"}});
  // Only created, not started: the cpuset must already be in the cgroup (the adjustment).
  const std::string rel =
      peer_->mustControl({{"op", "create"}, {"container", "job"}})["cgroup_rel"];
  EXPECT_EQ(cpus(rel), be_set_);
  EXPECT_GT(peer_->countEvents([](const json& e) {
    return e.value("event", "") == "cgroup-write" && e.value("container", "") == "job" &&
           e.value("source", "") == "adjust";
  }),
            0U);
}

TEST_F(SuppressFault, RefusedUpdateChangesNothingAndTheNextRoundApplies) {
  peer_->mustControl({{"op", "refuse_updates"}, {"count", 1}});
  auto plugin = startSuppress();
  ASSERT_TRUE(waitFor(
      [&] {
        return peer_->countEvents(
                   [](const json& e) { return e.value("event", "") == "update-refused"; }) > 0;
      },
      10s));
  // The rule retries on its next round (100 ms later) ...
  EXPECT_TRUE(waitFor([&] { return cpus(be_rel_) == be_set_; }, 10s)) << cpus(be_rel_);
  // ... and the refused call wrote nothing: the first write of the BE cgroup by an update comes
  // after the refusal.
  uint64_t refused_at = 0, first_write = 0;
  for (const json& e : peer_->events()) {
    const std::string ev = e.value("event", "");
    if (ev == "update-refused" && refused_at == 0) {
      refused_at = e.value("ts_ns", uint64_t{0});
    }
    if (ev == "cgroup-write" && e.value("container", "") == "batch" &&
        e.value("source", "") == "update" && first_write == 0) {
      first_write = e.value("ts_ns", uint64_t{0});
    }
  }
  ASSERT_GT(refused_at, 0U);
  EXPECT_GT(first_write, refused_at);
  EXPECT_TRUE(plugin->alive());
  EXPECT_EQ(cpus(ls_rel_), all_);
}

}  // namespace
}  // namespace colod::nri::interop
