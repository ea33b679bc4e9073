// SPDX-License-Identifier: Apache-2.0
#include "colod/collectview/view.h"

#include <cstdio>

#include "colod/collect/format.h"

namespace colod::collectview {
namespace {

nlohmann::json psiJson(const collect::Psi& p) {
  auto line = [](const collect::PsiLine& l) {
    return nlohmann::json{{"avg10", l.avg10}, {"avg60", l.avg60}, {"avg300", l.avg300},
                          {"total_us", l.total_us}};
  };
  nlohmann::json j{{"some", line(p.some)}};
  if (p.full) {
    j["full"] = line(*p.full);
  }
  return j;
}

std::string shortPath(const std::string& path, std::size_t width) {
  if (path.empty()) {
    return "?";
  }
  if (path.size() <= width) {
    return path;
  }
  return "..." + path.substr(path.size() - (width - 3));
}

}  // namespace

collect::Snapshot filter(collect::Snapshot snap, std::string_view substr) {
  if (substr.empty()) {
    return snap;
  }
  std::erase_if(snap.cgroups, [&](const collect::CgroupSample& s) {
    return s.path.find(substr) == std::string::npos;
  });
  return snap;
}

nlohmann::json toJson(const collect::Snapshot& snap) {
  nlohmann::json cgs = nlohmann::json::array();
  for (const auto& s : snap.cgroups) {
    nlohmann::json aggr = nlohmann::json::array();
    for (const auto& a : s.preempted_by) {
      aggr.push_back({{"cgroup_id", a.cgroup_id}, {"path", a.path},
                      {"preemptions", a.preemptions}});
    }
    nlohmann::json c{
        {"id", s.id},
        {"path", s.path},
        {"runq",
         {{"count", s.runq.count},
          {"p50_us", s.runq.p50_us},
          {"p90_us", s.runq.p90_us},
          {"p99_us", s.runq.p99_us},
          {"max_us", s.runq.max_us},
          {"total_ns", s.runq.total_ns},
          {"stale", s.runq_stale},
          {"hist_us", s.runq_hist}}},
        {"involuntary_switches", s.involuntary_switches},
        {"preempted_wait_ns", s.preempted_wait_ns},
        {"preempted_by", aggr},
        {"oncpu_ns", s.oncpu_ns},
        {"oncpu_from_usage", s.oncpu_from_usage},
        {"wakeups", s.wakeups},
        {"runq_depth_sum", s.runq_depth_sum},
        {"reclaim",
         {{"count", s.reclaim_count},
          {"stall_ns", s.reclaim_stall_ns},
          {"pages", s.reclaim_pages},
          {"hist_us", s.reclaim_hist}}},
    };
    if (s.throttling) {
      c["throttling"] = {{"nr_periods", s.throttling->nr_periods},
                         {"nr_throttled", s.throttling->nr_throttled},
                         {"throttled_ns", s.throttling->throttled_ns}};
    }
    if (s.cpu_pressure) {
      c["cpu_pressure"] = psiJson(*s.cpu_pressure);
    }
    if (s.memory_pressure) {
      c["memory_pressure"] = psiJson(*s.memory_pressure);
    }
    cgs.push_back(std::move(c));
  }
  return nlohmann::json{
      {"interval_ns", snap.interval.count()},
      {"mode", collect::toString(snap.mode)},
      {"stats",
       {{"snapshots", snap.stats.snapshots},
        {"map_drops", snap.stats.map_drops},
        {"map_lock_skips", snap.stats.map_lock_skips},
        {"pruned_cgroups", snap.stats.pruned_cgroups},
        {"unresolved_ids", snap.stats.unresolved_ids},
        {"file_read_errors", snap.stats.file_read_errors}}},
      {"cgroups", std::move(cgs)},
  };
}

std::string renderTable(const collect::Snapshot& snap) {
  std::string out;
  char line[256];
  std::snprintf(line, sizeof(line), "%-32s %8s %7s %7s %8s %6s %7s %-20s %8s\n", "CGROUP",
                "WAITS", "P50us", "P99us", "CPUms", "INVOL", "RECLms", "TOP-AGGRESSOR",
                "THROTTL");
  out += line;
  for (const auto& s : snap.cgroups) {
    std::string aggr = "-";
    if (!s.preempted_by.empty()) {
      aggr = shortPath(s.preempted_by.front().path, 14) + "(" +
             std::to_string(s.preempted_by.front().preemptions) + ")";
    }
    const std::string thr = s.throttling ? std::to_string(s.throttling->nr_throttled) : "-";
    std::snprintf(line, sizeof(line), "%-32s %8llu %7llu %7llu %8.1f %6llu %7.1f %-20s %8s\n",
                  shortPath(s.path, 32).c_str(), static_cast<unsigned long long>(s.runq.count),
                  static_cast<unsigned long long>(s.runq.p50_us),
                  static_cast<unsigned long long>(s.runq.p99_us),
                  static_cast<double>(s.oncpu_ns) / 1e6,
                  static_cast<unsigned long long>(s.involuntary_switches),
                  static_cast<double>(s.reclaim_stall_ns) / 1e6, aggr.c_str(), thr.c_str());
    out += line;
  }
  return out;
}

std::string renderHistograms(const collect::Snapshot& snap) {
  std::string out;
  for (const auto& s : snap.cgroups) {
    const std::string h = collect::formatLog2Hist(s.runq_hist, "usecs");
    const std::string r = collect::formatLog2Hist(s.reclaim_hist, "usecs");
    if (h.empty() && r.empty()) {
      continue;
    }
    out += "cgroup " + (s.path.empty() ? std::to_string(s.id) : s.path) + "\n";
    if (!h.empty()) {
      out += "run-queue latency:\n" + h;
    }
    if (!r.empty()) {
      out += "reclaim stall:\n" + r;
    }
    out += "\n";
  }
  return out;
}

}  // namespace colod::collectview
