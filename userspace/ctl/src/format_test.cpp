// SPDX-License-Identifier: Apache-2.0
#include "format.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <sstream>
#include <vector>

#include "json.h"
#include "text.h"

namespace colod::ctl {
namespace {

std::vector<std::string> lines(const std::string& text) {
  std::vector<std::string> out;
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) {
    out.push_back(line);
  }
  return out;
}

// The display column where `needle` starts in `line` (code points, not bytes).
std::size_t columnOf(const std::string& line, const std::string& needle) {
  const auto at = line.find(needle);
  return at == std::string::npos ? std::string::npos : displayWidth(line.substr(0, at));
}

TEST(CtlFormat, Durations) {
  EXPECT_EQ(formatDurationNs(0), "0");
  EXPECT_EQ(formatDurationNs(340'000), "340us");
  EXPECT_EQ(formatDurationNs(2'500'000), "2.5ms");
  EXPECT_EQ(formatDurationNs(1'200'000'000), "1.20s");
  EXPECT_EQ(formatQuota(50000, 100000), "0.50");
}

// One way to write "no quota" (issue #16): "max", as cgroup v2's cpu.max and the daemon's
// "quota=max/100000" write it; "-" only when nothing is known.
TEST(CtlFormat, NoQuotaIsMax) {
  EXPECT_EQ(formatQuota(-1, 100000), "max");
  EXPECT_EQ(formatQuota(-1, 0), "max");
  EXPECT_EQ(formatQuota(0, 0), "-");
}

control::v1::ListContainersReply fleet() {
  control::v1::ListContainersReply list;
  auto* c = list.add_containers();
  c->set_namespace_("prod");
  c->set_pod("web-0");
  c->set_name("nginx");
  c->set_tier("ls");
  c->set_runq_p50_us(8);
  c->set_runq_p99_us(4096);
  c->set_preemptions(12);
  auto* a = c->add_preempted_by();
  a->set_container("jobs/batch/hog");
  a->set_preemptions(10);
  c->set_quota_us(-1);
  c->set_period_us(100000);
  c->set_shares(1024);
  auto* b = list.add_containers();
  b->set_namespace_("jobs");
  b->set_pod("batch");
  b->set_name("hog");
  b->set_tier("be");
  b->set_cpuset("1");
  b->set_quota_us(50000);
  b->set_period_us(100000);
  b->set_shares(2);
  b->set_managed(true);
  b->set_throttled_ns(25'000'000);
  return list;
}

TEST(CtlFormat, TopTable) {
  const auto list = fleet();
  const std::string t = formatTop(list, nullptr);
  EXPECT_NE(t.find("CONTAINER"), std::string::npos);
  EXPECT_NE(t.find("prod/web-0/nginx"), std::string::npos);
  EXPECT_NE(t.find("4096"), std::string::npos);
  EXPECT_NE(t.find("jobs/batch/hog:10"), std::string::npos);
  EXPECT_NE(t.find("25.0ms"), std::string::npos);
  EXPECT_NE(t.find("0.50"), std::string::npos);
  EXPECT_NE(t.find("  max "), std::string::npos) << t;  // the LS container has no quota
  EXPECT_NE(t.find(" *\n"), std::string::npos);         // managed marker
  EXPECT_EQ(std::count(t.begin(), t.end(), '\n'), 3);
  EXPECT_NE(formatTop({}, nullptr).find("no containers known"), std::string::npos);
}

// Issue #16: truncation counted bytes, so a clipped name ("…", 3 bytes) or any non-ASCII name
// pushed the rest of its row out of line. Every column starts at the same display column.
TEST(CtlFormat, TopColumnsLineUpWithClippedAndNonAsciiNames) {
  auto list = fleet();
  auto* longname = list.add_containers();
  longname->set_namespace_("very-long-namespace-name");
  longname->set_pod("a-pod-with-a-long-generated-name-7f9c8d");
  longname->set_name("sidecar");
  longname->set_tier("be");
  auto* utf8 = list.add_containers();
  utf8->set_namespace_("équipe");
  utf8->set_pod("µservice-0");
  utf8->set_name("café");
  utf8->set_tier("ls");
  auto* a = utf8->add_preempted_by();
  a->set_container("très/longue/aggresseur-de-calcul-µ");
  a->set_preemptions(3);
  const auto rows = lines(formatTop(list, nullptr));
  ASSERT_EQ(rows.size(), 5U);
  const std::size_t tier_col = columnOf(rows[0], "TIER");
  const std::size_t by_col = columnOf(rows[0], "PREEMPTED BY");
  const std::size_t shares_end = displayWidth(rows[0]);
  for (std::size_t i = 1; i < rows.size(); ++i) {
    const std::string tier = i == 2 || i == 3 ? "be " : "ls ";
    EXPECT_EQ(columnOf(rows[i], " " + tier) + 1, tier_col) << rows[i];
    const std::string row =
        rows[i].ends_with(" *") ? rows[i].substr(0, rows[i].size() - 2) : rows[i];
    EXPECT_EQ(displayWidth(row), shares_end) << rows[i];
  }
  EXPECT_NE(rows[3].find("…"), std::string::npos) << rows[3];  // the long name was clipped
  EXPECT_EQ(columnOf(rows[4], "…"), by_col) << rows[4];        // the aggressor too, in place
}

// The root cgroup as an aggressor read "/:14".
TEST(CtlFormat, RootCgroupIsNamed) {
  control::v1::ListContainersReply list;
  auto* c = list.add_containers();
  c->set_name("nginx");
  auto* a = c->add_preempted_by();
  a->set_container("/");
  a->set_preemptions(14);
  const std::string t = formatTop(list, nullptr);
  EXPECT_NE(t.find("host (root cgroup):14"), std::string::npos) << t;
  EXPECT_EQ(t.find("/:14"), std::string::npos) << t;
  EXPECT_EQ(formatWho("jobs/batch/hog"), "jobs/batch/hog");
}

TEST(CtlFormat, Decisions) {
  control::v1::DecisionsReply r;
  EXPECT_EQ(formatDecisions(r), "(no decisions yet)\n");
  auto* d = r.add_decisions();
  d->set_seq(7);
  d->set_kind("engage/cpu_shares");
  d->set_container("jobs/batch/hog");
  d->set_values("shares=2");
  d->set_outcome("applied");
  d->set_reason("victim prod/web-0/nginx p99 4096us > 2000us");
  const std::string t = formatDecisions(r);
  EXPECT_NE(t.find("#7"), std::string::npos);
  EXPECT_NE(t.find("engage/cpu_shares"), std::string::npos);
  EXPECT_NE(t.find("applied"), std::string::npos);
  EXPECT_NE(t.find("victim prod/web-0/nginx"), std::string::npos);
}

// Issue #16: lines were cut at 511 bytes (char buf[512]) and lost their newline, so the next
// decision ran on in the same line.
TEST(CtlFormat, LongDecisionsAreWholeLines) {
  control::v1::DecisionsReply r;
  const std::string reason = "escalate rung 3 (cpu_quota): " + std::string(2000, 'r') + " end";
  for (int i = 0; i < 2; ++i) {
    auto* d = r.add_decisions();
    d->set_seq(static_cast<uint64_t>(i));
    d->set_kind("escalate/cpu_quota");
    d->set_container("jobs/batch/hog");
    d->set_values("quota=20000/100000");
    d->set_outcome("applied");
    d->set_reason(reason);
  }
  const auto rows = lines(formatDecisions(r));
  ASSERT_EQ(rows.size(), 2U);
  for (const auto& row : rows) {
    EXPECT_TRUE(row.ends_with(reason)) << row.size();
  }
}

TEST(CtlFormat, ExplainShowsWhatProtectsAVictim) {
  control::v1::ExplainReply r;
  r.set_text("prod/web/server (abc)\n  tier: ls (from annotation)\n  victim now: yes\n");
  r.set_structured(true);
  r.set_victim(true);
  EXPECT_NE(formatExplain(r).find("protected by colod: nothing held for it now"),
            std::string::npos);
  auto* p = r.add_protections();
  p->set_target("jobs/batch/hog");
  p->set_victim("prod/web/server");
  p->set_lever("cpu_quota");
  p->set_rung(3);
  p->set_values("quota=20000/100000");
  p->set_runtime_own("quota=max/100000");
  p->set_confirmed(true);
  auto* d = r.add_decisions();
  d->set_seq(9);
  d->set_kind("escalate/cpu_quota");
  d->set_container("jobs/batch/hog");
  d->set_victim("prod/web/server");
  d->set_rung(3);
  const std::string t = formatExplain(r);
  EXPECT_NE(t.find("protected by colod"), std::string::npos) << t;
  EXPECT_NE(t.find("    jobs/batch/hog: cpu_quota rung 3: quota=20000/100000 (runtime's "
                   "own: quota=max/100000), confirmed by the runtime\n"),
            std::string::npos)
      << t;
  EXPECT_NE(t.find("  decisions:\n"), std::string::npos) << t;
  EXPECT_NE(t.find("#9"), std::string::npos) << t;
  // The other side: what colod holds on a BE target, for which victim.
  control::v1::ExplainReply be;
  be.set_structured(true);
  *be.add_restrictions() = *p;
  EXPECT_NE(formatExplain(be).find("    restriction: cpu_quota rung 3 for victim prod/web/server: "
                                   "quota=20000/100000 (runtime's own: quota=max/100000)"),
            std::string::npos)
      << formatExplain(be);
  // An older colod (no structured part): its text alone.
  control::v1::ExplainReply old;
  old.set_text("x\n");
  EXPECT_EQ(formatExplain(old), "x\n");
}

TEST(CtlFormat, ExplainShowsTheEvidenceAgainstABe) {
  control::v1::ExplainReply r;
  r.set_text("jobs/batch/innocent (abc)\n");
  r.set_structured(true);
  auto* b = r.add_blame();
  b->set_victim_id("web-id");
  b->set_victim("prod/web/server");
  b->set_preemptions(1.4);
  b->set_wait_us(250);
  b->set_overlap_us(0);
  b->set_score(0.05);
  b->set_why("not enough evidence: 1 preemptions, 250 us of wait (needs 3 and 1000 us)");
  const std::string t = formatExplain(r);
  EXPECT_NE(t.find("evidence against it"), std::string::npos) << t;
  EXPECT_NE(t.find("prod/web/server: 1 preemptions, 250 us wait, 0 us on its CPUs, 5% of the "
                   "evidence; not restricted"),
            std::string::npos)
      << t;
  EXPECT_NE(t.find("      not enough evidence"), std::string::npos) << t;
}

TEST(CtlFormat, ConfigShowSaysWhereEachValueComesFrom) {
  control::v1::ConfigShowReply r;
  r.set_path("/etc/colod/colod.yaml");
  r.set_yaml("daemon:\n  decisions_kept: 64\n");
  auto add = [&r](const std::string& key, const std::string& value,
                  control::v1::ConfigValue::Source source, const std::string& flag = "") {
    auto* v = r.add_values();
    v->set_key(key);
    v->set_value(value);
    v->set_source(source);
    v->set_flag(flag);
  };
  add("daemon.interval_ms", "100", control::v1::ConfigValue::SOURCE_DEFAULT);
  add("daemon.mode", "dry-run", control::v1::ConfigValue::SOURCE_COMMAND_LINE, "--mode");
  add("daemon.decisions_kept", "64", control::v1::ConfigValue::SOURCE_FILE);
  add("policy.thresholds.runq_p99_us", "2000", control::v1::ConfigValue::SOURCE_DEFAULT);
  add("policy.detection.victim_tiers", "[ls]", control::v1::ConfigValue::SOURCE_FILE);
  add("policy.thresholds.baseline_factor", "4.0", control::v1::ConfigValue::SOURCE_DEFAULT);
  const std::string t = formatConfigShow(r);
  const auto rows = lines(t);
  ASSERT_EQ(rows.size(), 12U) << t;
  EXPECT_NE(rows[0].find("/etc/colod/colod.yaml"), std::string::npos);
  EXPECT_EQ(rows[2], "daemon:");
  EXPECT_EQ(rows[3].rfind("  interval_ms: 100 ", 0), 0U) << rows[3];
  EXPECT_TRUE(rows[3].ends_with("# default")) << rows[3];
  EXPECT_TRUE(rows[4].ends_with("# command line (--mode)")) << rows[4];
  EXPECT_EQ(rows[5].rfind("  decisions_kept: 64", 0), 0U) << rows[5];
  EXPECT_TRUE(rows[5].ends_with("# file")) << rows[5];
  EXPECT_EQ(rows[6], "policy:");
  EXPECT_EQ(rows[7], "  thresholds:");  // grouped, although its keys were not adjacent
  EXPECT_EQ(rows[8].rfind("    runq_p99_us: 2000", 0), 0U) << rows[8];
  EXPECT_EQ(rows[9].rfind("    baseline_factor: 4.0", 0), 0U) << rows[9];
  EXPECT_EQ(rows[10], "  detection:");
  EXPECT_EQ(rows[11].rfind("    victim_tiers: [ls]", 0), 0U) << rows[11];
  // The comments line up.
  EXPECT_EQ(rows[3].find('#'), rows[8].find('#')) << t;
  // An older colod: the file, as before.
  control::v1::ConfigShowReply old;
  old.set_path("/etc/colod/colod.yaml");
  old.set_yaml("daemon:\n  decisions_kept: 64\n");
  EXPECT_EQ(formatConfigShow(old), "# /etc/colod/colod.yaml\ndaemon:\n  decisions_kept: 64\n");
}

// A value that is not simply the file's says why after its source.
TEST(CtlFormat, ConfigShowPrintsTheNote) {
  control::v1::ConfigShowReply r;
  auto* v = r.add_values();
  v->set_key("daemon.control_socket");
  v->set_value("/run/a.sock");
  v->set_source(control::v1::ConfigValue::SOURCE_FILE);
  v->set_note("the file says /run/b.sock; takes effect after a restart");
  const std::string t = formatConfigShow(r);
  EXPECT_NE(t.find("control_socket: /run/a.sock  # file; the file says /run/b.sock; takes effect "
                   "after a restart\n"),
            std::string::npos)
      << t;
  EXPECT_NE(configShowJson(r).find("\"note\": \"the file says /run/b.sock"), std::string::npos)
      << configShowJson(r);
}

// Failed attempts that were retried are not failures of the update: status says what is still
// pending (issue #14: "updates sent: 8 (failed 1)" for a failure whose retry succeeded).
TEST(CtlFormat, StatusSaysWhatIsPendingNotJustWhatFailed) {
  control::v1::StatusReply s;
  s.set_mode("act");
  s.set_updates_sent(8);
  s.set_update_failures(1);
  s.set_reconcile_tracked(2);
  const std::string settled = formatStatus(s);
  EXPECT_NE(settled.find("8 confirmed, 1 failed attempts (all retried); pending: none"),
            std::string::npos)
      << settled;
  EXPECT_NE(settled.find("held by colod:  2 containers"), std::string::npos) << settled;
  s.set_bpf_map_bytes(11 << 20);
  EXPECT_NE(formatStatus(s).find("bpf maps:       11.0 MiB\n"), std::string::npos)
      << formatStatus(s);
  s.set_reconcile_pending(1);
  s.set_reconcile_oldest_pending_ms(1500);
  EXPECT_NE(formatStatus(s).find("pending: 1 containers (oldest 1500 ms)"), std::string::npos);
}

// How long the runtime takes to answer: quantiles as the upper bounds of their log2 slots.
TEST(CtlFormat, StatusSaysHowLongTheRuntimeTakesToAnswer) {
  control::v1::StatusReply s;
  EXPECT_NE(formatStatus(s).find("runtime:        no UpdateContainers call yet\n"),
            std::string::npos)
      << formatStatus(s);
  for (int i = 0; i < 26; ++i) {
    s.add_update_rtt_slots(0);
  }
  s.set_update_rtt_slots(11, 98);  // [2.048, 4.096) ms
  s.set_update_rtt_slots(14, 2);   // [16.4, 32.8) ms
  const std::string t = formatStatus(s);
  EXPECT_NE(t.find("runtime:        answers UpdateContainers in p50 <= 4.096 ms, p99 <= 32.768 ms "
                   "(100 calls)\n"),
            std::string::npos)
      << t;
}

}  // namespace
}  // namespace colod::ctl
