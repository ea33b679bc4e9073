// SPDX-License-Identifier: Apache-2.0
// The shared harness of the tests that run the real colod process against the real Go runtime
// peer (colod-testpeer): the end-to-end suite (userspace/e2e) and the fault suite
// (userspace/faults). Test-only (library colod_e2e_testing); production targets never link it.
//
// What it gives:
// - small utilities: slurp a file, run a shell command, bounded polling, /metrics parsing;
// - ColodProcess: a colod child with its own directory (config, sockets, journal, log);
// - ColodFixture: a gtest fixture owning a temp dir, a PeerProcess and a ColodProcess, with the
//   daemon config both suites start from and the pods/containers of the colocation workload
//   (the colod-probe LS probe and stress-ng BE hogs, each looping until its stop file appears).
//
// Every wait is a bounded poll; nothing sleeps as an assertion.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "colod/control/client.h"
#include "peer_process.h"

namespace colod::e2e {

// The binaries under test (absolute paths from the build).
const char* colodBin();
const char* coloctlBin();
const char* probeBin();

// The whole file ("" when it cannot be read).
std::string slurp(const std::string& path);
// `s` without trailing newlines and spaces.
std::string trim(std::string s);

// Polls pred every `poll` until it holds or the timeout passes; returns pred's last value.
bool waitFor(const std::function<bool()>& pred,
             std::chrono::milliseconds timeout,
             std::chrono::milliseconds poll = std::chrono::milliseconds(50));

struct CmdResult {
  int exit_code = -1;  // -1 when the command could not run or was killed by a signal
  std::string out;     // stdout + stderr
};
// Runs `cmd` under /bin/sh, stdout and stderr merged.
CmdResult run(const std::string& cmd);

// Why this machine cannot run the real-colod suites ("" when it can): not root, no BTF, no
// stress-ng.
std::string skipReason();

// Sum of a metric's samples whose series contains `match` (Prometheus text); -1 if the metric is
// absent.
double metricValue(const std::string& text, const std::string& name, const std::string& match = "");

// The journal (daemon.journal_path), format v2:
//   {"version":2,"containers":[{"id","name","base":{..},"overlay":{..},"actions":[..]}]}
// A missing file reads as an empty v2 journal; nullopt when the file is not a v2 journal (or
// not JSON), with the reason in *why when given. What a restarted colod would load: the
// write-ahead copy "<path>.next" instead when it is live ('W' then the journal's JSON), whole,
// and not older than the file (colod stopped between the two writes, journal_ahead.h).
std::optional<nlohmann::json> readJournal(const std::string& path, std::string* why = nullptr);
// readJournal()'s document as text ("" when it is not a v2 journal): what a restarted colod
// would load, for assertions on its content.
std::string loadedJournalText(const std::string& path);
// How many containers the v2 journal holds a non-empty overlay for; -1 when it is not v2.
int journalOverlays(const std::string& path);

// A colod child process with its own directory (config, sockets, journal, log). The config file
// is <dir>/colod.yaml; the paths below are what ColodFixture::daemonConfig writes into it.
class ColodProcess {
 public:
  // `args` are extra command-line flags (e.g. {"--mode", "observe-only"}).
  ColodProcess(std::string dir, const std::string& config_yaml, std::vector<std::string> args = {});
  ~ColodProcess();  // SIGKILL if still running
  ColodProcess(const ColodProcess&) = delete;
  ColodProcess& operator=(const ColodProcess&) = delete;
  ColodProcess(ColodProcess&&) = delete;
  ColodProcess& operator=(ColodProcess&&) = delete;

  // Replaces the config file atomically, like an editor's rename-on-save.
  void writeConfig(const std::string& yaml);

  // Forks and execs colod; true once the control API answers and the metrics port is logged,
  // false if it exited first or did not become ready within `timeout`.
  bool start(std::chrono::milliseconds timeout = std::chrono::seconds(60));
  // Forks and execs colod and waits for it to exit (for runs that must fail); the exit code,
  // or -1 if it was still running after `timeout` (then it is killed).
  int runToExit(std::chrono::milliseconds timeout);

