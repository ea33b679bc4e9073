// SPDX-License-Identifier: Apache-2.0
#include "colod/daemon/config_values.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <set>

#include "colod/testing/result_matchers.h"

namespace colod::daemon {
namespace {

const EffectiveValue& find(const std::vector<EffectiveValue>& values, const std::string& key) {
  auto it = std::find_if(values.begin(), values.end(),
                         [&](const EffectiveValue& v) { return v.key == key; });
  if (it == values.end()) {
    static const EffectiveValue missing;
    ADD_FAILURE() << "no " << key;
    return missing;
  }
  return *it;
}

TEST(EffectiveValues, BuiltInDefaultsAreAllDefault) {
  const Config running;  // colod without --config
  const auto values = effectiveValues(running, {});
  ASSERT_FALSE(values.empty());
  for (const auto& v : values) {
    EXPECT_EQ(v.source, ValueSource::Default) << v.key;
    EXPECT_EQ(v.note, "") << v.key;
  }
  EXPECT_EQ(values.front().key, "daemon.interval_ms");
  EXPECT_EQ(find(values, "daemon.interval_ms").value, "100");
  EXPECT_EQ(find(values, "daemon.plugin_idx").value, "\"90\"");
  EXPECT_EQ(find(values, "daemon.control_socket_mode").value, "\"0600\"");
  EXPECT_EQ(find(values, "daemon.systemd_cgroup_prefix").value, "\"\"");
  EXPECT_EQ(find(values, "daemon.mode").value, "act");
  EXPECT_EQ(find(values, "policy.thresholds.runq_p99_us").value, "2000");
  EXPECT_EQ(find(values, "policy.actions.cpu_ladder").value, "[cpu_shares, cpuset, cpu_quota]");
  EXPECT_EQ(find(values, "policy.tier_thresholds").value, "{}");
  // daemon.* first, then policy.*.
  auto first_policy = std::find_if(values.begin(), values.end(),
                                   [](const auto& v) { return v.key.rfind("policy.", 0) == 0; });
  EXPECT_TRUE(std::all_of(first_policy, values.end(),
                          [](const auto& v) { return v.key.rfind("policy.", 0) == 0; }));
  // Keys are unique.
  std::set<std::string> keys;
  for (const auto& v : values) {
    EXPECT_TRUE(keys.insert(v.key).second) << v.key;
  }
}

// Every key the parser accepts under daemon: is shown (its error lists the known keys).
TEST(EffectiveValues, NamesEveryDaemonKeyTheParserKnows) {
  auto bad = parseConfig("daemon:\n  nosuch: 1\n", "c.yaml");
  ASSERT_FALSE(bad.has_value());
  std::string known = bad.error().context();
  known = known.substr(known.find("(known: ") + 8);
  known = known.substr(0, known.find(')'));
  std::set<std::string> parser_keys;
  for (std::size_t at = 0; at < known.size();) {
    const std::size_t comma = known.find(", ", at);
    parser_keys.insert(known.substr(at, comma == std::string::npos ? comma : comma - at));
    at = comma == std::string::npos ? known.size() : comma + 2;
  }
  std::set<std::string> shown;
  for (const auto& v : effectiveValues(Config{}, {})) {
    if (v.key.rfind("daemon.", 0) == 0) {
      shown.insert(v.key.substr(7));
    }
  }
  EXPECT_EQ(shown, parser_keys);
}

// Each shown value, written back into a file, parses to the same settings (the values are the
// YAML a person would write).
TEST(EffectiveValues, DaemonValuesAreValidYamlForTheirKey) {
  std::string doc = "daemon:\n";
  for (const auto& v : effectiveValues(Config{}, {})) {
    if (v.key.rfind("daemon.", 0) == 0) {
      doc += "  " + v.key.substr(7) + ": " + v.value + "\n";
    }
  }
  auto parsed = ASSERT_OK(parseConfig(doc, "roundtrip.yaml"));
  EXPECT_EQ(parsed.daemon, DaemonSettings{});
}

TEST(EffectiveValues, FileAndCommandLineSources) {
  const std::string text =
      "daemon:\n  interval_ms: 250\n  mode: observe-only\n  log_level: debug\n"
      "policy:\n  thresholds:\n    runq_p99_us: 900\n  tier_thresholds:\n    ls: {runq_p99_us: "
      "700}\n"
      "  actions:\n    cpu_ladder: [cpuset, cpu_quota]\n";
  auto running = ASSERT_OK(parseConfig(text, "/etc/colod/colod.yaml"));
  SettingsOverrides overrides;
  overrides.mode = Mode::Act;
  overrides.applyTo(running.daemon);
  const auto values = effectiveValues(running, overrides);

  EXPECT_EQ(find(values, "daemon.interval_ms").value, "250");
  EXPECT_EQ(find(values, "daemon.interval_ms").source, ValueSource::File);
  EXPECT_EQ(find(values, "daemon.log_level").source, ValueSource::File);
  EXPECT_EQ(find(values, "daemon.nri_socket").source, ValueSource::Default);
  const auto& mode = find(values, "daemon.mode");
  EXPECT_EQ(mode.value, "act");  // the flag wins over the file's observe-only
  EXPECT_EQ(mode.source, ValueSource::CommandLine);
  EXPECT_EQ(mode.flag, "--mode");
  EXPECT_EQ(find(values, "policy.thresholds.runq_p99_us").value, "900");
  EXPECT_EQ(find(values, "policy.thresholds.runq_p99_us").source, ValueSource::File);
  EXPECT_EQ(find(values, "policy.thresholds.baseline_factor").source, ValueSource::Default);
  EXPECT_EQ(find(values, "policy.tier_thresholds.ls.runq_p99_us").value, "700");
  EXPECT_EQ(find(values, "policy.tier_thresholds.ls.runq_p99_us").source, ValueSource::File);
  EXPECT_EQ(find(values, "policy.actions.cpu_ladder").value, "[cpuset, cpu_quota]");
  EXPECT_EQ(find(values, "policy.actions.cpu_ladder").source, ValueSource::File);
  EXPECT_EQ(find(values, "policy.actions.memory_ladder").source, ValueSource::Default);
}

// A reload cannot move a restart-only setting: the running value is shown, with what the file
// says now.
TEST(EffectiveValues, RestartOnlyChangeIsNoted) {
  auto running = ASSERT_OK(parseConfig("daemon:\n  control_socket: /run/a.sock\n", "c.yaml"));
  auto next = ASSERT_OK(
      parseConfig("daemon:\n  control_socket: /run/b.sock\n  interval_ms: 300\n", "c.yaml"));
  Config after = running;
  after.daemon = mergeReload(running.daemon, next.daemon, {});
  after.text = next.text;
  const auto values = effectiveValues(after, {});
  const auto& sock = find(values, "daemon.control_socket");
  EXPECT_EQ(sock.value, "/run/a.sock");
  EXPECT_EQ(sock.note, "the file says /run/b.sock; takes effect after a restart");
  EXPECT_EQ(find(values, "daemon.interval_ms").value, "300");
  EXPECT_EQ(find(values, "daemon.interval_ms").note, "");
}

TEST(EffectiveValues, DryRunModeImpliesPolicyDryRun) {
  Config running;
  SettingsOverrides overrides;
  overrides.mode = Mode::DryRun;
  overrides.applyTo(running.daemon);
  const auto values = effectiveValues(running, overrides);
  const auto& dry = find(values, "policy.dry_run");
  EXPECT_EQ(dry.value, "true");
  EXPECT_EQ(dry.source, ValueSource::CommandLine);
  EXPECT_EQ(dry.flag, "--mode");
  EXPECT_EQ(dry.note, "implied by daemon.mode: dry-run");
}

}  // namespace
}  // namespace colod::daemon
