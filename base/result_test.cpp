// SPDX-License-Identifier: Apache-2.0
#include "colod/base/result.h"

#include <gtest/gtest.h>

#include "colod/base/unique_fd.h"
#include "colod/testing/result_matchers.h"

#include <fcntl.h>

namespace colod {
namespace {

Result<int> parsePositive(int v) {
  if (v <= 0) {
    return COLOD_ERR(EINVAL, "value ", v, " is not positive");
  }
  return v;
}

Result<void> chain(int v) {
  COLOD_TRY_VOID(parsePositive(v), "checking input");
  return ok();
}

TEST(Result, ValueAndError) {
  auto good = parsePositive(3);
  ASSERT_TRUE(good.has_value());
  EXPECT_EQ(*good, 3);
  auto bad = parsePositive(-1);
  ASSERT_FALSE(bad.has_value());
  EXPECT_EQ(bad.error().errnoValue(), EINVAL);
  EXPECT_NE(bad.error().message().find("value -1 is not positive"), std::string::npos);
  EXPECT_NE(bad.error().message().find("result_test.cpp:"), std::string::npos);
  EXPECT_EQ(bad.value_or(7), 7);
}

TEST(Result, WrapAddsOuterContext) {
  auto r = chain(0);
  ASSERT_FALSE(r.has_value());
  EXPECT_EQ(r.error().context().rfind("checking input -- [", 0), 0u) << r.error().context();
  EXPECT_ERR(chain(-5), EINVAL, "checking input -- .*not positive");
  ASSERT_OK(chain(2));
  EXPECT_EQ(ASSERT_OK(parsePositive(9)), 9);
}

TEST(UniqueFd, ClosesAndMoves) {
  int raw = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
  ASSERT_GE(raw, 0);
  {
    UniqueFd a(raw);
    UniqueFd b(std::move(a));
    EXPECT_FALSE(a.valid());  // NOLINT(bugprone-use-after-move): testing the moved-from state
    EXPECT_EQ(b.get(), raw);
  }
  EXPECT_EQ(::fcntl(raw, F_GETFD), -1);
  EXPECT_EQ(errno, EBADF);
}

}  // namespace
}  // namespace colod
