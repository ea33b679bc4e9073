// SPDX-License-Identifier: Apache-2.0
// Unit tests of the read side's pure and filesystem-only parts (issue 17): the fdinfo memlock
// parser from strings, and the control-file cache over a fake cgroup tree in a temp dir.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

#include "bpf_util.h"
#include "cgsched.h"
#include "colod/testing/result_matchers.h"
#include "file_cache.h"
#include "sched_sums.h"

namespace colod::collect {
namespace {

namespace fs = std::filesystem;
using detail::CgroupFile;
using detail::CgroupFileCache;

// Verbatim fdinfo of a map fd (6.18, cg_reclaim: PERCPU_HASH, 4096 entries, 2 possible CPUs).
constexpr const char* kFdinfo =
    "pos:\t0\nflags:\t02000002\nmnt_id:\t17\nino:\t1038\nmap_type:\t5\nkey_size:\t8\n"
    "value_size:\t128\nmax_entries:\t4096\nmap_flags:\t0x0\nmap_extra:\t0x0\n"
    "memlock:\t1377152\nmap_id:\t879\nfrozen:\t0\n";

// A hash map is walked again only when its generation moved, or after our own deletion.
TEST(MapGeneration, WalkOnlyWhenTheCounterMovedOrAfterAnInvalidate) {
  bpf::MapGeneration g;
  EXPECT_TRUE(g.due(0)) << "never walked";
  g.walked(0);
  EXPECT_FALSE(g.due(0));
  EXPECT_TRUE(g.due(1)) << "a BPF write since the walk";
  g.walked(1);
  EXPECT_FALSE(g.due(1));
  g.invalidate();
  EXPECT_TRUE(g.due(1)) << "a deletion by userspace";
  g.walked(1);
  EXPECT_FALSE(g.due(1));
  // A counter that wrapped or was reset still differs from what was walked.
  EXPECT_TRUE(g.due(0));
}

// The summing iterator's output: whole 152-byte records, id -> {slot, sum}.
TEST(ChangeMarks, TakesAndClearsOnlyTheSetMarks) {
  std::vector<uint64_t> marks{0, 1, 0, 0, 1, 1, 0};
  std::vector<uint32_t> out{99};
  bpf::takeMarks(marks, out);
  EXPECT_EQ(out, (std::vector<uint32_t>{99, 1, 4, 5})) << "appended, in slot order";
  EXPECT_EQ(marks, std::vector<uint64_t>(7, 0));
  out.clear();
  bpf::takeMarks(marks, out);
  EXPECT_TRUE(out.empty());
  marks[6] = 1;
  marks[0] = 1;
  bpf::takeMarks(std::span<uint64_t>(marks).first(3), out);
  EXPECT_EQ(out, std::vector<uint32_t>{0}) << "only within the span given";
  EXPECT_EQ(marks[6], 1u);
  bpf::clearMarks(marks);
  EXPECT_EQ(marks, std::vector<uint64_t>(7, 0));
}

TEST(ChangeMarks, RunsBridgeGapsCheaperThanACall) {
  std::vector<bpf::IndexRun> runs{{99, 9}};
  // 2 CPUs (736 B a slot): a gap of up to 3 unchanged slots is read through.
  const std::vector<uint32_t> slots{1, 2, 3, 7, 11, 12, 17, 30, 4000};
  bpf::planRuns(slots, 736, runs);
  EXPECT_EQ(runs, (std::vector<bpf::IndexRun>{{1, 12}, {17, 1}, {30, 1}, {4000, 1}}))
      << "cleared first; 3->7 and 7->11 leave gaps of 3 (bridged), 12->17 one of 4 (not)";
  // 192 CPUs (70 KB a slot): only adjacent slots share a call.
  bpf::planRuns(slots, 70656, runs);
  EXPECT_EQ(runs,
            (std::vector<bpf::IndexRun>{{1, 3}, {7, 1}, {11, 2}, {17, 1}, {30, 1}, {4000, 1}}));
  bpf::planRuns({}, 736, runs);
  EXPECT_TRUE(runs.empty());
  // One call of 3 costs less than 3 lookups, and a lookup each is what a run of 1 costs.
  const std::vector<bpf::IndexRun> one{{0, 3}};
  const std::vector<bpf::IndexRun> three{{0, 1}, {5, 1}, {9, 1}};
  EXPECT_LT(bpf::runsCost(one, 736), bpf::runsCost(three, 736));
  EXPECT_DOUBLE_EQ(bpf::runsCost(three, 736), 3.0 * (bpf::kLookupCostBytes + 736));
  // 270 changed slots of 1000 in runs, against one walk of all 1000.
  std::vector<uint32_t> spread;
  for (uint32_t i = 0; i < 1000; i += 4) {
    spread.push_back(i);
  }
  bpf::planRuns(spread, 736, runs);
  EXPECT_EQ(runs.size(), 1u) << "every 4th slot: the gaps of 3 are bridged";
  EXPECT_LT(bpf::runsCost(runs, 736), bpf::walkCost(1000, 736)) << "the same entries, one call";
}

TEST(SchedSums, ParsesWholeRecordsAndRefusesAPartialOne) {
  std::vector<uint8_t> bytes;
  for (uint32_t i = 0; i < 3; ++i) {
    colod_sched_sum r{};
    r.id = 1000 + i;
    r.slot = i * 7;
    r.sum.count = 10 * (i + 1);
    r.sum.hist[3] = 0xFFFFFFF0u + i;
    r.sum.oncpu_ns = 123456789ull * (i + 1);
    const auto* p = reinterpret_cast<const uint8_t*>(&r);
    bytes.insert(bytes.end(), p, p + sizeof(r));
  }
  detail::SchedMapPool pool;
  detail::SchedMap out{{42, {}}};
  EXPECT_EQ(ASSERT_OK(detail::parseSchedSums(bytes.data(), bytes.size(), out, pool)), 3u);
  ASSERT_EQ(out.size(), 3u) << "cleared first";
  EXPECT_EQ(pool.keptNodes(), 0u) << "the entry it held was recycled into one of the three";
  for (uint32_t i = 0; i < 3; ++i) {
    const auto& e = out.at(1000 + i);
    EXPECT_EQ(e.slot, i * 7);
    EXPECT_EQ(e.sum.count, 10u * (i + 1));
    EXPECT_EQ(e.sum.hist[3], 0xFFFFFFF0u + i);
    EXPECT_EQ(e.sum.oncpu_ns, 123456789ull * (i + 1));
  }
  EXPECT_EQ(ASSERT_OK(detail::parseSchedSums(bytes.data(), 0, out, pool)), 0u);
  EXPECT_TRUE(out.empty());
  EXPECT_EQ(pool.keptNodes(), 3u) << "its nodes kept for the next tick's entries";
  auto bad = detail::parseSchedSums(bytes.data(), bytes.size() - 1, out, pool);
  ASSERT_FALSE(bad);
  EXPECT_NE(bad.error().message().find("not a whole number"), std::string::npos)
      << bad.error().message();
}

TEST(FdinfoMemlock, ParsesTheMemlockLine) {
  EXPECT_EQ(ASSERT_OK(bpf::parseFdinfoMemlock(kFdinfo)), 1377152u);
  EXPECT_EQ(ASSERT_OK(bpf::parseFdinfoMemlock("memlock:\t0")), 0u);  // no trailing newline
  EXPECT_EQ(ASSERT_OK(bpf::parseFdinfoMemlock("memlock: 42\n")), 42u);
}

TEST(FdinfoMemlock, RejectsMissingOrMalformed) {
  EXPECT_ERR(bpf::parseFdinfoMemlock("pos:\t0\nflags:\t02\n"), EINVAL, "no memlock");
  EXPECT_ERR(bpf::parseFdinfoMemlock(""), EINVAL, "no memlock");
  EXPECT_ERR(bpf::parseFdinfoMemlock("memlock:\t\n"), EINVAL, "malformed");
  EXPECT_ERR(bpf::parseFdinfoMemlock("memlock:\t12kB\n"), EINVAL, "malformed");
  EXPECT_ERR(bpf::parseFdinfoMemlock("memlock:\t-5\n"), EINVAL, "malformed");
  EXPECT_ERR(bpf::parseFdinfoMemlock("memlock:\t99999999999999999999999\n"), EINVAL, "malformed");
}

// A fake tree: <tmp>/a, <tmp>/b, <tmp>/c, each with the three files.
class FileCacheTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string tmpl = (fs::temp_directory_path() / "colod-filecache-XXXXXX").string();
    ASSERT_NE(::mkdtemp(tmpl.data()), nullptr);
    root_ = tmpl;
    for (const char* d : {"a", "b", "c"}) {
      fs::create_directory(root_ / d);
      put(d, "cpu.stat", "nr_periods 1\nnr_throttled 0\nthrottled_time 0\n");
      put(d, "cpu.pressure", "some avg10=0.00 avg60=0.00 avg300=0.00 total=1\n");
      put(d, "memory.pressure", "some avg10=0.00 avg60=0.00 avg300=0.00 total=2\n");
    }
  }
  void TearDown() override { fs::remove_all(root_); }

