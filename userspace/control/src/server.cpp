// SPDX-License-Identifier: Apache-2.0
#include "colod/control/server.h"

#include <grpcpp/grpcpp.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <filesystem>

#include "colod/base/unique_fd.h"
#include "control.grpc.pb.h"

namespace colod::control {

namespace {

// The status message is what coloctl shows the operator. "Not found" and "invalid" errors are
// sentences that say everything (the code says what strerror would), so the message is the
// context alone ("no container matches 'x' (...)"), never "...: No such file or directory",
// which the client used to print a second time. Any other error keeps its strerror: there it may
// be the only cause given.
grpc::Status toStatus(const Error& e) {
  grpc::StatusCode code = grpc::StatusCode::INTERNAL;
  switch (e.errnoValue()) {
    case ENOENT:
      code = grpc::StatusCode::NOT_FOUND;
      break;
    case EINVAL:
      code = grpc::StatusCode::INVALID_ARGUMENT;
      break;
    case EAGAIN:
      code = grpc::StatusCode::UNAVAILABLE;
      break;
    case ECANCELED:
      code = grpc::StatusCode::CANCELLED;
      break;
    case EACCES:
    case EPERM:
      code = grpc::StatusCode::PERMISSION_DENIED;
      break;
    case ETIMEDOUT:
      code = grpc::StatusCode::DEADLINE_EXCEEDED;
      break;
    default:
      break;
  }
  if (e.errnoValue() == ENOENT || e.errnoValue() == EINVAL) {
    return {code, e.context()};
  }
  return {code, e.message()};
}

template <typename Reply>
grpc::Status deliver(Result<Reply>&& r, Reply* out) {
  if (!r.has_value()) {
    return toStatus(r.error());
  }
  *out = std::move(r).value();
  return grpc::Status::OK;
}

// True when something accepts connections on the socket (another colod is running).
bool socketIsLive(const std::string& path) {
  UniqueFd fd(::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0));
  if (!fd) {
    return false;
  }
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  if (path.size() >= sizeof(addr.sun_path)) {
    return false;
  }
  path.copy(addr.sun_path, path.size());
  return ::connect(fd.get(), reinterpret_cast<const sockaddr*>(&addr), sizeof(addr)) == 0;
}

}  // namespace

class Server::Service final : public v1::Control::Service {
 public:
  explicit Service(Backend& backend) : backend_(backend) {}

  grpc::Status Status(grpc::ServerContext* /*ctx*/,
                      const v1::StatusRequest* /*req*/,
                      v1::StatusReply* out) override {
    return deliver(backend_.status(), out);
  }
  grpc::Status ListContainers(grpc::ServerContext* /*ctx*/,
                              const v1::ListContainersRequest* /*req*/,
                              v1::ListContainersReply* out) override {
    return deliver(backend_.listContainers(), out);
  }
  grpc::Status Dump(grpc::ServerContext* /*ctx*/,
                    const v1::DumpRequest* /*req*/,
                    v1::DumpReply* out) override {
    return deliver(backend_.dump(), out);
  }
  grpc::Status Histogram(grpc::ServerContext* /*ctx*/,
                         const v1::ContainerRequest* req,
                         v1::HistogramReply* out) override {
    return deliver(backend_.histogram(req->query()), out);
  }
  grpc::Status Decisions(grpc::ServerContext* /*ctx*/,
                         const v1::DecisionsRequest* req,
                         v1::DecisionsReply* out) override {
    return deliver(backend_.decisions(req->limit()), out);
  }
  grpc::Status Explain(grpc::ServerContext* /*ctx*/,
                       const v1::ContainerRequest* req,
                       v1::ExplainReply* out) override {
    return deliver(backend_.explain(req->query()), out);
  }
  grpc::Status ConfigShow(grpc::ServerContext* /*ctx*/,
                          const v1::ConfigShowRequest* /*req*/,
                          v1::ConfigShowReply* out) override {
    return deliver(backend_.configShow(), out);
  }
  grpc::Status ConfigCheck(grpc::ServerContext* /*ctx*/,
                           const v1::ConfigCheckRequest* req,
                           v1::ConfigCheckReply* out) override {
    return deliver(backend_.configCheck(*req), out);
  }
  grpc::Status ConfigReload(grpc::ServerContext* /*ctx*/,
                            const v1::ConfigReloadRequest* /*req*/,
                            v1::ConfigReloadReply* out) override {
    return deliver(backend_.configReload(), out);
  }
  grpc::Status Record(grpc::ServerContext* ctx,
                      const v1::RecordRequest* req,
                      grpc::ServerWriter<v1::RecordChunk>* writer) override {
    auto r = backend_.record(
        req->seconds(), [writer](const v1::RecordChunk& chunk) { return writer->Write(chunk); },
        [ctx] { return ctx->IsCancelled(); });
    if (!r.has_value()) {
      return toStatus(r.error());
    }
    return grpc::Status::OK;
  }

 private:
  Backend& backend_;
};

Result<std::unique_ptr<Server>> Server::start(const ServerOptions& options, Backend& backend) {
  const std::string& path = options.socket_path;
  if (path.empty() || path.size() >= sizeof(sockaddr_un{}.sun_path)) {
    return COLOD_ERR(EINVAL, "control socket path '", path, "' is empty or too long");
  }
  std::error_code ec;
  const auto parent = std::filesystem::path(path).parent_path();
  if (!parent.empty()) {
    std::filesystem::create_directories(parent, ec);
    if (ec) {
      return COLOD_ERR(ec.value(), "creating control socket directory ", parent.string());
    }
  }
  struct stat st {};
  if (::lstat(path.c_str(), &st) == 0) {
    if (!S_ISSOCK(st.st_mode)) {
      return COLOD_ERR(EEXIST, "control socket path ", path, " exists and is not a socket");
    }
    if (socketIsLive(path)) {
      return COLOD_ERR(EADDRINUSE, "control socket ", path,
                       " is in use: is another colod running?");
    }
    ::unlink(path.c_str());
  }

  std::unique_ptr<Server> self(new Server());
  self->socket_path_ = path;
  self->service_ = std::make_unique<Service>(backend);
  grpc::ServerBuilder builder;
  builder.AddListeningPort("unix:" + path, grpc::InsecureServerCredentials());
  builder.RegisterService(self->service_.get());
  // Few, small calls: keep gRPC's thread use small.
  builder.SetSyncServerOption(grpc::ServerBuilder::SyncServerOption::MIN_POLLERS, 1);
  builder.SetSyncServerOption(grpc::ServerBuilder::SyncServerOption::MAX_POLLERS, 2);
  builder.SetMaxReceiveMessageSize(4 << 20);
  // The socket is created with the process umask; with the usual 022 only its owner can
  // connect (connect(2) needs write permission) until the chmod below narrows it further.
  self->server_ = builder.BuildAndStart();
  if (!self->server_) {
    return COLOD_ERR(EIO, "gRPC could not listen on unix:", path);
  }
  if (::chmod(path.c_str(), options.socket_mode) != 0) {
    const int err = errno;
    self->stop();
    return COLOD_ERR(err, "chmod ", path);
  }
  return self;
}

void Server::stop() {
  if (server_) {
    server_->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(2));
    server_->Wait();
    server_.reset();
    ::unlink(socket_path_.c_str());
  }
}

Server::~Server() { stop(); }

}  // namespace colod::control
