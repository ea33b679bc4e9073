// SPDX-License-Identifier: Apache-2.0
// The on-disk journal: what colod changed, so a restart after a crash reconciles instead of
// leaving BE containers throttled forever.
//
// One small JSON file (default /var/lib/colod/journal.json), rewritten atomically on every change
// (write <path>.tmp, fsync, rename over <path>, fsync the directory): a reader sees the old or
// the new content, never a torn one. It is written *before* an update is sent (write-ahead), so
// the original values are on disk before anything is changed. Bounded: at most max_entries.
#pragma once

#include <cstdint>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "colod/base/result.h"
#include "colod/daemon/config.h"
#include "colod/policy/decision.h"

namespace colod::daemon {

inline constexpr int kJournalVersion = 1;

struct JournalEntry {
  policy::AppliedAction action;  // target, victim, lever, rung, applied and original values
  std::string target_name;       // namespace/pod/container, for people reading the file
  bool restore_pending = false;  // a restore was decided but not yet confirmed by the runtime

  friend bool operator==(const JournalEntry&, const JournalEntry&) = default;
};

struct Journal {
  std::vector<JournalEntry> entries;
  friend bool operator==(const Journal&, const Journal&) = default;
};

std::string encodeJournal(const Journal& journal);
// EINVAL "<what>" on bad JSON, a wrong version or a malformed entry.
Result<Journal> decodeJournal(std::string_view text);

// Atomic replace (see file comment). Errors: the errno of open/write/fsync/rename; E2BIG when
// the journal has more than max_entries entries (nothing is written).
Result<void> writeJournal(const std::string& path, const Journal& journal, uint32_t max_entries);
// A missing file is an empty journal. EINVAL when the content does not decode.
Result<Journal> readJournal(const std::string& path);

// What to do with a journal at start, once the runtime has told us which containers exist.
struct ReconcilePlan {
  std::vector<JournalEntry> restore;  // present; send their original values
  std::vector<JournalEntry> reseed;   // present; hand back to the engine (seedApplied)
  std::vector<JournalEntry> dropped;  // containers gone: nothing to do
};
ReconcilePlan planReconcile(const Journal& journal,
                            const std::set<std::string>& present_ids,
                            Reconcile mode);

// The values that return `target_id` to its original state, merged over all its entries
// (several levers may be held on one container). Fields no entry changed stay absent.
policy::Resources originalValuesOf(std::string_view target_id,
                                   const std::vector<JournalEntry>& entries);

}  // namespace colod::daemon
