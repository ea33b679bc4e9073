// SPDX-License-Identifier: Apache-2.0
// colod-testplugin: a second NRI plugin for the interop/coexist tests, built on our stub. It acts
// as a Koordinator-like QoS plugin or a topology-aware exclusive-CPU plugin (roles.h). Not
// installed in the image.
//
//   colod-testplugin --role koordinator|topology|observe [--socket PATH] [--name N --idx NN]
//                    [--ls-cpus LIST] [--be-shares N] [--pool LIST] [--report-ownership]
//
// Started by the runtime as a pre-installed plugin (NRI_PLUGIN_SOCKET set, no arguments), it
// takes its name and index from the environment and its role from the config the runtime hands
// it (Configure.config: "role: topology", "pool: 1-3", ...).
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include "colod/nri/stub.h"
#include "roles.h"

namespace {

using colod::Result;
namespace nri = colod::nri;
namespace tp = colod::nri::testplugin;

void say(const std::string& line) {
  std::fprintf(stderr, "colod-testplugin: %s\n", line.c_str());
  std::fflush(stderr);
}

class TestPlugin final : public nri::Plugin,
                         public nri::ConfigureHandler,
                         public nri::CreateContainerHandler,
                         public nri::RemoveContainerHandler {
 public:
  explicit TestPlugin(tp::RoleConfig cfg) : roles_(std::move(cfg)) {}

  Result<nri::EventMask> configure(const nri::ConfigureRequest& req) override {
    if (!req.config.empty()) {
      std::lock_guard lock(mu_);
      auto cfg = tp::parseConfig(req.config, roles_.config());
      if (!cfg) {
        return std::move(cfg).error().wrap("plugin config");
      }
      roles_.setConfig(std::move(*cfg));
    }
    say("configured by " + req.runtime_name + " " + req.runtime_version + " (NRI " +
        (req.nri_version.empty() ? std::string("< v0.12") : req.nri_version) + ")");
    return nri::EventMask{0};
  }

  Result<nri::CreateContainerResult> createContainer(const nri::PodSandbox& pod,
                                                     const nri::Container& ctr) override {
    std::lock_guard lock(mu_);
    nri::CreateContainerResult out;
    if (auto r = roles_.adjust(pod, ctr)) {
      say("adjust " + pod.name + "/" + ctr.name + ": cpus='" + r->cpu.cpus +
          "' shares=" + (r->cpu.shares ? std::to_string(*r->cpu.shares) : std::string("-")));
      out.adjust.resources = std::move(*r);
    }
    return out;
  }

  Result<void> removeContainer(const nri::PodSandbox&, const nri::Container& ctr) override {
    std::lock_guard lock(mu_);
    roles_.release(ctr.id);
    return colod::ok();
  }

 private:
  std::mutex mu_;
  tp::Roles roles_;
};

int usage(const std::string& why) {
  std::fprintf(stderr,
               "colod-testplugin: %s\nusage: colod-testplugin --role koordinator|topology|observe "
               "[--socket PATH] [--name N] [--idx NN] [--ls-cpus LIST] [--be-shares N] "
               "[--pool LIST] [--report-ownership]\n",
               why.c_str());
  return 3;
}

}  // namespace

int main(int argc, char** argv) {
  tp::RoleConfig cfg;
  nri::StubOptions opts;
  opts.argv0 = argc > 0 ? argv[0] : "";
  std::vector<std::string_view> args(argv + 1, argv + argc);
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string_view a = args[i];
    if (a == "--report-ownership") {
      opts.report_ownership = true;
      continue;
    }
    if (i + 1 >= args.size()) {
      return usage("missing value for " + std::string(a));
    }
    const std::string v(args[++i]);
    if (a == "--role") {
      auto r = tp::parseRole(v);
      if (!r) {
        return usage(r.error().message());
      }
      cfg.role = *r;
    } else if (a == "--socket") {
      opts.socket_path = v;
    } else if (a == "--name") {
      opts.plugin_name = v;
    } else if (a == "--idx") {
      opts.plugin_idx = v;
    } else {
      // --ls-cpus, --be-shares, --pool share the config file's parser.
      std::string key(a.substr(2));
      for (auto& c : key) {
        c = c == '-' ? '_' : c;
      }
      auto r = tp::parseConfig(key + ": " + v, cfg);
      if (!r) {
        return usage(r.error().message());
      }
      cfg = std::move(*r);
    }
  }
  if (opts.plugin_name.empty() && std::getenv("NRI_PLUGIN_NAME") == nullptr) {  // NOLINT
    opts.plugin_name = "testplugin";
  }
  if (opts.plugin_idx.empty() && std::getenv("NRI_PLUGIN_IDX") == nullptr) {  // NOLINT
    opts.plugin_idx = "20";
  }
  opts.on_conflict = [](const nri::OwnershipConflict& c) {
    say("ownership conflict: " + c.field + " of " + c.container_id + " owned by " + c.other_plugin +
        " (" + c.source + ")");
  };
  TestPlugin plugin(cfg);
  auto stub = nri::Stub::create(plugin, std::move(opts));
  if (!stub) {
    return usage(stub.error().message());
  }
  say("plugin " + (*stub)->pluginIdx() + "-" + (*stub)->pluginName() +
      ((*stub)->launched() ? " (launched by the runtime)" : " (external)"));
  auto r = (*stub)->run();
  if (!r) {
    say("stopped: " + r.error().message());
    return 1;
  }
  return 0;
}
