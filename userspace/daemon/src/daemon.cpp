// SPDX-License-Identifier: Apache-2.0
#include "colod/daemon/daemon.h"

#include <signal.h>
#include <malloc.h>
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
#include <numeric>
#include <optional>
#include <nlohmann/json.hpp>
#include <set>
#include <spdlog/spdlog.h>
#include <sstream>
#include <thread>
#include <unordered_map>

#include "colod/base/unique_fd.h"
#include "colod/collect/collector.h"
#include "colod/control/names.h"
#include "colod/control/server.h"
#include "colod/daemon/cgroup_path.h"
#include "colod/daemon/convert.h"
#include "colod/daemon/journal.h"
#include "colod/daemon/self_stats.h"
#include "colod/metrics/colod_metrics.h"
#include "colod/metrics/http_server.h"
#include "colod/nri/stub.h"
#include "colod/policy/engine.h"
#include "colod/policy/tier.h"
#include "colod/policy/trace.h"

namespace colod::daemon {

namespace v1 = control::v1;
using Clock = std::chrono::steady_clock;

void blockSignals() {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGINT);
  sigaddset(&set, SIGTERM);
  sigaddset(&set, SIGHUP);
  pthread_sigmask(SIG_BLOCK, &set, nullptr);
  // A client (coloctl record) going away must not kill the daemon.
  signal(SIGPIPE, SIG_IGN);
}

namespace {

int64_t unixMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

std::shared_ptr<spdlog::logger> log() {
  auto l = spdlog::get("colod");
  return l ? l : spdlog::default_logger();
}

// One recent decision as served to coloctl, with the outcome updated by the sender.
struct DecisionRecord {
  v1::Decision proto;
};

// A coloctl record session: lines of the policy trace format, bounded.
struct Recorder {
  std::mutex mu;
  std::condition_variable cv;
  std::deque<std::string> lines;
  std::size_t bytes = 0;
  uint64_t snapshots = 0;
  uint64_t dropped = 0;
  bool closed = false;
};
constexpr std::size_t kRecorderMaxBytes = 16U << 20;
// A registry change of at least this many containers (a (re)synchronize) is followed by
// malloc_trim(): see syncRegistry().
constexpr std::size_t kTrimAfterChanges = 64;

// What the loop publishes at the end of a tick, read by gRPC and HTTP threads.
struct View {
  std::vector<v1::Container> containers;  // sorted by display name
  // Per container, in the order of metrics.containers (the loop's table order, which also holds
  // the cumulative histograms): source[i] is the position there of containers[i]. Vectors, not
  // maps keyed by id: ~600 B less a container in every view.
  std::vector<std::size_t> source;
  std::vector<std::optional<std::array<uint32_t, collect::kHistSlots>>> last;  // last interval
  metrics::MetricsView metrics;
  v1::StatusReply status;
  int64_t unix_ms = 0;
};

// Per-container state owned by the loop thread.
struct Known {
  // The registry's objects this container was last converted from (shared with the registry, so
  // free): an unchanged pointer pair means an unchanged container, and fullInfo() rebuilds the
  // engine's ContainerInfo from them on demand.
  std::shared_ptr<const nri::Container> ctr;
  std::shared_ptr<const nri::PodSandbox> pod;
  // Of the engine's ContainerInfo, what the registry objects above do not hold as such (names,
  // paths and labels are read from them through the accessors below; a whole ContainerInfo with
  // its label/annotation std::maps was ~3.5 KB a container).
  policy::Resources resources;
  std::vector<int> cpuset;
  [[nodiscard]] const std::string& cgroupPath() const { return ctr->cgroups_path; }
  [[nodiscard]] const std::string& containerName() const { return ctr->name; }
  [[nodiscard]] std::string_view podName() const { return pod ? pod->name : std::string_view(); }
  [[nodiscard]] std::string_view podNamespace() const {
    return pod ? pod->namespace_name : std::string_view();
  }
  [[nodiscard]] std::string_view podUid() const { return pod ? pod->uid : std::string_view(); }
  std::string display;
  std::string tier;          // as the engine classifies it (cached: classification is per change)
  std::string rel;           // cgroup dir relative to the hierarchy root
  uint64_t cgroup_id = 0;    // 0 = unresolved
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
  // The last interval, for coloctl top.
  collect::CgroupSample last;
  bool has_last = false;
};

struct PendingUpdate {
  uint64_t seq = 0;  // decision seq (0 for journal restores)
  nri::ContainerUpdate update;
  uint32_t attempts = 0;
  bool solo = false;  // send alone (after a failed batch: the runtime does not say which failed)
  std::optional<policy::Decision> decision;  // reported back to the engine on final failure
  std::string target_display;
};

std::string readSmallFile(const std::string& path) {
  std::ifstream in(path);
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

}  // namespace

class Daemon::Impl final : public control::Backend, public nri::Plugin {
 public:
  Impl(Config config, DaemonOptions options)
      : config_(std::move(config)), options_(std::move(options)) {}

  ~Impl() override { shutdownThreads(); }

  Impl(const Impl&) = delete;
  Impl& operator=(const Impl&) = delete;
  Impl(Impl&&) = delete;
  Impl& operator=(Impl&&) = delete;

  Result<void> init();
  int run();

  // control::Backend (gRPC threads).
  Result<v1::StatusReply> status() override;
  Result<v1::ListContainersReply> listContainers() override;
  Result<v1::DumpReply> dump() override;
  Result<v1::HistogramReply> histogram(const std::string& query) override;
  Result<v1::DecisionsReply> decisions(uint32_t limit) override;
  Result<v1::ExplainReply> explain(const std::string& query) override;
  Result<v1::ConfigShowReply> configShow() override;
  Result<v1::ConfigCheckReply> configCheck(const v1::ConfigCheckRequest& req) override;
  Result<v1::ConfigReloadReply> configReload() override;
  Result<void> record(uint32_t seconds,
                      const std::function<bool(const v1::RecordChunk&)>& write,
                      const std::function<bool()>& cancelled) override;

 private:
  // Loop thread.
  void tick();
  void syncRegistry();
  // The engine's ContainerInfo of a known container, rebuilt from its registry objects.
  [[nodiscard]] policy::ContainerInfo fullInfo(const Known& k) const {
    return toContainerInfo(k.pod.get(), *k.ctr, node_cpus_);
  }
  void refreshNriState();
  void resolveCgroups(bool force);
  void reconcileJournal(int64_t now_ns);
  void handleDecisions(const policy::RoundResult& round);
  void enqueue(PendingUpdate u);
  void writeJournalNow();
  void publish(const policy::Snapshot* snap);
  Result<void> reload(const std::string& why);
  void restoreOnStop();
  void post(std::function<void()> fn);
  void drainPosted();
  void broadcastTrace(const std::string& line, bool is_snapshot);
  void broadcastTraceLocked(const std::string& line, bool is_snapshot);  // rec_mu_ held
  // Whether a recording is live (encode trace lines only then).
  bool recording();
  Mode effectiveMode() const;
  void setupInotify();
  void onInotify();

  // Sender thread.
  void senderLoop();
  void onSendResult(std::vector<PendingUpdate> batch, const Result<void>& r);

  void shutdownThreads();
  void setOutcome(uint64_t seq, const std::string& outcome);

  Config config_;
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
  std::map<std::string, Known, std::less<>> known_;
  std::unordered_map<uint64_t, std::string> by_cgroup_;
  uint64_t registry_generation_ = UINT64_MAX;
  uint64_t tick_no_ = 0;
  bool reconciled_ = false;
  Journal journal_loaded_;
  std::map<std::string, JournalEntry> pending_restore_;  // target id -> entry (journal restores)
  std::set<std::pair<std::string, std::string>> findings_seen_;
  Clock::time_point last_tick_{};

  // Counters (written by several threads).
  std::atomic<uint64_t> ticks_{0};
  std::atomic<uint64_t> tick_overruns_{0};
  std::atomic<uint64_t> updates_sent_{0};
  std::atomic<uint64_t> update_failures_{0};
  std::atomic<uint64_t> updates_dropped_{0};
  std::atomic<uint64_t> reloads_{0};
  std::atomic<uint64_t> reload_failures_{0};
  std::atomic<uint64_t> snapshot_errors_{0};
  std::atomic<uint64_t> journal_errors_{0};
  std::atomic<uint64_t> journal_entries_{0};
  std::atomic<uint64_t> bpf_drops_{0};

