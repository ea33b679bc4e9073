/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/* Shared between cgsched.bpf.c and userspace: per-cgroup scheduler aggregates. */
#ifndef COLOD_CGSCHED_H
#define COLOD_CGSCHED_H

#include "colod_common.h"

/* Slots of cg_sched's run-queue histogram: slot i counts waits in [2^i, 2^(i+1)) us, the last
 * one every wait from 2^19 us (524 ms) up. Fewer than COLOD_HIST_SLOTS (33 s) because the value
 * has a copy per CPU: each slot costs 4 bytes x CPUs x cgroup slots, and a run-queue wait of
 * half a second is past every threshold a policy compares with (issue 17: 1000 cgroups at 256
 * CPUs within 48 MiB of maps). Userspace reads the last slot as open-ended. */
#define COLOD_SCHED_HIST_SLOTS 20

/* Value of the array cg_sched: a copy per CPU of each cgroup slot (the slot cg_slots maps a
 * cgroup id, __u64, to), at cpu x max_slots + slot (bpf/common/cg_maps.bpf.h). 136 bytes: the counters every switch may write and the histogram's slots up to 131 ms
 * in the first two cache lines. The histogram buckets are __u32 and wrap; userspace takes
 * their deltas modulo 2^32, which is exact (userspace/collect/src/entry_delta.h says why they
 * are not __u64). The diagnostics no policy reads (zero-read waits, wakeup depth) are in
 * cg_diag, a map sized only when they are asked for. */
struct colod_cg_sched {
	__u64 count;           /* run-queue waits recorded */
	__u64 total_ns;        /* sum of those waits */
	__u64 oncpu_ns;        /* CPU time (sum_exec_runtime slices) */
	__u64 invol;           /* involuntary switches (preempted while runnable) */
	__u64 self_preempt;    /* those where next was of the same cgroup: the diagonal of the
				* pairs matrix, counted here (no hash lookup, no atomic; it was
				* half the handler's cost on a preempting ping-pong) */
	__u64 preempt_wait_ns; /* wait after those preemptions, from the preemption to the task's
				* next switch-in, on whichever CPU that is */
	__u64 preempt_waits;   /* the waits summed in preempt_wait_ns: one per involuntary switch
				* whose task came back (it always does, if only to exit) */
	__u32 hist[COLOD_SCHED_HIST_SLOTS]; /* run-queue latency, log2 microsecond slots */
};

/* Value of the per-CPU array cg_diag, indexed by the cgroup slot: diagnostics of the run-queue
 * measurement no policy reads. One entry (unused) unless userspace asks for them (collector
 * option wakeup_depth, `colod-collect --wakeup-depth`): then max_cgroups entries, and the
 * wakeup programs attached. 24 bytes. */
struct colod_cg_diag {
	__u64 stale;     /* waits that read exactly 0: rq clock update skipped */
	__u64 wakeups;   /* wakeups seen by handle_sched_wakeup */
	__u64 depth_sum; /* sum of rq->nr_running at those wakeups */
};

/* Record of the iterator schedsum (bpf/schedsum.bpf.c): a live cgroup's cg_sched entry summed
 * over the CPUs it has run on (every possible CPU without cg_cpus marks). 152 bytes. */
struct colod_sched_sum {
	__u64 id;   /* cgroup id (the key of cg_slots) */
	__u32 slot; /* its slot in cg_sched */
	__u32 cpus; /* per-CPU copies summed into it */
	struct colod_cg_sched sum;
};

/* Value of the array cg_cpus (not per-CPU), indexed by the cgroup slot: the CPUs whose copy of the
 * slot's cg_sched value has been written since the slot was zeroed, bit (cpu % 64) of word
 * (cpu / 64). The summing iterator adds only those CPUs' copies, so its work follows the CPUs a
 * cgroup ran on, not the machine's possible CPUs (which a cloud VM sets far above the online
 * ones). A bit is set once per slot and CPU, so the switch handler's cost is a load and a test.
 * 8 words: 512 CPUs; past that the iterator adds every possible CPU's copy. 64 bytes: one cache
 * line per slot. */
#define COLOD_CPU_MARK_WORDS 8
struct colod_cg_cpus {
	__u64 w[COLOD_CPU_MARK_WORDS];
};

/* Value of the array cg_pending (not per-CPU), indexed by the cgroup slot: how many tasks preempted
 * while in this cgroup have not been switched back in yet, on any CPU. One cache line per slot,
 * so that the atomic updates of one cgroup do not bounce the line other cgroups read. */
struct colod_cg_pending {
	__u64 tasks;
	__u64 pad[7];
};

/* Value of the array cg_watch (not per-CPU), indexed by the cgroup slot: the wakeup watch of a
 * protected cgroup. Userspace writes `id` and `threshold_ns` (0: not watched) for the slot of
 * each protected cgroup; the switch handler adds every run-queue wait of that cgroup's tasks
 * to `acc_ns` within a window of window_ns (rodata) that starts at `window_start`, and posts
 * one colod_wakeup to the ring buffer `wakeups` when `acc_ns` reaches `threshold_ns`:
 * `notified` holds the window_start it posted for (at most one event per cgroup per window).
 * One cache line per slot: protected cgroups' updates do not bounce other slots' lines. */
struct colod_cg_watch {
	__u64 id;           /* the cgroup this slot is watched for (0: not watched) */
	__u64 threshold_ns; /* accumulated wait that posts an event (0: not watched) */
	__u64 window_start; /* rq clock (ns) at the first wait of the current window */
	__u64 acc_ns;       /* waits summed since window_start */
	__u64 notified;     /* window_start of the last window that posted an event */
	__u64 events;       /* events posted for this slot (diagnostics) */
	__u64 pad[2];
};

/* Record of the ring buffer wakeups: a protected cgroup's tasks waited acc_ns within the
 * window that started at window_start (rq clock, ns); `at`: the rq clock of the wait that
 * crossed the threshold. */
struct colod_wakeup {
	__u64 id;
	__u64 acc_ns;
	__u64 window_start;
	__u64 at;
};

/* Default size of the wakeups ring buffer (style rule 25: 256 KiB; a record is 40 bytes with
 * its header, and at most one is posted per protected cgroup per window). */
#define COLOD_WAKEUP_RINGBUF_BYTES (256 * 1024)
#define COLOD_DEFAULT_WATCH_WINDOW_NS 10000000ULL

/* Default length of the queue `gone` of removed cgroups' ids (8 bytes each): removals between
 * two snapshots beyond it are counted in gone_lost and userspace checks every tracked cgroup. */
#define COLOD_GONE_QUEUE_ENTRIES 1024

/* cg_slots value meaning "no slot" (all max_cgroups slots taken; counted in drops). */
#define COLOD_NO_SLOT 0xffffffffU

/* Key of the hash pairs: value is a __u64 count of victim <- aggressor preemptions. Also the
 * key of the hash behind. */
struct colod_pair_key {
	__u64 victim;
	__u64 aggressor;
};

/* Value of the hash behind: a protected (watched) cgroup's run-queue waits after a wakeup, by
 * the cgroup of the task that ran on the CPU until the waiter got it (the one it waited behind).
 * A preemption's wait is not here: pairs and preempt_wait_ns carry it. Waits shorter than
 * behind_min_ns (rodata) are the switch itself, not contention, and are left out. */
struct colod_behind {
	__u64 waits;
	__u64 wait_ns;
};

#define COLOD_DEFAULT_MAX_BEHIND 4096
#define COLOD_DEFAULT_BEHIND_MIN_NS 50000ULL

#endif /* COLOD_CGSCHED_H */
