// SPDX-License-Identifier: Apache-2.0
// The daemon: startup, the epoll loop, signals, config reload and shutdown (see daemon_impl.h).
#include <sys/resource.h>

#include "colod/policy/tier.h"
#include "daemon_impl.h"

namespace colod::daemon {

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
  engine_->setNodeCpus(node_cpus_);

  // The collector keeps three cgroup files open per container (issue #17) and sizes that cache
  // by half the soft RLIMIT_NOFILE: systemd's soft default (1024) would hold ~170 containers.
  // Raising the soft limit to the hard one needs no privilege.
  if (struct rlimit rl{}; ::getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
    const rlim_t was = rl.rlim_cur;
    rl.rlim_cur = rl.rlim_max;
    if (::setrlimit(RLIMIT_NOFILE, &rl) == 0) {
      log()->debug("open files limit raised from {} to {}", was, rl.rlim_max);
    }
  }
  collect::CollectorOptions copts;
  copts.cgroup_root = s.cgroup_root;
  copts.max_cgroups = s.max_cgroups;
  copts.map_budget_bytes = uint64_t{s.bpf_map_budget_mib} << 20;
  copts.watch_window = wakeup_.window;
  // The policy sees containers only: other cgroups' files are read once a second (the ones of
  // containers at every tick: syncWatched()).
  copts.files_every_n_ticks = kFilesEveryNTicks;
  copts.pressure_every_n_ticks = pressureEveryNTicks(s.interval, kFilesEveryNTicks);
  copts.pair_idle_ticks = pairIdleTicks(s.interval);
  copts.pressure_of_named_only = true;  // the engine reads its victims' PSI only
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
  if (!collector_->sizingNote().empty()) {
    log()->warn("{}", collector_->sizingNote());
  }
  log()->info("{}", collector_->readNote());

  // One colod per journal: a second one would "restore" the first one's restrictions through
  // NRI and empty its journal.
  auto lock = JournalLock::acquire(s.journal_path);
  if (!lock) {
    return std::move(lock).error();
  }
  journal_lock_.emplace(std::move(lock).value());
  auto ahead = JournalAhead::open(s.journal_path);
  if (!ahead) {
    return std::move(ahead).error().wrap("the journal's write-ahead copy");
  }
  journal_ahead_.emplace(std::move(ahead).value());
  loadJournal(s);

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
  // The collector's wakeup ring buffer: event-driven detection (wakeup.cpp).
  for (int fd : {signal_fd_.get(), timer_fd_.get(), event_fd_.get(), collector_->wakeupFd()}) {
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
  hooks.overrides = options_.overrides;
  hooks.started_unix_ms = started_unix_ms_;
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
  hooks.reload = [this]() -> Result<bool> {
    auto promise = std::make_shared<std::promise<Result<bool>>>();
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
    return std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now().time_since_epoch())
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
    metrics::HttpHandlers handlers;
    // Streamed: at 1000 containers the document is 2.6 MB, and built whole (with httplib's copy
    // of it) it left ~3 MB resident after every scrape (docs/benchmarks.md, session 47).
    handlers.metrics = [this](metrics::TextWriter& w) {
      const std::shared_ptr<const View> v = views_.fresh();
      metrics::DaemonMetrics d = v->metrics.daemon;  // the containers' part is not copied
      const auto self = readSelfStats(cfg()->daemon.proc_root);
      d.cpu_seconds = self.cpu_seconds;
      d.rss_bytes = self.rss_bytes;
      metrics::writeColodMetrics(d, v->metrics.containers, w);
    };
    // Liveness: the loop turns (a wedged loop decides nothing and releases nothing).
    handlers.live = [this] { return liveness(); };
    // Readiness: the programs are attached (init got this far) and colod can act, or was told
    // not to.
    handlers.ready = [this] {
      const Mode mode = cfg()->daemon.mode;
      if (mode != Mode::Act) {
        return metrics::ProbeResult{.ok = true, .why = std::string(modeName(mode))};
      }
      if (!nri_connected_) {
        return metrics::ProbeResult{.ok = false, .why = "runtime not synchronized over NRI"};
      }
      return metrics::ProbeResult{.ok = true, .why = "synchronized with the runtime"};
    };
    auto http = metrics::HttpServer::start(*addr, std::move(handlers));
    if (!http) {
      return std::move(http).error().wrap("starting the metrics server");
    }
    http_ = std::move(http).value();
    log()->info("metrics on http://{}:{}/metrics", addr->host, http_->port());
  }

