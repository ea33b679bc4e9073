// SPDX-License-Identifier: Apache-2.0
// The NRI plugin stub: the Go pkg/stub translated (style rule 34), plus reconnection and a
// registry.
//
// Usage:
//   class MyPlugin : public nri::Plugin, public nri::CreateContainerHandler { ... };
//   MyPlugin p;
//   auto stub = nri::Stub::create(p, {.plugin_name = "colod", .plugin_idx = "50"});
//   stub.value()->start();                      // background thread, reconnects forever
//   stub.value()->updateContainers({...});      // from the daemon's own thread
//
// Threading model:
// * Per connection, one mux reader thread (socket -> frames -> ttrpc reassembly; it completes
//   our client calls) and one handler thread (runs Plugin-service calls that invoke your
//   handlers, in arrival order: decode, registry update, your handler, reply). Calls that run no
//   plugin code (or all, with StubOptions::inline_handlers) are served on the reader thread
//   when nothing is queued, keeping arrival order. Handlers must return quickly: the runtime
//   disconnects a plugin that does not answer within its request timeout (2 s default).
// * run() (or the thread start() spawns) connects, registers, waits for the connection to end,
//   backs off and reconnects.
// * updateContainers() blocks its caller. It refuses to run on the handler thread (EDEADLK):
//   the runtime holds its NRI lock while it waits for our reply, so a synchronous update from a
//   handler deadlocks containerd (brief §4.8).
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "colod/base/result.h"
#include "colod/nri/ownership.h"
#include "colod/nri/registry.h"
#include "colod/nri/types.h"

