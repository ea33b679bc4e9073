// SPDX-License-Identifier: Apache-2.0
// libFuzzer target over the receive path: mux frames -> ttrpc reassembly -> ttrpc envelope ->
// NRI message decode, plus a differential check of the hand-written hot-path decoder against the
// protobuf reference on every payload (bit 7 of the first byte: Synchronize with args/env). The first input byte picks which NRI decoder the request payloads go to,
// so one corpus covers every message the plugin reads. Must never crash, hang or allocate
// without bound; errors are expected and ignored.
#include <cstddef>
#include <cstdint>
#include <map>
#include <span>
#include <vector>

#include <google/protobuf/stubs/logging.h>

#include <cstdlib>

#include "codec_internal.h"
#include "colod/nri/codec.h"
#include "colod/nri/mux.h"
#include "colod/nri/ttrpc.h"

using namespace colod::nri;

namespace {

// Differential check of the hand-written hot-path decoder against protobuf (codec_internal.h):
// whenever the reference accepts, the fast decoder must accept and agree. A disagreement aborts
// (a fuzzer finding).
void agree(bool ok) {
  if (!ok) {
    std::abort();
  }
}
bool samePod(const PodSandbox& a, const PodSandbox& b) {
  return a.id == b.id && a.name == b.name && a.uid == b.uid && a.namespace_name == b.namespace_name &&
         a.labels == b.labels && a.annotations == b.annotations &&
         a.runtime_handler == b.runtime_handler && a.cgroup_parent == b.cgroup_parent &&
         a.cgroups_path == b.cgroups_path && a.pid == b.pid && a.ips == b.ips &&
         a.pod_resources == b.pod_resources && a.pod_overhead == b.pod_overhead &&
         a.resources == b.resources;
}
bool sameCtr(const Container& a, const Container& b, bool args_env) {
  return a.id == b.id && a.pod_sandbox_id == b.pod_sandbox_id && a.name == b.name &&
         a.state == b.state && a.labels == b.labels && a.annotations == b.annotations &&
         (!args_env || (a.args == b.args && a.env == b.env)) && a.cgroups_path == b.cgroups_path &&
         a.pid == b.pid && a.resources == b.resources && a.oom_score_adj == b.oom_score_adj;
}
void differential(uint8_t which, std::span<const std::byte> p) {
  switch (which % 8) {
    case 1: {
      auto r = codec::reference::decodeSynchronizeRequest(p);
      auto f = codec::fast::decodeSynchronizeRequest(p, {.args_env = (which & 0x80) != 0});
      if (r) {
        agree(f.has_value() && f->more == r->more && f->pods.size() == r->pods.size() &&
              f->containers.size() == r->containers.size());
        for (std::size_t i = 0; i < r->pods.size(); ++i) agree(samePod(r->pods[i], f->pods[i]));
        for (std::size_t i = 0; i < r->containers.size(); ++i) {
          agree(sameCtr(r->containers[i], f->containers[i], (which & 0x80) != 0));
        }
      }
      break;
    }
    case 2: {
      auto r = codec::reference::decodePodEvent(p);
      auto f = codec::fast::decodePodEvent(p);
      if (r) agree(f.has_value() && samePod(r->pod, f->pod));
      break;
    }
    case 3: {
      auto r = codec::reference::decodeContainerEvent(p);
      auto f = codec::fast::decodeContainerEvent(p, {});
      if (r) agree(f.has_value() && samePod(r->pod, f->pod) && sameCtr(r->container, f->container, true));
      break;
    }
    case 4: {
      auto r = codec::reference::decodeUpdateContainerRequest(p);
      auto f = codec::fast::decodeUpdateContainerRequest(p);
      if (r) {
        agree(f.has_value() && samePod(r->pod, f->pod) &&
              sameCtr(r->container, f->container, true) && r->requested == f->requested);
      }
      break;
    }
    case 5: {
      auto r = codec::reference::decodeStateChange(p);
      auto f = codec::fast::decodeStateChange(p);
      if (r) {
        agree(f.has_value() && r->event == f->event && samePod(r->pod, f->pod) &&
              r->container.has_value() == f->container.has_value());
        if (r->container) agree(sameCtr(*r->container, *f->container, true));
      }
      break;
    }
    default:
      break;
  }
}

void decodeAs(uint8_t which, std::span<const std::byte> p) {
  differential(which, p);
  switch (which % 8) {
    case 0: (void)codec::decodeConfigureRequest(p); break;
    case 1: (void)codec::decodeSynchronizeRequest(p); break;
    case 2: (void)codec::decodePodEvent(p); break;
    case 3: (void)codec::decodeContainerEvent(p); break;
    case 4: (void)codec::decodeUpdateContainerRequest(p); break;
    case 5: (void)codec::decodeStateChange(p); break;
    case 6: (void)codec::decodeUpdateContainersResponse(p); break;
    default: (void)wire::decodeResponse(p); break;
  }
}

// The in-place mux decoder (what Mux reads with) must deliver, per conn, exactly the bytes the
// piecewise feed() does, for the same two-read split, and fail where it fails.
void sameAsInPlace(std::span<const std::byte> in, std::size_t split) {
  using Streams = std::map<uint32_t, std::vector<std::byte>>;
  auto run = [&](bool in_place, Streams& out) {
    wire::MuxDecoder mux(1 << 20);
    std::vector<std::byte> copy(in.begin(), in.end());
    std::span<std::byte> all(copy);
    for (auto piece : {all.first(split), all.subspan(split)}) {
      auto sink = [&](uint32_t conn, std::span<const std::byte> p) -> colod::Result<void> {
        out[conn].insert(out[conn].end(), p.begin(), p.end());
        return colod::ok();
      };
      auto r = in_place ? mux.feedInPlace(piece, sink) : mux.feed(piece, sink);
      if (!r) {
        return false;
      }
    }
    return true;
  };
  Streams a;
  Streams b;
  const bool ok_a = run(false, a);
  const bool ok_b = run(true, b);
  agree(ok_a == ok_b && a == b);
}
}  // namespace

