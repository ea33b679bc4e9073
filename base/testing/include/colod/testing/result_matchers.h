// SPDX-License-Identifier: Apache-2.0
// Test helpers for Result<T> (style rule 39). Test-only: production targets never link these.
#pragma once

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <regex>

#include "colod/base/result.h"

namespace colod::testing {
template <typename T>
T takeValue(Result<T>&& r) {
  return std::move(r).value();
}
inline void takeValue(Result<void>&& /*r*/) {}
}  // namespace colod::testing

// ASSERT_OK(expr): asserts success and yields the value (statement-expression, g++/clang).
#define ASSERT_OK(expr)                                                        \
  __extension__({                                                                        \
    auto colod_assert_ok_r_ = (expr);                                          \
    if (!colod_assert_ok_r_.has_value()) {                                     \
      GTEST_FATAL_FAILURE_(("expected success, got: " +                       \
                            colod_assert_ok_r_.error().message()).c_str());    \
    }                                                                          \
    ::colod::testing::takeValue(std::move(colod_assert_ok_r_));                                          \
  })

// EXPECT_ERR(expr, errno_value, regex): the call failed with that errno and a matching context.
#define EXPECT_ERR(expr, errno_value, pattern)                                         \
  do {                                                                               \
    auto colod_expect_err_r_ = (expr);                                               \
    EXPECT_FALSE(colod_expect_err_r_.has_value()) << "expected an error";             \
    if (!colod_expect_err_r_.has_value()) {                                          \
      EXPECT_EQ(colod_expect_err_r_.error().errnoValue(), (errno_value))             \
          << colod_expect_err_r_.error().message();                                  \
      EXPECT_TRUE(std::regex_search(colod_expect_err_r_.error().message(),           \
                                    std::regex(pattern)))                              \
          << colod_expect_err_r_.error().message() << " !~ " << (pattern);             \
    }                                                                                \
  } while (0)
