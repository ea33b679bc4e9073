// SPDX-License-Identifier: Apache-2.0
// The journal's write-ahead copy, "<journal>.next": the overlays colod is about to send, written
// into a file it keeps open, before the actuator may send them.
//
// Why a second file: the journal itself is replaced atomically (write a new file, rename it over
// the old one), and on ext4 a rename over an existing file starts the writeback of the new
// file's data in the caller (auto_da_alloc). Under a busy CPU that took 2-7.5 ms of colod's
// reaction, between the decision and the update (docs/benchmarks.md, session 53); a pwrite into
// a file already open takes tens of microseconds. The copy holds the whole journal, like the
// journal: a page-cache write survives colod being killed, crashing or upgraded; only a node
// crash loses it, and that takes the containers with it (journal.h, JournalSync).
//
// The protocol: write() the new journal into the copy (marked live), hand the overlays to the
// actuator, replace the journal with the same content, then settle() the copy. So a live copy
// means colod stopped between the two writes, and the copy is then newer than the journal. At
// start the daemon loads the copy instead of the journal when it is live, decodes, and was not
// written before the journal (a copy left live by a colod that died long ago, followed by a
// colod that does not know of copies and rewrote the journal since, is older: ignored). A copy
// torn by a kill in the middle of its write does not decode; nothing was sent on it (the send
// comes after the write returns), so the journal is the truth then. (A write is torn only
// between pages, and what follows the head it left is nothing: the copy is emptied after every
// journal write.)
//
// Format: one byte, 'W' (live) or anything else (settled), then the journal's JSON text, then
// spaces up to the file's size (a shorter journal written over a longer one; JSON allows
// trailing white space). An empty file is settled.
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>

#include "colod/base/result.h"
#include "colod/base/unique_fd.h"
#include "colod/daemon/journal.h"

namespace colod::daemon {

inline constexpr char kJournalAheadLive = 'W';

// "<journal_path>.next".
std::string journalAheadPath(const std::string& journal_path);

// The journal a copy's text holds: nullopt when settled (or empty); EINVAL when it is live but
// does not decode (torn). Pure.
Result<std::optional<Journal>> decodeJournalAhead(std::string_view text);

// The journal a restart must load from the copy at "<journal_path>.next": nullopt when there is
// no copy, it is settled, or it was written before the journal (see the file comment); EINVAL
// when it is live but torn (the caller loads the journal and says so).
Result<std::optional<Journal>> readJournalAhead(const std::string& journal_path);

// The copy, open for the daemon's life (the journal's lock is held by then: one writer).
class JournalAhead {
 public:
  // Opens (creating) "<journal_path>.next". Errors: the errno of open/fstat.
  static Result<JournalAhead> open(const std::string& journal_path);

  // Writes `journal` into the copy, marked live, in place: one pwrite from offset 0, the text
  // padded with spaces over a longer previous one; no file is created, truncated or renamed.
  // E2BIG (nothing written) past max_entries containers, as writeJournal. With an encoder, its
  // text (journal.h, JournalEncoder).
  Result<void> write(const Journal& journal, uint32_t max_entries);
  Result<void> write(const Journal& journal, uint32_t max_entries, JournalEncoder& encoder);

  // The journal now holds what the copy holds (or newer): the copy is emptied, so a restart
  // reads the journal. Off the reaction path (a truncate is a metadata operation).
  Result<void> settle();

  // Whether the copy holds a write not settled yet.
  [[nodiscard]] bool live() const { return live_; }
  [[nodiscard]] const std::string& path() const { return path_; }

 private:
  Result<void> writeText(std::string_view journal_text);

  JournalAhead(UniqueFd fd, std::string path, std::size_t size)
      : fd_(std::move(fd)), path_(std::move(path)), size_(size) {}

  UniqueFd fd_;
  std::string path_;
  std::size_t size_ = 0;  // the file's size: what a shorter text is padded to
  bool live_ = false;
};

}  // namespace colod::daemon
