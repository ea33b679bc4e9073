// SPDX-License-Identifier: Apache-2.0
// Attribution: which BE containers are to blame for a victim's wait (issue 19). The evidence is
// kept per (victim, BE) over a window with decay, and counts only what the BE did where the
// victim waits: its preemptions of the victim, the wait they caused, and its run time on CPUs the
// victim may use. A BE pinned to CPUs disjoint from the victim's, that never preempted it, gets
// no blame; a bursty antagonist keeps its blame while idle; one preemption is not proof.
#include <algorithm>
#include <cmath>
#include <sstream>

#include "colod/policy/tier.h"
#include "engine_state.h"

namespace colod::policy {

namespace {

// Weight of the wait share in the score; the rest is the share of run time on the victim's CPUs.
constexpr double kWaitWeight = 0.7;
// Evidence below these (decayed) amounts is forgotten.
constexpr double kForgetPreemptions = 0.05;
constexpr double kForgetNs = 1000.0;

// Share of `be` (sorted) that lies in `victim` (sorted).
double overlapShare(const std::vector<int>& be, const std::vector<int>& victim) {
  if (be.empty()) {
    return 0.0;
  }
  size_t common = 0;
  auto v = victim.begin();
  for (int c : be) {
    while (v != victim.end() && *v < c) {
      ++v;
    }
    if (v != victim.end() && *v == c) {
      ++common;
    }
  }
  return static_cast<double>(common) / static_cast<double>(be.size());
}

std::string us(double ns) { return std::to_string(static_cast<uint64_t>(ns / 1000.0)) + " µs"; }

std::string count(double n) {
  std::ostringstream os;
  os << std::round(n * 10) / 10;
  return os.str();
}

}  // namespace

// Brings the victim's evidence to the current round: each round weighs 1 - 1/N of the next.
void EngineState::decayEvidence(Tracked& v) const {
  if (v.evidence_round == round_) {
    return;
  }
  const auto n = static_cast<double>(config_.actions.blame_window_intervals);
  const int64_t rounds = v.evidence_round == kNever ? 0 : round_ - v.evidence_round;
  // The window is time: it decays per timer tick (event rounds between ticks add evidence, not
  // time); the recent split decays per round.
  const int64_t ticks = v.evidence_tick == kNever ? 0 : ticks_ - v.evidence_tick;
  v.evidence_round = round_;
  v.evidence_tick = ticks_;
  if (rounds <= 0) {
    return;
  }
  const double d = std::pow(1.0 - 1.0 / n, static_cast<double>(ticks));
  for (auto it = v.blame.begin(); it != v.blame.end();) {
    BlameEvidence& e = it->second;
    e.preemptions *= d;
    e.wait_ns *= d;
    e.overlap_ns *= d;
    e.fresh_preemptions *= d;
    e.fresh_wait_ns *= d;
    e.behind_ns *= d;
    e.fresh_behind_ns *= d;
    if (e.preemptions < kForgetPreemptions && e.wait_ns < kForgetNs && e.overlap_ns < kForgetNs &&
        e.behind_ns < kForgetNs) {
      it = v.blame.erase(it);
    } else {
      ++it;
    }
  }
  WaitSplit& w = v.waits;
  w.preemptions *= d;
  w.be_ns *= d;
  w.self_ns *= d;
  w.displaced_ns *= d;
  w.foreign_ns *= d;
  w.fresh_ns *= d;
  const double recent = std::pow(1.0 - 1.0 / kRecentRounds, static_cast<double>(rounds));
  w.recent_be_ns *= recent;
  w.recent_other_ns *= recent;
  w.recent_host_ns *= recent;
  for (auto it = w.foreign_by.begin(); it != w.foreign_by.end();) {
    it->second *= d;
    it = it->second < kForgetNs ? w.foreign_by.erase(it) : std::next(it);
  }
}

void EngineState::startFreshEvidence(Tracked& v) {
  for (auto& [id, e] : v.blame) {
    e.fresh_preemptions = 0;
    e.fresh_wait_ns = 0;
    e.fresh_behind_ns = 0;
  }
  v.waits.fresh_ns = 0;
}

// Adds this interval's evidence of victim v: its attributed preemptions by aggressor, and the run
// time of every BE that ran on CPUs the victim may use.
void EngineState::accumulateEvidence(Tracked& v) {
  decayEvidence(v);
  const ContainerSample* s = v.sample;
  if (s == nullptr) {
    return;
  }
  WaitSplit& w = v.waits;
  v.attributed = v.attributed || !s->preempted_by.empty();
  double self_now = 0;  // placed after the BE walk below: its own, or displacement
  for (const Preemption& p : s->preempted_by) {
    w.preemptions += static_cast<double>(p.count);
    const auto wait = static_cast<double>(p.wait_ns);
    // The wait split counts the waits behind it too; the blame of one BE, its preemptions.
    const double all = wait + static_cast<double>(p.behind_ns);
    w.fresh_ns += all;
    if (p.aggressor_id == v.info.id) {
      self_now += all;
      continue;
    }
    auto it = index_.find(std::string_view(p.aggressor_id));
    if (it != index_.end() && touchable(*it->second)) {
      w.be_ns += all;
      w.recent_be_ns += all;
      BlameEvidence& e = v.blame[p.aggressor_id];
      e.behind_ns += static_cast<double>(p.behind_ns);
      e.fresh_behind_ns += static_cast<double>(p.behind_ns);
      e.be = it->second;
      e.preemptions += static_cast<double>(p.count);
      e.wait_ns += wait;
      e.fresh_preemptions += static_cast<double>(p.count);
      e.fresh_wait_ns += wait;
      continue;
    }
    // Host/system tasks, unknown or unlabelled cgroups, other LS, system or exclusive-CPU
    // containers: work colod does not control.
    w.foreign_ns += all;
    w.recent_other_ns += all;
    if (p.aggressor_id.empty()) {
      w.recent_host_ns += all;
    }
    w.foreign_by[p.aggressor_id.empty() ? std::string("host") : p.aggressor_id] += all;
  }
  bool victim_all = false;
  const std::vector<int>& victim_cpus = roundCpus(v, &victim_all);
  double be_here_ns = 0;   // BE's run time on CPUs the victim may use this round
  round_overlap_.clear();  // and each one's, for the displacement below
  // tracked_ and v.blame are both ordered by id: one merge walk, entries inserted at the hint.
  auto hint = v.blame.begin();
  for (Tracked* tp : running_be_) {
    Tracked& t = *tp;
    const std::string& id = t.info.id;
    while (hint != v.blame.end() && hint->second.be != tp && hint->first < id) {
      ++hint;
    }
    bool be_all = false;
    const std::vector<int>& be_cpus = roundCpus(t, &be_all);
    double share = 1.0;
    if (be_all) {
      share = victim_all ? 1.0
                         : static_cast<double>(victim_cpus.size()) /
                               static_cast<double>(std::max<size_t>(node_cpus_.size(), 1));
    } else if (!victim_all) {
      share = overlapShare(be_cpus, victim_cpus);
    }
    if (share <= 0) {
      continue;  // on CPUs the victim never uses: no blame for its run time
    }
    if (hint == v.blame.end() || (hint->second.be != tp && hint->first != id)) {
      hint = v.blame.emplace_hint(hint, id, BlameEvidence{});
    }
    hint->second.be = &t;
    hint->second.overlap_ns += share * static_cast<double>(t.sample->oncpu_ns);
    be_here_ns += share * static_cast<double>(t.sample->oncpu_ns);
    round_overlap_.emplace_back(&hint->second, share * static_cast<double>(t.sample->oncpu_ns));
    ++hint;
  }
  if (self_now <= 0) {
    return;
  }
  // Its tasks waited behind each other. That is BE's displacement, not its own contention, when
  // its CPUs were full and BE held half a CPU or more of them: without BE its tasks would have
  // spread onto that room. Colocation dynamic at 60 % of the node (session 24): the cpuset split
  // put both probe threads on the CPU it left the LS, "waits mostly behind itself" stopped the
  // ladder, and the LS starved (p99 1.3-3.2 s) while BE ran on the other CPU. A victim that
  // fills its CPUs by itself (more tasks than CPUs) stays behind itself.
  const double interval = static_cast<double>(std::max<int64_t>(interval_ns_, 1));
  const double cpus =
      std::min(static_cast<double>(victim_cpus.size()), quotaCpus(v.info.resources));
  const double own = static_cast<double>(s->oncpu_ns) / interval;
  const double be_here = be_here_ns / interval;
  const bool displaced = be_here >= 0.5 && own + be_here >= 0.9 * cpus;
  if (displaced) {
    w.displaced_ns += self_now;
    w.recent_be_ns += self_now;
    // Each BE that ran there takes its share of it, by its run time there, as waits behind it:
    // the evidence a rung against it needs (no BE preempted anyone; they held the room).
    for (const auto& [e, ns] : round_overlap_) {
      const double part = self_now * ns / be_here_ns;
      e->behind_ns += part;
      e->fresh_behind_ns += part;
    }
  } else {
    w.self_ns += self_now;
    w.recent_other_ns += self_now;
  }
}

const std::vector<int>& EngineState::roundCpus(Tracked& t, bool* all) {
  if (t.round_cpus_round != round_) {
    t.round_cpus_round = round_;
    t.round_cpus.clear();
    const std::vector<int>* list = &t.cpus;
    if (list->empty() || *list == node_cpus_) {
      list = nullptr;  // all of the node (the common case: no cpuset of its own)
    }
    std::vector<int> applied;
    if (auto it = restrictions_.find(t.info.id); it != restrictions_.end()) {
      if (auto jt = it->second.find(Lever::Cpuset); jt != it->second.end()) {
        auto parsed = parseCpuList(jt->second.applied.cpuset_cpus.value_or(""));
        if (parsed && !parsed->empty()) {
          applied = std::move(*parsed);
          list = &applied;
        }
      }
    }
    if (list != nullptr) {
      for (int c : *list) {
        if (std::binary_search(node_cpus_.begin(), node_cpus_.end(), c)) {
          t.round_cpus.push_back(c);
        }
      }
    }
    t.round_cpus_all = t.round_cpus.empty() || t.round_cpus.size() >= node_cpus_.size();
  }
  *all = t.round_cpus_all;
  return t.round_cpus_all ? node_cpus_ : t.round_cpus;
}

double EngineState::foreignShare(const Tracked& v) const {
  const WaitSplit& w = v.waits;
  const double total = w.total();
  return total > 0 ? w.foreign_ns / total : 0.0;
}

bool EngineState::behindUncontrolled(const Tracked& v) const {
  const WaitSplit& w = v.waits;
  const double total = w.total();
  const double f = config_.detection.self_wait_fraction;
  if (total <= 0 || w.self_ns + w.foreign_ns < f * total) {
    return false;
  }
  // Over the window it is behind others; unless over the last rounds BE is behind most of it,
  // and heavily: in each of them at least half of the victim's average wait per tick over the
  // window. A light BE's odd preemptions in a lull are not a BE turning busy (blame.sh light:
  // the quota rung capped a 5 % BE on two such rounds while the LS waited behind the host and
  // itself).
  const double recent = w.recent_be_ns + w.recent_other_ns;
  if (recent <= 0 || w.recent_other_ns >= f * recent) {
    return true;
  }
  const double per_tick =
      total / static_cast<double>(std::max(config_.actions.blame_window_intervals, 1));
  return w.recent_be_ns < 0.5 * per_tick * kRecentRounds;
}

// "62% behind uncontrolled work (host 40%, sys 22%), 30% behind BE (hog1 30%), 8% behind itself".
std::string EngineState::waitBehind(const Tracked& v) const {
  const WaitSplit& w = v.waits;
  const double total = w.total();
  if (total <= 0) {
    return "its wait is not attributed to anyone";
  }
  auto pct = [&](double x) {
    return std::to_string(static_cast<int>(std::lround(x * 100 / total)));
  };
  std::ostringstream os;
  os << pct(w.foreign_ns) << "% behind uncontrolled work";
  if (!w.foreign_by.empty()) {
    std::vector<std::pair<double, std::string>> top;
    for (const auto& [who, ns] : w.foreign_by) {
      top.emplace_back(ns, who);
    }
    std::sort(top.begin(), top.end(), [](const auto& a, const auto& b) {
      return a.first != b.first ? a.first > b.first : a.second < b.second;
    });
    os << " (";
    for (size_t i = 0; i < top.size() && i < 3; ++i) {
      os << (i > 0 ? ", " : "") << top[i].second << " " << pct(top[i].first) << "%";
    }
    os << ")";
  }
  os << ", " << pct(w.be_ns + w.displaced_ns) << "% behind BE";
  std::vector<std::pair<double, std::string>> be;
  for (const auto& [id, e] : v.blame) {
    if (e.wait_ns + e.behind_ns > 0) {
      be.emplace_back(e.wait_ns + e.behind_ns, id);
    }
  }
  std::sort(be.begin(), be.end(), [](const auto& a, const auto& b) {
    return a.first != b.first ? a.first > b.first : a.second < b.second;
  });
  if (!be.empty()) {
    os << " (";
    for (size_t i = 0; i < be.size() && i < 3; ++i) {
      os << (i > 0 ? ", " : "") << be[i].second << " " << pct(be[i].first) << "%";
    }
    os << ")";
  }
  if (w.displaced_ns > 0) {
    os << " (" << pct(w.displaced_ns)
       << "% of all its own tasks queued while BE held CPUs they could use)";
  }
  os << ", " << pct(w.self_ns) << "% behind itself";
  return os.str();
}

bool EngineState::judgedUseless(const Tracked& v,
                                Lever lever,
                                const std::vector<Antagonist>& antagonists,
                                std::string* why) const {
  auto it = v.useless.find(lever);
  if (it == v.useless.end()) {
    return false;
  }
  std::set<std::string> now;
  for (const Antagonist& a : antagonists) {
    now.insert(a.id);
  }
  const UselessRung& u = it->second;
  if (now != u.antagonists) {
    return false;  // other antagonists: the rung may help against them
  }
  if (u.foreign_share > 0 && foreignShare(v) < 0.5 * u.foreign_share) {
    return false;  // the uncontrolled work that masked it has fallen away
  }
  if (why != nullptr) {
    *why = u.why;
  }
  return true;
}

// Ranks BE antagonists of a victim by the evidence over the blame window. Returns empty if the
// latency is self-inflicted or behind uncontrolled work, or the evidence is too thin (and adds a
// finding saying why).
std::vector<Antagonist> EngineState::rank(Tracked& victim,
                                          bool memory,
                                          std::vector<Finding>& findings,
                                          bool on_top) {
  std::vector<Antagonist> out;
  const ContainerSample* s = victim.sample;
  if (s == nullptr) {
    return out;
  }
  const auto& ac = config_.actions;
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
    decayEvidence(victim);
    const WaitSplit& w = victim.waits;
    if (behindUncontrolled(victim)) {
      // Nobody is ranked this time: a verdict from an earlier ranking ("blamed") would tell
      // `coloctl explain` the opposite of what the engine does now.
      for (auto& [id, e] : victim.blame) {
        e.score = 0;
        e.verdict = Verdict::OtherWait;
      }
      if (w.self_ns >= w.foreign_ns) {
        ++stats_.self_inflicted;
        findings.push_back({victim.info.id, "self_inflicted_contention",
                            displayName(victim.info) + " waits mostly behind itself (" +
                                waitBehind(victim) + "): BE is not restricted"});
      } else if (!victim.foreign_said) {
        // Once per episode of foreign wait: BE stays where the last verified rung left it.
        victim.foreign_said = true;
        ++stats_.foreign_wait_episodes;
        findings.push_back({victim.info.id, "uncontrolled_wait",
                            displayName(victim.info) +
                                " waits behind uncontrolled work: " + waitBehind(victim) +
                                "; BE is kept where it is and nothing escalates"});
      }
      return out;
    }
    return rankCpu(victim, findings, on_top);
  }
  std::sort(out.begin(), out.end(), [](const Antagonist& a, const Antagonist& b) {
    if (a.score != b.score) {
      return a.score > b.score;
    }
    return a.id < b.id;
  });
  std::vector<Antagonist> kept;
  for (auto& a : out) {
    if (static_cast<int>(kept.size()) >= ac.max_antagonists || a.score < ac.min_antagonist_score) {
      break;
    }
    kept.push_back(std::move(a));
  }
  if (kept.empty()) {
    findings.push_back({victim.info.id, "no_antagonist",
                        displayName(victim.info) +
                            " is over its threshold but no BE container has at least " +
                            std::to_string(static_cast<int>(ac.min_antagonist_score * 100)) +
                            "% of the evidence"});
  }
  return kept;
}

