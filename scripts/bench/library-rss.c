// SPDX-License-Identifier: Apache-2.0
// What loading colod's shared libraries leaves resident (issue 17: the RSS goal). Loads each
// library named on the command line in turn (dlopen, RTLD_NOW | RTLD_GLOBAL, as the dynamic
// loader does for colod at start: every relocation and static constructor runs), calls
// grpc_init() after libgrpc as colod's control server does, and after each step prints this
// process's resident memory from /proc/self/smaps: in all, and the part mapped from libcrypto and
// libssl, which a library may initialize without being asked to (Debian's libcpp-httplib runs
// OPENSSL_init_ssl from a static constructor).
//   library-rss LIB...      e.g. library-rss libgrpc.so.29 libcpp-httplib.so.0.11.4
// Output, one line per step:
//   library-rss: step=<name> rss_kb= anon_kb= libcrypto_kb= libssl_kb=
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int header(const char* line) {
  // A mapping's header starts with its address range "start-end "; field lines with a name.
  const char* p = line;
  while ((*p >= '0' && *p <= '9') || (*p >= 'a' && *p <= 'f')) {
    ++p;
  }
  return p != line && *p == '-';
}

static int report(const char* step) {
  FILE* f = fopen("/proc/self/smaps", "r");
  if (f == NULL) {
    perror("library-rss: /proc/self/smaps");
    return -1;
  }
  char line[4096];
  int in_crypto = 0, in_ssl = 0;
  long rss = 0, anon = 0, crypto = 0, ssl = 0;
  while (fgets(line, sizeof line, f) != NULL) {
    if (header(line)) {
      in_crypto = strstr(line, "/libcrypto.so") != NULL;
      in_ssl = strstr(line, "/libssl.so") != NULL;
    } else if (strncmp(line, "Rss:", 4) == 0) {
      const long kb = atol(line + 4);
      rss += kb;
      crypto += in_crypto ? kb : 0;
      ssl += in_ssl ? kb : 0;
    } else if (strncmp(line, "Anonymous:", 10) == 0) {
      anon += atol(line + 10);
    }
  }
  fclose(f);
  printf("library-rss: step=%s rss_kb=%ld anon_kb=%ld libcrypto_kb=%ld libssl_kb=%ld\n", step, rss,
         anon, crypto, ssl);
  return 0;
}

int main(int argc, char** argv) {
  if (argc < 2) {
    fprintf(stderr, "usage: library-rss LIB...\n");
    return 2;
  }
  if (report("start") != 0) {
    return 1;
  }
  for (int i = 1; i < argc; ++i) {
    void* h = dlopen(argv[i], RTLD_NOW | RTLD_GLOBAL);
    if (h == NULL) {
      fprintf(stderr, "library-rss: %s\n", dlerror());
      return 1;
    }
    if (strstr(argv[i], "libgrpc.so") != NULL) {
      void (*init)(void) = (void (*)(void))dlsym(h, "grpc_init");
      if (init == NULL) {
        fprintf(stderr, "library-rss: %s has no grpc_init\n", argv[i]);
        return 1;
      }
      init();
    }
    if (report(argv[i]) != 0) {
      return 1;
    }
  }
  return 0;
}
