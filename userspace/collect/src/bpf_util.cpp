// SPDX-License-Identifier: Apache-2.0
#include "bpf_util.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <charconv>
#include <cstdarg>
#include <cstdio>
#include <functional>
#include <mutex>
#include <string>
#include <utility>

#include "colod/base/unique_fd.h"

namespace colod::collect::bpf {

MapReader::MapReader(std::size_t key_size, std::size_t value_stride, bool legacy)
    : key_size_(key_size),
      value_stride_(value_stride),
      legacy_(legacy),
      cursor_in_(key_size),
      cursor_out_(key_size) {}

void MapReader::reserve(std::size_t entries) {
  if (entries <= capacity_) {
    return;
  }
  // Growth is rare (the live count rose past every earlier read), so the zero-fill of the new
  // tail by resize() is paid once, not per read.
  keys_.resize(entries * key_size_);
  values_.resize(entries * value_stride_);
  capacity_ = entries;
}

void MapReader::maybeShrink() {
  if (legacy_ || capacity_ <= kMinCapacity || count_ * 4 >= capacity_) {
    underused_reads_ = 0;
    return;
  }
  if (++underused_reads_ < kShrinkAfter) {
    return;
  }
  // Fresh vectors: shrink_to_fit is only a request, and this is where the memory goes back.
  const std::size_t entries = std::max(kMinCapacity, count_ * 2);
  std::vector<uint8_t> k(entries * key_size_);
  std::vector<uint8_t> v(entries * value_stride_);
  std::copy_n(keys_.begin(), count_ * key_size_, k.begin());
  std::copy_n(values_.begin(), count_ * value_stride_, v.begin());
  keys_ = std::move(k);
  values_ = std::move(v);
  capacity_ = entries;
  underused_reads_ = 0;
}

Result<std::size_t> MapReader::read(int fd, std::size_t max_entries) {
  return walk(fd, max_entries, /*del=*/false);
}

Result<std::size_t> MapReader::drain(int fd, std::size_t max_entries) {
  return walk(fd, max_entries, /*del=*/true);
}

Result<std::size_t> MapReader::walk(int fd, std::size_t max_entries, bool del) {
  count_ = 0;
  delete_errors_ = 0;
  reused_ = false;
  if (max_entries == 0) {
    return std::size_t{0};
  }
  if (legacy_) {
    // Fresh vectors, as the reader before issue 17 had: the allocation, zero-fill and faults of
    // max_entries x stride at every read are the cost being measured.
    keys_ = std::vector<uint8_t>(max_entries * key_size_);
    values_ = std::vector<uint8_t>(max_entries * value_stride_);
    capacity_ = max_entries;
  }
  reserve(std::min(kMinCapacity, max_entries));
  bool first = true;
  bool batch_ok = true;
  while (count_ < max_entries) {
    if (count_ == capacity_) {
      reserve(std::min(capacity_ * 2, max_entries));
    }
    auto n = static_cast<uint32_t>(std::min(capacity_, max_entries) - count_);
    DECLARE_LIBBPF_OPTS(bpf_map_batch_opts, opts);
    void* in = first ? nullptr : cursor_in_.data();
    void* k = keys_.data() + count_ * key_size_;
    void* v = values_.data() + count_ * value_stride_;
    const int rc =
        del ? bpf_map_lookup_and_delete_batch(fd, in, cursor_out_.data(), k, v, &n, &opts)
            : bpf_map_lookup_batch(fd, in, cursor_out_.data(), k, v, &n, &opts);
    const int err = rc < 0 ? -rc : 0;
    if (err == ENOSPC && n == 0 && capacity_ < max_entries) {
      // A hash bucket holds more entries than the room left (the kernel copies whole buckets
      // and copied nothing): grow and repeat from the same cursor.
      reserve(std::min(capacity_ * 2, max_entries));
      continue;
    }
    if (rc < 0 && err != ENOENT) {
      batch_ok = false;
      break;
    }
    count_ += n;
    if (err == ENOENT) {
      break;  // end of map
    }
    std::swap(cursor_in_, cursor_out_);
    first = false;
  }
  if (!batch_ok && del && count_ > 0) {
    // Part of the map is drained (deleted) already: that part is returned and the rest waits
    // for the next drain. A key walk now would not see the drained part, and lose it.
  } else if (!batch_ok) {
    auto r = readByKeys(fd, max_entries);
    if (!r) {
      return std::move(r).error();
    }
    if (del) {
      // Deleted after the whole walk (deleting the key a walk stands on restarts it). What the
      // BPF side adds between an entry's lookup and its deletion is lost: a wider window than
      // the batch's, on kernels without batch operations only. An entry that could not be
      // deleted is left out of this drain: the next one reads it whole, once.
      std::size_t kept = 0;
      for (std::size_t i = 0; i < count_; ++i) {
        uint8_t* key = keys_.data() + i * key_size_;
        if (bpf_map_delete_elem(fd, key) != 0 && errno != ENOENT) {
          ++delete_errors_;
          continue;
        }
        if (kept != i) {
          std::copy_n(key, key_size_, keys_.data() + kept * key_size_);
          std::copy_n(values_.data() + i * value_stride_, value_stride_,
                      values_.data() + kept * value_stride_);
        }
        ++kept;
      }
      count_ = kept;
    }
  }
  maybeShrink();
  return count_;
}

// Fallback: key iteration (no batch support for this map type or kernel). Entries deleted
// concurrently are skipped.
Result<std::size_t> MapReader::readByKeys(int fd, std::size_t max_entries) {
  count_ = 0;
  std::vector<uint8_t> cur(key_size_);
  const void* prev = nullptr;
  while (count_ < max_entries) {
    if (count_ == capacity_) {
      reserve(std::min(capacity_ * 2, max_entries));
    }
    uint8_t* k = keys_.data() + count_ * key_size_;
    const int rc = bpf_map_get_next_key(fd, prev, k);
    if (rc < 0) {
      if (-rc == ENOENT) {
        break;
      }
      return COLOD_ERR(-rc, "iterating BPF map keys");
    }
    std::copy_n(k, key_size_, cur.begin());
    prev = cur.data();
    if (bpf_map_lookup_elem(fd, k, values_.data() + count_ * value_stride_) < 0) {
      continue;
    }
    ++count_;
  }
  return count_;
}

Result<MappedWords> MappedWords::map(int fd, std::size_t entries) {
  MappedWords m;
  if (entries == 0) {
    return m;
  }
  const auto page = static_cast<std::size_t>(::sysconf(_SC_PAGESIZE));
  const std::size_t bytes = (entries * sizeof(uint64_t) + page - 1) / page * page;
  void* p = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (p == MAP_FAILED) {
    return COLOD_ERR(errno, "mapping a BPF array of ", entries, " words");
  }
  m.words_ = static_cast<uint64_t*>(p);
  m.entries_ = entries;
  m.bytes_ = bytes;
  return m;
}

MappedWords::MappedWords(MappedWords&& o) noexcept
    : words_(std::exchange(o.words_, nullptr)),
      entries_(std::exchange(o.entries_, 0)),
      bytes_(std::exchange(o.bytes_, 0)) {}

MappedWords& MappedWords::operator=(MappedWords&& o) noexcept {
  if (this != &o) {
    reset();
    words_ = std::exchange(o.words_, nullptr);
    entries_ = std::exchange(o.entries_, 0);
    bytes_ = std::exchange(o.bytes_, 0);
  }
  return *this;
}

MappedWords::~MappedWords() { reset(); }

void MappedWords::reset() {
  if (words_ != nullptr) {
    ::munmap(words_, bytes_);
  }
  words_ = nullptr;
  entries_ = 0;
  bytes_ = 0;
}

void takeMarks(std::span<uint64_t> marks, std::vector<uint32_t>& out) {
  for (std::size_t i = 0; i < marks.size(); ++i) {
    // Clearing only a set mark: the BPF side never stores over one, so no store is lost.
    if (__atomic_load_n(&marks[i], __ATOMIC_RELAXED) != 0) {
      __atomic_store_n(&marks[i], 0, __ATOMIC_RELAXED);
      out.push_back(static_cast<uint32_t>(i));
    }
  }
  // The clears could otherwise still sit in this CPU's store buffer while the reads that follow
  // run (x86 lets loads pass earlier stores): a BPF write in between would find its mark still
  // set and not set it again, and the read would miss that write.
  __atomic_thread_fence(__ATOMIC_SEQ_CST);
}

void clearMarks(std::span<uint64_t> marks) {
  for (uint64_t& m : marks) {
    if (__atomic_load_n(&m, __ATOMIC_RELAXED) != 0) {
      __atomic_store_n(&m, 0, __ATOMIC_RELAXED);
    }
  }
  __atomic_thread_fence(__ATOMIC_SEQ_CST);
}

double walkCost(std::size_t walk_entries, std::size_t value_bytes, std::size_t walk_buckets) {
  return static_cast<double>(walk_entries) * static_cast<double>(kEntryCostBytes + value_bytes) +
         static_cast<double>(walk_buckets) * static_cast<double>(kBucketCostBytes);
}

void planRuns(std::span<const uint32_t> sorted,
              std::size_t value_bytes,
              std::vector<IndexRun>& out) {
  out.clear();
  // A gap is bridged while reading it through costs less than a call of its own.
  const std::size_t bridge = kLookupCostBytes / (kEntryCostBytes + value_bytes);
  for (const uint32_t i : sorted) {
    if (!out.empty()) {
      IndexRun& last = out.back();
      const uint64_t end = static_cast<uint64_t>(last.first) + last.count;
      if (i >= end && i - end <= bridge) {
        last.count = i - last.first + 1;
        continue;
      }
    }
    out.push_back(IndexRun{i, 1});
  }
}

double runsCost(std::span<const IndexRun> runs, std::size_t value_bytes) {
  double cost = 0;
  for (const IndexRun& r : runs) {
    // A run's first entry is a lookup's cost, the rest a walk's.
    cost +=
        static_cast<double>(kLookupCostBytes + value_bytes) + walkCost(r.count - 1, value_bytes);
  }
  return cost;
}

Result<void> readArrayRange(int fd,
                            IndexRun run,
                            std::size_t value_stride,
                            std::vector<uint32_t>& keys,
                            std::vector<uint8_t>& values,
                            bool& batch_ok) {
  if (values.size() < run.count * value_stride) {
    values.resize(run.count * value_stride);
  }
  auto oneByOne = [&]() -> Result<void> {
    for (uint32_t i = 0; i < run.count; ++i) {
      const uint32_t key = run.first + i;
      if (bpf_map_lookup_elem(fd, &key, values.data() + i * value_stride) != 0) {
        return COLOD_ERR(errno, "reading array entry ", key);
      }
    }
    return {};
  };
  if (run.count == 1 || !batch_ok) {
    return oneByOne();
  }
  if (keys.size() < run.count) {
    keys.resize(run.count);
  }
  // The batch starts after the key it is given (generic_map_lookup_batch): the index before
  // `first`, none for index 0.
  uint32_t before = run.first - 1;
  uint32_t cursor = 0;
  uint32_t n = run.count;
  DECLARE_LIBBPF_OPTS(bpf_map_batch_opts, opts);
  const int rc = bpf_map_lookup_batch(fd, run.first == 0 ? nullptr : &before, &cursor, keys.data(),
                                      values.data(), &n, &opts);
  const int err = rc < 0 ? -rc : 0;
  if (err == EINVAL || err == ENOTSUP || err == EOPNOTSUPP || err == ENOTTY) {
    batch_ok = false;
    return oneByOne();
  }
  if (rc < 0 && err != ENOENT) {
    return COLOD_ERR(err, "reading array entries ", run.first, "..", run.first + run.count - 1);
  }
  if (n != run.count) {
    return COLOD_ERR(ENOENT, "array entries ", run.first, "..", run.first + run.count - 1,
                     ": the kernel returned ", n);
  }
  for (uint32_t i = 0; i < n; ++i) {
    if (keys[i] != run.first + i) {
      return COLOD_ERR(EIO, "array batch read returned index ", keys[i], " for ", run.first + i);
    }
  }
  return {};
}

Result<uint64_t> parseFdinfoMemlock(std::string_view fdinfo) {
  // fdinfo of a map fd (kernel/bpf/syscall.c bpf_map_show_fdinfo): "key:\tvalue" lines, one of
  // them "memlock:\t<bytes>".
  constexpr std::string_view kKey = "memlock:";
  std::size_t pos = 0;
  while (pos < fdinfo.size()) {
    std::size_t end = fdinfo.find('\n', pos);
    if (end == std::string_view::npos) {
      end = fdinfo.size();
    }
    std::string_view line = fdinfo.substr(pos, end - pos);
    pos = end + 1;
    if (!line.starts_with(kKey)) {
      continue;
    }
    line.remove_prefix(kKey.size());
    while (!line.empty() && (line.front() == ' ' || line.front() == '\t')) {
      line.remove_prefix(1);
    }
    uint64_t v = 0;
    const auto [p, ec] = std::from_chars(line.data(), line.data() + line.size(), v);
    if (ec != std::errc() || p == line.data() || p != line.data() + line.size()) {
      return COLOD_ERR(EINVAL, "malformed memlock line in map fdinfo");
    }
    return v;
  }
  return COLOD_ERR(EINVAL, "no memlock line in map fdinfo");
}

Result<uint64_t> mapMemlockBytes(int fd) {
  const std::string path = "/proc/self/fdinfo/" + std::to_string(fd);
  UniqueFd f(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (!f) {
    return COLOD_ERR(errno, "opening ", path);
  }
  std::array<char, 4096> buf{};  // a map's fdinfo is a dozen short lines
  const ssize_t n = ::read(f.get(), buf.data(), buf.size());
  if (n < 0) {
    return COLOD_ERR(errno, "reading ", path);
  }
  auto r = parseFdinfoMemlock(std::string_view(buf.data(), static_cast<std::size_t>(n)));
  if (!r) {
    return std::move(r).error().wrap(path);
  }
  return *r;
}

Result<void> deleteKey(int fd, const void* key) {
  const int rc = bpf_map_delete_elem(fd, key);
  if (rc < 0 && -rc != ENOENT) {
    return COLOD_ERR(-rc, "deleting BPF map entry");
  }
  return {};
}

namespace {
std::mutex g_log_mu;
std::function<void(int, const std::string&)> g_log;
thread_local int t_optional_loads = 0;

int printFn(enum libbpf_print_level level, const char* fmt, va_list args) {
  std::lock_guard<std::mutex> lock(g_log_mu);
  if (!g_log) {
    return 0;
  }
  // libbpf hands a failed load's whole verifier log to one call ("-- BEGIN PROG LOAD LOG --\n
  // %s"), often many KiB, and the rejected instruction is at its end. Format it whole (libbpf
  // bounds its own log buffer) and pass on at most kMaxMsg bytes: the head (which program,
  // which call) and the tail (the verifier's verdict), with the cut said in the text.
  constexpr std::size_t kMaxMsg = 64 * 1024;
  constexpr std::size_t kHead = 8 * 1024;
  std::va_list measure;
  va_copy(measure, args);
  const int need = std::vsnprintf(nullptr, 0, fmt, measure);
  va_end(measure);
  if (need < 0) {
    return 0;
  }
  std::string msg(static_cast<std::size_t>(need) + 1, '\0');
  std::vsnprintf(msg.data(), msg.size(), fmt, args);
  msg.resize(static_cast<std::size_t>(need));
  if (msg.size() > kMaxMsg) {
    const std::size_t tail = kMaxMsg - kHead;
    const std::size_t cut = msg.size() - kHead - tail;
    msg = msg.substr(0, kHead) + "\n... [" + std::to_string(cut) + " bytes cut] ...\n" +
          msg.substr(msg.size() - tail);
  }
  while (!msg.empty() && msg.back() == '\n') {
    msg.pop_back();
  }
  const bool warn = level == LIBBPF_WARN && t_optional_loads == 0;
  g_log(warn ? 0 : level == LIBBPF_INFO ? 1 : 2, msg);
  return 0;
}
}  // namespace

OptionalLoad::OptionalLoad() { ++t_optional_loads; }
OptionalLoad::~OptionalLoad() { --t_optional_loads; }

void setLibbpfLog(std::function<void(int, const std::string&)> fn) {
  std::lock_guard<std::mutex> lock(g_log_mu);
  g_log = std::move(fn);
  libbpf_set_print(&printFn);
}

}  // namespace colod::collect::bpf
