// SPDX-License-Identifier: Apache-2.0
// Pure conversions between the modules' vocabularies: NRI registry objects -> policy inputs,
// policy decisions -> NRI updates, collector samples -> policy samples.
#pragma once

#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <string_view>

#include "colod/collect/collector.h"
#include "colod/nri/types.h"
#include "colod/policy/types.h"

namespace colod::daemon {

// ContainerInfo for the engine. `node_cpus` is used to infer exclusive CPUs.
policy::ContainerInfo toContainerInfo(const nri::PodSandbox* pod,
                                      const nri::Container& ctr,
                                      std::span<const int> node_cpus);

// Drops from info's label/annotation maps every entry the engine never reads
// (policy::isPolicyKey). The engine keeps one ContainerInfo per container; with the ~29 labels
// and annotations kubelet sets, those maps were ~6 KB a container. Classification and
// thresholds are unchanged (tested); traces still carry the full maps.
void keepPolicyKeys(policy::ContainerInfo& info);

// NRI resources carrying exactly the set fields of `values`. An empty cpuset string means
// "all CPUs" in a restore (NRI cannot clear a cpuset, brief §3.5): it is replaced with
// `all_cpus` (kernel list format).
nri::LinuxResources toLinuxResources(const policy::Resources& values, std::string_view all_cpus);

// The values that undo `applied` when the recorded original left a field unset: an unset quota
// is unlimited (-1), an unset cpuset all CPUs (""), an unset memory limit unlimited (-1).
policy::Resources completeOriginals(const policy::Resources& original,
                                    const policy::Resources& applied);

// The set fields of NRI resources in the policy's vocabulary, as they are (no defaults filled
// in: an unset quota stays unset). Empty cpus/mems strings are unset in NRI.
policy::Resources toPolicyResources(const nri::LinuxResources& r);

// A human-readable "shares=2 quota=50000/100000 cpus=1" of the set fields.
std::string describeResources(const policy::Resources& values);

// One collector sample as the engine's ContainerSample. `container_of` maps an aggressor cgroup
// id to a container id ("" = not a container: host/system tasks). `prev_cpu_some_total_us`: the
// PSI cpu some total of the container's previous PSI read (0: none), `psi_span_intervals` how
// many of this sample's intervals have passed since that read (the collector reads PSI once a
// second): the total's delta is spread over them, so the engine's fallback wait is the average
// over the span, not a second's worth in one interval.
policy::ContainerSample toContainerSample(
    const std::string& container_id,
    const collect::CgroupSample& sample,
    const std::function<std::string(uint64_t cgroup_id)>& container_of,
    uint64_t prev_cpu_some_total_us,
    double psi_span_intervals = 1.0);

}  // namespace colod::daemon
