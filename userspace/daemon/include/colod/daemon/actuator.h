// SPDX-License-Identifier: Apache-2.0
// The actuator: the only writer of container resources. It drives a ReconcilerState
// (reconciler.h) from one thread: whenever the desired state changes, the runtime reports
// something (a resync, an event, our own confirmed update) or a backoff ends, it compares the
// runtime's spec with what colod wants and sends UpdateContainers until they agree -- forever,
// with a bounded backoff, across runtime restarts. It never gives up on a restore.
//
// Threading: setOverlays()/preview()/load() from the daemon loop; adjustUpdate() from the NRI
// handler thread (it only reads and updates state under the mutex, never sends); the sender is
// the actuator's own thread. Everything else is safe from any thread.
#pragma once

#include <array>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "colod/base/result.h"
#include "colod/daemon/reconciler.h"
#include "colod/nri/registry.h"
#include "colod/nri/types.h"
#include "colod/policy/decision.h"

namespace colod::daemon {

// What colod wants on one container.
struct OverlayWish {
  std::string name;  // namespace/pod/container
  policy::Resources overlay;
  std::string why;
  friend bool operator==(const OverlayWish&, const OverlayWish&) = default;
};
using Wishes = std::map<std::string, OverlayWish>;

// The overlays the engine's restrictions call for: per target, the applied values of every
// lever it holds, with one line saying why. `name_of` gives a container's display name ("" when
// unknown). Pure.
Wishes wishesFromRestrictions(const std::vector<policy::AppliedAction>& applied,
                              const std::function<std::string(const std::string& id)>& name_of);

// One UpdateContainers call: for whom, and how long the runtime took to answer it (the send to
// the reply: the runtime's access to a CPU and its cgroup writes, then colod's wakeup on the
// reply). Reported on the actuator thread right after the call returned.
struct SentUpdate {
  std::vector<std::string> ids;
  std::vector<std::string> names;  // namespace/pod/container, "" when unknown (same order)
  int64_t rtt_ns = 0;
  bool ok = false;
  std::string error;  // why not, when !ok
};

// Round trips of the UpdateContainers calls the runtime answered (taken or refused) since
// start, microsecond log2 slots (slot i counts [2^i, 2^(i+1)) µs; the last slot everything
// above). A call that never reached it (not connected) or got no answer is not a round trip.
inline constexpr std::size_t kUpdateLatencySlots = 26;
struct UpdateLatency {
  std::array<uint64_t, kUpdateLatencySlots> slots{};
  double sum_seconds = 0;
};

struct ActuatorOptions {
  ReconcilerOptions reconciler;
  // Sends one UpdateContainers call (the stub's updateContainers: ENOTCONN when not
  // synchronized, EREMOTEIO when the runtime refused, anything else = outcome unknown).
  std::function<Result<void>(std::vector<nri::ContainerUpdate>)> send;
  // The runtime's view: every pass reads it (a resync or an event shows up here).
  const nri::Registry* registry = nullptr;
  // Increases with every new runtime session (the stub's connects): backoffs are cleared.
  std::function<uint64_t()> session;
  // Log lines for people (external changes, containers gone while held). Actuator thread.
  std::function<void(const ReconcileNote&)> on_note;
  // A container's desired state was confirmed by the runtime (desired == spec). Actuator thread.
  std::function<void(const std::string& id)> on_converged;
  // Every UpdateContainers call once it returned (SentUpdate). Actuator thread.
  std::function<void(const SentUpdate&)> on_sent;
  // Clock for tests.
  std::function<int64_t()> now_ns;
};

class Actuator {
 public:
  explicit Actuator(ActuatorOptions options);
  ~Actuator();
  Actuator(const Actuator&) = delete;
  Actuator& operator=(const Actuator&) = delete;
  Actuator(Actuator&&) = delete;
  Actuator& operator=(Actuator&&) = delete;

  void start();
  void stop();  // joins the thread; idempotent

  // The journal-to-be: every tracked container as it will be once `wishes` are committed
  // (containers absent from `wishes` are released). Nothing changes.
  [[nodiscard]] std::vector<ReconcileEntry> preview(const Wishes& wishes) const;
  // Commits colod's desired state (write the journal of preview() first: write-ahead).
  // Containers absent from `wishes` are released. Returns the ids refused (unknown to the
  // runtime, or past the bound) and the state's version right after the commit -- read under
  // the same lock, so a change the actuator thread makes a moment later is a newer version.
  struct Committed {
    std::vector<std::string> refused;
    uint64_t version = 0;
  };
  Committed setOverlays(const Wishes& wishes);
  // Journal state at start, before the first resync (see ReconcilerState::load).
  void load(const std::vector<ReconcileEntry>& entries, bool keep_overlay);

  // UpdateContainer from the runtime (the kubelet's resize): the requested values become the
  // base; returns colod's overlay to merge into the reply (empty: nothing to add).
  [[nodiscard]] policy::Resources adjustUpdate(const std::string& id,
                                               const nri::LinuxResources& requested);
  // Admission placement (issue #8). The container `id` is being created: the runtime handed
  // colod `spec_handed`, and colod's CreateContainer reply will set the fields of `adjusted`.
  // The next setOverlays() tracks it although the runtime does not list it yet (preview()
  // shows it too, so the journal holds it before the reply goes out). forgetCreation(): the
  // reply will not carry the adjustment after all (the journal could not be written).
  struct Creation {
    policy::Resources spec;
    policy::Resources adjusted;
    int64_t since_ns = 0;
    bool taken = false;  // setOverlays() has applied it
  };
  void expectCreation(const std::string& id,
                      const policy::Resources& spec_handed,
                      const policy::Resources& adjusted);
  void forgetCreation(const std::string& id);

  // Wakes the thread (a registry change, a new session).
  void kick();

  // Blocks until nothing is pending or on its way (true) or the timeout passed (false).
  bool waitConverged(std::chrono::milliseconds timeout);

  [[nodiscard]] std::vector<ReconcileEntry> entries() const;
  [[nodiscard]] bool tracks(const std::string& id) const;
  // `spec` with tracked fields replaced by the runtime's own values (what the engine sees).
  [[nodiscard]] policy::Resources baseView(const std::string& id,
                                           const policy::Resources& spec) const;
  [[nodiscard]] ReconcileStats stats() const;
  [[nodiscard]] uint64_t version() const;
  [[nodiscard]] UpdateLatency updateLatency() const;

 private:
  void run();
  // Reads the runtime's view into the state; sets view_synchronized_.
  void observeLocked(int64_t now);
  [[nodiscard]] int64_t now() const;

  ActuatorOptions options_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::condition_variable converged_cv_;
  ReconcilerState state_;
  static constexpr std::size_t kMaxCreating = 1024;
  std::map<std::string, Creation> creating_;  // containers being created with colod's placement
  UpdateLatency latency_;
  uint64_t seen_generation_ = UINT64_MAX;
  uint64_t seen_session_ = 0;
  // Whether the last view read was the runtime's synchronized one. Nothing is planned from any
  // other: a resync may show that a call whose reply was lost landed, or a kubelet resize made
  // while the runtime was away, and a value planned before it would undo either (a send planned
  // on the stale view went out the moment the new session was live: the actuator test's 1-in-60
  // flake, session 34).
  bool view_synchronized_ = true;
  bool kicked_ = false;
  bool stop_ = false;
  std::thread thread_;
};

// How a send result maps onto the reconciler's outcomes.
SendOutcome classifySendError(int errno_value);

}  // namespace colod::daemon
