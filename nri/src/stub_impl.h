// SPDX-License-Identifier: Apache-2.0
// The stub's private implementation, shared by its two source files: stub.cpp (the connection's
// life: dial or inherit, register, Configure, Synchronize, reconnect, UpdateContainers) and
// stub_methods.cpp (the runtime's calls: which RPC carries which event, decoding, handing it to
// the plugin, the registry kept from what the runtime says). Not part of the public API.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <optional>
#include <random>
#include <string>
#include <thread>

#include "colod/nri/codec.h"
#include "colod/nri/mux.h"
#include "colod/nri/ownership.h"
#include "colod/nri/registry.h"
#include "colod/nri/stub.h"
#include "colod/nri/ttrpc.h"

namespace colod::nri::stub_internal {

using Clock = std::chrono::steady_clock;
using Bytes = codec::Bytes;

// The valid event mask of the runtime behind `req` (stub.cpp).
EventMask validEventMaskImpl(const ConfigureRequest& req);

// Handler pointers discovered from the plugin (style rule 34: dynamic_cast discovery).
struct Handlers {
  ConfigureHandler* configure = nullptr;
  SynchronizeHandler* synchronize = nullptr;
  RunPodSandboxHandler* run_pod = nullptr;
  StopPodSandboxHandler* stop_pod = nullptr;
  RemovePodSandboxHandler* remove_pod = nullptr;
  CreateContainerHandler* create = nullptr;
  PostCreateContainerHandler* post_create = nullptr;
  StartContainerHandler* start = nullptr;
  PostStartContainerHandler* post_start = nullptr;
  UpdateContainerHandler* update = nullptr;
  PostUpdateContainerHandler* post_update = nullptr;
  StopContainerHandler* stop = nullptr;
  RemoveContainerHandler* remove = nullptr;

  [[nodiscard]] EventMask mask() const {
    EventMask m = 0;
    auto add = [&](const void* p, Event e) {
      if (p != nullptr) {
        m |= eventBit(e);
      }
    };
    add(run_pod, Event::RunPodSandbox);
    add(stop_pod, Event::StopPodSandbox);
    add(remove_pod, Event::RemovePodSandbox);
    add(create, Event::CreateContainer);
    add(post_create, Event::PostCreateContainer);
    add(start, Event::StartContainer);
    add(post_start, Event::PostStartContainer);
    add(update, Event::UpdateContainer);
    add(post_update, Event::PostUpdateContainer);
    add(stop, Event::StopContainer);
    add(remove, Event::RemoveContainer);
    return m;
  }
};

// One connection: the trunk and its two ttrpc endpoints.
struct Session {
  std::unique_ptr<wire::Mux> mux;
  std::unique_ptr<wire::TtrpcServer> server;
  std::unique_ptr<wire::TtrpcClient> client;
  bool closed = false;               // guarded by StubImpl::mu_
  std::optional<Error> close_error;  // guarded by StubImpl::mu_
  std::atomic<bool> synchronized{false};
  // Serving-thread state (touched by whichever thread serves the call: calls are serialized).
  SynchronizeRequest pending_sync;
  bool sync_final_replying = false;
  std::shared_ptr<void> old_registry;  // previous registry content, freed after the reply

  // Live = synchronized on a connection that is still up (guarded by StubImpl::mu_ for closed).
  [[nodiscard]] bool liveLocked() const { return synchronized.load() && !closed; }

  void teardown() {
    // Reader first (nothing feeds the endpoints afterwards), then the worker.
    mux->close();
    server->stop();
    client->fail(COLOD_ERR(ENOTCONN, "NRI connection closed"));
  }
};

class StubImpl final : public Stub {
 public:
  StubImpl(Plugin& plugin, StubOptions options, std::string name, std::string idx, int inherited_fd)
      : plugin_(plugin),
        options_(std::move(options)),
        name_(std::move(name)),
        idx_(std::move(idx)),
        label_(idx_ + "-" + name_),
        inherited_fd_(inherited_fd),
        registry_(options_.registry) {
    h_.configure = dynamic_cast<ConfigureHandler*>(&plugin_);
    h_.synchronize = dynamic_cast<SynchronizeHandler*>(&plugin_);
    h_.run_pod = dynamic_cast<RunPodSandboxHandler*>(&plugin_);
    h_.stop_pod = dynamic_cast<StopPodSandboxHandler*>(&plugin_);
    h_.remove_pod = dynamic_cast<RemovePodSandboxHandler*>(&plugin_);
    h_.create = dynamic_cast<CreateContainerHandler*>(&plugin_);
    h_.post_create = dynamic_cast<PostCreateContainerHandler*>(&plugin_);
    h_.start = dynamic_cast<StartContainerHandler*>(&plugin_);
    h_.post_start = dynamic_cast<PostStartContainerHandler*>(&plugin_);
    h_.update = dynamic_cast<UpdateContainerHandler*>(&plugin_);
    h_.post_update = dynamic_cast<PostUpdateContainerHandler*>(&plugin_);
    h_.stop = dynamic_cast<StopContainerHandler*>(&plugin_);
    h_.remove = dynamic_cast<RemoveContainerHandler*>(&plugin_);
  }

