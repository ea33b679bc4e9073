// SPDX-License-Identifier: Apache-2.0
// Helpers shared by deploy_test and deploy_caps_test: reading files, running a command with its
// output captured, temporary directories, and the facts both read from deploy/ (the DaemonSet's
// capabilities, the metric names the dashboard queries).
#pragma once

#include <fcntl.h>
#include <sys/wait.h>
#include <unistd.h>
#include <yaml-cpp/yaml.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <vector>

namespace colod::deploy_test {

inline const std::filesystem::path kRoot = COLOD_SOURCE_DIR;

inline std::string readFile(const std::filesystem::path& p) {
  std::ifstream f(p);
  std::ostringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

inline std::vector<std::string> splitLines(const std::string& text) {
  std::vector<std::string> out;
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) {
    out.push_back(line);
  }
  return out;
}

// A mkdtemp directory, removed with its contents on destruction.
class TempDir {
 public:
  TempDir() {
    const char* base = std::getenv("TMPDIR");
    std::string tmpl =
        std::string(base != nullptr && *base != '\0' ? base : "/tmp") + "/colod-deploy-XXXXXX";
    if (::mkdtemp(tmpl.data()) != nullptr) {
      path_ = tmpl;
    }
  }
  ~TempDir() {
    if (!path_.empty()) {
      std::error_code ec;
      std::filesystem::remove_all(path_, ec);
    }
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  TempDir(TempDir&&) = delete;
  TempDir& operator=(TempDir&&) = delete;
  [[nodiscard]] const std::filesystem::path& path() const { return path_; }
  [[nodiscard]] bool ok() const { return !path_.empty(); }

 private:
  std::filesystem::path path_;
};

struct RunResult {
  int exit_code = -1;  // -1: could not run, or killed by a signal
  std::string out;
  std::string err;
};

// Runs argv (PATH lookup for argv[0]) with `env` entries ("NAME=value") added to the
// environment, stdout and stderr captured through temporary files (no pipe deadlock).
inline RunResult run(const std::vector<std::string>& argv,
                     const std::vector<std::string>& env = {}) {
  RunResult r;
  TempDir tmp;
  if (!tmp.ok() || argv.empty()) {
    r.err = "cannot create a temporary directory";
    return r;
  }
  const std::string out_path = (tmp.path() / "out").string();
  const std::string err_path = (tmp.path() / "err").string();
  const pid_t pid = ::fork();
  if (pid < 0) {
    r.err = std::string("fork: ") + std::strerror(errno);
    return r;
  }
  if (pid == 0) {
    const int out = ::open(out_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    const int err = ::open(err_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    const int null = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
    if (out < 0 || err < 0 || null < 0 || ::dup2(out, 1) < 0 || ::dup2(err, 2) < 0 ||
        ::dup2(null, 0) < 0) {
      ::_exit(126);
    }
    for (const auto& e : env) {
      ::putenv(const_cast<char*>(e.c_str()));  // NOLINT: the child owns its copy of env
    }
    std::vector<char*> args;
    for (const auto& a : argv) {
      args.push_back(const_cast<char*>(a.c_str()));  // NOLINT: execvp's signature
    }
    args.push_back(nullptr);
    ::execvp(args[0], args.data());
    std::fprintf(stderr, "exec %s: %s\n", args[0], std::strerror(errno));
    ::_exit(127);
  }
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  r.out = readFile(out_path);
  r.err = readFile(err_path);
  return r;
}

// The path of an executable named `name` in PATH or the sbin directories, or "".
inline std::string which(const std::string& name) {
  const char* env_path = std::getenv("PATH");
  std::string path = env_path != nullptr ? env_path : "";
  path += ":/usr/sbin:/sbin:/usr/bin:/bin";
  std::istringstream dirs(path);
  std::string dir;
  while (std::getline(dirs, dir, ':')) {
    if (dir.empty()) {
      continue;
    }
    const auto p = std::filesystem::path(dir) / name;
    if (::access(p.c_str(), X_OK) == 0) {
      return p.string();
    }
  }
  return "";
}

// n[k0][k1]...: an undefined node when any key is missing (yaml-cpp throws when indexing
// further into a missing key).
inline YAML::Node child(const YAML::Node& n, std::initializer_list<const char*> path) {
  YAML::Node cur = YAML::Clone(n);
  for (const char* k : path) {
    if (!cur.IsMap() || !cur[k]) {
      return YAML::Node(YAML::NodeType::Undefined);
    }
    cur = cur[k];
  }
  return cur;
}

inline YAML::Node findDoc(const std::vector<YAML::Node>& docs, const std::string& kind) {
  for (const auto& d : docs) {
    if (d["kind"] && d["kind"].as<std::string>() == kind) {
      return d;
    }
  }
  return YAML::Node();
}

inline YAML::Node daemonSet() {
  return findDoc(YAML::LoadAllFromFile((kRoot / "deploy/daemonset.yaml").string()), "DaemonSet");
}

// The container of the DaemonSet's pod named `name` (containers or initContainers).
inline YAML::Node podContainer(const YAML::Node& pod, const std::string& name) {
  for (const char* list : {"containers", "initContainers"}) {
    for (const auto& c : pod[list]) {
      if (c["name"] && c["name"].as<std::string>() == name) {
        return c;
      }
    }
  }
  return YAML::Node();
}

// Capabilities the DaemonSet adds to the colod container, as written ("BPF", "PERFMON").
inline std::set<std::string> daemonSetCapabilities() {
  std::set<std::string> caps;
  const YAML::Node c = podContainer(daemonSet()["spec"]["template"]["spec"], "colod");
  for (const auto& cap : c["securityContext"]["capabilities"]["add"]) {
    caps.insert(cap.as<std::string>());
  }
  return caps;
}

// Every colod_* metric name in the dashboard's queries (panel targets and template variables).
inline std::set<std::string> dashboardMetricNames(std::vector<std::string>* exprs_out = nullptr) {
  const auto dash = nlohmann::json::parse(readFile(kRoot / "deploy/grafana/colod.json"));
  std::vector<std::string> exprs;
  // Walk the whole document: queries sit in panels[].targets[].expr (rows may nest panels) and
  // in templating.list[].query(.query).
  std::vector<const nlohmann::json*> stack{&dash};
  while (!stack.empty()) {
    const nlohmann::json* j = stack.back();
    stack.pop_back();
    if (j->is_object()) {
      if (j->contains("type") && j->at("type") == "datasource") {
        continue;  // the data source picker: its "query" is a plugin type, not PromQL
      }
      for (const auto& [key, value] : j->items()) {
        if ((key == "expr" || key == "query" || key == "definition") && value.is_string()) {
          exprs.push_back(value.get<std::string>());
        } else {
          stack.push_back(&value);
        }
      }
    } else if (j->is_array()) {
      for (const auto& value : *j) {
        stack.push_back(&value);
      }
    }
  }
  std::set<std::string> names;
  const std::regex metric(R"(\bcolod_[A-Za-z0-9_]+)");
  for (const auto& e : exprs) {
    for (std::sregex_iterator it(e.begin(), e.end(), metric), end; it != end; ++it) {
      names.insert(it->str());
    }
  }
  if (exprs_out != nullptr) {
    *exprs_out = std::move(exprs);
  }
  return names;
}

// A histogram family `x` is queried as x_bucket, x_sum, x_count: the family name of a series.
inline std::string familyOf(const std::string& series, const std::set<std::string>& histograms) {
  for (const char* suffix : {"_bucket", "_sum", "_count"}) {
    const std::string s = suffix;
    if (series.size() > s.size() && series.compare(series.size() - s.size(), s.size(), s) == 0) {
      const std::string base = series.substr(0, series.size() - s.size());
      if (histograms.count(base) != 0U) {
        return base;
      }
    }
  }
  return series;
}

}  // namespace colod::deploy_test