// The CPU ranking over the window's evidence. Cheap per entry (a victim may hold evidence
// against every BE that ran on its CPUs): scores and verdicts only; names and sentences are made
// for the few that are ranked, and describe() words the verdicts.
std::vector<Antagonist> EngineState::rankCpu(Tracked& victim,
                                             std::vector<Finding>& findings,
                                             bool on_top) {
  const auto& ac = config_.actions;
  // No attribution at all (the collector never attributed a wait, of any container): run time
  // on its CPUs alone. Once it does, a victim none of whose wait is attributed yet has no
  // evidence against anyone: blame.sh's light trial restricted a light BE 50 ms after it
  // started, on run time alone, when the LS had just begun to wait behind the host.
  const bool attributed = victim.attributed || attribution_seen_;
  // A BE that has not run for half the blame window keeps its evidence (a bursty antagonist
  // sleeps between bursts and is blamed when it runs again), but is not blamed for a wait while
  // it sleeps: a vm e2e run restricted a hog paused for seconds on its old evidence when the LS
  // waited behind the harness.
  const int64_t idle_after = std::max(ac.blame_window_intervals / 2, 1);
  auto idle = [&](const BlameEvidence& e) {
    return e.be != nullptr && e.be->last_ran_tick != kNever &&
           ticks_ - e.be->last_ran_tick > idle_after;
  };
  double be_wait = 0;
  double overlap = 0;
  for (const auto& [id, e] : victim.blame) {
    if (!idle(e)) {
      be_wait += e.wait_ns + e.behind_ns;
      overlap += e.overlap_ns;
    }
  }
  if (be_wait <= 0 && overlap <= 0) {
    findings.push_back({victim.info.id, "no_cpu_antagonist",
                        displayName(victim.info) +
                            " is over its threshold but no BE container that ran lately ran on "
                            "its CPUs or preempted it: nothing to do"});
    return {};
  }
  const double w_wait = attributed && be_wait > 0 ? kWaitWeight : 0.0;
  const double w_run = overlap > 0 ? 1.0 - w_wait : 0.0;
  const double norm = w_wait + w_run;
  const double min_wait_ns = static_cast<double>(ac.min_blame_wait_us) * 1000.0;
  const double behind_min = behindMinimum(victim);
  struct Candidate {
    double score;
    const std::string* id;
    BlameEvidence* e;
  };
  std::vector<Candidate> ranked;
  Candidate thin{0.0, nullptr, nullptr};  // the strongest BE short of the minimum evidence
  bool thin_since = false;                // some BE short of it since the last rung (on_top)
  for (auto& [id, e] : victim.blame) {
    if (e.be == nullptr || !touchable(*e.be)) {
      e.score = 0;
      e.verdict = Verdict::NotBe;
      continue;
    }
    if (idle(e)) {
      e.score = 0;
      e.verdict = Verdict::Idle;
      continue;
    }
    double score = 0;
    if (w_wait > 0) {
      score += w_wait * (e.wait_ns + e.behind_ns) / be_wait;
    }
    if (w_run > 0) {
      score += w_run * e.overlap_ns / overlap;
    }
    e.score = norm > 0 ? score / norm : 0.0;
    e.behind_min_ns = behind_min;
    if (attributed && (e.preemptions < ac.min_blame_preemptions || e.wait_ns < min_wait_ns) &&
        e.behind_ns < behind_min) {
      e.verdict = Verdict::Thin;
      if (thin.e == nullptr || e.score > thin.score) {
        thin = {e.score, &id, &e};
      }
      continue;
    }
    // On top of rungs in force, the minimum counts what happened under them: evidence from
    // before the last rung is what that rung answered (the antagonist it moved is not blamed
    // again for preemptions it can no longer make, nor a light BE beside it on their strength).
    if (on_top && attributed &&
        (e.fresh_preemptions < ac.min_blame_preemptions || e.fresh_wait_ns < min_wait_ns) &&
        e.fresh_behind_ns < behind_min) {
      e.verdict = Verdict::ThinSince;
      thin_since = true;
      continue;
    }
    // ... and what the BE is behind must be a real part of the victim's wait under them: a light
    // BE's bursts that make a few of the LS's wakeups wait are not what holds it over its
    // threshold when most of its wait is behind itself or the host.
    if (on_top && attributed && victim.waits.fresh_ns > 0 &&
        e.fresh_wait_ns + e.fresh_behind_ns < kOnTopMinShare * victim.waits.fresh_ns) {
      e.verdict = Verdict::MinorSince;
      e.fresh_share = (e.fresh_wait_ns + e.fresh_behind_ns) / victim.waits.fresh_ns;
      thin_since = true;
      continue;
    }
    if (e.score <= 0) {
      e.verdict = Verdict::NoEvidence;
      continue;
    }
    e.verdict = e.score < ac.min_antagonist_score ? Verdict::BelowCutoff : Verdict::NotTop;
    if (e.verdict == Verdict::NotTop) {
      ranked.push_back({e.score, &id, &e});
    }
  }
  if (ranked.empty() && thin_since) {
    findings.push_back({victim.info.id, "not_enough_evidence",
                        displayName(victim.info) +
                            " is still over its threshold, but no BE has enough evidence since "
                            "the last rung was applied (at least " +
                            count(ac.min_blame_preemptions) + " preemptions and " +
                            std::to_string(ac.min_blame_wait_us) +
                            " µs of the victim's wait under the rungs in force, and " +
                            std::to_string(static_cast<int>(kOnTopMinShare * 100)) +
                            "% of all it waited since; " + waitBehind(victim) +
                            "): nothing more restricted"});
    return {};
  }
  if (ranked.empty() && thin.e != nullptr) {
    findings.push_back({victim.info.id, "not_enough_evidence",
                        displayName(victim.info) +
                            " is over its threshold but there is not enough evidence: " +
                            displayName(thin.e->be->info) + ": " + evidenceText(*thin.e) +
                            " (a BE is blamed with at least " + count(ac.min_blame_preemptions) +
                            " preemptions and " + std::to_string(ac.min_blame_wait_us) +
                            " µs of the victim's wait, or " + us(behind_min) +
                            " waited behind it); nothing restricted"});
    return {};
  }
  const size_t top = std::min(ranked.size(), static_cast<size_t>(ac.max_antagonists));
  std::partial_sort(ranked.begin(), ranked.begin() + static_cast<std::ptrdiff_t>(top), ranked.end(),
                    [](const Candidate& a, const Candidate& b) {
                      return a.score != b.score ? a.score > b.score : *a.id < *b.id;
                    });
  std::vector<Antagonist> kept;
  for (size_t i = 0; i < top; ++i) {
    BlameEvidence& e = *ranked[i].e;
    if (ranked[i].score < kSecondaryShareOfTop * ranked[0].score) {
      // Far behind the first: restricted later, on top, if the victim still waits behind it.
      e.verdict = Verdict::Secondary;
      e.top_score = ranked[0].score;
      continue;
    }
    e.verdict = Verdict::Blamed;
    Antagonist a;
    a.id = *ranked[i].id;
    a.name = displayName(e.be->info);
    a.preemptions = static_cast<uint64_t>(std::lround(e.preemptions));
    a.wait_ns = static_cast<uint64_t>(e.wait_ns + e.behind_ns);
    a.oncpu_ns = static_cast<uint64_t>(e.overlap_ns);
    a.score = e.score;
    kept.push_back(std::move(a));
  }
  if (kept.empty()) {
    findings.push_back({victim.info.id, "no_antagonist",
                        displayName(victim.info) +
                            " is over its threshold but no BE container has at least " +
                            std::to_string(static_cast<int>(ac.min_antagonist_score * 100)) +
                            "% of the evidence (" + waitBehind(victim) + ")"});
  }
  return kept;
}

