// SPDX-License-Identifier: Apache-2.0
// Leader/follower reading (CallerReads): a caller reads its own reply off the trunk when nobody
// else reads it, the trunk's other traffic is still served meanwhile, and every way out of a call
// (reply, timeout, peer gone, close) gives the reader role back.
#include <gtest/gtest.h>
#include <sys/socket.h>

#include <atomic>
#include <condition_variable>
#include <mutex>
#include <set>
#include <thread>

#include "colod/nri/mux.h"
#include "colod/nri/ttrpc.h"
#include "colod/testing/result_matchers.h"

namespace colod::nri::wire {
namespace {

using namespace std::chrono_literals;

std::vector<std::byte> bytesOf(std::size_t n, uint8_t v) {
  return std::vector<std::byte>(n, static_cast<std::byte>(v));
}

Result<std::vector<std::byte>> echo(const CallContext&, std::span<const std::byte> p) {
  return std::vector<std::byte>(p.begin(), p.end());
}

// A method that does not answer until released (at most 10 s): a call left without a reply.
// Declared before the trunk and released before it goes, so no handler outlives it.
struct Gate {
  std::mutex mu;
  std::condition_variable cv;
  bool released = false;
  Handler stuck() {
    return
        [this](const CallContext&, std::span<const std::byte>) -> Result<std::vector<std::byte>> {
          std::unique_lock lock(mu);
          cv.wait_for(lock, 10s, [&] { return released; });
          return std::vector<std::byte>{};
        };
  }
  void release() {
    {
      std::lock_guard lock(mu);
      released = true;
    }
    cv.notify_all();
  }
};

// One side of a trunk laid out like NRI's: it serves on `serve_conn` and calls on `call_conn`.
struct Side {
  Mux mux;
  TtrpcServer server;
  TtrpcClient client;
  std::mutex mu;
  std::condition_variable cv;
  std::multiset<std::thread::id> reply_readers;  // threads that ran the client's sink
  int closes = 0;
  std::optional<Error> close_error;

