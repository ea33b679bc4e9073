// SPDX-License-Identifier: Apache-2.0
// Manifests: every YAML parses; the DaemonSet runs without hostPID/SYS_PTRACE, with BPF +
// PERFMON only, seccomp/AppArmor RuntimeDefault, probes on /healthz, /readyz and a startup
// probe, scrape annotations, metrics bound to the pod IP from the downward API (render-config,
// which is run here), the Namespace labelled for the privileged pod-security level; the
// ConfigMap's policy equals policy/config/default.yaml; the PodMonitor matches the pod.
// (label deploy; also unit)
#include "deploy_helpers.h"

namespace {

using namespace colod::deploy_test;  // NOLINT(google-build-using-namespace): test-local helpers

// ---------------------------------------------------------------------------------------------
// Manifests
// ---------------------------------------------------------------------------------------------

YAML::Node pod() { return daemonSet()["spec"]["template"]["spec"]; }

TEST(Deploy, NamespaceIsLabelledForThePrivilegedPodSecurityLevelWithAReason) {
  const auto docs = YAML::LoadAllFromFile((kRoot / "deploy/daemonset.yaml").string());
  const YAML::Node ns = findDoc(docs, "Namespace");
  ASSERT_TRUE(ns) << "no Namespace document";
  EXPECT_EQ(ns["metadata"]["name"].as<std::string>(),
            daemonSet()["metadata"]["namespace"].as<std::string>());
  ASSERT_TRUE(ns["metadata"]["labels"]["pod-security.kubernetes.io/enforce"]);
  EXPECT_EQ(ns["metadata"]["labels"]["pod-security.kubernetes.io/enforce"].as<std::string>(),
            "privileged");
  const std::string why = commentAbove(readFile(kRoot / "deploy/daemonset.yaml"),
                                       "pod-security.kubernetes.io/enforce:");
  EXPECT_NE(why.find("hostPath"), std::string::npos)
      << "the label needs a comment saying why (which baseline checks the pod fails): " << why;
}

TEST(Deploy, NoHostPidOrSysPtraceWithoutAMeasuredNeedNextToThem) {
  const std::string text = readFile(kRoot / "deploy/daemonset.yaml");
  const YAML::Node p = pod();
  if (p["hostPID"] && p["hostPID"].as<bool>()) {
    EXPECT_NE(commentAbove(text, "hostPID:").find("measured"), std::string::npos)
        << "hostPID: true without a comment stating the measured need";
  }
  for (const char* list : {"containers", "initContainers"}) {
    for (const auto& c : p[list]) {
      for (const auto& cap : child(c, {"securityContext", "capabilities", "add"})) {
        const auto name = cap.as<std::string>();
        if (name == "SYS_PTRACE" || name == "SYS_ADMIN") {
          EXPECT_NE(commentAbove(text, "add:").find("measured"), std::string::npos)
              << name << " added without a comment stating the measured need";
        }
      }
    }
  }
  // The reason hostPID is not there: colod reads no other process's /proc (today only
  // <proc_root>/self/..., userspace/daemon/src/self_stats.cpp). A heuristic guard over the
  // non-test sources: "/proc/" followed by a pid (concatenated, a digit, a format field), or
  // proc_root + "/" + something. /proc/self, /proc/sys and other node-wide files are fine.
  std::vector<std::string> offenders;
  const std::regex proc_use(
      R"re("/proc/"|"/proc/(\d|\{|%)|proc_root\s*\+\s*"/"|proc_root\s*\+\s*"/(\d|\{|%))re");
  for (const auto& e : fs::recursive_directory_iterator(kRoot / "userspace")) {
    const auto name = e.path().filename().string();
    const auto ext = e.path().extension().string();
    const auto rel = fs::relative(e.path(), kRoot).string();
    if (!e.is_regular_file() || (ext != ".cpp" && ext != ".h") ||
        name.find("_test") != std::string::npos || rel.find("/e2e/") != std::string::npos ||
        rel.find("/faults/") != std::string::npos) {
      continue;
    }
    const std::string src = readFile(e.path());
    if (std::regex_search(src, proc_use)) {
      offenders.push_back(rel);
    }
  }
  EXPECT_TRUE(offenders.empty())
      << "these read /proc beyond /proc/self; if colod needs another process's /proc, the "
         "DaemonSet needs hostPID (and a measured reason): "
      << offenders.front();
}

TEST(Deploy, ColodContainerAddsBpfAndPerfmonOnlyEachExplained) {
  const std::string text = readFile(kRoot / "deploy/daemonset.yaml");
  const YAML::Node c = podContainer(pod(), "colod");
  ASSERT_TRUE(c) << "no container named colod";
  const YAML::Node sc = c["securityContext"];
  EXPECT_EQ(daemonSetCapabilities(), (std::set<std::string>{"BPF", "PERFMON"}));
  ASSERT_TRUE(sc["capabilities"]["drop"].IsSequence());
  EXPECT_EQ(sc["capabilities"]["drop"][0].as<std::string>(), "ALL");
  EXPECT_FALSE(sc["privileged"].as<bool>());
  EXPECT_FALSE(sc["allowPrivilegeEscalation"].as<bool>());
  EXPECT_TRUE(sc["readOnlyRootFilesystem"].as<bool>());
  // Each capability has a line of its own saying what it is for.
  for (const auto& cap : daemonSetCapabilities()) {
    EXPECT_TRUE(std::regex_search(text, std::regex("#\\s+" + cap + "\\s+\\S")))
        << "no comment line saying what " << cap << " is for";
  }
  // The helper containers run unprivileged.
  for (const char* name : {"render-config", "config-reloader"}) {
    const YAML::Node h = podContainer(pod(), name);
    ASSERT_TRUE(h) << "no container " << name;
    EXPECT_TRUE(h["securityContext"]["runAsNonRoot"].as<bool>()) << name;
    EXPECT_FALSE(child(h, {"securityContext", "capabilities", "add"})) << name;
    const YAML::Node drop = child(h, {"securityContext", "capabilities", "drop"});
    ASSERT_TRUE(drop && drop.IsSequence()) << name;
    EXPECT_EQ(drop[0].as<std::string>(), "ALL") << name;
  }
}

TEST(Deploy, SeccompAndAppArmorAreTheRuntimeDefaults) {
  const YAML::Node p = pod();
  const YAML::Node pod_seccomp = child(p, {"securityContext", "seccompProfile", "type"});
  const bool pod_level = pod_seccomp && pod_seccomp.as<std::string>() == "RuntimeDefault";
  for (const char* list : {"containers", "initContainers"}) {
    for (const auto& c : p[list]) {
      const YAML::Node own = child(c, {"securityContext", "seccompProfile", "type"});
      if (own) {
        EXPECT_EQ(own.as<std::string>(), "RuntimeDefault") << c["name"].as<std::string>();
      } else {
        EXPECT_TRUE(pod_level) << c["name"].as<std::string>() << " has no seccomp profile";
      }
      const YAML::Node aa = child(c, {"securityContext", "appArmorProfile", "type"});
      if (aa) {
        EXPECT_EQ(aa.as<std::string>(), "RuntimeDefault") << c["name"].as<std::string>();
      }
    }
  }
  const YAML::Node colod_aa =
      child(podContainer(p, "colod"), {"securityContext", "appArmorProfile", "type"});
  ASSERT_TRUE(colod_aa) << "colod has no appArmorProfile";
  EXPECT_EQ(colod_aa.as<std::string>(), "RuntimeDefault");
  EXPECT_EQ(readFile(kRoot / "deploy/daemonset.yaml").find("Unconfined"), std::string::npos);
}

// Path of the file `path` as seen through `c`'s mounts: {volume name, path inside the volume}.
std::pair<std::string, std::string> volumeOf(const YAML::Node& c, const std::string& path) {
  for (const auto& m : c["volumeMounts"]) {
    const auto mount = m["mountPath"].as<std::string>();
    if (path.rfind(mount + "/", 0) == 0) {
      return {m["name"].as<std::string>(), path.substr(mount.size() + 1)};
    }
  }
  return {"", ""};
}

YAML::Node volume(const std::string& name) {
  for (const auto& v : pod()["volumes"]) {
    if (v["name"].as<std::string>() == name) {
      return v;
    }
  }
  return {};
}

std::string colodConfigArg() {
  const YAML::Node args = podContainer(pod(), "colod")["args"];
  for (std::size_t i = 0; i + 1 < args.size(); ++i) {
    if (args[i].as<std::string>() == "--config") {
      return args[i + 1].as<std::string>();
    }
  }
  return "";
}

TEST(Deploy, MetricsListenOnThePodIpFromTheDownwardApiWithAReason) {
  const std::string text = readFile(kRoot / "deploy/daemonset.yaml");
  const YAML::Node p = pod();
  const YAML::Node colod = podContainer(p, "colod");
  const std::string config_path = colodConfigArg();
  ASSERT_FALSE(config_path.empty()) << "colod is not given --config";
  const auto [config_volume, config_file] = volumeOf(colod, config_path);
  ASSERT_FALSE(config_volume.empty()) << config_path << " is on no volume";

  // The ConfigMap keeps colod's loopback default; the port is the container's metrics port.
  const YAML::Node cm = YAML::LoadFile((kRoot / "deploy/configmap.yaml").string());
  const YAML::Node cfg = YAML::Load(cm["data"]["config.yaml"].as<std::string>());
  const auto listen = cfg["daemon"]["metrics_listen"].as<std::string>();
  EXPECT_EQ(listen.rfind("127.0.0.1:", 0), 0U) << listen;
  int metrics_port = 0;
  for (const auto& port : colod["ports"]) {
    if (port["name"].as<std::string>() == "metrics") {
      metrics_port = port["containerPort"].as<int>();
    }
  }
  EXPECT_EQ(listen.substr(listen.rfind(':') + 1), std::to_string(metrics_port));

  // render-config (init) and config-reloader (sidecar) write that file from the ConfigMap with
  // the IP from the downward API.
  const std::string ip_field =
      p["hostNetwork"] && p["hostNetwork"].as<bool>() ? "status.hostIP" : "status.podIP";
  for (const char* name : {"render-config", "config-reloader"}) {
    SCOPED_TRACE(name);
    const YAML::Node c = podContainer(p, name);
    ASSERT_TRUE(c);
    std::vector<std::string> cmd;
    for (const auto& w : c["command"]) {
      cmd.push_back(w.as<std::string>());
    }
    ASSERT_GE(cmd.size(), 3U);
    EXPECT_EQ(cmd.front(), "/usr/lib/colod/render-config");
    const std::string& src = cmd[cmd.size() - 2];
    const std::string& dst = cmd.back();
    const auto [src_volume, src_key] = volumeOf(c, src);
    const YAML::Node cm_name = child(volume(src_volume), {"configMap", "name"});
    ASSERT_TRUE(cm_name) << src << " is not on a ConfigMap volume";
    EXPECT_EQ(cm_name.as<std::string>(), cm["metadata"]["name"].as<std::string>());
    EXPECT_TRUE(cm["data"][src_key]) << "the ConfigMap has no key " << src_key;
    EXPECT_EQ(volumeOf(c, dst), std::make_pair(config_volume, config_file))
        << "writes " << dst << ", colod reads " << config_path;
    bool from_downward_api = false;
    for (const auto& e : c["env"]) {
      const YAML::Node field = child(e, {"valueFrom", "fieldRef", "fieldPath"});
      if (e["name"].as<std::string>() == "COLOD_METRICS_IP" && field) {
        from_downward_api = field.as<std::string>() == ip_field;
      }
    }
    EXPECT_TRUE(from_downward_api) << "COLOD_METRICS_IP must come from " << ip_field;
  }
  EXPECT_EQ(podContainer(p, "config-reloader")["command"][1].as<std::string>(), "--watch");
  EXPECT_TRUE(child(volume(config_volume), {"emptyDir"}))
      << "the rendered config lives in an emptyDir";
  const std::string why = commentAbove(text, "- name: COLOD_METRICS_IP");
  EXPECT_NE(why.find("127.0.0.1"), std::string::npos)
      << "the downward-API address needs a comment saying why (colod's loopback default): " << why;

  // The image installs render-config where the manifests call it.
  EXPECT_NE(readFile(kRoot / "deploy/Containerfile")
                .find("/src/deploy/render-config.sh /out/usr/lib/colod/render-config"),
            std::string::npos);
}

// Runs deploy/render-config.sh as the DaemonSet does, on the ConfigMap's file.
class RenderConfig : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(dir_.ok());
    const YAML::Node cm = YAML::LoadFile((kRoot / "deploy/configmap.yaml").string());
    src_ = dir_.path() / "configmap-config.yaml";
    std::ofstream(src_) << cm["data"]["config.yaml"].as<std::string>();
    dst_ = dir_.path() / "config.yaml";
  }
  RunResult render(const std::string& ip, const std::vector<std::string>& extra = {}) {
    std::vector<std::string> argv{"sh", (kRoot / "deploy/render-config.sh").string()};
    argv.insert(argv.end(), extra.begin(), extra.end());
    argv.push_back(src_.string());
    argv.push_back(dst_.string());
    return run(argv, {"COLOD_METRICS_IP=" + ip});
  }
  TempDir dir_;
  fs::path src_;
  fs::path dst_;
};