  // From here on, the threads this one creates (the actuator, the NRI stub's) inherit its
  // policy; the control and metrics servers' threads above stay SCHED_OTHER: a scrape or a
  // `coloctl top` is not worth preempting an LS for.
  enterReactionPriority(s);

  auto stub = nri::Stub::create(
      *this,
      {.socket_path = s.nri_socket,
       .plugin_name = s.plugin_name,
       .plugin_idx = s.plugin_idx,
       .use_environment = false,
       // A runtime that comes back is found within half a second: colod's pending
       // restores go out then (a 5 s cap left a BE restricted seconds after the runtime
       // returned). A dial to a missing socket costs a failed connect(), nothing more.
       .backoff = {.initial = std::chrono::milliseconds(50),
                   .max = std::chrono::milliseconds(500),
                   .multiplier = 2.0,
                   .jitter = 0.2},
       // Labels and annotations: only the keys the tiering reads (toContainerInfo() keeps no
       // others), not the dozen a runtime sends per object.
       .registry = {.keep_key = &policy::isPolicyKey},
       .on_connection =
           [this](const nri::ConnectionEvent& ev) {
             // Events come from different stub threads and may arrive out of order
             // (Synchronized can overtake Connected): the state itself is read from
             // stub_->stats() by refreshNriState(); this only logs and wakes the loop.
             switch (ev.state) {
               case nri::ConnectionState::Synchronized:
                 log()->info("nri: synchronized with the runtime (connects={}, reconnects={})",
                             ev.connects, ev.reconnects);
                 {
                   std::lock_guard lk(nri_log_mu_);
                   nri_last_failure_.clear();
                 }
                 break;
               case nri::ConnectionState::Disconnected: {
                 // Every failed dial reports here (twice a second while the runtime is
                 // away): a failure is logged once, then again only when it changes.
                 const std::string why = ev.error ? ev.error->message() : std::string("closed");
                 std::lock_guard lk(nri_log_mu_);
                 if (why != nri_last_failure_) {
                   log()->warn(
                       "nri: disconnected: {} (retrying every 0.5 s; logged again "
                       "when this changes)",
                       why);
                   nri_last_failure_ = why;
                 } else {
                   log()->debug("nri: still disconnected: {}", why);
                 }
                 break;
               }
               default:
                 break;
             }
             // Wake the loop and the actuator so the change is seen without waiting.
             if (actuator_) {
               actuator_->kick();
             }
             uint64_t one = 1;
             (void)!::write(event_fd_.get(), &one, sizeof one);
           },
       // v0.10+: the runtime reports who owns each field of a container; colod never
       // writes a field another plugin owns (the stub leaves it out and says so here).
       .report_ownership = true,
       .on_conflict = [this](const nri::OwnershipConflict& c) { onPluginConflict(c); }});
  if (!stub) {
    return std::move(stub).error().wrap("NRI plugin options");
  }
  stub_ = std::move(stub).value();
  if (stub_->launched()) {
    log()->info("nri: started by the runtime (pre-installed plugin): no socket to dial");
  } else if (!std::filesystem::exists(s.nri_socket)) {
    log()->warn("nri: socket {} does not exist: observe-only until it appears (retrying)",
                s.nri_socket);
  }
  ActuatorOptions aopts;
  aopts.reconciler = {
      .all_cpus = all_cpus_, .max_batch = s.max_batch, .max_containers = s.journal_max_entries};
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
  // One line per call with the runtime's answer time: how much of a reaction is the runtime's
  // (its access to a CPU, its cgroup writes) rather than colod's (docs/benchmarks.md, session
  // 29).
  aopts.on_sent = [](const SentUpdate& u) {
    std::string who;
    for (std::size_t i = 0; i < u.ids.size(); ++i) {
      who += (i == 0 ? "" : ",") + (u.names[i].empty() ? u.ids[i].substr(0, 12) : u.names[i]);
    }
    const double ms = static_cast<double>(u.rtt_ns) / 1e6;
    if (u.ok) {
      log()->info("nri: UpdateContainers for {} answered in {:.1f} ms", who, ms);
    } else {
      // Failures are counted and retried with backoff (an outage would repeat this line).
      log()->debug("nri: UpdateContainers for {} failed after {:.1f} ms: {}", who, ms, u.error);
    }
  };
  actuator_ = std::make_unique<Actuator>(std::move(aopts));
  std::vector<ReconcileEntry> loaded;
  for (const auto& c : journal_loaded_.containers) {
    loaded.push_back(c.state);
  }
  // Before the first resync nothing is sent: the runtime must first say what is there.
  actuator_->load(loaded, s.reconcile == Reconcile::Reseed);
  actuator_->start();
  COLOD_TRY_VOID(stub_->start(), "starting the NRI stub");
  if (s.drop_capabilities) {
    // Everything privileged is done: programs attached, sockets bound, journal locked.
    const auto before = parseCapEff(readSmallFile(s.proc_root + "/self/status"));
    if (auto r = dropAllCapabilities(); !r) {
      log()->warn("could not drop capabilities ({}); running with {}", r.error().message(),
                  before ? capabilityNames(*before) : std::string("unknown"));
    } else {
      log()->info("dropped every capability ({}): BPF programs attached, sockets bound",
                  before ? capabilityNames(*before) : std::string("unknown"));
    }
  }
  publish();  // the loop has not started: safe to touch loop state here
  return {};
}

