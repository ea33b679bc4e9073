/* SPDX-License-Identifier: GPL-2.0 */
/* Preemption marks, for cgsched.bpf.c only: a task switched out while runnable is marked with
 * the time and its cgroup's slot, and its wait is measured at its next switch-in, wherever that
 * happens. Included after count_drop() and TASK_READ, which it uses. */
#ifndef COLOD_PREEMPT_MARKS_BPF_H
#define COLOD_PREEMPT_MARKS_BPF_H

#include "cgsched.h"

/* A pending preemption travels with the task, not with the CPU it was preempted on: the
 * balancer (or a setaffinity) can move a preempted task while it is queued, and it then resumes
 * elsewhere. `at`: this rq's clock at the preemption, so the wait is measured from there to
 * the switch-in wherever it happens (the kernel restarts sched_info.last_queued at a
 * migration, so next's last_queued alone would lose the wait before the move). `slot`: the
 * cg_sched slot whose cg_pending count this mark holds. `pending`: set at an involuntary
 * switch-out, cleared at the next switch-in. */
struct preempt_mark {
	__u64 at;
	__u32 slot;
	__u32 pending;
};

/* The mark per task (tp_btf path). */
struct {
	__uint(type, BPF_MAP_TYPE_TASK_STORAGE);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, int);
	__type(value, struct preempt_mark);
} preempted SEC(".maps");

/* The same mark keyed by pid for the raw_tp path, whose `next` is not a BTF pointer. An LRU
 * eviction loses a mark: its wait goes uncounted and its cgroup's cg_pending count stays one
 * too high (the flag lookup then runs for that cgroup when it need not: cost, not error). */
struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, COLOD_DEFAULT_MAX_PIDS);
	__type(key, __u32);
	__type(value, struct preempt_mark);
} preempted_pids SEC(".maps");

/* Per slot, the tasks with a pending mark that holds this slot: the gate of the mark lookup at
 * switch-in, so cgroups whose tasks are not waiting after a preemption do not pay for it. Not
 * per-CPU: a per-CPU count read 0 on the CPU a migrated victim resumed on (its wait was lost
 * and its mark left set for a later, unrelated wait) and stayed too high on the CPU it left.
 * The price is an atomic add at a preemption and an atomic sub at the resume on a line shared
 * by the cgroup's CPUs (the pairs count already takes one per cross-cgroup preemption).
 * Userspace zeroes a slot's count with the slot. */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, COLOD_DEFAULT_MAX_CGROUPS);
	__type(key, __u32);
	__type(value, struct colod_cg_pending);
} cg_pending SEC(".maps");

/* The preemption mark of a task; created when `create` (the mark is zeroed then). */
static __always_inline struct preempt_mark *mark_of(struct task_struct *t, const bool create,
						    const bool btf)
{
	struct preempt_mark *m;
	__u32 pid;

	if (btf)
		return bpf_task_storage_get(&preempted, t, 0,
					    create ? BPF_LOCAL_STORAGE_GET_F_CREATE : 0);
	pid = BPF_CORE_READ(t, pid);
	m = bpf_map_lookup_elem(&preempted_pids, &pid);
	if (m || !create)
		return m;
	{
		struct preempt_mark zero = {};

		bpf_map_update_elem(&preempted_pids, &pid, &zero, BPF_NOEXIST);
	}
	return bpf_map_lookup_elem(&preempted_pids, &pid);
}

/* One task fewer holds a mark on g's slot. A count already 0 was zeroed by userspace with a
 * recycled slot after the mark took it (the task left that cgroup while queued): not taken
 * below 0. */
static __always_inline void unpend(struct colod_cg_pending *g)
{
	if (g && g->tasks)
		__sync_fetch_and_add(&g->tasks, -1);
}

/* prev (cgroup slot `slot`) was switched out while runnable: mark it with this rq's clock. */
static __always_inline void mark_preempted(struct task_struct *prev, __u32 slot, __u64 clock,
					   const bool btf)
{
	struct colod_cg_pending *g = bpf_map_lookup_elem(&cg_pending, &slot);
	struct preempt_mark *m;

	if (!g)
		return;
	m = mark_of(prev, true, btf);
	if (!m) {
		count_drop(COLOD_DROP_STORAGE);
		return;
	}
	m->at = clock;
	if (m->pending) {
		if (m->slot == slot)
			return;
		/* Still pending from a preemption whose switch-in went unseen (the task changed
		 * cgroup while queued and its new cgroup's count was 0, or the program was not run
		 * for that switch: bpf/README.md). That wait is lost; the count moves here. */
		unpend(bpf_map_lookup_elem(&cg_pending, &m->slot));
	}
	m->slot = slot;
	m->pending = 1;
	__sync_fetch_and_add(&g->tasks, 1);
}

/* next is being switched in and its cgroup (slot `slot`, count g) has tasks waiting after a
 * preemption: if next is one, clear its mark, store when it was preempted in *at and return
 * true. */
static __always_inline bool take_mark(struct task_struct *next, __u32 slot,
				      struct colod_cg_pending *g, __u64 *at, const bool btf)
{
	struct preempt_mark *m = mark_of(next, false, btf);

	if (!m || !m->pending)
		return false;
	m->pending = 0;
	unpend(m->slot == slot ? g : bpf_map_lookup_elem(&cg_pending, &m->slot));
	/* A mark whose resume went unseen (its switch-in untraced: bpf/README.md, known limits; or
	 * taken in a cgroup whose count was 0, the task moved while queued) is stale: the task has
	 * run and maybe slept since, and the time from the preemption to now is no wait. The kernel
	 * stamps every arrival (sched_info.last_arrival, not yet this one's at the tracepoint): one
	 * after the preemption means it was resumed since. */
	if (TASK_READ(btf, next, sched_info.last_arrival) > m->at)
		return false;
	*at = m->at;
	return true;
}

#endif /* COLOD_PREEMPT_MARKS_BPF_H */
