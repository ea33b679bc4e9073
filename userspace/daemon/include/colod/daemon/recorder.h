// SPDX-License-Identifier: Apache-2.0
// Live `coloctl record` sessions: the loop broadcasts policy trace lines (registry changes and
// snapshots) and each session streams them to its client. Bounded per session (a slow client
// loses lines, counted, rather than growing the daemon). Thread-safe.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "colod/base/result.h"

namespace colod::daemon {

struct RecordChunk {
  std::string data;        // whole lines, each ending in '\n'
  uint64_t snapshots = 0;  // snapshot lines broadcast to this session so far
  uint64_t dropped = 0;    // lines lost to the bound so far
};

class TraceRecorders {
 public:
  explicit TraceRecorders(std::size_t max_bytes_per_session = 16U << 20)
      : max_bytes_(max_bytes_per_session) {}

  // Whether a session is live: trace lines are only worth encoding then.
  [[nodiscard]] bool active() const;
  // Sends a line (without '\n') to every live session.
  void broadcast(const std::string& line, bool is_snapshot);
  using Broadcast = std::function<void(const std::string& line, bool is_snapshot)>;
  // Runs `fn` under the sessions' lock with whether a session is live and a broadcaster: what
  // fn sends and changes there is seen exactly once by a session that opens meanwhile (in its
  // head or as lines, see serve()).
  void withLock(const std::function<void(bool active, const Broadcast& send)>& fn);
  // Serves one session: `head()` (called under the sessions' lock, so no broadcast is lost or
  // doubled against it) is the first chunk, then broadcast lines until `seconds` passed (0 =
  // until cancelled), `write` returns false, `cancelled()` is true, or closeAll().
  Result<void> serve(uint32_t seconds,
                     const std::function<std::string()>& head,
                     const std::function<bool(const RecordChunk&)>& write,
                     const std::function<bool()>& cancelled);
  // Ends every session (daemon stop).
  void closeAll();

 private:
  struct Session {
    std::mutex mu;
    std::condition_variable cv;
    std::deque<std::string> lines;
    std::size_t bytes = 0;
    uint64_t snapshots = 0;
    uint64_t dropped = 0;
    bool closed = false;
  };
  void broadcastLocked(const std::string& line, bool is_snapshot);

  const std::size_t max_bytes_;
  mutable std::mutex mu_;
  std::vector<std::shared_ptr<Session>> sessions_;
};

}  // namespace colod::daemon
