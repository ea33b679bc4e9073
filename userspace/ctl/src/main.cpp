// SPDX-License-Identifier: Apache-2.0
// coloctl: the colod CLI, over the local control API (gRPC on a Unix socket). Does not link
// libbpf (style rule 31). The commands are in cli.cpp (runCli); this is the process around them:
// signals, the standard streams and the environment.
#include <unistd.h>

#include <atomic>
#include <csignal>
#include <cstdlib>
#include <filesystem>
#include <iostream>
#include <string>
#include <vector>

#include "cli.h"

namespace {

std::atomic<bool> g_stop{false};

void onSignal(int /*sig*/) { g_stop = true; }

std::string env(const char* name) {
  const char* v = std::getenv(name);
  return v != nullptr ? v : "";
}

}  // namespace

int main(int argc, char** argv) {
  colod::ctl::CliIo io{.out = std::cout,
                       .err = std::cerr,
                       .out_is_tty = ::isatty(STDOUT_FILENO) != 0,
                       // top and record stop cleanly on Ctrl-C / SIGTERM (record then keeps
                       // what it got, renamed from FILE.part to FILE).
                       .enter_live =
                           [] {
                             struct sigaction sa {};
                             sa.sa_handler = onSignal;
                             sigemptyset(&sa.sa_mask);
                             ::sigaction(SIGINT, &sa, nullptr);
                             ::sigaction(SIGTERM, &sa, nullptr);
                           },
                       .stop = [] { return g_stop.load(); },
                       .env_socket = env("COLOD_SOCKET")};
  const std::vector<std::string> args(argv, argv + argc);
  const int rc = colod::ctl::runCli(args, io);
  std::cout.flush();
  return rc;
}
