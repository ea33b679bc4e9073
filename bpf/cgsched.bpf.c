// SPDX-License-Identifier: GPL-2.0
/*
 * colod scheduler program: per-cgroup run-queue latency, contention (victim <- aggressor at
 * involuntary switches, wait after preemption), on-CPU time, run-queue depth at wakeup.
 *
 * Design (measured, see bpf/README.md): everything is computed at sched_switch from timestamps
 * the kernel already keeps, so the hot path makes no bpf_ktime_get_ns() call (76 ns here):
 *   wait   = rq->clock - next->sched_info.last_queued  (what sched_info_arrive() will compute)
 *   on-CPU = prev->se.sum_exec_runtime - its value when prev was switched in here (cpu_state)
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
/* 0: no change marks in cg_dirty (the reader then copies out every slot at every snapshot). */
const volatile __u32 mark_changes = 1;
/* 1: mark in cg_cpus the CPUs each slot is written on. Set by userspace between load and attach
 * (.bss, not rodata: it knows only then whether the kernel's summing iterator, the marks' one
 * reader, loaded); 0 when it did not, or the marks cannot hold every possible CPU. One load of
 * a .bss line the handler reads anyway (attach_gen). */
__u32 mark_cpus = 0;
/* 1: count the diagnostics of struct colod_cg_diag in cg_diag (userspace sizes it to
 * max_slots then, and to one unused entry otherwise). */
const volatile __u32 diag = 0;

#include "common/cg_maps.bpf.h"

/* Per-cgroup diagnostics no policy reads (struct colod_cg_diag), per CPU, indexed by the
 * cgroup's slot. Kept out of cg_sched so that their bytes x CPUs x slots are paid only when
 * asked for; a per-CPU map (sized by the possible CPUs) because it is opt-in. */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, COLOD_DEFAULT_MAX_CGROUPS);
	__type(key, __u32);
	__type(value, struct colod_cg_diag);
} cg_diag SEC(".maps");

/* Recycled (zeroed) slots; when empty, new slots come from slots_used. */
struct {
	__uint(type, BPF_MAP_TYPE_QUEUE);
	__uint(max_entries, COLOD_DEFAULT_MAX_CGROUPS);
	__type(value, __u32);
} free_slots SEC(".maps");

/* Slots handed out from the top: [0, min(slots_used, max_slots)) have been used. */
__u64 slots_used = 0;
/* Bumped after every id inserted into cg_slots: while it stands still (and userspace deleted
 * nothing), cg_slots is what userspace read last, and the read side skips walking its buckets
 * (issue 17). New cgroups are rare next to switches, so the shared write costs nothing. */
__u64 slots_gen = 0;

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, COLOD_DEFAULT_MAX_PAIRS);
	__type(key, struct colod_pair_key);
	__type(value, __u64);
} pairs SEC(".maps");

/* The pairs whose victim userspace names (cg_named): the victims it protects and the containers
 * it restricts, drained (read and deleted) at every snapshot, so a pair is re-created here at
 * its first preemption of an interval, while `pairs` holds the rest and is read at a slower
 * cadence (issue 17: at 1000 containers walking every pair at every tick was a third of the
 * collector's time, for counts the policy reads only of its victims). A named pair that finds
 * this map full is counted in `pairs` instead: late, never lost. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, COLOD_DEFAULT_MAX_NAMED_PAIRS);
	__type(key, struct colod_pair_key);
	__type(value, __u64);
} named_pairs SEC(".maps");

/* Set when named_pairs had no room for a new pair: from then on new named pairs go straight to
 * `pairs` (a failed insert into a full hash on every such preemption would cost more than the
 * count), until userspace finds room in it at a drain and clears it. */
__u64 named_pairs_full = 0;

/* Per slot, nonzero when userspace names the cgroup (its pairs go to named_pairs). Written by
 * userspace through its mapping, read here only on a cross-cgroup preemption. A slot handed to
 * another cgroup before userspace cleared its mark sends that cgroup's pairs to named_pairs for
 * a snapshot or two: read sooner, nothing lost. */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(map_flags, BPF_F_MMAPABLE);
	__uint(max_entries, COLOD_DEFAULT_MAX_CGROUPS);
	__type(key, __u32);
	__type(value, __u64);
} cg_named SEC(".maps");

