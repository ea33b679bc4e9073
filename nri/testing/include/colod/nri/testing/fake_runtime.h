// SPDX-License-Identifier: Apache-2.0
// An in-process fake NRI runtime for tests and benchmarks (style rule 38): the runtime's half of
// the protocol built from our own wire layer in the opposite roles (ttrpc client on conn 1,
// Runtime-service server on conn 2). Test-only; never linked into production targets.
#pragma once

#include <chrono>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "colod/base/result.h"
#include "colod/base/unique_fd.h"
#include "colod/nri/mux.h"
#include "colod/nri/ttrpc.h"
#include "nri/proto/api.pb.h"

namespace colod::nri::testing {

namespace pb = ::nri::pkg::api::v1alpha1;

class FakeRuntime {
 public:
  explicit FakeRuntime(UniqueFd fd);
  ~FakeRuntime();
  FakeRuntime(const FakeRuntime&) = delete;
  FakeRuntime& operator=(const FakeRuntime&) = delete;
  FakeRuntime(FakeRuntime&&) = delete;
  FakeRuntime& operator=(FakeRuntime&&) = delete;

  Result<void> start();
  void close();

  // Blocks until the plugin called RegisterPlugin; ETIMEDOUT otherwise.
  Result<pb::RegisterPluginRequest> waitRegistered(std::chrono::milliseconds timeout);
  // Calls a Plugin-service method with the serialized request.
  Result<wire::TtrpcClient::Reply> call(const std::string& method,
                                        const std::string& payload,
                                        std::chrono::milliseconds timeout = std::chrono::seconds(2));
  Result<pb::ConfigureResponse> configure(const pb::ConfigureRequest& req);
  // Sends the objects in chunks of at most `per_chunk` pods and containers (more=true on all but
  // the last), checks the non-final replies echo more=true with no updates, returns the last.
  Result<pb::SynchronizeResponse> synchronize(const std::vector<pb::PodSandbox>& pods,
                                              const std::vector<pb::Container>& ctrs,
                                              std::size_t per_chunk = 0);

  // UpdateContainers requests received from the plugin.
  std::vector<pb::UpdateContainersRequest> receivedUpdates();
  // Makes the next UpdateContainers answers carry this error status (code 0 = success).
  void setUpdateStatus(int32_t code, std::string message);
  // Makes the next successful UpdateContainers replies carry these payload bytes ("" = empty).
  void setUpdateReplyPayload(std::string payload);
  // Holds every UpdateContainers reply this long (the update is recorded at once).
  void setUpdateDelay(std::chrono::milliseconds delay);
  bool waitUpdates(std::size_t n, std::chrono::milliseconds timeout);

 private:
  std::unique_ptr<wire::Mux> mux_;
  std::unique_ptr<wire::TtrpcServer> server_;
  std::unique_ptr<wire::TtrpcClient> client_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::optional<pb::RegisterPluginRequest> registered_;
  std::vector<pb::UpdateContainersRequest> updates_;
  int32_t update_code_ = 0;
  std::string update_message_;
  std::string update_payload_;
  std::chrono::milliseconds update_delay_{0};
};

// A listening Unix socket in a fresh temp dir (removed on destruction).
class FakeRuntimeListener {
 public:
  static Result<std::unique_ptr<FakeRuntimeListener>> create();
  ~FakeRuntimeListener();
  FakeRuntimeListener(const FakeRuntimeListener&) = delete;
  FakeRuntimeListener& operator=(const FakeRuntimeListener&) = delete;
  FakeRuntimeListener(FakeRuntimeListener&&) = delete;
  FakeRuntimeListener& operator=(FakeRuntimeListener&&) = delete;

  [[nodiscard]] const std::string& path() const { return path_; }
  Result<UniqueFd> accept(std::chrono::milliseconds timeout);
  // Removes the socket (runtime gone); reopen() recreates it (runtime restarted).
  void shutdown();
  Result<void> reopen();

 private:
  FakeRuntimeListener() = default;
  std::string dir_;
  std::string path_;
  UniqueFd fd_;
};

}  // namespace colod::nri::testing
