/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/* static __always_inline helpers shared by the colod BPF programs (style rule 4). */
#ifndef COLOD_HELPERS_BPF_H
#define COLOD_HELPERS_BPF_H

#include "colod_common.h"

/* Integer log2, branch-light (bcc's log2l shape). */
static __always_inline __u32 colod_log2(__u32 v)
{
	__u32 shift, r;

	r = (v > 0xFFFF) << 4; v >>= r;
	shift = (v > 0xFF) << 3; v >>= shift; r |= shift;
	shift = (v > 0xF) << 2; v >>= shift; r |= shift;
	shift = (v > 0x3) << 1; v >>= shift; r |= shift;
	r |= (v >> 1);
	return r;
}

static __always_inline __u32 colod_log2l(__u64 v)
{
	__u32 hi = v >> 32;

	if (hi)
		return colod_log2(hi) + 32;
	return colod_log2(v);
}

/*
 * Slot of a nanosecond duration in a microsecond log2 histogram, bounds-checked.
 * Computed, clamped and returned as __u64 on purpose: with a __u32 slot clang 14 clamps a
 * zero-extended copy (r2 = r1; r2 <<= 32; r2 >>= 32; if r2 > 25 ...) and indexes with the
 * original register. 6.18's verifier links the two registers; 6.1's does not and rejects
 * `hist[slot]` with "R2 unbounded memory access" (EACCES). A 64-bit slot needs no
 * zero-extension, so the clamped register is the one used as the index.
 */
static __always_inline __u64 colod_us_slot(__u64 ns)
{
	__u64 slot = colod_log2l(ns / 1000);

	if (slot >= COLOD_HIST_SLOTS)
		slot = COLOD_HIST_SLOTS - 1;
	return slot;
}

/*
 * colod_us_slot(ns) without the division (a 64-bit `/= 1000` is a real divide in BPF: clang
 * has no multiply-high to turn it into a reciprocal multiply). Exact: for ns in [2^L, 2^(L+1))
 * with L >= 10, ns/1000 lies in [2^(L-10), 2^(L-8)), so the slot is L-10, or L-9 once
 * ns >= 1000 << (L-9). Below 1024 ns the slot is 0, as for ns/1000 in {0, 1}. Clamped to
 * `slots` - 1 (a constant: the histogram's length), the open-ended last slot.
 * __u64 throughout for the same 6.1 verifier reason as colod_us_slot.
 */
static __always_inline __u64 colod_ns_us_slot(__u64 ns, const __u64 slots)
{
	__u64 l = colod_log2l(ns), slot;

	if (l < 10)
		return 0;
	slot = l - 10;
	if (ns >= (1000ULL << (slot + 1)))
		slot += 1;
	if (slot >= slots)
		slot = slots - 1;
	return slot;
}

/*
 * Cgroup id of a task, read by direct BTF pointer walk. Only valid where the task pointer is
 * a BTF pointer (tp_btf args, bpf_get_current_task_btf()). vmlinux.h marks every struct
 * preserve_access_index, so these loads are CO-RE relocated exactly like BPF_CORE_READ, but
 * compile to plain (fault-safe) loads instead of bpf_probe_read_kernel calls: measured 17 ns
 * versus 79 ns for the BPF_CORE_READ chain (bpf/README.md).
 */
static __always_inline __u64 colod_cg_id_btf(struct task_struct *t, __u32 mode)
{
	if (mode == COLOD_CGMODE_V2)
		return t->cgroups->dfl_cgrp->kn->id;
	return t->cgroups->subsys[bpf_core_enum_value(enum cgroup_subsys_id, cpu_cgrp_id)]
		->cgroup->kn->id;
}

/* Same, for untyped pointers (raw_tp fallback): BPF_CORE_READ chains. */
static __always_inline __u64 colod_cg_id_core(struct task_struct *t, __u32 mode)
{
	if (mode == COLOD_CGMODE_V2)
		return BPF_CORE_READ(t, cgroups, dfl_cgrp, kn, id);
	return BPF_CORE_READ(t, cgroups,
			     subsys[bpf_core_enum_value(enum cgroup_subsys_id, cpu_cgrp_id)],
			     cgroup, kn, id);
}

#endif /* COLOD_HELPERS_BPF_H */
