// SPDX-License-Identifier: Apache-2.0
#include "text.h"

#include <gtest/gtest.h>

namespace colod::ctl {
namespace {

TEST(CtlText, PrintfHasNoLengthLimit) {
  const std::string long_arg(5000, 'x');
  const std::string s = strprintf("<%s>%d\n", long_arg.c_str(), 42);
  EXPECT_EQ(s.size(), 5000U + 5U);
  EXPECT_EQ(s.back(), '\n');
  EXPECT_EQ(strprintf("%s", ""), "");
}

TEST(CtlText, WidthCountsCodePointsNotBytes) {
  EXPECT_EQ(displayWidth("abc"), 3U);
  EXPECT_EQ(displayWidth("…"), 1U);  // 3 bytes
  EXPECT_EQ(displayWidth("µs"), 2U);
  EXPECT_EQ(displayWidth("日本"), 2U);  // one column per code point (not East Asian width)
  EXPECT_EQ(displayWidth(""), 0U);
}

TEST(CtlText, ClipKeepsTheEndAndCutsOnCodePoints) {
  EXPECT_EQ(clipFront("prod/web-0/nginx", 16), "prod/web-0/nginx");
  EXPECT_EQ(clipFront("prod/web-0/nginx", 10), "…b-0/nginx");
  EXPECT_EQ(displayWidth(clipFront("prod/web-0/nginx", 10)), 10U);
  // A multi-byte character at the cut is kept whole or dropped whole.
  EXPECT_EQ(clipFront("aµµµ", 3), "…µµ");
  EXPECT_EQ(clipBack("µµµa", 3), "µµ…");
  EXPECT_EQ(clipBack("abcdef", 4), "abc…");
  EXPECT_EQ(clipFront("abc", 0), "");
}

TEST(CtlText, PadByWidth) {
  EXPECT_EQ(padRight("…ab", 5), "…ab  ");
  EXPECT_EQ(padLeft("µs", 4), "  µs");
  EXPECT_EQ(padRight("toolong", 3), "toolong");  // never cut
}

}  // namespace
}  // namespace colod::ctl
