// SPDX-License-Identifier: Apache-2.0
#include "colod/nri/mux.h"

#include <gtest/gtest.h>
#include <sys/socket.h>
#include <unistd.h>

#include <condition_variable>
#include <map>
#include <mutex>
#include <string>

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

// What a decoder delivers: per conn, the byte stream and the pieces it came in.
struct Delivered {
  std::map<uint32_t, std::vector<std::byte>> stream;
  std::vector<std::pair<uint32_t, std::size_t>> pieces;
  MuxDecoder::Sink sink() {
    return [this](uint32_t c, std::span<const std::byte> p) -> Result<void> {
      stream[c].insert(stream[c].end(), p.begin(), p.end());
      pieces.emplace_back(c, p.size());
      return ok();
    };
  }
};

std::vector<std::byte> counting(std::size_t n, uint8_t from) {
  std::vector<std::byte> v(n);
  for (std::size_t i = 0; i < n; ++i) {
    v[i] = static_cast<std::byte>(from + i);
  }
  return v;
}

TEST(MuxDecoder, InPlaceJoinsAGoSplitMessageIntoOnePiece) {
  // A 4130-byte message on conn 1 goes as 4096 + 34 (§1.5(b)), then 5 bytes on conn 2, then two
  // small frames on conn 1.
  auto big = counting(4130, 1);
  auto wire = testutil::cat(encodeMuxFrames(1, big), encodeMuxFrames(2, hex("0102030405")));
  wire = testutil::cat(wire, encodeMuxFrames(1, hex("aa")));
  wire = testutil::cat(wire, encodeMuxFrames(1, hex("bbcc")));
  MuxDecoder d;
  Delivered got;
  ASSERT_OK(d.feedInPlace(wire, got.sink()));
  EXPECT_TRUE(d.atBoundary());
  EXPECT_EQ(got.stream[1], testutil::cat(big, hex("aabbcc")));
  EXPECT_EQ(got.stream[2], hex("0102030405"));
  std::vector<std::pair<uint32_t, std::size_t>> want{{1, 4130}, {2, 5}, {1, 3}};
  EXPECT_EQ(got.pieces, want) << "one piece per run of a conn";
}

TEST(MuxDecoder, InPlaceMovesTheSmallerSideAndLeavesTwoLargeFramesApart) {
  // A small frame then a large one (the run moves forward), and two frames above 4096 bytes
  // each (no join: the ttrpc layer reassembles them).
  auto small = counting(10, 7);
  auto large = counting(3000, 9);
  auto wire = testutil::cat(testutil::cat(hex("00000001 0000000a"), small),
                            testutil::cat(hex("00000001 00000bb8"), large));
  auto a = counting(5000, 3);
  auto b = counting(6000, 5);
  wire = testutil::cat(wire, testutil::cat(hex("00000002 00001388"), a));
  wire = testutil::cat(wire, testutil::cat(hex("00000002 00001770"), b));
  MuxDecoder d;
  Delivered got;
  ASSERT_OK(d.feedInPlace(wire, got.sink()));
  EXPECT_EQ(got.stream[1], testutil::cat(small, large));
  EXPECT_EQ(got.stream[2], testutil::cat(a, b));
  std::vector<std::pair<uint32_t, std::size_t>> want{{1, 3010}, {2, 5000}, {2, 6000}};
  EXPECT_EQ(got.pieces, want);
}

TEST(MuxDecoder, InPlaceDeliversTheSameStreamsAsFeedForAnySplit) {
  auto wire = testutil::cat(encodeMuxFrames(1, counting(4200, 1)), encodeMuxFrames(2, counting(9000, 2)));
  wire = testutil::cat(wire, encodeMuxFrames(1, counting(77, 3)));
  wire = testutil::cat(wire, hex("00000001 00000000"));  // zero-length frame, tolerated
  wire = testutil::cat(wire, encodeMuxFrames(7, counting(300, 4)));
  wire = testutil::cat(wire, encodeMuxFrames(1, counting(5000, 5)));
  MuxDecoder ref;
  Delivered want;
  ASSERT_OK(ref.feed(wire, want.sink()));
  for (std::size_t cut : {std::size_t{1}, std::size_t{4}, std::size_t{9}, std::size_t{4103},
                          std::size_t{4110}, std::size_t{5000}, wire.size() - 3}) {
    SCOPED_TRACE("cut at " + std::to_string(cut));
    auto copy = wire;  // feedInPlace rewrites its input
    MuxDecoder d;
    Delivered got;
    ASSERT_OK(d.feedInPlace(std::span(copy).first(cut), got.sink()));
    ASSERT_OK(d.feedInPlace(std::span(copy).subspan(cut), got.sink()));
    EXPECT_TRUE(d.atBoundary());
    EXPECT_EQ(got.stream, want.stream);
  }
}

