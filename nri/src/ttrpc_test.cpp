// SPDX-License-Identifier: Apache-2.0
#include "colod/nri/ttrpc.h"

#include <gtest/gtest.h>

#include <map>
#include <set>

#include <atomic>
#include <thread>

#include "colod/nri/mux.h"
#include "colod/testing/result_matchers.h"
#include "nri/proto/ttrpc.pb.h"
#include "testutil.h"

namespace colod::nri::wire {
namespace {

using testutil::hex;
using namespace std::chrono_literals;

TEST(TtrpcGolden, RegisterPluginRequestAppendixA1) {
  auto payload = hex("0a07 \"harness\" 1202 \"10\"");
  auto body = encodeRequest("nri.pkg.api.v1alpha1.Runtime", "RegisterPlugin", payload, 4999551680);
  auto expect = hex(
      "0a1c \"nri.pkg.api.v1alpha1.Runtime\" 120e \"RegisterPlugin\" 1a0d 0a07 \"harness\" 1202 "
      "\"10\" 20 c0b5fccf12");
  EXPECT_EQ(body, expect);
  // The client sends the same bytes as the pieces around the payload (no encoding copy of it).
  std::vector<std::byte> head;
  std::vector<std::byte> tail;
  encodeRequestAround(head, tail, "nri.pkg.api.v1alpha1.Runtime", "RegisterPlugin",
                      payload.size(), 4999551680);
  EXPECT_EQ(testutil::cat(testutil::cat(head, payload), tail), expect);
  auto h = encodeHeader({.length = static_cast<uint32_t>(body.size()), .stream_id = 1, .type = 1});
  EXPECT_EQ(std::vector<std::byte>(h.begin(), h.end()), hex("00000043 00000001 01 00"));
  auto framed = encodeMuxFrames(2, testutil::cat({h.begin(), h.end()}, body));
  EXPECT_EQ(std::vector<std::byte>(framed.begin(), framed.begin() + 8), hex("00000002 0000004d"));
  // The hand codec agrees with protoc's.
  ::ttrpc::Request pbreq;
  ASSERT_TRUE(pbreq.ParseFromArray(body.data(), static_cast<int>(body.size())));
  EXPECT_EQ(pbreq.method(), "RegisterPlugin");
  EXPECT_EQ(pbreq.timeout_nano(), 4999551680);
  auto back = ASSERT_OK(decodeRequest(body));
  EXPECT_EQ(back.service, "nri.pkg.api.v1alpha1.Runtime");
  EXPECT_EQ(back.timeout_nano, 4999551680);
  EXPECT_EQ(std::vector<std::byte>(back.payload.begin(), back.payload.end()), payload);
}

TEST(TtrpcGolden, EmptySuccessReplyAndErrorReply) {
  EXPECT_TRUE(encodeResponse({}, {}).empty()) << "Appendix A2: successful empty reply has L=0";
  auto ok_view = ASSERT_OK(decodeResponse({}));
  EXPECT_TRUE(ok_view.status.ok()) << "missing status = OK";
  // Appendix A9.
  auto err = hex("0a 17 08 02 12 13 \"some updates failed\"");
  EXPECT_EQ(encodeResponse({status_code::kUnknown, "some updates failed"}, hex("01")), err);
  auto v = ASSERT_OK(decodeResponse(err));
  EXPECT_EQ(v.status.code, 2);
  EXPECT_EQ(v.status.message, "some updates failed");
  EXPECT_TRUE(v.payload.empty());
  // Appendix A4: Configure reply body.
  EXPECT_EQ(encodeResponse({}, hex("10 89 0d")), hex("12 03 10 89 0d"));
  auto h = ASSERT_OK(decodeHeader(hex("00000005 00000001 02 00")));
  EXPECT_EQ(h.length, 5U);
  EXPECT_EQ(h.type, 2);
}

TEST(TtrpcCodec, MetadataUnknownFieldsAndGarbage) {
  ::ttrpc::Request r;
  r.set_service("s");
  r.set_method("m");
  r.set_payload("xyz");
  auto* kv = r.add_metadata();
  kv->set_key("traceparent");
  kv->set_value("00-abc");
  std::string s = r.SerializeAsString();
  s += std::string("\x30\x05\x3d\x01\x02\x03\x04", 7);  // unknown varint field 6, fixed32 field 7
  auto v = ASSERT_OK(decodeRequest(std::as_bytes(std::span(s.data(), s.size()))));
  ASSERT_EQ(v.metadata.size(), 1U);
  EXPECT_EQ(v.metadata[0].first, "traceparent");
  EXPECT_EQ(v.payload.size(), 3U);
  EXPECT_ERR(decodeRequest(hex("0a 05 \"ab\"")), EPROTO, "truncated");
  EXPECT_ERR(decodeRequest(hex("ff ff ff ff ff ff ff ff ff ff ff")), EPROTO, "");
  EXPECT_ERR(decodeResponse(hex("0a 02 08")), EPROTO, "");
  EXPECT_ERR(decodeHeader(hex("0000")), EPROTO, "10 bytes");
}

TEST(TtrpcDecoder, OversizedIsDrainedNotAllocated) {
  TtrpcDecoder d(64);
  std::vector<TtrpcMessage> got;
  auto emit = [&](TtrpcMessage&& m) -> Result<void> {
    m.own();  // kept past the callback
    got.push_back(std::move(m));
    return ok();
  };
  ASSERT_OK(d.feed(hex("00000064 00000001 01 00"), emit));
  std::vector<std::byte> junk(100, std::byte{0x5a});
  ASSERT_OK(d.feed(std::span(junk).first(37), emit));
  ASSERT_OK(d.feed(std::span(junk).subspan(37), emit));
  ASSERT_OK(d.feed(hex("00000001 00000003 01 00 ee"), emit));
  ASSERT_EQ(got.size(), 2U);
  EXPECT_TRUE(got[0].oversized);
  EXPECT_TRUE(got[0].body().empty());
  EXPECT_FALSE(got[1].oversized);
  EXPECT_EQ(testutil::vec(got[1].body()), hex("ee"));
  EXPECT_TRUE(d.atBoundary());
}

TEST(TtrpcDecoder, AWholeMessageInOnePieceIsBorrowedASplitOneReassembled) {
  TtrpcDecoder d;
  struct Seen {
    bool borrowed;
    const std::byte* at;
    std::vector<std::byte> body;
    uint32_t stream;
  };
  std::vector<Seen> got;
  auto emit = [&](TtrpcMessage&& m) -> Result<void> {
    got.push_back({m.is_borrowed, m.body().data(), testutil::vec(m.body()), m.header.stream_id});
    return ok();
  };
  // Two whole messages and the first 3 bytes of a third in one piece.
  auto piece = hex("00000002 00000001 01 00 aabb  00000001 00000003 01 00 cc  00000003 00000005");
  ASSERT_OK(d.feed(piece, emit));
  ASSERT_EQ(got.size(), 2U);
  EXPECT_TRUE(got[0].borrowed);
  EXPECT_EQ(got[0].at, piece.data() + 10) << "a view of the fed bytes, not a copy";
  EXPECT_EQ(got[0].body, hex("aabb"));
  EXPECT_TRUE(got[1].borrowed);
  EXPECT_EQ(got[1].body, hex("cc"));
  EXPECT_EQ(got[1].stream, 3U);
  EXPECT_FALSE(d.atBoundary());
  // The third message's rest: reassembled, owned.
  ASSERT_OK(d.feed(hex("01 00 ddeeff"), emit));
  ASSERT_EQ(got.size(), 3U);
  EXPECT_FALSE(got[2].borrowed);
  EXPECT_EQ(got[2].body, hex("ddeeff"));
  EXPECT_EQ(got[2].stream, 5U);
  EXPECT_TRUE(d.atBoundary());
  // own() turns a borrowed body into a copy that outlives the fed bytes.
  TtrpcMessage kept;
  ASSERT_OK(d.feed(hex("00000001 00000007 01 00 99"), [&](TtrpcMessage&& m) -> Result<void> {
    m.own();
    kept = std::move(m);
    return ok();
  }));
  EXPECT_FALSE(kept.is_borrowed);
  EXPECT_EQ(testutil::vec(kept.body()), hex("99"));
}

// A client and server wired back to back without a socket.
struct Loop {
  std::unique_ptr<TtrpcServer> server;
  std::unique_ptr<TtrpcClient> client;
  std::mutex raw_mu;
  std::vector<std::vector<std::byte>> raw_to_server;  // extra bytes tests inject
  explicit Loop(uint32_t max = kTtrpcMaxMessage) {
    server = std::make_unique<TtrpcServer>(
        [this](std::span<const std::byte> h, std::span<const std::byte> b,
               std::span<const std::byte> t) -> Result<void> {
          std::vector<std::byte> all(h.begin(), h.end());
          all.insert(all.end(), b.begin(), b.end());
          all.insert(all.end(), t.begin(), t.end());
          return client->onBytes(all);
        },
        ServerOptions{.max_message = max, .on_served = nullptr});
    client = std::make_unique<TtrpcClient>(
        [this](std::span<const std::byte> h, std::span<const std::byte> b,
               std::span<const std::byte> t) -> Result<void> {
          std::vector<std::byte> all(h.begin(), h.end());
          all.insert(all.end(), b.begin(), b.end());
          all.insert(all.end(), t.begin(), t.end());
          return server->onBytes(all);
        });
    server->registerMethod("svc", "Echo", [](const CallContext&, std::span<const std::byte> p)
                                              -> Result<std::vector<std::byte>> {
      return std::vector<std::byte>(p.begin(), p.end());
    });
    server->registerMethod("svc", "Fail", [](const CallContext&, std::span<const std::byte>)
                                              -> Result<std::vector<std::byte>> {
      return COLOD_ERR(ENOSYS, "not here");
    });
    server->registerMethod("svc", "Slow", [](const CallContext& ctx, std::span<const std::byte>)
                                              -> Result<std::vector<std::byte>> {
      std::this_thread::sleep_for(300ms);
      EXPECT_TRUE(ctx.deadline.has_value());
      return std::vector<std::byte>{};
    });
    server->start();
  }
  ~Loop() { server->stop(); }
};

TEST(TtrpcServer, EchoUnknownServiceAndMethod) {
  Loop l;
  auto payload = hex("01 02 03");
  auto r = ASSERT_OK(l.client->call("svc", "Echo", payload, 5s));
  EXPECT_TRUE(r.status.ok());
  EXPECT_EQ(r.payload, payload);
  auto u = ASSERT_OK(l.client->call("nope", "Echo", payload, 5s));
  EXPECT_EQ(u.status.code, status_code::kUnimplemented);
  EXPECT_EQ(u.status.message, "service nope");
  auto m = ASSERT_OK(l.client->call("svc", "Nope", payload, 5s));
  EXPECT_EQ(m.status.code, status_code::kUnimplemented);
  EXPECT_EQ(m.status.message, "method Nope");
  auto f = ASSERT_OK(l.client->call("svc", "Fail", payload, 5s));
  EXPECT_EQ(f.status.code, status_code::kUnimplemented);
}

TEST(TtrpcServer, OversizedAnsweredResourceExhaustedAndConnectionSurvives) {
  Loop l(1024);
  std::vector<std::byte> big(2000, std::byte{7});
  auto r = ASSERT_OK(l.client->call("svc", "Echo", big, 5s));
  EXPECT_EQ(r.status.code, status_code::kResourceExhausted);
  auto small = hex("aa");
  auto r2 = ASSERT_OK(l.client->call("svc", "Echo", small, 5s));
  EXPECT_TRUE(r2.status.ok());
  EXPECT_EQ(r2.payload, small);
}

TEST(TtrpcServer, ConcurrentCallsAndClientTimeout) {
  Loop l;
  std::atomic<int> good{0};
  std::vector<std::thread> ts;
  for (int i = 0; i < 8; ++i) {
    ts.emplace_back([&, i] {
      std::vector<std::byte> p(static_cast<std::size_t>(100 + i), static_cast<std::byte>(i));
      auto r = l.client->call("svc", "Echo", p, 10s);
      if (r && r->status.ok() && r->payload == p) {
        ++good;
      }
    });
  }
  for (auto& t : ts) {
    t.join();
  }
  EXPECT_EQ(good.load(), 8);
  // The handler takes 300 ms; a 50 ms client timeout gives ETIMEDOUT; later calls still work.
  EXPECT_ERR(l.client->call("svc", "Slow", {}, 50ms), ETIMEDOUT, "no reply");
  auto after = ASSERT_OK(l.client->call("svc", "Echo", hex("01"), 10s));
  EXPECT_TRUE(after.status.ok());
}

TEST(TtrpcServer, ExpiredTimeoutIsNotRunAndStreamRules) {
  std::vector<std::vector<std::byte>> replies;
  std::mutex mu;
  std::atomic<int> ran{0};
  TtrpcServer s([&](std::span<const std::byte> h, std::span<const std::byte> b,
                    std::span<const std::byte> t) -> Result<void> {
    std::lock_guard lock(mu);
    std::vector<std::byte> all(h.begin(), h.end());
    all.insert(all.end(), b.begin(), b.end());
    all.insert(all.end(), t.begin(), t.end());
    replies.push_back(std::move(all));
    return ok();
  });
  s.registerMethod("svc", "Run", [&](const CallContext&, std::span<const std::byte>)
                                     -> Result<std::vector<std::byte>> {
    ++ran;
    std::this_thread::sleep_for(100ms);
    return std::vector<std::byte>{};
  });
  s.start();
  auto send = [&](uint32_t stream, int64_t timeout) {
    auto body = encodeRequest("svc", "Run", {}, timeout);
    auto h = encodeHeader({.length = static_cast<uint32_t>(body.size()), .stream_id = stream, .type = 1});
    ASSERT_OK(s.onBytes(h));
    ASSERT_OK(s.onBytes(body));
  };
  send(1, 0);        // runs for 100 ms
  send(3, 1000000);  // 1 ms deadline: expires while queued
  send(4, 0);        // even id
  send(3, 0);        // re-used id
  for (int i = 0; i < 200; ++i) {
    {
      std::lock_guard lock(mu);
      if (replies.size() == 4) {
        break;
      }
    }
    std::this_thread::sleep_for(10ms);
  }
  s.stop();
  std::lock_guard lock(mu);
  ASSERT_EQ(replies.size(), 4U);
  EXPECT_EQ(ran.load(), 1);
  // Stream-rule violations are answered on arrival (reader thread), queued calls in order: match
  // replies by stream id, not position.
  std::multimap<uint32_t, int32_t> by_stream;
  for (const auto& r : replies) {
    auto h = decodeHeader(r);
    auto v = decodeResponse(std::span(r).subspan(kTtrpcHeaderSize));
    ASSERT_TRUE(h && v);
    by_stream.emplace(h->stream_id, v->status.code);
  }
  auto codes = [&](uint32_t stream) {
    std::multiset<int32_t> out;
    auto [b, e] = by_stream.equal_range(stream);
    for (auto it = b; it != e; ++it) out.insert(it->second);
    return out;
  };
  EXPECT_EQ(codes(1), (std::multiset<int32_t>{status_code::kOk}));
  EXPECT_EQ(codes(4), (std::multiset<int32_t>{status_code::kInvalidArgument}));
  EXPECT_EQ(codes(3), (std::multiset<int32_t>{status_code::kDeadlineExceeded,
                                              status_code::kInvalidArgument}));
}

TEST(TtrpcCodec, RequestPiecesAreProtocsRequestForEveryShape) {
  const std::vector<std::byte> big(300, std::byte{7});  // a two-byte length varint
  for (std::span<const std::byte> payload :
       {std::span<const std::byte>(), std::span<const std::byte>(big).first(1),
        std::span<const std::byte>(big)}) {
    for (int64_t timeout : {int64_t{0}, int64_t{1}, int64_t{2000000000}}) {
      SCOPED_TRACE("payload " + std::to_string(payload.size()) + " timeout " +
                   std::to_string(timeout));
      std::vector<std::byte> head(3, std::byte{0xAA});  // appended to, not cleared
      std::vector<std::byte> tail;
      encodeRequestAround(head, tail, "svc", "Method", payload.size(), timeout);
      EXPECT_EQ(std::vector<std::byte>(head.begin(), head.begin() + 3),
                std::vector<std::byte>(3, std::byte{0xAA}));
      std::vector<std::byte> got(head.begin() + 3, head.end());
      got.insert(got.end(), payload.begin(), payload.end());
      got.insert(got.end(), tail.begin(), tail.end());
      // protoc writes fields in number order and omits proto3 defaults, as Go's marshaller does.
      ::ttrpc::Request want;
      want.set_service("svc");
      want.set_method("Method");
      want.set_payload(std::string(reinterpret_cast<const char*>(payload.data()),  // NOLINT
                                   payload.size()));
      want.set_timeout_nano(timeout);
      std::string bytes;
      ASSERT_TRUE(want.SerializeToString(&bytes));
      EXPECT_EQ(got, testutil::vec(std::as_bytes(std::span(bytes.data(), bytes.size()))));
      EXPECT_EQ(encodeRequest("svc", "Method", payload, timeout), got);
    }
  }
}

TEST(TtrpcClient, FailWakesCallersAndLateRepliesAreDropped) {
  TtrpcClient c([](auto, auto, auto) -> Result<void> { return ok(); });
  std::thread t([&] {
    std::this_thread::sleep_for(50ms);
    c.fail(COLOD_ERR(ECONNRESET, "gone"));
  });
  EXPECT_ERR(c.call("s", "m", {}, std::nullopt), ECONNRESET, "gone");
  t.join();
  EXPECT_ERR(c.call("s", "m", {}, 1s), ECONNRESET, "gone");
  // A response for a stream nobody waits for is ignored.
  ASSERT_OK(c.onBytes(hex("00000000 00000063 02 00")));
}

}  // namespace
}  // namespace colod::nri::wire