TEST_F(RenderConfig, SetsThePodIpKeepsThePortAndEverythingElse) {
  for (const auto& [ip, want] : std::vector<std::pair<std::string, std::string>>{
           {"10.244.3.17", "10.244.3.17:9477"}, {"fd00:10:244::5", "[fd00:10:244::5]:9477"}}) {
    SCOPED_TRACE(ip);
    const auto r = render(ip);
    ASSERT_EQ(r.exit_code, 0) << r.err;
    const YAML::Node in = YAML::LoadFile(src_.string());
    YAML::Node out = YAML::LoadFile(dst_.string());
    EXPECT_EQ(out["daemon"]["metrics_listen"].as<std::string>(), want);
    out["daemon"]["metrics_listen"] = in["daemon"]["metrics_listen"].as<std::string>();
    std::string why;
    EXPECT_TRUE(sameYaml(out, in, "config", why)) << why;
    EXPECT_EQ(fs::status(dst_).permissions() & fs::perms::others_read, fs::perms::others_read)
        << "colod (uid 0 without CAP_DAC_OVERRIDE) reads a file written by uid 65534";
    // colod itself accepts the result.
    const auto check = run({COLOD_BIN, "--check-config", dst_.string()});
    EXPECT_EQ(check.exit_code, 0) << check.out << check.err;
  }
}

