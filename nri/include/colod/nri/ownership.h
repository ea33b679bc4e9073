// SPDX-License-Identifier: Apache-2.0
// Field ownership between NRI plugins (protocol brief §3.5, §4.4, §4.9).
//
// Every runtime merges the plugins' CreateContainer/UpdateContainer replies field by field; a
// field set by two plugins is a conflict and fails the operation (for CreateContainer: the pod
// cannot start). From v0.10 the runtime reports who set what: validators
// (ValidateContainerAdjustment subscribers) get the owners of every field of the container being
// created. The stub turns that report into an owner table, and the runtime's conflict errors into
// OwnershipConflict values naming the other plugin, so a plugin can step aside and say so.
#pragma once

#include <cstdint>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "colod/nri/types.h"

namespace colod::nri {

// NRI's Field enum values for the fields a resource plugin sets (brief §3.3).
enum class Field : int32_t {
  Annotations = 1,
  MemLimit = 8,
  CPUShares = 16,
  CPUQuota = 17,
  CPUPeriod = 18,
  CPUSetCPUs = 21,
  CPUSetMems = 22,
  PidsLimit = 23,
  CgroupsUnified = 27,
  OomScoreAdj = 29,
};

// The enum name ("CPUSetCPUs"), as v0.10+ runtimes write it; "Field(N)" for others.
std::string fieldName(int32_t field);

// The owners the runtime reported for one container: simple fields by Field value, compound
// fields (annotations, unified) by Field value and key. Owners are "NN-name" plugin labels.
struct ContainerOwners {
  std::string container_id{};
  std::map<int32_t, std::string> simple{};
  std::map<int32_t, std::map<std::string, std::string>> compound{};
  bool operator==(const ContainerOwners&) const = default;
};

struct OwnershipConflict {
  std::string container_id{};  // "" when the runtime's text does not name it (v0.10+ wording)
  std::string field{};         // runtime's wording: "CPUSetCPUs" (v0.10+), "CPU set cpus" (older)
  std::string other_plugin{};  // the plugin that owns the field, as the runtime names it
  // "owned": updateContainers() left the field out because the runtime reported another owner;
  // "runtime": parsed from an error the runtime returned.
  std::string source{};
  std::string message{};
};

// Parses the runtime's conflict error, at every level:
//   plugins "A" and "B" both tried to set FIELD[ for container ID]
// `self` is our plugin's name or "NN-name"; the other plugin is whichever of A/B is not us
// (B when neither matches). nullopt when the text is not a conflict.
std::optional<OwnershipConflict> parseConflictMessage(std::string_view text,
                                                      std::string_view self_name,
                                                      std::string_view self_label);

// The simple fields and unified keys a resource update sets (present optionals, non-empty
// cpusets, pids limit, unified keys).
std::vector<Field> fieldsSet(const LinuxResources& r);

// The owners reported per container, kept until the container is removed. Thread-safe.
class OwnerTable {
 public:
  void record(ContainerOwners owners);
  void forget(std::string_view container_id);
  void clear();
  [[nodiscard]] std::optional<std::string> owner(std::string_view container_id, Field f) const;
  [[nodiscard]] std::optional<ContainerOwners> owners(std::string_view container_id) const;
  // Removes from `u` every field another plugin owns (self_label/self_name are us) and returns
  // one conflict per removed field.
  std::vector<OwnershipConflict> stripOwnedByOthers(ContainerUpdate& u,
                                                    std::string_view self_name,
                                                    std::string_view self_label) const;

 private:
  mutable std::mutex mu_;
  std::map<std::string, ContainerOwners, std::less<>> by_id_;
};

}  // namespace colod::nri