  // Rewrites in place (same inode), as the kernel regenerates a control file's text.
  void put(const std::string& dir, const std::string& file, const std::string& text) {
    std::ofstream(root_ / dir / file, std::ios::trunc) << text;
  }
  std::string dir(const std::string& d) const { return (root_ / d).string(); }
  uint64_t inode(const std::string& d) const {
    struct stat st {};
    EXPECT_EQ(::stat(dir(d).c_str(), &st), 0);
    return st.st_ino;
  }

  fs::path root_;
};

TEST_F(FileCacheTest, RereadsTheOpenFileAndSeesNewText) {
  CgroupFileCache cache(16);
  cache.beginTick();
  EXPECT_EQ(ASSERT_OK(cache.read(1, CgroupFile::CpuPressure, dir("a"), false)),
            "some avg10=0.00 avg60=0.00 avg300=0.00 total=1\n");
  EXPECT_EQ(cache.opens(), 1u);
  put("a", "cpu.pressure", "some avg10=1.00 avg60=0.00 avg300=0.00 total=12345\n");
  cache.beginTick();
  EXPECT_EQ(ASSERT_OK(cache.read(1, CgroupFile::CpuPressure, dir("a"), false)),
            "some avg10=1.00 avg60=0.00 avg300=0.00 total=12345\n");
  EXPECT_EQ(cache.opens(), 1u) << "the second read must reuse the open fd";
  EXPECT_EQ(cache.openFiles(), 1u);
}

