// SPDX-License-Identifier: Apache-2.0
#include "colod/daemon/privileges.h"

#include <linux/capability.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <charconv>

namespace colod::daemon {

namespace {

// capability(7) names, by number; numbers past the list print as "cap<N>".
constexpr const char* kNames[] = {"chown",
                                  "dac_override",
                                  "dac_read_search",
                                  "fowner",
                                  "fsetid",
                                  "kill",
                                  "setgid",
                                  "setuid",
                                  "setpcap",
                                  "linux_immutable",
                                  "net_bind_service",
                                  "net_broadcast",
                                  "net_admin",
                                  "net_raw",
                                  "ipc_lock",
                                  "ipc_owner",
                                  "sys_module",
                                  "sys_rawio",
                                  "sys_chroot",
                                  "sys_ptrace",
                                  "sys_pacct",
                                  "sys_admin",
                                  "sys_boot",
                                  "sys_nice",
                                  "sys_resource",
                                  "sys_time",
                                  "sys_tty_config",
                                  "mknod",
                                  "lease",
                                  "audit_write",
                                  "audit_control",
                                  "setfcap",
                                  "mac_override",
                                  "mac_admin",
                                  "syslog",
                                  "wake_alarm",
                                  "block_suspend",
                                  "audit_read",
                                  "perfmon",
                                  "bpf",
                                  "checkpoint_restore"};

}  // namespace

Result<void> dropAllCapabilities() {
  // The bounding set first: dropping from it needs CAP_SETPCAP, which goes last.
  for (int cap = 0; cap <= 63; ++cap) {
    if (::prctl(PR_CAPBSET_READ, cap, 0, 0, 0) < 0) {
      break;  // past the kernel's last capability
    }
    // EPERM without CAP_SETPCAP (a container that did not grant it): the bounding set then
    // stays, but the empty permitted set below still leaves nothing to use.
    (void)::prctl(PR_CAPBSET_DROP, cap, 0, 0, 0);
  }
  (void)::prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0);
  if (::prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0) {
    return COLOD_ERR(errno, "prctl(PR_SET_NO_NEW_PRIVS)");
  }
  __user_cap_header_struct header{};
  header.version = _LINUX_CAPABILITY_VERSION_3;
  header.pid = 0;
  __user_cap_data_struct data[2] = {};  // all three sets empty, both 32-bit halves
  if (::syscall(SYS_capset, &header, data) != 0) {
    return COLOD_ERR(errno, "capset (empty sets)");
  }
  return {};
}

Result<uint64_t> parseCapEff(std::string_view text) {
  const std::string_view key = "CapEff:";
  const auto at = text.find(key);
  if (at == std::string_view::npos) {
    return COLOD_ERR(EINVAL, "no CapEff line");
  }
  std::string_view rest = text.substr(at + key.size());
  while (!rest.empty() && (rest.front() == '\t' || rest.front() == ' ')) {
    rest.remove_prefix(1);
  }
  uint64_t mask = 0;
  auto [ptr, ec] = std::from_chars(rest.data(), rest.data() + rest.size(), mask, 16);
  if (ec != std::errc() || ptr == rest.data() ||
      (ptr != rest.data() + rest.size() && *ptr != '\n')) {
    return COLOD_ERR(EINVAL, "malformed CapEff line");
  }
  return mask;
}

std::string capabilityNames(uint64_t mask) {
  std::string out;
  for (unsigned cap = 0; cap < 64; ++cap) {
    if ((mask & (uint64_t{1} << cap)) == 0) {
      continue;
    }
    out += out.empty() ? "" : " ";
    out += cap < std::size(kNames) ? std::string(kNames[cap]) : "cap" + std::to_string(cap);
  }
  return out.empty() ? "none" : out;
}

}  // namespace colod::daemon
