// SPDX-License-Identifier: Apache-2.0
// Detection: victim intervals (p99 against the threshold, the wait signal, PSI, reclaim
// stall), the K of N window, the quiet baseline, and the episodes it starts.
#include <algorithm>
#include <cmath>
#include <sstream>

#include "colod/policy/tier.h"
#include "engine_state.h"

namespace colod::policy {

// --- detection -------------------------------------------------------------------------
void EngineState::updateRate(Tracked& t, const ContainerSample* s, int64_t interval_ns) const {
  if (interval_ns <= 0) {
    return;
  }
  auto drop_oldest = [&t] {
    const Tracked::RateRound& old = t.rate_rounds[t.rate_first];
    t.rate_span_ns -= old.span_ns;
    t.rate_oncpu_ns -= old.oncpu_ns;
    t.rate_wait_ns -= old.wait_ns;
    t.rate_first = (t.rate_first + 1) % kRateRounds;
    --t.rate_count;
  };
  if (t.rate_count == kRateRounds) {  // more rounds in a tick than the ring holds
    drop_oldest();
  }
  const uint64_t oncpu = s != nullptr ? s->oncpu_ns : 0;
  const uint64_t wait = s != nullptr ? s->runq_wait_ns : 0;
  t.rate_rounds[(t.rate_first + t.rate_count) % kRateRounds] = {interval_ns, oncpu, wait};
  ++t.rate_count;
  t.rate_span_ns += interval_ns;
  t.rate_oncpu_ns += oncpu;
  t.rate_wait_ns += wait;
  // The newest rounds that span a tick: older ones go once the rest covers it.
  while (t.rate_count > 1 && t.rate_span_ns - t.rate_rounds[t.rate_first].span_ns >= tick_ns_) {
    drop_oldest();
  }
  const double cpus = t.cpus.empty() ? nodeCpus() : static_cast<double>(t.cpus.size());
  t.rate_cpus =
      std::min(cpus, static_cast<double>(t.rate_oncpu_ns) / static_cast<double>(t.rate_span_ns));
  t.rate_waiting = static_cast<double>(t.rate_wait_ns) / static_cast<double>(t.rate_span_ns);
}

void EngineState::observe(Tracked& t, const ContainerSample* s, int64_t interval_ns) {
  updateRate(t, s, interval_ns);
  t.sample = s;
  t.sampled = s != nullptr;
  t.cpu_hit = false;
  t.mem_hit = false;
  if (s == nullptr) {
    return;
  }
  // Memory growth for every container (BE ranking for memory victims).
  t.memory_growth = 0;
  if (s->memory_bytes) {
    if (t.last_memory && *s->memory_bytes > *t.last_memory) {
      t.memory_growth = *s->memory_bytes - *t.last_memory;
    }
    t.last_memory = s->memory_bytes;
  }
  if (!isVictimTier(t.tier) || t.info.exclusive_cpus) {
    return;
  }
  const Thresholds& th = t.thresholds;
  uint64_t threshold = th.runq_p99_us;
  if (t.has_baseline) {
    const double rel =
        std::max(t.baseline, static_cast<double>(th.baseline_floor_us)) * th.baseline_factor;
    threshold = std::min(threshold, static_cast<uint64_t>(rel));
  }
  t.threshold = threshold;
  t.p99 = s->runq_p99_us;
  const bool enough = s->runq_count >= config_.detection.min_samples;
  bool hit = enough && s->runq_p99_us > threshold;
  t.p99_hit = hit;
  // Wait signal: total run-queue wait, else PSI cpu some total (the share of time at least one
  // of its tasks waited: a lower bound of the wait load). Works for always-runnable victims.
  t.wait_load = 0;
  t.wait_share = 0;
  t.queue_depth = 0;
  t.severe = false;
  if (interval_ns > 0) {
    double wait_ns = static_cast<double>(s->runq_wait_ns);
    if (wait_ns == 0 && s->psi_cpu_some) {
      wait_ns = static_cast<double>(s->psi_cpu_some->total_delta_us) * 1000.0;
    }
    t.wait_load = wait_ns / static_cast<double>(interval_ns);
    t.queue_depth = wait_ns / static_cast<double>(std::max(interval_ns, kDepthSpanNs));
    const double runnable = wait_ns + static_cast<double>(s->oncpu_ns);
    t.wait_share = runnable > 0 ? wait_ns / runnable : 0.0;
  }
  const auto& det = config_.detection;
  if (det.wait_share > 0 && t.wait_load > 0 && t.wait_load >= det.wait_load_min &&
      t.wait_share >= det.wait_share) {
    hit = true;
    t.severe = det.severe_wait_load > 0 && t.queue_depth >= det.severe_wait_load;
  }
  if (th.psi_cpu_some_avg10 > 0 && s->psi_cpu_some &&
      s->psi_cpu_some->avg10 > th.psi_cpu_some_avg10) {
    hit = true;
  }
  bool mem_hit = false;
  if (th.reclaim_stall_us_per_s > 0 && interval_ns > 0) {
    const double per_s = static_cast<double>(s->reclaim_stall_ns) / 1000.0 /
                         (static_cast<double>(interval_ns) / 1e9);
    mem_hit = per_s > static_cast<double>(th.reclaim_stall_us_per_s);
  }
  t.cpu_hit = hit;
  t.mem_hit = mem_hit;
  // Window update. A round on a wakeup between ticks records a hit (the event path: a second
  // hit 20 ms after the first completes K of N) and nothing else: its few milliseconds with too
  // few requests to judge are no evidence of quiet. Recorded, another LS's wakeups (four a tick)
  // pushed a victim's tick hits out of its window between two ticks, and it was never protected.
  const size_t n = t.cpu_ring.size();
  if (n > 0 && (!event_round_ || hit || mem_hit)) {
    t.cpu_hits -= t.cpu_ring[t.ring_pos];
    t.mem_hits -= t.mem_ring[t.ring_pos];
    t.cpu_ring[t.ring_pos] = hit ? 1 : 0;
    t.wait_ring[t.ring_pos] = t.wait_load;
    t.mem_ring[t.ring_pos] = mem_hit ? 1 : 0;
    t.cpu_hits += hit ? 1 : 0;
    t.mem_hits += mem_hit ? 1 : 0;
    t.ring_pos = (t.ring_pos + 1) % n;
  }
  // Quiet is time: counted in timer ticks (quiet_intervals are intervals). A round on a wakeup
  // between ticks that is a hit ends the streak, one that is not adds nothing: counted per
  // round, a loaded host's wakeup rounds made a placement's "quiet for 20 intervals" 0.37 s
  // (the idle-hold fault test under stress-ng, session 48), and every relax came that early.
  t.quiet_streak = hit ? 0 : t.quiet_streak + (event_round_ ? 0 : 1);
  t.mem_quiet_streak = mem_hit ? 0 : t.mem_quiet_streak + (event_round_ ? 0 : 1);
  if (!hit && enough) {
    // Quiet interval: it feeds the victim's own baseline.
    const double a = config_.detection.baseline_alpha;
    const auto p = static_cast<double>(s->runq_p99_us);
    t.baseline = t.has_baseline ? (1.0 - a) * t.baseline + a * p : p;
    t.has_baseline = true;
  }
  if (hit) {
    ++stats_.victim_intervals;
  }
}

double EngineState::meanWindowWait(const Tracked& v) {
  if (v.wait_ring.empty()) {
    return 0;
  }
  double sum = 0;
  for (double w : v.wait_ring) {
    sum += w;
  }
  return sum / static_cast<double>(v.wait_ring.size());
}

// Mean wait load over the detection window, or this round's if higher: the victim's level
// before an action.
double EngineState::windowWait(const Tracked& v) {
  return std::max(v.wait_load, meanWindowWait(v));
}

std::string EngineState::cpuRule(const Tracked& v, bool memory) {
  if (memory) {
    return "reclaim_stall_over_threshold";
  }
  return v.p99_hit || v.wait_load == 0 ? "runq_p99_over_threshold" : "runq_wait_over_threshold";
}

void EngineState::startEpisodes(std::vector<Decision>& out, std::vector<Finding>& findings) {
  for (Tracked* vp : victims_) {  // sampled, protected, not on exclusive CPUs
    Tracked& v = *vp;
    const std::string& id = v.info.id;
    for (bool memory : {false, true}) {
      const int hits = memory ? v.mem_hits : v.cpu_hits;
      const bool hit = memory ? v.mem_hit : v.cpu_hit;
      // A severe round (the LS's tasks a whole task deep in the run queue, on the wait signal)
      // is enough alone: the K-of-N hits guard against a noisy p99, and a second hit costs an
      // event round to a tick of reaction (colocation busy).
      const bool severe = !memory && v.severe;
      if (!hit || (hits < config_.detection.hit_intervals && !severe)) {
        continue;
      }
      if (ladder(memory).empty()) {
        continue;
      }
      const std::string key = episodeKey(id, memory);
      if (episodes_.count(key) != 0) {
        continue;
      }
      if (!budget()) {
        ++stats_.rate_limited;
        continue;
      }
      Episode ep;
      ep.victim_id = id;
      ep.memory = memory;
      ep.engaged_p99 = v.p99;
      // Hurt again soon after a relax: wait longer before the next relax (anti-flapping).
      if (ticks_ - v.last_relax_tick <= 2 * config_.actions.quiet_intervals * v.relax_backoff) {
        v.relax_backoff = std::min(v.relax_backoff * 2, kMaxRelaxBackoff);
        v.rehurt_cpus = std::max(cpusUsed(v), v.last_cpus);
        if (!memory && v.effective_rung >= 0 &&
            v.effective_rung < static_cast<int>(ladder(false).size())) {
          ep.next_rung = v.effective_rung;
        }
      }
      if (escalate(ep, key, v, DecisionKind::Engage, out, findings)) {
        episodes_.emplace(key, std::move(ep));
        ++stats_.episodes_started;
      }
    }
  }
}

}  // namespace colod::policy
