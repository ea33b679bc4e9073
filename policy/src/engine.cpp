// SPDX-License-Identifier: Apache-2.0
// The decision engine. Time is counted in rounds (one evaluate() per interval); now_ns only
// stamps decisions. Every container map is an ordered std::map so iteration order, and so the
// output, depends only on the input (determinism).
#include "colod/policy/engine.h"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <map>
#include <set>
#include <sstream>
#include <unordered_map>

#include "colod/policy/tier.h"

namespace colod::policy {

namespace {

constexpr int64_t kNever = -1'000'000'000;
constexpr int kMaxRelaxBackoff = 8;
// A BE container counts as running when it used at least this share of one CPU in the interval.
constexpr double kRunningCpuFraction = 0.01;
// A restricted BE set saturates its allowance when it uses at least this share of it.
constexpr double kSaturatedFraction = 0.9;
// The LS demand "fits" its weighted share of the node when it is at most this share of it.
constexpr double kFitsShareFraction = 0.8;

// Per-container state. Bounded: one entry per registered container, fixed-size window.
struct Tracked {
  ContainerInfo info;
  Tier tier = Tier::Unknown;
  std::string tier_source;
  Thresholds thresholds;
  std::vector<int> cpus;  // parsed cpuset; empty = unknown / all
  // Detection window (ring of hit flags).
  std::vector<uint8_t> cpu_ring;
  std::vector<uint8_t> mem_ring;
  size_t ring_pos = 0;
  int cpu_hits = 0;
  int mem_hits = 0;
  double baseline = 0.0;
  bool has_baseline = false;
  int quiet_streak = 0;      // consecutive non-hit intervals (cpu)
  int mem_quiet_streak = 0;  // consecutive non-hit intervals (memory)
  // Latest interval.
  bool sampled = false;  // had a sample this round
  bool cpu_hit = false;
  bool mem_hit = false;
  uint64_t p99 = 0;
  uint64_t threshold = 0;
  bool p99_hit = false;   // the hit came from p99 (else from the wait signal or PSI)
  double wait_load = 0;   // average number of its tasks waiting this interval
  double wait_share = 0;  // wait / (wait + on-CPU) this interval
  std::vector<double> wait_ring;  // wait load of the last window_intervals intervals
  ContainerSample const* sample = nullptr;  // valid during evaluate() only
  uint64_t memory_growth = 0;
  std::optional<uint64_t> last_memory;
  // As a target.
  int64_t last_change_round = kNever;
  // Relax backoff (anti-flapping): grows when the victim is hurt again soon after a relax.
  int relax_backoff = 1;
  int64_t last_relax_round = kNever;
  // Ladder index of the last rung verified to help (cpu), -1 if none: when the victim is hurt
  // again soon after a relax, the next episode starts there instead of replaying rungs that
  // did not help.
  int effective_rung = -1;
  // Per lever: the values of our latest restriction and the original they replaced.
  std::map<Lever, Resources> last_applied;
  std::map<Lever, Resources> last_original;
  std::string last_explanation;
};

// One lever applied to one target, shared by the episodes (victims) that asked for it.
struct Restriction {
  Lever lever = Lever::CpuShares;
  int rung = 0;
  Resources applied;
  Resources original;
  std::set<std::string> owners;  // episode keys
};

struct Step {
  Lever lever = Lever::CpuShares;
  int rung = 0;
  std::vector<std::string> targets;
  std::vector<Antagonist> antagonists;
  // BE containers running when the step was applied and left alone (benign by the evidence):
  // only BE that starts running later joins the step (extendSteps).
  std::set<std::string> running_at_apply;
  bool running_known = false;  // false for a step seeded from the journal until its first round
};

enum class Phase { Verifying, Holding };

struct Episode {
  std::string victim_id;
  bool memory = false;
  std::vector<Step> steps;  // applied, in order
  int next_rung = 0;        // ladder index to try next
  Phase phase = Phase::Verifying;
  int64_t verify_until = 0;
  int verify_hits = 0;
  int verify_intervals = 0;
  uint64_t verify_p99_sum = 0;
  uint64_t start_p99 = 0;    // p99 when the current step was applied
  double start_wait = 0;     // victim wait load before the current step (window mean)
  double verify_wait_sum = 0;
  uint64_t engaged_p99 = 0;  // p99 when the episode began
  int64_t last_relax_round = kNever;
  int escalations = 0;
  bool exhausted = false;
  bool victim_gone = false;
  bool relax_held = false;  // the relax_held finding was given for the current hold
};

std::string episodeKey(std::string_view victim, bool memory) {
  return std::string(victim) + (memory ? "#mem" : "#cpu");
}

std::string displayName(const ContainerInfo& info) {
  if (info.pod_name.empty()) {
    return info.id;
  }
  return info.pod_namespace + "/" + info.pod_name + "/" + info.container_name;
}

Resources leverValues(const Resources& r, Lever lever) {
  Resources out;
  switch (lever) {
    case Lever::CpuShares:
      out.cpu_shares = r.cpu_shares;
      break;
    case Lever::Cpuset:
      out.cpuset_cpus = r.cpuset_cpus;
      break;
    case Lever::CpuQuota:
      out.cpu_quota = r.cpu_quota;
      out.cpu_period = r.cpu_period;
      break;
    case Lever::MemoryLimit:
      out.memory_limit = r.memory_limit;
      break;
  }
  return out;
}

// For restoring: an unknown original becomes the "unlimited"/default value of the lever, so a
// restore always carries a concrete value.
Resources restoreValues(const Resources& original, Lever lever, const std::vector<int>& node) {
  Resources out = original;
  switch (lever) {
    case Lever::CpuShares:
      if (!out.cpu_shares) {
        out.cpu_shares = 1024;
      }
      break;
    case Lever::Cpuset:
      if (!out.cpuset_cpus) {
        out.cpuset_cpus = formatCpuList(node);
      }
      break;
    case Lever::CpuQuota:
      if (!out.cpu_quota) {
        out.cpu_quota = -1;
      }
      if (!out.cpu_period) {
        out.cpu_period = 100'000;
      }
      break;
    case Lever::MemoryLimit:
      if (!out.memory_limit) {
        out.memory_limit = -1;
      }
      break;
  }
  return out;
}

std::string describeValues(const Resources& r, Lever lever) {
  std::ostringstream os;
  switch (lever) {
    case Lever::CpuShares:
      os << "cpu.shares " << (r.cpu_shares ? std::to_string(*r.cpu_shares) : "unset");
      break;
    case Lever::Cpuset:
      os << "cpuset " << (r.cpuset_cpus ? *r.cpuset_cpus : "unset");
      break;
    case Lever::CpuQuota:
      os << "CFS quota " << (r.cpu_quota ? std::to_string(*r.cpu_quota) : "unset") << "/"
         << (r.cpu_period ? std::to_string(*r.cpu_period) : "unset") << " µs";
      break;
    case Lever::MemoryLimit:
      os << "memory limit " << (r.memory_limit ? std::to_string(*r.memory_limit) : "unset");
      break;
  }
  return os.str();
}

}  // namespace

class EngineState {
 public:
  explicit EngineState(Config config) : config_(std::move(config)) {}

  Config config_;
  std::map<std::string, Tracked, std::less<>> tracked_;
  // Hash index over tracked_ (keys point into tracked_'s nodes, which are stable): the per-round
  // sample lookup is O(1). Iteration always uses the ordered map (determinism).
  std::unordered_map<std::string_view, Tracked*> index_;
  // Per round: total BE CPU time and the BE containers with the most CPU (ranking shortcut).
  uint64_t be_cpu_total_ = 0;
  std::vector<const Tracked*> be_top_cpu_;
  // (target id) -> lever -> restriction
  std::map<std::string, std::map<Lever, Restriction>, std::less<>> restrictions_;
  std::map<std::string, Episode, std::less<>> episodes_;
  std::vector<Finding> pending_findings_;
  EngineStats stats_;
  int64_t round_ = 0;
  uint64_t seq_ = 0;
  int64_t now_ns_ = 0;
  std::vector<int> node_cpus_;
  int changes_this_round_ = 0;
  double quota_budget_ = 0;  // aggregate BE quota budget in CPUs (0 = no quota rung in force)

  // --- registry --------------------------------------------------------------------------
  void upsert(ContainerInfo info) {
    auto [it, inserted] = tracked_.try_emplace(info.id);
    Tracked& t = it->second;
    if (inserted) {
      index_.emplace(std::string_view(it->first), &t);
    }
    TierResult tr = classifyTier(info);
    for (const auto& u : tr.unknown) {
      pending_findings_.push_back({info.id, "unknown_tier",
                                   "unknown value \"" + u.value + "\" of " + u.key + " (" +
                                       u.where + ") on " + displayName(info) + "; ignored"});
    }
    if (tr.tier == Tier::Unknown && inserted) {
      pending_findings_.push_back({info.id, "unclassified",
                                   displayName(info) +
                                       " has no tier (no annotation/label, cgroup parent \"" +
                                       info.cgroup_parent + "\"): never a victim or target"});
    }
    t.tier = tr.tier;
    t.tier_source = tr.source;
    std::vector<std::string> problems;
    t.thresholds = effectiveThresholds(config_, t.tier, info, &problems);
    for (auto& p : problems) {
      pending_findings_.push_back({info.id, "bad_annotation", std::move(p)});
    }
    t.cpus = info.cpuset;
    if (t.cpus.empty() && info.resources.cpuset_cpus) {
      auto parsed = parseCpuList(*info.resources.cpuset_cpus);
      if (parsed) {
        t.cpus = std::move(*parsed);
      } else {
        pending_findings_.push_back({info.id, "bad_cpuset", parsed.error().message()});
      }
    }
    std::sort(t.cpus.begin(), t.cpus.end());
    t.info = std::move(info);
    if (inserted) {
      resetWindow(t);
    }
    // A container that became untouchable loses its restrictions' tracking (we never touch it,
    // not even to restore: its owner decided for it).
    if (!touchable(t)) {
      dropTarget(t.info.id);
    }
  }

