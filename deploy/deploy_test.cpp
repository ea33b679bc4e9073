// SPDX-License-Identifier: Apache-2.0
// Checks the deploy/ files against what they promise (label deploy; also unit):
//  - Manifests: every YAML parses; the DaemonSet runs without hostPID/SYS_PTRACE, with BPF +
//    PERFMON only, seccomp/AppArmor RuntimeDefault, probes on /healthz, /readyz and a startup
//    probe, scrape annotations, metrics bound to the pod IP from the downward API (render-config,
//    which is run here), the Namespace labelled for the privileged pod-security level; the
//    ConfigMap's policy equals policy/config/default.yaml; the PodMonitor matches the pod.
//  - Image: the runtime stage's packages cover the shared-library closure of every binary the
//    image ships (ldd -> dpkg -S on the binaries of this build); the build stage's packages cover
//    what configuring the tree with the image's options finds (a real configure -> dpkg -S).
//  - systemd unit: systemd-analyze verify; ReadWritePaths of optional directories '-'-prefixed;
//    the bounding set equals the DaemonSet's capabilities; Documentation= and ExecStart= name
//    files `cmake --install` installs (installed into a DESTDIR here).
//  - Dashboard: every query names a metric colod exports (userspace/metrics/src/colod_metrics.cpp).
//  - README: kernel requirement stated, no stale advice, memory figures equal docs/benchmarks.md.
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <algorithm>
#include <chrono>
#include <csignal>
#include <functional>
#include <map>
#include <thread>

#include "test_support.h"

namespace {

using namespace colod::deploy_test;  // NOLINT(google-build-using-namespace): test-local helpers
namespace fs = std::filesystem;

const fs::path kBuild = COLOD_BINARY_DIR;

// ---------------------------------------------------------------------------------------------
// Small parsers
// ---------------------------------------------------------------------------------------------

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

std::string trim(const std::string& s) {
  const auto b = s.find_first_not_of(" \t");
  if (b == std::string::npos) {
    return "";
  }
  return s.substr(b, s.find_last_not_of(" \t") - b + 1);
}

// The comment that explains the first line containing `needle`: its trailing "# ..." plus the
// block of comment lines directly above it. "" when there is none.
std::string commentAbove(const std::string& text, const std::string& needle) {
  const auto lines = splitLines(text);
  for (std::size_t i = 0; i < lines.size(); ++i) {
    if (lines[i].find(needle) == std::string::npos) {
      continue;
    }
    std::string out;
    const auto hash = lines[i].find(" #");
    if (hash != std::string::npos) {
      out = lines[i].substr(hash + 2);
    }
    for (std::size_t j = i; j > 0 && trim(lines[j - 1]).rfind('#', 0) == 0; --j) {
      out = trim(lines[j - 1]) + "\n" + out;
    }
    return out;
  }
  return "";
}

std::vector<std::string> words(const std::string& s) {
  std::vector<std::string> out;
  std::istringstream in(s);
  std::string w;
  while (in >> w) {
    out.push_back(w);
  }
  return out;
}

// ---------------------------------------------------------------------------------------------
// deploy/Containerfile
// ---------------------------------------------------------------------------------------------

struct Stage {
  std::string from;               // the FROM line
  std::vector<std::string> runs;  // RUN instructions, continuation lines joined
  std::string text;
};

std::vector<Stage> containerfileStages() {
  std::vector<Stage> stages;
  std::string pending;  // a RUN instruction being joined
  bool in_run = false;
  for (const auto& raw : splitLines(readFile(kRoot / "deploy/Containerfile"))) {
    const std::string line = trim(raw);
    if (!in_run && line.rfind("FROM ", 0) == 0) {
      stages.push_back(Stage{.from = line, .runs = {}, .text = ""});
      continue;
    }
    if (stages.empty()) {
      continue;
    }
    stages.back().text += raw + "\n";
    if (!in_run && line.rfind("RUN ", 0) == 0) {
      in_run = true;
      pending.clear();
    }
    if (in_run) {
      if (!line.empty() && line[0] == '#') {
        continue;
      }
      const bool more = !line.empty() && line.back() == '\\';
      pending += " " + (more ? line.substr(0, line.size() - 1) : line);
      if (!more) {
        stages.back().runs.push_back(pending.substr(pending.find("RUN ") + 4));
        in_run = false;
      }
    }
  }
  return stages;
}

const Stage* buildStage(const std::vector<Stage>& stages) {
  for (const auto& s : stages) {
    if (s.from.find(" AS build") != std::string::npos) {
      return &s;
    }
  }
  return nullptr;
}

// Package names given to `apt-get install` in a stage.
std::vector<std::string> aptPackages(const Stage& stage) {
  std::vector<std::string> out;
  for (const auto& run : stage.runs) {
    const auto w = words(run);
    for (std::size_t i = 0; i + 1 < w.size(); ++i) {
      if (w[i] != "apt-get" || w[i + 1] != "install") {
        continue;
      }
      for (std::size_t j = i + 2; j < w.size() && w[j] != "&&"; ++j) {
        if (w[j][0] != '-') {
          out.push_back(w[j]);
        }
      }
    }
  }
  return out;
}

// The -D options of the stage's `cmake -S ... -B ...` configure command.
std::vector<std::string> cmakeConfigureOptions(const Stage& stage) {
  std::vector<std::string> out;
  for (const auto& run : stage.runs) {
    const auto w = words(run);
    for (std::size_t i = 0; i + 1 < w.size(); ++i) {
      if (w[i] != "cmake" || w[i + 1] != "-S") {
        continue;
      }
      for (std::size_t j = i + 2; j < w.size() && w[j] != "&&"; ++j) {
        if (w[j].rfind("-D", 0) == 0) {
          out.push_back(w[j]);
        }
      }
    }
  }
  return out;
}

// `install ... /build/<path> /out/<dest>` pairs: the built files the image ships.
std::vector<std::pair<std::string, std::string>> shippedFromBuild(const Stage& stage) {
  std::vector<std::pair<std::string, std::string>> out;
  for (const auto& run : stage.runs) {
    const auto w = words(run);
    for (std::size_t i = 0; i < w.size(); ++i) {
      if (w[i] != "install") {
        continue;
      }
      std::string src;
      for (std::size_t j = i + 1; j < w.size() && w[j] != "&&"; ++j) {
        if (w[j].rfind("/build/", 0) == 0) {
          src = w[j].substr(7);
        } else if (!src.empty() && w[j].rfind("/out/", 0) == 0) {
          out.emplace_back(src, w[j].substr(4));
          break;
        }
      }
    }
  }
  return out;
}

// ---------------------------------------------------------------------------------------------
// The Debian package database of this host (the image's base is the same release)
// ---------------------------------------------------------------------------------------------

std::string stripArch(std::string name) {
  const auto colon = name.find(':');
  if (colon != std::string::npos) {
    name.resize(colon);
  }
  return trim(name);
}

// "a (>= 1), b | c:any, d" -> {{a}, {b, c}, {d}}
std::vector<std::vector<std::string>> parseDepends(const std::string& field) {
  std::vector<std::vector<std::string>> groups;
  std::istringstream in(field);
  std::string group;
  while (std::getline(in, group, ',')) {
    std::vector<std::string> alts;
    std::istringstream gin(group);
    std::string alt;
    while (std::getline(gin, alt, '|')) {
      const auto w = words(alt);
      if (!w.empty()) {
        alts.push_back(stripArch(w[0]));
      }
    }
    if (!alts.empty()) {
      groups.push_back(std::move(alts));
    }
  }
  return groups;
}

struct PackageDb {
  std::map<std::string, std::vector<std::vector<std::string>>> depends;  // installed packages
  std::map<std::string, std::vector<std::string>> providers;             // virtual name -> packages
  std::set<std::string> base;  // what any Debian image has: Essential, Priority required, apt
  std::string error;

  [[nodiscard]] bool installed(const std::string& p) const { return depends.count(p) != 0U; }

