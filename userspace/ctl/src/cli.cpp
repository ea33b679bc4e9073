// SPDX-License-Identifier: Apache-2.0
#include "cli.h"

#include <unistd.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cinttypes>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <optional>
#include <sstream>
#include <thread>

#include "colod/base/version.h"
#include "colod/collect/format.h"
#include "colod/control/client.h"
#include "colod/control/names.h"
#include "colod/daemon/config.h"
#include "colod/policy/config.h"
#include "colod/policy/decision.h"
#include "colod/policy/trace.h"
#include "format.h"
#include "json.h"

namespace colod::ctl {

namespace {

namespace v1 = control::v1;

constexpr const char* kDefaultSocket = "/run/colod/colod.sock";

// Prints errors: one plain sentence; with --debug, the internals after it.
class Reporter {
 public:
  Reporter(std::ostream& err, const bool& debug) : err_(err), debug_(debug) {}

  [[nodiscard]] int fail(const Error& e, int code = kExitError) const {
    err_ << "coloctl: " << control::operatorMessage(e) << "\n";
    if (debug_) {
      err_ << "coloctl: debug: errno " << e.errnoValue() << " ("
           << (e.code() ? e.code().message() : std::string("none")) << "), context: " << e.context()
           << "\n";
    }
    return code;
  }
  [[nodiscard]] int fail(const std::string& sentence, int code) const {
    err_ << "coloctl: " << sentence << "\n";
    return code;
  }
  // A configuration error text (from colod or the daemon): the sentence without the strerror
  // an older colod appended.
  [[nodiscard]] int invalidConfig(const std::string& text) const {
    err_ << "coloctl: invalid configuration: " << control::operatorMessage(Error(EINVAL, text))
         << "\n";
    if (debug_) {
      err_ << "coloctl: debug: as received: " << text << "\n";
    }
    return kExitInvalid;
  }

 private:
  std::ostream& err_;
  const bool& debug_;
};

bool readFile(const std::string& path, std::string& out, std::string& why) {
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec)) {
    why = "it is a directory";
    return false;
  }
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    why = std::strerror(errno);
    return false;
  }
  std::ostringstream ss;
  ss << in.rdbuf();
  out = ss.str();
  return true;
}

std::vector<uint32_t> clampSlots(const google::protobuf::RepeatedField<uint64_t>& src) {
  std::vector<uint32_t> slots;
  slots.reserve(static_cast<std::size_t>(src.size()));
  for (auto v : src) {
    slots.push_back(v > UINT32_MAX ? UINT32_MAX : static_cast<uint32_t>(v));
  }
  return slots;
}

CLI::Option* addOutput(CLI::App* cmd, std::string& var) {
  return cmd->add_option("-o,--output", var, "output format: table or json (README: schemas)")
      ->check(CLI::IsMember({"table", "json"}))
      ->capture_default_str();
}

// The deepest command given (the app itself, or e.g. `config`).
CLI::App* deepest(CLI::App* app) {
  for (;;) {
    auto subs = app->get_subcommands();
    if (subs.empty()) {
      return app;
    }
    app = subs.front();
  }
}

// "config show" for `coloctl config show`; "" for the app itself.
std::string commandWords(CLI::App* cmd) {
  std::vector<std::string> names;
  for (CLI::App* c = cmd; c != nullptr && c->get_parent() != nullptr; c = c->get_parent()) {
    names.push_back(c->get_name());
  }
  std::reverse(names.begin(), names.end());
  std::string words;
  for (const auto& name : names) {
    words += (words.empty() ? "" : " ") + name;
  }
  return words;
}

std::string usageHint(CLI::App* cmd) {
  const std::string words = commandWords(cmd);
  return "Run 'coloctl " + (words.empty() ? "" : words + " ") + "--help' for usage.\n";
}

std::string commandNames(CLI::App* cmd) {
  std::string names;
  for (CLI::App* s : cmd->get_subcommands([](CLI::App*) { return true; })) {
    names += (names.empty() ? "" : ", ") + s->get_name();
  }
  return names;
}

}  // namespace

