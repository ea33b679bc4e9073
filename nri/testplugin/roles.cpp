// SPDX-License-Identifier: Apache-2.0
#include "roles.h"

#include <cerrno>
#include <charconv>

namespace colod::nri::testplugin {
namespace {

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t' || s.front() == '"')) {
    s.remove_prefix(1);
  }
  while (!s.empty() &&
         (s.back() == ' ' || s.back() == '\t' || s.back() == '\r' || s.back() == '"')) {
    s.remove_suffix(1);
  }
  return s;
}

std::optional<int> toInt(std::string_view s) {
  int v = 0;
  auto r = std::from_chars(s.data(), s.data() + s.size(), v);
  if (r.ec != std::errc() || r.ptr != s.data() + s.size() || v < 0) {
    return std::nullopt;
  }
  return v;
}

std::string qosOf(const PodSandbox& pod, const Container& ctr) {
  for (const StringMap* m : {&ctr.labels, &pod.labels}) {
    for (const auto& [k, v] : *m) {
      if (k == kQosLabel) {
        return std::string(v);
      }
    }
  }
  return {};
}

}  // namespace

Result<Role> parseRole(std::string_view s) {
  if (s == "koordinator") {
    return Role::Koordinator;
  }
  if (s == "topology") {
    return Role::Topology;
  }
  if (s == "observe") {
    return Role::Observe;
  }
  return COLOD_ERR(EINVAL, "role '", s, "': want koordinator, topology or observe");
}

Result<std::set<int>> parseCpuList(std::string_view s) {
  std::set<int> out;
  while (!s.empty()) {
    auto comma = s.find(',');
    std::string_view part = s.substr(0, comma);
    s = comma == std::string_view::npos ? std::string_view{} : s.substr(comma + 1);
    auto dash = part.find('-');
    auto lo = toInt(part.substr(0, dash));
    auto hi = dash == std::string_view::npos ? lo : toInt(part.substr(dash + 1));
    if (!lo || !hi || *hi < *lo || *hi > 4095) {
      return COLOD_ERR(EINVAL, "cpu list part '", part, "'");
    }
    for (int c = *lo; c <= *hi; ++c) {
      out.insert(c);
    }
  }
  return out;
}

std::string formatCpuList(const std::set<int>& cpus) {
  std::string out;
  for (auto it = cpus.begin(); it != cpus.end();) {
    int lo = *it;
    int hi = lo;
    for (++it; it != cpus.end() && *it == hi + 1; ++it) {
      hi = *it;
    }
    out += (out.empty() ? "" : ",") + std::to_string(lo);
    if (hi != lo) {
      out += "-" + std::to_string(hi);
    }
  }
  return out;
}

Result<RoleConfig> parseConfig(std::string_view text, RoleConfig base) {
  while (!text.empty()) {
    auto nl = text.find('\n');
    std::string_view line = text.substr(0, nl);
    text = nl == std::string_view::npos ? std::string_view{} : text.substr(nl + 1);
    line = trim(line);
    if (line.empty() || line.front() == '#') {
      continue;
    }
    auto colon = line.find(':');
    if (colon == std::string_view::npos) {
      return COLOD_ERR(EINVAL, "config line '", line, "': want key: value");
    }
    std::string_view key = trim(line.substr(0, colon));
    std::string_view val = trim(line.substr(colon + 1));
    if (key == "role") {
      auto r = parseRole(val);
      if (!r) {
        return std::move(r).error();
      }
      base.role = *r;
    } else if (key == "ls_cpus") {
      if (auto r = parseCpuList(val); !r || r->empty()) {
        return COLOD_ERR(EINVAL, "ls_cpus '", val, "'");
      }
      base.ls_cpus = std::string(val);
    } else if (key == "be_shares") {
      auto v = toInt(val);
      if (!v || *v < 2) {
        return COLOD_ERR(EINVAL, "be_shares '", val, "'");
      }
      base.be_shares = static_cast<uint64_t>(*v);
    } else if (key == "pool") {
      auto r = parseCpuList(val);
      if (!r) {
        return std::move(r).error();
      }
      base.pool = std::move(*r);
    } else {
      return COLOD_ERR(EINVAL, "unknown config key '", key, "'");
    }
  }
  return base;
}

std::optional<LinuxResources> Roles::adjust(const PodSandbox& pod, const Container& ctr) {
  const std::string qos = qosOf(pod, ctr);
  const bool ls = qos == "LS" || qos == "LSR";
  LinuxResources r;
  switch (cfg_.role) {
    case Role::Observe:
      return std::nullopt;
    case Role::Koordinator:
      if (ls) {
        r.cpu.cpus = cfg_.ls_cpus;
        return r;
      }
      if (qos == "BE") {
        r.cpu.shares = cfg_.be_shares;
        return r;
      }
      return std::nullopt;
    case Role::Topology: {
      if (!ls) {
        return std::nullopt;
      }
      int want = 0;
      for (const auto& [k, v] : pod.annotations) {
        if (k == kExclusiveAnnotation) {
          want = toInt(trim(v)).value_or(0);
        }
      }
      if (want <= 0) {
        return std::nullopt;
      }
      std::set<int> free = cfg_.pool;
      for (const auto& [id, cpus] : exclusive_) {
        for (int c : cpus) {
          free.erase(c);
        }
      }
      if (static_cast<int>(free.size()) < want) {
        return std::nullopt;  // pool exhausted: the container shares, as a real policy would
      }
      std::set<int> mine(free.begin(), std::next(free.begin(), want));
      exclusive_[ctr.id] = mine;
      r.cpu.cpus = formatCpuList(mine);
      return r;
    }
  }
  return std::nullopt;
}

void Roles::release(const std::string& container_id) { exclusive_.erase(container_id); }

}  // namespace colod::nri::testplugin
