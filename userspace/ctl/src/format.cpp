// SPDX-License-Identifier: Apache-2.0
#include "format.h"

#include <array>
#include <cinttypes>
#include <cmath>
#include <cstdio>
#include <ctime>
#include <map>
#include <memory>
#include <sstream>
#include <vector>

#include "colod/control/names.h"
#include "text.h"

namespace colod::ctl {

namespace v1 = control::v1;

std::string formatClock(int64_t unix_ms) {
  const auto secs = static_cast<time_t>(unix_ms / 1000);
  tm local{};
  localtime_r(&secs, &local);
  std::array<char, 32> buf{};
  if (std::strftime(buf.data(), buf.size(), "%H:%M:%S", &local) == 0) {
    return "?";
  }
  return buf.data();
}

std::string formatDurationNs(uint64_t ns) {
  if (ns == 0) {
    return "0";
  }
  if (ns < 1'000'000) {
    return strprintf("%" PRIu64 "us", ns / 1000);
  }
  if (ns < 1'000'000'000) {
    return strprintf("%.1fms", static_cast<double>(ns) / 1e6);
  }
  return strprintf("%.2fs", static_cast<double>(ns) / 1e9);
}

std::string formatQuota(int64_t quota_us, uint64_t period_us) {
  if (quota_us < 0) {
    return "max";
  }
  if (quota_us == 0 || period_us == 0) {
    return "-";
  }
  return strprintf("%.2f", static_cast<double>(quota_us) / static_cast<double>(period_us));
}

std::string formatWho(std::string_view container) {
  if (container.empty() || container == "/") {
    return "host (root cgroup)";
  }
  return std::string(container);
}

std::string formatTop(const v1::ListContainersReply& list, const v1::StatusReply* status) {
  std::string out;
  if (status != nullptr) {
    out += strprintf("colod %s  mode %s  nri %s  containers %" PRIu64 "  interval %" PRId64
                     " ms  updates %" PRIu64 " (failed %" PRIu64 ")  rss %.1f MiB\n",
                     status->version().c_str(), status->mode().c_str(),
                     status->nri_connected() ? "connected" : "DISCONNECTED", status->containers(),
                     status->interval_ms(), status->updates_sent(), status->update_failures(),
                     static_cast<double>(status->rss_bytes()) / (1 << 20));
  }
  // Columns: width and alignment. Text columns are clipped (front: the end of a name is the
  // informative part); numbers are never cut.
  auto row = [](std::string_view name, std::string_view tier, std::string_view p50,
                std::string_view p99, std::string_view preempt, std::string_view by,
                std::string_view throttle, std::string_view reclaim, std::string_view cpuset,
                std::string_view quota, std::string_view shares, std::string_view mark) {
    return padRight(clipFront(name, 36), 36) + " " + padRight(clipFront(tier, 7), 7) + " " +
           padLeft(p50, 7) + " " + padLeft(p99, 7) + " " + padLeft(preempt, 7) + " " +
           padRight(clipFront(by, 26), 26) + " " + padLeft(throttle, 8) + " " +
           padLeft(reclaim, 8) + " " + padRight(clipFront(cpuset, 8), 8) + " " + padLeft(quota, 5) +
           " " + padLeft(shares, 6) + std::string(mark) + "\n";
  };
  out += row("CONTAINER", "TIER", "P50us", "P99us", "PREEMPT", "PREEMPTED BY", "THROTTLE",
             "RECLAIM", "CPUSET", "QUOTA", "SHARES", "");
  for (const auto& c : list.containers()) {
    std::string by = "-";
    if (c.preempted_by_size() > 0) {
      const auto& a = c.preempted_by(0);
      by = clipFront(formatWho(a.container()), 20) + ":" + std::to_string(a.preemptions());
    }
    out += row(control::displayName(c), c.tier(), std::to_string(c.runq_p50_us()),
               std::to_string(c.runq_p99_us()), std::to_string(c.preemptions()), by,
               formatDurationNs(c.throttled_ns()), formatDurationNs(c.reclaim_stall_ns()),
               c.cpuset().empty() ? "all" : c.cpuset(), formatQuota(c.quota_us(), c.period_us()),
               std::to_string(c.shares()), c.managed() ? " *" : "");
  }
  if (list.containers_size() == 0) {
    out += "(no containers known: is the runtime connected?)\n";
  }
  return out;
}

namespace {

std::string decisionTarget(const v1::Decision& d) {
  if (!d.container().empty()) {
    return d.container();
  }
  return d.container_id().empty() ? std::string("-") : d.container_id().substr(0, 12);
}

std::string decisionLine(const v1::Decision& d) {
  return formatClock(d.unix_ms()) + " " + padRight("#" + std::to_string(d.seq()), 6) + " " +
         padRight(d.kind(), 22) + " " + padRight(clipFront(decisionTarget(d), 40), 40) + " " +
         padRight(d.values(), 28) + " " + padRight(d.outcome(), 10) + " " + d.reason() + "\n";
}

// As a victim's protection: "    jobs/batch/hog: cpu_quota rung 3: quota=20000/100000 (runtime's
// own: quota=max/100000), since 12:00:01, confirmed by the runtime". As a target's restriction:
// "    restriction: cpu_quota rung 3 for victim prod/web/server: ..." (same tail).
std::string restrictionLine(const v1::Restriction& r, bool as_victim) {
  std::string line = "    ";
  if (as_victim) {
    line += (r.target().empty() ? r.target_id().substr(0, 12) : r.target()) + ": ";
  } else {
    line += "restriction: ";
  }
  line += r.lever();
  if (r.rung() > 0) {
    line += " rung " + std::to_string(r.rung());
  }
  if (!as_victim) {
    line += " for victim " + (r.victim().empty() ? r.victim_id().substr(0, 12) : r.victim());
  }
  line += ": " + (r.values().empty() ? std::string("-") : r.values());
  if (!r.runtime_own().empty()) {
    line += " (runtime's own: " + r.runtime_own() + ")";
  }
  if (r.since_unix_ms() > 0) {
    line += ", since " + formatClock(r.since_unix_ms());
  }
  line += r.confirmed() ? ", confirmed by the runtime" : ", not yet confirmed by the runtime";
  return line + "\n";
}

}  // namespace

std::string formatDecisions(const v1::DecisionsReply& decisions) {
  std::string out;
  for (const auto& d : decisions.decisions()) {
    out += decisionLine(d);
  }
  if (decisions.decisions_size() == 0) {
    out += "(no decisions yet)\n";
  }
  return out;
}

std::string formatExplain(const v1::ExplainReply& reply) {
  std::string out = reply.text();
  if (!out.empty() && out.back() != '\n') {
    out += '\n';
  }
  if (reply.structured()) {
    if (reply.protections_size() > 0) {
      out += "  protected by colod (restrictions held on other containers for it):\n";
      for (const auto& r : reply.protections()) {
        out += restrictionLine(r, true);
      }
    } else if (reply.victim()) {
      out += "  protected by colod: nothing held for it now\n";
    }
    if (reply.blame_size() > 0) {
      out += "  evidence against it (per victim, over the blame window):\n";
      for (const auto& b : reply.blame()) {
        // Built without a fixed buffer: names are as long as Kubernetes allows.
        std::ostringstream line;
        line << "    " << (b.victim().empty() ? b.victim_id().substr(0, 12) : b.victim()) << ": "
             << std::llround(b.preemptions()) << " preemptions, " << b.wait_us() << " us wait, "
             << b.overlap_us() << " us on its CPUs, " << std::llround(b.score() * 100)
             << "% of the evidence; "
             << (b.restricted() ? "restricted" : (b.blamed() ? "blamed" : "not restricted"))
             << "\n";
        out += line.str();
        if (!b.why().empty()) {
          out += "      " + b.why() + "\n";
        }
      }
    }
    if (reply.restrictions_size() > 0) {
      out += "  restrictions colod holds on it:\n";
      for (const auto& r : reply.restrictions()) {
        out += restrictionLine(r, false);
      }
    }
  }
  if (reply.decisions_size() > 0) {
    out += "  decisions:\n";
    for (const auto& d : reply.decisions()) {
      out += "    " + decisionLine(d);
    }
  }
  return out;
}

namespace {

struct ConfigNode {
  std::string name;
  const v1::ConfigValue* leaf = nullptr;
  std::vector<std::unique_ptr<ConfigNode>> children;  // in first-seen order

