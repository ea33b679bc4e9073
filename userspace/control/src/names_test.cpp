// SPDX-License-Identifier: Apache-2.0
#include "colod/control/names.h"

#include <gtest/gtest.h>

#include <vector>

#include "colod/testing/result_matchers.h"

namespace colod::control {
namespace {

v1::Container make(const std::string& id,
                   const std::string& ns,
                   const std::string& pod,
                   const std::string& name) {
  v1::Container c;
  c.set_id(id);
  c.set_namespace_(ns);
  c.set_pod(pod);
  c.set_name(name);
  return c;
}

std::vector<v1::Container> fleet() {
  return {make("aaaa1111", "prod", "web-0", "nginx"), make("aaaa2222", "prod", "web-1", "nginx"),
          make("bbbb3333", "jobs", "web-0", "nginx"), make("cccc4444", "jobs", "batch", "hog")};
}

TEST(ResolveContainer, ByFullName) {
  auto f = fleet();
  EXPECT_EQ(ASSERT_OK(resolveContainer(f, "jobs/web-0/nginx")), 2U);
  EXPECT_EQ(displayName(f[2]), "jobs/web-0/nginx");
}

TEST(ResolveContainer, ByPodAndNameWhenUnique) {
  auto f = fleet();
  EXPECT_EQ(ASSERT_OK(resolveContainer(f, "web-1/nginx")), 1U);
  EXPECT_ERR(resolveContainer(f, "web-0/nginx"), EINVAL, "ambiguous: 2 match.*prod/web-0/nginx");
}

TEST(ResolveContainer, ByNameOrIdPrefix) {
  auto f = fleet();
  EXPECT_EQ(ASSERT_OK(resolveContainer(f, "hog")), 3U);
  EXPECT_EQ(ASSERT_OK(resolveContainer(f, "bbbb")), 2U);
  EXPECT_EQ(ASSERT_OK(resolveContainer(f, "aaaa2222")), 1U);
  EXPECT_ERR(resolveContainer(f, "aaaa"), EINVAL, "ambiguous");
  EXPECT_ERR(resolveContainer(f, "nginx"), EINVAL, "ambiguous: 3 match");
  // Short prefixes are not ids: too easy to hit by accident.
  EXPECT_ERR(resolveContainer(f, "ccc"), ENOENT, "no container matches 'ccc'");
}

TEST(ResolveContainer, NothingOrEmpty) {
  auto f = fleet();
  EXPECT_ERR(resolveContainer(f, "redis"), ENOENT, "no container matches");
  // The sentence goes to the operator verbatim: no [names.cpp:NN] marker (issue #16).
  EXPECT_EQ(resolveContainer(f, "redis").error().context(),
            "no container matches 'redis' (try namespace/pod/container, pod/container, a name "
            "or an id prefix)");
  EXPECT_EQ(resolveContainer(f, "nginx").error().context().find("[names.cpp"), std::string::npos);
  EXPECT_ERR(resolveContainer(f, ""), EINVAL, "empty");
  EXPECT_ERR(resolveContainer({}, "x"), ENOENT, "no container");
}

}  // namespace
}  // namespace colod::control
