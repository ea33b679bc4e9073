// SPDX-License-Identifier: Apache-2.0
// Helpers the deploy/ test files share: YAML comparison and comments, the Containerfile's
// stages, the Debian package database (dpkg, ldd), the systemd unit's keys. Test-only.
#pragma once

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <chrono>
#include <csignal>
#include <functional>
#include <map>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "test_support.h"

namespace colod::deploy_test {

namespace fs = std::filesystem;

inline const fs::path kBuild = COLOD_BINARY_DIR;

// ---------------------------------------------------------------------------------------------
// Small parsers
// ---------------------------------------------------------------------------------------------

// Deep equality of two YAML trees: maps by key set, sequences by order, scalars by text.
inline bool sameYaml(const YAML::Node& a,
                     const YAML::Node& b,
                     const std::string& path,
                     std::string& why) {
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

inline std::string trim(const std::string& s) {
  const auto b = s.find_first_not_of(" \t");
  if (b == std::string::npos) {
    return "";
  }
  return s.substr(b, s.find_last_not_of(" \t") - b + 1);
}

// The comment that explains the first line containing `needle`: its trailing "# ..." plus the
// block of comment lines directly above it. "" when there is none.
inline std::string commentAbove(const std::string& text, const std::string& needle) {
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

inline std::vector<std::string> words(const std::string& s) {
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

inline std::vector<Stage> containerfileStages() {
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

inline const Stage* buildStage(const std::vector<Stage>& stages) {
  for (const auto& s : stages) {
    if (s.from.find(" AS build") != std::string::npos) {
      return &s;
    }
  }
  return nullptr;
}

// Package names given to `apt-get install` in a stage.
inline std::vector<std::string> aptPackages(const Stage& stage) {
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
inline std::vector<std::string> cmakeConfigureOptions(const Stage& stage) {
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
inline std::vector<std::pair<std::string, std::string>> shippedFromBuild(const Stage& stage) {
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

inline std::string stripArch(std::string name) {
  const auto colon = name.find(':');
  if (colon != std::string::npos) {
    name.resize(colon);
  }
  return trim(name);
}

// "a (>= 1), b | c:any, d" -> {{a}, {b, c}, {d}}
inline std::vector<std::vector<std::string>> parseDepends(const std::string& field) {
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

inline PackageDb loadPackageDb() {
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
inline std::vector<std::string> dpkgCandidates(const std::string& path) {
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
inline std::map<std::string, std::set<std::string>> dpkgOwners(const std::set<std::string>& paths) {
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

inline std::set<std::string> ownersOf(const std::string& path,
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

inline std::string joined(const std::set<std::string>& s) {
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

inline LddResult ldd(const fs::path& binary) {
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

inline bool haveDpkgTools(std::string& why) {
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
inline std::multimap<std::string, std::string> unitKeys(const std::string& text) {
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

inline std::string unitValue(const std::multimap<std::string, std::string>& keys,
                             const std::string& k) {
  const auto it = keys.find(k);
  return it == keys.end() ? "" : it->second;
}

// colod's default config path (userspace/daemon/src/main.cpp, kDefaultConfig).
inline std::string colodDefaultConfigPath() {
  const std::string main = readFile(kRoot / "userspace/daemon/src/main.cpp");
  std::smatch m;
  if (std::regex_search(main, m, std::regex(R"re(kDefaultConfig\s*=\s*"([^"]+)")re"))) {
    return m[1];
  }
  return "";
}

}  // namespace colod::deploy_test