TEST_F(RenderConfig, RewritesOnlyOnChangeAndRefusesBadInput) {
  ASSERT_EQ(render("10.0.0.1").exit_code, 0);
  struct stat before {};
  ASSERT_EQ(::stat(dst_.c_str(), &before), 0);
  ASSERT_EQ(render("10.0.0.1").exit_code, 0);
  struct stat same {};
  ASSERT_EQ(::stat(dst_.c_str(), &same), 0);
  EXPECT_EQ(same.st_ino, before.st_ino) << "an unchanged config must not be rewritten (reload)";
  ASSERT_EQ(render("10.0.0.2").exit_code, 0);
  struct stat changed {};
  ASSERT_EQ(::stat(dst_.c_str(), &changed), 0);
  EXPECT_NE(changed.st_ino, before.st_ino) << "a change must arrive by rename (inotify)";

  const std::string good = readFile(dst_);
  for (const auto& bad : {std::string(""), std::string("10.0.0.1; rm -rf /"), std::string("x")}) {
    const auto r = render(bad);
    EXPECT_EQ(r.exit_code, 1) << "'" << bad << "'";
    EXPECT_NE(r.err.find("COLOD_METRICS_IP"), std::string::npos) << r.err;
  }
  std::ofstream(src_) << "daemon:\n  interval_ms: 100\n";
  const auto r = render("10.0.0.3");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("metrics_listen"), std::string::npos) << r.err;
  EXPECT_EQ(readFile(dst_), good) << "a failed render must leave the running file alone";
  EXPECT_EQ(run({"sh", (kRoot / "deploy/render-config.sh").string()}).exit_code, 2);
}

