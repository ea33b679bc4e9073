// SPDX-License-Identifier: Apache-2.0
// colod: the node agent. A thin main over colod::daemon (style rule 31).
//   colod [--config FILE] [--mode act|dry-run|observe-only] [--log-level L] [--log-format F]
//   colod --check-config FILE      exit 0, or 3 with "<file>:<line>:<col>: <key>: <value>: <why>"
// Exit codes: 0 clean stop, 3 configuration/startup error (systemd: RestartPreventExitStatus=3).
#include <malloc.h>

#include <CLI/CLI.hpp>
#include <spdlog/spdlog.h>

#include <cstdio>
#include <filesystem>
#include <optional>

#include "colod/base/version.h"
#include "colod/control/client.h"
#include "colod/daemon/config.h"
#include "colod/daemon/daemon.h"

namespace {
constexpr int kExitConfig = 3;
constexpr const char* kDefaultConfig = "/etc/colod/config.yaml";
}  // namespace

int main(int argc, char** argv) {
  using namespace colod::daemon;
  // Before any thread exists (style rule 32): every thread inherits the blocked mask and the
  // signals are read from the loop's signalfd only.
  blockSignals();
  // gRPC, httplib and the stub each run threads; glibc's per-thread arenas would otherwise keep
  // tens of MiB of freed memory resident. Two arenas keep colod within its memory budget.
  mallopt(M_ARENA_MAX, 2);

  CLI::App app{"colod: colocation node agent (BPF interference detection, NRI actuation)"};
  std::string config_path;
  std::string check_path;
  std::string mode;
  std::string log_level;
  std::string log_format;
  bool version = false;
  app.add_option("-c,--config", config_path,
                 std::string("configuration file (default ") + kDefaultConfig +
                     " if it exists, else built-in defaults)");
  app.add_option("--check-config", check_path, "validate FILE and exit (0 ok, 3 invalid)");
  app.add_option("--mode", mode, "override daemon.mode")
      ->check(CLI::IsMember({"act", "dry-run", "observe-only"}));
  app.add_option("--log-level", log_level, "override daemon.log_level")
      ->check(CLI::IsMember({"trace", "debug", "info", "warn", "error"}));
  app.add_option("--log-format", log_format, "override daemon.log_format")
      ->check(CLI::IsMember({"text", "json"}));
  app.add_flag("--version", version, "print the version and exit");
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    const int rc = app.exit(e);
    return rc == 0 ? 0 : kExitConfig;
  }
  if (version) {
    std::printf("colod %s\n", std::string(colod::kVersionLine).c_str());
    return 0;
  }
  if (!check_path.empty()) {
    auto r = loadConfig(check_path);
    if (!r) {
      std::fprintf(stderr, "colod: invalid configuration: %s\n",
                   colod::control::operatorMessage(r.error()).c_str());
      return kExitConfig;
    }
    std::printf("%s: ok\n", check_path.c_str());
    return 0;
  }

  if (config_path.empty() && std::filesystem::exists(kDefaultConfig)) {
    config_path = kDefaultConfig;
  }
  Config config;
  if (!config_path.empty()) {
    auto r = loadConfig(config_path);
    if (!r) {
      std::fprintf(stderr, "colod: invalid configuration: %s\n",
                   colod::control::operatorMessage(r.error()).c_str());
      return kExitConfig;
    }
    config = std::move(r).value();
  }
  // Command-line settings win over the file now and on every reload.
  SettingsOverrides overrides;
  if (!mode.empty()) {
    overrides.mode = mode == "act"       ? Mode::Act
                     : mode == "dry-run" ? Mode::DryRun
                                         : Mode::ObserveOnly;
  }
  if (!log_level.empty()) {
    overrides.log_level = log_level;
  }
  if (!log_format.empty()) {
    overrides.log_format = log_format == "json" ? LogFormat::Json : LogFormat::Text;
  }
  overrides.applyTo(config.daemon);
  setupLogging(config.daemon.log_format, config.daemon.log_level);

  auto daemon = Daemon::create(std::move(config), {.config_path = config_path, .overrides = overrides});
  if (!daemon) {
    // The log keeps the internals; stderr gets the sentence an operator acts on.
    spdlog::critical("startup failed: {}", daemon.error().message());
    std::fprintf(stderr, "colod: startup failed: %s\n",
                 colod::control::operatorMessage(daemon.error()).c_str());
    return kExitConfig;
  }
  return daemon.value()->run();
}