  std::mutex counts_mu_;
  std::map<std::string, uint64_t> decisions_by_kind_;

  std::mutex decisions_mu_;
  std::deque<v1::Decision> recent_;

  std::mutex view_mu_;
  std::shared_ptr<const View> view_ = std::make_shared<View>();

  std::mutex config_mu_;  // config_ text/settings read by gRPC threads

  std::mutex rec_mu_;
  std::vector<std::shared_ptr<Recorder>> recorders_;
  // The current containers, for the upserts that open a new recording (encoded when one starts,
  // not kept encoded: ~2 KB of JSON a container).
  std::vector<
      std::pair<std::shared_ptr<const nri::PodSandbox>, std::shared_ptr<const nri::Container>>>
      trace_prefix_;

  // Sender.
  std::mutex send_mu_;
  std::condition_variable send_cv_;
  std::deque<PendingUpdate> send_queue_;
  bool send_stop_ = false;
  std::thread sender_;
};

// ---------------------------------------------------------------------------------------------
// Startup

Result<void> Daemon::Impl::init() {
  const auto& s = config_.daemon;
  auto policy_cfg = config_.policy;
  if (s.mode == Mode::DryRun) {
    policy_cfg.dry_run = true;
  }
  auto engine = policy::Engine::create(policy_cfg);
  if (!engine) {
    return std::move(engine).error().wrap("policy configuration");
  }
  engine_.emplace(std::move(engine).value());

  // Node CPUs (for restores of "all CPUs" and the engine's cpuset lever).
  const std::string online = readSmallFile(s.sys_root + "/devices/system/cpu/online");
  std::string trimmed = online.substr(0, online.find_first_of("\n"));
  auto cpus = policy::parseCpuList(trimmed);
  if (!cpus || cpus->empty()) {
    return COLOD_ERR(EINVAL, "cannot read the online CPUs from ", s.sys_root,
                     "/devices/system/cpu/online");
  }
  node_cpus_ = std::move(cpus).value();
  all_cpus_ = policy::formatCpuList(node_cpus_);

  collect::CollectorOptions copts;
  copts.cgroup_root = s.cgroup_root;
  copts.max_cgroups = s.max_cgroups;
  copts.log = [](int level, const std::string& msg) {
    if (level == 0) {
      log()->warn("libbpf: {}", msg);
    } else {
      log()->debug("libbpf: {}", msg);
    }
  };
  auto collector = collect::Collector::create(copts);
  if (!collector) {
    return std::move(collector).error().wrap("starting the BPF collector");
  }
  collector_.emplace(std::move(collector).value());
  hierarchy_root_ = collector_->hierarchyRoot();
  log()->info("collector: cgroup mode {}, attach {}, hierarchy {}",
              collect::toString(collector_->mode()), collect::toString(collector_->attachKind()),
              hierarchy_root_);

  auto journal = readJournal(s.journal_path);
  if (!journal) {
    // A corrupt journal must not stop the daemon: keep it aside for a person to look at.
    const std::string aside = s.journal_path + ".corrupt";
    std::error_code ec;
    std::filesystem::rename(s.journal_path, aside, ec);
    log()->error("journal unreadable, moved to {}: {}", aside, journal.error().message());
  } else {
    journal_loaded_ = std::move(journal).value();
    if (!journal_loaded_.entries.empty()) {
      log()->info("journal {}: {} entries to reconcile once the runtime has synchronized",
                  s.journal_path, journal_loaded_.entries.size());
    }
  }

  epoll_.reset(::epoll_create1(EPOLL_CLOEXEC));
  if (!epoll_) {
    return COLOD_ERR(errno, "epoll_create1");
  }
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGINT);
  sigaddset(&set, SIGTERM);
  sigaddset(&set, SIGHUP);
  signal_fd_.reset(::signalfd(-1, &set, SFD_CLOEXEC | SFD_NONBLOCK));
  if (!signal_fd_) {
    return COLOD_ERR(errno, "signalfd");
  }
  timer_fd_.reset(::timerfd_create(CLOCK_MONOTONIC, TFD_CLOEXEC | TFD_NONBLOCK));
  if (!timer_fd_) {
    return COLOD_ERR(errno, "timerfd_create");
  }
  event_fd_.reset(::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK));
  if (!event_fd_) {
    return COLOD_ERR(errno, "eventfd");
  }
  for (int fd : {signal_fd_.get(), timer_fd_.get(), event_fd_.get()}) {
    epoll_event ev{};
    ev.events = EPOLLIN;
    ev.data.fd = fd;
    if (::epoll_ctl(epoll_.get(), EPOLL_CTL_ADD, fd, &ev) != 0) {
      return COLOD_ERR(errno, "epoll_ctl");
    }
  }
  setupInotify();

  auto control = control::Server::start(
      {.socket_path = s.control_socket, .socket_mode = s.control_socket_mode}, *this);
  if (!control) {
    return std::move(control).error().wrap("starting the control API");
  }
  control_ = std::move(control).value();

  if (!s.metrics_listen.empty()) {
    auto addr = metrics::parseListenAddress(s.metrics_listen);
    if (!addr) {
      return std::move(addr).error();
    }
    auto http = metrics::HttpServer::start(*addr, [this] {
      std::shared_ptr<const View> v;
      {
        std::lock_guard lk(view_mu_);
        v = view_;
      }
      metrics::MetricsView mv = v->metrics;
      const auto self = readSelfStats(config_.daemon.proc_root);
      mv.daemon.cpu_seconds = self.cpu_seconds;
      mv.daemon.rss_bytes = self.rss_bytes;
      return metrics::formatColodMetrics(mv);
    });
    if (!http) {
      return std::move(http).error().wrap("starting the metrics server");
    }
    http_ = std::move(http).value();
    log()->info("metrics on http://{}:{}/metrics", addr->host, http_->port());
  }

  auto stub = nri::Stub::create(
      *this, {.socket_path = s.nri_socket,
              .plugin_name = s.plugin_name,
              .plugin_idx = s.plugin_idx,
              .use_environment = false,
              .on_connection = [this](const nri::ConnectionEvent& ev) {
                // Events come from different stub threads and may arrive out of order
                // (Synchronized can overtake Connected): the state itself is read from
                // stub_->stats() by refreshNriState(); this only logs and wakes the loop.
                switch (ev.state) {
                  case nri::ConnectionState::Synchronized:
                    log()->info("nri: synchronized with the runtime (connects={}, reconnects={})",
                                ev.connects, ev.reconnects);
                    break;
                  case nri::ConnectionState::Disconnected:
                    log()->warn("nri: disconnected: {}",
                                ev.error ? ev.error->message() : std::string("closed"));
                    break;
                  default:
                    break;
                }
                // Wake the loop so the registry change is seen without waiting for a tick.
                uint64_t one = 1;
                (void)!::write(event_fd_.get(), &one, sizeof one);
              }});
  if (!stub) {
    return std::move(stub).error().wrap("NRI plugin options");
  }
  stub_ = std::move(stub).value();
  if (!std::filesystem::exists(s.nri_socket)) {
    log()->warn("nri: socket {} does not exist: observe-only until it appears (retrying)",
                s.nri_socket);
  }
  COLOD_TRY_VOID(stub_->start(), "starting the NRI stub");
  sender_ = std::thread([this] { senderLoop(); });
  publish(nullptr);  // the loop has not started: safe to touch loop state here
  return {};
}

void Daemon::Impl::setupInotify() {
  if (options_.config_path.empty()) {
    return;
  }
  const std::filesystem::path p = std::filesystem::absolute(options_.config_path);
  watched_name_ = p.filename().string();
  inotify_fd_.reset(::inotify_init1(IN_CLOEXEC | IN_NONBLOCK));
  if (!inotify_fd_) {
    log()->warn("inotify unavailable ({}): config reload on SIGHUP only", std::strerror(errno));
    return;
  }
  // Watch the directory: editors save by writing a new file and renaming it over the old one,
  // which a watch on the file itself would lose.
  if (::inotify_add_watch(inotify_fd_.get(), p.parent_path().c_str(),
                          IN_CLOSE_WRITE | IN_MOVED_TO | IN_CREATE | IN_ATTRIB) < 0) {
    log()->warn("cannot watch {} ({}): config reload on SIGHUP only", p.parent_path().string(),
                std::strerror(errno));
    inotify_fd_.reset();
    return;
  }
  epoll_event ev{};
  ev.events = EPOLLIN;
  ev.data.fd = inotify_fd_.get();
  ::epoll_ctl(epoll_.get(), EPOLL_CTL_ADD, inotify_fd_.get(), &ev);
}

