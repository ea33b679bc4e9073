// SPDX-License-Identifier: Apache-2.0
#include "colod/nri/ttrpc.h"

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "colod/nri/mux.h"
#include "pbwire.h"

namespace colod::nri::wire {

namespace {
thread_local bool t_on_server_worker = false;

std::string toString(std::span<const std::byte> b) {
  return {reinterpret_cast<const char*>(b.data()), b.size()};  // NOLINT: bytes -> chars
}
}  // namespace

std::array<std::byte, kTtrpcHeaderSize> encodeHeader(const TtrpcHeader& h) {
  std::array<std::byte, kTtrpcHeaderSize> out{};
  writeBe32(std::span(out).first<4>(), h.length);
  writeBe32(std::span(out).subspan<4, 4>(), h.stream_id);
  out[8] = static_cast<std::byte>(h.type);
  out[9] = static_cast<std::byte>(h.flags);
  return out;
}

Result<TtrpcHeader> decodeHeader(std::span<const std::byte> in) {
  if (in.size() < kTtrpcHeaderSize) {
    return COLOD_ERR(EPROTO, "ttrpc header needs 10 bytes, got ", in.size());
  }
  TtrpcHeader h;
  h.length = readBe32(in.first(4));
  h.stream_id = readBe32(in.subspan(4, 4));
  h.type = std::to_integer<uint8_t>(in[8]);
  h.flags = std::to_integer<uint8_t>(in[9]);
  return h;
}

namespace {

std::string_view toView(std::span<const std::byte> b) {
  return {reinterpret_cast<const char*>(b.data()), b.size()};  // NOLINT: bytes -> chars
}

// A ttrpc.Request without copies: service and method point into the body.
struct RequestFields {
  std::string_view service{};
  std::string_view method{};
  std::span<const std::byte> payload{};
  int64_t timeout_nano = 0;
};

// The one decoder of the ttrpc.Request envelope, shared by decodeRequest() and the server's
// hot path. Metadata entries are always validated; they are kept only when `metadata` is set
// (the server does not use them).
Result<RequestFields> decodeRequestFields(
    std::span<const std::byte> body,
    std::vector<std::pair<std::string, std::string>>* metadata) {
  RequestFields req;
  pb::Reader r(body);
  while (!r.done()) {
    auto tag = r.varint();
    if (!tag) {
      return COLOD_ERR(EPROTO, "ttrpc.Request: truncated tag");
    }
    auto field = *tag >> 3;
    auto wt = static_cast<uint32_t>(*tag & 7);
    if (wt == pb::kLen && field >= 1 && field <= 3) {
      auto b = r.bytes();
      if (!b) {
        return COLOD_ERR(EPROTO, "ttrpc.Request: truncated field ", field);
      }
      if (field == 1) {
        req.service = toView(*b);
      } else if (field == 2) {
        req.method = toView(*b);
      } else {
        req.payload = *b;
      }
    } else if (wt == pb::kVarint && field == 4) {
      auto v = r.varint();
      if (!v) {
        return COLOD_ERR(EPROTO, "ttrpc.Request: truncated timeout_nano");
      }
      req.timeout_nano = static_cast<int64_t>(*v);
    } else if (wt == pb::kLen && field == 5) {
      auto b = r.bytes();
      if (!b) {
        return COLOD_ERR(EPROTO, "ttrpc.Request: truncated metadata");
      }
      pb::Reader kv(*b);
      std::pair<std::string, std::string> entry;
      while (!kv.done()) {
        auto t = kv.varint();
        if (!t) {
          return COLOD_ERR(EPROTO, "ttrpc.KeyValue: truncated tag");
        }
        auto f = *t >> 3;
        auto w = static_cast<uint32_t>(*t & 7);
        if (w == pb::kLen && (f == 1 || f == 2)) {
          auto v = kv.bytes();
          if (!v) {
            return COLOD_ERR(EPROTO, "ttrpc.KeyValue: truncated field");
          }
          if (metadata != nullptr) {
            (f == 1 ? entry.first : entry.second) = toString(*v);
          }
        } else if (!kv.skip(w)) {
          return COLOD_ERR(EPROTO, "ttrpc.KeyValue: malformed field ", f);
        }
      }
      if (metadata != nullptr) {
        metadata->push_back(std::move(entry));
      }
    } else if (!r.skip(wt)) {
      return COLOD_ERR(EPROTO, "ttrpc.Request: malformed field ", field);
    }
  }
  return req;
}

}  // namespace

Result<RequestView> decodeRequest(std::span<const std::byte> body) {
  RequestView req;
  auto fields = decodeRequestFields(body, &req.metadata);
  if (!fields) {
    return std::move(fields).error();
  }
  req.service = std::string(fields->service);
  req.method = std::string(fields->method);
  req.payload = fields->payload;
  req.timeout_nano = fields->timeout_nano;
  return req;
}

void encodeRequestAround(std::vector<std::byte>& head,
                         std::vector<std::byte>& tail,
                         std::string_view service,
                         std::string_view method,
                         std::size_t payload_size,
                         int64_t timeout_nano) {
  pb::putString(head, 1, service);
  pb::putString(head, 2, method);
  if (payload_size > 0) {  // proto3 omits empty bytes; Go does the same for an empty payload
    pb::putTag(head, 3, pb::kLen);
    pb::putVarint(head, payload_size);
  }
  if (timeout_nano != 0) {
    pb::putTag(tail, 4, pb::kVarint);
    pb::putVarint(tail, static_cast<uint64_t>(timeout_nano));
  }
}

std::vector<std::byte> encodeRequest(std::string_view service,
                                     std::string_view method,
                                     std::span<const std::byte> payload,
                                     int64_t timeout_nano) {
  std::vector<std::byte> out;
  std::vector<std::byte> tail;
  out.reserve(service.size() + method.size() + payload.size() + 24);
  encodeRequestAround(out, tail, service, method, payload.size(), timeout_nano);
  out.insert(out.end(), payload.begin(), payload.end());
  out.insert(out.end(), tail.begin(), tail.end());
  return out;
}

Result<ResponseView> decodeResponse(std::span<const std::byte> body) {
  ResponseView resp;
  pb::Reader r(body);
  while (!r.done()) {
    auto tag = r.varint();
    if (!tag) {
      return COLOD_ERR(EPROTO, "ttrpc.Response: truncated tag");
    }
    auto field = *tag >> 3;
    auto wt = static_cast<uint32_t>(*tag & 7);
    if (wt == pb::kLen && field == 1) {
      auto b = r.bytes();
      if (!b) {
        return COLOD_ERR(EPROTO, "ttrpc.Response: truncated status");
      }
      pb::Reader s(*b);
      while (!s.done()) {
        auto t = s.varint();
        if (!t) {
          return COLOD_ERR(EPROTO, "google.rpc.Status: truncated tag");
        }
        auto f = *t >> 3;
        auto w = static_cast<uint32_t>(*t & 7);
        if (w == pb::kVarint && f == 1) {
          auto v = s.varint();
          if (!v) {
            return COLOD_ERR(EPROTO, "google.rpc.Status: truncated code");
          }
          resp.status.code = static_cast<int32_t>(*v);
        } else if (w == pb::kLen && f == 2) {
          auto m = s.bytes();
          if (!m) {
            return COLOD_ERR(EPROTO, "google.rpc.Status: truncated message");
          }
          resp.status.message = toString(*m);
        } else if (!s.skip(w)) {  // details (field 3) and anything newer
          return COLOD_ERR(EPROTO, "google.rpc.Status: malformed field ", f);
        }
      }
    } else if (wt == pb::kLen && field == 2) {
      auto b = r.bytes();
      if (!b) {
        return COLOD_ERR(EPROTO, "ttrpc.Response: truncated payload");
      }
      resp.payload = *b;
    } else if (!r.skip(wt)) {
      return COLOD_ERR(EPROTO, "ttrpc.Response: malformed field ", field);
    }
  }
  return resp;
}

std::vector<std::byte> encodeResponse(const Status& status, std::span<const std::byte> payload) {
  std::vector<std::byte> out;
  if (!status.ok()) {
    std::vector<std::byte> st;
    pb::putTag(st, 1, pb::kVarint);
    // int32 is sign-extended to 64 bits on the wire (protobuf rule for negative int32).
    pb::putVarint(st, static_cast<uint64_t>(static_cast<int64_t>(status.code)));
    if (!status.message.empty()) {
      pb::putString(st, 2, status.message);
    }
    pb::putBytes(out, 1, st);
    return out;  // an error reply carries no payload (Go's unaryCall)
  }
  if (!payload.empty()) {
    out.reserve(payload.size() + 6);
    pb::putBytes(out, 2, payload);
  }
  return out;
}

void TtrpcMessage::own() {
  if (is_borrowed) {
    owned.assign(borrowed.begin(), borrowed.end());
    borrowed = {};
    is_borrowed = false;
  }
}

// ---------------------------------------------------------------------------------------------
Result<void> TtrpcDecoder::feed(std::span<const std::byte> data, const Emit& emit) {
  while (!data.empty()) {
    if (!in_body_ && header_fill_ == 0 && data.size() >= kTtrpcHeaderSize) {
      // The common case: a whole message in this piece. Emit it where it lies.
      auto h = decodeHeader(data);
      if (!h) {
        return std::move(h).error();
      }
      if (h->length <= max_message_ && data.size() - kTtrpcHeaderSize >= h->length) {
        TtrpcMessage m;
        m.header = *h;
        m.borrowed = data.subspan(kTtrpcHeaderSize, h->length);
        m.is_borrowed = true;
        if (stamp_first_byte_) {
          m.first_byte = std::chrono::steady_clock::now();
        }
        data = data.subspan(kTtrpcHeaderSize + h->length);
        if (auto r = emit(std::move(m)); !r) {
          return r;
        }
        continue;
      }
    }
    if (!in_body_) {
      if (header_fill_ == 0) {
        current_ = TtrpcMessage{};
        current_.owned = std::move(spare_);
        current_.owned.clear();
        spare_ = {};
        if (stamp_first_byte_) {
          current_.first_byte = std::chrono::steady_clock::now();
        }
      }
      std::size_t take = std::min(kTtrpcHeaderSize - header_fill_, data.size());
      std::memcpy(header_.data() + header_fill_, data.data(), take);
      header_fill_ += take;
      data = data.subspan(take);
      if (header_fill_ < kTtrpcHeaderSize) {
        break;
      }
      header_fill_ = 0;
      auto h = decodeHeader(header_);
      if (!h) {
        return std::move(h).error();
      }
      current_.header = *h;
      remaining_ = h->length;
      // Bounds first: the length is checked before anything is allocated.
      current_.oversized = h->length > max_message_;
      if (!current_.oversized) {
        current_.owned.reserve(h->length);
      }
      in_body_ = true;
    }
    std::size_t take = std::min(remaining_, data.size());
    if (!current_.oversized) {
      current_.owned.insert(current_.owned.end(), data.begin(),
                            data.begin() + static_cast<std::ptrdiff_t>(take));
    }
    remaining_ -= take;
    data = data.subspan(take);
    if (remaining_ == 0) {
      in_body_ = false;
      auto r = emit(std::move(current_));
      current_ = TtrpcMessage{};
      if (!r) {
        return r;
      }
    }
  }
  return ok();
}

void TtrpcDecoder::recycle(std::vector<std::byte>&& body) {
  if (body.capacity() <= kRecycleMax && body.capacity() > spare_.capacity()) {
    spare_ = std::move(body);
  }
}

// ---------------------------------------------------------------------------------------------
TtrpcServer::TtrpcServer(SendFn send, ServerOptions options)
    : send_(std::move(send)), options_(std::move(options)), decoder_(options_.max_message) {}

TtrpcServer::~TtrpcServer() { stop(); }

void TtrpcServer::registerMethod(std::string service,
                                 std::string method,
                                 Handler handler,
                                 Execution execution) {
  services_[std::move(service)][std::move(method)] = Method{std::move(handler), execution};
}

void TtrpcServer::start() {
  std::lock_guard lock(mu_);
  stopping_ = false;
  if (!worker_.joinable()) {
    worker_ = std::thread([this] { workerLoop(); });
  }
}

void TtrpcServer::stop() {
  {
    std::lock_guard lock(mu_);
    stopping_ = true;
    queue_.clear();
  }
  cv_.notify_all();
  if (worker_.joinable() && worker_.get_id() != std::this_thread::get_id()) {
    worker_.join();
  }
}

bool TtrpcServer::onWorkerThread() { return t_on_server_worker; }

Result<void> TtrpcServer::onBytes(std::span<const std::byte> data) {
  return decoder_.feed(data, [this](TtrpcMessage&& m) { return dispatch(std::move(m)); });
}

namespace {
// Marks the current thread as running a server handler (inline on the reader thread).
class InHandler {
 public:
  InHandler() : prev_(t_on_server_worker) { t_on_server_worker = true; }
  ~InHandler() { t_on_server_worker = prev_; }
  InHandler(const InHandler&) = delete;
  InHandler& operator=(const InHandler&) = delete;
  InHandler(InHandler&&) = delete;
  InHandler& operator=(InHandler&&) = delete;

