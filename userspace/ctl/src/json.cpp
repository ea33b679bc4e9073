// SPDX-License-Identifier: Apache-2.0
#include "json.h"

#include <nlohmann/json.hpp>

#include "format.h"

namespace colod::ctl {

namespace v1 = control::v1;
using nlohmann::ordered_json;

namespace {

std::string render(const ordered_json& doc, bool compact) {
  return compact ? doc.dump() : doc.dump(2) + "\n";
}

ordered_json containerDoc(const v1::Container& c) {
  ordered_json agg = ordered_json::array();
  for (const auto& a : c.preempted_by()) {
    agg.push_back({{"container", a.container()}, {"preemptions", a.preemptions()}});
  }
  // The same object as in the daemon's `dump` ("containers" entries).
  return {{"id", c.id()},
          {"namespace", c.namespace_()},
          {"pod", c.pod()},
          {"name", c.name()},
          {"tier", c.tier()},
          {"cgroup_id", c.cgroup_id()},
          {"cgroup_path", c.cgroup_path()},
          {"runq",
           {{"count", c.runq_count()},
            {"p50_us", c.runq_p50_us()},
            {"p90_us", c.runq_p90_us()},
            {"p99_us", c.runq_p99_us()},
            {"max_us", c.runq_max_us()}}},
          {"preemptions", c.preemptions()},
          {"preempted_by", agg},
          {"nr_throttled", c.nr_throttled()},
          {"throttled_ns", c.throttled_ns()},
          {"reclaim_stall_ns", c.reclaim_stall_ns()},
          {"cpuset", c.cpuset()},
          {"quota_us", c.quota_us()},
          {"period_us", c.period_us()},
          {"shares", c.shares()},
          {"managed", c.managed()},
          {"cpu_util", c.cpu_util()}};
}

ordered_json statusDoc(const v1::StatusReply& s) {
  return {{"version", s.version()},
          {"mode", s.mode()},
          {"nri_connected", s.nri_connected()},
          {"nri_reconnects", s.nri_reconnects()},
          {"containers", s.containers()},
          {"ticks", s.ticks()},
          {"started_unix_ms", s.started_unix_ms()},
          {"config_path", s.config_path()},
          {"cgroup_mode", s.cgroup_mode()},
          {"rss_bytes", s.rss_bytes()},
          {"cpu_seconds", s.cpu_seconds()},
          {"updates_sent", s.updates_sent()},
          {"update_failures", s.update_failures()},
          {"journal_entries", s.journal_entries()},
          {"interval_ms", s.interval_ms()},
          {"reconcile_pending", s.reconcile_pending()},
          {"reconcile_oldest_pending_ms", s.reconcile_oldest_pending_ms()},
          {"reconcile_tracked", s.reconcile_tracked()},
          {"bpf_map_bytes", s.bpf_map_bytes()},
          {"update_rtt_slots",
           std::vector<uint64_t>(s.update_rtt_slots().begin(), s.update_rtt_slots().end())}};
}

ordered_json decisionDoc(const v1::Decision& d) {
  return {{"seq", d.seq()},
          {"unix_ms", d.unix_ms()},
          {"container_id", d.container_id()},
          {"container", d.container()},
          {"kind", d.kind()},
          {"lever", d.lever()},
          {"rung", d.rung()},
          {"victim_id", d.victim_id()},
          {"victim", d.victim()},
          {"values", d.values()},
          {"outcome", d.outcome()},
          {"reason", d.reason()}};
}

ordered_json restrictionDoc(const v1::Restriction& r) {
  return {{"target_id", r.target_id()},
          {"target", r.target()},
          {"victim_id", r.victim_id()},
          {"victim", r.victim()},
          {"lever", r.lever()},
          {"rung", r.rung()},
          {"values", r.values()},
          {"runtime_own", r.runtime_own()},
          {"since_unix_ms", r.since_unix_ms()},
          {"confirmed", r.confirmed()}};
}

ordered_json bucketsDoc(const google::protobuf::RepeatedField<uint64_t>& slots) {
  ordered_json out = ordered_json::array();
  for (int i = 0; i < slots.size(); ++i) {
    // Slot i holds [2^i, 2^(i+1)) microseconds; slot 0 also holds 0 (collect's log2 slots).
    const auto shift = static_cast<unsigned>(i);
    const uint64_t low = i == 0 ? 0 : (uint64_t{1} << shift);
    const uint64_t high = (uint64_t{1} << (shift + 1)) - 1;
    out.push_back({{"low_us", low}, {"high_us", high}, {"count", slots.Get(i)}});
  }
  return out;
}

std::string sourceName(v1::ConfigValue::Source s) {
  switch (s) {
    case v1::ConfigValue::SOURCE_DEFAULT:
      return "default";
    case v1::ConfigValue::SOURCE_FILE:
      return "file";
    case v1::ConfigValue::SOURCE_COMMAND_LINE:
      return "command_line";
    default:
      return "unknown";
  }
}

}  // namespace

std::string statusJson(const v1::StatusReply& status, bool compact) {
  return render(statusDoc(status), compact);
}

std::string containersJson(const v1::ListContainersReply& list,
                           const v1::StatusReply* status,
                           bool compact) {
  ordered_json ctrs = ordered_json::array();
  for (const auto& c : list.containers()) {
    ctrs.push_back(containerDoc(c));
  }
  ordered_json doc = {{"unix_ms", list.unix_ms()},
                      {"interval_ms", list.interval_ms()},
                      {"status", status != nullptr ? statusDoc(*status) : ordered_json(nullptr)},
                      {"containers", ctrs}};
  return render(doc, compact);
}

std::string histogramJson(const v1::HistogramReply& hist, bool compact) {
  ordered_json doc = {{"container", containerDoc(hist.container())},
                      {"unit", "us"},
                      {"since_start", bucketsDoc(hist.runq_slots())},
                      {"last_interval", bucketsDoc(hist.last_slots())}};
  return render(doc, compact);
}

std::string decisionsJson(const v1::DecisionsReply& decisions, bool compact) {
  ordered_json list = ordered_json::array();
  for (const auto& d : decisions.decisions()) {
    list.push_back(decisionDoc(d));
  }
  return render(ordered_json{{"decisions", list}}, compact);
}

std::string explainJson(const v1::ExplainReply& explain, bool compact) {
  ordered_json prot = ordered_json::array();
  for (const auto& r : explain.protections()) {
    prot.push_back(restrictionDoc(r));
  }
  ordered_json held = ordered_json::array();
  for (const auto& r : explain.restrictions()) {
    held.push_back(restrictionDoc(r));
  }
  ordered_json decs = ordered_json::array();
  for (const auto& d : explain.decisions()) {
    decs.push_back(decisionDoc(d));
  }
  ordered_json blame = ordered_json::array();
  for (const auto& b : explain.blame()) {
    blame.push_back({{"victim_id", b.victim_id()},
                     {"victim", b.victim()},
                     {"preemptions", b.preemptions()},
                     {"wait_us", b.wait_us()},
                     {"overlap_us", b.overlap_us()},
                     {"score", b.score()},
                     {"blamed", b.blamed()},
                     {"restricted", b.restricted()},
                     {"why", b.why()}});
  }
  ordered_json doc = {{"container", containerDoc(explain.container())},
                      {"text", explain.text()},
                      {"structured", explain.structured()},
                      {"victim", explain.victim()},
                      {"protections", prot},
                      {"restrictions", held},
                      {"blame", blame},
                      {"decisions", decs}};
  return render(doc, compact);
}

std::string configShowJson(const v1::ConfigShowReply& config, bool compact) {
  ordered_json values = ordered_json::array();
  for (const auto& v : config.values()) {
    values.push_back({{"key", v.key()},
                      {"value", v.value()},
                      {"source", sourceName(v.source())},
                      {"flag", v.flag()},
                      {"note", v.note()}});
  }
  ordered_json doc = {{"path", config.path()},
                      {"loaded_unix_ms", config.loaded_unix_ms()},
                      {"values", values},
                      {"yaml", config.yaml()}};
  return render(doc, compact);
}

Result<std::string> dumpJson(std::string_view daemon_json) {
  auto doc = ordered_json::parse(daemon_json, nullptr, false);
  if (doc.is_discarded()) {
    return Error(EINVAL, "colod sent a dump that is not JSON");
  }
  return doc.dump(2) + "\n";
}

namespace {

std::string scalarText(const ordered_json& v) {
  if (v.is_string()) {
    return v.get<std::string>();
  }
  return v.dump();
}

// A container object of the dump (containerDoc's shape) back into the API type, for formatTop.
v1::Container containerFrom(const ordered_json& j) {
  v1::Container c;
  auto str = [&](const char* k) {
    return j.contains(k) && j[k].is_string() ? j[k].get<std::string>() : "";
  };
  auto u64 = [&](const ordered_json& o, const char* k) {
    return o.contains(k) && o[k].is_number_unsigned() ? o[k].get<uint64_t>() : uint64_t{0};
  };
  c.set_id(str("id"));
  c.set_namespace_(str("namespace"));
  c.set_pod(str("pod"));
  c.set_name(str("name"));
  c.set_tier(str("tier"));
  c.set_cpuset(str("cpuset"));
  if (j.contains("runq") && j["runq"].is_object()) {
    c.set_runq_p50_us(u64(j["runq"], "p50_us"));
    c.set_runq_p99_us(u64(j["runq"], "p99_us"));
  }
  c.set_preemptions(u64(j, "preemptions"));
  if (j.contains("preempted_by") && j["preempted_by"].is_array()) {
    for (const auto& a : j["preempted_by"]) {
      auto* agg = c.add_preempted_by();
      agg->set_container(a.contains("container") ? scalarText(a["container"]) : "");
      agg->set_preemptions(u64(a, "preemptions"));
    }
  }
  c.set_throttled_ns(u64(j, "throttled_ns"));
  c.set_reclaim_stall_ns(u64(j, "reclaim_stall_ns"));
  c.set_quota_us(j.contains("quota_us") && j["quota_us"].is_number_integer()
                     ? j["quota_us"].get<int64_t>()
                     : -1);
  c.set_period_us(u64(j, "period_us"));
  c.set_shares(u64(j, "shares"));
  c.set_managed(j.contains("managed") && j["managed"].is_boolean() && j["managed"].get<bool>());
  return c;
}

}  // namespace

Result<std::string> dumpTable(std::string_view daemon_json) {
  auto doc = ordered_json::parse(daemon_json, nullptr, false);
  if (doc.is_discarded() || !doc.is_object()) {
    return Error(EINVAL, "colod sent a dump that is not a JSON object");
  }
  std::string out;
  for (const auto& [section, value] : doc.items()) {
    out += section + ":\n";
    if (section == "containers" && value.is_array()) {
      v1::ListContainersReply list;
      for (const auto& c : value) {
        *list.add_containers() = containerFrom(c);
      }
      out += formatTop(list, nullptr);
    } else if (value.is_object()) {
      for (const auto& [k, v] : value.items()) {
        out += "  " + k + ": " + scalarText(v) + "\n";
      }
    } else if (value.is_array()) {
      if (value.empty()) {
        out += "  (none)\n";
      }
      for (const auto& entry : value) {
        std::string line;
        if (entry.is_object()) {
          for (const auto& [k, v] : entry.items()) {
            line += (line.empty() ? "" : " ") + k + "=" + scalarText(v);
          }
        } else {
          line = scalarText(entry);
        }
        out += "  " + line + "\n";
      }
    } else {
      out += "  " + scalarText(value) + "\n";
    }
  }
  return out;
}

}  // namespace colod::ctl
