// SPDX-License-Identifier: Apache-2.0
// The actuator's bookkeeping, level-triggered (issue #14): per container, three facts --
//   base     the runtime's own value of every field colod touches (always the runtime's latest:
//            Synchronize, CreateContainer, the kubelet's UpdateContainer, PostUpdateContainer),
//   overlay  the fields colod wants changed (derived from the engine's restrictions), and
//   spec     what the runtime last reported or confirmed (what is applied now).
// The desired value of a field is the overlay where there is one, else the base. plan() lists
// the updates that move spec towards desired; the driver (actuator.h) sends them and reports
// back with onSent(). An original is never a stored copy taken once: a kubelet resize changes
// the base, so a release returns to the kubelet's value, not to an older one.
//
// Pure: no clock (times are passed in), no I/O, no threads. Not thread-safe: the actuator guards
// it with a mutex.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "colod/policy/engine.h"
#include "colod/policy/types.h"

namespace colod::daemon {

// The fields colod may overlay.
enum class Field : uint8_t { CpuShares, CpuQuota, CpuPeriod, CpusetCpus, CpusetMems, MemoryLimit };
inline constexpr Field kAllFields[] = {Field::CpuShares,  Field::CpuQuota,   Field::CpuPeriod,
                                       Field::CpusetCpus, Field::CpusetMems, Field::MemoryLimit};
std::string_view fieldName(Field f);  // "cpu_shares", "cpu_quota", ...

// Field access over policy::Resources.
bool hasField(const policy::Resources& r, Field f);
void copyField(policy::Resources& to, const policy::Resources& from, Field f);
void clearField(policy::Resources& r, Field f);
// The value as the runtime means it, in one canonical text ("max" for an unlimited quota or
// memory, the node's CPU list for an unset cpuset, ...), so spec and desired compare equal when
// they mean the same thing.
std::string canonicalField(const policy::Resources& r, Field f, std::string_view all_cpus);

// Whether the runtime's spec for a container being created already sets `f` (the kubelet or an
// earlier plugin did): an unset cpuset is empty, an unlimited quota or memory is absent or <= 0,
// a period counts only with a quota. Setting such a field again at creation could collide with
// another plugin, which fails the creation.
bool setAtCreation(const policy::Resources& handed, Field f);

// "a, b, c".
std::string joinText(const std::vector<std::string>& parts, std::string_view sep);

// Why a container is not converged (for metrics: colod_reconcile_failures_total{reason}).
enum class SendOutcome {
  Applied,       // the runtime answered success
  Refused,       // the runtime answered an error status (it does not say which update failed)
  Unknown,       // reset, timeout or an undecodable reply mid-call: re-verified, then resent
  NotConnected,  // no synchronized runtime: waits for the resync, no attempt counted
};
std::string_view outcomeName(SendOutcome o);

struct ReconcilerOptions {
  std::string all_cpus;  // the node's CPUs, kernel list format (an unset cpuset means these)
  uint32_t max_batch = 64;
  int64_t backoff_initial_ns = 100'000'000;  // 100 ms
  int64_t backoff_max_ns = 5'000'000'000;    // 5 s: retried forever, never given up
  std::size_t max_containers = 65536;        // bound on tracked containers
  // How long a container colod placed at creation may stay absent from the runtime's list
  // before it is taken as never created (its creation failed after colod's reply). The engine
  // forgets such a container at the same age (policy::kCreationGraceNs).
  int64_t creation_grace_ns = policy::kCreationGraceNs;
};

// One container's state, for the journal, explain and tests.
struct ReconcileEntry {
  std::string id;
  std::string name;           // namespace/pod/container, for people
  policy::Resources base;     // tracked fields: the runtime's own values (unset = unset)
  policy::Resources overlay;  // colod's wish; empty = release everything tracked
  policy::Resources spec;     // the runtime's current values of the tracked fields
  std::string why;            // the reason of the overlay, one line
  // Values colod has sent, per field (canonical text, newest last, bounded): a resync or a
  // restart must recognise them as colod's own, never take them for the runtime's. Journaled.
  std::map<std::string, std::vector<std::string>> sent;
  bool pending = false;  // desired != spec
  int64_t pending_since_ns = 0;
  uint32_t attempts = 0;  // failed attempts since the last success
  std::string last_error;
  friend bool operator==(const ReconcileEntry&, const ReconcileEntry&) = default;
};

// An update to send: the desired values of the fields that differ (quota travels with its period).
struct PlannedUpdate {
  std::string id;
  std::string name;
  policy::Resources values;
  friend bool operator==(const PlannedUpdate&, const PlannedUpdate&) = default;
};

// Something a person should read in the log (an external change taken as the new base, a
// container gone while colod held something on it).
struct ReconcileNote {
  std::string id;
  std::string name;
  std::string text;
};

struct ReconcileStats {
  uint64_t tracked = 0;
  uint64_t pending = 0;
  uint64_t in_flight = 0;  // containers whose update is on its way (the outcome is not known)
  int64_t oldest_pending_ns = 0;             // age of the oldest pending container (0 = none)
  uint64_t sends = 0;                        // UpdateContainers calls made
  uint64_t updates_applied = 0;              // container updates the runtime confirmed
  std::map<std::string, uint64_t> failures;  // by reason: refused, unknown, not_connected
  uint64_t external_changes = 0;  // base changes by someone else (kubelet, another agent)
  uint64_t dropped_full = 0;      // overlays refused because max_containers was reached
};

class ReconcilerState {
 public:
  explicit ReconcilerState(ReconcilerOptions options);

