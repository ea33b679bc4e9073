// SPDX-License-Identifier: Apache-2.0
// libbpf calls wrapped once (style rule 16): int returns < 0 are -errno, pointer returns are
// checked for NULL + errno; libbpf_get_error() is never used. Skeleton<T> is the movable RAII
// owner of a bpftool C skeleton (rule 17); its destroy() also detaches the skeleton's links.
#pragma once

#include <bpf/bpf.h>
#include <bpf/libbpf.h>

#include <cerrno>
#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "colod/base/result.h"

namespace colod::collect::bpf {

template <typename T, void (*Destroy)(T*)>
class Skeleton {
 public:
  Skeleton() = default;
  explicit Skeleton(T* skel) : skel_(skel, &destroy) {}
  [[nodiscard]] T* get() const { return skel_.get(); }
  T* operator->() const { return skel_.get(); }
  explicit operator bool() const { return skel_ != nullptr; }
  // Hands the skeleton over (to a SkeletonPtr held across translation units).
  [[nodiscard]] T* release() { return skel_.release(); }

 private:
  static void destroy(T* s) { Destroy(s); }
  std::unique_ptr<T, void (*)(T*)> skel_{nullptr, &destroy};
};

// Opens a skeleton: open() returns NULL and sets errno on failure.
template <typename T, void (*Destroy)(T*)>
Result<Skeleton<T, Destroy>> openSkeleton(T* (*open)(), const char* name) {
  errno = 0;
  T* s = open();
  const int saved = errno;
  if (s == nullptr) {
    return COLOD_ERR(saved != 0 ? saved : EINVAL, "opening BPF skeleton ", name);
  }
  return Skeleton<T, Destroy>(s);
}

inline Result<void> check(int rc, const char* what) {
  if (rc < 0) {
    return COLOD_ERR(-rc, what);
  }
  return {};
}

// Reads a map's live entries into key/value buffers it keeps across calls (issue 17: the read
// side sized by the work, not by max_entries x possible CPUs). Buffers start small, grow
// (doubling) only when the live entries do not fit, and shrink to twice the live count after
// kShrinkAfter reads in a row used under a quarter of them. Nothing is zero-filled per read.
// One BPF_MAP_LOOKUP_BATCH pass, falling back to get_next_key + lookup (kernels or map types
// without batch support). value_stride: the value size, or for per-CPU maps
// round_up(value_size, 8) * possible CPUs. Not thread-safe; movable.
class MapReader {
 public:
  static constexpr std::size_t kMinCapacity = 64;
  static constexpr uint32_t kShrinkAfter = 100;

  // legacy: every read allocates fresh zero-filled buffers for max_entries, as the reader
  // before issue 17 did (CollectorOptions::legacy_reads, for before/after benchmarks only).
  MapReader(std::size_t key_size, std::size_t value_stride, bool legacy = false);

  // Reads every entry (at most max_entries) and returns how many were read. Entries created or
  // deleted during the read may or may not be seen. Errors: the kernel's errno when neither a
  // batch nor a key walk works (EBADF, EFAULT, ENOMEM).
  Result<std::size_t> read(int fd, std::size_t max_entries);
  // read(), deleting what it returns (a hash map of counters the BPF side re-creates): the
  // entries are then what was added since the last drain. Entries created during the drain are
  // returned now or left for the next one, never lost. An add the BPF side makes to an entry
  // between the kernel's copy of it and its deletion is lost, or in a rarer race lands in the entry
  // that reuses the deleted one's memory (a window of a few instructions each).
  Result<std::size_t> drain(int fd, std::size_t max_entries);
  // Entries the last drain could not delete (key-walk fallback only): left in the map and out
  // of its result, for the next drain to read whole.
  [[nodiscard]] uint64_t lastDeleteErrors() const { return delete_errors_; }

