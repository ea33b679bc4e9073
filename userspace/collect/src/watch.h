// SPDX-License-Identifier: Apache-2.0
// The wakeup watch of the collector (issue 15, event-driven detection): which cgroups' waits
// the switch handler accumulates (cg_watch, by slot), and the owner of the ring buffer it posts
// to. Private to colod::collect.
#pragma once

#include <bpf/libbpf.h>
#include <linux/types.h>

#include <cstdint>
#include <map>
#include <memory>
#include <vector>

#include "colod/base/result.h"
#include "colod/collect/collector.h"

namespace colod::collect::detail {

class Watch {
 public:
  // Maps of the loaded cgsched skeleton; `watched` is its .bss counter (the hot path's gate).
  struct Maps {
    int cg_slots = -1;
    int cg_watch = -1;
    int wakeups = -1;
    __u64* watched = nullptr;  // the skeleton's type (unsigned long long)
  };
  static Result<Watch> create(const Maps& maps);

  Watch(Watch&&) noexcept = default;
  Watch& operator=(Watch&&) noexcept = default;
  Watch(const Watch&) = delete;
  Watch& operator=(const Watch&) = delete;
  ~Watch() = default;

  Result<void> set(const std::vector<WatchedCgroup>& cgroups);
  // Binds the wanted cgroups to their current slots: those that got a slot since, those whose
  // slot changed (a re-created cgroup), and unbinds slots no longer wanted. Cheap when nothing
  // is wanted: the collector calls it at every snapshot.
  Result<void> rebind();
  [[nodiscard]] int fd() const;
  Result<std::vector<WakeupEvent>> consume();

 private:
  struct RingBufferFree {
    void operator()(ring_buffer* rb) const { ring_buffer__free(rb); }
  };
  struct Bound {
    uint64_t id = 0;
    uint64_t threshold_ns = 0;
  };
  Watch(Maps maps, std::unique_ptr<std::vector<WakeupEvent>> pending)
      : maps_(maps), pending_(std::move(pending)) {}
  Result<void> writeSlot(uint32_t slot, const Bound& b);

  Maps maps_;
  // The ring buffer's callback appends here: heap-held so that its address survives a move.
  std::unique_ptr<std::vector<WakeupEvent>> pending_;
  std::unique_ptr<ring_buffer, RingBufferFree> rb_;  // RAII ring buffer (style rule 17)
  std::map<uint64_t, uint64_t> wanted_;              // cgroup id -> threshold ns
  std::map<uint32_t, Bound> bound_;                  // slot -> what cg_watch holds there
};

}  // namespace colod::collect::detail
