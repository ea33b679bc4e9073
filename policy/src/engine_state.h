// SPDX-License-Identifier: Apache-2.0
// The engine's private state, shared by the files that implement it (not in include/: nothing
// outside policy/src sees it). One EngineState per Engine; its parts live in
//   engine.cpp       the facade, the registry and the round (evaluate, restore, seed, applied)
//   detection.cpp    victim intervals, K of N, episodes started
//   attribution.cpp  who is to blame: the evidence per (victim, BE) and the ranking
//   levers.cpp       the restricted value of one lever (shares, cpuset placement, memory)
//   quota.cpp        the aggregate BE quota budget
//   ladder.cpp       engage / escalate / verify / undo, BE joining a restriction
//   relax.cpp        holding and giving back
//   admission.cpp    admission placement of a BE container being created
//   explanation.cpp  sentences, evidence, describeValues, Engine::describe
#pragma once

#include <algorithm>
#include <array>
#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "colod/policy/engine.h"

namespace colod::policy {

inline constexpr int64_t kNever = -1'000'000'000;

inline constexpr int kMaxRelaxBackoff = 8;
// A BE container counts as running when it used at least this share of one CPU in the interval.
inline constexpr double kRunningCpuFraction = 0.01;
// A restricted BE set saturates its allowance when it uses at least this share of it ...
inline constexpr double kSaturatedFraction = 0.9;
// ... or when this many of its tasks wait for a CPU on average over a tick (Tracked::rate_waiting):
// it would take more than it gets. What it gets can read under kSaturatedFraction of the
// allowance while it queues: an LS thread on its CPU, or on-CPU time credited in lumps over
// short event rounds (the colocation benchmark gave an admission split back at 0.89 of its CPU
// with 3 BE tasks queued, and the LS waited 130 ms before the split was made again).
inline constexpr double kQueuedBeTasks = 0.5;
// The LS demand "fits" its weighted share of the node when it is at most this share of it.
inline constexpr double kFitsShareFraction = 0.8;
// Waits behind a BE alone (no preemptions) are enough evidence from this many times
// min_blame_wait_us of them over the window (BlameEvidence::behind_ns) ...
inline constexpr double kBehindBlameFactor = 20;
// ... and from less the more the victim waits (behindMinimum()): the minimum is scaled by
// kBehindHurtLoad / (its queue depth, or the detection window's mean wait load if higher),
// down to kBehindFloorShare of it. A busy hog puts an LS's tasks 1.35-1.54 deep in the run queue
// (colocation busy phases); the LS that blame.sh's light and cache BE put behind their bursts
// now and then read 0.04-0.23 tasks deep when they were blamed (session 18: a flat 5 ms minimum
// blamed them in 3 of 6 trials).
inline constexpr double kBehindHurtLoad = 0.25;
inline constexpr double kBehindFloorShare = 0.25;
// A victim's queue depth (Tracked::queue_depth) is its wait over this span at least: a round can
// follow the last by a millisecond (an event round right after a timer tick), and one request's
// 3 ms wait credited in it would read 3 tasks deep.
inline constexpr int64_t kDepthSpanNs = 20'000'000;
// A rung on top restricts a BE behind at least this share of all the victim's attributed wait
// under the rungs in force (behind BE, itself and uncontrolled work). Less, and the rest of the
// wait is what holds the victim over its threshold: blame.sh light and cache capped a light BE
// on top of the antagonist's placement with 6-10 % of the LS's wait behind it (session 17).
inline constexpr double kOnTopMinShare = 0.25;
// A BE is blamed beside the top antagonist only with at least this share of its score: the most
// guilty first, the others on top if the victim still waits behind them (rungs on top count only
// what happened under the rungs in force). blame.sh cache t2 (session 17) moved a light BE with
// 28 % of the evidence beside the antagonist's 71 %; two hogs alike are blamed together.
inline constexpr double kSecondaryShareOfTop = 0.5;
// Tracked::peak_cpus decays by 1 / (this many blame windows) per round.
inline constexpr int kPeakMemoryWindows = 3;
// Rounds kept for the on-CPU rate (Tracked::rate): event rounds are >= 20 ms apart, so a 100 ms
// tick holds at most a few of them.
inline constexpr size_t kRateRounds = 8;
// Rounds in the victim's recent wait split (WaitSplit::recent_*): each weighs 1 - 1/N of the next.
inline constexpr double kRecentRounds = 3;
// A victim's evidence untouched for this many blame windows is brought to now (and what has
// decayed away erased) even if the victim is not hurt: after 10 windows a weight is e^-10 of
// what it was, so its entries go within 10-20 windows of its last hurt.
inline constexpr int64_t kEvidenceSweepWindows = 10;

// The evidence against one BE for one victim, summed over the blame window with decay
// (attribution.cpp): only what the BE did where the victim waits.
struct Tracked;

// The latest ranking's verdict on one BE for one victim (describe() words it).
enum class Verdict : uint8_t {
  Unranked,     // evidence gathered, not ranked yet
  NotBe,        // no longer a BE container colod may restrict
  Thin,         // below min_blame_preemptions / min_blame_wait_us
  NoEvidence,   // neither preempted the victim nor ran on its CPUs
  Blamed,       // ranked as an antagonist
  BelowCutoff,  // under min_antagonist_score
  NotTop,       // not among the top max_antagonists
  Idle,         // has not run for half the blame window: the wait now is behind something else
  OtherWait,    // not ranked: the victim's wait is mostly behind itself or uncontrolled work
  ThinSince,    // escalating on top of a rung: too little evidence since that rung was applied
  MinorSince,   // on top of a rung: behind too small a share of the victim's wait since it
  Secondary,    // ranked, but under kSecondaryShareOfTop of the top antagonist's score
};

struct BlameEvidence {
  const Tracked* be = nullptr;  // the BE (its map node; entries are erased with it)
  double preemptions = 0;       // preemptions of the victim by it
  double wait_ns = 0;           // the victim's wait attributed to it
  double overlap_ns = 0;  // its run time on CPUs the victim may use (by the share that overlaps)
  // The same preemptions and wait gathered since the victim's last rung was applied (decayed
  // alike): a rung on top is justified by what happened under the rungs in force, not by what
  // they already answered (issue 19: a light BE was capped on top of the antagonist's move).
  double fresh_preemptions = 0;
  double fresh_wait_ns = 0;
  // The victim's waits after a wakeup while it held the CPU (Preemption::behind_ns), over the
  // window and since the last rung. A busy hog's harm is mostly this; alone it is evidence only
  // from kBehindBlameFactor x min_blame_wait_us on (a light BE's bursts put a woken request
  // behind it now and then: blame.sh light and cache, session 16).
  double behind_ns = 0;
  double fresh_behind_ns = 0;
  // The minimum of behind_ns that was evidence alone at the latest ranking (behindMinimum()).
  double behind_min_ns = 0;
  // Its share of all the victim's wait since the last rung (set with Verdict::MinorSince).
  double fresh_share = 0;
  // The top antagonist's score (set with Verdict::Secondary).
  double top_score = 0;
  // Latest ranking: its share of the evidence and the verdict (for describe()).
  double score = 0;
  Verdict verdict = Verdict::Unranked;
};

// The victim's attributed wait over the blame window, by whom it waited behind.
struct WaitSplit {
  double preemptions = 0;  // every attributed preemption (0: no attribution available)
  double be_ns = 0;        // behind BE containers colod may restrict
  double self_ns = 0;      // behind its own tasks
  // Behind its own tasks in rounds where they would all have had a CPU of their own but BE ran
  // on its CPUs: BE's displacement, not the victim's own contention (accumulateEvidence).
  double displaced_ns = 0;
  double foreign_ns = 0;  // behind work colod does not control
  // The foreign part by aggressor ("host" for root/system tasks, else the container id).
  std::map<std::string, double, std::less<>> foreign_by;
  // The same split over the last few rounds (kRecentRounds): a BE that has just turned busy is
  // behind most of the wait now while the window still remembers seconds of the host's
  // (colocation busy phases: the engage waited 1.3 s for the window to turn).
  double recent_be_ns = 0;
  double recent_other_ns = 0;  // itself and work colod does not control
  double recent_host_ns = 0;   // of which behind the host (root/system tasks)
  // All of it since the last rung was applied (decayed like the window): what a rung on top
  // weighs a BE's fresh evidence against (kOnTopMinShare).
  double fresh_ns = 0;

