// SPDX-License-Identifier: Apache-2.0
#include "colod/control/client.h"

#include <grp.h>
#include <grpcpp/grpcpp.h>
#include <pwd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>

#include <array>
#include <cerrno>
#include <cstdio>
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

std::string userName(uid_t uid) {
  passwd pw{};
  passwd* found = nullptr;
  std::array<char, 1024> buf{};
  if (::getpwuid_r(uid, &pw, buf.data(), buf.size(), &found) == 0 && found != nullptr) {
    return found->pw_name;
  }
  return std::to_string(uid);
}

std::string groupName(gid_t gid) {
  group gr{};
  group* found = nullptr;
  std::array<char, 1024> buf{};
  if (::getgrgid_r(gid, &gr, buf.data(), buf.size(), &found) == 0 && found != nullptr) {
    return found->gr_name;
  }
  return std::to_string(gid);
}

std::string octal(unsigned mode) {
  std::array<char, 8> buf{};
  std::snprintf(buf.data(), buf.size(), "%04o", mode & 07777U);
  return buf.data();
}

// Length of the "[file.cpp:123]" marker starting at `at` (COLOD_ERR's), 0 if there is none.
std::size_t markerLength(std::string_view s, std::size_t at) {
  if (at >= s.size() || s[at] != '[') {
    return 0;
  }
  const std::size_t close = s.find(']', at);
  if (close == std::string_view::npos) {
    return 0;
  }
  const std::string_view inner = s.substr(at + 1, close - at - 1);
  const std::size_t colon = inner.rfind(':');
  if (colon == std::string_view::npos || colon == 0 || colon + 1 == inner.size() ||
      inner.substr(0, colon).find_first_of(" []") != std::string_view::npos ||
      inner.substr(colon + 1).find_first_not_of("0123456789") != std::string_view::npos) {
    return 0;
  }
  return close - at + 1;
}

}  // namespace

std::string permissionDeniedMessage(const std::string& socket_path) {
  const std::string head = "permission denied on " + socket_path + ": ";
  struct stat st {};
  if (::stat(socket_path.c_str(), &st) != 0) {
    // Not even visible: a directory on the way is closed to this user.
    return head + "run as root (a directory on the way is not accessible to this user)";
  }
  const unsigned mode = st.st_mode & 07777U;
  const std::string owner = userName(st.st_uid);
  const std::string grp = groupName(st.st_gid);
  const std::string who = st.st_uid == 0 ? "root" : "root or as " + owner;
  if ((mode & S_IWGRP) != 0) {
    return head + "run as " + who + " or as a member of group " + grp + " (the socket is mode " +
           octal(mode) + ")";
  }
  return head + "run as " + who + " (the socket is mode " + octal(mode) +
         "; daemon.control_socket_mode: 0660 in colod's configuration opens it to group " + grp +
         ")";
}

std::string operatorMessage(const Error& e) {
  // Drop every "[file.cpp:123] " marker that COLOD_ERR put in, wherever a wrap() moved it.
  const std::string& in = e.context();
  std::string out;
  out.reserve(in.size());
  for (std::size_t i = 0; i < in.size();) {
    if (const std::size_t n = markerLength(in, i); n > 0) {
      i += n;
      if (i < in.size() && in[i] == ' ') {
        ++i;
      }
      continue;
    }
    out += in[i++];
  }
  // "Not found" and "invalid" sentences say everything; the strerror of their own code after
  // them (an older colod sent Error::message(), the client then added it again) says nothing.
  // Other codes keep their text: there the strerror may be the only cause given.
  if (e.code() && (e.errnoValue() == ENOENT || e.errnoValue() == EINVAL)) {
    const std::string tail = ": " + e.code().message();
    while (out.size() > tail.size() && out.ends_with(tail)) {
      out.resize(out.size() - tail.size());
    }
  }
  return out;
}

Client::Client(std::string path,
               std::unique_ptr<v1::Control::Stub> stub,
               std::chrono::milliseconds timeout)
    : path_(std::move(path)), stub_(std::move(stub)), timeout_(timeout) {}

Result<Client> Client::connect(const std::string& socket_path,
                               std::chrono::milliseconds timeout) {
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  if (socket_path.empty() || socket_path.size() >= sizeof(addr.sun_path)) {
    return Error(EINVAL, "control socket path '" + socket_path + "' is empty or too long");
  }
  socket_path.copy(addr.sun_path, socket_path.size());
  UniqueFd fd(::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0));
  if (!fd) {
    const int err = errno;
    return Error(std::error_code(err, std::generic_category()),
                 std::string("cannot create a Unix socket: ") + std::strerror(err));
  }
  if (::connect(fd.get(), reinterpret_cast<const sockaddr*>(&addr), sizeof(addr)) != 0) {
    const int err = errno;
    // No [file:line] prefix: these messages are for the operator, verbatim. The code is kept
    // (for --debug); operatorMessage() shows the sentence alone.
    const std::error_code code(err, std::generic_category());
    if (err == EACCES || err == EPERM) {
      return Error(code, permissionDeniedMessage(socket_path));
    }
    return Error(code, unreachable(socket_path, err));
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
    if (st.error_code() == grpc::StatusCode::DEADLINE_EXCEEDED) {
      return Error(
          std::error_code(ETIMEDOUT, std::generic_category()),
          "colod at " + path + " did not answer within " + std::to_string(timeout.count()) + " ms");
    }
    // The daemon's message is the sentence (server.cpp); the code classifies it.
    return Error(statusErrno(st.error_code()), st.error_message());
  }
  return reply;
}
}  // namespace

// ReqT and ReplyT are types: they cannot be parenthesised.
// NOLINTBEGIN(bugprone-macro-parentheses)
#define COLOD_UNARY(Method, ReqT, ReplyT, req)                                            \
  unary<ReqT, ReplyT>(path_, timeout_, req,                                              \
                      [this](grpc::ClientContext* c, const ReqT& r, ReplyT* o) {          \
                        return stub_->Method(c, r, o);                                   \
                      })
// NOLINTEND(bugprone-macro-parentheses)

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
