// SPDX-License-Identifier: Apache-2.0
#include "cpu_copies.h"

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <fstream>
#include <sstream>
#include <string>

namespace colod::collect::detail {

namespace {

constexpr uint32_t kMaxCpu = 1U << 20;

bool parseNumber(std::string_view s, uint32_t& out) {
  if (s.empty()) {
    return false;
  }
  const auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), out);
  return ec == std::errc() && p == s.data() + s.size() && out < kMaxCpu;
}

}  // namespace

Result<uint32_t> parseCpuListEnd(std::string_view list) {
  while (!list.empty() && (list.back() == '\n' || list.back() == ' ')) {
    list.remove_suffix(1);
  }
  if (list.empty()) {
    return COLOD_ERR(EINVAL, "empty CPU list");
  }
  uint32_t end = 0;
  while (!list.empty()) {
    const std::size_t comma = list.find(',');
    const std::string_view item = list.substr(0, comma);
    list = comma == std::string_view::npos ? std::string_view() : list.substr(comma + 1);
    const std::size_t dash = item.find('-');
    uint32_t lo = 0;
    uint32_t hi = 0;
    if (dash == std::string_view::npos) {
      if (!parseNumber(item, lo)) {
        return COLOD_ERR(EINVAL, "CPU list item '", item, "'");
      }
      hi = lo;
    } else if (!parseNumber(item.substr(0, dash), lo) || !parseNumber(item.substr(dash + 1), hi) ||
               hi < lo) {
      return COLOD_ERR(EINVAL, "CPU list range '", item, "'");
    }
    end = std::max(end, hi + 1);
  }
  return end;
}

Result<uint32_t> presentCpuEnd(std::string_view sysfs_cpu) {
  const std::string path = std::string(sysfs_cpu) + "/present";
  std::ifstream in(path);
  if (!in) {
    return COLOD_ERR(errno != 0 ? errno : ENOENT, "reading ", path);
  }
  std::stringstream text;
  text << in.rdbuf();
  auto end = parseCpuListEnd(text.str());
  if (!end) {
    return std::move(end).error().wrap(path);
  }
  return end;
}

uint32_t schedCopies(const Result<uint32_t>& present, uint32_t possible) {
  const uint32_t all = std::max<uint32_t>(possible, 1);
  if (!present) {
    return all;
  }
  return std::clamp<uint32_t>(*present, 1, all);
}

}  // namespace colod::collect::detail