/* Waits of protected cgroups' tasks after a wakeup, by whom they waited behind (struct
 * colod_behind, cgsched.h). Written only for watched cgroups (watch_wait). */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, COLOD_DEFAULT_MAX_BEHIND);
	__type(key, struct colod_pair_key);
	__type(value, struct colod_behind);
} behind SEC(".maps");

/* Failed map updates by kind (COLOD_DROP_*), read by userspace through the mmapped .bss: no
 * syscall and 40 bytes a tick, where a per-CPU array cost 5 lookups and 40 bytes per possible
 * CPU (41 KB a tick for both objects at 512, issue 17). Failures are rare, so the shared atomic
 * costs nothing on the paths that succeed. */
__u64 drop_counts[COLOD_DROP_MAX];

/* What this CPU knows about the task it is running, written when that task was switched in, so
 * the switch handler reads prev's cgroup, idleness and slice start from one per-CPU value (one
 * inlined array lookup) instead of walking prev's pointers.
 * `task`: the task_struct switched in (identity only, never dereferenced). At a switch, prev is
 * the task switched in by the previous switch on this CPU, so `task != prev` only for the first
 * switch after attach; then everything is read from prev itself.
 * `id`, `slot`: its cgroup id and that cgroup's cg_sched slot (while the idle task runs: of
 * the last other task); `alt_id`, `alt_slot`: the cgroup this CPU ran before that one (0: none).
 * `idle`: it is the idle task.
 * `grp`: its cfs_rq (V1CPU) or css_set (V2) pointer, compared with next's to skip next's
 * cgroup walk (see task_grp); used only while that task is running (prev at the switch).
 * `gen`: attach_gen when `id`, `slot`, `alt_*` and `grp` were read. A running task can change
 * cgroup without a switch (it writes its own pid to cgroup.procs, or a runtime moves it): any
 * cgroup migration bumps attach_gen, and a mismatch means "walk prev's cgroup again".
 * Userspace bumps it too when it takes slots back from deleted cgroups.
 * `sum`: its se.sum_exec_runtime at switch-in. The slice is measured against it, not against
 * se.prev_sum_exec_runtime, which the kernel also resets without a switch (put_prev_task +
 * set_next_task on a running task: sched_move_task at a cgroup move and, on kernels before
 * 6.8, at every exit via sched_autogroup_exit_task; setaffinity, nice, setscheduler). Seen on
 * 6.1: a 300 ms spinner's only slice, ended by its exit, read as the few ms after do_exit. */
#define RUNNERS 4 /* a power of two */

struct cpu_state {
	__u64 task;
	__u64 id;
	__u64 gen;
	__u64 sum;
	__u64 grp;
	__u64 alt_id;
	__u32 slot;
	__u32 alt_slot;
	__u32 idle;
	__u32 cpu1; /* this CPU's number + 1 (0: not known yet): its cg_sched copies, its marks */
	__u32 unsized; /* this CPU is past sched_cpus (counted in drops once) */
	__u32 pad;
	/* While a watch is set: the last RUNNERS switch-ins on this CPU (cgroup id, rq clock), the
	 * newest at run_pos, run_n of them valid (0 after idle or a gap in the record). Whom a
	 * woken waiter waited behind is the one of them that held the CPU longest in its wait. */
	__u64 run_id[RUNNERS];
	__u64 run_at[RUNNERS];
	__u32 run_pos;
	__u32 run_n;
};

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct cpu_state);
} cpu_state SEC(".maps");

/* Bumped at every cgroup migration (cgroup_attach_task, fired after the task's css_set changed):
 * rare, so a shared counter is fine; the switch handler only reads it (one .bss load). */
__u64 attach_gen = 0;

/* Wakeup watch of protected cgroups (struct colod_cg_watch), indexed by the cgroup slot. */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, COLOD_DEFAULT_MAX_CGROUPS);
	__type(key, __u32);
	__type(value, struct colod_cg_watch);
} cg_watch SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, COLOD_WAKEUP_RINGBUF_BYTES);
} wakeups SEC(".maps");

