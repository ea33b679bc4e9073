// SPDX-License-Identifier: Apache-2.0
// proto/, private: the two decoders behind codec.h.
//
// * fast::   hand-written, bounds-first protobuf-wire decoders for the runtime -> plugin event
//            and Synchronize requests (the hot path). They read the fields colod uses straight
//            into the plain structs of types.h and skip everything else (mounts, hooks, devices,
//            rlimits, namespaces, ...) without materialising it: no protobuf objects, no arena.
// * reference:: the protoc-generated classes + conversion (the original codec). Kept as the
//            oracle for the equivalence tests and the fuzzer, and the decoder of every message
//            not on the hot path.
//
// Contract (tested in codec_fast_test.cpp, fuzzed in fuzz/nri_fuzz.cpp): whenever the reference
// decoder accepts an input, the fast decoder accepts it too and yields the same structs (with
// args/env cleared when they were skipped). The fast decoder is more lenient in one respect, the
// same as Go's gogo runtime that containerd uses: it does not validate UTF-8 in strings.
#pragma once

#include <span>

#include "colod/base/result.h"
#include "colod/nri/codec.h"

namespace colod::nri::codec {

namespace fast {
Result<SynchronizeRequest> decodeSynchronizeRequest(std::span<const std::byte> in,
                                                    const DecodeOptions& opts);
Result<PodEvent> decodePodEvent(std::span<const std::byte> in);
Result<ContainerEvent> decodeContainerEvent(std::span<const std::byte> in,
                                            const DecodeOptions& opts);
Result<UpdateContainerEvent> decodeUpdateContainerRequest(std::span<const std::byte> in);
Result<StateChange> decodeStateChange(std::span<const std::byte> in);
}  // namespace fast

namespace reference {
Result<SynchronizeRequest> decodeSynchronizeRequest(std::span<const std::byte> in);
Result<PodEvent> decodePodEvent(std::span<const std::byte> in);
Result<ContainerEvent> decodeContainerEvent(std::span<const std::byte> in);
Result<UpdateContainerEvent> decodeUpdateContainerRequest(std::span<const std::byte> in);
Result<StateChange> decodeStateChange(std::span<const std::byte> in);
}  // namespace reference

}  // namespace colod::nri::codec
