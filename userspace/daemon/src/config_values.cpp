// SPDX-License-Identifier: Apache-2.0
#include "colod/daemon/config_values.h"

#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cstdio>
#include <functional>
#include <utility>

namespace colod::daemon {

namespace {

// A string as YAML text: quoted when empty or when plain YAML would read it as something else
// (plugin_idx "50" and a socket mode "0600" are strings, not numbers).
std::string quoted(const std::string& s, bool always = false) {
  if (!always && !s.empty()) {
    return s;
  }
  return "\"" + s + "\"";
}

std::string boolText(bool b) { return b ? "true" : "false"; }

std::string reconcileName(Reconcile r) { return r == Reconcile::Restore ? "restore" : "reseed"; }

std::string formatName(LogFormat f) { return f == LogFormat::Text ? "text" : "json"; }

std::string octal(unsigned mode) {
  char buf[16];
  std::snprintf(buf, sizeof buf, "%04o", mode);
  return quoted(buf, true);
}

struct DaemonKey {
  const char* name;
  std::function<std::string(const DaemonSettings&)> text;
  const char* flag;  // the colod flag that overrides it, or nullptr
};

// DaemonSettings in declaration order. config_test checks that this names every key the parser
// accepts, so a new setting cannot be left out of `coloctl config show`.
const std::vector<DaemonKey>& daemonKeys() {
  static const std::vector<DaemonKey> keys = {
      {"interval_ms", [](const auto& s) { return std::to_string(s.interval.count()); }, nullptr},
      {"nri_socket", [](const auto& s) { return quoted(s.nri_socket); }, nullptr},
      {"plugin_name", [](const auto& s) { return quoted(s.plugin_name); }, nullptr},
      {"plugin_idx", [](const auto& s) { return quoted(s.plugin_idx, true); }, nullptr},
      {"mode", [](const auto& s) { return std::string(modeName(s.mode)); }, "--mode"},
      {"cgroup_root", [](const auto& s) { return quoted(s.cgroup_root); }, nullptr},
      {"cgroup_driver", [](const auto& s) { return std::string(driverName(s.cgroup_driver)); },
       nullptr},
      {"systemd_cgroup_prefix", [](const auto& s) { return quoted(s.systemd_cgroup_prefix); },
       nullptr},
      {"proc_root", [](const auto& s) { return quoted(s.proc_root); }, nullptr},
      {"sys_root", [](const auto& s) { return quoted(s.sys_root); }, nullptr},
      {"control_socket", [](const auto& s) { return quoted(s.control_socket); }, nullptr},
      {"control_socket_mode", [](const auto& s) { return octal(s.control_socket_mode); }, nullptr},
      {"metrics_listen", [](const auto& s) { return quoted(s.metrics_listen); }, nullptr},
      {"journal_path", [](const auto& s) { return quoted(s.journal_path); }, nullptr},
      {"journal_max_entries", [](const auto& s) { return std::to_string(s.journal_max_entries); },
       nullptr},
      {"restore_on_stop", [](const auto& s) { return boolText(s.restore_on_stop); }, nullptr},
      {"reconcile", [](const auto& s) { return reconcileName(s.reconcile); }, nullptr},
      {"log_format", [](const auto& s) { return formatName(s.log_format); }, "--log-format"},
      {"log_level", [](const auto& s) { return s.log_level; }, "--log-level"},
      {"update_retries", [](const auto& s) { return std::to_string(s.update_retries); }, nullptr},
      {"stop_timeout_ms", [](const auto& s) { return std::to_string(s.stop_timeout.count()); },
       nullptr},
      {"event_wait_threshold_us",
       [](const auto& s) { return std::to_string(s.event_wait_threshold_us); }, nullptr},
      {"drop_capabilities", [](const auto& s) { return boolText(s.drop_capabilities); }, nullptr},
      {"realtime_priority", [](const auto& s) { return std::to_string(s.realtime_priority); },
       nullptr},
      {"max_batch", [](const auto& s) { return std::to_string(s.max_batch); }, nullptr},
      {"max_cgroups", [](const auto& s) { return std::to_string(s.max_cgroups); }, nullptr},
      {"bpf_map_budget_mib", [](const auto& s) { return std::to_string(s.bpf_map_budget_mib); },
       nullptr},
      {"decisions_kept", [](const auto& s) { return std::to_string(s.decisions_kept); }, nullptr},
  };
  return keys;
}

bool overridden(const SettingsOverrides& o, std::string_view key) {
  return (key == "mode" && o.mode) || (key == "log_level" && o.log_level) ||
         (key == "log_format" && o.log_format);
}

std::string flowText(const YAML::Node& node) {
  if (node.IsNull()) {
    return "null";
  }
  if (node.IsMap() && node.size() == 0) {
    return "{}";
  }
  if (node.IsSequence() && node.size() == 0) {
    return "[]";
  }
  YAML::Emitter out;
  out << YAML::Flow << node;
  return out.c_str();
}

EffectiveValue leaf(std::string key, std::string value, ValueSource source) {
  EffectiveValue v;
  v.key = std::move(key);
  v.value = std::move(value);
  v.source = source;
  return v;
}

bool isBranch(const YAML::Node& node) { return node.IsMap() && node.size() > 0; }

// The built-in defaults with the file's values over them, leaf by leaf. Recursive over the
// nesting of the policy section (three or four levels).
void policyLeaves(const YAML::Node& def,  // NOLINT(misc-no-recursion)
                  const YAML::Node& file,
                  const std::string& prefix,
                  std::vector<EffectiveValue>& out) {
  const bool file_map = file.IsDefined() && file.IsMap();
  auto fileChild = [&](const std::string& key) -> YAML::Node {
    if (!file_map) {
      return YAML::Node(YAML::NodeType::Undefined);
    }
    for (const auto& kv : file) {
      if (kv.first.Scalar() == key) {
        return kv.second;
      }
    }
    return YAML::Node(YAML::NodeType::Undefined);
  };
  const YAML::Node none(YAML::NodeType::Undefined);
  if (def.IsDefined() && def.IsMap()) {
    for (const auto& kv : def) {
      const std::string key = kv.first.Scalar();
      const std::string path = prefix + key;
      const YAML::Node f = fileChild(key);
      if (isBranch(kv.second) && (!f.IsDefined() || f.IsNull() || f.IsMap())) {
        policyLeaves(kv.second, f.IsDefined() && !f.IsNull() ? f : none, path + ".", out);
        continue;
      }
      if (f.IsDefined() && isBranch(f)) {
        // A default that is an empty mapping ({}) the file fills (tier_thresholds.ls).
        policyLeaves(none, f, path + ".", out);
        continue;
      }
      out.push_back(leaf(path, flowText(f.IsDefined() ? f : kv.second),
                         f.IsDefined() ? ValueSource::File : ValueSource::Default));
    }
  }
  if (!file_map) {
    return;
  }
  // Keys the defaults do not have (the parser accepted them: e.g. under tier_thresholds).
  for (const auto& kv : file) {
    const std::string key = kv.first.Scalar();
    if (def.IsDefined() && def.IsMap() && def[key].IsDefined()) {
      continue;
    }
    if (isBranch(kv.second)) {
      policyLeaves(none, kv.second, prefix + key + ".", out);
    } else {
      out.push_back(leaf(prefix + key, flowText(kv.second), ValueSource::File));
    }
  }
}

YAML::Node loadOrNull(std::string_view text) {
  try {
    return YAML::Load(std::string(text));
  } catch (const YAML::Exception&) {
    // The running configuration parsed when it was loaded; this cannot fail on it.
    return YAML::Node();
  }
}

YAML::Node section(const YAML::Node& root, const char* name) {
  if (root.IsMap()) {
    for (const auto& kv : root) {
      if (kv.first.Scalar() == name) {
        return kv.second;
      }
    }
  }
  return YAML::Node(YAML::NodeType::Undefined);
}

}  // namespace

std::vector<EffectiveValue> effectiveValues(const Config& running,
                                            const SettingsOverrides& overrides) {
  std::vector<EffectiveValue> out;
  const YAML::Node root = loadOrNull(running.text);
  const YAML::Node daemon_file = section(root, "daemon");
  // The file as it is now, to tell a restart-only setting a reload could not apply.
  DaemonSettings file_settings;
  bool have_file = false;
  if (!running.text.empty()) {
    if (auto parsed = parseConfig(running.text, running.path)) {
      file_settings = parsed->daemon;
      have_file = true;
    }
  }
  for (const auto& k : daemonKeys()) {
    EffectiveValue v =
        leaf(std::string("daemon.") + k.name, k.text(running.daemon), ValueSource::Default);
    if (overridden(overrides, k.name)) {
      v.source = ValueSource::CommandLine;
      v.flag = k.flag;
    } else {
      const bool in_file = daemon_file.IsMap() && daemon_file[k.name].IsDefined();
      v.source = in_file ? ValueSource::File : ValueSource::Default;
      if (have_file) {
        const std::string wanted = k.text(file_settings);
        if (wanted != v.value) {
          v.note = "the file says " + wanted + "; takes effect after a restart";
        }
      }
    }
    out.push_back(std::move(v));
  }
  const std::size_t policy_begin = out.size();
  policyLeaves(loadOrNull(policy::defaultConfigYaml()), section(root, "policy"), "policy.", out);
  if (running.daemon.mode == Mode::DryRun) {
    // The daemon runs the engine with dry_run set whatever the policy section says.
    const EffectiveValue mode =
        *std::find_if(out.begin(), out.end(), [](const auto& v) { return v.key == "daemon.mode"; });
    for (std::size_t i = policy_begin; i < out.size(); ++i) {
      if (out[i].key == "policy.dry_run" && out[i].value != "true") {
        out[i].value = "true";
        out[i].source = mode.source;
        out[i].flag = mode.flag;
        out[i].note = "implied by daemon.mode: dry-run";
      }
    }
  }
  return out;
}

}  // namespace colod::daemon
