// SPDX-License-Identifier: Apache-2.0
// The daemon's loop (Daemon::Impl), private to userspace/daemon. Its methods live in three files
// by responsibility:
//   daemon.cpp    startup, the epoll loop, signals, config reload, shutdown;
//   loop.cpp      one tick: registry diff, collector snapshot, engine, decisions, the view;
//   overlays.cpp  from the engine's restrictions to the actuator: overlays, the journal
//                 (write-ahead), the journal reconcile at start, NRI handlers, the clean stop.
// The parts other threads use are their own modules: actuator.h (the only writer),
// control_backend.h, decision_log.h, recorder.h, view.h.
#pragma once

#include <malloc.h>
#include <signal.h>
#include <spdlog/spdlog.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/inotify.h>
#include <sys/signalfd.h>
#include <sys/stat.h>
#include <sys/timerfd.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <filesystem>
#include <fstream>
#include <future>
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>
#include <numeric>
#include <optional>
#include <set>
#include <sstream>
#include <thread>
#include <unordered_map>

#include "colod/base/unique_fd.h"
#include "colod/collect/collector.h"
#include "colod/control/names.h"
#include "colod/control/server.h"
#include "colod/daemon/actuator.h"
#include "colod/daemon/cgroup_discovery.h"
#include "colod/daemon/cgroup_path.h"
#include "colod/daemon/control_backend.h"
#include "colod/daemon/convert.h"
#include "colod/daemon/daemon.h"
#include "colod/daemon/decision_log.h"
#include "colod/daemon/journal.h"
#include "colod/daemon/journal_ahead.h"
#include "colod/daemon/privileges.h"
#include "colod/daemon/realtime.h"
#include "colod/daemon/recorder.h"
#include "colod/daemon/self_stats.h"
#include "colod/daemon/view.h"
#include "colod/metrics/colod_metrics.h"
#include "colod/metrics/http_server.h"
#include "colod/nri/stub.h"
#include "colod/policy/engine.h"
#include "colod/policy/tier.h"
#include "colod/policy/trace.h"
#include "wakeup.h"

