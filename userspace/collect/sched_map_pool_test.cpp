// SPDX-License-Identifier: Apache-2.0
#include "sched_map_pool.h"

#include <gtest/gtest.h>

namespace colod::collect::detail {
namespace {

SchedEntry entry(uint32_t slot, uint64_t oncpu_ns) {
  SchedEntry e;
  e.slot = slot;
  e.sum.oncpu_ns = oncpu_ns;
  return e;
}

TEST(SchedMapPool, MapsComeBackEmptyWithTheirBucketsAndEntriesReuseTheirNodes) {
  SchedMapPool pool;
  SchedMap m = pool.take();
  for (uint64_t id = 1; id <= 300; ++id) {
    pool.put(m, id, entry(static_cast<uint32_t>(id), id * 10));
  }
  pool.put(m, 7, entry(7, 1));  // an existing key: assigned, not a second entry
  ASSERT_EQ(m.size(), 300u);
  EXPECT_EQ(m.at(7).sum.oncpu_ns, 1u);
  EXPECT_EQ(m.at(300).slot, 300u);
  const std::size_t buckets = m.bucket_count();
  pool.give(std::move(m));
  EXPECT_EQ(pool.keptNodes(), 300u);
  EXPECT_EQ(pool.keptMaps(), 1u);

  SchedMap again = pool.take();
  EXPECT_TRUE(again.empty());
  EXPECT_EQ(again.bucket_count(), buckets) << "the bucket array is kept";
  EXPECT_EQ(pool.keptMaps(), 0u);
  // Kept nodes carry no old values: every field comes from the new entry.
  for (uint64_t id = 1000; id < 1100; ++id) {
    pool.put(again, id, entry(5, id));
  }
  EXPECT_EQ(pool.keptNodes(), 200u);
  ASSERT_EQ(again.size(), 100u);
  for (uint64_t id = 1000; id < 1100; ++id) {
    ASSERT_EQ(again.count(id), 1u);
    EXPECT_EQ(again.at(id).sum.oncpu_ns, id);
    EXPECT_EQ(again.at(id).slot, 5u);
  }
  EXPECT_EQ(again.count(1), 0u);
}

TEST(SchedMapPool, RecycleEmptiesAMapInPlaceAndKeepsItsNodesAndBuckets) {
  SchedMapPool pool(100);
  SchedMap m;
  for (uint64_t id = 1; id <= 150; ++id) {
    pool.put(m, id, entry(1, id));
  }
  const std::size_t buckets = m.bucket_count();
  pool.recycle(m);
  EXPECT_TRUE(m.empty());
  EXPECT_EQ(m.bucket_count(), buckets);
  EXPECT_EQ(pool.keptNodes(), 100u) << "bounded: the other 50 freed";
  EXPECT_EQ(pool.keptMaps(), 0u) << "the map stays with its owner";
  for (uint64_t id = 500; id < 540; ++id) {
    pool.put(m, id, entry(2, id));
  }
  EXPECT_EQ(pool.keptNodes(), 60u);
  EXPECT_EQ(m.size(), 40u);
  EXPECT_EQ(m.at(539).sum.oncpu_ns, 539u);
}

TEST(SchedMapPool, ReserveNeverShrinksTheBuckets) {
  SchedMap m;
  SchedMapPool::reserve(m, 1000);
  const std::size_t big = m.bucket_count();
  EXPECT_GE(static_cast<float>(big) * m.max_load_factor(), 1000.0f);
  SchedMapPool::reserve(m, 10);
  EXPECT_EQ(m.bucket_count(), big) << "m.reserve(10) would have shrunk it";
  SchedMapPool::reserve(m, 5000);
  EXPECT_GE(static_cast<float>(m.bucket_count()) * m.max_load_factor(), 5000.0f);
}

TEST(SchedMapPool, StocksAreBounded) {
  SchedMapPool pool(10);
  for (int round = 0; round < 6; ++round) {
    SchedMap m;
    for (uint64_t id = 0; id < 50; ++id) {
      pool.put(m, id, entry(0, id));
    }
    pool.give(std::move(m));
  }
  EXPECT_EQ(pool.keptNodes(), 10u);
  EXPECT_LE(pool.keptMaps(), 4u);
}

}  // namespace
}  // namespace colod::collect::detail
