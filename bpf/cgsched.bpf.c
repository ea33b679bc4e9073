// SPDX-License-Identifier: GPL-2.0
/*
 * colod scheduler program: per-cgroup run-queue latency, contention (victim <- aggressor at
 * involuntary switches, wait after preemption), on-CPU time, run-queue depth at wakeup.
 *
 * Design (measured, see bpf/README.md): everything is computed at sched_switch from timestamps
 * the kernel already keeps, so the hot path makes no bpf_ktime_get_ns() call (76 ns here):
 *   wait   = rq->clock - next->sched_info.last_queued  (what sched_info_arrive() will compute)
 *   on-CPU = prev->se.sum_exec_runtime - its value when prev was switched in here (cur_cg)
 * A wait that reads exactly 0 means the rq clock update was skipped after a preempting wakeup
 * (rq_clock_skip_update()); it is counted in `stale` so the bias is visible, not silent.
 *
 * Every handler exists as tp_btf (preferred: direct BTF pointer loads) and raw_tp (fallback:
 * BPF_CORE_READ); userspace probes tp_btf and disables the losing set before load.
 */
#include <vmlinux.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_core_read.h>
#include <bpf/bpf_tracing.h>

#include "cgsched.h"
#include "common/helpers.bpf.h"

#define TASK_RUNNING 0

const volatile __u32 cg_mode = COLOD_CGMODE_V1CPU;
/* 0 disables the wait-after-preemption bookkeeping (saves a task storage lookup per switch). */
const volatile __u32 track_preempt_wait = 1;

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_HASH);
	__uint(max_entries, COLOD_DEFAULT_MAX_CGROUPS);
	__type(key, __u64);
	__type(value, struct colod_cg_sched);
} cg_sched SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, COLOD_DEFAULT_MAX_PAIRS);
	__type(key, struct colod_pair_key);
	__type(value, __u64);
} pairs SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, COLOD_DROP_MAX);
	__type(key, __u32);
	__type(value, __u64);
} drops SEC(".maps");

/* The cgroup id of the task running on this CPU (set when it was switched in), so the switch
 * handler walks only next's cgroup pointers, not prev's. id 0: unknown (just attached, idle).
 * A running task can change cgroup without a switch (it writes its own pid to cgroup.procs, or
 * a runtime moves it); the cache is then stale. `gen` is attach_gen when the id was read:
 * any cgroup migration bumps attach_gen, and a mismatch means "walk prev's cgroup again".
 * `sum` is the task's se.sum_exec_runtime at switch-in, `pid` whose it is: the slice is
 * measured against it, not against se.prev_sum_exec_runtime, which the kernel also resets
 * without a switch (put_prev_task + set_next_task on a running task: sched_move_task at a
 * cgroup move and, on kernels before 6.8, at every exit via sched_autogroup_exit_task;
 * setaffinity, nice, setscheduler). Seen on 6.1: a 300 ms spinner's only slice, ended by
 * its exit, read as the few ms after do_exit. */
struct cur_cg_val {
	__u64 id;
	__u64 gen;
	__u64 sum;
	__u32 pid;
	__u32 pad;
};

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct cur_cg_val);
} cur_cg SEC(".maps");

/* Bumped at every cgroup migration (cgroup_attach_task, fired after the task's css_set changed):
 * rare, so a shared counter is fine; the switch handler only reads it (one .bss load). */
__u64 attach_gen = 0;

/* "was preempted while runnable" flag per task (tp_btf path). */
struct {
	__uint(type, BPF_MAP_TYPE_TASK_STORAGE);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, int);
	__type(value, __u32);
} preempted SEC(".maps");

/* Same flag keyed by pid for the raw_tp path, whose `next` is not a BTF pointer. */
struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, COLOD_DEFAULT_MAX_PIDS);
	__type(key, __u32);
	__type(value, __u32);
} preempted_pids SEC(".maps");

static const struct colod_cg_sched zero_entry;

static __always_inline void count_drop(__u32 idx)
{
	__u64 *d = bpf_map_lookup_elem(&drops, &idx);

	if (d)
		*d += 1; /* per-CPU slot: no atomic needed */
}