/* Ids of the measured hierarchy's cgroups removed (rmdir) since userspace last drained the
 * queue: the collector prunes their state at the next snapshot instead of stat()ing every tracked
 * cgroup every second to find the dead ones (issue 17). A push onto a full queue bumps gone_lost,
 * and userspace then checks them all. */
struct {
	__uint(type, BPF_MAP_TYPE_QUEUE);
	__uint(max_entries, COLOD_GONE_QUEUE_ENTRIES);
	__type(value, __u64);
} gone SEC(".maps");

__u64 gone_lost = 0;

/* Window of the wait accumulator (ns). */
const volatile __u64 watch_window_ns = COLOD_DEFAULT_WATCH_WINDOW_NS;
/* Shortest wait after a wakeup recorded in behind (ns). */
const volatile __u64 behind_min_ns = COLOD_DEFAULT_BEHIND_MIN_NS;
/* Number of slots userspace watches: 0 keeps cg_watch off the hot path entirely (one .bss
 * load per recorded wait, next to attach_gen). */
__u64 watched = 0;

static __always_inline void count_drop(__u32 idx)
{
	if (idx < COLOD_DROP_MAX)
		__sync_fetch_and_add(&drop_counts[idx], 1);
}

/* The cg_sched slot of a cgroup, assigned at first sight; COLOD_NO_SLOT (counted in drops)
 * when every slot is taken. */
static __always_inline __u32 cg_slot(__u64 id)
{
	__u32 *v = bpf_map_lookup_elem(&cg_slots, &id);
	__u32 slot;
	long err;

	if (v)
		return *v;
	if (bpf_map_pop_elem(&free_slots, &slot)) {
		__u64 top = __sync_fetch_and_add(&slots_used, 1);

		if (top >= max_slots) {
			count_drop(COLOD_DROP_CG_ENTRY);
			return COLOD_NO_SLOT;
		}
		slot = top;
	}
	err = bpf_map_update_elem(&cg_slots, &id, &slot, BPF_NOEXIST);
	if (!err) {
		__sync_fetch_and_add(&slots_gen, 1);
		return slot;
	}
	/* Not used: give it back (the queue holds every slot, so it has room). */
	bpf_map_push_elem(&free_slots, &slot, 0);
	if (err == -17 /* EEXIST: another CPU assigned one first */) {
		v = bpf_map_lookup_elem(&cg_slots, &id);
		if (v)
			return *v;
	}
	count_drop(err == -16 /* EBUSY */ ? COLOD_DROP_BUSY : COLOD_DROP_CG_ENTRY);
	return COLOD_NO_SLOT;
}

/* This CPU's number, cached in its cpu_state (a helper call on older kernels, per switch). */
static __always_inline __u32 this_cpu(struct cpu_state *cs)
{
	if (!cs->cpu1)
		cs->cpu1 = bpf_get_smp_processor_id() + 1;
	return cs->cpu1 - 1;
}

/* This CPU's copy of a slot's cg_sched value. NULL for COLOD_NO_SLOT, and on a CPU past the
 * sched_cpus the map was sized for (hot-added after load: counted once per CPU in drops). */
static __always_inline struct colod_cg_sched *slot_entry(__u32 slot, struct cpu_state *cs)
{
	__u32 cpu, idx;

	if (slot >= max_slots)
		return NULL;
	cpu = this_cpu(cs);
	if (cpu >= sched_cpus) {
		if (!cs->unsized) {
			cs->unsized = 1;
			count_drop(COLOD_DROP_CPU);
		}
		return NULL;
	}
	idx = cpu * max_slots + slot;
	return bpf_map_lookup_elem(&cg_sched, &idx);
}

/* After a write to a slot's cg_sched value on `cpu`: the reader copies it out at the next
 * snapshot, and sums this CPU's copy from now on. The loads keep the stores off the lines while
 * the marks are already set (the dirty mark once per snapshot, the CPU's bit once per slot). The
 * CPU bit is set before the dirty mark: a reader that clears the dirty mark and then reads the
 * CPU marks sees the bit of every write whose dirty mark it cleared. */
