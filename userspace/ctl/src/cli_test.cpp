// SPDX-License-Identifier: Apache-2.0
// coloctl's commands end to end in-process: arguments in, output and exit code out, against a
// fake daemon on a real Unix socket (the control API's server with a canned backend).
#include "cli.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "colod/base/version.h"
#include "colod/control/names.h"
#include "colod/control/server.h"
#include "colod/testing/result_matchers.h"

namespace colod::ctl {
namespace {

namespace v1 = control::v1;
using nlohmann::json;

class CannedBackend : public control::Backend {
 public:
  v1::ConfigReloadReply reload;

  Result<v1::StatusReply> status() override {
    v1::StatusReply r;
    r.set_version("0.1.0");
    r.set_mode("act");
    r.set_nri_connected(true);
    r.set_containers(2);
    return r;
  }
  Result<v1::ListContainersReply> listContainers() override {
    v1::ListContainersReply r;
    for (const auto& c : containers()) {
      *r.add_containers() = c;
    }
    r.set_interval_ms(100);
    return r;
  }
  Result<v1::DumpReply> dump() override {
    v1::DumpReply r;
    r.set_json(R"({"status":{"mode":"act"},"containers":[],"decisions":[]})");
    return r;
  }
  Result<v1::HistogramReply> histogram(const std::string& query) override {
    const auto all = containers();
    auto idx = control::resolveContainer(all, query);
    if (!idx) {
      return std::move(idx).error();
    }
    v1::HistogramReply r;
    *r.mutable_container() = all[*idx];
    r.add_runq_slots(0);
    r.add_runq_slots(3);
    r.add_last_slots(1);
    return r;
  }
  Result<v1::DecisionsReply> decisions(uint32_t /*limit*/) override {
    v1::DecisionsReply r;
    auto* d = r.add_decisions();
    d->set_seq(1);
    d->set_kind("engage/cpu_quota");
    d->set_container("jobs/batch/hog");
    d->set_victim("prod/web/server");
    d->set_rung(1);
    d->set_reason(std::string(1500, 'r'));
    return r;
  }
  Result<v1::ExplainReply> explain(const std::string& query) override {
    const auto all = containers();
    auto idx = control::resolveContainer(all, query);
    if (!idx) {
      return std::move(idx).error();
    }
    v1::ExplainReply r;
    *r.mutable_container() = all[*idx];
    r.set_text(control::displayName(all[*idx]) + "\n");
    r.set_structured(true);
    r.set_victim(all[*idx].tier() == "ls");
    if (r.victim()) {
      auto* p = r.add_protections();
      p->set_target("jobs/batch/hog");
      p->set_lever("cpu_quota");
      p->set_rung(1);
      p->set_values("quota=20000/100000");
      p->set_runtime_own("quota=max/100000");
      p->set_confirmed(true);
    }
    return r;
  }
  Result<v1::ConfigShowReply> configShow() override {
    v1::ConfigShowReply r;
    r.set_path("/etc/colod/colod.yaml");
    auto* v = r.add_values();
    v->set_key("daemon.decisions_kept");
    v->set_value("64");
    v->set_source(v1::ConfigValue::SOURCE_FILE);
    return r;
  }
  Result<v1::ConfigCheckReply> configCheck(const v1::ConfigCheckRequest& req) override {
    v1::ConfigCheckReply r;
    r.set_ok(req.yaml().find("fast") == std::string::npos);
    if (!r.ok()) {
      // As an older colod sends it: Error::message(), strerror included.
      r.set_error(req.path() +
                  ":2:9: daemon.mode: 'fast': expected one of act, dry-run, "
                  "observe-only: Invalid argument");
    }
    return r;
  }
  Result<v1::ConfigReloadReply> configReload() override { return reload; }
  Result<void> record(uint32_t /*seconds*/,
                      const std::function<bool(const v1::RecordChunk&)>& write,
                      const std::function<bool()>& /*cancelled*/) override {
    v1::RecordChunk c;
    c.set_data("{\"type\":\"header\"}\n");
    c.set_snapshots(1);
    write(c);
    return {};
  }

