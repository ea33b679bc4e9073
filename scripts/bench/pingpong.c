// SPDX-License-Identifier: Apache-2.0
// Pipe ping-pong between two processes pinned to one CPU: every round trip is two wakeups and
// two context switches, so it is the worst case for sched_switch/sched_wakeup programs.
// Usage: pingpong <cpu> <seconds> [<cgroup.procs file>]   Prints "<round trips per second>".
// With a cgroup.procs file the child joins that cgroup first, so every switch crosses cgroups
// (the per-cgroup programs' slow path instead of the same-cgroup fast path).
#define _GNU_SOURCE
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static double now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

static void pin(int cpu)
{
	cpu_set_t set;

	CPU_ZERO(&set);
	CPU_SET(cpu, &set);
	if (sched_setaffinity(0, sizeof(set), &set) != 0) {
		perror("sched_setaffinity");
		exit(1);
	}
}

int main(int argc, char **argv)
{
	int ping[2], pong[2];
	long rounds = 0;
	double start, secs;
	char c = 0;
	pid_t child;

	if (argc != 3 && argc != 4) {
		fprintf(stderr, "usage: %s <cpu> <seconds> [<cgroup.procs file>]\n", argv[0]);
		return 2;
	}
	secs = atof(argv[2]);
	if (pipe(ping) || pipe(pong)) {
		perror("pipe");
		return 1;
	}
	pin(atoi(argv[1]));
	child = fork();
	if (child < 0) {
		perror("fork");
		return 1;
	}
	if (child == 0) {
		if (argc == 4) {
			FILE *f = fopen(argv[3], "w");

			if (!f || fprintf(f, "%d\n", getpid()) < 0 || fclose(f) != 0) {
				perror(argv[3]);
				_exit(1);
			}
		}
		/* Drop the parent's ends so its close(ping[1]) reaches us as EOF. */
		close(ping[1]);
		close(pong[0]);
		while (read(ping[0], &c, 1) == 1)
			if (write(pong[1], &c, 1) != 1)
				break;
		_exit(0);
	}
	close(ping[0]);
	close(pong[1]);
	start = now();
	for (;;) {
		if (write(ping[1], &c, 1) != 1 || read(pong[0], &c, 1) != 1) {
			perror("ping-pong");
			return 1;
		}
		if ((++rounds & 1023) == 0 && now() - start >= secs)
			break;
	}
	secs = now() - start;
	close(ping[1]);
	waitpid(child, NULL, 0);
	printf("%.0f\n", rounds / secs);
	return 0;
}
