// SPDX-License-Identifier: Apache-2.0
// Observe-only without NRI, on the real kernel (label privileged): colod with no runtime socket
// lists the containers of a fake kubepods tree made of real cgroups under a private prefix of
// this host's hierarchies, classifies them from their QoS path, follows containers that come and
// go, and says the missing socket once. Checked through the control API and `coloctl top`.
#include <gtest/gtest.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "colod/cgroup/cgroup.h"
#include "colod/control/client.h"

namespace colod::daemon {
namespace {

namespace fs = std::filesystem;
using namespace std::chrono_literals;

const std::string kBe = "be0000000000000000000000000000000000000000000000000000000000000b";
const std::string kGu = "a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1";
const std::string kBu = "b2b2b2b2b2b2b2b2b2b2b2b2b2b2b2b2b2b2b2b2b2b2b2b2b2b2b2b2b2b2b2b2";
const std::string kLate = "c3c3c3c3c3c3c3c3c3c3c3c3c3c3c3c3c3c3c3c3c3c3c3c3c3c3c3c3c3c3c3c3";

std::string slurp(const std::string& path) {
  std::ifstream in(path);
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::size_t count(const std::string& text, const std::string& what) {
  std::size_t n = 0;
  for (std::size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) {
    ++n;
  }
  return n;
}

template <typename Pred>
bool waitFor(Pred pred, std::chrono::milliseconds timeout) {
  const auto until = std::chrono::steady_clock::now() + timeout;
  while (std::chrono::steady_clock::now() < until) {
    if (pred()) {
      return true;
    }
    std::this_thread::sleep_for(100ms);
  }
  return pred();
}

class ObserveOnlyWithoutNri : public ::testing::Test {
 protected:
  void SetUp() override {
    if (::geteuid() != 0) {
      GTEST_SKIP() << "needs root: creates cgroups and loads colod's BPF programs";
    }
    auto hier = cgroup::probe("/sys/fs/cgroup");
    if (!hier) {
      GTEST_SKIP() << "no cgroup hierarchy at /sys/fs/cgroup: " << hier.error().message();
    }
    // Every hierarchy a kubelet would create the pod in (the collector reads the cpu one on v1
    // and hybrid hosts, the unified one on v2).
    for (const auto& h : {hier->unified, hier->cpu}) {
      if (!h.empty() && std::find(roots_.begin(), roots_.end(), h) == roots_.end()) {
        roots_.push_back(h);
      }
    }
    prefix_ = "/colod-observe-" + std::to_string(::getpid());
    char tmpl[] = "/tmp/colod-observe-XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
    be_rel_ = prefix_ + "/kubepods/besteffort/pod11111111-2222-3333-4444-555555555555/" + kBe;
    gu_rel_ = prefix_ + "/kubepods/podaaaa/" + kGu;
    bu_rel_ = prefix_ +
              "/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod12_34.slice/"
              "cri-containerd-" +
              kBu + ".scope";
    late_rel_ = prefix_ + "/kubepods/besteffort/pod5555/" + kLate;
    for (const auto& rel : {be_rel_, gu_rel_, bu_rel_}) {
      mkdirs(rel);
    }
  }

  void TearDown() override {
    if (pid_ > 0) {
      ::kill(pid_, SIGKILL);
      ::waitpid(pid_, nullptr, 0);
    }
    // Deepest first: a cgroup is removed with rmdir, never recursively.
    for (const auto& root : roots_) {
      std::vector<fs::path> dirs;
      std::error_code ec;
      if (!fs::exists(root + prefix_, ec)) {
        continue;
      }
      for (auto it = fs::recursive_directory_iterator(root + prefix_, ec);
           it != fs::recursive_directory_iterator(); it.increment(ec)) {
        if (it->is_directory(ec) && !it->is_symlink(ec)) {
          dirs.push_back(it->path());
        }
      }
      std::sort(dirs.begin(), dirs.end(), [](const fs::path& a, const fs::path& b) {
        return a.string().size() > b.string().size();
      });
      for (const auto& d : dirs) {
        ::rmdir(d.c_str());
      }
      ::rmdir((root + prefix_).c_str());
    }
    if (!dir_.empty()) {
      fs::remove_all(dir_);
    }
  }

  void mkdirs(const std::string& rel) {
    for (const auto& root : roots_) {
      std::error_code ec;
      fs::create_directories(root + rel, ec);
      ASSERT_FALSE(ec) << root + rel << ": " << ec.message();
    }
  }
  void rmdirs(const std::string& rel) {
    for (const auto& root : roots_) {
      ASSERT_EQ(::rmdir((root + rel).c_str()), 0) << root + rel;
    }
  }

  void startColod() {
    std::ofstream(dir_ + "/colod.yaml")
        << "daemon:\n  nri_socket: " << dir_ << "/no-runtime/nri.sock\n  control_socket: " << dir_
        << "/colod.sock\n  metrics_listen: \"\"\n  journal_path: " << dir_
        << "/journal.json\n  systemd_cgroup_prefix: " << prefix_ << "\n";
    pid_ = ::fork();
    ASSERT_GE(pid_, 0);
    if (pid_ == 0) {
      const std::string log = dir_ + "/colod.log";
      std::freopen(log.c_str(), "w", stdout);
      ::dup2(::fileno(stdout), STDERR_FILENO);
      const std::string cfg = dir_ + "/colod.yaml";
      ::execl(COLOD_BIN, COLOD_BIN, "--config", cfg.c_str(), static_cast<char*>(nullptr));
      ::_exit(127);
    }
  }

  std::map<std::string, control::v1::Container> containers() {
    std::map<std::string, control::v1::Container> out;
    auto client = control::Client::connect(dir_ + "/colod.sock");
    if (!client) {
      return out;
    }
    auto list = client->listContainers();
    if (!list) {
      return out;
    }
    for (const auto& c : list->containers()) {
      out[c.id()] = c;
    }
    return out;
  }

  std::string log() { return slurp(dir_ + "/colod.log"); }

  std::vector<std::string> roots_;
  std::string prefix_;
  std::string dir_;
  std::string be_rel_, gu_rel_, bu_rel_, late_rel_;
  pid_t pid_ = -1;
};

TEST_F(ObserveOnlyWithoutNri, ListsTheKubepodsTreeAndFollowsIt) {
  startColod();
  ASSERT_TRUE(waitFor([&] { return containers().size() == 3; }, 60s)) << log();
  auto client = control::Client::connect(dir_ + "/colod.sock");
  ASSERT_TRUE(client.has_value());
  auto st = client->status();
  ASSERT_TRUE(st.has_value());
  EXPECT_EQ(st->mode(), "observe-only");
  EXPECT_FALSE(st->nri_connected());
  EXPECT_EQ(st->containers(), 3U);

  // Classified from the QoS in the path, resolved to their real cgroups.
  ASSERT_TRUE(waitFor(
      [&] {
        auto all = containers();
        return std::all_of(all.begin(), all.end(),
                           [](const auto& kv) { return kv.second.cgroup_id() != 0; });
      },
      10s))
      << log();
  auto all = containers();
  EXPECT_EQ(all[kBe].tier(), "be");
  EXPECT_EQ(all[kGu].tier(), "ls");
  EXPECT_EQ(all[kBu].tier(), "ls");
  EXPECT_EQ(all[kBe].pod_uid(), "11111111-2222-3333-4444-555555555555");
  EXPECT_EQ(all[kBu].pod_uid(), "12-34");
  EXPECT_EQ(all[kBe].cgroup_path(), be_rel_);
  EXPECT_EQ(all[kBu].cgroup_path(), bu_rel_);
  EXPECT_EQ(all[kGu].name(), kGu.substr(0, 12));
  EXPECT_EQ(all[kGu].namespace_(), "kubepods");

  // coloctl top shows them.
  const std::string cmd =
      std::string(COLOCTL_BIN) + " --socket " + dir_ + "/colod.sock top --once 2>&1";
  FILE* p = ::popen(cmd.c_str(), "r");
  ASSERT_NE(p, nullptr);
  std::string top;
  char buf[4096];
  for (std::size_t n; (n = std::fread(buf, 1, sizeof buf, p)) > 0;) {
    top.append(buf, n);
  }
  EXPECT_EQ(::pclose(p), 0) << top;
  EXPECT_NE(top.find(kBe.substr(0, 12)), std::string::npos) << top;
  EXPECT_NE(top.find(kBu.substr(0, 12)), std::string::npos) << top;
  EXPECT_NE(top.find("observe-only"), std::string::npos) << top;

  // A container that starts and one that goes away are followed (rescanned about once a second).
  mkdirs(late_rel_);
  rmdirs(gu_rel_);
  EXPECT_TRUE(waitFor(
      [&] {
        auto now = containers();
        return now.count(kLate) == 1 && now.count(kGu) == 0;
      },
      20s))
      << log();

  // The missing runtime socket is said once (and the discovery once), not every retry.
  std::this_thread::sleep_for(3s);
  const std::string text = log();
  EXPECT_EQ(count(text, "nri: disconnected"), 1U) << text;
  EXPECT_EQ(count(text, "containers listed from the kubepods cgroup tree"), 1U) << text;

  // The real daemon answers config show with the effective values and their sources, and a
  // reload of the unchanged file says so: one log line, no decision-log entry (that log is what
  // colod did to containers).
  auto show = client->configShow();
  ASSERT_TRUE(show.has_value());
  EXPECT_GT(show->loaded_unix_ms(), 0);
  bool saw_prefix = false;
  for (const auto& v : show->values()) {
    if (v.key() == "daemon.systemd_cgroup_prefix") {
      saw_prefix = true;
      EXPECT_EQ(v.value(), prefix_);
      EXPECT_EQ(v.source(), control::v1::ConfigValue::SOURCE_FILE);
    }
    if (v.key() == "daemon.interval_ms") {
      EXPECT_EQ(v.source(), control::v1::ConfigValue::SOURCE_DEFAULT);
    }
  }
  EXPECT_TRUE(saw_prefix);
  const std::size_t decisions_before = client->decisions(0)->decisions_size();
  auto reload = client->configReload();
  ASSERT_TRUE(reload.has_value());
  EXPECT_TRUE(reload->ok());
  EXPECT_FALSE(reload->changed());
  EXPECT_EQ(client->decisions(0)->decisions_size(), decisions_before);
  EXPECT_TRUE(waitFor([&] { return count(log(), "unchanged, nothing to do") == 1; }, 5s)) << log();

  ASSERT_EQ(::kill(pid_, SIGTERM), 0);
  int status = 0;
  ASSERT_EQ(::waitpid(pid_, &status, 0), pid_);
  pid_ = -1;
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << status << "\n" << log();
}

}  // namespace
}  // namespace colod::daemon