  Side(UniqueFd fd, uint32_t serve_conn, uint32_t call_conn, bool caller_reads)
      : mux(std::move(fd), options(caller_reads)),
        server([this, serve_conn](std::span<const std::byte> h, std::span<const std::byte> b,
                                  std::span<const std::byte> t) {
          return mux.send(serve_conn, h, b, t);
        }),
        client(
            [this, call_conn](std::span<const std::byte> h, std::span<const std::byte> b,
                              std::span<const std::byte> t) {
              return mux.send(call_conn, h, b, t);
            },
            kTtrpcMaxMessage,
            &mux) {
    mux.open(serve_conn, [this](std::span<const std::byte> b) { return server.onBytes(b); });
    mux.open(call_conn, [this](std::span<const std::byte> b) {
      {
        std::lock_guard lock(mu);
        reply_readers.insert(std::this_thread::get_id());
      }
      return client.onBytes(b);
    });
    mux.onClose([this](const Error& e) {
      client.fail(e);
      std::lock_guard lock(mu);
      ++closes;
      close_error = e;
      cv.notify_all();
    });
  }
  static MuxOptions options(bool caller_reads) {
    MuxOptions o;
    o.caller_reads = caller_reads;
    return o;
  }
  void start() {
    server.start();
    ASSERT_OK(mux.start());
  }
  ~Side() {
    server.stop();
    mux.close();
  }
  Side(const Side&) = delete;
  Side& operator=(const Side&) = delete;
  Side(Side&&) = delete;
  Side& operator=(Side&&) = delete;
};

// The plugin side ("p": serves conn 1, calls conn 2) and the runtime side ("r": the reverse).
struct Trunk {
  std::unique_ptr<Side> p;
  std::unique_ptr<Side> r;
  explicit Trunk(bool runtime_caller_reads = false) {
    int sv[2];
    EXPECT_EQ(::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
    p = std::make_unique<Side>(UniqueFd(sv[0]), kPluginServiceConn, kRuntimeServiceConn, true);
    r = std::make_unique<Side>(UniqueFd(sv[1]), kRuntimeServiceConn, kPluginServiceConn,
                               runtime_caller_reads);
  }
  void start() {
    p->start();
    r->start();
  }
};

// The plugin's "plugin/Ping": echoes, counts, and records the thread that served it.
struct Pings {
  std::atomic<int> count{0};
  std::atomic<std::thread::id> thread{};
  void serveOn(TtrpcServer& server) {
    server.registerMethod(
        "plugin", "Ping",
        [this](const CallContext&, std::span<const std::byte> p) -> Result<std::vector<std::byte>> {
          thread = std::this_thread::get_id();
          ++count;
          return std::vector<std::byte>(p.begin(), p.end());
        },
        Execution::Inline);
  }
};

TEST(CallerReads, UncontendedCallerReadsItsOwnReplies) {
  Trunk t;
  t.r->server.registerMethod("svc", "Echo", echo, Execution::Inline);
  t.start();
  for (int i = 0; i < 50; ++i) {
    auto payload = bytesOf(static_cast<std::size_t>(100 + i * 97), static_cast<uint8_t>(i));
    auto reply = ASSERT_OK(t.p->client.call("svc", "Echo", payload, 5s));
    ASSERT_TRUE(reply.status.ok());
    ASSERT_EQ(reply.payload, payload);
  }
  // Nothing else arrives on the plugin side, so the reader thread never takes the role: every
  // reply was read on this thread.
  std::lock_guard lock(t.p->mu);
  EXPECT_EQ(t.p->reply_readers.count(std::this_thread::get_id()), t.p->reply_readers.size());
  EXPECT_GE(t.p->reply_readers.size(), 50U);
}

TEST(CallerReads, PeerRequestsArrivingWhileACallerReadsAreServed) {
  Trunk t;
  Pings pings;
  pings.serveOn(t.p->server);
  // The runtime answers Nested only after calling back into the plugin, which arrives while the
  // plugin's caller holds the reader role and must be served by it.
  t.r->server.registerMethod(
      "svc", "Nested",
      [&](const CallContext&, std::span<const std::byte> p) -> Result<std::vector<std::byte>> {
        auto back = t.r->client.call("plugin", "Ping", p, 5s);
        if (!back) {
          return std::move(back).error();
        }
        return std::move(back->payload);
      },
      Execution::Worker);
  t.start();
  for (int i = 0; i < 20; ++i) {
    auto payload = bytesOf(64, static_cast<uint8_t>(i));
    auto reply = ASSERT_OK(t.p->client.call("svc", "Nested", payload, 5s));
    ASSERT_TRUE(reply.status.ok()) << reply.status.message;
    EXPECT_EQ(reply.payload, payload);
  }
  EXPECT_EQ(pings.count.load(), 20);
  // Served inline by the thread holding the role: the caller (this thread).
  EXPECT_EQ(pings.thread.load(), std::this_thread::get_id());
}

TEST(CallerReads, ManyConcurrentCallersAllGetTheirOwnReplies) {
  Trunk t(/*runtime_caller_reads=*/true);
  t.r->server.registerMethod("svc", "Echo", echo, Execution::Inline);
  t.p->server.registerMethod("plugin", "Echo", echo, Execution::Inline);
  t.start();
  std::atomic<int> good{0};
  std::atomic<int> bad{0};
  std::vector<std::thread> ts;
  for (int i = 0; i < 6; ++i) {
    // Both directions at once: three callers on each side.
    Side& side = i % 2 == 0 ? *t.p : *t.r;
    const char* svc = i % 2 == 0 ? "svc" : "plugin";
    ts.emplace_back([&, i, svc] {
      for (int k = 0; k < 300; ++k) {
        auto payload = bytesOf(static_cast<std::size_t>(1 + (k * 131) % 9000),
                               static_cast<uint8_t>(i * 16 + k % 16));
        auto r = side.client.call(svc, "Echo", payload, 10s);
        if (r && r->status.ok() && r->payload == payload) {
          ++good;
        } else {
          ++bad;
        }
      }
    });
  }
  for (auto& th : ts) {
    th.join();
  }
  EXPECT_EQ(bad.load(), 0);
  EXPECT_EQ(good.load(), 6 * 300);
}

TEST(CallerReads, TimeoutGivesTheRoleBackAndTheReaderThreadServesAfter) {
  Gate gate;
  Trunk t;
  t.r->server.registerMethod("svc", "Echo", echo, Execution::Inline);
  t.r->server.registerMethod("svc", "Stuck", gate.stuck(), Execution::Worker);
  Pings pings;
  pings.serveOn(t.p->server);
  t.start();
  auto t0 = std::chrono::steady_clock::now();
  EXPECT_ERR(t.p->client.call("svc", "Stuck", {}, 50ms), ETIMEDOUT, "no reply in time");
  auto took = std::chrono::steady_clock::now() - t0;
  EXPECT_GE(took, 50ms);
  EXPECT_LT(took, 2s);
  // No caller reads the plugin side now: a request from the runtime is served by its reader
  // thread, which watches the socket again.
  ASSERT_OK(t.r->client.call("plugin", "Ping", {}, 5s));
  EXPECT_EQ(pings.count.load(), 1);
  EXPECT_NE(pings.thread.load(), std::this_thread::get_id());
  gate.release();
  // The late reply to Stuck is dropped; the trunk keeps working for callers.
  auto payload = bytesOf(10, 7);
  auto reply = ASSERT_OK(t.p->client.call("svc", "Echo", payload, 5s));
  EXPECT_EQ(reply.payload, payload);
}

TEST(CallerReads, APeerRequestRightAfterABurstOfCallsIsServedByTheReaderThread) {
  // The calls leave the socket disarmed (the reader thread re-arms it after a linger); a request
  // arriving then, with no caller reading, must still be read and answered.
  Trunk t;
  t.r->server.registerMethod("svc", "Echo", echo, Execution::Inline);
  Pings pings;
  pings.serveOn(t.p->server);
  t.start();
  for (int round = 0; round < 5; ++round) {
    for (int i = 0; i < 20; ++i) {
      ASSERT_OK(t.p->client.call("svc", "Echo", bytesOf(4100, static_cast<uint8_t>(i)), 5s));
    }
    auto reply = ASSERT_OK(t.r->client.call("plugin", "Ping", bytesOf(8, 1), 5s));
    EXPECT_EQ(reply.payload, bytesOf(8, 1));
  }
  EXPECT_EQ(pings.count.load(), 5);
  EXPECT_NE(pings.thread.load(), std::this_thread::get_id());
}

TEST(CallerReads, PeerClosingWhileACallerReadsFailsTheCallOnceAndCloseReturns) {
  Gate gate;
  Trunk t;
  t.r->server.registerMethod("svc", "Stuck", gate.stuck(), Execution::Worker);
  t.start();
  // The runtime closes its end while the plugin's caller is blocked reading for the reply.
  std::thread closer([&] {
    std::this_thread::sleep_for(100ms);
    t.r->mux.close();
  });
  auto t0 = std::chrono::steady_clock::now();
  EXPECT_ERR(t.p->client.call("svc", "Stuck", bytesOf(10, 1), std::nullopt), ECONNRESET,
             "closed by the peer");
  EXPECT_LT(std::chrono::steady_clock::now() - t0, 5s);
  closer.join();
  gate.release();
  {
    std::unique_lock lock(t.p->mu);
    ASSERT_TRUE(t.p->cv.wait_for(lock, 10s, [&] { return t.p->closes > 0; }));
    EXPECT_EQ(t.p->closes, 1);
  }
  EXPECT_ERR(t.p->client.call("svc", "Stuck", {}, 1s), ECONNRESET, "");
  t.p->mux.close();  // joins the reader thread, which must have seen the failure and left
  EXPECT_TRUE(t.p->mux.closed());
}

TEST(CallerReads, ClosingTheTrunkUnderABlockedCallerEndsTheCall) {
  Gate gate;
  Trunk t;
  t.r->server.registerMethod("svc", "Stuck", gate.stuck(), Execution::Worker);
  // The close callback runs on the thread that read the EOF -- here the caller holding the role --
  // and closes the trunk from there: that must not wait for the role it holds.
  t.p->mux.onClose([&](const Error& e) {
    t.p->client.fail(e);
    t.p->mux.close();
    std::lock_guard lock(t.p->mu);
    ++t.p->closes;
    t.p->cv.notify_all();
  });
  t.start();
  std::thread closer([&] {
    std::this_thread::sleep_for(100ms);
    t.p->mux.close();  // from another thread, while the caller is blocked in its read
  });
  auto t0 = std::chrono::steady_clock::now();
  EXPECT_ERR(t.p->client.call("svc", "Stuck", {}, std::nullopt), ECONNRESET, "");
  EXPECT_LT(std::chrono::steady_clock::now() - t0, 5s);
  closer.join();
  gate.release();
  std::lock_guard lock(t.p->mu);
  EXPECT_EQ(t.p->closes, 1);
}

TEST(CallerReads, ACallFromTheReadingThreadIsRefusedNotDeadlocked) {
  Trunk t;
  t.r->server.registerMethod("svc", "Echo", echo, Execution::Inline);
  std::optional<Error> nested;
  t.p->server.registerMethod(
      "plugin", "CallBack",
      [&](const CallContext&, std::span<const std::byte>) -> Result<std::vector<std::byte>> {
        // Inline: runs on the thread that reads the plugin's trunk.
        auto r = t.p->client.call("svc", "Echo", {}, 1s);
        if (!r) {
          nested = r.error();
        }
        return std::vector<std::byte>{};
      },
      Execution::Inline);
  t.start();
  ASSERT_OK(t.r->client.call("plugin", "CallBack", {}, 5s));
  ASSERT_TRUE(nested.has_value());
  EXPECT_EQ(nested->errnoValue(), EDEADLK) << nested->message();
  EXPECT_FALSE(CallerReads::readingOnThisThread());
}

TEST(CallerReads, OffOrNotASocketFallsBackToTheReaderThread) {
  int sv[2];
  ASSERT_EQ(::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
  Side p{UniqueFd(sv[0]), kPluginServiceConn, kRuntimeServiceConn, /*caller_reads=*/false};
  Side r{UniqueFd(sv[1]), kRuntimeServiceConn, kPluginServiceConn, false};
  r.server.registerMethod("svc", "Echo", echo, Execution::Inline);
  p.start();
  r.start();
  EXPECT_FALSE(p.mux.tryLead());
  auto payload = bytesOf(5000, 3);
  auto reply = ASSERT_OK(p.client.call("svc", "Echo", payload, 5s));
  EXPECT_EQ(reply.payload, payload);
  std::lock_guard lock(p.mu);
  EXPECT_EQ(p.reply_readers.count(std::this_thread::get_id()), 0U);
}

}  // namespace
}  // namespace colod::nri::wire
