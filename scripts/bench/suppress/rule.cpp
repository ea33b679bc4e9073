// SPDX-License-Identifier: Apache-2.0
#include "rule.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <vector>

namespace colod::suppress {
namespace {

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t' || s.front() == '\n')) {
    s.remove_prefix(1);
  }
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t' || s.back() == '\n')) {
    s.remove_suffix(1);
  }
  return s;
}

bool parseU64(std::string_view s, uint64_t& out) {
  const auto* end = s.data() + s.size();
  auto [p, ec] = std::from_chars(s.data(), end, out);
  return ec == std::errc() && p == end;
}

std::vector<std::string_view> fields(std::string_view line) {
  std::vector<std::string_view> out;
  size_t i = 0;
  while (i < line.size()) {
    while (i < line.size() && line[i] == ' ') {
      ++i;
    }
    size_t j = i;
    while (j < line.size() && line[j] != ' ') {
      ++j;
    }
    if (j > i) {
      out.push_back(line.substr(i, j - i));
    }
    i = j;
  }
  return out;
}

}  // namespace

Result<ProcStatCpu> parseProcStat(std::string_view text) {
  size_t pos = 0;
  while (pos < text.size()) {
    size_t nl = text.find('\n', pos);
    if (nl == std::string_view::npos) {
      nl = text.size();
    }
    const std::string_view line = text.substr(pos, nl - pos);
    pos = nl + 1;
    if (line.rfind("cpu ", 0) != 0) {
      continue;
    }
    const auto f = fields(line);
    // cpu user nice system idle iowait irq softirq steal [guest guest_nice] (proc(5)).
    if (f.size() < 9) {
      return COLOD_ERR(EINVAL, "/proc/stat: cpu line has ", f.size() - 1, " fields, want >= 8");
    }
    uint64_t v[8];
    for (size_t k = 0; k < 8; ++k) {
      if (!parseU64(f[k + 1], v[k])) {
        return COLOD_ERR(EINVAL, "/proc/stat: bad number '", f[k + 1], "'");
      }
    }
    ProcStatCpu out;
    out.busy = v[0] + v[1] + v[2] + v[5] + v[6] + v[7];
    out.total = out.busy + v[3] + v[4];
    return out;
  }
  return COLOD_ERR(EINVAL, "/proc/stat: no aggregate cpu line");
}

Result<uint64_t> parseCpuacctUsage(std::string_view text) {
  uint64_t v = 0;
  if (!parseU64(trim(text), v)) {
    return COLOD_ERR(EINVAL, "cpuacct.usage: not a number: '", trim(text), "'");
  }
  return v;
}

Result<uint64_t> parseCpuStatUsageNs(std::string_view text) {
  size_t pos = 0;
  while (pos < text.size()) {
    size_t nl = text.find('\n', pos);
    if (nl == std::string_view::npos) {
      nl = text.size();
    }
    const auto f = fields(text.substr(pos, nl - pos));
    pos = nl + 1;
    if (f.size() == 2 && f[0] == "usage_usec") {
      uint64_t us = 0;
      if (!parseU64(f[1], us)) {
        return COLOD_ERR(EINVAL, "cpu.stat: bad usage_usec '", f[1], "'");
      }
      return us * 1000;
    }
  }
  return COLOD_ERR(EINVAL, "cpu.stat: no usage_usec line");
}

RuleOutput suppressRule(const RuleInput& in) {
  RuleOutput out;
  // koordlet clamps system.Used at 0 (pods can briefly account more than the node sample).
  out.system_used_cpus = std::max(0.0, in.node_used_cpus - in.pods_used_cpus);
  out.suppress_cpus =
      in.node_cpus * in.slo_percent / 100.0 - in.ls_used_cpus - out.system_used_cpus;
  int cpus = static_cast<int>(std::ceil(out.suppress_cpus));
  cpus = std::max(cpus, in.be_min_cpus);
  // beMaxIncreaseCPUPercent = 0.1: a grow is limited to ceil(10 % of the node) per round.
  const int max_step = static_cast<int>(std::ceil(in.node_cpus * 0.1));
  if (in.current_be_cpus > 0 && cpus - in.current_be_cpus > max_step) {
    cpus = in.current_be_cpus + max_step;
  }
  out.be_cpus = std::clamp(cpus, 1, std::max(1, in.node_cpus));
  return out;
}

std::string beCpuset(int node_cpus, int count) {
  if (node_cpus <= 0) {
    return "";
  }
  count = std::clamp(count, 1, node_cpus);
  const int first = node_cpus - count;
  const int last = node_cpus - 1;
  return first == last ? std::to_string(first) : std::to_string(first) + "-" + std::to_string(last);
}

}  // namespace colod::suppress
