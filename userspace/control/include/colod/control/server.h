// SPDX-License-Identifier: Apache-2.0
// The control API server: gRPC on a Unix socket whose file mode is set right after bind
// (default 0600, root-only). gRPC runs its own threads; every Backend method is called on one of
// them, concurrently, so Backend implementations must be thread-safe.
#pragma once

#include <functional>
#include <memory>
#include <string>

#include "colod/base/result.h"
#include "control.pb.h"

namespace grpc {
class Server;
}

namespace colod::control {

// What the daemon implements. Errors map to gRPC status codes: ENOENT -> NOT_FOUND,
// EINVAL -> INVALID_ARGUMENT, EAGAIN -> UNAVAILABLE, ECANCELED -> CANCELLED, EACCES/EPERM ->
// PERMISSION_DENIED, ETIMEDOUT -> DEADLINE_EXCEEDED, others -> INTERNAL. The status message,
// which coloctl shows the operator, is Error::context() for ENOENT and EINVAL (sentences that
// say everything: "no container matches ...", a config error) and Error::message() otherwise
// (the strerror may be the only cause given).
class Backend {
 public:
  virtual ~Backend() = default;
  virtual Result<v1::StatusReply> status() = 0;
  virtual Result<v1::ListContainersReply> listContainers() = 0;
  virtual Result<v1::DumpReply> dump() = 0;
  virtual Result<v1::HistogramReply> histogram(const std::string& query) = 0;
  virtual Result<v1::DecisionsReply> decisions(uint32_t limit) = 0;
  virtual Result<v1::ExplainReply> explain(const std::string& query) = 0;
  virtual Result<v1::ConfigShowReply> configShow() = 0;
  virtual Result<v1::ConfigCheckReply> configCheck(const v1::ConfigCheckRequest& req) = 0;
  virtual Result<v1::ConfigReloadReply> configReload() = 0;
  // Streams trace chunks: call `write` for each (it returns false once the client is gone) until
  // `seconds` elapsed (0: until cancelled) or `cancelled()` turns true. Blocks the calling
  // gRPC thread.
  virtual Result<void> record(uint32_t seconds,
                              const std::function<bool(const v1::RecordChunk&)>& write,
                              const std::function<bool()>& cancelled) = 0;
};

struct ServerOptions {
  std::string socket_path = "/run/colod/colod.sock";
  unsigned socket_mode = 0600;
};

class Server {
 public:
  // Removes a stale socket file, binds, sets the file mode. Errors: EADDRINUSE when another
  // live process answers on the socket, the errno of mkdir/chmod, EIO when gRPC cannot bind.
  static Result<std::unique_ptr<Server>> start(const ServerOptions& options, Backend& backend);
  ~Server();
  Server(const Server&) = delete;
  Server& operator=(const Server&) = delete;
  Server(Server&&) = delete;
  Server& operator=(Server&&) = delete;

  // Stops serving (in-flight calls get a short grace period), removes the socket file.
  void stop();

  class Service;

 private:
  Server() = default;
  std::unique_ptr<Service> service_;
  std::unique_ptr<grpc::Server> server_;
  std::string socket_path_;
};

}  // namespace colod::control
