// SPDX-License-Identifier: Apache-2.0
// coloctl's `-o json` documents (schemas in userspace/ctl/README.md). Field names are the
// control API's (control.proto) and stay stable: fields may be added, never renamed or retyped.
// Every function returns one document, pretty-printed (indent 2) with a trailing newline, or on
// one line without a newline when `compact` (JSON Lines: `top -o json` without --once). Pure.
#pragma once

#include <string>
#include <string_view>

#include "colod/base/result.h"
#include "control.pb.h"

namespace colod::ctl {

std::string statusJson(const control::v1::StatusReply& status, bool compact = false);
// top and list: {"unix_ms", "interval_ms", "status" (object or null), "containers": [...]}.
std::string containersJson(const control::v1::ListContainersReply& list,
                           const control::v1::StatusReply* status,
                           bool compact = false);
std::string histogramJson(const control::v1::HistogramReply& hist, bool compact = false);
std::string decisionsJson(const control::v1::DecisionsReply& decisions, bool compact = false);
std::string explainJson(const control::v1::ExplainReply& explain, bool compact = false);
std::string configShowJson(const control::v1::ConfigShowReply& config, bool compact = false);

// `dump`: the daemon's document, re-indented; EINVAL when it is not JSON.
Result<std::string> dumpJson(std::string_view daemon_json);
// `dump -o table`: the daemon's document as text (status, the container table, then one line
// per entry of every other list). EINVAL when it is not JSON.
Result<std::string> dumpTable(std::string_view daemon_json);

}  // namespace colod::ctl