static __always_inline struct colod_cg_sched *cg_entry(__u64 id)
{
	struct colod_cg_sched *e = bpf_map_lookup_elem(&cg_sched, &id);
	long err;

	if (e)
		return e;
	err = bpf_map_update_elem(&cg_sched, &id, &zero_entry, BPF_NOEXIST);
	if (err && err != -17 /* EEXIST: raced with another CPU */) {
		count_drop(COLOD_DROP_CG_ENTRY);
		return NULL;
	}
	return bpf_map_lookup_elem(&cg_sched, &id);
}

static __always_inline void count_pair(__u64 victim, __u64 aggressor)
{
	struct colod_pair_key key = { .victim = victim, .aggressor = aggressor };
	__u64 one = 1, *v;
	long err;

	v = bpf_map_lookup_elem(&pairs, &key);
	if (v) {
		__sync_fetch_and_add(v, 1);
		return;
	}
	err = bpf_map_update_elem(&pairs, &key, &one, BPF_NOEXIST);
	if (err == -17) {
		v = bpf_map_lookup_elem(&pairs, &key);
		if (v)
			__sync_fetch_and_add(v, 1);
	} else if (err) {
		count_drop(COLOD_DROP_PAIR);
	}
}

/* Kernel fields read once per switch; btf selects direct loads vs BPF_CORE_READ. */
struct switch_vals {
	__u64 prev_id, next_id;
	__u64 queued, clock;
	__u64 sum, prev_sum, next_sum;
	__u32 prev_pid, next_pid;
};

static __always_inline int on_switch(struct task_struct *prev, struct task_struct *next,
				     unsigned int prev_state, const bool btf)
{
	struct colod_cg_sched *pe = NULL, *ne = NULL;
	struct switch_vals s;
	struct cur_cg_val *cur;
	__u64 gen = attach_gen; /* before any cgroup read: a later bump only forces a re-walk */
	__u32 zero = 0;
	bool invol;
	__u64 wait = 0;

	if (btf) {
		s.prev_pid = prev->pid;
		s.next_pid = next->pid;
		s.queued = next->sched_info.last_queued;
		s.sum = prev->se.sum_exec_runtime;
		s.prev_sum = prev->se.prev_sum_exec_runtime;
		s.next_sum = next->se.sum_exec_runtime;
		/* This CPU's rq through next's cfs_rq, just picked from it (CONFIG_FAIR_GROUP_SCHED, which
		 * the cpu controller needs): the percpu `runqueues` ksym has no address when
		 * kallsyms does not list percpu variables (seen here). */
		s.clock = next->se.cfs_rq->rq->clock;
	} else {
		s.prev_pid = BPF_CORE_READ(prev, pid);
		s.next_pid = BPF_CORE_READ(next, pid);
		s.queued = BPF_CORE_READ(next, sched_info.last_queued);
		s.sum = BPF_CORE_READ(prev, se.sum_exec_runtime);
		s.prev_sum = BPF_CORE_READ(prev, se.prev_sum_exec_runtime);
		s.next_sum = BPF_CORE_READ(next, se.sum_exec_runtime);
		s.clock = BPF_CORE_READ(next, se.cfs_rq, rq, clock);
	}
	/* pid 0 is the idle task: its "runnable" state and CPU time are not contention. */
	invol = prev_state == TASK_RUNNING && s.prev_pid != 0;

	cur = bpf_map_lookup_elem(&cur_cg, &zero);
	if (!cur)
		return 0; /* cannot happen for an array; keeps the verifier happy */
	s.prev_id = 0;
	/* The switch-in of prev on this CPU was seen: its slice starts there (see cur_cg_val).
	 * Otherwise (first switch after attach) the kernel's prev_sum_exec_runtime is the start. */
	if (s.prev_pid != 0 && cur->pid == s.prev_pid)
		s.prev_sum = cur->sum;
	if (s.prev_pid != 0) {
		s.prev_id = cur->gen == gen ? cur->id : 0;
		if (s.prev_id == 0)
			s.prev_id = btf ? colod_cg_id_btf(prev, cg_mode) :
					  colod_cg_id_core(prev, cg_mode);
		pe = cg_entry(s.prev_id);
		if (pe) {
			if (s.sum > s.prev_sum)
				pe->oncpu_ns += s.sum - s.prev_sum;
			if (invol)
				pe->invol += 1;
		}
	}
	cur->pid = s.next_pid;
	cur->sum = s.next_sum;
	if (s.next_pid == 0) {
		cur->id = 0;
		return 0;
	}
	s.next_id = btf ? colod_cg_id_btf(next, cg_mode) : colod_cg_id_core(next, cg_mode);
	cur->id = s.next_id;
	cur->gen = gen;
	if (invol) {
		count_pair(s.prev_id, s.next_id);
		if (pe)
			pe->preempt_pending += 1;
		if (track_preempt_wait) {
			if (btf) {
				__u32 *f = bpf_task_storage_get(&preempted, prev, 0,
								BPF_LOCAL_STORAGE_GET_F_CREATE);
				if (f)
					*f = 1;
				else
					count_drop(COLOD_DROP_STORAGE);
			} else {
				__u32 one = 1;

				if (bpf_map_update_elem(&preempted_pids, &s.prev_pid, &one, BPF_ANY))
					count_drop(COLOD_DROP_STORAGE);
			}
		}
	}
	/* last_queued is 0 when the task was not queued through sched_info (e.g. a new task
	 * on a kernel without CONFIG_SCHED_INFO); then there is no wait to record. */
	if (s.queued == 0)
		return 0;
	ne = (pe && s.next_id == s.prev_id) ? pe : cg_entry(s.next_id);
	if (!ne)
		return 0;
	if (s.clock > s.queued)
		wait = s.clock - s.queued;
	else
		ne->stale += 1;
	ne->hist[colod_us_slot(wait)] += 1;
	ne->count += 1;
	ne->total_ns += wait;
	/* Only cgroups with a preempted task pending pay for the per-task flag lookup. */
	if (track_preempt_wait && ne->preempt_pending) {
		if (btf) {
			__u32 *f = bpf_task_storage_get(&preempted, next, 0, 0);

			if (f && *f) {
				*f = 0;
				ne->preempt_pending -= 1;
				ne->preempt_wait_ns += wait;
			}
		} else {
			__u32 *f = bpf_map_lookup_elem(&preempted_pids, &s.next_pid);

			if (f && *f) {
				*f = 0;
				ne->preempt_pending -= 1;
				ne->preempt_wait_ns += wait;
			}
		}
	}
	return 0;
}

