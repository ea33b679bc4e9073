// SPDX-License-Identifier: Apache-2.0
// The control API client used by coloctl. Every call returns a Result; when the daemon cannot
// be reached the error reads "cannot reach colod at <path>: is the daemon running? (connect:
// <strerror>)".
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <string>

#include "colod/base/result.h"
#include "control.grpc.pb.h"

namespace colod::control {

class Client {
 public:
  // Checks the socket is connectable (a plain connect(2), so the error names the cause), then
  // creates the channel. Errors: the connect errno (ENOENT, ECONNREFUSED, EACCES).
  static Result<Client> connect(const std::string& socket_path,
                                std::chrono::milliseconds timeout = std::chrono::seconds(10));

  Result<v1::StatusReply> status();
  Result<v1::ListContainersReply> listContainers();
  Result<v1::DumpReply> dump();
  Result<v1::HistogramReply> histogram(const std::string& query);
  Result<v1::DecisionsReply> decisions(uint32_t limit);
  Result<v1::ExplainReply> explain(const std::string& query);
  Result<v1::ConfigShowReply> configShow();
  Result<v1::ConfigCheckReply> configCheck(const std::string& yaml, const std::string& path);
  Result<v1::ConfigReloadReply> configReload();
  // Calls `sink` per chunk until the stream ends; `stop()` returning true cancels the call.
  Result<void> record(uint32_t seconds,
                      const std::function<Result<void>(const v1::RecordChunk&)>& sink,
                      const std::function<bool()>& stop);

  [[nodiscard]] const std::string& socketPath() const { return path_; }

 private:
  Client(std::string path,
         std::unique_ptr<v1::Control::Stub> stub,
         std::chrono::milliseconds timeout);
  std::string path_;
  std::shared_ptr<v1::Control::Stub> stub_;
  std::chrono::milliseconds timeout_;
};

}  // namespace colod::control
