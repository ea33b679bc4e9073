// SPDX-License-Identifier: Apache-2.0
#include "colod/policy/tier.h"

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <set>

namespace colod::policy {
namespace {

std::string lower(std::string_view s) {
  std::string out(s);
  std::transform(out.begin(), out.end(), out.begin(), [](char c) {
    return (c >= 'A' && c <= 'Z') ? static_cast<char>(c - 'A' + 'a') : c;
  });
  return out;
}

struct Lookup {
  const std::map<std::string, std::string>* map;
  const char* where;
};

std::optional<Tier> colodTier(std::string_view v) {
  const std::string l = lower(v);
  if (l == "ls") {
    return Tier::Ls;
  }
  if (l == "be") {
    return Tier::Be;
  }
  if (l == "system") {
    return Tier::System;
  }
  return std::nullopt;
}

std::optional<Tier> koordinatorTier(std::string_view v) {
  // koordinator apis/extension/qos.go: LSE, LSR, LS, BE, SYSTEM.
  if (v == "LSE" || v == "LSR" || v == "LS") {
    return Tier::Ls;
  }
  if (v == "BE") {
    return Tier::Be;
  }
  if (v == "SYSTEM") {
    return Tier::System;
  }
  return std::nullopt;
}

std::optional<Tier> katalystTier(std::string_view v) {
  // katalyst docs/concepts.md: dedicated_cores, shared_cores, reclaimed_cores, system_cores.
  if (v == "dedicated_cores" || v == "shared_cores" || v == "dedicated" || v == "shared") {
    return Tier::Ls;
  }
  if (v == "reclaimed_cores" || v == "reclaimed") {
    return Tier::Be;
  }
  if (v == "system_cores" || v == "system") {
    return Tier::System;
  }
  return std::nullopt;
}

}  // namespace

std::string_view tierName(Tier tier) {
  switch (tier) {
    case Tier::Ls:
      return "ls";
    case Tier::Be:
      return "be";
    case Tier::System:
      return "system";
    case Tier::Unknown:
      break;
  }
  return "unknown";
}

K8sQos qosFromCgroupParent(std::string_view parent) {
  const std::string l = lower(parent);
  if (l.find("besteffort") != std::string::npos) {
    return K8sQos::BestEffort;
  }
  if (l.find("burstable") != std::string::npos) {
    return K8sQos::Burstable;
  }
  // Guaranteed pods sit directly under kubepods: "kubepods-pod<uid>.slice" (systemd) or
  // "/kubepods/pod<uid>" (cgroupfs).
  if (l.find("kubepods-pod") != std::string::npos || l.find("kubepods/pod") != std::string::npos ||
      l.find("kubepods.slice/kubepods-pod") != std::string::npos) {
    return K8sQos::Guaranteed;
  }
  return K8sQos::Unknown;
}

TierResult classifyTier(const ContainerInfo& info) {
  TierResult result;
  if (info.tier.has_value()) {
    result.tier = *info.tier;
    result.source = "set by caller";
    return result;
  }
  const Lookup order[] = {
      {&info.container_annotations, "container annotation"},
      {&info.pod_annotations, "pod annotation"},
      {&info.container_labels, "container label"},
      {&info.pod_labels, "pod label"},
  };
  struct KeyRule {
    std::string_view key;
    std::optional<Tier> (*parse)(std::string_view);
  };
  const KeyRule rules[] = {
      {kTierKey, colodTier},
      {kKoordinatorQosKey, koordinatorTier},
      {kKatalystQosKey, katalystTier},
  };
  for (const KeyRule& rule : rules) {
    for (const Lookup& lookup : order) {
      auto it = lookup.map->find(std::string(rule.key));
      if (it == lookup.map->end()) {
        continue;
      }
      if (auto tier = rule.parse(it->second)) {
        result.tier = *tier;
        result.source = std::string(rule.key) + " (" + lookup.where + ")";
        return result;
      }
      result.unknown.push_back({std::string(rule.key), it->second, lookup.where});
    }
  }
  switch (qosFromCgroupParent(info.cgroup_parent)) {
    case K8sQos::Guaranteed:
      result.tier = Tier::Ls;
      result.source = "cgroup parent (guaranteed)";
      break;
    case K8sQos::Burstable:
      result.tier = Tier::Ls;
      result.source = "cgroup parent (burstable)";
      break;
    case K8sQos::BestEffort:
      result.tier = Tier::Be;
      result.source = "cgroup parent (besteffort)";
      break;
    case K8sQos::Unknown:
      result.source = "unclassified";
      break;
  }
  return result;
}

bool isPolicyKey(std::string_view key) {
  return key.starts_with("colod.io/") || key == kKoordinatorQosKey || key == kKatalystQosKey;
}

Result<std::vector<int>> parseCpuList(std::string_view text) {
  std::set<int> cpus;
  auto parseNum = [](std::string_view tok, int& out) {
    if (tok.empty()) {
      return false;
    }
    const char* end = tok.data() + tok.size();
    auto [p, ec] = std::from_chars(tok.data(), end, out);
    return ec == std::errc() && p == end && out >= 0 && out <= 65535;
  };
  // Trim whitespace and one trailing newline (the kernel file ends with '\n').
  while (!text.empty() && (text.back() == '\n' || text.back() == ' ')) {
    text.remove_suffix(1);
  }
  while (!text.empty() && text.front() == ' ') {
    text.remove_prefix(1);
  }
  if (text.empty()) {
    return std::vector<int>{};
  }
  size_t pos = 0;
  while (pos <= text.size()) {
    size_t comma = text.find(',', pos);
    if (comma == std::string_view::npos) {
      comma = text.size();
    }
    std::string_view tok = text.substr(pos, comma - pos);
    size_t dash = tok.find('-');
    int lo = 0;
    int hi = 0;
    bool ok = false;
    if (dash == std::string_view::npos) {
      ok = parseNum(tok, lo);
      hi = lo;
    } else {
      ok = parseNum(tok.substr(0, dash), lo) && parseNum(tok.substr(dash + 1), hi) && lo <= hi;
    }
    if (!ok) {
      return COLOD_ERR(EINVAL, "bad CPU list \"", text, "\": token \"", tok, "\"");
    }
    for (int c = lo; c <= hi; ++c) {
      cpus.insert(c);
    }
    pos = comma + 1;
    if (comma == text.size()) {
      break;
    }
  }
  return std::vector<int>(cpus.begin(), cpus.end());
}

std::string formatCpuList(std::span<const int> cpus_in) {
  std::vector<int> cpus(cpus_in.begin(), cpus_in.end());
  std::sort(cpus.begin(), cpus.end());
  cpus.erase(std::unique(cpus.begin(), cpus.end()), cpus.end());
  std::string out;
  for (size_t i = 0; i < cpus.size();) {
    size_t j = i;
    while (j + 1 < cpus.size() && cpus[j + 1] == cpus[j] + 1) {
      ++j;
    }
    if (!out.empty()) {
      out += ',';
    }
    out += std::to_string(cpus[i]);
    if (j > i) {
      out += '-';
      out += std::to_string(cpus[j]);
    }
    i = j + 1;
  }
  return out;
}

bool inferExclusiveCpus(const ContainerInfo& info,
                        std::span<const int> node_cpus,
                        std::span<const int> shared_pool) {
  if (qosFromCgroupParent(info.cgroup_parent) != K8sQos::Guaranteed) {
    return false;
  }
  const auto& r = info.resources;
  if (!r.cpu_quota || !r.cpu_period || *r.cpu_quota <= 0 || *r.cpu_period == 0) {
    return false;
  }
  const auto quota = static_cast<uint64_t>(*r.cpu_quota);
  if (quota % *r.cpu_period != 0) {
    return false;  // fractional CPU request: the static policy leaves it in the shared pool
  }
  std::vector<int> cpus = info.cpuset;
  if (cpus.empty() && r.cpuset_cpus) {
    auto parsed = parseCpuList(*r.cpuset_cpus);
    if (!parsed) {
      return false;
    }
    cpus = std::move(*parsed);
  }
  std::sort(cpus.begin(), cpus.end());
  if (cpus.empty() || cpus.size() != quota / *r.cpu_period) {
    return false;
  }
  std::set<int> node(node_cpus.begin(), node_cpus.end());
  if (cpus.size() >= node.size()) {
    return false;  // not a strict subset
  }
  for (int c : cpus) {
    if (node.count(c) == 0) {
      return false;
    }
  }
  for (int c : shared_pool) {
    if (std::binary_search(cpus.begin(), cpus.end(), c)) {
      return false;
    }
  }
  return true;
}

}  // namespace colod::policy
