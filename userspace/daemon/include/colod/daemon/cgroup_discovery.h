// SPDX-License-Identifier: Apache-2.0
// Observe-only without NRI: the node's Kubernetes containers listed from the kubepods cgroup
// tree, so `coloctl top` and the per-container metrics work before (or without) a runtime that
// speaks NRI. The kubelet's two layouts, under the v1 cpu hierarchy or the v2 unified one:
//
//   cgroupfs: /kubepods/<qos>/pod<uid>/<container id>            (qos: burstable, besteffort;
//             /kubepods/pod<uid>/<container id>                   guaranteed pods sit directly
//                                                                 under kubepods)
//   systemd:  /kubepods.slice/kubepods-<qos>.slice/kubepods-<qos>-pod<uid_with_underscores>.slice/
//             cri-containerd-<id>.scope | crio-<id>.scope | docker-<id>.scope
//             /kubepods.slice/kubepods-pod<uid>.slice/...         (guaranteed)
//
// Parsing a path is pure (tested from strings); the walk is dirfd-relative over an injected root.
// What the cgroup tree cannot say: the pod's name and namespace and the container's name (shown
// as kubepods/<pod uid>/<container id, 12 characters>), and which cgroup is the pod's sandbox
// (pause) container, which is listed like the others. When the runtime synchronizes over NRI its
// view replaces this one for good.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "colod/base/result.h"
#include "colod/nri/registry.h"

namespace colod::daemon {

enum class PodQos { Guaranteed, Burstable, BestEffort };
std::string_view podQosName(PodQos qos);  // "guaranteed", "burstable", "besteffort"

struct KubepodsContainer {
  std::string id;       // the container id (hex, 12 to 64 characters)
  std::string runtime;  // the scope prefix: "cri-containerd", "crio", "docker"; "" (cgroupfs)
  std::string pod_uid;  // as the API writes it (systemd's underscores turned back into dashes)
  PodQos qos = PodQos::BestEffort;
  bool systemd = false;    // the systemd layout (else cgroupfs)
  std::string prefix;      // what precedes /kubepods or /kubepods.slice ("" normally)
  std::string pod_slice;   // systemd: the pod's slice name ("kubepods-burstable-pod1_2.slice")
  std::string pod_cgroup;  // the pod's directory relative to the hierarchy root
  std::string rel;         // the container's directory relative to the hierarchy root
  uint64_t cgroup_id = 0;  // the directory's inode (0 when parsed from a string)

  friend bool operator==(const KubepodsContainer&, const KubepodsContainer&) = default;
};

// A cgroup directory (relative to a hierarchy root, starting with '/') that is a Kubernetes
// container, or std::nullopt: pod and QoS directories, a container's own sub-cgroups, CRI-O's
// conmon scopes and anything outside kubepods are not containers.
std::optional<KubepodsContainer> parseKubepodsPath(std::string_view rel);

// The runtime's cgroups_path for a discovered container, as NRI would report it, so that the
// daemon resolves it as it resolves NRI's and NRI's later view of the same container carries the
// same path: "slice:prefix:id" (systemd; the daemon prepends daemon.systemd_cgroup_prefix) or the
// directory itself (cgroupfs).
std::string runtimeCgroupsPath(const KubepodsContainer& c);

struct DiscoveryOptions {
  std::string hierarchy_root;  // e.g. /sys/fs/cgroup/unified or /sys/fs/cgroup/cpu
  // Where kubepods starts below the hierarchy root ("" normally; daemon.systemd_cgroup_prefix,
  // for a nested kubelet or a test's private tree).
  std::string prefix;
  std::size_t max_cgroups = 4096;  // bound of the walk (E2BIG past it)
};

// Walks <root><prefix>/kubepods and <root><prefix>/kubepods.slice (either may be absent: no
// error) and returns the containers found, sorted by id. Errors: E2BIG past max_cgroups, or the
// errno of opening an existing kubepods directory.
Result<std::vector<KubepodsContainer>> discoverKubepods(const DiscoveryOptions& options);

// Discovered containers as a registry snapshot (pods keyed "kubepods:<uid>", containers Running,
// never `synchronized`), so the loop reads them as it reads the runtime's.
std::shared_ptr<const nri::RegistrySnapshot> discoveredRegistry(
    const std::vector<KubepodsContainer>& containers, uint64_t generation);

// Which registry the loop reads. The runtime's once it has synchronized at least once (after
// that, its last view stays authoritative through a disconnect, as before); until then the
// kubepods tree, rescanned when asked. Loop thread only.
class RegistrySource {
 public:
  // Discovered snapshots carry generations with this bit set, so they never equal one of the
  // runtime registry's (which count up from 0).
  static constexpr uint64_t kDiscoveredGeneration = uint64_t{1} << 63;

  struct Choice {
    std::shared_ptr<const nri::RegistrySnapshot> snapshot;
    bool discovered = false;
    // A line for the log when the source changes or a scan fails ("" otherwise); a failure is
    // said once until the scan works again.
    std::string note;
  };
  Choice choose(std::shared_ptr<const nri::RegistrySnapshot> runtime,
                const DiscoveryOptions& options,
                bool rescan);
  // True until the runtime has synchronized once: the containers come from the cgroup tree, and
  // the daemon acts on none of them (observe-only).
  [[nodiscard]] bool discovering() const { return !runtime_seen_; }

  // For tests: the scan (defaults to discoverKubepods).
  using Scan = Result<std::vector<KubepodsContainer>> (*)(const DiscoveryOptions&);
  explicit RegistrySource(Scan scan = &discoverKubepods) : scan_(scan) {}

 private:
  Scan scan_;
  bool runtime_seen_ = false;
  bool announced_ = false;
  std::string last_error_;
  uint64_t scans_ = 0;
  std::vector<KubepodsContainer> last_;
  std::shared_ptr<const nri::RegistrySnapshot> discovered_;
};

}  // namespace colod::daemon
