// SPDX-License-Identifier: Apache-2.0
// The colod daemon (style rule 32): one epoll loop over signalfd + timerfd(interval) + an eventfd
// for work posted by other threads + inotify on the config directory. Each tick:
//   collector snapshot -> cgroup ids mapped to containers through the NRI registry -> policy
//   Snapshot -> engine -> decisions (logged once with their reason, journaled write-ahead) ->
//   queued for the sender thread, which batches them into NRI UpdateContainers, retries failures
//   a bounded number of times and counts them.
// Other threads: the NRI stub's (reconnects forever), the sender, gRPC's control-API threads and
// the /metrics HTTP thread. They read a view published by the loop at the end of each tick.
//
// Threading: create() and run() from the main thread, after SIGINT/SIGTERM/SIGHUP have been
// blocked (blockSignals()) and before any other thread exists.
#pragma once

#include <memory>
#include <string>

#include "colod/base/result.h"
#include "colod/daemon/config.h"

namespace colod::daemon {

struct DaemonOptions {
  std::string config_path;  // watched and reloaded; "" = built-in defaults, nothing to watch
  SettingsOverrides overrides;  // from the command line: re-applied on every reload
};

// Blocks SIGINT, SIGTERM and SIGHUP in the calling thread (threads created later inherit it).
void blockSignals();

// Configures the "colod" spdlog logger: text or JSON lines on stderr, at the given level.
void setupLogging(LogFormat format, const std::string& level);

class Daemon {
 public:
  // Starts everything that can fail at startup (collector/BPF, control socket, metrics port,
  // journal read, NRI stub thread). Errors are startup errors: the caller exits with code 3.
  static Result<std::unique_ptr<Daemon>> create(Config config, DaemonOptions options);
  ~Daemon();
  Daemon(const Daemon&) = delete;
  Daemon& operator=(const Daemon&) = delete;
  Daemon(Daemon&&) = delete;
  Daemon& operator=(Daemon&&) = delete;

  // Runs until SIGINT/SIGTERM, then stops cleanly (restoring what it changed when
  // restore_on_stop). Returns the process exit code (0).
  int run();

  class Impl;

 private:
  explicit Daemon(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace colod::daemon
