// SPDX-License-Identifier: Apache-2.0
#include "colod/cgroup/parse.h"

#include <gtest/gtest.h>

#include "colod/testing/result_matchers.h"

namespace colod::cgroup {
namespace {

TEST(ParseU64, AcceptsNewlineAndRejectsJunk) {
  EXPECT_EQ(ASSERT_OK(parseU64("1024\n")), 1024u);
  EXPECT_ERR(parseU64(""), EINVAL, "unsigned integer");
  EXPECT_ERR(parseU64("-1"), EINVAL, "unsigned");
  EXPECT_ERR(parseU64("12x"), EINVAL, "12x");
  EXPECT_ERR(parseU64("99999999999999999999999"), EINVAL, "unsigned");
}

TEST(ParseU64OrMax, Max) {
  EXPECT_FALSE(ASSERT_OK(parseU64OrMax("max\n")).has_value());
  EXPECT_EQ(*ASSERT_OK(parseU64OrMax("67108864\n")), 67108864u);
  EXPECT_ERR(parseU64OrMax("maxx"), EINVAL, "max");
}

TEST(ParseCpuStat, V1Verbatim) {
  const auto s =
      ASSERT_OK(parseCpuStat("nr_periods 10\nnr_throttled 3\nthrottled_time 123456\n"
                             "nr_bursts 0\nburst_time 0\n"));
  EXPECT_EQ(s.nr_periods, 10u);
  EXPECT_EQ(s.nr_throttled, 3u);
  EXPECT_EQ(s.throttled_ns, 123456u);
  EXPECT_FALSE(s.usage_ns.has_value());
}

TEST(ParseCpuStat, V2Verbatim) {
  const auto s = ASSERT_OK(parseCpuStat(
      "usage_usec 5000\nuser_usec 3000\nsystem_usec 2000\ncore_sched.force_idle_usec 0\n"
      "nr_periods 4\nnr_throttled 2\nthrottled_usec 70\nnr_bursts 0\nburst_usec 0\n"));
  EXPECT_EQ(s.usage_ns, 5000000u);
  EXPECT_EQ(s.nr_throttled, 2u);
  EXPECT_EQ(s.throttled_ns, 70000u);
}

TEST(ParseCpuStat, UnifiedWithoutControllerHasOnlyUsage) {
  const auto s = ASSERT_OK(parseCpuStat("usage_usec 7\nuser_usec 4\nsystem_usec 3\n"));
  EXPECT_EQ(s.usage_ns, 7000u);
  EXPECT_FALSE(s.nr_throttled.has_value());
}

TEST(ParseCpuStat, MalformedTruncatedEmpty) {
  EXPECT_ERR(parseCpuStat("nr_periods 10\nnr_throttled"), EINVAL, "nr_throttled");
  EXPECT_ERR(parseCpuStat("nr_periods ten\n"), EINVAL, "cpu.stat");
  EXPECT_ERR(parseCpuStat(""), ENODATA, "empty");
  EXPECT_ERR(parseCpuStat("\n\n"), ENODATA, "empty");
}

TEST(ParsePsi, SomeAndFull) {
  const auto p =
      ASSERT_OK(parsePsi("some avg10=1.50 avg60=0.25 avg300=0.00 total=123456\n"
                         "full avg10=0.10 avg60=0.00 avg300=0.00 total=42\n"));
  EXPECT_DOUBLE_EQ(p.some.avg10, 1.5);
  EXPECT_DOUBLE_EQ(p.some.avg60, 0.25);
  EXPECT_EQ(p.some.total_us, 123456u);
  ASSERT_TRUE(p.full.has_value());
  EXPECT_EQ(p.full->total_us, 42u);
}

TEST(ParsePsi, SomeOnly) {
  const auto p = ASSERT_OK(parsePsi("some avg10=0.00 avg60=0.00 avg300=0.00 total=0\n"));
  EXPECT_FALSE(p.full.has_value());
}

TEST(ParsePsi, TruncatedAndMalformed) {
  EXPECT_ERR(parsePsi("some avg10=0.00 avg6"), EINVAL, "PSI");
  EXPECT_ERR(parsePsi("some avg10=abc avg60=0.00 avg300=0.00 total=1\n"), EINVAL, "PSI value");
  EXPECT_ERR(parsePsi("some avg10=0.00 avg60=0.00 avg300=0.00 total=-1\n"), EINVAL, "PSI value");
  EXPECT_ERR(parsePsi("some avg10 avg60=0.00\n"), EINVAL, "PSI field");
  EXPECT_ERR(parsePsi("full avg10=0.00 avg60=0.00 avg300=0.00 total=1\n"), ENODATA, "some");
  EXPECT_ERR(parsePsi("bogus avg10=0.00 avg60=0.00 avg300=0.00 total=1\n"), EINVAL, "kind");
  EXPECT_ERR(parsePsi(""), ENODATA, "some");
  EXPECT_ERR(parsePsi("some avg10=nan avg60=0 avg300=0 total=1\n"), EINVAL, "PSI value");
}

TEST(ParseCpuMax, Forms) {
  auto m = ASSERT_OK(parseCpuMax("max 100000\n"));
  EXPECT_FALSE(m.quota_us.has_value());
  EXPECT_EQ(m.period_us, 100000u);
  m = ASSERT_OK(parseCpuMax("50000 200000\n"));
  EXPECT_EQ(m.quota_us, 50000u);
  EXPECT_EQ(m.period_us, 200000u);
  EXPECT_ERR(parseCpuMax(""), EINVAL, "cpu.max");
  EXPECT_ERR(parseCpuMax("50000 0"), EINVAL, "period");
  EXPECT_ERR(parseCpuMax("x 100000"), EINVAL, "quota");
  EXPECT_ERR(parseCpuMax("1 2 3"), EINVAL, "cpu.max");
}

TEST(ParseCfsQuotaUs, UnlimitedOrMicroseconds) {
  EXPECT_FALSE(ASSERT_OK(parseCfsQuotaUs("-1\n")).has_value());
  EXPECT_EQ(ASSERT_OK(parseCfsQuotaUs("50000\n")), 50000u);
  EXPECT_ERR(parseCfsQuotaUs(""), EINVAL, "cfs_quota_us");
  EXPECT_ERR(parseCfsQuotaUs("-2"), EINVAL, "cfs_quota_us");
  EXPECT_ERR(parseCfsQuotaUs("0"), EINVAL, "cfs_quota_us");
  EXPECT_ERR(parseCfsQuotaUs("12 34"), EINVAL, "cfs_quota_us");
}

TEST(ParseKeyedU64, FindsKey) {
  const std::string_view stat = "cache 4096\nrss 8192\ntotal_rss 8192\n";
  EXPECT_EQ(ASSERT_OK(parseKeyedU64(stat, "rss")), 8192u);
  EXPECT_ERR(parseKeyedU64(stat, "swap"), ENODATA, "swap");
  EXPECT_ERR(parseKeyedU64("rss x\n", "rss"), EINVAL, "rss");
}

}  // namespace
}  // namespace colod::cgroup
