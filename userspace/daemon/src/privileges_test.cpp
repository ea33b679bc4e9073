// SPDX-License-Identifier: Apache-2.0
#include "colod/daemon/privileges.h"

#include <gtest/gtest.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fstream>
#include <sstream>

#include "colod/testing/result_matchers.h"

namespace colod::daemon {
namespace {

TEST(Privileges, ParsesCapEff) {
  EXPECT_EQ(ASSERT_OK(parseCapEff("Name:\tcolod\nCapInh:\t0\nCapEff:\t000001ffffffffff\nCapBnd:\t0\n")),
            0x1ffffffffffULL);
  EXPECT_EQ(ASSERT_OK(parseCapEff("CapEff:\t0000000000000000\n")), 0U);
  EXPECT_ERR(parseCapEff("CapPrm:\t0\n"), EINVAL, "no CapEff");
  EXPECT_ERR(parseCapEff("CapEff:\tzz\n"), EINVAL, "malformed");
}

TEST(Privileges, NamesCapabilities) {
  EXPECT_EQ(capabilityNames(0), "none");
  EXPECT_EQ(capabilityNames((uint64_t{1} << 21) | (uint64_t{1} << 39) | (uint64_t{1} << 38)),
            "sys_admin perfmon bpf");
  EXPECT_EQ(capabilityNames(uint64_t{1} << 60), "cap60");
}

// In a child (the parent keeps its privileges): after the drop the process holds nothing and
// cannot get anything back, even as uid 0.
TEST(Privileges, DropLeavesNothingEvenForRoot) {
  if (::geteuid() != 0) {
    GTEST_SKIP() << "needs root to start with capabilities to drop";
  }
  const pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    if (!dropAllCapabilities()) {
      ::_exit(10);
    }
    std::ifstream in("/proc/self/status");
    std::stringstream ss;
    ss << in.rdbuf();
    auto eff = parseCapEff(ss.str());
    if (!eff || *eff != 0) {
      ::_exit(11);
    }
    // Raising its own priority needs CAP_SYS_NICE (harmless: this child exits at once).
    if (::setpriority(PRIO_PROCESS, 0, -5) == 0) {
      ::_exit(12);
    }
    ::_exit(0);
  }
  int status = 0;
  ASSERT_EQ(::waitpid(child, &status, 0), child);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0) << "10: drop failed, 11: CapEff not 0, 12: still privileged";
}

}  // namespace
}  // namespace colod::daemon