  void remove(std::string_view id) {
    dropTarget(id);
    for (auto& [key, ep] : episodes_) {
      if (ep.victim_id == id) {
        ep.victim_gone = true;
      }
    }
    if (auto it = tracked_.find(id); it != tracked_.end()) {
      index_.erase(std::string_view(it->first));
      tracked_.erase(it);
    }
  }

  void dropTarget(std::string_view id) {
    auto it = restrictions_.find(id);
    if (it == restrictions_.end()) {
      return;
    }
    restrictions_.erase(it);
    for (auto& [key, ep] : episodes_) {
      for (auto& step : ep.steps) {
        std::erase(step.targets, std::string(id));
      }
    }
    if (!anyQuota()) {
      quota_budget_ = 0;
    }
  }

  void resetWindow(Tracked& t) const {
    const auto n = static_cast<size_t>(config_.detection.window_intervals);
    t.cpu_ring.assign(n, 0);
    t.wait_ring.assign(n, 0.0);
    t.mem_ring.assign(n, 0);
    t.ring_pos = 0;
    t.cpu_hits = 0;
    t.mem_hits = 0;
  }

  [[nodiscard]] static bool touchable(const Tracked& t) {
    return t.tier == Tier::Be && !t.info.exclusive_cpus;
  }

  [[nodiscard]] bool isVictimTier(Tier tier) const {
    const auto& v = config_.detection.victim_tiers;
    return std::find(v.begin(), v.end(), tier) != v.end();
  }

