// SPDX-License-Identifier: Apache-2.0
// permuteInPlace against a copy made through the index, over every permutation of 6 elements
// (cycles of every length, fixed points) and move-only values.
#include "permute.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <memory>
#include <numeric>
#include <string>
#include <vector>

namespace colod::collect::detail {
namespace {

TEST(PermuteInPlace, EqualsACopyThroughTheIndexForEveryPermutation) {
  std::vector<uint32_t> perm(6);
  std::iota(perm.begin(), perm.end(), 0u);
  int tried = 0;
  do {
    std::vector<std::string> v{"a", "b", "c", "d", "e", "f"};
    std::vector<std::string> want;
    for (const uint32_t i : perm) {
      want.push_back(v[i]);
    }
    std::vector<uint32_t> order = perm;
    permuteInPlace(v, order);
    ASSERT_EQ(v, want) << "permutation #" << tried;
    for (uint32_t i = 0; i < order.size(); ++i) {
      ASSERT_EQ(order[i], i) << "the index is left as the identity";
    }
    ++tried;
  } while (std::next_permutation(perm.begin(), perm.end()));
  EXPECT_EQ(tried, 720);
}

TEST(PermuteInPlace, MovesMoveOnlyValuesAndHandlesEmpty) {
  std::vector<std::unique_ptr<int>> v;
  for (int i = 0; i < 4; ++i) {
    v.push_back(std::make_unique<int>(i));
  }
  std::vector<uint32_t> order{3, 0, 1, 2};
  permuteInPlace(v, order);
  EXPECT_EQ(*v[0], 3);
  EXPECT_EQ(*v[1], 0);
  EXPECT_EQ(*v[2], 1);
  EXPECT_EQ(*v[3], 2);
  std::vector<std::unique_ptr<int>> none;
  std::vector<uint32_t> empty;
  permuteInPlace(none, empty);
  EXPECT_TRUE(none.empty());
}

}  // namespace
}  // namespace colod::collect::detail
