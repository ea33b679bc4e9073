// SPDX-License-Identifier: Apache-2.0
#include "colod/control/names.h"

#include <cerrno>
#include <functional>
#include <vector>

namespace colod::control {

std::string displayName(const v1::Container& c) {
  return c.namespace_() + "/" + c.pod() + "/" + c.name();
}

// The messages are sentences for the operator, sent verbatim to coloctl: no [file:line].
Result<std::size_t> resolveContainer(std::span<const v1::Container> containers,
                                     std::string_view query) {
  if (query.empty()) {
    return Error(EINVAL, "empty container name");
  }
  using Rule = std::function<bool(const v1::Container&)>;
  const std::string q(query);
  const std::vector<Rule> rules = {
      [&](const v1::Container& c) { return displayName(c) == q; },
      [&](const v1::Container& c) { return c.pod() + "/" + c.name() == q; },
      [&](const v1::Container& c) { return c.name() == q; },
      [&](const v1::Container& c) { return c.id() == q; },
      [&](const v1::Container& c) { return q.size() >= 4 && c.id().starts_with(q); },
  };
  for (const auto& rule : rules) {
    std::vector<std::size_t> hits;
    for (std::size_t i = 0; i < containers.size(); ++i) {
      if (rule(containers[i])) {
        hits.push_back(i);
      }
    }
    if (hits.size() == 1) {
      return hits.front();
    }
    if (hits.size() > 1) {
      std::string list;
      for (std::size_t i = 0; i < hits.size() && i < 8; ++i) {
        const auto& c = containers[hits[i]];
        list += (i == 0 ? "" : ", ") + displayName(c) + " (" + c.id().substr(0, 12) + ")";
      }
      if (hits.size() > 8) {
        list += ", ...";
      }
      return Error(EINVAL, detail::concat("container '", query, "' is ambiguous: ", hits.size(),
                                          " match: ", list,
                                          "; use namespace/pod/container or an id prefix"));
    }
  }
  return Error(ENOENT, detail::concat("no container matches '", query,
                                      "' (try namespace/pod/container, pod/container, a name or "
                                      "an id prefix)"));
}

}  // namespace colod::control