TEST_F(FileCacheTest, ReadsFilesLargerThanTheInitialBuffer) {
  const std::string big(10000, 'x');
  put("a", "cpu.stat", big);
  CgroupFileCache cache(16);
  EXPECT_EQ(ASSERT_OK(cache.read(1, CgroupFile::CpuStat, dir("a"), false)), big);
  EXPECT_EQ(ASSERT_OK(cache.read(1, CgroupFile::CpuStat, dir("a"), false)), big);
}

// One pread a file whose text fits the buffer: a short read is the end (regular files here,
// kernfs single-record files in read_side_privileged_test). A file that fills the buffer needs
// the reads that fill it and one that comes back short.
TEST_F(FileCacheTest, AShortReadIsTheEndOfTheFile) {
  CgroupFileCache cache(16);
  ASSERT_OK(cache.read(1, CgroupFile::CpuStat, dir("a"), false));
  EXPECT_EQ(cache.reads(), 1u) << "a file smaller than the buffer: one pread";
  ASSERT_OK(cache.read(1, CgroupFile::CpuStat, dir("a"), false));
  EXPECT_EQ(cache.reads(), 2u) << "and again from the cached fd";
  const std::string exact(4096, 'y');
  put("b", "cpu.stat", exact);
  EXPECT_EQ(ASSERT_OK(cache.read(2, CgroupFile::CpuStat, dir("b"), false)), exact);
  EXPECT_EQ(cache.reads(), 4u) << "exactly the buffer: one that fills it, one that finds nothing";
  const std::string big(10000, 'x');
  put("c", "cpu.stat", big);
  EXPECT_EQ(ASSERT_OK(cache.read(3, CgroupFile::CpuStat, dir("c"), false)), big);
  EXPECT_EQ(cache.reads(), 6u) << "8192 (the buffer grew at the last file) + 1808 of 8192";
  put("c", "cpu.stat", "short\n");
  EXPECT_EQ(ASSERT_OK(cache.read(3, CgroupFile::CpuStat, dir("c"), false)), "short\n");
  EXPECT_EQ(cache.reads(), 7u) << "the grown buffer is kept: one read";
}