  ConfigNode* child(std::string_view part) {
    for (auto& c : children) {
      if (c->name == part && c->leaf == nullptr) {
        return c.get();
      }
    }
    children.push_back(std::make_unique<ConfigNode>());
    children.back()->name = std::string(part);
    return children.back().get();
  }
};

std::string sourceText(const v1::ConfigValue& v) {
  switch (v.source()) {
    case v1::ConfigValue::SOURCE_DEFAULT:
      return "default";
    case v1::ConfigValue::SOURCE_FILE:
      return "file";
    case v1::ConfigValue::SOURCE_COMMAND_LINE:
      return v.flag().empty() ? "command line" : "command line (" + v.flag() + ")";
    default:
      return "unknown";
  }
}

// Recursive over the key's segments: the depth is the number of dots in a key (a handful).
void renderConfig(const ConfigNode& node,  // NOLINT(misc-no-recursion)
                  std::size_t depth,
                  std::size_t comment_col,
                  std::string& out) {
  for (const auto& c : node.children) {
    const std::string indent(2 * depth, ' ');
    if (c->leaf != nullptr) {
      const std::string text = indent + c->name + ": " + c->leaf->value();
      out += padRight(text, comment_col) + "  # " + sourceText(*c->leaf) +
             (c->leaf->note().empty() ? std::string() : "; " + c->leaf->note()) + "\n";
    } else {
      out += indent + c->name + ":\n";
      renderConfig(*c, depth + 1, comment_col, out);
    }
  }
}

}  // namespace

std::string formatConfigShow(const v1::ConfigShowReply& reply) {
  std::string out;
  if (reply.values_size() == 0) {
    // An older colod: the file as loaded, without sources.
    if (!reply.path().empty()) {
      out += "# " + reply.path() + "\n";
    }
    out += reply.yaml();
    if (!out.empty() && out.back() != '\n') {
      out += '\n';
    }
    return out;
  }
  out += "# the configuration colod runs with: ";
  out += reply.path().empty() ? std::string("built-in defaults (no file)") : reply.path();
  if (reply.loaded_unix_ms() > 0) {
    out += ", loaded at " + formatClock(reply.loaded_unix_ms());
  }
  out += "\n# after each value, where it comes from: default, file or command line\n";
  ConfigNode root;
  std::size_t widest = 0;
  for (const auto& v : reply.values()) {
    ConfigNode* node = &root;
    std::size_t depth = 0;
    std::string_view key = v.key();
    for (std::size_t dot = key.find('.'); dot != std::string_view::npos; dot = key.find('.')) {
      node = node->child(key.substr(0, dot));
      key.remove_prefix(dot + 1);
      ++depth;
    }
    auto leaf = std::make_unique<ConfigNode>();
    leaf->name = std::string(key);
    leaf->leaf = &v;
    node->children.push_back(std::move(leaf));
    widest = std::max(widest, 2 * depth + displayWidth(key) + 2 + displayWidth(v.value()));
  }
  // Comments line up, unless one long value would push them all far right.
  renderConfig(root, 0, std::min<std::size_t>(widest, 48), out);
  return out;
}

namespace {

// "p50 <= 4 ms, p99 <= 16 ms over 12 calls" from log2 microsecond slots: each quantile as the
// upper bound of the slot that holds it (the slots say no more).
std::string answerTimes(const google::protobuf::RepeatedField<uint64_t>& slots) {
  uint64_t total = 0;
  for (uint64_t n : slots) {
    total += n;
  }
  if (total == 0) {
    return "no UpdateContainers call yet";
  }
  auto upper = [&](double q) {
    const auto rank = static_cast<uint64_t>(std::ceil(q * static_cast<double>(total)));
    uint64_t seen = 0;
    for (int i = 0; i < slots.size(); ++i) {
      seen += slots[i];
      if (seen >= rank) {
        return std::ldexp(1.0, i + 1) / 1000.0;  // ms
      }
    }
    return std::ldexp(1.0, slots.size()) / 1000.0;
  };
  return strprintf("answers UpdateContainers in p50 <= %g ms, p99 <= %g ms (%" PRIu64 " calls)",
                   upper(0.5), upper(0.99), total);
}

}  // namespace

std::string formatStatus(const v1::StatusReply& s) {
  // Updates are retried until the runtime confirms them: what matters is what is still pending,
  // not how many attempts failed on the way (those are in /metrics by reason).
  std::string pending = s.reconcile_pending() == 0
                            ? std::string("none")
                            : strprintf("%" PRIu64 " containers (oldest %" PRId64 " ms)",
                                        s.reconcile_pending(), s.reconcile_oldest_pending_ms());
  return strprintf(
      "version:        %s\nmode:           %s\nnri:            %s (reconnects %" PRIu64
      ")\ncontainers:     %" PRIu64 "\nticks:          %" PRIu64 "\ninterval:       %" PRId64
      " ms\ncgroup mode:    %s\nconfig:         %s\n"
      "held by colod:  %" PRIu64 " containers\nupdates:        %" PRIu64 " confirmed, %" PRIu64
      " failed attempts (all retried); pending: %s\n"
      "runtime:        %s\n"
      "journal:        %" PRIu64
      " entries\nrss:            %.1f MiB\nbpf maps:       %.1f MiB\ncpu:            %.2f s\n",
      s.version().c_str(), s.mode().c_str(), s.nri_connected() ? "connected" : "disconnected",
      s.nri_reconnects(), s.containers(), s.ticks(), s.interval_ms(), s.cgroup_mode().c_str(),
      s.config_path().empty() ? "(built-in defaults)" : s.config_path().c_str(),
      s.reconcile_tracked(), s.updates_sent(), s.update_failures(), pending.c_str(),
      answerTimes(s.update_rtt_slots()).c_str(), s.journal_entries(),
      static_cast<double>(s.rss_bytes()) / (1 << 20),
      static_cast<double>(s.bpf_map_bytes()) / (1 << 20), s.cpu_seconds());
}

}  // namespace colod::ctl
