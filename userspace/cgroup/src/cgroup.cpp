// SPDX-License-Identifier: Apache-2.0
#include "colod/cgroup/cgroup.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <array>
#include <cerrno>
#include <cstddef>
#include <cstring>
#include <memory>

namespace colod::cgroup {
namespace {

constexpr std::size_t kMaxFileBytes = 1 << 20;

struct DirCloser {
  void operator()(DIR* d) const { ::closedir(d); }
};

bool isDir(const std::string& p) {
  struct stat st {};
  return ::stat(p.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}
bool exists(const std::string& p) {
  return ::access(p.c_str(), F_OK) == 0;
}

// A v1 hierarchy for `ctrl` is a dir named ctrl or a comma-joined name containing it
// ("cpu,cpuacct"); return the first that exists.
std::string findV1(const std::string& root, std::string_view ctrl) {
  const std::string direct = root + "/" + std::string(ctrl);
  if (isDir(direct)) {
    return direct;
  }
  std::unique_ptr<DIR, DirCloser> d(::opendir(root.c_str()));
  if (!d) {
    return {};
  }
  while (const dirent* e = ::readdir(d.get())) {
    std::string_view name(e->d_name);
    if (name.find(',') == std::string_view::npos) {
      continue;
    }
    std::size_t start = 0;
    while (start <= name.size()) {
      const auto comma = name.find(',', start);
      if (name.substr(start, comma - start) == ctrl) {
        return root + "/" + std::string(name);
      }
      if (comma == std::string_view::npos) {
        break;
      }
      start = comma + 1;
    }
  }
  return {};
}

}  // namespace

const char* toString(Layout layout) {
  switch (layout) {
    case Layout::V2:
      return "v2";
    case Layout::Hybrid:
      return "hybrid";
    case Layout::V1:
      return "v1";
  }
  return "?";
}

Result<Hierarchies> probe(const std::string& root) {
  Hierarchies h;
  h.root = root;
  if (exists(root + "/cgroup.controllers")) {
    h.layout = Layout::V2;
    h.unified = root;
    return h;
  }
  h.cpu = findV1(root, "cpu");
  h.cpuacct = findV1(root, "cpuacct");
  h.cpuset = findV1(root, "cpuset");
  h.memory = findV1(root, "memory");
  const bool unified = exists(root + "/unified/cgroup.controllers");
  if (unified) {
    h.unified = root + "/unified";
  }
  if (h.cpu.empty() && h.memory.empty()) {
    if (unified) {
      // cgroup2 only at <root>/unified and no v1 controllers: treat it as the v2 hierarchy.
      h.layout = Layout::V2;
      return h;
    }
    return COLOD_ERR(ENOENT, "no cgroup hierarchy under ", root);
  }
  h.layout = unified ? Layout::Hybrid : Layout::V1;
  return h;
}

Result<CgroupDir> CgroupDir::open(const std::string& path) {
  UniqueFd fd(::open(path.c_str(), O_DIRECTORY | O_RDONLY | O_CLOEXEC));
  if (!fd) {
    return COLOD_ERR(errno, "opening cgroup ", path);
  }
  struct stat st {};
  if (::fstat(fd.get(), &st) != 0) {
    return COLOD_ERR(errno, "fstat ", path);
  }
  return CgroupDir(std::move(fd), static_cast<uint64_t>(st.st_ino), path);
}

Result<CgroupDir> CgroupDir::openAt(const CgroupDir& parent, const std::string& rel) {
  UniqueFd fd(::openat(parent.fd(), rel.c_str(),
                       O_DIRECTORY | O_RDONLY | O_CLOEXEC | O_NOFOLLOW));
  if (!fd) {
    return COLOD_ERR(errno, "opening cgroup ", parent.path(), "/", rel);
  }
  struct stat st {};
  if (::fstat(fd.get(), &st) != 0) {
    return COLOD_ERR(errno, "fstat ", parent.path(), "/", rel);
  }
  return CgroupDir(std::move(fd), static_cast<uint64_t>(st.st_ino), parent.path() + "/" + rel);
}

Result<std::string> CgroupDir::read(std::string_view file) const {
  const std::string name(file);
  UniqueFd fd(::openat(fd_.get(), name.c_str(), O_RDONLY | O_CLOEXEC));
  if (!fd) {
    return COLOD_ERR(errno, "opening ", path_, "/", name);
  }
  std::string out;
  std::array<char, 4096> buf{};
  while (true) {
    const ssize_t n = ::read(fd.get(), buf.data(), buf.size());
    if (n < 0) {
      if (errno == EINTR) {
        continue;
      }
      return COLOD_ERR(errno, "reading ", path_, "/", name);
    }
    if (n == 0) {
      break;
    }
    out.append(buf.data(), static_cast<std::size_t>(n));
    if (out.size() > kMaxFileBytes) {
      return COLOD_ERR(EFBIG, "reading ", path_, "/", name);
    }
  }
  return out;
}

Result<void> CgroupDir::write(std::string_view file, std::string_view value) const {
  const std::string name(file);
  UniqueFd fd(::openat(fd_.get(), name.c_str(), O_WRONLY | O_TRUNC | O_CLOEXEC));
  if (!fd) {
    return COLOD_ERR(errno, "opening ", path_, "/", name, " for writing");
  }
  // Control files take one value per write(2); a short write is an error, not a retry.
  const ssize_t n = ::write(fd.get(), value.data(), value.size());
  if (n < 0) {
    return COLOD_ERR(errno, "writing '", value, "' to ", path_, "/", name);
  }
  if (static_cast<std::size_t>(n) != value.size()) {
    return COLOD_ERR(EIO, "short write to ", path_, "/", name);
  }
  return {};
}

Result<uint64_t> cgroupId(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) {
    return COLOD_ERR(errno, "stat ", path);
  }
  return static_cast<uint64_t>(st.st_ino);
}

Result<uint64_t> cgroupIdFromHandle(const std::string& path) {
  // struct file_handle ends in a flexible array; give it room for the 8-byte kernfs id
  // (FILEID_KERNFS) in suitably aligned storage.
  constexpr std::size_t kPayload = 64;
  alignas(struct file_handle) std::array<unsigned char, sizeof(struct file_handle) + kPayload>
      buf{};
  auto* fh = reinterpret_cast<struct file_handle*>(buf.data());
  fh->handle_bytes = kPayload;
  int mount_id = 0;
  if (::name_to_handle_at(AT_FDCWD, path.c_str(), fh, &mount_id, 0) != 0) {
    return COLOD_ERR(errno, "name_to_handle_at ", path);
  }
  if (fh->handle_bytes != sizeof(uint64_t)) {
    return COLOD_ERR(EOPNOTSUPP, "unexpected handle size ", fh->handle_bytes, " for ", path);
  }
  uint64_t id = 0;
  std::memcpy(&id, buf.data() + offsetof(struct file_handle, f_handle), sizeof(id));
  return id;
}

std::string joinRel(const std::string& root, std::string_view rel) {
  if (rel.empty() || rel == "/") {
    return root;
  }
  return root + std::string(rel);
}

namespace {

Result<void> walk(const CgroupDir& dir, const std::string& rel, std::size_t max_entries,
                  std::vector<CgroupEntry>& out) {
  if (out.size() >= max_entries) {
    return COLOD_ERR(E2BIG, "more than ", max_entries, " cgroups under the walk root");
  }
  out.push_back(CgroupEntry{dir.id(), rel.empty() ? std::string("/") : rel});
  // fdopendir takes ownership of the fd it is given: hand it a dup so `dir` keeps its own.
  const int dup = ::fcntl(dir.fd(), F_DUPFD_CLOEXEC, 0);
  if (dup < 0) {
    return COLOD_ERR(errno, "dup ", dir.path());
  }
  std::unique_ptr<DIR, DirCloser> d(::fdopendir(dup));
  if (!d) {
    const int saved = errno;
    ::close(dup);  // fdopendir failed, so the fd is still ours
    return COLOD_ERR(saved, "fdopendir ", dir.path());
  }
  while (const dirent* e = ::readdir(d.get())) {
    if (e->d_type != DT_DIR) {
      continue;
    }
    const std::string_view name(e->d_name);
    if (name == "." || name == "..") {
      continue;
    }
    auto child = CgroupDir::openAt(dir, std::string(name));
    if (!child) {
      const int err = child.error().errnoValue();
      if (err == ENOENT || err == ENODEV) {
        continue;  // removed while we walked: not an error
      }
      return std::move(child).error();
    }
    COLOD_TRY_VOID(walk(*child, rel + "/" + std::string(name), max_entries, out), "walking");
  }
  return {};
}

}  // namespace

Result<std::vector<CgroupEntry>> listCgroups(const std::string& root, std::size_t max_entries) {
  auto dir = CgroupDir::open(root);
  if (!dir) {
    return std::move(dir).error();
  }
  std::vector<CgroupEntry> out;
  auto r = walk(*dir, "", max_entries, out);
  if (!r) {
    return std::move(r).error();
  }
  return out;
}

Result<std::string> findById(const std::string& root, uint64_t id, std::size_t max_entries) {
  auto all = listCgroups(root, max_entries);
  if (!all) {
    return std::move(all).error();
  }
  for (const auto& e : *all) {
    if (e.id == id) {
      return e.rel;
    }
  }
  return COLOD_ERR(ENOENT, "no cgroup with id ", id, " under ", root);
}

}  // namespace colod::cgroup
