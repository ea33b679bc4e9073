// SPDX-License-Identifier: Apache-2.0
// proto/: the NRI message codec, plugin side. The only code that knows protobuf; everything
// above it sees the plain structs of types.h. Decoders are bounds-checked (protobuf's parser or
// our own, see below) and return EPROTO for malformed input; unknown fields are skipped.
#pragma once

#include <cstddef>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "colod/base/result.h"
#include "colod/nri/ownership.h"
#include "colod/nri/types.h"

namespace colod::nri::codec {

using Bytes = std::vector<std::byte>;

inline constexpr const char* kRuntimeService = "nri.pkg.api.v1alpha1.Runtime";
inline constexpr const char* kPluginService = "nri.pkg.api.v1alpha1.Plugin";

// --- plugin -> runtime requests, runtime replies
Bytes encodeRegisterPlugin(const std::string& name, const std::string& idx,
                           const std::string& nri_version);
Bytes encodeUpdateContainers(const std::vector<ContainerUpdate>& updates);
// Ids of the failed updates a (non-Go) runtime may return; Go runtimes never send it.
Result<std::vector<std::string>> decodeUpdateContainersResponse(std::span<const std::byte> in);

// What the hot-path decoders materialise. Containers' args and env are the only bulky fields the
// plain structs mirror that colod never reads; the registry drops them anyway.
struct DecodeOptions {
  bool args_env = true;
};

// --- runtime -> plugin requests, our replies. Synchronize and the event requests are decoded by
// a hand-written bounds-first decoder (src/codec_fast.cpp) that skips the fields types.h does not
// mirror; it accepts everything protobuf accepts and yields the same structs.
Result<ConfigureRequest> decodeConfigureRequest(std::span<const std::byte> in);
Bytes encodeConfigureResponse(EventMask events);
Result<SynchronizeRequest> decodeSynchronizeRequest(std::span<const std::byte> in,
                                                    const DecodeOptions& opts = {});
Bytes encodeSynchronizeResponse(const std::vector<ContainerUpdate>& updates, bool more);

struct PodEvent {
  PodSandbox pod{};
};
struct ContainerEvent {
  PodSandbox pod{};
  Container container{};
};
struct UpdateContainerEvent {
  PodSandbox pod{};
  Container container{};
  LinuxResources requested{};
};
struct StateChange {
  Event event = Event::Unknown;
  PodSandbox pod{};
  std::optional<Container> container{};
};
// RunPodSandbox / StopPodSandbox / RemovePodSandbox / PostUpdatePodSandbox requests ({1: pod}).
Result<PodEvent> decodePodEvent(std::span<const std::byte> in);
// CreateContainer, StopContainer and every {1: pod, 2: container} request.
Result<ContainerEvent> decodeContainerEvent(std::span<const std::byte> in,
                                            const DecodeOptions& opts = {});
Result<UpdateContainerEvent> decodeUpdateContainerRequest(std::span<const std::byte> in);
Result<StateChange> decodeStateChange(std::span<const std::byte> in);

Bytes encodeCreateContainerResponse(const CreateContainerResult& result);
// UpdateContainerResponse and StopContainerResponse share the shape {1: repeated update}.
Bytes encodeUpdatesResponse(const std::vector<ContainerUpdate>& updates);
// ValidateContainerAdjustment (v0.10+): the container being created and the field owners the
// runtime reports (the request's owners map, one entry per container it covers).
struct ValidateRequest {
  std::string container_id{};
  std::vector<ContainerOwners> owners{};
  std::vector<std::string> plugins{};  // consulted plugins as "NN-name"
};
Result<ValidateRequest> decodeValidateRequest(std::span<const std::byte> in);
Bytes encodeValidateResponse(bool reject, const std::string& reason);

// Empty and every empty *Response: zero bytes.
inline Bytes encodeEmpty() { return {}; }

}  // namespace colod::nri::codec
