// SPDX-License-Identifier: Apache-2.0
#include "colod/nri/stub.h"

#include <atomic>
#include <cerrno>
#include <charconv>
#include <condition_variable>
#include <cstdlib>
#include <mutex>
#include <random>
#include <thread>

#include "colod/nri/codec.h"
#include "colod/nri/mux.h"
#include "colod/nri/ttrpc.h"
#include "stub_impl.h"
namespace colod::nri {

using stub_internal::Bytes;
using stub_internal::Clock;

namespace {

constexpr const char* kDefaultSocketPath = "/var/run/nri/nri.sock";
// The API level we implement (dedicated event RPCs of v0.12; no validation subscriptions).
constexpr const char* kOurNriVersion = "v0.12.2";

// "v0.10.0", "0.12.1-rc1" -> {major, minor}; nullopt if unparsable.
std::optional<std::pair<int, int>> parseVersion(std::string_view v) {
  if (!v.empty() && (v[0] == 'v' || v[0] == 'V')) {
    v.remove_prefix(1);
  }
  int major = 0;
  int minor = 0;
  auto r1 = std::from_chars(v.data(), v.data() + v.size(), major);
  if (r1.ec != std::errc() || r1.ptr == v.data() + v.size() || *r1.ptr != '.') {
    return std::nullopt;
  }
  auto r2 = std::from_chars(r1.ptr + 1, v.data() + v.size(), minor);
  if (r2.ec != std::errc()) {
    return std::nullopt;
  }
  return std::pair{major, minor};
}

bool validName(std::string_view name) {
  if (name.empty()) {
    return false;
  }
  for (char c : name) {
    bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
              c == '_' || c == '.' || c == '+' || c == '-';
    if (!ok) {
      return false;
    }
  }
  return true;
}

bool validIdx(std::string_view idx) {
  return idx.size() == 2 && idx[0] >= '0' && idx[0] <= '9' && idx[1] >= '0' && idx[1] <= '9';
}

std::string envOr(const char* name, bool use_env) {
  if (!use_env) {
    return {};
  }
  const char* v = std::getenv(name);  // NOLINT(concurrency-mt-unsafe): read once at create()
  return v != nullptr ? std::string(v) : std::string();
}

}  // namespace

namespace stub_internal {

void StubImpl::notify(ConnectionState state, std::optional<Error> err) {
  if (!options_.on_connection) {
    return;
  }
  ConnectionEvent ev;
  {
    std::lock_guard lock(mu_);
    ev.connects = stats_.connects;
    ev.reconnects = stats_.reconnects;
  }
  ev.state = state;
  ev.error = std::move(err);
  options_.on_connection(ev);
}

Result<UniqueFd> StubImpl::obtainFd(bool& reconnectable) {
  reconnectable = true;
  if (inherited_fd_ >= 0) {
    reconnectable = false;
    if (fd_consumed_) {
      return COLOD_ERR(ENOTCONN, "the inherited NRI connection is gone; cannot reconnect");
    }
    fd_consumed_ = true;
    return UniqueFd(inherited_fd_);
  }
  return wire::dialUnix(options_.socket_path.empty() ? kDefaultSocketPath : options_.socket_path);
}

std::shared_ptr<Session> StubImpl::makeSession(UniqueFd fd) {
  auto s = std::make_shared<Session>();
  s->mux = std::make_unique<wire::Mux>(std::move(fd));
  Session* raw = s.get();
  auto sender = [raw](uint32_t conn) {
    return [raw, conn](std::span<const std::byte> head, std::span<const std::byte> body,
                       std::span<const std::byte> tail) {
      return raw->mux->send(conn, head, body, tail);
    };
  };
  wire::ServerOptions so;
  so.max_message = options_.max_message;
  so.on_served = [this, raw](const wire::CallTiming& t) {
    if (t.method == "Synchronize" && raw->sync_final_replying) {
      raw->sync_final_replying = false;
      bool now_synchronized = false;
      if (t.code == wire::status_code::kOk && t.sent) {
        // Only now, with the reply on the wire, may UpdateContainers go out (brief §4.8) -- and
        // only if this connection is still the live one: a slow Synchronize answered after the
        // peer closed must not make a dead connection look synchronized.
        std::lock_guard lock(mu_);
        if (!raw->closed) {
          raw->synchronized.store(true);
          registry_.markSynchronized();
          now_synchronized = true;
        }
      }
      if (now_synchronized) {
        cv_.notify_all();
        notify(ConnectionState::Synchronized);
      }
    }
    if (options_.on_call) {
      options_.on_call(t.method, t.code, t.replied - t.first_byte);
    }
    // Free the previous registry content after the reply went out. (A malloc_trim(0) here
    // lowered RSS 48.8 -> 44.2 MiB but made the next Synchronize slower in an A/B: its buffers
    // page-faulted back in. Not used.)
    raw->old_registry.reset();
  };
  s->server = std::make_unique<wire::TtrpcServer>(sender(wire::kPluginServiceConn), std::move(so));
  // UpdateContainers callers read their own replies when nothing else reads the trunk.
  s->client = std::make_unique<wire::TtrpcClient>(sender(wire::kRuntimeServiceConn),
                                                  wire::kTtrpcMaxMessage, s->mux.get());
  s->mux->open(wire::kPluginServiceConn,
               [raw](std::span<const std::byte> b) { return raw->server->onBytes(b); });
  s->mux->open(wire::kRuntimeServiceConn,
               [raw](std::span<const std::byte> b) { return raw->client->onBytes(b); });
  s->mux->onClose([this, raw](const Error& e) {
    raw->client->fail(e);
    {
      std::lock_guard lock(mu_);
      raw->closed = true;
      raw->close_error = e;
      // Under mu_, so it cannot interleave with on_served marking this connection synchronized.
      registry_.markUnsynchronized();
    }
    cv_.notify_all();
  });
  registerMethods(*s);
  return s;
}

bool StubImpl::sleepInterruptible(std::chrono::milliseconds d) {
  std::unique_lock lock(mu_);
  return !cv_.wait_for(lock, d, [&] { return stop_requested_; });
}

Result<void> StubImpl::run() {
  std::chrono::milliseconds delay = options_.backoff.initial;
  for (;;) {
    {
      std::lock_guard lock(mu_);
      if (stop_requested_) {
        break;
      }
    }
    notify(ConnectionState::Connecting);
    bool reconnectable = true;
    auto fd = obtainFd(reconnectable);
    std::optional<Error> failure;
    bool was_synchronized = false;
    if (fd) {
      auto s = makeSession(std::move(fd).value());
      {
        std::lock_guard lock(mu_);
        ++stats_.connects;
        if (stats_.connects > 1) {
          ++stats_.reconnects;
        }
        session_ = s;
      }
      s->server->start();
      auto started = s->mux->start();
      if (!started) {
        failure = started.error();
      } else {
        auto reg = s->client->call(codec::kRuntimeService, "RegisterPlugin",
                                   codec::encodeRegisterPlugin(name_, idx_, kOurNriVersion),
                                   options_.registration_timeout);
        if (!reg) {
          failure = std::move(reg).error().wrap("registering plugin");
        } else if (!reg->status.ok()) {
          failure = COLOD_ERR(EPERM, "runtime rejected RegisterPlugin: ", reg->status.message);
        } else {
          notify(ConnectionState::Connected);
          std::unique_lock lock(mu_);
          auto handshake_deadline = Clock::now() + options_.handshake_timeout;
          for (;;) {
            if (stop_requested_ || s->closed) {
              break;
            }
            if (!s->synchronized.load()) {
              if (cv_.wait_until(lock, handshake_deadline) == std::cv_status::timeout &&
                  !s->synchronized.load() && !s->closed && !stop_requested_) {
                failure = COLOD_ERR(ETIMEDOUT, "runtime did not configure and synchronize us in ",
                                    options_.handshake_timeout.count(), " ms");
                break;
              }
            } else {
              cv_.wait(lock);
            }
          }
          if (!failure && s->close_error) {
            failure = *s->close_error;
          }
        }
      }
      was_synchronized = s->synchronized.load();
      s->teardown();
      {
        std::lock_guard lock(mu_);
        session_.reset();
      }
      registry_.markUnsynchronized();
    } else {
      failure = fd.error();
    }
    bool stopping = false;
    {
      std::lock_guard lock(mu_);
      stopping = stop_requested_;
    }
    if (stopping) {
      break;
    }
    if (!failure) {
      failure = COLOD_ERR(ECONNRESET, "NRI connection lost");
    }
    notify(ConnectionState::Disconnected, failure);
    if (!reconnectable || !options_.reconnect) {
      notify(ConnectionState::Stopped, failure);
      return *failure;
    }
    // Bounded exponential back-off with jitter; a connection that got synchronized was healthy,
    // so the next attempt starts from the initial delay.
    if (was_synchronized) {
      delay = options_.backoff.initial;
    }
    double j = std::clamp(options_.backoff.jitter, 0.0, 1.0);
    std::uniform_real_distribution<double> dist(1.0 - j, 1.0 + j);
    auto sleep = std::chrono::milliseconds(
        static_cast<int64_t>(static_cast<double>(delay.count()) * dist(rng_)));
    if (!sleepInterruptible(sleep)) {
      break;
    }
    delay = std::min(options_.backoff.max,
                     std::chrono::milliseconds(static_cast<int64_t>(
                         static_cast<double>(delay.count()) * options_.backoff.multiplier)));
  }
  notify(ConnectionState::Stopped);
  return ok();
}

EventMask validEventMaskImpl(const ConfigureRequest& req) {
  if (auto v = parseVersion(req.nri_version)) {
    return (v->first > 0 || v->second >= 10) ? kValidEventsV010 : kValidEventsV02;
  }
  // No NRI_version (< v0.12): infer from the runtime's own version (brief §5.1/§5.2).
  if (auto v = parseVersion(req.runtime_version)) {
    if (req.runtime_name == "containerd" && (v->first > 2 || (v->first == 2 && v->second >= 2))) {
      return kValidEventsV010;
    }
    if (req.runtime_name == "cri-o" && v->first == 1) {
      if (v->second >= 34) {
        return kValidEventsV010;
      }
      if (v->second == 33) {
        return kValidEventsCrio133;
      }
    }
  }
  return kValidEventsV02;
}

Result<Bytes> StubImpl::onConfigure(std::span<const std::byte> in) {
  auto req = codec::decodeConfigureRequest(in);
  if (!req) {
    return std::move(req).error();
  }
  const EventMask handled = handledEvents();
  const EventMask valid = validEventMaskImpl(*req);
  EventMask mask = 0;
  if (h_.configure != nullptr) {
    auto m = h_.configure->configure(*req);
    if (!m) {
      countHandlerError();
      return std::move(m).error().wrap("plugin Configure");
    }
    mask = *m;
    if ((mask & ~handled) != 0) {
      return COLOD_ERR(EINVAL, "plugin subscribes to events it does not handle: mask 0x", std::hex,
                       mask, " handled 0x", handled);
    }
  }
  // The registry needs its events whatever the plugin asked for.
  mask = (mask == 0 ? handled : mask) | kRegistryEvents |
         (options_.report_ownership ? eventBit(Event::ValidateContainerAdjustment) : 0);
  // Bits the runtime does not know make it refuse the plugin (brief §3.2): keep only valid ones.
  mask &= valid;
  {
    std::lock_guard lock(mu_);
    stats_.mask = mask;
    stats_.runtime_name = req->runtime_name;
    stats_.runtime_version = req->runtime_version;
    stats_.nri_version = req->nri_version;
  }
  return codec::encodeConfigureResponse(mask);
}

Result<Bytes> StubImpl::onSynchronize(Session& s, std::span<const std::byte> in) {
  // args/env are the bulk of a container that colod never reads (the registry drops them).
  auto req = codec::decodeSynchronizeRequest(in, {.args_env = false});
  if (!req) {
    return std::move(req).error();
  }
  auto& acc = s.pending_sync;
  if (acc.pods.empty() && acc.containers.empty()) {
    acc.pods = std::move(req->pods);
    acc.containers = std::move(req->containers);
  } else {
    std::move(req->pods.begin(), req->pods.end(), std::back_inserter(acc.pods));
    std::move(req->containers.begin(), req->containers.end(), std::back_inserter(acc.containers));
  }
  // Bound what a runtime can make us accumulate across chunks.
  if (acc.pods.size() > 2 * options_.registry.max_pods ||
      acc.containers.size() > 2 * options_.registry.max_containers) {
    acc = {};
    return COLOD_ERR(E2BIG, "Synchronize carries more objects than the registry bounds allow");
  }
  if (req->more) {
    // Non-final chunk: echo more=true with no updates (brief §4.2).
    return codec::encodeSynchronizeResponse({}, true);
  }
  SynchronizeRequest all = std::move(acc);
  acc = {};
  std::vector<ContainerUpdate> updates;
  if (h_.synchronize != nullptr) {
    auto u = h_.synchronize->synchronize(all.pods, all.containers);
    if (!u) {
      countHandlerError();
      return std::move(u).error().wrap("plugin Synchronize");
    }
    updates = std::move(*u);
  }
  // The old content is freed after the reply went out (on_served), not inside the measured call.
  s.old_registry = registry_.replace(std::move(all.pods), std::move(all.containers));
  for (const auto& u : updates) {
    registry_.applyUpdate(u);
  }
  {
    std::lock_guard lock(mu_);
    ++stats_.syncs;
  }
  s.sync_final_replying = true;
  return codec::encodeSynchronizeResponse(updates, false);
}

Result<void> StubImpl::updateContainers(std::vector<ContainerUpdate> updates) {
  if (wire::TtrpcServer::onWorkerThread()) {
    return COLOD_ERR(EDEADLK,
                     "updateContainers() from inside an NRI handler would deadlock the runtime; "
                     "call it from another thread after the handler returned");
  }
  std::shared_ptr<Session> s;
  {
    std::lock_guard lock(mu_);
    s = session_;
  }
  {
    std::lock_guard lock(mu_);
    if (!s || !s->liveLocked()) {
      return COLOD_ERR(ENOTCONN, "not synchronized with the runtime");
    }
  }
  if (options_.report_ownership) {
    // Never fight another plugin over a field the runtime says it owns (brief §3.5).
    for (auto& u : updates) {
      for (const auto& c : owners_.stripOwnedByOthers(u, name_, label_)) {
        reportConflict(c);
      }
    }
  }
  auto reply = s->client->call(codec::kRuntimeService, "UpdateContainers",
                               codec::encodeUpdateContainers(updates), options_.update_timeout);
  {
    std::lock_guard lock(mu_);
    ++stats_.updates_sent;
  }
  if (!reply) {
    std::lock_guard lock(mu_);
    ++stats_.updates_failed;
    return std::move(reply).error().wrap("UpdateContainers");
  }
  if (!reply->status.ok()) {
    if (auto c = parseConflictMessage(reply->status.message, name_, label_)) {
      reportConflict(*c);
    }
    std::lock_guard lock(mu_);
    ++stats_.updates_failed;
    return COLOD_ERR(EREMOTEIO, "runtime: some container updates failed (code ", reply->status.code,
                     "): ", reply->status.message);
  }
  auto failed = codec::decodeUpdateContainersResponse(reply->payload);
  if (!failed) {
    // A reply we cannot read says nothing about what the runtime did: not a success.
    std::lock_guard lock(mu_);
    ++stats_.updates_failed;
    return COLOD_ERR(EBADMSG, "UpdateContainers reply does not decode (outcome unknown): ",
                     failed.error().message());
  }
  std::vector<std::string> failed_ids = std::move(*failed);
  for (const auto& u : updates) {
    if (std::find(failed_ids.begin(), failed_ids.end(), u.container_id) == failed_ids.end()) {
      registry_.applyUpdate(u);
    }
  }
  if (!failed_ids.empty()) {
    std::lock_guard lock(mu_);
    ++stats_.updates_failed;
    std::string ids;
    for (const auto& id : failed_ids) {
      ids += (ids.empty() ? "" : ",") + id;
    }
    return COLOD_ERR(EREMOTEIO, "runtime: updates failed for ", ids);
  }
  return ok();
}

}  // namespace stub_internal

EventMask validEventMask(const ConfigureRequest& req) {
  return stub_internal::validEventMaskImpl(req);
}

Result<std::unique_ptr<Stub>> Stub::create(Plugin& plugin, StubOptions options) {
  std::string name = options.plugin_name;
  std::string idx = options.plugin_idx;
  // Launched by the runtime (brief §1.4): its fd, and the name/idx it knows us by.
  int inherited_fd = options.connection_fd;
  if (inherited_fd < 0 && (options.use_environment || options.adopt_inherited_socket)) {
    if (std::string v = envOr("NRI_PLUGIN_SOCKET", true); !v.empty()) {
      auto r = std::from_chars(v.data(), v.data() + v.size(), inherited_fd);
      if (r.ec != std::errc() || r.ptr != v.data() + v.size() || inherited_fd < 0) {
        return COLOD_ERR(EINVAL, "NRI_PLUGIN_SOCKET='", v, "' is not an fd number");
      }
      if (std::string n = envOr("NRI_PLUGIN_NAME", true); !n.empty()) {
        name = n;
      }
      if (std::string i = envOr("NRI_PLUGIN_IDX", true); !i.empty()) {
        idx = i;
      }
    }
  }
  if (name.empty()) {
    name = envOr("NRI_PLUGIN_NAME", options.use_environment);
  }
  if (idx.empty()) {
    idx = envOr("NRI_PLUGIN_IDX", options.use_environment);
  }
  if ((name.empty() || idx.empty()) && !options.argv0.empty()) {
    std::string_view base = options.argv0;
    if (auto slash = base.rfind('/'); slash != std::string_view::npos) {
      base.remove_prefix(slash + 1);
    }
    // "NN-name": exactly two digits, then the first '-' (brief §1.4).
    if (base.size() > 3 && base[2] == '-' && validIdx(base.substr(0, 2))) {
      if (idx.empty()) {
        idx = std::string(base.substr(0, 2));
      }
      if (name.empty()) {
        name = std::string(base.substr(3));
      }
    }
  }
  if (!validName(name)) {
    return COLOD_ERR(EINVAL, "plugin name '", name, "' is empty or not [A-Za-z0-9_.+-]+");
  }
  if (!validIdx(idx)) {
    return COLOD_ERR(EINVAL, "plugin index '", idx, "' is not two digits");
  }
  return std::unique_ptr<Stub>(new stub_internal::StubImpl(
      plugin, std::move(options), std::move(name), std::move(idx), inherited_fd));
}

}  // namespace colod::nri
