// SPDX-License-Identifier: Apache-2.0
// Least privilege, measured (labels deploy, privileged: root, real BPF, run serially).
// colod is started the way the container runtime starts the DaemonSet's container: uid 0 with
// the bounding set cut to the capabilities deploy/daemonset.yaml adds, no inheritable or ambient
// capabilities (`drop: [ALL]` + `add`). With exactly those it must load its BPF programs, answer
// /healthz and /readyz, synchronize with a runtime (colod-testpeer) in act mode, and export every
// metric deploy/grafana/colod.json queries; without any one of them it must refuse to start.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <httplib.h>
#include <linux/capability.h>
#include <sched.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <chrono>
#include <csignal>
#include <cstdint>
#include <map>
#include <optional>
#include <regex>
#include <thread>

#include "test_support.h"

namespace {

using namespace colod::deploy_test;  // NOLINT(google-build-using-namespace): test-local helpers
namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

// Kubernetes capability names (without CAP_) -> numbers, from <linux/capability.h>.
const std::map<std::string, int> kCapNumbers = {
    {"CHOWN", CAP_CHOWN},
    {"DAC_OVERRIDE", CAP_DAC_OVERRIDE},
    {"DAC_READ_SEARCH", CAP_DAC_READ_SEARCH},
    {"FOWNER", CAP_FOWNER},
    {"FSETID", CAP_FSETID},
    {"KILL", CAP_KILL},
    {"SETGID", CAP_SETGID},
    {"SETUID", CAP_SETUID},
    {"SETPCAP", CAP_SETPCAP},
    {"LINUX_IMMUTABLE", CAP_LINUX_IMMUTABLE},
    {"NET_BIND_SERVICE", CAP_NET_BIND_SERVICE},
    {"NET_BROADCAST", CAP_NET_BROADCAST},
    {"NET_ADMIN", CAP_NET_ADMIN},
    {"NET_RAW", CAP_NET_RAW},
    {"IPC_LOCK", CAP_IPC_LOCK},
    {"IPC_OWNER", CAP_IPC_OWNER},
    {"SYS_MODULE", CAP_SYS_MODULE},
    {"SYS_RAWIO", CAP_SYS_RAWIO},
    {"SYS_CHROOT", CAP_SYS_CHROOT},
    {"SYS_PTRACE", CAP_SYS_PTRACE},
    {"SYS_PACCT", CAP_SYS_PACCT},
    {"SYS_ADMIN", CAP_SYS_ADMIN},
    {"SYS_BOOT", CAP_SYS_BOOT},
    {"SYS_NICE", CAP_SYS_NICE},
    {"SYS_RESOURCE", CAP_SYS_RESOURCE},
    {"SYS_TIME", CAP_SYS_TIME},
    {"SYS_TTY_CONFIG", CAP_SYS_TTY_CONFIG},
    {"MKNOD", CAP_MKNOD},
    {"LEASE", CAP_LEASE},
    {"AUDIT_WRITE", CAP_AUDIT_WRITE},
    {"AUDIT_CONTROL", CAP_AUDIT_CONTROL},
    {"SETFCAP", CAP_SETFCAP},
    {"MAC_OVERRIDE", CAP_MAC_OVERRIDE},
    {"MAC_ADMIN", CAP_MAC_ADMIN},
    {"SYSLOG", CAP_SYSLOG},
    {"WAKE_ALARM", CAP_WAKE_ALARM},
    {"BLOCK_SUSPEND", CAP_BLOCK_SUSPEND},
    {"AUDIT_READ", CAP_AUDIT_READ},
    {"PERFMON", CAP_PERFMON},
    {"BPF", CAP_BPF},
    {"CHECKPOINT_RESTORE", CAP_CHECKPOINT_RESTORE},
};

uint64_t bit(int cap) { return uint64_t{1} << static_cast<unsigned>(cap); }

// A capability set line of /proc/<pid>/status ("CapEff"), or nullopt.
std::optional<uint64_t> capLine(pid_t pid, const std::string& field) {
  for (const auto& line : splitLines(readFile("/proc/" + std::to_string(pid) + "/status"))) {
    if (line.rfind(field + ":", 0) == 0) {
      return std::stoull(line.substr(field.size() + 1), nullptr, 16);
    }
  }
  return std::nullopt;
}

int lastCap() {
  const std::string s = readFile("/proc/sys/kernel/cap_last_cap");
  return s.empty() ? CAP_LAST_CAP : std::stoi(s);
}

// fork + exec `argv` as root with only `keep` in the bounding set and no inheritable/ambient
// capabilities: after exec the process holds exactly `keep` (permitted = effective = bounding
// for uid 0). stdout and stderr go to `log`.
pid_t spawnWithCapabilities(const std::vector<std::string>& argv,
                            uint64_t keep,
                            const std::string& log) {
  const int last = lastCap();
  const pid_t pid = ::fork();
  if (pid != 0) {
    return pid;
  }
  const int fd = ::open(log.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (fd < 0 || ::dup2(fd, 1) < 0 || ::dup2(fd, 2) < 0) {
    ::_exit(125);
  }
  if (::prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0) != 0) {
    ::_exit(125);
  }
  for (int cap = 0; cap <= last; ++cap) {
    if ((keep & bit(cap)) == 0 && ::prctl(PR_CAPBSET_DROP, cap, 0, 0, 0) != 0) {
      ::_exit(125);
    }
  }
  __user_cap_header_struct header{};
  header.version = _LINUX_CAPABILITY_VERSION_3;
  std::array<__user_cap_data_struct, 2> data{};  // _LINUX_CAPABILITY_U32S_3 words
  if (::syscall(SYS_capget, &header, data.data()) != 0) {
    ::_exit(125);
  }
  data[0].inheritable = 0;
  data[1].inheritable = 0;
  if (::syscall(SYS_capset, &header, data.data()) != 0) {
    ::_exit(125);
  }
  std::vector<char*> args;
  for (const auto& a : argv) {
    args.push_back(const_cast<char*>(a.c_str()));  // NOLINT: execv's signature
  }
  args.push_back(nullptr);
  ::execv(args[0], args.data());
  ::_exit(127);
}

// SIGTERM, then SIGKILL after `grace`; the exit code, or -1 (signal / killed).
int stop(pid_t pid, std::chrono::seconds grace) {
  ::kill(pid, SIGTERM);
  const auto deadline = Clock::now() + grace;
  int status = 0;
  while (::waitpid(pid, &status, WNOHANG) == 0) {
    if (Clock::now() > deadline) {
      ::kill(pid, SIGKILL);
      ::waitpid(pid, &status, 0);
      return -1;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

std::string hexMask(uint64_t m) {
  std::array<char, 32> buf{};
  std::snprintf(buf.data(), buf.size(), "%016llx", static_cast<unsigned long long>(m));
  return buf.data();
}

class DeployCaps : public ::testing::Test {
 protected:
  void SetUp() override {
    if (::geteuid() != 0) {
      GTEST_SKIP() << "not root: starting colod with a chosen capability set needs uid 0";
    }
    if (!fs::exists("/sys/kernel/btf/vmlinux")) {
      GTEST_SKIP() << "no kernel BTF (/sys/kernel/btf/vmlinux): colod's programs cannot load here";
    }
    for (const auto& name : daemonSetCapabilities()) {
      const auto it = kCapNumbers.find(name);
      ASSERT_NE(it, kCapNumbers.end()) << "unknown capability in the DaemonSet: " << name;
      caps_ |= bit(it->second);
    }
    ASSERT_NE(caps_, 0U) << "the DaemonSet adds no capability";
    const auto own = capLine(::getpid(), "CapEff");
    ASSERT_TRUE(own.has_value());
    if ((*own & (caps_ | bit(CAP_SETPCAP))) != (caps_ | bit(CAP_SETPCAP))) {
      GTEST_SKIP() << "this test's own effective set (" << hexMask(*own)
                   << ") lacks the DaemonSet's capabilities or CAP_SETPCAP (a container?)";
    }
    ASSERT_TRUE(dir_.ok());
  }

  // Writes a config for a colod confined to dir_ and returns its path.
  // Its metrics server takes a free port (waitReady finds it).
  std::string config(const std::string& mode,
                     const std::string& nri_socket,
                     const std::string& extra = "") {
    const auto path = dir_.path() / ("colod-" + mode + ".yaml");
    std::ofstream(path) << "daemon:\n"
                        << "  interval_ms: 100\n"
                        << "  mode: " << mode << "\n"
                        << "  nri_socket: " << nri_socket << "\n"
                        << "  control_socket: " << (dir_.path() / "colod.sock").string() << "\n"
                        << "  metrics_listen: \"127.0.0.1:0\"\n"
                        << "  journal_path: " << (dir_.path() / "journal.json").string() << "\n"
                        << "  log_level: info\n"
                        << extra;
    return path.string();
  }

  pid_t startColod(const std::string& config_path, uint64_t keep, const std::string& log) {
    return spawnWithCapabilities({COLOD_BIN, "--config", config_path}, keep, log);
  }

  // The port colod's metrics server took (it is told port 0: a port picked by the test and
  // freed before colod binds it could be taken in between by a parallel test, CI of session
  // 42), from its log line, or 0 when `pid` exits or the deadline passes first.
  static int metricsPort(pid_t pid, const std::string& log, Clock::time_point deadline) {
    static const std::regex re(R"(metrics on http://[^:]+:(\d+)/metrics)");
    while (Clock::now() < deadline) {
      const std::string text = readFile(log);
      if (std::smatch m; std::regex_search(text, m, re)) {
        return std::stoi(m[1].str());
      }
      int status = 0;
      if (::waitpid(pid, &status, WNOHANG) == pid) {
        return 0;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    return 0;
  }

  struct Ready {
    int port = 0;      // colod's metrics port
    std::string body;  // its /readyz answer
  };
  // Polls colod's GET /readyz until it answers 200 or `pid` exits or the deadline passes.
  static std::optional<Ready> waitReady(pid_t pid,
                                        const std::string& log,
                                        std::chrono::seconds timeout) {
    const auto deadline = Clock::now() + timeout;
    const int port = metricsPort(pid, log, deadline);
    if (port <= 0) {
      return std::nullopt;
    }
    auto body = waitFor200(pid, port, "/readyz", deadline);
    if (!body) {
      return std::nullopt;
    }
    return Ready{port, std::move(*body)};
  }

  // Polls GET path until it answers 200 or `pid` exits or the deadline passes.
  static std::optional<std::string> waitFor200(pid_t pid,
                                               int port,
                                               const std::string& path,
                                               Clock::time_point deadline) {
    httplib::Client cli("127.0.0.1", port);
    cli.set_connection_timeout(1, 0);
    cli.set_read_timeout(2, 0);
    while (Clock::now() < deadline) {
      if (auto res = cli.Get(path); res && res->status == 200) {
        return res->body;
      }
      int status = 0;
      if (::waitpid(pid, &status, WNOHANG) == pid) {
        return std::nullopt;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    return std::nullopt;
  }

  // Every metric the dashboard queries is a family the running colod exports.
  static void expectDashboardMetricsExported(int port) {
    httplib::Client cli("127.0.0.1", port);
    const auto res = cli.Get("/metrics");
    ASSERT_TRUE(res && res->status == 200);
    std::set<std::string> families;
    std::set<std::string> histograms;
    for (const auto& line : splitLines(res->body)) {
      std::istringstream in(line);
      std::string hash;
      std::string type;
      std::string name;
      std::string kind;
      if (in >> hash >> type >> name >> kind && hash == "#" && type == "TYPE") {
        families.insert(name);
        if (kind == "histogram") {
          histograms.insert(name);
        }
      }
    }
    ASSERT_GE(families.size(), 10U) << res->body;
    for (const auto& m : dashboardMetricNames()) {
      EXPECT_TRUE(families.count(familyOf(m, histograms)))
          << "the dashboard queries " << m << ", which colod's /metrics does not export";
    }
  }

  // Once ready, colod has dropped everything it was given (daemon.drop_capabilities): nothing
  // effective or permitted; the bounding set stays as the runtime cut it (dropping from it
  // needs CAP_SETPCAP, which the DaemonSet does not grant), never larger.
  void expectDropped(pid_t pid) {
    for (const char* set : {"CapEff", "CapPrm", "CapInh", "CapAmb"}) {
      const auto v = capLine(pid, set);
      ASSERT_TRUE(v.has_value()) << set;
      EXPECT_EQ(hexMask(*v), hexMask(0)) << set << " of colod after startup";
    }
    const auto bnd = capLine(pid, "CapBnd");
    ASSERT_TRUE(bnd.has_value());
    EXPECT_EQ(*bnd & ~caps_, 0U) << "bounding set " << hexMask(*bnd) << " beyond the DaemonSet's";
  }

  uint64_t caps_ = 0;
  TempDir dir_;
};

TEST_F(DeployCaps, ObservesWithExactlyTheDaemonSetCapabilities) {
  const std::string log = (dir_.path() / "colod.log").string();
  const pid_t pid =
      startColod(config("observe-only", (dir_.path() / "no-nri.sock").string()), caps_, log);
  ASSERT_GT(pid, 0);
  const auto ready = waitReady(pid, log, std::chrono::seconds(30));
  EXPECT_TRUE(ready.has_value()) << "colod did not become ready; log:\n" << readFile(log);
  if (ready) {
    expectDropped(pid);
    EXPECT_TRUE(waitFor200(pid, ready->port, "/healthz", Clock::now() + std::chrono::seconds(5))
                    .has_value());
    expectDashboardMetricsExported(ready->port);
  }
  EXPECT_EQ(stop(pid, std::chrono::seconds(15)), 0) << readFile(log);
}

TEST_F(DeployCaps, SynchronizesAndActsWithExactlyTheDaemonSetCapabilities) {
#ifndef COLOD_TESTPEER_BIN
  GTEST_SKIP() << "colod-testpeer is not built (COLOD_TESTPEER=OFF): act mode needs a runtime";
#else
  if (!fs::exists(COLOD_TESTPEER_BIN)) {
    GTEST_SKIP() << COLOD_TESTPEER_BIN
                 << " is not built: cmake --build build --target "
                    "colod-testpeer";
  }
  const fs::path sock = dir_.path() / "nri/nri.sock";
  const std::string peer_log = (dir_.path() / "peer.log").string();
  const std::vector<std::string> peer_argv{COLOD_TESTPEER_BIN,
                                           "--socket",
                                           sock.string(),
                                           "--log",
                                           peer_log,
                                           "--cgroup-parent",
                                           "colod-deploy-caps-" + std::to_string(::getpid())};
  // The peer is the runtime: it keeps every capability.
  const pid_t peer =
      spawnWithCapabilities(peer_argv, ~uint64_t{0}, (dir_.path() / "peer.out").string());
  ASSERT_GT(peer, 0);
  const auto deadline = Clock::now() + std::chrono::seconds(20);
  while (!fs::exists(sock) && Clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  if (!fs::exists(sock)) {
    stop(peer, std::chrono::seconds(5));
    FAIL() << "colod-testpeer did not create " << sock << ": " << readFile(peer_log);
  }
  const std::string log = (dir_.path() / "colod-act.log").string();
  const pid_t pid = startColod(config("act", sock.string()), caps_, log);
  ASSERT_GT(pid, 0);
  const auto ready = waitReady(pid, log, std::chrono::seconds(30));
  EXPECT_TRUE(ready.has_value()) << "colod did not synchronize with the runtime; log:\n"
                                 << readFile(log);
  if (ready) {
    EXPECT_NE(ready->body.find("synchroniz"), std::string::npos) << ready->body;
    expectDropped(pid);
  }
  EXPECT_EQ(stop(pid, std::chrono::seconds(15)), 0) << readFile(log);
  EXPECT_EQ(stop(peer, std::chrono::seconds(10)), 0) << readFile(peer_log);
#endif
}

// The DaemonSet's reload path: render-config --watch (the config-reloader sidecar) rewrites the
// file colod reads when its source (the ConfigMap) changes, and colod reloads it.
TEST_F(DeployCaps, AChangedConfigMapReachesColodThroughTheRenderer) {
  const fs::path configmap = dir_.path() / "configmap";
  const fs::path rendered = dir_.path() / "rendered";
  fs::create_directories(configmap);
  fs::create_directories(rendered);
  const fs::path src = configmap / "config.yaml";
  fs::rename(config("observe-only", (dir_.path() / "no-nri.sock").string()), src);
  const fs::path dst = rendered / "config.yaml";
  const std::string script = (kRoot / "deploy/render-config.sh").string();
  auto render = run({"sh", script, src.string(), dst.string()}, {"COLOD_METRICS_IP=127.0.0.1"});
  ASSERT_EQ(render.exit_code, 0) << render.err;

  const pid_t reloader = ::fork();
  ASSERT_GE(reloader, 0);
  if (reloader == 0) {
    ::setenv("COLOD_METRICS_IP", "127.0.0.1", 1);
    ::execlp("sh", "sh", script.c_str(), "--watch", "1", src.c_str(), dst.c_str(), nullptr);
    ::_exit(127);
  }
  const std::string log = (dir_.path() / "colod-reload.log").string();
  const pid_t pid = startColod(dst.string(), caps_, log);
  ASSERT_GT(pid, 0);
  const auto ready = waitReady(pid, log, std::chrono::seconds(30));
  EXPECT_TRUE(ready.has_value()) << readFile(log);
  if (ready) {
    auto reloads = [port = ready->port]() -> std::string {
      httplib::Client cli("127.0.0.1", port);
      const auto res = cli.Get("/metrics");
      for (const auto& line : splitLines(res ? res->body : "")) {
        if (line.rfind("colod_config_reloads_total ", 0) == 0) {
          return line.substr(line.find(' ') + 1);
        }
      }
      return "";
    };
    const std::string before = reloads();
    ASSERT_FALSE(before.empty()) << "no colod_config_reloads_total";
    // The ConfigMap changes (the kubelet swaps the file): a new log level.
    std::string text = readFile(src);
    text.replace(text.find("log_level: info"), 15, "log_level: debug");
    const fs::path tmp = configmap / ".new";
    std::ofstream(tmp) << text;
    fs::rename(tmp, src);
    const auto deadline = Clock::now() + std::chrono::seconds(15);
    std::string after = before;
    while (after == before && Clock::now() < deadline) {
      std::this_thread::sleep_for(std::chrono::milliseconds(200));
      after = reloads();
    }
    EXPECT_NE(after, before) << "colod did not reload the re-rendered config; log:\n"
                             << readFile(log);
    EXPECT_NE(readFile(dst).find("log_level: debug"), std::string::npos);
  }
  EXPECT_EQ(stop(pid, std::chrono::seconds(15)), 0) << readFile(log);
  EXPECT_EQ(stop(reloader, std::chrono::seconds(5)), 0);
}

// daemon.realtime_priority is opt-in (deploy/README.md "Realtime"): asked for, with SYS_NICE
// added to the DaemonSet's capabilities, colod's loop runs under SCHED_FIFO once it has dropped
// every capability; with the DaemonSet's capabilities alone it runs under SCHED_OTHER and its log
// says why.
TEST_F(DeployCaps, RealtimeWhenAskedForTakesSysNice) {
  for (const bool with_nice : {true, false}) {
    SCOPED_TRACE(with_nice ? "with SYS_NICE" : "without SYS_NICE");
    const std::string log =
        (dir_.path() / (with_nice ? "colod-rt.log" : "colod-rt-no-nice.log")).string();
    const std::string cfg =
        config("observe-only", (dir_.path() / "no-nri.sock").string(), "  realtime_priority: 1\n");
    const pid_t pid = startColod(cfg, with_nice ? caps_ | bit(CAP_SYS_NICE) : caps_, log);
    ASSERT_GT(pid, 0);
    const auto ready = waitReady(pid, log, std::chrono::seconds(30));
    EXPECT_TRUE(ready.has_value()) << readFile(log);
    if (ready) {
      EXPECT_EQ(::sched_getscheduler(pid), with_nice ? SCHED_FIFO : SCHED_OTHER) << readFile(log);
      EXPECT_NE(readFile(log).find(with_nice ? "reaction path under SCHED_FIFO 1"
                                             : "reaction path left under SCHED_OTHER"),
                std::string::npos)
          << readFile(log);
      const auto eff = capLine(pid, "CapEff");
      ASSERT_TRUE(eff.has_value());
      EXPECT_EQ(hexMask(*eff), hexMask(0)) << "colod keeps no capability once started";
    }
    EXPECT_EQ(stop(pid, std::chrono::seconds(15)), 0) << readFile(log);
  }
}

TEST_F(DeployCaps, EveryDaemonSetCapabilityIsNeeded) {
  for (const auto& name : daemonSetCapabilities()) {
    SCOPED_TRACE("without " + name);
    const uint64_t keep = caps_ & ~bit(kCapNumbers.at(name));
    const std::string log = (dir_.path() / ("colod-no-" + name + ".log")).string();
    const pid_t pid =
        startColod(config("observe-only", (dir_.path() / "no-nri.sock").string()), keep, log);
    ASSERT_GT(pid, 0);
    int status = 0;
    const auto deadline = Clock::now() + std::chrono::seconds(20);
    pid_t done = 0;
    while ((done = ::waitpid(pid, &status, WNOHANG)) == 0 && Clock::now() < deadline) {
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    if (done != pid) {
      stop(pid, std::chrono::seconds(10));
      ADD_FAILURE() << "colod runs without CAP_" << name
                    << ": the DaemonSet does not need it; log:\n"
                    << readFile(log);
      continue;
    }
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 3) << readFile(log);
    EXPECT_NE(readFile(log).find("Operation not permitted"), std::string::npos) << readFile(log);
  }
}

}  // namespace
