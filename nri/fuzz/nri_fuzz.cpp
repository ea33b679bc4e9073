// SPDX-License-Identifier: Apache-2.0
// libFuzzer target over the receive path: mux frames -> ttrpc reassembly -> ttrpc envelope ->
// NRI message decode. The first input byte picks which NRI decoder the request payloads go to,
// so one corpus covers every message the plugin reads. Must never crash, hang or allocate
// without bound; errors are expected and ignored.
#include <cstddef>
#include <cstdint>
#include <span>

#include "colod/nri/codec.h"
#include "colod/nri/mux.h"
#include "colod/nri/ttrpc.h"

using namespace colod::nri;

namespace {
void decodeAs(uint8_t which, std::span<const std::byte> p) {
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
}  // namespace

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
      auto req = wire::decodeRequest(m.body);
      if (req) {
        decodeAs(which, req->payload);
      }
    } else {
      auto resp = wire::decodeResponse(m.body);
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
  // The raw bytes as a bare NRI message too.
  decodeAs(which, in);
  return 0;
}
