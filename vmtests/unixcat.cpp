// SPDX-License-Identifier: Apache-2.0
// vm_unixcat — one request, one reply over a Unix stream socket, for the guest scripts (busybox
// nc has no Unix sockets). Usage: vm_unixcat SOCKET 'LINE'. Sends LINE plus '\n', prints the
// first reply line. Exit 0 when the reply says "ok":true, 1 when it does not, 2 on I/O errors.
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <string>

#include "colod/base/unique_fd.h"

int main(int argc, char** argv) {
  if (argc != 3) {
    std::fprintf(stderr, "usage: vm_unixcat SOCKET LINE\n");
    return 2;
  }
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  if (std::strlen(argv[1]) >= sizeof addr.sun_path) {
    std::fprintf(stderr, "vm_unixcat: socket path too long\n");
    return 2;
  }
  std::strncpy(addr.sun_path, argv[1], sizeof addr.sun_path - 1);
  colod::UniqueFd fd(socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0));
  if (!fd.valid() ||
      connect(fd.get(), reinterpret_cast<const sockaddr*>(&addr), sizeof addr) != 0) {
    std::fprintf(stderr, "vm_unixcat: connect %s: %s\n", argv[1], std::strerror(errno));
    return 2;
  }
  std::string req = std::string(argv[2]) + "\n";
  for (size_t off = 0; off < req.size();) {
    ssize_t n = write(fd.get(), req.data() + off, req.size() - off);
    if (n <= 0) {
      std::fprintf(stderr, "vm_unixcat: write: %s\n", std::strerror(errno));
      return 2;
    }
    off += static_cast<size_t>(n);
  }
  std::string reply;
  char c = 0;
  // Replies are small JSON lines; a 1 MiB bound keeps a misbehaving peer from eating memory.
  while (reply.size() < (1U << 20)) {
    ssize_t n = read(fd.get(), &c, 1);
    if (n < 0 && errno == EINTR) {
      continue;
    }
    if (n <= 0 || c == '\n') {
      break;
    }
    reply.push_back(c);
  }
  std::printf("%s\n", reply.c_str());
  return reply.find("\"ok\":true") != std::string::npos ? 0 : 1;
}