  // Entry i of the last read (i < count()). The pointers stay valid until the next read.
  [[nodiscard]] const uint8_t* key(std::size_t i) const { return keys_.data() + i * key_size_; }
  [[nodiscard]] const uint8_t* value(std::size_t i) const {
    return values_.data() + i * value_stride_;
  }
  [[nodiscard]] std::size_t count() const { return count_; }
  // Forgets the last read's entries (count() 0) without touching the buffers.
  void clear() { count_ = 0; }
  // The map is known unchanged since the last read (MapGeneration): its entries stand as they
  // are, and this round copied nothing (lastReadBytes() 0 until the next read).
  void reuse() { reused_ = true; }
  // Bytes the last read copied out of the kernel: count() * (key_size + value_stride); 0 after
  // reuse().
  [[nodiscard]] uint64_t lastReadBytes() const {
    return reused_ ? 0 : static_cast<uint64_t>(count_) * (key_size_ + value_stride_);
  }
  // Bytes held by the buffers now (entries they can take x (key_size + value_stride)).
  [[nodiscard]] uint64_t bufferBytes() const {
    return static_cast<uint64_t>(capacity_) * (key_size_ + value_stride_);
  }
  [[nodiscard]] std::size_t capacity() const { return capacity_; }

 private:
  void reserve(std::size_t entries);
  void maybeShrink();
  Result<std::size_t> walk(int fd, std::size_t max_entries, bool del);
  Result<std::size_t> readByKeys(int fd, std::size_t max_entries);

  std::size_t key_size_;
  std::size_t value_stride_;
  bool legacy_;
  std::size_t capacity_ = 0;
  std::size_t count_ = 0;
  bool reused_ = false;
  uint32_t underused_reads_ = 0;
  uint64_t delete_errors_ = 0;
  std::vector<uint8_t> keys_;
  std::vector<uint8_t> values_;
  std::vector<uint8_t> cursor_in_;  // batch cursors (opaque, key_size bytes)
  std::vector<uint8_t> cursor_out_;
};

// Whether a hash map must be walked again (issue 17: the kernel's batch read visits every bucket,
// so its cost follows max_entries, not the live or changed entries). The BPF side bumps a
// generation counter after each write to the map; the reader loads it *before* walking and
// passes it to read(): any write not seen by that walk bumps the counter past it, so an equal
// counter later proves the map unchanged. Userspace's own deletions call invalidate(). Pure.
class MapGeneration {
 public:
  // True when the map must be walked: never walked, invalidated, or `gen` moved since.
  [[nodiscard]] bool due(uint64_t gen) const { return !walked_ || stale_ || gen != gen_; }
  // A walk was done; `gen` was loaded before it began.
  void walked(uint64_t gen) {
    gen_ = gen;
    walked_ = true;
    stale_ = false;
  }
  void invalidate() { stale_ = true; }

 private:
  uint64_t gen_ = 0;
  bool walked_ = false;
  bool stale_ = false;
};

// The memory of a BPF_F_MMAPABLE array map of 8-byte values (cg_dirty's change marks), mapped
// shared and read-write: the RAII owner of the mapping (style rule 17), which holds its own
// reference on the map. Movable.
class MappedWords {
 public:
  MappedWords() = default;
  // Maps `entries` values of the map `fd`. Errors: mmap's errno (EPERM: not created
  // BPF_F_MMAPABLE).
  static Result<MappedWords> map(int fd, std::size_t entries);
  MappedWords(MappedWords&& o) noexcept;
  MappedWords& operator=(MappedWords&& o) noexcept;
  MappedWords(const MappedWords&) = delete;
  MappedWords& operator=(const MappedWords&) = delete;
  ~MappedWords();
  [[nodiscard]] std::span<uint64_t> words() const { return {words_, entries_}; }