  // Every attributed wait over the window (the split's denominator).
  [[nodiscard]] double total() const { return be_ns + self_ns + displaced_ns + foreign_ns; }
  // The part of it behind the host (root/system tasks).
  [[nodiscard]] double hostNs() const {
    const auto it = foreign_by.find("host");
    return it == foreign_by.end() ? 0.0 : it->second;
  }
};

// A rung verification judged useless for a victim, with the evidence it was judged on: it is not
// retried for that victim until the evidence changes (another antagonist set, or the foreign
// share of the wait falls below half of what it was).
struct UselessRung {
  std::set<std::string> antagonists;
  double foreign_share = 0;
  std::string why;
  bool said = false;  // the rung_not_retried finding was given for this judgement
};

// Per-container state. Bounded: one entry per registered container, fixed-size window.
struct Tracked {
  ContainerInfo info;
  Tier tier = Tier::Unknown;
  std::string tier_source;
  Thresholds thresholds;
  // Parsed cpuset, sorted; empty = unknown or every CPU of the node (kept empty: upsert()).
  std::vector<int> cpus;
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
  // Upserted as a registry change (Engine::upsertContainer), not only admitted at creation: an
  // absent_quiet snapshot's quiet interval is for these (the caller measures what it registered;
  // an admitted container is not in its registry yet).
  bool registered = false;
  bool cpu_hit = false;
  bool mem_hit = false;
  uint64_t p99 = 0;
  uint64_t threshold = 0;
  bool p99_hit = false;    // the hit came from p99 (else from the wait signal or PSI)
  double wait_load = 0;    // average number of its tasks waiting this interval
  double wait_share = 0;   // wait / (wait + on-CPU) this interval
  double queue_depth = 0;  // its wait over max(interval, kDepthSpanNs): tasks waiting
  bool severe = false;     // over threshold on the wait signal >= severe_wait_load deep this round
  std::vector<double> wait_ring;            // wait load of the last window_intervals intervals
  ContainerSample const* sample = nullptr;  // valid during evaluate() only
  // On-CPU rate in CPUs over the last rounds spanning at least one timer tick (cpusUsed()). The
  // BPF side credits CPU time when a task switches out, so one round's on-CPU may hold a slice
  // that ran before it: over a 20-30 ms event round a 5 % BE read 0.24 CPUs and a moved hog 3.75
  // of its 1 CPU. Over a tick's span the lumps are small; never above the CPUs it may use.
  struct RateRound {
    int64_t span_ns = 0;
    uint64_t oncpu_ns = 0;
    uint64_t wait_ns = 0;
  };
  std::array<RateRound, kRateRounds> rate_rounds{};
  size_t rate_first = 0;
  size_t rate_count = 0;
  int64_t rate_span_ns = 0;
  uint64_t rate_oncpu_ns = 0;
  uint64_t rate_wait_ns = 0;
  double rate_cpus = 0;
  double rate_waiting = 0;  // its tasks waiting for a CPU on average over the same rounds
  double last_cpus = 0;     // recent on-CPU in CPUs, decaying (read between rounds: admission)
  // Peak on-CPU in CPUs, decaying over about kPeakMemoryWindows blame windows: what a BE on
  // CPUs colod moves another container onto needs when it runs (moveQuota(); a duty-cycled BE
  // idle at the move still counts).
  double peak_cpus = 0;
  uint64_t memory_growth = 0;
  std::optional<uint64_t> last_memory;
  // As a target.
  int64_t last_change_round = kNever;
  // Relax backoff (anti-flapping): grows when the victim is hurt again soon after a relax. In
  // timer ticks, as the quiet streak: counted in rounds, a loaded node's wakeup rounds closed
  // the "soon after" window early and the backoff did not grow.
  int relax_backoff = 1;
  int64_t last_relax_tick = kNever;
  // Its on-CPU demand when a relax last hurt it again (relax_backoff grew): while it still asks
  // for half of that, a saturating BE's rung is held (relaxWouldHurt()).
  double rehurt_cpus = 0;
  // Ladder index of the last rung verified to help (cpu), -1 if none: when the victim is hurt
  // again soon after a relax, the next episode starts there instead of replaying rungs that
  // did not help.
  int effective_rung = -1;
  // Per lever: the values of our latest restriction and the original they replaced.
  std::map<Lever, Resources> last_applied;
  std::map<Lever, Resources> last_original;
  std::string last_explanation;
  // As a BE: the last round it ran (>= kRunningCpuFraction of a CPU), and its CPUs on the node
  // in round round_cpus_round (cached for attribution; round_cpus_all: all of the node's).
  int64_t last_ran_round = kNever;
  // The same in timer ticks: windows of time ("ran within the blame window", "idle for N
  // intervals") count ticks, as verification does; event rounds, 20 ms apart while a victim
  // waits, shrank a 3 s window to 0.6 s (blame.sh light: a light BE starved for half a second
  // was taken as newly started and joined a cpuset rung).
  int64_t last_ran_tick = kNever;
  // The tick admit() saw it created (kNever: known from a synchronization or the journal). A BE
  // created within the blame window was judged at its creation against the LS seen running
  // then, not against one seen since (admit(), case 2).
  int64_t admitted_tick = kNever;
  // The last tick its CFS quota throttled it (cpu.stat nr_throttled went up): a cap that has
  // not throttled it for a while and sits well above its use holds nothing back.
  int64_t last_throttled_tick = kNever;
  int64_t round_cpus_round = kNever;
  bool round_cpus_all = true;
  std::vector<int> round_cpus;
  // As a victim: blame evidence per BE id and its wait by whom, decayed to evidence_tick (the
  // window) and evidence_round (the recent split).
  std::map<std::string, BlameEvidence, std::less<>> blame;
  WaitSplit waits;
  int64_t evidence_round = kNever;
  int64_t evidence_tick = kNever;
  bool foreign_said = false;  // the uncontrolled_wait finding was given for this foreign episode
  // Its preemptions were attributed at least once: the collector attributes them, so a BE
  // without preemptions of it has not made it wait (never blamed by run time alone).
  bool attributed = false;
  std::map<Lever, UselessRung> useless;  // cpu rungs verification judged useless
  bool exhausted_said = false;  // ladder_exhausted was said for the current stretch of hurt
};

// One lever applied to one target, shared by the episodes (victims) that asked for it.
struct Restriction {
  Lever lever = Lever::CpuShares;
  int rung = 0;
  Resources applied;
  Resources original;
  std::set<std::string> owners;  // episode keys
  double blame = 0;              // cpu_quota: its share of the blame (the budget is split by it)
  // An idle hold (cpuset only, actions.idle_hold_intervals): its last owner relaxed while the BE
  // was idle, so it stays off the victim's CPUs, owned by no episode, until it runs, the hold
  // ends, or a new episode takes it over (heldCpusetShared). kNever while owned.
  int64_t idle_since_tick = kNever;
  std::string idle_victim;    // the victim it last protected (journal, explain)
  bool idle_end_now = false;  // it sits on a new victim's CPUs: given back this round
  [[nodiscard]] bool idleHold() const { return idle_since_tick != kNever; }
};

struct Step {
  Lever lever = Lever::CpuShares;
  int rung = 0;
  std::vector<std::string> targets;
  std::vector<Antagonist> antagonists;
  // BE containers that ran within the blame window before the step was applied and were left
  // alone (benign by the evidence): only BE that was not running at all then and starts later
  // joins the step (extendSteps). A duty cycle is not a start.
  std::set<std::string> running_at_apply;
  bool running_known = false;  // false for a step seeded from the journal until its first round
  // The timer tick it was applied in (or seeded from the journal): "idle since" is time.
  int64_t applied_tick = kNever;
  // Rebuilt from the journal after a restart: in force since before it, however recent
  // applied_tick, so it has had its time to work (the settle rule does not wait on it).
  bool seeded = false;
  // The quota step uncontrolled_cap.cpp takes: one step, never tightened.
  bool uncontrolled_cap = false;
};

enum class Phase { Verifying, Holding };

struct Episode {
  std::string victim_id;
  bool memory = false;
  std::vector<Step> steps;  // applied, in order
  int next_rung = 0;        // ladder index to try next
  Phase phase = Phase::Verifying;
  int64_t verify_until = 0;  // in timer ticks (EngineState::ticks_)
  int verify_hits = 0;
  int verify_intervals = 0;
  uint64_t verify_p99_sum = 0;
  uint64_t start_p99 = 0;  // p99 when the current step was applied
  double start_wait = 0;   // victim wait load before the current step (window mean)
  double verify_wait_sum = 0;
  double start_cpus = 0;  // the victim's on-CPU when the current step was applied
  double verify_cpus_sum = 0;
  uint64_t engaged_p99 = 0;  // p99 when the episode began
  int64_t last_relax_tick = kNever;
  // Quiet counts from this timer tick on (kNever: from the victim's last hit). An episode opened at
  // admission prevents a wait that has not happened yet: the intervals the victim was quiet
  // before the placement say nothing about whether the new BE would hurt it.
  int64_t quiet_from_tick = kNever;
  int escalations = 0;
  bool exhausted = false;
  bool victim_gone = false;
  bool relax_held = false;  // the relax_held finding was given for the current hold
  bool budget_held = false;  // the same, for a budget another victim still needs
  bool stop_said = false;   // the ladder_stopped finding was given for the current hold
  std::string stop_why;     // why the last escalation attempt changed nothing
};
// A container's CPU weight as CFS shares it (cpu.shares; unknown: the kernel's default 1024).
inline double cpuWeight(const Tracked& t) {
  return static_cast<double>(t.info.resources.cpu_shares.value_or(1024));
}
// "<victim>#cpu" / "<victim>#mem": the key of an episode.
std::string episodeKey(std::string_view victim, bool memory);
// "namespace/pod/container", or the id when the pod is unknown.
std::string displayName(const ContainerInfo& info);
// The fields of `r` that `lever` moves.
Resources leverValues(const Resources& r, Lever lever);
// For restoring: an unknown original becomes the "unlimited"/default value of the lever.
Resources restoreValues(const Resources& original, Lever lever, const std::vector<int>& node);
// The value of a lever for a person: "cpu.shares 2", "cpuset 1", "CFS quota 20000/100000 µs",
// "CFS quota max" (no quota is always written "max"), "memory limit max".
std::string describeValues(const Resources& r, Lever lever);

class EngineState {
 public:
  explicit EngineState(Config config) : config_(std::move(config)) {}

