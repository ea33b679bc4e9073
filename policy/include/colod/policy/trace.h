// SPDX-License-Identifier: Apache-2.0
// Trace format: JSON lines, one object per line, each with a "type":
//   {"type":"header","version":1,"config":"<policy YAML text>"}      (optional, first line)
//   {"type":"upsert","container":{...ContainerInfo...}}             (registry add/replace)
//   {"type":"remove","id":"<container id>"}                         (registry removal)
//   {"type":"snapshot","now_ns":..,"interval_ns":..,"node_cpus":..,"containers":[...]}
//   {"type":"admit","now_ns":..,"container":{...ContainerInfo...}}  (Engine::admit at creation)
// The daemon records exactly this with the encoders below; the replay tool feeds the events
// in order to an Engine. Empty lines and lines starting with '#' are ignored.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "colod/base/result.h"
#include "colod/policy/decision.h"
#include "colod/policy/engine.h"
#include "colod/policy/types.h"

namespace colod::policy {

inline constexpr int kTraceVersion = 1;

struct TraceHeader {
  int version = kTraceVersion;
  std::optional<std::string> config_yaml;  // policy section YAML, if recorded
};

struct TraceRemove {
  std::string id;
};

// A container being created, handed to Engine::admit (admission placement): without it a replay
// would not place the BE that the live engine placed, and every round after would differ.
struct TraceAdmit {
  int64_t now_ns = 0;
  ContainerInfo info;
};

using TraceEvent = std::variant<ContainerInfo, TraceRemove, Snapshot, TraceAdmit>;

struct Trace {
  std::optional<TraceHeader> header;
  std::vector<TraceEvent> events;
};

// Each encoder returns one JSON line without the trailing newline.
[[nodiscard]] std::string encodeTraceHeader(const TraceHeader& header);
[[nodiscard]] std::string encodeUpsert(const ContainerInfo& info);
[[nodiscard]] std::string encodeRemove(std::string_view id);
[[nodiscard]] std::string encodeSnapshot(const Snapshot& snapshot);
[[nodiscard]] std::string encodeAdmit(const ContainerInfo& info, int64_t now_ns);
// A whole trace, one line per event, each followed by '\n'.
[[nodiscard]] std::string encodeTrace(const Trace& trace);

// Decodes a whole trace. EINVAL "<line N>: <what>" for bad JSON, a wrong type, a missing
// required field, a header not on the first line or an unsupported version.
[[nodiscard]] Result<Trace> decodeTrace(std::string_view text);

// JSON (one object) of a decision, for `--json` output and the daemon's explain/journal.
[[nodiscard]] std::string encodeDecision(const Decision& decision);
[[nodiscard]] Result<Decision> decodeDecision(std::string_view json);
// JSON (one object) of a finding made in the round at `at_ns`, for `replay --findings --json`:
// {"at_ns", "finding": rule, "container_id", "message"}.
[[nodiscard]] std::string encodeFinding(const Finding& finding, int64_t at_ns);

// Replays a trace through an engine built from `config` and returns every round's result in
// order (one RoundResult per snapshot and per admission). EINVAL if the config is invalid.
[[nodiscard]] Result<std::vector<RoundResult>> replayTrace(const Trace& trace,
                                                           const Config& config);

}  // namespace colod::policy