int runCli(const std::vector<std::string>& args, CliIo& io) {
  bool debug = false;
  const Reporter report(io.err, debug);

  CLI::App app{"coloctl: inspect and control colod, the colocation node agent", "coloctl"};
  app.require_subcommand(1);
  // Global options are accepted after the command too (`coloctl status -s PATH`).
  app.fallthrough();
  app.set_help_all_flag("--help-all", "help for every command");
  app.set_version_flag("--version", "coloctl " + std::string(kVersionLine));
  app.footer(
      "Exit codes: 0 ok, 1 runtime error (daemon unreachable, RPC failed, unknown container), "
      "2 usage, 3 invalid configuration or trace.\nCONTAINER: namespace/pod/container, "
      "pod/container, a container name or an id prefix (>= 4 characters).");
  std::string socket = io.env_socket.empty() ? kDefaultSocket : io.env_socket;
  app.add_option("-s,--socket", socket, "colod control socket (env COLOD_SOCKET)")
      ->capture_default_str();
  app.add_flag("-v,--debug", debug, "on errors, also print the internals (errno, source lines)");

  auto* status = app.add_subcommand("status", "daemon status");
  std::string status_out = "table";
  addOutput(status, status_out);

  auto* top = app.add_subcommand("top", "live per-container table");
  bool once = false;
  double every = 1.0;
  std::string top_out = "table";
  top->add_flag("--once", once, "print one table and exit");
  top->add_option("-d,--delay", every, "refresh period in seconds")
      ->check(CLI::Range(0.1, 60.0))
      ->capture_default_str();
  addOutput(top, top_out)
      ->description("output format: table or json (one JSON document per refresh, one per line)");

  auto* list = app.add_subcommand("list", "the per-container table once (top --once, no summary)");
  std::string list_out = "table";
  addOutput(list, list_out);

  auto* dump = app.add_subcommand("dump", "everything colod knows (JSON by default)");
  std::string dump_out = "json";
  addOutput(dump, dump_out);
  dump->add_flag_callback(
      "--json", [&dump_out] { dump_out = "json"; }, "same as -o json");

  auto* hist = app.add_subcommand("hist", "run-queue latency histogram of a container");
  std::string hist_ctr;
  bool hist_last = false;
  std::string hist_out = "table";
  hist->add_option("container", hist_ctr, "CONTAINER")->required();
  hist->add_flag("--last", hist_last, "the last interval only (default: since colod started)");
  addOutput(hist, hist_out);

  auto* decisions = app.add_subcommand("decisions", "recent decisions with their reasons");
  uint32_t limit = 50;
  std::string decisions_out = "table";
  decisions->add_option("-n,--limit", limit, "how many (0 = all kept)")->capture_default_str();
  addOutput(decisions, decisions_out);

  auto* explain = app.add_subcommand(
      "explain", "why colod does what it does to a container, and what protects it");
  std::string explain_ctr;
  std::string explain_out = "table";
  explain->add_option("container", explain_ctr, "CONTAINER")->required();
  addOutput(explain, explain_out);

  auto* config = app.add_subcommand("config", "show, check or reload the configuration");
  config->require_subcommand(1);
  auto* cshow =
      config->add_subcommand("show", "the effective configuration and where each value comes from");
  std::string show_out = "table";
  addOutput(cshow, show_out);
  auto* ccheck = config->add_subcommand(
      "check", "validate a configuration file (offline, with colod's own parser)");
  std::string check_file;
  ccheck->add_option("file", check_file, "YAML file")->required();
  auto* creload = config->add_subcommand("reload", "reload the daemon's config file now");

  auto* record = app.add_subcommand("record", "record a policy trace from the live daemon");
  std::string record_file;
  uint32_t record_seconds = 10;
  record->add_option("file", record_file, "output trace file (JSON lines)")->required();
  record->add_option("--seconds", record_seconds, "duration (0 = until Ctrl-C)")
      ->capture_default_str();

  auto* replay = app.add_subcommand("replay", "replay a trace through the policy engine (offline)");
  std::string replay_file;
  std::string replay_config;
  std::string replay_out = "table";
  bool replay_findings = false;
  replay->add_option("trace", replay_file, "trace file")->required();
  replay->add_flag("--findings", replay_findings,
                   "also each round's findings (why nothing was decided: no antagonist, not enough "
                   "evidence, behind uncontrolled work, ...), with the round's time");
  replay->add_option("--config", replay_config, "config (daemon file or policy section)");
  addOutput(replay, replay_out)->description("output format: table or json (JSON lines)");
  replay->add_flag_callback(
      "--json", [&replay_out] { replay_out = "json"; }, "same as -o json");

  if (args.size() <= 1) {
    // Nothing asked: the help, as a usage error.
    io.err << app.help();
    return kExitUsage;
  }
  std::vector<const char*> argv;
  argv.reserve(args.size());
  for (const auto& a : args) {
    argv.push_back(a.c_str());
  }
  try {
    app.parse(static_cast<int>(argv.size()), argv.data());
  } catch (const CLI::CallForHelp&) {
    io.out << deepest(&app)->help();
    return kExitOk;
  } catch (const CLI::CallForAllHelp&) {
    io.out << app.help("", CLI::AppFormatMode::All);
    return kExitOk;
  } catch (const CLI::CallForVersion& e) {
    io.out << e.what() << "\n";
    return kExitOk;
  } catch (const CLI::ParseError& e) {
    CLI::App* cmd = deepest(&app);
    // What was not understood: a subcommand keeps it, or (fallthrough) hands it to its parent.
    auto remaining = cmd->remaining();
    if (remaining.empty()) {
      remaining = app.remaining(true);
    }
    const bool wants_command = cmd->get_require_subcommand_min() > 0;
    const std::string words = commandWords(cmd);
    if (wants_command && !remaining.empty() && remaining.front().rfind('-', 0) != 0) {
      io.err << "coloctl: unknown command '" << (words.empty() ? "" : words + " ")
             << remaining.front() << "' (commands: " << commandNames(cmd) << ")\n"
             << usageHint(cmd);
    } else if (wants_command && remaining.empty() && cmd != &app) {
      io.err << "coloctl: " << words << ": a command is required (" << commandNames(cmd) << ")\n"
             << usageHint(cmd);
    } else {
      io.err << "coloctl: " << (words.empty() ? "" : words + ": ") << e.what() << "\n"
             << usageHint(cmd);
    }
    return kExitUsage;
  }

  // Offline commands first: they need no daemon.
  if (replay->parsed()) {
    using namespace colod::policy;
    std::string text;
    std::string why;
    if (!readFile(replay_file, text, why)) {
      return report.fail("cannot read " + replay_file + ": " + why, kExitInvalid);
    }
    auto trace = decodeTrace(text);
    if (!trace) {
      return report.fail(
          Error(trace.error().code(), replay_file + ": " + control::operatorMessage(trace.error())),
          kExitInvalid);
    }
    Config cfg;
    if (!replay_config.empty()) {
      std::string yaml;
      if (!readFile(replay_config, yaml, why)) {
        return report.fail("cannot read " + replay_config + ": " + why, kExitInvalid);
      }
      auto parsed = yaml.find("policy:") != std::string::npos
                        ? parseConfigDocument(yaml, replay_config)
                        : parsePolicySection(yaml, replay_config);
      if (!parsed) {
        return report.fail(parsed.error(), kExitInvalid);
      }
      cfg = std::move(parsed).value();
    } else if (trace->header && trace->header->config_yaml) {
      auto parsed = parsePolicySection(*trace->header->config_yaml, replay_file + " (header)");
      if (!parsed) {
        return report.fail(parsed.error(), kExitInvalid);
      }
      cfg = std::move(parsed).value();
    }
    auto rounds = replayTrace(*trace, cfg);
    if (!rounds) {
      return report.fail(rounds.error(), kExitInvalid);
    }
    // A round's time: replayTrace returns one result per snapshot and per admission, in order.
    std::vector<int64_t> round_ns;
    for (const auto& ev : trace->events) {
      if (const auto* s = std::get_if<policy::Snapshot>(&ev)) {
        round_ns.push_back(s->now_ns);
      } else if (const auto* a = std::get_if<policy::TraceAdmit>(&ev)) {
        round_ns.push_back(a->now_ns);
      }
    }
    uint64_t n = 0;
    uint64_t nf = 0;
    for (size_t i = 0; i < rounds->size(); ++i) {
      const auto& round = (*rounds)[i];
      const int64_t at = i < round_ns.size() ? round_ns[i] : 0;
      if (replay_findings) {
        for (const auto& f : round.findings) {
          io.out << (replay_out == "json" ? encodeFinding(f, at) : formatFinding(f, at)) << "\n";
          ++nf;
        }
      }
      for (const auto& d : round.decisions) {
        io.out << (replay_out == "json" ? encodeDecision(d) : formatDecision(d)) << "\n";
        ++n;
      }
    }
    io.err << "coloctl: " << rounds->size() << " rounds, " << n << " decisions";
    if (replay_findings) {
      io.err << ", " << nf << " findings";
    }
    io.err << "\n";
    return kExitOk;
  }

  if (ccheck->parsed()) {
    std::string yaml;
    std::string why;
    if (!readFile(check_file, yaml, why)) {
      return report.invalidConfig("cannot read " + check_file + ": " + why);
    }
    // Offline, in-process: the daemon's own parser (colod::daemon_config, no BPF), the same
    // code `colod --check-config` and a reload run.
    if (auto r = daemon::parseConfig(yaml, check_file); !r) {
      return report.invalidConfig(r.error().context());
    }
    io.out << check_file << ": ok\n";
    return kExitOk;
  }

  auto client_r = control::Client::connect(socket);
  if (!client_r) {
    return report.fail(client_r.error());
  }
  control::Client& client = *client_r;

  if (status->parsed()) {
    auto r = client.status();
    if (!r) {
      return report.fail(r.error());
    }
    io.out << (status_out == "json" ? statusJson(*r) : formatStatus(*r));
    return kExitOk;
  }
  if (list->parsed()) {
    auto r = client.listContainers();
    if (!r) {
      return report.fail(r.error());
    }
    io.out << (list_out == "json" ? containersJson(*r, nullptr) : formatTop(*r, nullptr));
    return kExitOk;
  }
  if (top->parsed()) {
    io.enter_live();
    const bool json = top_out == "json";
    const bool clear = io.out_is_tty && !once && !json;
    while (!io.stop()) {
      auto rows = client.listContainers();
      if (!rows) {
        return report.fail(rows.error());
      }
      auto st = client.status();
      const v1::StatusReply* stp = st ? &*st : nullptr;
      if (clear) {
        io.out << "\033[H\033[2J";
      }
      if (json) {
        // --once: one document; live: JSON Lines, one document per refresh.
        io.out << (once ? containersJson(*rows, stp) : containersJson(*rows, stp, true) + "\n");
      } else {
        io.out << formatTop(*rows, stp);
      }
      io.out.flush();
      if (once) {
        break;
      }
      const auto until = std::chrono::steady_clock::now() +
                         std::chrono::milliseconds(static_cast<int64_t>(every * 1000));
      while (!io.stop() && std::chrono::steady_clock::now() < until) {
        std::this_thread::sleep_for(std::chrono::milliseconds(50));
      }
      if (!clear && !json) {
        io.out << "\n";
      }
    }
    return kExitOk;
  }
  if (dump->parsed()) {
    auto r = client.dump();
    if (!r) {
      return report.fail(r.error());
    }
    auto text = dump_out == "json" ? dumpJson(r->json()) : dumpTable(r->json());
    if (!text) {
      return report.fail(text.error());
    }
    io.out << *text;
    return kExitOk;
  }
  if (hist->parsed()) {
    auto r = client.histogram(hist_ctr);
    if (!r) {
      return report.fail(r.error());
    }
    if (hist_out == "json") {
      io.out << histogramJson(*r);
      return kExitOk;
    }
    io.out << control::displayName(r->container()) << " (" << r->container().id().substr(0, 12)
           << ") run-queue latency, " << (hist_last ? "last interval" : "since colod started")
           << "\n";
    const std::string text =
        collect::formatLog2Hist(clampSlots(hist_last ? r->last_slots() : r->runq_slots()), "usecs");
    io.out << (text.empty() ? "(no samples)\n" : text);
    return kExitOk;
  }
  if (decisions->parsed()) {
    auto r = client.decisions(limit);
    if (!r) {
      return report.fail(r.error());
    }
    io.out << (decisions_out == "json" ? decisionsJson(*r) : formatDecisions(*r));
    return kExitOk;
  }
  if (explain->parsed()) {
    auto r = client.explain(explain_ctr);
    if (!r) {
      return report.fail(r.error());
    }
    io.out << (explain_out == "json" ? explainJson(*r) : formatExplain(*r));
    return kExitOk;
  }
  if (cshow->parsed()) {
    auto r = client.configShow();
    if (!r) {
      return report.fail(r.error());
    }
    io.out << (show_out == "json" ? configShowJson(*r) : formatConfigShow(*r));
    return kExitOk;
  }
  if (creload->parsed()) {
    auto r = client.configReload();
    if (!r) {
      return report.fail(r.error());
    }
    if (!r->ok()) {
      io.err << "coloctl: reload rejected, the running configuration is kept\n";
      return report.invalidConfig(r->error());
    }
    io.out << (r->changed() ? "reloaded\n" : "unchanged: the file is what is already running\n");
    return kExitOk;
  }
  if (record->parsed()) {
    io.enter_live();
    const std::string tmp = record_file + ".part";
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    if (!out) {
      return report.fail("cannot write " + tmp + ": " + std::strerror(errno), kExitError);
    }
    uint64_t snapshots = 0;
    auto r = client.record(
        record_seconds,
        [&](const v1::RecordChunk& c) -> Result<void> {
          out << c.data();
          snapshots = c.snapshots();
          if (!out) {
            return Error(EIO, "cannot write " + tmp + " (disk full?)");
          }
          return {};
        },
        io.stop);
    out.close();
    if (!r) {
      return report.fail(r.error());
    }
    std::error_code ec;
    std::filesystem::rename(tmp, record_file, ec);
    if (ec) {
      return report.fail("cannot rename " + tmp + " to " + record_file + ": " + ec.message(),
                         kExitError);
    }
    io.err << "coloctl: recorded " << snapshots << " snapshots to " << record_file << "\n";
    return kExitOk;
  }
  // Unreachable: CLI11 requires one of the commands above.
  return report.fail("no command", kExitUsage);
}

}  // namespace colod::ctl
