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
    // The .bss counters that move with cg_slots: slots_gen at every id the BPF side inserts,
    // attach_gen at every removal (a deleted cgroup's, or the collector's prune) and move.
    __u64* slots_gen = nullptr;
    __u64* attach_gen = nullptr;
  };
  static Result<Watch> create(const Maps& maps);

  Watch(Watch&&) noexcept = default;
  Watch& operator=(Watch&&) noexcept = default;
  Watch(const Watch&) = delete;
  Watch& operator=(const Watch&) = delete;
  ~Watch() = default;

  Result<void> set(const std::vector<WatchedCgroup>& cgroups);
  // Binds the wanted cgroups to their current slots: those that got a slot since, those whose
  // slot changed (a re-created cgroup, a move), and unbinds slots no longer wanted. The
  // collector calls it at every snapshot: a pass looks up every wanted cgroup's slot (one call
  // each: 2/3 of 1000 containers protected cost a quarter of colod's CPU), so it is skipped
  // while neither the wanted set nor cg_slots (Maps::slots_gen, attach_gen) moved since a pass
  // whose writes all went through (a cgroup without a slot then gets one with a slots_gen
  // bump). Every kRebindEvery-th call passes anyway: a bound on any change the counters miss.
  Result<void> rebind();
  static constexpr uint32_t kRebindEvery = 100;
  // cg_slots lookups made by the passes (CollectorStats::watch_slot_lookups).
  [[nodiscard]] uint64_t slotLookups() const { return slot_lookups_; }
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
  // The last pass: its writes all went through, against these counters.
  bool settled_ = false;
  uint64_t seen_slots_gen_ = 0;
  uint64_t seen_attach_gen_ = 0;
  uint32_t calls_since_pass_ = 0;
  uint64_t slot_lookups_ = 0;
};

}  // namespace colod::collect::detail