void Daemon::Impl::onInotify() {
  alignas(inotify_event) char buf[4096];
  while (true) {
    const ssize_t n = ::read(inotify_fd_.get(), buf, sizeof buf);
    if (n <= 0) {
      break;
    }
    for (ssize_t off = 0; off < n;) {
      const auto* ev = reinterpret_cast<const inotify_event*>(buf + off);
      if (ev->len > 0 && watched_name_ == ev->name) {
        // Debounce: editors write in several steps; reload once things settle.
        reload_pending_ = true;
        reload_due_ = Clock::now() + std::chrono::milliseconds(200);
      }
      off += static_cast<ssize_t>(sizeof(inotify_event) + ev->len);
    }
  }
}

// ---------------------------------------------------------------------------------------------
// Loop

int Daemon::Impl::run() {
  const auto interval = config_.daemon.interval;
  itimerspec its{};
  its.it_interval.tv_sec = interval.count() / 1000;
  its.it_interval.tv_nsec = (interval.count() % 1000) * 1000000;
  its.it_value = its.it_interval;
  ::timerfd_settime(timer_fd_.get(), 0, &its, nullptr);
  last_tick_ = Clock::now();
  refreshNriState();
  publish(nullptr);  // status and metrics answer from the first moment
  log()->info("colod running: mode {}, interval {} ms, control {}, {} CPUs",
              modeName(config_.daemon.mode), interval.count(), config_.daemon.control_socket,
              node_cpus_.size());
  bool running = true;
  while (running) {
    epoll_event events[8];
    const int n = ::epoll_wait(epoll_.get(), events, 8, 1000);
    if (n < 0) {
      if (errno == EINTR) {
        continue;
      }
      log()->error("epoll_wait: {}", std::strerror(errno));
      break;
    }
    for (int i = 0; i < n; ++i) {
      const int fd = events[i].data.fd;
      if (fd == signal_fd_.get()) {
        signalfd_siginfo si{};
        while (::read(signal_fd_.get(), &si, sizeof si) == static_cast<ssize_t>(sizeof si)) {
          if (si.ssi_signo == SIGHUP) {
            (void)reload("SIGHUP");
          } else {
            log()->info("received {}, stopping", si.ssi_signo == SIGINT ? "SIGINT" : "SIGTERM");
            running = false;
          }
        }
      } else if (fd == timer_fd_.get()) {
        uint64_t expirations = 0;
        (void)!::read(timer_fd_.get(), &expirations, sizeof expirations);
        if (expirations > 1) {
          tick_overruns_ += expirations - 1;
        }
        tick();
      } else if (fd == event_fd_.get()) {
        uint64_t v = 0;
        (void)!::read(event_fd_.get(), &v, sizeof v);
        refreshNriState();
        drainPosted();
      } else if (inotify_fd_ && fd == inotify_fd_.get()) {
        onInotify();
      }
    }
    if (reload_pending_ && Clock::now() >= reload_due_) {
      reload_pending_ = false;
      (void)reload("config file changed");
    }
  }
  restoreOnStop();
  shutdownThreads();
  log()->info("colod stopped");
  return 0;
}

void Daemon::Impl::post(std::function<void()> fn) {
  {
    std::lock_guard lk(post_mu_);
    posted_.push_back(std::move(fn));
  }
  uint64_t one = 1;
  (void)!::write(event_fd_.get(), &one, sizeof one);
}

void Daemon::Impl::drainPosted() {
  std::vector<std::function<void()>> work;
  {
    std::lock_guard lk(post_mu_);
    work.swap(posted_);
  }
  for (auto& fn : work) {
    fn();
  }
}

Mode Daemon::Impl::effectiveMode() const {
  if (config_.daemon.mode == Mode::Act && !nri_connected_) {
    return Mode::ObserveOnly;
  }
  return config_.daemon.mode;
}

void Daemon::Impl::refreshNriState() {
  const auto st = stub_->stats();
  nri_connected_ = st.synchronized;
  nri_reconnects_ = st.reconnects;
}

void Daemon::Impl::syncRegistry() {
  const auto snap = stub_->registry().snapshot();
  if (snap->generation == registry_generation_) {
    return;
  }
  registry_generation_ = snap->generation;
  std::set<std::string_view> present;  // views into `snap`, alive for this function
  std::vector<const Known*> upserted;  // for the trace lines (known_ nodes are stable)
  std::vector<std::string> removed;
  std::size_t changed = 0;
  for (const auto& [id, ctr] : snap->containers) {
    if (ctr->state == nri::ContainerState::Stopped) {
      continue;
    }
    present.insert(id);
    auto pod_it = snap->pods.find(ctr->pod_sandbox_id);
    std::shared_ptr<const nri::PodSandbox> pod =
        pod_it != snap->pods.end() ? pod_it->second : nullptr;
    auto it = known_.find(id);
    if (it != known_.end() && it->second.ctr == ctr && it->second.pod == pod) {
      continue;  // the registry's objects are immutable: same objects, same container
    }
    auto info = toContainerInfo(pod.get(), *ctr, node_cpus_);
    // New objects may carry the same content (a resync replaces every object): the engine only
    // hears about real changes, so its per-container windows survive a reconnect.
    if (it != known_.end() && it->second.ctr != nullptr && fullInfo(it->second) == info) {
      it->second.ctr = ctr;
      it->second.pod = std::move(pod);
      continue;
    }
    ++changed;
    if (it == known_.end()) {
      it = known_.emplace(std::string(id), Known{}).first;
      log()->info("container {}/{}/{} ({}) known", info.pod_namespace, info.pod_name,
                  info.container_name, id.substr(0, 12));
    }
    Known& k = it->second;
    const bool path_changed = k.ctr == nullptr || k.cgroupPath() != info.cgroup_path;
    k.ctr = ctr;
    k.pod = std::move(pod);
    k.resources = info.resources;
    k.cpuset = info.cpuset;
    k.tier = std::string(
        policy::tierName(info.tier ? *info.tier : policy::classifyTier(info).tier));
    k.display = info.pod_namespace + "/" + info.pod_name + "/" + info.container_name;
    if (path_changed) {
      if (k.cgroup_id != 0) {
        by_cgroup_.erase(k.cgroup_id);
      }
      k.cgroup_id = 0;
      k.resolve_tick = 0;
    }
    upserted.push_back(&k);
    keepPolicyKeys(info);
    std::lock_guard lk(engine_mu_);
    engine_->upsertContainer(std::move(info));
  }
  for (auto it = known_.begin(); it != known_.end();) {
    if (present.count(it->first) != 0) {
      ++it;
      continue;
    }
    log()->info("container {} ({}) gone", it->second.display, it->first.substr(0, 12));
    if (it->second.cgroup_id != 0) {
      by_cgroup_.erase(it->second.cgroup_id);
    }
    removed.push_back(it->first);
    pending_restore_.erase(it->first);
    {
      std::lock_guard lk(engine_mu_);
      engine_->removeContainer(it->first);
    }
    it = known_.erase(it);
  }
  {
    // One critical section for the lines and the prefix, so a recording that starts meanwhile
    // sees every change exactly once (in its prefix or as a line). Lines are encoded only for
    // live recordings: ~2 KB of JSON a container otherwise built for nobody.
    std::lock_guard lk(rec_mu_);
    if (!recorders_.empty()) {
      for (const Known* k : upserted) {
        broadcastTraceLocked(policy::encodeUpsert(fullInfo(*k)), false);
      }
      for (const auto& id : removed) {
        broadcastTraceLocked(policy::encodeRemove(id), false);
      }
    }
    trace_prefix_.clear();
    trace_prefix_.reserve(known_.size());
    for (const auto& [id, k] : known_) {
      trace_prefix_.emplace_back(k.pod, k.ctr);
    }
  }
  if (changed >= kTrimAfterChanges) {
    // A (re)synchronize just replaced the registry and rebuilt the tables: hand the transient
    // peak (request buffer, decoded copies, old registry, trace lines) back to the kernel
    // instead of keeping it as free heap for the life of the process. Milliseconds, here on the
    // loop thread, not on the NRI reply path.
    ::malloc_trim(0);
  }
  resolveCgroups(true);
  if (snap->synchronized && !reconciled_) {
    reconcileJournal(std::chrono::duration_cast<std::chrono::nanoseconds>(
                         Clock::now().time_since_epoch())
                         .count());
  }
}