// The reference decoder logs every invalid UTF-8 string it rejects; that is expected here.
extern "C" int LLVMFuzzerInitialize(int*, char***) {
  google::protobuf::SetLogHandler(nullptr);
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) {
    return 0;
  }
  const uint8_t which = data[0];
  auto in = std::as_bytes(std::span(data + 1, size - 1));
  // Small limits keep the fuzzer fast while exercising the drain path.
  wire::MuxDecoder mux(1 << 20);
  wire::TtrpcDecoder conn1(1 << 16);
  wire::TtrpcDecoder conn2(1 << 16);
  auto emit = [which](wire::TtrpcMessage&& m) -> colod::Result<void> {
    if (m.oversized) {
      return colod::ok();
    }
    if (m.header.type == 1) {
      auto req = wire::decodeRequest(m.body());
      if (req) {
        decodeAs(which, req->payload);
      }
    } else {
      auto resp = wire::decodeResponse(m.body());
      if (resp) {
        decodeAs(which, resp->payload);
      }
    }
    return colod::ok();
  };
  // Feed in two uneven pieces to exercise reassembly across reads.
  auto split = in.size() / 3;
  for (auto piece : {in.first(split), in.subspan(split)}) {
    auto r = mux.feed(piece, [&](uint32_t conn, std::span<const std::byte> p) -> colod::Result<void> {
      if (conn == 1) {
        return conn1.feed(p, emit);
      }
      if (conn == 2) {
        return conn2.feed(p, emit);
      }
      return colod::ok();
    });
    if (!r) {
      break;
    }
  }
  sameAsInPlace(in, split);
  // The raw bytes as a bare NRI message too.
  decodeAs(which, in);
  return 0;
}