  enum class RungResult { Applied, NothingToDo, Deferred };

  // engine.cpp
  // registered: a registry change (false from admit(): it does not clear an earlier true).
  void upsert(ContainerInfo info, bool registered);
  // Forgets the containers admitted at creation that the registry has not listed, and that
  // had no sample, within kCreationGraceNs of their admission (see admitted_unlisted_). Called
  // once this round's samples are set.
  void forgetNeverCreated(int64_t now_ns, std::vector<Finding>& findings);
  void setNodeCpus(std::vector<int> cpus);
  void remove(std::string_view id);
  void dropTarget(std::string_view id);
  void resetWindow(Tracked& t) const;
  RoundResult evaluate(const Snapshot& snap);
  std::vector<Decision> restoreAll(int64_t now_ns);
  Result<void> seed(std::span<const AppliedAction> actions, int64_t now_ns);
  void applyFailed(const Decision& d);
  std::vector<AppliedAction> appliedList() const;
  // Whether `victim` has an episode: episodeKey()'s key built on the stack (an id is 64
  // characters, past std::string's inline buffer: a malloc per victim per round otherwise).
  [[nodiscard]] bool hasEpisode(std::string_view victim, bool memory) const;
  // detection.cpp
  void observe(Tracked& t, const ContainerSample* s, int64_t interval_ns);
  [[nodiscard]] static double windowWait(const Tracked& v);
  // Mean wait load over the detection window (0 without one).
  [[nodiscard]] static double meanWindowWait(const Tracked& v);
  [[nodiscard]] static std::string cpuRule(const Tracked& v, bool memory);
  void startEpisodes(std::vector<Decision>& out, std::vector<Finding>& findings);
  // attribution.cpp
  // on_top: ranking for a rung on top of rungs in force (their evidence since the last one).
  std::vector<Antagonist> rank(Tracked& victim,
                               bool memory,
                               std::vector<Finding>& findings,
                               bool on_top = false);
  std::vector<Antagonist> rankCpu(Tracked& victim, std::vector<Finding>& findings, bool on_top);
  // The waits behind one BE that are evidence against it without preemptions, for this victim.
  [[nodiscard]] double behindMinimum(const Tracked& victim) const;
  void accumulateEvidence(Tracked& v);
  [[nodiscard]] static std::string evidenceText(const BlameEvidence& e);
  [[nodiscard]] std::string verdictText(const BlameEvidence& e) const;
  // t's CPUs on the node this round (applied cpuset, else registry, else all), cached per round;
  // *all is set when that is every node CPU (then the result is node_cpus_).
  const std::vector<int>& roundCpus(Tracked& t, bool* all);
  void decayEvidence(Tracked& v) const;
  // A rung was applied for victim v: evidence "since the last rung" starts from nothing.
  static void startFreshEvidence(Tracked& v);
  [[nodiscard]] double foreignShare(const Tracked& v) const;
  // Most of the victim's attributed wait is behind itself or work colod does not control.
  [[nodiscard]] bool behindUncontrolled(const Tracked& v) const;
  [[nodiscard]] std::string waitBehind(const Tracked& v) const;
  // Whether rung `lever` was judged useless for v on the same evidence (then *why says so).
  [[nodiscard]] bool judgedUseless(const Tracked& v,
                                   Lever lever,
                                   const std::vector<Antagonist>& antagonists,
                                   std::string* why) const;
  // levers.cpp
  [[nodiscard]] Resources current(const Tracked& t, Lever lever) const;
  [[nodiscard]] std::vector<int> targetCpus(const Tracked& t) const;
  std::optional<Resources> restricted(const Tracked& t, const Tracked& v, Lever lever) const;
  // A move onto CPUs other BE already use (issue 19: a moved antagonist crowded an innocent
  // pinned there): the CFS quota that leaves them what they need, or nullopt when the move
  // takes nothing from anyone. *why (if given) says how it was sized.
  struct MoveQuota {
    int64_t quota_us = 0;
    int64_t period_us = 0;
    double others = 0;  // the peak demand of BE colod did not move there, in CPUs
    int moved = 0;      // containers colod moved there, this one included
  };
  // The BE load moveQuota() weighs, built in one pass over the containers: the peak demand of
  // the BE colod did not move, spread over their CPUs, and the busy containers it moved.
  struct BeLoad {
    std::vector<double> unmoved_by_cpu;  // index: CPU number
    struct Moved {
      const Tracked* t = nullptr;
      std::vector<int> cpus;  // sorted
    };
    std::vector<Moved> moved;  // using at least the quota floor
  };
  [[nodiscard]] BeLoad beLoad() const;
  [[nodiscard]] std::optional<MoveQuota> moveQuota(const Tracked& t,
                                                   const std::vector<int>& cpus) const {
    return moveQuota(beLoad(), t, cpus);
  }
  [[nodiscard]] std::optional<MoveQuota> moveQuota(const BeLoad& load,
                                                   const Tracked& t,
                                                   const std::vector<int>& cpus) const;
  // The values a restriction replaces: the lever's, and the CFS quota when the applied values
  // carry one (a cpuset move with its quota).
  [[nodiscard]] static Resources originalOf(const Resources& registry,
                                            Lever lever,
                                            const Resources& applied);
  // "" or why `values` (a cpuset move) carry a quota, for decision texts.
  [[nodiscard]] std::string moveNote(const Tracked& t, const Resources& values) const;
  // Re-sizes the quota of moved containers as the BE around them changes (moveQuota()).
  void refreshMoveQuotas(std::vector<Decision>& out);
  // quota.cpp
  [[nodiscard]] bool anyQuota() const;
  [[nodiscard]] uint64_t minQuotaUs() const;
  [[nodiscard]] double quotaFloor(size_t n_targets) const;
  [[nodiscard]] double usableCpus(const Tracked& t) const;
  [[nodiscard]] double quotaCeiling() const;
  [[nodiscard]] size_t quotaTargets() const;
  [[nodiscard]] double initialQuotaBudget(const Tracked& victim, size_t n_targets) const;
  bool addQuotaTargets(const std::string& key,
                       int rung,
                       const std::vector<Antagonist>& antagonists,
                       const std::vector<std::string>& joining,
                       bool replacing,
                       Step& step);
  void dropQuotaTarget(const std::string& id);
  [[nodiscard]] bool unthrottledFor(const Tracked& t, int64_t ticks) const;
  void releaseQuotaCap(Tracked& t,
                       const Restriction& r,
                       const std::string& why,
                       const Tracked* victim,
                       const Episode* ep,
                       const std::vector<Antagonist>& antagonists,
                       std::vector<Decision>& out);
  void redistributeQuota(DecisionKind kind,
                         const std::string& rule,
                         const std::string& why,
                         const Tracked* victim,
                         const Episode* ep,
                         const std::vector<Antagonist>& antagonists,
                         std::vector<Decision>& out,
                         std::vector<Finding>& findings);
  RungResult applyQuotaRung(Episode& ep,
                            const std::string& key,
                            Tracked& victim,
                            int rung,
                            const std::vector<Antagonist>& antagonists,
                            DecisionKind kind,
                            bool replacing,
                            std::vector<Decision>& out,
                            std::vector<Finding>& findings);
  // uncontrolled_cap.cpp: the one quota step taken while the victim waits behind the host.
  [[nodiscard]] std::vector<Antagonist> uncontrolledCapTargets(const Episode& ep,
                                                               const Tracked& victim) const;
  RungResult applyUncontrolledCap(Episode& ep,
                                  const std::string& key,
                                  Tracked& victim,
                                  const std::vector<Antagonist>& held,
                                  DecisionKind kind,
                                  bool replacing,
                                  std::vector<Decision>& out,
                                  std::vector<Finding>& findings);
  RungResult pushQuotaStep(Episode& ep, Step step);
  [[nodiscard]] bool holdsQuota(const Episode& ep) const;
  [[nodiscard]] bool canTighten(const Episode& ep) const;
  bool tightenQuota(Episode& ep,
                    const std::string& key,
                    Tracked& v,
                    std::vector<Decision>& out,
                    std::vector<Finding>& findings);
  // ladder.cpp
  // A rung (or the uncontrolled cap) was applied: verified from now on (escalate()).
  void startVerifying(const std::string& key, Episode& ep, Tracked& victim);
  // The verify window starts now, from the victim's state (also after a tighten).
  void resetVerification(Episode& ep, const Tracked& victim) const;
  RungResult applyRung(Episode& ep,
                       const std::string& key,
                       Tracked& victim,
                       int rung,
                       const std::vector<Antagonist>& antagonists,
                       DecisionKind kind,
                       bool replacing,
                       std::vector<Decision>& out,
                       std::vector<Finding>& findings);
  [[nodiscard]] std::string quotaKeptNote(const std::string& id, Lever released) const;
  [[nodiscard]] bool anyCooling(const std::vector<Antagonist>& antagonists,
                                Lever lever,
                                bool replacing) const;
  void releaseStep(const std::string& key,
                   const Episode& ep,
                   const Step& step,
                   DecisionKind kind,
                   const std::string& rule,
                   const std::string& why,
                   const Tracked* victim,
                   std::vector<Decision>& out);
  bool escalateOrTighten(Episode& ep,
                         const std::string& key,
                         Tracked& v,
                         std::vector<Decision>& out,
                         std::vector<Finding>& findings);
  bool escalate(Episode& ep,
                const std::string& key,
                Tracked& victim,
                DecisionKind kind,
                std::vector<Decision>& out,
                std::vector<Finding>& findings,
                bool replacing = false);
  // An idle hold's test of a BE that wants CPU: it runs, or queues as a BE that would take more
  // does (kQueuedBeTasks: a BE that wakes for 50 µs a second queues a little every tick on a
  // saturated node, and at 0.01 tasks queued scale.sh acting gave back 125 holds in 20 s that
  // nobody needed).
  [[nodiscard]] bool runsOrQueues(const Tracked& t) const {
    return (t.sampled && cpusUsed(t) >= kRunningCpuFraction) || recentWaiting(t) >= kQueuedBeTasks;
  }
  bool holdIdle(const Episode& ep, Tracked& t, Restriction& r);
  void endIdleHolds(std::vector<Decision>& out);
  bool heldCpusetShared(const std::string& key,
                        Step& step,
                        const Tracked& t,
                        const Tracked& victim);
  void extendSteps(const std::string& key,
                   Episode& ep,
                   std::vector<Decision>& out,
                   std::vector<Finding>& findings);
  void stepEpisode(const std::string& key,
                   Episode& ep,
                   std::vector<Decision>& out,
                   std::vector<Finding>& findings);
  // relax.cpp
  std::optional<std::string> relaxWouldHurt(const Step& top, const Tracked& v) const;
  // The BE quota budget is one for every episode: another episode's victim that a quota step
  // protects and that is not quiet keeps it from being raised (its name).
  [[nodiscard]] std::optional<std::string> budgetStillNeeded(const std::string& key) const;
  std::optional<std::string> targetsIdle(const Step& top, int64_t need) const;
  void relaxTop(const std::string& key,
                Episode& ep,
                Tracked& v,
                const std::string& rule,
                const std::string& why,
                std::vector<Decision>& out);
  void holdEpisode(const std::string& key,
                   Episode& ep,
                   Tracked& v,
                   bool hit,
                   int hits,
                   int quiet,
                   std::vector<Decision>& out,
                   std::vector<Finding>& findings);
  // admission.cpp
  RoundResult admit(ContainerInfo info, int64_t now_ns);
  // Why the CPU weights alone keep protected LS `v` within its share against new BE `t` (and the
  // BE already running on its CPUs), or nullopt when they do not and `t` must be placed.
  std::optional<std::string> weightsProtect(const Tracked& v, const Tracked& t) const;
  bool placeCpusetAtCreation(Tracked& t,
                             Tracked& v,
                             const std::string& key,
                             Episode& ep,
                             Step& step,
                             const std::string& because,
                             std::vector<Decision>& out);
  bool placeQuotaAtCreation(Tracked& t,
                            Tracked& v,
                            const std::string& key,
                            Episode& ep,
                            Step& step,
                            std::vector<Decision>& out);
  // explanation.cpp
  [[nodiscard]] std::vector<BlameView> blameViews(const Tracked& be) const;
  Evidence evidence(const Tracked& v, const Episode* ep, bool memory) const;
  std::string victimPhrase(const Tracked& v, bool memory) const;
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
                        std::string explanation);
  // inline
  [[nodiscard]] static bool touchable(const Tracked& t) {
    return t.tier == Tier::Be && !t.info.exclusive_cpus;
  }
  [[nodiscard]] bool isVictimTier(Tier tier) const {
    const auto& v = config_.detection.victim_tiers;
    return std::find(v.begin(), v.end(), tier) != v.end();
  }
  [[nodiscard]] std::vector<Lever> ladder(bool memory) const {
    return memory ? config_.actions.memory_ladder : config_.actions.cpu_ladder;
  }
  [[nodiscard]] bool budget() const {
    return changes_this_round_ < config_.actions.max_changes_per_round;
  }
  [[nodiscard]] double nodeCpus() const {
    return static_cast<double>(std::max<size_t>(node_cpus_.size(), 1));
  }
  // On-CPU of container t, in CPUs, over about the last tick (Tracked::rate_cpus).
  [[nodiscard]] double cpusUsed(const Tracked& t) const {
    return t.sample != nullptr ? t.rate_cpus : 0.0;
  }
  // The same rate whether or not t is in this round's snapshot, and its tasks waiting for a CPU
  // on average over that span (Tracked::rate_waiting). A container runs without being reported
  // in a round of a few ms where none of its tasks switched (the collector reports what
  // changed): judged on this round alone, two BE pods filling a CPU read 0 in such an event
  // round, and a split holding them was given back (colocation benchmark, colod phase).
  [[nodiscard]] static double recentCpus(const Tracked& t) { return t.rate_cpus; }
  [[nodiscard]] static double recentWaiting(const Tracked& t) { return t.rate_waiting; }
  // Adds this round to t's on-CPU rate (every round, sampled or not).
  void updateRate(Tracked& t, const ContainerSample* s, int64_t interval_ns) const;