 private:
  void reset();
  uint64_t* words_ = nullptr;
  std::size_t entries_ = 0;
  std::size_t bytes_ = 0;
};

// Change marks (cg_dirty): appends the index of every set mark to `out` and clears it, then
// fences, so that what the caller reads next is read after the clears are visible: a write the
// caller's read misses marks the slot again (the BPF side stores a mark only while it is clear,
// and only after its write). Pure apart from the shared memory it is given.
void takeMarks(std::span<uint64_t> marks, std::vector<uint32_t>& out);
// Clears every mark (before a read of every slot), then fences likewise.
void clearMarks(std::span<uint64_t> marks);

// What reading map entries costs, in bytes copied alike: kLookupCostBytes a call (a syscall),
// kEntryCostBytes an entry's own work in a walk, kBucketCostBytes a hash bucket visited; values
// of `value_bytes` (per-CPU: x possible CPUs) on top. Used by planRuns, runsCost and walkCost.
inline constexpr std::size_t kLookupCostBytes = 4096;
inline constexpr std::size_t kEntryCostBytes = 512;
inline constexpr std::size_t kBucketCostBytes = 32;

// A run of consecutive array indices [first, first + count), read by one call.
struct IndexRun {
  uint32_t first = 0;
  uint32_t count = 0;
  bool operator==(const IndexRun&) const = default;
};
// Groups `sorted` (ascending, distinct) array indices into runs, one batch call each: a gap of
// indices nobody asked for is read through (copied and dropped) when that costs less than one
// more call, in those units. On 2 CPUs (736-byte per-CPU values) gaps of up to 3
// are bridged; at 192 CPUs every changed index is its own run unless adjacent. Pure.
void planRuns(std::span<const uint32_t> sorted,
              std::size_t value_bytes,
              std::vector<IndexRun>& out);
// What reading `runs` costs, and what one walk of `walk_entries` entries of a map with
// `walk_buckets` buckets costs, in those units. Pure.
[[nodiscard]] double runsCost(std::span<const IndexRun> runs, std::size_t value_bytes);
[[nodiscard]] double walkCost(std::size_t walk_entries,
                              std::size_t value_bytes,
                              std::size_t walk_buckets = 0);

// Reads array entries [first, first + count) of the array map `fd` into `values` (count x
// value_stride bytes; per-CPU maps: round_up(value_size, 8) x possible CPUs): one
// BPF_MAP_LOOKUP_BATCH call from the index before `first`, or one lookup for a single entry.
// Where the kernel has no batch support for arrays (before 5.6: EINVAL/ENOTSUPP) it falls back
// to a lookup each and `batch_ok` is cleared so the caller stops asking. `keys` is scratch.
// Errors: the kernel's errno (ENOENT: an index past max_entries).
Result<void> readArrayRange(int fd,
                            IndexRun run,
                            std::size_t value_stride,
                            std::vector<uint32_t>& keys,
                            std::vector<uint8_t>& values,
                            bool& batch_ok);

// The kernel's account of a BPF map's memory from /proc/<pid>/fdinfo/<map fd> text: the
// "memlock:" line (bytes; since 6.4 the map's actual usage, per-CPU values included). EINVAL if
// the line is missing or malformed. Pure.
Result<uint64_t> parseFdinfoMemlock(std::string_view fdinfo);
// memlock of one map fd of this process. Errors: ENOENT/EBADF from /proc, EINVAL as above.
Result<uint64_t> mapMemlockBytes(int fd);

// Deletes a key; ENOENT (already gone) is success.
Result<void> deleteKey(int fd, const void* key);

// Routes libbpf's print callback to fn (process-wide; libbpf has one global hook).
void setLibbpfLog(std::function<void(int, const std::string&)> fn);

// While one lives, libbpf's warnings on this thread are passed on as debug: for an optional
// object whose failure to load is expected on some kernels and reported by the caller.
class OptionalLoad {
 public:
  OptionalLoad();
  ~OptionalLoad();
  OptionalLoad(const OptionalLoad&) = delete;
  OptionalLoad& operator=(const OptionalLoad&) = delete;
};

}  // namespace colod::collect::bpf