TEST_F(FileCacheTest, RefusesAFileAbove64KiB) {
  put("a", "cpu.stat", std::string(70000, 'x'));
  CgroupFileCache cache(16);
  EXPECT_ERR(cache.read(1, CgroupFile::CpuStat, dir("a"), false), EFBIG, "larger than");
}

TEST_F(FileCacheTest, MissingFileOrDirIsEnoentAndNothingIsKept) {
  CgroupFileCache cache(16);
  fs::remove(root_ / "b" / "memory.pressure");
  EXPECT_ERR(cache.read(2, CgroupFile::MemoryPressure, dir("b"), false), ENOENT, "memory.pressure");
  EXPECT_ERR(cache.read(9, CgroupFile::CpuStat, dir("nope"), false), ENOENT, "nope");
  EXPECT_EQ(cache.openFiles(), 0u);
}

// A file missing from a cgroup that is there (PSI files on a psi=0 kernel, cpu.max without the
// cpu controller) costs one open per retry period, not one per read; it is looked for again
// after the period (it may appear: the cpu controller enabled later), and forgotten with its
// cgroup. A missing cgroup directory is not remembered (the cgroup is going away).
TEST_F(FileCacheTest, AMissingFileIsRememberedAndLookedForAgainAfterTheRetryTicks) {
  CgroupFileCache cache(16, 3);
  fs::remove(root_ / "b" / "memory.pressure");
  cache.beginTick();
  EXPECT_ERR(cache.read(2, CgroupFile::MemoryPressure, dir("b"), false), ENOENT, "memory.pressure");
  EXPECT_EQ(cache.opens(), 1u);
  EXPECT_EQ(cache.missingFiles(), 1u);
  for (int tick = 0; tick < 2; ++tick) {
    EXPECT_ERR(cache.read(2, CgroupFile::MemoryPressure, dir("b"), false), ENOENT, "missing");
    cache.beginTick();
  }
  EXPECT_EQ(cache.opens(), 1u) << "remembered: no open for the next reads";
  EXPECT_EQ(cache.missingHits(), 2u);
  // The same cgroup's other files are read as before.
  ASSERT_OK(cache.read(2, CgroupFile::CpuPressure, dir("b"), false));
  // It appears; three ticks after the miss it is looked for again and read.
  put("b", "memory.pressure", "some avg10=0.00 avg60=0.00 avg300=0.00 total=7\n");
  cache.beginTick();
  EXPECT_EQ(ASSERT_OK(cache.read(2, CgroupFile::MemoryPressure, dir("b"), false)),
            "some avg10=0.00 avg60=0.00 avg300=0.00 total=7\n");
  EXPECT_EQ(cache.missingFiles(), 0u);

  // Forgotten with its cgroup: erase and retainIf.
  fs::remove(root_ / "a" / "cpu.pressure");
  fs::remove(root_ / "c" / "cpu.pressure");
  EXPECT_ERR(cache.read(1, CgroupFile::CpuPressure, dir("a"), false), ENOENT, "cpu.pressure");
  EXPECT_ERR(cache.read(3, CgroupFile::CpuPressure, dir("c"), false), ENOENT, "cpu.pressure");
  EXPECT_EQ(cache.missingFiles(), 2u);
  cache.erase(1);
  cache.retainIf([](uint64_t id) { return id != 3; });
  EXPECT_EQ(cache.missingFiles(), 0u);
  // A missing directory is not remembered.
  EXPECT_ERR(cache.read(9, CgroupFile::CpuStat, dir("nope"), false), ENOENT, "nope");
  EXPECT_EQ(cache.missingFiles(), 0u);
}

