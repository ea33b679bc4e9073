// SPDX-License-Identifier: Apache-2.0
// The daemon configuration file: a YAML document with two top-level keys,
//   daemon:  the settings below (DaemonSettings), and
//   policy:  delegated to colod::policy's parser (policy/config/default.yaml).
// Unknown keys anywhere are rejected. Errors are EINVAL with "<file>:<line>:<col>: <key path>:
// <value>: <why>" so `colod --check-config` can print them verbatim.
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "colod/base/result.h"
#include "colod/policy/config.h"

namespace colod::daemon {

enum class Mode { Act, DryRun, ObserveOnly };
std::string_view modeName(Mode mode);  // "act", "dry-run", "observe-only"

enum class CgroupDriver { Auto, Systemd, Cgroupfs };
std::string_view driverName(CgroupDriver driver);

enum class Reconcile { Restore, Reseed };
enum class LogFormat { Text, Json };

struct DaemonSettings {
  std::chrono::milliseconds interval{100};
  std::string nri_socket = "/var/run/nri/nri.sock";
  std::string plugin_name = "colod";
  std::string plugin_idx = "90";  // late: colod sees what other plugins set at creation
  Mode mode = Mode::Act;
  std::string cgroup_root = "/sys/fs/cgroup";
  CgroupDriver cgroup_driver = CgroupDriver::Auto;
  // Prepended to paths derived from systemd-style cgroups_path ("slice:prefix:id"), for runtimes
  // whose slices do not start at the hierarchy root (e.g. a nested systemd or the test peer).
  std::string systemd_cgroup_prefix;
  std::string proc_root = "/proc";
  std::string sys_root = "/sys";
  std::string control_socket = "/run/colod/colod.sock";
  unsigned control_socket_mode = 0600;
  std::string metrics_listen = "127.0.0.1:9477";  // "" disables the HTTP server
  std::string journal_path = "/var/lib/colod/journal.json";
  uint32_t journal_max_entries = 4096;
  bool restore_on_stop = true;
  Reconcile reconcile = Reconcile::Restore;
  LogFormat log_format = LogFormat::Text;
  std::string log_level = "info";  // trace, debug, info, warn, error
  // Accepted for old configs and ignored: the reconciler retries forever with a bounded backoff
  // (a restore that is given up on leaves a container throttled).
  uint32_t update_retries = 3;
  // How long a clean stop waits for the runtime to confirm the release of every overlay; what
  // is not confirmed by then stays in the journal for the next colod.
  std::chrono::milliseconds stop_timeout{5000};
  // Event-driven detection: a protected container that waits this long on the run queue within
  // 10 ms wakes colod for a decision round between ticks (at most one per 20 ms). 0 turns it off.
  uint32_t event_wait_threshold_us = 3000;
  // Drop every capability once the BPF programs are attached and the sockets bound.
  bool drop_capabilities = true;
  // SCHED_FIFO priority of colod's reaction path (the loop, the actuator, the NRI threads): a
  // SCHED_OTHER colod waits behind the busy BE it must restrict. 0 (default): SCHED_OTHER; opt-in
  // until the host stalls seen with it in the colocation benchmark are understood
  // (deploy/README.md "Realtime"). Needs CAP_SYS_NICE at start (dropped with the rest); bounded
  // by a watchdog (realtime.h).
  uint32_t realtime_priority = 0;
  uint32_t max_batch = 64;      // container updates per UpdateContainers call
  uint32_t max_cgroups = 4096;  // collector map bound
  // Memory budget of the collector's per-cgroup BPF maps (MiB, 0: none). They are per-CPU and
  // charged to colod's memory cgroup: on a big node max_cgroups is cut to what fits. 46: with
  // the maps not sized by slots (pairs, ring buffer: ~1.3 MiB) colod's BPF maps stay within
  // 48 MiB, which holds ~1370 slots at 256 possible CPUs (issue 17).
  uint32_t bpf_map_budget_mib = 46;
  uint32_t decisions_kept = 1024;  // ring of recent decisions served to coloctl

  friend bool operator==(const DaemonSettings&, const DaemonSettings&) = default;
};

// Command-line settings: they win over the file, at start and on every reload.
struct SettingsOverrides {
  std::optional<Mode> mode;
  std::optional<std::string> log_level;
  std::optional<LogFormat> log_format;
  void applyTo(DaemonSettings& settings) const;
  friend bool operator==(const SettingsOverrides&, const SettingsOverrides&) = default;
};

// The settings a reload may change, from `next`, over the running ones (restart-only settings
// such as sockets and paths stay), with the command-line overrides applied again.
DaemonSettings mergeReload(const DaemonSettings& running,
                           const DaemonSettings& next,
                           const SettingsOverrides& overrides);

struct Config {
  DaemonSettings daemon;
  policy::Config policy;
  std::string text;  // the YAML it was parsed from ("" for the built-in defaults)
  std::string path;
  int64_t loaded_unix_ms = 0;  // when loadConfig read the file (0: parsed from a string)
};

// Parses a whole document. `file` is used in messages only.
Result<Config> parseConfig(std::string_view yaml_text, std::string_view file);
// Reads and parses a file (ENOENT etc. from the read, EINVAL from the parse); stamps
// loaded_unix_ms with the wall clock.
Result<Config> loadConfig(const std::string& path);

// The `policy:` mapping of a daemon config document as YAML text (the bare section the policy
// trace header and colod-replay expect), or the built-in default policy text when absent.
std::string policySectionYaml(std::string_view yaml_text);

// Settings that a reload cannot change (sockets, paths, plugin identity): their names, for the
// "needs a restart" warning. Empty if none differ.
std::string restartOnlyChanges(const DaemonSettings& running, const DaemonSettings& next);

}  // namespace colod::daemon
