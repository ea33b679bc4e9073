// SPDX-License-Identifier: Apache-2.0
// Text helpers for coloctl's tables: printf without a fixed buffer, and clipping and padding by
// display width. Pure.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace colod::ctl {

// printf into a std::string of whatever length the result has (no truncation).
[[gnu::format(printf, 1, 2)]] std::string strprintf(const char* format, ...);

// Display width of UTF-8 text: one column per code point (continuation bytes do not count; "…"
// and "µ" are one column each). Invalid bytes count one column each.
std::size_t displayWidth(std::string_view s);

// At most `width` columns. Longer text keeps its end (the container name, the informative part
// of a path) after a leading "…" (one column): "…b/web-0/nginx". Cuts on code-point boundaries.
std::string clipFront(std::string_view s, std::size_t width);
// At most `width` columns, keeping the beginning and ending in "…".
std::string clipBack(std::string_view s, std::size_t width);
// `s` padded with spaces to `width` columns on the right (left-aligned) or left (right-aligned);
// never cut.
std::string padRight(std::string_view s, std::size_t width);
std::string padLeft(std::string_view s, std::size_t width);

}  // namespace colod::ctl
