// SPDX-License-Identifier: Apache-2.0
// JSON form of Resources, shared by the trace format (trace.h) and the daemon's journal, so a
// value written by one reads back the same in the other: an object with the set fields only
// (cpu_shares, cpu_quota, cpu_period, cpuset_cpus, cpuset_mems, memory_limit, unified).
#pragma once

#include <nlohmann/json_fwd.hpp>
#include <string_view>

#include "colod/base/result.h"
#include "colod/policy/types.h"

namespace colod::policy {

[[nodiscard]] nlohmann::json encodeResourcesJson(const Resources& r);

// Type-checked (no exceptions): an error names `where` and the offending key.
[[nodiscard]] Result<Resources> decodeResourcesJson(const nlohmann::json& j,
                                                    std::string_view where);

}  // namespace colod::policy