  // `roots` and everything apt installs with them (Pre-Depends and Depends; for alternatives
  // the first one this host has, or a provider of a virtual package).
  [[nodiscard]] std::set<std::string> closure(const std::vector<std::string>& roots) const {
    std::set<std::string> seen;
    std::vector<std::string> todo(roots.begin(), roots.end());
    todo.insert(todo.end(), base.begin(), base.end());
    while (!todo.empty()) {
      const std::string p = todo.back();
      todo.pop_back();
      if (!seen.insert(p).second) {
        continue;
      }
      const auto it = depends.find(p);
      if (it == depends.end()) {
        continue;
      }
      for (const auto& alts : it->second) {
        std::string pick;
        for (const auto& a : alts) {
          if (installed(a)) {
            pick = a;
            break;
          }
          const auto pv = providers.find(a);
          if (pv != providers.end() && !pv->second.empty()) {
            pick = pv->second.front();
            break;
          }
        }
        if (!pick.empty()) {
          todo.push_back(pick);
        }
      }
    }
    return seen;
  }
};

PackageDb loadPackageDb() {
  PackageDb db;
  const auto r = run({"dpkg-query", "-W", "-f",
                      "${db:Status-Abbrev}\t${Package}\t${Essential}\t${Priority}\t"
                      "${Pre-Depends}\t${Depends}\t${Provides}\n"});
  if (r.exit_code != 0) {
    db.error = "dpkg-query failed: " + r.err;
    return db;
  }
  for (const auto& line : splitLines(r.out)) {
    std::vector<std::string> f;
    std::istringstream in(line);
    std::string field;
    while (std::getline(in, field, '\t')) {
      f.push_back(field);
    }
    f.resize(7);
    if (f[0].rfind("ii", 0) != 0) {
      continue;  // not installed (config-files, half-installed)
    }
    const std::string pkg = f[1];
    auto& deps = db.depends[pkg];
    for (const std::size_t col : {std::size_t{4}, std::size_t{5}}) {
      for (auto& g : parseDepends(f[col])) {
        deps.push_back(std::move(g));
      }
    }
    for (const auto& g : parseDepends(f[6])) {
      db.providers[g.front()].push_back(pkg);
    }
    if (f[2] == "yes" || f[3] == "required" || pkg == "apt") {
      db.base.insert(pkg);
    }
  }
  if (db.depends.size() < 50 || db.base.empty()) {
    db.error = "dpkg-query listed only " + std::to_string(db.depends.size()) + " packages";
  }
  return db;
}

// A file as dpkg may have recorded it: as given, resolved, and with/without the /usr prefix
// (Debian 12 is usr-merged: ldd says /lib/x86_64-linux-gnu/..., dpkg may say /usr/lib/...).
std::vector<std::string> dpkgCandidates(const std::string& path) {
  std::set<std::string> out;
  std::vector<std::string> forms{path};
  std::error_code ec;
  const auto real = fs::canonical(path, ec);
  if (!ec) {
    forms.push_back(real.string());
  }
  for (const auto& f : forms) {
    out.insert(f);
    if (f.rfind("/usr/", 0) == 0) {
      out.insert(f.substr(4));
    } else {
      out.insert("/usr" + f);
    }
  }
  return {out.begin(), out.end()};
}

// path -> owning packages, for every path dpkg knows (one dpkg -S call).
std::map<std::string, std::set<std::string>> dpkgOwners(const std::set<std::string>& paths) {
  std::map<std::string, std::set<std::string>> owners;
  if (paths.empty()) {
    return owners;
  }
  std::vector<std::string> argv{"dpkg", "-S"};
  argv.insert(argv.end(), paths.begin(), paths.end());
  const auto r = run(argv);  // exits 1 when some path is unknown; stdout has the rest
  for (const auto& line : splitLines(r.out)) {
    if (line.rfind("diversion ", 0) == 0) {
      continue;
    }
    const auto at = line.find(": /");
    if (at == std::string::npos) {
      continue;
    }
    const std::string path = line.substr(at + 2);
    std::istringstream in(line.substr(0, at));
    std::string pkg;
    while (std::getline(in, pkg, ',')) {
      owners[path].insert(stripArch(pkg));
    }
  }
  return owners;
}

std::set<std::string> ownersOf(const std::string& path,
                               const std::map<std::string, std::set<std::string>>& owners) {
  std::set<std::string> out;
  for (const auto& c : dpkgCandidates(path)) {
    const auto it = owners.find(c);
    if (it != owners.end()) {
      out.insert(it->second.begin(), it->second.end());
    }
  }
  return out;
}

std::string joined(const std::set<std::string>& s) {
  std::string out;
  for (const auto& x : s) {
    out += (out.empty() ? "" : ", ") + x;
  }
  return out;
}

// Shared libraries ldd resolves for `binary` (the whole closure, loader included).
struct LddResult {
  std::vector<std::string> libs;
  std::vector<std::string> missing;
  std::string error;
};

LddResult ldd(const fs::path& binary) {
  LddResult out;
  const auto r = run({"ldd", binary.string()});
  if (r.exit_code != 0) {
    out.error = r.out + r.err;
    return out;
  }
  for (const auto& line : splitLines(r.out)) {
    const auto w = words(line);
    const auto arrow = std::find(w.begin(), w.end(), "=>");
    if (arrow != w.end()) {
      if (arrow + 1 == w.end() || *(arrow + 1) == "not") {
        out.missing.push_back(w.front());
      } else if ((arrow + 1)->rfind('/', 0) == 0) {
        out.libs.push_back(*(arrow + 1));
      }
    } else if (!w.empty() && w.front().rfind('/', 0) == 0) {
      out.libs.push_back(w.front());  // the dynamic loader
    }
  }
  return out;
}

bool haveDpkgTools(std::string& why) {
  for (const char* tool : {"ldd", "dpkg", "dpkg-query"}) {
    if (which(tool).empty()) {
      why = std::string(tool) +
            " is not installed: not a Debian host, the package closure cannot "
            "be computed";
      return false;
    }
  }
  return true;
}

// ---------------------------------------------------------------------------------------------
// The systemd unit
// ---------------------------------------------------------------------------------------------

// Key -> values, in order, over all sections (this unit has no key in two sections).
std::multimap<std::string, std::string> unitKeys(const std::string& text) {
  std::multimap<std::string, std::string> out;
  for (const auto& raw : splitLines(text)) {
    const std::string line = trim(raw);
    if (line.empty() || line[0] == '#' || line[0] == ';' || line[0] == '[') {
      continue;
    }
    const auto eq = line.find('=');
    if (eq != std::string::npos) {
      out.emplace(line.substr(0, eq), line.substr(eq + 1));
    }
  }
  return out;
}

std::string unitValue(const std::multimap<std::string, std::string>& keys, const std::string& k) {
  const auto it = keys.find(k);
  return it == keys.end() ? "" : it->second;
}

// colod's default config path (userspace/daemon/src/main.cpp, kDefaultConfig).
std::string colodDefaultConfigPath() {
  const std::string main = readFile(kRoot / "userspace/daemon/src/main.cpp");
  std::smatch m;
  if (std::regex_search(main, m, std::regex(R"re(kDefaultConfig\s*=\s*"([^"]+)")re"))) {
    return m[1];
  }
  return "";
}

// ---------------------------------------------------------------------------------------------
// Manifests
// ---------------------------------------------------------------------------------------------

YAML::Node pod() { return daemonSet()["spec"]["template"]["spec"]; }

TEST(Deploy, NamespaceIsLabelledForThePrivilegedPodSecurityLevelWithAReason) {
  const auto docs = YAML::LoadAllFromFile((kRoot / "deploy/daemonset.yaml").string());
  const YAML::Node ns = findDoc(docs, "Namespace");
  ASSERT_TRUE(ns) << "no Namespace document";
  EXPECT_EQ(ns["metadata"]["name"].as<std::string>(),
            daemonSet()["metadata"]["namespace"].as<std::string>());
  ASSERT_TRUE(ns["metadata"]["labels"]["pod-security.kubernetes.io/enforce"]);
  EXPECT_EQ(ns["metadata"]["labels"]["pod-security.kubernetes.io/enforce"].as<std::string>(),
            "privileged");
  const std::string why = commentAbove(readFile(kRoot / "deploy/daemonset.yaml"),
                                       "pod-security.kubernetes.io/enforce:");
  EXPECT_NE(why.find("hostPath"), std::string::npos)
      << "the label needs a comment saying why (which baseline checks the pod fails): " << why;
}

TEST(Deploy, NoHostPidOrSysPtraceWithoutAMeasuredNeedNextToThem) {
  const std::string text = readFile(kRoot / "deploy/daemonset.yaml");
  const YAML::Node p = pod();
  if (p["hostPID"] && p["hostPID"].as<bool>()) {
    EXPECT_NE(commentAbove(text, "hostPID:").find("measured"), std::string::npos)
        << "hostPID: true without a comment stating the measured need";
  }
  for (const char* list : {"containers", "initContainers"}) {
    for (const auto& c : p[list]) {
      for (const auto& cap : child(c, {"securityContext", "capabilities", "add"})) {
        const auto name = cap.as<std::string>();
        if (name == "SYS_PTRACE" || name == "SYS_ADMIN") {
          EXPECT_NE(commentAbove(text, "add:").find("measured"), std::string::npos)
              << name << " added without a comment stating the measured need";
        }
      }
    }
  }
  // The reason hostPID is not there: colod reads no other process's /proc (today only
  // <proc_root>/self/..., userspace/daemon/src/self_stats.cpp). A heuristic guard over the
  // non-test sources: "/proc/" followed by a pid (concatenated, a digit, a format field), or
  // proc_root + "/" + something. /proc/self, /proc/sys and other node-wide files are fine.
  std::vector<std::string> offenders;
  const std::regex proc_use(
      R"re("/proc/"|"/proc/(\d|\{|%)|proc_root\s*\+\s*"/"|proc_root\s*\+\s*"/(\d|\{|%))re");
  for (const auto& e : fs::recursive_directory_iterator(kRoot / "userspace")) {
    const auto name = e.path().filename().string();
    const auto ext = e.path().extension().string();
    const auto rel = fs::relative(e.path(), kRoot).string();
    if (!e.is_regular_file() || (ext != ".cpp" && ext != ".h") ||
        name.find("_test") != std::string::npos || rel.find("/e2e/") != std::string::npos ||
        rel.find("/faults/") != std::string::npos) {
      continue;
    }
    const std::string src = readFile(e.path());
    if (std::regex_search(src, proc_use)) {
      offenders.push_back(rel);
    }
  }
  EXPECT_TRUE(offenders.empty())
      << "these read /proc beyond /proc/self; if colod needs another process's /proc, the "
         "DaemonSet needs hostPID (and a measured reason): "
      << offenders.front();
}

TEST(Deploy, ColodContainerAddsBpfAndPerfmonOnlyEachExplained) {
  const std::string text = readFile(kRoot / "deploy/daemonset.yaml");
  const YAML::Node c = podContainer(pod(), "colod");
  ASSERT_TRUE(c) << "no container named colod";
  const YAML::Node sc = c["securityContext"];
  EXPECT_EQ(daemonSetCapabilities(), (std::set<std::string>{"BPF", "PERFMON"}));
  ASSERT_TRUE(sc["capabilities"]["drop"].IsSequence());
  EXPECT_EQ(sc["capabilities"]["drop"][0].as<std::string>(), "ALL");
  EXPECT_FALSE(sc["privileged"].as<bool>());
  EXPECT_FALSE(sc["allowPrivilegeEscalation"].as<bool>());
  EXPECT_TRUE(sc["readOnlyRootFilesystem"].as<bool>());
  // Each capability has a line of its own saying what it is for.
  for (const auto& cap : daemonSetCapabilities()) {
    EXPECT_TRUE(std::regex_search(text, std::regex("#\\s+" + cap + "\\s+\\S")))
        << "no comment line saying what " << cap << " is for";
  }
  // The helper containers run unprivileged.
  for (const char* name : {"render-config", "config-reloader"}) {
    const YAML::Node h = podContainer(pod(), name);
    ASSERT_TRUE(h) << "no container " << name;
    EXPECT_TRUE(h["securityContext"]["runAsNonRoot"].as<bool>()) << name;
    EXPECT_FALSE(child(h, {"securityContext", "capabilities", "add"})) << name;
    const YAML::Node drop = child(h, {"securityContext", "capabilities", "drop"});
    ASSERT_TRUE(drop && drop.IsSequence()) << name;
    EXPECT_EQ(drop[0].as<std::string>(), "ALL") << name;
  }
}

TEST(Deploy, SeccompAndAppArmorAreTheRuntimeDefaults) {
  const YAML::Node p = pod();
  const YAML::Node pod_seccomp = child(p, {"securityContext", "seccompProfile", "type"});
  const bool pod_level = pod_seccomp && pod_seccomp.as<std::string>() == "RuntimeDefault";
  for (const char* list : {"containers", "initContainers"}) {
    for (const auto& c : p[list]) {
      const YAML::Node own = child(c, {"securityContext", "seccompProfile", "type"});
      if (own) {
        EXPECT_EQ(own.as<std::string>(), "RuntimeDefault") << c["name"].as<std::string>();
      } else {
        EXPECT_TRUE(pod_level) << c["name"].as<std::string>() << " has no seccomp profile";
      }
      const YAML::Node aa = child(c, {"securityContext", "appArmorProfile", "type"});
      if (aa) {
        EXPECT_EQ(aa.as<std::string>(), "RuntimeDefault") << c["name"].as<std::string>();
      }
    }
  }
  const YAML::Node colod_aa =
      child(podContainer(p, "colod"), {"securityContext", "appArmorProfile", "type"});
  ASSERT_TRUE(colod_aa) << "colod has no appArmorProfile";
  EXPECT_EQ(colod_aa.as<std::string>(), "RuntimeDefault");
  EXPECT_EQ(readFile(kRoot / "deploy/daemonset.yaml").find("Unconfined"), std::string::npos);
}

// Path of the file `path` as seen through `c`'s mounts: {volume name, path inside the volume}.
std::pair<std::string, std::string> volumeOf(const YAML::Node& c, const std::string& path) {
  for (const auto& m : c["volumeMounts"]) {
    const auto mount = m["mountPath"].as<std::string>();
    if (path.rfind(mount + "/", 0) == 0) {
      return {m["name"].as<std::string>(), path.substr(mount.size() + 1)};
    }
  }
  return {"", ""};
}

YAML::Node volume(const std::string& name) {
  for (const auto& v : pod()["volumes"]) {
    if (v["name"].as<std::string>() == name) {
      return v;
    }
  }
  return {};
}

std::string colodConfigArg() {
  const YAML::Node args = podContainer(pod(), "colod")["args"];
  for (std::size_t i = 0; i + 1 < args.size(); ++i) {
    if (args[i].as<std::string>() == "--config") {
      return args[i + 1].as<std::string>();
    }
  }
  return "";
}

TEST(Deploy, MetricsListenOnThePodIpFromTheDownwardApiWithAReason) {
  const std::string text = readFile(kRoot / "deploy/daemonset.yaml");
  const YAML::Node p = pod();
  const YAML::Node colod = podContainer(p, "colod");
  const std::string config_path = colodConfigArg();
  ASSERT_FALSE(config_path.empty()) << "colod is not given --config";
  const auto [config_volume, config_file] = volumeOf(colod, config_path);
  ASSERT_FALSE(config_volume.empty()) << config_path << " is on no volume";

  // The ConfigMap keeps colod's loopback default; the port is the container's metrics port.
  const YAML::Node cm = YAML::LoadFile((kRoot / "deploy/configmap.yaml").string());
  const YAML::Node cfg = YAML::Load(cm["data"]["config.yaml"].as<std::string>());
  const auto listen = cfg["daemon"]["metrics_listen"].as<std::string>();
  EXPECT_EQ(listen.rfind("127.0.0.1:", 0), 0U) << listen;
  int metrics_port = 0;
  for (const auto& port : colod["ports"]) {
    if (port["name"].as<std::string>() == "metrics") {
      metrics_port = port["containerPort"].as<int>();
    }
  }
  EXPECT_EQ(listen.substr(listen.rfind(':') + 1), std::to_string(metrics_port));

  // render-config (init) and config-reloader (sidecar) write that file from the ConfigMap with
  // the IP from the downward API.
  const std::string ip_field =
      p["hostNetwork"] && p["hostNetwork"].as<bool>() ? "status.hostIP" : "status.podIP";
  for (const char* name : {"render-config", "config-reloader"}) {
    SCOPED_TRACE(name);
    const YAML::Node c = podContainer(p, name);
    ASSERT_TRUE(c);
    std::vector<std::string> cmd;
    for (const auto& w : c["command"]) {
      cmd.push_back(w.as<std::string>());
    }
    ASSERT_GE(cmd.size(), 3U);
    EXPECT_EQ(cmd.front(), "/usr/lib/colod/render-config");
    const std::string& src = cmd[cmd.size() - 2];
    const std::string& dst = cmd.back();
    const auto [src_volume, src_key] = volumeOf(c, src);
    const YAML::Node cm_name = child(volume(src_volume), {"configMap", "name"});
    ASSERT_TRUE(cm_name) << src << " is not on a ConfigMap volume";
    EXPECT_EQ(cm_name.as<std::string>(), cm["metadata"]["name"].as<std::string>());
    EXPECT_TRUE(cm["data"][src_key]) << "the ConfigMap has no key " << src_key;
    EXPECT_EQ(volumeOf(c, dst), std::make_pair(config_volume, config_file))
        << "writes " << dst << ", colod reads " << config_path;
    bool from_downward_api = false;
    for (const auto& e : c["env"]) {
      const YAML::Node field = child(e, {"valueFrom", "fieldRef", "fieldPath"});
      if (e["name"].as<std::string>() == "COLOD_METRICS_IP" && field) {
        from_downward_api = field.as<std::string>() == ip_field;
      }
    }
    EXPECT_TRUE(from_downward_api) << "COLOD_METRICS_IP must come from " << ip_field;
  }
  EXPECT_EQ(podContainer(p, "config-reloader")["command"][1].as<std::string>(), "--watch");
  EXPECT_TRUE(child(volume(config_volume), {"emptyDir"}))
      << "the rendered config lives in an emptyDir";
  const std::string why = commentAbove(text, "- name: COLOD_METRICS_IP");
  EXPECT_NE(why.find("127.0.0.1"), std::string::npos)
      << "the downward-API address needs a comment saying why (colod's loopback default): " << why;

  // The image installs render-config where the manifests call it.
  EXPECT_NE(readFile(kRoot / "deploy/Containerfile")
                .find("/src/deploy/render-config.sh /out/usr/lib/colod/render-config"),
            std::string::npos);
}

// Runs deploy/render-config.sh as the DaemonSet does, on the ConfigMap's file.
class RenderConfig : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(dir_.ok());
    const YAML::Node cm = YAML::LoadFile((kRoot / "deploy/configmap.yaml").string());
    src_ = dir_.path() / "configmap-config.yaml";
    std::ofstream(src_) << cm["data"]["config.yaml"].as<std::string>();
    dst_ = dir_.path() / "config.yaml";
  }
  RunResult render(const std::string& ip, const std::vector<std::string>& extra = {}) {
    std::vector<std::string> argv{"sh", (kRoot / "deploy/render-config.sh").string()};
    argv.insert(argv.end(), extra.begin(), extra.end());
    argv.push_back(src_.string());
    argv.push_back(dst_.string());
    return run(argv, {"COLOD_METRICS_IP=" + ip});
  }
  TempDir dir_;
  fs::path src_;
  fs::path dst_;
};

TEST_F(RenderConfig, SetsThePodIpKeepsThePortAndEverythingElse) {
  for (const auto& [ip, want] : std::vector<std::pair<std::string, std::string>>{
           {"10.244.3.17", "10.244.3.17:9477"}, {"fd00:10:244::5", "[fd00:10:244::5]:9477"}}) {
    SCOPED_TRACE(ip);
    const auto r = render(ip);
    ASSERT_EQ(r.exit_code, 0) << r.err;
    const YAML::Node in = YAML::LoadFile(src_.string());
    YAML::Node out = YAML::LoadFile(dst_.string());
    EXPECT_EQ(out["daemon"]["metrics_listen"].as<std::string>(), want);
    out["daemon"]["metrics_listen"] = in["daemon"]["metrics_listen"].as<std::string>();
    std::string why;
    EXPECT_TRUE(sameYaml(out, in, "config", why)) << why;
    EXPECT_EQ(fs::status(dst_).permissions() & fs::perms::others_read, fs::perms::others_read)
        << "colod (uid 0 without CAP_DAC_OVERRIDE) reads a file written by uid 65534";
    // colod itself accepts the result.
    const auto check = run({COLOD_BIN, "--check-config", dst_.string()});
    EXPECT_EQ(check.exit_code, 0) << check.out << check.err;
  }
}

TEST_F(RenderConfig, RewritesOnlyOnChangeAndRefusesBadInput) {
  ASSERT_EQ(render("10.0.0.1").exit_code, 0);
  struct stat before {};
  ASSERT_EQ(::stat(dst_.c_str(), &before), 0);
  ASSERT_EQ(render("10.0.0.1").exit_code, 0);
  struct stat same {};
  ASSERT_EQ(::stat(dst_.c_str(), &same), 0);
  EXPECT_EQ(same.st_ino, before.st_ino) << "an unchanged config must not be rewritten (reload)";
  ASSERT_EQ(render("10.0.0.2").exit_code, 0);
  struct stat changed {};
  ASSERT_EQ(::stat(dst_.c_str(), &changed), 0);
  EXPECT_NE(changed.st_ino, before.st_ino) << "a change must arrive by rename (inotify)";

  const std::string good = readFile(dst_);
  for (const auto& bad : {std::string(""), std::string("10.0.0.1; rm -rf /"), std::string("x")}) {
    const auto r = render(bad);
    EXPECT_EQ(r.exit_code, 1) << "'" << bad << "'";
    EXPECT_NE(r.err.find("COLOD_METRICS_IP"), std::string::npos) << r.err;
  }
  std::ofstream(src_) << "daemon:\n  interval_ms: 100\n";
  const auto r = render("10.0.0.3");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("metrics_listen"), std::string::npos) << r.err;
  EXPECT_EQ(readFile(dst_), good) << "a failed render must leave the running file alone";
  EXPECT_EQ(run({"sh", (kRoot / "deploy/render-config.sh").string()}).exit_code, 2);
}

TEST_F(RenderConfig, WatchModePicksUpAChangedConfigMapAndStopsOnSigterm) {
  const pid_t pid = ::fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    ::setenv("COLOD_METRICS_IP", "10.0.0.7", 1);
    const std::string script = (kRoot / "deploy/render-config.sh").string();
    ::execlp("sh", "sh", script.c_str(), "--watch", "1", src_.c_str(), dst_.c_str(), nullptr);
    ::_exit(127);
  }
  auto waitFor = [](const std::function<bool()>& cond) {
    for (int i = 0; i < 100; ++i) {
      if (cond()) {
        return true;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    return false;
  };
  EXPECT_TRUE(waitFor([&] { return fs::exists(dst_); }));
  std::string text = readFile(src_);
  text.replace(text.find("log_level: info"), 15, "log_level: debug");
  std::ofstream(src_) << text;
  EXPECT_TRUE(waitFor([&] { return readFile(dst_).find("log_level: debug") != std::string::npos; }))
      << "the sidecar did not pick up the changed source within 5 s";
  ASSERT_EQ(::kill(pid, SIGTERM), 0);
  int status = 0;
  const bool exited = waitFor([&] { return ::waitpid(pid, &status, WNOHANG) == pid; });
  if (!exited) {
    ::kill(pid, SIGKILL);
    ::waitpid(pid, &status, 0);
  }
  EXPECT_TRUE(exited) << "render-config --watch ignored SIGTERM (PID 1 of its container)";
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
}

TEST(Deploy, ProbesAreHealthzReadyzAndAStartupProbe) {
  const YAML::Node c = podContainer(pod(), "colod");
  const std::vector<std::pair<std::string, std::string>> want = {
      {"startupProbe", "/healthz"}, {"livenessProbe", "/healthz"}, {"readinessProbe", "/readyz"}};
  for (const auto& [probe, path] : want) {
    ASSERT_TRUE(c[probe]) << "no " << probe;
    EXPECT_EQ(c[probe]["httpGet"]["path"].as<std::string>(), path) << probe;
    EXPECT_EQ(c[probe]["httpGet"]["port"].as<std::string>(), "metrics") << probe;
    EXPECT_FALSE(child(c, {probe.c_str(), "httpGet", "host"}))
        << probe << ": the kubelet probes the pod IP";
  }
  // The startup probe gives BPF loading a minute before liveness may restart the container.
  EXPECT_GE(c["startupProbe"]["periodSeconds"].as<int>() *
                c["startupProbe"]["failureThreshold"].as<int>(),
            30);
}

TEST(Deploy, PrometheusScrapeAnnotationsAndAPodMonitor) {
  const YAML::Node ds = daemonSet();
  const YAML::Node ann = ds["spec"]["template"]["metadata"]["annotations"];
  EXPECT_EQ(ann["prometheus.io/scrape"].as<std::string>(), "true");
  EXPECT_EQ(ann["prometheus.io/path"].as<std::string>(), "/metrics");
  std::string port;
  for (const auto& p : podContainer(pod(), "colod")["ports"]) {
    if (p["name"].as<std::string>() == "metrics") {
      port = p["containerPort"].as<std::string>();
    }
  }
  EXPECT_EQ(ann["prometheus.io/port"].as<std::string>(), port);

  const YAML::Node pm = YAML::LoadFile((kRoot / "deploy/podmonitor.yaml").string());
  EXPECT_EQ(pm["apiVersion"].as<std::string>(), "monitoring.coreos.com/v1");
  EXPECT_EQ(pm["kind"].as<std::string>(), "PodMonitor");
  EXPECT_EQ(pm["metadata"]["namespace"].as<std::string>(),
            ds["metadata"]["namespace"].as<std::string>());
  for (const auto& kv : pm["spec"]["selector"]["matchLabels"]) {
    const auto key = kv.first.as<std::string>();
    EXPECT_EQ(ds["spec"]["template"]["metadata"]["labels"][key].as<std::string>(),
              kv.second.as<std::string>())
        << "the PodMonitor selects no colod pod on " << key;
  }
  const YAML::Node ep = pm["spec"]["podMetricsEndpoints"][0];
  EXPECT_EQ(ep["port"].as<std::string>(), "metrics");
  EXPECT_EQ(ep["path"].as<std::string>(), "/metrics");
  // colod's own pod/namespace/container labels must survive the target's (dashboard queries).
  EXPECT_TRUE(ep["honorLabels"].as<bool>());
  bool node_label = false;
  for (const auto& r : ep["relabelings"]) {
    node_label =
        node_label || (r["targetLabel"].as<std::string>() == "node" &&
                       r["sourceLabels"][0].as<std::string>() == "__meta_kubernetes_pod_node_name");
  }
  EXPECT_TRUE(node_label) << "the dashboard's $node variable needs a node label";
}

TEST(Deploy, DaemonSetHasTheMountsAndResourcesTheReadmePromises) {
  const auto docs = YAML::LoadAllFromFile((kRoot / "deploy/daemonset.yaml").string());
  ASSERT_EQ(docs.size(), 2U);
  const YAML::Node ds = findDoc(docs, "DaemonSet");
  ASSERT_TRUE(ds) << "no DaemonSet document";
  EXPECT_EQ(ds["apiVersion"].as<std::string>(), "apps/v1");
  // Selector must match the template labels or the API server rejects the object.
  EXPECT_EQ(
      ds["spec"]["selector"]["matchLabels"]["app.kubernetes.io/name"].as<std::string>(),
      ds["spec"]["template"]["metadata"]["labels"]["app.kubernetes.io/name"].as<std::string>());
  const YAML::Node p = pod();
  const YAML::Node c = podContainer(p, "colod");
  EXPECT_EQ(c["resources"]["requests"]["cpu"].as<std::string>(), "50m");
  EXPECT_EQ(c["resources"]["limits"]["memory"].as<std::string>(), "128Mi");
  EXPECT_FALSE(c["resources"]["limits"]["cpu"]) << "a CFS quota would delay colod's reaction";

  std::set<std::string> volumes;
  for (const auto& v : p["volumes"]) {
    volumes.insert(v["name"].as<std::string>());
  }
  for (const char* list : {"containers", "initContainers"}) {
    for (const auto& ct : p[list]) {
      for (const auto& m : ct["volumeMounts"]) {
        EXPECT_TRUE(volumes.count(m["name"].as<std::string>())) << m["name"].as<std::string>();
      }
    }
  }
  std::map<std::string, bool> mounts;  // path -> read-only
  for (const auto& m : c["volumeMounts"]) {
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
  // tp_btf/raw_tp attach through bpf(), not tracefs: no tracing mount.
  EXPECT_FALSE(mounts.count("/sys/kernel/tracing"));
  EXPECT_FALSE(mounts.count("/sys/kernel/debug"));
}

TEST(Deploy, ConfigPathIsColodsDefaultEverywhere) {
  const std::string def = colodDefaultConfigPath();
  ASSERT_FALSE(def.empty()) << "kDefaultConfig not found in userspace/daemon/src/main.cpp";
  EXPECT_EQ(colodConfigArg(), def) << "DaemonSet";
  EXPECT_NE(readFile(kRoot / "deploy/Containerfile").find("CMD [\"--config\", \"" + def + "\"]"),
            std::string::npos)
      << "Containerfile CMD";
  const auto unit = unitKeys(readFile(kRoot / "deploy/colod.service"));
  EXPECT_EQ(unitValue(unit, "ExecStart"), "/usr/local/bin/colod --config " + def);
  EXPECT_EQ(unitValue(unit, "ExecStartPre"), "/usr/local/bin/colod --check-config " + def);
  EXPECT_NE(readFile(kRoot / "deploy/README.md").find("deploy/config.yaml " + def),
            std::string::npos)
      << "the README's install step must put the config at " << def;
}

TEST(Deploy, ConfigMapPolicyEqualsPolicyDefaults) {
  const YAML::Node cm = YAML::LoadFile((kRoot / "deploy/configmap.yaml").string());
  EXPECT_EQ(cm["kind"].as<std::string>(), "ConfigMap");
  EXPECT_EQ(cm["metadata"]["name"].as<std::string>(), "colod-config");
  ASSERT_TRUE(cm["data"]["config.yaml"]);
  const YAML::Node config = YAML::Load(cm["data"]["config.yaml"].as<std::string>());
  ASSERT_TRUE(config["policy"]) << "ConfigMap config.yaml has no policy: section";
  const YAML::Node defaults = YAML::LoadFile((kRoot / "policy/config/default.yaml").string());
  std::string why;
  EXPECT_TRUE(sameYaml(config["policy"], defaults, "policy", why))
      << why << " (run deploy/gen-config.sh)";

  // deploy/config.yaml (systemd hosts) is the same document.
  const YAML::Node file = YAML::LoadFile((kRoot / "deploy/config.yaml").string());
  EXPECT_TRUE(sameYaml(file, config, "config.yaml", why)) << why;
}

// ---------------------------------------------------------------------------------------------
// Image
// ---------------------------------------------------------------------------------------------

TEST(Image, RuntimeStageCoversTheSharedLibraryClosureOfEveryShippedBinary) {
  std::string why;
  if (!haveDpkgTools(why)) {
    GTEST_SKIP() << why;
  }
  const auto stages = containerfileStages();
  const Stage* build = buildStage(stages);
  ASSERT_NE(build, nullptr) << "no `FROM ... AS build` stage";
  const Stage& runtime = stages.back();
  ASSERT_NE(&runtime, build);
  const auto shipped = shippedFromBuild(*build);
  std::set<std::string> dests;
  for (const auto& s : shipped) {
    dests.insert(fs::path(s.second).filename().string());
  }
  ASSERT_TRUE(dests.count("colod") && dests.count("coloctl")) << "the image ships no colod/coloctl";
  EXPECT_NE(runtime.text.find("COPY --from=build /out/ /"), std::string::npos);

  const PackageDb db = loadPackageDb();
  ASSERT_TRUE(db.error.empty()) << db.error;
  const auto listed = aptPackages(runtime);
  ASSERT_FALSE(listed.empty());
  for (const auto& p : listed) {
    EXPECT_TRUE(p.size() < 4 || (p.compare(p.size() - 4, 4, "-dev") != 0 &&
                                 p.compare(p.size() - 4, 4, "-dbg") != 0))
        << p << ": the runtime stage takes the runtime library package, not -dev/-dbg";
    EXPECT_TRUE(db.installed(p)) << p
                                 << " is not a package this Debian host has installed (the "
                                    "image's release): wrong name or version suffix?";
  }
  const auto covered = db.closure(listed);

  std::map<std::string, std::string> lib_from;  // library path -> a binary linking it
  for (const auto& [rel, dest] : shipped) {
    const fs::path bin = kBuild / rel;
    ASSERT_TRUE(fs::exists(bin)) << bin << " (shipped as " << dest
                                 << ") is not built: cmake --build build --target colod coloctl";
    const auto l = ldd(bin);
    ASSERT_TRUE(l.error.empty()) << bin << ": " << l.error;
    EXPECT_TRUE(l.missing.empty())
        << bin << " links libraries this host lacks: " << l.missing.front();
    EXPECT_GE(l.libs.size(), 5U) << bin << ": ldd found too few libraries to be right";
    for (const auto& lib : l.libs) {
      lib_from.emplace(lib, dest);
    }
  }
  std::set<std::string> candidates;
  for (const auto& [lib, from] : lib_from) {
    for (const auto& c : dpkgCandidates(lib)) {
      candidates.insert(c);
    }
  }
  const auto owners = dpkgOwners(candidates);
  for (const auto& [lib, from] : lib_from) {
    const auto own = ownersOf(lib, owners);
    if (own.empty()) {
      ADD_FAILURE() << from << " links " << lib << ", which no Debian package provides";
      continue;
    }
    const bool ok = std::any_of(own.begin(), own.end(),
                                [&](const std::string& p) { return covered.count(p) != 0U; });
    EXPECT_TRUE(ok) << from << " links " << lib << " from package " << joined(own)
                    << ", which the runtime stage neither installs nor pulls in through "
                       "Depends: add it to the runtime stage's apt-get install";
  }
}

TEST(Image, BuildStageInstallsWhatConfiguringTheTreeWithItsOptionsFinds) {
  std::string why;
  if (!haveDpkgTools(why)) {
    GTEST_SKIP() << why;
  }
  const auto stages = containerfileStages();
  const Stage* build = buildStage(stages);
  ASSERT_NE(build, nullptr);
  const auto options = cmakeConfigureOptions(*build);
  ASSERT_FALSE(options.empty()) << "no `cmake -S ... -D...` configure in the build stage";
  const auto listed = aptPackages(*build);
  // Configuring the tree adds nri/testpeer, which needs Go, unless it is turned off.
  const bool testpeer_off =
      std::find(options.begin(), options.end(), "-DCOLOD_TESTPEER=OFF") != options.end();
  EXPECT_TRUE(testpeer_off || std::find(listed.begin(), listed.end(), "golang-go") != listed.end())
      << "the build stage configures the Go test peer without installing golang-go";

  // Configure the tree the way the image does and see what CMake found.
  TempDir tmp;
  ASSERT_TRUE(tmp.ok());
  std::vector<std::string> argv{COLOD_CMAKE_COMMAND, "-S", kRoot.string(), "-B",
                                (tmp.path() / "build").string()};
  argv.insert(argv.end(), options.begin(), options.end());
  const auto r = run(argv);
  ASSERT_EQ(r.exit_code, 0) << "configuring with the image's options failed:\n" << r.out << r.err;
  std::map<std::string, std::string> found;  // cache entry -> path
  for (const auto& line : splitLines(readFile(tmp.path() / "build/CMakeCache.txt"))) {
    std::smatch m;
    if (!std::regex_match(line, m, std::regex(R"(([^/#:]+):(FILEPATH|PATH)=(/.*))"))) {
      continue;
    }
    const std::string name = m[1];
    const std::string value = m[3];
    // git is optional: it only adds `git describe` to the version line (base/CMakeLists.txt),
    // and the image's build context has no .git (.containerignore) for it to describe.
    if (name == "GIT_EXECUTABLE") {
      continue;
    }
    if (name == "CMAKE_INSTALL_PREFIX" || value.find("NOTFOUND") != std::string::npos ||
        value.rfind(kRoot.string(), 0) == 0 || value.rfind(tmp.path().string(), 0) == 0 ||
        value.rfind("/sys/", 0) == 0 || value.rfind("/proc/", 0) == 0 || !fs::exists(value)) {
      continue;
    }
    found[name] = value;
  }
  ASSERT_GE(found.size(), 10U) << "CMakeCache.txt has too few tool/library paths to be right";

  const PackageDb db = loadPackageDb();
  ASSERT_TRUE(db.error.empty()) << db.error;
  for (const auto& p : listed) {
    EXPECT_TRUE(db.installed(p)) << p << " is not installed on this Debian host";
  }
  const auto covered = db.closure(listed);
  std::set<std::string> candidates;
  for (const auto& [name, path] : found) {
    for (const auto& c : dpkgCandidates(path)) {
      candidates.insert(c);
    }
  }
  const auto owners = dpkgOwners(candidates);
  for (const auto& [name, path] : found) {
    const auto own = ownersOf(path, owners);
    if (own.empty()) {
      ADD_FAILURE() << "configuring found " << name << "=" << path
                    << ", which no Debian package provides";
      continue;
    }
    const bool ok = std::any_of(own.begin(), own.end(),
                                [&](const std::string& p) { return covered.count(p) != 0U; });
    EXPECT_TRUE(ok) << "configuring with the image's options finds " << name << "=" << path
                    << " from " << joined(own) << ", which the build stage does not install"
                    << (own.count("golang-go") != 0U ? " (or pass -DCOLOD_TESTPEER=OFF)" : "");
  }
}

TEST(Image, BuildPackagesAreOnesInstallDepsKnows) {
  const auto stages = containerfileStages();
  const Stage* build = buildStage(stages);
  ASSERT_NE(build, nullptr);
  const auto pkgs = aptPackages(*build);
  ASSERT_GE(pkgs.size(), 10U);
  const std::string deps = readFile(kRoot / "scripts/install-deps.sh");
  for (const auto& p : pkgs) {
    // Whole-word match in the package list.
    const bool known = deps.find(" " + p + " ") != std::string::npos ||
                       deps.find(" " + p + "\n") != std::string::npos;
    EXPECT_TRUE(known) << p << " is built with in the image but not in install-deps.sh";
  }
}

TEST(Image, ContextExcludesBuildTreesAndGit) {
  const std::string ignore = readFile(kRoot / ".containerignore");
  std::set<std::string> patterns;
  for (const auto& line : splitLines(ignore)) {
    if (!trim(line).empty() && trim(line)[0] != '#') {
      patterns.insert(trim(line));
    }
  }
  EXPECT_TRUE(patterns.count("build*/")) << ".containerignore must exclude build*/";
  EXPECT_TRUE(patterns.count(".git")) << ".containerignore must exclude .git";
  for (const auto& p : patterns) {
    EXPECT_EQ(p.find('!'), std::string::npos) << "no re-includes: " << p;
    EXPECT_NE(p, "deploy") << "the image copies deploy/render-config.sh";
  }
  // docker reads the Containerfile-specific copy; they must not drift apart.
  EXPECT_EQ(readFile(kRoot / "deploy/Containerfile.dockerignore"), ignore);
}

// ---------------------------------------------------------------------------------------------
// systemd unit
// ---------------------------------------------------------------------------------------------

TEST(Unit, SystemdAnalyzeVerifyIsClean) {
  const std::string sa = which("systemd-analyze");
  if (sa.empty()) {
    GTEST_SKIP() << "systemd-analyze is not installed (Debian package systemd): cannot verify "
                    "deploy/colod.service";
  }
  TempDir tmp;
  ASSERT_TRUE(tmp.ok());
  // verify checks that ExecStart's binary exists: point it at this build's colod (where the
  // unit's own paths come from is checked by DocumentationAndBinariesAreWhatCmakeInstalls).
  std::string unit = readFile(kRoot / "deploy/colod.service");
  for (auto at = unit.find("/usr/local/bin/colod "); at != std::string::npos;
       at = unit.find("/usr/local/bin/colod ")) {
    unit.replace(at, std::string("/usr/local/bin/colod").size(), COLOD_BIN);
  }
  const auto path = tmp.path() / "colod.service";
  std::ofstream(path) << unit;
  const auto r = run({sa, "verify", "--man=no", path.string()});
  EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
  for (const auto& line : splitLines(r.out + r.err)) {
    EXPECT_EQ(line.find("colod.service"), std::string::npos) << line;
  }
  // The check has teeth on this host: a wrong key is reported.
  std::ofstream(path) << unit << "\n[Service]\nCapabilityBoundingSett=CAP_BPF\n";
  const auto bad = run({sa, "verify", "--man=no", path.string()});
  EXPECT_NE((bad.out + bad.err).find("CapabilityBoundingSett"), std::string::npos)
      << "systemd-analyze verify did not report an unknown key: " << bad.out << bad.err;
}

TEST(Unit, OptionalDirectoriesAreDashPrefixedAndOwnOnesAreStateOrRuntimeDirectories) {
  const auto keys = unitKeys(readFile(kRoot / "deploy/colod.service"));
  const std::string state = "/var/lib/" + unitValue(keys, "StateDirectory");
  const std::string runtime = "/run/" + unitValue(keys, "RuntimeDirectory");
  EXPECT_EQ(state, "/var/lib/colod");
  EXPECT_EQ(runtime, "/run/colod");
  bool nri = false;
  for (auto [it, end] = keys.equal_range("ReadWritePaths"); it != end; ++it) {
    for (const auto& p : words(it->second)) {
      nri = nri || p == "-/var/run/nri";
      const bool own = p.rfind(state, 0) == 0 || p.rfind(runtime, 0) == 0;
      EXPECT_TRUE(p[0] == '-' || own)
          << p << ": a path that may not exist needs '-' or the unit fails with 226/NAMESPACE";
    }
  }
  EXPECT_TRUE(nri) << "ReadWritePaths=-/var/run/nri (the NRI socket) is missing";
}

TEST(Unit, CapabilityBoundingSetEqualsTheDaemonSets) {
  const auto keys = unitKeys(readFile(kRoot / "deploy/colod.service"));
  std::set<std::string> unit;
  for (const auto& c : words(unitValue(keys, "CapabilityBoundingSet"))) {
    unit.insert(c);
  }
  std::set<std::string> ds;
  for (const auto& c : daemonSetCapabilities()) {
    ds.insert("CAP_" + c);
  }
  EXPECT_EQ(unit, ds);
  EXPECT_EQ(unitValue(keys, "AmbientCapabilities"), "");
  EXPECT_EQ(unitValue(keys, "NoNewPrivileges"), "yes");
}

TEST(Unit, DoesNotRestartOnConfigErrors) {
  const auto keys = unitKeys(readFile(kRoot / "deploy/colod.service"));
  EXPECT_EQ(unitValue(keys, "RestartPreventExitStatus"), "3");
  EXPECT_EQ(unitValue(keys, "Restart"), "on-failure");
  EXPECT_NE(unitValue(keys, "ExecStartPre").find("--check-config"), std::string::npos);
  EXPECT_EQ(unitValue(keys, "WantedBy"), "multi-user.target");
}

TEST(Unit, DocumentationAndBinariesAreWhatCmakeInstallInstalls) {
  if (::access(kBuild.c_str(), W_OK) != 0) {
    GTEST_SKIP() << kBuild
                 << " is not writable by this user: cmake --install writes its "
                    "install_manifest_colod.txt there";
  }
  for (const std::string prefix : {"/usr/local", "/opt/colod"}) {
    SCOPED_TRACE(prefix);
    TempDir dest;
    ASSERT_TRUE(dest.ok());
    const auto r = run({COLOD_CMAKE_COMMAND, "--install", kBuild.string(), "--component", "colod",
                        "--prefix", prefix},
                       {"DESTDIR=" + dest.path().string()});
    ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
    const fs::path& root = dest.path();
    const fs::path unit_file = root / (prefix.substr(1) + "/lib/systemd/system/colod.service");
    ASSERT_TRUE(fs::exists(unit_file)) << r.out;
    if (prefix == "/usr/local") {
      EXPECT_EQ(readFile(unit_file), readFile(kRoot / "deploy/colod.service"));
    }
    const auto keys = unitKeys(readFile(unit_file));
    const auto docs = words(unitValue(keys, "Documentation"));
    ASSERT_FALSE(docs.empty()) << "Documentation= lost";
    for (const auto& uri : docs) {
      ASSERT_EQ(uri.rfind("file://", 0), 0U)
          << uri << ": only installed files (no man page is installed)";
      EXPECT_TRUE(fs::exists(root / uri.substr(8))) << uri << " is not installed";
    }
    for (const char* key : {"ExecStart", "ExecStartPre"}) {
      const auto bin = words(unitValue(keys, key)).front();
      EXPECT_EQ(bin, prefix + "/bin/colod") << key;
      EXPECT_EQ(::access((root / bin.substr(1)).c_str(), X_OK), 0) << bin << " is not installed";
    }
    EXPECT_EQ(::access((root / (prefix.substr(1) + "/bin/coloctl")).c_str(), X_OK), 0);
  }
}

// ---------------------------------------------------------------------------------------------
// Dashboard
// ---------------------------------------------------------------------------------------------

// Metric families colod exports: name -> type, from the family()/perContainer()/scalar table
// entries of colod_metrics.cpp ("colod_x", MetricType::T).
std::map<std::string, std::string> exportedFamilies() {
  const std::string src = readFile(kRoot / "userspace/metrics/src/colod_metrics.cpp");
  std::map<std::string, std::string> out;
  const std::regex family(R"re("(colod_[a-z0-9_]+)",\s*MetricType::(\w+))re");
  for (std::sregex_iterator it(src.begin(), src.end(), family), end; it != end; ++it) {
    out[(*it)[1]] = (*it)[2];
  }
  return out;
}

TEST(Dashboard, EveryQueryNamesAMetricColodExports) {
  const auto families = exportedFamilies();
  ASSERT_GE(families.size(), 20U) << "could not read the metric families of colod_metrics.cpp";
  ASSERT_EQ(families.at("colod_runqueue_latency_seconds"), "Histogram");
  std::set<std::string> histograms;
  for (const auto& [name, type] : families) {
    if (type == "Histogram") {
      histograms.insert(name);
    }
  }
  std::vector<std::string> exprs;
  const auto names = dashboardMetricNames(&exprs);
  ASSERT_GE(exprs.size(), 15U);
  for (const auto& e : exprs) {
    EXPECT_NE(e.find("colod_"), std::string::npos) << "a query on no colod metric: " << e;
  }
  for (const auto& n : names) {
    const auto fam = familyOf(n, histograms);
    EXPECT_TRUE(families.count(fam)) << n << " is not a metric colod exports";
    if (fam == n) {
      EXPECT_EQ(histograms.count(n), 0U) << n << ": query a histogram through _bucket/_sum/_count";
    }
  }

  // Labels: the ones colod puts on its series, the histogram's le, and the target labels the
  // PodMonitor / Prometheus add.
  const std::string src = readFile(kRoot / "userspace/metrics/src/colod_metrics.cpp");
  std::set<std::string> labels{"le", "instance", "job"};
  const std::regex label_init(R"re(\{"([a-z_]+)",\s*[a-z])re");
  for (std::sregex_iterator it(src.begin(), src.end(), label_init), end; it != end; ++it) {
    labels.insert((*it)[1]);
  }
  const YAML::Node pm = YAML::LoadFile((kRoot / "deploy/podmonitor.yaml").string());
  for (const auto& r : pm["spec"]["podMetricsEndpoints"][0]["relabelings"]) {
    labels.insert(r["targetLabel"].as<std::string>());
  }
  for (const char* l : {"pod", "namespace", "container", "tier", "kind", "node"}) {
    EXPECT_TRUE(labels.count(l)) << "label " << l << " is no longer exported";
  }
  const std::regex by(R"(\b(?:by|without)\s*\(([^)]*)\))");
  const std::regex matcher(R"re(([A-Za-z_][A-Za-z0-9_]*)\s*(?:=~|!~|!=|=)\s*")re");
  for (const auto& e : exprs) {
    for (std::sregex_iterator it(e.begin(), e.end(), by), end; it != end; ++it) {
      std::string list = (*it)[1];
      std::replace(list.begin(), list.end(), ',', ' ');
      for (const auto& l : words(list)) {
        EXPECT_TRUE(labels.count(l)) << "label " << l << " in: " << e;
      }
    }
    for (std::sregex_iterator it(e.begin(), e.end(), matcher), end; it != end; ++it) {
      EXPECT_TRUE(labels.count((*it)[1])) << "label " << (*it)[1] << " in: " << e;
    }
  }
}

TEST(Dashboard, ShowsWhatAnOperatorLooksFor) {
  std::vector<std::string> exprs;
  const auto names = dashboardMetricNames(&exprs);
  for (const char* m :
       {"colod_runqueue_latency_seconds_bucket", "colod_preemptions_total", "colod_cpu_quota_cpus",
        "colod_cpuset_cpus", "colod_reconcile_tracked", "colod_reconcile_pending",
        "colod_reconcile_oldest_pending_seconds", "colod_decisions_total",
        "colod_process_cpu_seconds_total", "colod_process_resident_memory_bytes"}) {
    EXPECT_TRUE(names.count(m)) << "the dashboard shows no " << m;
  }
  const bool ls_p99 = std::any_of(exprs.begin(), exprs.end(), [](const std::string& e) {
    return e.find("histogram_quantile(0.99") != std::string::npos &&
           e.find("tier=\"ls\"") != std::string::npos && e.find("container") != std::string::npos;
  });
  EXPECT_TRUE(ls_p99) << "no LS run-queue p99 per container";
  const auto dash = nlohmann::json::parse(readFile(kRoot / "deploy/grafana/colod.json"));
  EXPECT_EQ(dash.at("uid"), "colod");
  EXPECT_TRUE(dash.at("templating").at("list").is_array());
}

// ---------------------------------------------------------------------------------------------
// README
// ---------------------------------------------------------------------------------------------

TEST(Readme, StatesTheRequirementsAndNoStaleKernelAdvice) {
  const std::string readme = readFile(kRoot / "deploy/README.md");
  bool kernel_row = false;
  for (const auto& line : splitLines(readme)) {
    kernel_row = kernel_row || (line.rfind('|', 0) == 0 && line.find("5.11") != std::string::npos &&
                                line.find("BTF") != std::string::npos);
  }
  EXPECT_TRUE(kernel_row) << "no requirements table row with the kernel (>= 5.11, BTF)";
  EXPECT_NE(readme.find("containerd"), std::string::npos);
  EXPECT_NE(readme.find("1.26"), std::string::npos) << "CRI-O >= 1.26";
  for (const char* stale :
       {"tracefs", "/sys/kernel/tracing", "kprobe", "older than 5.8", "< 5.8", "SYS_ADMIN` instead",
        "hostPID: true", "0.0.0.0", "Unconfined", "/etc/colod/colod.yaml"}) {
    EXPECT_EQ(readme.find(stale), std::string::npos) << "stale advice: " << stale;
  }
}

// The top-level README's "Where colod stands" figures are the latest colocation run's (the first
// "colocation:" line of docs/benchmarks.md), so they cannot go stale again.
TEST(Readme, WhereColodStandsQuotesTheLatestColocationRun) {
  const std::string bench = readFile(kRoot / "docs/benchmarks.md");
  std::smatch m;
  ASSERT_TRUE(std::regex_search(
      bench, m,
      std::regex(R"(colocation: ls_p99_solo_us=([0-9]+) ls_p99_nocolod_us=([0-9]+) )"
                 R"(ls_p99_colod_us=([0-9]+) be_ops_nocolod=([0-9]+) be_ops_colod=([0-9]+) )"
                 R"(reaction_p50_ms=([0-9]+) colod_rss_mib=([0-9.]+))")))
      << "no 'colocation:' line in docs/benchmarks.md";
  const std::string readme = readFile(kRoot / "README.md");
  const auto at = readme.find("Where colod stands");
  ASSERT_NE(at, std::string::npos);
  const std::string para = readme.substr(at, readme.find("\n\n", at) - at);
  char ratio[16];
  std::snprintf(ratio, sizeof ratio, "%.2f",
                std::stod(m[5].str()) / std::stod(m[4].str()));
  for (const std::string& want :
       {m[3].str() + " µs with colod", m[2].str() + " µs\nwithout it", m[1].str() + " µs alone",
        std::string(ratio) + " of its work", m[6].str() + "\nms (median)",
        m[7].str() + " MiB with 1000"}) {
    std::string flat_want = want;
    std::string flat_para = para;
    for (auto* x : {&flat_want, &flat_para}) {
      std::replace(x->begin(), x->end(), '\n', ' ');
    }
    EXPECT_NE(flat_para.find(flat_want), std::string::npos)
        << "README's 'Where colod stands' must say \"" << flat_want
        << "\" (the latest run in docs/benchmarks.md):\n"
        << para;
  }
}

TEST(Readme, MemoryFiguresAreTheLatestBenchmarks) {
  const std::string bench = readFile(kRoot / "docs/benchmarks.md");
  std::smatch m;
  ASSERT_TRUE(std::regex_search(
      bench, m,
      std::regex(
          R"(colod rss: ([0-9.]+) MiB with the large container set, ([0-9.]+) MiB with 10)")))
      << "no 'colod rss:' line in docs/benchmarks.md";
  const std::set<std::string> latest{m[1], m[2]};  // the first entry is the latest run
  const std::string readme = readFile(kRoot / "deploy/README.md");
  std::set<std::string> quoted;
  const std::regex mib(R"(([0-9]+(?:\.[0-9]+)?) MiB)");
  for (std::sregex_iterator it(readme.begin(), readme.end(), mib), end; it != end; ++it) {
    quoted.insert((*it)[1]);
  }
  EXPECT_EQ(quoted, latest) << "deploy/README.md must quote colod's RSS as docs/benchmarks.md's "
                               "latest run: "
                            << *latest.begin() << " and " << *latest.rbegin() << " MiB";
}

}  // namespace
