// SPDX-License-Identifier: Apache-2.0
#include "colod/nri/testing/fake_runtime.h"

#include <thread>

#include <poll.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>

namespace colod::nri::testing {

namespace {
constexpr const char* kPluginService = "nri.pkg.api.v1alpha1.Plugin";
constexpr const char* kRuntimeService = "nri.pkg.api.v1alpha1.Runtime";

template <typename Msg>
bool parseBytes(Msg& m, std::span<const std::byte> b) {
  return m.ParseFromArray(b.data(), static_cast<int>(b.size()));
}
std::span<const std::byte> asBytes(const std::string& s) {
  return std::as_bytes(std::span(s.data(), s.size()));
}
}  // namespace

FakeRuntime::FakeRuntime(UniqueFd fd) {
  mux_ = std::make_unique<wire::Mux>(std::move(fd));
  auto* mux = mux_.get();
  server_ = std::make_unique<wire::TtrpcServer>(
      [mux](std::span<const std::byte> h, std::span<const std::byte> b,
            std::span<const std::byte> t) {
        return mux->send(wire::kRuntimeServiceConn, h, b, t);
      });
  client_ = std::make_unique<wire::TtrpcClient>(
      [mux](std::span<const std::byte> h, std::span<const std::byte> b,
            std::span<const std::byte> t) {
        return mux->send(wire::kPluginServiceConn, h, b, t);
      },
      16U << 20, mux);
  server_->registerMethod(kRuntimeService, "RegisterPlugin",
                          [this](const wire::CallContext&, std::span<const std::byte> in)
                              -> Result<std::vector<std::byte>> {
                            pb::RegisterPluginRequest req;
                            if (!parseBytes(req, in)) {
                              return COLOD_ERR(EPROTO, "bad RegisterPluginRequest");
                            }
                            {
                              std::lock_guard lock(mu_);
                              registered_ = req;
                            }
                            cv_.notify_all();
                            return std::vector<std::byte>{};
                          });
  server_->registerMethod(kRuntimeService, "UpdateContainers",
                          [this](const wire::CallContext&, std::span<const std::byte> in)
                              -> Result<std::vector<std::byte>> {
                            pb::UpdateContainersRequest req;
                            if (!parseBytes(req, in)) {
                              return COLOD_ERR(EPROTO, "bad UpdateContainersRequest");
                            }
                            int32_t code = 0;
                            std::string msg;
                            std::string payload;
                            std::chrono::milliseconds delay{0};
                            {
                              std::lock_guard lock(mu_);
                              updates_.push_back(req);
                              code = update_code_;
                              msg = update_message_;
                              payload = update_payload_;
                              delay = update_delay_;
                            }
                            cv_.notify_all();
                            if (delay.count() > 0) {
                              // A slow runtime: the reply comes late (or never, if the test
                              // closes the connection meanwhile: a reset mid-call).
                              std::this_thread::sleep_for(delay);
                            }
                            if (code != 0) {
                              return COLOD_ERR(EIO, msg);  // -> status UNKNOWN, like containerd
                            }
                            const auto* b = reinterpret_cast<const std::byte*>(payload.data());
                            return std::vector<std::byte>(b, b + payload.size());
                          });
  auto* server = server_.get();
  auto* client = client_.get();
  mux_->open(wire::kRuntimeServiceConn, [server](std::span<const std::byte> b) { return server->onBytes(b); });
  mux_->open(wire::kPluginServiceConn, [client](std::span<const std::byte> b) { return client->onBytes(b); });
  mux_->onClose([client](const Error& e) { client->fail(e); });
}

FakeRuntime::~FakeRuntime() { close(); }

Result<void> FakeRuntime::start() {
  server_->start();
  return mux_->start();
}

void FakeRuntime::close() {
  mux_->close();
  server_->stop();
  client_->fail(COLOD_ERR(ECONNRESET, "fake runtime closed"));
}

Result<pb::RegisterPluginRequest> FakeRuntime::waitRegistered(std::chrono::milliseconds timeout) {
  std::unique_lock lock(mu_);
  if (!cv_.wait_for(lock, timeout, [&] { return registered_.has_value(); })) {
    return COLOD_ERR(ETIMEDOUT, "plugin did not register");
  }
  return *registered_;
}

Result<wire::TtrpcClient::Reply> FakeRuntime::call(const std::string& method,
                                                   const std::string& payload,
                                                   std::chrono::milliseconds timeout) {
  return client_->call(kPluginService, method, asBytes(payload), timeout);
}

Result<pb::ConfigureResponse> FakeRuntime::configure(const pb::ConfigureRequest& req) {
  auto r = call("Configure", req.SerializeAsString());
  if (!r) {
    return std::move(r).error();
  }
  if (!r->status.ok()) {
    return COLOD_ERR(EREMOTEIO, "Configure failed: ", r->status.message);
  }
  pb::ConfigureResponse resp;
  if (!parseBytes(resp, r->payload)) {
    return COLOD_ERR(EPROTO, "bad ConfigureResponse");
  }
  return resp;
}

Result<pb::SynchronizeResponse> FakeRuntime::synchronize(const std::vector<pb::PodSandbox>& pods,
                                                         const std::vector<pb::Container>& ctrs,
                                                         std::size_t per_chunk) {
  std::size_t n = per_chunk == 0 ? std::max(pods.size(), ctrs.size()) + 1 : per_chunk;
  std::size_t pi = 0;
  std::size_t ci = 0;
  for (;;) {
    pb::SynchronizeRequest req;
    for (std::size_t k = 0; k < n && pi < pods.size(); ++k) {
      *req.add_pods() = pods[pi++];
    }
    for (std::size_t k = 0; k < n && ci < ctrs.size(); ++k) {
      *req.add_containers() = ctrs[ci++];
    }
    bool more = pi < pods.size() || ci < ctrs.size();
    req.set_more(more);
    auto r = call("Synchronize", req.SerializeAsString());
    if (!r) {
      return std::move(r).error();
    }
    if (!r->status.ok()) {
      return COLOD_ERR(EREMOTEIO, "Synchronize failed: ", r->status.message);
    }
    pb::SynchronizeResponse resp;
    if (!parseBytes(resp, r->payload)) {
      return COLOD_ERR(EPROTO, "bad SynchronizeResponse");
    }
    if (!more) {
      return resp;
    }
    if (!resp.more() || resp.update_size() != 0) {
      return COLOD_ERR(EPROTO, "plugin does not handle split sync requests");
    }
  }
}

std::vector<pb::UpdateContainersRequest> FakeRuntime::receivedUpdates() {
  std::lock_guard lock(mu_);
  return updates_;
}

void FakeRuntime::setUpdateDelay(std::chrono::milliseconds delay) {
  std::lock_guard lock(mu_);
  update_delay_ = delay;
}

void FakeRuntime::setUpdateReplyPayload(std::string payload) {
  std::lock_guard lock(mu_);
  update_payload_ = std::move(payload);
}

void FakeRuntime::setUpdateStatus(int32_t code, std::string message) {
  std::lock_guard lock(mu_);
  update_code_ = code;
  update_message_ = std::move(message);
}

bool FakeRuntime::waitUpdates(std::size_t n, std::chrono::milliseconds timeout) {
  std::unique_lock lock(mu_);
  return cv_.wait_for(lock, timeout, [&] { return updates_.size() >= n; });
}

// ---------------------------------------------------------------------------------------------
Result<std::unique_ptr<FakeRuntimeListener>> FakeRuntimeListener::create() {
  std::string tmpl = (std::filesystem::temp_directory_path() / "nri-fake-XXXXXX").string();
  if (::mkdtemp(tmpl.data()) == nullptr) {
    return COLOD_ERR(errno, "mkdtemp");
  }
  std::unique_ptr<FakeRuntimeListener> l(new FakeRuntimeListener());
  l->dir_ = tmpl;
  l->path_ = tmpl + "/nri.sock";
  auto r = l->reopen();
  if (!r) {
    return std::move(r).error();
  }
  return l;
}

FakeRuntimeListener::~FakeRuntimeListener() {
  shutdown();
  std::error_code ec;
  std::filesystem::remove_all(dir_, ec);
}

Result<void> FakeRuntimeListener::reopen() {
  ::unlink(path_.c_str());
  UniqueFd fd(::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0));
  if (!fd) {
    return COLOD_ERR(errno, "socket");
  }
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  std::strncpy(addr.sun_path, path_.c_str(), sizeof(addr.sun_path) - 1);
  if (::bind(fd.get(), reinterpret_cast<const sockaddr*>(&addr), sizeof addr) != 0) {  // NOLINT
    return COLOD_ERR(errno, "bind ", path_);
  }
  if (::listen(fd.get(), 8) != 0) {
    return COLOD_ERR(errno, "listen");
  }
  fd_ = std::move(fd);
  return ok();
}

void FakeRuntimeListener::shutdown() {
  fd_.reset();
  ::unlink(path_.c_str());
}

Result<UniqueFd> FakeRuntimeListener::accept(std::chrono::milliseconds timeout) {
  pollfd p{.fd = fd_.get(), .events = POLLIN, .revents = 0};
  int n = ::poll(&p, 1, static_cast<int>(timeout.count()));
  if (n <= 0) {
    return COLOD_ERR(n == 0 ? ETIMEDOUT : errno, "no plugin connected");
  }
  UniqueFd c(::accept4(fd_.get(), nullptr, nullptr, SOCK_CLOEXEC));
  if (!c) {
    return COLOD_ERR(errno, "accept");
  }
  return c;
}

}  // namespace colod::nri::testing