  // --- the runtime's truth --------------------------------------------------------------
  // The runtime's current values of a container (any report: resync, event, our confirmed
  // update). For a tracked field, a value that is neither the base nor one colod sent is someone
  // else's change: it becomes the base (noted).
  void observeSpec(const std::string& id, const policy::Resources& spec, int64_t now_ns);
  // A container the runtime no longer has: dropped (noted when colod held something on it).
  void containerGone(const std::string& id);
  // The kubelet (or anyone) asks the runtime to set `requested` (UpdateContainer): the requested
  // values of tracked fields become the base; returns colod's overlay fields to put in the reply
  // (empty when colod overlays none of the fields), so neither side's change is lost.
  policy::Resources adjustUpdate(const std::string& id,
                                 const policy::Resources& requested,
                                 int64_t now_ns);

  // --- colod's wish ----------------------------------------------------------------------
  // Sets the overlay of a container (an empty overlay releases it). `spec_now` is the runtime's
  // current view, used as the base of fields that start being tracked. Returns false (and counts
  // it) when the container is new and max_containers are tracked already.
  bool setOverlay(const std::string& id,
                  const std::string& name,
                  const policy::Resources& overlay,
                  const policy::Resources& spec_now,
                  const std::string& why,
                  int64_t now_ns);
  // Admission placement (issue #8): the container is being created and colod's reply to the
  // runtime's CreateContainer carries `adjusted` (a subset of the overlay's fields). The fields
  // are taken as colod's own sent values and as the spec the container will be created with;
  // `spec_handed` (what the runtime handed colod) is the base, the runtime's own values. The
  // container is not in the runtime's list yet: until it shows up (or `creation_grace_ns`
  // passes) it is not taken as gone. Call after setOverlay() for the same container.
  void adjustedAtCreation(const std::string& id, const policy::Resources& adjusted, int64_t now_ns);
  // Whether `id` is still waiting for its creation to show up (see adjustedAtCreation()).
  [[nodiscard]] bool awaitingCreation(std::string_view id, int64_t now_ns) const;

  // Overlays of every tracked container (for diffing against the engine's wish).
  [[nodiscard]] std::map<std::string, policy::Resources> overlays() const;

  // --- sending ---------------------------------------------------------------------------
  // Up to max_batch updates for pending containers whose backoff has passed, oldest first; a
  // container whose last batch failed is planned alone (the runtime does not say which failed).
  [[nodiscard]] std::vector<PlannedUpdate> plan(int64_t now_ns) const;
  // `batch` (the output of plan()) is about to be sent, outside the caller's lock: its
  // containers are kept until onSent() says how it went (which remembers the values).
  // A release decided while the call is in flight must not find the entry "converged" (its spec
  // still the pre-send value) and forget it: the update lands afterwards, and colod would leave
  // a restriction it no longer knows of (a vm e2e run in CI did exactly that).
  void beginSend(const std::vector<PlannedUpdate>& batch);
  // The result of sending `sent` (the output of plan()). Applied: the values are taken as the
  // spec. Other outcomes back off (doubling, capped) and are retried forever.
  void onSent(const std::vector<PlannedUpdate>& sent,
              SendOutcome outcome,
              const std::string& error,
              int64_t now_ns);
  // A fresh synchronized session: every backoff is cleared so pending work goes out at once.
  void resetBackoff();
  // When plan() will next have something to send (INT64_MAX = nothing pending).
  [[nodiscard]] int64_t nextDueNs() const;

  // --- reading -------------------------------------------------------------------------
  [[nodiscard]] std::vector<ReconcileEntry> entries() const;
  [[nodiscard]] const ReconcileEntry* find(std::string_view id) const;
  // `spec` with every tracked field replaced by its base: the container as the runtime would
  // have it without colod (what the engine must see, so its originals are the kubelet's).
  [[nodiscard]] policy::Resources baseView(const std::string& id,
                                           const policy::Resources& spec) const;
  [[nodiscard]] ReconcileStats stats(int64_t now_ns) const;
  // Bumps on every change the journal records (overlay, base, tracked set).
  [[nodiscard]] uint64_t version() const { return version_; }
  std::vector<ReconcileNote> takeNotes();

  // Restores state from the journal at start (before the first resync). With keep_overlay false
  // (reconcile: restore) the overlays are released; the values colod had set are remembered as
  // its own so the resync does not take them for someone else's change.
  void load(const std::vector<ReconcileEntry>& entries, bool keep_overlay);

 private:
  struct Tracked {
    ReconcileEntry e;  // e.sent: the canonical values colod has sent, by field name
    bool solo = false;
    int64_t next_try_ns = 0;
    bool spec_known = false;
    bool creating = false;  // adjusted at creation, not yet seen in the runtime's list
    int64_t created_at_ns = 0;
    bool in_flight = false;    // an update for it is being sent (beginSend .. onSent)
    bool unconfirmed = false;  // a refused or lost update may have landed: kept until observed
  };
  [[nodiscard]] policy::Resources desiredOf(const Tracked& t) const;
  [[nodiscard]] std::vector<Field> diffOf(const Tracked& t) const;
  void refresh(Tracked& t, int64_t now_ns);  // pending flag, drop when released + converged
  void remember(Tracked& t, Field f, const std::string& canon);
  void note(const Tracked& t, std::string text);
  void dropConverged();

  ReconcilerOptions options_;
  std::map<std::string, Tracked, std::less<>> tracked_;
  std::vector<ReconcileNote> notes_;
  ReconcileStats stats_;
  uint64_t version_ = 0;
};

}  // namespace colod::daemon