void Daemon::Impl::resolveCgroups(bool force) {
  for (auto& [id, k] : known_) {
    if (k.cgroup_id != 0) {
      continue;
    }
    // Unresolved containers (not started yet, or cgroup not created) are retried every ~1 s.
    if (!force && tick_no_ - k.resolve_tick < 10) {
      continue;
    }
    k.resolve_tick = tick_no_;
    auto rel = containerCgroupRel(k.cgroupPath(), config_.daemon.cgroup_driver,
                                  config_.daemon.systemd_cgroup_prefix);
    if (!rel) {
      k.resolve_error = rel.error().message();
      continue;
    }
    k.rel = *rel;
    struct stat st {};
    const std::string dir = hierarchy_root_ + k.rel;
    if (::stat(dir.c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) {
      k.resolve_error = "no cgroup directory " + dir;
      continue;
    }
    k.cgroup_id = st.st_ino;
    k.resolve_error.clear();
    by_cgroup_[k.cgroup_id] = id;
    log()->debug("container {} -> cgroup {} (id {})", k.display, k.rel, k.cgroup_id);
  }
}

// The fields set in `v` replace those of `r`.
static void overlayResources(policy::Resources& r, const policy::Resources& v) {
  if (v.cpu_shares) {
    r.cpu_shares = v.cpu_shares;
  }
  if (v.cpu_quota) {
    r.cpu_quota = v.cpu_quota;
  }
  if (v.cpu_period) {
    r.cpu_period = v.cpu_period;
  }
  if (v.cpuset_cpus) {
    r.cpuset_cpus = v.cpuset_cpus;
  }
  if (v.cpuset_mems) {
    r.cpuset_mems = v.cpuset_mems;
  }
  if (v.memory_limit) {
    r.memory_limit = v.memory_limit;
  }
  for (const auto& [key, value] : v.unified) {
    r.unified[key] = value;
  }
}

void Daemon::Impl::reconcileJournal(int64_t now_ns) {
  reconciled_ = true;
  if (journal_loaded_.entries.empty()) {
    return;
  }
  std::set<std::string> present;
  for (const auto& [id, k] : known_) {
    present.insert(id);
  }
  auto plan = planReconcile(journal_loaded_, present, config_.daemon.reconcile);
  for (const auto& e : plan.dropped) {
    log()->info("journal: {} ({}) is gone, nothing to restore", e.target_name,
                e.action.target_id.substr(0, 12));
  }
  if (!plan.reseed.empty()) {
    std::vector<policy::AppliedAction> actions;
    for (const auto& e : plan.reseed) {
      actions.push_back(e.action);
    }
    Result<void> r;
    {
      std::lock_guard lk(engine_mu_);
      r = engine_->seedApplied(actions, now_ns);
    }
    if (r) {
      log()->info("journal: {} restrictions handed back to the engine", actions.size());
    } else {
      log()->warn("journal: engine refused the restrictions ({}); restoring them instead",
                  r.error().message());
      plan.restore.insert(plan.restore.end(), plan.reseed.begin(), plan.reseed.end());
    }
  }
  std::set<std::string> targets;
  for (const auto& e : plan.restore) {
    targets.insert(e.action.target_id);
  }
  for (const auto& target : targets) {
    const auto values = originalValuesOf(target, plan.restore);
    std::string name;
    for (auto& e : plan.restore) {
      if (e.action.target_id == target) {
        name = e.target_name;
        e.restore_pending = true;
        pending_restore_[target] = e;
      }
    }
    log()->info("decision kind=restore target={} values=\"{}\" reason=\"journal reconcile after "
                "restart: returning to the original values\"",
                name, describeResources(values));
    // Until the runtime reports the restore, the registry still shows the values the dead colod
    // applied; a restriction decided meanwhile would take them as the originals and "restore"
    // them later (seen: a quota left at 1 CPU). Show the engine the originals now.
    if (auto kt = known_.find(target); kt != known_.end()) {
      policy::ContainerInfo info = fullInfo(kt->second);
      overlayResources(info.resources, values);
      keepPolicyKeys(info);
      std::lock_guard lk(engine_mu_);
      engine_->upsertContainer(std::move(info));
    }
    v1::Decision d;
    d.set_unix_ms(unixMs());
    d.set_container_id(target);
    d.set_container(name);
    d.set_kind("restore");
    d.set_reason("journal reconcile after restart");
    d.set_values(describeResources(values));
    if (effectiveMode() == Mode::Act) {
      d.set_outcome("pending");
      PendingUpdate u;
      u.update.container_id = target;
      u.update.resources = toLinuxResources(values, all_cpus_);
      u.target_display = name;
      enqueue(std::move(u));
    } else {
      d.set_outcome(std::string(modeName(effectiveMode())));
    }
    {
      std::lock_guard lk(decisions_mu_);
      recent_.push_back(d);
      while (recent_.size() > config_.daemon.decisions_kept) {
        recent_.pop_front();
      }
    }
    std::lock_guard lk(counts_mu_);
    ++decisions_by_kind_["restore"];
  }
  writeJournalNow();
}

void Daemon::Impl::tick() {
  const auto t0 = Clock::now();
  ++tick_no_;
  ++ticks_;
  if (t0 - last_tick_ > config_.daemon.interval * 3) {
    ++tick_overruns_;
  }
  last_tick_ = t0;
  refreshNriState();
  syncRegistry();
  if (tick_no_ % 10 == 0) {
    resolveCgroups(false);
  }
  auto snap = collector_->snapshot();
  if (!snap) {
    if (snapshot_errors_++ % 100 == 0) {
      log()->warn("collector snapshot failed ({} so far): {}", snapshot_errors_.load(),
                  snap.error().message());
    }
    publish(nullptr);
    return;
  }
  bpf_drops_ = snap->stats.map_drops;

  policy::Snapshot ps;
  ps.now_ns =
      std::chrono::duration_cast<std::chrono::nanoseconds>(snap->now.time_since_epoch()).count();
  ps.interval_ns = snap->interval.count();
  ps.node_cpus = static_cast<int>(node_cpus_.size());
  ps.node_cpu_list = node_cpus_;
  auto container_of = [this](uint64_t cgid) -> std::string {
    auto it = by_cgroup_.find(cgid);
    return it == by_cgroup_.end() ? std::string() : it->second;
  };
  for (auto& [id, k] : known_) {
    k.has_last = false;
  }
  for (const auto& cg : snap->cgroups) {
    auto it = by_cgroup_.find(cg.id);
    if (it == by_cgroup_.end()) {
      continue;
    }
    Known& k = known_[it->second];
    auto sample = toContainerSample(it->second, cg, container_of, k.cpu_some_total_us);
    if (cg.cpu_pressure) {
      k.cpu_some_total_us = cg.cpu_pressure->some.total_us;
    }
    for (std::size_t i = 0; i < collect::kHistSlots; ++i) {
      k.runq_slots[i] += cg.runq_hist[i];
    }
    k.runq_sum_ns += cg.runq.total_ns;
    k.preemptions += cg.involuntary_switches;
    if (cg.throttling) {
      k.throttled_periods += cg.throttling->nr_throttled;
      k.throttled_ns += cg.throttling->throttled_ns;
    }
    k.reclaim_ns += cg.reclaim_stall_ns;
    k.last = cg;
    k.has_last = true;
    ps.containers.push_back(std::move(sample));
  }
  // A known container without activity had a quiet interval: the engine must see it (relaxing
  // needs quiet intervals of the victim), so it gets an all-zero sample.
  std::set<std::string> sampled;
  for (const auto& c : ps.containers) {
    sampled.insert(c.id);
  }
  for (const auto& [id, k] : known_) {
    if (k.cgroup_id != 0 && sampled.count(id) == 0) {
      policy::ContainerSample idle;
      idle.id = id;
      ps.containers.push_back(std::move(idle));
    }
  }
  if (recording()) {
    broadcastTrace(policy::encodeSnapshot(ps), true);
  }

  policy::RoundResult round;
  {
    std::lock_guard lk(engine_mu_);
    round = engine_->evaluate(ps);
  }
  handleDecisions(round);
  // Publishing copies every container's view: once a second is enough for coloctl and scrapes
  // (the default 15 s scrape interval), and right away when something was decided.
  if (!round.decisions.empty() || tick_no_ % 10 == 0) {
    publish(&ps);
  }
  const auto took = Clock::now() - t0;
  if (took > config_.daemon.interval) {
    ++tick_overruns_;
    log()->debug("tick took {} ms", std::chrono::duration_cast<std::chrono::milliseconds>(took)
                                        .count());
  }
}

void Daemon::Impl::handleDecisions(const policy::RoundResult& round) {
  for (const auto& f : round.findings) {
    // Each finding once until it stops being reported (a finding repeats every interval).
    if (findings_seen_.emplace(f.container_id, f.rule).second) {
      log()->info("finding container={} rule={} {}", f.container_id.substr(0, 12), f.rule,
                  f.message);
    }
  }
  if (findings_seen_.size() > 4096) {
    findings_seen_.clear();
  }
  if (round.decisions.empty()) {
    return;
  }
  const Mode mode = effectiveMode();
  bool journal_dirty = false;
  for (const auto& d : round.decisions) {
    const std::string kind(policy::decisionKindName(d.kind));
    const std::string values = describeResources(d.new_values);
    std::string outcome;
    if (d.dry_run || mode == Mode::DryRun) {
      outcome = "dry-run";
    } else if (mode == Mode::ObserveOnly) {
      outcome = "observe-only";
    } else {
      outcome = "pending";
    }
    // Every decision is logged exactly once, with its reason.
    log()->info(
        "decision seq={} kind={} lever={} target={} victim={} values=\"{}\" rule={} outcome={} "
        "reason=\"{}\"",
        d.seq, kind, policy::leverName(d.lever), d.target_name.empty() ? d.target_id : d.target_name,
        d.victim_name.empty() ? d.victim_id : d.victim_name, values, d.rule, outcome,
        d.explanation);
    v1::Decision p;
    p.set_unix_ms(unixMs());
    p.set_seq(d.seq);
    p.set_container_id(d.target_id);
    p.set_container(d.target_name);
    p.set_kind(kind + "/" + std::string(policy::leverName(d.lever)));
    p.set_reason(d.explanation.empty() ? d.rule : d.explanation);
    p.set_values(values);
    p.set_outcome(outcome);
    {
      std::lock_guard lk(decisions_mu_);
      recent_.push_back(p);
      while (recent_.size() > config_.daemon.decisions_kept) {
        recent_.pop_front();
      }
    }
    {
      std::lock_guard lk(counts_mu_);
      ++decisions_by_kind_[kind];
    }
    if (outcome != "pending") {
      if (outcome == "observe-only") {
        // Not applied: the engine must not believe it is in force.
        std::lock_guard lk(engine_mu_);
        engine_->reportApplyFailure(d);
      }
      continue;
    }
    PendingUpdate u;
    u.seq = d.seq;
    u.update.container_id = d.target_id;
    u.update.resources = toLinuxResources(d.new_values, all_cpus_);
    u.decision = d;
    u.target_display = d.target_name;
    enqueue(std::move(u));
    journal_dirty = true;
  }
  if (journal_dirty) {
    // Write-ahead: the originals are on disk before the runtime changes anything. The sender
    // is woken after this (enqueue only queued).
    writeJournalNow();
  }
  send_cv_.notify_one();
}

void Daemon::Impl::enqueue(PendingUpdate u) {
  std::lock_guard lk(send_mu_);
  send_queue_.push_back(std::move(u));
  // Bounded: the oldest updates go first (a later decision supersedes them anyway).
  while (send_queue_.size() > 4096) {
    ++updates_dropped_;
    send_queue_.pop_front();
  }
}

void Daemon::Impl::writeJournalNow() {
  Journal j;
  std::vector<policy::AppliedAction> applied;
  {
    std::lock_guard lk(engine_mu_);
    applied = engine_->applied();
  }
  for (auto& a : applied) {
    JournalEntry e;
    auto it = known_.find(a.target_id);
    e.target_name = it != known_.end() ? it->second.display : "";
    e.action = std::move(a);
    j.entries.push_back(std::move(e));
  }
  for (const auto& [id, e] : pending_restore_) {
    j.entries.push_back(e);
  }
  if (j.entries.size() > config_.daemon.journal_max_entries) {
    // Keep the newest; the bound protects the disk and the reconcile time.
    j.entries.erase(j.entries.begin(),
                    j.entries.end() - static_cast<std::ptrdiff_t>(config_.daemon.journal_max_entries));
  }
  journal_entries_ = j.entries.size();
  auto r = writeJournal(config_.daemon.journal_path, j, config_.daemon.journal_max_entries);
  if (!r && journal_errors_++ % 100 == 0) {
    log()->error("journal write failed: {}", r.error().message());
  }
}

// ---------------------------------------------------------------------------------------------
// Sender

void Daemon::Impl::senderLoop() {
  while (true) {
    std::vector<PendingUpdate> batch;
    {
      std::unique_lock lk(send_mu_);
      send_cv_.wait_for(lk, std::chrono::milliseconds(500),
                        [this] { return send_stop_ || !send_queue_.empty(); });
      if (send_stop_) {
        return;
      }
      if (send_queue_.empty()) {
        continue;
      }
    }
    if (!nri_connected_) {
      // Updates wait for the runtime (reconnect + resync), they are not lost.
      stub_->waitSynchronized(std::chrono::milliseconds(500));
      continue;
    }
    {
      std::lock_guard lk(send_mu_);
      std::set<std::string> in_batch;
      while (!send_queue_.empty() && batch.size() < config_.daemon.max_batch) {
        auto& front = send_queue_.front();
        // One update per container per call keeps the order of changes to one container.
        if (in_batch.count(front.update.container_id) != 0) {
          break;
        }
        if (front.solo && !batch.empty()) {
          break;
        }
        in_batch.insert(front.update.container_id);
        batch.push_back(std::move(front));
        send_queue_.pop_front();
        if (batch.back().solo) {
          break;
        }
      }
    }
    std::vector<nri::ContainerUpdate> updates;
    updates.reserve(batch.size());
    for (const auto& u : batch) {
      updates.push_back(u.update);
    }
    auto r = stub_->updateContainers(std::move(updates));
    onSendResult(std::move(batch), r);
  }
}

void Daemon::Impl::onSendResult(std::vector<PendingUpdate> batch, const Result<void>& r) {
  if (r) {
    updates_sent_ += batch.size();
    for (const auto& u : batch) {
      setOutcome(u.seq, "applied");
      log()->debug("applied update to {} ({})", u.target_display,
                   u.update.container_id.substr(0, 12));
      if (u.seq == 0) {
        const std::string id = u.update.container_id;
        post([this, id] {
          if (pending_restore_.erase(id) != 0) {
            log()->info("journal: restore of {} confirmed", id.substr(0, 12));
            writeJournalNow();
          }
        });
      }
    }
    return;
  }
  ++update_failures_;
  const int err = r.error().errnoValue();
  if (err == ENOTCONN) {
    // The connection dropped under us: not the update's fault; resend after the resync.
    std::lock_guard lk(send_mu_);
    for (auto it = batch.rbegin(); it != batch.rend(); ++it) {
      send_queue_.push_front(std::move(*it));
    }
    return;
  }
  log()->warn("UpdateContainers of {} containers failed: {}", batch.size(), r.error().message());
  std::vector<PendingUpdate> retry;
  for (auto& u : batch) {
    ++u.attempts;
    if (batch.size() > 1) {
      u.solo = true;  // find out which one fails
    }
    if (u.attempts >= config_.daemon.update_retries && (batch.size() == 1 || u.solo)) {
      if (batch.size() == 1) {
        ++updates_dropped_;
        setOutcome(u.seq, "failed: " + r.error().message());
        log()->error("giving up on update of {} after {} attempts: {}", u.target_display,
                     u.attempts, r.error().message());
        if (u.decision) {
          auto d = *u.decision;
          post([this, d] {
            {
              std::lock_guard lk(engine_mu_);
              engine_->reportApplyFailure(d);
            }
            writeJournalNow();
          });
        }
        continue;
      }
    }
    retry.push_back(std::move(u));
  }
  {
    std::lock_guard lk(send_mu_);
    for (auto it = retry.rbegin(); it != retry.rend(); ++it) {
      send_queue_.push_front(std::move(*it));
    }
  }
  // Back off a little before the retry (bounded, interruptible by stop).
  std::unique_lock lk(send_mu_);
  send_cv_.wait_for(lk, std::chrono::milliseconds(100), [this] { return send_stop_; });
}

void Daemon::Impl::setOutcome(uint64_t seq, const std::string& outcome) {
  if (seq == 0) {
    return;
  }
  std::lock_guard lk(decisions_mu_);
  for (auto it = recent_.rbegin(); it != recent_.rend(); ++it) {
    if (it->seq() == seq) {
      it->set_outcome(outcome);
      break;
    }
  }
}

// ---------------------------------------------------------------------------------------------
// Stop

void Daemon::Impl::restoreOnStop() {
  {
    std::lock_guard lk(send_mu_);
    send_stop_ = true;
    send_queue_.clear();
  }
  send_cv_.notify_all();
  if (sender_.joinable()) {
    sender_.join();
  }
  if (!config_.daemon.restore_on_stop || config_.daemon.mode != Mode::Act) {
    log()->info("leaving current values in place (restore_on_stop={}, mode={})",
                config_.daemon.restore_on_stop, modeName(config_.daemon.mode));
    return;
  }
  std::vector<policy::Decision> restores;
  {
    std::lock_guard lk(engine_mu_);
    restores = engine_->restoreAll(
        std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now().time_since_epoch())
            .count());
  }
  std::vector<nri::ContainerUpdate> updates;
  std::set<std::string> targets;
  for (const auto& d : restores) {
    log()->info("decision seq={} kind=restore target={} values=\"{}\" reason=\"colod is stopping: "
                "{}\"",
                d.seq, d.target_name.empty() ? d.target_id : d.target_name,
                describeResources(d.new_values), d.explanation);
    updates.push_back(
        {.container_id = d.target_id, .resources = toLinuxResources(d.new_values, all_cpus_)});
    targets.insert(d.target_id);
  }
  for (const auto& [id, e] : pending_restore_) {
    if (targets.count(id) == 0) {
      updates.push_back({.container_id = id,
                         .resources = toLinuxResources(
                             originalValuesOf(id, {e}), all_cpus_)});
    }
  }
  if (updates.empty()) {
    (void)writeJournal(config_.daemon.journal_path, Journal{}, config_.daemon.journal_max_entries);
    return;
  }
  if (!stub_->waitSynchronized(std::chrono::seconds(3))) {
    log()->warn("runtime not connected: {} restores left in the journal for the next start",
                updates.size());
    return;
  }
  Result<void> r;
  for (int attempt = 0; attempt < 3; ++attempt) {
    r = stub_->updateContainers(updates);
    if (r) {
      break;
    }
  }
  if (r) {
    log()->info("restored {} containers to their original values", updates.size());
    pending_restore_.clear();
    (void)writeJournal(config_.daemon.journal_path, Journal{}, config_.daemon.journal_max_entries);
  } else {
    log()->error("restore on stop failed ({}); the journal keeps the originals for the next "
                 "start",
                 r.error().message());
  }
}

