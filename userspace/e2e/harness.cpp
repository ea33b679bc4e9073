// SPDX-License-Identifier: Apache-2.0
#include "harness.h"

#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>
#include <thread>

#include <httplib.h>

#ifndef COLOD_BIN
#error "COLOD_BIN, COLOCTL_BIN and COLOD_PROBE_BIN must be defined by the build"
#endif

namespace colod::e2e {

namespace fs = std::filesystem;
using json = nlohmann::json;
using namespace std::chrono_literals;

const char* colodBin() { return COLOD_BIN; }
const char* coloctlBin() { return COLOCTL_BIN; }
const char* probeBin() { return COLOD_PROBE_BIN; }

std::string slurp(const std::string& path) {
  std::ifstream in(path);
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::string trim(std::string s) {
  while (!s.empty() && (s.back() == '\n' || s.back() == ' ')) {
    s.pop_back();
  }
  return s;
}

bool waitFor(const std::function<bool()>& pred,
             std::chrono::milliseconds timeout,
             std::chrono::milliseconds poll) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (std::chrono::steady_clock::now() < deadline) {
    if (pred()) {
      return true;
    }
    std::this_thread::sleep_for(poll);
  }
  return pred();
}

CmdResult run(const std::string& cmd) {
  CmdResult r;
  FILE* p = ::popen((cmd + " 2>&1").c_str(), "r");
  if (p == nullptr) {
    return r;
  }
  std::array<char, 4096> buf{};
  size_t n = 0;
  while ((n = std::fread(buf.data(), 1, buf.size(), p)) > 0) {
    r.out.append(buf.data(), n);
  }
  const int st = ::pclose(p);
  r.exit_code = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
  return r;
}

std::string skipReason() {
  if (::geteuid() != 0) {
    return "needs root: BPF, cgroups and the runtime peer";
  }
  if (!fs::exists("/sys/kernel/btf/vmlinux")) {
    return "kernel has no BTF (/sys/kernel/btf/vmlinux): the collector cannot load";
  }
  if (run("command -v stress-ng").exit_code != 0) {
    return "stress-ng is not installed";
  }
  return "";
}

double metricValue(const std::string& text, const std::string& name, const std::string& match) {
  std::istringstream in(text);
  std::string line;
  double sum = 0;
  bool found = false;
  while (std::getline(in, line)) {
    if (line.empty() || line[0] == '#') {
      continue;
    }
    const auto sp = line.rfind(' ');
    if (sp == std::string::npos) {
      continue;
    }
    const std::string series = line.substr(0, sp);
    const std::string metric = series.substr(0, series.find('{'));
    if (metric != name || series.find(match) == std::string::npos) {
      continue;
    }
    sum += std::strtod(line.c_str() + sp + 1, nullptr);
    found = true;
  }
  return found ? sum : -1;
}

std::optional<json> readJournal(const std::string& path, std::string* why) {
  auto fail = [&](const std::string& reason) -> std::optional<json> {
    if (why != nullptr) {
      *why = reason;
    }
    return std::nullopt;
  };
  std::error_code ec;
  const std::string ahead = path + ".next";
  std::string text;
  if (fs::exists(ahead, ec)) {
    // Read before the journal's time: a copy settled after this read is then compared with the
    // journal that replaced it, which is the same or newer.
    const std::string copy = slurp(ahead);
    std::error_code ahead_ec;
    std::error_code journal_ec;
    const auto ahead_time = fs::last_write_time(ahead, ahead_ec);
    const auto journal_time = fs::last_write_time(path, journal_ec);  // error: no journal
    const bool newer = !ahead_ec && (journal_ec || journal_time <= ahead_time);
    if (!copy.empty() && copy.front() == 'W' && newer) {
      // Torn (read in the middle of colod's write, or left so by a kill): colod's restart reads
      // the journal then, and so does this.
      auto doc = json::parse(copy.substr(1), nullptr, false);
      if (!doc.is_discarded()) {
        text = copy.substr(1);
      }
    }
  }
  if (text.empty()) {
    if (!fs::exists(path, ec)) {
      return json{{"version", 2}, {"containers", json::array()}};
    }
    text = slurp(path);
  }
  auto doc = json::parse(text, nullptr, false);
  if (doc.is_discarded() || !doc.is_object()) {
    return fail("journal is not a JSON object: " + text.substr(0, 200));
  }
  if (doc.value("version", 0) != 2) {
    return fail("journal is not version 2: " + text.substr(0, 200));
  }
  if (!doc.contains("containers") || !doc["containers"].is_array()) {
    return fail("journal v2 without a \"containers\" array: " + text.substr(0, 200));
  }
  return doc;
}

std::string loadedJournalText(const std::string& path) {
  auto doc = readJournal(path);
  return doc ? doc->dump(1) : std::string();
}

int journalOverlays(const std::string& path) {
  auto doc = readJournal(path);
  if (!doc) {
    return -1;
  }
  int n = 0;
  for (const auto& c : (*doc)["containers"]) {
    if (c.is_object() && c.contains("overlay") && c["overlay"].is_object() &&
        !c["overlay"].empty()) {
      ++n;
    }
  }
  return n;
}

// ---- ColodProcess ---------------------------------------------------------------------------

ColodProcess::ColodProcess(std::string dir,
                           const std::string& config_yaml,
                           std::vector<std::string> args)
    : dir_(std::move(dir)), args_(std::move(args)) {
  writeConfig(config_yaml);
}

ColodProcess::~ColodProcess() { kill(SIGKILL); }

void ColodProcess::writeConfig(const std::string& yaml) {
  const std::string tmp = configPath() + ".swp";
  std::ofstream(tmp) << yaml;
  fs::rename(tmp, configPath());
}

void ColodProcess::spawn() {
  const std::string log = logPath();
  std::vector<std::string> argv_s = {COLOD_BIN, "--config", configPath()};
  argv_s.insert(argv_s.end(), args_.begin(), args_.end());
  std::vector<char*> argv;
  argv.reserve(argv_s.size() + 1);
  for (auto& a : argv_s) {
    argv.push_back(a.data());
  }
  argv.push_back(nullptr);
  exit_code_ = -1;
  std::error_code ec;
  const auto size = fs::file_size(log, ec);
  log_offset_ = ec ? 0 : static_cast<size_t>(size);
  pid_ = ::fork();
  if (pid_ == 0) {
    FILE* f = std::freopen(log.c_str(), "a", stderr);
    (void)f;
    ::dup2(STDERR_FILENO, STDOUT_FILENO);
    ::execv(argv[0], argv.data());
    std::perror("execv colod");
    ::_exit(127);
  }
}

bool ColodProcess::start(std::chrono::milliseconds timeout) {
  spawn();
  // Ready: the control API answers and the metrics port is logged.
  const bool ok = waitFor(
      [&] {
        if (exited()) {
          return true;
        }
        auto c = colod::control::Client::connect(socketPath(), 2s);
        return c && c->status().has_value() && metricsPort() > 0;
      },
      timeout);
  return ok && !exited();
}

int ColodProcess::runToExit(std::chrono::milliseconds timeout) {
  spawn();
  if (!waitFor([&] { return exited(); }, timeout, 20ms)) {
    kill(SIGKILL);
    return -1;
  }
  return exit_code_;
}

bool ColodProcess::exited() {
  if (pid_ <= 0) {
    return true;
  }
  int st = 0;
  if (::waitpid(pid_, &st, WNOHANG) == pid_) {
    exit_code_ = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
    pid_ = -1;
    return true;
  }
  return false;
}

int ColodProcess::kill(int sig, std::chrono::milliseconds timeout) {
  if (pid_ <= 0) {
    return exit_code_;
  }
  ::kill(pid_, sig);
  if (!waitFor([&] { return exited(); }, timeout, 10ms)) {
    ::kill(pid_, SIGKILL);
    int st = 0;
    ::waitpid(pid_, &st, 0);
    pid_ = -1;
    exit_code_ = -1;
    return -1;
  }
  return exit_code_;
}

int ColodProcess::metricsPort() {
  static const std::regex re(R"(metrics on http://[^:]+:(\d+)/metrics)");
  // Only this run's lines: a restarted colod in the same directory appends to the same log.
  std::string log = slurp(logPath());
  log.erase(0, std::min(log_offset_, log.size()));
  int port = 0;
  for (auto it = std::sregex_iterator(log.begin(), log.end(), re); it != std::sregex_iterator();
       ++it) {
    port = std::atoi((*it)[1].str().c_str());
  }
  return port;
}

colod::control::Client ColodProcess::client() {
  auto c = colod::control::Client::connect(socketPath(), 10s);
  if (!c) {
    ADD_FAILURE() << c.error().message();
    std::abort();
  }
  return std::move(c).value();
}

std::string ColodProcess::scrape() {
  const int port = metricsPort();
  if (port <= 0) {
    return "";
  }
  httplib::Client cli("127.0.0.1", port);
  cli.set_connection_timeout(2, 0);
  cli.set_read_timeout(10, 0);
  auto res = cli.Get("/metrics");
  return res && res->status == 200 ? res->body : std::string();
}

CmdResult ColodProcess::coloctl(const std::string& args) {
  return run(std::string(COLOCTL_BIN) + " --socket " + socketPath() + " " + args);
}

// ---- cgroup values --------------------------------------------------------------------------

CgroupValues readValues(const std::string& rel) {
  using colod::nri::interop::readCgroupFile;
  if (colod::nri::interop::isCgroupV2Host()) {
    return {trim(readCgroupFile(rel, "cpu.weight")), trim(readCgroupFile(rel, "cpu.max")),
            trim(readCgroupFile(rel, "cpuset.cpus"))};
  }
  return {trim(readCgroupFile(rel, "cpu.shares")), trim(readCgroupFile(rel, "cpu.cfs_quota_us")),
          trim(readCgroupFile(rel, "cpuset.cpus"))};
}

std::string str(const CgroupValues& v) {
  return "shares=" + v.shares + " quota=" + v.quota + " cpus=" + v.cpus;
}

// ---- ColodFixture ---------------------------------------------------------------------------

void ColodFixture::SetUp() {
  const std::string why = skipReason();
  if (!why.empty()) {
    GTEST_SKIP() << why;
  }
  std::string tmpl = "/tmp/" + dir_prefix_ + "-XXXXXX";
  ASSERT_NE(::mkdtemp(tmpl.data()), nullptr);
  dir_ = tmpl;
}

void ColodFixture::TearDown() {
  colod_.reset();
  peer_.reset();
  if (!dir_.empty()) {
    std::error_code ec;
    fs::remove_all(dir_, ec);
  }
}

void ColodFixture::startPeer() {
  peer_ = std::make_unique<colod::nri::interop::PeerProcess>(std::vector<std::string>{});
  ASSERT_TRUE(peer_->started()) << "colod-testpeer did not start";
}

std::string ColodFixture::daemonConfig(const std::string& extra_daemon,
                                       const std::string& policy_yaml) const {
  // A key given in extra_daemon replaces the default (colod refuses a key written twice).
  const std::string interval =
      extra_daemon.find("interval_ms:") == std::string::npos ? "  interval_ms: 100\n" : "";
  return "daemon:\n" + interval +
         "  nri_socket: " +
         peer_->socketPath() +
         "\n"
         "  plugin_idx: \"50\"\n"
         "  control_socket: " +
         dir_ +
         "/colod.sock\n"
         "  metrics_listen: 127.0.0.1:0\n"
         "  journal_path: " +
         dir_ +
         "/journal.json\n"
         "  log_level: info\n" +
         extra_daemon + "policy:\n" + policy_yaml;
}

void ColodFixture::startColod(const std::string& yaml, std::vector<std::string> args) {
  colod_ = std::make_unique<ColodProcess>(dir_, yaml, std::move(args));
  ASSERT_TRUE(colod_->start()) << "colod did not become ready; log:\n" << slurp(colod_->logPath());
}

void ColodFixture::addPod(const std::string& name, const std::string& ns, const std::string& tier) {
  peer_->mustControl({{"op", "add_pod"},
                      {"pod_spec",
                       {{"name", name},
                        {"namespace", ns},
                        {"qos", "burstable"},
                        {"annotations", {{"colod.io/tier", tier}}}}}});
}

void ColodFixture::addContainer(const ContainerSpec& spec) {
  json res = json::object();
  if (spec.cpu_request_milli > 0) {
    res["cpu_request_milli"] = spec.cpu_request_milli;
  }
  if (spec.cpu_limit_milli > 0) {
    res["cpu_limit_milli"] = spec.cpu_limit_milli;
  }
  if (!spec.cpus.empty()) {
    res["cpus"] = spec.cpus;
  }
  peer_->mustControl({{"op", "add_container"},
                      {"container_spec",
                       {{"name", spec.name},
                        {"pod", spec.pod},
                        {"command", {"sh", "-c", spec.command}},
                        {"resources", res}}}});
}

json ColodFixture::createStart(const std::string& container) {
  return peer_->mustControl({{"op", "create_start"}, {"container", container}});
}

void ColodFixture::removeContainer(const std::string& container) {
  peer_->mustControl({{"op", "stop"}, {"container", container}});
  peer_->mustControl({{"op", "remove"}, {"container", container}});
}

std::string ColodFixture::probeLoop(const std::string& stop_file) const {
  return "while [ ! -e " + dir_ + "/" + stop_file + " ]; do " + probeBin() +
         " -t 1 -w 200 -p 2000 -d 2 >/dev/null; done; exec sleep 3600";
}

std::string ColodFixture::hogLoop(const std::string& stop_file, int workers) const {
  return "while [ ! -e " + dir_ + "/" + stop_file + " ]; do stress-ng --cpu " +
         std::to_string(workers) + " --timeout 1 -q; done; exec sleep 3600";
}

void ColodFixture::touchStopFile(const std::string& name) const {
  std::ofstream(dir_ + "/" + name) << "";
}

std::string ColodFixture::diagnostics() {
  std::string out = "colod log tail:\n";
  const std::string log = colod_ ? slurp(colod_->logPath()) : "";
  out += log.size() > 6000 ? log.substr(log.size() - 6000) : log;
  if (colod_ && !colod_->exited()) {
    out += "\ncoloctl top:\n" + colod_->coloctl("top --once").out;
  }
  if (peer_) {
    const auto events = peer_->events();
    out += "\npeer event log tail:\n";
    for (size_t i = events.size() > 25 ? events.size() - 25 : 0; i < events.size(); ++i) {
      out += events[i].dump() + "\n";
    }
  }
  return out;
}

}  // namespace colod::e2e