static __always_inline void mark_changed(__u32 slot, __u32 cpu)
{
	struct colod_cg_cpus *m;
	__u64 *d, bit, *w;

	if (mark_cpus) {
		m = bpf_map_lookup_elem(&cg_cpus, &slot);
		if (m) {
			w = &m->w[(cpu / 64) & (COLOD_CPU_MARK_WORDS - 1)];
			bit = 1ULL << (cpu % 64);
			/* An add, not an or: the atomic or needs kernel 5.12, the add any. Only this
			 * CPU adds this bit, and only while it reads clear (the handlers run with
			 * interrupts off, so they do not nest on a CPU): the add is the or. Atomic:
			 * other CPUs add their bits to the same word. */
			if (!(*w & bit))
				__sync_fetch_and_add(w, bit);
		}
	}
	if (!mark_changes)
		return;
	d = bpf_map_lookup_elem(&cg_dirty, &slot);
	if (d && !*d)
		*d = 1;
}

/* Adds one to the pair in `map`, inserting it if `insert`. 0 when
 * counted; otherwise why not: -2 (ENOENT) not there and not to be inserted, or the insert's
 * error (E2BIG when full; kernels differ in what a full preallocated hash returns). */
static __always_inline long count_in(void *map, struct colod_pair_key *key, const bool insert)
{
	__u64 one = 1, *v;
	long err;

	v = bpf_map_lookup_elem(map, key);
	if (v) {
		__sync_fetch_and_add(v, 1);
		return 0;
	}
	if (!insert)
		return -2;
	err = bpf_map_update_elem(map, key, &one, BPF_NOEXIST);
	if (!err)
		return 0;
	if (err == -17 /* EEXIST: inserted meanwhile */) {
		v = bpf_map_lookup_elem(map, key);
		if (v) {
			__sync_fetch_and_add(v, 1);
			return 0;
		}
	}
	return err;
}

static __always_inline void count_pair(__u64 victim, __u64 aggressor, __u32 victim_slot)
{
	struct colod_pair_key key = { .victim = victim, .aggressor = aggressor };
	__u64 *named = bpf_map_lookup_elem(&cg_named, &victim_slot);
	long err;

	if (named && *named) {
		if (!count_in(&named_pairs, &key, !named_pairs_full))
			return;
		/* Whatever stopped it (most often a full map), the other map takes the count. */
		if (!named_pairs_full)
			named_pairs_full = 1;
	}
	err = count_in(&pairs, &key, true);
	if (err)
		count_drop(err == -16 /* EBUSY */ ? COLOD_DROP_BUSY : COLOD_DROP_PAIR);
}

/* Field reads: direct CO-RE-relocated loads on BTF pointers (tp_btf), BPF_CORE_READ otherwise
 * (raw_tp, whose arguments are plain u64). `btf` is a compile-time constant at every call. */
#define TASK_READ(btf, t, field) ((btf) ? (t)->field : BPF_CORE_READ(t, field))

#include "common/preempt_marks.bpf.h"

/* A task of protected cgroup `victim` got the CPU after a wakeup wait of `wait` ns, most of
 * which a task of cgroup `aggressor` held the CPU (who_behind). */
static __always_inline void record_behind(__u64 victim, __u64 aggressor, __u64 wait)
{
	struct colod_pair_key key = { .victim = victim, .aggressor = aggressor };
	struct colod_behind zero = {}, *v;
	long err;

	v = bpf_map_lookup_elem(&behind, &key);
	if (!v) {
		err = bpf_map_update_elem(&behind, &key, &zero, BPF_NOEXIST);
		if (err && err != -17 /* EEXIST: another CPU added it first */) {
			count_drop(err == -16 /* EBUSY */ ? COLOD_DROP_BUSY : COLOD_DROP_PAIR);
			return;
		}
		v = bpf_map_lookup_elem(&behind, &key);
		if (!v)
			return;
	}
	__sync_fetch_and_add(&v->waits, 1);
	__sync_fetch_and_add(&v->wait_ns, wait);
}

