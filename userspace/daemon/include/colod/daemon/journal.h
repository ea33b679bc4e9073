// SPDX-License-Identifier: Apache-2.0
// The on-disk journal: colod's overlays (its desired state), so a restart after a crash returns
// every container to the runtime's own values instead of leaving a BE throttled forever.
//
// One small JSON file (default /var/lib/colod/journal.json), rewritten atomically on every change
// (write <path>.tmp, fsync, rename over <path>, fsync the directory; on the reaction path the two
// fsyncs come right after the update is handed over, JournalSync): a reader sees the old or the
// new content, never a torn one. It is written *before* the reconciler may send anything
// that depends on it (write-ahead). Per container it holds the overlay (the fields colod wants),
// the base (the runtime's own values of those fields when last seen) and the engine's
// restrictions behind the overlay (for `reconcile: reseed`). Bounded: at most max_entries.
//
// Version 1 files (one entry per restriction with its stored original) are read and converted.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "colod/base/result.h"
#include "colod/base/unique_fd.h"
#include "colod/daemon/reconciler.h"
#include "colod/policy/decision.h"

namespace colod::daemon {

inline constexpr int kJournalVersion = 2;

struct JournalContainer {
  ReconcileEntry state;                        // id, name, base, overlay, why
  std::vector<policy::AppliedAction> actions;  // the engine's restrictions on it

  friend bool operator==(const JournalContainer&, const JournalContainer&) = default;
};

struct Journal {
  std::vector<JournalContainer> containers;
  friend bool operator==(const Journal&, const Journal&) = default;
};

// The journal of the actuator's entries, each with the engine's restrictions on it (for
// `reconcile: reseed`). Runtime-side fields (spec, pending, attempts) are not journaled. Pure.
Journal journalOf(const std::vector<ReconcileEntry>& entries,
                  const std::vector<policy::AppliedAction>& applied);

std::string encodeJournal(const Journal& journal);
// EINVAL "<what>" on bad JSON, a wrong version or a malformed entry. Never throws.
Result<Journal> decodeJournal(std::string_view text);

// When a written journal reaches the disk. The journal must outlive colod (killed, crashed,
// upgraded), and a written and renamed file does, in the page cache, before any fsync. Only a
// node crash loses what was not synced, and that takes every container (and every restriction
// on it) with it: the kubelet creates new ones after the reboot. So the write-ahead write before
// an update is sent need not wait for the disk (under a busy CPU the journalling thread took
// 10-50 ms to get it there, on the path of colod's reaction: docs/benchmarks.md); the daemon
// syncs right after handing the update to the actuator.
enum class JournalSync { Now, Later };

// Atomic replace (see file comment). Errors: the errno of open/write/fsync/rename; E2BIG when
// the journal has more than max_entries containers (nothing is written). With Later, neither
// the file nor its directory is synced (syncJournal does it).
Result<void> writeJournal(const std::string& path,
                          const Journal& journal,
                          uint32_t max_entries,
                          JournalSync sync = JournalSync::Now);
// fsync of the journal and of its directory (the rename). Errors: the errno of open/fsync.
Result<void> syncJournal(const std::string& path);
// A missing file is an empty journal. EINVAL when the content does not decode.
Result<Journal> readJournal(const std::string& path);

// An exclusive lock on a journal (flock on "<path>.lock", which holds the owner's pid): two
// colods on one journal would undo each other's restrictions. Released when destroyed (or when
// the process dies, however it dies).
class JournalLock {
 public:
  // EBUSY "journal <path> is in use by colod pid N" when another process holds it; the errno of
  // open/flock otherwise. Creates the journal's directory.
  static Result<JournalLock> acquire(const std::string& journal_path);
  [[nodiscard]] const std::string& path() const { return path_; }

 private:
  JournalLock(UniqueFd fd, std::string path) : fd_(std::move(fd)), path_(std::move(path)) {}
  UniqueFd fd_;
  std::string path_;
};

// The pid written in a lock file's text, 0 if none.
pid_t parseLockPid(std::string_view text);

}  // namespace colod::daemon
