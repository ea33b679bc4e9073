// SPDX-License-Identifier: Apache-2.0
#include "colod/daemon/config.h"

#include <gtest/gtest.h>

#include "colod/testing/result_matchers.h"

namespace colod::daemon {
namespace {

TEST(DaemonConfig, EmptyDocumentGivesDefaults) {
  auto c = ASSERT_OK(parseConfig("", "c.yaml"));
  EXPECT_EQ(c.daemon, DaemonSettings{});
  EXPECT_EQ(c.policy, policy::Config{});
  EXPECT_EQ(c.daemon.metrics_listen, "127.0.0.1:9477");
  EXPECT_EQ(c.daemon.control_socket_mode, 0600U);
  EXPECT_TRUE(c.daemon.restore_on_stop);
}

TEST(DaemonConfig, ParsesEveryDaemonKey) {
  auto c = ASSERT_OK(parseConfig(R"(
daemon:
  interval_ms: 250
  nri_socket: /tmp/nri.sock
  plugin_name: colod-test
  plugin_idx: "07"
  mode: dry-run
  cgroup_root: /tmp/cg
  cgroup_driver: systemd
  systemd_cgroup_prefix: /peer-1
  proc_root: /tmp/proc
  sys_root: /tmp/sys
  control_socket: /tmp/c.sock
  control_socket_mode: "0660"
  metrics_listen: ""
  journal_path: /tmp/j.json
  journal_max_entries: 10
  restore_on_stop: false
  reconcile: reseed
  log_format: json
  log_level: debug
  update_retries: 5
  max_batch: 8
  max_cgroups: 128
  bpf_map_budget_mib: 0
  decisions_kept: 32
  event_wait_threshold_us: 0
  realtime_priority: 5
policy:
  thresholds:
    runq_p99_us: 900
)",
                                 "c.yaml"));
  const auto& d = c.daemon;
  EXPECT_EQ(d.interval.count(), 250);
  EXPECT_EQ(d.nri_socket, "/tmp/nri.sock");
  EXPECT_EQ(d.plugin_idx, "07");
  EXPECT_EQ(d.mode, Mode::DryRun);
  EXPECT_EQ(d.cgroup_driver, CgroupDriver::Systemd);
  EXPECT_EQ(d.systemd_cgroup_prefix, "/peer-1");
  EXPECT_EQ(d.control_socket_mode, 0660U);
  EXPECT_EQ(d.metrics_listen, "");
  EXPECT_FALSE(d.restore_on_stop);
  EXPECT_EQ(d.event_wait_threshold_us, 0U) << "0 turns event-driven detection off";
  EXPECT_EQ(d.realtime_priority, 5U);
  EXPECT_EQ(DaemonSettings{}.realtime_priority, 0U) << "realtime is opt-in";
  EXPECT_EQ(d.reconcile, Reconcile::Reseed);
  EXPECT_EQ(d.log_format, LogFormat::Json);
  EXPECT_EQ(d.update_retries, 5U);
  EXPECT_EQ(d.bpf_map_budget_mib, 0U) << "0: no budget";
  EXPECT_EQ(DaemonSettings{}.bpf_map_budget_mib, 46U);
  EXPECT_EQ(c.policy.thresholds.runq_p99_us, 900U);
}

TEST(DaemonConfig, PreciseErrors) {
  EXPECT_ERR(parseConfig("daemon:\n  interval_ms: 5\n", "a.yaml"), EINVAL,
             R"(^a\.yaml:2:16: daemon\.interval_ms: '5': out of range \[10, 60000\])");
  EXPECT_ERR(parseConfig("daemon:\n  intervall_ms: 100\n", "a.yaml"), EINVAL,
             R"(^a\.yaml:2:3: daemon\.intervall_ms: unknown key \(known: .*interval_ms)");
  EXPECT_ERR(parseConfig("deamon: {}\n", "a.yaml"), EINVAL,
             R"(^a\.yaml:1:1: deamon: unknown top-level key)");
  EXPECT_ERR(parseConfig("daemon:\n  mode: fast\n", "a.yaml"), EINVAL,
             R"(daemon\.mode: 'fast': expected one of: act, dry-run, observe-only)");
  EXPECT_ERR(parseConfig("daemon:\n  control_socket_mode: \"0666\"\n", "a.yaml"), EINVAL,
             "must not grant access to others");
  EXPECT_ERR(parseConfig("daemon:\n  plugin_idx: 5\n", "a.yaml"), EINVAL, "two digits");
  EXPECT_ERR(parseConfig("daemon:\n  realtime_priority: 100\n", "a.yaml"), EINVAL,
             R"(daemon\.realtime_priority: '100': out of range \[0, 99\])");
  EXPECT_ERR(parseConfig("daemon:\n  restore_on_stop: maybe\n", "a.yaml"), EINVAL,
             "expected true or false");
  EXPECT_ERR(parseConfig("daemon: [1, 2]\n", "a.yaml"), EINVAL, "daemon: .*expected a mapping");
  EXPECT_ERR(parseConfig("daemon:\n  nri_socket: [a]\n", "a.yaml"), EINVAL, "expected a string");
  EXPECT_ERR(parseConfig("daemon: {interval_ms: 100\n", "a.yaml"), EINVAL, "YAML syntax");
  EXPECT_ERR(parseConfig("- 1\n", "a.yaml"), EINVAL, "top level: expected a mapping");
}

TEST(DaemonConfig, PolicyErrorsComeFromThePolicyParser) {
  auto r = parseConfig("policy:\n  thresholds:\n    runq_p99_us: -4\n", "p.yaml");
  ASSERT_FALSE(r.has_value());
  EXPECT_NE(r.error().message().find("p.yaml:3"), std::string::npos) << r.error().message();
  EXPECT_NE(r.error().message().find("runq_p99_us"), std::string::npos) << r.error().message();
  EXPECT_ERR(parseConfig("policy:\n  nonsense: 1\n", "p.yaml"), EINVAL, "nonsense");
}

TEST(DaemonConfig, RestartOnlyChanges) {
  DaemonSettings a;
  DaemonSettings b = a;
  EXPECT_EQ(restartOnlyChanges(a, b), "");
  b.interval = std::chrono::milliseconds(500);
  b.mode = Mode::DryRun;
  EXPECT_EQ(restartOnlyChanges(a, b), "");
  b.control_socket = "/x";
  b.journal_path = "/y";
  EXPECT_EQ(restartOnlyChanges(a, b), "control_socket, journal_path");
  b.realtime_priority = 1;  // the threads' policy is set once, at start
  EXPECT_EQ(restartOnlyChanges(a, b), "control_socket, journal_path, realtime_priority");
}

TEST(DaemonConfig, PolicySectionForTraces) {
  const std::string doc =
      "daemon:\n  interval_ms: 100\npolicy:\n  thresholds:\n    runq_p99_us: 700\n";
  auto section = policySectionYaml(doc);
  auto parsed = ASSERT_OK(policy::parsePolicySection(section, "header"));
  EXPECT_EQ(parsed.thresholds.runq_p99_us, 700U);
  EXPECT_EQ(policySectionYaml("daemon: {}\n"), std::string(policy::defaultConfigYaml()));
}

TEST(DaemonConfig, LoadMissingFile) {
  EXPECT_ERR(loadConfig("/nonexistent/colod.yaml"), ENOENT, "reading config");
}

}  // namespace
}  // namespace colod::daemon