void Daemon::Impl::shutdownThreads() {
  {
    std::lock_guard lk(send_mu_);
    send_stop_ = true;
  }
  send_cv_.notify_all();
  if (sender_.joinable()) {
    sender_.join();
  }
  {
    std::lock_guard lk(rec_mu_);
    for (auto& r : recorders_) {
      std::lock_guard rl(r->mu);
      r->closed = true;
      r->cv.notify_all();
    }
  }
  if (control_) {
    control_->stop();
  }
  if (http_) {
    http_->stop();
  }
  if (stub_) {
    stub_->stop();
  }
}

// ---------------------------------------------------------------------------------------------
// Config reload

Result<void> Daemon::Impl::reload(const std::string& why) {
  if (options_.config_path.empty()) {
    return COLOD_ERR(ENOENT, "colod runs with the built-in defaults (no --config): nothing to "
                             "reload");
  }
  auto next = loadConfig(options_.config_path);
  if (!next) {
    ++reload_failures_;
    log()->error("config reload ({}) rejected, keeping the running configuration: {}", why,
                 next.error().message());
    return std::move(next).error();
  }
  if (next->text == config_.text) {
    log()->debug("config reload ({}): unchanged", why);
    return {};
  }
  auto policy_cfg = next->policy;
  if (next->daemon.mode == Mode::DryRun) {
    policy_cfg.dry_run = true;
  }
  {
    std::lock_guard lk(engine_mu_);
    auto r = engine_->setConfig(policy_cfg);
    if (!r) {
      ++reload_failures_;
      log()->error("config reload ({}) rejected by the policy, keeping the running "
                   "configuration: {}",
                   why, r.error().message());
      return r;
    }
  }
  const std::string restart_only = restartOnlyChanges(config_.daemon, next->daemon);
  if (!restart_only.empty()) {
    log()->warn("config reload: {} changed; these take effect after a restart", restart_only);
  }
  const auto old_interval = config_.daemon.interval;
  {
    std::lock_guard lk(config_mu_);
    // Keep the restart-only settings of the running process.
    DaemonSettings merged = config_.daemon;
    merged.interval = next->daemon.interval;
    merged.mode = next->daemon.mode;
    merged.cgroup_driver = next->daemon.cgroup_driver;
    merged.systemd_cgroup_prefix = next->daemon.systemd_cgroup_prefix;
    merged.restore_on_stop = next->daemon.restore_on_stop;
    merged.reconcile = next->daemon.reconcile;
    merged.log_level = next->daemon.log_level;
    merged.update_retries = next->daemon.update_retries;
    merged.max_batch = next->daemon.max_batch;
    merged.journal_max_entries = next->daemon.journal_max_entries;
    config_.daemon = merged;
    config_.policy = next->policy;
    config_.text = next->text;
  }
  log()->set_level(spdlog::level::from_str(config_.daemon.log_level));
  if (config_.daemon.interval != old_interval) {
    itimerspec its{};
    its.it_interval.tv_sec = config_.daemon.interval.count() / 1000;
    its.it_interval.tv_nsec = (config_.daemon.interval.count() % 1000) * 1000000;
    its.it_value = its.it_interval;
    ::timerfd_settime(timer_fd_.get(), 0, &its, nullptr);
  }
  ++reloads_;
  log()->info("config reloaded ({}): mode {}, interval {} ms", why, modeName(config_.daemon.mode),
              config_.daemon.interval.count());
  return {};
}