 private:
  static std::vector<v1::Container> containers() {
    std::vector<v1::Container> out(2);
    out[0].set_id("aaaa00001111");
    out[0].set_namespace_("prod");
    out[0].set_pod("web");
    out[0].set_name("server");
    out[0].set_tier("ls");
    out[1].set_id("bbbb00002222");
    out[1].set_namespace_("jobs");
    out[1].set_pod("batch");
    out[1].set_name("hog");
    out[1].set_tier("be");
    out[1].set_quota_us(20000);
    out[1].set_period_us(100000);
    return out;
  }
};

struct CliRun {
  int code = -1;
  std::string out;
  std::string err;
};

class CtlCli : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string tmpl = "/tmp/coloctl-test-XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl.data()), nullptr);
    dir_ = tmpl;
    socket_ = dir_ + "/colod.sock";
  }
  void TearDown() override {
    server_.reset();
    std::filesystem::remove_all(dir_);
  }
  void startDaemon() {
    server_ = ASSERT_OK(control::Server::start({.socket_path = socket_}, backend_));
  }
  // coloctl ARGS with COLOD_SOCKET pointing at the test socket.
  CliRun run(std::vector<std::string> args) {
    args.insert(args.begin(), "coloctl");
    std::ostringstream out;
    std::ostringstream err;
    CliIo io{.out = out, .err = err, .env_socket = socket_};
    CliRun r;
    r.code = runCli(args, io);
    r.out = out.str();
    r.err = err.str();
    return r;
  }
  void write(const std::string& name, const std::string& text) {
    std::ofstream(dir_ + "/" + name) << text;
  }

  std::string dir_;
  std::string socket_;
  CannedBackend backend_;
  std::unique_ptr<control::Server> server_;
};

// Issue #16: usage errors exited 104-106 (CLI11's codes); `coloctl` alone and `coloctl bogus`
// said "A subcommand is required".
TEST_F(CtlCli, UsageErrorsExitTwoAndSayWhatIsWrong) {
  auto none = run({});
  EXPECT_EQ(none.code, kExitUsage);
  EXPECT_NE(none.err.find("Usage: coloctl"), std::string::npos) << none.err;
  EXPECT_NE(none.err.find("decisions"), std::string::npos) << none.err;  // the commands listed

  auto help = run({"--help"});
  EXPECT_EQ(help.code, kExitOk);
  EXPECT_NE(help.out.find("Usage: coloctl"), std::string::npos) << help.out;
  EXPECT_NE(help.out.find("Exit codes: 0 ok"), std::string::npos) << help.out;
  auto sub_help = run({"config", "--help"});
  EXPECT_EQ(sub_help.code, kExitOk);
  EXPECT_NE(sub_help.out.find("reload"), std::string::npos) << sub_help.out;

  auto bogus = run({"bogus"});
  EXPECT_EQ(bogus.code, kExitUsage);
  EXPECT_EQ(bogus.err.rfind("coloctl: unknown command 'bogus' (commands: status, top, list, "
                            "dump, hist, decisions, explain, config, record, replay)\n",
                            0),
            0U)
      << bogus.err;
  auto config_bogus = run({"config", "bogus"});
  EXPECT_EQ(config_bogus.code, kExitUsage);
  EXPECT_NE(config_bogus.err.find("unknown command 'config bogus' (commands: show, check, "
                                  "reload)"),
            std::string::npos)
      << config_bogus.err;
  auto config_alone = run({"config"});
  EXPECT_EQ(config_alone.code, kExitUsage);
  EXPECT_NE(config_alone.err.find("config: a command is required (show, check, reload)"),
            std::string::npos)
      << config_alone.err;

  for (const std::vector<std::string>& bad : {std::vector<std::string>{"hist"},
                                              {"status", "-o", "yaml"},
                                              {"status", "extra"},
                                              {"--nope", "status"},
                                              {"top", "-d", "0"},
                                              {"decisions", "-n", "x"}}) {
    auto r = run(bad);
    EXPECT_EQ(r.code, kExitUsage) << bad.front() << ": " << r.err;
    EXPECT_NE(r.err.find("--help' for usage"), std::string::npos) << r.err;
  }
  // Global options after the command are accepted.
  startDaemon();
  EXPECT_EQ(run({"status", "-s", socket_}).code, kExitOk);
}