// A light BE's bursts put a woken request behind them now and then; a busy hog keeps the victim's
// tasks queued. How deep they queue (this round's queue depth, or the detection window's mean
// wait load if higher) says which: the deeper, the less waiting behind a BE it takes to blame
// it without preemptions (colocation busy: the hog's harm is almost all waits behind it, and
// 20 ms of them took most of colod's reaction). The LS of blame.sh's light and cache trials,
// over its threshold behind their bursts, read 0.04-0.23 tasks deep at the decision.
double EngineState::behindMinimum(const Tracked& victim) const {
  const double base =
      kBehindBlameFactor * static_cast<double>(config_.actions.min_blame_wait_us) * 1000.0;
  const double load = std::max(victim.queue_depth, meanWindowWait(victim));
  if (load <= kBehindHurtLoad) {
    return base;
  }
  return base * std::max(kBehindHurtLoad / load, kBehindFloorShare);
}

std::string EngineState::evidenceText(const BlameEvidence& e) {
  return count(e.preemptions) + " preemptions, " + us(e.wait_ns) + " wait, " + us(e.behind_ns) +
         " waited behind it after wakeups, " + us(e.overlap_ns) +
         " on the victim's CPUs over the blame window";
}

std::string EngineState::verdictText(const BlameEvidence& e) const {
  const auto& ac = config_.actions;
  const std::string pct = std::to_string(static_cast<int>(e.score * 100)) + "% of the evidence";
  switch (e.verdict) {
    case Verdict::Unranked:
      return "not ranked yet (" + evidenceText(e) + ")";
    case Verdict::NotBe:
      return "not a BE container colod may restrict";
    case Verdict::Thin:
      return "not enough evidence: " + evidenceText(e) + " (needs " +
             count(ac.min_blame_preemptions) + " preemptions and " +
             std::to_string(ac.min_blame_wait_us) + " µs of wait, or " + us(e.behind_min_ns) +
             " waited behind it)";
    case Verdict::ThinSince:
      return "not enough evidence since the last rung was applied: " + count(e.fresh_preemptions) +
             " preemptions, " + us(e.fresh_wait_ns) + " wait, " + us(e.fresh_behind_ns) +
             " waited behind it under the rungs in force (needs " +
             count(ac.min_blame_preemptions) + " preemptions and " +
             std::to_string(ac.min_blame_wait_us) + " µs of wait, or " + us(e.behind_min_ns) +
             " waited behind it); before them: " + evidenceText(e);
    case Verdict::MinorSince:
      return "behind too small a part of the victim's wait since the last rung was applied: " +
             std::to_string(static_cast<int>(std::lround(e.fresh_share * 100))) + "% (" +
             count(e.fresh_preemptions) + " preemptions, " + us(e.fresh_wait_ns) + " wait, " +
             us(e.fresh_behind_ns) + " waited behind it; needs " +
             std::to_string(static_cast<int>(kOnTopMinShare * 100)) +
             "% of all it waited under the rungs in force); before them: " + evidenceText(e);
    case Verdict::NoEvidence:
      return "no evidence: it neither preempted the victim nor ran on its CPUs";
    case Verdict::Blamed:
      return pct + ", " + evidenceText(e);
    case Verdict::BelowCutoff:
      return "below the cut-off: " + pct + " < " +
             std::to_string(static_cast<int>(ac.min_antagonist_score * 100)) + "% (" +
             evidenceText(e) + ")";
    case Verdict::Idle:
      return "idle: it has not run for " +
             std::to_string(std::max(ac.blame_window_intervals / 2, 1)) +
             " intervals, so the wait now is not behind it (its evidence is kept: " +
             evidenceText(e) + ")";
    case Verdict::OtherWait:
      return "not ranked: the victim's wait is mostly behind itself or work colod does not "
             "control (" +
             evidenceText(e) + ")";
    case Verdict::Secondary:
      return "far behind the top antagonist: " + pct + " against its " +
             std::to_string(static_cast<int>(e.top_score * 100)) +
             "% (a BE is blamed with it from half of its evidence; if the victim still waits " +
             "behind this one once the top one is restricted, a rung on top restricts it): " +
             evidenceText(e);
    case Verdict::NotTop:
      return "not among the top " + std::to_string(ac.max_antagonists) + ": " + pct + " (" +
             evidenceText(e) + ")";
  }
  return {};
}

}  // namespace colod::policy
