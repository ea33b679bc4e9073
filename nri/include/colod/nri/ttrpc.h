// SPDX-License-Identifier: Apache-2.0
// wire/ttrpc: unary ttrpc over one logical mux connection (docs/nri-protocol.md §2).
//
// A message is a 10-byte header {u32 BE length, u32 BE stream id, u8 type, u8 flags} and a body.
// Requests and responses carry the `ttrpc.Request`/`ttrpc.Response` envelopes of
// nri/proto/ttrpc.proto; this layer encodes them by hand (five fields) so a request payload is a
// view into the received buffer and never copied.
#pragma once

#include <array>
#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <thread>
#include <utility>
#include <vector>

#include "colod/base/result.h"
#include "colod/nri/mux.h"

namespace colod::nri::wire {

inline constexpr std::size_t kTtrpcHeaderSize = 10;
inline constexpr uint32_t kTtrpcMaxMessage = 4U << 20;  // ttrpc messageLengthMax

enum class MessageType : uint8_t { Request = 1, Response = 2, Data = 3 };

struct TtrpcHeader {
  uint32_t length = 0;
  uint32_t stream_id = 0;
  uint8_t type = 0;
  uint8_t flags = 0;
};
std::array<std::byte, kTtrpcHeaderSize> encodeHeader(const TtrpcHeader& h);
// EPROTO if `in` is shorter than 10 bytes.
Result<TtrpcHeader> decodeHeader(std::span<const std::byte> in);

// gRPC canonical codes used on the wire (brief §2.4). Unknown codes pass through as numbers.
namespace status_code {
inline constexpr int32_t kOk = 0;
inline constexpr int32_t kCancelled = 1;
inline constexpr int32_t kUnknown = 2;
inline constexpr int32_t kInvalidArgument = 3;
inline constexpr int32_t kDeadlineExceeded = 4;
inline constexpr int32_t kNotFound = 5;
inline constexpr int32_t kResourceExhausted = 8;
inline constexpr int32_t kUnimplemented = 12;
inline constexpr int32_t kInternal = 13;
inline constexpr int32_t kUnavailable = 14;
}  // namespace status_code

struct Status {
  int32_t code = status_code::kOk;
  std::string message{};
  [[nodiscard]] bool ok() const { return code == status_code::kOk; }
};

// A decoded ttrpc.Request. `payload` points into the buffer given to decodeRequest().
struct RequestView {
  std::string service{};
  std::string method{};
  std::span<const std::byte> payload{};
  int64_t timeout_nano = 0;  // 0 = no deadline
  std::vector<std::pair<std::string, std::string>> metadata{};
};
// EPROTO on malformed protobuf (truncation, bad wire type, overlong varint). Unknown fields are
// skipped.
Result<RequestView> decodeRequest(std::span<const std::byte> body);
std::vector<std::byte> encodeRequest(std::string_view service,
                                     std::string_view method,
                                     std::span<const std::byte> payload,
                                     int64_t timeout_nano);
// The same Request in the pieces around its payload, appended to `head` (fields 1 and 2, then
// field 3's tag and length) and `tail` (field 4), so a sender can put head + payload + tail on
// the wire without copying the payload into an encoding buffer first. The three together are
// byte for byte what encodeRequest() gives for a payload of `payload_size` bytes.
void encodeRequestAround(std::vector<std::byte>& head,
                         std::vector<std::byte>& tail,
                         std::string_view service,
                         std::string_view method,
                         std::size_t payload_size,
                         int64_t timeout_nano);

struct ResponseView {
  Status status{};  // missing status on the wire = OK
  std::span<const std::byte> payload{};
};
Result<ResponseView> decodeResponse(std::span<const std::byte> body);
// A successful response omits status (Go does); an error response carries only the status.
std::vector<std::byte> encodeResponse(const Status& status, std::span<const std::byte> payload);

// One ttrpc message of a logical connection.
//
// Its body is borrowed when the whole message came in one piece given to TtrpcDecoder::feed():
// then it is a view of those bytes, valid only until the emit callback returns (own() copies it
// to keep it longer). Otherwise it was reassembled into `owned`.
struct TtrpcMessage {
  TtrpcHeader header{};
  std::vector<std::byte> owned{};           // the body when not borrowed; empty if oversized
  std::span<const std::byte> borrowed{};    // the body when is_borrowed
  bool is_borrowed = false;
  bool oversized = false;  // length > the limit: the body was drained, not stored
  // When its first header byte arrived (left unset by a decoder that does not stamp).
  std::chrono::steady_clock::time_point first_byte{};

