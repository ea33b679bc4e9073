// SPDX-License-Identifier: Apache-2.0
#include "colod/daemon/actuator.h"

#include <algorithm>
#include <bit>
#include <cerrno>
#include <set>
#include <utility>

#include "colod/daemon/convert.h"

namespace colod::daemon {

namespace {

// Applies `wishes` to `state` against the registry's view (see Actuator::setOverlays).
// `creating` holds the containers colod is placing at creation: the runtime does not list them
// yet, their spec is what the runtime handed colod. With `consume`, a first commit marks the
// creation as taken (preview() works on copies and must not).
std::vector<std::string> applyWishes(ReconcilerState& state,
                                     const Wishes& wishes,
                                     const nri::RegistrySnapshot* snap,
                                     int64_t now,
                                     std::map<std::string, Actuator::Creation>& creating,
                                     bool consume) {
  std::vector<std::string> refused;
  for (const auto& [id, overlay] : state.overlays()) {
    if (wishes.count(id) == 0) {
      (void)state.setOverlay(id, "", {}, {}, "released", now);
    }
  }
  for (const auto& [id, w] : wishes) {
    const nri::Container* ctr = snap != nullptr ? snap->container(id) : nullptr;
    if (ctr == nullptr) {
      auto c = creating.find(id);
      if (c == creating.end()) {
        refused.push_back(id);  // the runtime does not know it (any more): nothing to change
        continue;
      }
      if (!state.setOverlay(id, w.name, w.overlay, c->second.spec, w.why, now)) {
        refused.push_back(id);
        continue;
      }
      if (!c->second.taken) {
        policy::Resources adjusted;
        for (Field f : kAllFields) {
          if (hasField(c->second.adjusted, f) && hasField(w.overlay, f)) {
            copyField(adjusted, w.overlay, f);
          }
        }
        state.adjustedAtCreation(id, adjusted, now);
        c->second.taken = consume;
      }
      continue;
    }
    if (!state.setOverlay(id, w.name, w.overlay, toPolicyResources(ctr->resources), w.why, now)) {
      refused.push_back(id);
    }
  }
  return refused;
}

std::set<std::string> pendingIds(const ReconcilerState& state) {
  std::set<std::string> out;
  for (const auto& e : state.entries()) {
    if (e.pending) {
      out.insert(e.id);
    }
  }
  return out;
}

// Slot i of a log2 microsecond histogram: [2^i, 2^(i+1)) µs, below 2 µs in slot 0, the last slot
// open-ended.
void recordLatency(UpdateLatency& h, int64_t ns) {
  const auto us = static_cast<uint64_t>(ns / 1000);
  const std::size_t slot =
      us < 2 ? 0 : std::min<std::size_t>(std::bit_width(us) - 1, h.slots.size() - 1);
  ++h.slots[slot];
  h.sum_seconds += static_cast<double>(ns) / 1e9;
}

}  // namespace

Wishes wishesFromRestrictions(const std::vector<policy::AppliedAction>& applied,
                              const std::function<std::string(const std::string& id)>& name_of) {
  Wishes wishes;
  for (const auto& a : applied) {
    auto& w = wishes[a.target_id];
    if (w.name.empty()) {
      w.name = name_of(a.target_id);
    }
    // Two restrictions may both cap the CFS quota (a cpuset move carries one, and the quota
    // rung): the tighter one is in force, whichever lever came last.
    const bool looser_quota = policy::quotaCpus(w.overlay) < policy::quotaCpus(a.applied_values);
    for (Field f : kAllFields) {
      if (!hasField(a.applied_values, f) ||
          (looser_quota && (f == Field::CpuQuota || f == Field::CpuPeriod))) {
        continue;
      }
      copyField(w.overlay, a.applied_values, f);
    }
    w.why += (w.why.empty() ? "" : "; ") + std::string(policy::leverName(a.lever)) + " rung " +
             std::to_string(a.rung + 1) + " for victim " + a.victim_id.substr(0, 12);
  }
  return wishes;
}

SendOutcome classifySendError(int errno_value) {
  switch (errno_value) {
    case 0:
      return SendOutcome::Applied;
    case ENOTCONN:
      return SendOutcome::NotConnected;
    case EREMOTEIO:
      return SendOutcome::Refused;
    default:
      // Reset, timeout, an undecodable reply: the runtime may or may not have applied it.
      return SendOutcome::Unknown;
  }
}

Actuator::Actuator(ActuatorOptions options)
    : options_(std::move(options)), state_(options_.reconciler) {}

Actuator::~Actuator() { stop(); }

int64_t Actuator::now() const {
  if (options_.now_ns) {
    return options_.now_ns();
  }
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

void Actuator::start() {
  std::lock_guard lk(mu_);
  if (thread_.joinable()) {
    return;
  }
  stop_ = false;
  thread_ = std::thread([this] { run(); });
}

void Actuator::stop() {
  {
    std::lock_guard lk(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  converged_cv_.notify_all();
  if (thread_.joinable()) {
    thread_.join();
  }
}

void Actuator::expectCreation(const std::string& id,
                              const policy::Resources& spec_handed,
                              const policy::Resources& adjusted) {
  std::lock_guard lk(mu_);
  const int64_t t = now();
  for (auto it = creating_.begin(); it != creating_.end();) {
    // Bounded: a creation the runtime never completed is forgotten after the grace period.
    it = t - it->second.since_ns >= options_.reconciler.creation_grace_ns ? creating_.erase(it)
                                                                          : std::next(it);
  }
  if (creating_.size() >= kMaxCreating) {
    creating_.erase(creating_.begin());
  }
  creating_[id] = Creation{.spec = spec_handed, .adjusted = adjusted, .since_ns = t};
}

void Actuator::forgetCreation(const std::string& id) {
  std::lock_guard lk(mu_);
  creating_.erase(id);
}

void Actuator::kick() {
  {
    std::lock_guard lk(mu_);
    kicked_ = true;
  }
  cv_.notify_all();
}

std::vector<ReconcileEntry> Actuator::preview(const Wishes& wishes) const {
  std::lock_guard lk(mu_);
  ReconcilerState copy = state_;
  auto creating = creating_;
  const auto snap = options_.registry != nullptr ? options_.registry->snapshot() : nullptr;
  (void)applyWishes(copy, wishes, snap.get(), now(), creating, false);
  return copy.entries();
}

Actuator::Committed Actuator::setOverlays(const Wishes& wishes) {
  Committed out;
  {
    std::lock_guard lk(mu_);
    const auto snap = options_.registry != nullptr ? options_.registry->snapshot() : nullptr;
    out.refused = applyWishes(state_, wishes, snap.get(), now(), creating_, true);
    out.version = state_.version();
    kicked_ = true;
  }
  cv_.notify_all();
  converged_cv_.notify_all();
  return out;
}

void Actuator::load(const std::vector<ReconcileEntry>& entries, bool keep_overlay) {
  {
    std::lock_guard lk(mu_);
    state_.load(entries, keep_overlay);
    seen_generation_ = UINT64_MAX;  // observe everything at the next pass
    kicked_ = true;
  }
  cv_.notify_all();
}

policy::Resources Actuator::adjustUpdate(const std::string& id,
                                         const nri::LinuxResources& requested) {
  policy::Resources adj;
  {
    std::lock_guard lk(mu_);
    adj = state_.adjustUpdate(id, toPolicyResources(requested), now());
    kicked_ = true;
  }
  cv_.notify_all();
  return adj;
}

bool Actuator::waitConverged(std::chrono::milliseconds timeout) {
  std::unique_lock lk(mu_);
  // An update still on its way counts as not converged: a release decided meanwhile found the
  // spec from before the send and nothing pending, and the update lands after (a clean stop that
  // returned then left the BE restricted).
  auto converged = [this] {
    const auto s = state_.stats(0);
    return s.pending == 0 && s.in_flight == 0;
  };
  return converged_cv_.wait_for(lk, timeout, [&] { return stop_ || converged(); }) && converged();
}

std::vector<ReconcileEntry> Actuator::entries() const {
  std::lock_guard lk(mu_);
  return state_.entries();
}

bool Actuator::tracks(const std::string& id) const {
  std::lock_guard lk(mu_);
  return state_.find(id) != nullptr;
}

policy::Resources Actuator::baseView(const std::string& id, const policy::Resources& spec) const {
  std::lock_guard lk(mu_);
  return state_.baseView(id, spec);
}

ReconcileStats Actuator::stats() const {
  std::lock_guard lk(mu_);
  return state_.stats(now());
}

UpdateLatency Actuator::updateLatency() const {
  std::lock_guard lk(mu_);
  return latency_;
}

uint64_t Actuator::version() const {
  std::lock_guard lk(mu_);
  return state_.version();
}

// Reads the runtime's view into the state (mu_ held). Only a synchronized view is the truth: a
// stale one (runtime away) must not make containers look gone.
void Actuator::observeLocked(int64_t t) {
  if (options_.registry == nullptr) {
    return;
  }
  const auto snap = options_.registry->snapshot();
  view_synchronized_ = snap->synchronized;
  if (!snap->synchronized) {
    return;
  }
  if (options_.session) {
    const uint64_t session = options_.session();
    if (session != seen_session_) {
      seen_session_ = session;
      state_.resetBackoff();  // a new session: pending work goes out at once
    }
  }
  if (snap->generation == seen_generation_) {
    return;
  }
  seen_generation_ = snap->generation;
  for (auto it = creating_.begin(); it != creating_.end();) {
    const bool listed = snap->container(it->first) != nullptr;
    it = listed || t - it->second.since_ns >= options_.reconciler.creation_grace_ns
             ? creating_.erase(it)
             : std::next(it);
  }
  for (const auto& e : state_.entries()) {
    const nri::Container* ctr = snap->container(e.id);
    if (ctr == nullptr && state_.awaitingCreation(e.id, t)) {
      continue;  // placed at creation; the runtime lists it once the creation completes
    }
    if (ctr == nullptr || ctr->state == nri::ContainerState::Stopped) {
      state_.containerGone(e.id);
    } else {
      state_.observeSpec(e.id, toPolicyResources(ctr->resources), t);
    }
  }
}

void Actuator::run() {
  std::unique_lock lk(mu_);
  while (!stop_) {
    const int64_t t = now();
    const std::set<std::string> before = pendingIds(state_);
    observeLocked(t);
    // Not while the runtime is away: the resync says what it holds, and the connection's change
    // kicks this loop (the 1 s poll otherwise).
    const auto batch = view_synchronized_ ? state_.plan(t) : std::vector<PlannedUpdate>{};
    std::vector<ReconcileNote> notes = state_.takeNotes();
    if (!batch.empty()) {
      std::vector<nri::ContainerUpdate> updates;
      updates.reserve(batch.size());
      for (const auto& p : batch) {
        updates.push_back({.container_id = p.id,
                           .resources = toLinuxResources(p.values, options_.reconciler.all_cpus)});
      }
      state_.beginSend(batch);
      lk.unlock();
      for (const auto& n : notes) {
        if (options_.on_note) {
          options_.on_note(n);
        }
      }
      notes.clear();
      const int64_t sent_at = now();
      const Result<void> r = options_.send(std::move(updates));
      const int64_t rtt = std::max<int64_t>(now() - sent_at, 0);
      if (options_.on_sent) {
        SentUpdate sent;
        sent.rtt_ns = rtt;
        sent.ok = r.has_value();
        for (const auto& p : batch) {
          sent.ids.push_back(p.id);
          sent.names.push_back(p.name);
        }
        if (!r) {
          sent.error = r.error().message();
        }
        options_.on_sent(sent);
      }
      lk.lock();
      if (r || r.error().errnoValue() == EREMOTEIO) {
        recordLatency(latency_, rtt);
      }
      state_.onSent(batch, r ? SendOutcome::Applied : classifySendError(r.error().errnoValue()),
                    r ? std::string() : r.error().message(), now());
      // The stub records a confirmed update in the registry: read it back before planning again.
      observeLocked(now());
    }
    std::vector<std::string> converged;
    const std::set<std::string> after = pendingIds(state_);
    for (const auto& id : before) {
      if (after.count(id) == 0) {
        converged.push_back(id);
      }
    }
    for (const auto& n : state_.takeNotes()) {
      notes.push_back(n);
    }
    if (!converged.empty() || after.empty()) {
      converged_cv_.notify_all();
    }
    if (!notes.empty() || !converged.empty()) {
      lk.unlock();
      for (const auto& n : notes) {
        if (options_.on_note) {
          options_.on_note(n);
        }
      }
      for (const auto& id : converged) {
        if (options_.on_converged) {
          options_.on_converged(id);
        }
      }
      lk.lock();
    }
    if (!batch.empty()) {
      continue;  // more may be due (a bounded batch, the next solo update)
    }
    // Sleep until the next backoff ends, a kick, or 1 s (the registry is polled at least that
    // often; connection changes and decisions kick).
    const int64_t due = view_synchronized_ ? state_.nextDueNs() : INT64_MAX;
    const int64_t now_ns = now();
    int64_t wait_ns = 1'000'000'000;
    if (due != INT64_MAX) {
      wait_ns = std::clamp<int64_t>(due - now_ns, 0, wait_ns);
    }
    if (wait_ns > 0 && !kicked_) {
      cv_.wait_for(lk, std::chrono::nanoseconds(wait_ns), [this] { return stop_ || kicked_; });
    }
    kicked_ = false;
  }
}

}  // namespace colod::daemon
