// SPDX-License-Identifier: Apache-2.0
#include "format.h"

#include <cinttypes>
#include <cstdio>
#include <ctime>
#include <string_view>

#include "colod/control/names.h"

namespace colod::ctl {

namespace {
std::string clip(std::string_view s, std::size_t width) {
  if (s.size() <= width) {
    return std::string(s);
  }
  return "…" + std::string(s.substr(s.size() - (width - 1)));
}
std::string fmt(const char* f, auto... args) {
  char buf[512];
  std::snprintf(buf, sizeof buf, f, args...);
  return buf;
}
std::string timeOf(int64_t unix_ms) {
  const time_t secs = static_cast<time_t>(unix_ms / 1000);
  tm local{};
  localtime_r(&secs, &local);
  char buf[32];
  std::strftime(buf, sizeof buf, "%H:%M:%S", &local);
  return buf;
}
}  // namespace

std::string formatDurationNs(uint64_t ns) {
  if (ns == 0) {
    return "0";
  }
  if (ns < 1'000'000) {
    return fmt("%" PRIu64 "us", ns / 1000);
  }
  if (ns < 1'000'000'000) {
    return fmt("%.1fms", static_cast<double>(ns) / 1e6);
  }
  return fmt("%.2fs", static_cast<double>(ns) / 1e9);
}

std::string formatQuota(int64_t quota_us, uint64_t period_us) {
  if (quota_us <= 0 || period_us == 0) {
    return "-";
  }
  return fmt("%.2f", static_cast<double>(quota_us) / static_cast<double>(period_us));
}

std::string formatTop(const control::v1::ListContainersReply& list,
                      const control::v1::StatusReply* status) {
  std::string out;
  if (status != nullptr) {
    out += fmt("colod %s  mode %s  nri %s  containers %" PRIu64 "  interval %" PRId64
               " ms  updates %" PRIu64 " (failed %" PRIu64 ")  rss %.1f MiB\n",
               status->version().c_str(), status->mode().c_str(),
               status->nri_connected() ? "connected" : "DISCONNECTED", status->containers(),
               status->interval_ms(), status->updates_sent(), status->update_failures(),
               static_cast<double>(status->rss_bytes()) / (1 << 20));
  }
  out += fmt("%-36s %-7s %7s %7s %7s %-26s %8s %8s %-8s %5s %6s\n", "CONTAINER", "TIER",
             "P50us", "P99us", "PREEMPT", "PREEMPTED BY", "THROTTLE", "RECLAIM", "CPUSET",
             "QUOTA", "SHARES");
  for (const auto& c : list.containers()) {
    std::string by = "-";
    if (c.preempted_by_size() > 0) {
      const auto& a = c.preempted_by(0);
      by = clip(a.container(), 20) + ":" + std::to_string(a.preemptions());
    }
    out += fmt("%-36s %-7s %7" PRIu64 " %7" PRIu64 " %7" PRIu64 " %-26s %8s %8s %-8s %5s %6" PRIu64
               "%s\n",
               clip(control::displayName(c), 36).c_str(), c.tier().c_str(), c.runq_p50_us(),
               c.runq_p99_us(), c.preemptions(), clip(by, 26).c_str(),
               formatDurationNs(c.throttled_ns()).c_str(),
               formatDurationNs(c.reclaim_stall_ns()).c_str(),
               clip(c.cpuset().empty() ? "all" : c.cpuset(), 8).c_str(),
               formatQuota(c.quota_us(), c.period_us()).c_str(), c.shares(),
               c.managed() ? " *" : "");
  }
  if (list.containers_size() == 0) {
    out += "(no containers known: is the runtime connected?)\n";
  }
  return out;
}

std::string formatDecisions(const control::v1::DecisionsReply& decisions) {
  std::string out;
  for (const auto& d : decisions.decisions()) {
    out += fmt("%s #%-5" PRIu64 " %-22s %-40s %-28s %-10s %s\n", timeOf(d.unix_ms()).c_str(),
               d.seq(), d.kind().c_str(),
               clip(d.container().empty() ? d.container_id() : d.container(), 40).c_str(),
               d.values().c_str(), d.outcome().c_str(), d.reason().c_str());
  }
  if (decisions.decisions_size() == 0) {
    out += "(no decisions yet)\n";
  }
  return out;
}

std::string formatStatus(const control::v1::StatusReply& s) {
  // Updates are retried until the runtime confirms them: what matters is what is still pending,
  // not how many attempts failed on the way (those are in /metrics by reason).
  std::string pending = s.reconcile_pending() == 0
                            ? std::string("none")
                            : fmt("%" PRIu64 " containers (oldest %" PRId64 " ms)",
                                  s.reconcile_pending(), s.reconcile_oldest_pending_ms());
  return fmt("version:        %s\nmode:           %s\nnri:            %s (reconnects %" PRIu64
             ")\ncontainers:     %" PRIu64 "\nticks:          %" PRIu64
             "\ninterval:       %" PRId64 " ms\ncgroup mode:    %s\nconfig:         %s\n"
             "held by colod:  %" PRIu64 " containers\nupdates:        %" PRIu64
             " confirmed, %" PRIu64 " failed attempts (all retried); pending: %s\n"
             "journal:        %" PRIu64 " entries\nrss:            %.1f MiB\ncpu:            %.2f s\n",
             s.version().c_str(), s.mode().c_str(),
             s.nri_connected() ? "connected" : "disconnected", s.nri_reconnects(), s.containers(),
             s.ticks(), s.interval_ms(), s.cgroup_mode().c_str(),
             s.config_path().empty() ? "(built-in defaults)" : s.config_path().c_str(),
             s.reconcile_tracked(), s.updates_sent(), s.update_failures(), pending.c_str(),
             s.journal_entries(), static_cast<double>(s.rss_bytes()) / (1 << 20),
             s.cpu_seconds());
}

}  // namespace colod::ctl
