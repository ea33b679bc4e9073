// SPDX-License-Identifier: Apache-2.0
// colod-replay TRACE [--config FILE] [--json]: replays a recorded or synthetic trace through the
// policy engine and prints every decision (and finding) in order. A thin main over the pure
// library: the only I/O is reading the two files and writing stdout/stderr.
// Exit codes: 0 ok, 3 bad input (unreadable file, invalid trace or config).
#include <CLI/CLI.hpp>
#include <fstream>
#include <iostream>
#include <sstream>

#include "colod/policy/config.h"
#include "colod/policy/trace.h"

namespace {

constexpr int kExitBadInput = 3;

bool readFile(const std::string& path, std::string& out) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    return false;
  }
  std::ostringstream os;
  os << in.rdbuf();
  out = os.str();
  return !in.bad();
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"Replay a colod policy trace (JSON lines) and print the decisions"};
  std::string trace_path;
  std::string config_path;
  bool json = false;
  bool findings = false;
  app.add_option("trace", trace_path, "trace file (JSON lines)")->required();
  app.add_option("--config", config_path,
                 "policy config YAML (a document with `policy:` or the bare section); default: "
                 "the trace header's config, else the built-in defaults");
  app.add_flag("--json", json, "print decisions as JSON lines");
  app.add_flag("--findings", findings, "also print findings (text mode)");
  CLI11_PARSE(app, argc, argv);

  using namespace colod::policy;
  std::string text;
  if (!readFile(trace_path, text)) {
    std::cerr << "colod-replay: cannot read " << trace_path << "\n";
    return kExitBadInput;
  }
  auto trace = decodeTrace(text);
  if (!trace) {
    std::cerr << "colod-replay: " << trace_path << ": " << trace.error().message() << "\n";
    return kExitBadInput;
  }
  Config config;
  if (!config_path.empty()) {
    std::string yaml;
    if (!readFile(config_path, yaml)) {
      std::cerr << "colod-replay: cannot read " << config_path << "\n";
      return kExitBadInput;
    }
    // A daemon config has a top-level `policy:`; a bare section does not.
    auto parsed = yaml.find("policy:") != std::string::npos ? parseConfigDocument(yaml, config_path)
                                                            : parsePolicySection(yaml, config_path);
    if (!parsed) {
      std::cerr << "colod-replay: " << parsed.error().message() << "\n";
      return kExitBadInput;
    }
    config = std::move(*parsed);
  } else if (trace->header && trace->header->config_yaml) {
    auto parsed = parsePolicySection(*trace->header->config_yaml, trace_path + " (header)");
    if (!parsed) {
      std::cerr << "colod-replay: " << parsed.error().message() << "\n";
      return kExitBadInput;
    }
    config = std::move(*parsed);
  }
  auto rounds = replayTrace(*trace, config);
  if (!rounds) {
    std::cerr << "colod-replay: " << rounds.error().message() << "\n";
    return kExitBadInput;
  }
  size_t n = 0;
  for (size_t i = 0; i < rounds->size(); ++i) {
    const RoundResult& r = (*rounds)[i];
    for (const Decision& d : r.decisions) {
      std::cout << (json ? encodeDecision(d) : formatDecision(d)) << "\n";
      ++n;
    }
    if (findings && !json) {
      for (const Finding& f : r.findings) {
        std::cout << "  round " << i + 1 << " finding " << f.rule << " " << f.container_id << ": "
                  << f.message << "\n";
      }
    }
  }
  if (!json) {
    std::cout << "# " << rounds->size() << " rounds, " << n << " decisions"
              << (config.dry_run ? " (dry run)" : "") << "\n";
  }
  return 0;
}
