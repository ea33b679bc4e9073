// SPDX-License-Identifier: Apache-2.0
#include "colod/daemon/realtime.h"

#include <gtest/gtest.h>
#include <sched.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <functional>
#include <thread>

#include "colod/testing/result_matchers.h"

namespace colod::daemon {
namespace {

using namespace std::chrono_literals;

TEST(RealtimeArgs, RefusesPrioritiesOutsideFifosRange) {
  EXPECT_ERR(enterRealtime(0, kRealtimeBudget), EINVAL, "outside 1..99");
  EXPECT_ERR(enterRealtime(100, kRealtimeBudget), EINVAL, "outside 1..99");
  EXPECT_ERR(enterRealtime(1, 0ms), EINVAL, "budget");
  EXPECT_EQ(currentRealtimePriority(), 0);  // nothing changed
}

// The child's findings, as bits of its exit status (gtest assertions do not cross fork()).
enum ChildFailure : int {
  kEnterFailed = 1,
  kNotRealtime = 2,
  kThreadDidNotInherit = 4,
  kEarlierThreadChanged = 8,
  kNotDemoted = 16,
  kDemotionNotCounted = 32,
  kQuietLoopDemoted = 64,
};

int waitChild(pid_t child) {
  int status = 0;
  if (::waitpid(child, &status, 0) != child) {
    return -1;
  }
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

// Can this process be realtime at all? (root, and on a kernel with RT group scheduling, a cpu
// cgroup with realtime runtime.) Asked in a child, so this process keeps its policy.
bool realtimeAllowed(std::string* why) {
  const pid_t child = ::fork();
  if (child == 0) {
    struct sched_param p {};
    p.sched_priority = 1;
    ::_exit(::sched_setscheduler(0, SCHED_FIFO, &p) == 0 ? 0 : 1);
  }
  if (waitChild(child) == 0) {
    return true;
  }
  *why = ::geteuid() != 0 ? "needs root (CAP_SYS_NICE) to enter SCHED_FIFO"
                          : "SCHED_FIFO refused here: this kernel has RT group scheduling and "
                            "the test's cpu cgroup has no cpu.rt_runtime_us";
  return false;
}

// Each test runs in a forked child: SCHED_FIFO, RLIMIT_RTTIME and the SIGXCPU handler stay
// there, and this process keeps its policy.
class Realtime : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string why;
    if (!realtimeAllowed(&why)) {
      GTEST_SKIP() << why;
    }
  }

  // body's return value is the child's exit status (its ChildFailure bits).
  static int inChild(const std::function<int()>& body) {
    const pid_t child = ::fork();
    if (child == 0) {
      ::_exit(body());
    }
    return child < 0 ? -1 : waitChild(child);
  }
};

// A realtime thread that spins past the budget without blocking is moved back to SCHED_OTHER
// by the watchdog, with every other realtime thread of the process, and the demotion counted.
// A thread created before colod entered SCHED_FIFO keeps its policy; one created after inherits
// it.
TEST_F(Realtime, TheWatchdogDemotesEveryThreadWhenOneSpinsPastTheBudget) {
  const int status = inChild([] {
    int fail = 0;
    std::atomic<int> earlier_policy{-1};
    std::atomic<bool> stop{false};
    std::thread earlier([&] {
      while (!stop.load()) {
        earlier_policy.store(::sched_getscheduler(0));
        std::this_thread::sleep_for(1ms);
      }
    });
    if (!enterRealtime(1, 20ms)) {
      return static_cast<int>(kEnterFailed);
    }
    if (currentRealtimePriority() != 1) {
      fail |= kNotRealtime;
    }
    std::atomic<int> inherited{-1};
    std::thread spinner([&] {
      inherited.store(currentRealtimePriority());
      // Spin (never block) until demoted, at most 3 s: past the 20 ms budget SIGXCPU comes at
      // the next scheduler tick, past the hard limit (1.02 s) SIGKILL.
      const auto until = std::chrono::steady_clock::now() + 3s;
      while (currentRealtimePriority() != 0 && std::chrono::steady_clock::now() < until) {
      }
    });
    spinner.join();
    if (inherited.load() != 1) {
      fail |= kThreadDidNotInherit;
    }
    if (currentRealtimePriority() != 0) {
      fail |= kNotDemoted;  // the main thread was realtime too, and the handler demotes all
    }
    if (realtimeDemotions() != 1) {
      fail |= kDemotionNotCounted;
    }
    std::this_thread::sleep_for(5ms);
    if (earlier_policy.load() != SCHED_OTHER) {
      fail |= kEarlierThreadChanged;
    }
    stop.store(true);
    earlier.join();
    return fail;
  });
  EXPECT_EQ(status, 0) << "bits: 1 enter failed, 2 not realtime, 4 thread did not "
                          "inherit, 8 earlier thread changed, 16 not demoted, 32 not "
                          "counted; 137 killed at the hard limit";
}

// colod's loop blocks between rounds: work that sleeps between short bursts never reaches the
// budget, however long it goes on (the kernel restarts the count at every wakeup).
TEST_F(Realtime, WorkThatBlocksBetweenBurstsStaysRealtime) {
  const int status = inChild([] {
    if (!enterRealtime(1, 20ms)) {
      return static_cast<int>(kEnterFailed);
    }
    // 300 ms of 5 ms bursts, 1 ms asleep after each: 15 times the budget in all.
    const auto end = std::chrono::steady_clock::now() + 300ms;
    while (std::chrono::steady_clock::now() < end) {
      const auto burst = std::chrono::steady_clock::now() + 5ms;
      while (std::chrono::steady_clock::now() < burst) {
      }
      std::this_thread::sleep_for(1ms);
    }
    int fail = 0;
    if (currentRealtimePriority() != 1 || realtimeDemotions() != 0) {
      fail |= kQuietLoopDemoted;
    }
    return fail;
  });
  EXPECT_EQ(status, 0) << "64: demoted although it blocked between bursts";
}

}  // namespace
}  // namespace colod::daemon
