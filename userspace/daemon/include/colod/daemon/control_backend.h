// SPDX-License-Identifier: Apache-2.0
// The control API's backend (coloctl status/top/dump/hist/decisions/explain/config/record),
// answered on gRPC threads from the published view, the decision log and a few hooks into the
// loop's owners (engine, actuator, configuration). It holds no loop state of its own, so it is
// tested with a view and hooks built from data.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "colod/base/result.h"
#include "colod/control/server.h"
#include "colod/daemon/config.h"
#include "colod/daemon/decision_log.h"
#include "colod/daemon/reconciler.h"
#include "colod/daemon/recorder.h"
#include "colod/daemon/self_stats.h"
#include "colod/daemon/view.h"
#include "colod/policy/engine.h"

namespace colod::daemon {

// Every hook must be thread-safe (gRPC calls them concurrently).
struct ControlHooks {
  std::string config_path;
  // The command-line settings (they win over the file) and when colod started (the load time of
  // the built-in defaults), for `config show`.
  SettingsOverrides overrides;
  int64_t started_unix_ms = 0;
  std::function<std::shared_ptr<const Config>()> config;
  // The engine's view of a container (ENOENT when it does not track it).
  std::function<Result<policy::ContainerView>(const std::string& id)> describe;
  std::function<std::vector<policy::AppliedAction>()> applied;
  // What the actuator holds (overlays, releases in flight).
  std::function<std::vector<ReconcileEntry>()> overlays;
  // Reloads the configuration on the loop thread and waits for the answer: whether the file
  // differed from the running configuration.
  std::function<Result<bool>()> reload;
  // The first chunk of a recording (trace header + the current containers); called with the
  // recorders locked, so it must not broadcast.
  std::function<std::string()> trace_head;
  std::function<SelfStats()> self_stats;
  std::function<int64_t()> now_ns;  // steady clock, for the age of pending updates
};

class ControlBackend final : public control::Backend {
 public:
  ControlBackend(const ViewStore& views,
                 const DecisionLog& log,
                 TraceRecorders& recorders,
                 ControlHooks hooks);

  Result<control::v1::StatusReply> status() override;
  Result<control::v1::ListContainersReply> listContainers() override;
  Result<control::v1::DumpReply> dump() override;
  Result<control::v1::HistogramReply> histogram(const std::string& query) override;
  Result<control::v1::DecisionsReply> decisions(uint32_t limit) override;
  Result<control::v1::ExplainReply> explain(const std::string& query) override;
  Result<control::v1::ConfigShowReply> configShow() override;
  Result<control::v1::ConfigCheckReply> configCheck(
      const control::v1::ConfigCheckRequest& req) override;
  Result<control::v1::ConfigReloadReply> configReload() override;
  Result<void> record(uint32_t seconds,
                      const std::function<bool(const control::v1::RecordChunk&)>& write,
                      const std::function<bool()>& cancelled) override;

 private:
  const ViewStore& views_;
  const DecisionLog& log_;
  TraceRecorders& recorders_;
  ControlHooks hooks_;
};

}  // namespace colod::daemon
