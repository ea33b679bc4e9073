// SPDX-License-Identifier: GPL-2.0
/*
 * An empty sched_switch program: what any program on that hook costs before it does anything
 * (the tracepoint's static call, the BPF trampoline, bpf_stats' clock reads). Not part of colod:
 * scripts/bench/bpf-overhead.sh attaches it through colod-bpf-floor, in the same interleaved
 * run as the real programs, so their cost is read against the floor of that day.
 */
#include <vmlinux.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>

SEC("tp_btf/sched_switch")
int BPF_PROG(handle_sched_switch_floor)
{
	return 0;
}

char LICENSE[] SEC("license") = "GPL";