/* Whom a task switched in at `clock` after waiting `wait` ns on this CPU waited behind: of the
 * CPU's recent runners before it (the ring's newest entry is itself), the cgroup that ran
 * longest within the wait. 0 when the ring does not cover it (idle, or no record). The last
 * runner alone is not it: when a hog's slice ends, a sleeper woken meanwhile (a daemon, a
 * kworker) often runs first, briefly, and the waiter after it. */
static __always_inline __u64 who_behind(const struct cpu_state *cs, __u64 clock, __u64 wait)
{
	__u64 from = clock > wait ? clock - wait : 0, end = clock, best = 0, best_id = 0;
	__u32 i;

#pragma unroll
	for (i = 1; i < RUNNERS; i++) {
		__u32 idx = (cs->run_pos - i) & (RUNNERS - 1);
		__u64 at = cs->run_at[idx], lo;

		if (i >= cs->run_n || end <= from)
			break;
		lo = at > from ? at : from;
		if (end > lo && end - lo > best) {
			best = end - lo;
			best_id = cs->run_id[idx];
		}
		end = at;
	}
	return best_id;
}

/* A task of next's cgroup (slot `slot`, id `id`) waited `wait` ns until `clock`: add it to the
 * slot's watch accumulator, and post an event the first time a window's sum reaches the
 * threshold. `after`: the cgroup it waited behind after a wakeup (who_behind; 0 for a
 * preemption's wait, or when the ring does not cover it), recorded in behind (atomics: only
 * waits of 50 µs or more get there). The watch fields are updated without atomics: two
 * CPUs updating one slot at once can lose a wait of a window (an event a wait later), restart
 * a window twice, or in a tight race both post for one window (one more event, which
 * userspace's rate limit absorbs).
 * Not inlined: a BPF-to-BPF call made only while a watch is set, so the switch handler's own
 * code (registers, spills) stays what it was without one (measured in bpf/README.md). */
static __noinline int watch_wait(__u32 slot, __u64 id, __u64 wait, __u64 clock, __u64 after)
{
	struct colod_cg_watch *w = bpf_map_lookup_elem(&cg_watch, &slot);
	struct colod_wakeup ev;
	__u64 start, acc;

	if (!w || !w->threshold_ns || w->id != id)
		return 0;
	if (after && wait >= behind_min_ns)
		record_behind(id, after, wait);
	start = w->window_start;
	/* rq clocks of two CPUs may disagree by a little: a clock behind the start is inside. */
	if (start == 0 || (clock > start && clock - start > watch_window_ns)) {
		start = clock;
		w->window_start = start;
		acc = wait;
	} else {
		acc = w->acc_ns + wait;
	}
	w->acc_ns = acc;
	if (acc < w->threshold_ns || w->notified == start)
		return 0;
	w->notified = start;
	w->events += 1;
	ev.id = id;
	ev.acc_ns = acc;
	ev.window_start = start;
	ev.at = clock;
	/* Default wakeup: the reader is woken when it has caught up, which it has (events are
	 * rare); bpf_ringbuf_output queues the wakeup as irq_work, safe under the rq lock. */
	if (bpf_ringbuf_output(&wakeups, &ev, sizeof(ev), 0))
		count_drop(COLOD_DROP_EVENT);
	return 0; /* a subprogram's R0 must be set (the verifier reads it at exit) */
}

static __always_inline __u64 task_cg_id(struct task_struct *t, const bool btf)
{
	return btf ? colod_cg_id_btf(t, cg_mode) : colod_cg_id_core(t, cg_mode);
}

/* The pointer that identifies next's cgroup in the hierarchy that keys the maps, without the
 * walk to the cgroup id: V1CPU: its cfs_rq on this CPU, i.e. its task group, i.e. its cpu
 * cgroup (autogroups live only under the root group and share its id); V2: its css_set.
 * Equal pointers mean the same cgroup. Compared against prev's, cached at prev's switch-in:
 * while prev runs it holds a reference on both (so the cached pointer cannot be freed and
 * reused), and a cgroup move bumps attach_gen, which invalidates the cache. */
