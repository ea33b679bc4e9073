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
#include "colod/daemon/actuator.h"
#include "colod/daemon/cgroup_path.h"
#include "colod/daemon/control_backend.h"
#include "colod/daemon/decision_log.h"
#include "colod/daemon/recorder.h"
#include "colod/daemon/view.h"
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

// A registry change of at least this many containers (a (re)synchronize) is followed by
// malloc_trim(): see syncRegistry().
constexpr std::size_t kTrimAfterChanges = 64;

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

std::string readSmallFile(const std::string& path) {
  std::ifstream in(path);
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

}  // namespace

class Daemon::Impl final : public nri::Plugin,
                           public nri::CreateContainerHandler,
                           public nri::UpdateContainerHandler {
 public:
  Impl(Config config, DaemonOptions options)
      : config_(std::make_shared<const Config>(std::move(config))),
        options_(std::move(options)) {}

  ~Impl() override { shutdownThreads(); }

  Impl(const Impl&) = delete;
  Impl& operator=(const Impl&) = delete;
  Impl(Impl&&) = delete;
  Impl& operator=(Impl&&) = delete;

  Result<void> init();
  int run();

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
  void tick();
  void syncRegistry();
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
  void reconcileJournal(int64_t now_ns);
  void checkUnprovenRestrictions();
  void handleDecisions(const policy::RoundResult& round);
  // Turns the engine's restrictions into overlays, journals them (write-ahead) and hands them to
  // the actuator. `round` (may be null) holds the decisions that led there.
  void commitOverlays(const policy::RoundResult* round);
  Result<void> writeJournalOf(const std::vector<ReconcileEntry>& entries);
  void onConverged(const std::string& id);
  void publish();
  Result<void> reload(const std::string& why);
  void restoreOnStop();
  void post(std::function<void()> fn);
  void drainPosted();
  Mode effectiveMode() const;
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
  std::map<std::string, Known, std::less<>> known_;
  std::unordered_map<uint64_t, std::string> by_cgroup_;
  uint64_t registry_generation_ = UINT64_MAX;
  uint64_t tick_no_ = 0;
  bool reconciled_ = false;
  Journal journal_loaded_;
  bool journal_corrupt_ = false;
  std::optional<JournalLock> journal_lock_;
  Wishes committed_;               // the overlays handed to the actuator (journaled)
  uint64_t journaled_version_ = 0;  // actuator version the journal on disk reflects
  std::map<std::string, std::vector<uint64_t>> awaiting_;  // target -> decisions not yet applied
  std::set<std::pair<std::string, std::string>> findings_seen_;
  Clock::time_point last_tick_{};

  // Counters (written by several threads).
  std::atomic<uint64_t> ticks_{0};
  std::atomic<uint64_t> tick_overruns_{0};
  std::atomic<uint64_t> updates_dropped_{0};
  std::atomic<uint64_t> reloads_{0};
  std::atomic<uint64_t> reload_failures_{0};
  std::atomic<uint64_t> snapshot_errors_{0};
  std::atomic<uint64_t> journal_errors_{0};
  std::atomic<uint64_t> journal_entries_{0};
  std::atomic<uint64_t> bpf_drops_{0};

  // The current containers, for the upserts that open a new recording (encoded when one starts,
  // not kept encoded: ~2 KB of JSON a container). Guarded by the recorders' lock.
  std::vector<
      std::pair<std::shared_ptr<const nri::PodSandbox>, std::shared_ptr<const nri::Container>>>
      trace_prefix_;

  // The only writer of container resources (after the stub: it reads the stub's registry).
  std::unique_ptr<Actuator> actuator_;
};

// ---------------------------------------------------------------------------------------------
// Startup