  // Reaps the child if it exited (non-blocking).
  bool exited();
  // Exit code of the last exit (128+signal when killed), -1 before one.
  [[nodiscard]] int exitCode() const { return exit_code_; }
  // Sends sig and waits (bounded) for the exit; returns the exit code (-1 if it did not exit
  // and had to be SIGKILLed).
  int kill(int sig, std::chrono::milliseconds timeout = std::chrono::seconds(30));

  // The metrics port this run of colod logged (0 until it did).
  int metricsPort();
  // A connected control client (the test aborts if the daemon cannot be reached).
  colod::control::Client client();
  // The /metrics text ("" on error).
  std::string scrape();
  CmdResult coloctl(const std::string& args);

  [[nodiscard]] std::string configPath() const { return dir_ + "/colod.yaml"; }
  [[nodiscard]] std::string socketPath() const { return dir_ + "/colod.sock"; }
  [[nodiscard]] std::string journalPath() const { return dir_ + "/journal.json"; }
  [[nodiscard]] std::string logPath() const { return dir_ + "/colod.log"; }
  [[nodiscard]] const std::string& dir() const { return dir_; }
  [[nodiscard]] pid_t pid() const { return pid_; }

 private:
  void spawn();

  std::string dir_;
  std::vector<std::string> args_;
  pid_t pid_ = -1;
  int exit_code_ = -1;
  size_t log_offset_ = 0;  // the log's size when this run started
};

// The cgroup values the e2e suite compares as strings (shares or weight, quota or cpu.max, cpus).
struct CgroupValues {
  std::string shares;
  std::string quota;
  std::string cpus;
  bool operator==(const CgroupValues&) const = default;
};
CgroupValues readValues(const std::string& cgroup_rel);
std::string str(const CgroupValues& v);

// What the peer creates for a container (kubelet-style resources, see nri/testpeer/README.md).
struct ContainerSpec {
  std::string name;
  std::string pod;
  std::string command;  // run with sh -c
  int64_t cpu_request_milli = 0;
  int64_t cpu_limit_milli = 0;  // 0 = no limit
  std::string cpus;             // cpuset, "" = the parent's
};

// Base fixture: skips with the reason when the machine cannot run the suite, owns a temp dir
// (removed in TearDown), the runtime peer and colod.
class ColodFixture : public ::testing::Test {
 protected:
  // `dir_prefix` names the temp dir: /tmp/<prefix>-XXXXXX.
  explicit ColodFixture(std::string dir_prefix) : dir_prefix_(std::move(dir_prefix)) {}

  void SetUp() override;
  void TearDown() override;

  // Starts colod-testpeer (fails the test if it does not start).
  void startPeer();
  // The daemon config both suites start from: 100 ms ticks, the peer's socket, private control
  // socket, journal and an ephemeral metrics port. `extra_daemon` lines go under `daemon:`
  // (indented two spaces), `policy_yaml` lines under `policy:`.
  [[nodiscard]] std::string daemonConfig(const std::string& extra_daemon,
                                         const std::string& policy_yaml) const;
  // Starts colod in dir_ with `yaml` (fails the test if it does not become ready).
  void startColod(const std::string& yaml, std::vector<std::string> args = {});

  // Peer helpers (each throws through mustControl on a peer error, which fails the test).
  void addPod(const std::string& name, const std::string& ns, const std::string& tier);
  void addContainer(const ContainerSpec& spec);
  // create_start: the container's description (id, cgroup_rel, ...).
  nlohmann::json createStart(const std::string& container);
  // stop + remove.
  void removeContainer(const std::string& container);

  // The LS probe (open loop: a request every 2 ms needing 200 us of CPU) and a BE stress-ng
  // hog with `workers` CPU workers; each loops until <dir>/<stop_file> exists, then sleeps.
  [[nodiscard]] std::string probeLoop(const std::string& stop_file) const;
  [[nodiscard]] std::string hogLoop(const std::string& stop_file, int workers) const;
  // Creates <dir>/<name>, which ends the loop of the workloads watching it.
  void touchStopFile(const std::string& name) const;

  // The colod log tail and `coloctl top`, for failure messages.
  std::string diagnostics();

  std::string dir_prefix_;
  std::string dir_;
  std::unique_ptr<colod::nri::interop::PeerProcess> peer_;
  std::unique_ptr<ColodProcess> colod_;
};

}  // namespace colod::e2e
