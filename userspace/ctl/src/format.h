// SPDX-License-Identifier: Apache-2.0
// Pure text formatting for coloctl (tested from data).
#pragma once

#include <string>

#include "control.pb.h"

namespace colod::ctl {

// The `coloctl top` table: one line per container, sorted as given.
std::string formatTop(const control::v1::ListContainersReply& list,
                      const control::v1::StatusReply* status);
std::string formatDecisions(const control::v1::DecisionsReply& decisions);
std::string formatStatus(const control::v1::StatusReply& status);
// "2.5ms", "340us", "1.2s".
std::string formatDurationNs(uint64_t ns);
// "-" for unlimited, "0.50 (50000/100000)".
std::string formatQuota(int64_t quota_us, uint64_t period_us);

}  // namespace colod::ctl
