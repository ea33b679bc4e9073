// SPDX-License-Identifier: Apache-2.0
// colod's reaction path under SCHED_FIFO (issue 15). colod restricts BE because BE keeps the
// CPUs busy; as a SCHED_OTHER task it waits behind that same BE, in its own pod cgroup (request
// 50m: weight 51 beside BE pods of weight 1024 each). Measured on this repository's benchmark:
// with two BE hogs, colod's decision rounds ran 57-164 ms apart instead of every 20 ms, and its
// update reached the runtime 20-39 ms after the decision. Under SCHED_FIFO it runs when it
// wakes, whatever the CFS weights; at priority 1 (the default) below the kernel's threaded
// interrupts (50) and any other realtime task.
//
// The bound: RLIMIT_RTTIME. A thread that runs `budget` of CPU under SCHED_FIFO without
// blocking (colod's rounds take about a millisecond, then it sleeps) makes the kernel send
// SIGXCPU; the handler moves every SCHED_FIFO/RR thread of colod back to SCHED_OTHER for the
// rest of the process's life and counts it (colod_realtime_demotions_total). The hard limit, a
// second later, is SIGKILL: if even the handler could not run, colod dies rather than starve the
// node, and its journal restores what it held when it starts again.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>

#include "colod/base/result.h"

namespace colod::daemon {

// The SCHED_FIFO budget: CPU time a realtime thread of colod may run without blocking.
inline constexpr std::chrono::milliseconds kRealtimeBudget{200};

// Puts the calling thread under SCHED_FIFO at `priority` (1..99); threads it creates afterwards
// inherit it (pthread's default), those created before keep their policy. Installs the
// watchdog first (SIGXCPU handler, RLIMIT_RTTIME of `budget`, hard limit budget + 1 s).
// `sys_root` only words the error. Errors: EINVAL (priority), the errno of
// sched_setscheduler (EPERM: no CAP_SYS_NICE, or RT group scheduling gives colod's cgroup no
// realtime runtime; the message says which to check).
Result<void> enterRealtime(int priority,
                           std::chrono::milliseconds budget,
                           const std::string& sys_root = "/sys");

// Times the watchdog moved colod's realtime threads back to SCHED_OTHER (0 or 1 in practice:
// they are not promoted again).
uint64_t realtimeDemotions();

// The SCHED_FIFO/RR priority of the calling thread; 0 under any other policy.
int currentRealtimePriority();

}  // namespace colod::daemon
