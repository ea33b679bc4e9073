// SPDX-License-Identifier: Apache-2.0
// Privileged tests of the map readers (issue 17) over BPF maps the tests create: MapReader's
// batch reads into buffers sized by the live entries, array ranges, the change marks' mapping,
// the kernel's summing iterator against userspace's sums. The collector's read side over real
// cgroups: read_side_privileged_test.cpp.
#include <bpf/bpf.h>

#include <cstring>
#include <map>
#include <optional>
#include <string>

#include "bpf_util.h"
#include "cgsched.h"
#include "collector_test_fixture.h"
#include "entry_delta.h"
#include "sched_sums.h"

namespace colod::collect {
namespace {

using namespace std::chrono_literals;

// A map created for the test, closed at scope exit.
UniqueFd createMap(bpf_map_type type, uint32_t key_size, uint32_t value_size, uint32_t max) {
  return UniqueFd(bpf_map_create(type, "colod_test", key_size, value_size, max, nullptr));
}

class MapReaderTest : public CollectorTest {
 protected:
  // The four maps the summing iterator reads (cg_sched's value per slot and possible CPU,
  // CPU-major as cgsched lays it out; the change marks mmappable), made for the test, and the
  // iterator over them.
  struct SumMaps {
    UniqueFd sched;
    UniqueFd slots;
    UniqueFd dirty;
    UniqueFd cpus;
    std::optional<detail::KernelSums> sums;
    uint32_t n_slots = 0;
    // Writes each CPU's copy of `slot` (copies[c] at index c x n_slots + slot).
    int put(uint32_t slot, const std::vector<colod_cg_sched>& copies) const {
      for (uint32_t c = 0; c < copies.size(); ++c) {
        const uint32_t key = c * n_slots + slot;
        if (const int rc = bpf_map_update_elem(sched.get(), &key, &copies[c], BPF_ANY); rc != 0) {
          return rc;
        }
      }
      return 0;
    }
  };
  // Why this machine cannot run a test of the iterator (""; then m.sums is set, or the test
  // has failed).
  std::string openSums(uint32_t slots, bool cpu_marks, SumMaps& m) {
    const auto ncpu = static_cast<uint32_t>(libbpf_num_possible_cpus());
    m.n_slots = slots;
    m.sched = createMap(BPF_MAP_TYPE_ARRAY, 4, sizeof(colod_cg_sched), slots * ncpu);
    if (!m.sched && (errno == EPERM || errno == EACCES)) {
      return "creating BPF maps not permitted";
    }
    LIBBPF_OPTS(bpf_map_create_opts, mmapable, .map_flags = BPF_F_MMAPABLE);
    m.slots = createMap(BPF_MAP_TYPE_HASH, 8, 4, slots);
    m.dirty = UniqueFd(bpf_map_create(BPF_MAP_TYPE_ARRAY, "colod_test", 4, 8, slots, &mmapable));
    m.cpus = createMap(BPF_MAP_TYPE_ARRAY, 4, sizeof(colod_cg_cpus), slots);
    EXPECT_TRUE(m.sched && m.slots && m.dirty && m.cpus) << std::strerror(errno);
    if (HasFailure()) {
      return "";
    }
    auto sums = detail::KernelSums::open({.cg_slots = m.slots.get(),
                                          .cg_sched = m.sched.get(),
                                          .cg_dirty = m.dirty.get(),
                                          .cg_cpus = m.cpus.get()},
                                         ncpu, slots, cpu_marks);
    if (!sums && sums.error().errnoValue() == EPERM) {
      // A 6.18 host once refused every BPF iterator program with EPERM, even a trivial one;
      // the collector then falls back to the userspace read. vm_collector runs these tests.
      return "this kernel refuses BPF iterators: " + sums.error().message();
    }
    EXPECT_TRUE(sums) << sums.error().message();
    if (sums) {
      m.sums.emplace(std::move(sums).value());
    }
    return "";
  }
};

#define OPEN_SUMS_OR_SKIP(m, slots, cpu_marks)                               \
  SumMaps m;                                                                 \
  if (const std::string why = openSums(slots, cpu_marks, m); !why.empty()) { \
    GTEST_SKIP() << why;                                                     \
  }                                                                          \
  ASSERT_TRUE(m.sums.has_value())

TEST_F(MapReaderTest, HashReadsLiveEntriesIntoBuffersSizedByThem) {
  constexpr uint32_t kMax = 16384;
  UniqueFd fd = createMap(BPF_MAP_TYPE_HASH, 8, 8, kMax);
  if (!fd && (errno == EPERM || errno == EACCES)) {
    GTEST_SKIP() << "creating BPF maps not permitted";
  }
  ASSERT_TRUE(fd) << std::strerror(errno);
  bpf::MapReader r(8, 8);
  EXPECT_EQ(ASSERT_OK(r.read(fd.get(), kMax)), 0u);
  for (uint64_t k = 1; k <= 300; ++k) {
    const uint64_t v = k * 10;
    ASSERT_EQ(bpf_map_update_elem(fd.get(), &k, &v, BPF_ANY), 0);
  }
  ASSERT_EQ(ASSERT_OK(r.read(fd.get(), kMax)), 300u);
  std::set<uint64_t> seen;
  for (std::size_t i = 0; i < r.count(); ++i) {
    uint64_t k = 0;
    uint64_t v = 0;
    std::memcpy(&k, r.key(i), 8);
    std::memcpy(&v, r.value(i), 8);
    EXPECT_EQ(v, k * 10);
    seen.insert(k);
  }
  EXPECT_EQ(seen.size(), 300u);
  EXPECT_EQ(r.lastReadBytes(), 300u * 16);
  // Grown by doubling from 64: 512 entries, nowhere near max_entries.
  EXPECT_GE(r.capacity(), 300u);
  EXPECT_LE(r.capacity(), 600u);
  const std::size_t grown = r.capacity();
  // A steady state reads into the same buffers.
  for (int i = 0; i < 5; ++i) {
    ASSERT_EQ(ASSERT_OK(r.read(fd.get(), kMax)), 300u);
  }
  EXPECT_EQ(r.capacity(), grown);
  // Most entries gone: the buffers shrink after kShrinkAfter reads, not before.
  for (uint64_t k = 11; k <= 300; ++k) {
    ASSERT_EQ(bpf_map_delete_elem(fd.get(), &k), 0);
  }
  for (uint32_t i = 0; i + 1 < bpf::MapReader::kShrinkAfter; ++i) {
    ASSERT_EQ(ASSERT_OK(r.read(fd.get(), kMax)), 10u);
  }
  EXPECT_EQ(r.capacity(), grown);
  ASSERT_EQ(ASSERT_OK(r.read(fd.get(), kMax)), 10u);
  EXPECT_EQ(r.capacity(), bpf::MapReader::kMinCapacity);
}

// drain() for the behind map: each drain returns what was added since the one before and leaves
// the map empty; a capped drain leaves the rest for the next.
TEST_F(MapReaderTest, DrainReturnsWhatWasAddedSinceTheLastDrain) {
  constexpr uint32_t kMax = 4096;
  UniqueFd fd = createMap(BPF_MAP_TYPE_HASH, 16, 16, kMax);
  if (!fd && (errno == EPERM || errno == EACCES)) {
    GTEST_SKIP() << "creating BPF maps not permitted";
  }
  ASSERT_TRUE(fd) << std::strerror(errno);
  auto put = [&](uint64_t victim, uint64_t aggressor, uint64_t waits) {
    const colod_pair_key k{.victim = victim, .aggressor = aggressor};
    const colod_behind v{.waits = waits, .wait_ns = waits * 1000};
    return bpf_map_update_elem(fd.get(), &k, &v, BPF_ANY);
  };
  auto drained = [](const bpf::MapReader& r) {
    std::map<std::pair<uint64_t, uint64_t>, uint64_t> out;
    for (std::size_t i = 0; i < r.count(); ++i) {
      colod_pair_key k{};
      colod_behind v{};
      std::memcpy(&k, r.key(i), sizeof(k));
      std::memcpy(&v, r.value(i), sizeof(v));
      EXPECT_EQ(v.wait_ns, v.waits * 1000);
      out[{k.victim, k.aggressor}] = v.waits;
    }
    return out;
  };
  bpf::MapReader r(sizeof(colod_pair_key), sizeof(colod_behind));
  EXPECT_EQ(ASSERT_OK(r.drain(fd.get(), kMax)), 0u);
  for (uint64_t v = 1; v <= 30; ++v) {
    for (uint64_t a = 100; a < 110; ++a) {
      ASSERT_EQ(put(v, a, v + a), 0);
    }
  }
  ASSERT_EQ(ASSERT_OK(r.drain(fd.get(), kMax)), 300u);
  auto first = drained(r);
  ASSERT_EQ(first.size(), 300u);
  EXPECT_EQ((first[{7, 103}]), 110u);
  EXPECT_EQ(r.lastReadBytes(), 300u * 32);
  bpf::MapReader reader(sizeof(colod_pair_key), sizeof(colod_behind));
  EXPECT_EQ(ASSERT_OK(reader.read(fd.get(), kMax)), 0u) << "the drain deleted what it returned";
  // Two pairs wait again (re-created from zero, as the BPF side does) and one is new.
  ASSERT_EQ(put(7, 103, 2), 0);
  ASSERT_EQ(put(1, 100, 1), 0);
  ASSERT_EQ(put(31, 100, 4), 0);
  EXPECT_EQ(ASSERT_OK(r.drain(fd.get(), kMax)), 3u);
  EXPECT_EQ(drained(r), (std::map<std::pair<uint64_t, uint64_t>, uint64_t>{
                            {{7, 103}, 2}, {{1, 100}, 1}, {{31, 100}, 4}}));
  EXPECT_EQ(ASSERT_OK(r.drain(fd.get(), kMax)), 0u);
  // At most max_entries a drain: the rest stays for the next one, none lost or seen twice.
  for (uint64_t v = 1; v <= 200; ++v) {
    ASSERT_EQ(put(v, 1, 1), 0);
  }
  std::set<uint64_t> seen;
  std::size_t drains = 0;
  while (seen.size() < 200 && drains < 100) {
    const std::size_t n = ASSERT_OK(r.drain(fd.get(), 64));
    EXPECT_LE(n, 64u);
    for (const auto& [key, waits] : drained(r)) {
      EXPECT_TRUE(seen.insert(key.first).second) << "victim " << key.first << " drained twice";
    }
    ++drains;
  }
  EXPECT_EQ(seen.size(), 200u);
  EXPECT_GE(drains, 4u);
  EXPECT_EQ(ASSERT_OK(r.drain(fd.get(), kMax)), 0u);
  EXPECT_EQ(r.lastDeleteErrors(), 0u);
  // Entries that cannot be deleted (an array's: no batch delete either, so the key walk) are
  // left out of the drain and counted, not returned to be read again whole next time.
  UniqueFd arr = createMap(BPF_MAP_TYPE_ARRAY, 4, 8, 16);
  ASSERT_TRUE(arr) << std::strerror(errno);
  bpf::MapReader a(4, 8);
  EXPECT_EQ(ASSERT_OK(a.drain(arr.get(), 16)), 0u);
  EXPECT_EQ(a.lastDeleteErrors(), 16u);
}

TEST_F(MapReaderTest, PerCpuHashValuesForEveryPossibleCpu) {
  const int ncpu = libbpf_num_possible_cpus();
  ASSERT_GT(ncpu, 0);
  UniqueFd fd = createMap(BPF_MAP_TYPE_PERCPU_HASH, 8, 16, 4096);
  if (!fd && (errno == EPERM || errno == EACCES)) {
    GTEST_SKIP() << "creating BPF maps not permitted";
  }
  ASSERT_TRUE(fd) << std::strerror(errno);
  const auto cpus = static_cast<std::size_t>(ncpu);
  std::vector<uint64_t> v(cpus * 2);
  for (uint64_t k = 1; k <= 100; ++k) {
    for (std::size_t c = 0; c < cpus; ++c) {
      v[c * 2] = k;
      v[c * 2 + 1] = c;
    }
    ASSERT_EQ(bpf_map_update_elem(fd.get(), &k, v.data(), BPF_ANY), 0);
  }
  bpf::MapReader r(8, 16 * cpus);
  ASSERT_EQ(ASSERT_OK(r.read(fd.get(), 4096)), 100u);
  for (std::size_t i = 0; i < r.count(); ++i) {
    uint64_t k = 0;
    std::memcpy(&k, r.key(i), 8);
    for (std::size_t c = 0; c < cpus; ++c) {
      uint64_t a = 0;
      uint64_t b = 0;
      std::memcpy(&a, r.value(i) + c * 16, 8);
      std::memcpy(&b, r.value(i) + c * 16 + 8, 8);
      ASSERT_EQ(a, k);
      ASSERT_EQ(b, c);
    }
  }
  EXPECT_EQ(r.lastReadBytes(), 100u * (8 + 16 * cpus));
  EXPECT_LE(r.bufferBytes(), 128u * (8 + 16 * cpus));
}

// The kernel's sums (schedsum iterator) equal userspace's sums of every possible CPU's copy,
// field by field, histogram buckets modulo 2^32 included; one record per live cgroup.
TEST_F(MapReaderTest, KernelSumsEqualTheSumOfEveryCpuCopy) {
  const int ncpu = libbpf_num_possible_cpus();
  ASSERT_GT(ncpu, 0);
  const auto cpus = static_cast<std::size_t>(ncpu);
  constexpr uint32_t kSlots = 64;
  OPEN_SUMS_OR_SKIP(m, kSlots, /*cpu_marks=*/false);
  auto& sums = m.sums;
  UniqueFd& slots = m.slots;
  auto marks = ASSERT_OK(bpf::MappedWords::map(m.dirty.get(), kSlots));
  // 20 live cgroups on scattered slots; each CPU's copy differs.
  std::vector<colod_cg_sched> copies(cpus);
  std::vector<uint8_t> raw(cpus * sizeof(colod_cg_sched));
  std::unordered_map<uint64_t, colod_cg_sched> want;
  for (uint32_t i = 0; i < 20; ++i) {
    const uint32_t slot = (i * 13) % kSlots;
    const uint64_t id = 5000 + i;
    for (std::size_t c = 0; c < cpus; ++c) {
      colod_cg_sched& v = copies[c];
      v = {};
      v.count = i * 100 + c;
      v.total_ns = (i + 1) * 1'000'000'007ull + c;
      v.oncpu_ns = (c + 1) * 3'000'000'000ull;
      v.invol = c;
      v.self_preempt = i;
      for (uint32_t b = 0; b < COLOD_SCHED_HIST_SLOTS; ++b) {
        v.hist[b] = b == 5 ? 0xFFFFFFF0u + static_cast<uint32_t>(c) : b * (i + 1);
      }
      v.preempt_wait_ns = c * 7;
      v.preempt_waits = c * 3;
      std::memcpy(raw.data() + c * sizeof(colod_cg_sched), &v, sizeof(v));
    }
    ASSERT_EQ(m.put(slot, copies), 0);
    ASSERT_EQ(bpf_map_update_elem(slots.get(), &id, &slot, BPF_ANY), 0);
    want[id] = detail::sumSchedPerCpu(raw.data(), ncpu, sizeof(colod_cg_sched));
  }
  detail::SchedMapPool pool;
  detail::SchedMap got;
  ASSERT_EQ(ASSERT_OK(sums->read(got, pool)), 20u);
  EXPECT_EQ(sums->lastReadBytes(), 20u * sizeof(colod_sched_sum)) << "not x possible CPUs";
  EXPECT_EQ(sums->lastCpuCopies(), 20u * cpus) << "without CPU marks, every possible CPU's";
  for (const auto& [id, w] : want) {
    ASSERT_TRUE(got.contains(id)) << id;
    const colod_cg_sched& g = got.at(id).sum;
    EXPECT_EQ(got.at(id).slot, ((id - 5000) * 13) % kSlots);
    EXPECT_EQ(std::memcmp(&g, &w, sizeof(g)), 0)
        << "id " << id << ": count " << g.count << " vs " << w.count << ", hist[5] " << g.hist[5]
        << " vs " << w.hist[5];
  }
  // A cgroup gone from cg_slots is gone from the next read.
  const uint64_t gone = 5003;
  ASSERT_EQ(bpf_map_delete_elem(slots.get(), &gone), 0);
  ASSERT_EQ(ASSERT_OK(sums->read(got, pool)), 19u);
  EXPECT_FALSE(got.contains(gone));
  EXPECT_EQ(pool.keptNodes(), 1u) << "the first read's nodes hold the second's entries";

  // Only the slots marked changed (slot 13k holds id 5000 + k), and their marks cleared; a
  // full read clears every live slot's mark.
  for (const uint32_t slot : {uint32_t{13}, uint32_t{26}, uint32_t{52}}) {
    marks.words()[slot] = 1;
  }
  ASSERT_EQ(ASSERT_OK(sums->read(got, pool, /*all=*/false)), 3u);
  EXPECT_EQ(sums->lastReadBytes(), 3u * sizeof(colod_sched_sum));
  for (const uint64_t id : {uint64_t{5001}, uint64_t{5002}, uint64_t{5004}}) {
    ASSERT_TRUE(got.contains(id)) << id;
    EXPECT_EQ(std::memcmp(&got.at(id).sum, &want.at(id), sizeof(colod_cg_sched)), 0) << id;
  }
  for (uint32_t slot = 0; slot < kSlots; ++slot) {
    EXPECT_EQ(marks.words()[slot], 0u) << "slot " << slot << " still marked";
  }
  EXPECT_EQ(ASSERT_OK(sums->read(got, pool, /*all=*/false)), 0u) << "nothing changed since";
  marks.words()[65 % kSlots] = 1;  // id 5005
  ASSERT_EQ(ASSERT_OK(sums->read(got, pool, /*all=*/true)), 19u);
  EXPECT_EQ(marks.words()[65 % kSlots], 0u);
}

// With CPU marks (cg_cpus, set by cgsched where it writes a slot), the kernel adds only the
// marked CPUs' copies of a slot: a copy on an unmarked CPU is left out (cgsched never wrote it;
// here it holds a value to show that it is not read), a slot with no mark reads as zero.
TEST_F(MapReaderTest, KernelSumsAddOnlyTheCpusMarkedForASlot) {
  const int ncpu = libbpf_num_possible_cpus();
  ASSERT_GT(ncpu, 0);
  const auto cpus = static_cast<std::size_t>(ncpu);
  constexpr uint32_t kSlots = 16;
  OPEN_SUMS_OR_SKIP(m, kSlots, /*cpu_marks=*/true);
  auto& sums = m.sums;
  // Every CPU's copy of slots 1..3 holds (cpu + 1) in count and 10 in oncpu_ns.
  std::vector<colod_cg_sched> copies(cpus);
  for (std::size_t c = 0; c < cpus; ++c) {
    copies[c].count = c + 1;
    copies[c].oncpu_ns = 10;
  }
  // Slot 1: the last CPU marked; slot 2: every CPU; slot 3: none.
  const auto last = static_cast<uint32_t>(cpus - 1);
  colod_cg_cpus only_last{};
  only_last.w[last / 64] = uint64_t{1} << (last % 64);
  colod_cg_cpus every{};
  for (uint32_t c = 0; c < cpus; ++c) {
    every.w[c / 64] |= uint64_t{1} << (c % 64);
  }
  const std::pair<uint32_t, const colod_cg_cpus*> marked[] = {{1, &only_last}, {2, &every}};
  for (uint32_t slot = 1; slot <= 3; ++slot) {
    const uint64_t id = 700 + slot;
    ASSERT_EQ(m.put(slot, copies), 0);
    ASSERT_EQ(bpf_map_update_elem(m.slots.get(), &id, &slot, BPF_ANY), 0);
  }
  for (const auto& [slot, bits] : marked) {
    ASSERT_EQ(bpf_map_update_elem(m.cpus.get(), &slot, bits, BPF_ANY), 0);
  }
  detail::SchedMapPool pool;
  detail::SchedMap got;
  ASSERT_EQ(ASSERT_OK(sums->read(got, pool)), 3u);
  EXPECT_EQ(got.at(701).sum.count, cpus);
  EXPECT_EQ(got.at(701).sum.oncpu_ns, 10u);
  EXPECT_EQ(got.at(702).sum.count, cpus * (cpus + 1) / 2);
  EXPECT_EQ(got.at(702).sum.oncpu_ns, 10u * cpus);
  EXPECT_EQ(got.at(703).sum.count, 0u);
  EXPECT_EQ(sums->lastCpuCopies(), 1 + cpus);
}

TEST_F(MapReaderTest, ArrayReadStopsAtTheGivenBound) {
  UniqueFd fd = createMap(BPF_MAP_TYPE_ARRAY, 4, 8, 4096);
  if (!fd && (errno == EPERM || errno == EACCES)) {
    GTEST_SKIP() << "creating BPF maps not permitted";
  }
  ASSERT_TRUE(fd) << std::strerror(errno);
  bpf::MapReader r(4, 8);
  ASSERT_EQ(ASSERT_OK(r.read(fd.get(), 200)), 200u);
  uint32_t last = 0;
  std::memcpy(&last, r.key(199), 4);
  EXPECT_EQ(last, 199u);
  EXPECT_LE(r.capacity(), 256u);
}

// A range of a per-CPU array in one batch call from any index (the kernel starts after the key
// it is given), a single index by one lookup, the same values by lookups where batches are
// off, and an error past the end.
TEST_F(MapReaderTest, ArrayRangesReadEveryCpuCopyFromAnyIndex) {
  const int ncpu = libbpf_num_possible_cpus();
  ASSERT_GT(ncpu, 0);
  UniqueFd fd = createMap(BPF_MAP_TYPE_PERCPU_ARRAY, 4, 16, 64);
  if (!fd && (errno == EPERM || errno == EACCES)) {
    GTEST_SKIP() << "creating BPF maps not permitted";
  }
  ASSERT_TRUE(fd) << std::strerror(errno);
  const auto cpus = static_cast<std::size_t>(ncpu);
  std::vector<uint64_t> v(cpus * 2);
  for (uint32_t k = 0; k < 64; ++k) {
    for (std::size_t c = 0; c < cpus; ++c) {
      v[c * 2] = 1000 + k;
      v[c * 2 + 1] = c;
    }
    ASSERT_EQ(bpf_map_update_elem(fd.get(), &k, v.data(), BPF_ANY), 0);
  }
  const std::size_t stride = 16 * cpus;
  std::vector<uint32_t> keys;
  std::vector<uint8_t> values;
  auto check = [&](bpf::IndexRun run, bool batch) {
    bool ok = batch;
    ASSERT_OK(bpf::readArrayRange(fd.get(), run, stride, keys, values, ok));
    EXPECT_EQ(ok, batch) << "this kernel reads array ranges in one call";
    for (uint32_t i = 0; i < run.count; ++i) {
      for (std::size_t c = 0; c < cpus; ++c) {
        uint64_t a = 0;
        uint64_t b = 0;
        std::memcpy(&a, values.data() + i * stride + c * 16, 8);
        std::memcpy(&b, values.data() + i * stride + c * 16 + 8, 8);
        ASSERT_EQ(a, 1000 + run.first + i) << "run at " << run.first;
        ASSERT_EQ(b, c);
      }
    }
  };
  check({0, 5}, true);
  check({7, 3}, true);
  check({63, 1}, true);
  check({40, 24}, true);
  check({7, 3}, false);
  bool ok = true;
  EXPECT_ERR(bpf::readArrayRange(fd.get(), {60, 8}, stride, keys, values, ok), ENOENT, "60..67");
  EXPECT_ERR(bpf::readArrayRange(fd.get(), {64, 1}, stride, keys, values, ok), ENOENT, "64");
}

TEST_F(MapReaderTest, LegacyModeAllocatesMaxEntries) {
  UniqueFd fd = createMap(BPF_MAP_TYPE_HASH, 8, 8, 4096);
  if (!fd && (errno == EPERM || errno == EACCES)) {
    GTEST_SKIP() << "creating BPF maps not permitted";
  }
  ASSERT_TRUE(fd) << std::strerror(errno);
  const uint64_t k = 7;
  ASSERT_EQ(bpf_map_update_elem(fd.get(), &k, &k, BPF_ANY), 0);
  bpf::MapReader r(8, 8, /*legacy=*/true);
  ASSERT_EQ(ASSERT_OK(r.read(fd.get(), 4096)), 1u);
  EXPECT_EQ(r.bufferBytes(), 4096u * 16);
}

}  // namespace
}  // namespace colod::collect
