// SPDX-License-Identifier: Apache-2.0
// The CPUs cg_sched is sized for, from the kernel's CPU list text.
#include "cpu_copies.h"

#include <gtest/gtest.h>

#include <cerrno>
#include <filesystem>
#include <fstream>
#include <string>

#include "colod/testing/result_matchers.h"

namespace colod::collect::detail {
namespace {

TEST(ParseCpuListEnd, OnePastTheHighestCpu) {
  EXPECT_EQ(ASSERT_OK(parseCpuListEnd("0-1\n")), 2u);
  EXPECT_EQ(ASSERT_OK(parseCpuListEnd("0")), 1u);
  EXPECT_EQ(ASSERT_OK(parseCpuListEnd("0-3,8-11")), 12u);
  EXPECT_EQ(ASSERT_OK(parseCpuListEnd("8-11,0-3\n")), 12u) << "any order";
  EXPECT_EQ(ASSERT_OK(parseCpuListEnd("0-191")), 192u);
  EXPECT_EQ(ASSERT_OK(parseCpuListEnd("0,5")), 6u) << "a gap still needs the copies below 5";
}

TEST(ParseCpuListEnd, RefusesWhatIsNotACpuList) {
  for (const char* bad : {"", "\n", "a", "0-", "-3", "3-1", "0,,1", "0-1-2", "65536", "0 1"}) {
    SCOPED_TRACE(std::string("'") + bad + "'");
    EXPECT_ERR(parseCpuListEnd(bad), EINVAL, "");
  }
}

TEST(SchedCopies, ThePresentCpusWithinThePossibleOnes) {
  EXPECT_EQ(schedCopies(Result<uint32_t>(2u), 512), 2u) << "a VM that may hot-add 510 CPUs";
  EXPECT_EQ(schedCopies(Result<uint32_t>(192u), 192), 192u);
  EXPECT_EQ(schedCopies(Result<uint32_t>(600u), 512), 512u) << "never past the possible CPUs";
  EXPECT_EQ(schedCopies(Result<uint32_t>(COLOD_ERR(ENOENT, "no sysfs")), 64), 64u)
      << "unknown: every possible CPU";
}

TEST(PresentCpuEnd, ReadsTheSysfsFile) {
  const auto dir = std::filesystem::temp_directory_path() / "colod-cpu-copies-test";
  std::filesystem::create_directories(dir);
  std::ofstream(dir / "present") << "0-3\n";
  EXPECT_EQ(ASSERT_OK(presentCpuEnd(dir.string())), 4u);
  std::ofstream(dir / "present") << "garbage\n";
  EXPECT_ERR(presentCpuEnd(dir.string()), EINVAL, "present");
  std::filesystem::remove_all(dir);
  EXPECT_ERR(presentCpuEnd(dir.string()), ENOENT, "present");
  EXPECT_GE(ASSERT_OK(presentCpuEnd()), 1u) << "this machine's";
}

}  // namespace
}  // namespace colod::collect::detail
