// SPDX-License-Identifier: Apache-2.0
#include "colod/daemon/config.h"

#include <yaml-cpp/yaml.h>

#include <cerrno>
#include <cctype>
#include <charconv>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <set>
#include <sstream>

namespace colod::daemon {

std::string_view modeName(Mode mode) {
  switch (mode) {
    case Mode::Act:
      return "act";
    case Mode::DryRun:
      return "dry-run";
    case Mode::ObserveOnly:
      return "observe-only";
  }
  return "act";
}

std::string_view driverName(CgroupDriver driver) {
  switch (driver) {
    case CgroupDriver::Auto:
      return "auto";
    case CgroupDriver::Systemd:
      return "systemd";
    case CgroupDriver::Cgroupfs:
      return "cgroupfs";
  }
  return "auto";
}

namespace {

std::string where(std::string_view file, const YAML::Node& node) {
  const auto m = node.Mark();
  if (m.line < 0) {
    return std::string(file);
  }
  return std::string(file) + ":" + std::to_string(m.line + 1) + ":" + std::to_string(m.column + 1);
}

Error bad(std::string_view file,
          const YAML::Node& node,
          const std::string& key,
          const std::string& why) {
  std::string value = node.IsScalar() ? node.Scalar() : std::string("<") +
                                                            (node.IsMap() ? "mapping" : "sequence") +
                                                            ">";
  return Error(EINVAL, where(file, node) + ": " + key + ": '" + value + "': " + why);
}

template <typename T>
Result<T> parseUnsigned(std::string_view file,
                        const YAML::Node& node,
                        const std::string& key,
                        T lo,
                        T hi) {
  if (!node.IsScalar()) {
    return bad(file, node, key, "expected an integer");
  }
  const std::string& s = node.Scalar();
  uint64_t v = 0;
  auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc() || end != s.data() + s.size()) {
    return bad(file, node, key, "expected an integer");
  }
  if (v < lo || v > hi) {
    return bad(file, node, key,
               "out of range [" + std::to_string(lo) + ", " + std::to_string(hi) + "]");
  }
  return static_cast<T>(v);
}

Result<std::string> parseString(std::string_view file,
                                const YAML::Node& node,
                                const std::string& key,
                                bool allow_empty) {
  if (!node.IsScalar() && !node.IsNull()) {
    return bad(file, node, key, "expected a string");
  }
  std::string s = node.IsNull() ? "" : node.Scalar();
  if (!allow_empty && s.empty()) {
    return bad(file, node, key, "must not be empty");
  }
  return s;
}

Result<bool> parseBool(std::string_view file, const YAML::Node& node, const std::string& key) {
  if (node.IsScalar()) {
    const std::string& s = node.Scalar();
    if (s == "true") {
      return true;
    }
    if (s == "false") {
      return false;
    }
  }
  return bad(file, node, key, "expected true or false");
}

template <typename E>
Result<E> parseEnum(std::string_view file,
                    const YAML::Node& node,
                    const std::string& key,
                    const std::map<std::string, E>& names) {
  std::string all;
  for (const auto& [n, v] : names) {
    all += (all.empty() ? "" : ", ") + n;
  }
  if (node.IsScalar()) {
    auto it = names.find(node.Scalar());
    if (it != names.end()) {
      return it->second;
    }
  }
  return bad(file, node, key, "expected one of: " + all);
}

Result<void> parseDaemon(std::string_view file, const YAML::Node& d, DaemonSettings& s) {
  if (d.IsNull()) {
    return {};
  }
  if (!d.IsMap()) {
    return bad(file, d, "daemon", "expected a mapping");
  }
  using Setter = std::function<Result<void>(const YAML::Node&, const std::string&)>;
  auto str = [&](std::string& out, bool allow_empty) -> Setter {
    return [&out, allow_empty, file](const YAML::Node& n, const std::string& k) -> Result<void> {
      auto v = parseString(file, n, k, allow_empty);
      if (!v) {
        return std::move(v).error();
      }
      out = *v;
      return {};
    };
  };
  auto u32 = [&](uint32_t& out, uint32_t lo, uint32_t hi) -> Setter {
    return [&out, lo, hi, file](const YAML::Node& n, const std::string& k) -> Result<void> {
      auto v = parseUnsigned<uint32_t>(file, n, k, lo, hi);
      if (!v) {
        return std::move(v).error();
      }
      out = *v;
      return {};
    };
  };
  const std::map<std::string, Setter> keys = {
      {"interval_ms",
       [&](const YAML::Node& n, const std::string& k) -> Result<void> {
         auto v = parseUnsigned<uint32_t>(file, n, k, 10, 60000);
         if (!v) {
           return std::move(v).error();
         }
         s.interval = std::chrono::milliseconds(*v);
         return {};
       }},
      {"nri_socket", str(s.nri_socket, false)},
      {"plugin_name", str(s.plugin_name, false)},
      {"plugin_idx",
       [&](const YAML::Node& n, const std::string& k) -> Result<void> {
         auto v = parseString(file, n, k, false);
         if (!v) {
           return std::move(v).error();
         }
         if (v->size() != 2 || !std::isdigit(static_cast<unsigned char>((*v)[0])) ||
             !std::isdigit(static_cast<unsigned char>((*v)[1]))) {
           return bad(file, n, k, "expected two digits, e.g. \"50\"");
         }
         s.plugin_idx = *v;
         return {};
       }},
      {"mode",
       [&](const YAML::Node& n, const std::string& k) -> Result<void> {
         auto v = parseEnum<Mode>(file, n, k,
                                  {{"act", Mode::Act},
                                   {"dry-run", Mode::DryRun},
                                   {"observe-only", Mode::ObserveOnly}});
         if (!v) {
           return std::move(v).error();
         }
         s.mode = *v;
         return {};
       }},
      {"cgroup_root", str(s.cgroup_root, false)},
      {"cgroup_driver",
       [&](const YAML::Node& n, const std::string& k) -> Result<void> {
         auto v = parseEnum<CgroupDriver>(file, n, k,
                                          {{"auto", CgroupDriver::Auto},
                                           {"systemd", CgroupDriver::Systemd},
                                           {"cgroupfs", CgroupDriver::Cgroupfs}});
         if (!v) {
           return std::move(v).error();
         }
         s.cgroup_driver = *v;
         return {};
       }},
      {"systemd_cgroup_prefix", str(s.systemd_cgroup_prefix, true)},
      {"proc_root", str(s.proc_root, false)},
      {"sys_root", str(s.sys_root, false)},
      {"control_socket", str(s.control_socket, false)},
      {"control_socket_mode",
       [&](const YAML::Node& n, const std::string& k) -> Result<void> {
         auto v = parseString(file, n, k, false);
         if (!v) {
           return std::move(v).error();
         }
         unsigned mode = 0;
         auto [end, ec] = std::from_chars(v->data(), v->data() + v->size(), mode, 8);
         if (ec != std::errc() || end != v->data() + v->size() || mode > 0777) {
           return bad(file, n, k, "expected an octal file mode such as \"0600\"");
         }
         if ((mode & 0007) != 0) {
           return bad(file, n, k, "must not grant access to others (the API changes cgroups)");
         }
         s.control_socket_mode = mode;
         return {};
       }},
      {"metrics_listen", str(s.metrics_listen, true)},
      {"journal_path", str(s.journal_path, false)},
      {"journal_max_entries", u32(s.journal_max_entries, 1, 1U << 20)},
      {"restore_on_stop",
       [&](const YAML::Node& n, const std::string& k) -> Result<void> {
         auto v = parseBool(file, n, k);
         if (!v) {
           return std::move(v).error();
         }
         s.restore_on_stop = *v;
         return {};
       }},
      {"reconcile",
       [&](const YAML::Node& n, const std::string& k) -> Result<void> {
         auto v = parseEnum<Reconcile>(file, n, k,
                                       {{"restore", Reconcile::Restore},
                                        {"reseed", Reconcile::Reseed}});
         if (!v) {
           return std::move(v).error();
         }
         s.reconcile = *v;
         return {};
       }},
      {"log_format",
       [&](const YAML::Node& n, const std::string& k) -> Result<void> {
         auto v = parseEnum<LogFormat>(file, n, k,
                                       {{"text", LogFormat::Text}, {"json", LogFormat::Json}});
         if (!v) {
           return std::move(v).error();
         }
         s.log_format = *v;
         return {};
       }},
      {"log_level",
       [&](const YAML::Node& n, const std::string& k) -> Result<void> {
         auto v = parseEnum<std::string>(file, n, k,
                                         {{"trace", "trace"},
                                          {"debug", "debug"},
                                          {"info", "info"},
                                          {"warn", "warn"},
                                          {"error", "error"}});
         if (!v) {
           return std::move(v).error();
         }
         s.log_level = *v;
         return {};
       }},
      {"update_retries", u32(s.update_retries, 1, 100)},
      {"max_batch", u32(s.max_batch, 1, 4096)},
      {"drop_capabilities",
       [&](const YAML::Node& n, const std::string& k) -> Result<void> {
         auto v = parseBool(file, n, k);
         if (!v) {
           return std::move(v).error();
         }
         s.drop_capabilities = *v;
         return {};
       }},
      {"stop_timeout_ms",
       [&](const YAML::Node& n, const std::string& k) -> Result<void> {
         uint32_t ms = 0;
         auto r = u32(ms, 0, 600000)(n, k);
         if (!r) {
           return r;
         }
         s.stop_timeout = std::chrono::milliseconds(ms);
         return {};
       }},
      {"event_wait_threshold_us", u32(s.event_wait_threshold_us, 0, 1000000)},
      {"realtime_priority", u32(s.realtime_priority, 0, 99)},
      {"max_cgroups", u32(s.max_cgroups, 64, 1U << 20)},
      {"bpf_map_budget_mib", u32(s.bpf_map_budget_mib, 0, 1U << 20)},
      {"decisions_kept", u32(s.decisions_kept, 16, 1U << 16)},
  };
  for (const auto& kv : d) {
    const std::string key = kv.first.as<std::string>();
    auto it = keys.find(key);
    if (it == keys.end()) {
      std::string known;
      for (const auto& [k, f] : keys) {
        known += (known.empty() ? "" : ", ") + k;
      }
      return Error(EINVAL, where(file, kv.first) + ": daemon." + key + ": unknown key (known: " +
                               known + ")");
    }
    auto r = it->second(kv.second, "daemon." + key);
    if (!r) {
      return r;
    }
  }
  return {};
}

}  // namespace

