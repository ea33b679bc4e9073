// SPDX-License-Identifier: Apache-2.0
#include "colod/daemon/self_stats.h"

#include <unistd.h>

#include <charconv>
#include <fstream>
#include <sstream>
#include <vector>

namespace colod::daemon {

namespace {
std::vector<std::string_view> split(std::string_view s) {
  std::vector<std::string_view> out;
  std::size_t i = 0;
  while (i < s.size()) {
    while (i < s.size() && (s[i] == ' ' || s[i] == '\n')) {
      ++i;
    }
    std::size_t j = i;
    while (j < s.size() && s[j] != ' ' && s[j] != '\n') {
      ++j;
    }
    if (j > i) {
      out.push_back(s.substr(i, j - i));
    }
    i = j;
  }
  return out;
}
uint64_t num(std::string_view s) {
  uint64_t v = 0;
  std::from_chars(s.data(), s.data() + s.size(), v);
  return v;
}
std::string slurp(const std::string& path) {
  std::ifstream in(path);
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}
}  // namespace

SelfStats parseSelfStats(std::string_view stat,
                         std::string_view statm,
                         long ticks_per_s,
                         long page_size) {
  SelfStats out;
  // comm may contain spaces and parentheses: fields restart after the last ')'.
  const auto close = stat.rfind(')');
  if (close != std::string_view::npos && ticks_per_s > 0) {
    const auto f = split(stat.substr(close + 1));
    // After ')': state(3) ... utime is field 14 and stime 15 -> indexes 11 and 12 here.
    if (f.size() > 12) {
      out.cpu_seconds =
          static_cast<double>(num(f[11]) + num(f[12])) / static_cast<double>(ticks_per_s);
    }
  }
  const auto m = split(statm);
  if (m.size() > 1 && page_size > 0) {
    out.rss_bytes = num(m[1]) * static_cast<uint64_t>(page_size);
  }
  return out;
}

SelfStats readSelfStats(const std::string& proc_root) {
  return parseSelfStats(slurp(proc_root + "/self/stat"), slurp(proc_root + "/self/statm"),
                        ::sysconf(_SC_CLK_TCK), ::sysconf(_SC_PAGESIZE));
}

}  // namespace colod::daemon
