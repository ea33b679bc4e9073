// SPDX-License-Identifier: Apache-2.0
// Round trips over a real Unix socket with an in-process fake backend.
#include "colod/control/server.h"

#include <gtest/gtest.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>

#include <atomic>
#include <filesystem>
#include <thread>

#include "colod/base/unique_fd.h"
#include "colod/control/client.h"
#include "colod/testing/result_matchers.h"

namespace colod::control {
namespace {

class FakeBackend : public Backend {
 public:
  Result<v1::StatusReply> status() override {
    v1::StatusReply r;
    r.set_mode("dry-run");
    r.set_containers(3);
    return r;
  }
  Result<v1::ListContainersReply> listContainers() override {
    v1::ListContainersReply r;
    r.add_containers()->set_id("abc");
    return r;
  }
  Result<v1::DumpReply> dump() override {
    v1::DumpReply r;
    r.set_json("{}");
    return r;
  }
  Result<v1::HistogramReply> histogram(const std::string& query) override {
    return COLOD_ERR(ENOENT, "no container matches '", query, "'");
  }
  Result<v1::DecisionsReply> decisions(uint32_t limit) override {
    v1::DecisionsReply r;
    for (uint32_t i = 0; i < limit; ++i) {
      r.add_decisions()->set_seq(i);
    }
    return r;
  }
  Result<v1::ExplainReply> explain(const std::string& query) override {
    return COLOD_ERR(EINVAL, "container '", query, "' is ambiguous");
  }
  Result<v1::ConfigShowReply> configShow() override {
    v1::ConfigShowReply r;
    r.set_yaml("daemon: {}\n");
    return r;
  }
  Result<v1::ConfigCheckReply> configCheck(const v1::ConfigCheckRequest& req) override {
    v1::ConfigCheckReply r;
    r.set_ok(req.yaml() == "good");
    return r;
  }
  Result<v1::ConfigReloadReply> configReload() override {
    v1::ConfigReloadReply r;
    r.set_ok(true);
    return r;
  }
  Result<void> record(uint32_t seconds,
                      const std::function<bool(const v1::RecordChunk&)>& write,
                      const std::function<bool()>& cancelled) override {
    for (uint32_t i = 0; i < seconds * 2 && !cancelled(); ++i) {
      v1::RecordChunk c;
      c.set_data("x");
      c.set_snapshots(i + 1);
      if (!write(c)) {
        break;
      }
    }
    return {};
  }
};

class ControlTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/colod-control-XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
    path_ = dir_ + "/sub/colod.sock";
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  std::string dir_;
  std::string path_;
  FakeBackend backend_;
};

TEST_F(ControlTest, UnaryCallsRoundTripAndSocketIsPrivate) {
  auto server = ASSERT_OK(Server::start({.socket_path = path_}, backend_));
  struct stat st {};
  ASSERT_EQ(::stat(path_.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600U);
  auto client = ASSERT_OK(Client::connect(path_));
  auto status = ASSERT_OK(client.status());
  EXPECT_EQ(status.mode(), "dry-run");
  EXPECT_EQ(status.containers(), 3U);
  EXPECT_EQ(ASSERT_OK(client.listContainers()).containers(0).id(), "abc");
  EXPECT_EQ(ASSERT_OK(client.decisions(3)).decisions_size(), 3);
  EXPECT_TRUE(ASSERT_OK(client.configCheck("good", "f")).ok());
  EXPECT_FALSE(ASSERT_OK(client.configCheck("bad", "f")).ok());
  EXPECT_ERR(client.histogram("zz"), ENOENT, "no container matches 'zz'");
  EXPECT_ERR(client.explain("web"), EINVAL, "ambiguous");
  server->stop();
  EXPECT_FALSE(std::filesystem::exists(path_));
}

TEST_F(ControlTest, RecordStreamsChunks) {
  auto server = ASSERT_OK(Server::start({.socket_path = path_}, backend_));
  auto client = ASSERT_OK(Client::connect(path_));
  uint64_t chunks = 0;
  std::string data;
  ASSERT_OK(client.record(
      2,
      [&](const v1::RecordChunk& c) -> Result<void> {
        ++chunks;
        data += c.data();
        return {};
      },
      [] { return false; }));
  EXPECT_EQ(chunks, 4U);
  EXPECT_EQ(data, "xxxx");
}

TEST_F(ControlTest, HelpfulErrorWhenDaemonIsNotRunning) {
  auto r = Client::connect(path_);
  ASSERT_FALSE(r.has_value());
  EXPECT_EQ(r.error().message(), "cannot reach colod at " + path_ +
                                     ": is the daemon running? (connect: No such file or "
                                     "directory)");
}

TEST_F(ControlTest, SecondServerOnLiveSocketIsRefusedStaleSocketIsReplaced) {
  {
    auto server = ASSERT_OK(Server::start({.socket_path = path_}, backend_));
    EXPECT_ERR(Server::start({.socket_path = path_}, backend_), EADDRINUSE, "another colod");
  }
  // A stale socket file (no listener) left by a crash is replaced.
  {
    colod::UniqueFd fd(::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0));
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    path_.copy(addr.sun_path, path_.size());
    ASSERT_EQ(::bind(fd.get(), reinterpret_cast<const sockaddr*>(&addr), sizeof(addr)), 0);
  }
  ASSERT_TRUE(std::filesystem::exists(path_));
  auto again = ASSERT_OK(Server::start({.socket_path = path_, .socket_mode = 0660}, backend_));
  struct stat st {};
  ASSERT_EQ(::stat(path_.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0660U);
  auto client = ASSERT_OK(Client::connect(path_));
  EXPECT_EQ(ASSERT_OK(client.status()).mode(), "dry-run");
}

}  // namespace
}  // namespace colod::control
