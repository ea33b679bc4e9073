// SPDX-License-Identifier: Apache-2.0
// The wakeup watch's binding (src/watch.h) over maps the test creates, with the .bss counters
// as plain memory the test moves: a pass looks every wanted cgroup's slot up, so it runs only
// when the wanted set or cg_slots changed (or at the periodic pass), and it follows a slot
// that changed.
#include <bpf/bpf.h>

#include <cstdint>

#include "cgsched.h"
#include "collector_test_fixture.h"
#include "watch.h"

namespace colod::collect {
namespace {

using namespace std::chrono_literals;

class WatchBindTest : public CollectorTest {
 protected:
  void SetUp() override {
    CollectorTest::SetUp();
    slots_ = UniqueFd(bpf_map_create(BPF_MAP_TYPE_HASH, "colod_test", sizeof(uint64_t),
                                     sizeof(uint32_t), 16, nullptr));
    watch_ = UniqueFd(bpf_map_create(BPF_MAP_TYPE_ARRAY, "colod_test", sizeof(uint32_t),
                                     sizeof(colod_cg_watch), 16, nullptr));
    rb_ = UniqueFd(bpf_map_create(BPF_MAP_TYPE_RINGBUF, "colod_test", 0, 0, 4096, nullptr));
    if (slots_.get() < 0 || watch_.get() < 0 || rb_.get() < 0) {
      GTEST_SKIP() << "cannot create BPF maps here (needs root and BPF): " << errno;
    }
  }
  void putSlot(uint64_t id, uint32_t slot) {
    ASSERT_EQ(bpf_map_update_elem(slots_.get(), &id, &slot, BPF_ANY), 0) << errno;
  }
  uint64_t boundAt(uint32_t slot) {
    colod_cg_watch v{};
    EXPECT_EQ(bpf_map_lookup_elem(watch_.get(), &slot, &v), 0) << errno;
    return v.id;
  }
  detail::Watch::Maps maps() {
    return {.cg_slots = slots_.get(),
            .cg_watch = watch_.get(),
            .wakeups = rb_.get(),
            .watched = &watched_,
            .slots_gen = &slots_gen_,
            .attach_gen = &attach_gen_};
  }

  UniqueFd slots_;
  UniqueFd watch_;
  UniqueFd rb_;
  __u64 watched_ = 0;
  __u64 slots_gen_ = 0;
  __u64 attach_gen_ = 0;
};

TEST_F(WatchBindTest, LooksSlotsUpOnlyWhenTheyOrTheWantedSetChanged) {
  auto w = ASSERT_OK(detail::Watch::create(maps()));
  // Wanted before it has a slot: looked up once, not bound, and not again while nothing moves.
  ASSERT_OK(w.set({{.id = 7, .threshold = 1ms}}));
  EXPECT_EQ(w.slotLookups(), 1u);
  EXPECT_EQ(watched_, 0u);
  for (int i = 0; i < 10; ++i) {
    ASSERT_OK(w.rebind());
  }
  EXPECT_EQ(w.slotLookups(), 1u) << "a pass while nothing moved";
  // The BPF side gives it a slot (and bumps slots_gen): bound at the next call, once.
  putSlot(7, 3);
  ++slots_gen_;
  ASSERT_OK(w.rebind());
  EXPECT_EQ(w.slotLookups(), 2u);
  EXPECT_EQ(boundAt(3), 7u);
  EXPECT_EQ(watched_, 1u);
  for (int i = 0; i < 10; ++i) {
    ASSERT_OK(w.rebind());
  }
  EXPECT_EQ(w.slotLookups(), 2u);
  // The same set again: nothing to do. Another threshold: a pass, the slot rewritten.
  ASSERT_OK(w.set({{.id = 7, .threshold = 1ms}}));
  EXPECT_EQ(w.slotLookups(), 2u);
  ASSERT_OK(w.set({{.id = 7, .threshold = 2ms}}));
  EXPECT_EQ(w.slotLookups(), 3u);
  // Moved to another slot (attach_gen): the old slot unbound, the new one bound.
  putSlot(7, 5);
  ++attach_gen_;
  ASSERT_OK(w.rebind());
  EXPECT_EQ(boundAt(5), 7u);
  EXPECT_EQ(boundAt(3), 0u);
  EXPECT_EQ(watched_, 1u);
}

// A slot change no counter announced is still followed, at the periodic pass.
TEST_F(WatchBindTest, APeriodicPassCatchesWhatTheCountersMissed) {
  auto w = ASSERT_OK(detail::Watch::create(maps()));
  putSlot(9, 2);
  ASSERT_OK(w.set({{.id = 9, .threshold = 1ms}}));
  ASSERT_EQ(boundAt(2), 9u);
  putSlot(9, 4);  // no counter moved
  for (uint32_t i = 0; i + 1 < detail::Watch::kRebindEvery; ++i) {
    ASSERT_OK(w.rebind());
  }
  EXPECT_EQ(boundAt(2), 9u) << "bound again before the periodic pass";
  ASSERT_OK(w.rebind());
  EXPECT_EQ(boundAt(4), 9u);
  EXPECT_EQ(boundAt(2), 0u);
  EXPECT_EQ(w.slotLookups(), 2u);
}

}  // namespace
}  // namespace colod::collect