TEST_F(CtlCli, RuntimeErrorsExitOneInvalidConfigExitsThree) {
  auto down = run({"status"});
  EXPECT_EQ(down.code, kExitError);
  EXPECT_EQ(down.err, "coloctl: cannot reach colod at " + socket_ +
                          ": is the daemon running? (connect: No such file or directory)\n");
  startDaemon();
  EXPECT_EQ(run({"status"}).code, kExitOk);
  EXPECT_EQ(run({"hist", "nosuch"}).code, kExitError);
  backend_.reload.set_ok(false);
  backend_.reload.set_error(
      "/etc/colod/colod.yaml:3:16: daemon.interval_ms: '1': out of range "
      "(10..10000): Invalid argument");
  auto reload = run({"config", "reload"});
  EXPECT_EQ(reload.code, kExitInvalid);
  EXPECT_NE(reload.err.find("invalid configuration: /etc/colod/colod.yaml:3:16: "
                            "daemon.interval_ms: '1': out of range (10..10000)\n"),
            std::string::npos)
      << reload.err;
  EXPECT_EQ(reload.err.find("Invalid argument"), std::string::npos) << reload.err;
  write("trace.jsonl", "not a trace\n");
  EXPECT_EQ(run({"replay", dir_ + "/trace.jsonl"}).code, kExitInvalid);
  EXPECT_EQ(run({"replay", dir_ + "/missing.jsonl"}).code, kExitInvalid);
}

// `config reload` of an unchanged file says so (ConfigReloadReply.changed).
TEST_F(CtlCli, ReloadSaysUnchanged) {
  startDaemon();
  backend_.reload.set_ok(true);
  backend_.reload.set_changed(false);
  EXPECT_EQ(run({"config", "reload"}).out, "unchanged: the file is what is already running\n");
  backend_.reload.set_changed(true);
  EXPECT_EQ(run({"config", "reload"}).out, "reloaded\n");
}

// Issue #16: "coloctl: [names.cpp:51] no container matches 'nosuch' (...): No such file or
// directory: No such file or directory".
TEST_F(CtlCli, ErrorsAreOnePlainSentenceInternalsUnderDebug) {
  startDaemon();
  auto r = run({"hist", "nosuch"});
  EXPECT_EQ(r.err,
            "coloctl: no container matches 'nosuch' (try namespace/pod/container, pod/container, "
            "a name or an id prefix)\n");
  EXPECT_EQ(r.out, "");
  auto debug = run({"-v", "hist", "nosuch"});
  EXPECT_EQ(debug.err.rfind(r.err, 0), 0U) << debug.err;
  EXPECT_NE(debug.err.find("coloctl: debug: errno 2 (No such file or directory)"),
            std::string::npos)
      << debug.err;
  EXPECT_EQ(run({"hist", "nosuch", "--debug"}).err, debug.err);
}

TEST_F(CtlCli, VersionIsTheBuildsVersion) {
  EXPECT_EQ(kVersion, COLOD_TEST_PROJECT_VERSION);  // from CMake's project(VERSION)
  auto r = run({"--version"});
  EXPECT_EQ(r.code, kExitOk);
  EXPECT_EQ(r.out, "coloctl " + std::string(kVersionLine) + "\n");
  EXPECT_EQ(r.out.rfind(std::string("coloctl ") + COLOD_TEST_PROJECT_VERSION, 0), 0U);
#ifdef COLOD_TEST_COLOD_BIN
  // colod prints the same version line.
  FILE* p = ::popen(COLOD_TEST_COLOD_BIN " --version", "r");
  ASSERT_NE(p, nullptr);
  std::array<char, 256> buf{};
  const std::size_t n = std::fread(buf.data(), 1, buf.size(), p);
  EXPECT_EQ(::pclose(p), 0);
  EXPECT_EQ(std::string(buf.data(), n), "colod " + std::string(kVersionLine) + "\n");
#endif
}