TEST(MuxDecoder, InPlaceDeliversWhatCameBeforeABadHeaderThenFails) {
  auto wire = testutil::cat(encodeMuxFrames(1, hex("0102")), hex("00000001 7fffffff 00"));
  MuxDecoder d;
  Delivered got;
  EXPECT_ERR(d.feedInPlace(wire, got.sink()), EMSGSIZE, "exceeds the limit");
  EXPECT_EQ(got.stream[1], hex("0102"));
  EXPECT_ERR(d.feedInPlace(wire, got.sink()), EPROTO, "already failed");
  // A sink error fails the decoder and names the conn.
  MuxDecoder d2;
  auto w2 = encodeMuxFrames(2, hex("01"));
  EXPECT_ERR(d2.feedInPlace(w2, [](uint32_t, auto) -> Result<void> {
    return COLOD_ERR(EPROTO, "bad message");
  }), EPROTO, "mux conn 2");
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

// Reads exactly n bytes from a raw fd (the test's peer end).
std::vector<std::byte> readExactly(int fd, std::size_t n) {
  std::vector<std::byte> out(n);
  std::size_t got = 0;
  while (got < n) {
    ssize_t k = ::read(fd, out.data() + got, n - got);
    if (k <= 0) {
      break;
    }
    got += static_cast<std::size_t>(k);
  }
  out.resize(got);
  return out;
}

TEST(Mux, SendPutsExactlyTheGoWriterFramesOnTheWire) {
  // Up to 64 KiB a message is gathered into one buffer (with or without the 4K-alias shift,
  // which depends on where the body sits); above, it goes out as iovecs. Either way the bytes
  // are encodeMuxFrames' (§1.5(b)) for head + body + tail, wherever the frame boundary cuts
  // them (in the head, the body or the tail) and whichever pieces are empty.
  int sv[2];
  ASSERT_EQ(::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
  UniqueFd raw(sv[1]);
  Mux a{UniqueFd(sv[0])};
  std::vector<std::byte> arena(80000 + 4096);
  for (std::size_t i = 0; i < arena.size(); ++i) {
    arena[i] = static_cast<std::byte>(i * 7 + 3);
  }
  for (std::size_t head_size : {std::size_t{0}, std::size_t{26}, std::size_t{4100}}) {
    auto head = counting(head_size, 9);
    for (std::size_t tail_size : {std::size_t{0}, std::size_t{11}}) {
      auto tail = counting(tail_size, 200);
      for (std::size_t size : {std::size_t{0}, std::size_t{100}, std::size_t{4060},
                               std::size_t{4065}, std::size_t{4070}, std::size_t{4071},
                               std::size_t{4100}, std::size_t{65536 - 26}, std::size_t{65536},
                               std::size_t{70000}}) {
        for (std::size_t shift = 0; shift < 4096; shift += 13) {  // every body alignment class
          SCOPED_TRACE("head " + std::to_string(head_size) + " tail " +
                       std::to_string(tail_size) + " size " + std::to_string(size) + " shift " +
                       std::to_string(shift));
          std::span<const std::byte> body(arena.data() + shift, size);
          ASSERT_OK(a.send(2, head, body, tail));
          auto want =
              encodeMuxFrames(2, testutil::cat(testutil::cat(head, testutil::vec(body)), tail));
          ASSERT_EQ(readExactly(raw.get(), want.size()), want);
          if (size > 5000 || head_size != 26) {
            break;  // the other shapes once: their alignment does not matter here
          }
        }
      }
    }
  }
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
