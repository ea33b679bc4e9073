// SPDX-License-Identifier: Apache-2.0
// colod-testplugin roles: the decisions a Koordinator-like and a topology-aware NRI plugin make at
// CreateContainer, pure (no I/O) so they are tested from plain objects.
#pragma once

#include <map>
#include <optional>
#include <set>
#include <string>
#include <string_view>

#include "colod/base/result.h"
#include "colod/nri/types.h"

namespace colod::nri::testplugin {

enum class Role { Koordinator, Topology, Observe };

// The pod label Koordinator puts its QoS class in (koordlet's NRI mode reads the same).
inline constexpr std::string_view kQosLabel = "koordinator.sh/qosClass";
// The pod annotation the topology role reads: how many exclusive CPUs the LS container wants
// ("1", "2", ...). Only LS/LSR pods (kQosLabel) are served; others are left alone.
inline constexpr std::string_view kExclusiveAnnotation = "topology.colod.io/exclusive-cpus";

struct RoleConfig {
  Role role = Role::Observe;
  std::string ls_cpus = "0";  // koordinator: the LS share pool written into LS cpusets
  uint64_t be_shares = 2;     // koordinator: cpu.shares of BE containers
  std::set<int> pool{};       // topology: CPUs that may be handed out exclusively
};

Result<Role> parseRole(std::string_view s);
// "0-2,5" -> {0,1,2,5}; EINVAL on anything else.
Result<std::set<int>> parseCpuList(std::string_view s);
std::string formatCpuList(const std::set<int>& cpus);
// Configure's config (the runtime's conf.d file for a pre-installed plugin): "key: value" lines
// with keys role, ls_cpus, be_shares, pool, overriding `base`.
Result<RoleConfig> parseConfig(std::string_view text, RoleConfig base);

// One plugin's state across containers (the topology role's allocations).
class Roles {
 public:
  explicit Roles(RoleConfig cfg) : cfg_(std::move(cfg)) {}
  // The adjustment for a container being created (nullopt: leave it alone).
  std::optional<LinuxResources> adjust(const PodSandbox& pod, const Container& ctr);
  void release(const std::string& container_id);
  [[nodiscard]] const RoleConfig& config() const { return cfg_; }
  void setConfig(RoleConfig cfg) { cfg_ = std::move(cfg); }

 private:
  RoleConfig cfg_;
  std::map<std::string, std::set<int>> exclusive_;  // container id -> its CPUs
};

}  // namespace colod::nri::testplugin