// ---------------------------------------------------------------------------------------------
// Publishing (end of tick) and the control API

void Daemon::Impl::publish(const policy::Snapshot* /*snap*/) {
  auto v = std::make_shared<View>();
  v->unix_ms = unixMs();
  std::map<std::string, std::string> tiers;
  std::map<std::string, bool> managed;
  {
    std::lock_guard lk(engine_mu_);
    for (const auto& a : engine_->applied()) {
      managed[a.target_id] = true;
    }
  }
  for (const auto& [id, k] : known_) {
    tiers[id] = k.tier;
  }
  for (const auto& [id, k] : known_) {
    v1::Container c;
    c.set_id(id);
    c.set_name(k.containerName());
    c.set_pod(std::string(k.podName()));
    c.set_namespace_(std::string(k.podNamespace()));
    c.set_pod_uid(std::string(k.podUid()));
    c.set_tier(tiers[id]);
    c.set_cgroup_id(k.cgroup_id);
    c.set_cgroup_path(k.cgroup_id != 0 ? k.rel : "");
    const auto& r = k.resources;
    c.set_cpuset(r.cpuset_cpus.value_or(""));
    c.set_quota_us(r.cpu_quota.value_or(-1));
    c.set_period_us(r.cpu_period.value_or(0));
    c.set_shares(r.cpu_shares.value_or(0));
    c.set_managed(managed.count(id) != 0);
    std::optional<std::array<uint32_t, collect::kHistSlots>> last;
    if (k.has_last) {
      const auto& s = k.last;
      c.set_runq_count(s.runq.count);
      c.set_runq_p50_us(s.runq.p50_us);
      c.set_runq_p90_us(s.runq.p90_us);
      c.set_runq_p99_us(s.runq.p99_us);
      c.set_runq_max_us(s.runq.max_us);
      c.set_preemptions(s.involuntary_switches);
      for (const auto& a : s.preempted_by) {
        if (c.preempted_by_size() >= 3) {
          break;
        }
        auto* ag = c.add_preempted_by();
        auto it = by_cgroup_.find(a.cgroup_id);
        ag->set_container(it != by_cgroup_.end() ? known_.at(it->second).display
                                                 : (a.path.empty() ? "host" : a.path));
        ag->set_preemptions(a.preemptions);
      }
      if (s.throttling) {
        c.set_nr_throttled(s.throttling->nr_throttled);
        c.set_throttled_ns(s.throttling->throttled_ns);
      }
      c.set_reclaim_stall_ns(s.reclaim_stall_ns);
      const double interval_ns = static_cast<double>(config_.daemon.interval.count()) * 1e6;
      c.set_cpu_util(interval_ns > 0 ? static_cast<double>(s.oncpu_ns) / interval_ns : 0);
      last = s.runq_hist;
    }
    v->last.push_back(last);
    v->containers.push_back(std::move(c));

    metrics::ContainerMetrics m;
    m.pod = k.podName();
    m.namespace_ = k.podNamespace();
    m.container = k.containerName();
    m.tier = tiers[id];
    m.runq_slots = k.runq_slots;
    m.runq_sum_seconds = static_cast<double>(k.runq_sum_ns) / 1e9;
    m.preemptions = k.preemptions;
    m.throttled_periods = k.throttled_periods;
    m.throttled_seconds = static_cast<double>(k.throttled_ns) / 1e9;
    m.reclaim_stall_seconds = static_cast<double>(k.reclaim_ns) / 1e9;
    if (!k.cpuset.empty()) {
      m.cpuset_cpus = static_cast<uint32_t>(k.cpuset.size());
    } else {
      m.cpuset_cpus = static_cast<uint32_t>(node_cpus_.size());
    }
    if (r.cpu_quota && *r.cpu_quota > 0 && r.cpu_period && *r.cpu_period > 0) {
      m.quota_cpus = static_cast<double>(*r.cpu_quota) / static_cast<double>(*r.cpu_period);
    }
    m.cpu_shares = r.cpu_shares;
    v->metrics.containers.push_back(std::move(m));
  }
  // Sort the protos by display name, remembering where each came from (see View::source).
  {
    std::vector<std::size_t> order(v->containers.size());
    std::iota(order.begin(), order.end(), std::size_t{0});
    std::vector<std::string> names;
    names.reserve(v->containers.size());
    for (const auto& c : v->containers) {
      names.push_back(control::displayName(c));
    }
    std::sort(order.begin(), order.end(),
              [&](std::size_t a, std::size_t b) { return names[a] < names[b]; });
    std::vector<v1::Container> sorted;
    sorted.reserve(order.size());
    for (auto i : order) {
      sorted.push_back(std::move(v->containers[i]));
    }
    v->containers = std::move(sorted);
    v->source = std::move(order);
  }
  uint64_t unresolved = 0;
  for (const auto& [id, k] : known_) {
    unresolved += k.cgroup_id == 0 ? 1 : 0;
  }
  auto& d = v->metrics.daemon;
  {
    std::lock_guard lk(counts_mu_);
    d.decisions_by_kind = decisions_by_kind_;
  }
  d.nri_connected = nri_connected_;
  d.nri_reconnects = nri_reconnects_;
  d.updates_sent = updates_sent_;
  d.update_failures = update_failures_;
  d.updates_dropped = updates_dropped_;
  d.bpf_dropped_events = bpf_drops_;
  d.ticks = ticks_;
  d.tick_overruns = tick_overruns_;
  d.config_reloads = reloads_;
  d.config_reload_failures = reload_failures_;
  d.unresolved_containers = unresolved;
  d.containers = known_.size();
  d.mode = std::string(modeName(effectiveMode()));

  auto& st = v->status;
  st.set_version("0.1.0");
  st.set_mode(d.mode);
  st.set_nri_connected(d.nri_connected);
  st.set_nri_reconnects(d.nri_reconnects);
  st.set_containers(d.containers);
  st.set_ticks(d.ticks);
  st.set_started_unix_ms(started_unix_ms_);
  st.set_config_path(options_.config_path);
  st.set_cgroup_mode(collect::toString(collector_->mode()));
  st.set_updates_sent(d.updates_sent);
  st.set_update_failures(d.update_failures);
  st.set_journal_entries(journal_entries_);
  st.set_interval_ms(config_.daemon.interval.count());
  std::shared_ptr<const View> old;
  {
    std::lock_guard lk(view_mu_);
    old = std::move(view_);
    view_ = std::move(v);
  }
  old.reset();  // outside the lock (unless a reader still holds it)
  // Once a second: the previous view and the collector's per-tick map dumps (~1.5 MB with 1000
  // containers) are free heap now; without a trim glibc keeps those pages resident for the life
  // of the process (1000 containers: RSS 35.2 -> 33.4 MiB). Costs well under a millisecond on
  // the loop thread; the pages fault back in as the next tick reuses them.
  ::malloc_trim(0);
}