  [[nodiscard]] std::span<const std::byte> body() const {
    return is_borrowed ? borrowed : std::span<const std::byte>(owned);
  }
  // Makes a borrowed body owned (a copy), for a message kept past the emit callback.
  void own();
};

// Incremental reassembly of ttrpc messages from one logical byte stream. Bounds-first: the body
// buffer is allocated only after the length was checked against max_message; larger messages are
// drained (discarded as they arrive) and reported with oversized = true, as Go's server does.
// A message found whole in the piece being fed is emitted borrowed, without a copy.
class TtrpcDecoder {
 public:
  using Emit = std::function<Result<void>(TtrpcMessage&&)>;
  // stamp_first_byte: record TtrpcMessage::first_byte (a clock read per message); a client,
  // which does not use it, turns it off.
  explicit TtrpcDecoder(uint32_t max_message = kTtrpcMaxMessage, bool stamp_first_byte = true)
      : max_message_(max_message), stamp_first_byte_(stamp_first_byte) {}
  Result<void> feed(std::span<const std::byte> data, const Emit& emit);
  [[nodiscard]] bool atBoundary() const { return header_fill_ == 0 && !in_body_; }
  // Hands a consumed message's owned body back for reuse by the next reassembly;
  // buffers above kRecycleMax are dropped so one big message does not pin its memory.
  void recycle(std::vector<std::byte>&& body);
  static constexpr std::size_t kRecycleMax = std::size_t{64} << 10;

 private:
  uint32_t max_message_;
  bool stamp_first_byte_;
  std::vector<std::byte> spare_{};
  std::array<std::byte, kTtrpcHeaderSize> header_{};
  std::size_t header_fill_ = 0;
  bool in_body_ = false;
  std::size_t remaining_ = 0;
  TtrpcMessage current_;
};

// Sends one whole ttrpc message, the concatenation of head, body and tail (header and envelope
// around a payload sent where it lies), on the underlying transport (Mux::send).
using SendFn = std::function<Result<void>(std::span<const std::byte> head,
                                          std::span<const std::byte> body,
                                          std::span<const std::byte> tail)>;

// What a server handler sees.
struct CallContext {
  std::string_view service{};
  std::string_view method{};
  uint32_t stream_id = 0;
  std::optional<std::chrono::steady_clock::time_point> deadline{};  // from timeout_nano
  std::chrono::steady_clock::time_point received{};  // first byte of the request
};

// A handler returns the serialized response message, or an error that becomes the status:
// ENOSYS -> UNIMPLEMENTED, ETIMEDOUT -> DEADLINE_EXCEEDED, EINVAL/EPROTO -> INVALID_ARGUMENT,
// anything else -> UNKNOWN, with Error::message() as the status message.
using Handler =
    std::function<Result<std::vector<std::byte>>(const CallContext&, std::span<const std::byte>)>;

struct CallTiming {
  std::string_view service{};
  std::string_view method{};
  int32_t code = 0;
  std::chrono::steady_clock::time_point first_byte{};  // request's first byte received
  std::chrono::steady_clock::time_point replied{};     // reply's last byte written
  std::size_t request_bytes = 0;
  bool sent = true;  // false: the reply could not be written (the trunk is gone)
};

// Where a method's handler runs.
enum class Execution {
  // On the server's worker thread: a slow handler never stops the reader (default).
  Worker,
  // On the mux reader thread, when the worker is idle and nothing is queued (arrival order is
  // kept: otherwise the call is queued like a Worker one). Saves a thread hand-off per call; for
  // handlers that are fast and never block.
  Inline,
};

struct ServerOptions {
  uint32_t max_message = kTtrpcMaxMessage;
  // Called on the worker thread after each reply was written (metrics, benchmarks).
  std::function<void(const CallTiming&)> on_served{};
};

// Unary ttrpc server for one logical connection.
//
// Threading: onBytes() runs on the mux reader thread; it reassembles, applies the stream-id
// rules and either runs an Execution::Inline method right there (worker idle, queue empty) or
// queues the call. One worker thread owned by the server runs queued handlers in arrival order
// and writes their replies, so a slow handler never stops the reader (and the client side of the
// same trunk keeps working). Several calls may be outstanding; each reply carries its stream id. A request whose
// timeout_nano expired while queued is answered DEADLINE_EXCEEDED without running the handler.
class TtrpcServer {
 public:
  TtrpcServer(SendFn send, ServerOptions options = {});
  ~TtrpcServer();
  TtrpcServer(const TtrpcServer&) = delete;
  TtrpcServer& operator=(const TtrpcServer&) = delete;
  TtrpcServer(TtrpcServer&&) = delete;
  TtrpcServer& operator=(TtrpcServer&&) = delete;

