// SPDX-License-Identifier: Apache-2.0
#include "colod/daemon/cgroup_path.h"

#include <cerrno>
#include <vector>

namespace colod::daemon {

Result<std::string> expandSystemdSlice(std::string_view slice) {
  constexpr std::string_view kSuffix = ".slice";
  if (!slice.ends_with(kSuffix) || slice.size() == kSuffix.size()) {
    return COLOD_ERR(EINVAL, "'", slice, "' is not a systemd slice name");
  }
  if (slice.find('/') != std::string_view::npos) {
    return COLOD_ERR(EINVAL, "slice name '", slice, "' contains '/'");
  }
  if (slice == "-.slice") {
    return std::string("/");
  }
  const std::string_view name = slice.substr(0, slice.size() - kSuffix.size());
  std::string out;
  std::string prefix;
  std::size_t start = 0;
  while (true) {
    const std::size_t dash = name.find('-', start);
    const std::string_view part =
        name.substr(start, dash == std::string_view::npos ? std::string_view::npos : dash - start);
    if (part.empty()) {
      return COLOD_ERR(EINVAL, "slice name '", slice, "' has an empty component");
    }
    prefix += (prefix.empty() ? "" : "-") + std::string(part);
    out += "/" + prefix + std::string(kSuffix);
    if (dash == std::string_view::npos) {
      break;
    }
    start = dash + 1;
  }
  return out;
}

bool looksLikeSystemdPath(std::string_view p) {
  if (p.find('/') != std::string_view::npos) {
    return false;
  }
  const auto first = p.find(':');
  if (first == std::string_view::npos) {
    return false;
  }
  const auto second = p.find(':', first + 1);
  return second != std::string_view::npos && p.find(':', second + 1) == std::string_view::npos &&
         second + 1 < p.size();
}

namespace {
Result<std::string> normalise(std::string_view path) {
  std::string out;
  std::size_t start = 0;
  while (start <= path.size()) {
    std::size_t slash = path.find('/', start);
    if (slash == std::string_view::npos) {
      slash = path.size();
    }
    const std::string_view part = path.substr(start, slash - start);
    if (part == "." || part == "..") {
      return COLOD_ERR(EINVAL, "cgroup path '", path, "' contains '", part, "'");
    }
    if (!part.empty()) {
      out += "/" + std::string(part);
    }
    start = slash + 1;
  }
  return out.empty() ? std::string("/") : out;
}
}  // namespace

Result<std::string> containerCgroupRel(std::string_view cgroups_path,
                                       CgroupDriver driver,
                                       std::string_view systemd_prefix) {
  if (cgroups_path.empty()) {
    return COLOD_ERR(EINVAL, "empty cgroups_path");
  }
  bool systemd = false;
  switch (driver) {
    case CgroupDriver::Systemd:
      systemd = true;
      break;
    case CgroupDriver::Cgroupfs:
      systemd = false;
      break;
    case CgroupDriver::Auto:
      systemd = looksLikeSystemdPath(cgroups_path);
      break;
  }
  if (!systemd) {
    return normalise(cgroups_path);
  }
  if (!looksLikeSystemdPath(cgroups_path)) {
    return COLOD_ERR(EINVAL, "cgroups_path '", cgroups_path,
                     "' is not in the systemd form slice:prefix:name");
  }
  const auto c1 = cgroups_path.find(':');
  const auto c2 = cgroups_path.find(':', c1 + 1);
  const std::string_view slice = cgroups_path.substr(0, c1);
  const std::string_view prefix = cgroups_path.substr(c1 + 1, c2 - c1 - 1);
  const std::string_view name = cgroups_path.substr(c2 + 1);
  std::string dir;
  if (slice.empty()) {
    dir = "/system.slice";  // runc's default parent
  } else {
    auto expanded = expandSystemdSlice(slice);
    if (!expanded) {
      return std::move(expanded).error().wrap("cgroups_path '" + std::string(cgroups_path) + "'");
    }
    dir = *expanded == "/" ? "" : *expanded;
  }
  // runc: a name ending in .slice is used as is, otherwise "<prefix>-<name>.scope".
  std::string unit = name.ends_with(".slice")
                         ? std::string(name)
                         : std::string(prefix) + "-" + std::string(name) + ".scope";
  return normalise(std::string(systemd_prefix) + "/" + dir + "/" + unit);
}

}  // namespace colod::daemon