namespace {
std::shared_ptr<const View> takeView(std::mutex& mu, const std::shared_ptr<const View>& v) {
  std::lock_guard lk(mu);
  return v;
}
}  // namespace

Result<v1::StatusReply> Daemon::Impl::status() {
  auto v = takeView(view_mu_, view_);
  v1::StatusReply st = v->status;
  const auto self = readSelfStats(config_.daemon.proc_root);
  st.set_rss_bytes(self.rss_bytes);
  st.set_cpu_seconds(self.cpu_seconds);
  return st;
}

Result<v1::ListContainersReply> Daemon::Impl::listContainers() {
  auto v = takeView(view_mu_, view_);
  v1::ListContainersReply out;
  for (const auto& c : v->containers) {
    *out.add_containers() = c;
  }
  out.set_unix_ms(v->unix_ms);
  out.set_interval_ms(v->status.interval_ms());
  return out;
}

Result<v1::DumpReply> Daemon::Impl::dump() {
  using nlohmann::json;
  auto v = takeView(view_mu_, view_);
  json doc;
  const auto self = readSelfStats(config_.daemon.proc_root);
  doc["status"] = {{"mode", v->status.mode()},
                   {"nri_connected", v->status.nri_connected()},
                   {"nri_reconnects", v->status.nri_reconnects()},
                   {"containers", v->status.containers()},
                   {"ticks", v->status.ticks()},
                   {"interval_ms", v->status.interval_ms()},
                   {"cgroup_mode", v->status.cgroup_mode()},
                   {"updates_sent", v->status.updates_sent()},
                   {"update_failures", v->status.update_failures()},
                   {"journal_entries", v->status.journal_entries()},
                   {"rss_bytes", self.rss_bytes},
                   {"cpu_seconds", self.cpu_seconds}};
  json ctrs = json::array();
  for (const auto& c : v->containers) {
    json agg = json::array();
    for (const auto& a : c.preempted_by()) {
      agg.push_back({{"container", a.container()}, {"preemptions", a.preemptions()}});
    }
    ctrs.push_back({{"id", c.id()},
                    {"namespace", c.namespace_()},
                    {"pod", c.pod()},
                    {"name", c.name()},
                    {"tier", c.tier()},
                    {"cgroup_id", c.cgroup_id()},
                    {"cgroup_path", c.cgroup_path()},
                    {"runq", {{"count", c.runq_count()},
                              {"p50_us", c.runq_p50_us()},
                              {"p90_us", c.runq_p90_us()},
                              {"p99_us", c.runq_p99_us()},
                              {"max_us", c.runq_max_us()}}},
                    {"preemptions", c.preemptions()},
                    {"preempted_by", agg},
                    {"nr_throttled", c.nr_throttled()},
                    {"throttled_ns", c.throttled_ns()},
                    {"reclaim_stall_ns", c.reclaim_stall_ns()},
                    {"cpuset", c.cpuset()},
                    {"quota_us", c.quota_us()},
                    {"period_us", c.period_us()},
                    {"shares", c.shares()},
                    {"managed", c.managed()},
                    {"cpu_util", c.cpu_util()}});
  }
  doc["containers"] = ctrs;
  json applied = json::array();
  {
    std::lock_guard lk(engine_mu_);
    for (const auto& a : engine_->applied()) {
      applied.push_back({{"target_id", a.target_id},
                         {"victim_id", a.victim_id},
                         {"lever", std::string(policy::leverName(a.lever))},
                         {"rung", a.rung},
                         {"applied", describeResources(a.applied_values)},
                         {"original", describeResources(a.original_values)}});
    }
  }
  doc["applied"] = applied;
  json decs = json::array();
  {
    std::lock_guard lk(decisions_mu_);
    for (const auto& d : recent_) {
      decs.push_back({{"seq", d.seq()},
                      {"unix_ms", d.unix_ms()},
                      {"container", d.container()},
                      {"kind", d.kind()},
                      {"values", d.values()},
                      {"outcome", d.outcome()},
                      {"reason", d.reason()}});
    }
  }
  doc["decisions"] = decs;
  v1::DumpReply out;
  out.set_json(doc.dump(2));
  return out;
}

