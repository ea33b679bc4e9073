// SPDX-License-Identifier: GPL-2.0
/*
 * colod memory-reclaim program: stall time of direct reclaim and memcg (limit) reclaim per
 * cgroup, from the vmscan *_reclaim_begin/_end tracepoints, which fire in the context of the
 * task that stalls. Reclaim is rare and slow (micro- to milliseconds), so a bpf_ktime_get_ns()
 * per event is affordable here; the begin timestamp lives in task storage.
 */
#include <vmlinux.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_core_read.h>
#include <bpf/bpf_tracing.h>

#include "reclaim.h"
#include "common/helpers.bpf.h"

const volatile __u32 cg_mode = COLOD_CGMODE_V1CPU;

/* One shared entry per cgroup, updated with atomics. Reclaim episodes are rare and last micro-
 * to milliseconds, so the atomics cost nothing measurable; per-CPU copies cost 128 bytes per
 * cgroup per possible CPU (41% of colod's per-cgroup map memory, 32 KiB a cgroup at 255 CPUs),
 * read again at every tick (issue 17). */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, COLOD_DEFAULT_MAX_CGROUPS);
	__type(key, __u64);
	__type(value, struct colod_cg_reclaim);
} cg_reclaim SEC(".maps");

/* Failed map updates by kind (COLOD_DROP_*), read by userspace through the mmapped .bss: no
 * syscall and 40 bytes a tick, where a per-CPU array cost 5 lookups and 40 bytes per possible
 * CPU (41 KB a tick for both objects at 512, issue 17). Failures are rare, so the shared atomic
 * costs nothing on the paths that succeed. */
__u64 drop_counts[COLOD_DROP_MAX];

struct {
	__uint(type, BPF_MAP_TYPE_TASK_STORAGE);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, int);
	__type(value, __u64);
} reclaim_start SEC(".maps");

static const struct colod_cg_reclaim zero_entry;

/* Bumped after every update of cg_reclaim: while it stands still (and userspace deleted
 * nothing), the map is what userspace read last, and the read side skips walking its buckets
 * (issue 17): most ticks of most nodes have no reclaim at all. */
__u64 reclaim_gen = 0;

static __always_inline void count_drop(__u32 idx)
{
	if (idx < COLOD_DROP_MAX)
		__sync_fetch_and_add(&drop_counts[idx], 1);
}

static __always_inline int on_begin(void)
{
	struct task_struct *t = bpf_get_current_task_btf();
	__u64 *start = bpf_task_storage_get(&reclaim_start, t, 0, BPF_LOCAL_STORAGE_GET_F_CREATE);

	if (!start) {
		count_drop(COLOD_DROP_STORAGE);
		return 0;
	}
	/* Keep the outermost begin if reclaim ever nests. */
	if (*start == 0)
		*start = bpf_ktime_get_ns();
	return 0;
}

static __always_inline int on_end(__u64 nr_reclaimed)
{
	struct task_struct *t = bpf_get_current_task_btf();
	struct colod_cg_reclaim *e;
	__u64 *start, delta, id;
	long err;

	start = bpf_task_storage_get(&reclaim_start, t, 0, 0);
	if (!start || *start == 0)
		return 0; /* attached mid-reclaim */
	delta = bpf_ktime_get_ns() - *start;
	*start = 0;
	id = colod_cg_id_btf(t, cg_mode);
	e = bpf_map_lookup_elem(&cg_reclaim, &id);
	if (!e) {
		err = bpf_map_update_elem(&cg_reclaim, &id, &zero_entry, BPF_NOEXIST);
		if (err && err != -17) {
			count_drop(err == -16 /* EBUSY */ ? COLOD_DROP_BUSY : COLOD_DROP_CG_ENTRY);
			return 0;
		}
		e = bpf_map_lookup_elem(&cg_reclaim, &id);
		if (!e)
			return 0;
	}
	__sync_fetch_and_add(&e->hist[colod_us_slot(delta)], 1);
	__sync_fetch_and_add(&e->count, 1);
	__sync_fetch_and_add(&e->total_ns, delta);
	__sync_fetch_and_add(&e->pages, nr_reclaimed);
	__sync_fetch_and_add(&reclaim_gen, 1);
	return 0;
}

SEC("tp_btf/mm_vmscan_direct_reclaim_begin")
int BPF_PROG(handle_direct_reclaim_begin, int order, gfp_t gfp_flags)
{
	return on_begin();
}

SEC("tp_btf/mm_vmscan_direct_reclaim_end")
int BPF_PROG(handle_direct_reclaim_end, unsigned long nr_reclaimed)
{
	return on_end(nr_reclaimed);
}

SEC("tp_btf/mm_vmscan_memcg_reclaim_begin")
int BPF_PROG(handle_memcg_reclaim_begin, int order, gfp_t gfp_flags)
{
	return on_begin();
}

SEC("tp_btf/mm_vmscan_memcg_reclaim_end")
int BPF_PROG(handle_memcg_reclaim_end, unsigned long nr_reclaimed)
{
	return on_end(nr_reclaimed);
}

/* raw_tp fallbacks: the context is the current task in both cases, so the same bodies work. */
SEC("raw_tp/mm_vmscan_direct_reclaim_begin")
int BPF_PROG(handle_direct_reclaim_begin_raw, int order, gfp_t gfp_flags)
{
	return on_begin();
}

SEC("raw_tp/mm_vmscan_direct_reclaim_end")
int BPF_PROG(handle_direct_reclaim_end_raw, unsigned long nr_reclaimed)
{
	return on_end(nr_reclaimed);
}

SEC("raw_tp/mm_vmscan_memcg_reclaim_begin")
int BPF_PROG(handle_memcg_reclaim_begin_raw, int order, gfp_t gfp_flags)
{
	return on_begin();
}

SEC("raw_tp/mm_vmscan_memcg_reclaim_end")
int BPF_PROG(handle_memcg_reclaim_end_raw, unsigned long nr_reclaimed)
{
	return on_end(nr_reclaimed);
}

char LICENSE[] SEC("license") = "GPL";
