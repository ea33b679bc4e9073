// SPDX-License-Identifier: Apache-2.0
// Open cgroup control files, re-read with pread(2) at every tick (issue 17): the collector reads
// cpu.stat, cpu.pressure and memory.pressure of every active cgroup each tick, and an open +
// read + close per file per tick is most of that cost at a few hundred cgroups.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <list>
#include <string>
#include <string_view>
#include <unordered_map>

#include "colod/base/result.h"
#include "colod/base/unique_fd.h"

namespace colod::collect::detail {

// The control files the collector reads per cgroup.
// UnifiedCpuStat is cpu.stat read from the unified hierarchy on a v1 host (its CPU usage), kept
// apart from the cpu hierarchy's cpu.stat of the same id.
enum class CgroupFile : uint8_t {
  CpuStat,
  CpuPressure,
  MemoryPressure,
  CfsQuotaUs,
  CpuMax,
  CpuacctUsage,
  UnifiedCpuStat,
};
const char* fileName(CgroupFile file);

// A bounded cache of open control files keyed by (cgroup id, file). At most max_open fds are
// held, so the collector's fds stay well under RLIMIT_NOFILE whatever the number of cgroups.
// When full, a new file replaces the least recently read one only if that one was not read
// since the last beginTick(); otherwise the new file is read uncached (open, read, close).
// That keeps a cycle over more files than the bound from evicting every entry just before it
// is needed (plain LRU would miss on every read).
// max_open == 0 caches nothing, misses neither (every read opens and closes: the pre-issue-17
// behaviour).
// Files are opened relative to their cgroup directory (style rule 18) and O_CLOEXEC.
// A file missing from a cgroup that is there (ENOENT from openat in a directory that opened) is
// remembered: reads of it return ENOENT without a syscall for `missing_retry_ticks` ticks, then
// one open tries again. Missing files are the rule, not the exception, in places: the *.pressure
// files on a kernel booted with psi=0 (or a cgroup whose cgroup.pressure is 0), cpu.max of a v2
// cgroup without the cpu controller and of the root. They can appear later (the cpu controller
// enabled in the parent's subtree_control), so the miss is not kept for good.
// Not thread-safe; movable.
class CgroupFileCache {
 public:
  // 600 ticks: a minute at colod's default 100 ms interval.
  static constexpr uint64_t kDefaultMissingRetryTicks = 600;

  explicit CgroupFileCache(std::size_t max_open,
                           uint64_t missing_retry_ticks = kDefaultMissingRetryTicks)
      : max_open_(max_open), missing_retry_ticks_(missing_retry_ticks) {}

  // Reads `file` of cgroup `id`, whose directory is `dir` (absolute path). A cached fd is
  // re-read at offset 0. When that fails (ENODEV once the cgroup was removed), the fd is closed
  // and the file reopened from `dir` once: if the reopen fails too, nothing is kept and its
  // error returned. With verify_id, a directory whose inode is not `id` (the cgroup was removed
  // and another created at the same path) is ENOENT: `dir` must then be in the hierarchy whose
  // inodes are the ids. The returned view is valid until the next call.
  // Errors: ENOENT/ENODEV when the cgroup or the file is gone (or the file was missing less
  // than missing_retry_ticks ago), EFBIG above 64 KiB, others as the kernel returns them.
  Result<std::string_view> read(uint64_t id,
                                CgroupFile file,
                                const std::string& dir,
                                bool verify_id);

  // Starts a tick (a snapshot's round of reads): see the class comment.
  void beginTick() { ++tick_; }

  // Closes every cached file of cgroup `id` (it vanished) and forgets its missing ones.
  void erase(uint64_t id);
  // Closes (and forgets the missing) files of the cgroups for which keep(id) is false.
  void retainIf(const std::function<bool(uint64_t)>& keep);

  [[nodiscard]] std::size_t openFiles() const { return lru_.size(); }
  // Files opened (first read, reopen after a failure or after eviction), cumulative: flat in
  // a steady state when the cache holds every file read.
  [[nodiscard]] uint64_t opens() const { return opens_; }
  // pread calls issued, cumulative: one a file read while its text fits the buffer.
  [[nodiscard]] uint64_t reads() const { return reads_; }
  // Reads answered ENOENT from a remembered miss (no syscall), cumulative.
  [[nodiscard]] uint64_t missingHits() const { return missing_hits_; }
  // Files remembered as missing.
  [[nodiscard]] std::size_t missingFiles() const { return missing_.size(); }

 private:
  struct Key {
    uint64_t id = 0;
    CgroupFile file = CgroupFile::CpuStat;
    bool operator==(const Key&) const = default;
  };
  struct KeyHash {
    std::size_t operator()(const Key& k) const {
      return std::hash<uint64_t>()(k.id * 8 + static_cast<uint64_t>(k.file));
    }
  };
  struct Entry {
    Key key;
    UniqueFd fd;
    uint64_t tick = 0;  // of the last read
  };

  Result<UniqueFd> open(const Key& key, const std::string& dir, bool verify_id);
  Result<std::string_view> readAll(int fd);

  std::size_t max_open_;
  uint64_t missing_retry_ticks_;
  uint64_t opens_ = 0;
  uint64_t missing_hits_ = 0;
  uint64_t reads_ = 0;
  uint64_t tick_ = 0;
  std::list<Entry> lru_;  // most recently read first
  std::unordered_map<Key, std::list<Entry>::iterator, KeyHash> index_;
  std::unordered_map<Key, uint64_t, KeyHash> missing_;  // -> the tick it was found missing
  std::string buf_;                                     // reused for every read
};

}  // namespace colod::collect::detail