void Daemon::Impl::enterReactionPriority(const DaemonSettings& s) {
  if (s.realtime_priority == 0) {
    log()->debug("reaction path under SCHED_OTHER (daemon.realtime_priority 0)");
    return;
  }
  const int prio = static_cast<int>(s.realtime_priority);
  if (auto r = enterRealtime(prio, kRealtimeBudget, s.sys_root); !r) {
    log()->warn("reaction path left under SCHED_OTHER, colod may react late on a busy node: {}",
                r.error().message());
    return;
  }
  realtime_priority_ = prio;
  log()->info(
      "reaction path under SCHED_FIFO {} (back to SCHED_OTHER if a thread runs {} ms "
      "without blocking)",
      prio, kRealtimeBudget.count());
}

metrics::ProbeResult Daemon::Impl::liveness() const {
  const int64_t last = last_tick_ns_.load();
  const int64_t now =
      std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now().time_since_epoch()).count();
  const auto interval = cfg()->daemon.interval;
  // Before the first tick the loop is starting; afterwards ten intervals (at least 5 s) without
  // one means it is stuck.
  const int64_t bound = std::max<int64_t>(5'000'000'000, 10 * interval.count() * 1'000'000);
  if (last == 0 || now - last <= bound) {
    return {.ok = true, .why = last == 0 ? "starting" : "ticking"};
  }
  return {.ok = false, .why = "no tick for " + std::to_string((now - last) / 1'000'000) + " ms"};
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
  // A reader of status or metrics waits for the end of the next tick (the view is built for it
  // there); a tick well past its interval, or a stopped loop, gets the last view after this.
  views_.setFreshWait(std::max(3 * interval, std::chrono::milliseconds(300)));
  last_tick_ = Clock::now();
  refreshNriState();
  publish();  // status and metrics answer from the first moment
  log()->info("colod running: mode {}, interval {} ms, control {}, {} CPUs",
              modeName(cfg()->daemon.mode), interval.count(), cfg()->daemon.control_socket,
              node_cpus_.size());
  bool running = true;
  while (running) {
    epoll_event events[8];
    // A rate-limited event round left pending wakes the loop when it is due.
    int timeout_ms = 1000;
    if (const auto due = event_limiter_.untilDue(Clock::now())) {
      timeout_ms = static_cast<int>(std::chrono::ceil<std::chrono::milliseconds>(*due).count());
    }
    const int n = ::epoll_wait(epoll_.get(), events, 8, timeout_ms);
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
        syncWatched();
        syncEveryTick();
      } else if (fd == collector_->wakeupFd()) {
        onWakeup();
      } else if (fd == event_fd_.get()) {
        uint64_t v = 0;
        (void)!::read(event_fd_.get(), &v, sizeof v);
        refreshNriState();
        drainPosted();
      } else if (inotify_fd_ && fd == inotify_fd_.get()) {
        onInotify();
      }
    }
    if (event_limiter_.due(Clock::now())) {
      eventRound();
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

Result<bool> Daemon::Impl::reload(const std::string& why) {
  if (options_.config_path.empty()) {
    return COLOD_ERR(ENOENT,
                     "colod runs with the built-in defaults (no --config): nothing to "
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
    log()->info("config reload ({}): unchanged, nothing to do", why);
    return false;
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
      log()->error(
          "config reload ({}) rejected by the policy, keeping the running "
          "configuration: {}",
          why, r.error().message());
      return std::move(r).error();
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
  fresh->loaded_unix_ms = next->loaded_unix_ms;
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
                fresh->daemon.mode == Mode::Act ? "" : ": colod's overlays are released");
  }
  ++reloads_;
  log()->info("config reloaded ({}): mode {}, interval {} ms", why, modeName(cfg()->daemon.mode),
              cfg()->daemon.interval.count());
  return true;
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