  // Before start(). Unknown service -> UNIMPLEMENTED "service X"; unknown method -> "method X".
  void registerMethod(std::string service,
                      std::string method,
                      Handler handler,
                      Execution execution = Execution::Worker);
  void start();
  // Stops the worker after the queue drained of the call in progress; pending calls are dropped.
  void stop();
  // Mux sink. Errors (EPROTO: malformed stream) mean the connection's framing is broken.
  Result<void> onBytes(std::span<const std::byte> data);
  // True on the server's worker thread and inside any handler (used to forbid re-entrant client
  // calls from handlers: on the reader thread such a call could never see its reply).
  [[nodiscard]] static bool onWorkerThread();

 private:
  struct Method {
    Handler handler;
    Execution execution = Execution::Worker;
  };
  Result<void> dispatch(TtrpcMessage&& msg);
  void workerLoop();
  // Decodes the request, finds its method and invokes it (or replies with what is wrong).
  void serve(TtrpcMessage& msg);
  // Runs a found method on a decoded request and replies; a deadline already past is answered
  // DEADLINE_EXCEEDED without running it.
  void invoke(const TtrpcMessage& msg,
              std::string_view service,
              std::string_view method,
              const Method& m,
              std::span<const std::byte> payload,
              int64_t timeout_nano);
  void reply(uint32_t stream, const Status& status, std::span<const std::byte> payload,
             const TtrpcMessage& req, std::string_view service, std::string_view method);

  SendFn send_;
  ServerOptions options_;
  TtrpcDecoder decoder_;
  std::map<std::string, std::map<std::string, Method, std::less<>>, std::less<>> services_{};
  std::mutex mu_{};
  std::condition_variable cv_{};
  std::deque<TtrpcMessage> queue_{};
  bool stopping_ = false;
  bool worker_busy_ = false;  // guarded by mu_
  uint32_t last_stream_ = 0;
  std::thread worker_{};
};

// Unary ttrpc client for one logical connection. call() is thread-safe and may be used by many
// threads at once; stream ids are odd, from 1, step 2, and are sent in increasing order (the Go
// server rejects an id lower than one it has seen).
//
// Given the trunk's CallerReads (borrowed; it must outlive the client), a caller reads its own
// reply when no other thread is reading the trunk (one thread switch less per call); otherwise it
// waits for the thread that reads to deliver it, as without one.
class TtrpcClient {
 public:
  struct Reply {
    Status status;
    std::vector<std::byte> payload;
  };

  explicit TtrpcClient(SendFn send,
                       uint32_t max_message = kTtrpcMaxMessage,
                       CallerReads* caller_reads = nullptr);
  // Mux sink (reader thread): completes outstanding calls. Responses for unknown streams (a call
  // that already timed out) are dropped.
  Result<void> onBytes(std::span<const std::byte> data);
  // The connection is gone: fails every outstanding and future call with `err`.
  void fail(const Error& err);

  // Blocks until the response arrives, the timeout passes (ETIMEDOUT; the request carries it as
  // timeout_nano) or the connection fails (its error). A non-OK status is a successful Reply:
  // the caller decides what it means. A request body over the limit fails locally (EMSGSIZE).
  // EDEADLK from a thread that is reading the trunk (a sink or a close callback), which could
  // never see its reply.
  Result<Reply> call(std::string_view service,
                     std::string_view method,
                     std::span<const std::byte> payload,
                     std::optional<std::chrono::nanoseconds> timeout);

 private:
  struct Slot {
    bool done = false;
    std::optional<Error> error;
    Reply reply;
  };
  // Under mu_: removes and returns the slot waiting for `stream`, or nullptr.
  Slot* takePendingLocked(uint32_t stream);

  SendFn send_;
  TtrpcDecoder decoder_;
  CallerReads* caller_reads_ = nullptr;
  std::mutex send_mu_{};  // id allocation + send, so ids hit the wire in order
  std::mutex mu_{};
  std::condition_variable cv_{};
  // The calls waiting for a reply, each slot on its caller's stack. A flat list: outstanding
  // calls on one connection are few, and a call then allocates nothing here.
  std::vector<std::pair<uint32_t, Slot*>> pending_{};
  std::optional<Error> failed_{};
  uint32_t next_stream_ = 1;
};

}  // namespace colod::nri::wire
