// SPDX-License-Identifier: Apache-2.0
// Hex helpers for golden-byte tests.
#pragma once

#include <cstddef>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace colod::nri::testutil {

// "0a 1c" / "0a1c" / with quoted ASCII "\"abc\"" pieces -> bytes.
inline std::vector<std::byte> hex(std::string_view s) {
  std::vector<std::byte> out;
  auto nib = [](char c) { return c <= '9' ? c - '0' : (c | 0x20) - 'a' + 10; };
  for (std::size_t i = 0; i < s.size();) {
    if (s[i] == '"') {
      auto end = s.find('"', i + 1);
      for (std::size_t k = i + 1; k < end; ++k) {
        out.push_back(static_cast<std::byte>(s[k]));
      }
      i = end + 1;
    } else if (s[i] == ' ') {
      ++i;
    } else {
      out.push_back(static_cast<std::byte>(nib(s[i]) * 16 + nib(s[i + 1])));
      i += 2;
    }
  }
  return out;
}

inline std::vector<std::byte> cat(std::vector<std::byte> a, const std::vector<std::byte>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

inline std::vector<std::byte> vec(std::span<const std::byte> b) { return {b.begin(), b.end()}; }

}  // namespace colod::nri::testutil
