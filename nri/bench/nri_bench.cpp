// SPDX-License-Identifier: Apache-2.0
// NRI benchmarks, plugin side (issue 3). Prints one `key=value` line per figure:
//   sync1000_ms  median over --sync-runs of Synchronize(100 pods + 1000 realistic containers,
//                ~3.3 MB), first request byte -> last reply byte, measured inside the stub's
//                ttrpc server; the registry is rebuilt each time.
//   create_p99_us p99 over --creates CreateContainer calls (realistic ~4.5 KB request),
//                request received -> reply written, inside the stub.
//   cpp_rtt_p50_us median unary round trip of our TtrpcClient -> TtrpcServer over a Unix
//                socketpair through the mux, --size payload each way (pin with taskset).
//   rss_after_sync_mib VmRSS after the syncs. NOTE: one process holds both the plugin and the
//                fake runtime (its request buffers included), so this over-states the plugin.
#include <sys/socket.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "colod/nri/mux.h"
#include "colod/nri/stub.h"
#include "colod/nri/testing/fake_runtime.h"
#include "colod/nri/testing/realistic.h"
#include "colod/nri/ttrpc.h"

using namespace colod;
using namespace colod::nri;
using namespace std::chrono_literals;
namespace pb = ::nri::pkg::api::v1alpha1;

namespace {

class BenchPlugin : public Plugin, public CreateContainerHandler {
 public:
  Result<CreateContainerResult> createContainer(const PodSandbox&, const Container&) override {
    CreateContainerResult r;
    r.adjust.annotations["colod.io/tier"] = "ls";
    return r;
  }
};

double pct(std::vector<double> v, double p) {
  if (v.empty()) {
    return 0;
  }
  std::sort(v.begin(), v.end());
  auto idx = static_cast<std::size_t>(p * static_cast<double>(v.size() - 1) + 0.5);
  return v[std::min(idx, v.size() - 1)];
}

double rssMib() {
  std::ifstream f("/proc/self/status");
  std::string line;
  while (std::getline(f, line)) {
    if (line.rfind("VmRSS:", 0) == 0) {
      return std::strtod(line.c_str() + 6, nullptr) / 1024.0;
    }
  }
  return 0;
}

int argInt(int argc, char** argv, const char* name, int def) {
  for (int i = 1; i + 1 < argc; ++i) {
    if (std::strcmp(argv[i], name) == 0) {
      return std::atoi(argv[i + 1]);
    }
  }
  return def;
}

bool die(const char* what, const Error& e) {
  std::fprintf(stderr, "nri_bench: %s: %s\n", what, e.message().c_str());
  std::exit(1);
}

}  // namespace

