// SPDX-License-Identifier: Apache-2.0
// The on-disk journal: colod's overlays (its desired state), so a restart after a crash returns
// every container to the runtime's own values instead of leaving a BE throttled forever.
//
// One small JSON file (default /var/lib/colod/journal.json), rewritten atomically on every change
// (write <path>.tmp, fsync, rename over <path>, fsync the directory): a reader sees the old or the
// new content, never a torn one. What the reconciler may send is written before it may send it
// (write-ahead): on the reaction path into the write-ahead copy <path>.next (journal_ahead.h),
// and the journal takes the same content right after. Per container it holds the overlay (the
// fields colod wants), the base (the runtime's own values of those fields when last seen) and the
// engine's restrictions behind the overlay (for `reconcile: reseed`). Bounded: at most max_entries.
//
// Version 1 files (one entry per restriction with its stored original) are read and converted.
#pragma once

#include <sys/types.h>

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>
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

// One line per container between the document's head and tail, so that a journal's text can be
// put together from texts kept per container (JournalEncoder).
std::string encodeJournal(const Journal& journal);
// EINVAL "<what>" on bad JSON, a wrong version or a malformed entry. Never throws.
Result<Journal> decodeJournal(std::string_view text);

// encodeJournal, keeping each container's text between calls: a call encodes again only the
// containers whose entry changed since the call before. colod writes its whole journal on every
// change (twice: the write-ahead copy, then the journal), and at 1000 restricted containers the
// encoding alone took 13-15 ms of CPU before an update could be sent, nearly all of it for
// entries that had not changed (docs/benchmarks.md, session 54). Holds the last journal's
// containers (bounded by the journal's bound); one owner, not thread-safe.
class JournalEncoder {
 public:
  // encodeJournal(journal), byte for byte. Valid until the next call.
  const std::string& encode(const Journal& journal);
  // How many containers the last call encoded (the others' text was kept).
  [[nodiscard]] std::size_t encodedLast() const { return encoded_last_; }

 private:
  struct Kept {
    JournalContainer container;
    std::string text;
    uint64_t generation = 0;  // the last call that listed it
  };
  std::unordered_map<std::string, Kept> kept_;  // by container id
  std::string text_;
  uint64_t generation_ = 0;
  std::size_t encoded_last_ = 0;
};

// Atomic and durable replace (see file comment). Errors: the errno of open/write/fsync/rename;
// E2BIG when the journal has more than max_entries containers (nothing is written). With an
// encoder, its text (see JournalEncoder).
Result<void> writeJournal(const std::string& path, const Journal& journal, uint32_t max_entries);
Result<void> writeJournal(const std::string& path,
                          const Journal& journal,
                          uint32_t max_entries,
                          JournalEncoder& encoder);
// E2BIG "journal has N containers, bound is M" past the bound.
Result<void> checkJournalBound(const Journal& journal, uint32_t max_entries);
// Opens a file of the journal's set (its lock, its write-ahead copy) read-write, creating it
// (0600) and its directory. Errors: the errno of mkdir/open, naming `what` and the path.
Result<UniqueFd> openJournalFile(const std::string& path, std::string_view what);
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
