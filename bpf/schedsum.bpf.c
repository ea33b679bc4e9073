// SPDX-License-Identifier: GPL-2.0
/*
 * colod's read of cg_sched, summed in the kernel. cg_sched holds a copy of each cgroup's value
 * per CPU (bpf/common/cg_maps.bpf.h): read from userspace, a live cgroup costs 136 B x CPUs at
 * every tick (26 KB at 192 CPUs), and userspace holds and sums all of it. This iterator walks
 * cg_slots (cgroup id -> slot), adds up each live slot's copies here and writes one 152-byte
 * record per cgroup, whatever the machine's size (issue 17), and only for the slots marked
 * changed (cg_dirty) unless asked for all. Of a slot's copies it adds only those of the CPUs
 * marked in cg_cpus (the CPUs the cgroup ran on since its slot was zeroed; the others are zero),
 * so its work is the changed cgroups x the CPUs they ran on, not x the machine's CPUs.
 * Histogram buckets are summed modulo 2^32 as userspace did.
 *
 * Needs bpf_loop (5.17): on an older kernel this object does not load, and the collector reads
 * the maps from userspace as before. Its four maps are the cgsched object's, reused by fd
 * before load.
 */
#include <vmlinux.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>

#include "cgsched.h"
#include "common/cg_maps.bpf.h"

/* Set by userspace before load: 1 when cgsched marks CPUs in cg_cpus (its mark_cpus), 0 to add
 * every CPU's copy (sched_cpus of them, bpf/common/cg_maps.bpf.h). */
const volatile __u32 use_cpu_marks = 0;

/* Set by userspace before each walk (.bss): 0 sums every live slot, 1 only the slots whose
 * cg_dirty mark is set. Either way a slot's mark is cleared before its copies are summed, so a
 * write after the sum marks it again. */
__u32 changed_only;

struct walk {
	struct colod_sched_sum r;
	struct colod_cg_cpus cpus; /* a copy of the slot's marks (all ones without them) */
};

static int add_cpu(__u32 cpu, void *data)
{
	struct walk *wk = data;
	struct colod_sched_sum *r = &wk->r;
	struct colod_cg_sched *v;
	__u32 idx;
	int i;

	if (!(wk->cpus.w[(cpu / 64) & (COLOD_CPU_MARK_WORDS - 1)] & (1ULL << (cpu % 64))))
		return 0; /* never written on this CPU: its copy is zero */
	idx = cpu * max_slots + r->slot;
	v = bpf_map_lookup_elem(&cg_sched, &idx);
	if (!v)
		return 1; /* past the array (cannot happen below sched_cpus): stop */
	r->cpus += 1;
	r->sum.count += v->count;
	r->sum.total_ns += v->total_ns;
	r->sum.oncpu_ns += v->oncpu_ns;
	r->sum.invol += v->invol;
	r->sum.self_preempt += v->self_preempt;
	r->sum.preempt_wait_ns += v->preempt_wait_ns;
	r->sum.preempt_waits += v->preempt_waits;
#pragma unroll
	for (i = 0; i < COLOD_SCHED_HIST_SLOTS; i++)
		r->sum.hist[i] += v->hist[i];
	return 0;
}

/* The CPUs to add for a slot into wk->cpus, and how many of the sched_cpus CPUs the loop must
 * visit (up to the last word with a mark). */
static __always_inline __u32 cpus_to_add(struct walk *wk)
{
	struct colod_cg_cpus *m;
	__u32 i, top = 0;

	if (!use_cpu_marks || sched_cpus > COLOD_CPU_MARK_WORDS * 64) {
		__builtin_memset(&wk->cpus, 0xff, sizeof(wk->cpus));
		return sched_cpus;
	}
	m = bpf_map_lookup_elem(&cg_cpus, &wk->r.slot);
	if (!m)
		return 0;
#pragma unroll
	for (i = 0; i < COLOD_CPU_MARK_WORDS; i++) {
		wk->cpus.w[i] = m->w[i];
		if (wk->cpus.w[i])
			top = (i + 1) * 64;
	}
	return top < sched_cpus ? top : sched_cpus;
}

SEC("iter/bpf_map_elem")
int sum_slots(struct bpf_iter__bpf_map_elem *ctx)
{
	struct walk wk = {};
	__u64 *id = ctx->key;
	__u32 *slot = ctx->value;
	__u64 *mark;

	if (!id || !slot)
		return 0; /* the end of the walk */
	wk.r.id = *id;
	wk.r.slot = *slot;
	/* Keyed from the stack: the iterator's value buffer is not a map key pointer to older
	 * verifiers (6.1 refused it). */
	mark = bpf_map_lookup_elem(&cg_dirty, &wk.r.slot);
	if (changed_only && (!mark || !*mark))
		return 0; /* unchanged since the last walk */
	/* The mark before the CPU marks (cgsched sets them in the other order). A CPU's first write
	 * whose bit is set after this walk read the marks is summed from the next walk on, like a
	 * value written after the copy: late, never lost, and the sum never goes down (bits are
	 * cleared only with the slot). */
	if (mark)
		*mark = 0;
	bpf_loop(cpus_to_add(&wk), add_cpu, &wk, 0);
	bpf_seq_write(ctx->meta->seq, &wk.r, sizeof(wk.r));
	return 0;
}

char LICENSE[] SEC("license") = "GPL";
