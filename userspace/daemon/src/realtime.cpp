// SPDX-License-Identifier: Apache-2.0
#include "colod/daemon/realtime.h"

#include <dirent.h>
#include <fcntl.h>
#include <sched.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <csignal>
#include <cstddef>
#include <cstring>
#include <filesystem>

namespace colod::daemon {

namespace {

// /proc/self/task, opened before the handler can run: the handler may only make raw syscalls.
std::atomic<int> g_task_dir{-1};
std::atomic<uint64_t> g_demotions{0};
// One handler at a time: SIGXCPU is process-directed, so a second one can reach another thread
// while the first handler walks the directory with the shared buffer.
std::atomic_flag g_demoting = ATOMIC_FLAG_INIT;

bool isRealtimePolicy(long policy) {
  policy &= ~static_cast<long>(SCHED_RESET_ON_FORK);
  return policy == SCHED_FIFO || policy == SCHED_RR;
}

// Moves every realtime thread of this process to SCHED_OTHER. Async-signal-safe: lseek,
// getdents64, sched_getscheduler and sched_setscheduler on a descriptor opened beforehand, and a
// static buffer. Lowering a thread's policy needs no capability.
void demoteAll() {
  alignas(8) static char buf[4096];
  const int fd = g_task_dir.load();
  if (fd < 0 || ::lseek(fd, 0, SEEK_SET) < 0) {
    return;
  }
  for (;;) {
    const long n = ::syscall(SYS_getdents64, fd, buf, sizeof buf);
    if (n <= 0) {
      return;
    }
    for (long off = 0; off + static_cast<long>(offsetof(struct dirent64, d_name)) < n;) {
      unsigned short reclen = 0;
      std::memcpy(&reclen, buf + off + offsetof(struct dirent64, d_reclen), sizeof reclen);
      if (reclen == 0) {
        return;  // malformed: stop rather than loop
      }
      const char* name = buf + off + offsetof(struct dirent64, d_name);
      const long name_max = reclen - static_cast<long>(offsetof(struct dirent64, d_name));
      long tid = 0;
      bool digits = name_max > 0 && name[0] != '\0';
      for (long i = 0; i < name_max && name[i] != '\0'; ++i) {
        if (name[i] < '0' || name[i] > '9') {
          digits = false;
          break;
        }
        tid = tid * 10 + (name[i] - '0');
      }
      if (digits && tid > 0 && isRealtimePolicy(::syscall(SYS_sched_getscheduler, tid))) {
        struct sched_param param {};
        (void)::syscall(SYS_sched_setscheduler, tid, SCHED_OTHER, &param);
      }
      off += reclen;
    }
  }
}

void onXcpu(int /*sig*/) {
  const int saved = errno;
  if (!g_demoting.test_and_set()) {
    demoteAll();
    g_demotions.fetch_add(1);
    g_demoting.clear();
  }
  errno = saved;
}

Result<void> installWatchdog(std::chrono::milliseconds budget) {
  if (g_task_dir.load() < 0) {
    const int fd = ::open("/proc/self/task", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0) {
      return COLOD_ERR(errno, "opening /proc/self/task (the realtime watchdog's thread list)");
    }
    int expected = -1;
    if (!g_task_dir.compare_exchange_strong(expected, fd)) {
      ::close(fd);
    }
  }
  struct sigaction sa {};
  sa.sa_handler = onXcpu;
  sa.sa_flags = SA_RESTART;
  sigemptyset(&sa.sa_mask);
  if (::sigaction(SIGXCPU, &sa, nullptr) != 0) {
    return COLOD_ERR(errno, "installing the SIGXCPU handler");
  }
  const auto soft =
      static_cast<rlim_t>(std::chrono::duration_cast<std::chrono::microseconds>(budget).count());
  struct rlimit lim {};
  if (::getrlimit(RLIMIT_RTTIME, &lim) != 0) {
    return COLOD_ERR(errno, "getrlimit(RLIMIT_RTTIME)");
  }
  // Lowering a hard limit needs no privilege; raising one does, so an administrator's lower
  // hard limit stays.
  const rlim_t hard = soft + 1'000'000;
  lim.rlim_max = lim.rlim_max == RLIM_INFINITY ? hard : std::min(lim.rlim_max, hard);
  lim.rlim_cur = std::min(soft, lim.rlim_max);
  if (::setrlimit(RLIMIT_RTTIME, &lim) != 0) {
    return COLOD_ERR(errno, "setrlimit(RLIMIT_RTTIME, ", soft, " us)");
  }
  return {};
}

}  // namespace

Result<void> enterRealtime(int priority,
                           std::chrono::milliseconds budget,
                           const std::string& sys_root) {
  if (priority < 1 || priority > 99) {
    return COLOD_ERR(EINVAL, "realtime priority ", priority, " is outside 1..99");
  }
  if (budget.count() <= 0) {
    return COLOD_ERR(EINVAL, "realtime budget must be positive");
  }
  COLOD_TRY_VOID(installWatchdog(budget), "the realtime watchdog");
  struct sched_param param {};
  param.sched_priority = priority;
  if (::sched_setscheduler(0, SCHED_FIFO, &param) != 0) {
    const int err = errno;
    std::error_code ec;
    // With RT group scheduling (cgroup v1 cpu.rt_runtime_us), a task outside the root cpu
    // cgroup may be realtime only if its cgroup was given runtime; Kubernetes gives pods none.
    const bool rt_groups =
        std::filesystem::exists(sys_root + "/fs/cgroup/cpu/cpu.rt_runtime_us", ec);
    return COLOD_ERR(err, "sched_setscheduler(SCHED_FIFO, ", priority, "): needs CAP_SYS_NICE",
                     rt_groups
                         ? "; this kernel has RT group scheduling, so colod's cpu cgroup also "
                           "needs cpu.rt_runtime_us > 0"
                         : "");
  }
  return {};
}

uint64_t realtimeDemotions() { return g_demotions.load(); }

int currentRealtimePriority() {
  const int policy = ::sched_getscheduler(0);
  if (policy < 0 || !isRealtimePolicy(policy)) {
    return 0;
  }
  struct sched_param param {};
  if (::sched_getparam(0, &param) != 0) {
    return 0;
  }
  return param.sched_priority;
}

}  // namespace colod::daemon
