// SPDX-License-Identifier: Apache-2.0
// StringMap against std::map: same content, same order, same duplicate rule, under random
// sequences of every mutation.
#include "colod/nri/string_map.h"

#include <gtest/gtest.h>

#include <map>
#include <random>
#include <string>

namespace colod::nri {
namespace {

using Ref = std::map<std::string, std::string>;

void expectEqualTo(const StringMap& m, const Ref& ref) {
  ASSERT_EQ(m.size(), ref.size());
  auto it = m.begin();
  for (const auto& [k, v] : ref) {
    ASSERT_EQ((*it).first, k);
    ASSERT_EQ((*it).second, v);
    ++it;
  }
  EXPECT_EQ(it, m.end());
  EXPECT_EQ(m.toStdMap(), ref);
  for (const auto& [k, v] : ref) {
    EXPECT_EQ(m.get(k), std::optional<std::string_view>(v));
  }
}

TEST(StringMap, EmptyAndInitializerList) {
  StringMap e;
  EXPECT_TRUE(e.empty());
  EXPECT_EQ(e.begin(), e.end());
  EXPECT_EQ(e.get("x"), std::nullopt);
  EXPECT_EQ(e.heapBytes(), 0U);

  StringMap m{{"b", "2"}, {"a", "1"}, {"b", "3"}};  // later duplicate wins, as in a proto map
  expectEqualTo(m, Ref{{"a", "1"}, {"b", "3"}});
  EXPECT_TRUE(m.contains("a"));
  EXPECT_FALSE(m.contains("c"));
  EXPECT_FALSE(m.contains(""));
}

TEST(StringMap, EmptyKeysAndValuesAreEntries) {
  StringMap m{{"", ""}, {"k", ""}};
  expectEqualTo(m, Ref{{"", ""}, {"k", ""}});
}

TEST(StringMap, InsertOrAssignEraseAndEquality) {
  StringMap m;
  m.insert_or_assign("io.kubernetes.pod.name", "web-0");
  m.insert_or_assign("app", "web");
  m.insert_or_assign("io.kubernetes.pod.name", "web-1");
  expectEqualTo(m, Ref{{"app", "web"}, {"io.kubernetes.pod.name", "web-1"}});
  EXPECT_TRUE(m.erase("app"));
  EXPECT_FALSE(m.erase("app"));
  expectEqualTo(m, Ref{{"io.kubernetes.pod.name", "web-1"}});
  EXPECT_EQ(m, (StringMap{{"io.kubernetes.pod.name", "web-1"}}));
  EXPECT_NE(m, (StringMap{{"io.kubernetes.pod.name", "web-2"}}));
  EXPECT_NE(m, StringMap{});
  EXPECT_TRUE(m.erase("io.kubernetes.pod.name"));
  EXPECT_TRUE(m.empty());
  EXPECT_EQ(m, StringMap{});
}

TEST(StringMap, ValueMayViewTheMapItself) {
  StringMap m{{"a-long-key-beyond-the-small-buffer", "a-long-value-beyond-the-small-buffer"}};
  for (int i = 0; i < 20; ++i) {  // grows the text buffer while the value views it
    m.insert_or_assign("k" + std::to_string(i), *m.get("a-long-key-beyond-the-small-buffer"));
  }
  // Keys and values viewing the map itself: an existing key, a new key, the bulk path.
  m.insert_or_assign((*m.find("k1")).first, *m.get("k2"));
  m.insert_or_assign((*m.begin()).second, (*m.find("k7")).first);
  m.append((*m.find("k3")).first.substr(0, 1), *m.get("k3"));
  m.normalize();
  EXPECT_EQ(m.get("k1"), "a-long-value-beyond-the-small-buffer");
  EXPECT_EQ(m.get("a-long-value-beyond-the-small-buffer"), "k7");
  EXPECT_EQ(m.get("k"), "a-long-value-beyond-the-small-buffer");
  for (int i = 0; i < 20; ++i) {
    EXPECT_EQ(m.get("k" + std::to_string(i)), "a-long-value-beyond-the-small-buffer");
  }
}

TEST(StringMap, RepeatedAssignmentStaysBounded) {
  StringMap m{{"key", "v"}};
  for (int i = 0; i < 100000; ++i) {
    m.insert_or_assign("key", std::string(100, static_cast<char>('a' + i % 26)));
  }
  EXPECT_EQ(m.get("key"), std::string(100, static_cast<char>('a' + 99999 % 26)));
  // Garbage is compacted once it outweighs the live text.
  EXPECT_LT(m.heapBytes(), 4096U);
}

TEST(StringMap, FromStdMapRoundTrips) {
  Ref ref{{"z", "26"}, {"a", "1"}, {"memory.oom.group", "1"}};
  auto m = StringMap::from(ref);
  expectEqualTo(m, ref);
}

// Random mutation sequences (small and large maps: both sort paths of normalize()).
TEST(StringMap, MatchesStdMapUnderRandomOperations) {
  std::mt19937 rng(42);
  for (int round = 0; round < 300; ++round) {
    const int keys = round % 3 == 0 ? 200 : 12;
    auto key = [&] { return "key-" + std::to_string(rng() % static_cast<unsigned>(keys)); };
    auto value = [&] { return std::string(rng() % 40, static_cast<char>('a' + rng() % 26)); };
    StringMap m;
    Ref ref;
    // Bulk phase (the decoders' path): append in "wire order", later duplicates win.
    const int n = static_cast<int>(rng() % 100);
    for (int i = 0; i < n; ++i) {
      auto k = key();
      auto v = value();
      m.append(k, v);
      ref.insert_or_assign(k, v);
    }
    m.normalize();
    ASSERT_NO_FATAL_FAILURE(expectEqualTo(m, ref));
    // A second bulk phase merges into the first (a repeated message field).
    for (int i = 0; i < n / 2; ++i) {
      auto k = key();
      auto v = value();
      m.append(k, v);
      ref.insert_or_assign(k, v);
    }
    m.normalize();
    ASSERT_NO_FATAL_FAILURE(expectEqualTo(m, ref));
    // Point mutations.
    for (int i = 0; i < 100; ++i) {
      auto k = key();
      if (rng() % 3 == 0) {
        EXPECT_EQ(m.erase(k), ref.erase(k) == 1);
      } else {
        auto v = value();
        m.insert_or_assign(k, v);
        ref.insert_or_assign(k, v);
      }
    }
    ASSERT_NO_FATAL_FAILURE(expectEqualTo(m, ref));
    EXPECT_EQ(m, StringMap::from(ref));
  }
}

TEST(StringMap, FilteredKeepsTheAcceptedEntriesAndOnlyTheirText) {
  const StringMap m{{"b", "2"},
                    {"colod.io/tier", "ls"},
                    {"a", std::string(100, 'x')},
                    {"colod.io/protect", "yes"}};
  auto colod = [](std::string_view k) { return k.starts_with("colod.io/"); };
  const StringMap f = m.filtered(colod);
  EXPECT_EQ(f, (StringMap{{"colod.io/protect", "yes"}, {"colod.io/tier", "ls"}}));
  EXPECT_EQ(f.get("colod.io/tier"), "ls");
  EXPECT_LT(f.heapBytes(), 100U) << "the dropped value's text is not carried";
  EXPECT_EQ(m.size(), 4U) << "the source is unchanged";
  EXPECT_TRUE(m.filtered([](std::string_view) { return false; }).empty());
  EXPECT_EQ(m.filtered([](std::string_view) { return true; }), m);
}

}  // namespace

}  // namespace colod::nri
