// SPDX-License-Identifier: Apache-2.0
#include "colod/daemon/cgroup_discovery.h"

#include <sys/stat.h>

#include <algorithm>
#include <array>
#include <cerrno>

#include "colod/cgroup/cgroup.h"

namespace colod::daemon {

std::string_view podQosName(PodQos qos) {
  switch (qos) {
    case PodQos::Guaranteed:
      return "guaranteed";
    case PodQos::Burstable:
      return "burstable";
    case PodQos::BestEffort:
      return "besteffort";
  }
  return "besteffort";
}

namespace {

std::vector<std::string_view> splitPath(std::string_view rel) {
  std::vector<std::string_view> parts;
  while (!rel.empty()) {
    const std::size_t slash = rel.find('/');
    const std::string_view part = rel.substr(0, slash);
    if (!part.empty()) {
      parts.push_back(part);
    }
    if (slash == std::string_view::npos) {
      break;
    }
    rel.remove_prefix(slash + 1);
  }
  return parts;
}

std::string joinPath(const std::vector<std::string_view>& parts, std::size_t from, std::size_t to) {
  std::string out;
  for (std::size_t i = from; i < to; ++i) {
    out += "/";
    out += parts[i];
  }
  return out;
}

// Container ids are hex (containerd, CRI-O and docker: 64 characters; 12 is the shortest
// anything prints).
bool isContainerId(std::string_view s) {
  return s.size() >= 12 && s.size() <= 64 && std::all_of(s.begin(), s.end(), [](char c) {
           return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f');
         });
}

// The runtimes whose scopes are containers. CRI-O's "crio-conmon-<id>.scope" (the monitor
// process) is not one of them.
constexpr std::array<std::string_view, 3> kScopePrefixes = {"cri-containerd", "crio", "docker"};

// A pod uid as the API writes it: hex and dashes (systemd escapes the dashes as underscores).
bool isPodUid(std::string_view s) {
  return !s.empty() && s.size() <= 64 && std::all_of(s.begin(), s.end(), [](char c) {
    return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || c == '-';
  });
}

std::optional<KubepodsContainer> parseCgroupfs(const std::vector<std::string_view>& parts,
                                               std::size_t k) {
  // parts[k] == "kubepods"
  std::size_t j = k + 1;
  KubepodsContainer c;
  c.qos = PodQos::Guaranteed;
  if (j < parts.size() && parts[j] == "burstable") {
    c.qos = PodQos::Burstable;
    ++j;
  } else if (j < parts.size() && parts[j] == "besteffort") {
    c.qos = PodQos::BestEffort;
    ++j;
  }
  if (parts.size() != j + 2 || !parts[j].starts_with("pod")) {
    return std::nullopt;
  }
  c.pod_uid = std::string(parts[j].substr(3));
  std::string_view ctr = parts[j + 1];
  // CRI-O under the cgroupfs driver names the directory "crio-<id>"; containerd and docker use
  // the bare id.
  if (ctr.starts_with("crio-")) {
    c.runtime = "crio";
    ctr.remove_prefix(5);
  }
  if (!isPodUid(c.pod_uid) || !isContainerId(ctr)) {
    return std::nullopt;
  }
  c.id = std::string(ctr);
  c.prefix = joinPath(parts, 0, k);
  c.pod_cgroup = joinPath(parts, 0, j + 1);
  c.rel = joinPath(parts, 0, parts.size());
  return c;
}

std::optional<KubepodsContainer> parseSystemd(const std::vector<std::string_view>& parts,
                                              std::size_t k) {
  // parts[k] == "kubepods.slice"
  std::size_t j = k + 1;
  KubepodsContainer c;
  c.systemd = true;
  c.qos = PodQos::Guaranteed;
  std::string stem = "kubepods";
  if (j < parts.size() && parts[j] == "kubepods-burstable.slice") {
    c.qos = PodQos::Burstable;
    stem = "kubepods-burstable";
    ++j;
  } else if (j < parts.size() && parts[j] == "kubepods-besteffort.slice") {
    c.qos = PodQos::BestEffort;
    stem = "kubepods-besteffort";
    ++j;
  }
  if (parts.size() != j + 2) {
    return std::nullopt;
  }
  const std::string_view pod = parts[j];
  const std::string lead = stem + "-pod";
  if (!pod.starts_with(lead) || !pod.ends_with(".slice")) {
    return std::nullopt;
  }
  std::string uid(pod.substr(lead.size(), pod.size() - lead.size() - 6));
  std::replace(uid.begin(), uid.end(), '_', '-');
  std::string_view scope = parts[j + 1];
  if (!scope.ends_with(".scope")) {
    return std::nullopt;
  }
  scope.remove_suffix(6);
  const std::size_t dash = scope.rfind('-');
  if (dash == std::string_view::npos) {
    return std::nullopt;
  }
  const std::string_view runtime = scope.substr(0, dash);
  const std::string_view id = scope.substr(dash + 1);
  if (std::find(kScopePrefixes.begin(), kScopePrefixes.end(), runtime) == kScopePrefixes.end() ||
      !isPodUid(uid) || !isContainerId(id)) {
    return std::nullopt;
  }
  c.id = std::string(id);
  c.runtime = std::string(runtime);
  c.pod_uid = std::move(uid);
  c.pod_slice = std::string(pod);
  c.prefix = joinPath(parts, 0, k);
  c.pod_cgroup = joinPath(parts, 0, j + 1);
  c.rel = joinPath(parts, 0, parts.size());
  return c;
}

}  // namespace

std::optional<KubepodsContainer> parseKubepodsPath(std::string_view rel) {
  const auto parts = splitPath(rel);
  for (std::size_t k = 0; k < parts.size(); ++k) {
    if (parts[k] == "." || parts[k] == "..") {
      return std::nullopt;
    }
  }
  for (std::size_t k = 0; k < parts.size(); ++k) {
    if (parts[k] == "kubepods") {
      return parseCgroupfs(parts, k);
    }
    if (parts[k] == "kubepods.slice") {
      return parseSystemd(parts, k);
    }
  }
  return std::nullopt;
}

std::string runtimeCgroupsPath(const KubepodsContainer& c) {
  if (c.systemd) {
    return c.pod_slice + ":" + c.runtime + ":" + c.id;
  }
  return c.rel;
}

Result<std::vector<KubepodsContainer>> discoverKubepods(const DiscoveryOptions& options) {
  std::vector<KubepodsContainer> out;
  std::size_t walked = 0;
  for (const char* top : {"/kubepods", "/kubepods.slice"}) {
    const std::string base_rel = options.prefix + top;
    const std::string dir = cgroup::joinRel(options.hierarchy_root, base_rel);
    struct stat st {};
    if (::stat(dir.c_str(), &st) != 0) {
      const int err = errno;
      if (err == ENOENT || err == ENOTDIR) {
        continue;  // this layout is not used here
      }
      return COLOD_ERR(err, "stat ", dir);
    }
    if (walked >= options.max_cgroups) {
      return COLOD_ERR(E2BIG, "more than ", options.max_cgroups, " cgroups under kubepods");
    }
    auto entries = cgroup::listCgroups(dir, options.max_cgroups - walked);
    if (!entries) {
      return std::move(entries).error().wrap("listing " + dir);
    }
    walked += entries->size();
    for (const auto& e : *entries) {
      auto c = parseKubepodsPath(base_rel + (e.rel == "/" ? std::string() : e.rel));
      if (c) {
        c->cgroup_id = e.id;
        out.push_back(std::move(*c));
      }
    }
  }
  std::sort(out.begin(), out.end(),
            [](const KubepodsContainer& a, const KubepodsContainer& b) { return a.id < b.id; });
  return out;
}

std::shared_ptr<const nri::RegistrySnapshot> discoveredRegistry(
    const std::vector<KubepodsContainer>& containers, uint64_t generation) {
  auto snap = std::make_shared<nri::RegistrySnapshot>();
  snap->generation = generation;
  snap->synchronized = false;
  for (const auto& c : containers) {
    const std::string pod_id = "kubepods:" + c.pod_uid;
    if (snap->pods.find(pod_id) == snap->pods.end()) {
      auto pod = std::make_shared<nri::PodSandbox>();
      pod->id = pod_id;
      pod->uid = c.pod_uid;
      pod->name = c.pod_uid;
      // The namespace is not in the cgroup tree: the source is named instead.
      pod->namespace_name = "kubepods";
      // The tier classifier reads the QoS class from the pod's cgroup parent.
      pod->cgroup_parent = c.pod_cgroup;
      pod->state = nri::PodState::Running;
      std::shared_ptr<const nri::PodSandbox> frozen = std::move(pod);
      snap->pods.emplace(frozen->id, frozen);
    }
    if (snap->containers.find(c.id) != snap->containers.end()) {
      continue;  // the same id in both layouts: keep the first
    }
    auto ctr = std::make_shared<nri::Container>();
    ctr->id = c.id;
    ctr->pod_sandbox_id = pod_id;
    ctr->name = c.id.substr(0, 12);
    ctr->state = nri::ContainerState::Running;
    ctr->cgroups_path = runtimeCgroupsPath(c);
    ctr->labels.insert_or_assign("colod.io/source", "cgroup");
    std::shared_ptr<const nri::Container> frozen = std::move(ctr);
    snap->containers.emplace(frozen->id, frozen);
  }
  return snap;
}

RegistrySource::Choice RegistrySource::choose(std::shared_ptr<const nri::RegistrySnapshot> runtime,
                                              const DiscoveryOptions& options,
                                              bool rescan) {
  Choice out;
  if (runtime && runtime->synchronized) {
    runtime_seen_ = true;
  }
  if (runtime_seen_) {
    if (discovered_) {
      out.note = "nri: the runtime synchronized; its view replaces the " +
                 std::to_string(last_.size()) + " containers listed from the cgroup tree";
      discovered_.reset();
      last_.clear();
    }
    out.snapshot = std::move(runtime);
    return out;
  }
  if (rescan || !discovered_) {
    auto found = scan_(options);
    if (!found) {
      const std::string why = found.error().message();
      if (why != last_error_) {
        out.note = "cgroup discovery: cannot list the kubepods tree under " +
                   options.hierarchy_root + options.prefix + ": " + why +
                   " (logged again when this changes)";
        last_error_ = why;
      }
    } else {
      if (!last_error_.empty()) {
        out.note = "cgroup discovery: listing the kubepods tree works again";
        last_error_.clear();
      }
      if (!discovered_ || *found != last_) {
        last_ = std::move(found).value();
        discovered_ = discoveredRegistry(last_, kDiscoveredGeneration | ++scans_);
      }
      if (!announced_) {
        announced_ = true;
        out.note = "no runtime over NRI yet: " + std::to_string(last_.size()) +
                   " containers listed from the kubepods cgroup tree under " +
                   options.hierarchy_root + options.prefix +
                   " (observe-only; the runtime's view replaces them once it synchronizes)";
      }
    }
  }
  if (!discovered_) {
    discovered_ = discoveredRegistry({}, kDiscoveredGeneration);
  }
  out.snapshot = discovered_;
  out.discovered = true;
  return out;
}

}  // namespace colod::daemon
