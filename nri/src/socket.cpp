// SPDX-License-Identifier: Apache-2.0
#include <sys/socket.h>
#include <sys/un.h>

#include <cerrno>
#include <cstring>

#include "colod/nri/mux.h"

namespace colod::nri::wire {

Result<UniqueFd> dialUnix(const std::string& path) {
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  if (path.empty() || path.size() >= sizeof(addr.sun_path)) {
    return COLOD_ERR(ENAMETOOLONG, "NRI socket path '", path, "' is empty or too long");
  }
  std::memcpy(addr.sun_path, path.data(), path.size());
  UniqueFd fd(::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0));
  if (!fd) {
    return COLOD_ERR(errno, "socket(AF_UNIX)");
  }
  for (;;) {
    // sockaddr_un -> sockaddr is the socket API's own convention.
    if (::connect(fd.get(), reinterpret_cast<const sockaddr*>(&addr), sizeof addr) == 0) {  // NOLINT
      return fd;
    }
    int e = errno;
    if (e != EINTR) {
      return COLOD_ERR(e, "connecting to ", path);
    }
  }
}

}  // namespace colod::nri::wire
