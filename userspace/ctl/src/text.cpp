// SPDX-License-Identifier: Apache-2.0
#include "text.h"

#include <cstdarg>
#include <cstdio>
#include <vector>

namespace colod::ctl {

namespace {

bool isContinuation(char c) { return (static_cast<unsigned char>(c) & 0xC0U) == 0x80U; }

// Byte offset where the last `cols` columns of `s` begin.
std::size_t tailStart(std::string_view s, std::size_t cols) {
  std::size_t i = s.size();
  std::size_t seen = 0;
  while (i > 0 && seen < cols) {
    --i;
    while (i > 0 && isContinuation(s[i])) {
      --i;
    }
    ++seen;
  }
  return i;
}

// Byte length of the first `cols` columns of `s`.
std::size_t headLength(std::string_view s, std::size_t cols) {
  std::size_t i = 0;
  std::size_t seen = 0;
  while (i < s.size() && seen < cols) {
    ++i;
    while (i < s.size() && isContinuation(s[i])) {
      ++i;
    }
    ++seen;
  }
  return i;
}

constexpr std::string_view kEllipsis = "…";

}  // namespace

// clang 14's analyzer reports every vsnprintf here as using an uninitialised va_list, although
// each follows its va_start (a false positive); the warning is off for this function only.
// NOLINTBEGIN(clang-analyzer-valist.Uninitialized)
std::string strprintf(const char* format, ...) {
  // Two passes, each with its own va_start: the length, then the text.
  va_list args;
  va_start(args, format);
  const int n = std::vsnprintf(nullptr, 0, format, args);
  va_end(args);
  if (n <= 0) {
    return {};
  }
  std::vector<char> buf(static_cast<std::size_t>(n) + 1);
  va_start(args, format);
  std::vsnprintf(buf.data(), buf.size(), format, args);
  va_end(args);
  return {buf.data(), static_cast<std::size_t>(n)};
}
// NOLINTEND(clang-analyzer-valist.Uninitialized)

std::size_t displayWidth(std::string_view s) {
  std::size_t cols = 0;
  for (char c : s) {
    if (!isContinuation(c)) {
      ++cols;
    }
  }
  return cols;
}

std::string clipFront(std::string_view s, std::size_t width) {
  if (displayWidth(s) <= width) {
    return std::string(s);
  }
  if (width == 0) {
    return {};
  }
  return std::string(kEllipsis) + std::string(s.substr(tailStart(s, width - 1)));
}

std::string clipBack(std::string_view s, std::size_t width) {
  if (displayWidth(s) <= width) {
    return std::string(s);
  }
  if (width == 0) {
    return {};
  }
  return std::string(s.substr(0, headLength(s, width - 1))) + std::string(kEllipsis);
}

std::string padRight(std::string_view s, std::size_t width) {
  const std::size_t w = displayWidth(s);
  return std::string(s) + std::string(w < width ? width - w : 0, ' ');
}

std::string padLeft(std::string_view s, std::size_t width) {
  const std::size_t w = displayWidth(s);
  return std::string(w < width ? width - w : 0, ' ') + std::string(s);
}

}  // namespace colod::ctl
