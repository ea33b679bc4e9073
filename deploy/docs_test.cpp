// SPDX-License-Identifier: Apache-2.0
// Dashboard: every query names a metric colod exports (userspace/metrics/src/colod_metrics.cpp).
// README: requirements stated, no stale advice, the figures equal docs/benchmarks.md's latest.
// (label deploy; also unit)
#include "deploy_helpers.h"

namespace {

using namespace colod::deploy_test;  // NOLINT(google-build-using-namespace): test-local helpers

// ---------------------------------------------------------------------------------------------
// Dashboard
// ---------------------------------------------------------------------------------------------

// Metric families colod exports: name -> type, from the family()/perContainer()/scalar table
// entries of colod_metrics.cpp ("colod_x", MetricType::T).
std::map<std::string, std::string> exportedFamilies() {
  const std::string src = readFile(kRoot / "userspace/metrics/src/colod_metrics.cpp");
  std::map<std::string, std::string> out;
  const std::regex family(R"re("(colod_[a-z0-9_]+)",\s*MetricType::(\w+))re");
  for (std::sregex_iterator it(src.begin(), src.end(), family), end; it != end; ++it) {
    out[(*it)[1]] = (*it)[2];
  }
  return out;
}

TEST(Dashboard, EveryQueryNamesAMetricColodExports) {
  const auto families = exportedFamilies();
  ASSERT_GE(families.size(), 20U) << "could not read the metric families of colod_metrics.cpp";
  ASSERT_EQ(families.at("colod_runqueue_latency_seconds"), "Histogram");
  std::set<std::string> histograms;
  for (const auto& [name, type] : families) {
    if (type == "Histogram") {
      histograms.insert(name);
    }
  }
  std::vector<std::string> exprs;
  const auto names = dashboardMetricNames(&exprs);
  ASSERT_GE(exprs.size(), 15U);
  for (const auto& e : exprs) {
    EXPECT_NE(e.find("colod_"), std::string::npos) << "a query on no colod metric: " << e;
  }
  for (const auto& n : names) {
    const auto fam = familyOf(n, histograms);
    EXPECT_TRUE(families.count(fam)) << n << " is not a metric colod exports";
    if (fam == n) {
      EXPECT_EQ(histograms.count(n), 0U) << n << ": query a histogram through _bucket/_sum/_count";
    }
  }

  // Labels: the ones colod puts on its series, the histogram's le, and the target labels the
  // PodMonitor / Prometheus add.
  const std::string src = readFile(kRoot / "userspace/metrics/src/colod_metrics.cpp");
  std::set<std::string> labels{"le", "instance", "job"};
  const std::regex label_init(R"re(\{"([a-z_]+)",\s*[a-z])re");
  for (std::sregex_iterator it(src.begin(), src.end(), label_init), end; it != end; ++it) {
    labels.insert((*it)[1]);
  }
  const YAML::Node pm = YAML::LoadFile((kRoot / "deploy/podmonitor.yaml").string());
  for (const auto& r : pm["spec"]["podMetricsEndpoints"][0]["relabelings"]) {
    labels.insert(r["targetLabel"].as<std::string>());
  }
  for (const char* l : {"pod", "namespace", "container", "tier", "kind", "node"}) {
    EXPECT_TRUE(labels.count(l)) << "label " << l << " is no longer exported";
  }
  const std::regex by(R"(\b(?:by|without)\s*\(([^)]*)\))");
  const std::regex matcher(R"re(([A-Za-z_][A-Za-z0-9_]*)\s*(?:=~|!~|!=|=)\s*")re");
  for (const auto& e : exprs) {
    for (std::sregex_iterator it(e.begin(), e.end(), by), end; it != end; ++it) {
      std::string list = (*it)[1];
      std::replace(list.begin(), list.end(), ',', ' ');
      for (const auto& l : words(list)) {
        EXPECT_TRUE(labels.count(l)) << "label " << l << " in: " << e;
      }
    }
    for (std::sregex_iterator it(e.begin(), e.end(), matcher), end; it != end; ++it) {
      EXPECT_TRUE(labels.count((*it)[1])) << "label " << (*it)[1] << " in: " << e;
    }
  }
}

TEST(Dashboard, ShowsWhatAnOperatorLooksFor) {
  std::vector<std::string> exprs;
  const auto names = dashboardMetricNames(&exprs);
  for (const char* m :
       {"colod_runqueue_latency_seconds_bucket", "colod_preemptions_total", "colod_cpu_quota_cpus",
        "colod_cpuset_cpus", "colod_reconcile_tracked", "colod_reconcile_pending",
        "colod_reconcile_oldest_pending_seconds", "colod_decisions_total",
        "colod_process_cpu_seconds_total", "colod_process_resident_memory_bytes"}) {
    EXPECT_TRUE(names.count(m)) << "the dashboard shows no " << m;
  }
  const bool ls_p99 = std::any_of(exprs.begin(), exprs.end(), [](const std::string& e) {
    return e.find("histogram_quantile(0.99") != std::string::npos &&
           e.find("tier=\"ls\"") != std::string::npos && e.find("container") != std::string::npos;
  });
  EXPECT_TRUE(ls_p99) << "no LS run-queue p99 per container";
  const auto dash = nlohmann::json::parse(readFile(kRoot / "deploy/grafana/colod.json"));
  EXPECT_EQ(dash.at("uid"), "colod");
  EXPECT_TRUE(dash.at("templating").at("list").is_array());
}

// ---------------------------------------------------------------------------------------------
// README
// ---------------------------------------------------------------------------------------------

TEST(Readme, StatesTheRequirementsAndNoStaleKernelAdvice) {
  const std::string readme = readFile(kRoot / "deploy/README.md");
  bool kernel_row = false;
  for (const auto& line : splitLines(readme)) {
    kernel_row = kernel_row || (line.rfind('|', 0) == 0 && line.find("5.11") != std::string::npos &&
                                line.find("BTF") != std::string::npos);
  }
  EXPECT_TRUE(kernel_row) << "no requirements table row with the kernel (>= 5.11, BTF)";
  EXPECT_NE(readme.find("containerd"), std::string::npos);
  EXPECT_NE(readme.find("1.26"), std::string::npos) << "CRI-O >= 1.26";
  for (const char* stale :
       {"tracefs", "/sys/kernel/tracing", "kprobe", "older than 5.8", "< 5.8", "SYS_ADMIN` instead",
        "hostPID: true", "0.0.0.0", "Unconfined", "/etc/colod/colod.yaml"}) {
    EXPECT_EQ(readme.find(stale), std::string::npos) << "stale advice: " << stale;
  }
}

// The top-level README's "Where colod stands" figures are the latest colocation run's (the first
// "colocation:" line of docs/benchmarks.md), so they cannot go stale again.
TEST(Readme, WhereColodStandsQuotesTheLatestColocationRun) {
  const std::string bench = readFile(kRoot / "docs/benchmarks.md");
  std::smatch m;
  ASSERT_TRUE(std::regex_search(
      bench, m,
      std::regex(R"(colocation: ls_p99_solo_us=([0-9]+) ls_p99_nocolod_us=([0-9]+) )"
                 R"(ls_p99_colod_us=([0-9]+) be_ops_nocolod=([0-9]+) be_ops_colod=([0-9]+) )"
                 R"(reaction_p50_ms=([0-9]+) colod_rss_mib=([0-9.]+))")))
      << "no 'colocation:' line in docs/benchmarks.md";
  const std::string readme = readFile(kRoot / "README.md");
  const auto at = readme.find("Where colod stands");
  ASSERT_NE(at, std::string::npos);
  const std::string para = readme.substr(at, readme.find("\n\n", at) - at);
  char ratio[16];
  std::snprintf(ratio, sizeof ratio, "%.2f", std::stod(m[5].str()) / std::stod(m[4].str()));
  for (const std::string& want : {m[3].str() + " µs with colod", m[2].str() + " µs\nwithout it",
                                  m[1].str() + " µs alone", std::string(ratio) + " of its work",
                                  m[6].str() + "\nms (median)", m[7].str() + " MiB with 1000"}) {
    std::string flat_want = want;
    std::string flat_para = para;
    for (auto* x : {&flat_want, &flat_para}) {
      std::replace(x->begin(), x->end(), '\n', ' ');
    }
    EXPECT_NE(flat_para.find(flat_want), std::string::npos)
        << "README's 'Where colod stands' must say \"" << flat_want
        << "\" (the latest run in docs/benchmarks.md):\n"
        << para;
  }
}

TEST(Readme, MemoryFiguresAreTheLatestBenchmarks) {
  const std::string bench = readFile(kRoot / "docs/benchmarks.md");
  std::smatch m;
  ASSERT_TRUE(std::regex_search(
      bench, m,
      std::regex(
          R"(colod rss: ([0-9.]+) MiB with the large container set, ([0-9.]+) MiB with 10)")))
      << "no 'colod rss:' line in docs/benchmarks.md";
  std::set<std::string> latest{m[1], m[2]};  // the first entry is the latest run
  // And colod against 1000 live containers (scripts/bench/colod-scale.sh), its latest run: a
  // line of its own, not one of a side-by-side comparison (those are prefixed with the build).
  std::smatch live;
  ASSERT_TRUE(std::regex_search(
      bench, live,
      std::regex(R"(\ncolod-scale: containers=1000 resolved=1000 \S+ colod_rss_mib=([0-9.]+))")))
      << "no 'colod-scale: containers=1000' line in docs/benchmarks.md";
  latest.insert(live[1]);
  const std::string readme = readFile(kRoot / "deploy/README.md");
  std::set<std::string> quoted;
  const std::regex mib(R"(([0-9]+(?:\.[0-9]+)?) MiB)");
  for (std::sregex_iterator it(readme.begin(), readme.end(), mib), end; it != end; ++it) {
    quoted.insert((*it)[1]);
  }
  EXPECT_EQ(quoted, latest) << "deploy/README.md must quote colod's RSS as docs/benchmarks.md's "
                               "latest runs: the colocation run's two and colod-scale.sh's";
}

}  // namespace
