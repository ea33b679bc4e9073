// SPDX-License-Identifier: Apache-2.0
// Production-shaped NRI objects (docs realistic-nri-objects.md): a pod ~1.2 KB, a container
// ~3.2 KB; 100 pods + 1000 containers ~3.3 MB in one SynchronizeRequest.
#pragma once

#include <string>
#include <vector>

#include "nri/proto/api.pb.h"

namespace colod::nri::testing {

::nri::pkg::api::v1alpha1::PodSandbox realisticPod(int i);
::nri::pkg::api::v1alpha1::Container realisticContainer(int i,
                                                        const ::nri::pkg::api::v1alpha1::PodSandbox& pod);
// `pods` pods with `per_pod` containers each.
void realisticNode(int pods,
                   int per_pod,
                   std::vector<::nri::pkg::api::v1alpha1::PodSandbox>& out_pods,
                   std::vector<::nri::pkg::api::v1alpha1::Container>& out_ctrs);

}  // namespace colod::nri::testing
