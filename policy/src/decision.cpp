// SPDX-License-Identifier: Apache-2.0
#include "colod/policy/decision.h"

#include <sstream>

#include "colod/policy/tier.h"

namespace colod::policy {

std::string_view decisionKindName(DecisionKind kind) {
  switch (kind) {
    case DecisionKind::Engage:
      return "engage";
    case DecisionKind::Escalate:
      return "escalate";
    case DecisionKind::Undo:
      return "undo";
    case DecisionKind::Relax:
      return "relax";
    case DecisionKind::Restore:
      return "restore";
  }
  return "unknown";
}

std::string_view leverName(Lever lever) {
  switch (lever) {
    case Lever::CpuShares:
      return "cpu_shares";
    case Lever::Cpuset:
      return "cpuset";
    case Lever::CpuQuota:
      return "cpu_quota";
    case Lever::MemoryLimit:
      return "memory_limit";
  }
  return "unknown";
}

namespace {
void appendResources(std::ostringstream& os, const Resources& r) {
  const char* sep = "";
  auto field = [&](const char* name, const auto& value) {
    os << sep << name << "=" << value;
    sep = " ";
  };
  if (r.cpu_shares) {
    field("shares", *r.cpu_shares);
  }
  if (r.cpu_quota) {
    // One way to write "no quota" everywhere (the kernel's cpu.max word): max.
    if (*r.cpu_quota <= 0) {
      field("quota", "max");
    } else {
      field("quota", *r.cpu_quota);
    }
  }
  if (r.cpu_period) {
    field("period", *r.cpu_period);
  }
  if (r.cpuset_cpus) {
    field("cpus", *r.cpuset_cpus);
  }
  if (r.cpuset_mems) {
    field("mems", *r.cpuset_mems);
  }
  if (r.memory_limit) {
    field("mem_limit", *r.memory_limit);
  }
  for (const auto& [k, v] : r.unified) {
    field(k.c_str(), v);
  }
  if (*sep == '\0') {
    os << "-";
  }
}
}  // namespace

std::string formatDecision(const Decision& d) {
  std::ostringstream os;
  os << "#" << d.seq << " t=" << d.at_ns << " " << decisionKindName(d.kind) << " "
     << leverName(d.lever) << " target=" << d.target_id << " set[";
  appendResources(os, d.new_values);
  os << "] orig[";
  appendResources(os, d.original_values);
  os << "] victim=" << (d.victim_id.empty() ? "-" : d.victim_id) << " rule=" << d.rule;
  if (d.dry_run) {
    os << " DRY-RUN";
  }
  os << " -- " << d.explanation;
  return os.str();
}

std::string formatFinding(const Finding& f, int64_t at_ns) {
  std::ostringstream os;
  os << "t=" << at_ns << " finding " << f.rule
     << " container=" << (f.container_id.empty() ? "-" : f.container_id) << " -- " << f.message;
  return os.str();
}

}  // namespace colod::policy
