// SPDX-License-Identifier: Apache-2.0
// The stub's view of the node: every pod and container the runtime told us about, with its
// current resources. Rebuilt from each Synchronize, kept current from events and from our own
// accepted UpdateContainers.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include "colod/nri/types.h"

namespace colod::nri {

struct RegistryOptions {
  // Bounds (no unbounded growth from a misbehaving runtime). Objects past the cap are dropped
  // and counted in RegistrySnapshot::dropped.
  std::size_t max_pods = 8192;
  std::size_t max_containers = 65536;
  // Labels and annotations of pods and containers are kept only where keep_key(key) is true;
  // nullptr keeps all. A runtime sends a dozen or more of each per object (containerd's
  // io.kubernetes.cri.* annotations, kubelet's labels), ~1 KB a container that a plugin reading a
  // few keys of its own would hold for nothing (colod: its policy keys).
  bool (*keep_key)(std::string_view key) = nullptr;
};

// Objects by id. The key views the id of the object it maps to (no copy of the 64-character
// ids), valid as long as the entry; the registry re-points it whenever it replaces an object.
template <typename T>
using ById = std::map<std::string_view, std::shared_ptr<const T>, std::less<>>;

// An immutable view. Entries are shared with the registry (cheap to take), never mutated.
struct RegistrySnapshot {
  uint64_t generation = 0;  // bumps on every change; equal generations = equal content
  bool synchronized = false;  // false until the first Synchronize, and after a disconnect
  ById<PodSandbox> pods{};
  ById<Container> containers{};
  uint64_t dropped = 0;  // objects refused because a cap was reached

  [[nodiscard]] const PodSandbox* pod(std::string_view id) const;
  [[nodiscard]] const Container* container(std::string_view id) const;
  [[nodiscard]] std::vector<const Container*> containersOfPod(std::string_view pod_id) const;
};

// Thread-safe. Mutations are O(log n) under a mutex; snapshot() builds (and caches until the next
// change) an immutable RegistrySnapshot, so readers never block writers for long. Containers are
// stored without args/env (colod never uses them; it keeps the 1000-container RSS small), and
// pods and containers with only the labels and annotations RegistryOptions::keep_key accepts.
class Registry {
 public:
  explicit Registry(RegistryOptions options = {});

  // Replaces everything (a new Synchronize) and marks the registry synchronized.
  void reset(std::vector<PodSandbox> pods, std::vector<Container> containers);
  // Replaces everything without touching the synchronized flag (the stub marks it only once the
  // Synchronize reply is on the wire of a live connection). Returns the previous content, so the
  // caller can free it off its latency-critical path (e.g. after replying); dropping it frees it.
  [[nodiscard]] std::shared_ptr<void> replace(std::vector<PodSandbox> pods,
                                              std::vector<Container> containers);
  void markSynchronized();
  // Records a pod's lifecycle state (StopPodSandbox -> Stopped). Unknown ids are ignored.
  void setPodState(std::string_view id, PodState state);
  // Marks the content stale (connection lost); the last known content stays readable.
  void markUnsynchronized();

  void upsertPod(PodSandbox pod);
  void removePod(std::string_view id);  // also removes its containers
  void upsertContainer(Container ctr);
  void setContainerState(std::string_view id, ContainerState state);
  void removeContainer(std::string_view id);
  // Merges the set fields of an accepted update into the container's current resources.
  // Unknown ids are ignored (the runtime ignores them too, brief §4.7).
  void applyUpdate(const ContainerUpdate& update);

  [[nodiscard]] std::shared_ptr<const RegistrySnapshot> snapshot() const;
  [[nodiscard]] uint64_t generation() const;

 private:
  void bumpLocked();

  RegistryOptions options_{};
  mutable std::mutex mu_;
  ById<PodSandbox> pods_{};
  ById<Container> containers_{};
  uint64_t generation_ = 0;
  uint64_t dropped_ = 0;
  bool synchronized_ = false;
  mutable std::shared_ptr<const RegistrySnapshot> cached_;
};

// Merges the set fields of `update` into `into` (optional present = set; non-empty cpus/mems =
// set; unified keys overwrite). Exposed for the daemon's own bookkeeping and tests.
void mergeResources(LinuxResources& into, const LinuxResources& update);

}  // namespace colod::nri
