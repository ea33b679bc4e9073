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
// `run_ns_of`: an aggressor cgroup's mean run on a CPU this interval (on-CPU time over the times
// it got a CPU; 0 = unknown). The victim's wait after preemptions is reported in total: it is
// split between the aggressors by their preemptions, each weighted by that run, since a
// preempted task waits about as long as its preemptor then runs. Split by counts alone, a
// host's short wakers (colod's own threads, the runtime, kworkers: tens of µs a run) took most
// of a wait spent behind a BE that ran for milliseconds after its rarer preemptions, and the
// ladder stopped as for uncontrolled work while the LS starved (colocation dynamic, session 24).
// An aggressor whose run is unknown weighs the mean run of those known (by preemptions); none
// known, or no `run_ns_of`: by counts.
policy::ContainerSample toContainerSample(
    const std::string& container_id,
    const collect::CgroupSample& sample,
    const std::function<std::string(uint64_t cgroup_id)>& container_of,
    uint64_t prev_cpu_some_total_us,
    double psi_span_intervals = 1.0,
    const std::function<uint64_t(uint64_t cgroup_id)>& run_ns_of = {});

// An interval's mean run on a CPU of a cgroup: on-CPU time over the waits that ended in a run
// (runq.count, one per time a task of it got a CPU). 0 when it did not run.
uint64_t meanRunNs(const collect::CgroupSample& sample);

}  // namespace colod::daemon
