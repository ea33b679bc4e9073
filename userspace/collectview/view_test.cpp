// SPDX-License-Identifier: Apache-2.0
#include "colod/collectview/view.h"

#include <gtest/gtest.h>

namespace colod::collectview {
namespace {

collect::Snapshot sample() {
  collect::Snapshot snap;
  snap.interval = std::chrono::milliseconds(100);
  collect::CgroupSample a;
  a.id = 11;
  a.path = "/kubepods/be";
  a.runq_hist[3] = 4;
  a.runq = collect::summarize(a.runq_hist, 40000);
  a.preempted_by.push_back({12, "/kubepods/ls", 3});
  a.throttling = collect::Throttling{10, 2, 5000};
  collect::CgroupSample b;
  b.id = 12;
  b.path = "/kubepods/ls";
  b.cpu_pressure = collect::Psi{{1.5, 0.5, 0.1, 99}, std::nullopt};
  snap.cgroups = {a, b};
  return snap;
}

TEST(View, FilterBySubstring) {
  EXPECT_EQ(filter(sample(), "/be").cgroups.size(), 1u);
  EXPECT_EQ(filter(sample(), "").cgroups.size(), 2u);
  EXPECT_EQ(filter(sample(), "nomatch").cgroups.size(), 0u);
}

TEST(View, JsonFields) {
  const auto j = toJson(sample());
  EXPECT_EQ(j["interval_ns"], 100000000);
  ASSERT_EQ(j["cgroups"].size(), 2u);
  EXPECT_EQ(j["cgroups"][0]["path"], "/kubepods/be");
  EXPECT_EQ(j["cgroups"][0]["runq"]["p99_us"], 16);
  EXPECT_EQ(j["cgroups"][0]["preempted_by"][0]["path"], "/kubepods/ls");
  EXPECT_EQ(j["cgroups"][0]["throttling"]["nr_throttled"], 2);
  EXPECT_FALSE(j["cgroups"][0].contains("cpu_pressure"));
  EXPECT_EQ(j["cgroups"][1]["cpu_pressure"]["some"]["total_us"], 99);
  EXPECT_FALSE(j["cgroups"][1]["cpu_pressure"].contains("full"));
}

TEST(View, TableAndHistograms) {
  const std::string t = renderTable(sample());
  EXPECT_NE(t.find("/kubepods/be"), std::string::npos) << t;
  EXPECT_NE(t.find("/kubepods/ls(3)"), std::string::npos) << t;
  const std::string h = renderHistograms(sample());
  EXPECT_NE(h.find("cgroup /kubepods/be\nrun-queue latency:\n"), std::string::npos) << h;
  EXPECT_EQ(h.find("/kubepods/ls"), std::string::npos) << h;  // no histogram data
}

}  // namespace
}  // namespace colod::collectview