Result<v1::HistogramReply> Daemon::Impl::histogram(const std::string& query) {
  auto v = takeView(view_mu_, view_);
  auto idx = control::resolveContainer(v->containers, query);
  if (!idx) {
    return std::move(idx).error();
  }
  const auto& c = v->containers[*idx];
  v1::HistogramReply out;
  *out.mutable_container() = c;
  const std::size_t src = v->source[*idx];
  for (auto s : v->metrics.containers[src].runq_slots) {
    out.add_runq_slots(s);
  }
  if (const auto& last = v->last[src]) {
    for (auto s : *last) {
      out.add_last_slots(s);
    }
  }
  return out;
}

Result<v1::DecisionsReply> Daemon::Impl::decisions(uint32_t limit) {
  v1::DecisionsReply out;
  std::lock_guard lk(decisions_mu_);
  const std::size_t n = limit == 0 ? recent_.size() : std::min<std::size_t>(limit, recent_.size());
  for (std::size_t i = recent_.size() - n; i < recent_.size(); ++i) {
    *out.add_decisions() = recent_[i];
  }
  return out;
}

Result<v1::ExplainReply> Daemon::Impl::explain(const std::string& query) {
  auto v = takeView(view_mu_, view_);
  auto idx = control::resolveContainer(v->containers, query);
  if (!idx) {
    return std::move(idx).error();
  }
  const auto& c = v->containers[*idx];
  v1::ExplainReply out;
  *out.mutable_container() = c;
  std::ostringstream text;
  Result<policy::ContainerView> view = COLOD_ERR(ENOENT, "unknown");
  {
    std::lock_guard lk(engine_mu_);
    view = engine_->describe(c.id());
  }
  text << control::displayName(c) << " (" << c.id().substr(0, 12) << ")\n";
  if (!view) {
    text << "  the engine does not track it: " << view.error().message() << "\n";
  } else {
    const auto& cv = *view;
    text << "  tier: " << policy::tierName(cv.tier) << " (from " << cv.tier_source << ")\n";
    text << "  thresholds: run-queue p99 > " << cv.thresholds.runq_p99_us << " us or > "
         << cv.thresholds.baseline_factor << " x baseline (floor "
         << cv.thresholds.baseline_floor_us << " us)\n";
    text << "  baseline p99: " << cv.baseline_p99_us << " us; hits in window: "
         << cv.hits_in_window << "\n";
    text << "  victim now: " << (cv.victim ? "yes" : "no") << "\n";
    if (cv.restrictions.empty()) {
      text << "  restrictions held by colod: none\n";
    }
    for (const auto& a : cv.restrictions) {
      text << "  restriction: " << policy::leverName(a.lever) << " rung " << a.rung << " for victim "
           << a.victim_id.substr(0, 12) << ": " << describeResources(a.applied_values)
           << " (original " << describeResources(a.original_values) << ")\n";
    }
    if (!cv.last_explanation.empty()) {
      text << "  last: " << cv.last_explanation << "\n";
    }
  }
  text << "  cgroup: " << (c.cgroup_id() != 0 ? c.cgroup_path() : "unresolved") << "\n";
  text << "  last interval: run-queue p50 " << c.runq_p50_us() << " us, p99 " << c.runq_p99_us()
       << " us over " << c.runq_count() << " wake-ups, " << c.preemptions() << " preemptions\n";
  {
    std::lock_guard lk(decisions_mu_);
    for (const auto& d : recent_) {
      if (d.container_id() == c.id() || d.reason().find(c.id()) != std::string::npos) {
        *out.add_decisions() = d;
      }
    }
  }
  out.set_text(text.str());
  return out;
}

Result<v1::ConfigShowReply> Daemon::Impl::configShow() {
  v1::ConfigShowReply out;
  std::lock_guard lk(config_mu_);
  out.set_path(options_.config_path);
  if (config_.text.empty()) {
    std::string yaml = "# built-in defaults (colod started without --config)\ndaemon: {}\npolicy:\n";
    std::istringstream in{std::string(policy::defaultConfigYaml())};
    std::string line;
    while (std::getline(in, line)) {
      yaml += line.empty() ? "\n" : "  " + line + "\n";
    }
    out.set_yaml(yaml);
  } else {
    out.set_yaml(config_.text);
  }
  return out;
}

Result<v1::ConfigCheckReply> Daemon::Impl::configCheck(const v1::ConfigCheckRequest& req) {
  v1::ConfigCheckReply out;
  auto r = parseConfig(req.yaml(), req.path().empty() ? "<config>" : req.path());
  out.set_ok(r.has_value());
  if (!r) {
    out.set_error(r.error().message());
  }
  return out;
}

Result<v1::ConfigReloadReply> Daemon::Impl::configReload() {
  auto promise = std::make_shared<std::promise<Result<void>>>();
  auto fut = promise->get_future();
  post([this, promise] { promise->set_value(reload("coloctl config reload")); });
  if (fut.wait_for(std::chrono::seconds(10)) != std::future_status::ready) {
    return COLOD_ERR(ETIMEDOUT, "the daemon loop did not answer within 10 s");
  }
  auto r = fut.get();
  v1::ConfigReloadReply out;
  out.set_ok(r.has_value());
  if (!r) {
    out.set_error(r.error().message());
  }
  return out;
}

void Daemon::Impl::broadcastTrace(const std::string& line, bool is_snapshot) {
  std::lock_guard lk(rec_mu_);
  broadcastTraceLocked(line, is_snapshot);
}

bool Daemon::Impl::recording() {
  std::lock_guard lk(rec_mu_);
  return !recorders_.empty();
}

void Daemon::Impl::broadcastTraceLocked(const std::string& line, bool is_snapshot) {
  for (auto& r : recorders_) {
    std::lock_guard rl(r->mu);
    if (r->bytes + line.size() > kRecorderMaxBytes) {
      ++r->dropped;  // a slow client loses lines rather than growing the daemon
      continue;
    }
    r->bytes += line.size() + 1;
    r->lines.push_back(line + "\n");
    if (is_snapshot) {
      ++r->snapshots;
    }
    r->cv.notify_one();
  }
}

Result<void> Daemon::Impl::record(uint32_t seconds,
                                  const std::function<bool(const v1::RecordChunk&)>& write,
                                  const std::function<bool()>& cancelled) {
  auto rec = std::make_shared<Recorder>();
  {
    std::lock_guard lk(rec_mu_);
    std::string head;
    {
      std::lock_guard cl(config_mu_);
      policy::TraceHeader h;
      // The running policy section, so a replay uses the same thresholds.
      h.config_yaml = policySectionYaml(config_.text);
      head = policy::encodeTraceHeader(h) + "\n";
    }
    for (const auto& [pod, ctr] : trace_prefix_) {
      head += policy::encodeUpsert(toContainerInfo(pod.get(), *ctr, node_cpus_)) + "\n";
    }
    rec->lines.push_back(std::move(head));
    recorders_.push_back(rec);
  }
  const auto deadline = Clock::now() + std::chrono::seconds(seconds);
  Result<void> result;
  while (true) {
    std::deque<std::string> lines;
    uint64_t snapshots = 0;
    bool closed = false;
    {
      std::unique_lock lk(rec->mu);
      rec->cv.wait_for(lk, std::chrono::milliseconds(200),
                       [&] { return !rec->lines.empty() || rec->closed; });
      lines.swap(rec->lines);
      rec->bytes = 0;
      snapshots = rec->snapshots;
      closed = rec->closed;
    }
    if (!lines.empty()) {
      v1::RecordChunk chunk;
      std::string data;
      for (auto& l : lines) {
        data += l;
      }
      chunk.set_data(std::move(data));
      chunk.set_snapshots(snapshots);
      if (!write(chunk)) {
        break;
      }
    }
    if (closed || cancelled() || (seconds > 0 && Clock::now() >= deadline)) {
      break;
    }
  }
  std::lock_guard lk(rec_mu_);
  std::erase(recorders_, rec);
  return result;
}

// ---------------------------------------------------------------------------------------------

Daemon::Daemon(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Daemon::~Daemon() = default;

Result<std::unique_ptr<Daemon>> Daemon::create(Config config, DaemonOptions options) {
  auto impl = std::make_unique<Impl>(std::move(config), std::move(options));
  auto r = impl->init();
  if (!r) {
    return std::move(r).error();
  }
  return std::unique_ptr<Daemon>(new Daemon(std::move(impl)));
}

int Daemon::run() { return impl_->run(); }

}  // namespace colod::daemon
