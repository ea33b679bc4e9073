// SPDX-License-Identifier: Apache-2.0
#include "watch.h"

#include <bpf/bpf.h>

#include <cerrno>
#include <cstring>
#include <type_traits>

#include "cgsched.h"

static_assert(sizeof(colod_cg_watch) == 64);
static_assert(sizeof(colod_wakeup) == 32);
static_assert(std::is_trivially_copyable_v<colod_cg_watch>);
static_assert(std::is_trivially_copyable_v<colod_wakeup>);

namespace colod::collect::detail {

namespace {

int onEvent(void* ctx, void* data, size_t size) {
  if (size < sizeof(colod_wakeup)) {
    return 0;  // not ours (cannot happen: one record type); skipped, not fatal
  }
  colod_wakeup w{};
  std::memcpy(&w, data, sizeof w);
  static_cast<std::vector<WakeupEvent>*>(ctx)->push_back(WakeupEvent{
      .cgroup_id = w.id, .waited_ns = w.acc_ns, .window_start_ns = w.window_start, .at_ns = w.at});
  return 0;
}

}  // namespace

Result<Watch> Watch::create(const Maps& maps) {
  auto pending = std::make_unique<std::vector<WakeupEvent>>();
  errno = 0;
  ring_buffer* rb = ring_buffer__new(maps.wakeups, &onEvent, pending.get(), nullptr);
  const int saved = errno;
  if (rb == nullptr) {
    return COLOD_ERR(saved != 0 ? saved : EINVAL, "creating the wakeup ring buffer reader");
  }
  Watch w(maps, std::move(pending));
  w.rb_.reset(rb);
  return w;
}

int Watch::fd() const { return ring_buffer__epoll_fd(rb_.get()); }

Result<std::vector<WakeupEvent>> Watch::consume() {
  const int rc = ring_buffer__consume(rb_.get());
  if (rc < 0) {
    return COLOD_ERR(-rc, "reading the wakeup ring buffer");
  }
  std::vector<WakeupEvent> out;
  out.swap(*pending_);
  return out;
}

Result<void> Watch::set(const std::vector<WatchedCgroup>& cgroups) {
  std::map<uint64_t, uint64_t> wanted;
  for (const auto& c : cgroups) {
    if (c.id != 0 && c.threshold.count() > 0) {
      wanted[c.id] = static_cast<uint64_t>(c.threshold.count());
    }
  }
  if (wanted != wanted_) {
    wanted_ = std::move(wanted);
    settled_ = false;
  }
  return rebind();
}

Result<void> Watch::writeSlot(uint32_t slot, const Bound& b) {
  // The accumulator restarts with the write: a new binding starts a fresh window.
  colod_cg_watch v{};
  v.id = b.id;
  v.threshold_ns = b.threshold_ns;
  if (bpf_map_update_elem(maps_.cg_watch, &slot, &v, BPF_ANY) != 0) {
    return COLOD_ERR(errno, "writing cg_watch slot ", slot);
  }
  return {};
}

Result<void> Watch::rebind() {
  if (wanted_.empty() && bound_.empty()) {
    return {};
  }
  // Loaded before the lookups: a change they miss moves a counter past what is kept here.
  const uint64_t slots_gen =
      maps_.slots_gen != nullptr ? __atomic_load_n(maps_.slots_gen, __ATOMIC_ACQUIRE) : 0;
  const uint64_t attach_gen =
      maps_.attach_gen != nullptr ? __atomic_load_n(maps_.attach_gen, __ATOMIC_ACQUIRE) : 0;
  if (settled_ && maps_.slots_gen != nullptr && maps_.attach_gen != nullptr &&
      slots_gen == seen_slots_gen_ && attach_gen == seen_attach_gen_ &&
      ++calls_since_pass_ < kRebindEvery) {
    return {};
  }
  calls_since_pass_ = 0;
  std::map<uint32_t, Bound> next;
  for (const auto& [id, threshold] : wanted_) {
    uint32_t slot = 0;
    ++slot_lookups_;
    if (bpf_map_lookup_elem(maps_.cg_slots, &id, &slot) != 0 || slot == COLOD_NO_SLOT) {
      continue;  // no slot yet (its tasks have not run): bound once it has one (slots_gen)
    }
    next[slot] = Bound{id, threshold};
  }
  Result<void> result;
  for (auto it = bound_.begin(); it != bound_.end();) {
    if (next.contains(it->first)) {
      ++it;
      continue;
    }
    if (auto r = writeSlot(it->first, Bound{}); !r) {
      result = std::move(r);
      ++it;  // kept, retried at the next call
      continue;
    }
    it = bound_.erase(it);
  }
  for (const auto& [slot, b] : next) {
    auto cur = bound_.find(slot);
    if (cur != bound_.end() && cur->second.id == b.id &&
        cur->second.threshold_ns == b.threshold_ns) {
      continue;
    }
    if (auto r = writeSlot(slot, b); !r) {
      result = std::move(r);
      continue;
    }
    bound_[slot] = b;
  }
  __atomic_store_n(maps_.watched, static_cast<__u64>(bound_.size()), __ATOMIC_RELEASE);
  // A cgroup without a slot yet is bound by the pass after the BPF side gives it one (that
  // moves slots_gen); a refused write is retried at the next call.
  settled_ = result.has_value();
  seen_slots_gen_ = slots_gen;
  seen_attach_gen_ = attach_gen;
  return result;
}

}  // namespace colod::collect::detail
