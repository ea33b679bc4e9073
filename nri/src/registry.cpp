// SPDX-License-Identifier: Apache-2.0
#include "colod/nri/registry.h"

#include <utility>

namespace colod::nri {

const PodSandbox* RegistrySnapshot::pod(std::string_view id) const {
  auto it = pods.find(id);
  return it == pods.end() ? nullptr : it->second.get();
}

const Container* RegistrySnapshot::container(std::string_view id) const {
  auto it = containers.find(id);
  return it == containers.end() ? nullptr : it->second.get();
}

std::vector<const Container*> RegistrySnapshot::containersOfPod(std::string_view pod_id) const {
  std::vector<const Container*> out;
  for (const auto& [id, c] : containers) {
    if (c->pod_sandbox_id == pod_id) {
      out.push_back(c.get());
    }
  }
  return out;
}

void mergeResources(LinuxResources& into, const LinuxResources& u) {
  auto set = [](auto& dst, const auto& src) {
    if (src) {
      dst = src;
    }
  };
  set(into.memory.limit, u.memory.limit);
  set(into.memory.reservation, u.memory.reservation);
  set(into.memory.swap, u.memory.swap);
  set(into.memory.kernel, u.memory.kernel);
  set(into.memory.kernel_tcp, u.memory.kernel_tcp);
  set(into.memory.swappiness, u.memory.swappiness);
  set(into.memory.disable_oom_killer, u.memory.disable_oom_killer);
  set(into.memory.use_hierarchy, u.memory.use_hierarchy);
  set(into.cpu.shares, u.cpu.shares);
  set(into.cpu.quota, u.cpu.quota);
  set(into.cpu.period, u.cpu.period);
  set(into.cpu.realtime_runtime, u.cpu.realtime_runtime);
  set(into.cpu.realtime_period, u.cpu.realtime_period);
  // cpus/mems are plain strings: empty = unchanged (brief §3.5).
  if (!u.cpu.cpus.empty()) {
    into.cpu.cpus = u.cpu.cpus;
  }
  if (!u.cpu.mems.empty()) {
    into.cpu.mems = u.cpu.mems;
  }
  if (!u.hugepage_limits.empty()) {
    into.hugepage_limits = u.hugepage_limits;
  }
  set(into.blockio_class, u.blockio_class);
  set(into.rdt_class, u.rdt_class);
  for (const auto& [k, v] : u.unified) {
    into.unified.insert_or_assign(k, v);
  }
  set(into.pids_limit, u.pids_limit);
}

namespace {
// Stores `v` under its own id: inserts, or replaces the entry and re-points its key at the new
// object's id (the old object, whose id the key viewed, may be freed with the assignment).
template <typename T>
void put(ById<T>& map, std::shared_ptr<const T> v) {
  const std::string_view key = v->id;
  auto [it, inserted] = map.try_emplace(key, v);
  if (inserted) {
    return;
  }
  auto node = map.extract(it);
  node.mapped() = std::move(v);
  node.key() = node.mapped()->id;
  map.insert(std::move(node));
}

void keepKeys(StringMap& labels, StringMap& annotations, const RegistryOptions& options) {
  if (options.keep_key == nullptr) {
    return;
  }
  for (StringMap* map : {&labels, &annotations}) {
    StringMap kept = map->filtered(options.keep_key);
    // Swapped, not move-assigned: libstdc++ move-assigns a short string by copying it into the
    // target's buffer, which would keep the whole text of the dropped keys.
    std::swap(*map, kept);
  }
}

std::shared_ptr<const Container> slim(Container c, const RegistryOptions& options) {
  // colod never reads args/env; dropping them keeps the registry's footprint small.
  std::vector<std::string>().swap(c.args);
  std::vector<std::string>().swap(c.env);
  keepKeys(c.labels, c.annotations, options);
  return std::make_shared<const Container>(std::move(c));
}

std::shared_ptr<const PodSandbox> slim(PodSandbox p, const RegistryOptions& options) {
  keepKeys(p.labels, p.annotations, options);
  return std::make_shared<const PodSandbox>(std::move(p));
}
}  // namespace

Registry::Registry(RegistryOptions options) : options_(options) {}

void Registry::bumpLocked() {
  ++generation_;
  cached_.reset();
}

void Registry::reset(std::vector<PodSandbox> pods, std::vector<Container> containers) {
  auto old = replace(std::move(pods), std::move(containers));
  markSynchronized();
  // `old` (the previous content) is freed here, outside the lock.
}

namespace {
struct OldContent {
  ById<PodSandbox> pods;
  ById<Container> containers;
  std::shared_ptr<const RegistrySnapshot> snapshot;
};
}  // namespace

std::shared_ptr<void> Registry::replace(std::vector<PodSandbox> pods,
                                        std::vector<Container> containers) {
  decltype(pods_) new_pods;
  decltype(containers_) new_ctrs;
  uint64_t dropped = 0;
  for (auto& p : pods) {
    if (new_pods.size() >= options_.max_pods) {
      ++dropped;
      continue;
    }
    put(new_pods, slim(std::move(p), options_));  // a later duplicate wins
  }
  for (auto& c : containers) {
    if (new_ctrs.size() >= options_.max_containers) {
      ++dropped;
      continue;
    }
    put(new_ctrs, slim(std::move(c), options_));
  }
  auto old = std::make_shared<OldContent>();
  {
    std::lock_guard lock(mu_);
    old->pods.swap(pods_);
    old->containers.swap(containers_);
    old->snapshot = std::move(cached_);
    pods_.swap(new_pods);
    containers_.swap(new_ctrs);
    dropped_ += dropped;
    bumpLocked();
  }
  return old;
}

void Registry::markSynchronized() {
  std::lock_guard lock(mu_);
  if (!synchronized_) {
    synchronized_ = true;
    bumpLocked();
  }
}

void Registry::setPodState(std::string_view id, PodState state) {
  std::lock_guard lock(mu_);
  auto it = pods_.find(id);
  if (it == pods_.end() || it->second->state == state) {
    return;
  }
  auto p = std::make_shared<PodSandbox>(*it->second);
  p->state = state;
  put(pods_, std::shared_ptr<const PodSandbox>(std::move(p)));
  bumpLocked();
}

void Registry::markUnsynchronized() {
  std::lock_guard lock(mu_);
  if (synchronized_) {
    synchronized_ = false;
    bumpLocked();
  }
}

void Registry::upsertPod(PodSandbox pod) {
  auto p = slim(std::move(pod), options_);
  std::lock_guard lock(mu_);
  auto it = pods_.find(p->id);
  if (it == pods_.end() && pods_.size() >= options_.max_pods) {
    ++dropped_;
    bumpLocked();  // the drop counter is part of the snapshot
    return;
  }
  put(pods_, std::move(p));
  bumpLocked();
}

void Registry::removePod(std::string_view id) {
  std::lock_guard lock(mu_);
  auto it = pods_.find(id);
  if (it != pods_.end()) {
    pods_.erase(it);
  }
  std::erase_if(containers_, [&](const auto& kv) { return kv.second->pod_sandbox_id == id; });
  bumpLocked();
}

void Registry::upsertContainer(Container ctr) {
  auto c = slim(std::move(ctr), options_);
  std::lock_guard lock(mu_);
  auto it = containers_.find(c->id);
  if (it == containers_.end() && containers_.size() >= options_.max_containers) {
    ++dropped_;
    bumpLocked();  // the drop counter is part of the snapshot
    return;
  }
  put(containers_, std::move(c));
  bumpLocked();
}

void Registry::setContainerState(std::string_view id, ContainerState state) {
  std::lock_guard lock(mu_);
  auto it = containers_.find(id);
  if (it == containers_.end() || it->second->state == state) {
    return;
  }
  auto copy = std::make_shared<Container>(*it->second);
  copy->state = state;
  put(containers_, std::shared_ptr<const Container>(std::move(copy)));
  bumpLocked();
}

void Registry::removeContainer(std::string_view id) {
  std::lock_guard lock(mu_);
  auto it = containers_.find(id);
  if (it != containers_.end()) {
    containers_.erase(it);
    bumpLocked();
  }
}

void Registry::applyUpdate(const ContainerUpdate& update) {
  std::lock_guard lock(mu_);
  auto it = containers_.find(update.container_id);
  if (it == containers_.end()) {
    return;
  }
  auto copy = std::make_shared<Container>(*it->second);
  mergeResources(copy->resources, update.resources);
  put(containers_, std::shared_ptr<const Container>(std::move(copy)));
  bumpLocked();
}

std::shared_ptr<const RegistrySnapshot> Registry::snapshot() const {
  std::lock_guard lock(mu_);
  if (!cached_) {
    auto s = std::make_shared<RegistrySnapshot>();
    s->generation = generation_;
    s->synchronized = synchronized_;
    s->pods = pods_;
    s->containers = containers_;
    s->dropped = dropped_;
    cached_ = std::move(s);
  }
  return cached_;
}

uint64_t Registry::generation() const {
  std::lock_guard lock(mu_);
  return generation_;
}

}  // namespace colod::nri
