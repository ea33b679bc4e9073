// SPDX-License-Identifier: Apache-2.0
// Golden tests of the runqlat-style histogram printer (style rule 39).
#include "colod/collect/format.h"

#include <gtest/gtest.h>

#include <sstream>
#include <vector>

namespace colod::collect {
namespace {

TEST(FormatLog2Hist, Golden) {
  std::vector<uint32_t> h(26, 0);
  h[0] = 1;
  h[2] = 4;
  h[3] = 8;
  h[5] = 2;
  const std::string want =
      "     usecs               : count    distribution\n"
      "         0 -> 1          : 1        |*****                                   |\n"
      "         2 -> 3          : 0        |                                        |\n"
      "         4 -> 7          : 4        |********************                    |\n"
      "         8 -> 15         : 8        |****************************************|\n"
      "        16 -> 31         : 0        |                                        |\n"
      "        32 -> 63         : 2        |**********                              |\n";
  EXPECT_EQ(formatLog2Hist(h, "usecs"), want);
}

TEST(FormatLog2Hist, EmptyIsEmptyString) {
  std::vector<uint32_t> h(26, 0);
  EXPECT_EQ(formatLog2Hist(h, "usecs"), "");
  EXPECT_EQ(formatLog2Hist({}, "usecs"), "");
}

TEST(FormatLog2Hist, LinesFitIn80ColumnsUpToTheLastSlot) {
  std::vector<uint32_t> h(26, 0);
  h[25] = 4000000000u;
  h[0] = 1;  // rounds up to one star: a non-empty slot is never invisible
  const std::string out = formatLog2Hist(h, "usecs");
  std::istringstream in(out);
  std::string line;
  int lines = 0;
  while (std::getline(in, line)) {
    EXPECT_LT(line.size(), 80u) << line;
    ++lines;
  }
  EXPECT_EQ(lines, 27);
  EXPECT_NE(out.find("33554432 -> 67108863   : 4000000000 |"), std::string::npos) << out;
  // The 10-digit count widens its column and takes two stars away.
  EXPECT_NE(out.find("0 -> 1          : 1          |*      "), std::string::npos) << out;
}

}  // namespace
}  // namespace colod::collect