int main(int argc, char** argv) {
  const int sync_runs = argInt(argc, argv, "--sync-runs", 10);
  const int creates = argInt(argc, argv, "--creates", 5000);
  const int rtt_calls = argInt(argc, argv, "--rtt-calls", 20000);
  const int size = argInt(argc, argv, "--size", 4096);

  // ---- sync1000 and create_p99 through the real stub -----------------------------------------
  int sv[2];
  if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) != 0) {
    std::perror("socketpair");
    return 1;
  }
  std::mutex mu;
  std::vector<double> sync_ms;
  std::vector<double> create_us;
  BenchPlugin plugin;
  auto stub_r = Stub::create(
      plugin, {.plugin_name = "bench", .plugin_idx = "50", .connection_fd = sv[1],
               .use_environment = false,
               .on_call = [&](std::string_view method, int32_t, std::chrono::nanoseconds took) {
                 std::lock_guard l(mu);
                 if (method == "Synchronize") {
                   sync_ms.push_back(static_cast<double>(took.count()) / 1e6);
                 } else if (method == "CreateContainer") {
                   create_us.push_back(static_cast<double>(took.count()) / 1e3);
                 }
               }});
  if (!stub_r) die("stub", stub_r.error());
  auto& stub = *stub_r.value();
  testing::FakeRuntime rt{UniqueFd(sv[0])};
  if (auto r = rt.start(); !r) die("runtime", r.error());
  if (auto r = stub.start(); !r) die("stub start", r.error());
  if (auto r = rt.waitRegistered(10s); !r) die("register", r.error());
  pb::ConfigureRequest conf;
  conf.set_runtime_name("containerd");
  conf.set_runtime_version("v2.1.0");
  if (auto r = rt.configure(conf); !r) die("configure", r.error());

  std::vector<pb::PodSandbox> pods;
  std::vector<pb::Container> ctrs;
  testing::realisticNode(100, 10, pods, ctrs);
  pb::SynchronizeRequest sreq;
  for (auto& p : pods) *sreq.add_pods() = p;
  for (auto& c : ctrs) *sreq.add_containers() = c;
  const std::string sync_bytes = sreq.SerializeAsString();
  sreq.Clear();
  for (int i = 0; i < sync_runs; ++i) {
    auto r = rt.call("Synchronize", sync_bytes, 30s);
    if (!r) die("synchronize", r.error());
  }
  const double rss = rssMib();
  const auto snap = stub.registry().snapshot();

  pb::CreateContainerRequest creq;
  *creq.mutable_pod() = pods[0];
  *creq.mutable_container() = testing::realisticContainer(5000, pods[0]);
  creq.mutable_container()->set_state(pb::CONTAINER_CREATED);
  const std::string create_bytes = creq.SerializeAsString();
  for (int i = 0; i < creates + 200; ++i) {
    auto r = rt.call("CreateContainer", create_bytes, 5s);
    if (!r) die("create", r.error());
  }
  stub.stop();
  rt.close();
  {
    std::lock_guard l(mu);
    // The first 200 creates warm caches and the allocator; they are not counted.
    if (create_us.size() > 200) {
      create_us.erase(create_us.begin(), create_us.begin() + 200);
    }
  }

  // ---- C++ ttrpc unary RTT over the mux ------------------------------------------------------
  int rv[2];
  if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, rv) != 0) {
    std::perror("socketpair");
    return 1;
  }
  wire::Mux cm{UniqueFd(rv[0])};
  wire::Mux sm{UniqueFd(rv[1])};
  wire::TtrpcClient client([&](auto h, auto b) { return cm.send(1, h, b); });
  wire::TtrpcServer server([&](auto h, auto b) { return sm.send(1, h, b); });
  server.registerMethod("bench.Echo", "Echo",
                        [](const wire::CallContext&, std::span<const std::byte> p)
                            -> Result<std::vector<std::byte>> {
                          return std::vector<std::byte>(p.begin(), p.end());
                        });
  cm.open(1, [&](std::span<const std::byte> b) { return client.onBytes(b); });
  sm.open(1, [&](std::span<const std::byte> b) { return server.onBytes(b); });
  server.start();
  if (auto r = cm.start(); !r) die("mux", r.error());
  if (auto r = sm.start(); !r) die("mux", r.error());
  std::vector<std::byte> payload(static_cast<std::size_t>(size), std::byte{0x42});
  std::vector<double> rtt;
  rtt.reserve(static_cast<std::size_t>(rtt_calls));
  for (int i = 0; i < rtt_calls + 2000; ++i) {
    auto t0 = std::chrono::steady_clock::now();
    auto r = client.call("bench.Echo", "Echo", payload, 5s);
    auto t1 = std::chrono::steady_clock::now();
    if (!r || !r->status.ok() || r->payload.size() != payload.size()) {
      std::fprintf(stderr, "nri_bench: rtt call failed\n");
      return 1;
    }
    if (i >= 2000) {
      rtt.push_back(std::chrono::duration<double, std::micro>(t1 - t0).count());
    }
  }
  server.stop();
  cm.close();
  sm.close();

  std::printf("sync_bytes=%zu\n", sync_bytes.size());
  std::printf("sync_registry_containers=%zu\n", snap->containers.size());
  std::printf("sync1000_ms=%.2f\n", pct(sync_ms, 0.5));
  std::printf("sync1000_min_ms=%.2f\n", pct(sync_ms, 0.0));
  std::printf("rss_after_sync_mib=%.1f\n", rss);
  std::printf("create_p50_us=%.1f\n", pct(create_us, 0.5));
  std::printf("create_p99_us=%.1f\n", pct(create_us, 0.99));
  std::printf("create_calls=%zu\n", create_us.size());
  std::printf("cpp_rtt_p50_us=%.1f\n", pct(rtt, 0.5));
  std::printf("cpp_rtt_p99_us=%.1f\n", pct(rtt, 0.99));
  return 0;
}