namespace {

// yaml-cpp keeps the last of two equal keys in a mapping without a word; an operator who wrote
// a key twice meant one of them. The first repeated key, with where it is repeated.
Result<void> rejectDuplicateKeys(const YAML::Node& node, std::string_view file,
                                 const std::string& path) {
  if (node.IsMap()) {
    std::set<std::string> seen;
    for (const auto& kv : node) {
      const std::string key = kv.first.Scalar();
      const std::string here = path.empty() ? key : path + "." + key;
      if (!seen.insert(key).second) {
        return Error(EINVAL, where(file, kv.first) + ": " + here +
                                 ": duplicate key (each key may appear once)");
      }
      if (auto r = rejectDuplicateKeys(kv.second, file, here); !r) {
        return r;
      }
    }
  } else if (node.IsSequence()) {
    for (const auto& item : node) {
      if (auto r = rejectDuplicateKeys(item, file, path); !r) {
        return r;
      }
    }
  }
  return {};
}

}  // namespace

Result<Config> parseConfig(std::string_view yaml_text, std::string_view file) {
  Config out;
  out.text = std::string(yaml_text);
  out.path = std::string(file);
  YAML::Node root;
  try {
    root = YAML::Load(std::string(yaml_text));
  } catch (const YAML::Exception& e) {
    return Error(EINVAL, std::string(file) + ":" + std::to_string(e.mark.line + 1) + ":" +
                             std::to_string(e.mark.column + 1) + ": YAML syntax: " + e.msg);
  }
  if (auto dup = rejectDuplicateKeys(root, file, ""); !dup) {
    return std::move(dup).error();
  }
  if (!root.IsNull() && !root.IsMap()) {
    return Error(EINVAL, where(file, root) + ": top level: expected a mapping with daemon: and "
                                             "policy:");
  }
  try {
    if (root.IsMap()) {
      for (const auto& kv : root) {
        const std::string key = kv.first.as<std::string>();
        if (key != "daemon" && key != "policy") {
          return Error(EINVAL, where(file, kv.first) + ": " + key +
                                   ": unknown top-level key (known: daemon, policy)");
        }
      }
      if (root["daemon"]) {
        auto r = parseDaemon(file, root["daemon"], out.daemon);
        if (!r) {
          return std::move(r).error();
        }
      }
    }
  } catch (const YAML::Exception& e) {
    return Error(EINVAL, std::string(file) + ": " + e.what());
  }
  auto pol = policy::parseConfigDocument(yaml_text, file);
  if (!pol) {
    return std::move(pol).error();
  }
  out.policy = std::move(pol).value();
  return out;
}