static __always_inline __u64 task_grp(struct task_struct *t, struct cfs_rq *cfs_rq,
				      const bool btf)
{
	if (cg_mode == COLOD_CGMODE_V2)
		return (__u64)TASK_READ(btf, t, cgroups);
	return (__u64)cfs_rq;
}

/* Where the slice of a prev this CPU's record does not name began, as its se.sum_exec_runtime.
 * Its switch-in was not seen here: the first switch after attach, or a switch the kernel did not
 * trace (seen on this project's sandbox kernel: no sched_switch fires, for perf either, when a
 * thread of its agent, pid 1, switches out, so whoever runs next is switched in unseen). The
 * kernel stamped that switch-in itself: sched_info.last_arrival, this rq's clock then, so the
 * slice is the rq clock since (interrupt time included, which sum_exec_runtime leaves out).
 * Not se.prev_sum_exec_runtime: the kernel resets it without a switch (see cpu_state), and keeps
 * it for fair tasks only; a preempted child that exits was credited 13-37 us of 93 ms by it.
 * No arrival stamp (a kernel without CONFIG_SCHED_INFO): nothing is credited. */
static __always_inline __u64 unseen_slice_start(struct task_struct *prev, struct task_struct *next,
						__u64 sum, const bool btf)
{
	/* This rq through next, as for the wait below (prev may have been moved already). The idle
	 * task has one too (init_idle sets its rq). */
	struct cfs_rq *cfs_rq = TASK_READ(btf, next, se.cfs_rq);
	__u64 arrival = TASK_READ(btf, prev, sched_info.last_arrival);
	__u64 now = btf ? cfs_rq->rq->clock : BPF_CORE_READ(cfs_rq, rq, clock);

	if (arrival == 0 || now <= arrival)
		return sum;
	return now - arrival < sum ? sum - (now - arrival) : 0;
}

