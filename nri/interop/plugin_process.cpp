// SPDX-License-Identifier: Apache-2.0
#include "plugin_process.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <thread>

namespace colod::nri::interop {
namespace fs = std::filesystem;

PluginDir::PluginDir() {
  char tmpl[] = "/tmp/colod-plugins-XXXXXX";
  if (::mkdtemp(tmpl) == nullptr) {
    return;
  }
  dir_ = tmpl;
  fs::create_directories(dir_ + "/plugins");
  fs::create_directories(dir_ + "/conf.d");
}

PluginDir::~PluginDir() {
  if (!dir_.empty()) {
    std::error_code ec;
    fs::remove_all(dir_, ec);
  }
}

void PluginDir::add(const std::string& idx,
                    const std::string& name,
                    const std::string& binary,
                    const std::string& config) {
  fs::create_symlink(binary, dir_ + "/plugins/" + idx + "-" + name);
  if (!config.empty()) {
    std::ofstream(dir_ + "/conf.d/" + name + ".conf") << config;
  }
}

void PluginDir::addWrapper(const std::string& idx,
                           const std::string& name,
                           const std::vector<std::string>& argv) {
  const std::string path = dir_ + "/plugins/" + idx + "-" + name;
  std::string cmd = "#!/bin/sh\nexec";
  for (const auto& a : argv) {
    cmd += " '" + a + "'";
  }
  std::ofstream(path) << cmd << "\n";
  fs::permissions(path, fs::perms::owner_all | fs::perms::group_read | fs::perms::group_exec);
}

std::vector<std::string> PluginDir::peerArgs() const {
  return {"--plugin-dir",   dir_ + "/plugins", "--plugin-config-dir",
          dir_ + "/conf.d", "--plugin-stderr", stderrLog()};
}

std::string PluginDir::stderrLog() const { return dir_ + "/plugins.log"; }

PluginProcess::PluginProcess(std::vector<std::string> argv, const std::string& log) {
  std::vector<char*> av;
  av.reserve(argv.size() + 1);
  for (auto& a : argv) {
    av.push_back(a.data());
  }
  av.push_back(nullptr);
  pid_ = ::fork();
  if (pid_ == 0) {
    int fd = ::open(log.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
    if (fd >= 0) {
      ::dup2(fd, STDERR_FILENO);
    }
    ::execv(av[0], av.data());
    std::perror("execv plugin");
    ::_exit(127);
  }
}

bool PluginProcess::alive() {
  if (pid_ <= 0) {
    return false;
  }
  int status = 0;
  if (::waitpid(pid_, &status, WNOHANG) == pid_) {
    pid_ = -1;
    return false;
  }
  return true;
}

PluginProcess::~PluginProcess() {
  if (!alive()) {
    return;
  }
  ::kill(pid_, SIGTERM);
  for (int i = 0; i < 200; ++i) {
    int status = 0;
    if (::waitpid(pid_, &status, WNOHANG) == pid_) {
      return;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  ::kill(pid_, SIGKILL);
  int status = 0;
  ::waitpid(pid_, &status, 0);
}

}  // namespace colod::nri::interop
