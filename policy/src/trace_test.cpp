// SPDX-License-Identifier: Apache-2.0
#include "colod/policy/trace.h"

#include <gtest/gtest.h>

#include <fstream>
#include <sstream>

#include "colod/policy/testing/synthetic.h"
#include "colod/testing/result_matchers.h"

namespace colod::policy {
namespace {

using testing::beInfo;
using testing::beSample;
using testing::lsInfo;
using testing::lsSample;

Trace sampleTrace() {
  Trace t;
  t.header = TraceHeader{kTraceVersion, std::string("dry_run: true\n")};
  ContainerInfo ls = lsInfo("web");
  ls.pod_labels["app"] = "web";
  ls.pod_annotations["colod.io/runq-p99-threshold-us"] = "1500";
  ls.container_annotations["x"] = "y";
  ls.cgroup_path = "/kubepods.slice/web";
  ls.tier = Tier::Ls;
  ls.resources.unified["cpu.idle"] = "0";
  ls.resources.memory_limit = 1 << 30;
  ls.resources.cpuset_mems = "0";
  t.events.emplace_back(ls);
  ContainerInfo ex = testing::exclusiveInfo("pinned", {1});
  t.events.emplace_back(ex);
  t.events.emplace_back(beInfo("hog"));
  Snapshot s;
  s.now_ns = 100;
  s.interval_ns = 100'000'000;
  s.node_cpus = 2;
  s.node_cpu_list = {0, 1};
  ContainerSample a = lsSample("web", 3000, {{"hog", 7, 123456}, {"", 1, 5}});
  a.runq_hist[0] = 1;
  a.runq_hist[25] = 4'000'000'000u;
  a.nr_involuntary = 9;
  a.nr_throttled = 1;
  a.throttled_ns = 2;
  a.reclaim_stall_ns = 3;
  a.psi_cpu_some = Psi{12.5, 77};
  a.psi_memory_some = Psi{0.25, 1};
  a.psi_memory_full = Psi{0.0, 0};
  a.memory_bytes = 1ULL << 40;
  s.containers.push_back(a);
  s.containers.push_back(beSample("hog", 90'000'000));
  t.events.emplace_back(s);
  Snapshot ev = s;  // an event round: the flag survives the trace
  ev.now_ns = 120;
  ev.interval_ns = 20'000'000;
  ev.event_round = true;
  ev.absent_quiet = true;  // and the absent containers' quiet interval, and who was unmeasured
  ev.unmeasured = {"pinned"};
  t.events.emplace_back(ev);
  ContainerInfo batch = beInfo("batch", 2, 16384);
  batch.resources.cpu_quota = 50000;
  t.events.emplace_back(TraceAdmit{150, batch});
  t.events.emplace_back(TraceRemove{"hog"});
  return t;
}

bool sameEvents(const Trace& a, const Trace& b) {
  if (a.events.size() != b.events.size()) {
    return false;
  }
  for (size_t i = 0; i < a.events.size(); ++i) {
    if (a.events[i].index() != b.events[i].index()) {
      return false;
    }
    if (const auto* x = std::get_if<ContainerInfo>(&a.events[i])) {
      if (!(*x == std::get<ContainerInfo>(b.events[i]))) {
        return false;
      }
    } else if (const auto* r = std::get_if<TraceRemove>(&a.events[i])) {
      if (r->id != std::get<TraceRemove>(b.events[i]).id) {
        return false;
      }
    } else if (const auto* ad = std::get_if<TraceAdmit>(&a.events[i])) {
      const auto& ad2 = std::get<TraceAdmit>(b.events[i]);
      if (ad->now_ns != ad2.now_ns || !(ad->info == ad2.info)) {
        return false;
      }
    } else {
      const auto& s1 = std::get<Snapshot>(a.events[i]);
      const auto& s2 = std::get<Snapshot>(b.events[i]);
      if (s1.now_ns != s2.now_ns || s1.interval_ns != s2.interval_ns ||
          s1.event_round != s2.event_round || s1.node_cpus != s2.node_cpus ||
          s1.node_cpu_list != s2.node_cpu_list || s1.absent_quiet != s2.absent_quiet ||
          s1.unmeasured != s2.unmeasured || s1.containers.size() != s2.containers.size()) {
        return false;
      }
      for (size_t j = 0; j < s1.containers.size(); ++j) {
        const auto& c1 = s1.containers[j];
        const auto& c2 = s2.containers[j];
        if (c1.id != c2.id || c1.runq_hist != c2.runq_hist || c1.runq_count != c2.runq_count ||
            c1.runq_p50_us != c2.runq_p50_us || c1.runq_p90_us != c2.runq_p90_us ||
            c1.runq_p99_us != c2.runq_p99_us || c1.runq_max_us != c2.runq_max_us ||
            c1.preempted_by.size() != c2.preempted_by.size() || c1.oncpu_ns != c2.oncpu_ns ||
            c1.nr_involuntary != c2.nr_involuntary || c1.nr_throttled != c2.nr_throttled ||
            c1.throttled_ns != c2.throttled_ns || c1.reclaim_stall_ns != c2.reclaim_stall_ns ||
            c1.psi_cpu_some.has_value() != c2.psi_cpu_some.has_value() ||
            c1.psi_memory_some.has_value() != c2.psi_memory_some.has_value() ||
            c1.psi_memory_full.has_value() != c2.psi_memory_full.has_value() ||
            c1.memory_bytes != c2.memory_bytes) {
          return false;
        }
        for (size_t k = 0; k < c1.preempted_by.size(); ++k) {
          if (c1.preempted_by[k].aggressor_id != c2.preempted_by[k].aggressor_id ||
              c1.preempted_by[k].count != c2.preempted_by[k].count ||
              c1.preempted_by[k].wait_ns != c2.preempted_by[k].wait_ns) {
            return false;
          }
        }
        if (c1.psi_cpu_some &&
            (c1.psi_cpu_some->avg10 != c2.psi_cpu_some->avg10 ||
             c1.psi_cpu_some->total_delta_us != c2.psi_cpu_some->total_delta_us)) {
          return false;
        }
      }
    }
  }
  return true;
}

TEST(TraceTest, RoundTrip) {
  const Trace t = sampleTrace();
  const std::string text = encodeTrace(t);
  EXPECT_EQ(std::count(text.begin(), text.end(), '\n'), 8);
  Trace back = ASSERT_OK(decodeTrace(text));
  ASSERT_TRUE(back.header.has_value());
  EXPECT_EQ(back.header->config_yaml, t.header->config_yaml);
  EXPECT_TRUE(sameEvents(t, back));
  // Encoding is canonical: encode(decode(x)) == x.
  EXPECT_EQ(encodeTrace(back), text);
}

TEST(TraceTest, SkipsBlankAndCommentLines) {
  Trace t = ASSERT_OK(decodeTrace("\n# a comment\n" + encodeRemove("x") + "\r\n\n"));
  ASSERT_EQ(t.events.size(), 1u);
  EXPECT_EQ(std::get<TraceRemove>(t.events[0]).id, "x");
}

struct BadTrace {
  const char* name;
  std::string text;
  const char* pattern;
};

class TraceErrorTest : public ::testing::TestWithParam<BadTrace> {};

TEST_P(TraceErrorTest, PreciseMessage) {
  EXPECT_ERR(decodeTrace(GetParam().text), EINVAL, GetParam().pattern);
}

INSTANTIATE_TEST_SUITE_P(
    Table,
    TraceErrorTest,
    ::testing::Values(
        BadTrace{"not_json", "{\"type\":", "line 1: not valid JSON"},
        BadTrace{"not_object", "[1,2]", "line 1: expected a JSON object"},
        BadTrace{"no_type", "{}", "line 1: type: missing"},
        BadTrace{"bad_type", R"({"type":"nope"})", R"(line 1: type: unknown type "nope")"},
        BadTrace{"late_header",
                 "{\"type\":\"remove\",\"id\":\"a\"}\n{\"type\":\"header\",\"version\":1}",
                 "line 2: header must be the first line"},
        BadTrace{"bad_version", R"({"type":"header","version":99})",
                 "line 1: unsupported trace version 99"},
        BadTrace{"snapshot_missing_now", R"({"type":"snapshot","interval_ns":1,"node_cpus":2})",
                 "line 1: now_ns: missing"},
        BadTrace{
            "snapshot_bad_count",
            R"({"type":"snapshot","now_ns":1,"interval_ns":1,"node_cpus":2,"containers":[{"id":"a","runq_count":-1}]})",
            "line 1: runq_count: expected an unsigned integer"},
        BadTrace{
            "hist_slot_out_of_range",
            R"({"type":"snapshot","now_ns":1,"interval_ns":1,"node_cpus":2,"containers":[{"id":"a","runq_hist":[[26,1]]}]})",
            R"(line 1: runq_hist: expected \[\[slot < 26)"},
        BadTrace{"absent_quiet_not_bool",
                 R"({"type":"snapshot","now_ns":1,"interval_ns":1,"node_cpus":2,"absent_quiet":1})",
                 "line 1: absent_quiet: expected true or false"},
        BadTrace{"unmeasured_not_ids",
                 R"({"type":"snapshot","now_ns":1,"interval_ns":1,"node_cpus":2,"unmeasured":[1]})",
                 "line 1: unmeasured: expected an array of container ids"},
        BadTrace{"upsert_no_id", R"({"type":"upsert","container":{"pod_name":"p"}})",
                 "line 1: id: missing"},
        BadTrace{"upsert_bad_tier", R"({"type":"upsert","container":{"id":"a","tier":"gold"}})",
                 R"(line 1: tier: unknown tier "gold")"},
        BadTrace{"upsert_bad_label",
                 R"({"type":"upsert","container":{"id":"a","pod_labels":{"k":1}}})",
                 R"(line 1: pod_labels\.k: expected a string)"},
        BadTrace{"zero_interval", R"({"type":"snapshot","now_ns":1,"interval_ns":0,"node_cpus":2})",
                 "interval_ns must be > 0"}),
    [](const auto& p) { return std::string(p.param.name); });

TEST(TraceTest, DecisionJsonRoundTrip) {
  Decision d;
  d.seq = 7;
  d.at_ns = 123;
  d.kind = DecisionKind::Escalate;
  d.lever = Lever::CpuQuota;
  d.target_id = "hog";
  d.target_name = "default/hog-pod/main";
  d.new_values.cpu_quota = 100000;
  d.new_values.cpu_period = 100000;
  d.original_values.cpu_quota = -1;
  d.original_values.cpu_period = 100000;
  d.victim_id = "web";
  d.victim_name = "default/web-pod/main";
  d.antagonists.push_back({"hog", "default/hog-pod/main", 10, 2000, 3000, 0, 0.75});
  d.evidence.victim_p99_us = 4000;
  d.evidence.threshold_us = 2000;
  d.evidence.hits = 3;
  d.evidence.window = 5;
  d.rung = 2;
  d.rule = "runq_p99_over_threshold";
  d.explanation = "because";
  d.dry_run = true;
  Decision back = ASSERT_OK(decodeDecision(encodeDecision(d)));
  EXPECT_EQ(back, d);
  EXPECT_ERR(
      decodeDecision("{\"seq\":1,\"kind\":\"explode\",\"lever\":\"cpuset\",\"target_id\":\"a\"}"),
      EINVAL, "kind: unknown");
}

// An admission is part of the trace: the replay places the BE the live engine placed, in the
// same order with the rounds (a trace without it diverged from the daemon from the placement on).
TEST(TraceTest, AnAdmissionReplaysAsTheLiveEnginePlacedIt) {
  Config config;
  config.actions.cpu_ladder = {Lever::Cpuset, Lever::CpuQuota};
  Trace trace;
  trace.events.emplace_back(lsInfo("web", 4));
  Snapshot s;
  s.now_ns = 100'000'000;
  s.interval_ns = 100'000'000;
  s.node_cpus = 4;
  s.node_cpu_list = {0, 1, 2, 3};
  s.containers.push_back(lsSample("web", 200));
  trace.events.emplace_back(s);
  trace.events.emplace_back(TraceAdmit{150'000'000, beInfo("batch", 4, 16384)});
  // Through the text form, as `coloctl record` writes it and `coloctl replay` reads it.
  const std::string text = encodeTrace(trace);
  EXPECT_NE(text.find(R"("type":"admit")"), std::string::npos) << text;
  const Trace decoded = ASSERT_OK(decodeTrace(text));
  auto rounds = ASSERT_OK(replayTrace(decoded, config));
  ASSERT_EQ(rounds.size(), 2u) << "one result per snapshot and per admission";
  EXPECT_TRUE(rounds[0].decisions.empty());
  ASSERT_EQ(rounds[1].decisions.size(), 1u);
  const Decision& d = rounds[1].decisions[0];
  EXPECT_EQ(d.rule, "admission");
  EXPECT_EQ(d.target_id, "batch");
  EXPECT_EQ(d.lever, Lever::Cpuset);
  // A bad admit line is refused with its line number.
  auto bad = decodeTrace(R"({"type":"admit","container":{"id":"x"}})");
  ASSERT_FALSE(bad.has_value());
  EXPECT_NE(bad.error().message().find("now_ns"), std::string::npos) << bad.error().message();
}

// The committed example trace replays to the committed expected decisions (text form).
TEST(TraceTest, ReplayCommittedExample) {
  auto read = [](const std::string& name) {
    std::ifstream in(std::string(COLOD_POLICY_TESTDATA) + "/" + name);
    std::ostringstream os;
    os << in.rdbuf();
    return os.str();
  };
  const std::string text = read("example.trace.jsonl");
  ASSERT_FALSE(text.empty()) << "policy/testdata/example.trace.jsonl missing";
  Trace trace = ASSERT_OK(decodeTrace(text));
  Config config;
  if (trace.header && trace.header->config_yaml) {
    config = ASSERT_OK(parsePolicySection(*trace.header->config_yaml, "example header"));
  }
  auto rounds = ASSERT_OK(replayTrace(trace, config));
  std::string got;
  for (const auto& r : rounds) {
    for (const auto& d : r.decisions) {
      got += formatDecision(d) + "\n";
    }
  }
  const std::string want = read("example.decisions.txt");
  ASSERT_FALSE(want.empty()) << "policy/testdata/example.decisions.txt missing";
  EXPECT_EQ(got, want);
  // The example is an engage ... relax story: it must contain both.
  EXPECT_NE(got.find(" engage "), std::string::npos);
  EXPECT_NE(got.find(" relax "), std::string::npos);
}

}  // namespace
}  // namespace colod::policy
