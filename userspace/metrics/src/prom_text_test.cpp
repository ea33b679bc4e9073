// SPDX-License-Identifier: Apache-2.0
#include "colod/metrics/prom_text.h"

#include <gtest/gtest.h>

#include <array>
#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "colod/metrics/http_server.h"
#include "colod/testing/result_matchers.h"

namespace colod::metrics {
namespace {

TEST(PromText, EscapesLabelValues) {
  EXPECT_EQ(escapeLabelValue(R"(a\b"c)"
                             "\n"
                             "d"),
            R"(a\\b\"c\nd)");
  EXPECT_EQ(escapeLabelValue("plain-value_1.2"), "plain-value_1.2");
  EXPECT_EQ(escapeLabelValue(""), "");
}

TEST(PromText, EscapesHelpButNotQuotes) {
  EXPECT_EQ(escapeHelp("say \"hi\"\\\nnext"), "say \"hi\"\\\\\\nnext");
}

TEST(PromText, FormatsValues) {
  EXPECT_EQ(formatValue(0), "0");
  EXPECT_EQ(formatValue(42), "42");
  EXPECT_EQ(formatValue(-3), "-3");
  EXPECT_EQ(formatValue(1e15), "1000000000000000");
  EXPECT_EQ(formatValue(0.5), "0.5");
  EXPECT_EQ(formatValue(2e-6), "2e-06");
  EXPECT_EQ(formatValue(std::numeric_limits<double>::infinity()), "+Inf");
  EXPECT_EQ(formatValue(-std::numeric_limits<double>::infinity()), "-Inf");
  EXPECT_EQ(formatValue(std::nan("")), "NaN");
}

TEST(PromText, ValidatesNames) {
  EXPECT_TRUE(validMetricName("colod_x:y_total"));
  EXPECT_FALSE(validMetricName("1abc"));
  EXPECT_FALSE(validMetricName("a-b"));
  EXPECT_FALSE(validMetricName(""));
  EXPECT_TRUE(validLabelName("pod"));
  EXPECT_FALSE(validLabelName("a:b"));
  EXPECT_FALSE(validLabelName("__reserved"));
}

TEST(PromText, WritesFamilyAndSamples) {
  TextWriter w;
  w.family("x_total", MetricType::Counter, "Help with \\ and\nnewline.");
  w.sample("x_total", {{"pod", "p\"1"}, {"tier", "be"}}, 7);
  w.sample("x_total", {}, 1.25);
  EXPECT_EQ(w.text(),
            "# HELP x_total Help with \\\\ and\\nnewline.\n"
            "# TYPE x_total counter\n"
            "x_total{pod=\"p\\\"1\",tier=\"be\"} 7\n"
            "x_total 1.25\n");
}

TEST(PromText, Log2HistogramIsCumulativeWithInf) {
  TextWriter w;
  std::array<uint64_t, 26> slots{};
  slots[0] = 1;  // [0,2) us
  slots[3] = 2;  // [8,16) us
  slots[4] = 4;  // [16,32) us
  w.log2Histogram("lat_seconds", {{"c", "a"}}, slots, 1e-6, 0.000123);
  EXPECT_EQ(w.text(),
            "lat_seconds_bucket{c=\"a\",le=\"2e-06\"} 1\n"
            "lat_seconds_bucket{c=\"a\",le=\"4e-06\"} 1\n"
            "lat_seconds_bucket{c=\"a\",le=\"8e-06\"} 1\n"
            "lat_seconds_bucket{c=\"a\",le=\"1.6e-05\"} 3\n"
            "lat_seconds_bucket{c=\"a\",le=\"3.2e-05\"} 7\n"
            "lat_seconds_bucket{c=\"a\",le=\"+Inf\"} 7\n"
            "lat_seconds_sum{c=\"a\"} 0.000123\n"
            "lat_seconds_count{c=\"a\"} 7\n");
}

TEST(PromText, EmptyHistogramStillHasOneBucketAndInf) {
  TextWriter w;
  std::array<uint64_t, 26> slots{};
  w.log2Histogram("h", {}, slots, 1.0, 0);
  EXPECT_EQ(w.text(),
            "h_bucket{le=\"2\"} 0\n"
            "h_bucket{le=\"+Inf\"} 0\n"
            "h_sum 0\n"
            "h_count 0\n");
}

// A writer with a sink hands over the same document in whole lines, each piece about the chunk
// size, and keeps nothing once finished.
TEST(PromText, SinkGetsTheSameDocumentInWholeLines) {
  auto write = [](TextWriter& w) {
    std::array<uint64_t, 26> slots{};
    slots[5] = 3;
    for (int i = 0; i < 200; ++i) {
      w.family("f" + std::to_string(i), MetricType::Histogram, "h");
      w.log2Histogram("f" + std::to_string(i), {{"pod", "p" + std::to_string(i)}}, slots, 1e-6,
                      0.5);
      w.sample("g", {{"i", std::to_string(i)}}, i);
    }
  };
  TextWriter whole;
  write(whole);
  std::vector<std::string> pieces;
  TextWriter chunked([&pieces](std::string_view piece) { pieces.emplace_back(piece); }, 1024);
  write(chunked);
  ASSERT_FALSE(pieces.empty());
  const size_t before_finish = pieces.size();
  chunked.finish();
  EXPECT_EQ(pieces.size(), before_finish + 1) << "finish() hands over the rest";
  EXPECT_TRUE(chunked.text().empty());
  std::string joined;
  for (const std::string& p : pieces) {
    EXPECT_TRUE(p.ends_with('\n')) << "a piece ends inside a line";
    EXPECT_LT(p.size(), 1024u + 256u) << "a piece much larger than the chunk";
    joined += p;
  }
  EXPECT_GT(pieces.size(), whole.text().size() / 1024 - 1);
  EXPECT_EQ(joined, whole.text());
  chunked.finish();
  EXPECT_EQ(pieces.size(), before_finish + 1) << "nothing left: no empty piece";
}

TEST(ListenAddress, Parses) {
  auto a = ASSERT_OK(parseListenAddress("127.0.0.1:9477"));
  EXPECT_EQ(a.host, "127.0.0.1");
  EXPECT_EQ(a.port, 9477);
  auto b = ASSERT_OK(parseListenAddress("[::1]:80"));
  EXPECT_EQ(b.host, "::1");
  EXPECT_EQ(b.port, 80);
  auto c = ASSERT_OK(parseListenAddress(":0"));
  EXPECT_EQ(c.host, "127.0.0.1");
  EXPECT_EQ(c.port, 0);
  EXPECT_ERR(parseListenAddress("localhost"), EINVAL, "expected host:port");
  EXPECT_ERR(parseListenAddress("a:99999"), EINVAL, "bad port");
  EXPECT_ERR(parseListenAddress("a:9x"), EINVAL, "bad port");
  EXPECT_ERR(parseListenAddress("[::1]80"), EINVAL, "ipv6");
}

}  // namespace
}  // namespace colod::metrics
