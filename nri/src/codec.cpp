// SPDX-License-Identifier: Apache-2.0
// proto/: converts between protoc's classes for nri/proto/api.proto and the plain structs of
// types.h. Large requests (Synchronize) are parsed on an arena: one allocation region for the
// ~100k sub-objects of a 3.3 MB message, released at once.
#include "colod/nri/codec.h"

#include <google/protobuf/arena.h>

#include <cerrno>

#include "codec_internal.h"
#include "nri/proto/api.pb.h"

namespace colod::nri::codec {

namespace pb = ::nri::pkg::api::v1alpha1;

namespace {

template <typename Msg>
bool parse(Msg& msg, std::span<const std::byte> in) {
  if (in.size() > static_cast<std::size_t>(INT32_MAX)) {
    return false;
  }
  return msg.ParseFromArray(in.data(), static_cast<int>(in.size()));
}

template <typename Msg>
Bytes serialize(const Msg& msg) {
  Bytes out(msg.ByteSizeLong());
  if (!out.empty()) {
    msg.SerializeWithCachedSizesToArray(reinterpret_cast<uint8_t*>(out.data()));  // NOLINT
  }
  return out;
}

void fromEntries(StringMap& out,
                 const google::protobuf::RepeatedPtrField<pb::StringEntry>& entries) {
  // Map semantics: a later duplicate key wins (protobuf's rule for map fields); appended in wire
  // order and sorted once (O(n log n) for any input).
  for (const auto& e : entries) {
    out.append(e.key(), e.value());
  }
  out.normalize();
}

template <typename Map>
void toEntries(google::protobuf::RepeatedPtrField<pb::StringEntry>& out, const Map& in) {
  for (const auto& [k, v] : in) {
    auto* e = out.Add();
    e->set_key(k.data(), k.size());
    e->set_value(v.data(), v.size());
  }
}

LinuxResources fromProto(const pb::LinuxResources& r) {
  LinuxResources out;
  if (r.has_memory()) {
    const auto& m = r.memory();
    if (m.has_limit()) out.memory.limit = m.limit().value();
    if (m.has_reservation()) out.memory.reservation = m.reservation().value();
    if (m.has_swap()) out.memory.swap = m.swap().value();
    if (m.has_kernel()) out.memory.kernel = m.kernel().value();
    if (m.has_kernel_tcp()) out.memory.kernel_tcp = m.kernel_tcp().value();
    if (m.has_swappiness()) out.memory.swappiness = m.swappiness().value();
    if (m.has_disable_oom_killer()) out.memory.disable_oom_killer = m.disable_oom_killer().value();
    if (m.has_use_hierarchy()) out.memory.use_hierarchy = m.use_hierarchy().value();
  }
  if (r.has_cpu()) {
    const auto& c = r.cpu();
    if (c.has_shares()) out.cpu.shares = c.shares().value();
    if (c.has_quota()) out.cpu.quota = c.quota().value();
    if (c.has_period()) out.cpu.period = c.period().value();
    if (c.has_realtime_runtime()) out.cpu.realtime_runtime = c.realtime_runtime().value();
    if (c.has_realtime_period()) out.cpu.realtime_period = c.realtime_period().value();
    out.cpu.cpus = c.cpus();
    out.cpu.mems = c.mems();
  }
  for (const auto& h : r.hugepage_limits()) {
    out.hugepage_limits.push_back({h.page_size(), h.limit()});
  }
  if (r.has_blockio_class()) out.blockio_class = r.blockio_class().value();
  if (r.has_rdt_class()) out.rdt_class = r.rdt_class().value();
  fromEntries(out.unified, r.unified());
  if (r.has_pids()) out.pids_limit = r.pids().limit();
  return out;
}

void toProto(pb::LinuxResources& out, const LinuxResources& r) {
  const auto& m = r.memory;
  if (m != MemoryResources{}) {
    auto* pm = out.mutable_memory();
    if (m.limit) pm->mutable_limit()->set_value(*m.limit);
    if (m.reservation) pm->mutable_reservation()->set_value(*m.reservation);
    if (m.swap) pm->mutable_swap()->set_value(*m.swap);
    if (m.kernel) pm->mutable_kernel()->set_value(*m.kernel);
    if (m.kernel_tcp) pm->mutable_kernel_tcp()->set_value(*m.kernel_tcp);
    if (m.swappiness) pm->mutable_swappiness()->set_value(*m.swappiness);
    if (m.disable_oom_killer) pm->mutable_disable_oom_killer()->set_value(*m.disable_oom_killer);
    if (m.use_hierarchy) pm->mutable_use_hierarchy()->set_value(*m.use_hierarchy);
  }
  const auto& c = r.cpu;
  if (c != CpuResources{}) {
    auto* pc = out.mutable_cpu();
    if (c.shares) pc->mutable_shares()->set_value(*c.shares);
    if (c.quota) pc->mutable_quota()->set_value(*c.quota);
    if (c.period) pc->mutable_period()->set_value(*c.period);
    if (c.realtime_runtime) pc->mutable_realtime_runtime()->set_value(*c.realtime_runtime);
    if (c.realtime_period) pc->mutable_realtime_period()->set_value(*c.realtime_period);
    pc->set_cpus(c.cpus);
    pc->set_mems(c.mems);
  }
  for (const auto& h : r.hugepage_limits) {
    auto* ph = out.add_hugepage_limits();
    ph->set_page_size(h.page_size);
    ph->set_limit(h.limit);
  }
  if (r.blockio_class) out.mutable_blockio_class()->set_value(*r.blockio_class);
  if (r.rdt_class) out.mutable_rdt_class()->set_value(*r.rdt_class);
  toEntries(*out.mutable_unified(), r.unified);
  if (r.pids_limit) out.mutable_pids()->set_limit(*r.pids_limit);
}

PodSandbox fromProto(const pb::PodSandbox& p) {
  PodSandbox out;
  out.id = p.id();
  out.name = p.name();
  out.uid = p.uid();
  out.namespace_name = p.namespace_();
  fromEntries(out.labels, p.labels());
  fromEntries(out.annotations, p.annotations());
  out.runtime_handler = p.runtime_handler();
  out.pid = p.pid();
  out.ips.assign(p.ips().begin(), p.ips().end());
  if (p.has_linux()) {
    const auto& l = p.linux();
    out.cgroup_parent = l.cgroup_parent();
    out.cgroups_path = l.cgroups_path();
    if (l.has_pod_resources()) out.pod_resources = fromProto(l.pod_resources());
    if (l.has_pod_overhead()) out.pod_overhead = fromProto(l.pod_overhead());
    if (l.has_resources()) out.resources = fromProto(l.resources());
  }
  return out;
}

ContainerState stateFrom(int v) {
  return v >= 0 && v <= 4 ? static_cast<ContainerState>(v) : ContainerState::Unknown;
}

Container fromProto(const pb::Container& c) {
  Container out;
  out.id = c.id();
  out.pod_sandbox_id = c.pod_sandbox_id();
  out.name = c.name();
  out.state = stateFrom(c.state());
  fromEntries(out.labels, c.labels());
  fromEntries(out.annotations, c.annotations());
  out.args.assign(c.args().begin(), c.args().end());
  out.env.assign(c.env().begin(), c.env().end());
  out.pid = c.pid();
  if (c.has_linux()) {
    const auto& l = c.linux();
    out.cgroups_path = l.cgroups_path();
    if (l.has_resources()) out.resources = fromProto(l.resources());
    if (l.has_oom_score_adj()) out.oom_score_adj = l.oom_score_adj().value();
  }
  return out;
}

void toProto(pb::ContainerUpdate& out, const ContainerUpdate& u) {
  out.set_container_id(u.container_id);
  toProto(*out.mutable_linux()->mutable_resources(), u.resources);
  out.set_ignore_failure(u.ignore_failure);
}

template <typename Field>
void addUpdates(Field& field, const std::vector<ContainerUpdate>& updates) {
  field.Reserve(static_cast<int>(updates.size()));
  for (const auto& u : updates) {
    toProto(*field.Add(), u);
  }
}

Error malformed(const char* what) { return COLOD_ERR(EPROTO, "malformed ", what); }

}  // namespace

Bytes encodeRegisterPlugin(const std::string& name, const std::string& idx,
                           const std::string& nri_version) {
  pb::RegisterPluginRequest m;
  m.set_plugin_name(name);
  m.set_plugin_idx(idx);
  m.set_nri_version(nri_version);
  return serialize(m);
}

Bytes encodeUpdateContainers(const std::vector<ContainerUpdate>& updates) {
  pb::UpdateContainersRequest m;
  addUpdates(*m.mutable_update(), updates);
  return serialize(m);
}

Result<std::vector<std::string>> decodeUpdateContainersResponse(std::span<const std::byte> in) {
  pb::UpdateContainersResponse m;
  if (!parse(m, in)) {
    return malformed("UpdateContainersResponse");
  }
  std::vector<std::string> ids;
  for (const auto& u : m.failed()) {
    ids.push_back(u.container_id());
  }
  return ids;
}

Result<ConfigureRequest> decodeConfigureRequest(std::span<const std::byte> in) {
  pb::ConfigureRequest m;
  if (!parse(m, in)) {
    return malformed("ConfigureRequest");
  }
  return ConfigureRequest{.config = m.config(),
                          .runtime_name = m.runtime_name(),
                          .runtime_version = m.runtime_version(),
                          .registration_timeout_ms = m.registration_timeout(),
                          .request_timeout_ms = m.request_timeout(),
                          .nri_version = m.nri_version()};
}

Bytes encodeConfigureResponse(EventMask events) {
  pb::ConfigureResponse m;
  m.set_events(static_cast<int32_t>(events));
  return serialize(m);
}

Result<SynchronizeRequest> reference::decodeSynchronizeRequest(std::span<const std::byte> in) {
  google::protobuf::ArenaOptions opts;
  opts.start_block_size = 1 << 16;
  opts.max_block_size = 1 << 22;
  google::protobuf::Arena arena(opts);
  auto* m = google::protobuf::Arena::CreateMessage<pb::SynchronizeRequest>(&arena);
  if (!parse(*m, in)) {
    return malformed("SynchronizeRequest");
  }
  SynchronizeRequest out;
  out.more = m->more();
  out.pods.reserve(static_cast<std::size_t>(m->pods_size()));
  for (const auto& p : m->pods()) {
    out.pods.push_back(fromProto(p));
  }
  out.containers.reserve(static_cast<std::size_t>(m->containers_size()));
  for (const auto& c : m->containers()) {
    out.containers.push_back(fromProto(c));
  }
  return out;
}

Bytes encodeSynchronizeResponse(const std::vector<ContainerUpdate>& updates, bool more) {
  pb::SynchronizeResponse m;
  addUpdates(*m.mutable_update(), updates);
  m.set_more(more);
  return serialize(m);
}

Result<PodEvent> reference::decodePodEvent(std::span<const std::byte> in) {
  // Every pod-event request is {1: PodSandbox}; RunPodSandboxRequest describes them all.
  pb::RunPodSandboxRequest m;
  if (!parse(m, in)) {
    return malformed("pod event request");
  }
  return PodEvent{fromProto(m.pod())};
}

Result<ContainerEvent> reference::decodeContainerEvent(std::span<const std::byte> in) {
  // {1: PodSandbox, 2: Container}; unknown extra fields are skipped.
  pb::StartContainerRequest m;
  if (!parse(m, in)) {
    return malformed("container event request");
  }
  return ContainerEvent{fromProto(m.pod()), fromProto(m.container())};
}

Result<UpdateContainerEvent> reference::decodeUpdateContainerRequest(std::span<const std::byte> in) {
  pb::UpdateContainerRequest m;
  if (!parse(m, in)) {
    return malformed("UpdateContainerRequest");
  }
  return UpdateContainerEvent{fromProto(m.pod()), fromProto(m.container()),
                              fromProto(m.linux_resources())};
}

Result<StateChange> reference::decodeStateChange(std::span<const std::byte> in) {
  pb::StateChangeEvent m;
  if (!parse(m, in)) {
    return malformed("StateChangeEvent");
  }
  StateChange out;
  int e = m.event();
  out.event = e >= 1 && e <= 14 ? static_cast<Event>(e) : Event::Unknown;
  out.pod = fromProto(m.pod());
  if (m.has_container()) {
    out.container = fromProto(m.container());
  }
  return out;
}

// --- the hot-path requests go through the hand-written decoder (codec_fast.cpp)
Result<SynchronizeRequest> decodeSynchronizeRequest(std::span<const std::byte> in,
                                                    const DecodeOptions& opts) {
  return fast::decodeSynchronizeRequest(in, opts);
}
Result<PodEvent> decodePodEvent(std::span<const std::byte> in) { return fast::decodePodEvent(in); }
Result<ContainerEvent> decodeContainerEvent(std::span<const std::byte> in,
                                            const DecodeOptions& opts) {
  return fast::decodeContainerEvent(in, opts);
}
Result<UpdateContainerEvent> decodeUpdateContainerRequest(std::span<const std::byte> in) {
  return fast::decodeUpdateContainerRequest(in);
}
Result<StateChange> decodeStateChange(std::span<const std::byte> in) {
  return fast::decodeStateChange(in);
}

Bytes encodeCreateContainerResponse(const CreateContainerResult& result) {
  pb::CreateContainerResponse m;
  const auto& a = result.adjust;
  bool has_adjust = !a.annotations.empty() || !a.env.empty() || a.resources || a.oom_score_adj;
  if (has_adjust) {
    auto* pa = m.mutable_adjust();
    toEntries(*pa->mutable_annotations(), a.annotations);
    for (const auto& [k, v] : a.env) {
      auto* kv = pa->add_env();
      kv->set_key(k);
      kv->set_value(v);
    }
    if (a.resources || a.oom_score_adj) {
      auto* pl = pa->mutable_linux();
      if (a.resources) toProto(*pl->mutable_resources(), *a.resources);
      if (a.oom_score_adj) pl->mutable_oom_score_adj()->set_value(*a.oom_score_adj);
    }
  }
  addUpdates(*m.mutable_update(), result.updates);
  return serialize(m);
}

Bytes encodeUpdatesResponse(const std::vector<ContainerUpdate>& updates) {
  pb::UpdateContainerResponse m;
  addUpdates(*m.mutable_update(), updates);
  return serialize(m);
}

Result<ValidateRequest> decodeValidateRequest(std::span<const std::byte> in) {
  pb::ValidateContainerAdjustmentRequest m;
  if (!parse(m, in)) {
    return malformed("ValidateContainerAdjustmentRequest");
  }
  ValidateRequest out;
  out.container_id = m.container().id();
  for (const auto& e : m.owners().owners()) {
    ContainerOwners o;
    o.container_id = e.key();
    for (const auto& s : e.value().simple()) {
      o.simple[s.key()] = s.value();
    }
    for (const auto& c : e.value().compound()) {
      auto& keys = o.compound[c.key()];
      for (const auto& kv : c.value().owners()) {
        keys[kv.key()] = kv.value();
      }
    }
    out.owners.push_back(std::move(o));
  }
  for (const auto& p : m.plugins()) {
    out.plugins.push_back(p.index() + "-" + p.name());
  }
  return out;
}

Bytes encodeValidateResponse(bool reject, const std::string& reason) {
  pb::ValidateContainerAdjustmentResponse m;
  m.set_reject(reject);
  m.set_reason(reason);
  return serialize(m);
}

}  // namespace colod::nri::codec
