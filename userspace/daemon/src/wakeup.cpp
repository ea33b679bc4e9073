// SPDX-License-Identifier: Apache-2.0
// Event-driven detection: the pure parts (wakeup.h) and the loop's side of it.
#include "wakeup.h"

#include <algorithm>

#include "daemon_impl.h"

namespace colod::daemon {

bool EventRoundLimiter::onEvent(Clock::time_point now) {
  if (!last_ || now - *last_ >= min_gap_) {
    return true;
  }
  pending_ = true;
  return false;
}

void EventRoundLimiter::ran(Clock::time_point now) {
  last_ = now;
  pending_ = false;
}

bool EventRoundLimiter::due(Clock::time_point now) const {
  return pending_ && (!last_ || now - *last_ >= min_gap_);
}

std::optional<std::chrono::nanoseconds> EventRoundLimiter::untilDue(Clock::time_point now) const {
  if (!pending_) {
    return std::nullopt;
  }
  if (!last_ || now - *last_ >= min_gap_) {
    return std::chrono::nanoseconds(0);
  }
  return std::chrono::duration_cast<std::chrono::nanoseconds>(*last_ + min_gap_ - now);
}

std::vector<collect::WatchedCgroup> watchedCgroups(std::span<const WatchCandidate> known,
                                                   std::span<const policy::Tier> victim_tiers,
                                                   std::chrono::nanoseconds threshold) {
  std::vector<collect::WatchedCgroup> out;
  for (const auto& k : known) {
    if (k.cgroup_id == 0) {
      continue;
    }
    const bool victim = std::any_of(victim_tiers.begin(), victim_tiers.end(),
                                    [&](policy::Tier t) { return policy::tierName(t) == k.tier; });
    if (victim) {
      out.push_back(collect::WatchedCgroup{.id = k.cgroup_id, .threshold = threshold});
    }
  }
  std::sort(out.begin(), out.end(), [](const auto& a, const auto& b) { return a.id < b.id; });
  out.erase(std::unique(out.begin(), out.end()), out.end());
  return out;
}

std::vector<uint64_t> everyTickCgroups(std::span<const WatchCandidate> known,
                                       std::span<const policy::Tier> victim_tiers) {
  std::vector<uint64_t> out;
  for (const auto& k : known) {
    if (k.cgroup_id == 0) {
      continue;
    }
    const bool victim = std::any_of(victim_tiers.begin(), victim_tiers.end(),
                                    [&](policy::Tier t) { return policy::tierName(t) == k.tier; });
    if (victim || k.restricted) {
      out.push_back(k.cgroup_id);
    }
  }
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
  return out;
}

// ---------------------------------------------------------------------------------------------
// The loop's side (loop thread)

// After a timer tick: the protected set follows the known containers (new LS, resolved cgroups,
// tier changes, a reload's victim_tiers). The collector binds a cgroup once it has a slot.
// Issue #17: the cgroup files (cpu.stat, PSI) of the victims and of the containers colod
// restricts are read at every tick; the others every kFilesEveryNTicks-th only.
void Daemon::Impl::syncEveryTick() {
  auto conf = cfg();
  if (every_tick_gen_ == watch_inputs_gen_ && every_tick_cfg_ == conf) {
    return;
  }
  every_tick_gen_ = watch_inputs_gen_;
  every_tick_cfg_ = conf;
  std::vector<WatchCandidate> cands;
  cands.reserve(known_.size());
  for (const auto& [id, k] : known_) {
    cands.push_back(WatchCandidate{
        .cgroup_id = k.cgroup_id, .tier = k.tier, .restricted = committed_.contains(id)});
  }
  auto containers = everyTickCgroups(cands, conf->policy.detection.victim_tiers);
  if (containers != every_tick_) {
    every_tick_ = containers;
    collector_->setEveryTick(std::move(containers));
  }
}

void Daemon::Impl::syncWatched() {
  auto conf = cfg();
  if (watched_gen_ == watch_inputs_gen_ && watched_cfg_ == conf) {
    return;
  }
  std::vector<WatchCandidate> cands;
  cands.reserve(known_.size());
  for (const auto& [id, k] : known_) {
    cands.push_back(WatchCandidate{.cgroup_id = k.cgroup_id, .tier = k.tier});
  }
  const auto threshold = std::chrono::microseconds(conf->daemon.event_wait_threshold_us);
  auto next = threshold.count() == 0
                  ? std::vector<collect::WatchedCgroup>{}  // off: nothing wakes colod between ticks
                  : watchedCgroups(cands, conf->policy.detection.victim_tiers, threshold);
  if (next != watched_) {
    if (auto r = collector_->setWatched(next); !r) {
      // Retried at the next tick (watched_ and its generation are left as they were); a refused
      // map write is rare.
      if (watch_errors_++ % 100 == 0) {
        log()->warn("wakeup watch not updated ({} so far): {}", watch_errors_, r.error().message());
      }
      return;
    }
    log()->debug("wakeup watch: {} protected cgroups", next.size());
    watched_ = std::move(next);
  }
  watched_gen_ = watch_inputs_gen_;
  watched_cfg_ = std::move(conf);
}

namespace {

// Ticks of `interval` that span `duration` (rounded up, at least 1).
int64_t ticksSpanning(std::chrono::milliseconds duration, std::chrono::milliseconds interval) {
  const int64_t ms = std::max<int64_t>(interval.count(), 1);
  return std::max<int64_t>((duration.count() + ms - 1) / ms, 1);
}

}  // namespace

uint32_t pressureEveryNTicks(std::chrono::milliseconds interval, uint32_t files_every) {
  constexpr std::chrono::milliseconds kPsiPeriod{2000};  // the kernel's PSI_FREQ
  const auto ticks =
      static_cast<uint32_t>(std::min<int64_t>(ticksSpanning(kPsiPeriod, interval), 1000));
  return std::max(ticks, std::max<uint32_t>(files_every, 1));
}

uint32_t pairIdleTicks(std::chrono::milliseconds interval) {
  constexpr std::chrono::milliseconds kIdle{30'000};
  return static_cast<uint32_t>(ticksSpanning(kIdle, interval));
}

// The ring buffer's fd is readable: take its events and run a round now, or leave one pending
// for when the rate limit allows (run() sleeps no longer than that).
void Daemon::Impl::onWakeup() {
  auto events = collector_->consumeWakeups();
  if (!events) {
    if (watch_errors_++ % 100 == 0) {
      log()->warn("reading wakeup events failed: {}", events.error().message());
    }
    return;
  }
  if (events->empty()) {
    return;
  }
  event_wakeups_ += events->size();
  if (event_limiter_.onEvent(Clock::now())) {
    eventRound();
  }
}

void Daemon::Impl::eventRound() {
  event_limiter_.ran(Clock::now());
  ++event_rounds_;
  tick(RoundReason::Wakeup);
}

}  // namespace colod::daemon
