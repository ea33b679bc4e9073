// SPDX-License-Identifier: Apache-2.0
// Privileged tests: real BPF, real cgroups (written below).
#include <gtest/gtest.h>
