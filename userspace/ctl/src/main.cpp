// SPDX-License-Identifier: Apache-2.0
// coloctl: the colod CLI, over the local control API (gRPC on a Unix socket). Does not link
// libbpf (style rule 31).
//   coloctl [--socket PATH] status | top [--once] | dump [--json] | hist CONTAINER |
//           decisions [-n N] | explain CONTAINER | config show|check FILE|reload |
//           record FILE [--seconds N] | replay TRACE [--config FILE] [--json]
// Containers: namespace/pod/container, pod/container, a container name or an id prefix.
// Exit codes: 0 ok, 1 error (daemon unreachable, unknown container...), 2 usage, 3 invalid
// config (config check) or trace (replay).
#include <signal.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <atomic>
#include <cinttypes>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <sstream>
#include <thread>

#include "colod/collect/format.h"
#include "colod/control/client.h"
#include "colod/control/names.h"
#include "colod/policy/config.h"
#include "colod/policy/decision.h"
#include "colod/policy/trace.h"
#include "format.h"

namespace {

constexpr int kExitError = 1;
constexpr int kExitInvalid = 3;
std::atomic<bool> g_stop{false};

void onSignal(int /*sig*/) { g_stop = true; }

int fail(const colod::Error& e) {
  std::fprintf(stderr, "coloctl: %s\n", e.message().c_str());
  return kExitError;
}

bool readFile(const std::string& path, std::string& out) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    return false;
  }
  std::ostringstream ss;
  ss << in.rdbuf();
  out = ss.str();
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  using colod::control::Client;
  CLI::App app{"coloctl: inspect and control colod"};
  app.require_subcommand(1);
  const char* env_socket = std::getenv("COLOD_SOCKET");
  std::string socket = env_socket != nullptr ? env_socket : "/run/colod/colod.sock";
  app.add_option("-s,--socket", socket, "colod control socket (env COLOD_SOCKET)");

  auto* status = app.add_subcommand("status", "daemon status");
  auto* top = app.add_subcommand("top", "live per-container table");
  bool once = false;
  double every = 1.0;
  top->add_flag("--once", once, "print one table and exit");
  top->add_option("-d,--delay", every, "refresh period in seconds")->check(CLI::Range(0.1, 60.0));
  auto* dump = app.add_subcommand("dump", "everything colod knows, as JSON");
  bool dump_json = true;
  dump->add_flag("--json", dump_json, "JSON output (the only format)");
  auto* hist = app.add_subcommand("hist", "run-queue latency histogram of a container");
  std::string hist_ctr;
  bool hist_last = false;
  hist->add_option("container", hist_ctr, "namespace/pod/container, pod/container, name or id")
      ->required();
  hist->add_flag("--last", hist_last, "the last interval only (default: since colod started)");
  auto* decisions = app.add_subcommand("decisions", "recent decisions with their reasons");
  uint32_t limit = 50;
  decisions->add_option("-n,--limit", limit, "how many (0 = all kept)");
  auto* explain = app.add_subcommand("explain", "why colod does what it does to a container");
  std::string explain_ctr;
  explain->add_option("container", explain_ctr, "container")->required();
  auto* config = app.add_subcommand("config", "show, check or reload the configuration");
  config->require_subcommand(1);
  auto* cshow = config->add_subcommand("show", "the running configuration");
  auto* ccheck = config->add_subcommand("check", "validate a file (locally, and by the daemon)");
  std::string check_file;
  ccheck->add_option("file", check_file, "YAML file")->required();
  auto* creload = config->add_subcommand("reload", "reload the daemon's config file now");
  auto* record = app.add_subcommand("record", "record a policy trace from the live daemon");
  std::string record_file;
  uint32_t record_seconds = 10;
  record->add_option("file", record_file, "output trace file (JSON lines)")->required();
  record->add_option("--seconds", record_seconds, "duration (0 = until Ctrl-C)");
  auto* replay = app.add_subcommand("replay", "replay a trace through the policy engine");
  std::string replay_file;
  std::string replay_config;
  bool replay_json = false;
  replay->add_option("trace", replay_file, "trace file")->required();
  replay->add_option("--config", replay_config, "config (daemon file or policy section)");
  replay->add_flag("--json", replay_json, "decisions as JSON lines");

  CLI11_PARSE(app, argc, argv);

  // Offline commands first: they need no daemon.
  if (replay->parsed()) {
    using namespace colod::policy;
    std::string text;
    if (!readFile(replay_file, text)) {
      std::fprintf(stderr, "coloctl: cannot read %s\n", replay_file.c_str());
      return kExitInvalid;
    }
    auto trace = decodeTrace(text);
    if (!trace) {
      std::fprintf(stderr, "coloctl: %s: %s\n", replay_file.c_str(),
                   trace.error().message().c_str());
      return kExitInvalid;
    }
    Config cfg;
    if (!replay_config.empty()) {
      std::string yaml;
      if (!readFile(replay_config, yaml)) {
        std::fprintf(stderr, "coloctl: cannot read %s\n", replay_config.c_str());
        return kExitInvalid;
      }
      auto parsed = yaml.find("policy:") != std::string::npos
                        ? parseConfigDocument(yaml, replay_config)
                        : parsePolicySection(yaml, replay_config);
      if (!parsed) {
        std::fprintf(stderr, "coloctl: %s\n", parsed.error().message().c_str());
        return kExitInvalid;
      }
      cfg = std::move(parsed).value();
    } else if (trace->header && trace->header->config_yaml) {
      auto parsed = parsePolicySection(*trace->header->config_yaml, replay_file + " (header)");
      if (!parsed) {
        std::fprintf(stderr, "coloctl: %s\n", parsed.error().message().c_str());
        return kExitInvalid;
      }
      cfg = std::move(parsed).value();
    }
    auto rounds = replayTrace(*trace, cfg);
    if (!rounds) {
      std::fprintf(stderr, "coloctl: %s\n", rounds.error().message().c_str());
      return kExitInvalid;
    }
    uint64_t n = 0;
    for (const auto& round : *rounds) {
      for (const auto& d : round.decisions) {
        std::puts((replay_json ? encodeDecision(d) : formatDecision(d)).c_str());
        ++n;
      }
    }
    std::fprintf(stderr, "coloctl: %zu rounds, %" PRIu64 " decisions\n", rounds->size(), n);
    return 0;
  }

  auto client_r = Client::connect(socket);
  if (!client_r) {
    return fail(client_r.error());
  }
  Client& client = *client_r;

  if (status->parsed()) {
    auto r = client.status();
    if (!r) {
      return fail(r.error());
    }
    std::fputs(colod::ctl::formatStatus(*r).c_str(), stdout);
    return 0;
  }
  if (top->parsed()) {
    signal(SIGINT, onSignal);
    signal(SIGTERM, onSignal);
    const bool tty = ::isatty(STDOUT_FILENO) != 0 && !once;
    while (!g_stop) {
      auto list = client.listContainers();
      if (!list) {
        return fail(list.error());
      }
      auto st = client.status();
      std::string table = colod::ctl::formatTop(*list, st ? &*st : nullptr);
      if (tty) {
        std::fputs("\033[H\033[2J", stdout);
      }
      std::fputs(table.c_str(), stdout);
      std::fflush(stdout);
      if (once) {
        break;
      }
      const auto until = std::chrono::steady_clock::now() +
                         std::chrono::milliseconds(static_cast<int64_t>(every * 1000));
      while (!g_stop && std::chrono::steady_clock::now() < until) {
        std::this_thread::sleep_for(std::chrono::milliseconds(50));
      }
      if (!tty) {
        std::fputs("\n", stdout);
      }
    }
    return 0;
  }
  if (dump->parsed()) {
    auto r = client.dump();
    if (!r) {
      return fail(r.error());
    }
    std::puts(r->json().c_str());
    return 0;
  }
  if (hist->parsed()) {
    auto r = client.histogram(hist_ctr);
    if (!r) {
      return fail(r.error());
    }
    std::vector<uint32_t> slots;
    const auto& src = hist_last ? r->last_slots() : r->runq_slots();
    for (auto v : src) {
      slots.push_back(v > UINT32_MAX ? UINT32_MAX : static_cast<uint32_t>(v));
    }
    std::printf("%s (%s) run-queue latency, %s\n",
                colod::control::displayName(r->container()).c_str(),
                r->container().id().substr(0, 12).c_str(),
                hist_last ? "last interval" : "since colod started");
    const std::string text = colod::collect::formatLog2Hist(slots, "usecs");
    std::fputs(text.empty() ? "(no samples)\n" : text.c_str(), stdout);
    return 0;
  }
  if (decisions->parsed()) {
    auto r = client.decisions(limit);
    if (!r) {
      return fail(r.error());
    }
    std::fputs(colod::ctl::formatDecisions(*r).c_str(), stdout);
    return 0;
  }
  if (explain->parsed()) {
    auto r = client.explain(explain_ctr);
    if (!r) {
      return fail(r.error());
    }
    std::fputs(r->text().c_str(), stdout);
    if (r->decisions_size() > 0) {
      colod::control::v1::DecisionsReply d;
      *d.mutable_decisions() = r->decisions();
      std::puts("  decisions:");
      std::fputs(colod::ctl::formatDecisions(d).c_str(), stdout);
    }
    return 0;
  }
  if (cshow->parsed()) {
    auto r = client.configShow();
    if (!r) {
      return fail(r.error());
    }
    if (!r->path().empty()) {
      std::printf("# %s\n", r->path().c_str());
    }
    std::fputs(r->yaml().c_str(), stdout);
    return 0;
  }
  if (ccheck->parsed()) {
    std::string yaml;
    if (!readFile(check_file, yaml)) {
      std::fprintf(stderr, "coloctl: cannot read %s\n", check_file.c_str());
      return kExitInvalid;
    }
    auto r = client.configCheck(yaml, check_file);
    if (!r) {
      return fail(r.error());
    }
    if (!r->ok()) {
      std::fprintf(stderr, "coloctl: invalid configuration: %s\n", r->error().c_str());
      return kExitInvalid;
    }
    std::printf("%s: ok\n", check_file.c_str());
    return 0;
  }
  if (creload->parsed()) {
    auto r = client.configReload();
    if (!r) {
      return fail(r.error());
    }
    if (!r->ok()) {
      std::fprintf(stderr, "coloctl: reload rejected (running config kept): %s\n",
                   r->error().c_str());
      return kExitInvalid;
    }
    std::puts(r->changed() ? "reloaded" : "unchanged: the file is what is already running");
    return 0;
  }
  if (record->parsed()) {
    signal(SIGINT, onSignal);
    signal(SIGTERM, onSignal);
    const std::string tmp = record_file + ".part";
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    if (!out) {
      std::fprintf(stderr, "coloctl: cannot write %s\n", tmp.c_str());
      return kExitError;
    }
    uint64_t snapshots = 0;
    auto r = client.record(
        record_seconds,
        [&](const colod::control::v1::RecordChunk& c) -> colod::Result<void> {
          out << c.data();
          snapshots = c.snapshots();
          if (!out) {
            return colod::Error(EIO, "writing " + tmp);
          }
          return {};
        },
        [] { return g_stop.load(); });
    out.close();
    if (!r) {
      return fail(r.error());
    }
    if (std::rename(tmp.c_str(), record_file.c_str()) != 0) {
      std::perror("coloctl: rename");
      return kExitError;
    }
    std::fprintf(stderr, "coloctl: recorded %" PRIu64 " snapshots to %s\n", snapshots,
                 record_file.c_str());
    return 0;
  }
  return kExitError;
}
