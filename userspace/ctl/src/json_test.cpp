// SPDX-License-Identifier: Apache-2.0
// The -o json documents: their field names and types are the schemas in the README.
#include "json.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "colod/testing/result_matchers.h"

namespace colod::ctl {
namespace {

using nlohmann::json;

json parse(const std::string& text) {
  auto doc = json::parse(text, nullptr, false);
  EXPECT_FALSE(doc.is_discarded()) << text;
  return doc;
}

control::v1::Container container() {
  control::v1::Container c;
  c.set_id("abcdef0123456789");
  c.set_namespace_("prod");
  c.set_pod("web-0");
  c.set_name("nginx");
  c.set_tier("ls");
  c.set_runq_p99_us(4096);
  c.set_quota_us(-1);
  c.set_period_us(100000);
  auto* a = c.add_preempted_by();
  a->set_container("/");
  a->set_preemptions(14);
  return c;
}

// Same shape as the daemon's dump "containers" entries.
void expectContainer(const json& c) {
  EXPECT_EQ(c["id"], "abcdef0123456789");
  EXPECT_EQ(c["namespace"], "prod");
  EXPECT_EQ(c["pod"], "web-0");
  EXPECT_EQ(c["name"], "nginx");
  EXPECT_EQ(c["tier"], "ls");
  EXPECT_TRUE(c["runq"]["p99_us"].is_number_unsigned());
  EXPECT_EQ(c["runq"]["p99_us"], 4096);
  EXPECT_EQ(c["quota_us"], -1);
  EXPECT_EQ(c["preempted_by"][0]["container"], "/");
  EXPECT_EQ(c["preempted_by"][0]["preemptions"], 14);
  EXPECT_TRUE(c["managed"].is_boolean());
  EXPECT_TRUE(c["cpu_util"].is_number());
}

TEST(CtlJson, Status) {
  control::v1::StatusReply s;
  s.set_version("0.1.0");
  s.set_mode("act");
  s.set_nri_connected(true);
  s.set_interval_ms(100);
  s.set_cpu_seconds(1.5);
  const json doc = parse(statusJson(s));
  EXPECT_EQ(doc["version"], "0.1.0");
  EXPECT_EQ(doc["mode"], "act");
  EXPECT_EQ(doc["nri_connected"], true);
  EXPECT_EQ(doc["interval_ms"], 100);
  EXPECT_EQ(doc["cpu_seconds"], 1.5);
  EXPECT_TRUE(doc["reconcile_pending"].is_number_unsigned());
  EXPECT_TRUE(doc["bpf_map_bytes"].is_number_unsigned());
  EXPECT_TRUE(doc["update_rtt_slots"].is_array());
  EXPECT_EQ(doc.size(), 20U);  // every StatusReply field
}

TEST(CtlJson, ContainersOneDocumentOrOneLine) {
  control::v1::ListContainersReply list;
  *list.add_containers() = container();
  list.set_unix_ms(1700000000000);
  list.set_interval_ms(100);
  const json doc = parse(containersJson(list, nullptr));
  EXPECT_TRUE(doc["status"].is_null());
  EXPECT_EQ(doc["unix_ms"], 1700000000000);
  ASSERT_EQ(doc["containers"].size(), 1U);
  expectContainer(doc["containers"][0]);
  control::v1::StatusReply s;
  s.set_mode("act");
  const std::string line = containersJson(list, &s, true);
  EXPECT_EQ(line.find('\n'), std::string::npos);  // JSON Lines
  EXPECT_EQ(parse(line)["status"]["mode"], "act");
}

TEST(CtlJson, Histogram) {
  control::v1::HistogramReply h;
  *h.mutable_container() = container();
  h.add_runq_slots(5);
  h.add_runq_slots(0);
  h.add_runq_slots(7);
  h.add_last_slots(1);
  const json doc = parse(histogramJson(h));
  expectContainer(doc["container"]);
  EXPECT_EQ(doc["unit"], "us");
  ASSERT_EQ(doc["since_start"].size(), 3U);
  EXPECT_EQ(doc["since_start"][0], (json{{"low_us", 0}, {"high_us", 1}, {"count", 5}}));
  EXPECT_EQ(doc["since_start"][2], (json{{"low_us", 4}, {"high_us", 7}, {"count", 7}}));
  EXPECT_EQ(doc["last_interval"].size(), 1U);
}

TEST(CtlJson, DecisionsAndExplain) {
  control::v1::DecisionsReply r;
  auto* d = r.add_decisions();
  d->set_seq(7);
  d->set_kind("escalate/cpu_quota");
  d->set_lever("cpu_quota");
  d->set_rung(3);
  d->set_victim("prod/web-0/nginx");
  d->set_reason(std::string(3000, 'x'));
  const json doc = parse(decisionsJson(r));
  ASSERT_EQ(doc["decisions"].size(), 1U);
  EXPECT_EQ(doc["decisions"][0]["seq"], 7);
  EXPECT_EQ(doc["decisions"][0]["rung"], 3);
  EXPECT_EQ(doc["decisions"][0]["lever"], "cpu_quota");
  EXPECT_EQ(doc["decisions"][0]["victim"], "prod/web-0/nginx");
  EXPECT_EQ(doc["decisions"][0]["reason"].get<std::string>().size(), 3000U);

  control::v1::ExplainReply e;
  *e.mutable_container() = container();
  e.set_text("t\n");
  e.set_structured(true);
  e.set_victim(true);
  auto* p = e.add_protections();
  p->set_target("jobs/batch/hog");
  p->set_rung(3);
  p->set_confirmed(true);
  *e.add_decisions() = *d;
  auto* b = e.add_blame();
  b->set_victim("prod/web-0/nginx");
  b->set_preemptions(12);
  b->set_score(0.9);
  b->set_blamed(true);
  const json ex = parse(explainJson(e));
  EXPECT_EQ(ex["blame"][0]["victim"], "prod/web-0/nginx");
  EXPECT_EQ(ex["blame"][0]["preemptions"], 12.0);
  EXPECT_EQ(ex["blame"][0]["blamed"], true);
  expectContainer(ex["container"]);
  EXPECT_EQ(ex["victim"], true);
  EXPECT_EQ(ex["protections"][0]["target"], "jobs/batch/hog");
  EXPECT_EQ(ex["protections"][0]["rung"], 3);
  EXPECT_EQ(ex["protections"][0]["confirmed"], true);
  EXPECT_TRUE(ex["restrictions"].is_array());
  EXPECT_EQ(ex["decisions"][0]["seq"], 7);
}

TEST(CtlJson, ConfigShow) {
  control::v1::ConfigShowReply r;
  r.set_path("/etc/colod/colod.yaml");
  auto* v = r.add_values();
  v->set_key("daemon.mode");
  v->set_value("dry-run");
  v->set_source(control::v1::ConfigValue::SOURCE_COMMAND_LINE);
  v->set_flag("--mode");
  const json doc = parse(configShowJson(r));
  EXPECT_EQ(doc["path"], "/etc/colod/colod.yaml");
  EXPECT_EQ(doc["values"][0], (json{{"key", "daemon.mode"},
                                    {"value", "dry-run"},
                                    {"source", "command_line"},
                                    {"flag", "--mode"},
                                    {"note", ""}}));
}

TEST(CtlJson, DumpIsTheDaemonsDocumentAndRendersAsText) {
  const std::string daemon =
      R"({"status":{"mode":"act"},"containers":[{"id":"abc","namespace":"prod","pod":"web",)"
      R"("name":"server","tier":"ls","runq":{"p50_us":3,"p99_us":70},"quota_us":-1,)"
      R"("preempted_by":[{"container":"/","preemptions":2}]}],"applied":[],)"
      R"("decisions":[{"seq":1,"kind":"engage"}]})";
  const json doc = parse(ASSERT_OK(dumpJson(daemon)));
  EXPECT_EQ(doc["containers"][0]["tier"], "ls");
  const std::string t = ASSERT_OK(dumpTable(daemon));
  EXPECT_NE(t.find("status:\n  mode: act\n"), std::string::npos) << t;
  EXPECT_NE(t.find("prod/web/server"), std::string::npos) << t;
  EXPECT_NE(t.find("host (root cgroup):2"), std::string::npos) << t;
  EXPECT_NE(t.find("applied:\n  (none)\n"), std::string::npos) << t;
  EXPECT_NE(t.find("decisions:\n  seq=1 kind=engage\n"), std::string::npos) << t;
  EXPECT_ERR(dumpJson("not json"), EINVAL, "not JSON");
}

}  // namespace
}  // namespace colod::ctl
