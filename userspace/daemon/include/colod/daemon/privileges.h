// SPDX-License-Identifier: Apache-2.0
// Least privilege after startup: once the BPF programs are loaded and attached and every socket
// is bound, colod needs no capability at all -- map reads go through fds it holds, cgroup and
// /proc files are world-readable, its own journal, sockets and the runtime's NRI socket belong to
// its uid. dropAllCapabilities() empties the bounding, inheritable, ambient, permitted and
// effective sets and sets no_new_privs, so a compromised colod cannot load programs, write
// cgroups or regain anything through exec.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "colod/base/result.h"

namespace colod::daemon {

// Errors: the errno of prctl/capset (EPERM when the process may not change its sets).
Result<void> dropAllCapabilities();

// The effective capability mask from /proc/<pid>/status text ("CapEff:\t0000003fffffffff").
// EINVAL when the line is missing or malformed.
Result<uint64_t> parseCapEff(std::string_view status_text);

// Names of the capabilities set in `mask` ("bpf perfmon sys_admin"), for the log.
std::string capabilityNames(uint64_t mask);

}  // namespace colod::daemon
