// SPDX-License-Identifier: Apache-2.0
// Resolving what an operator types ("prod/web-0/nginx", "web-0/nginx", "nginx", "3f2a9c") to
// one container. Pure.
#pragma once

#include <span>
#include <string>
#include <string_view>

#include "colod/base/result.h"
#include "control.pb.h"

namespace colod::control {

// "namespace/pod/container" (the display name used everywhere).
std::string displayName(const v1::Container& c);

// Resolution order: exact namespace/pod/container, exact pod/container, exact container name,
// exact id, then id prefix (at least 4 characters). The first rule that matches exactly one
// container wins; a rule matching several is an error listing them.
// Errors: ENOENT when nothing matches; EINVAL when ambiguous (candidates in the message) or the
// query is empty.
Result<std::size_t> resolveContainer(std::span<const v1::Container> containers,
                                     std::string_view query);

}  // namespace colod::control
