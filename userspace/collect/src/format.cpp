// SPDX-License-Identifier: Apache-2.0
#include "colod/collect/format.h"

#include <algorithm>
#include <cstdio>

namespace colod::collect {

std::string formatLog2Hist(std::span<const uint32_t> slots, std::string_view unit) {
  // 40 stars with 8-digit counts is 78 columns (bcc's layout); wider counts take stars away
  // so every line stays under 80 columns.
  constexpr int kStarsMax = 40;
  std::size_t last = slots.size();
  uint32_t max = 0;
  for (std::size_t i = 0; i < slots.size(); ++i) {
    if (slots[i] != 0) {
      last = i;
    }
    if (slots[i] > max) {
      max = slots[i];
    }
  }
  if (max == 0) {
    return {};
  }
  const int count_width = std::max(8, static_cast<int>(std::to_string(max).size()));
  const int stars_width = kStarsMax - (count_width - 8);
  std::string out;
  char line[160];
  // Header: the unit right-aligned over the "lo -> hi" column, as runqlat prints it.
  std::snprintf(line, sizeof(line), "%5s%-19.19s : count    distribution\n", "",
                std::string(unit).c_str());
  out += line;
  for (std::size_t i = 0; i <= last; ++i) {
    // Slot i holds [2^i, 2^(i+1)); slot 0 also holds 0, printed "0 -> 1".
    const unsigned long long lo = i == 0 ? 0 : (1ULL << i);
    const unsigned long long hi = (1ULL << (i + 1)) - 1;
    const auto stars = static_cast<int>(
        (static_cast<uint64_t>(slots[i]) * static_cast<uint64_t>(stars_width) + max - 1) / max);
    const std::string bar = std::string(static_cast<std::size_t>(stars), '*') +
                            std::string(static_cast<std::size_t>(stars_width - stars), ' ');
    std::snprintf(line, sizeof(line), "%10llu -> %-10llu : %-*u |%s|\n", lo, hi, count_width, slots[i],
                  bar.c_str());
    out += line;
  }
  return out;
}

}  // namespace colod::collect
