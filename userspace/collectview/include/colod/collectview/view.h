// SPDX-License-Identifier: Apache-2.0
// Rendering of collector Snapshots for colod-collect: a table, JSON, histograms. Pure.
#pragma once

#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "colod/collect/collector.h"

namespace colod::collectview {

// Keeps samples whose path contains `substr` (empty: all).
collect::Snapshot filter(collect::Snapshot snap, std::string_view substr);

// One JSON object per snapshot (stable field names; durations in ns unless named _us).
nlohmann::json toJson(const collect::Snapshot& snap);

// Fixed-width table, one row per cgroup, < 120 columns.
std::string renderTable(const collect::Snapshot& snap);

// Per cgroup: a header line and the runqlat-style run-queue histogram (and reclaim if any).
std::string renderHistograms(const collect::Snapshot& snap);

}  // namespace colod::collectview
