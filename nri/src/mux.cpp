// SPDX-License-Identifier: Apache-2.0
#include "colod/nri/mux.h"

#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <unistd.h>

#include <array>
#include <cerrno>
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

Result<void> MuxDecoder::feed(std::span<const std::byte> data, const Sink& sink) {
  if (failed_) {
    return COLOD_ERR(EPROTO, "mux decoder already failed");
  }
  while (!data.empty()) {
    if (remaining_ == 0) {
      std::size_t take = std::min(kMuxHeaderSize - header_fill_, data.size());
      std::memcpy(header_ + header_fill_, data.data(), take);
      header_fill_ += take;
      data = data.subspan(take);
      if (header_fill_ < kMuxHeaderSize) {
        break;
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

Mux::Mux(UniqueFd fd, MuxOptions options) : fd_(std::move(fd)), options_(options) {
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
  reader_ = std::thread([this] { readLoop(); });
  return ok();
}

void Mux::finish(const Error& err) {
  closed_.store(true);
  if (!close_reported_.exchange(true) && on_close_) {
    on_close_(err);
  }
}

void Mux::readLoop() {
  MuxDecoder decoder(options_.max_frame);
  std::vector<std::byte> buf(options_.read_buffer);
  auto sink = [this](uint32_t conn, std::span<const std::byte> payload) -> Result<void> {
    for (auto& [id, fn] : sinks_) {
      if (id == conn) {
        return fn(payload);
      }
    }
    return ok();  // unknown conn id: dropped, as the Go reader does
  };
  for (;;) {
    ssize_t n = ::read(fd_.get(), buf.data(), buf.size());
    if (n < 0) {
      int e = errno;
      if (e == EINTR) {
        continue;
      }
      finish(COLOD_ERR(e, "reading the NRI trunk"));
      return;
    }
    if (n == 0) {
      if (decoder.atBoundary()) {
        finish(COLOD_ERR(ECONNRESET, "NRI trunk closed by the peer"));
      } else {
        finish(COLOD_ERR(EPROTO, "NRI trunk closed in the middle of a frame"));
      }
      return;
    }
    auto r = decoder.feed(std::span<const std::byte>(buf.data(), static_cast<std::size_t>(n)), sink);
    if (!r) {
      // The framing can no longer be trusted: drop the trunk so the owner reconnects.
      (void)::shutdown(fd_.get(), SHUT_RDWR);
      finish(r.error());
      return;
    }
  }
}

Result<void> Mux::send(uint32_t conn,
                       std::span<const std::byte> head,
                       std::span<const std::byte> body) {
  const std::size_t total = head.size() + body.size();
  if (total == 0) {
    return ok();
  }
  if (total > options_.max_frame + kGoReadBuffer) {
    return COLOD_ERR(EMSGSIZE, "message of ", total, " bytes is too large to send");
  }
  // Build the iovecs of both frames (header, head slice, body slice) without copying payload.
  auto plan = framePlan(total);
  std::array<std::array<std::byte, kMuxHeaderSize>, 2> hdrs{};
  std::array<iovec, 6> iov{};
  int niov = 0;
  std::size_t off = 0;  // offset into the concatenation head+body
  auto add = [&](const std::byte* p, std::size_t len) {
    if (len > 0) {
      // iovec wants a non-const pointer; sendmsg/writev never write through it.
      iov[static_cast<std::size_t>(niov)].iov_base = const_cast<std::byte*>(p);  // NOLINT
      iov[static_cast<std::size_t>(niov)].iov_len = len;
      ++niov;
    }
  };
  for (std::size_t f = 0; f < plan.size(); ++f) {
    std::size_t len = plan[f];
    if (len == 0) {
      continue;
    }
    hdrs[f] = muxHeader(conn, len);
    add(hdrs[f].data(), kMuxHeaderSize);
    std::size_t end = off + len;
    if (off < head.size()) {
      std::size_t e = std::min(end, head.size());
      add(head.data() + off, e - off);
    }
    if (end > head.size()) {
      std::size_t b0 = off > head.size() ? off - head.size() : 0;
      add(body.data() + b0, end - head.size() - b0);
    }
    off = end;
  }

  std::lock_guard lock(send_mu_);
  if (closed_.load()) {
    return COLOD_ERR(EPIPE, "NRI trunk is closed");
  }
  iovec* cur = iov.data();
  int left = niov;
  while (left > 0) {
    ssize_t n;
    if (is_socket_) {
      msghdr mh{};
      mh.msg_iov = cur;
      mh.msg_iovlen = static_cast<std::size_t>(left);
      // MSG_NOSIGNAL: a closed peer is an error value, not a SIGPIPE.
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
  if (reader_.joinable() && reader_.get_id() != std::this_thread::get_id()) {
    reader_.join();
  }
  closed_.store(true);
}

}  // namespace colod::nri::wire
