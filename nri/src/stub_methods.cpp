// SPDX-License-Identifier: Apache-2.0
// The runtime's calls into the stub: the ttrpc methods of the plugin service, which RPC carries
// which event at each NRI level (StateChange or a dedicated RPC), decoding, the registry kept
// from what the runtime reports, and the plugin's handlers (see stub_impl.h).
#include "stub_impl.h"

namespace colod::nri::stub_internal {

Result<void> StubImpl::dispatchPod(Event e, const PodSandbox& pod) {
  {
    std::lock_guard lock(mu_);
    ++stats_.events;
  }
  Result<void> r;
  switch (e) {
    case Event::RunPodSandbox: {
      PodSandbox running = pod;
      running.state = PodState::Running;
      registry_.upsertPod(std::move(running));
      if (h_.run_pod != nullptr)
        r = h_.run_pod->runPodSandbox(pod);
      break;
    }
    case Event::StopPodSandbox:
      registry_.setPodState(pod.id, PodState::Stopped);
      if (h_.stop_pod != nullptr)
        r = h_.stop_pod->stopPodSandbox(pod);
      break;
    case Event::RemovePodSandbox:
      registry_.removePod(pod.id);
      if (h_.remove_pod != nullptr)
        r = h_.remove_pod->removePodSandbox(pod);
      break;
    case Event::PostUpdatePodSandbox: {
      // Keep the state the registry derived; the update only carries new content.
      PodSandbox updated = pod;
      if (auto snap = registry_.snapshot(); const auto* known = snap->pod(pod.id)) {
        updated.state = known->state;
      }
      registry_.upsertPod(std::move(updated));
      break;
    }
    default:
      break;
  }
  if (!r) {
    countHandlerError();
  }
  return r;
}

Result<void> StubImpl::dispatchContainer(Event e, const PodSandbox& pod, const Container& ctr) {
  {
    std::lock_guard lock(mu_);
    ++stats_.events;
  }
  Result<void> r;
  switch (e) {
    case Event::PostCreateContainer:
      registry_.upsertContainer(ctr);
      if (h_.post_create != nullptr)
        r = h_.post_create->postCreateContainer(pod, ctr);
      break;
    case Event::StartContainer:
      registry_.upsertContainer(ctr);
      if (h_.start != nullptr)
        r = h_.start->startContainer(pod, ctr);
      break;
    case Event::PostStartContainer:
      registry_.upsertContainer(ctr);
      if (h_.post_start != nullptr)
        r = h_.post_start->postStartContainer(pod, ctr);
      break;
    case Event::PostUpdateContainer:
      registry_.upsertContainer(ctr);
      if (h_.post_update != nullptr)
        r = h_.post_update->postUpdateContainer(pod, ctr);
      break;
    case Event::RemoveContainer:
      registry_.removeContainer(ctr.id);
      owners_.forget(ctr.id);
      if (h_.remove != nullptr)
        r = h_.remove->removeContainer(pod, ctr);
      break;
    default:
      break;
  }
  if (!r) {
    countHandlerError();
  }
  return r;
}

void StubImpl::registerMethods(Session& s) {
  auto& srv = *s.server;
  const std::string svc = codec::kPluginService;
  // A call that runs plugin code is served on the worker thread (a slow handler never blocks the
  // reader), unless the plugin promised fast handlers (inline_handlers); a call that only
  // touches the registry runs inline on the reader thread when nothing is queued (no hand-off).
  auto reg = [&](const char* method, auto fn, bool runs_plugin_code = false) {
    const auto exec = (!runs_plugin_code || options_.inline_handlers) ? wire::Execution::Inline
                                                                      : wire::Execution::Worker;
    srv.registerMethod(
        svc, method,
        [fn](const wire::CallContext&, std::span<const std::byte> in) -> Result<Bytes> {
          return fn(in);
        },
        exec);
  };
  const bool pod_event_code =
      h_.run_pod != nullptr || h_.stop_pod != nullptr || h_.remove_pod != nullptr;
  const bool state_change_code = pod_event_code || h_.post_create != nullptr ||
                                 h_.start != nullptr || h_.post_start != nullptr ||
                                 h_.post_update != nullptr || h_.remove != nullptr;
  Session* raw = &s;
  reg(
      "Configure", [this](std::span<const std::byte> in) { return onConfigure(in); },
      h_.configure != nullptr);
  reg(
      "Synchronize", [this, raw](std::span<const std::byte> in) { return onSynchronize(*raw, in); },
      h_.synchronize != nullptr);
  reg("Shutdown", [](std::span<const std::byte>) -> Result<Bytes> { return codec::encodeEmpty(); });

  auto pod_rpc = [&](const char* method, Event e, const void* handler) {
    reg(
        method,
        [this, e](std::span<const std::byte> in) -> Result<Bytes> {
          auto ev = codec::decodePodEvent(in);
          if (!ev) {
            return std::move(ev).error();
          }
          auto r = dispatchPod(e, ev->pod);
          if (!r) {
            return std::move(r).error();
          }
          return codec::encodeEmpty();
        },
        handler != nullptr);
  };
  pod_rpc("RunPodSandbox", Event::RunPodSandbox, h_.run_pod);
  pod_rpc("StopPodSandbox", Event::StopPodSandbox, h_.stop_pod);
  pod_rpc("RemovePodSandbox", Event::RemovePodSandbox, h_.remove_pod);
  pod_rpc("PostUpdatePodSandbox", Event::PostUpdatePodSandbox, nullptr);

  auto ctr_rpc = [&](const char* method, Event e, const void* handler) {
    reg(
        method,
        [this, e](std::span<const std::byte> in) -> Result<Bytes> {
          auto ev = codec::decodeContainerEvent(in);
          if (!ev) {
            return std::move(ev).error();
          }
          auto r = dispatchContainer(e, ev->pod, ev->container);
          if (!r) {
            return std::move(r).error();
          }
          return codec::encodeEmpty();
        },
        handler != nullptr);
  };
  ctr_rpc("PostCreateContainer", Event::PostCreateContainer, h_.post_create);
  ctr_rpc("StartContainer", Event::StartContainer, h_.start);
  ctr_rpc("PostStartContainer", Event::PostStartContainer, h_.post_start);
  ctr_rpc("PostUpdateContainer", Event::PostUpdateContainer, h_.post_update);
  ctr_rpc("RemoveContainer", Event::RemoveContainer, h_.remove);

  reg(
      "CreateContainer",
      [this](std::span<const std::byte> in) -> Result<Bytes> {
        auto ev = codec::decodeContainerEvent(in);
        if (!ev) {
          return std::move(ev).error();
        }
        {
          std::lock_guard lock(mu_);
          ++stats_.events;
        }
        CreateContainerResult result;
        if (h_.create != nullptr) {
          auto r = h_.create->createContainer(ev->pod, ev->container);
          if (!r) {
            countHandlerError();
            return std::move(r).error();
          }
          result = std::move(*r);
        }
        Container c = std::move(ev->container);
        if (result.adjust.resources) {
          mergeResources(c.resources, *result.adjust.resources);
        }
        if (c.state == ContainerState::Unknown) {
          c.state = ContainerState::Created;
        }
        registry_.upsertContainer(std::move(c));
        return codec::encodeCreateContainerResponse(result);
      },
      h_.create != nullptr);
  reg(
      "UpdateContainer",
      [this](std::span<const std::byte> in) -> Result<Bytes> {
        auto ev = codec::decodeUpdateContainerRequest(in);
        if (!ev) {
          return std::move(ev).error();
        }
        {
          std::lock_guard lock(mu_);
          ++stats_.events;
        }
        std::vector<ContainerUpdate> updates;
        if (h_.update != nullptr) {
          auto r = h_.update->updateContainer(ev->pod, ev->container, ev->requested);
          if (!r) {
            countHandlerError();
            return std::move(r).error();
          }
          updates = std::move(*r);
        }
        registry_.applyUpdate({.container_id = ev->container.id, .resources = ev->requested});
        for (const auto& u : updates) {
          registry_.applyUpdate(u);
        }
        return codec::encodeUpdatesResponse(updates);
      },
      h_.update != nullptr);
  reg(
      "StopContainer",
      [this](std::span<const std::byte> in) -> Result<Bytes> {
        auto ev = codec::decodeContainerEvent(in);
        if (!ev) {
          return std::move(ev).error();
        }
        {
          std::lock_guard lock(mu_);
          ++stats_.events;
        }
        std::vector<ContainerUpdate> updates;
        if (h_.stop != nullptr) {
          auto r = h_.stop->stopContainer(ev->pod, ev->container);
          if (!r) {
            countHandlerError();
            return std::move(r).error();
          }
          updates = std::move(*r);
        }
        registry_.setContainerState(ev->container.id, ContainerState::Stopped);
        return codec::encodeUpdatesResponse(updates);
      },
      h_.stop != nullptr);
  // v0.10+ validation, only with report_ownership: the runtime's field owners. Without it the
  // method stays unknown (UNIMPLEMENTED), as before.
  if (options_.report_ownership) {
    reg(
        "ValidateContainerAdjustment",
        [this](std::span<const std::byte> in) -> Result<Bytes> {
          auto req = codec::decodeValidateRequest(in);
          if (!req) {
            return std::move(req).error();
          }
          for (auto& o : req->owners) {
            if (options_.on_owners) {
              options_.on_owners(o);
            }
            owners_.record(std::move(o));
          }
          return codec::encodeValidateResponse(false, "");
        },
        static_cast<bool>(options_.on_owners));
  }
  reg(
      "StateChange",
      [this](std::span<const std::byte> in) -> Result<Bytes> {
        auto ev = codec::decodeStateChange(in);
        if (!ev) {
          return std::move(ev).error();
        }
        Result<void> r;
        switch (ev->event) {
          case Event::RunPodSandbox:
          case Event::StopPodSandbox:
          case Event::RemovePodSandbox:
          case Event::PostUpdatePodSandbox:
            r = dispatchPod(ev->event, ev->pod);
            break;
          case Event::PostCreateContainer:
          case Event::StartContainer:
          case Event::PostStartContainer:
          case Event::PostUpdateContainer:
          case Event::RemoveContainer:
            if (!ev->container) {
              return COLOD_ERR(EINVAL, "StateChange container event without a container");
            }
            r = dispatchContainer(ev->event, ev->pod, *ev->container);
            break;
          default:
            break;  // events without a StateChange form: nothing to do
        }
        if (!r) {
          return std::move(r).error();
        }
        return codec::encodeEmpty();
      },
      state_change_code);
}

}  // namespace colod::nri::stub_internal
