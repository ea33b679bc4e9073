// SPDX-License-Identifier: Apache-2.0
#include "format.h"

#include <gtest/gtest.h>

namespace colod::ctl {
namespace {

TEST(CtlFormat, Durations) {
  EXPECT_EQ(formatDurationNs(0), "0");
  EXPECT_EQ(formatDurationNs(340'000), "340us");
  EXPECT_EQ(formatDurationNs(2'500'000), "2.5ms");
  EXPECT_EQ(formatDurationNs(1'200'000'000), "1.20s");
  EXPECT_EQ(formatQuota(-1, 100000), "-");
  EXPECT_EQ(formatQuota(50000, 100000), "0.50");
}

TEST(CtlFormat, TopTable) {
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
  const std::string t = formatTop(list, nullptr);
  EXPECT_NE(t.find("CONTAINER"), std::string::npos);
  EXPECT_NE(t.find("prod/web-0/nginx"), std::string::npos);
  EXPECT_NE(t.find("4096"), std::string::npos);
  EXPECT_NE(t.find("jobs/batch/hog:10"), std::string::npos);
  EXPECT_NE(t.find("25.0ms"), std::string::npos);
  EXPECT_NE(t.find("0.50"), std::string::npos);
  EXPECT_NE(t.find(" *\n"), std::string::npos);  // managed marker
  EXPECT_EQ(std::count(t.begin(), t.end(), '\n'), 3);
  EXPECT_NE(formatTop({}, nullptr).find("no containers known"), std::string::npos);
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
  s.set_reconcile_pending(1);
  s.set_reconcile_oldest_pending_ms(1500);
  EXPECT_NE(formatStatus(s).find("pending: 1 containers (oldest 1500 ms)"), std::string::npos);
}

}  // namespace
}  // namespace colod::ctl