  ~StubImpl() override { stop(); }
  StubImpl(const StubImpl&) = delete;
  StubImpl& operator=(const StubImpl&) = delete;
  StubImpl(StubImpl&&) = delete;
  StubImpl& operator=(StubImpl&&) = delete;

  Result<void> run() override;
  Result<void> start() override {
    std::lock_guard lock(mu_);
    if (bg_.joinable()) {
      return COLOD_ERR(EALREADY, "stub already started");
    }
    stop_requested_ = false;
    bg_ = std::thread([this] {
      auto r = run();
      std::lock_guard l(mu_);
      if (!r) {
        bg_error_ = r.error();
      }
    });
    return ok();
  }
  void stop() override {
    std::shared_ptr<Session> s;
    {
      std::lock_guard lock(mu_);
      stop_requested_ = true;
      s = session_;
    }
    cv_.notify_all();
    if (s) {
      // Wakes a blocked RegisterPlugin call and the reader; run() does the full teardown.
      s->client->fail(COLOD_ERR(ECANCELED, "stub stopped"));
    }
    std::thread t;
    {
      std::lock_guard lock(mu_);
      t = std::move(bg_);
    }
    if (t.joinable()) {
      t.join();
    }
  }
  bool waitSynchronized(std::chrono::milliseconds timeout) override {
    std::unique_lock lock(mu_);
    return cv_.wait_for(lock, timeout, [&] { return session_ && session_->liveLocked(); });
  }
  Result<void> updateContainers(std::vector<ContainerUpdate> updates) override;
  const Registry& registry() const override { return registry_; }
  StubStats stats() const override {
    std::lock_guard lock(mu_);
    StubStats s = stats_;
    s.connected = session_ != nullptr && !session_->closed;
    s.synchronized = session_ != nullptr && session_->liveLocked();
    return s;
  }
  const std::string& pluginName() const override { return name_; }
  const std::string& pluginIdx() const override { return idx_; }
  EventMask handledEvents() const override {
    return h_.mask() | kRegistryEvents |
           (options_.report_ownership ? eventBit(Event::ValidateContainerAdjustment) : 0);
  }
  std::optional<std::string> fieldOwner(std::string_view container_id, Field field) const override {
    return owners_.owner(container_id, field);
  }
  bool launched() const override { return inherited_fd_ >= 0; }

 private:
  Result<UniqueFd> obtainFd(bool& reconnectable);
  void notify(ConnectionState state, std::optional<Error> err = std::nullopt);
  std::shared_ptr<Session> makeSession(UniqueFd fd);
  void registerMethods(Session& s);
  bool sleepInterruptible(std::chrono::milliseconds d);
  void reportConflict(const OwnershipConflict& c) {
    {
      std::lock_guard lock(mu_);
      ++stats_.ownership_conflicts;
    }
    if (options_.on_conflict) {
      options_.on_conflict(c);
    }
  }
  void countHandlerError() {
    std::lock_guard lock(mu_);
    ++stats_.handler_errors;
  }

  // Plugin-service handlers (run on the session's worker thread).
  Result<Bytes> onConfigure(std::span<const std::byte> in);
  Result<Bytes> onSynchronize(Session& s, std::span<const std::byte> in);
  Result<void> dispatchPod(Event e, const PodSandbox& pod);
  Result<void> dispatchContainer(Event e, const PodSandbox& pod, const Container& ctr);

  Plugin& plugin_;
  StubOptions options_;
  std::string name_;
  std::string idx_;
  std::string label_;  // "NN-name", how runtimes name us in owners and conflicts
  int inherited_fd_;   // >= 0: connection_fd or NRI_PLUGIN_SOCKET (resolved at create())
  Handlers h_;
  OwnerTable owners_;
  Registry registry_;

  mutable std::mutex mu_;
  std::condition_variable cv_;
  bool stop_requested_ = false;
  std::shared_ptr<Session> session_;
  std::thread bg_;
  std::optional<Error> bg_error_;
  StubStats stats_;
  bool fd_consumed_ = false;
  std::mt19937_64 rng_{std::random_device{}()};
};

}  // namespace colod::nri::stub_internal
