// SPDX-License-Identifier: Apache-2.0
// Checks the deploy/ files: every YAML parses, the DaemonSet has the mounts and settings
// deploy/README.md promises, the ConfigMap's policy equals policy/config/default.yaml, the
// image recipe only uses packages install-deps.sh knows, and the systemd unit does not restart
// on a config error (exit 3).
#include <gtest/gtest.h>
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>
#include <string>
#include <vector>

namespace {

const std::filesystem::path kRoot = COLOD_SOURCE_DIR;

std::string readFile(const std::filesystem::path& p) {
  std::ifstream f(p);
  std::ostringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

// Deep equality of two YAML trees: maps by key set, sequences by order, scalars by text.
bool sameYaml(const YAML::Node& a, const YAML::Node& b, const std::string& path, std::string& why) {
  if (a.Type() != b.Type()) {
    why = path + ": node types differ";
    return false;
  }
  switch (a.Type()) {
    case YAML::NodeType::Map: {
      if (a.size() != b.size()) {
        why = path + ": different number of keys";
        return false;
      }
      for (const auto& kv : a) {
        const auto key = kv.first.as<std::string>();
        if (!b[key]) {
          why = path + "." + key + ": missing";
          return false;
        }
        if (!sameYaml(kv.second, b[key], path + "." + key, why)) {
          return false;
        }
      }
      return true;
    }
    case YAML::NodeType::Sequence:
      if (a.size() != b.size()) {
        why = path + ": different lengths";
        return false;
      }
      for (std::size_t i = 0; i < a.size(); ++i) {
        if (!sameYaml(a[i], b[i], path + "[" + std::to_string(i) + "]", why)) {
          return false;
        }
      }
      return true;
    case YAML::NodeType::Scalar:
      if (a.Scalar() != b.Scalar()) {
        why = path + ": " + a.Scalar() + " != " + b.Scalar();
        return false;
      }
      return true;
    default:
      return true;
  }
}

YAML::Node findDoc(const std::vector<YAML::Node>& docs, const std::string& kind) {
  for (const auto& d : docs) {
    if (d["kind"] && d["kind"].as<std::string>() == kind) {
      return d;
    }
  }
  return YAML::Node();
}

TEST(Deploy, DaemonSetParsesAndHasWhatTheReadmePromises) {
  const auto docs = YAML::LoadAllFromFile((kRoot / "deploy/daemonset.yaml").string());
  ASSERT_EQ(docs.size(), 2U);
  const YAML::Node ds = findDoc(docs, "DaemonSet");
  ASSERT_TRUE(ds) << "no DaemonSet document";
  EXPECT_EQ(ds["apiVersion"].as<std::string>(), "apps/v1");
  const YAML::Node pod = ds["spec"]["template"]["spec"];
  EXPECT_TRUE(pod["hostPID"].as<bool>());
  // Selector must match the template labels or the API server rejects the object.
  EXPECT_EQ(
      ds["spec"]["selector"]["matchLabels"]["app.kubernetes.io/name"].as<std::string>(),
      ds["spec"]["template"]["metadata"]["labels"]["app.kubernetes.io/name"].as<std::string>());
  ASSERT_EQ(pod["containers"].size(), 1U);
  const YAML::Node c = pod["containers"][0];

  std::set<std::string> caps;
  for (const auto& cap : c["securityContext"]["capabilities"]["add"]) {
    caps.insert(cap.as<std::string>());
  }
  EXPECT_EQ(caps, (std::set<std::string>{"BPF", "PERFMON", "SYS_RESOURCE", "SYS_PTRACE"}));
  EXPECT_FALSE(c["securityContext"]["privileged"].as<bool>());

  EXPECT_EQ(c["resources"]["requests"]["cpu"].as<std::string>(), "50m");
  EXPECT_EQ(c["resources"]["limits"]["memory"].as<std::string>(), "128Mi");

  // Every mount names a volume, and the ones colod needs are there with the right access.
  std::set<std::string> volumes;
  for (const auto& v : pod["volumes"]) {
    volumes.insert(v["name"].as<std::string>());
  }
  std::map<std::string, bool> mounts;  // path -> read-only
  for (const auto& m : c["volumeMounts"]) {
    EXPECT_TRUE(volumes.count(m["name"].as<std::string>())) << m["name"].as<std::string>();
    mounts[m["mountPath"].as<std::string>()] = m["readOnly"] && m["readOnly"].as<bool>();
  }
  const std::vector<std::pair<std::string, bool>> want = {
      {"/var/run/nri", false},   {"/sys/fs/cgroup", true}, {"/sys/kernel/btf", true},
      {"/var/lib/colod", false}, {"/etc/colod", true},     {"/run/colod", false},
  };
  for (const auto& [path, ro] : want) {
    ASSERT_TRUE(mounts.count(path)) << "missing mount " << path;
    EXPECT_EQ(mounts[path], ro) << path;
  }
  // The config file the daemon is pointed at comes from the ConfigMap's key.
  bool found = false;
  const YAML::Node args = c["args"];
  for (std::size_t i = 0; i + 1 < args.size(); ++i) {
    found = found || (args[i].as<std::string>() == "--config" &&
                      args[i + 1].as<std::string>() == "/etc/colod/colod.yaml");
  }
  EXPECT_TRUE(found);
}

TEST(Deploy, MetricsPortMatchesTheConfig) {
  const auto docs = YAML::LoadAllFromFile((kRoot / "deploy/daemonset.yaml").string());
  const YAML::Node c = findDoc(docs, "DaemonSet")["spec"]["template"]["spec"]["containers"][0];
  const YAML::Node config = YAML::LoadFile((kRoot / "deploy/colod.yaml").string());
  const auto listen = config["daemon"]["metrics_listen"].as<std::string>();
  const auto port = c["ports"][0]["containerPort"].as<std::string>();
  EXPECT_EQ(listen.substr(listen.rfind(':') + 1), port);
  // Reachable from the kubelet (liveness) and Prometheus: not loopback-only inside the pod.
  EXPECT_EQ(listen.rfind("127.", 0), std::string::npos) << listen;
  EXPECT_EQ(c["livenessProbe"]["httpGet"]["port"].as<std::string>(), "metrics");
}

TEST(Deploy, ConfigMapPolicyEqualsPolicyDefaults) {
  const YAML::Node cm = YAML::LoadFile((kRoot / "deploy/configmap.yaml").string());
  EXPECT_EQ(cm["kind"].as<std::string>(), "ConfigMap");
  EXPECT_EQ(cm["metadata"]["name"].as<std::string>(), "colod-config");
  const YAML::Node config = YAML::Load(cm["data"]["colod.yaml"].as<std::string>());
  ASSERT_TRUE(config["policy"]) << "ConfigMap colod.yaml has no policy: section";
  const YAML::Node defaults = YAML::LoadFile((kRoot / "policy/config/default.yaml").string());
  std::string why;
  EXPECT_TRUE(sameYaml(config["policy"], defaults, "policy", why))
      << why << " (run deploy/gen-config.sh)";

  // deploy/colod.yaml (systemd hosts) is the same document.
  const YAML::Node file = YAML::LoadFile((kRoot / "deploy/colod.yaml").string());
  EXPECT_TRUE(sameYaml(file, config, "colod.yaml", why)) << why;
}

// Words of a `RUN apt-get install` block of a Containerfile stage, package names only.
std::vector<std::string> aptPackages(const std::string& stage_text) {
  std::vector<std::string> out;
  const auto at = stage_text.find("--no-install-recommends");
  if (at == std::string::npos) {
    return out;
  }
  const auto end = stage_text.find("&&", at);
  std::istringstream words(stage_text.substr(at, end - at));
  std::string w;
  while (words >> w) {
    if (w != "\\" && w.rfind("--", 0) != 0) {
      out.push_back(w);
    }
  }
  return out;
}

TEST(Deploy, ImageRecipeUsesOnlyDebianPackagesInstallDepsKnows) {
  const std::string cf = readFile(kRoot / "deploy/Containerfile");
  const auto runtime_at = cf.find("FROM debian:bookworm-slim");
  ASSERT_NE(cf.find("FROM debian:bookworm AS build"), std::string::npos);
  ASSERT_NE(runtime_at, std::string::npos);
  const auto build_pkgs = aptPackages(cf.substr(0, runtime_at));
  const auto runtime_pkgs = aptPackages(cf.substr(runtime_at));
  ASSERT_GE(build_pkgs.size(), 10U);
  ASSERT_GE(runtime_pkgs.size(), 5U);
  const std::string deps = readFile(kRoot / "scripts/install-deps.sh");
  for (const auto& p : build_pkgs) {
    // Whole-word match in the package list.
    const bool known = deps.find(" " + p + " ") != std::string::npos ||
                       deps.find(" " + p + "\n") != std::string::npos;
    EXPECT_TRUE(known) << p << " is built with in the image but not in install-deps.sh";
  }
  EXPECT_NE(cf.find("COPY --from=build"), std::string::npos);
}

TEST(Deploy, SystemdUnitDoesNotRestartOnConfigErrors) {
  const std::string unit = readFile(kRoot / "deploy/colod.service");
  EXPECT_NE(unit.find("\nRestartPreventExitStatus=3\n"), std::string::npos);
  EXPECT_NE(unit.find("\nRestart=on-failure\n"), std::string::npos);
  EXPECT_NE(unit.find("--check-config /etc/colod/colod.yaml"), std::string::npos);
  EXPECT_NE(unit.find("[Install]"), std::string::npos);
}

}  // namespace
