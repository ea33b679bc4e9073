// SPDX-License-Identifier: Apache-2.0
#include "cpu_copies.h"

#include <algorithm>
#include <cerrno>
#include <fstream>
#include <sstream>
#include <string>

#include "colod/policy/tier.h"

namespace colod::collect::detail {

Result<uint32_t> parseCpuListEnd(std::string_view list) {
  // The kernel's list format, as cpuset files hold it: policy's parser (pure) reads both.
  auto cpus = policy::parseCpuList(list);
  if (!cpus) {
    return std::move(cpus).error();
  }
  if (cpus->empty()) {
    return COLOD_ERR(EINVAL, "empty CPU list");
  }
  return static_cast<uint32_t>(*std::max_element(cpus->begin(), cpus->end())) + 1;
}

Result<uint32_t> presentCpuEnd(std::string_view sysfs_cpu) {
  const std::string path = std::string(sysfs_cpu) + "/present";
  std::ifstream in(path);
  if (!in) {
    return COLOD_ERR(errno != 0 ? errno : ENOENT, "reading ", path);
  }
  std::stringstream text;
  text << in.rdbuf();
  auto end = parseCpuListEnd(text.str());
  if (!end) {
    return std::move(end).error().wrap(path);
  }
  return end;
}

uint32_t schedCopies(const Result<uint32_t>& present, uint32_t possible) {
  const uint32_t all = std::max<uint32_t>(possible, 1);
  if (!present) {
    return all;
  }
  return std::clamp<uint32_t>(*present, 1, all);
}

}  // namespace colod::collect::detail
