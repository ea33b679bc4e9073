// SPDX-License-Identifier: Apache-2.0
// The cost of a syscall that does nothing (getppid) on this host, in ns: the floor under any
// collector that reads its maps and files with one syscall each (scale.sh, issue 17).
// Usage: syscall-floor [calls]    prints "null_syscall_ns=<ns>"
#include <stdio.h>
#include <stdlib.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

static double now_ns(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec * 1e9 + (double)t.tv_nsec;
}

int main(int argc, char** argv) {
  const long n = argc > 1 ? atol(argv[1]) : 200000;
  if (n <= 0) {
    fprintf(stderr, "syscall-floor: calls must be > 0\n");
    return 2;
  }
  double best = 0;
  // The best of 5 rounds: the floor, not this shared machine's noise.
  for (int round = 0; round < 5; ++round) {
    const double t0 = now_ns();
    for (long i = 0; i < n; ++i) {
      syscall(SYS_getppid);
    }
    const double ns = (now_ns() - t0) / (double)n;
    if (round == 0 || ns < best) {
      best = ns;
    }
  }
  printf("null_syscall_ns=%.0f\n", best);
  return 0;
}
