// SPDX-License-Identifier: Apache-2.0
#include "colod/nri/mux.h"

#include <gtest/gtest.h>
#include <sys/socket.h>

#include <condition_variable>
#include <mutex>

#include "colod/testing/result_matchers.h"
#include "testutil.h"

namespace colod::nri::wire {
namespace {

using testutil::hex;

std::vector<std::byte> bytesOf(std::size_t n, uint8_t v = 0xAB) {
  return std::vector<std::byte>(n, static_cast<std::byte>(v));
}

TEST(MuxEncode, SmallMessageIsOneFrame) {
  auto msg = hex("00000000 00000001 02 00");
  auto out = encodeMuxFrames(2, msg);
  // Appendix A item 2: mux 00000002 0000000a then the 10-byte ttrpc header.
  EXPECT_EQ(out, testutil::cat(hex("00000002 0000000a"), msg));
}

TEST(MuxEncode, SplitsPerGoWriterRule) {
  // Exactly 4096 bytes: one frame; 4097: 4096 + 1; 60 KB: 4096 + rest (brief §1.5(b)).
  for (std::size_t n : {std::size_t{4096}, std::size_t{4097}, std::size_t{60000}}) {
    auto msg = bytesOf(n);
    auto out = encodeMuxFrames(1, msg);
    std::span<const std::byte> s(out);
    ASSERT_EQ(readBe32(s.first(4)), 1U);
    std::size_t first = readBe32(s.subspan(4, 4));
    EXPECT_EQ(first, std::min<std::size_t>(n, 4096));
    if (n > 4096) {
      auto second = s.subspan(8 + first);
      EXPECT_EQ(readBe32(second.subspan(4, 4)), n - 4096);
      EXPECT_EQ(out.size(), n + 16);
    } else {
      EXPECT_EQ(out.size(), n + 8);
    }
  }
  EXPECT_TRUE(encodeMuxFrames(1, {}).empty()) << "never a zero-length frame";
}

TEST(MuxDecoder, ByteByByteAndUnknownConns) {
  auto wire = testutil::cat(encodeMuxFrames(1, hex("010203")), encodeMuxFrames(7, hex("ff")));
  wire = testutil::cat(wire, encodeMuxFrames(2, bytesOf(5000, 0x11)));
  MuxDecoder d;
  std::map<uint32_t, std::size_t> got;
  for (auto b : wire) {
    ASSERT_OK(d.feed(std::span(&b, 1), [&](uint32_t c, std::span<const std::byte> p) -> Result<void> {
      got[c] += p.size();
      return ok();
    }));
  }
  EXPECT_TRUE(d.atBoundary());
  EXPECT_EQ(got[1], 3U);
  EXPECT_EQ(got[7], 1U);  // the decoder reports it; Mux drops ids nobody opened
  EXPECT_EQ(got[2], 5000U);
}

TEST(MuxDecoder, HugeLengthIsAnErrorNotAnAllocation) {
  MuxDecoder d;
  auto r = d.feed(hex("00000001 7fffffff 00"), [](uint32_t, auto) -> Result<void> { return ok(); });
  EXPECT_ERR(std::move(r), EMSGSIZE, "exceeds the limit");
  // Accepts exactly 16 MiB.
  MuxDecoder d2;
  ASSERT_OK(d2.feed(hex("00000001 01000000"), [](uint32_t, auto) -> Result<void> { return ok(); }));
  EXPECT_FALSE(d2.atBoundary());
}

struct Collector {
  std::mutex mu;
  std::condition_variable cv;
  std::vector<std::byte> conn1;
  std::optional<Error> closed;
};

TEST(Mux, SocketpairRoundTripSplitAndEof) {
  int sv[2];
  ASSERT_EQ(::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
  UniqueFd peer(sv[1]);
  Collector c;
  Mux a{UniqueFd(sv[0])};
  Mux b(std::move(peer));
  b.open(1, [&](std::span<const std::byte> p) -> Result<void> {
    std::lock_guard l(c.mu);
    c.conn1.insert(c.conn1.end(), p.begin(), p.end());
    c.cv.notify_all();
    return ok();
  });
  b.onClose([&](const Error& e) {
    std::lock_guard l(c.mu);
    c.closed = e;
    c.cv.notify_all();
  });
  ASSERT_OK(a.start());
  ASSERT_OK(b.start());
  auto head = bytesOf(10, 1);
  auto body = bytesOf(100000, 2);
  ASSERT_OK(a.send(1, head, body));
  ASSERT_OK(a.send(3, head, body));  // conn 3 is not open on b: dropped
  {
    std::unique_lock l(c.mu);
    ASSERT_TRUE(c.cv.wait_for(l, std::chrono::seconds(10), [&] { return c.conn1.size() >= 100010; }));
    EXPECT_EQ(c.conn1.size(), 100010U);
    EXPECT_EQ(c.conn1[9], std::byte{1});
    EXPECT_EQ(c.conn1[10], std::byte{2});
  }
  a.close();
  std::unique_lock l(c.mu);
  ASSERT_TRUE(c.cv.wait_for(l, std::chrono::seconds(10), [&] { return c.closed.has_value(); }));
  EXPECT_EQ(c.closed->errnoValue(), ECONNRESET);
}

TEST(Mux, PeerClosingMidFrameIsEproto) {
  int sv[2];
  ASSERT_EQ(::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
  UniqueFd raw(sv[1]);
  Collector c;
  Mux b{UniqueFd(sv[0])};
  b.onClose([&](const Error& e) {
    std::lock_guard l(c.mu);
    c.closed = e;
    c.cv.notify_all();
  });
  ASSERT_OK(b.start());
  auto partial = hex("00000001 00000010 0102");
  ASSERT_EQ(::write(raw.get(), partial.data(), partial.size()), static_cast<ssize_t>(partial.size()));
  raw.reset();
  std::unique_lock l(c.mu);
  ASSERT_TRUE(c.cv.wait_for(l, std::chrono::seconds(10), [&] { return c.closed.has_value(); }));
  EXPECT_EQ(c.closed->errnoValue(), EPROTO);
}

TEST(Mux, SendAfterPeerGoneIsAnError) {
  int sv[2];
  ASSERT_EQ(::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
  Mux a{UniqueFd(sv[0])};
  ::close(sv[1]);
  auto body = bytesOf(100);
  auto r = a.send(1, {}, body);
  EXPECT_FALSE(r.has_value());
}

}  // namespace
}  // namespace colod::nri::wire
