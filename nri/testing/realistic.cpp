// SPDX-License-Identifier: Apache-2.0
#include "colod/nri/testing/realistic.h"

#include <cstdio>

namespace colod::nri::testing {

namespace pb = ::nri::pkg::api::v1alpha1;

namespace {
std::string hex64(uint64_t seed) {
  std::string s;
  uint64_t x = seed * 0x9E3779B97F4A7C15ULL + 1;
  for (int i = 0; i < 64; ++i) {
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    s.push_back("0123456789abcdef"[x & 15]);
  }
  return s;
}
std::string uuid(uint64_t seed) {
  std::string h = hex64(seed + 7777);
  return h.substr(0, 8) + "-" + h.substr(8, 4) + "-" + h.substr(12, 4) + "-" + h.substr(16, 4) +
         "-" + h.substr(20, 12);
}
template <typename Field>
void put(Field* f, const std::string& k, const std::string& v) {
  auto* e = f->Add();
  e->set_key(k);
  e->set_value(v);
}
std::string fmt(const char* f, int i) {
  char buf[64];
  std::snprintf(buf, sizeof buf, f, i);
  return buf;
}
}  // namespace

pb::PodSandbox realisticPod(int i) {
  pb::PodSandbox p;
  p.set_id(hex64(static_cast<uint64_t>(i)));
  p.set_name(fmt("app-%03d-7d9f8c6b5d-x", i) + fmt("%04d", i));
  p.set_uid(uuid(static_cast<uint64_t>(i)));
  p.set_namespace_("ns-" + std::to_string(i % 10));
  p.set_pid(static_cast<uint32_t>(10000 + i * 37));
  p.add_ips("10.244." + std::to_string(i / 250) + "." + std::to_string(i % 250 + 2));
  auto* l = p.mutable_labels();
  put(l, "app", fmt("app-%03d", i));
  put(l, "pod-template-hash", "7d9f8c6b5d");
  put(l, "io.kubernetes.pod.name", p.name());
  put(l, "io.kubernetes.pod.namespace", p.namespace_());
  put(l, "io.kubernetes.pod.uid", p.uid());
  auto* a = p.mutable_annotations();
  put(a, "kubernetes.io/config.seen", "2025-01-15T10:23:45.123456789Z");
  put(a, "kubernetes.io/config.source", "api");
  put(a, "io.kubernetes.cri.container-type", "sandbox");
  put(a, "io.kubernetes.cri.sandbox-id", p.id());
  put(a, "io.kubernetes.cri.sandbox-name", p.name());
  put(a, "io.kubernetes.cri.sandbox-namespace", p.namespace_());
  put(a, "io.kubernetes.cri.sandbox-uid", p.uid());
  put(a, "io.kubernetes.cri.sandbox-log-directory",
      "/var/log/pods/" + p.namespace_() + "_" + p.name() + "_" + p.uid());
  auto* lx = p.mutable_linux();
  lx->set_cgroup_parent("/kubepods/burstable/pod" + p.uid());
  lx->set_cgroups_path(lx->cgroup_parent() + "/" + p.id());
  auto* pr = lx->mutable_pod_resources();
  pr->mutable_cpu()->mutable_shares()->set_value(1024);
  pr->mutable_cpu()->mutable_quota()->set_value(200000);
  pr->mutable_cpu()->mutable_period()->set_value(100000);
  pr->mutable_memory()->mutable_limit()->set_value(int64_t{1} << 30);
  lx->mutable_pod_overhead();
  lx->mutable_resources()->mutable_cpu()->mutable_shares()->set_value(2);
  for (const char* t : {"network", "ipc", "uts", "pid", "mount"}) {
    auto* ns = lx->add_namespaces();
    ns->set_type(t);
    if (std::string(t) == "network") {
      ns->set_path("/var/run/netns/cni-" + p.uid());
    }
  }
  return p;
}

pb::Container realisticContainer(int i, const pb::PodSandbox& pod) {
  pb::Container c;
  c.set_id(hex64(static_cast<uint64_t>(100000 + i)));
  c.set_pod_sandbox_id(pod.id());
  c.set_name("container-" + std::to_string(i % 10));
  c.set_state(pb::CONTAINER_RUNNING);
  c.set_pid(static_cast<uint32_t>(20000 + i * 13));
  auto* l = c.mutable_labels();
  put(l, "io.kubernetes.container.name", c.name());
  put(l, "io.kubernetes.pod.name", pod.name());
  put(l, "io.kubernetes.pod.namespace", pod.namespace_());
  put(l, "io.kubernetes.pod.uid", pod.uid());
  auto* a = c.mutable_annotations();
  put(a, "io.kubernetes.container.hash", "8f2b9c1d");
  put(a, "io.kubernetes.container.restartCount", "0");
  put(a, "io.kubernetes.container.terminationMessagePath", "/dev/termination-log");
  put(a, "io.kubernetes.container.terminationMessagePolicy", "File");
  put(a, "io.kubernetes.pod.terminationGracePeriod", "30");
  put(a, "io.kubernetes.cri.container-name", c.name());
  put(a, "io.kubernetes.cri.container-type", "container");
  put(a, "io.kubernetes.cri.image-name", "registry.example.com/team/app:v1.2.3");
  put(a, "io.kubernetes.cri.sandbox-id", pod.id());
  put(a, "io.kubernetes.cri.sandbox-name", pod.name());
  put(a, "io.kubernetes.cri.sandbox-namespace", pod.namespace_());
  put(a, "io.kubernetes.cri.sandbox-uid", pod.uid());
  c.add_args("/usr/local/bin/app-server");
  c.add_args("--config=/etc/app/config-" + std::to_string(i % 10) + ".yaml");
  c.add_args("--port=8080");
  c.add_env("PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin");
  c.add_env("HOSTNAME=" + pod.name());
  c.add_env("KUBERNETES_SERVICE_HOST=10.96.0.1");
  c.add_env("KUBERNETES_SERVICE_PORT=443");
  c.add_env("KUBERNETES_SERVICE_PORT_HTTPS=443");
  c.add_env("KUBERNETES_PORT=tcp://10.96.0.1:443");
  c.add_env("KUBERNETES_PORT_443_TCP=tcp://10.96.0.1:443");
  c.add_env("KUBERNETES_PORT_443_TCP_PROTO=tcp");
  c.add_env("KUBERNETES_PORT_443_TCP_PORT=443");
  c.add_env("KUBERNETES_PORT_443_TCP_ADDR=10.96.0.1");
  c.add_env("APP_ENV=production");
  c.add_env("APP_LOG_LEVEL=info");
  c.add_env("APP_WORKERS=8");
  c.add_env("APP_FEATURE_FLAGS=alpha,beta,gamma");
  const std::string podvol = "/var/lib/kubelet/pods/" + pod.uid();
  const std::string ctrdir = "/var/lib/containerd/io.containerd.grpc.v1.cri/sandboxes/" + pod.id();
  struct M {
    std::string dst, type, src;
    std::vector<std::string> opts;
  };
  std::vector<M> mounts = {
      {"/proc", "proc", "proc", {"nosuid", "noexec", "nodev"}},
      {"/dev", "tmpfs", "tmpfs", {"nosuid", "strictatime", "mode=755", "size=65536k"}},
      {"/dev/pts", "devpts", "devpts", {"nosuid", "noexec", "newinstance", "ptmxmode=0666", "mode=0620", "gid=5"}},
      {"/dev/mqueue", "mqueue", "mqueue", {"nosuid", "noexec", "nodev"}},
      {"/sys", "sysfs", "sysfs", {"nosuid", "noexec", "nodev", "ro"}},
      {"/sys/fs/cgroup", "cgroup", "cgroup", {"nosuid", "noexec", "nodev", "relatime", "ro"}},
      {"/etc/hosts", "bind", podvol + "/etc-hosts", {"rbind", "rprivate", "rw"}},
      {"/dev/termination-log", "bind", podvol + "/containers/" + c.name() + "/1a2b3c4d", {"rbind", "rprivate", "rw"}},
      {"/etc/hostname", "bind", ctrdir + "/hostname", {"rbind", "rprivate", "rw"}},
      {"/etc/resolv.conf", "bind", ctrdir + "/resolv.conf", {"rbind", "rprivate", "rw"}},
      {"/dev/shm", "bind", "/run/containerd/io.containerd.grpc.v1.cri/sandboxes/" + pod.id() + "/shm", {"rbind", "rprivate", "rw"}},
      {"/var/run/secrets/kubernetes.io/serviceaccount", "bind",
       podvol + "/volumes/kubernetes.io~projected/kube-api-access-x7k2p", {"rbind", "rprivate", "ro"}},
  };
  for (const auto& m : mounts) {
    auto* pm = c.add_mounts();
    pm->set_destination(m.dst);
    pm->set_type(m.type);
    pm->set_source(m.src);
    for (const auto& o : m.opts) {
      pm->add_options(o);
    }
  }
  auto* lx = c.mutable_linux();
  const std::string nsbase = "/proc/" + std::to_string(pod.pid()) + "/ns/";
  for (const char* t : {"pid", "ipc", "uts", "network", "mount"}) {
    auto* ns = lx->add_namespaces();
    ns->set_type(t);
    std::string ts = t;
    if (ts == "ipc" || ts == "uts" || ts == "network") {
      ns->set_path(nsbase + (ts == "network" ? "net" : ts));
    }
  }
  auto* r = lx->mutable_resources();
  r->mutable_cpu()->mutable_shares()->set_value(102);
  r->mutable_cpu()->mutable_quota()->set_value(50000);
  r->mutable_cpu()->mutable_period()->set_value(100000);
  r->mutable_memory()->mutable_limit()->set_value(int64_t{256} << 20);
  r->mutable_memory()->mutable_swap()->set_value(int64_t{256} << 20);
  auto* h1 = r->add_hugepage_limits();
  h1->set_page_size("2MB");
  auto* h2 = r->add_hugepage_limits();
  h2->set_page_size("1GB");
  put(r->mutable_unified(), "memory.oom.group", "1");
  lx->mutable_oom_score_adj()->set_value(999);
  lx->set_cgroups_path(pod.linux().cgroup_parent() + "/" + c.id());
  return c;
}

void realisticNode(int pods, int per_pod, std::vector<pb::PodSandbox>& out_pods,
                   std::vector<pb::Container>& out_ctrs) {
  for (int p = 0; p < pods; ++p) {
    out_pods.push_back(realisticPod(p));
    for (int k = 0; k < per_pod; ++k) {
      out_ctrs.push_back(realisticContainer(p * per_pod + k, out_pods.back()));
    }
  }
}

}  // namespace colod::nri::testing
