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

 private:
  static void destroy(T* s) { Destroy(s); }
  std::unique_ptr<T, void (*)(T*)> skel_{nullptr, &destroy};
};

// Opens a skeleton: open() returns NULL and sets errno on failure.
template <typename T, void (*Destroy)(T*)>
Result<Skeleton<T, Destroy>> openSkeleton(T* (*open)(),
                                          const char* name) {
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

// Reads every (key, per-CPU values) of a map into keys/values, preferring one
// BPF_MAP_LOOKUP_BATCH pass and falling back to get_next_key + lookup (kernels or map
// types without batch support). values holds value_stride bytes per entry (per-CPU maps:
// round_up(value_size, 8) * ncpus). Bounded by max_entries of the map.
struct MapDump {
  std::vector<uint8_t> keys;
  std::vector<uint8_t> values;
  std::size_t count = 0;
};
Result<MapDump> dumpMap(int fd, std::size_t key_size, std::size_t value_stride,
                        std::size_t max_entries);

// Deletes a key; ENOENT (already gone) is success.
Result<void> deleteKey(int fd, const void* key);

// Routes libbpf's print callback to fn (process-wide; libbpf has one global hook).
void setLibbpfLog(std::function<void(int, const std::string&)> fn);

}  // namespace colod::collect::bpf
