/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/* Definitions shared by every colod BPF program and userspace (style rule 21). */
#ifndef COLOD_COMMON_H
#define COLOD_COMMON_H

#ifndef __VMLINUX_H__
#include <linux/types.h>
#endif

/* log2 histogram slots: slot i counts values in [2^i, 2^(i+1)); 2^25 us = 33 s. */
#define COLOD_HIST_SLOTS 26

/* Which cgroup a task is charged to (rodata knob cg_mode). */
#define COLOD_CGMODE_V2 0     /* task->cgroups->dfl_cgrp */
#define COLOD_CGMODE_V1CPU 1  /* task->cgroups->subsys[cpu_cgrp_id]->cgroup */

/* Indexes of the drop_counts arrays (.bss): map updates that failed, never silently lost. */
#define COLOD_DROP_CG_ENTRY 0   /* per-cgroup map full */
#define COLOD_DROP_PAIR 1       /* victim<-aggressor map full */
#define COLOD_DROP_STORAGE 2    /* task storage / pid map could not be created */
#define COLOD_DROP_EVENT 3      /* wakeup ring buffer full: an event was not posted */
/* Not a full map: a hash update refused with EBUSY because this CPU already held that bucket
 * lock index (the kernel's deadlock guard). Seen when a wakeup program, run in an interrupt,
 * lands inside a map operation in progress on the same CPU, e.g. userspace's batch read of
 * cg_slots: that one event is not counted. Rare, and no reason to size the maps up. */
#define COLOD_DROP_BUSY 4
/* Not an event count: CPUs found running past the CPUs cg_sched was sized for at load (a CPU
 * brought online later, beyond the present ones): their switches are not measured. Counted
 * once per such CPU. */
#define COLOD_DROP_CPU 5
#define COLOD_DROP_MAX 6

/* Default bounds; userspace overrides them with bpf_map__set_max_entries before load. */
#define COLOD_DEFAULT_MAX_CGROUPS 4096
#define COLOD_DEFAULT_MAX_PAIRS 16384
#define COLOD_DEFAULT_MAX_NAMED_PAIRS 4096
#define COLOD_DEFAULT_MAX_PIDS 32768

#endif /* COLOD_COMMON_H */
