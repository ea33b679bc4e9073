// SPDX-License-Identifier: Apache-2.0
#include "colod/control/client.h"

#include <grpcpp/grpcpp.h>
#include <sys/socket.h>
#include <sys/un.h>

#include <cerrno>
#include <cstring>

#include "colod/base/unique_fd.h"

namespace colod::control {

namespace {

int statusErrno(grpc::StatusCode code) {
  switch (code) {
    case grpc::StatusCode::NOT_FOUND:
      return ENOENT;
    case grpc::StatusCode::INVALID_ARGUMENT:
      return EINVAL;
    case grpc::StatusCode::UNAVAILABLE:
      return EAGAIN;
    case grpc::StatusCode::CANCELLED:
      return ECANCELED;
    case grpc::StatusCode::DEADLINE_EXCEEDED:
      return ETIMEDOUT;
    case grpc::StatusCode::PERMISSION_DENIED:
      return EACCES;
    default:
      return EIO;
  }
}

std::string unreachable(const std::string& path, int err) {
  return "cannot reach colod at " + path + ": is the daemon running? (connect: " +
         std::strerror(err) + ")";
}

}  // namespace

Client::Client(std::string path,
               std::unique_ptr<v1::Control::Stub> stub,
               std::chrono::milliseconds timeout)
    : path_(std::move(path)), stub_(std::move(stub)), timeout_(timeout) {}

Result<Client> Client::connect(const std::string& socket_path,
                               std::chrono::milliseconds timeout) {
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  if (socket_path.empty() || socket_path.size() >= sizeof(addr.sun_path)) {
    return COLOD_ERR(EINVAL, "control socket path '", socket_path, "' is empty or too long");
  }
  socket_path.copy(addr.sun_path, socket_path.size());
  UniqueFd fd(::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0));
  if (!fd) {
    return Error(errno, "socket(AF_UNIX)");
  }
  if (::connect(fd.get(), reinterpret_cast<const sockaddr*>(&addr), sizeof(addr)) != 0) {
    const int err = errno;
    // No [file:line] prefix: this message is for the operator, verbatim.
    return Error(std::error_code(), unreachable(socket_path, err));
  }
  fd.reset();
  grpc::ChannelArguments args;
  args.SetMaxReceiveMessageSize(64 << 20);
  auto channel =
      grpc::CreateCustomChannel("unix:" + socket_path, grpc::InsecureChannelCredentials(), args);
  return Client(socket_path, v1::Control::NewStub(channel), timeout);
}

namespace {
template <typename Req, typename Reply, typename Fn>
Result<Reply> unary(const std::string& path,
                    std::chrono::milliseconds timeout,
                    const Req& req,
                    Fn&& fn) {
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + timeout);
  Reply reply;
  grpc::Status st = fn(&ctx, req, &reply);
  if (!st.ok()) {
    if (st.error_code() == grpc::StatusCode::UNAVAILABLE &&
        st.error_message().find("connect") != std::string::npos) {
      return Error(std::error_code(ECONNREFUSED, std::generic_category()),
                   "cannot reach colod at " + path + ": " + st.error_message());
    }
    return Error(statusErrno(st.error_code()), st.error_message());
  }
  return reply;
}
}  // namespace

#define COLOD_UNARY(Method, ReqT, ReplyT, req)                                            \
  unary<ReqT, ReplyT>(path_, timeout_, req,                                              \
                      [this](grpc::ClientContext* c, const ReqT& r, ReplyT* o) {          \
                        return stub_->Method(c, r, o);                                   \
                      })

Result<v1::StatusReply> Client::status() {
  return COLOD_UNARY(Status, v1::StatusRequest, v1::StatusReply, v1::StatusRequest());
}
Result<v1::ListContainersReply> Client::listContainers() {
  return COLOD_UNARY(ListContainers, v1::ListContainersRequest, v1::ListContainersReply,
                     v1::ListContainersRequest());
}
Result<v1::DumpReply> Client::dump() {
  return COLOD_UNARY(Dump, v1::DumpRequest, v1::DumpReply, v1::DumpRequest());
}
Result<v1::HistogramReply> Client::histogram(const std::string& query) {
  v1::ContainerRequest req;
  req.set_query(query);
  return COLOD_UNARY(Histogram, v1::ContainerRequest, v1::HistogramReply, req);
}
Result<v1::DecisionsReply> Client::decisions(uint32_t limit) {
  v1::DecisionsRequest req;
  req.set_limit(limit);
  return COLOD_UNARY(Decisions, v1::DecisionsRequest, v1::DecisionsReply, req);
}
Result<v1::ExplainReply> Client::explain(const std::string& query) {
  v1::ContainerRequest req;
  req.set_query(query);
  return COLOD_UNARY(Explain, v1::ContainerRequest, v1::ExplainReply, req);
}
Result<v1::ConfigShowReply> Client::configShow() {
  return COLOD_UNARY(ConfigShow, v1::ConfigShowRequest, v1::ConfigShowReply,
                     v1::ConfigShowRequest());
}
Result<v1::ConfigCheckReply> Client::configCheck(const std::string& yaml,
                                                 const std::string& path) {
  v1::ConfigCheckRequest req;
  req.set_yaml(yaml);
  req.set_path(path);
  return COLOD_UNARY(ConfigCheck, v1::ConfigCheckRequest, v1::ConfigCheckReply, req);
}
Result<v1::ConfigReloadReply> Client::configReload() {
  return COLOD_UNARY(ConfigReload, v1::ConfigReloadRequest, v1::ConfigReloadReply,
                     v1::ConfigReloadRequest());
}

#undef COLOD_UNARY

Result<void> Client::record(uint32_t seconds,
                            const std::function<Result<void>(const v1::RecordChunk&)>& sink,
                            const std::function<bool()>& stop) {
  grpc::ClientContext ctx;
  if (seconds > 0) {
    // The server ends the stream after `seconds`; the deadline is only a safety net.
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(seconds) +
                     std::chrono::seconds(30));
  }
  v1::RecordRequest req;
  req.set_seconds(seconds);
  auto reader = stub_->Record(&ctx, req);
  v1::RecordChunk chunk;
  Result<void> sink_result;
  while (reader->Read(&chunk)) {
    sink_result = sink(chunk);
    if (!sink_result.has_value() || stop()) {
      ctx.TryCancel();
      break;
    }
  }
  grpc::Status st = reader->Finish();
  if (!sink_result.has_value()) {
    return sink_result;
  }
  if (!st.ok() && st.error_code() != grpc::StatusCode::CANCELLED) {
    return Error(statusErrno(st.error_code()), "record: " + st.error_message());
  }
  return {};
}

}  // namespace colod::control
