// SPDX-License-Identifier: Apache-2.0
// Pure helpers over ContainerInfo: tier classification, exclusive-CPU inference, CPU lists.
#pragma once

#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "colod/base/result.h"
#include "colod/policy/types.h"

namespace colod::policy {

// Annotation/label keys understood by classifyTier().
inline constexpr std::string_view kTierKey = "colod.io/tier";
inline constexpr std::string_view kKoordinatorQosKey = "koordinator.sh/qosClass";
inline constexpr std::string_view kKatalystQosKey = "katalyst.kubewharf.io/qos_level";

// True for every label/annotation key the engine reads: the `colod.io/` keys (kTierKey and the
// per-container thresholds of config.h) and the Koordinator and Katalyst QoS keys. A caller that
// keeps many ContainerInfos may drop every other entry without changing a decision.
[[nodiscard]] bool isPolicyKey(std::string_view key);

// A key whose value classifyTier() did not understand.
struct UnknownTierValue {
  std::string key;
  std::string value;
  std::string where;  // "container annotation", "pod annotation", "container label", "pod label"
};

struct TierResult {
  Tier tier = Tier::Unknown;
  // Where the tier came from: "colod.io/tier (pod annotation)", "cgroup parent (burstable)", ...
  std::string source;
  // Values seen but not understood, in lookup order. Non-empty even when a later source decided.
  std::vector<UnknownTierValue> unknown;
};

// Classifies a container. Order: colod.io/tier, then koordinator.sh/qosClass, then
// katalyst.kubewharf.io/qos_level (for each key: container annotations, pod annotations,
// container labels, pod labels), then the Kubernetes QoS class from cgroup_parent
// (guaranteed/burstable -> Ls, besteffort -> Be). ContainerInfo::tier, when set, wins.
// Unknown values are reported in TierResult::unknown; if nothing decides, Tier::Unknown.
[[nodiscard]] TierResult classifyTier(const ContainerInfo& info);

// Kubernetes QoS class from a cgroup parent (systemd or cgroupfs driver).
enum class K8sQos { Unknown, Guaranteed, Burstable, BestEffort };
[[nodiscard]] K8sQos qosFromCgroupParent(std::string_view cgroup_parent);

// Infers kubelet static-CPU-manager exclusivity: a Guaranteed pod (from cgroup_parent) whose CFS
// quota is an integer number of CPUs, pinned to exactly that many CPUs, where the cpuset is a
// strict subset of node_cpus and does not intersect shared_pool (may be empty = unknown).
[[nodiscard]] bool inferExclusiveCpus(const ContainerInfo& info,
                                      std::span<const int> node_cpus,
                                      std::span<const int> shared_pool);

// Parses the kernel CPU list format ("0-3,8,10-11"; "" = empty). Returns a sorted, de-duplicated
// list, or EINVAL naming the bad token. CPU numbers are limited to [0, 65535].
[[nodiscard]] Result<std::vector<int>> parseCpuList(std::string_view text);

// Formats a CPU list (any order, duplicates allowed) in the kernel list format, e.g. "0-3,8".
[[nodiscard]] std::string formatCpuList(std::span<const int> cpus);

[[nodiscard]] std::string_view tierName(Tier tier);  // "unknown", "ls", "be", "system"

}  // namespace colod::policy