 private:
  bool prev_;
};
}  // namespace

Result<void> TtrpcServer::dispatch(TtrpcMessage&& msg) {
  if (msg.header.type != static_cast<uint8_t>(MessageType::Request)) {
    return ok();  // Go servers ignore other message types on a server connection
  }
  // Stream-id rules of the Go server (brief §2.2), applied in arrival order on this thread.
  const uint32_t stream = msg.header.stream_id;
  if (!msg.oversized) {
    if (stream % 2 == 0) {
      reply(stream,
            {status_code::kInvalidArgument, "StreamID must be odd for client initiated streams"},
            {}, msg, "", "");
      return ok();
    }
    if (stream <= last_stream_) {
      reply(stream, {status_code::kInvalidArgument, "StreamID cannot be re-used and must increment"},
            {}, msg, "", "");
      return ok();
    }
    last_stream_ = stream;
  }
  // An inline method's call is decoded and looked up once, here; anything else is left to
  // serve(), which reports what is wrong with it.
  bool run_inline = false;
  RequestFields fields;
  std::string_view service_name;
  std::string_view method_name;
  const Method* method = nullptr;
  if (!msg.oversized) {
    if (auto req = decodeRequestFields(msg.body(), /*metadata=*/nullptr)) {
      if (auto svc = services_.find(req->service); svc != services_.end()) {
        if (auto m = svc->second.find(req->method);
            m != svc->second.end() && m->second.execution == Execution::Inline) {
          run_inline = true;
          fields = *req;
          service_name = svc->first;
          method_name = m->first;
          method = &m->second;
        }
      }
    }
  }
  {
    std::lock_guard lock(mu_);
    if (stopping_) {
      return ok();
    }
    if (!run_inline || worker_busy_ || !queue_.empty()) {
      msg.own();  // it outlives this read
      queue_.push_back(std::move(msg));
      run_inline = false;
    }
  }
  if (!run_inline) {
    cv_.notify_one();
    return ok();
  }
  {
    InHandler in_handler;
    invoke(msg, service_name, method_name, *method, fields.payload, fields.timeout_nano);
  }
  decoder_.recycle(std::move(msg.owned));
  return ok();
}

void TtrpcServer::workerLoop() {
  t_on_server_worker = true;
  std::unique_lock lock(mu_);
  for (;;) {
    cv_.wait(lock, [this] { return stopping_ || !queue_.empty(); });
    if (stopping_) {
      return;
    }
    TtrpcMessage msg = std::move(queue_.front());
    queue_.pop_front();
    worker_busy_ = true;
    lock.unlock();
    serve(msg);
    lock.lock();
    worker_busy_ = false;
  }
}

void TtrpcServer::reply(uint32_t stream,
                        const Status& status,
                        std::span<const std::byte> payload,
                        const TtrpcMessage& req,
                        std::string_view service,
                        std::string_view method) {
  // The common case (OK with a payload) goes out without building the envelope in a buffer:
  // the ttrpc header and the Response field-2 prefix on the stack, the payload as-is.
  std::array<std::byte, kTtrpcHeaderSize + 1 + pb::kMaxVarint> head{};
  std::size_t head_len = kTtrpcHeaderSize;
  std::vector<std::byte> err_body;
  std::span<const std::byte> body = payload;
  std::size_t length = 0;
  if (status.ok()) {
    if (!payload.empty()) {
      // Field 2's tag and varint length.
      std::size_t at = kTtrpcHeaderSize;
      head[at++] = static_cast<std::byte>((2U << 3) | pb::kLen);
      at += pb::writeVarint(head.data() + at, payload.size());
      head_len = at;
      length = (at - kTtrpcHeaderSize) + payload.size();
    }
  } else {
    err_body = encodeResponse(status, {});
    body = err_body;
    length = err_body.size();
  }
  auto h = encodeHeader({.length = static_cast<uint32_t>(length),
                         .stream_id = stream,
                         .type = static_cast<uint8_t>(MessageType::Response),
                         .flags = 0});
  std::memcpy(head.data(), h.data(), h.size());
  // A failed send means the trunk is gone; the mux reports that through its close callback.
  const bool sent = send_(std::span<const std::byte>(head.data(), head_len), body, {}).has_value();
  if (options_.on_served) {
    options_.on_served({.service = service,
                        .method = method,
                        .code = status.code,
                        .first_byte = req.first_byte,
                        .replied = std::chrono::steady_clock::now(),
                        .request_bytes = req.header.length,
                        .sent = sent});
  }
}

namespace {
int32_t codeFor(const Error& e) {
  switch (e.errnoValue()) {
    case ENOSYS:
      return status_code::kUnimplemented;
    case ETIMEDOUT:
      return status_code::kDeadlineExceeded;
    case EINVAL:
    case EPROTO:
      return status_code::kInvalidArgument;
    default:
      return status_code::kUnknown;
  }
}
}  // namespace

void TtrpcServer::serve(TtrpcMessage& msg) {
  const uint32_t stream = msg.header.stream_id;
  if (msg.oversized) {
    reply(stream,
          {status_code::kResourceExhausted,
           "message length " + std::to_string(msg.header.length) +
               " exceed maximum message size of " + std::to_string(options_.max_message)},
          {}, msg, "", "");
    return;
  }
  auto req = decodeRequestFields(msg.body(), /*metadata=*/nullptr);
  if (!req) {
    reply(stream, {status_code::kInvalidArgument, req.error().message()}, {}, msg, "", "");
    return;
  }
  auto svc = services_.find(req->service);
  if (svc == services_.end()) {
    reply(stream, {status_code::kUnimplemented, "service " + std::string(req->service)}, {}, msg,
          "", "");
    return;
  }
  auto m = svc->second.find(req->method);
  if (m == svc->second.end()) {
    reply(stream, {status_code::kUnimplemented, "method " + std::string(req->method)}, {}, msg,
          "", "");
    return;
  }
  invoke(msg, svc->first, m->first, m->second, req->payload, req->timeout_nano);
}

void TtrpcServer::invoke(const TtrpcMessage& msg,
                         std::string_view service,
                         std::string_view method,
                         const Method& m,
                         std::span<const std::byte> payload,
                         int64_t timeout_nano) {
  const uint32_t stream = msg.header.stream_id;
  CallContext ctx{.service = service, .method = method, .stream_id = stream,
                  .deadline = std::nullopt, .received = msg.first_byte};
  if (timeout_nano > 0) {
    ctx.deadline = msg.first_byte + std::chrono::nanoseconds(timeout_nano);
    if (std::chrono::steady_clock::now() >= *ctx.deadline) {
      // The client has given up already; don't run work nobody waits for.
      reply(stream, {status_code::kDeadlineExceeded, "deadline exceeded before the call ran"}, {},
            msg, service, method);
      return;
    }
  }
  auto result = m.handler(ctx, payload);
  if (!result) {
    reply(stream, {codeFor(result.error()), result.error().message()}, {}, msg, service, method);
    return;
  }
  reply(stream, {}, *result, msg, service, method);
}

// ---------------------------------------------------------------------------------------------
TtrpcClient::TtrpcClient(SendFn send, uint32_t max_message, CallerReads* caller_reads)
    : send_(std::move(send)),
      decoder_(max_message, /*stamp_first_byte=*/false),
      caller_reads_(caller_reads) {}

Result<void> TtrpcClient::onBytes(std::span<const std::byte> data) {
  return decoder_.feed(data, [this](TtrpcMessage&& m) -> Result<void> {
    if (m.header.type != static_cast<uint8_t>(MessageType::Response)) {
      return ok();
    }
    {
      std::lock_guard lock(mu_);
      Slot* slot = takePendingLocked(m.header.stream_id);
      if (slot == nullptr) {
        return ok();  // a late reply for an abandoned call
      }
      if (m.oversized) {
        slot->error = COLOD_ERR(EMSGSIZE, "response of ", m.header.length,
                                " bytes exceeds the maximum message size");
      } else {
        auto resp = decodeResponse(m.body());
        if (!resp) {
          slot->error = std::move(resp).error();
        } else {
          slot->reply.status = std::move(resp->status);
          slot->reply.payload.assign(resp->payload.begin(), resp->payload.end());
        }
      }
      slot->done = true;
    }
    cv_.notify_all();
    return ok();
  });
}

TtrpcClient::Slot* TtrpcClient::takePendingLocked(uint32_t stream) {
  for (auto it = pending_.begin(); it != pending_.end(); ++it) {
    if (it->first == stream) {
      Slot* slot = it->second;
      *it = pending_.back();
      pending_.pop_back();
      return slot;
    }
  }
  return nullptr;
}

void TtrpcClient::fail(const Error& err) {
  {
    std::lock_guard lock(mu_);
    if (!failed_) {
      failed_ = err;
    }
    for (auto& [id, slot] : pending_) {
      slot->error = err;
      slot->done = true;
    }
    pending_.clear();
  }
  cv_.notify_all();
}

namespace {
// Holds a trunk's reader role for one call; gives it back on every way out.
class LeadGuard {
 public:
  explicit LeadGuard(CallerReads& reads) : reads_(reads) {}
  ~LeadGuard() { reads_.unlead(); }
  LeadGuard(const LeadGuard&) = delete;
  LeadGuard& operator=(const LeadGuard&) = delete;
  LeadGuard(LeadGuard&&) = delete;
  LeadGuard& operator=(LeadGuard&&) = delete;

