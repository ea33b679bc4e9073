// SPDX-License-Identifier: Apache-2.0
// Round trips over a real Unix socket with an in-process fake backend.
#include "colod/control/server.h"

#include <gtest/gtest.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <atomic>
#include <filesystem>
#include <thread>

#include "colod/base/unique_fd.h"
#include "colod/control/client.h"
#include "colod/control/names.h"
#include "colod/testing/result_matchers.h"

namespace colod::control {
namespace {

class FakeBackend : public Backend {
 public:
  bool fail_internal = false;
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
    // What the daemon does: resolve the name against what it knows.
    std::vector<v1::Container> known(1);
    known[0].set_id("abcdef123456");
    auto idx = resolveContainer(known, query);
    if (!idx) {
      return std::move(idx).error();
    }
    return v1::HistogramReply();
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
    if (fail_internal) {
      return COLOD_ERR(EIO, "reading ", "/etc/colod/colod.yaml");
    }
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

// Issue #16: `coloctl hist nosuch` printed "[names.cpp:51] no container matches 'nosuch' (...):
// No such file or directory: No such file or directory". The operator reads one sentence.
TEST_F(ControlTest, ErrorsReachTheOperatorAsOneSentence) {
  auto server = ASSERT_OK(Server::start({.socket_path = path_}, backend_));
  auto client = ASSERT_OK(Client::connect(path_));
  auto r = client.histogram("nosuch");
  ASSERT_FALSE(r.has_value());
  EXPECT_EQ(r.error().errnoValue(), ENOENT);
  // The server sends the sentence (no strerror: NOT_FOUND says it), the resolver adds no marker.
  EXPECT_EQ(r.error().context(),
            "no container matches 'nosuch' (try namespace/pod/container, pod/container, a name "
            "or an id prefix)");
  EXPECT_EQ(operatorMessage(r.error()), r.error().context());
  // An internal failure keeps its cause (the strerror is all there is) and loses its marker.
  backend_.fail_internal = true;
  auto show = client.configShow();
  ASSERT_FALSE(show.has_value());
  EXPECT_EQ(operatorMessage(show.error()), "reading /etc/colod/colod.yaml: Input/output error");
  EXPECT_NE(show.error().context().find("[server_test.cpp:"), std::string::npos)
      << "the internals stay available for --debug";
}

TEST(OperatorMessage, DropsMarkersAndTheRepeatedStrerror) {
  // What an older colod sent (Error::message() with the marker), as the client received it.
  const Error old(ENOENT,
                  "[names.cpp:51] no container matches 'x' (try ...): No such file or directory");
  EXPECT_EQ(operatorMessage(old), "no container matches 'x' (try ...)");
  const Error twice(EINVAL,
                    "f.yaml:2:9: daemon.mode: 'fast': expected one of act, dry-run: "
                    "Invalid argument: Invalid argument");
  EXPECT_EQ(operatorMessage(twice),
            "f.yaml:2:9: daemon.mode: 'fast': expected one of act, dry-run");
  const Error wrapped = Error(EIO, "[journal.cpp:12] writing /var/lib/colod/j: disk full")
                            .wrap("[loop.cpp:3] saving");
  EXPECT_EQ(operatorMessage(wrapped), "saving -- writing /var/lib/colod/j: disk full");
  // Brackets that are not markers stay.
  EXPECT_EQ(operatorMessage(Error(EINVAL, "cpus [0-3]: a:1 [x:y] [a b:1]")),
            "cpus [0-3]: a:1 [x:y] [a b:1]");
}

// Permission denied on the socket says so and who may connect, not "is the daemon running?".
TEST_F(ControlTest, PermissionDeniedOnTheSocketSaysWhoMayConnect) {
  auto server = ASSERT_OK(Server::start({.socket_path = path_}, backend_));
  // The directories must be searchable by the unprivileged user; the socket stays 0600.
  ASSERT_EQ(::chmod(dir_.c_str(), 0755), 0);
  ASSERT_EQ(::chmod((dir_ + "/sub").c_str(), 0755), 0);
  std::string message;
  if (::geteuid() == 0) {
    // As root, connect from a child that has become nobody (root bypasses the mode).
    std::array<int, 2> fds{};
    ASSERT_EQ(::pipe(fds.data()), 0);
    const pid_t pid = ::fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
      ::close(fds[0]);
      if (::setgid(65534) != 0 || ::setuid(65534) != 0) {
        ::_exit(2);
      }
      auto r = Client::connect(path_);
      const std::string m = r.has_value() ? "connected" : operatorMessage(r.error());
      const bool written = ::write(fds[1], m.data(), m.size()) == static_cast<ssize_t>(m.size());
      ::_exit(written ? 0 : 3);
    }
    ::close(fds[1]);
    std::array<char, 1024> buf{};
    ssize_t n = 0;
    while ((n = ::read(fds[0], buf.data(), buf.size())) > 0) {
      message.append(buf.data(), static_cast<std::size_t>(n));
    }
    ::close(fds[0]);
    int status = 0;
    ASSERT_EQ(::waitpid(pid, &status, 0), pid);
    ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << status;
  } else {
    // The socket is ours: close it to us.
    ASSERT_EQ(::chmod(path_.c_str(), 0000), 0);
    auto denied = Client::connect(path_);
    ASSERT_FALSE(denied.has_value());
    message = operatorMessage(denied.error());
  }
  EXPECT_EQ(message.rfind("permission denied on " + path_ + ": run as root", 0), 0U) << message;
  EXPECT_EQ(message.find("is the daemon running"), std::string::npos) << message;
  if (::geteuid() == 0) {
    EXPECT_NE(message.find("(the socket is mode 0600"), std::string::npos) << message;
  }
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
  EXPECT_EQ(r.error().errnoValue(), ENOENT);
  EXPECT_EQ(operatorMessage(r.error()), "cannot reach colod at " + path_ +
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
