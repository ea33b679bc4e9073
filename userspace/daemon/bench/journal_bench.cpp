// SPDX-License-Identifier: Apache-2.0
// The journal's write on colod's reaction path, between a decision and the update it sends
// (scripts/bench/journal.sh runs this beside a CPU load, as on a node where a BE just turned
// busy):
//   BM_ReplaceByRename  the write-ahead as it was until session 53: a new <path>.tmp, written,
//                       renamed over the journal (no fsync; ext4 starts the new file's
//                       writeback in rename when it replaces a file, auto_da_alloc);
//   BM_WriteAheadCopy   JournalAhead::write, a pwrite into the copy kept open, the journal
//                       encoded whole (as until session 54);
//   BM_WriteAheadKept   the same through a JournalEncoder, as colod writes it now: one
//                       container's overlay changes per iteration, the others' text is kept;
//   BM_DurableReplace   writeJournal, the journal's own replace with both fsyncs, which now
//                       follows the hand-over to the actuator (for scale: off the path).
// Each iteration writes a journal of `containers` entries with a restriction each.
#include <benchmark/benchmark.h>
#include <fcntl.h>
#include <stdlib.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <string>

#include "colod/daemon/journal.h"
#include "colod/daemon/journal_ahead.h"

namespace {

using colod::daemon::Journal;
using colod::daemon::JournalContainer;

Journal journalOf(int containers) {
  Journal j;
  for (int i = 0; i < containers; ++i) {
    JournalContainer c;
    c.state.id = std::string(64, static_cast<char>('a' + i % 26)) + std::to_string(i);
    c.state.name = "jobs/batch-" + std::to_string(i) + "/worker";
    c.state.base.cpuset_cpus = "0-1";
    c.state.base.cpu_quota = -1;
    c.state.overlay.cpuset_cpus = "1";
    c.state.overlay.cpu_quota = 25000;
    c.state.overlay.cpu_period = 100000;
    c.state.why = "rung 2 (cpuset) for prod/web/server";
    j.containers.push_back(std::move(c));
  }
  return j;
}

class Dir {
 public:
  Dir() {
    char tmpl[] = "/var/tmp/colod-journal-bench-XXXXXX";  // a disk, not a tmpfs
    if (::mkdtemp(tmpl) != nullptr) {
      path_ = tmpl;
    }
  }
  ~Dir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  [[nodiscard]] const std::string& path() const { return path_; }

 private:
  std::string path_;
};

void BM_ReplaceByRename(benchmark::State& state) {
  const Journal j = journalOf(static_cast<int>(state.range(0)));
  Dir dir;
  const std::string path = dir.path() + "/journal.json";
  const std::string tmp = path + ".tmp";
  for (auto _ : state) {
    const std::string data = colod::daemon::encodeJournal(j);
    const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (fd < 0 || ::write(fd, data.data(), data.size()) != static_cast<ssize_t>(data.size())) {
      state.SkipWithError("writing the journal's tmp file");
      break;
    }
    ::close(fd);
    if (::rename(tmp.c_str(), path.c_str()) != 0) {
      state.SkipWithError("rename");
      break;
    }
  }
}

void BM_WriteAheadCopy(benchmark::State& state) {
  const Journal j = journalOf(static_cast<int>(state.range(0)));
  Dir dir;
  auto ahead = colod::daemon::JournalAhead::open(dir.path() + "/journal.json");
  if (!ahead) {
    state.SkipWithError(ahead.error().message().c_str());
    return;
  }
  for (auto _ : state) {
    if (!ahead->write(j, 4096)) {
      state.SkipWithError("JournalAhead::write");
      break;
    }
  }
}

void BM_WriteAheadKept(benchmark::State& state) {
  Journal j = journalOf(static_cast<int>(state.range(0)));
  Dir dir;
  auto ahead = colod::daemon::JournalAhead::open(dir.path() + "/journal.json");
  if (!ahead) {
    state.SkipWithError(ahead.error().message().c_str());
    return;
  }
  colod::daemon::JournalEncoder encoder;
  (void)encoder.encode(j);  // the journal as it stood before this change
  std::size_t i = 0;
  for (auto _ : state) {
    auto& quota = j.containers[i++ % j.containers.size()].state.overlay.cpu_quota;
    quota = *quota == 25000 ? 20000 : 25000;
    if (!ahead->write(j, 4096, encoder)) {
      state.SkipWithError("JournalAhead::write");
      break;
    }
  }
}

void BM_DurableReplace(benchmark::State& state) {
  const Journal j = journalOf(static_cast<int>(state.range(0)));
  Dir dir;
  const std::string path = dir.path() + "/journal.json";
  for (auto _ : state) {
    if (!colod::daemon::writeJournal(path, j, 4096)) {
      state.SkipWithError("writeJournal");
      break;
    }
  }
}

// Wall time: what the reaction waits for, a CPU included. 10 containers restricted (a node's
// usual few) and 1000 (the bound's order).
BENCHMARK(BM_ReplaceByRename)->Arg(10)->Arg(1000)->UseRealTime()->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_WriteAheadCopy)->Arg(10)->Arg(1000)->UseRealTime()->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_WriteAheadKept)->Arg(10)->Arg(1000)->UseRealTime()->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_DurableReplace)->Arg(10)->UseRealTime()->Unit(benchmark::kMicrosecond);

}  // namespace

BENCHMARK_MAIN();