static __always_inline int on_switch(struct task_struct *prev, struct task_struct *next,
				     unsigned int prev_state, const bool btf)
{
	struct colod_cg_sched *pe = NULL, *ne;
	struct cpu_state *cs;
	struct cfs_rq *cfs_rq;
	__u64 gen = attach_gen; /* before any cgroup read: a later bump only forces a re-walk */
	__u64 prev_id = 0, next_id, sum, start, queued, clock, grp, wait = 0, from = 0;
	__u32 zero = 0, prev_slot = COLOD_NO_SLOT, next_slot;
	bool known, cached = false, prev_idle, invol, resumed = false;

	cs = bpf_map_lookup_elem(&cpu_state, &zero);
	if (!cs)
		return 0; /* cannot happen for an array; keeps the verifier happy */
	known = cs->task == (__u64)prev;
	/* pid 0 is the idle task: its "runnable" state and CPU time are not contention. */
	prev_idle = known ? cs->idle : TASK_READ(btf, prev, pid) == 0;
	invol = prev_state == TASK_RUNNING && !prev_idle;
	if (!prev_idle) {
		sum = TASK_READ(btf, prev, se.sum_exec_runtime);
		start = known ? cs->sum : unseen_slice_start(prev, next, sum, btf);
		cached = known && cs->gen == gen;
		if (cached) {
			prev_id = cs->id;
			prev_slot = cs->slot;
		} else {
			prev_id = task_cg_id(prev, btf);
			prev_slot = cg_slot(prev_id);
			/* Restart the cache from prev (its alt entry may be stale). */
			cs->id = prev_id;
			cs->slot = prev_slot;
			cs->alt_id = 0;
			cs->gen = gen;
		}
		pe = slot_entry(prev_slot, cs);
		if (pe) {
			if (sum > start)
				pe->oncpu_ns += sum - start;
			if (invol)
				pe->invol += 1;
			mark_changed(prev_slot, this_cpu(cs));
		}
	}
	cs->task = (__u64)next;
	/* last_queued is 0 for the idle task (never enqueued), so only then is its pid read. It is
	 * also 0 for a task not queued through sched_info (kernel without CONFIG_SCHED_INFO). */
	queued = TASK_READ(btf, next, sched_info.last_queued);
	if (queued == 0 && TASK_READ(btf, next, pid) == 0) {
		cs->idle = 1;
		if (watched)
			cs->run_n = 0; /* nobody waits on an idle CPU: the record restarts after it */
		return 0;
	}
	cs->idle = 0;
	cs->sum = TASK_READ(btf, next, se.sum_exec_runtime);
	/* This CPU's rq through next's cfs_rq, just picked from it (CONFIG_FAIR_GROUP_SCHED, which
	 * the cpu controller needs): the percpu `runqueues` ksym has no address when kallsyms does
	 * not list percpu variables (seen here). */
	cfs_rq = TASK_READ(btf, next, se.cfs_rq);
	grp = task_grp(next, cfs_rq, btf);
	if (cached && cs->grp == grp) {
		next_id = prev_id;
		next_slot = prev_slot;
		ne = pe;
	} else {
		/* Another cgroup, or prev was idle/unknown: walk next's cgroup, then try the last
		 * two cgroups this CPU ran (after idle the same one often comes back; under
		 * contention two cgroups alternate) by id, not by pointer: a task that is not
		 * running holds no reference on its pointers. Only then the cg_slots hash. */
		next_id = task_cg_id(next, btf);
		if (cs->gen != gen) {
			cs->id = 0;
			cs->alt_id = 0;
			cs->gen = gen;
		}
		if (next_id == cs->id) {
			next_slot = cs->slot;
		} else {
			if (next_id == cs->alt_id)
				next_slot = cs->alt_slot;
			else
				next_slot = cg_slot(next_id);
			cs->alt_id = cs->id;
			cs->alt_slot = cs->slot;
			cs->id = next_id;
			cs->slot = next_slot;
		}
		ne = slot_entry(next_slot, cs);
	}
	cs->grp = grp;
	/* This rq's clock: the end of next's wait, and the start of prev's if it was preempted. */
	clock = btf ? cfs_rq->rq->clock : BPF_CORE_READ(cfs_rq, rq, clock);
	if (watched) {
		__u32 pos = cs->run_pos & (RUNNERS - 1);

		if (!cs->run_n || cs->run_id[pos] != prev_id) {
			/* The record lacks prev: it was switched in before the watch was set, or unseen
			 * (an untraced switch: bpf/README.md, known limits). It has held the CPU since
			 * the kernel's arrival stamp, so it goes in from there and the woken task that
			 * waited behind it is attributed to it (before, to nobody: the first wait on a
			 * CPU once a victim was watched, and on this sandbox's kernel the wait that
			 * ended each slice of a task switched in after its agent's thread). The record
			 * before it stays only when prev came in unseen after its newest runner, the
			 * task whose switch-out went untraced; else it is from before the watch. */
			__u64 since = prev_idle ? 0 : TASK_READ(btf, prev, sched_info.last_arrival);

			if (known || !since || since < cs->run_at[pos])
				cs->run_n = 0;
			if (since && since <= clock) {
				pos = (pos + 1) & (RUNNERS - 1);
				cs->run_id[pos] = prev_id;
				cs->run_at[pos] = since;
				if (cs->run_n < RUNNERS)
					cs->run_n += 1;
			}
		}
		pos = (pos + 1) & (RUNNERS - 1);
		cs->run_id[pos] = next_id;
		cs->run_at[pos] = clock;
		cs->run_pos = pos;
		if (cs->run_n < RUNNERS)
			cs->run_n += 1;
	}
	if (invol) {
		/* Preempted by its own cgroup: a per-CPU counter in the slot (userspace reports it as
		 * the pair victim == aggressor), not a pairs hash lookup + atomic (measured in
		 * bpf/README.md). */
		if (prev_id == next_id) {
			if (pe)
				pe->self_preempt += 1;
		} else {
			count_pair(prev_id, next_id, prev_slot);
		}
		if (track_preempt_wait && pe)
			mark_preempted(prev, prev_slot, clock, btf);
	}
	if (!ne)
		return 0;
	/* Only cgroups with a task waiting after a preemption pay for the mark lookup. */
	if (track_preempt_wait) {
		struct colod_cg_pending *g = bpf_map_lookup_elem(&cg_pending, &next_slot);

		if (g && g->tasks)
			resumed = take_mark(next, next_slot, g, &from, btf);
	}
	if (resumed) {
		/* Resumed after a preemption, here or on another CPU: the wait runs from the
		 * preemption (rq clocks are one sched_clock; a skewed pair reads as the wait on
		 * this rq, the one last_queued gives). */
		if (clock > from)
			wait = clock - from;
		if (queued && clock > queued && clock - queued > wait)
			wait = clock - queued;
		ne->preempt_waits += 1;
		ne->preempt_wait_ns += wait;
	} else if (queued == 0) {
		return 0; /* no sched_info enqueue stamp: no wait to record */
	} else if (clock > queued) {
		wait = clock - queued;
	}
	if (wait == 0) {
		if (diag) {
			struct colod_cg_diag *dg = bpf_map_lookup_elem(&cg_diag, &next_slot);

			if (dg)
				dg->stale += 1;
		}
	} else if (watched)
		/* After a wakeup (not a preemption, which pairs attribute), on a CPU that was busy
		 * until now: whom it waited behind (another cgroup, or its own). */
		watch_wait(next_slot, next_id, wait, clock,
			   resumed || prev_idle ? 0 : who_behind(cs, clock, wait));
	ne->hist[colod_ns_us_slot(wait, COLOD_SCHED_HIST_SLOTS)] += 1;
	ne->count += 1;
	ne->total_ns += wait;
	mark_changed(next_slot, this_cpu(cs));
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

/* cgroup_rmdir fires once per hierarchy a removed directory was in (after the removal succeeded,
 * so no task is left in it): only the measured hierarchy's ids go to the queue. Kernfs ids are
 * per hierarchy, so an id from another one could name a live cgroup of ours. The cgroup2
 * hierarchy is hierarchy_id 0 ("0::" in /proc/<pid>/cgroup); the v1 one measured is the one
 * that holds the cpu controller. */
static __always_inline int on_rmdir(struct cgroup *cgrp, const bool btf)
{
	const __u32 cpu = bpf_core_enum_value(enum cgroup_subsys_id, cpu_cgrp_id);
	__u64 id;

	if (cg_mode == COLOD_CGMODE_V2) {
		if ((btf ? cgrp->root->hierarchy_id : BPF_CORE_READ(cgrp, root, hierarchy_id)) != 0)
			return 0;
	} else {
		__u32 mask = btf ? cgrp->root->subsys_mask : BPF_CORE_READ(cgrp, root, subsys_mask);

		if (!(mask & (1u << cpu)))
			return 0;
	}
	id = btf ? cgrp->kn->id : BPF_CORE_READ(cgrp, kn, id);
	if (bpf_map_push_elem(&gone, &id, 0))
		__sync_fetch_and_add(&gone_lost, 1);
	return 0;
}

SEC("tp_btf/cgroup_rmdir")
int BPF_PROG(handle_cgroup_rmdir, struct cgroup *cgrp, const char *path)
{
	return on_rmdir(cgrp, true);
}

SEC("raw_tp/cgroup_rmdir")
int BPF_PROG(handle_cgroup_rmdir_raw, struct cgroup *cgrp, const char *path)
{
	return on_rmdir(cgrp, false);
}

static __always_inline int on_wakeup(struct task_struct *p, const bool btf)
{
	struct colod_cg_diag *e;
	__u64 id, depth;
	__u32 slot;

	/* The rq the task was enqueued on, via its cfs_rq (see on_switch). */
	depth = btf ? p->se.cfs_rq->rq->nr_running : BPF_CORE_READ(p, se.cfs_rq, rq, nr_running);
	id = btf ? colod_cg_id_btf(p, cg_mode) : colod_cg_id_core(p, cg_mode);
	slot = cg_slot(id);
	e = bpf_map_lookup_elem(&cg_diag, &slot);
	if (!e)
		return 0;
	e->wakeups += 1;
	/* The woken task is already enqueued here, so nr_running counts it: depth >= 1. */
	e->depth_sum += depth;
	mark_changed(slot, mark_cpus ? bpf_get_smp_processor_id() : 0); /* no helper call unmarked */
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
