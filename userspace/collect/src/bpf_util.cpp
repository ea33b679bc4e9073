// SPDX-License-Identifier: Apache-2.0
#include "bpf_util.h"

#include <cstdarg>
#include <cstdio>
#include <functional>
#include <mutex>
#include <string>

namespace colod::collect::bpf {

Result<MapDump> dumpMap(int fd, std::size_t key_size, std::size_t value_stride,
                        std::size_t max_entries) {
  MapDump d;
  d.keys.resize(key_size * max_entries);
  d.values.resize(value_stride * max_entries);
  // Batch pass: the kernel walks buckets; `in`/`out` are opaque cursors of key_size bytes.
  std::vector<uint8_t> in(key_size), out(key_size);
  bool first = true;
  bool batch_ok = true;
  while (d.count < max_entries) {
    auto n = static_cast<uint32_t>(max_entries - d.count);
    DECLARE_LIBBPF_OPTS(bpf_map_batch_opts, opts);
    const int rc = bpf_map_lookup_batch(fd, first ? nullptr : in.data(), out.data(),
                                        d.keys.data() + d.count * key_size,
                                        d.values.data() + d.count * value_stride, &n, &opts);
    const int err = rc < 0 ? -rc : 0;
    if (rc < 0 && err != ENOENT) {
      batch_ok = false;
      break;
    }
    d.count += n;
    if (err == ENOENT) {
      break;  // end of map
    }
    in = out;
    first = false;
  }
  if (batch_ok) {
    return d;
  }
  // Fallback: key iteration. Entries deleted concurrently are skipped.
  d.count = 0;
  std::vector<uint8_t> cur(key_size), next(key_size);
  const void* prev = nullptr;
  while (d.count < max_entries) {
    const int rc = bpf_map_get_next_key(fd, prev, next.data());
    if (rc < 0) {
      if (-rc == ENOENT) {
        break;
      }
      return COLOD_ERR(-rc, "iterating BPF map keys");
    }
    cur = next;
    prev = cur.data();
    uint8_t* v = d.values.data() + d.count * value_stride;
    if (bpf_map_lookup_elem(fd, cur.data(), v) < 0) {
      continue;
    }
    std::copy(cur.begin(), cur.end(), d.keys.begin() + static_cast<std::ptrdiff_t>(d.count * key_size));
    ++d.count;
  }
  return d;
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
  g_log(level == LIBBPF_WARN ? 0 : level == LIBBPF_INFO ? 1 : 2, msg);
  return 0;
}
}  // namespace

void setLibbpfLog(std::function<void(int, const std::string&)> fn) {
  std::lock_guard<std::mutex> lock(g_log_mu);
  g_log = std::move(fn);
  libbpf_set_print(&printFn);
}

}  // namespace colod::collect::bpf