Result<Config> loadConfig(const std::string& path) {
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec)) {
    // A ConfigMap mounted as a directory must not silently run on the built-in defaults.
    return COLOD_ERR(EISDIR, path, " is a directory, not a configuration file (a mounted "
                                   "ConfigMap: pass the file in it, e.g. ",
                     path, "/config.yaml)");
  }
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    return COLOD_ERR(errno != 0 ? errno : ENOENT, "reading config ", path);
  }
  std::ostringstream ss;
  ss << in.rdbuf();
  if (ss.str().size() > (1U << 20)) {
    return COLOD_ERR(EFBIG, "config ", path, " is larger than 1 MiB");
  }
  auto parsed = parseConfig(ss.str(), path);
  if (parsed) {
    parsed->loaded_unix_ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                                 std::chrono::system_clock::now().time_since_epoch())
                                 .count();
  }
  return parsed;
}

std::string policySectionYaml(std::string_view yaml_text) {
  try {
    const YAML::Node root = YAML::Load(std::string(yaml_text));
    if (root.IsMap() && root["policy"] && !root["policy"].IsNull()) {
      YAML::Emitter out;
      out << root["policy"];
      return std::string(out.c_str()) + "\n";
    }
  } catch (const YAML::Exception&) {
    // Only called on text that already parsed; fall through to the defaults.
  }
  return std::string(policy::defaultConfigYaml());
}

