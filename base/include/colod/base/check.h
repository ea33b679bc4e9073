// SPDX-License-Identifier: Apache-2.0
// COLOD_CHECK: broken invariants abort with file:line (style rule 15c). Never use it on input
// from the kernel, the runtime or the config: those are errors, returned as values.
#pragma once

#include <cstdio>
#include <cstdlib>

#define COLOD_CHECK(cond)                                                          \
  do {                                                                             \
    if (!(cond)) {                                                                 \
      std::fprintf(stderr, "colod: CHECK failed at %s:%d: %s\n", __FILE__, __LINE__, \
                   #cond);                                                         \
      std::abort();                                                                \
    }                                                                              \
  } while (0)
