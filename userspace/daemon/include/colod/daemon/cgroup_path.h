// SPDX-License-Identifier: Apache-2.0
// From an NRI container's cgroups_path (runtime format, brief §3.5) to its cgroup directory
// relative to a hierarchy root. Pure: the daemon stats the result under the collector's
// hierarchy root to get the cgroup id (the directory inode) and caches it.
//
//   systemd driver:  "<slice>:<prefix>:<id>"  e.g. "kubepods-burstable-pod1_2.slice:cri-containerd:ab"
//                    -> /kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod1_2.slice/
//                       cri-containerd-ab.scope   (runc's ExpandSlice + "<prefix>-<id>.scope")
//   cgroupfs driver: "/kubepods/burstable/pod<uid>/<id>" -> the same path
#pragma once

#include <string>
#include <string_view>

#include "colod/base/result.h"
#include "colod/daemon/config.h"

namespace colod::daemon {

// "a-b-c.slice" -> "/a.slice/a-b.slice/a-b-c.slice"; "-.slice" -> "/". EINVAL for a name that
// is not a slice, contains '/', or has empty dash-separated components (as systemd/runc).
Result<std::string> expandSystemdSlice(std::string_view slice);

// True when the path has the systemd driver's "slice:prefix:name" shape.
bool looksLikeSystemdPath(std::string_view cgroups_path);

// The container's directory relative to a hierarchy root, always starting with '/', never
// containing "." or ".." components (EINVAL: a runtime must not make us read outside the
// hierarchy). `systemd_prefix` (may be "") is prepended to systemd-derived paths.
Result<std::string> containerCgroupRel(std::string_view cgroups_path,
                                       CgroupDriver driver,
                                       std::string_view systemd_prefix);

}  // namespace colod::daemon
