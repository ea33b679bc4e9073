// SPDX-License-Identifier: Apache-2.0
// Pure text formatting for coloctl's table output (tested from data). Columns are clipped and
// padded by display width (text.h), never by bytes; lines have no length limit.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "control.pb.h"

namespace colod::ctl {

// The `coloctl top` table: one line per container, sorted as given; with `status`, a summary
// line first.
std::string formatTop(const control::v1::ListContainersReply& list,
                      const control::v1::StatusReply* status);
// One line per decision, "(no decisions yet)" when there are none.
std::string formatDecisions(const control::v1::DecisionsReply& decisions);
std::string formatStatus(const control::v1::StatusReply& status);
// `coloctl explain`: the daemon's text, then what protects the container (it as the victim) and
// what colod holds on it (it as the target) when the daemon reports them, then its decisions.
std::string formatExplain(const control::v1::ExplainReply& reply);
// `coloctl config show`: the effective configuration as YAML, each value followed by where it
// came from ("# default", "# file", "# command line (--mode)"). From an older colod, which
// sends no values, the file's text under a "# <path>" line.
std::string formatConfigShow(const control::v1::ConfigShowReply& reply);
// "2.5ms", "340us", "1.2s".
std::string formatDurationNs(uint64_t ns);
// CPUs of a CFS quota: "0.50"; "max" for no quota (quota < 0, as cgroup v2's cpu.max writes
// it); "-" when unknown (no period).
std::string formatQuota(int64_t quota_us, uint64_t period_us);
// An aggressor or container name as a person reads it: the root cgroup ("/") is
// "host (root cgroup)"; anything else as given.
std::string formatWho(std::string_view container);
// "HH:MM:SS" in local time.
std::string formatClock(int64_t unix_ms);

}  // namespace colod::ctl
