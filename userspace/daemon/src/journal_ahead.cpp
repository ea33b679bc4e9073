// SPDX-License-Identifier: Apache-2.0
#include "colod/daemon/journal_ahead.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <string>

namespace colod::daemon {

std::string journalAheadPath(const std::string& journal_path) { return journal_path + ".next"; }

Result<std::optional<Journal>> decodeJournalAhead(std::string_view text) {
  if (text.empty() || text.front() != kJournalAheadLive) {
    return std::optional<Journal>();
  }
  auto j = decodeJournal(text.substr(1));
  if (!j) {
    return std::move(j).error().wrap("write-ahead copy (live, torn)");
  }
  return std::optional<Journal>(std::move(j).value());
}

namespace {

Result<std::string> readWhole(int fd, const std::string& path) {
  std::string text;
  char buf[16384];
  for (off_t off = 0;;) {
    const ssize_t n = ::pread(fd, buf, sizeof buf, off);
    if (n < 0) {
      if (errno == EINTR) {
        continue;
      }
      return COLOD_ERR(errno, "reading ", path);
    }
    if (n == 0) {
      return text;
    }
    text.append(buf, static_cast<std::size_t>(n));
    off += n;
  }
}

int64_t mtimeNs(const struct stat& st) {
  return static_cast<int64_t>(st.st_mtim.tv_sec) * 1'000'000'000 +
         static_cast<int64_t>(st.st_mtim.tv_nsec);
}

// Modification time in ns, nullopt when the file does not exist.
Result<std::optional<int64_t>> mtimeNs(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) {
    if (errno == ENOENT) {
      return std::optional<int64_t>();
    }
    return COLOD_ERR(errno, "stat ", path);
  }
  return std::optional<int64_t>(mtimeNs(st));
}

}  // namespace

Result<std::optional<Journal>> readJournalAhead(const std::string& journal_path) {
  const std::string path = journalAheadPath(journal_path);
  UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (!fd) {
    if (errno == ENOENT) {
      return std::optional<Journal>();
    }
    return COLOD_ERR(errno, "opening ", path);
  }
  // Older than the journal: written by a colod that died, after which one that does not know
  // of copies rewrote the journal. The same coarse timestamp counts as newer: the copy is
  // written before the journal it precedes, never after. (A settled copy is empty: read whole
  // below in no time, and decodeJournalAhead() says it holds nothing.)
  struct stat st {};
  if (::fstat(fd.get(), &st) != 0) {
    return COLOD_ERR(errno, "stat ", path);
  }
  const int64_t ahead_ns = mtimeNs(st);
  auto journal_ns = mtimeNs(journal_path);
  if (!journal_ns) {
    return std::move(journal_ns).error();
  }
  if (*journal_ns && **journal_ns > ahead_ns) {
    return std::optional<Journal>();
  }
  auto text = readWhole(fd.get(), path);
  if (!text) {
    return std::move(text).error();
  }
  auto j = decodeJournalAhead(*text);
  if (!j) {
    return std::move(j).error().wrap(path);
  }
  return j;
}

Result<JournalAhead> JournalAhead::open(const std::string& journal_path) {
  std::string path = journalAheadPath(journal_path);
  auto opened = openJournalFile(path, "the journal's write-ahead copy");
  if (!opened) {
    return std::move(opened).error();
  }
  UniqueFd fd = std::move(opened).value();
  struct stat st {};
  if (::fstat(fd.get(), &st) != 0) {
    return COLOD_ERR(errno, "stat ", path);
  }
  JournalAhead out(std::move(fd), std::move(path), static_cast<std::size_t>(st.st_size));
  char mark = 0;
  out.live_ = ::pread(out.fd_.get(), &mark, 1, 0) == 1 && mark == kJournalAheadLive;
  return out;
}

Result<void> JournalAhead::write(const Journal& journal, uint32_t max_entries) {
  if (auto r = checkJournalBound(journal, max_entries); !r) {
    return r;
  }
  return writeText(encodeJournal(journal));
}

Result<void> JournalAhead::write(const Journal& journal,
                                 uint32_t max_entries,
                                 JournalEncoder& encoder) {
  if (auto r = checkJournalBound(journal, max_entries); !r) {
    return r;
  }
  return writeText(encoder.encode(journal));
}

Result<void> JournalAhead::writeText(std::string_view journal_text) {
  std::string data;
  data.reserve(std::max(size_, journal_text.size() + 1));
  data.push_back(kJournalAheadLive);
  data += journal_text;
  if (data.size() < size_) {
    data.append(size_ - data.size(), ' ');
  }
  std::size_t off = 0;
  while (off < data.size()) {
    const ssize_t n =
        ::pwrite(fd_.get(), data.data() + off, data.size() - off, static_cast<off_t>(off));
    if (n < 0) {
      if (errno == EINTR) {
        continue;
      }
      // What a failed write left is torn: it does not decode, and the journal stays the truth.
      return COLOD_ERR(errno, "writing ", path_);
    }
    off += static_cast<std::size_t>(n);
  }
  size_ = std::max(size_, data.size());
  live_ = true;
  return {};
}

Result<void> JournalAhead::settle() {
  if (::ftruncate(fd_.get(), 0) != 0) {
    return COLOD_ERR(errno, "emptying ", path_);
  }
  size_ = 0;
  live_ = false;
  return {};
}

}  // namespace colod::daemon
