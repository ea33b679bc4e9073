// SPDX-License-Identifier: Apache-2.0
// coloctl's commands, as a function of the arguments and two streams, so that every command,
// its output and its exit code are tested in-process (ctl_test) against a fake daemon.
#pragma once

#include <functional>
#include <ostream>
#include <string>
#include <vector>

namespace colod::ctl {

// Exit codes (README): 0 ok; 1 runtime error (daemon unreachable, RPC failed, unknown
// container, a file that cannot be written); 2 usage (unknown command or option, missing
// argument); 3 invalid configuration or trace (config check/reload, replay).
constexpr int kExitOk = 0;
constexpr int kExitError = 1;
constexpr int kExitUsage = 2;
constexpr int kExitInvalid = 3;

struct CliIo {
  std::ostream& out;
  std::ostream& err;
  bool out_is_tty = false;  // top clears the screen between tables only on a terminal
  // Called when a live command (top, record) starts: main installs its SIGINT/SIGTERM
  // handlers there, so that other commands keep the default (Ctrl-C ends them at once).
  std::function<void()> enter_live = [] {};
  // Polled by the live commands: true ends them cleanly.
  std::function<bool()> stop = [] { return false; };
  // From the environment (main reads it; tests set it): COLOD_SOCKET.
  std::string env_socket;
};

// Runs `coloctl args[1..]` (args[0] is the program name) and returns the exit code.
int runCli(const std::vector<std::string>& args, CliIo& io);

}  // namespace colod::ctl
