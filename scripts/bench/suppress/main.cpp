// SPDX-License-Identifier: Apache-2.0
// colod-suppress: Koordinator's CPU Suppress rule (rule.h cites the source) applied through NRI,
// as the peer baseline of scripts/bench/colocation.sh's `suppress` phase. A second NRI plugin on
// our stub: every second it reads the machine's and every container's CPU use, computes the BE
// cpuset size with koordlet's formula, and sends it to every BE container with UpdateContainers
// (koordlet writes the besteffort cgroups directly; NRI is the lever colod has, so both are
// measured through the same one). A BE container created while the rule restricts BE gets the
// cpuset in its CreateContainer adjustment, as it would inherit it from koordlet's restricted
// besteffort parent cgroup. On SIGTERM/SIGINT it gives every BE container it restricted the whole
// node back (koordlet's recoverCPUSetIfNeed) and exits 0.
//   colod-suppress --socket PATH [--slo-percent 65] [--be-min-cpus 1] [--interval-ms 1000]
//                  [--cgroup-root /sys/fs/cgroup] [--tier-key colod.io/tier]
#include <signal.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <ctime>
#include <fstream>
#include <map>
#include <mutex>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "colod/nri/stub.h"
#include "rule.h"

namespace colod::suppress {
namespace {

struct Options {
  std::string socket;
  double slo_percent = 65.0;
  int be_min_cpus = 1;
  int interval_ms = 1000;
  std::string cgroup_root = "/sys/fs/cgroup";
  std::string tier_key = "colod.io/tier";
};

Result<std::string> readFile(const std::string& path) {
  std::ifstream f(path);
  if (!f) {
    return COLOD_ERR(ENOENT, "opening ", path);
  }
  std::ostringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

std::string nowStamp() {
  timespec ts{};
  ::clock_gettime(CLOCK_REALTIME, &ts);
  char ms[24];
  std::snprintf(ms, sizeof ms, ".%03ld", ts.tv_nsec / 1000000);
  return std::to_string(ts.tv_sec) + ms;
}

class SuppressPlugin : public nri::Plugin, public nri::CreateContainerHandler {
 public:
  explicit SuppressPlugin(Options opts) : opts_(std::move(opts)) {
    node_cpus_ = static_cast<int>(::sysconf(_SC_NPROCESSORS_ONLN));
    v1_ = ::access((opts_.cgroup_root + "/cpuacct").c_str(), F_OK) == 0;
    be_cpus_ = node_cpus_;
  }

  void attach(nri::Stub& stub) { stub_ = &stub; }

  Result<nri::CreateContainerResult> createContainer(const nri::PodSandbox& pod,
                                                     const nri::Container& ctr) override {
    nri::CreateContainerResult r;
    std::lock_guard lk(mu_);
    if (isBe(pod, ctr) && be_cpus_ < node_cpus_) {
      nri::LinuxResources res;
      res.cpu.cpus = beCpuset(node_cpus_, be_cpus_);
      r.adjust.resources = res;
    }
    return r;
  }

  // One round of the rule: sample, compute, apply. Errors are logged, never fatal: a missing
  // sample (a container removed between list and read) only skips that container this round.
  void round() {
    const auto snap = stub_->registry().snapshot();
    if (!snap->synchronized) {
      return;
    }
    auto stat = readFile("/proc/stat");
    if (!stat) {
      std::fprintf(stderr, "suppress: %s\n", stat.error().message().c_str());
      return;
    }
    auto cpu = parseProcStat(*stat);
    if (!cpu) {
      std::fprintf(stderr, "suppress: %s\n", cpu.error().message().c_str());
      return;
    }
    const auto now = std::chrono::steady_clock::now();
    std::map<std::string, uint64_t> usage;
    uint64_t ls_ns = 0, pods_ns = 0;
    std::vector<const nri::Container*> be;
    for (const auto& [id, c] : snap->containers) {
      const nri::PodSandbox* pod = snap->pod(c->pod_sandbox_id);
      const bool is_be = pod != nullptr && isBe(*pod, *c);
      if (is_be &&
          (c->state == nri::ContainerState::Running || c->state == nri::ContainerState::Created)) {
        be.push_back(c.get());
      }
      auto u = containerUsageNs(*c);
      if (!u) {
        continue;
      }
      usage[c->id] = *u;
      auto prev = last_usage_.find(c->id);
      if (prev == last_usage_.end() || *u < prev->second) {
        continue;  // first sample of a new container: its use starts counting next round
      }
      const uint64_t d = *u - prev->second;
      pods_ns += d;
      if (!is_be) {
        ls_ns += d;
      }
    }
    const bool have_prev = have_prev_;
    const double wall_ns = static_cast<double>(
        std::chrono::duration_cast<std::chrono::nanoseconds>(now - last_at_).count());
    const ProcStatCpu prev_cpu = last_cpu_;
    last_usage_ = std::move(usage);
    last_cpu_ = *cpu;
    last_at_ = now;
    have_prev_ = true;
    if (!have_prev || wall_ns <= 0 || cpu->total <= prev_cpu.total) {
      return;
    }
    // /proc/stat counts jiffies on every CPU: its busy share times the CPUs is CPUs used.
    const double node_used = static_cast<double>(cpu->busy - prev_cpu.busy) /
                             static_cast<double>(cpu->total - prev_cpu.total) * node_cpus_;
    RuleInput in{.node_cpus = node_cpus_,
                 .slo_percent = opts_.slo_percent,
                 .ls_used_cpus = static_cast<double>(ls_ns) / wall_ns,
                 .pods_used_cpus = static_cast<double>(pods_ns) / wall_ns,
                 .node_used_cpus = node_used,
                 .be_min_cpus = opts_.be_min_cpus,
                 .current_be_cpus = be_cpus_};
    const RuleOutput out = suppressRule(in);
    {
      std::lock_guard lk(mu_);
      if (out.be_cpus != be_cpus_) {
        std::printf(
            "%s suppress: node=%.2f ls=%.2f pods=%.2f system=%.2f -> suppress=%.2f CPUs: BE "
            "cpuset %s (%d CPUs)\n",
            nowStamp().c_str(), node_used, in.ls_used_cpus, in.pods_used_cpus, out.system_used_cpus,
            out.suppress_cpus, beCpuset(node_cpus_, out.be_cpus).c_str(), out.be_cpus);
        std::fflush(stdout);
      }
      be_cpus_ = out.be_cpus;
    }
    apply(be, beCpuset(node_cpus_, out.be_cpus));
  }

  // Gives every BE container the whole node back (the rule's recover path).
  void restore() {
    const auto snap = stub_->registry().snapshot();
    std::vector<const nri::Container*> be;
    for (const auto& [id, c] : snap->containers) {
      if (touched_.count(c->id) != 0U) {
        be.push_back(c.get());
      }
    }
    apply(be, beCpuset(node_cpus_, node_cpus_));
  }

 private:
  bool isBe(const nri::PodSandbox& pod, const nri::Container& ctr) const {
    auto t = ctr.annotations.get(opts_.tier_key);
    if (!t) {
      t = pod.annotations.get(opts_.tier_key);
    }
    return t && *t == "be";
  }

  Result<uint64_t> containerUsageNs(const nri::Container& c) const {
    // cgroupfs driver paths ("/parent/kubepods/.../pod<uid>/<id>"); the benchmark uses it.
    if (c.cgroups_path.empty() || c.cgroups_path.front() != '/') {
      return COLOD_ERR(EINVAL, "unsupported cgroups_path '", c.cgroups_path, "'");
    }
    if (v1_) {
      auto t = readFile(opts_.cgroup_root + "/cpuacct" + c.cgroups_path + "/cpuacct.usage");
      if (!t) {
        return std::move(t).error();
      }
      return parseCpuacctUsage(*t);
    }
    auto t = readFile(opts_.cgroup_root + c.cgroups_path + "/cpu.stat");
    if (!t) {
      return std::move(t).error();
    }
    return parseCpuStatUsageNs(*t);
  }

  void apply(const std::vector<const nri::Container*>& be, const std::string& cpus) {
    std::vector<nri::ContainerUpdate> updates;
    const std::string all = beCpuset(node_cpus_, node_cpus_);
    for (const auto* c : be) {
      // No cpuset in the spec = the whole node (the container inherits its parent's).
      const std::string& now = c->resources.cpu.cpus.empty() ? all : c->resources.cpu.cpus;
      if (now == cpus) {
        continue;
      }
      nri::ContainerUpdate u;
      u.container_id = c->id;
      u.resources.cpu.cpus = cpus;
      updates.push_back(std::move(u));
      touched_.insert(c->id);
    }
    if (updates.empty()) {
      return;
    }
    auto r = stub_->updateContainers(std::move(updates));
    if (!r) {
      std::fprintf(stderr, "suppress: UpdateContainers: %s\n", r.error().message().c_str());
    }
  }

  Options opts_;
  nri::Stub* stub_ = nullptr;
  int node_cpus_ = 1;
  bool v1_ = true;
  std::mutex mu_;
  int be_cpus_ = 1;  // guarded by mu_ (read by the CreateContainer handler)
  std::map<std::string, uint64_t> last_usage_;
  std::set<std::string> touched_;
  ProcStatCpu last_cpu_{};
  std::chrono::steady_clock::time_point last_at_{};
  bool have_prev_ = false;
};

int run(int argc, char** argv) {
  Options o;
  CLI::App app{"colod-suppress: Koordinator's CPU Suppress rule over NRI (benchmark baseline)"};
  app.add_option("--socket", o.socket, "NRI socket")->required();
  app.add_option("--slo-percent", o.slo_percent, "cpuSuppressThresholdPercent (koordinator: 65)");
  app.add_option("--be-min-cpus", o.be_min_cpus, "smallest BE cpuset (colod floors.be_min_cpus)");
  app.add_option("--interval-ms", o.interval_ms, "rule period (koordlet: 1 s)");
  app.add_option("--cgroup-root", o.cgroup_root, "cgroup mount root");
  app.add_option("--tier-key", o.tier_key, "annotation whose value 'be' marks a BE container");
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e) == 0 ? 0 : 3;
  }
  if (o.be_min_cpus < 1 || o.interval_ms < 10 || o.slo_percent <= 0 || o.slo_percent > 100) {
    std::fprintf(stderr, "colod-suppress: bad options\n");
    return 3;
  }
  // Signals are taken synchronously by sigtimedwait, which is also the round timer.
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGINT);
  sigaddset(&set, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &set, nullptr);

