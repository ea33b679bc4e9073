// SPDX-License-Identifier: Apache-2.0
// Event-driven detection (issue 15, item 2): the BPF side wakes the loop when a protected
// container's run-queue wait crosses a threshold within a short window (the collector's wakeup
// watch), and the loop runs an extra decision round then instead of waiting up to a tick. This
// file holds the pure parts: which cgroups are watched, and the rate limit of event rounds.
// The wiring is in daemon.cpp (epoll) and wakeup.cpp (Daemon::Impl::onWakeup, syncWatched).
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <span>
#include <string_view>
#include <vector>

#include "colod/collect/collector.h"
#include "colod/policy/tier.h"

namespace colod::daemon {

// Defaults. 3 ms of wait within 10 ms is a wait load of 0.3 over the window: above the
// engine's default wait_load_min (0.2), so a round run on the event sees a victim interval,
// and well above what an uncontended LS waits (µs per wakeup). 20 ms between event rounds
// bounds their cost at 50 extra rounds a second under sustained contention (a round is a
// snapshot + evaluate, ~1 ms with 100 containers), while the first round runs at once.
struct WakeupSettings {
  std::chrono::nanoseconds threshold{std::chrono::milliseconds(3)};
  std::chrono::nanoseconds window{std::chrono::milliseconds(10)};
  std::chrono::nanoseconds min_gap{std::chrono::milliseconds(20)};
};

// At most one event round per min_gap. An event inside the gap is not dropped: it leaves a
// round pending, due when the gap has passed (the loop sleeps no longer than untilDue()), and
// any number of events meanwhile make that one round. Pure: time is passed in.
class EventRoundLimiter {
 public:
  using Clock = std::chrono::steady_clock;
  explicit EventRoundLimiter(std::chrono::nanoseconds min_gap) : min_gap_(min_gap) {}

  // A wakeup arrived at `now`: true when a round may run now (the caller runs it and calls
  // ran()); false when one is pending (or already was).
  bool onEvent(Clock::time_point now);
  // An event round ran at `now`; nothing is pending any more.
  void ran(Clock::time_point now);
  // A pending round whose gap has passed.
  [[nodiscard]] bool due(Clock::time_point now) const;
  // How long until the pending round is due (zero if due now); nullopt when none is pending.
  [[nodiscard]] std::optional<std::chrono::nanoseconds> untilDue(Clock::time_point now) const;

 private:
  std::chrono::nanoseconds min_gap_;
  std::optional<Clock::time_point> last_;
  bool pending_ = false;
};

// A container the loop knows, as the watch needs it.
struct WatchCandidate {
  uint64_t cgroup_id = 0;   // 0: unresolved (not watched)
  std::string_view tier;    // policy::tierName of its tier
  bool restricted = false;  // colod holds an overlay on it (a restriction in force)
};

// The cgroups to watch: the resolved containers of a victim tier (detection.victim_tiers),
// each with `threshold`, sorted by id (so an unchanged set compares equal). Containers with
// exclusive CPUs are watched too (the engine skips them; they rarely wait, and a wasted event
// round is rate-limited).
[[nodiscard]] std::vector<collect::WatchedCgroup> watchedCgroups(
    std::span<const WatchCandidate> known,
    std::span<const policy::Tier> victim_tiers,
    std::chrono::nanoseconds threshold);

// The cgroups whose files (cpu.stat, PSI) the collector reads at every tick (issue 17); the
// others at every kFilesEveryNTicks-th. The engine reads files for victims only (their own
// throttling, the PSI fallback of their wait); a container colod restricts is named too, so
// the throttling its quota causes shows per tick in `coloctl top`. Everything else (BE
// without a restriction, system services, sandboxes) keeps correct cumulative counters at the
// slower cadence. Sorted, unique.
[[nodiscard]] std::vector<uint64_t> everyTickCgroups(std::span<const WatchCandidate> known,
                                                     std::span<const policy::Tier> victim_tiers);

// The cadence of the pressure files and CFS quotas in ticks of `interval`
// (CollectorOptions::pressure_every_n_ticks): the kernel recomputes the PSI averages every 2 s,
// so reading them more often tells nothing new (the total the engine also takes is a running
// count, divided by the span since its last read); never more often than the other files'
// `files_every`.
[[nodiscard]] uint32_t pressureEveryNTicks(std::chrono::milliseconds interval,
                                           uint32_t files_every);

// CollectorOptions::pair_idle_ticks in ticks of `interval`: a victim <- aggressor pair that
// has not moved for 30 s is deleted from its BPF map (re-created whole if it moves again), so
// long-lived containers do not fill the maps and leave no room for a new aggressor's pairs.
[[nodiscard]] uint32_t pairIdleTicks(std::chrono::milliseconds interval);

// Whether aggressors reported at round `reported` (0: never) still stand at round `now` for
// `coloctl top`: the pairs of a container not named every tick are read at every `every`-th
// round only (the collector's second pairs map), so they stand until the next such read.
[[nodiscard]] inline bool aggressorsCurrent(uint64_t reported, uint64_t now, uint32_t every) {
  return reported != 0 && now >= reported && now - reported < every;
}

}  // namespace colod::daemon
