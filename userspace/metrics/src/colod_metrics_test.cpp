// SPDX-License-Identifier: Apache-2.0
#include "colod/metrics/colod_metrics.h"

#include <gtest/gtest.h>
#include <httplib.h>

#include <atomic>
#include <set>
#include <sstream>

#include "colod/metrics/http_server.h"
#include "colod/testing/result_matchers.h"

namespace colod::metrics {
namespace {

MetricsView sampleView() {
  MetricsView v;
  ContainerMetrics c;
  c.pod = "web-0";
  c.namespace_ = "prod";
  c.container = "nginx \"edge\"";
  c.tier = "ls";
  c.runq_slots[2] = 5;
  c.runq_sum_seconds = 0.00002;
  c.preemptions = 11;
  c.throttled_periods = 3;
  c.throttled_seconds = 0.25;
  c.reclaim_stall_seconds = 0.5;
  c.cpuset_cpus = 2;
  c.cpu_shares = 1024;
  v.containers.push_back(c);
  ContainerMetrics b;
  b.pod = "batch";
  b.namespace_ = "jobs";
  b.container = "hog";
  b.tier = "be";
  b.quota_cpus = 0.5;
  v.containers.push_back(b);
  v.daemon.decisions_by_kind = {{"cap_quota", 2}, {"release", 1}};
  v.daemon.nri_connected = true;
  v.daemon.nri_reconnects = 4;
  v.daemon.rss_bytes = 10 << 20;
  v.daemon.cpu_seconds = 1.5;
  v.daemon.mode = "act";
  return v;
}

bool contains(const std::string& text, const std::string& line) {
  std::istringstream in(text);
  std::string l;
  while (std::getline(in, l)) {
    if (l == line) {
      return true;
    }
  }
  return false;
}

TEST(ColodMetrics, FormatsPerContainerFamiliesWithEscapedLabels) {
  const std::string text = formatColodMetrics(sampleView());
  const std::string ls = R"(pod="web-0",namespace="prod",container="nginx \"edge\"",tier="ls")";
  const std::string be = R"(pod="batch",namespace="jobs",container="hog",tier="be")";
  EXPECT_TRUE(contains(text, "# TYPE colod_runqueue_latency_seconds histogram"));
  EXPECT_TRUE(contains(text, "colod_runqueue_latency_seconds_bucket{" + ls + ",le=\"8e-06\"} 5"));
  EXPECT_TRUE(contains(text, "colod_runqueue_latency_seconds_bucket{" + ls + ",le=\"+Inf\"} 5"));
  EXPECT_TRUE(contains(text, "colod_runqueue_latency_seconds_count{" + be + "} 0"));
  EXPECT_TRUE(contains(text, "colod_preemptions_total{" + ls + "} 11"));
  EXPECT_TRUE(contains(text, "colod_throttled_seconds_total{" + ls + "} 0.25"));
  EXPECT_TRUE(contains(text, "colod_reclaim_stall_seconds_total{" + ls + "} 0.5"));
  EXPECT_TRUE(contains(text, "colod_cpuset_cpus{" + ls + "} 2"));
  EXPECT_FALSE(contains(text, "colod_cpuset_cpus{" + be + "} 0"));  // unknown: absent
  EXPECT_TRUE(contains(text, "colod_cpu_quota_cpus{" + be + "} 0.5"));
  EXPECT_TRUE(contains(text, "colod_decisions_total{kind=\"cap_quota\"} 2"));
  EXPECT_TRUE(contains(text, "colod_nri_connected 1"));
  EXPECT_TRUE(contains(text, "colod_nri_reconnects_total 4"));
  EXPECT_TRUE(contains(text, "colod_process_resident_memory_bytes 10485760"));
  EXPECT_TRUE(contains(text, "colod_process_cpu_seconds_total 1.5"));
  EXPECT_TRUE(contains(text, "colod_mode{mode=\"act\"} 1"));
  EXPECT_TRUE(contains(text, "colod_mode{mode=\"dry-run\"} 0"));
}

// The actuator's convergence: what is pending, since when, and why attempts failed.
// The runtime's answer time: a daemon-level histogram in seconds, one bucket per log2 µs slot.
TEST(ColodMetrics, UpdateDurationHistogram) {
  MetricsView v = sampleView();
  v.daemon.update_rtt_slots[3] = 2;   // [8, 16) µs
  v.daemon.update_rtt_slots[13] = 1;  // [8.192, 16.384) ms
  v.daemon.update_rtt_sum_seconds = 0.01;
  const std::string text = formatColodMetrics(v);
  EXPECT_TRUE(contains(text, "# TYPE colod_nri_update_duration_seconds histogram")) << text;
  EXPECT_TRUE(contains(text, "colod_nri_update_duration_seconds_bucket{le=\"1.6e-05\"} 2")) << text;
  EXPECT_TRUE(contains(text, "colod_nri_update_duration_seconds_bucket{le=\"+Inf\"} 3"));
  EXPECT_TRUE(contains(text, "colod_nri_update_duration_seconds_count 3"));
  EXPECT_TRUE(contains(text, "colod_nri_update_duration_seconds_sum 0.01"));
}

TEST(ColodMetrics, ReconcileFamilies) {
  MetricsView v = sampleView();
  v.daemon.reconcile_tracked = 3;
  v.daemon.reconcile_pending = 1;
  v.daemon.reconcile_oldest_pending_seconds = 2.5;
  v.daemon.reconcile_failures = {{"refused", 7}};
  v.daemon.reconcile_external_changes = 2;
  v.daemon.journal_errors = 1;
  v.daemon.bpf_kernel_sum_errors = 1;
  v.daemon.watched_cgroups = 4;
  v.daemon.every_tick_cgroups = 9;
  const std::string text = formatColodMetrics(v);
  EXPECT_TRUE(contains(text, "colod_watched_cgroups 4"));
  EXPECT_TRUE(contains(text, "colod_every_tick_cgroups 9"));
  EXPECT_TRUE(contains(text, "colod_reconcile_tracked 3"));
  EXPECT_TRUE(contains(text, "colod_reconcile_pending 1"));
  EXPECT_TRUE(contains(text, "colod_reconcile_oldest_pending_seconds 2.5"));
  EXPECT_TRUE(contains(text, "colod_reconcile_failures_total{reason=\"refused\"} 7"));
  EXPECT_TRUE(contains(text, "colod_reconcile_failures_total{reason=\"unknown\"} 0"))
      << "every reason is exported, zero included";
  EXPECT_TRUE(contains(text, "colod_reconcile_external_changes_total 2"));
  EXPECT_TRUE(contains(text, "colod_journal_errors_total 1"));
  EXPECT_TRUE(contains(text, "colod_bpf_delete_errors_total 0"));
  EXPECT_TRUE(contains(text, "colod_bpf_deletes_pending 0"));
  EXPECT_TRUE(contains(text, "colod_bpf_slots_moved_total 0"));
  EXPECT_TRUE(contains(text, "colod_bpf_slot_move_errors_total 0"));
  EXPECT_TRUE(contains(text, "colod_bpf_map_bytes 0"));
  EXPECT_TRUE(contains(text, "colod_bpf_kernel_sum_errors_total 1"));
}

TEST(ColodMetrics, EveryFamilyDeclaredOnceAndSamplesContiguous) {
  const std::string text = formatColodMetrics(sampleView());
  std::istringstream in(text);
  std::string line;
  std::string current;
  std::set<std::string> seen;
  while (std::getline(in, line)) {
    if (line.starts_with("# TYPE ")) {
      auto name = line.substr(7, line.find(' ', 7) - 7);
      EXPECT_TRUE(seen.insert(name).second) << "family twice: " << name;
      current = name;
      continue;
    }
    if (line.starts_with("#")) {
      continue;
    }
    EXPECT_TRUE(line.starts_with(current)) << line << " outside family " << current;
  }
  EXPECT_GT(seen.size(), 15U);
}

TEST(HttpServer, ServesMetricsOnLoopback) {
  int calls = 0;
  auto server =
      ASSERT_OK(HttpServer::start({.host = "127.0.0.1", .port = 0}, [&calls](TextWriter& w) {
        ++calls;
        w.sample("x", {}, 1);
      }));
  ASSERT_GT(server->port(), 0);
  httplib::Client cli("127.0.0.1", server->port());
  cli.set_connection_timeout(10, 0);
  auto res = cli.Get("/metrics");
  ASSERT_TRUE(res) << httplib::to_string(res.error());
  EXPECT_EQ(res->status, 200);
  EXPECT_EQ(res->body, "x 1\n");
  EXPECT_EQ(calls, 1);
  EXPECT_NE(res->get_header_value("Content-Type").find("version=0.0.4"), std::string::npos);
  auto missing = cli.Get("/nothing");
  ASSERT_TRUE(missing);
  EXPECT_EQ(missing->status, 404);
  server->stop();
}

// A streamed scrape of 1000 containers (pieces of 64 KiB as HTTP/1.1 chunks) gives the
// document formatColodMetrics builds whole.
TEST(HttpServer, StreamsALargeDocumentWhole) {
  MetricsView view;
  for (int i = 0; i < 1000; ++i) {
    ContainerMetrics c;
    c.pod = "app-" + std::to_string(i) + "-7d9f8c6b5d-x" + std::to_string(i);
    c.namespace_ = "ns-" + std::to_string(i % 10);
    c.container = "container-" + std::to_string(i % 4);
    c.tier = i % 3 == 2 ? "be" : "ls";
    for (size_t s = 0; s < 14; ++s) {
      c.runq_slots[s] = static_cast<uint64_t>(i) * 7 + s;
    }
    c.runq_sum_seconds = 0.25 * i;
    c.preemptions = static_cast<uint64_t>(i);
    c.cpuset_cpus = 2;
    view.containers.push_back(std::move(c));
  }
  view.daemon.mode = "act";
  const std::string expected = formatColodMetrics(view);
  ASSERT_GT(expected.size(), 1u << 20) << "the document should span many chunks";
  std::atomic<int> calls{0};
  auto stream = [&](TextWriter& w) {
    ++calls;
    writeColodMetrics(view.daemon, view.containers, w);
  };
  HttpHandlers handlers{.metrics = stream, .live = {}, .ready = {}};
  auto server = ASSERT_OK(HttpServer::start({.host = "127.0.0.1", .port = 0}, handlers));
  httplib::Client cli("127.0.0.1", server->port());
  cli.set_connection_timeout(10, 0);
  for (int i = 0; i < 2; ++i) {
    auto res = cli.Get("/metrics");
    ASSERT_TRUE(res) << httplib::to_string(res.error());
    EXPECT_EQ(res->status, 200);
    EXPECT_EQ(res->get_header_value("Transfer-Encoding"), "chunked");
    EXPECT_NE(res->get_header_value("Content-Type").find("version=0.0.4"), std::string::npos);
    EXPECT_EQ(res->body.size(), expected.size());
    EXPECT_TRUE(res->body == expected) << "the streamed document differs";
  }
  EXPECT_EQ(calls.load(), 2);
  server->stop();
}

TEST(HttpServer, LivenessAndReadinessProbes) {
  std::atomic<bool> ready{false};
  auto server = ASSERT_OK(HttpServer::start(
      {.host = "127.0.0.1", .port = 0},
      HttpHandlers{.metrics = {},
                   .live = [] { return ProbeResult{.ok = true, .why = "last tick 40 ms ago"}; },
                   .ready =
                       [&ready] {
                         return ready ? ProbeResult{.ok = true, .why = "synchronized"}
                                      : ProbeResult{.ok = false, .why = "runtime not synchronized"};
                       }}));
  httplib::Client cli("127.0.0.1", server->port());
  cli.set_connection_timeout(10, 0);
  auto live = cli.Get("/healthz");
  ASSERT_TRUE(live);
  EXPECT_EQ(live->status, 200);
  EXPECT_EQ(live->body, "ok: last tick 40 ms ago\n");
  auto notyet = cli.Get("/readyz");
  ASSERT_TRUE(notyet);
  EXPECT_EQ(notyet->status, 503);
  EXPECT_EQ(notyet->body, "not ok: runtime not synchronized\n");
  ready = true;
  auto now = cli.Get("/readyz");
  ASSERT_TRUE(now);
  EXPECT_EQ(now->status, 200);
  server->stop();
}

TEST(HttpServer, BindConflictIsAnError) {
  auto first = ASSERT_OK(HttpServer::start({.host = "127.0.0.1", .port = 0}, [](TextWriter&) {}));
  auto second = HttpServer::start({.host = "127.0.0.1", .port = first->port()}, [](TextWriter&) {});
  EXPECT_FALSE(second.has_value());
}

}  // namespace
}  // namespace colod::metrics
