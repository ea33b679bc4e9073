// SPDX-License-Identifier: Apache-2.0
#include "file_cache.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>

namespace colod::collect::detail {
namespace {

// cpu.stat is the largest file read (v2 with every field: ~600 bytes); the bound only stops a
// runaway read.
constexpr std::size_t kInitialBuf = 4096;
constexpr std::size_t kMaxFileBytes = 64 * 1024;

}  // namespace

const char* fileName(CgroupFile file) {
  switch (file) {
    case CgroupFile::CpuStat:
      return "cpu.stat";
    case CgroupFile::CpuPressure:
      return "cpu.pressure";
    case CgroupFile::MemoryPressure:
      return "memory.pressure";
    case CgroupFile::CfsQuotaUs:
      return "cpu.cfs_quota_us";
    case CgroupFile::CpuMax:
      return "cpu.max";
    case CgroupFile::CpuacctUsage:
      return "cpuacct.usage";
    case CgroupFile::UnifiedCpuStat:
      return "cpu.stat";
  }
  return "?";
}

Result<UniqueFd> CgroupFileCache::open(const Key& key, const std::string& dir, bool verify_id) {
  ++opens_;
  UniqueFd d(::open(dir.c_str(), O_DIRECTORY | O_RDONLY | O_CLOEXEC));
  if (!d) {
    return COLOD_ERR(errno, "opening cgroup ", dir);
  }
  if (verify_id) {
    struct stat st {};
    if (::fstat(d.get(), &st) != 0) {
      return COLOD_ERR(errno, "fstat ", dir);
    }
    if (static_cast<uint64_t>(st.st_ino) != key.id) {
      // Removed and recreated under the same name: not the cgroup asked for.
      return COLOD_ERR(ENOENT, "cgroup ", key.id, " gone (", dir, " is now ", st.st_ino, ")");
    }
  }
  UniqueFd f(::openat(d.get(), fileName(key.file), O_RDONLY | O_CLOEXEC));
  if (!f) {
    const int err = errno;
    if (err == ENOENT && max_open_ > 0) {
      missing_[key] = tick_;  // the cgroup is there, the file is not
    }
    return COLOD_ERR(err, "opening ", dir, "/", fileName(key.file));
  }
  missing_.erase(key);
  return f;
}

// pread from offset 0: kernfs files regenerate their text at offset 0, so the same fd serves
// every tick. A read that returns less than it asked for has reached the end: the cgroup files
// read here are kernfs single-record seq files (no seq_start: cpu.stat, *.pressure), whose
// whole text is copied out in one read when the buffer holds it, and a regular file is short
// only at its end. So one pread a file, not a second one to see EOF: on this host a syscall
// costs ~1.3 us and the collector reads hundreds of these files a tick (issue 17).
Result<std::string_view> CgroupFileCache::readAll(int fd) {
  if (buf_.size() < kInitialBuf) {
    buf_.resize(kInitialBuf);
  }
  std::size_t len = 0;
  while (true) {
    if (len == buf_.size()) {
      if (buf_.size() >= kMaxFileBytes) {
        return COLOD_ERR(EFBIG, "cgroup file larger than ", kMaxFileBytes, " bytes");
      }
      buf_.resize(buf_.size() * 2);
    }
    const std::size_t want = buf_.size() - len;
    ++reads_;
    const ssize_t n = ::pread(fd, buf_.data() + len, want, static_cast<off_t>(len));
    if (n < 0) {
      if (errno == EINTR) {
        continue;
      }
      return COLOD_ERR(errno, "reading cgroup file");
    }
    len += static_cast<std::size_t>(n);
    if (static_cast<std::size_t>(n) < want) {
      break;
    }
  }
  return std::string_view(buf_.data(), len);
}

Result<std::string_view> CgroupFileCache::read(uint64_t id,
                                               CgroupFile file,
                                               const std::string& dir,
                                               bool verify_id) {
  const Key key{id, file};
  if (!missing_.empty()) {
    if (auto m = missing_.find(key);
        m != missing_.end() && tick_ - m->second < missing_retry_ticks_) {
      ++missing_hits_;
      return COLOD_ERR(ENOENT, dir, "/", fileName(file), " missing (looked for at tick ", m->second,
                       ")");
    }
  }
  if (auto it = index_.find(key); it != index_.end()) {
    lru_.splice(lru_.begin(), lru_, it->second);
    it->second->tick = tick_;
    auto r = readAll(it->second->fd.get());
    if (r) {
      return r;
    }
    // Most often ENODEV: the cgroup was removed (kernfs refuses reads on a removed node). The
    // path may hold the same cgroup still (a transient error) or a new one: reopen once.
    lru_.erase(it->second);
    index_.erase(it);
  }
  auto fd = open(key, dir, verify_id);
  if (!fd) {
    return std::move(fd).error();
  }
  if (lru_.size() >= max_open_) {
    if (lru_.empty() || lru_.back().tick == tick_) {
      return readAll(fd->get());  // full of files this tick reads: uncached
    }
    index_.erase(lru_.back().key);
    lru_.pop_back();
  }
  lru_.push_front(Entry{key, std::move(*fd), tick_});
  index_[key] = lru_.begin();
  auto r = readAll(lru_.front().fd.get());
  if (!r) {
    // A fresh fd that cannot be read is not worth keeping (the cgroup is going away).
    index_.erase(key);
    lru_.pop_front();
  }
  return r;
}

void CgroupFileCache::erase(uint64_t id) {
  for (const auto f : {CgroupFile::CpuStat, CgroupFile::CpuPressure, CgroupFile::MemoryPressure,
                       CgroupFile::CfsQuotaUs, CgroupFile::CpuMax, CgroupFile::CpuacctUsage,
                       CgroupFile::UnifiedCpuStat}) {
    if (auto it = index_.find(Key{id, f}); it != index_.end()) {
      lru_.erase(it->second);
      index_.erase(it);
    }
    missing_.erase(Key{id, f});
  }
}

void CgroupFileCache::retainIf(const std::function<bool(uint64_t)>& keep) {
  for (auto it = lru_.begin(); it != lru_.end();) {
    if (keep(it->key.id)) {
      ++it;
    } else {
      index_.erase(it->key);
      it = lru_.erase(it);
    }
  }
  std::erase_if(missing_, [&](const auto& m) { return !keep(m.first.id); });
}

}  // namespace colod::collect::detail
