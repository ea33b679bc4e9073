// SPDX-License-Identifier: Apache-2.0
// wire/mux: the NRI trunk multiplexer (docs/nri-protocol.md §1.2-1.5).
//
// One Unix stream socket carries several logical byte streams. Every chunk travels as a frame
// {u32 BE conn id, u32 BE length, payload}. Frame boundaries mean nothing to the layers above;
// a frame's payload is handed on in pieces as it arrives, so a 16 MiB frame never needs a
// 16 MiB buffer here. Conn 1 = the plugin's ttrpc server, conn 2 = the plugin's ttrpc client.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <thread>
#include <vector>

#include "colod/base/result.h"
#include "colod/base/unique_fd.h"

namespace colod::nri::wire {

inline constexpr uint32_t kPluginServiceConn = 1;   // plugin = ttrpc server
inline constexpr uint32_t kRuntimeServiceConn = 2;  // plugin = ttrpc client
inline constexpr std::size_t kMuxHeaderSize = 8;
// Largest frame payload accepted: NRI <= v0.6.1 sent whole messages up to 16 MiB in one frame.
inline constexpr std::size_t kMaxFramePayload = std::size_t{16} << 20;
// Go's ttrpc reads each logical conn through a 4096-byte bufio.Reader and the Go mux fails a
// read whose frame is larger than the buffer it was given (brief §1.5): the split threshold.
inline constexpr std::size_t kGoReadBuffer = 4096;

// The single big-endian pair used by all wire code (style rule 35). `in` must hold >= 4 bytes.
uint32_t readBe32(std::span<const std::byte> in);
void writeBe32(std::span<std::byte> out, uint32_t v);

// Encodes one whole message for `conn` the way Go's own writer does (brief §1.5(b)): a message of
// <= 4096 bytes is one frame; a longer one is a 4096-byte frame plus one frame with the rest.
// An empty message produces no frames (zero-length frames are never sent). For tests/tools;
// Mux::send uses the same plan without copying.
std::vector<std::byte> encodeMuxFrames(uint32_t conn, std::span<const std::byte> message);

// Connects a SOCK_STREAM|SOCK_CLOEXEC Unix socket to `path` (EINTR retried). Errors are the
// connect() errno: ENOENT/ECONNREFUSED while the runtime is down, ENAMETOOLONG for a long path.
Result<UniqueFd> dialUnix(const std::string& path);

// Incremental, bounded frame parser. feed() may be given any split of the input (short reads).
class MuxDecoder {
 public:
  using Sink = std::function<Result<void>(uint32_t conn, std::span<const std::byte> payload)>;
  explicit MuxDecoder(std::size_t max_frame = kMaxFramePayload) : max_frame_(max_frame) {}

  // Parses `data`, calling sink with payload pieces in stream order (a frame may arrive as
  // several pieces). Errors: EMSGSIZE for a frame longer than max_frame (the trunk is then
  // unusable: its framing cannot be trusted), or whatever the sink returned. After an error the
  // decoder stays failed.
  Result<void> feed(std::span<const std::byte> data, const Sink& sink);

  // feed() for a buffer the caller owns, which it may rewrite: consecutive frames of one conn
  // in `data` reach the sink as one piece, their headers squeezed out. So a message the Go
  // writer split in two (§1.5(b)) and one read brought in whole is one contiguous span the
  // layer above can decode where it lies, with no reassembly copy. A join moves its smaller
  // side (the Go split's second frame is the tail: tens of bytes for a 4 KB call) and is made
  // only when that side is <= 4096 bytes, so it costs at most that per frame whatever a peer
  // sends. The sink sees the same bytes per conn, in the same order, as with feed().
  Result<void> feedInPlace(std::span<std::byte> data, const Sink& sink);

  // True when the input so far ended exactly on a frame boundary (EOF here is clean).
  [[nodiscard]] bool atBoundary() const { return header_fill_ == 0 && remaining_ == 0; }

 private:
  // Consumes header bytes from the front of `data`; true once a whole, valid header was read
  // (conn_ and remaining_ set). EMSGSIZE for an oversized frame (the decoder is then failed).
  Result<bool> takeHeader(std::span<const std::byte>& data);

