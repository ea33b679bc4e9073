// SPDX-License-Identifier: Apache-2.0
#include "colod/cgroup/parse.h"

#include <algorithm>
#include <charconv>
#include <cmath>

namespace colod::cgroup {
namespace {

constexpr std::string_view kSpace = " \t\r\n";

std::string_view trim(std::string_view s) {
  const auto b = s.find_first_not_of(kSpace);
  if (b == std::string_view::npos) {
    return {};
  }
  const auto e = s.find_last_not_of(kSpace);
  return s.substr(b, e - b + 1);
}

// Splits off the next line (without '\n').
std::string_view nextLine(std::string_view& rest) {
  const auto nl = rest.find('\n');
  std::string_view line = rest.substr(0, nl);
  rest = nl == std::string_view::npos ? std::string_view{} : rest.substr(nl + 1);
  return line;
}

// Splits off the next whitespace-separated token.
std::string_view nextToken(std::string_view& rest) {
  const auto b = rest.find_first_not_of(kSpace);
  if (b == std::string_view::npos) {
    rest = {};
    return {};
  }
  rest.remove_prefix(b);
  const auto e = rest.find_first_of(kSpace);
  std::string_view tok = rest.substr(0, e);
  rest = e == std::string_view::npos ? std::string_view{} : rest.substr(e);
  return tok;
}

bool toU64(std::string_view s, uint64_t& out) {
  if (s.empty()) {
    return false;
  }
  const auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), out);
  return ec == std::errc() && p == s.data() + s.size();
}

bool toDouble(std::string_view s, double& out) {
  if (s.empty()) {
    return false;
  }
  const auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), out);
  return ec == std::errc() && p == s.data() + s.size() && std::isfinite(out);
}

Error malformed(std::string_view what, std::string_view text) {
  constexpr std::size_t kShow = 60;
  std::string shown(text.substr(0, kShow));
  return COLOD_ERR(EINVAL, "malformed ", what, ": '", shown, text.size() > kShow ? "...'" : "'");
}

Result<PsiLine> parsePsiLine(std::string_view rest, std::string_view line) {
  PsiLine out;
  bool have[4] = {false, false, false, false};
  while (true) {
    std::string_view tok = nextToken(rest);
    if (tok.empty()) {
      break;
    }
    const auto eq = tok.find('=');
    if (eq == std::string_view::npos) {
      return malformed("PSI field", line);
    }
    const std::string_view key = tok.substr(0, eq);
    const std::string_view val = tok.substr(eq + 1);
    bool ok = true;
    if (key == "avg10") {
      ok = toDouble(val, out.avg10);
      have[0] = true;
    } else if (key == "avg60") {
      ok = toDouble(val, out.avg60);
      have[1] = true;
    } else if (key == "avg300") {
      ok = toDouble(val, out.avg300);
      have[2] = true;
    } else if (key == "total") {
      ok = toU64(val, out.total_us);
      have[3] = true;
    }
    if (!ok) {
      return malformed("PSI value", line);
    }
  }
  if (!(have[0] && have[1] && have[2] && have[3])) {
    // A truncated read ("some avg10=0.00 avg6") lands here.
    return malformed("PSI line (truncated)", line);
  }
  return out;
}

}  // namespace

Result<uint64_t> parseU64(std::string_view text) {
  uint64_t v = 0;
  if (!toU64(trim(text), v)) {
    return malformed("unsigned integer", text);
  }
  return v;
}

Result<std::optional<uint64_t>> parseU64OrMax(std::string_view text) {
  const std::string_view t = trim(text);
  if (t == "max") {
    return std::optional<uint64_t>{};
  }
  uint64_t v = 0;
  if (!toU64(t, v)) {
    return malformed("integer or 'max'", text);
  }
  return std::optional<uint64_t>{v};
}

Result<CpuStat> parseCpuStat(std::string_view text) {
  CpuStat out;
  bool any = false;
  std::string_view rest = text;
  while (!rest.empty()) {
    std::string_view line = nextLine(rest);
    std::string_view lr = line;
    const std::string_view key = nextToken(lr);
    if (key.empty()) {
      continue;
    }
    const std::string_view val = nextToken(lr);
    uint64_t v = 0;
    if (!toU64(val, v)) {
      return malformed("cpu.stat line", line);
    }
    any = true;
    if (key == "usage_usec") {
      out.usage_ns = v * 1000;
    } else if (key == "nr_periods") {
      out.nr_periods = v;
    } else if (key == "nr_throttled") {
      out.nr_throttled = v;
    } else if (key == "throttled_time") {  // v1: nanoseconds
      out.throttled_ns = v;
    } else if (key == "throttled_usec") {  // v2: microseconds
      out.throttled_ns = v * 1000;
    }
  }
  if (!any) {
    return COLOD_ERR(ENODATA, "empty cpu.stat");
  }
  return out;
}

Result<Psi> parsePsi(std::string_view text) {
  Psi out;
  bool have_some = false;
  std::string_view rest = text;
  while (!rest.empty()) {
    std::string_view line = nextLine(rest);
    std::string_view lr = line;
    const std::string_view kind = nextToken(lr);
    if (kind.empty()) {
      continue;
    }
    auto parsed = parsePsiLine(lr, line);
    if (!parsed) {
      return std::move(parsed).error();
    }
    if (kind == "some") {
      out.some = *parsed;
      have_some = true;
    } else if (kind == "full") {
      out.full = *parsed;
    } else {
      return malformed("PSI line kind", line);
    }
  }
  if (!have_some) {
    return COLOD_ERR(ENODATA, "PSI text has no 'some' line");
  }
  return out;
}

Result<std::optional<uint64_t>> parseCfsQuotaUs(std::string_view text) {
  const std::string_view t = trim(text);
  if (t == "-1") {
    return std::optional<uint64_t>{};
  }
  uint64_t v = 0;
  if (!toU64(t, v) || v == 0) {
    return malformed("cpu.cfs_quota_us", text);
  }
  return std::optional<uint64_t>{v};
}

Result<CpuMax> parseCpuMax(std::string_view text) {
  std::string_view rest = text;
  const std::string_view quota = nextToken(rest);
  const std::string_view period = nextToken(rest);
  if (quota.empty() || !trim(rest).empty()) {
    return malformed("cpu.max", text);
  }
  CpuMax out;
  if (quota != "max") {
    uint64_t q = 0;
    if (!toU64(quota, q)) {
      return malformed("cpu.max quota", text);
    }
    out.quota_us = q;
  }
  if (!period.empty()) {
    uint64_t p = 0;
    if (!toU64(period, p) || p == 0) {
      return malformed("cpu.max period", text);
    }
    out.period_us = p;
  }
  return out;
}

Result<uint64_t> parseKeyedU64(std::string_view text, std::string_view key) {
  std::string_view rest = text;
  while (!rest.empty()) {
    std::string_view line = nextLine(rest);
    std::string_view lr = line;
    if (nextToken(lr) != key) {
      continue;
    }
    uint64_t v = 0;
    if (!toU64(nextToken(lr), v)) {
      return malformed(key, line);
    }
    return v;
  }
  return COLOD_ERR(ENODATA, "key '", key, "' not found");
}

}  // namespace colod::cgroup
