// SPDX-License-Identifier: Apache-2.0
// PeerProcess: runs colod-testpeer (the Go runtime-side NRI peer) as a child process for the
// interop tests, with a private temp dir (socket, control socket, event log) and a unique cgroup
// prefix. Gives the control socket (JSON lines) and the event log (JSON lines) to the tests.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <functional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace colod::nri::interop {

class PeerProcess {
 public:
  // `args` are extra flags; --socket, --log, --cgroup-parent and --control are added.
  explicit PeerProcess(std::vector<std::string> args, bool control = true);
  ~PeerProcess();
  PeerProcess(const PeerProcess&) = delete;
  PeerProcess& operator=(const PeerProcess&) = delete;
  PeerProcess(PeerProcess&&) = delete;
  PeerProcess& operator=(PeerProcess&&) = delete;

  [[nodiscard]] bool started() const { return pid_ > 0; }
  [[nodiscard]] const std::string& socketPath() const { return socket_; }
  [[nodiscard]] const std::string& cgroupParent() const { return cgroup_parent_; }

  // Sends one step; returns the reply ({"ok":..,"result":..,"error":..}).
  nlohmann::json control(const nlohmann::json& step);
  // control() that must succeed; returns "result".
  nlohmann::json mustControl(const nlohmann::json& step);

  // All event-log lines so far.
  std::vector<nlohmann::json> events() const;
  // Waits until pred holds for some line; returns it (null json on timeout).
  nlohmann::json waitEvent(const std::function<bool(const nlohmann::json&)>& pred,
                           std::chrono::milliseconds timeout) const;
  size_t countEvents(const std::function<bool(const nlohmann::json&)>& pred) const;

  // SIGTERM, wait, return the exit status (-1 if it had to be killed).
  int stop();

 private:
  // A connected fd to the control socket, or -1 with errno set.
  int connectControl() const;

  std::string dir_;
  std::string socket_;
  std::string control_socket_;
  std::string log_;
  std::string cgroup_parent_;
  pid_t pid_ = -1;
};

// Reads a cgroup control file of a container (rel = the peer's "cgroup_rel"); "" on error.
std::string readCgroupFile(const std::string& rel, const std::string& file);
bool isCgroupV2Host();

}  // namespace colod::nri::interop