  std::size_t max_frame_;
  std::byte header_[kMuxHeaderSize]{};
  std::size_t header_fill_ = 0;
  uint32_t conn_ = 0;
  std::size_t remaining_ = 0;
  bool failed_ = false;
};

struct MuxOptions {
  std::size_t read_buffer = std::size_t{256} << 10;
  std::size_t max_frame = kMaxFramePayload;
  // A peer that stops reading must not hang our writers forever (SO_SNDTIMEO; sockets only).
  std::chrono::milliseconds send_timeout{10000};
  // Let a thread waiting for a reply read the trunk itself (CallerReads). A trunk that only
  // serves (never calls) can turn it off and keep the reader thread on plain blocking reads.
  bool caller_reads = true;
};

// Leader/follower reading for a thread that waits for a reply on the trunk.
//
// Without it a reply costs two thread switches on the receiving side: the reader thread wakes to
// read it, then wakes the caller. With it the caller, when no other thread is reading, takes the
// reader role and reads the trunk on its own thread, dispatching whatever arrives (its reply,
// other callers' replies, the peer's requests) to the sinks there. The reader thread stops
// watching the socket meanwhile (its epoll interest is disarmed, so a reply does not wake it) and
// watches again once no caller has held the role for a 1 ms wait: calls that follow each other
// closely pay no epoll_ctl, and a peer's request arriving between calls is read by the next caller
// or, without one, within 2 ms.
// Measured: docs/benchmarks.md, nri.
class CallerReads {
 public:
  virtual ~CallerReads() = default;
  // Takes the reader role when nobody holds it. False when another thread is reading (wait for
  // it to deliver), the trunk is closed, or this transport cannot be read by callers.
  virtual bool tryLead() = 0;
  // With the role held: one read, blocking until bytes arrive, `deadline` passes (ETIMEDOUT) or
  // the trunk fails; what arrived is dispatched to the sinks on this thread before it returns.
  // Any error other than ETIMEDOUT means the trunk is gone (its close callback has run).
  virtual Result<void> leadRead(std::optional<std::chrono::steady_clock::time_point> deadline) = 0;
  // Gives the role back (always, after a successful tryLead()).
  virtual void unlead() = 0;
  // True while this thread holds the reader role of any trunk (it runs a sink or a close
  // callback): a call made from there could never read its reply, so callers refuse it.
  [[nodiscard]] static bool readingOnThisThread();
};

// Owns the trunk socket and one reader thread.
//
// Threading: open()/onClose() before start(). Sinks and the close callback run on the thread
// that holds the reader role -- the reader thread, or a caller inside leadRead() -- one at a
// time, and must not block on the network. send() is thread-safe; each call writes one whole
// message atomically with respect to other send() calls. close() may be called from any thread;
// from a sink or the close callback it only shuts the socket down (the destructor joins).
class Mux final : public CallerReads {
 public:
  using ConnSink = std::function<Result<void>(std::span<const std::byte>)>;
  using CloseFn = std::function<void(const Error&)>;

  explicit Mux(UniqueFd fd, MuxOptions options = {});
  ~Mux() override;
  Mux(const Mux&) = delete;
  Mux& operator=(const Mux&) = delete;
  Mux(Mux&&) = delete;
  Mux& operator=(Mux&&) = delete;

  // Registers the byte sink of a logical connection. Frames for unopened ids are dropped.
  void open(uint32_t conn, ConnSink sink);
  // Called once, on the reader thread, when the trunk fails or the peer closes it (ECONNRESET
  // for EOF, EPROTO for a truncated frame, EMSGSIZE for an oversized frame, the sink's error).
  void onClose(CloseFn fn);
  // Starts the reader thread.
  Result<void> start();
  // Sends one message (the concatenation of `head`, `body` and `tail`) on `conn`, framed per
  // §1.5(b). Handles short writes and EINTR. Errors: EPIPE/ECONNRESET when the trunk is gone,
  // EAGAIN when the peer did not read for send_timeout (the trunk is then shut down).
  Result<void> send(uint32_t conn,
                    std::span<const std::byte> head,
                    std::span<const std::byte> body,
                    std::span<const std::byte> tail = {});
  // Shuts the socket down and joins the reader thread. Idempotent.
  void close();
  [[nodiscard]] bool closed() const { return closed_.load(); }

  // CallerReads (only on a started socket trunk with options.caller_reads; false otherwise).
  bool tryLead() override;
  Result<void> leadRead(std::optional<std::chrono::steady_clock::time_point> deadline) override;
  void unlead() override;

 private:
  void readLoop();
  void watchLoop();
  // One read of the trunk by the role holder, dispatched to the sinks: true when bytes came,
  // false when none were there (dont_wait) or the receive timeout passed; an error when the
  // trunk failed (finish() has run).
  Result<bool> readOnce(bool dont_wait);
  void finish(const Error& err);
  // Sets the socket's epoll interest (EPOLLIN or nothing) and armed_; under role_mu_.
  void armLocked(bool armed);

  UniqueFd fd_;
  MuxOptions options_;
  std::vector<std::pair<uint32_t, ConnSink>> sinks_;
  CloseFn on_close_;
  std::mutex send_mu_;
  std::thread reader_;
  std::atomic<bool> closed_{false};
  std::atomic<bool> close_reported_{false};
  bool is_socket_ = true;

  // The reader role: whoever holds it owns decoder_ and buf_.
  MuxDecoder decoder_;
  MuxDecoder::Sink sink_;  // routes payload to sinks_ by conn id; built once, used at every read
  std::vector<std::byte> buf_;
  bool callers_read_ = false;  // set by start()
  UniqueFd epoll_fd_;          // the reader thread's wait: the socket (disarmable) + stop_fd_
  UniqueFd stop_fd_;           // eventfd: close(), and a burst's first tryLead() (a kick)
  std::mutex role_mu_;
  std::condition_variable role_cv_;  // the reader thread waits here for a caller's unlead()
  bool reading_ = false;             // guarded by role_mu_
  bool stopping_ = false;            // guarded by role_mu_
  bool armed_ = true;                // the socket's epoll interest; guarded by role_mu_
  bool lead_seen_ = false;           // a caller led during the current lingering wait
};

}  // namespace colod::nri::wire