  // --- detection -------------------------------------------------------------------------
  void observe(Tracked& t, const ContainerSample* s, int64_t interval_ns) {
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
    if (interval_ns > 0) {
      double wait_ns = static_cast<double>(s->runq_wait_ns);
      if (wait_ns == 0 && s->psi_cpu_some) {
        wait_ns = static_cast<double>(s->psi_cpu_some->total_delta_us) * 1000.0;
      }
      t.wait_load = wait_ns / static_cast<double>(interval_ns);
      const double runnable = wait_ns + static_cast<double>(s->oncpu_ns);
      t.wait_share = runnable > 0 ? wait_ns / runnable : 0.0;
    }
    const auto& det = config_.detection;
    if (det.wait_share > 0 && t.wait_load > 0 && t.wait_load >= det.wait_load_min &&
        t.wait_share >= det.wait_share) {
      hit = true;
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
    // Window update.
    const size_t n = t.cpu_ring.size();
    if (n > 0) {
      t.cpu_hits -= t.cpu_ring[t.ring_pos];
      t.mem_hits -= t.mem_ring[t.ring_pos];
      t.cpu_ring[t.ring_pos] = hit ? 1 : 0;
      t.wait_ring[t.ring_pos] = t.wait_load;
      t.mem_ring[t.ring_pos] = mem_hit ? 1 : 0;
      t.cpu_hits += hit ? 1 : 0;
      t.mem_hits += mem_hit ? 1 : 0;
      t.ring_pos = (t.ring_pos + 1) % n;
    }
    t.quiet_streak = hit ? 0 : t.quiet_streak + 1;
    t.mem_quiet_streak = mem_hit ? 0 : t.mem_quiet_streak + 1;
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

  // Ranks BE antagonists of a victim. Returns empty if the latency is self-inflicted (and adds a
  // finding saying why).
  std::vector<Antagonist> rank(const Tracked& victim, bool memory, std::vector<Finding>& findings) {
    std::vector<Antagonist> out;
    const ContainerSample* s = victim.sample;
    if (s == nullptr) {
      return out;
    }
    if (memory) {
      uint64_t total = 0;
      for (auto& [id, t] : tracked_) {
        if (touchable(t) && t.sampled && t.memory_growth > 0) {
          total += t.memory_growth;
        }
      }
      if (total == 0) {
        findings.push_back(
            {victim.info.id, "no_memory_antagonist",
             displayName(victim.info) + " stalls in reclaim but no BE container grew its memory"});
        return out;
      }
      for (auto& [id, t] : tracked_) {
        if (touchable(t) && t.sampled && t.memory_growth > 0) {
          Antagonist a;
          a.id = id;
          a.name = displayName(t.info);
          a.memory_growth_bytes = t.memory_growth;
          a.oncpu_ns = t.sample->oncpu_ns;
          a.score = static_cast<double>(t.memory_growth) / static_cast<double>(total);
          out.push_back(std::move(a));
        }
      }
    } else {
      const double interval = static_cast<double>(std::max<int64_t>(interval_ns_, 1));
      if (static_cast<double>(s->throttled_ns) >
          config_.detection.self_throttle_fraction * interval) {
        ++stats_.self_inflicted;
        findings.push_back({victim.info.id, "self_inflicted_throttling",
                            displayName(victim.info) +
                                " waits because its own CFS quota throttles it (" +
                                std::to_string(s->throttled_ns / 1000) + " µs throttled, " +
                                std::to_string(s->nr_throttled) +
                                " periods): raise its CPU limit; BE is not restricted"});
        return out;
      }
      uint64_t be_wait = 0;
      uint64_t other_wait = 0;
      struct Attributed {
        const Tracked* t;
        uint64_t count;
        uint64_t wait_ns;
      };
      // Few entries per victim: a sorted vector keeps this allocation-light and deterministic.
      std::vector<std::pair<std::string_view, Attributed>> by_aggressor;
      for (const Preemption& p : s->preempted_by) {
        auto it = index_.find(std::string_view(p.aggressor_id));
        if (it != index_.end() && touchable(*it->second) && it->second->sampled) {
          be_wait += p.wait_ns;
          auto jt = std::find_if(by_aggressor.begin(), by_aggressor.end(),
                                 [&](const auto& e) { return e.first == p.aggressor_id; });
          if (jt == by_aggressor.end()) {
            by_aggressor.push_back({it->first, Attributed{it->second, p.count, p.wait_ns}});
          } else {
            jt->second.count += p.count;
            jt->second.wait_ns += p.wait_ns;
          }
        } else {
          other_wait += p.wait_ns;
        }
      }
      const uint64_t total_wait = be_wait + other_wait;
      if (total_wait > 0 &&
          static_cast<double>(other_wait) >=
              config_.detection.self_wait_fraction * static_cast<double>(total_wait)) {
        ++stats_.self_inflicted;
        findings.push_back({victim.info.id, "self_inflicted_contention",
                            displayName(victim.info) +
                                " waits mostly behind itself or other non-BE work (" +
                                std::to_string(other_wait * 100 / total_wait) +
                                "% of attributed wait): BE is not restricted"});
        return out;
      }
      const uint64_t be_cpu = be_cpu_total_;
      if (be_wait == 0 && be_cpu == 0) {
        findings.push_back({victim.info.id, "no_cpu_antagonist",
                            displayName(victim.info) +
                                " is over its threshold but no BE container ran: nothing to do"});
        return out;
      }
      // Evidence: share of the victim's BE-attributed wait (70 %) and share of BE CPU time
      // (30 %); without attribution, CPU time alone. Only the attributed aggressors and the top
      // BE by CPU can make the cut: any other BE scores below the CPU-only top ones.
      const double w_wait = be_wait > 0 ? 0.7 : 0.0;
      const double w_cpu = 1.0 - w_wait;
      std::vector<const Tracked*> candidates;
      candidates.reserve(by_aggressor.size() + be_top_cpu_.size());
      for (const auto& e : by_aggressor) {
        candidates.push_back(e.second.t);
      }
      for (const Tracked* t : be_top_cpu_) {
        if (std::find(candidates.begin(), candidates.end(), t) == candidates.end()) {
          candidates.push_back(t);
        }
      }
      for (const Tracked* t : candidates) {
        Antagonist a;
        a.id = t->info.id;
        a.oncpu_ns = t->sample->oncpu_ns;
        for (const auto& e : by_aggressor) {
          if (e.second.t == t) {
            a.preemptions = e.second.count;
            a.wait_ns = e.second.wait_ns;
          }
        }
        double score = 0;
        if (be_wait > 0) {
          score += w_wait * static_cast<double>(a.wait_ns) / static_cast<double>(be_wait);
        }
        if (be_cpu > 0) {
          score += w_cpu * static_cast<double>(a.oncpu_ns) / static_cast<double>(be_cpu);
        }
        if (score <= 0) {
          continue;
        }
        a.score = score;
        a.name = displayName(t->info);
        out.push_back(std::move(a));
      }
    }
    std::sort(out.begin(), out.end(), [](const Antagonist& a, const Antagonist& b) {
      if (a.score != b.score) {
        return a.score > b.score;
      }
      return a.id < b.id;
    });
    std::vector<Antagonist> kept;
    for (auto& a : out) {
      if (static_cast<int>(kept.size()) >= config_.actions.max_antagonists) {
        break;
      }
      if (a.score < config_.actions.min_antagonist_score) {
        break;
      }
      kept.push_back(std::move(a));
    }
    if (kept.empty()) {
      findings.push_back(
          {victim.info.id, "no_antagonist",
           displayName(victim.info) + " is over its threshold but no BE container has at least " +
               std::to_string(static_cast<int>(config_.actions.min_antagonist_score * 100)) +
               "% of the evidence"});
    }
    return kept;
  }

  // --- levers ----------------------------------------------------------------------------
  // Current value of a lever on a target: the applied restriction if any, else the registry.
  [[nodiscard]] Resources current(const Tracked& t, Lever lever) const {
    if (auto it = restrictions_.find(t.info.id); it != restrictions_.end()) {
      if (auto jt = it->second.find(lever); jt != it->second.end()) {
        return jt->second.applied;
      }
    }
    return leverValues(t.info.resources, lever);
  }

  [[nodiscard]] std::vector<int> targetCpus(const Tracked& t) const {
    if (auto it = restrictions_.find(t.info.id); it != restrictions_.end()) {
      if (auto jt = it->second.find(Lever::Cpuset); jt != it->second.end()) {
        auto parsed = parseCpuList(jt->second.applied.cpuset_cpus.value_or(""));
        if (parsed && !parsed->empty()) {
          return *parsed;
        }
      }
    }
    return t.cpus.empty() ? node_cpus_ : t.cpus;
  }

  // The restricted value of `lever` for target t protecting victim v, or nullopt when the lever
  // would not restrict it further (already at or below the rung, or at its floor).
  std::optional<Resources> restricted(const Tracked& t, const Tracked& v, Lever lever) const {
    const auto& fl = config_.floors;
    const auto& lv = config_.levers;
    const Resources cur = current(t, lever);
    Resources out;
    switch (lever) {
      case Lever::CpuShares: {
        const uint64_t target = std::max(fl.be_min_cpu_shares, lv.be_cpu_shares);
        // Unknown shares: we could not restore them exactly, so we do not lower them.
        if (!cur.cpu_shares || *cur.cpu_shares <= target) {
          return std::nullopt;
        }
        out.cpu_shares = target;
        return out;
      }
      case Lever::Cpuset: {
        // Only CPUs of the node (the registry may list CPUs the snapshot's node does not have).
        std::vector<int> have;
        for (int c : targetCpus(t)) {
          if (std::binary_search(node_cpus_.begin(), node_cpus_.end(), c)) {
            have.push_back(c);
          }
        }
        if (have.empty()) {
          have = node_cpus_;
        }
        const auto min_cpus = static_cast<size_t>(fl.be_min_cpus);
        if (have.size() <= min_cpus) {
          return std::nullopt;
        }
        const std::vector<int>& vc = v.cpus;
        const bool victim_pinned = !vc.empty() && vc.size() < node_cpus_.size();
        std::vector<int> keep;
        if (victim_pinned) {
          for (int c : have) {
            if (!std::binary_search(vc.begin(), vc.end(), c)) {
              keep.push_back(c);
            }
          }
        } else {
          const auto n = static_cast<size_t>(
              std::floor(static_cast<double>(have.size()) * lv.be_cpuset_max_fraction));
          // The highest-numbered CPUs: the kernel and most services favour low numbers.
          keep.assign(have.end() - static_cast<std::ptrdiff_t>(std::min(n, have.size())),
                      have.end());
        }
        // Not enough CPUs away from the victim: fill up to the floor with its CPUs, highest-
        // numbered first (BE never gets fewer than floors.be_min_cpus).
        for (auto c = have.rbegin(); c != have.rend() && keep.size() < min_cpus; ++c) {
          if (std::find(keep.begin(), keep.end(), *c) == keep.end()) {
            keep.push_back(*c);
          }
        }
        std::sort(keep.begin(), keep.end());
        if (keep.size() >= have.size()) {
          return std::nullopt;
        }
        out.cpuset_cpus = formatCpuList(keep);
        return out;
      }
      case Lever::CpuQuota:
        // The quota rung is one aggregate budget over all capped BE containers: see
        // applyQuotaRung() and redistributeQuota().
        return std::nullopt;
      case Lever::MemoryLimit: {
        if (!t.sample || !t.sample->memory_bytes) {
          return std::nullopt;
        }
        const auto usage = static_cast<double>(*t.sample->memory_bytes);
        auto limit = static_cast<int64_t>(usage * (1.0 - lv.memory_step_fraction));
        limit = std::max(limit, fl.be_min_memory_bytes);
        if (cur.memory_limit && *cur.memory_limit > 0 && *cur.memory_limit <= limit) {
          return std::nullopt;
        }
        out.memory_limit = limit;
        return out;
      }
    }
    return std::nullopt;
  }

  [[nodiscard]] std::vector<Lever> ladder(bool memory) const {
    return memory ? config_.actions.memory_ladder : config_.actions.cpu_ladder;
  }

  Evidence evidence(const Tracked& v, const Episode* ep, bool memory) const {
    Evidence e;
    e.victim_p99_us = v.p99;
    e.threshold_us = v.threshold;
    e.baseline_p99_us = v.has_baseline ? static_cast<uint64_t>(v.baseline) : 0;
    e.engaged_p99_us = ep != nullptr ? ep->engaged_p99 : v.p99;
    if (v.sample != nullptr) {
      if (v.sample->psi_cpu_some) {
        e.psi_cpu_some_avg10 = v.sample->psi_cpu_some->avg10;
      }
      e.reclaim_stall_ns = v.sample->reclaim_stall_ns;
      e.victim_throttled_ns = v.sample->throttled_ns;
    }
    e.hits = memory ? v.mem_hits : v.cpu_hits;
    e.window = config_.detection.window_intervals;
    e.quiet_intervals = memory ? v.mem_quiet_streak : v.quiet_streak;
    e.victim_wait_load = v.wait_load;
    e.wait_load_before = ep != nullptr ? ep->start_wait : windowWait(v);
    e.quota_budget_cpus = quota_budget_;
    return e;
  }

  std::string victimPhrase(const Tracked& v, bool memory) const {
    std::ostringstream os;
    if (memory) {
      os << tierName(v.tier) << " " << displayName(v.info) << " stalls in memory reclaim ("
         << (v.sample ? v.sample->reclaim_stall_ns / 1000 : 0) << " µs this interval) in "
         << v.mem_hits << " of " << config_.detection.window_intervals << " intervals";
    } else {
      os << tierName(v.tier) << " " << displayName(v.info) << " run-queue p99 " << v.p99
         << (v.p99_hit ? " µs > threshold " : " µs (threshold ") << v.threshold
         << (v.p99_hit ? " µs" : " µs)");
      if (v.wait_load > 0) {
        os << ", wait load " << std::round(v.wait_load * 100) / 100 << " tasks ("
           << static_cast<int>(v.wait_share * 100) << "% of runnable time waiting)";
      }
      os << ", over in " << v.cpu_hits << " of " << config_.detection.window_intervals
         << " intervals";
    }
    return os.str();
  }

  Decision makeDecision(DecisionKind kind,
                        Lever lever,
                        int rung,
                        const Tracked& target,
                        Resources new_values,
                        Resources original,
                        const Tracked* victim,
                        const Episode* ep,
                        std::vector<Antagonist> antagonists,
                        std::string rule,
                        std::string explanation) {
    Decision d;
    d.seq = ++seq_;
    d.at_ns = now_ns_;
    d.kind = kind;
    d.lever = lever;
    d.rung = rung;
    d.target_id = target.info.id;
    d.target_name = displayName(target.info);
    d.new_values = std::move(new_values);
    d.original_values = std::move(original);
    if (victim != nullptr) {
      d.victim_id = victim->info.id;
      d.victim_name = displayName(victim->info);
      d.evidence = evidence(*victim, ep, ep != nullptr && ep->memory);
    } else if (ep != nullptr) {
      d.victim_id = ep->victim_id;
    }
    d.antagonists = std::move(antagonists);
    d.rule = std::move(rule);
    d.explanation = std::move(explanation);
    d.dry_run = config_.dry_run;
    ++stats_.decisions;
    return d;
  }

  enum class RungResult { Applied, NothingToDo, Deferred };

  // Applies ladder rung `rung` of episode ep: restricts the antagonists. NothingToDo when every
  // antagonist is already at or below the rung (try the next one); Deferred when the changes
  // wait for a cooldown or the round's budget (retry the same rung later).
  RungResult applyRung(Episode& ep,
                       const std::string& key,
                       Tracked& victim,
                       int rung,
                       const std::vector<Antagonist>& antagonists,
                       DecisionKind kind,
                       bool replacing,
                       std::vector<Decision>& out,
                       std::vector<Finding>& findings) {
    bool deferred = false;
    const Lever lever = ladder(ep.memory)[static_cast<size_t>(rung)];
    if (lever == Lever::CpuQuota) {
      return applyQuotaRung(ep, key, victim, rung, antagonists, kind, replacing, out, findings);
    }
    Step step;
    step.lever = lever;
    step.rung = rung;
    step.antagonists = antagonists;
    for (const Antagonist& a : antagonists) {
      auto it = tracked_.find(a.id);
      if (it == tracked_.end()) {
        continue;
      }
      Tracked& t = it->second;
      if (lever == Lever::CpuShares && !victim.info.pod_uid.empty() &&
          !t.info.pod_uid.empty() && victim.info.pod_uid != t.info.pod_uid) {
        // CFS is hierarchical and NRI cannot change pod cgroups: the pod cgroup keeps kubelet's
        // weight, so a container's weight only redistributes CPU inside its own pod.
        findings.push_back({t.info.id, "shares_ineffective",
                            displayName(t.info) + ": cpu_shares skipped: its pod cgroup keeps "
                            "kubelet's weight and CFS is hierarchical, so a container weight only "
                            "moves CPU inside its pod (" + t.info.pod_uid + "), not to " +
                            displayName(victim.info) + " in pod " + victim.info.pod_uid});
        continue;
      }
      auto& levers = restrictions_[t.info.id];
      if (auto jt = levers.find(lever); jt != levers.end()) {
        // Already restricted on this lever for another victim: share it.
        if (jt->second.owners.insert(key).second) {
          step.targets.push_back(t.info.id);
        }
        continue;
      }
      // An undo followed by the next rung in the same round is one replacement, not two changes.
      const bool cooling =
          !replacing && round_ - t.last_change_round < config_.actions.change_cooldown_intervals;
      if (cooling || !budget()) {
        deferred = true;
        if (levers.empty()) {
          restrictions_.erase(t.info.id);
        }
        continue;
      }
      auto values = restricted(t, victim, lever);
      if (!values) {
        findings.push_back({t.info.id, "at_floor",
                            displayName(t.info) + ": " + std::string(leverName(lever)) +
                                " cannot restrict it further (" +
                                describeValues(current(t, lever), lever) +
                                ": at or below the rung or floor, or unknown)"});
        if (levers.empty()) {
          restrictions_.erase(t.info.id);
        }
        continue;
      }
      Restriction r;
      r.lever = lever;
      r.rung = rung;
      r.applied = *values;
      r.original = leverValues(t.info.resources, lever);
      // The registry may still show what we applied last time (it is refreshed after NRI
      // applies a change): then the true original is the one we remembered.
      if (auto lt = t.last_applied.find(lever);
          lt != t.last_applied.end() && lt->second == r.original) {
        r.original = t.last_original[lever];
      }
      t.last_applied[lever] = r.applied;
      t.last_original[lever] = r.original;
      r.owners.insert(key);
      std::ostringstream os;
      os << decisionKindName(kind) << " rung " << rung + 1 << " (" << leverName(lever)
         << "): " << victimPhrase(victim, ep.memory) << "; antagonist " << a.name << " ("
         << static_cast<int>(a.score * 100) << "% of the evidence";
      if (ep.memory) {
        os << ", grew " << a.memory_growth_bytes << " bytes";
      } else {
        os << ", " << a.preemptions << " preemptions, " << a.wait_ns / 1000 << " µs wait, "
           << a.oncpu_ns / 1000 << " µs on CPU";
      }
      os << "); " << describeValues(current(t, lever), lever) << " -> "
         << describeValues(*values, lever);
      t.last_change_round = round_;
      t.last_explanation = os.str();
      out.push_back(makeDecision(
          kind, lever, rung, t, *values, restoreValues(r.original, lever, node_cpus_), &victim, &ep,
          antagonists, cpuRule(victim, ep.memory), os.str()));
      levers.emplace(lever, std::move(r));
      step.targets.push_back(t.info.id);
      ++changes_this_round_;
    }
    if (step.targets.empty()) {
      return deferred ? RungResult::Deferred : RungResult::NothingToDo;
    }
    ep.steps.push_back(std::move(step));
    return RungResult::Applied;
  }

  // Removes the episode's ownership of one step; restores levers nobody else holds.
  void releaseStep(const std::string& key,
                   const Episode& ep,
                   const Step& step,
                   DecisionKind kind,
                   const std::string& rule,
                   const std::string& why,
                   const Tracked* victim,
                   std::vector<Decision>& out) {
    for (const std::string& id : step.targets) {
      auto it = restrictions_.find(id);
      if (it == restrictions_.end()) {
        continue;
      }
      auto jt = it->second.find(step.lever);
      if (jt == it->second.end()) {
        continue;
      }
      jt->second.owners.erase(key);
      if (!jt->second.owners.empty()) {
        continue;  // still needed by another victim
      }
      auto tt = tracked_.find(id);
      if (tt != tracked_.end()) {
        Tracked& t = tt->second;
        const Resources orig = restoreValues(jt->second.original, step.lever, node_cpus_);
        std::string text = std::string(decisionKindName(kind)) + " " +
                           std::string(leverName(step.lever)) + " on " + displayName(t.info) +
                           ": " + why + "; " + describeValues(jt->second.applied, step.lever) +
                           " -> " + describeValues(orig, step.lever);
        t.last_change_round = round_;
        t.last_explanation = text;
        out.push_back(makeDecision(kind, step.lever, step.rung, t, orig, orig, victim, &ep,
                                   step.antagonists, rule, std::move(text)));
      }
      it->second.erase(jt);
      if (it->second.empty()) {
        restrictions_.erase(it);
      }
    }
    if (step.lever == Lever::CpuQuota && !anyQuota()) {
      quota_budget_ = 0;
    }
  }

  // --- the aggregate BE quota budget ------------------------------------------------------
  [[nodiscard]] bool anyQuota() const {
    for (const auto& [id, levers] : restrictions_) {
      if (levers.count(Lever::CpuQuota) != 0) {
        return true;
      }
    }
    return false;
  }

  [[nodiscard]] double nodeCpus() const {
    return static_cast<double>(std::max<size_t>(node_cpus_.size(), 1));
  }

  [[nodiscard]] uint64_t minQuotaUs() const {
    const uint64_t period = config_.levers.quota_period_us;
    return std::max<uint64_t>(1000, period * config_.floors.be_min_quota_millicores / 1000);
  }

  // The aggregate floor: a share of the node, and at least each capped container's own floor.
  [[nodiscard]] double quotaFloor(size_t n_targets) const {
    const double per = static_cast<double>(minQuotaUs()) /
                       static_cast<double>(config_.levers.quota_period_us);
    return std::max(config_.floors.be_min_quota_node_fraction * nodeCpus(),
                    per * static_cast<double>(n_targets));
  }

  [[nodiscard]] size_t quotaTargets() const {
    size_t n = 0;
    for (const auto& [id, levers] : restrictions_) {
      n += levers.count(Lever::CpuQuota);
    }
    return n;
  }

  // First budget: what the node has left after the LS demand (on-CPU of every non-BE container
  // plus the victim's wait load: CPU it wanted and did not get) and the headroom, at most
  // be_quota_fraction of the node, never below the floor.
  [[nodiscard]] double initialQuotaBudget(const Tracked& victim, size_t n_targets) const {
    const double node = nodeCpus();
    const double interval = static_cast<double>(std::max<int64_t>(interval_ns_, 1));
    double demand = victim.wait_load;
    for (const auto& [id, t] : tracked_) {
      if (t.sampled && t.tier != Tier::Be) {
        demand += static_cast<double>(t.sample->oncpu_ns) / interval;
      }
    }
    const auto& lv = config_.levers;
    const double b = std::min(lv.be_quota_fraction * node,
                              node - demand - lv.quota_headroom_fraction * node);
    return std::clamp(b, quotaFloor(n_targets), node);
  }

  // Adds the running BE containers (and the antagonists) to the capped set, owned by `key`.
  // Returns false when a new target had to wait (cooldown / round budget).
  bool addQuotaTargets(const std::string& key,
                       int rung,
                       const std::vector<Antagonist>& antagonists,
                       bool replacing,
                       Step& step) {
    bool deferred = false;
    const double interval = static_cast<double>(std::max<int64_t>(interval_ns_, 1));
    std::set<std::string> want;
    for (const Antagonist& a : antagonists) {
      want.insert(a.id);
    }
    for (const auto& [id, t] : tracked_) {
      if (touchable(t) && t.sampled &&
          static_cast<double>(t.sample->oncpu_ns) >= kRunningCpuFraction * interval) {
        want.insert(id);
      }
    }
    for (const std::string& id : want) {
      auto it = tracked_.find(id);
      if (it == tracked_.end() || !touchable(it->second)) {
        continue;
      }
      Tracked& t = it->second;
      auto& levers = restrictions_[id];
      if (auto jt = levers.find(Lever::CpuQuota); jt != levers.end()) {
        jt->second.owners.insert(key);
        if (std::find(step.targets.begin(), step.targets.end(), id) == step.targets.end()) {
          step.targets.push_back(id);
        }
        continue;
      }
      const bool cooling =
          !replacing && round_ - t.last_change_round < config_.actions.change_cooldown_intervals;
      if (cooling || !budget()) {
        deferred = true;
        if (levers.empty()) {
          restrictions_.erase(id);
        }
        continue;
      }
      Restriction r;
      r.lever = Lever::CpuQuota;
      r.rung = rung;
      r.original = leverValues(t.info.resources, Lever::CpuQuota);
      if (auto lt = t.last_applied.find(Lever::CpuQuota);
          lt != t.last_applied.end() && lt->second == r.original) {
        r.original = t.last_original[Lever::CpuQuota];
      }
      r.owners.insert(key);
      levers.emplace(Lever::CpuQuota, std::move(r));
      step.targets.push_back(id);
    }
    return !deferred;
  }

  // Splits quota_budget_ among the capped BE containers: each gets its floor, the rest by CPU
  // use this interval; never looser than its own original quota. Emits a decision per container
  // whose value changes. The set is coupled, so it is not cut by max_changes_per_round.
  void redistributeQuota(DecisionKind kind,
                         const std::string& rule,
                         const std::string& why,
                         const Tracked* victim,
                         const Episode* ep,
                         const std::vector<Antagonist>& antagonists,
                         std::vector<Decision>& out,
                         std::vector<Finding>& findings) {
    struct Target {
      Tracked* t;
      Restriction* r;
      double weight;
    };
    std::vector<Target> targets;
    const double interval = static_cast<double>(std::max<int64_t>(interval_ns_, 1));
    double wsum = 0;
    for (auto& [id, levers] : restrictions_) {
      auto jt = levers.find(Lever::CpuQuota);
      auto tt = tracked_.find(id);
      if (jt == levers.end() || tt == tracked_.end()) {
        continue;
      }
      const Tracked& t = tt->second;
      const double w =
          (t.sample != nullptr ? static_cast<double>(t.sample->oncpu_ns) / interval : 0.0) + 0.01;
      targets.push_back({&tt->second, &jt->second, w});
      wsum += w;
    }
    if (targets.empty()) {
      return;
    }
    const uint64_t period = config_.levers.quota_period_us;
    const uint64_t min_q = minQuotaUs();
    quota_budget_ = std::max(quota_budget_, quotaFloor(targets.size()));
    const double floor_cpus = static_cast<double>(min_q) / static_cast<double>(period);
    const double rest =
        std::max(0.0, quota_budget_ - floor_cpus * static_cast<double>(targets.size()));
    std::vector<std::string> dropped;
    for (Target& x : targets) {
      const double cpus = floor_cpus + rest * x.weight / wsum;
      auto quota = std::max(min_q, static_cast<uint64_t>(cpus * static_cast<double>(period)));
      Resources vals;
      vals.cpu_quota = static_cast<int64_t>(quota);
      vals.cpu_period = period;
      const Resources& orig = x.r->original;
      if (orig.cpu_quota && *orig.cpu_quota > 0 && orig.cpu_period && *orig.cpu_period > 0 &&
          static_cast<double>(*orig.cpu_quota) / static_cast<double>(*orig.cpu_period) <=
              static_cast<double>(quota) / static_cast<double>(period)) {
        // Its own quota is already tighter than its share: never loosen it.
        if (!x.r->applied.cpu_quota) {
          dropped.push_back(x.t->info.id);
          continue;
        }
        vals = restoreValues(orig, Lever::CpuQuota, node_cpus_);
      }
      if (x.r->applied == vals) {
        continue;
      }
      Tracked& t = *x.t;
      const Resources before = current(t, Lever::CpuQuota);
      std::ostringstream os;
      os << decisionKindName(kind) << " rung " << x.r->rung + 1 << " (cpu_quota): " << why
         << "; aggregate BE budget " << std::round(quota_budget_ * 100) / 100 << " of "
         << nodeCpus() << " CPUs over " << targets.size() << " BE containers; "
         << displayName(t.info) << " " << describeValues(before, Lever::CpuQuota) << " -> "
         << describeValues(vals, Lever::CpuQuota);
      x.r->applied = vals;
      t.last_applied[Lever::CpuQuota] = vals;
      t.last_original[Lever::CpuQuota] = x.r->original;
      t.last_change_round = round_;
      t.last_explanation = os.str();
      out.push_back(makeDecision(kind, Lever::CpuQuota, x.r->rung, t, vals,
                                 restoreValues(x.r->original, Lever::CpuQuota, node_cpus_),
                                 victim, ep, antagonists, rule, os.str()));
      ++changes_this_round_;
    }
    for (const std::string& id : dropped) {
      findings.push_back({id, "at_floor",
                          id + ": cpu_quota: its own CFS quota is already within its share of "
                               "the BE budget; left as is"});
      auto it = restrictions_.find(id);
      if (it != restrictions_.end()) {
        it->second.erase(Lever::CpuQuota);
        if (it->second.empty()) {
          restrictions_.erase(it);
        }
      }
      for (auto& [k, e] : episodes_) {
        for (auto& st : e.steps) {
          if (st.lever == Lever::CpuQuota) {
            std::erase(st.targets, id);
          }
        }
      }
    }
  }

  RungResult applyQuotaRung(Episode& ep,
                            const std::string& key,
                            Tracked& victim,
                            int rung,
                            const std::vector<Antagonist>& antagonists,
                            DecisionKind kind,
                            bool replacing,
                            std::vector<Decision>& out,
                            std::vector<Finding>& findings) {
    Step step;
    step.lever = Lever::CpuQuota;
    step.rung = rung;
    step.antagonists = antagonists;
    const bool complete = addQuotaTargets(key, rung, antagonists, replacing, step);
    if (step.targets.empty()) {
      return complete ? RungResult::NothingToDo : RungResult::Deferred;
    }
    if (quota_budget_ <= 0) {
      quota_budget_ = initialQuotaBudget(victim, quotaTargets());
    }
    redistributeQuota(kind, cpuRule(victim, false), victimPhrase(victim, false), &victim, &ep,
                      antagonists, out, findings);
    std::erase_if(step.targets, [&](const std::string& id) {
      auto it = restrictions_.find(id);
      return it == restrictions_.end() || it->second.count(Lever::CpuQuota) == 0;
    });
    if (step.targets.empty()) {
      if (!anyQuota()) {
        quota_budget_ = 0;
      }
      return RungResult::NothingToDo;
    }
    ep.steps.push_back(std::move(step));
    return RungResult::Applied;
  }

  [[nodiscard]] bool holdsQuota(const Episode& ep) const {
    return std::any_of(ep.steps.begin(), ep.steps.end(),
                       [](const Step& st) { return st.lever == Lever::CpuQuota; });
  }

  [[nodiscard]] bool canTighten(const Episode& ep) const {
    return !ep.memory && holdsQuota(ep) && quota_budget_ > quotaFloor(quotaTargets()) + 1e-6;
  }

  // The victim still hurts with the quota rung in force: shrink the aggregate budget one step
  // (capping BE containers that started running meanwhile too) and verify again.
  bool tightenQuota(Episode& ep,
                    const std::string& key,
                    Tracked& v,
                    std::vector<Decision>& out,
                    std::vector<Finding>& findings) {
    if (!canTighten(ep)) {
      return false;
    }
    auto sit = std::find_if(ep.steps.begin(), ep.steps.end(),
                            [](const Step& st) { return st.lever == Lever::CpuQuota; });
    addQuotaTargets(key, sit->rung, sit->antagonists, false, *sit);
    const double was = quota_budget_;
    quota_budget_ = std::max(quotaFloor(quotaTargets()),
                             quota_budget_ * (1.0 - config_.levers.quota_step_fraction));
    std::ostringstream why;
    why << victimPhrase(v, false) << "; still hurt with the BE quota in force: budget "
        << std::round(was * 100) / 100 << " -> " << std::round(quota_budget_ * 100) / 100
        << " CPUs";
    redistributeQuota(DecisionKind::Escalate, "quota_budget_tightened", why.str(), &v, &ep,
                      sit->antagonists, out, findings);
    ep.phase = Phase::Verifying;
    ep.verify_until = round_ + config_.actions.verify_intervals;
    ep.verify_hits = 0;
    ep.verify_intervals = 0;
    ep.verify_p99_sum = 0;
    ep.verify_wait_sum = 0;
    ep.start_p99 = v.p99;
    ep.start_wait = windowWait(v);
    return true;
  }

  // Adds the next rung on top of what is held; at the end of the ladder, tightens the quota.
  void escalateOrTighten(Episode& ep,
                         const std::string& key,
                         Tracked& v,
                         std::vector<Decision>& out,
                         std::vector<Finding>& findings) {
    if (!ep.exhausted && escalate(ep, key, v, DecisionKind::Escalate, out, findings)) {
      return;
    }
    if (ep.exhausted) {
      tightenQuota(ep, key, v, out, findings);
    }
  }

  [[nodiscard]] static std::string cpuRule(const Tracked& v, bool memory) {
    if (memory) {
      return "reclaim_stall_over_threshold";
    }
    return v.p99_hit || v.wait_load == 0 ? "runq_p99_over_threshold" : "runq_wait_over_threshold";
  }

  // Mean wait load over the detection window: the victim's level before an action.
  [[nodiscard]] static double windowWait(const Tracked& v) {
    if (v.wait_ring.empty()) {
      return v.wait_load;
    }
    double sum = 0;
    for (double w : v.wait_ring) {
      sum += w;
    }
    return std::max(v.wait_load, sum / static_cast<double>(v.wait_ring.size()));
  }

  [[nodiscard]] bool budget() const {
    return changes_this_round_ < config_.actions.max_changes_per_round;
  }

  // Tries rungs from ep.next_rung until one changes something. Returns true if one applied.
  bool escalate(Episode& ep,
                const std::string& key,
                Tracked& victim,
                DecisionKind kind,
                std::vector<Decision>& out,
                std::vector<Finding>& findings,
                bool replacing = false) {
    const auto lad = ladder(ep.memory);
    std::vector<Antagonist> antagonists = rank(victim, ep.memory, findings);
    if (antagonists.empty()) {
      return false;
    }
    while (ep.next_rung < static_cast<int>(lad.size()) &&
           ep.escalations < config_.actions.max_escalations) {
      const int rung = ep.next_rung;
      const RungResult res =
          applyRung(ep, key, victim, rung, antagonists, kind, replacing, out, findings);
      if (res == RungResult::Deferred) {
        ++stats_.rate_limited;
        return false;
      }
      ++ep.next_rung;
      ++ep.escalations;
      if (res == RungResult::Applied) {
        Step& applied = ep.steps.back();
        for (const auto& [id, t] : tracked_) {
          if (touchable(t) && t.sampled && cpusUsed(t) >= kRunningCpuFraction) {
            applied.running_at_apply.insert(id);
          }
        }
        applied.running_known = true;
        ep.phase = Phase::Verifying;
        ep.verify_until = round_ + config_.actions.verify_intervals;
        ep.verify_hits = 0;
        ep.verify_intervals = 0;
        ep.verify_p99_sum = 0;
        ep.verify_wait_sum = 0;
        ep.start_p99 = victim.p99;
        ep.start_wait = windowWait(victim);
        return true;
      }
    }
    if (!ep.exhausted) {
      ep.exhausted = true;
      findings.push_back(
          {victim.info.id, "ladder_exhausted",
           displayName(victim.info) + ": every rung of the ladder was tried; holding what helped"});
    }
    return false;
  }

  // On-CPU of container t this interval, in CPUs.
  [[nodiscard]] double cpusUsed(const Tracked& t) const {
    const double interval = static_cast<double>(std::max<int64_t>(interval_ns_, 1));
    return t.sample != nullptr ? static_cast<double>(t.sample->oncpu_ns) / interval : 0.0;
  }

  // Why giving back the top cross-pod rung (cpuset, quota) now would bring the contention back,
  // or nullopt when it may be given back. A quiet victim only shows that the rung works, not that
  // it is no longer needed: relaxing while BE still runs flat out re-creates the backlog (the
  // full loop measured a relax -> hurt -> re-engage cycle costing LS ~0.3 s of queueing each
  // time). So the rung is held while (a) the BE containers it restricts use >= 90 % of what it
  // leaves them (they would take more), and (b) the LS demand (on-CPU of the non-BE containers)
  // is more than 80 % of what the CPU weights would give LS against the running BE containers
  // without it. It is given back as soon as BE stops or slows, or the LS demand falls.
  std::optional<std::string> relaxWouldHurt(const Step& top, const Tracked& v) const {
    if (top.lever != Lever::Cpuset && top.lever != Lever::CpuQuota) {
      return std::nullopt;
    }
    double be_used = 0;
    std::set<int> allowed_cpus;
    for (const std::string& id : top.targets) {
      auto it = tracked_.find(id);
      if (it == tracked_.end() || !it->second.sampled) {
        continue;
      }
      be_used += cpusUsed(it->second);
      if (top.lever == Lever::Cpuset) {
        for (int c : targetCpus(it->second)) {
          allowed_cpus.insert(c);
        }
      }
    }
    const double allowance = top.lever == Lever::Cpuset
                                 ? static_cast<double>(allowed_cpus.size())
                                 : quota_budget_;
    if (allowance <= 0 || be_used < kSaturatedFraction * allowance) {
      return std::nullopt;
    }
    double ls_demand = 0;
    double ls_weight = 0;
    double be_weight = 0;
    for (const auto& [id, t] : tracked_) {
      if (!t.sampled) {
        continue;
      }
      if (t.info.exclusive_cpus) {
        continue;  // on CPUs of its own: neither competes on the shared ones
      }
      const double w = static_cast<double>(t.info.resources.cpu_shares.value_or(1024));
      if (t.tier == Tier::Be) {
        if (cpusUsed(t) >= kRunningCpuFraction) {
          be_weight += w;
        }
      } else {
        ls_demand += cpusUsed(t);
        ls_weight += w;
      }
    }
    const double ls_share = nodeCpus() * ls_weight / std::max(ls_weight + be_weight, 1.0);
    if (ls_demand <= kFitsShareFraction * ls_share) {
      return std::nullopt;
    }
    std::ostringstream why;
    why << displayName(v.info) << " is quiet, but " << leverName(top.lever)
        << " is held: the BE containers it restricts use " << std::round(be_used * 100) / 100
        << " of the " << std::round(allowance * 100) / 100
        << " CPUs it leaves them, and the non-BE demand of " << std::round(ls_demand * 100) / 100
        << " CPUs is above 80% of the " << std::round(ls_share * 100) / 100
        << " CPUs the weights would give it against the running BE without the rung";
    return why.str();
  }

  // A BE container that was not running when a cross-pod rung (cpuset, quota) was applied joins
  // it while the rung protects a victim: otherwise, when it starts, it takes the CPUs the rung
  // freed, the victim is hurt again, and a new backlog builds before the next detection
  // (measured: the antagonist started mid-phase undid the cpuset split and forced the quota
  // rung). Idle BE joins a cpuset at once, BE that starts running joins the quota budget. The
  // restriction is owned by the same episode and released with it.
  void extendSteps(const std::string& key,
                   Episode& ep,
                   std::vector<Decision>& out,
                   std::vector<Finding>& findings) {
    if (ep.memory || ep.steps.empty()) {
      return;
    }
    auto vit = tracked_.find(ep.victim_id);
    if (vit == tracked_.end() || ep.victim_gone) {
      return;
    }
    Tracked& v = vit->second;
    for (Step& step : ep.steps) {
      if (step.lever != Lever::Cpuset && step.lever != Lever::CpuQuota) {
        continue;
      }
      if (!step.running_known) {
        // Seeded after a restart: who was benign is not known; what runs now stays as it is.
        for (const auto& [id, t] : tracked_) {
          if (touchable(t) && t.sampled && cpusUsed(t) >= kRunningCpuFraction) {
            step.running_at_apply.insert(id);
          }
        }
        step.running_known = true;
        continue;
      }
      std::vector<Tracked*> joining;
      for (auto& [id, t] : tracked_) {
        // Cpuset: idle BE joins too (a cpuset costs an idle container nothing, and when it
        // starts it is already off the victim's CPUs: no transient at all). Quota: only BE that
        // runs (an idle container's share of the budget would be a bare floor).
        const bool running = t.sampled && cpusUsed(t) >= kRunningCpuFraction;
        if (!touchable(t) || !t.sampled || step.running_at_apply.count(id) != 0 ||
            (step.lever == Lever::CpuQuota && !running)) {
          continue;
        }
        auto rit = restrictions_.find(id);
        if (rit != restrictions_.end() && rit->second.count(step.lever) != 0) {
          continue;
        }
        joining.push_back(&t);
      }
      if (joining.empty()) {
        continue;
      }
      if (step.lever == Lever::CpuQuota) {
        const size_t before = step.targets.size();
        addQuotaTargets(key, step.rung, {}, false, step);
        if (step.targets.size() != before) {
          std::ostringstream why;
          why << "BE started running while " << displayName(v.info)
              << " is protected by the BE quota budget: capped within it";
          redistributeQuota(DecisionKind::Escalate, "be_joined_restriction", why.str(), &v, &ep,
                            step.antagonists, out, findings);
        }
        continue;
      }
      for (Tracked* t : joining) {
        const bool cooling = round_ - t->last_change_round <
                             config_.actions.change_cooldown_intervals;
        if (cooling || !budget()) {
          continue;
        }
        auto values = restricted(*t, v, Lever::Cpuset);
        if (!values) {
          continue;
        }
        Restriction r;
        r.lever = Lever::Cpuset;
        r.rung = step.rung;
        r.applied = *values;
        r.original = leverValues(t->info.resources, Lever::Cpuset);
        if (auto lt = t->last_applied.find(Lever::Cpuset);
            lt != t->last_applied.end() && lt->second == r.original) {
          r.original = t->last_original[Lever::Cpuset];
        }
        t->last_applied[Lever::Cpuset] = r.applied;
        t->last_original[Lever::Cpuset] = r.original;
        r.owners.insert(key);
        std::ostringstream os;
        os << "extend rung " << step.rung + 1 << " (cpuset) to " << displayName(t->info) << ": "
           << (cpusUsed(*t) >= kRunningCpuFraction ? "it started running (" : "it is idle (")
           << static_cast<int>(cpusUsed(*t) * 100) << "% of a CPU) while " << displayName(v.info)
           << " is protected by it, so it starts off the victim's CPUs; "
           << describeValues(current(*t, Lever::Cpuset), Lever::Cpuset) << " -> "
           << describeValues(*values, Lever::Cpuset);
        t->last_change_round = round_;
        t->last_explanation = os.str();
        out.push_back(makeDecision(DecisionKind::Escalate, Lever::Cpuset, step.rung, *t, *values,
                                   restoreValues(r.original, Lever::Cpuset, node_cpus_), &v, &ep,
                                   step.antagonists, "be_joined_restriction", os.str()));
        restrictions_[t->info.id].emplace(Lever::Cpuset, std::move(r));
        step.targets.push_back(t->info.id);
        ++changes_this_round_;
      }
    }
  }

  void stepEpisode(const std::string& key,
                   Episode& ep,
                   std::vector<Decision>& out,
                   std::vector<Finding>& findings) {
    auto vit = tracked_.find(ep.victim_id);
    if (ep.victim_gone || vit == tracked_.end()) {
      // Victim removed: give everything back.
      while (!ep.steps.empty()) {
        releaseStep(key, ep, ep.steps.back(), DecisionKind::Restore, "victim_removed",
                    "victim " + ep.victim_id + " is gone", nullptr, out);
        ep.steps.pop_back();
      }
      return;
    }
    Tracked& v = vit->second;
    if (!v.sampled) {
      return;  // no data this round: hold
    }
    const bool hit = ep.memory ? v.mem_hit : v.cpu_hit;
    const int hits = ep.memory ? v.mem_hits : v.cpu_hits;
    const int quiet = ep.memory ? v.mem_quiet_streak : v.quiet_streak;
    if (ep.phase == Phase::Verifying) {
      ++ep.verify_intervals;
      ep.verify_hits += hit ? 1 : 0;
      ep.verify_p99_sum += v.p99;
      ep.verify_wait_sum += v.wait_load;
      if (round_ < ep.verify_until) {
        return;
      }
      const auto mean = static_cast<double>(ep.verify_p99_sum) /
                        static_cast<double>(std::max(ep.verify_intervals, 1));
      const double mean_wait =
          ep.verify_wait_sum / static_cast<double>(std::max(ep.verify_intervals, 1));
      // A backlog built up before the action drains for seconds (p99 stays high), but the
      // victim's run-queue wait drops as soon as it gets CPU again: a clear drop counts.
      const bool wait_dropped = !ep.memory && ep.start_wait > 0 &&
                                ep.start_wait >= config_.detection.wait_load_min &&
                                mean_wait <= config_.actions.improve_ratio * ep.start_wait;
      const bool improved =
          ep.verify_hits * 2 < ep.verify_intervals || wait_dropped ||
          (!ep.memory && mean <= config_.actions.improve_ratio * static_cast<double>(ep.start_p99));
      if (improved || ep.steps.empty()) {
        ep.phase = Phase::Holding;
        if (improved && !ep.steps.empty() && !ep.memory) {
          v.effective_rung = ep.steps.back().rung;
        }
        if (improved && hit && !ep.steps.empty() && budget()) {
          // Partially effective: keep it and add the next rung on top (never undo a rung that
          // reduced the victim's wait).
          std::ostringstream why;
          why << displayName(v.info) << ": rung " << ep.steps.back().rung + 1 << " ("
              << leverName(ep.steps.back().lever) << ") helped (wait load "
              << std::round(ep.start_wait * 100) / 100 << " -> "
              << std::round(mean_wait * 100) / 100 << ", p99 mean " << static_cast<uint64_t>(mean)
              << " µs) but the victim is still over threshold: kept, escalating on top";
          findings.push_back({v.info.id, "rung_partially_effective", why.str()});
          escalateOrTighten(ep, key, v, out, findings);
        }
        return;
      }
      // Not improved, but the top rung is the quota budget and it can still shrink: tighten
      // instead of undoing (a loose first budget may not bind yet).
      if (!ep.memory && ep.steps.back().lever == Lever::CpuQuota && canTighten(ep) && budget()) {
        tightenQuota(ep, key, v, out, findings);
        return;
      }
      // Not improved: undo this rung, then try the next one.
      if (!budget()) {
        ++stats_.rate_limited;
        return;
      }
      const Step failed = ep.steps.back();
      ep.steps.pop_back();
      std::ostringstream why;
      why << "rung " << failed.rung + 1 << " did not help within "
          << config_.actions.verify_intervals << " intervals (" << ep.verify_hits << " of "
          << ep.verify_intervals << " still over threshold)";
      const size_t before = out.size();
      releaseStep(key, ep, failed, DecisionKind::Undo, "rung_not_effective", why.str(), &v, out);
      changes_this_round_ += static_cast<int>(out.size() - before);
      ep.phase = Phase::Holding;
      // The next rung only if the victim is still hurt now; otherwise hold (the episode ends
      // once the window is quiet, or escalates from the next rung if it is hurt again).
      if (hit) {
        escalate(ep, key, v, DecisionKind::Escalate, out, findings, true);
      }
      return;
    }
    // Holding.
    if (hits >= config_.detection.hit_intervals && hit) {
      if (budget()) {
        escalateOrTighten(ep, key, v, out, findings);
      }
      return;
    }
    const int need = config_.actions.quiet_intervals * v.relax_backoff;
    if (quiet >= need && !ep.steps.empty() &&
        round_ - ep.last_relax_round >= config_.actions.relax_cooldown_intervals && budget()) {
      const Step& top = ep.steps.back();
      const double node = nodeCpus();
      if (!ep.memory) {
        if (auto held = relaxWouldHurt(top, v)) {
          if (!ep.relax_held) {
            ep.relax_held = true;
            findings.push_back({v.info.id, "relax_held", *held});
          }
          return;
        }
        ep.relax_held = false;
      }
      if (top.lever == Lever::CpuQuota && quota_budget_ > 0 &&
          quota_budget_ + config_.levers.quota_step_fraction * node < node) {
        // Give the quota back step by step: raise the aggregate budget, keep the rung.
        const double was = quota_budget_;
        quota_budget_ += config_.levers.quota_step_fraction * node;
        std::ostringstream why;
        why << displayName(v.info) << " quiet for " << quiet << " intervals: BE budget "
            << std::round(was * 100) / 100 << " -> " << std::round(quota_budget_ * 100) / 100
            << " CPUs";
        redistributeQuota(DecisionKind::Relax, "quota_budget_relaxed", why.str(), &v, &ep,
                          top.antagonists, out, findings);
        ep.last_relax_round = round_;
        v.last_relax_round = round_;
        return;
      }
      const Step last = ep.steps.back();
      ep.steps.pop_back();
      const size_t before = out.size();
      releaseStep(key, ep, last, DecisionKind::Relax, "victim_quiet",
                  displayName(v.info) + " quiet for " + std::to_string(quiet) + " intervals", &v,
                  out);
      changes_this_round_ += static_cast<int>(out.size() - before);
      ep.last_relax_round = round_;
      v.last_relax_round = round_;
      // Let the next relax try the rung again later if it comes back.
      ep.next_rung = ep.steps.empty() ? 0 : ep.steps.back().rung + 1;
      ep.exhausted = false;
      ep.escalations = static_cast<int>(ep.steps.size());
    }
  }

  void startEpisodes(std::vector<Decision>& out, std::vector<Finding>& findings) {
    for (auto& [id, v] : tracked_) {
      if (!v.sampled || !isVictimTier(v.tier) || v.info.exclusive_cpus) {
        continue;
      }
      for (bool memory : {false, true}) {
        const int hits = memory ? v.mem_hits : v.cpu_hits;
        const bool hit = memory ? v.mem_hit : v.cpu_hit;
        if (!hit || hits < config_.detection.hit_intervals) {
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
        if (round_ - v.last_relax_round <= 2 * config_.actions.quiet_intervals * v.relax_backoff) {
          v.relax_backoff = std::min(v.relax_backoff * 2, kMaxRelaxBackoff);
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

  RoundResult evaluate(const Snapshot& snap) {
    RoundResult result;
    ++round_;
    ++stats_.rounds;
    now_ns_ = snap.now_ns;
    interval_ns_ = snap.interval_ns;
    changes_this_round_ = 0;
    node_cpus_ = snap.node_cpu_list;
    if (node_cpus_.empty()) {
      for (int c = 0; c < snap.node_cpus; ++c) {
        node_cpus_.push_back(c);
      }
    } else {
      std::sort(node_cpus_.begin(), node_cpus_.end());
    }
    result.findings = std::move(pending_findings_);
    pending_findings_.clear();

    // Samples by id (last one wins on duplicates).
    for (auto& [id, t] : tracked_) {
      t.sample = nullptr;
      t.sampled = false;
    }
    for (const ContainerSample& s : snap.containers) {
      auto it = index_.find(std::string_view(s.id));
      if (it == index_.end()) {
        ++stats_.unknown_samples;
        continue;
      }
      it->second->sample = &s;
    }
    be_cpu_total_ = 0;
    be_top_cpu_.clear();
    const auto top_n = static_cast<size_t>(config_.actions.max_antagonists);
    auto more_cpu = [](const Tracked* a, const Tracked* b) {
      if (a->sample->oncpu_ns != b->sample->oncpu_ns) {
        return a->sample->oncpu_ns > b->sample->oncpu_ns;
      }
      return a->info.id < b->info.id;
    };
    for (auto& [id, t] : tracked_) {
      observe(t, t.sample, snap.interval_ns);
      if (touchable(t) && t.sampled) {
        be_cpu_total_ += t.sample->oncpu_ns;
        // Keep the top max_antagonists by CPU (small sorted vector).
        if (be_top_cpu_.size() < top_n || more_cpu(&t, be_top_cpu_.back())) {
          be_top_cpu_.insert(std::upper_bound(be_top_cpu_.begin(), be_top_cpu_.end(), &t, more_cpu),
                             &t);
          if (be_top_cpu_.size() > top_n) {
            be_top_cpu_.pop_back();
          }
        }
      }
    }
    // Existing episodes first (undo/escalate/relax), then new victims.
    for (auto& [key, ep] : episodes_) {
      stepEpisode(key, ep, result.decisions, result.findings);
      extendSteps(key, ep, result.decisions, result.findings);
    }
    // An episode without restrictions ends once its victim is gone or no longer in violation
    // (an exhausted episode of a victim still in violation stays, so rungs are not retried
    // every round).
    std::erase_if(episodes_, [this](const auto& kv) {
      const Episode& ep = kv.second;
      if (!ep.steps.empty()) {
        return false;
      }
      if (ep.victim_gone) {
        return true;
      }
      auto it = tracked_.find(ep.victim_id);
      if (it == tracked_.end()) {
        return true;
      }
      const int hits = ep.memory ? it->second.mem_hits : it->second.cpu_hits;
      return ep.phase == Phase::Holding && hits < config_.detection.hit_intervals;
    });
    startEpisodes(result.decisions, result.findings);
    // Decay the relax backoff of containers long quiet without an episode.
    for (auto& [id, t] : tracked_) {
      if (t.relax_backoff > 1 && t.sampled &&
          t.quiet_streak >= 4 * config_.actions.quiet_intervals * t.relax_backoff &&
          episodes_.count(episodeKey(id, false)) == 0) {
        t.relax_backoff = 1;
      }
    }
    for (const Finding& f : result.findings) {
      if (auto it = tracked_.find(f.container_id); it != tracked_.end()) {
        it->second.last_explanation = f.message;
      }
    }
    for (auto& [id, t] : tracked_) {
      t.sample = nullptr;  // the snapshot is not ours to keep
    }
    stats_.tracked_containers = tracked_.size();
    stats_.active_episodes = episodes_.size();
    return result;
  }

  std::vector<Decision> restoreAll(int64_t now_ns) {
    now_ns_ = now_ns;
    std::vector<Decision> out;
    for (auto& [id, levers] : restrictions_) {
      auto tt = tracked_.find(id);
      if (tt == tracked_.end()) {
        continue;
      }
      for (auto& [lever, r] : levers) {
        const Resources orig = restoreValues(r.original, lever, node_cpus_);
        std::string text = "restore " + std::string(leverName(lever)) + " on " +
                           displayName(tt->second.info) +
                           " (colod stopping): " + describeValues(r.applied, lever) + " -> " +
                           describeValues(orig, lever);
        Decision d = makeDecision(DecisionKind::Restore, lever, r.rung, tt->second, orig, orig,
                                  nullptr, nullptr, {}, "restore_all", std::move(text));
        out.push_back(std::move(d));
      }
    }
    restrictions_.clear();
    episodes_.clear();
    quota_budget_ = 0;
    stats_.active_episodes = 0;
    return out;
  }

  Result<void> seed(std::span<const AppliedAction> actions, int64_t now_ns) {
    now_ns_ = now_ns;
    // Validate everything first so a bad journal leaves the engine unchanged.
    for (const AppliedAction& a : actions) {
      auto t = tracked_.find(a.target_id);
      if (t == tracked_.end()) {
        return COLOD_ERR(EINVAL, "seed: unknown target container ", a.target_id);
      }
      if (!touchable(t->second)) {
        return COLOD_ERR(ENOTSUP, "seed: container ", a.target_id,
                         " is not a BE container colod may restrict (tier ",
                         tierName(t->second.tier),
                         t->second.info.exclusive_cpus ? ", exclusive CPUs" : "", ")");
      }
      if (tracked_.count(a.victim_id) == 0) {
        return COLOD_ERR(EINVAL, "seed: unknown victim container ", a.victim_id);
      }
      const auto lad = ladder(a.lever == Lever::MemoryLimit);
      if (std::find(lad.begin(), lad.end(), a.lever) == lad.end()) {
        return COLOD_ERR(EINVAL, "seed: lever ", leverName(a.lever),
                         " is not in the configured ladder");
      }
    }
    for (const AppliedAction& a : actions) {
      const bool memory = a.lever == Lever::MemoryLimit;
      const std::string key = episodeKey(a.victim_id, memory);
      auto [eit, inserted] = episodes_.try_emplace(key);
      Episode& ep = eit->second;
      if (inserted) {
        ep.victim_id = a.victim_id;
        ep.memory = memory;
        ep.phase = Phase::Holding;
      }
      const auto lad = ladder(memory);
      const int rung = static_cast<int>(std::find(lad.begin(), lad.end(), a.lever) - lad.begin());
      auto& levers = restrictions_[a.target_id];
      auto [rit, rnew] = levers.try_emplace(a.lever);
      if (rnew) {
        rit->second.lever = a.lever;
        rit->second.rung = rung;
        rit->second.applied = a.applied_values;
        rit->second.original = a.original_values;
      }
      rit->second.owners.insert(key);
      auto sit = std::find_if(ep.steps.begin(), ep.steps.end(),
                              [&](const Step& s) { return s.lever == a.lever; });
      if (sit == ep.steps.end()) {
        Step s;
        s.lever = a.lever;
        s.rung = rung;
        ep.steps.push_back(std::move(s));
        sit = ep.steps.end() - 1;
      }
      if (std::find(sit->targets.begin(), sit->targets.end(), a.target_id) == sit->targets.end()) {
        sit->targets.push_back(a.target_id);
      }
      std::sort(ep.steps.begin(), ep.steps.end(),
                [](const Step& x, const Step& y) { return x.rung < y.rung; });
      ep.next_rung = ep.steps.back().rung + 1;
      ep.escalations = static_cast<int>(ep.steps.size());
    }
    // A seeded quota rung: the budget in force is the sum of the applied quotas.
    quota_budget_ = 0;
    for (const auto& [id, levers] : restrictions_) {
      if (auto jt = levers.find(Lever::CpuQuota); jt != levers.end()) {
        const Resources& a = jt->second.applied;
        if (a.cpu_quota && *a.cpu_quota > 0 && a.cpu_period && *a.cpu_period > 0) {
          quota_budget_ +=
              static_cast<double>(*a.cpu_quota) / static_cast<double>(*a.cpu_period);
        }
      }
    }
    stats_.active_episodes = episodes_.size();
    return ok();
  }

  void applyFailed(const Decision& d) {
    if (d.kind != DecisionKind::Engage && d.kind != DecisionKind::Escalate) {
      return;  // a failed undo/relax/restore: the container is most likely gone
    }
    auto it = restrictions_.find(d.target_id);
    if (it == restrictions_.end()) {
      return;
    }
    auto jt = it->second.find(d.lever);
    if (jt == it->second.end() || jt->second.applied != d.new_values) {
      return;
    }
    it->second.erase(jt);
    if (it->second.empty()) {
      restrictions_.erase(it);
    }
    for (auto& [key, ep] : episodes_) {
      for (auto& step : ep.steps) {
        if (step.lever == d.lever) {
          std::erase(step.targets, d.target_id);
        }
      }
      std::erase_if(ep.steps, [](const Step& s) { return s.targets.empty(); });
    }
    if (!anyQuota()) {
      quota_budget_ = 0;
    }
  }

  std::vector<AppliedAction> appliedList() const {
    std::vector<AppliedAction> out;
    for (const auto& [id, levers] : restrictions_) {
      for (const auto& [lever, r] : levers) {
        for (const std::string& owner : r.owners) {
          auto e = episodes_.find(owner);
          AppliedAction a;
          a.target_id = id;
          a.victim_id = e != episodes_.end() ? e->second.victim_id : "";
          a.lever = lever;
          a.rung = r.rung;
          a.applied_values = r.applied;
          a.original_values = r.original;
          out.push_back(std::move(a));
        }
      }
    }
    return out;
  }

  int64_t interval_ns_ = 0;
};

Result<Engine> Engine::create(Config config) {
  COLOD_TRY_VOID(validateConfig(config, "<config>"), "creating policy engine");
  return Engine(std::make_unique<EngineState>(std::move(config)));
}

Engine::Engine(std::unique_ptr<EngineState> state) : state_(std::move(state)) {}
Engine::Engine(Engine&&) noexcept = default;
Engine& Engine::operator=(Engine&&) noexcept = default;
Engine::~Engine() = default;

Result<void> Engine::setConfig(Config config) {
  COLOD_TRY_VOID(validateConfig(config, "<config>"), "new policy config rejected");
  const bool window_changed =
      config.detection.window_intervals != state_->config_.detection.window_intervals;
  state_->config_ = std::move(config);
  for (auto& [id, t] : state_->tracked_) {
    std::vector<std::string> problems;
    t.thresholds = effectiveThresholds(state_->config_, t.tier, t.info, &problems);
    if (window_changed) {
      state_->resetWindow(t);
    }
  }
  // Rungs beyond a shorter ladder cannot be escalated to; existing steps stay until relaxed.
  for (auto& [key, ep] : state_->episodes_) {
    const auto n = static_cast<int>(state_->ladder(ep.memory).size());
    ep.next_rung = std::min(ep.next_rung, n);
  }
  return ok();
}

const Config& Engine::config() const { return state_->config_; }

void Engine::upsertContainer(ContainerInfo info) { state_->upsert(std::move(info)); }

void Engine::removeContainer(std::string_view id) { state_->remove(id); }

RoundResult Engine::evaluate(const Snapshot& snapshot) { return state_->evaluate(snapshot); }

std::vector<Decision> Engine::restoreAll(int64_t now_ns) { return state_->restoreAll(now_ns); }

Result<void> Engine::seedApplied(std::span<const AppliedAction> actions, int64_t now_ns) {
  return state_->seed(actions, now_ns);
}

void Engine::reportApplyFailure(const Decision& decision) { state_->applyFailed(decision); }

std::vector<AppliedAction> Engine::applied() const { return state_->appliedList(); }

Result<ContainerView> Engine::describe(std::string_view id) const {
  auto it = state_->tracked_.find(id);
  if (it == state_->tracked_.end()) {
    return COLOD_ERR(ENOENT, "no container ", id);
  }
  const Tracked& t = it->second;
  ContainerView v;
  v.info = t.info;
  v.tier = t.tier;
  v.tier_source = t.tier_source;
  v.thresholds = t.thresholds;
  v.baseline_p99_us = t.has_baseline ? static_cast<uint64_t>(t.baseline) : 0;
  v.hits_in_window = t.cpu_hits;
  v.victim = state_->episodes_.count(episodeKey(id, false)) != 0 ||
             state_->episodes_.count(episodeKey(id, true)) != 0;
  for (const AppliedAction& a : state_->appliedList()) {
    if (a.target_id == id) {
      v.restrictions.push_back(a);
    }
  }
  v.last_explanation = t.last_explanation;
  return v;
}

EngineStats Engine::stats() const { return state_->stats_; }

}  // namespace colod::policy