TEST_F(RenderConfig, WatchModePicksUpAChangedConfigMapAndStopsOnSigterm) {
  const pid_t pid = ::fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    ::setenv("COLOD_METRICS_IP", "10.0.0.7", 1);
    const std::string script = (kRoot / "deploy/render-config.sh").string();
    ::execlp("sh", "sh", script.c_str(), "--watch", "1", src_.c_str(), dst_.c_str(), nullptr);
    ::_exit(127);
  }
  auto waitFor = [](const std::function<bool()>& cond) {
    for (int i = 0; i < 100; ++i) {
      if (cond()) {
        return true;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    return false;
  };
  EXPECT_TRUE(waitFor([&] { return fs::exists(dst_); }));
  std::string text = readFile(src_);
  text.replace(text.find("log_level: info"), 15, "log_level: debug");
  std::ofstream(src_) << text;
  EXPECT_TRUE(waitFor([&] { return readFile(dst_).find("log_level: debug") != std::string::npos; }))
      << "the sidecar did not pick up the changed source within 5 s";
  ASSERT_EQ(::kill(pid, SIGTERM), 0);
  int status = 0;
  const bool exited = waitFor([&] { return ::waitpid(pid, &status, WNOHANG) == pid; });
  if (!exited) {
    ::kill(pid, SIGKILL);
    ::waitpid(pid, &status, 0);
  }
  EXPECT_TRUE(exited) << "render-config --watch ignored SIGTERM (PID 1 of its container)";
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
}

TEST(Deploy, ProbesAreHealthzReadyzAndAStartupProbe) {
  const YAML::Node c = podContainer(pod(), "colod");
  const std::vector<std::pair<std::string, std::string>> want = {
      {"startupProbe", "/healthz"}, {"livenessProbe", "/healthz"}, {"readinessProbe", "/readyz"}};
  for (const auto& [probe, path] : want) {
    ASSERT_TRUE(c[probe]) << "no " << probe;
    EXPECT_EQ(c[probe]["httpGet"]["path"].as<std::string>(), path) << probe;
    EXPECT_EQ(c[probe]["httpGet"]["port"].as<std::string>(), "metrics") << probe;
    EXPECT_FALSE(child(c, {probe.c_str(), "httpGet", "host"}))
        << probe << ": the kubelet probes the pod IP";
  }
  // The startup probe gives BPF loading a minute before liveness may restart the container.
  EXPECT_GE(c["startupProbe"]["periodSeconds"].as<int>() *
                c["startupProbe"]["failureThreshold"].as<int>(),
            30);
}

TEST(Deploy, PrometheusScrapeAnnotationsAndAPodMonitor) {
  const YAML::Node ds = daemonSet();
  const YAML::Node ann = ds["spec"]["template"]["metadata"]["annotations"];
  EXPECT_EQ(ann["prometheus.io/scrape"].as<std::string>(), "true");
  EXPECT_EQ(ann["prometheus.io/path"].as<std::string>(), "/metrics");
  std::string port;
  for (const auto& p : podContainer(pod(), "colod")["ports"]) {
    if (p["name"].as<std::string>() == "metrics") {
      port = p["containerPort"].as<std::string>();
    }
  }
  EXPECT_EQ(ann["prometheus.io/port"].as<std::string>(), port);

  const YAML::Node pm = YAML::LoadFile((kRoot / "deploy/podmonitor.yaml").string());
  EXPECT_EQ(pm["apiVersion"].as<std::string>(), "monitoring.coreos.com/v1");
  EXPECT_EQ(pm["kind"].as<std::string>(), "PodMonitor");
  EXPECT_EQ(pm["metadata"]["namespace"].as<std::string>(),
            ds["metadata"]["namespace"].as<std::string>());
  for (const auto& kv : pm["spec"]["selector"]["matchLabels"]) {
    const auto key = kv.first.as<std::string>();
    EXPECT_EQ(ds["spec"]["template"]["metadata"]["labels"][key].as<std::string>(),
              kv.second.as<std::string>())
        << "the PodMonitor selects no colod pod on " << key;
  }
  const YAML::Node ep = pm["spec"]["podMetricsEndpoints"][0];
  EXPECT_EQ(ep["port"].as<std::string>(), "metrics");
  EXPECT_EQ(ep["path"].as<std::string>(), "/metrics");
  // colod's own pod/namespace/container labels must survive the target's (dashboard queries).
  EXPECT_TRUE(ep["honorLabels"].as<bool>());
  bool node_label = false;
  for (const auto& r : ep["relabelings"]) {
    node_label =
        node_label || (r["targetLabel"].as<std::string>() == "node" &&
                       r["sourceLabels"][0].as<std::string>() == "__meta_kubernetes_pod_node_name");
  }
  EXPECT_TRUE(node_label) << "the dashboard's $node variable needs a node label";
}

TEST(Deploy, DaemonSetHasTheMountsAndResourcesTheReadmePromises) {
  const auto docs = YAML::LoadAllFromFile((kRoot / "deploy/daemonset.yaml").string());
  ASSERT_EQ(docs.size(), 2U);
  const YAML::Node ds = findDoc(docs, "DaemonSet");
  ASSERT_TRUE(ds) << "no DaemonSet document";
  EXPECT_EQ(ds["apiVersion"].as<std::string>(), "apps/v1");
  // Selector must match the template labels or the API server rejects the object.
  EXPECT_EQ(
      ds["spec"]["selector"]["matchLabels"]["app.kubernetes.io/name"].as<std::string>(),
      ds["spec"]["template"]["metadata"]["labels"]["app.kubernetes.io/name"].as<std::string>());
  const YAML::Node p = pod();
  const YAML::Node c = podContainer(p, "colod");
  EXPECT_EQ(c["resources"]["requests"]["cpu"].as<std::string>(), "50m");
  EXPECT_EQ(c["resources"]["limits"]["memory"].as<std::string>(), "128Mi");
  EXPECT_FALSE(c["resources"]["limits"]["cpu"]) << "a CFS quota would delay colod's reaction";

  std::set<std::string> volumes;
  for (const auto& v : p["volumes"]) {
    volumes.insert(v["name"].as<std::string>());
  }
  for (const char* list : {"containers", "initContainers"}) {
    for (const auto& ct : p[list]) {
      for (const auto& m : ct["volumeMounts"]) {
        EXPECT_TRUE(volumes.count(m["name"].as<std::string>())) << m["name"].as<std::string>();
      }
    }
  }
  std::map<std::string, bool> mounts;  // path -> read-only
  for (const auto& m : c["volumeMounts"]) {
    mounts[m["mountPath"].as<std::string>()] = m["readOnly"] && m["readOnly"].as<bool>();
  }
  const std::vector<std::pair<std::string, bool>> want = {
      {"/var/run/nri", false},   {"/sys/fs/cgroup", true}, {"/sys/kernel/btf", true},
      {"/var/lib/colod", false}, {"/etc/colod", true},     {"/run/colod", false},
  };
  for (const auto& [path, ro] : want) {
    ASSERT_TRUE(mounts.count(path)) << "missing mount " << path;
    EXPECT_EQ(mounts[path], ro) << path;
  }
  // tp_btf/raw_tp attach through bpf(), not tracefs: no tracing mount.
  EXPECT_FALSE(mounts.count("/sys/kernel/tracing"));
  EXPECT_FALSE(mounts.count("/sys/kernel/debug"));
}

TEST(Deploy, ConfigPathIsColodsDefaultEverywhere) {
  const std::string def = colodDefaultConfigPath();
  ASSERT_FALSE(def.empty()) << "kDefaultConfig not found in userspace/daemon/src/main.cpp";
  EXPECT_EQ(colodConfigArg(), def) << "DaemonSet";
  EXPECT_NE(readFile(kRoot / "deploy/Containerfile").find("CMD [\"--config\", \"" + def + "\"]"),
            std::string::npos)
      << "Containerfile CMD";
  const auto unit = unitKeys(readFile(kRoot / "deploy/colod.service"));
  EXPECT_EQ(unitValue(unit, "ExecStart"), "/usr/local/bin/colod --config " + def);
  EXPECT_EQ(unitValue(unit, "ExecStartPre"), "/usr/local/bin/colod --check-config " + def);
  EXPECT_NE(readFile(kRoot / "deploy/README.md").find("deploy/config.yaml " + def),
            std::string::npos)
      << "the README's install step must put the config at " << def;
}

TEST(Deploy, ConfigMapPolicyEqualsPolicyDefaults) {
  const YAML::Node cm = YAML::LoadFile((kRoot / "deploy/configmap.yaml").string());
  EXPECT_EQ(cm["kind"].as<std::string>(), "ConfigMap");
  EXPECT_EQ(cm["metadata"]["name"].as<std::string>(), "colod-config");
  ASSERT_TRUE(cm["data"]["config.yaml"]);
  const YAML::Node config = YAML::Load(cm["data"]["config.yaml"].as<std::string>());
  ASSERT_TRUE(config["policy"]) << "ConfigMap config.yaml has no policy: section";
  const YAML::Node defaults = YAML::LoadFile((kRoot / "policy/config/default.yaml").string());
  std::string why;
  EXPECT_TRUE(sameYaml(config["policy"], defaults, "policy", why))
      << why << " (run deploy/gen-config.sh)";

  // deploy/config.yaml (systemd hosts) is the same document.
  const YAML::Node file = YAML::LoadFile((kRoot / "deploy/config.yaml").string());
  EXPECT_TRUE(sameYaml(file, config, "config.yaml", why)) << why;
}

}  // namespace