// Every read command has -o json, a document of the schema in the README.
TEST_F(CtlCli, EveryReadCommandHasJsonOutput) {
  startDaemon();
  auto doc = [this](std::vector<std::string> args) {
    auto r = run(std::move(args));
    EXPECT_EQ(r.code, kExitOk) << r.err;
    auto j = json::parse(r.out, nullptr, false);
    EXPECT_FALSE(j.is_discarded()) << r.out;
    return j;
  };
  EXPECT_EQ(doc({"status", "-o", "json"})["mode"], "act");
  EXPECT_EQ(doc({"top", "--once", "-o", "json"})["status"]["mode"], "act");
  EXPECT_EQ(doc({"list", "--output", "json"})["containers"][1]["name"], "hog");
  EXPECT_EQ(doc({"dump"})["status"]["mode"], "act");  // JSON by default
  EXPECT_EQ(doc({"dump", "-o", "json"})["status"]["mode"], "act");
  EXPECT_EQ(doc({"dump", "--json"})["status"]["mode"], "act");  // the old flag, an alias
  EXPECT_EQ(doc({"hist", "server", "-o", "json"})["since_start"][1]["count"], 3);
  EXPECT_EQ(doc({"decisions", "-o", "json"})["decisions"][0]["victim"], "prod/web/server");
  EXPECT_EQ(doc({"explain", "server", "-o", "json"})["protections"][0]["target"], "jobs/batch/hog");
  EXPECT_EQ(doc({"config", "show", "-o", "json"})["values"][0]["source"], "file");
  // And the tables are still the default.
  EXPECT_NE(run({"dump", "-o", "table"}).out.find("status:\n  mode: act"), std::string::npos);
  EXPECT_NE(run({"list"}).out.find("prod/web/server"), std::string::npos);
  auto hist = run({"hist", "web/server"});
  EXPECT_NE(hist.out.find("prod/web/server (aaaa00001111) run-queue latency"), std::string::npos)
      << hist.out;
  EXPECT_NE(hist.out.find("usecs"), std::string::npos) << hist.out;
  auto explain = run({"explain", "server"});
  EXPECT_NE(explain.out.find("protected by colod"), std::string::npos) << explain.out;
  auto show = run({"config", "show"});
  EXPECT_NE(show.out.find("decisions_kept: 64  # file"), std::string::npos) << show.out;
  auto decisions = run({"decisions"});
  EXPECT_TRUE(decisions.out.ends_with(std::string(1500, 'r') + "\n")) << decisions.out.size();
}

// `config check FILE` works without a daemon and without a colod binary: the daemon's parser is
// linked in (colod::daemon_config). No daemon is started here.
TEST_F(CtlCli, ConfigCheckWorksOffline) {
  write("good.yaml", "daemon:\n  mode: dry-run\npolicy:\n  thresholds:\n    runq_p99_us: 900\n");
  write("bad.yaml", "daemon:\n  mode: fast\n");
  write("badpolicy.yaml", "policy:\n  thresholds:\n    runq_p99_us: -3\n");
  write("dup.yaml", "daemon:\n  mode: act\n  mode: dry-run\n");
  auto good = run({"config", "check", dir_ + "/good.yaml"});
  EXPECT_EQ(good.code, kExitOk) << good.err;
  EXPECT_EQ(good.out, dir_ + "/good.yaml: ok\n");
  EXPECT_EQ(good.err, "");
  auto bad = run({"config", "check", dir_ + "/bad.yaml"});
  EXPECT_EQ(bad.code, kExitInvalid) << bad.err;
  // One plain sentence with the key path and the line; no strerror, no source marker.
  EXPECT_EQ(bad.err, "coloctl: invalid configuration: " + dir_ +
                         "/bad.yaml:2:9: daemon.mode: 'fast': expected one of: act, dry-run, "
                         "observe-only\n");
  auto badpolicy = run({"config", "check", dir_ + "/badpolicy.yaml"});
  EXPECT_EQ(badpolicy.code, kExitInvalid);
  EXPECT_NE(badpolicy.err.find("badpolicy.yaml:3:"), std::string::npos) << badpolicy.err;
  EXPECT_NE(badpolicy.err.find("runq_p99_us"), std::string::npos) << badpolicy.err;
  EXPECT_EQ(std::count(badpolicy.err.begin(), badpolicy.err.end(), '\n'), 1) << badpolicy.err;
  auto dup = run({"config", "check", dir_ + "/dup.yaml"});
  EXPECT_EQ(dup.code, kExitInvalid);
  EXPECT_NE(dup.err.find("dup.yaml:3:3: daemon.mode: duplicate key"), std::string::npos) << dup.err;
  for (const auto& r : {bad, badpolicy, dup}) {
    EXPECT_EQ(r.err.find("Invalid argument"), std::string::npos) << r.err;
    EXPECT_EQ(r.err.find(".cpp:"), std::string::npos) << r.err;
  }
  EXPECT_EQ(run({"config", "check", dir_ + "/missing.yaml"}).code, kExitInvalid);
  EXPECT_EQ(run({"config", "check", dir_}).code, kExitInvalid);  // a directory is no config
}