namespace colod::daemon {
namespace {

// A reload takes the file's reloadable settings, keeps restart-only ones, and the command line
// still wins (issue #14: --mode observe-only became act after a reload).
TEST(ConfigReload, CommandLineOverridesSurviveAReload) {
  DaemonSettings running;
  running.mode = Mode::ObserveOnly;  // from --mode
  running.log_level = "debug";       // from --log-level
  running.control_socket = "/run/a.sock";
  DaemonSettings next;
  next.mode = Mode::Act;
  next.log_level = "info";
  next.interval = std::chrono::milliseconds(250);
  next.control_socket = "/run/b.sock";
  next.stop_timeout = std::chrono::milliseconds(1234);
  const SettingsOverrides cli{.mode = Mode::ObserveOnly, .log_level = "debug", .log_format = {}};
  const DaemonSettings merged = mergeReload(running, next, cli);
  EXPECT_EQ(merged.mode, Mode::ObserveOnly);
  EXPECT_EQ(merged.log_level, "debug");
  EXPECT_EQ(merged.interval, std::chrono::milliseconds(250));
  EXPECT_EQ(merged.stop_timeout, std::chrono::milliseconds(1234));
  EXPECT_EQ(merged.control_socket, "/run/a.sock") << "restart-only";
  // Without overrides the file decides.
  EXPECT_EQ(mergeReload(running, next, {}).mode, Mode::Act);
}

TEST(ConfigReload, StopTimeoutIsParsed) {
  auto c = parseConfig("daemon:\n  stop_timeout_ms: 2500\n", "t.yaml");
  ASSERT_TRUE(c.has_value()) << c.error().message();
  EXPECT_EQ(c->daemon.stop_timeout, std::chrono::milliseconds(2500));
  EXPECT_FALSE(parseConfig("daemon:\n  stop_timeout_ms: -1\n", "t.yaml").has_value());
}

}  // namespace
}  // namespace colod::daemon

namespace colod::daemon {
namespace {

TEST(ConfigFile, ADuplicateKeyIsAnError) {
  auto r = parseConfig("daemon:\n  interval_ms: 100\n  interval_ms: 200\n", "c.yaml");
  ASSERT_FALSE(r.has_value());
  EXPECT_NE(r.error().message().find("c.yaml:3:3: daemon.interval_ms: duplicate key"),
            std::string::npos)
      << r.error().message();
  EXPECT_FALSE(parseConfig("policy:\n  thresholds: {runq_p99_us: 1, runq_p99_us: 2}\n", "c.yaml")
                   .has_value());
}

TEST(ConfigFile, ADirectoryIsNotAConfigFile) {
  auto r = loadConfig("/tmp");
  ASSERT_FALSE(r.has_value());
  EXPECT_EQ(r.error().errnoValue(), EISDIR);
  EXPECT_NE(r.error().message().find("is a directory"), std::string::npos);
}

}  // namespace
}  // namespace colod::daemon
