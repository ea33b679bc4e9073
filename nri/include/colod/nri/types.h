// SPDX-License-Identifier: Apache-2.0
// Plain C++ views of the NRI objects colod reads and sends (docs/nri-protocol.md §3.3).
//
// These structs are the public vocabulary of colod::nri: the stub hands them to handlers and the
// registry stores them. Only the codec (nri/src/codec.cpp) knows protobuf. Fields colod does not
// use (mounts, hooks, devices, seccomp, ...) are not mirrored here; they are still decoded and
// skipped safely.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "colod/nri/string_map.h"

namespace colod::nri {

// NRI events (enum Event). The subscription mask bit for event e is 1 << (e - 1).
enum class Event : uint32_t {
  Unknown = 0,
  RunPodSandbox = 1,
  StopPodSandbox = 2,
  RemovePodSandbox = 3,
  CreateContainer = 4,
  PostCreateContainer = 5,
  StartContainer = 6,
  PostStartContainer = 7,
  UpdateContainer = 8,
  PostUpdateContainer = 9,
  StopContainer = 10,
  RemoveContainer = 11,
  UpdatePodSandbox = 12,
  PostUpdatePodSandbox = 13,
  ValidateContainerAdjustment = 14,
};

using EventMask = uint32_t;
constexpr EventMask eventBit(Event e) {
  return e == Event::Unknown ? 0U : (1U << (static_cast<uint32_t>(e) - 1U));
}
// Valid masks per runtime NRI level (brief §3.2).
inline constexpr EventMask kValidEventsV02 = 0x7FF;   // NRI v0.2.0 - v0.9.0
inline constexpr EventMask kValidEventsCrio133 = 0x1FFF;  // CRI-O 1.33 pseudo-version
inline constexpr EventMask kValidEventsV010 = 0x3FFF;  // NRI v0.10.0+

enum class ContainerState : int32_t {
  Unknown = 0,
  Created = 1,
  Paused = 2,
  Running = 3,
  Stopped = 4,
};

struct CpuResources {
  std::optional<uint64_t> shares{};
  std::optional<int64_t> quota{};   // µs; -1 = unlimited
  std::optional<uint64_t> period{};  // µs
  std::optional<int64_t> realtime_runtime{};
  std::optional<uint64_t> realtime_period{};
  std::string cpus{};  // cpuset list "0-3,8"; "" = not set
  std::string mems{};  // NUMA node list; "" = not set
  bool operator==(const CpuResources&) const = default;
};

struct MemoryResources {
  std::optional<int64_t> limit{};  // bytes
  std::optional<int64_t> reservation{};
  std::optional<int64_t> swap{};
  std::optional<int64_t> kernel{};
  std::optional<int64_t> kernel_tcp{};
  std::optional<uint64_t> swappiness{};
  std::optional<bool> disable_oom_killer{};
  std::optional<bool> use_hierarchy{};
  bool operator==(const MemoryResources&) const = default;
};

struct HugepageLimit {
  std::string page_size{};  // "2MB"
  uint64_t limit = 0;
  bool operator==(const HugepageLimit&) const = default;
};

// LinuxResources. Optional fields: present = set (0 allowed), absent = unchanged (brief §3.5).
struct LinuxResources {
  MemoryResources memory{};
  CpuResources cpu{};
  std::vector<HugepageLimit> hugepage_limits{};
  std::optional<std::string> blockio_class{};
  std::optional<std::string> rdt_class{};
  StringMap unified{};  // cgroup v2 files, e.g. {"memory.oom.group", "1"}
  std::optional<int64_t> pids_limit{};
  bool operator==(const LinuxResources&) const = default;
};

// NRI carries no pod state; the stub derives it from the events it saw. Pods known only from a
// Synchronize are Unknown (the runtime lists running and not-yet-removed stopped sandboxes alike).
enum class PodState : int32_t {
  Unknown = 0,
  Running = 1,  // RunPodSandbox seen
  Stopped = 2,  // StopPodSandbox seen (its containers are stopped; RemovePodSandbox follows)
};

struct PodSandbox {
  std::string id{};
  std::string name{};
  std::string uid{};
  std::string namespace_name{};  // PodSandbox.namespace
  StringMap labels{};
  StringMap annotations{};
  std::string runtime_handler{};
  std::string cgroup_parent{};  // kubelet's pod cgroup, e.g. /kubepods/burstable/pod<uid>
  std::string cgroups_path{};
  uint32_t pid = 0;
  std::vector<std::string> ips{};
  LinuxResources pod_resources{};  // CRI pod-level resources (LinuxPodSandbox.pod_resources)
  LinuxResources pod_overhead{};
  LinuxResources resources{};  // from the sandbox OCI spec
  PodState state = PodState::Unknown;  // set by the stub's registry, never on the wire
};

struct Container {
  std::string id{};
  std::string pod_sandbox_id{};
  std::string name{};
  ContainerState state = ContainerState::Unknown;
  StringMap labels{};
  StringMap annotations{};
  std::vector<std::string> args{};
  std::vector<std::string> env{};  // "K=V"
  std::string cgroups_path{};  // runtime format: "<parent>/<id>" or "<slice>:cri-containerd:<id>"
  uint32_t pid = 0;  // 0 before start
  LinuxResources resources{};
  std::optional<int64_t> oom_score_adj{};
};

// A live resource update for one container (ContainerUpdate).
struct ContainerUpdate {
  std::string container_id{};
  LinuxResources resources{};
  bool ignore_failure = false;
};

// What a CreateContainer handler may change on the container being created.
struct ContainerAdjustment {
  // A key "-name" removes annotation "name". A std::map: built by plugin code, off the hot path.
  std::map<std::string, std::string> annotations{};
  std::vector<std::pair<std::string, std::string>> env{};  // key "-NAME" removes NAME
  std::optional<LinuxResources> resources{};
  std::optional<int64_t> oom_score_adj{};
};

struct CreateContainerResult {
  ContainerAdjustment adjust{};
  // Updates for *other* containers only; the runtime fails the creation if the new container is
  // listed here (brief §3.5).
  std::vector<ContainerUpdate> updates{};
};

struct ConfigureRequest {
  std::string config{};
  std::string runtime_name{};     // "containerd" / "cri-o"
  std::string runtime_version{};
  int64_t registration_timeout_ms = 0;  // 0 = not sent (runtime < v0.7.0)
  int64_t request_timeout_ms = 0;
  std::string nri_version{};  // "" before v0.12.0
};

struct SynchronizeRequest {
  std::vector<PodSandbox> pods{};
  std::vector<Container> containers{};
  bool more = false;
};

}  // namespace colod::nri