TEST_F(FileCacheTest, ZeroBoundRemembersNoMiss) {
  CgroupFileCache cache(0);
  fs::remove(root_ / "a" / "cpu.pressure");
  EXPECT_ERR(cache.read(1, CgroupFile::CpuPressure, dir("a"), false), ENOENT, "cpu.pressure");
  EXPECT_ERR(cache.read(1, CgroupFile::CpuPressure, dir("a"), false), ENOENT, "cpu.pressure");
  EXPECT_EQ(cache.opens(), 2u);
}

TEST_F(FileCacheTest, VerifyIdRejectsADirectoryWithAnotherInode) {
  CgroupFileCache cache(16);
  EXPECT_ERR(cache.read(inode("a") + 1, CgroupFile::CpuStat, dir("a"), true), ENOENT, "gone");
  ASSERT_OK(cache.read(inode("a"), CgroupFile::CpuStat, dir("a"), true));
  EXPECT_EQ(cache.openFiles(), 1u);
}

TEST_F(FileCacheTest, BoundedAndACycleLargerThanTheBoundStillHits) {
  // 9 files, room for 4: each tick reads all 9 in the same order. Plain LRU would evict every
  // file just before it is needed again; this cache keeps 4 and reads the rest uncached.
  CgroupFileCache cache(4);
  const std::string dirs[] = {"a", "b", "c"};
  for (int tick = 0; tick < 5; ++tick) {
    cache.beginTick();
    for (uint64_t id = 0; id < 3; ++id) {
      for (const auto f :
           {CgroupFile::CpuStat, CgroupFile::CpuPressure, CgroupFile::MemoryPressure}) {
        ASSERT_OK(cache.read(id, f, dir(dirs[id]), false));
        EXPECT_LE(cache.openFiles(), 4u);
      }
    }
  }
  EXPECT_EQ(cache.openFiles(), 4u);
  // Tick 1 opened 9; each later tick reopens only the 5 that do not fit.
  EXPECT_EQ(cache.opens(), 9u + 4 * 5u);
}

TEST_F(FileCacheTest, StaleEntriesMakeRoomForNewFiles) {
  CgroupFileCache cache(2);
  cache.beginTick();
  ASSERT_OK(cache.read(1, CgroupFile::CpuStat, dir("a"), false));
  ASSERT_OK(cache.read(2, CgroupFile::CpuStat, dir("b"), false));
  cache.beginTick();  // a and b not read this tick: c replaces the older
  ASSERT_OK(cache.read(3, CgroupFile::CpuStat, dir("c"), false));
  const uint64_t opens = cache.opens();
  ASSERT_OK(cache.read(3, CgroupFile::CpuStat, dir("c"), false));
  ASSERT_OK(cache.read(2, CgroupFile::CpuStat, dir("b"), false));
  EXPECT_EQ(cache.opens(), opens) << "c and b should both be cached";
  EXPECT_EQ(cache.openFiles(), 2u);
}

TEST_F(FileCacheTest, EraseAndRetainCloseFiles) {
  CgroupFileCache cache(16);
  for (uint64_t id = 1; id <= 3; ++id) {
    for (const auto f :
         {CgroupFile::CpuStat, CgroupFile::CpuPressure, CgroupFile::MemoryPressure}) {
      ASSERT_OK(cache.read(id, f, dir(id == 1 ? "a" : id == 2 ? "b" : "c"), false));
    }
  }
  EXPECT_EQ(cache.openFiles(), 9u);
  cache.erase(2);
  EXPECT_EQ(cache.openFiles(), 6u);
  cache.erase(2);  // nothing left of it: harmless
  cache.retainIf([](uint64_t id) { return id == 3; });
  EXPECT_EQ(cache.openFiles(), 3u);
}

TEST_F(FileCacheTest, ZeroBoundCachesNothing) {
  CgroupFileCache cache(0);
  ASSERT_OK(cache.read(1, CgroupFile::CpuStat, dir("a"), false));
  ASSERT_OK(cache.read(1, CgroupFile::CpuStat, dir("a"), false));
  EXPECT_EQ(cache.openFiles(), 0u);
  EXPECT_EQ(cache.opens(), 2u);
}

}  // namespace
}  // namespace colod::collect
