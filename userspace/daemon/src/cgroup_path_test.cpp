// SPDX-License-Identifier: Apache-2.0
#include "colod/daemon/cgroup_path.h"

#include <gtest/gtest.h>

#include "colod/testing/result_matchers.h"

namespace colod::daemon {
namespace {

TEST(CgroupPath, ExpandsSlices) {
  EXPECT_EQ(ASSERT_OK(expandSystemdSlice("kubepods-burstable-pod1_2.slice")),
            "/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod1_2.slice");
  EXPECT_EQ(ASSERT_OK(expandSystemdSlice("system.slice")), "/system.slice");
  EXPECT_EQ(ASSERT_OK(expandSystemdSlice("-.slice")), "/");
  EXPECT_ERR(expandSystemdSlice("a--b.slice"), EINVAL, "empty component");
  EXPECT_ERR(expandSystemdSlice("-a.slice"), EINVAL, "empty component");
  EXPECT_ERR(expandSystemdSlice("a.scope"), EINVAL, "not a systemd slice");
  EXPECT_ERR(expandSystemdSlice("a/b.slice"), EINVAL, "contains '/'");
}

TEST(CgroupPath, SystemdDriverContainerd) {
  EXPECT_EQ(ASSERT_OK(containerCgroupRel("kubepods-besteffort-podab_cd.slice:cri-containerd:f00d",
                                         CgroupDriver::Auto, "")),
            "/kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-podab_cd.slice/"
            "cri-containerd-f00d.scope");
  // CRI-O uses "crio" as the prefix; guaranteed pods sit directly under kubepods.slice.
  EXPECT_EQ(ASSERT_OK(containerCgroupRel("kubepods-podab.slice:crio:1234", CgroupDriver::Systemd,
                                         "")),
            "/kubepods.slice/kubepods-podab.slice/crio-1234.scope");
  // A private prefix (nested systemd, the test peer).
  EXPECT_EQ(ASSERT_OK(containerCgroupRel("kubepods-podab.slice:cri-containerd:1",
                                         CgroupDriver::Auto, "/colod-testpeer-7/")),
            "/colod-testpeer-7/kubepods.slice/kubepods-podab.slice/cri-containerd-1.scope");
  // Empty slice -> runc's default system.slice.
  EXPECT_EQ(ASSERT_OK(containerCgroupRel(":cri-containerd:1", CgroupDriver::Auto, "")),
            "/system.slice/cri-containerd-1.scope");
}

TEST(CgroupPath, CgroupfsDriver) {
  EXPECT_EQ(ASSERT_OK(containerCgroupRel("/kubepods/burstable/pod12/abc", CgroupDriver::Auto, "")),
            "/kubepods/burstable/pod12/abc");
  EXPECT_EQ(ASSERT_OK(containerCgroupRel("kubepods//besteffort/pod1/x/", CgroupDriver::Cgroupfs,
                                         "")),
            "/kubepods/besteffort/pod1/x");
  EXPECT_ERR(containerCgroupRel("/kubepods/../../etc", CgroupDriver::Auto, ""), EINVAL,
             "contains '..'");
  EXPECT_ERR(containerCgroupRel("", CgroupDriver::Auto, ""), EINVAL, "empty");
}

TEST(CgroupPath, DetectsTheForm) {
  EXPECT_TRUE(looksLikeSystemdPath("a.slice:p:id"));
  EXPECT_FALSE(looksLikeSystemdPath("/a/b:c:d"));
  EXPECT_FALSE(looksLikeSystemdPath("a:b"));
  EXPECT_FALSE(looksLikeSystemdPath("a:b:"));
  EXPECT_FALSE(looksLikeSystemdPath("a:b:c:d"));
  EXPECT_ERR(containerCgroupRel("/kubepods/x", CgroupDriver::Systemd, ""), EINVAL,
             "not in the systemd form");
}

}  // namespace
}  // namespace colod::daemon
