// SPDX-License-Identifier: Apache-2.0
// colod-bpf-floor: attaches bpf/switch_floor.bpf.c (an empty tp_btf/sched_switch program) until
// SIGINT/SIGTERM, for scripts/bench/bpf-overhead.sh to measure the floor any sched_switch
// program pays, in the same run as colod's own programs. Exit 0 on a signal, 3 when the
// program cannot be loaded or attached (with libbpf's reason).
#include <signal.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <memory>

#include "switch_floor.skel.h"

int main() {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGINT);
  sigaddset(&set, SIGTERM);
  // Blocked before anything starts, then waited for: no handler runs inside libbpf.
  if (sigprocmask(SIG_BLOCK, &set, nullptr) != 0) {
    std::fprintf(stderr, "colod-bpf-floor: sigprocmask: %s\n", std::strerror(errno));
    return 3;
  }
  std::unique_ptr<switch_floor, decltype(&switch_floor::destroy)> skel(
      switch_floor::open_and_load(), &switch_floor::destroy);
  if (!skel) {
    std::fprintf(stderr, "colod-bpf-floor: loading the empty program: %s\n", std::strerror(errno));
    return 3;
  }
  if (switch_floor::attach(skel.get()) != 0) {
    std::fprintf(stderr, "colod-bpf-floor: attaching to tp_btf/sched_switch: %s\n",
                 std::strerror(errno));
    return 3;
  }
  std::printf("colod-bpf-floor: attached\n");
  std::fflush(stdout);
  int sig = 0;
  (void)sigwait(&set, &sig);
  return 0;
}