 private:
  CallerReads& reads_;
};

// Requests up to this size are sent with the reader role already held. The socket buffer takes
// them whole, so the send cannot block waiting for a peer that waits for us to read; a larger
// request is sent first and the role taken after.
constexpr std::size_t kLeadBeforeSendMax = std::size_t{64} << 10;
// A thread keeps envelope buffers up to this capacity from call to call.
constexpr std::size_t kKeepEnvelope = 4096;
}  // namespace

Result<TtrpcClient::Reply> TtrpcClient::call(std::string_view service,
                                             std::string_view method,
                                             std::span<const std::byte> payload,
                                             std::optional<std::chrono::nanoseconds> timeout) {
  if (CallerReads::readingOnThisThread()) {
    return COLOD_ERR(EDEADLK, service, "/", method,
                     " called from the thread that reads the trunk: its reply could never be read");
  }
  const int64_t timeout_nano = timeout ? std::max<int64_t>(1, timeout->count()) : 0;
  // The envelope around the payload is encoded into this thread's buffers, reused from call to
  // call (no allocation per call); the payload goes out from where the caller keeps it. `head`
  // starts with room for the ttrpc header, written once the stream id is known.
  thread_local std::vector<std::byte> t_head;
  thread_local std::vector<std::byte> t_tail;
  std::vector<std::byte>& head = t_head;
  head.assign(kTtrpcHeaderSize, std::byte{0});
  t_tail.clear();
  encodeRequestAround(head, t_tail, service, method, payload.size(), timeout_nano);
  struct Trim {
    std::vector<std::byte>& b;
    ~Trim() {
      if (b.capacity() > kKeepEnvelope) {  // a call with an outsized service or method name
        std::vector<std::byte>().swap(b);
      }
    }
  } trim{head};
  const std::size_t body_size = head.size() - kTtrpcHeaderSize + payload.size() + t_tail.size();
  if (body_size > kTtrpcMaxMessage) {
    return COLOD_ERR(EMSGSIZE, "request ", service, "/", method, " of ", body_size,
                     " bytes exceeds the maximum message size");
  }
  const auto deadline = std::chrono::steady_clock::now() + timeout.value_or(std::chrono::nanoseconds(0));
  std::optional<std::chrono::steady_clock::time_point> until;
  if (timeout) {
    until = deadline;
  }
  // Read our own reply when nobody else reads the trunk. The role is taken before the request
  // goes out: taken after, a reply that came first (the peer may run before we get back from
  // sendmsg) would wake the mux's reader thread to hand it over -- the switch this saves.
  std::optional<LeadGuard> lead;
  if (caller_reads_ != nullptr && body_size <= kLeadBeforeSendMax && caller_reads_->tryLead()) {
    lead.emplace(*caller_reads_);
  }
  // The slot lives here: whoever completes it (onBytes, fail) does so under mu_ and forgets it,
  // and every way out of this function either finds it done or takes it out of pending_ first.
  Slot slot;
  uint32_t stream = 0;
  {
    std::lock_guard send_lock(send_mu_);
    {
      std::lock_guard lock(mu_);
      if (failed_) {
        return failed_->wrap(std::string(method));
      }
      stream = next_stream_;
      next_stream_ += 2;
      pending_.emplace_back(stream, &slot);
    }
    auto h = encodeHeader({.length = static_cast<uint32_t>(body_size),
                           .stream_id = stream,
                           .type = static_cast<uint8_t>(MessageType::Request),
                           .flags = 0});
    std::memcpy(head.data(), h.data(), h.size());
    auto sent = send_(head, payload, t_tail);
    if (!sent) {
      std::lock_guard lock(mu_);
      takePendingLocked(stream);
      return std::move(sent).error().wrap(std::string(method));
    }
  }
  // A large request, or a small one whose first try found another reader: take the role now if
  // it is free.
  if (!lead && caller_reads_ != nullptr && caller_reads_->tryLead()) {
    lead.emplace(*caller_reads_);
  }
  if (lead) {
    // Whatever arrives is dispatched on this thread: our reply, other callers' replies (which
    // wakes them), and the trunk's other sinks.
    for (;;) {
      {
        std::lock_guard lock(mu_);
        if (slot.done) {
          break;
        }
      }
      auto r = caller_reads_->leadRead(until);
      if (!r) {
        std::lock_guard lock(mu_);
        if (slot.done) {
          break;  // the failure came after our reply was delivered
        }
        takePendingLocked(stream);
        if (r.error().code() == std::errc::timed_out) {
          return COLOD_ERR(ETIMEDOUT, service, "/", method, " got no reply in time");
        }
        return std::move(r).error().wrap(std::string(method));
      }
    }
  }
  std::unique_lock lock(mu_);
  if (!lead) {
    // Another thread reads the trunk: it delivers the reply (onBytes) and wakes us.
    if (!timeout) {
      cv_.wait(lock, [&] { return slot.done; });
    } else if (!cv_.wait_until(lock, deadline, [&] { return slot.done; })) {
      takePendingLocked(stream);
      return COLOD_ERR(ETIMEDOUT, service, "/", method, " got no reply in time");
    }
  }
  if (slot.error) {
    return slot.error->wrap(std::string(method));
  }
  return std::move(slot.reply);
}

}  // namespace colod::nri::wire
