/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/* Shared between reclaim.bpf.c and userspace: per-cgroup memory reclaim stall. */
#ifndef COLOD_RECLAIM_H
#define COLOD_RECLAIM_H

#include "colod_common.h"

/* Value of the hash cg_reclaim (one shared entry, updated atomically), keyed by the cgroup id
 * (__u64). 128 bytes. */
struct colod_cg_reclaim {
	__u32 hist[COLOD_HIST_SLOTS]; /* stall per reclaim episode, log2 microsecond slots */
	__u64 count;                  /* reclaim episodes (direct + memcg) */
	__u64 total_ns;               /* stall time */
	__u64 pages;                  /* pages reclaimed (nr_reclaimed at *_end) */
};

#endif /* COLOD_RECLAIM_H */
