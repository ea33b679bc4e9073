// SPDX-License-Identifier: Apache-2.0
// The control API client used by coloctl. Every call returns a Result whose Error::context() is
// a sentence for the operator (print it with operatorMessage()); the code classifies it. When
// the daemon cannot be reached the sentence reads "cannot reach colod at <path>: is the daemon
// running? (connect: <strerror>)"; when the socket is closed to this user, "permission denied
// on <path>: run as root ..." (permissionDeniedMessage).
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <string>

#include "colod/base/result.h"
#include "control.grpc.pb.h"

namespace colod::control {

// The one line coloctl prints for an error: the context without the "[file.cpp:123] " markers
// COLOD_ERR adds (they stay in Error::context() for --debug), and, for ENOENT and EINVAL,
// without a trailing strerror of that code (": No such file or directory" after "no container
// matches ...", ": Invalid argument" after a config error), which says nothing the sentence does
// not. Never appends the strerror: every error the client returns carries its cause in its
// context.
std::string operatorMessage(const Error& e);

// "permission denied on <path>: run as root or as <owner> (the socket is mode 0600; ...)":
// names the socket's owner, group and mode (from stat(2), when visible) and who may connect.
std::string permissionDeniedMessage(const std::string& socket_path);

class Client {
 public:
  // Checks the socket is connectable (a plain connect(2), so the error names the cause), then
  // creates the channel. Errors: the connect errno (ENOENT, ECONNREFUSED, EACCES), EINVAL for
  // an empty or too long path. RPC errors: the gRPC code as an errno (NOT_FOUND -> ENOENT,
  // INVALID_ARGUMENT -> EINVAL, DEADLINE_EXCEEDED -> ETIMEDOUT, ...) with the daemon's message.
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