Result<void> Daemon::Impl::init() {
  const auto conf = cfg();
  const auto& s = conf->daemon;
  auto policy_cfg = conf->policy;
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

  // One colod per journal: a second one would "restore" the first one's restrictions through
  // NRI and empty its journal.
  auto lock = JournalLock::acquire(s.journal_path);
  if (!lock) {
    return std::move(lock).error();
  }
  journal_lock_.emplace(std::move(lock).value());
  auto journal = readJournal(s.journal_path);
  if (!journal) {
    // A corrupt journal must not stop the daemon, nor be lost: it is kept for a person, and once
    // the runtime has synchronized colod says which containers may still carry a restriction it
    // can no longer prove it made.
    const std::string aside = s.journal_path + ".corrupt-" + std::to_string(unixMs());
    std::error_code ec;
    std::filesystem::rename(s.journal_path, aside, ec);
    log()->error("journal unreadable, kept as {}{}: {}", aside,
                 ec ? " (rename failed: " + ec.message() + ")" : std::string(),
                 journal.error().message());
    journal_corrupt_ = true;
  } else {
    journal_loaded_ = std::move(journal).value();
    if (!journal_loaded_.containers.empty()) {
      log()->info("journal {}: {} containers to reconcile once the runtime has synchronized",
                  s.journal_path, journal_loaded_.containers.size());
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

  decisions_.setKept(s.decisions_kept);
  ControlHooks hooks;
  hooks.config_path = options_.config_path;
  hooks.config = [this] { return cfg(); };
  hooks.describe = [this](const std::string& id) -> Result<policy::ContainerView> {
    std::lock_guard lk(engine_mu_);
    return engine_->describe(id);
  };
  hooks.applied = [this] {
    std::lock_guard lk(engine_mu_);
    return engine_->applied();
  };
  hooks.overlays = [this] { return actuator_->entries(); };
  hooks.reload = [this]() -> Result<void> {
    auto promise = std::make_shared<std::promise<Result<void>>>();
    auto fut = promise->get_future();
    post([this, promise] { promise->set_value(reload("coloctl config reload")); });
    if (fut.wait_for(std::chrono::seconds(10)) != std::future_status::ready) {
      return COLOD_ERR(ETIMEDOUT, "the daemon loop did not answer within 10 s");
    }
    return fut.get();
  };
  hooks.trace_head = [this] {
    policy::TraceHeader h;
    // The running policy section, so a replay uses the same thresholds.
    h.config_yaml = policySectionYaml(cfg()->text);
    std::string head = policy::encodeTraceHeader(h) + "\n";
    for (const auto& [pod, ctr] : trace_prefix_) {  // the recorders' lock is held
      head += policy::encodeUpsert(engineInfo(pod.get(), *ctr)) + "\n";
    }
    return head;
  };
  hooks.self_stats = [this] { return readSelfStats(cfg()->daemon.proc_root); };
  hooks.now_ns = [] {
    return std::chrono::duration_cast<std::chrono::nanoseconds>(
               Clock::now().time_since_epoch())
        .count();
  };
  backend_ = std::make_unique<ControlBackend>(views_, decisions_, recorders_, std::move(hooks));
  auto control = control::Server::start(
      {.socket_path = s.control_socket, .socket_mode = s.control_socket_mode}, *backend_);
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
      const std::shared_ptr<const View> v = views_.take();
      metrics::MetricsView mv = v->metrics;
      const auto self = readSelfStats(cfg()->daemon.proc_root);
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
                // Wake the loop and the actuator so the change is seen without waiting.
                if (actuator_) {
                  actuator_->kick();
                }
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
  ActuatorOptions aopts;
  aopts.reconciler = {.all_cpus = all_cpus_,
                      .max_batch = s.max_batch,
                      .max_containers = s.journal_max_entries};
  aopts.send = [this](std::vector<nri::ContainerUpdate> updates) {
    return stub_->updateContainers(std::move(updates));
  };
  aopts.registry = &stub_->registry();
  aopts.session = [this] { return stub_->stats().connects; };
  aopts.on_note = [](const ReconcileNote& n) {
    log()->info("reconcile container={} ({}): {}", n.name.empty() ? n.id : n.name,
                n.id.substr(0, 12), n.text);
  };
  aopts.on_converged = [this](const std::string& id) { post([this, id] { onConverged(id); }); };
  actuator_ = std::make_unique<Actuator>(std::move(aopts));
  std::vector<ReconcileEntry> loaded;
  for (const auto& c : journal_loaded_.containers) {
    loaded.push_back(c.state);
  }
  // Before the first resync nothing is sent: the runtime must first say what is there.
  actuator_->load(loaded, s.reconcile == Reconcile::Reseed);
  actuator_->start();
  COLOD_TRY_VOID(stub_->start(), "starting the NRI stub");
  publish();  // the loop has not started: safe to touch loop state here
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
  const auto interval = cfg()->daemon.interval;
  itimerspec its{};
  its.it_interval.tv_sec = interval.count() / 1000;
  its.it_interval.tv_nsec = (interval.count() % 1000) * 1000000;
  its.it_value = its.it_interval;
  ::timerfd_settime(timer_fd_.get(), 0, &its, nullptr);
  last_tick_ = Clock::now();
  refreshNriState();
  publish();  // status and metrics answer from the first moment
  log()->info("colod running: mode {}, interval {} ms, control {}, {} CPUs",
              modeName(cfg()->daemon.mode), interval.count(), cfg()->daemon.control_socket,
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
  if (cfg()->daemon.mode == Mode::Act && !nri_connected_) {
    return Mode::ObserveOnly;
  }
  return cfg()->daemon.mode;
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
  actuator_->kick();  // the runtime said something: the actuator compares again
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
    auto info = engineInfo(pod.get(), *ctr);
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
    awaiting_.erase(it->first);
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
    recorders_.withLock([&](bool active, const TraceRecorders::Broadcast& send) {
      if (active) {
        for (const Known* k : upserted) {
          send(policy::encodeUpsert(fullInfo(*k)), false);
        }
        for (const auto& id : removed) {
          send(policy::encodeRemove(id), false);
        }
      }
      trace_prefix_.clear();
      trace_prefix_.reserve(known_.size());
      for (const auto& [id, k] : known_) {
        trace_prefix_.emplace_back(k.pod, k.ctr);
      }
    });
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
    auto rel = containerCgroupRel(k.cgroupPath(), cfg()->daemon.cgroup_driver,
                                  cfg()->daemon.systemd_cgroup_prefix);
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

void Daemon::Impl::reconcileJournal(int64_t now_ns) {
  reconciled_ = true;
  if (journal_corrupt_) {
    checkUnprovenRestrictions();
  }
  if (journal_loaded_.containers.empty()) {
    return;
  }
  const auto conf = cfg();
  std::vector<policy::AppliedAction> reseed;
  for (const auto& c : journal_loaded_.containers) {
    const auto& e = c.state;
    const std::string name = e.name.empty() ? e.id : e.name;
    if (known_.count(e.id) == 0) {
      log()->info("journal: {} ({}) is gone, nothing to restore", name, e.id.substr(0, 12));
      continue;
    }
    if (conf->daemon.reconcile == Reconcile::Reseed && !c.actions.empty()) {
      for (auto a : c.actions) {
        a.original_values = e.base;  // the runtime's own values, never colod's
        reseed.push_back(std::move(a));
      }
      continue;
    }
    log()->info("decision kind=restore target={} values=\"{}\" reason=\"journal reconcile after "
                "restart: returning to the runtime's own values\"",
                name, describeResources(e.base));
    v1::Decision d;
    d.set_unix_ms(unixMs());
    d.set_container_id(e.id);
    d.set_container(name);
    d.set_kind("restore");
    d.set_reason("journal reconcile after restart");
    d.set_values(describeResources(e.base));
    d.set_outcome(conf->daemon.mode == Mode::Act ? "pending" : "pending (restores always run)");
    decisions_.add(std::move(d), "restore");
  }
  if (!reseed.empty()) {
    Result<void> r;
    {
      std::lock_guard lk(engine_mu_);
      r = engine_->seedApplied(reseed, now_ns);
    }
    if (r) {
      log()->info("journal: {} restrictions handed back to the engine", reseed.size());
    } else {
      // The overlays the engine does not hold are released at the next commit.
      log()->warn("journal: engine refused the restrictions ({}); releasing them instead",
                  r.error().message());
    }
  }
  journal_loaded_ = {};
  commitOverlays(nullptr);
}

// After a corrupt journal colod cannot prove what it changed. What it can say: where the
// runtime's spec and the cgroup disagree, something outside the runtime's knowledge (maybe an
// earlier colod) changed the cgroup. Those containers are named for the operator.
void Daemon::Impl::checkUnprovenRestrictions() {
  std::size_t suspects = 0;
  for (const auto& [id, k] : known_) {
    if (k.cgroup_id == 0) {
      continue;
    }
    const std::string dir = hierarchy_root_ + k.rel;
    const auto& spec = k.ctr->resources.cpu;
    std::string why;
    // cgroup v2 cpu.max "quota|max period"; v1 cpu.cfs_quota_us.
    std::string quota = readSmallFile(dir + "/cpu.max");
    if (!quota.empty()) {
      const std::string q = quota.substr(0, quota.find(' '));
      const std::string want = spec.quota && *spec.quota > 0 ? std::to_string(*spec.quota) : "max";
      if (q != want) {
        why += "cpu.max " + q + " (runtime spec " + want + ")";
      }
    } else if (auto v1 = readSmallFile(dir + "/cpu.cfs_quota_us"); !v1.empty()) {
      const std::string q = v1.substr(0, v1.find('\n'));
      const std::string want = spec.quota && *spec.quota > 0 ? std::to_string(*spec.quota) : "-1";
      if (q != want) {
        why += "cpu.cfs_quota_us " + q + " (runtime spec " + want + ")";
      }
    }
    if (!why.empty()) {
      ++suspects;
      log()->warn("journal was corrupt: {} ({}) may still carry a restriction colod can no longer "
                  "prove it made: {}",
                  k.display, id.substr(0, 12), why);
    }
  }
  log()->warn("journal was corrupt: {} containers whose cgroup differs from the runtime's spec; "
              "colod reconciles from the runtime's truth from now on",
              suspects);
}

void Daemon::Impl::onConverged(const std::string& id) {
  auto it = awaiting_.find(id);
  if (it != awaiting_.end()) {
    for (uint64_t seq : it->second) {
      setOutcome(seq, "applied");
    }
    awaiting_.erase(it);
  }
  // Confirmed releases leave the journal; base changes are recorded.
  commitOverlays(nullptr);
}

Result<void> Daemon::Impl::writeJournalOf(const std::vector<ReconcileEntry>& entries) {
  const auto conf = cfg();
  std::map<std::string, std::vector<policy::AppliedAction>> actions;
  {
    std::lock_guard lk(engine_mu_);
    for (auto& a : engine_->applied()) {
      actions[a.target_id].push_back(std::move(a));
    }
  }
  Journal j;
  for (const auto& e : entries) {
    JournalContainer c;
    c.state = e;
    c.state.spec = {};
    c.state.pending = false;
    c.state.pending_since_ns = 0;
    c.state.attempts = 0;
    c.state.last_error.clear();
    if (auto it = actions.find(e.id); it != actions.end()) {
      c.actions = it->second;
    }
    j.containers.push_back(std::move(c));
  }
  journal_entries_ = j.containers.size();
  auto r = writeJournal(conf->daemon.journal_path, j, conf->daemon.journal_max_entries);
  if (!r) {
    if (journal_errors_++ % 100 == 0) {
      log()->error("journal write failed ({} so far): {}", journal_errors_.load(),
                   r.error().message());
    }
    return r;
  }
  return {};
}

void Daemon::Impl::commitOverlays(const policy::RoundResult* round) {
  if (!reconciled_) {
    return;  // the journal's containers are not known yet: nothing may be decided about them
  }
  const auto conf = cfg();
  Wishes wishes;
  if (conf->daemon.mode == Mode::Act) {
    std::vector<policy::AppliedAction> applied;
    {
      std::lock_guard lk(engine_mu_);
      applied = engine_->applied();
    }
    for (const auto& a : applied) {
      auto& w = wishes[a.target_id];
      if (auto kt = known_.find(a.target_id); kt != known_.end()) {
        w.name = kt->second.display;
      }
      for (Field f : kAllFields) {
        if (hasField(a.applied_values, f)) {
          copyField(w.overlay, a.applied_values, f);
        }
      }
      w.why += (w.why.empty() ? "" : "; ") + std::string(policy::leverName(a.lever)) + " rung " +
               std::to_string(a.rung + 1) + " for victim " + a.victim_id.substr(0, 12);
    }
  }
  if (wishes == committed_) {
    if (actuator_->version() != journaled_version_) {
      const uint64_t v = actuator_->version();
      if (writeJournalOf(actuator_->entries())) {
        journaled_version_ = v;
      }
    }
    return;
  }
  // Write-ahead: the journal holds the new overlays before the actuator may send them.
  const bool journaled = writeJournalOf(actuator_->preview(wishes)).has_value();
  if (!journaled) {
    // Nothing new may be sent that no journal knows: keep what is journaled, let releases go
    // (the journal still lists them, which is safe), and tell the engine its new restrictions
    // did not land so it does not believe in them.
    Wishes safe;
    for (const auto& [id, w] : committed_) {
      if (wishes.count(id) != 0) {
        safe.emplace(id, w);
      }
    }
    if (round != nullptr) {
      std::lock_guard lk(engine_mu_);
      for (const auto& d : round->decisions) {
        if (d.kind == policy::DecisionKind::Engage || d.kind == policy::DecisionKind::Escalate) {
          engine_->reportApplyFailure(d);
          setOutcome(d.seq, "failed: journal not writable");
        }
      }
    }
    wishes = std::move(safe);
    if (wishes == committed_) {
      return;
    }
  }
  for (const auto& id : actuator_->setOverlays(wishes)) {
    log()->warn("overlay for {} not taken (container unknown to the runtime or the bound of {} "
                "tracked containers reached)",
                id.substr(0, 12), conf->daemon.journal_max_entries);
    ++updates_dropped_;
  }
  committed_ = std::move(wishes);
  if (journaled) {
    journaled_version_ = actuator_->version();
  }
}

void Daemon::Impl::tick() {
  const auto t0 = Clock::now();
  ++tick_no_;
  ++ticks_;
  if (t0 - last_tick_ > cfg()->daemon.interval * 3) {
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
    publish();
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
  if (recorders_.active()) {
    recorders_.broadcast(policy::encodeSnapshot(ps), true);
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
    publish();
  }
  const auto took = Clock::now() - t0;
  if (took > cfg()->daemon.interval) {
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
    commitOverlays(&round);  // confirmed releases and base changes still reach the journal
    return;
  }
  const auto conf = cfg();
  const Mode mode = conf->daemon.mode;
  for (const auto& d : round.decisions) {
    const std::string kind(policy::decisionKindName(d.kind));
    const std::string values = describeResources(d.new_values);
    std::string outcome;
    if (d.dry_run || mode == Mode::DryRun) {
      outcome = "dry-run";
    } else if (mode == Mode::ObserveOnly) {
      outcome = "observe-only";
    } else if (!nri_connected_) {
      // Kept, journaled and sent when the runtime is back: nothing decided is lost.
      outcome = "pending (runtime away)";
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
    decisions_.add(std::move(p), kind);
    if (outcome == "observe-only") {
      // Not applied: the engine must not believe it is in force.
      std::lock_guard lk(engine_mu_);
      engine_->reportApplyFailure(d);
    } else if (outcome.rfind("pending", 0) == 0) {
      auto& seqs = awaiting_[d.target_id];
      seqs.push_back(d.seq);
      if (seqs.size() > 64) {
        seqs.erase(seqs.begin());  // bounded: a container that never converges keeps the newest
      }
    }
  }
  commitOverlays(&round);
}

// ---------------------------------------------------------------------------------------------
// NRI handlers (stub handler thread: the runtime waits for these, so they only read and update
// state; nothing is sent from here)

Result<nri::CreateContainerResult> Daemon::Impl::createContainer(const nri::PodSandbox& pod,
                                                                 const nri::Container& ctr) {
  // For now only learned (the registry records the container at PostCreateContainer); admission
  // placement (#8) will answer here.
  log()->debug("create container {}/{}/{} ({})", pod.namespace_name, pod.name, ctr.name,
               ctr.id.substr(0, 12));
  return nri::CreateContainerResult{};
}

Result<std::vector<nri::ContainerUpdate>> Daemon::Impl::updateContainer(
    const nri::PodSandbox& pod,
    const nri::Container& ctr,
    const nri::LinuxResources& requested) {
  // The kubelet (or anyone) resizes the container: its values become the runtime's own, and
  // colod's overlay rides in the reply so the restriction is not lost either.
  const policy::Resources adj = actuator_->adjustUpdate(ctr.id, requested);
  if (adj == policy::Resources{}) {
    return std::vector<nri::ContainerUpdate>{};
  }
  log()->info("runtime update of {}/{}/{} ({}) asks {}; colod keeps its overlay {} in the reply",
              pod.namespace_name, pod.name, ctr.name, ctr.id.substr(0, 12),
              describeResources(toPolicyResources(requested)), describeResources(adj));
  return std::vector<nri::ContainerUpdate>{
      {.container_id = ctr.id, .resources = toLinuxResources(adj, all_cpus_)}};
}

// ---------------------------------------------------------------------------------------------
// Stop

void Daemon::Impl::restoreOnStop() {
  const auto conf = cfg();
  if (!conf->daemon.restore_on_stop || conf->daemon.mode != Mode::Act) {
    log()->info("leaving current values in place (restore_on_stop={}, mode={}); the journal keeps "
                "{} containers for the next start",
                conf->daemon.restore_on_stop, modeName(conf->daemon.mode),
                actuator_->entries().size());
    return;
  }
  std::vector<policy::Decision> restores;
  {
    std::lock_guard lk(engine_mu_);
    restores = engine_->restoreAll(
        std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now().time_since_epoch())
            .count());
  }
  for (const auto& d : restores) {
    log()->info("decision seq={} kind=restore target={} values=\"{}\" reason=\"colod is stopping: "
                "{}\"",
                d.seq, d.target_name.empty() ? d.target_id : d.target_name,
                describeResources(d.new_values), d.explanation);
  }
  // Every overlay is released through the reconciler (the only writer), to the runtime's own
  // current values; the journal keeps each container until the runtime confirmed it.
  reconciled_ = true;  // a stop before the first resync still releases what the journal lists
  commitOverlays(nullptr);
  const auto tracked = actuator_->entries().size();
  if (tracked == 0) {
    (void)writeJournalOf({});
    return;
  }
  log()->info("releasing {} containers (waiting up to {} ms for the runtime to confirm)", tracked,
              conf->daemon.stop_timeout.count());
  const bool done = actuator_->waitConverged(conf->daemon.stop_timeout);
  actuator_->stop();
  const auto left = actuator_->entries();
  if (auto r = writeJournalOf(left); !r) {
    log()->error("journal not updated on stop: {}", r.error().message());
  }
  if (done && left.empty()) {
    log()->info("every container is back to the runtime's own values");
  } else {
    log()->warn("{} containers not confirmed released (runtime {}); the journal keeps them and the "
                "next colod releases them",
                left.size(), nri_connected_ ? "refusing or slow" : "away");
  }
}

void Daemon::Impl::shutdownThreads() {
  if (actuator_) {
    actuator_->stop();
  }
  recorders_.closeAll();
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
  if (next->text == cfg()->text) {
    log()->debug("config reload ({}): unchanged", why);
    return {};
  }
  auto policy_cfg = next->policy;
  if ((options_.overrides.mode ? *options_.overrides.mode : next->daemon.mode) == Mode::DryRun) {
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
  const auto running = cfg();
  const std::string restart_only = restartOnlyChanges(running->daemon, next->daemon);
  if (!restart_only.empty()) {
    log()->warn("config reload: {} changed; these take effect after a restart", restart_only);
  }
  // One new immutable snapshot, swapped whole: readers on other threads hold the old one until
  // they are done. The command line still wins over the file.
  auto fresh = std::make_shared<Config>(*running);
  fresh->daemon = mergeReload(running->daemon, next->daemon, options_.overrides);
  fresh->policy = next->policy;
  fresh->text = next->text;
  {
    std::lock_guard lk(config_mu_);
    config_ = fresh;
  }
  log()->set_level(spdlog::level::from_str(fresh->daemon.log_level));
  if (fresh->daemon.interval != running->daemon.interval) {
    itimerspec its{};
    its.it_interval.tv_sec = fresh->daemon.interval.count() / 1000;
    its.it_interval.tv_nsec = (fresh->daemon.interval.count() % 1000) * 1000000;
    its.it_value = its.it_interval;
    ::timerfd_settime(timer_fd_.get(), 0, &its, nullptr);
  }
  if (fresh->daemon.mode != running->daemon.mode) {
    log()->info("mode {} -> {}{}", modeName(running->daemon.mode), modeName(fresh->daemon.mode),
                fresh->daemon.mode == Mode::Act ? ""
                                                : ": colod's overlays are released");
  }
  ++reloads_;
  log()->info("config reloaded ({}): mode {}, interval {} ms", why, modeName(cfg()->daemon.mode),
              cfg()->daemon.interval.count());
  return {};
}

// ---------------------------------------------------------------------------------------------
// Publishing (end of tick) and the control API

void Daemon::Impl::publish() {
  const auto conf = cfg();
  ViewInputs in;
  in.unix_ms = unixMs();
  in.node_cpus = node_cpus_.size();
  in.interval_ms = conf->daemon.interval.count();
  std::set<std::string> managed;
  for (const auto& e : actuator_->entries()) {
    managed.insert(e.id);
  }
  const ReconcileStats rs = actuator_->stats();
  in.rows.reserve(known_.size());
  for (const auto& [id, k] : known_) {
    ViewRow row;
    row.id = id;
    row.name = k.containerName();
    row.pod = std::string(k.podName());
    row.pod_namespace = std::string(k.podNamespace());
    row.pod_uid = std::string(k.podUid());
    row.tier = k.tier;
    row.cgroup_id = k.cgroup_id;
    row.cgroup_rel = k.rel;
    // What the runtime has now (colod's overlay included), not the engine's base view.
    row.resources = toPolicyResources(k.ctr->resources);
    if (!row.resources.cpu_quota) {
      row.resources.cpu_quota = -1;
    }
    if (row.resources.cpuset_cpus) {
      if (auto cpus = policy::parseCpuList(*row.resources.cpuset_cpus)) {
        row.cpuset_cpus = cpus->size();
      }
    }
    row.managed = managed.count(id) != 0;
    row.runq_slots = k.runq_slots;
    row.runq_sum_ns = k.runq_sum_ns;
    row.preemptions = k.preemptions;
    row.throttled_periods = k.throttled_periods;
    row.throttled_ns = k.throttled_ns;
    row.reclaim_ns = k.reclaim_ns;
    if (k.has_last) {
      row.last = &k.last;
      for (const auto& a : k.last.preempted_by) {
        if (row.preempted_by.size() >= 3) {
          break;
        }
        auto it = by_cgroup_.find(a.cgroup_id);
        row.preempted_by.emplace_back(
            it != by_cgroup_.end() ? known_.at(it->second).display
                                   : (a.path.empty() ? "host" : a.path),
            a.preemptions);
      }
    }
    in.rows.push_back(std::move(row));
  }
  uint64_t unresolved = 0;
  for (const auto& [id, k] : known_) {
    unresolved += k.cgroup_id == 0 ? 1 : 0;
  }
  auto& d = in.daemon;
  d.decisions_by_kind = decisions_.countsByKind();
  d.nri_connected = nri_connected_;
  d.nri_reconnects = nri_reconnects_;
  d.updates_sent = rs.updates_applied;
  {
    uint64_t failed = 0;
    for (const auto& [reason, n] : rs.failures) {
      failed += reason == "not_connected" ? 0 : n;
    }
    d.update_failures = failed;
  }
  d.updates_dropped = updates_dropped_ + rs.dropped_full;
  d.reconcile_tracked = rs.tracked;
  d.reconcile_pending = rs.pending;
  d.reconcile_oldest_pending_seconds = static_cast<double>(rs.oldest_pending_ns) / 1e9;
  d.reconcile_failures = rs.failures;
  d.reconcile_external_changes = rs.external_changes;
  d.journal_errors = journal_errors_;
  d.bpf_dropped_events = bpf_drops_;
  d.ticks = ticks_;
  d.tick_overruns = tick_overruns_;
  d.config_reloads = reloads_;
  d.config_reload_failures = reload_failures_;
  d.unresolved_containers = unresolved;
  d.containers = known_.size();
  d.mode = std::string(modeName(effectiveMode()));

  auto& st = in.status;
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
  st.set_interval_ms(conf->daemon.interval.count());
  views_.publish(buildView(in));
  // Once a second: the previous view and the collector's per-tick map dumps (~1.5 MB with 1000
  // containers) are free heap now; without a trim glibc keeps those pages resident for the life
  // of the process (1000 containers: RSS 35.2 -> 33.4 MiB). Costs well under a millisecond on
  // the loop thread; the pages fault back in as the next tick reuses them.
  ::malloc_trim(0);
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