  SuppressPlugin plugin(o);
  auto stub = nri::Stub::create(plugin, {.socket_path = o.socket,
                                         .plugin_name = "koord-suppress",
                                         .plugin_idx = "60",
                                         .use_environment = false});
  if (!stub) {
    std::fprintf(stderr, "colod-suppress: %s\n", stub.error().message().c_str());
    return 3;
  }
  plugin.attach(**stub);
  if (auto s = (*stub)->start(); !s) {
    std::fprintf(stderr, "colod-suppress: %s\n", s.error().message().c_str());
    return 1;
  }
  // Prime the usage samples as soon as the runtime has synchronized us, so the first decision
  // comes one interval later (koordlet's collector has samples before its first round).
  if ((*stub)->waitSynchronized(std::chrono::seconds(10))) {
    plugin.round();
  }
  const long ms = o.interval_ms;
  const timespec tick{.tv_sec = ms / 1000, .tv_nsec = (ms % 1000) * 1000000};
  for (;;) {
    const int sig = sigtimedwait(&set, nullptr, &tick);
    if (sig == SIGINT || sig == SIGTERM) {
      break;
    }
    plugin.round();
  }
  plugin.restore();
  (*stub)->stop();
  return 0;
}

}  // namespace
}  // namespace colod::suppress

int main(int argc, char** argv) { return colod::suppress::run(argc, argv); }