SEC("tp_btf/sched_switch")
int BPF_PROG(handle_sched_switch, bool preempt, struct task_struct *prev,
	     struct task_struct *next, unsigned int prev_state)
{
	return on_switch(prev, next, prev_state, true);
}

SEC("raw_tp/sched_switch")
int BPF_PROG(handle_sched_switch_raw, bool preempt, struct task_struct *prev,
	     struct task_struct *next, unsigned int prev_state)
{
	return on_switch(prev, next, prev_state, false);
}

SEC("tp_btf/cgroup_attach_task")
int BPF_PROG(handle_cgroup_attach_task)
{
	__sync_fetch_and_add(&attach_gen, 1);
	return 0;
}

SEC("raw_tp/cgroup_attach_task")
int BPF_PROG(handle_cgroup_attach_task_raw)
{
	__sync_fetch_and_add(&attach_gen, 1);
	return 0;
}

static __always_inline int on_wakeup(struct task_struct *p, const bool btf)
{
	struct colod_cg_sched *e;
	__u64 id, depth;

	/* The rq the task was enqueued on, via its cfs_rq (see on_switch). */
	depth = btf ? p->se.cfs_rq->rq->nr_running : BPF_CORE_READ(p, se.cfs_rq, rq, nr_running);
	id = btf ? colod_cg_id_btf(p, cg_mode) : colod_cg_id_core(p, cg_mode);
	e = cg_entry(id);
	if (!e)
		return 0;
	e->wakeups += 1;
	/* The woken task is already enqueued here, so nr_running counts it: depth >= 1. */
	e->depth_sum += depth;
	return 0;
}

SEC("tp_btf/sched_wakeup")
int BPF_PROG(handle_sched_wakeup, struct task_struct *p)
{
	return on_wakeup(p, true);
}

SEC("tp_btf/sched_wakeup_new")
int BPF_PROG(handle_sched_wakeup_new, struct task_struct *p)
{
	return on_wakeup(p, true);
}

SEC("raw_tp/sched_wakeup")
int BPF_PROG(handle_sched_wakeup_raw, struct task_struct *p)
{
	return on_wakeup(p, false);
}

SEC("raw_tp/sched_wakeup_new")
int BPF_PROG(handle_sched_wakeup_new_raw, struct task_struct *p)
{
	return on_wakeup(p, false);
}

char LICENSE[] SEC("license") = "GPL";
