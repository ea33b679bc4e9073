// SPDX-License-Identifier: Apache-2.0
// colod's own resource use, from <proc_root>/self/stat and statm (root injected, rule 19).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace colod::daemon {

struct SelfStats {
  double cpu_seconds = 0;  // utime + stime
  uint64_t rss_bytes = 0;
};

// Zeros when the files cannot be read (metrics must not fail a scrape).
SelfStats readSelfStats(const std::string& proc_root);
// Pure parsers: /proc/<pid>/stat (fields after the parenthesised comm) and statm.
SelfStats parseSelfStats(std::string_view stat, std::string_view statm, long ticks_per_s,
                         long page_size);

}  // namespace colod::daemon