  Config config_;
  std::map<std::string, Tracked, std::less<>> tracked_;
  // Hash index over tracked_ (keys point into tracked_'s nodes, which are stable): the per-round
  // sample lookup is O(1). Iteration always uses the ordered map (determinism).
  std::unordered_map<std::string_view, Tracked*> index_;
  // (target id) -> lever -> restriction
  std::map<std::string, std::map<Lever, Restriction>, std::less<>> restrictions_;
  // Containers admit() saw created and the registry has not listed since (id -> the admit's
  // now_ns). One the registry still does not list kCreationGraceNs later was never created
  // (the creation failed after colod's reply): evaluate() forgets it, with what it placed.
  // A kubelet retrying a failing creation makes a new id each time: kept, they would pile up.
  std::map<std::string, int64_t, std::less<>> admitted_unlisted_;
  std::map<std::string, Episode, std::less<>> episodes_;
  std::vector<Finding> pending_findings_;
  // The sample of a container absent from an absent_quiet snapshot (an all-zero interval).
  ContainerSample quiet_sample_;
  // Marks, for one round, a container the snapshot names unmeasured (Snapshot::unmeasured).
  ContainerSample unmeasured_mark_;
  EngineStats stats_;
  int64_t round_ = 0;
  // Some sample, of any container, has carried attributed preemptions: the collector attributes
  // waits, so a victim without them yet has not been made to wait by a BE (rankCpu()).
  bool attribution_seen_ = false;
  int64_t tick_ns_ = 0;  // time between the last two timer rounds: the span of the on-CPU rate
  int64_t last_tick_now_ns_ = 0;  // now_ns of the last timer round
  int64_t ticks_ = 0;             // timer rounds (Snapshot::event_round false) among them
  bool event_round_ = false;      // this round runs on a wakeup between timer ticks
  uint64_t seq_ = 0;
  int64_t now_ns_ = 0;
  int64_t interval_ns_ = 0;
  std::vector<int> node_cpus_;
  std::vector<int> exclusive_cpus_;  // CPUs given exclusively to containers (never a BE target)
  // exclusive_cpus_ plus the CPUs protected containers are pinned to (BE placement avoids them)
  std::vector<int> reserved_cpus_;
  // During evaluate() only (cleared at its end): BE that ran this round, in id order.
  std::vector<Tracked*> running_be_;
  // This round's sampled victims (protected, not on exclusive CPUs), in id order; as
  // running_be_, pointers into tracked_ cleared at the end of evaluate().
  std::vector<Tracked*> victims_;
  // accumulateEvidence()'s scratch: this round's run time of each BE on the victim's CPUs.
  std::vector<std::pair<BlameEvidence*, double>> round_overlap_;
  int changes_this_round_ = 0;
  double quota_budget_ = 0;  // aggregate BE quota budget in CPUs (0 = no quota rung in force)
};

}  // namespace colod::policy
