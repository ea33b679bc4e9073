// SPDX-License-Identifier: Apache-2.0
// A container's process in miniature, for scripts/bench/scale.sh: joins the cgroups whose
// cgroup.procs files are given, then forever sleeps period_us and spins spin_us (0: only
// wakes). Built by scale.sh with the host's cc; one process per cgroup, so it stays small.
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

static long long nowNs(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (long long)t.tv_sec * 1000000000LL + t.tv_nsec;
}

int main(int argc, char** argv) {
  if (argc < 3) {
    fprintf(stderr, "usage: scale-worker period_us spin_us [cgroup.procs...]\n");
    return 2;
  }
  const long period_us = strtol(argv[1], NULL, 10);
  const long spin_us = strtol(argv[2], NULL, 10);
  for (int i = 3; i < argc; ++i) {
    FILE* f = fopen(argv[i], "w");
    if (f == NULL || fprintf(f, "%d\n", (int)getpid()) < 0 || fclose(f) != 0) {
      perror(argv[i]);
      return 2;
    }
  }
  const struct timespec ts = {period_us / 1000000, (period_us % 1000000) * 1000};
  for (;;) {
    nanosleep(&ts, NULL);
    const long long end = nowNs() + spin_us * 1000LL;
    while (nowNs() < end) {
    }
  }
}
