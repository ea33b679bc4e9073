// SPDX-License-Identifier: Apache-2.0
#include "colod/daemon/recorder.h"

#include <algorithm>

namespace colod::daemon {

bool TraceRecorders::active() const {
  std::lock_guard lk(mu_);
  return !sessions_.empty();
}

void TraceRecorders::broadcast(const std::string& line, bool is_snapshot) {
  std::lock_guard lk(mu_);
  broadcastLocked(line, is_snapshot);
}

void TraceRecorders::withLock(const std::function<void(bool active, const Broadcast& send)>& fn) {
  std::lock_guard lk(mu_);
  fn(!sessions_.empty(),
     [this](const std::string& line, bool is_snapshot) { broadcastLocked(line, is_snapshot); });
}

void TraceRecorders::broadcastLocked(const std::string& line, bool is_snapshot) {
  for (auto& s : sessions_) {
    std::lock_guard sl(s->mu);
    if (s->bytes + line.size() + 1 > max_bytes_) {
      ++s->dropped;  // a slow client loses lines rather than growing the daemon
      continue;
    }
    s->bytes += line.size() + 1;
    s->lines.push_back(line + "\n");
    if (is_snapshot) {
      ++s->snapshots;
    }
    s->cv.notify_one();
  }
}

Result<void> TraceRecorders::serve(uint32_t seconds,
                                   const std::function<std::string()>& head,
                                   const std::function<bool(const RecordChunk&)>& write,
                                   const std::function<bool()>& cancelled) {
  auto session = std::make_shared<Session>();
  {
    std::lock_guard lk(mu_);
    session->lines.push_back(head());
    sessions_.push_back(session);
  }
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(seconds);
  while (true) {
    std::deque<std::string> lines;
    RecordChunk chunk;
    bool closed = false;
    {
      std::unique_lock lk(session->mu);
      session->cv.wait_for(lk, std::chrono::milliseconds(200),
                           [&] { return !session->lines.empty() || session->closed; });
      lines.swap(session->lines);
      session->bytes = 0;
      chunk.snapshots = session->snapshots;
      chunk.dropped = session->dropped;
      closed = session->closed;
    }
    if (!lines.empty()) {
      for (auto& l : lines) {
        chunk.data += l;
      }
      if (!write(chunk)) {
        break;
      }
    }
    if (closed || cancelled() || (seconds > 0 && std::chrono::steady_clock::now() >= deadline)) {
      break;
    }
  }
  std::lock_guard lk(mu_);
  std::erase(sessions_, session);
  return {};
}

void TraceRecorders::closeAll() {
  std::lock_guard lk(mu_);
  for (auto& s : sessions_) {
    std::lock_guard sl(s->mu);
    s->closed = true;
    s->cv.notify_all();
  }
}

}  // namespace colod::daemon