namespace colod::nri {

// Every plugin derives from Plugin and from the handler interfaces of the events it wants. The
// stub discovers them with dynamic_cast and subscribes to exactly those events (plus the ones it
// needs for its registry).
class Plugin {
 public:
  virtual ~Plugin() = default;
};

class ConfigureHandler {
 public:
  virtual ~ConfigureHandler() = default;
  // Returns the event mask to subscribe to, or 0 for "derived from the implemented handlers".
  // A mask with bits for events the plugin does not handle is an error (as in the Go stub). An
  // error fails Configure (the runtime then closes the connection; the stub reconnects).
  virtual Result<EventMask> configure(const ConfigureRequest& req) = 0;
};
class SynchronizeHandler {
 public:
  virtual ~SynchronizeHandler() = default;
  // Called once per (possibly chunked) Synchronize with all chunks merged; the registry is rebuilt
  // from the same data right after it returns. Containers come without args and env (the bulk of
  // a container that colod never reads; events still carry them).
  virtual Result<std::vector<ContainerUpdate>> synchronize(const std::vector<PodSandbox>& pods,
                                                           const std::vector<Container>& ctrs) = 0;
};
class RunPodSandboxHandler {
 public:
  virtual ~RunPodSandboxHandler() = default;
  virtual Result<void> runPodSandbox(const PodSandbox& pod) = 0;
};
class StopPodSandboxHandler {
 public:
  virtual ~StopPodSandboxHandler() = default;
  virtual Result<void> stopPodSandbox(const PodSandbox& pod) = 0;
};
class RemovePodSandboxHandler {
 public:
  virtual ~RemovePodSandboxHandler() = default;
  virtual Result<void> removePodSandbox(const PodSandbox& pod) = 0;
};
class CreateContainerHandler {
 public:
  virtual ~CreateContainerHandler() = default;
  virtual Result<CreateContainerResult> createContainer(const PodSandbox& pod,
                                                        const Container& ctr) = 0;
};
class PostCreateContainerHandler {
 public:
  virtual ~PostCreateContainerHandler() = default;
  virtual Result<void> postCreateContainer(const PodSandbox& pod, const Container& ctr) = 0;
};
class StartContainerHandler {
 public:
  virtual ~StartContainerHandler() = default;
  virtual Result<void> startContainer(const PodSandbox& pod, const Container& ctr) = 0;
};
class PostStartContainerHandler {
 public:
  virtual ~PostStartContainerHandler() = default;
  virtual Result<void> postStartContainer(const PodSandbox& pod, const Container& ctr) = 0;
};
class UpdateContainerHandler {
 public:
  virtual ~UpdateContainerHandler() = default;
  // `requested` = the new resources the runtime is about to apply.
  virtual Result<std::vector<ContainerUpdate>> updateContainer(const PodSandbox& pod,
                                                               const Container& ctr,
                                                               const LinuxResources& requested) = 0;
};
class PostUpdateContainerHandler {
 public:
  virtual ~PostUpdateContainerHandler() = default;
  virtual Result<void> postUpdateContainer(const PodSandbox& pod, const Container& ctr) = 0;
};
class StopContainerHandler {
 public:
  virtual ~StopContainerHandler() = default;
  virtual Result<std::vector<ContainerUpdate>> stopContainer(const PodSandbox& pod,
                                                             const Container& ctr) = 0;
};
class RemoveContainerHandler {
 public:
  virtual ~RemoveContainerHandler() = default;
  virtual Result<void> removeContainer(const PodSandbox& pod, const Container& ctr) = 0;
};

enum class ConnectionState {
  Connecting,     // dialing / adopting the fd
  Connected,      // trunk up, RegisterPlugin sent
  Synchronized,   // Synchronize answered: events flow, updateContainers() allowed
  Disconnected,   // trunk lost (error says why); a reconnect follows unless stopped
  Stopped,        // stop() or a non-reconnectable loss; run() returns
};

struct ConnectionEvent {
  ConnectionState state = ConnectionState::Connecting;
  uint64_t connects = 0;    // successful connections so far
  uint64_t reconnects = 0;  // connections after the first
  std::optional<Error> error{};
};

struct BackoffOptions {
  std::chrono::milliseconds initial{100};
  std::chrono::milliseconds max{5000};
  double multiplier = 2.0;
  double jitter = 0.2;  // each delay is scaled by a random factor in [1-jitter, 1+jitter]
};

struct StubOptions {
  // Socket to dial; "" = /var/run/nri/nri.sock. Ignored when an fd is used.
  std::string socket_path{};
  // "" = NRI_PLUGIN_NAME, else the "name" of an argv0 basename "NN-name".
  std::string plugin_name{};
  // "" = NRI_PLUGIN_IDX, else the "NN" of argv0.
  std::string plugin_idx{};
  std::string argv0{};
  // >= 0: an already connected trunk (taken over; closed by the stub). Beats NRI_PLUGIN_SOCKET.
  // A plugin on an inherited fd cannot reconnect: run() returns when the trunk ends.
  int connection_fd = -1;
  // Read NRI_PLUGIN_SOCKET / NRI_PLUGIN_NAME / NRI_PLUGIN_IDX (off in hermetic tests).
  bool use_environment = true;
  // A pre-installed plugin (brief §1.4): when the runtime started us, NRI_PLUGIN_SOCKET names the
  // inherited fd. With this on (default) that fd is used even if use_environment is off, and
  // NRI_PLUGIN_NAME / NRI_PLUGIN_IDX replace plugin_name / plugin_idx: the runtime ignores what a
  // launched plugin registers as and knows it by its file name, so owners and conflicts name us
  // that way. Without NRI_PLUGIN_SOCKET in the environment nothing changes.
  bool adopt_inherited_socket = true;
  bool reconnect = true;
  BackoffOptions backoff{};
  // Deadline of our RegisterPlugin call (sent as timeout_nano, as the Go stub does).
  std::chrono::milliseconds registration_timeout{5000};
  // A connection that is not synchronized this long after RegisterPlugin is dropped and redialed.
  std::chrono::milliseconds handshake_timeout{30000};
  // Client-side bound on updateContainers() (the Go stub has none; we never hang).
  std::chrono::milliseconds update_timeout{10000};
  // Largest ttrpc message accepted from the runtime (> this: drained, RESOURCE_EXHAUSTED).
  uint32_t max_message = 4U << 20;
  RegistryOptions registry{};
  // Run the plugin's handlers on the mux reader thread (no thread hand-off per call) when no
  // other call is queued. Only for handlers that are fast and never block: while one runs, no
  // other message of the trunk is read. Calls that run no plugin code are always served inline.
  bool inline_handlers = false;
  // Connection state changes (metrics). Runs on stub threads; must not call back into the stub.
  std::function<void(const ConnectionEvent&)> on_connection{};
  // Field ownership (ownership.h). With report_ownership on, a v0.10+ runtime makes us a validator
  // (event 14; the stub accepts every adjustment) so it reports the owners of every field of each
  // container created; they are kept until the container is removed (fieldOwner()), passed to
  // on_owners, and updateContainers() leaves out fields another plugin owns, reporting each via
  // on_conflict (source "owned") instead of fighting over it. Older runtimes report no owners.
  // Conflict errors the runtime returns to us are parsed and reported too (source "runtime").
  // Both callbacks run on stub threads and must not call back into the stub.
  bool report_ownership = false;
  std::function<void(const ContainerOwners&)> on_owners{};
  std::function<void(const OwnershipConflict&)> on_conflict{};
  // Per served runtime call: method, status code, first request byte -> last reply byte.
  std::function<void(std::string_view method, int32_t code, std::chrono::nanoseconds took)> on_call{};
};

struct StubStats {
  uint64_t connects = 0;
  uint64_t reconnects = 0;
  uint64_t syncs = 0;
  uint64_t events = 0;
  uint64_t handler_errors = 0;
  uint64_t updates_sent = 0;
  uint64_t updates_failed = 0;
  uint64_t ownership_conflicts = 0;  // reported through on_conflict
  bool connected = false;
  bool synchronized = false;
  EventMask mask = 0;  // what the last Configure subscribed to
  std::string runtime_name{};
  std::string runtime_version{};
  std::string nri_version{};
};

class Stub {
 public:
  // Resolves options (environment, argv0) and discovers the plugin's handlers. Errors (EINVAL):
  // no usable name/idx, an idx that is not two digits, a name outside [A-Za-z0-9_.+-].
  // `plugin` is borrowed and must outlive the stub.
  static Result<std::unique_ptr<Stub>> create(Plugin& plugin, StubOptions options);
  virtual ~Stub() = default;