std::string restartOnlyChanges(const DaemonSettings& a, const DaemonSettings& b) {
  std::string out;
  auto check = [&](bool differ, const char* name) {
    if (differ) {
      out += (out.empty() ? "" : ", ") + std::string(name);
    }
  };
  check(a.nri_socket != b.nri_socket, "nri_socket");
  check(a.plugin_name != b.plugin_name, "plugin_name");
  check(a.plugin_idx != b.plugin_idx, "plugin_idx");
  check(a.cgroup_root != b.cgroup_root, "cgroup_root");
  check(a.proc_root != b.proc_root, "proc_root");
  check(a.sys_root != b.sys_root, "sys_root");
  check(a.control_socket != b.control_socket, "control_socket");
  check(a.control_socket_mode != b.control_socket_mode, "control_socket_mode");
  check(a.metrics_listen != b.metrics_listen, "metrics_listen");
  check(a.journal_path != b.journal_path, "journal_path");
  check(a.max_cgroups != b.max_cgroups, "max_cgroups");
  check(a.bpf_map_budget_mib != b.bpf_map_budget_mib, "bpf_map_budget_mib");
  check(a.log_format != b.log_format, "log_format");
  check(a.decisions_kept != b.decisions_kept, "decisions_kept");
  check(a.max_batch != b.max_batch, "max_batch");
  check(a.drop_capabilities != b.drop_capabilities, "drop_capabilities");
  check(a.realtime_priority != b.realtime_priority, "realtime_priority");
  return out;
}

void SettingsOverrides::applyTo(DaemonSettings& settings) const {
  if (mode) {
    settings.mode = *mode;
  }
  if (log_level) {
    settings.log_level = *log_level;
  }
  if (log_format) {
    settings.log_format = *log_format;
  }
}

DaemonSettings mergeReload(const DaemonSettings& running,
                           const DaemonSettings& next,
                           const SettingsOverrides& overrides) {
  DaemonSettings merged = running;
  merged.interval = next.interval;
  merged.mode = next.mode;
  merged.cgroup_driver = next.cgroup_driver;
  merged.systemd_cgroup_prefix = next.systemd_cgroup_prefix;
  merged.restore_on_stop = next.restore_on_stop;
  merged.reconcile = next.reconcile;
  merged.log_level = next.log_level;
  merged.update_retries = next.update_retries;
  merged.stop_timeout = next.stop_timeout;
  merged.event_wait_threshold_us = next.event_wait_threshold_us;
  merged.journal_max_entries = next.journal_max_entries;
  overrides.applyTo(merged);
  return merged;
}

}  // namespace colod::daemon
