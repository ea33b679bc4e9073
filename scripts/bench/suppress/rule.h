// SPDX-License-Identifier: Apache-2.0
// Koordinator's CPU Suppress rule, as the colocation benchmark's peer baseline (not part of
// colod). Pure: parsing of the kernel's accounting files from strings and the rule itself, so
// both are tested without a node (style rule 38); main.cpp does the I/O.
//
// The rule, from koordlet's qosmanager plugin cpusuppress (calculateBESuppressCPU, adjustByCPUSet):
//   https://github.com/koordinator-sh/koordinator/blob/main/pkg/koordlet/qosmanager/plugins/cpusuppress/cpu_suppress.go
//   // suppress(BE) := node.Total * SLOPercent - pod(LS).Used - system.Used
// documented as "CPU Suppress" (cpuSuppressThresholdPercent, default 65 %, recomputed every
// CPUSuppressIntervalSeconds = 1 s):
//   https://koordinator.sh/docs/user-manuals/cpu-suppress/
//   https://www.alibabacloud.com/help/en/ack/ack-managed-and-ack-dedicated/user-guide/elastic-resource-limit
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "colod/base/result.h"

namespace colod::suppress {

// Busy and total jiffies of the aggregate "cpu " line of /proc/stat.
struct ProcStatCpu {
  uint64_t busy = 0;   // user+nice+system+irq+softirq+steal (guest is already inside user)
  uint64_t total = 0;  // busy + idle + iowait
};

// Parses /proc/stat text. EINVAL: no "cpu " line or fewer than 8 numeric fields.
[[nodiscard]] Result<ProcStatCpu> parseProcStat(std::string_view text);
// cgroup v1 cpuacct.usage: one decimal number of ns. EINVAL otherwise.
[[nodiscard]] Result<uint64_t> parseCpuacctUsage(std::string_view text);
// cgroup v2 cpu.stat: the usage_usec line, returned in ns. EINVAL when missing or malformed.
[[nodiscard]] Result<uint64_t> parseCpuStatUsageNs(std::string_view text);

struct RuleInput {
  int node_cpus = 0;
  double slo_percent = 65.0;  // cpuSuppressThresholdPercent
  double ls_used_cpus = 0;    // pod(LS).Used: every non-BE container, in CPUs
  double pods_used_cpus = 0;  // every container (LS and BE)
  double node_used_cpus = 0;  // the whole machine (/proc/stat)
  int be_min_cpus = 1;        // koordlet: beMinCPUSetCores = 2; here colod's floors.be_min_cpus
  int current_be_cpus = 0;    // the BE cpuset size in force (scale-up is stepped from it)
};

struct RuleOutput {
  double suppress_cpus = 0;  // the formula's value
  double system_used_cpus = 0;
  int be_cpus = 0;  // cpuset size to apply
};

// suppress = node_cpus * slo% - ls_used - max(0, node_used - pods_used); cpuset size =
// ceil(suppress), at least be_min_cpus, at most node_cpus, and grown by at most
// ceil(10 % of the node) per round (koordlet's beMaxIncreaseCPUPercent: "scale up slow").
[[nodiscard]] RuleOutput suppressRule(const RuleInput& in);

// The BE cpuset of `count` CPUs on a node of CPUs 0..node_cpus-1: the highest-numbered ones, the
// side colod's cpuset rung gives BE (koordlet fills by topology order; on this node only the
// side differs, and using colod's side keeps the floor phase comparable). "1", "2-3", "0-3".
[[nodiscard]] std::string beCpuset(int node_cpus, int count);

}  // namespace colod::suppress
