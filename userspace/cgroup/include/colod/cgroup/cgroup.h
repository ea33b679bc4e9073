// SPDX-License-Identifier: Apache-2.0
// Cgroup access on v2 and v1/hybrid hosts: layout probing, id <-> path, dirfd-relative reads.
//
// Ids: a cgroup's id is the inode number of its directory (v2: also kernfs id, the value BPF
// reads from kn->id and name_to_handle_at returns; v1 the same within one hierarchy). Ids are
// unique only within one hierarchy. All paths here are absolute filesystem paths unless a
// name says "rel" (relative to a hierarchy root, "/" for the root itself).
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "colod/base/result.h"
#include "colod/base/unique_fd.h"

namespace colod::cgroup {

enum class Layout {
  V2,      // cgroup2 mounted at the root (cgroup.controllers at <root>)
  Hybrid,  // v1 controllers at <root>/<ctrl>, cgroup2 (no controllers) at <root>/unified
  V1,      // v1 controllers only
};
const char* toString(Layout layout);

// Where each hierarchy lives under an injected root (style rule 19). Empty string: absent.
struct Hierarchies {
  Layout layout = Layout::V2;
  std::string root;     // the injected root, e.g. /sys/fs/cgroup
  std::string unified;  // cgroup2 mount: <root> on V2, <root>/unified on Hybrid
  std::string cpu;      // v1 cpu controller: <root>/cpu or <root>/cpu,cpuacct
  std::string cpuacct;
  std::string cpuset;
  std::string memory;
};

// Probes the layout from the files under root (works on a fake tree). ENOENT if root has no
// recognisable cgroup hierarchy.
Result<Hierarchies> probe(const std::string& root);

// An open cgroup directory (O_DIRECTORY|O_RDONLY|O_CLOEXEC); control files are opened relative
// to it (style rule 18), so a cgroup removed and recreated under the same name is never
// confused with the old one: reads then fail with ENODEV/ENOENT.
class CgroupDir {
 public:
  // ENOENT if the directory does not exist, ENOTDIR if it is not a directory.
  static Result<CgroupDir> open(const std::string& path);
  // Opens `rel` (no leading '/') relative to parent; used by tree walks.
  static Result<CgroupDir> openAt(const CgroupDir& parent, const std::string& rel);

  // Reads a control file entirely (bounded at 1 MiB). ENOENT if absent, ENODEV if the cgroup
  // was removed, EFBIG if larger than the bound.
  [[nodiscard]] Result<std::string> read(std::string_view file) const;
  // Writes value to a control file in one write(2). Errors as the kernel returns them.
  [[nodiscard]] Result<void> write(std::string_view file, std::string_view value) const;

  [[nodiscard]] uint64_t id() const { return id_; }  // directory inode
  [[nodiscard]] int fd() const { return fd_.get(); }
  [[nodiscard]] const std::string& path() const { return path_; }

 private:
  CgroupDir(UniqueFd fd, uint64_t id, std::string path)
      : fd_(std::move(fd)), id_(id), path_(std::move(path)) {}
  UniqueFd fd_;
  uint64_t id_ = 0;
  std::string path_;
};

// The id of the cgroup at path (stat inode). ENOENT if absent.
Result<uint64_t> cgroupId(const std::string& path);
// The id from name_to_handle_at (the kernfs id; cgroupfs only). EOPNOTSUPP on other fs.
Result<uint64_t> cgroupIdFromHandle(const std::string& path);

struct CgroupEntry {
  uint64_t id = 0;
  std::string rel;  // "/" for the hierarchy root, "/a/b" below it
};

// Walks the hierarchy under root (depth-first, dirfd-relative, never following symlinks) and
// lists every cgroup directory. Stops with E2BIG after max_entries (bounded memory). Dirs that
// vanish during the walk are skipped, not errors.
Result<std::vector<CgroupEntry>> listCgroups(const std::string& root, std::size_t max_entries);

// Finds the path (relative to root) of the cgroup with this id by walking. ENOENT if none.
Result<std::string> findById(const std::string& root, uint64_t id, std::size_t max_entries);

// Joins a hierarchy root and a rel path ("/" -> root).
std::string joinRel(const std::string& root, std::string_view rel);

}  // namespace colod::cgroup