#ifdef COLOD_TEST_COLOD_BIN
// `colod --check-config` keeps working and says the same sentence as coloctl.
TEST_F(CtlCli, ColodCheckConfigAgreesWithColoctl) {
  write("bad.yaml", "daemon:\n  interval_ms: 5\n");
  write("good.yaml", "daemon:\n  interval_ms: 50\n");
  auto colod = [](const std::string& file) {
    const std::string cmd = std::string(COLOD_TEST_COLOD_BIN) + " --check-config " + file + " 2>&1";
    FILE* p = ::popen(cmd.c_str(), "r");
    std::string out;
    std::array<char, 512> buf{};
    for (std::size_t n = 0; p != nullptr && (n = std::fread(buf.data(), 1, buf.size(), p)) > 0;) {
      out.append(buf.data(), n);
    }
    const int status = p != nullptr ? ::pclose(p) : -1;
    return std::make_pair(WIFEXITED(status) ? WEXITSTATUS(status) : -1, out);
  };
  const auto [good_rc, good_out] = colod(dir_ + "/good.yaml");
  EXPECT_EQ(good_rc, 0) << good_out;
  const auto [bad_rc, bad_out] = colod(dir_ + "/bad.yaml");
  EXPECT_EQ(bad_rc, kExitInvalid);
  auto ctl = run({"config", "check", dir_ + "/bad.yaml"});
  EXPECT_EQ(ctl.code, kExitInvalid);
  ASSERT_EQ(bad_out.rfind("colod: ", 0), 0U) << bad_out;
  EXPECT_EQ("coloctl: " + bad_out.substr(std::string("colod: ").size()), ctl.err);
}
#endif

TEST_F(CtlCli, RecordWritesTheTrace) {
  startDaemon();
  auto r = run({"record", dir_ + "/t.jsonl", "--seconds", "1"});
  EXPECT_EQ(r.code, kExitOk) << r.err;
  std::ifstream in(dir_ + "/t.jsonl");
  std::string line;
  std::getline(in, line);
  EXPECT_EQ(line, "{\"type\":\"header\"}");
  EXPECT_FALSE(std::filesystem::exists(dir_ + "/t.jsonl.part"));
  EXPECT_EQ(run({"record", dir_ + "/no/such/dir/t.jsonl"}).code, kExitError);
}

// `replay --findings` says why a round decided nothing, with the round's time; without it the
// replay prints decisions only, as before.
TEST_F(CtlCli, ReplayFindingsSayWhyNothingWasDecided) {
  write("t.jsonl",
        "{\"type\":\"upsert\",\"container\":{\"id\":\"c1\",\"container_name\":\"web\","
        "\"pod_name\":\"web\",\"pod_namespace\":\"shop\","
        "\"pod_annotations\":{\"colod.io/tier\":\"gold\"}}}\n"
        "{\"type\":\"snapshot\",\"now_ns\":5000,\"interval_ns\":100000000,\"node_cpus\":2,"
        "\"containers\":[]}\n");
  auto plain = run({"replay", dir_ + "/t.jsonl"});
  EXPECT_EQ(plain.code, kExitOk) << plain.err;
  EXPECT_EQ(plain.out, "");
  EXPECT_EQ(plain.err, "coloctl: 1 rounds, 0 decisions\n");
  auto text = run({"replay", "--findings", dir_ + "/t.jsonl"});
  EXPECT_EQ(text.code, kExitOk) << text.err;
  EXPECT_NE(text.out.find("t=5000 finding unknown_tier container=c1 -- unknown value \"gold\" of "
                          "colod.io/tier (pod annotation) on shop/web/web; ignored\n"),
            std::string::npos)
      << text.out;
  EXPECT_NE(text.err.find(" findings\n"), std::string::npos) << text.err;
  auto lines = run({"replay", "--findings", "--json", dir_ + "/t.jsonl"});
  EXPECT_EQ(lines.code, kExitOk) << lines.err;
  EXPECT_NE(lines.out.find("{\"at_ns\":5000,\"container_id\":\"c1\",\"finding\":\"unknown_tier\","),
            std::string::npos)
      << lines.out;
}

}  // namespace
}  // namespace colod::ctl
