// SPDX-License-Identifier: Apache-2.0
// Plugins for the interop/coexist suites: an external plugin child process (it dials the peer's
// socket) and a plugin directory the peer launches pre-installed plugins from (brief §1.4).
#pragma once

#include <sys/types.h>

#include <string>
#include <vector>

namespace colod::nri::interop {

// A temp dir removed on destruction, holding plugins/ (NN-name symlinks), conf.d/ (name.conf)
// and the plugins' stderr log.
class PluginDir {
 public:
  PluginDir();
  ~PluginDir();
  PluginDir(const PluginDir&) = delete;
  PluginDir& operator=(const PluginDir&) = delete;
  PluginDir(PluginDir&&) = delete;
  PluginDir& operator=(PluginDir&&) = delete;

  // plugins/<idx>-<name> -> binary; conf.d/<name>.conf = config (if not empty).
  void add(const std::string& idx,
           const std::string& name,
           const std::string& binary,
           const std::string& config);
  // A shell wrapper plugins/<idx>-<name> that execs `argv` (absolute paths: the runtime gives a
  // launched plugin no PATH), as an operator installs a binary that needs flags.
  void addWrapper(const std::string& idx,
                  const std::string& name,
                  const std::vector<std::string>& argv);
  // Peer flags: --plugin-dir, --plugin-config-dir, --plugin-stderr.
  [[nodiscard]] std::vector<std::string> peerArgs() const;
  [[nodiscard]] std::string stderrLog() const;
  [[nodiscard]] const std::string& path() const { return dir_; }

 private:
  std::string dir_;
};

// A plugin started by the test (external launch mode): argv[0] is the binary; stderr appended to
// `log`. Killed (SIGTERM, then SIGKILL) on destruction.
class PluginProcess {
 public:
  PluginProcess(std::vector<std::string> argv, const std::string& log);
  ~PluginProcess();
  PluginProcess(const PluginProcess&) = delete;
  PluginProcess& operator=(const PluginProcess&) = delete;
  PluginProcess(PluginProcess&&) = delete;
  PluginProcess& operator=(PluginProcess&&) = delete;

  [[nodiscard]] bool started() const { return pid_ > 0; }
  // True while the child runs.
  bool alive();

 private:
  pid_t pid_ = -1;
};

}  // namespace colod::nri::interop
