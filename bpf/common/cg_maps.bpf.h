/* SPDX-License-Identifier: GPL-2.0 */
/* The per-cgroup maps that both cgsched.bpf.c (which writes them) and schedsum.bpf.c (which
 * sums them; it reuses cgsched's by fd, which needs the same type, key and value) declare. */
#ifndef COLOD_CG_MAPS_BPF_H
#define COLOD_CG_MAPS_BPF_H

#include "cgsched.h"

/* Set by userspace before load, in both objects: the cgroup slots, and the CPUs cg_sched holds a
 * copy for (CPU ids 0 .. sched_cpus - 1). */
const volatile __u32 max_slots = COLOD_DEFAULT_MAX_CGROUPS;
const volatile __u32 sched_cpus = 1;

/* Per-cgroup aggregates, one copy per CPU (no atomics), in an array indexed by
 * cpu x max_slots + slot, where cg_slots assigns each cgroup id its slot. The indirection is for
 * speed: the running task's slot is cached per CPU (cpu_state), so a switch between tasks of one
 * cgroup costs an inlined array access instead of a hash lookup (measured in bpf/README.md).
 * Not a per-CPU array, which the kernel sizes by *possible* CPUs: a cloud VM that may hot-add
 * CPUs has many more possible than present (the vmtests guest: 512 possible, 2 present), and
 * 136 B x 512 x 1000 cgroups is 70 MB for CPUs that do not exist (issue 17). Here the copies are
 * sched_cpus (userspace: the present CPUs at load), each CPU's region of max_slots values
 * contiguous, so no two CPUs write the same cache line but at a region's edge. max_entries =
 * max_slots x sched_cpus, set by userspace before load. */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, COLOD_DEFAULT_MAX_CGROUPS);
	__type(key, __u32);
	__type(value, struct colod_cg_sched);
} cg_sched SEC(".maps");

/* cgroup id -> slot in cg_sched. Userspace deletes the ids of vanished cgroups, bumps
 * attach_gen (so no CPU keeps using a cached slot), and a tick later zeroes the slot and
 * pushes it to free_slots. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, COLOD_DEFAULT_MAX_CGROUPS);
	__type(key, __u64);
	__type(value, __u32);
} cg_slots SEC(".maps");

/* Changed slots (issue 17): the switch and wakeup handlers set a slot's mark after writing its
 * cg_sched value; the reader clears a mark before it copies that slot out and copies out only
 * marked slots (all of them every few snapshots regardless, userspace's choice). So a tick's
 * read grows with the cgroups that ran, not with the live ones x possible CPUs. Not per-CPU: one
 * 8-byte mark per slot (array elements are 8-byte aligned), written only while clear, so a busy
 * cgroup's switches load the line and store to it once per snapshot. Userspace mmaps it. A
 * write that lands after the reader's copy is in a later copy (the values are cumulative): late
 * by one snapshot, or until the next full read if the cgroup stops running. */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(map_flags, BPF_F_MMAPABLE);
	__uint(max_entries, COLOD_DEFAULT_MAX_CGROUPS);
	__type(key, __u32);
	__type(value, __u64);
} cg_dirty SEC(".maps");

/* The CPUs each slot's cg_sched value was written on (struct colod_cg_cpus): set by the switch
 * and wakeup handlers after the write, read by the summing iterator, zeroed by userspace with
 * the slot. */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, COLOD_DEFAULT_MAX_CGROUPS);
	__type(key, __u32);
	__type(value, struct colod_cg_cpus);
} cg_cpus SEC(".maps");

#endif /* COLOD_CG_MAPS_BPF_H */
