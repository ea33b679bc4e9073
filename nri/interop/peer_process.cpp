// SPDX-License-Identifier: Apache-2.0
#include "peer_process.h"

#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <thread>

#ifndef COLOD_TESTPEER_BIN
#error "COLOD_TESTPEER_BIN must be defined by the build"
#endif

namespace colod::nri::interop {
namespace fs = std::filesystem;

namespace {
std::atomic<int> g_counter{0};

bool connectUnix(int fd, const std::string& path) {
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  if (path.size() >= sizeof(addr.sun_path)) {
    return false;
  }
  std::memcpy(addr.sun_path, path.c_str(), path.size() + 1);
  return ::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0;
}
}  // namespace

PeerProcess::PeerProcess(std::vector<std::string> args, bool control) {
  char tmpl[] = "/tmp/colod-interop-XXXXXX";
  if (::mkdtemp(tmpl) == nullptr) {
    return;
  }
  dir_ = tmpl;
  socket_ = dir_ + "/nri/nri.sock";
  log_ = dir_ + "/peer.log";
  cgroup_parent_ = "colod-interop-" + std::to_string(::getpid()) + "-" +
                   std::to_string(g_counter.fetch_add(1));
  args.insert(args.begin(), {COLOD_TESTPEER_BIN, "--socket", socket_, "--log", log_,
                             "--cgroup-parent", cgroup_parent_});
  if (control) {
    control_socket_ = dir_ + "/control.sock";
    args.push_back("--control");
    args.push_back(control_socket_);
  }
  std::vector<char*> argv;
  argv.reserve(args.size() + 1);
  for (auto& a : args) {
    argv.push_back(a.data());
  }
  argv.push_back(nullptr);
  pid_ = ::fork();
  if (pid_ == 0) {
    ::execv(argv[0], argv.data());
    std::perror("execv colod-testpeer");
    ::_exit(127);
  }
  // Ready when the socket (and control socket) exist.
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  while (std::chrono::steady_clock::now() < deadline) {
    if (fs::exists(socket_) && (control_socket_.empty() || fs::exists(control_socket_))) {
      return;
    }
    int status = 0;
    if (::waitpid(pid_, &status, WNOHANG) == pid_) {
      pid_ = -1;
      return;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
}

PeerProcess::~PeerProcess() {
  stop();
  // Belt and braces: if the peer died without cleaning up, remove its cgroups (leaves first).
  if (!cgroup_parent_.empty()) {
    for (const char* root : {"/sys/fs/cgroup/cpu", "/sys/fs/cgroup/cpuacct", "/sys/fs/cgroup/cpuset",
                             "/sys/fs/cgroup/memory", "/sys/fs/cgroup/unified", "/sys/fs/cgroup"}) {
      fs::path top = fs::path(root) / cgroup_parent_;
      std::error_code ec;
      if (!fs::is_directory(top, ec)) {
        continue;
      }
      std::vector<fs::path> dirs;
      for (auto it = fs::recursive_directory_iterator(top, ec); !ec && it != fs::end(it);
           it.increment(ec)) {
        if (it->is_directory(ec)) {
          dirs.push_back(it->path());
        }
      }
      std::sort(dirs.begin(), dirs.end(),
                [](const fs::path& a, const fs::path& b) { return a.string().size() > b.string().size(); });
      for (const auto& d : dirs) {
        ::rmdir(d.c_str());
      }
      ::rmdir(top.c_str());
    }
  }
  if (!dir_.empty()) {
    std::error_code ec;
    fs::remove_all(dir_, ec);
  }
}

int PeerProcess::stop() {
  if (pid_ <= 0) {
    return -1;
  }
  ::kill(pid_, SIGTERM);
  int status = 0;
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  while (::waitpid(pid_, &status, WNOHANG) == 0) {
    if (std::chrono::steady_clock::now() > deadline) {
      ::kill(pid_, SIGKILL);
      ::waitpid(pid_, &status, 0);
      pid_ = -1;
      return -1;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  pid_ = -1;
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

int PeerProcess::connectControl() const {
  // The socket file appears at bind(), before listen(): a connect in between is refused. The
  // constructor waits only for the file, so a refusal while the peer lives is retried briefly.
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  for (;;) {
    int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) {
      return -1;
    }
    if (connectUnix(fd, control_socket_)) {
      return fd;
    }
    const int err = errno;
    ::close(fd);
    const bool alive = pid_ > 0 && ::kill(pid_, 0) == 0;
    if (!alive || (err != ECONNREFUSED && err != ENOENT) ||
        std::chrono::steady_clock::now() > deadline) {
      errno = err;
      return -1;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
}

nlohmann::json PeerProcess::control(const nlohmann::json& step) {
  int fd = connectControl();
  if (fd < 0) {
    return {
        {"ok", false},
        {"error", std::string("cannot connect to the control socket: ") + std::strerror(errno)}};
  }
  std::string line = step.dump() + "\n";
  size_t off = 0;
  while (off < line.size()) {
    ssize_t n = ::write(fd, line.data() + off, line.size() - off);
    if (n <= 0) {
      ::close(fd);
      return {{"ok", false}, {"error", "write to control socket failed"}};
    }
    off += static_cast<size_t>(n);
  }
  std::string reply;
  char buf[4096];
  while (reply.find('\n') == std::string::npos) {
    ssize_t n = ::read(fd, buf, sizeof(buf));
    if (n <= 0) {
      break;
    }
    reply.append(buf, static_cast<size_t>(n));
  }
  ::close(fd);
  auto j = nlohmann::json::parse(reply, nullptr, false);
  if (j.is_discarded()) {
    return {{"ok", false}, {"error", "bad reply: " + reply}};
  }
  return j;
}

nlohmann::json PeerProcess::mustControl(const nlohmann::json& step) {
  auto r = control(step);
  if (!r.value("ok", false)) {
    throw std::runtime_error("control " + step.dump() + " failed: " + r.dump());
  }
  return r.contains("result") ? r["result"] : nlohmann::json();
}

std::vector<nlohmann::json> PeerProcess::events() const {
  std::vector<nlohmann::json> out;
  std::ifstream in(log_);
  std::string line;
  while (std::getline(in, line)) {
    auto j = nlohmann::json::parse(line, nullptr, false);
    if (!j.is_discarded()) {
      out.push_back(std::move(j));
    }
  }
  return out;
}

nlohmann::json PeerProcess::waitEvent(const std::function<bool(const nlohmann::json&)>& pred,
                                      std::chrono::milliseconds timeout) const {
  auto deadline = std::chrono::steady_clock::now() + timeout;
  do {
    for (auto& e : events()) {
      if (pred(e)) {
        return e;
      }
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  } while (std::chrono::steady_clock::now() < deadline);
  return nullptr;
}

size_t PeerProcess::countEvents(const std::function<bool(const nlohmann::json&)>& pred) const {
  size_t n = 0;
  for (auto& e : events()) {
    n += pred(e) ? 1 : 0;
  }
  return n;
}

bool isCgroupV2Host() { return fs::exists("/sys/fs/cgroup/cgroup.controllers"); }

std::string readCgroupFile(const std::string& rel, const std::string& file) {
  std::string path;
  if (isCgroupV2Host()) {
    path = "/sys/fs/cgroup/" + rel + "/" + file;
  } else {
    path = "/sys/fs/cgroup/" + file.substr(0, file.find('.')) + "/" + rel + "/" + file;
  }
  std::ifstream in(path);
  std::string v;
  std::getline(in, v);
  return v;
}

}  // namespace colod::nri::interop
