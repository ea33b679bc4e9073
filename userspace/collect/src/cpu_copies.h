// SPDX-License-Identifier: Apache-2.0
// How many CPUs cg_sched holds a copy for (bpf/common/cg_maps.bpf.h): the present CPUs, not the
// possible ones. A cloud VM that may hot-add CPUs declares many more possible than it has (the
// vmtests guest: 512 possible, 2 present), and per-CPU maps pay for every possible one (issue
// 17). A CPU brought online past these copies is not measured: the BPF side counts it once
// (COLOD_DROP_CPU) and the collector says so (CollectorStats::unmeasured_cpus).
//
// Private to colod::collect. parseCpuListEnd is pure; presentCpuEnd reads sysfs.
#pragma once

#include <cstdint>
#include <string_view>

#include "colod/base/result.h"

namespace colod::collect::detail {

// One past the highest CPU of a kernel CPU list ("0-3,8-11\n" -> 12), read by
// policy::parseCpuList. EINVAL on anything else (empty, a range going down, a CPU past 65535).
Result<uint32_t> parseCpuListEnd(std::string_view list);

// One past the highest present CPU (/sys/devices/system/cpu/present under `sysfs_cpu`).
Result<uint32_t> presentCpuEnd(std::string_view sysfs_cpu = "/sys/devices/system/cpu");

// The copies to size cg_sched for: the present CPUs' end when known, never more than the
// possible CPUs (the kernel's CPU ids stay below them) nor fewer than one. `present` is the
// result of presentCpuEnd; its error means "every possible CPU".
uint32_t schedCopies(const Result<uint32_t>& present, uint32_t possible);

}  // namespace colod::collect::detail
