// SPDX-License-Identifier: Apache-2.0
#include "colod/nri/mux.h"

#include <poll.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <unistd.h>

#include <array>
#include <cerrno>
#include <cstdint>
#include <cstring>

namespace colod::nri::wire {

uint32_t readBe32(std::span<const std::byte> in) {
  return (std::to_integer<uint32_t>(in[0]) << 24) | (std::to_integer<uint32_t>(in[1]) << 16) |
         (std::to_integer<uint32_t>(in[2]) << 8) | std::to_integer<uint32_t>(in[3]);
}

void writeBe32(std::span<std::byte> out, uint32_t v) {
  out[0] = static_cast<std::byte>(v >> 24);
  out[1] = static_cast<std::byte>(v >> 16);
  out[2] = static_cast<std::byte>(v >> 8);
  out[3] = static_cast<std::byte>(v);
}

namespace {

// The §1.5(b) plan: sizes of the frames one message of `total` bytes is sent as.
std::array<std::size_t, 2> framePlan(std::size_t total) {
  if (total <= kGoReadBuffer) {
    return {total, 0};
  }
  return {kGoReadBuffer, total - kGoReadBuffer};
}

std::array<std::byte, kMuxHeaderSize> muxHeader(uint32_t conn, std::size_t len) {
  std::array<std::byte, kMuxHeaderSize> h{};
  writeBe32(std::span(h).first<4>(), conn);
  writeBe32(std::span(h).subspan<4, 4>(), static_cast<uint32_t>(len));
  return h;
}

}  // namespace

std::vector<std::byte> encodeMuxFrames(uint32_t conn, std::span<const std::byte> message) {
  std::vector<std::byte> out;
  std::size_t off = 0;
  for (std::size_t len : framePlan(message.size())) {
    if (len == 0) {
      continue;  // never a zero-length frame
    }
    auto h = muxHeader(conn, len);
    out.insert(out.end(), h.begin(), h.end());
    auto part = message.subspan(off, len);
    out.insert(out.end(), part.begin(), part.end());
    off += len;
  }
  return out;
}

Result<bool> MuxDecoder::takeHeader(std::span<const std::byte>& data) {
  std::size_t take = std::min(kMuxHeaderSize - header_fill_, data.size());
  std::memcpy(header_ + header_fill_, data.data(), take);
  header_fill_ += take;
  data = data.subspan(take);
  if (header_fill_ < kMuxHeaderSize) {
    return false;
  }
  header_fill_ = 0;
  conn_ = readBe32(std::span<const std::byte>(header_, 4));
  std::size_t len = readBe32(std::span<const std::byte>(header_ + 4, 4));
  if (len > max_frame_) {
    failed_ = true;
    return COLOD_ERR(EMSGSIZE, "mux frame of ", len, " bytes on conn ", conn_,
                     " exceeds the limit of ", max_frame_);
  }
  // A zero-length frame carries nothing; tolerate it (Go never sends one).
  remaining_ = len;
  return true;
}

Result<void> MuxDecoder::feed(std::span<const std::byte> data, const Sink& sink) {
  if (failed_) {
    return COLOD_ERR(EPROTO, "mux decoder already failed");
  }
  while (!data.empty()) {
    if (remaining_ == 0) {
      auto h = takeHeader(data);
      if (!h) {
        return std::move(h).error();
      }
      continue;
    }
    std::size_t take = std::min(remaining_, data.size());
    remaining_ -= take;
    auto r = sink(conn_, data.first(take));
    data = data.subspan(take);
    if (!r) {
      failed_ = true;
      return std::move(r).error().wrap("mux conn " + std::to_string(conn_));
    }
  }
  return ok();
}

Result<void> MuxDecoder::feedInPlace(std::span<std::byte> data, const Sink& sink) {
  if (failed_) {
    return COLOD_ERR(EPROTO, "mux decoder already failed");
  }
  // The run: payload of one conn gathered so far, not yet given to the sink.
  std::byte* run = nullptr;
  std::size_t run_len = 0;
  uint32_t run_conn = 0;
  auto flush = [&]() -> Result<void> {
    if (run_len == 0) {
      return ok();
    }
    auto r = sink(run_conn, std::span<const std::byte>(run, run_len));
    run_len = 0;
    if (!r) {
      failed_ = true;
      return std::move(r).error().wrap("mux conn " + std::to_string(run_conn));
    }
    return ok();
  };
  std::byte* p = data.data();
  std::byte* const end = data.data() + data.size();
  while (p != end) {
    if (remaining_ == 0) {
      std::span<const std::byte> rest(p, end);
      auto h = takeHeader(rest);
      p = const_cast<std::byte*>(rest.data());  // NOLINT: rest is a view of our own `data`
      if (!h) {
        // What came before the bad header is delivered first, as feed() would have.
        if (auto f = flush(); !f) {
          return f;
        }
        return std::move(h).error();
      }
      if (*h && run_len > 0 && conn_ != run_conn) {
        if (auto f = flush(); !f) {
          return f;
        }
      }
      continue;
    }
    std::size_t take = std::min(remaining_, static_cast<std::size_t>(end - p));
    remaining_ -= take;
    if (std::byte* joint = run + run_len; run_len > 0 && joint != p) {
      // A header sits between the run and this payload: close the gap by moving the smaller
      // side, unless both are large (not the Go split): then the layer above reassembles them.
      const auto gap = static_cast<std::size_t>(p - joint);
      if (std::min(take, run_len) > kGoReadBuffer) {
        if (auto f = flush(); !f) {
          return f;
        }
      } else if (take <= run_len) {
        std::memmove(joint, p, take);
      } else {
        std::memmove(run + gap, run, run_len);
        run += gap;
      }
    }
    if (run_len == 0) {
      run = p;
      run_conn = conn_;
    }
    run_len += take;
    p += take;
  }
  return flush();
}

namespace {

// How often a caller holding the reader role wakes to check its deadline (SO_RCVTIMEO): reply
// deadlines are met to within this. NRI calls have deadlines of seconds.
constexpr std::chrono::milliseconds kLeadReadQuantum{10};
// Messages up to this size are sent from one contiguous buffer (Mux::send).
constexpr std::size_t kContiguousMax = std::size_t{64} << 10;
// A copy whose destination is 1..63 bytes past its source modulo 4096 is the slow case.
constexpr std::size_t kAliasShift = 64;
// How long the socket stays disarmed after the last caller gave the reader role back, give or
// take one more such wait: what a peer's request arriving between calls may wait to be read
// (NRI allows 2 s for an answer).
constexpr std::chrono::milliseconds kLinger{1};
constexpr uint64_t kSocketTag = 1;
constexpr uint64_t kStopTag = 2;

// The trunk whose reader role this thread holds as a caller (close() must not join from there),
// and whether it holds any reader role (the reader thread holds one for its whole life).
thread_local const Mux* t_leading_mux = nullptr;
thread_local bool t_reading = false;

}  // namespace

bool CallerReads::readingOnThisThread() { return t_reading; }

Mux::Mux(UniqueFd fd, MuxOptions options)
    : fd_(std::move(fd)),
      options_(options),
      decoder_(options_.max_frame),
      sink_([this](uint32_t conn, std::span<const std::byte> payload) -> Result<void> {
        for (auto& [id, fn] : sinks_) {
          if (id == conn) {
            return fn(payload);
          }
        }
        return ok();  // unknown conn id: dropped, as the Go reader does
      }) {
  struct stat st {};
  is_socket_ = ::fstat(fd_.get(), &st) == 0 && S_ISSOCK(st.st_mode);
  if (is_socket_ && options_.send_timeout.count() > 0) {
    timeval tv{};
    tv.tv_sec = static_cast<time_t>(options_.send_timeout.count() / 1000);
    tv.tv_usec = static_cast<suseconds_t>((options_.send_timeout.count() % 1000) * 1000);
    // Best effort: without it a stalled peer could block send() forever, which is what the
    // timeout is for; a failure here leaves the default (blocking) behaviour.
    (void)::setsockopt(fd_.get(), SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
  }
}

Mux::~Mux() { close(); }

void Mux::open(uint32_t conn, ConnSink sink) { sinks_.emplace_back(conn, std::move(sink)); }

void Mux::onClose(CloseFn fn) { on_close_ = std::move(fn); }

Result<void> Mux::start() {
  if (!fd_.valid()) {
    return COLOD_ERR(EBADF, "mux has no socket");
  }
  buf_.resize(options_.read_buffer);
  callers_read_ = options_.caller_reads && is_socket_;
  if (!callers_read_) {
    reader_ = std::thread([this] { readLoop(); });
    return ok();
  }
  epoll_fd_ = UniqueFd(::epoll_create1(EPOLL_CLOEXEC));
  if (!epoll_fd_.valid()) {
    return COLOD_ERR(errno, "creating the NRI trunk's epoll instance");
  }
  stop_fd_ = UniqueFd(::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK));
  if (!stop_fd_.valid()) {
    return COLOD_ERR(errno, "creating the NRI trunk's stop eventfd");
  }
  epoll_event sock_ev{};
  sock_ev.events = EPOLLIN;
  sock_ev.data.u64 = kSocketTag;
  if (::epoll_ctl(epoll_fd_.get(), EPOLL_CTL_ADD, fd_.get(), &sock_ev) != 0) {
    return COLOD_ERR(errno, "watching the NRI trunk with epoll");
  }
  epoll_event stop_ev{};
  stop_ev.events = EPOLLIN;
  stop_ev.data.u64 = kStopTag;
  if (::epoll_ctl(epoll_fd_.get(), EPOLL_CTL_ADD, stop_fd_.get(), &stop_ev) != 0) {
    return COLOD_ERR(errno, "watching the NRI trunk's stop eventfd");
  }
  // A caller's blocking read wakes this often to check its deadline; the reader thread's own
  // reads never block (MSG_DONTWAIT after epoll said readable), so they are not affected.
  timeval tv{};
  tv.tv_usec = static_cast<suseconds_t>(
      std::chrono::duration_cast<std::chrono::microseconds>(kLeadReadQuantum).count());
  if (::setsockopt(fd_.get(), SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv) != 0) {
    return COLOD_ERR(errno, "setting the NRI trunk's receive timeout");
  }
  reader_ = std::thread([this] { watchLoop(); });
  return ok();
}

void Mux::finish(const Error& err) {
  closed_.store(true);
  if (!close_reported_.exchange(true) && on_close_) {
    on_close_(err);
  }
}

Result<bool> Mux::readOnce(bool dont_wait) {
  for (;;) {
    ssize_t n = is_socket_
                    ? ::recv(fd_.get(), buf_.data(), buf_.size(), dont_wait ? MSG_DONTWAIT : 0)
                    : ::read(fd_.get(), buf_.data(), buf_.size());
    if (n < 0) {
      int e = errno;
      if (e == EINTR) {
        continue;
      }
      if (e == EAGAIN || e == EWOULDBLOCK) {
        return false;
      }
      auto err = COLOD_ERR(e, "reading the NRI trunk");
      finish(err);
      return err;
    }
    if (n == 0) {
      auto err = decoder_.atBoundary()
                     ? COLOD_ERR(ECONNRESET, "NRI trunk closed by the peer")
                     : COLOD_ERR(EPROTO, "NRI trunk closed in the middle of a frame");
      finish(err);
      return err;
    }
    auto r = decoder_.feedInPlace(std::span(buf_.data(), static_cast<std::size_t>(n)), sink_);
    if (!r) {
      // The framing can no longer be trusted: drop the trunk so the owner reconnects.
      (void)::shutdown(fd_.get(), SHUT_RDWR);
      finish(r.error());
      return std::move(r).error();
    }
    return true;
  }
}

// The reader thread without caller reads: blocking reads, one after the other.
void Mux::readLoop() {
  t_reading = true;
  for (;;) {
    auto r = readOnce(false);
    if (!r) {
      return;
    }
    if (!*r) {
      // Only a non-blocking fd gets here (someone set O_NONBLOCK): wait instead of spinning.
      pollfd p{.fd = fd_.get(), .events = POLLIN, .revents = 0};
      (void)::poll(&p, 1, -1);
    }
  }
}

// The reader thread with caller reads. Waits in epoll until the socket is readable, then reads
// what is there under the role. While callers read, the socket's interest stays disarmed so their
// replies do not wake this thread too; it is disarmed by the first caller of a burst (which kicks
// this thread out of an unbounded wait) and re-armed here once nobody has held the role for a
// whole kLinger wait, so back-to-back calls cost no epoll_ctl. Bytes that arrive for nobody (a
// peer request between calls) are read by the next caller or, failing one, within 2 x kLinger
// (a wait in which a caller led is followed by one more).
void Mux::watchLoop() {
  t_reading = true;
  for (;;) {
    int timeout_ms = -1;
    {
      std::lock_guard lock(role_mu_);
      if (!armed_) {
        timeout_ms = static_cast<int>(kLinger.count());
        lead_seen_ = false;  // set again by any lead during the wait
      }
    }
    std::array<epoll_event, 2> evs{};
    int n = ::epoll_wait(epoll_fd_.get(), evs.data(), static_cast<int>(evs.size()), timeout_ms);
    if (n < 0) {
      int e = errno;
      if (e == EINTR) {
        continue;
      }
      finish(COLOD_ERR(e, "waiting for the NRI trunk"));
      return;
    }
    bool socket_event = false;
    for (int i = 0; i < n; ++i) {
      if (evs[static_cast<std::size_t>(i)].data.u64 == kSocketTag) {
        socket_event = true;
      } else {
        uint64_t count = 0;  // a kick or close(): drained so the level-triggered wait rests
        (void)!::read(stop_fd_.get(), &count, sizeof count);
      }
    }
    std::unique_lock lock(role_mu_);
    if (closed_.load()) {
      return;  // a caller saw the trunk fail; its close callback has run
    }
    if (!stopping_ && !socket_event) {
      // A kick or the linger's end: watch the socket again only if nobody read it meanwhile.
      if (!armed_ && !reading_ && !lead_seen_) {
        armLocked(true);  // level-triggered: bytes already there wake us at once
      }
      continue;
    }
    // The socket (or close()) while a caller holds the role: the wake raced with its tryLead(),
    // or was a hang-up (epoll reports those even when disarmed). Let it finish: it reads.
    role_cv_.wait(lock, [&] { return !reading_; });
    if (closed_.load()) {
      return;
    }
    const bool stop = stopping_;
    reading_ = true;
    lock.unlock();
    if (stop) {
      // close(): the socket is shut down, so reads return what is buffered, then EOF, which
      // reports the close like the peer's would. reading_ stays set: nobody reads again.
      for (;;) {
        auto r = readOnce(false);
        if (!r) {
          return;
        }
      }
    }
    auto r = readOnce(true);
    if (!r) {
      return;  // reading_ stays set: the trunk is done
    }
    lock.lock();
    reading_ = false;  // nobody waits for it: callers only try (tryLead), never wait
  }
}

void Mux::armLocked(bool armed) {
  epoll_event ev{};
  ev.events = armed ? static_cast<uint32_t>(EPOLLIN) : 0U;
  ev.data.u64 = kSocketTag;
  // Cannot fail for a registered fd short of the kernel running out of memory. If it did,
  // armed_ keeps the state the socket is really in: a failed disarm costs wake-ups (the reader
  // thread finds the role held and waits for it), a failed re-arm is tried again after the next
  // linger.
  if (::epoll_ctl(epoll_fd_.get(), EPOLL_CTL_MOD, fd_.get(), &ev) == 0) {
    armed_ = armed;
  }
}

bool Mux::tryLead() {
  if (!callers_read_) {
    return false;
  }
  std::lock_guard lock(role_mu_);
  if (reading_ || stopping_ || closed_.load()) {
    return false;
  }
  reading_ = true;
  lead_seen_ = true;
  if (armed_) {
    // The first call of a burst: stop the reader thread watching, and move it from its unbounded
    // wait to the lingering one that re-arms after the burst.
    armLocked(false);
    uint64_t one = 1;
    (void)!::write(stop_fd_.get(), &one, sizeof one);
  }
  t_leading_mux = this;
  t_reading = true;
  return true;
}

Result<void> Mux::leadRead(std::optional<std::chrono::steady_clock::time_point> deadline) {
  for (;;) {
    // Blocks for at most kLeadReadQuantum (SO_RCVTIMEO), then reports "would block".
    auto r = readOnce(false);
    if (!r) {
      return std::move(r).error();
    }
    if (*r) {
      return ok();
    }
    if (deadline && std::chrono::steady_clock::now() >= *deadline) {
      return COLOD_ERR(ETIMEDOUT, "nothing arrived on the NRI trunk before the deadline");
    }
  }
}

void Mux::unlead() {
  {
    std::lock_guard lock(role_mu_);
    reading_ = false;
    // The socket stays disarmed: the reader thread, in its lingering wait, re-arms it once no
    // call has come for kLinger (and sees a failed trunk then, or at once from a hang-up).
  }
  role_cv_.notify_all();
  t_leading_mux = nullptr;
  t_reading = false;
}

Result<void> Mux::send(uint32_t conn,
                       std::span<const std::byte> head,
                       std::span<const std::byte> body,
                       std::span<const std::byte> tail) {
  const std::array<std::span<const std::byte>, 3> pieces{head, body, tail};
  const std::size_t total = head.size() + body.size() + tail.size();
  if (total == 0) {
    return ok();
  }
  if (total > options_.max_frame + kGoReadBuffer) {
    return COLOD_ERR(EMSGSIZE, "message of ", total, " bytes is too large to send");
  }
  // Build the iovecs of both frames (header, then the slices of the pieces it holds) without
  // copying payload: at most 2 headers + 3 pieces + 1 piece cut by the frame boundary.
  auto plan = framePlan(total);
  std::array<std::array<std::byte, kMuxHeaderSize>, 2> hdrs{};
  std::array<iovec, 8> iov{};
  int niov = 0;
  auto add = [&](const std::byte* p, std::size_t len) {
    if (len > 0) {
      // iovec wants a non-const pointer; sendmsg/writev never write through it.
      iov[static_cast<std::size_t>(niov)].iov_base = const_cast<std::byte*>(p);  // NOLINT
      iov[static_cast<std::size_t>(niov)].iov_len = len;
      ++niov;
    }
  };
  std::size_t piece = 0;
  std::size_t in_piece = 0;  // bytes of pieces[piece] already planned
  for (std::size_t f = 0; f < plan.size(); ++f) {
    std::size_t len = plan[f];
    if (len == 0) {
      continue;
    }
    hdrs[f] = muxHeader(conn, len);
    add(hdrs[f].data(), kMuxHeaderSize);
    while (len > 0) {
      const std::size_t take = std::min(len, pieces[piece].size() - in_piece);
      add(pieces[piece].data() + in_piece, take);
      in_piece += take;
      len -= take;
      if (in_piece == pieces[piece].size()) {
        ++piece;
        in_piece = 0;
      }
    }
  }

  // A message up to kContiguousMax is gathered into this thread's frame buffer and written with
  // one send(): cheaper than sendmsg() over five iovecs, copy included (docs/benchmarks.md, nri).
  if (is_socket_ && total <= kContiguousMax) {
    thread_local std::vector<std::byte> t_frames;
    if (t_frames.empty()) {
      t_frames.resize(kContiguousMax + 2 * kMuxHeaderSize + kAliasShift);
    }
    std::byte* out = t_frames.data();
    if (!body.empty()) {
      // Where the body's first byte lands: if that is just past its source modulo 4096, the copy
      // (rep movsb) runs several times slower (4K aliasing); start the frames further on then.
      std::size_t at = 0;
      for (int i = 0; i < niov && iov[static_cast<std::size_t>(i)].iov_base != body.data(); ++i) {
        at += iov[static_cast<std::size_t>(i)].iov_len;
      }
      const auto gap = (reinterpret_cast<std::uintptr_t>(out + at) -  // NOLINT: address math
                        reinterpret_cast<std::uintptr_t>(body.data())) & 4095U;  // NOLINT
      if (gap != 0 && gap < kAliasShift) {
        out += kAliasShift;
      }
    }
    std::size_t len = 0;
    for (int i = 0; i < niov; ++i) {
      const auto& v = iov[static_cast<std::size_t>(i)];
      std::memcpy(out + len, v.iov_base, v.iov_len);
      len += v.iov_len;
    }
    iov[0] = iovec{.iov_base = out, .iov_len = len};
    niov = 1;
  }

  std::lock_guard lock(send_mu_);
  if (closed_.load()) {
    return COLOD_ERR(EPIPE, "NRI trunk is closed");
  }
  iovec* cur = iov.data();
  int left = niov;
  while (left > 0) {
    ssize_t n;
    // MSG_NOSIGNAL: a closed peer is an error value, not a SIGPIPE.
    if (is_socket_ && left == 1) {
      n = ::send(fd_.get(), cur->iov_base, cur->iov_len, MSG_NOSIGNAL);
    } else if (is_socket_) {
      msghdr mh{};
      mh.msg_iov = cur;
      mh.msg_iovlen = static_cast<std::size_t>(left);
      n = ::sendmsg(fd_.get(), &mh, MSG_NOSIGNAL);
    } else {
      n = ::writev(fd_.get(), cur, left);
    }
    if (n < 0) {
      int e = errno;
      if (e == EINTR) {
        continue;
      }
      if (e == EAGAIN || e == EWOULDBLOCK) {
        // The peer stopped reading for send_timeout; a half-written message would corrupt the
        // stream anyway, so the trunk is done.
        (void)::shutdown(fd_.get(), SHUT_RDWR);
      }
      return COLOD_ERR(e, "writing to the NRI trunk");
    }
    // Advance over what was written (short writes).
    auto done = static_cast<std::size_t>(n);
    while (left > 0 && done >= cur->iov_len) {
      done -= cur->iov_len;
      ++cur;
      --left;
    }
    if (left > 0) {
      cur->iov_base = static_cast<std::byte*>(cur->iov_base) + done;
      cur->iov_len -= done;
    }
  }
  return ok();
}

void Mux::close() {
  if (fd_.valid()) {
    (void)::shutdown(fd_.get(), SHUT_RDWR);
  }
  if (stop_fd_.valid()) {
    {
      std::lock_guard lock(role_mu_);
      stopping_ = true;
    }
    // The reader thread may be waiting with the socket disarmed; this wakes it regardless.
    uint64_t one = 1;
    (void)!::write(stop_fd_.get(), &one, sizeof one);
  }
  // Not from the reader thread or a caller holding the role (a sink or the close callback):
  // the reader thread waits for that role, so joining there would never return.
  if (reader_.joinable() && reader_.get_id() != std::this_thread::get_id() &&
      t_leading_mux != this) {
    reader_.join();
  }
  closed_.store(true);
}

}  // namespace colod::nri::wire