namespace colod::daemon {

namespace v1 = control::v1;
using Clock = std::chrono::steady_clock;

inline int64_t unixMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

inline std::shared_ptr<spdlog::logger> log() {
  auto l = spdlog::get("colod");
  return l ? l : spdlog::default_logger();
}

// A registry change of at least this many containers (a (re)synchronize) is followed by
// malloc_trim(): see syncRegistry().
constexpr std::size_t kTrimAfterChanges = 64;

// Cgroups that are not containers (system services, sandboxes) have their cgroup files read at
// every kFilesEveryNTicks-th tick only (issue #17); containers' at every tick.
constexpr uint32_t kFilesEveryNTicks = 10;

// Per-container state owned by the loop thread.
struct Known {
  // The registry's objects this container was last converted from (shared with the registry, so
  // free): an unchanged pointer pair means an unchanged container, and fullInfo() rebuilds the
  // engine's ContainerInfo from them on demand.
  std::shared_ptr<const nri::Container> ctr;
  std::shared_ptr<const nri::PodSandbox> pod;
  // Names, paths and labels are read from the registry objects through the accessors below (a
  // whole ContainerInfo with its label/annotation std::maps was ~3.5 KB a container); the
  // engine keeps its own resources and cpuset.
  [[nodiscard]] const std::string& cgroupPath() const { return ctr->cgroups_path; }
  [[nodiscard]] const std::string& containerName() const { return ctr->name; }
  [[nodiscard]] std::string_view podName() const { return pod ? pod->name : std::string_view(); }
  [[nodiscard]] std::string_view podNamespace() const {
    return pod ? pod->namespace_name : std::string_view();
  }
  [[nodiscard]] std::string_view podUid() const { return pod ? pod->uid : std::string_view(); }
  std::string display;
  std::string tier;        // as the engine classifies it (cached: classification is per change)
  std::string rel;         // cgroup dir relative to the hierarchy root
  uint64_t cgroup_id = 0;  // 0 = unresolved
  uint64_t resolve_tick = 0;
  std::string resolve_error;
  // Cumulative, for Prometheus.
  std::array<uint64_t, collect::kHistSlots> runq_slots{};
  uint64_t runq_sum_ns = 0;
  uint64_t preemptions = 0;
  uint64_t throttled_periods = 0;
  uint64_t throttled_ns = 0;
  uint64_t reclaim_ns = 0;
  uint64_t cpu_some_total_us = 0;
  Clock::time_point cpu_some_at{};  // when cpu_some_total_us was read (PSI is read once a second)
  // The last interval, for coloctl top: its sample in the round's snapshot
  // (Impl::round_snapshot_), valid while last_round is Impl::rounds_. A copy here was 624 bytes
  // a container, and a copy of its aggressor vectors every round it ran.
  uint32_t last_index = 0;
  uint64_t last_round = 0;  // Impl::rounds_ of last_index (0: never sampled)
  // Who preempted it, as last reported: a container not named every tick has its pairs read at
  // every kFilesEveryNTicks-th round only, so coloctl top shows them until the next read.
  std::vector<collect::Aggressor> aggressors;
  uint64_t aggressors_round = 0;
};

inline std::string readSmallFile(const std::string& path) {
  std::ifstream in(path);
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// Why a decision round runs: the interval timer, or a wakeup from the BPF side (wakeup.h).
enum class RoundReason { Timer, Wakeup };

class Daemon::Impl final : public nri::Plugin,
                           public nri::CreateContainerHandler,
                           public nri::UpdateContainerHandler {
 public:
  Impl(Config config, DaemonOptions options)
      : config_(std::make_shared<const Config>(std::move(config))), options_(std::move(options)) {}

  ~Impl() override { shutdownThreads(); }

  Impl(const Impl&) = delete;
  Impl& operator=(const Impl&) = delete;
  Impl(Impl&&) = delete;
  Impl& operator=(Impl&&) = delete;

  Result<void> init();
  int run();

  // How long the runtime's CreateContainer waits for the admission decision (issue #8).
  static constexpr std::chrono::milliseconds kAdmissionWait{500};

  // NRI handlers (stub handler thread; quick, never send).
  Result<nri::CreateContainerResult> createContainer(const nri::PodSandbox& pod,
                                                     const nri::Container& ctr) override;
  Result<std::vector<nri::ContainerUpdate>> updateContainer(
      const nri::PodSandbox& pod,
      const nri::Container& ctr,
      const nri::LinuxResources& requested) override;

 private:
  // The running settings: one immutable snapshot, swapped whole by a reload.
  [[nodiscard]] std::shared_ptr<const Config> cfg() const {
    std::lock_guard lk(config_mu_);
    return config_;
  }
  // Loop thread.
  void tick(RoundReason reason = RoundReason::Timer);
  // Event-driven detection (wakeup.cpp).
  void syncWatched();
  void syncEveryTick();
  void onWakeup();
  void eventRound();
  void syncRegistry(RoundReason reason);
  // The engine's ContainerInfo of a known container, rebuilt from its registry objects.
  [[nodiscard]] policy::ContainerInfo fullInfo(const Known& k) const {
    return engineInfo(k.pod.get(), *k.ctr);
  }
  // The container as the engine must see it: the runtime's spec with colod's own overlay taken
  // out (the tracked fields carry the runtime's own values), so every original the engine
  // computes is the kubelet's, never colod's earlier restriction.
  [[nodiscard]] policy::ContainerInfo engineInfo(const nri::PodSandbox* pod,
                                                 const nri::Container& ctr) const {
    if (!actuator_ || !actuator_->tracks(ctr.id)) {
      return toContainerInfo(pod, ctr, node_cpus_);
    }
    nri::Container base = ctr;
    const auto view = actuator_->baseView(ctr.id, toPolicyResources(ctr.resources));
    nri::mergeResources(base.resources, toLinuxResources(view, all_cpus_));
    return toContainerInfo(pod, base, node_cpus_);
  }
  void refreshNriState();
  void resolveCgroups(bool force);
  // At start, under the journal's lock: the journal into journal_loaded_, or its write-ahead copy
  // when colod stopped between the two writes (the copy is then newer); a corrupt journal is
  // set aside (journal_corrupt_).
  void loadJournal(const DaemonSettings& s);
  void reconcileJournal(int64_t now_ns);
  void checkUnprovenRestrictions();
  void handleDecisions(const policy::RoundResult& round);
  // Admission placement of a container being created (loop thread): the adjustment for the
  // CreateContainer reply (empty: created as asked). `may_adjust` false: the reply has gone
  // already, the placement reaches the container by an update.
  nri::ContainerAdjustment admit(const nri::PodSandbox& pod,
                                 const nri::Container& ctr,
                                 bool may_adjust);
  // Turns the engine's restrictions into overlays, journals them (write-ahead) and hands them to
  // the actuator. `round` (may be null) holds the decisions that led there.
  void commitOverlays(const policy::RoundResult* round);
  // The journal of the actuator's `entries` with the engine's restrictions on them.
  Journal journalOfNow(const std::vector<ReconcileEntry>& entries);
  // The journal of `entries` (durable replace); then the write-ahead copy is settled.
  Result<void> writeJournalOf(const std::vector<ReconcileEntry>& entries);
  // The same into the write-ahead copy only (the reaction path: no fsync, no rename).
  Result<void> writeAheadOf(const std::vector<ReconcileEntry>& entries);
  void onConverged(const std::string& id);
  void publish();
  // Reloads the config file: whether it differed from the running configuration.
  Result<bool> reload(const std::string& why);
  void restoreOnStop();
  // Another NRI plugin owns a field colod would set (stub thread): counted and logged once per
  // (container, field, plugin).
  void onPluginConflict(const nri::OwnershipConflict& c);
  void post(std::function<void()> fn);
  void drainPosted();
  Mode effectiveMode() const;
  [[nodiscard]] metrics::ProbeResult liveness() const;
  // Puts this thread (and the threads it creates next) under SCHED_FIFO, or says why not.
  void enterReactionPriority(const DaemonSettings& s);
  void setupInotify();
  void onInotify();

  void shutdownThreads();
  void setOutcome(uint64_t seq, const std::string& outcome) { decisions_.setOutcome(seq, outcome); }

  mutable std::mutex config_mu_;
  std::shared_ptr<const Config> config_;
  DaemonOptions options_;
  Clock::time_point started_ = Clock::now();
  int64_t started_unix_ms_ = unixMs();

  std::optional<collect::Collector> collector_;
  std::string hierarchy_root_;
  std::vector<int> node_cpus_;
  std::string all_cpus_;

  std::mutex engine_mu_;  // the engine is used by the loop and by explain (gRPC)
  std::optional<policy::Engine> engine_;

  std::unique_ptr<nri::Stub> stub_;
  std::atomic<bool> nri_connected_{false};
  std::atomic<uint64_t> nri_reconnects_{0};
  std::mutex conflicts_mu_;
  std::map<std::string, uint64_t> plugin_conflicts_;  // other plugin -> fields left to it
  std::set<std::string> conflicts_logged_;            // container/field/plugin, bounded
  std::mutex nri_log_mu_;
  std::string nri_last_failure_;  // the last disconnect reason logged (stub threads)

  DecisionLog decisions_{1024};
  TraceRecorders recorders_;
  ViewStore views_;
  std::unique_ptr<ControlBackend> backend_;
  std::unique_ptr<control::Server> control_;
  std::unique_ptr<metrics::HttpServer> http_;

  UniqueFd epoll_;
  UniqueFd signal_fd_;
  UniqueFd timer_fd_;
  UniqueFd event_fd_;
  UniqueFd inotify_fd_;
  std::string watched_name_;
  bool reload_pending_ = false;
  Clock::time_point reload_due_{};

  std::mutex post_mu_;
  std::vector<std::function<void()>> posted_;

  // Loop-thread state.
  // Where the containers come from: the runtime's registry, or the kubepods cgroup tree until the
  // runtime has synchronized once (observe-only without NRI; loop.cpp syncRegistry).
  RegistrySource registry_source_;
  std::map<std::string, Known, std::less<>> known_;
  // Known containers without a cgroup, as resolveCgroups() last counted them (loop thread).
  std::size_t unresolved_ = 0;
  // Each resolved cgroup's entry in known_ (a std::map's nodes stay put; erased with the entry
  // or when its cgroup is forgotten): the tick finds a sample's container without comparing ids.
  using KnownEntry = std::pair<const std::string, Known>;
  std::unordered_map<uint64_t, KnownEntry*> by_cgroup_;
  // This snapshot's mean run on a CPU of each cgroup that ran (meanRunNs): the preemption wait
  // split's weights (convert.h), sorted by cgroup id. Refilled each round in its own storage.
  std::vector<std::pair<uint64_t, uint64_t>> run_ns_;
  uint64_t registry_generation_ = UINT64_MAX;
  uint64_t tick_no_ = 0;
  uint64_t rounds_ = 0;  // snapshots taken (timer ticks and event rounds)
  // The snapshot of the round under way (tick() sets it and clears it on return): publish()
  // shows each container's last interval from it (Known::last_index).
  const collect::Snapshot* round_snapshot_ = nullptr;
  // The last round's engine samples, handed back for the next round to fill (tick()): with 1000
  // containers a vector grown by doubling at every tick, ~340 KB at its last step.
  std::vector<policy::ContainerSample> spare_samples_;
  bool reconciled_ = false;
  Journal journal_loaded_;
  bool journal_corrupt_ = false;
  std::optional<JournalLock> journal_lock_;
  std::optional<JournalAhead> journal_ahead_;  // opened under the lock, at start
  JournalEncoder journal_encoder_;             // both writers' text: encodes only what changed
  Wishes committed_;                // the overlays handed to the actuator (journaled)
  uint64_t journaled_version_ = 0;  // actuator version the journal on disk reflects
  std::map<std::string, std::vector<uint64_t>> awaiting_;  // target -> decisions not yet applied
  std::set<std::pair<std::string, std::string>> findings_seen_;
  Clock::time_point last_tick_{};

  // Counters (written by several threads).
  std::atomic<uint64_t> ticks_{0};
  std::atomic<int64_t> last_tick_ns_{0};  // steady clock, for /healthz
  std::atomic<uint64_t> tick_overruns_{0};
  std::atomic<uint64_t> updates_dropped_{0};
  std::atomic<uint64_t> admissions_{0};          // containers placed by the creation reply
  std::atomic<uint64_t> admission_deferred_{0};  // placements (partly) left to an update
  std::atomic<uint64_t> reloads_{0};
  std::atomic<uint64_t> reload_failures_{0};
  std::atomic<uint64_t> snapshot_errors_{0};
  std::atomic<uint64_t> journal_errors_{0};
  std::atomic<uint64_t> journal_entries_{0};
  std::atomic<uint64_t> bpf_drops_{0};
  std::atomic<uint64_t> bpf_lock_skips_{0};
  std::atomic<uint64_t> bpf_unmeasured_cpus_{0};
  std::atomic<uint64_t> bpf_kernel_sum_errors_{0};
  std::atomic<uint64_t> bpf_delete_errors_{0};
  std::atomic<uint64_t> bpf_deletes_pending_{0};
  std::atomic<uint64_t> bpf_slots_moved_{0};
  std::atomic<uint64_t> bpf_slot_move_errors_{0};
  std::atomic<uint64_t> bpf_map_bytes_{0};
  // Event-driven detection (wakeup.cpp; loop thread but the counters, read by publish()).
  WakeupSettings wakeup_;
  EventRoundLimiter event_limiter_{wakeup_.min_gap};
  std::vector<collect::WatchedCgroup> watched_;
  std::vector<uint64_t> every_tick_;  // cgroup ids given to Collector::setEveryTick
  // Issue #17: the watched and every-tick sets are rebuilt only when what they are made of
  // changed -- a container's tier or cgroup, the committed overlays, or the configuration --
  // not by walking every known container at every tick.
  uint64_t watch_inputs_gen_ = 1;
  uint64_t watched_gen_ = 0;
  uint64_t every_tick_gen_ = 0;
  std::shared_ptr<const Config> watched_cfg_;
  std::shared_ptr<const Config> every_tick_cfg_;
  uint64_t watch_errors_ = 0;
  std::atomic<uint64_t> event_wakeups_{0};  // events read from the ring buffer
  std::atomic<uint64_t> event_rounds_{0};   // decision rounds run on them
  int realtime_priority_ = 0;               // SCHED_FIFO priority entered at start (0: none)
  uint64_t realtime_demotions_logged_ = 0;  // watchdog demotions already logged

  // The current containers, for the upserts that open a new recording (encoded when one starts,
  // not kept encoded: ~2 KB of JSON a container). Guarded by the recorders' lock.
  std::vector<
      std::pair<std::shared_ptr<const nri::PodSandbox>, std::shared_ptr<const nri::Container>>>
      trace_prefix_;

  // The only writer of container resources (after the stub: it reads the stub's registry).
  std::unique_ptr<Actuator> actuator_;
};

}  // namespace colod::daemon