  // Connects and serves until stop() (returns ok) or, when reconnecting is impossible/disabled,
  // until the connection is lost (returns its error). Call at most once at a time.
  virtual Result<void> run() = 0;
  // run() on a background thread owned by the stub. EALREADY if already running.
  virtual Result<void> start() = 0;
  // Stops serving and joins the background thread. Thread-safe, idempotent; not from a handler.
  virtual void stop() = 0;
  // Blocks until synchronized or timeout; false on timeout.
  virtual bool waitSynchronized(std::chrono::milliseconds timeout) = 0;

  // Sends an unsolicited UpdateContainers and waits for the runtime's answer.
  // Errors: EDEADLK if called on the handler thread; ENOTCONN before Synchronize completed or
  // after the connection was lost; ETIMEDOUT after update_timeout; EREMOTEIO when the runtime
  // answered with an error status — some updates failed, the runtime does not say which (brief
  // §4.8); the message carries the runtime's text. On success the registry records the update.
  virtual Result<void> updateContainers(std::vector<ContainerUpdate> updates) = 0;

  [[nodiscard]] virtual const Registry& registry() const = 0;
  [[nodiscard]] virtual StubStats stats() const = 0;
  [[nodiscard]] virtual const std::string& pluginName() const = 0;
  [[nodiscard]] virtual const std::string& pluginIdx() const = 0;
  // Events the stub handles for this plugin (registry needs + implemented handlers).
  [[nodiscard]] virtual EventMask handledEvents() const = 0;
  // The plugin ("NN-name") the runtime reported as owner of a container's field (report_ownership,
  // v0.10+); nullopt when unknown or unset.
  [[nodiscard]] virtual std::optional<std::string> fieldOwner(std::string_view container_id,
                                                              Field field) const = 0;
  // True when the runtime started us on an inherited fd (NRI_PLUGIN_SOCKET or connection_fd).
  [[nodiscard]] virtual bool launched() const = 0;
};

// The mask the runtime behind `req` accepts: NRI_version >= v0.10 (or a runtime version known to
// ship it, brief §5) -> 0x3FFF, CRI-O 1.33 -> 0x1FFF, else 0x7FF.
EventMask validEventMask(const ConfigureRequest& req);

// Events the stub always subscribes to for its registry: pod run/stop/remove, post-create,
// start, post-start (pid), post-update, stop and remove container (0x777).
inline constexpr EventMask kRegistryEvents =
    eventBit(Event::RunPodSandbox) | eventBit(Event::StopPodSandbox) |
    eventBit(Event::RemovePodSandbox) | eventBit(Event::PostCreateContainer) |
    eventBit(Event::StartContainer) | eventBit(Event::PostStartContainer) |
    eventBit(Event::PostUpdateContainer) |
    eventBit(Event::StopContainer) | eventBit(Event::RemoveContainer);

}  // namespace colod::nri
