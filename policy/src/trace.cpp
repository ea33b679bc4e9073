// SPDX-License-Identifier: Apache-2.0
// Trace and decision JSON. nlohmann::json is used without exceptions: parse(..., false) and
// explicit type checks before every access (style rule 14).
#include "colod/policy/trace.h"

#include <cerrno>
#include <nlohmann/json.hpp>
#include <sstream>

#include "colod/policy/resources_json.h"
#include "colod/policy/tier.h"

namespace colod::policy {
namespace {

using nlohmann::json;

// --- encoding -------------------------------------------------------------------------------

json encodeInfo(const ContainerInfo& c) {
  json j = json::object();
  j["id"] = c.id;
  j["pod_name"] = c.pod_name;
  j["pod_namespace"] = c.pod_namespace;
  j["pod_uid"] = c.pod_uid;
  j["container_name"] = c.container_name;
  auto maybeMap = [&](const char* key, const std::map<std::string, std::string>& m) {
    if (!m.empty()) {
      j[key] = m;
    }
  };
  maybeMap("pod_labels", c.pod_labels);
  maybeMap("pod_annotations", c.pod_annotations);
  maybeMap("container_labels", c.container_labels);
  maybeMap("container_annotations", c.container_annotations);
  j["cgroup_parent"] = c.cgroup_parent;
  if (!c.cgroup_path.empty()) {
    j["cgroup_path"] = c.cgroup_path;
  }
  if (c.tier) {
    j["tier"] = std::string(tierName(*c.tier));
  }
  j["resources"] = encodeResourcesJson(c.resources);
  if (!c.cpuset.empty()) {
    j["cpuset"] = c.cpuset;
  }
  if (c.exclusive_cpus) {
    j["exclusive_cpus"] = true;
  }
  return j;
}

json encodePsi(const Psi& p) {
  return json{{"avg10", p.avg10}, {"total_delta_us", p.total_delta_us}};
}

json encodeSample(const ContainerSample& s) {
  json j = json::object();
  j["id"] = s.id;
  // The histogram is sparse in practice: [[slot, count], ...] keeps lines short.
  json hist = json::array();
  for (size_t i = 0; i < kRunqSlots; ++i) {
    if (s.runq_hist[i] != 0) {
      hist.push_back(json::array({i, s.runq_hist[i]}));
    }
  }
  if (!hist.empty()) {
    j["runq_hist"] = std::move(hist);
  }
  j["runq_count"] = s.runq_count;
  j["p50"] = s.runq_p50_us;
  j["p90"] = s.runq_p90_us;
  j["p99"] = s.runq_p99_us;
  j["max"] = s.runq_max_us;
  if (s.runq_wait_ns != 0) {
    j["runq_wait_ns"] = s.runq_wait_ns;
  }
  if (!s.preempted_by.empty()) {
    json pre = json::array();
    for (const auto& p : s.preempted_by) {
      json pj{{"by", p.aggressor_id}, {"count", p.count}, {"wait_ns", p.wait_ns}};
      if (p.behind_waits != 0 || p.behind_ns != 0) {
        pj["behind_waits"] = p.behind_waits;
        pj["behind_ns"] = p.behind_ns;
      }
      pre.push_back(std::move(pj));
    }
    j["preempted_by"] = std::move(pre);
  }
  j["oncpu_ns"] = s.oncpu_ns;
  auto nz = [&](const char* key, uint64_t v) {
    if (v != 0) {
      j[key] = v;
    }
  };
  nz("nr_involuntary", s.nr_involuntary);
  nz("nr_throttled", s.nr_throttled);
  nz("throttled_ns", s.throttled_ns);
  nz("reclaim_stall_ns", s.reclaim_stall_ns);
  if (s.psi_cpu_some) {
    j["psi_cpu_some"] = encodePsi(*s.psi_cpu_some);
  }
  if (s.psi_memory_some) {
    j["psi_memory_some"] = encodePsi(*s.psi_memory_some);
  }
  if (s.psi_memory_full) {
    j["psi_memory_full"] = encodePsi(*s.psi_memory_full);
  }
  if (s.memory_bytes) {
    j["memory_bytes"] = *s.memory_bytes;
  }
  return j;
}

// --- decoding -------------------------------------------------------------------------------

class Reader {
 public:
  explicit Reader(std::string where) : where_(std::move(where)) {}

  Error err(std::string_view key, std::string_view why) const {
    return Error(EINVAL, where_ + ": " + std::string(key) + ": " + std::string(why));
  }

  template <typename T>
  Result<void> num(const json& obj, const char* key, T& out, bool required = false) const {
    auto it = obj.find(key);
    if (it == obj.end() || it->is_null()) {
      if (required) {
        return err(key, "missing");
      }
      return ok();
    }
    if constexpr (std::is_floating_point_v<T>) {
      if (!it->is_number()) {
        return err(key, "expected a number");
      }
    } else if constexpr (std::is_unsigned_v<T>) {
      if (!it->is_number_unsigned()) {
        return err(key, "expected an unsigned integer");
      }
    } else {
      if (!it->is_number_integer()) {
        return err(key, "expected an integer");
      }
    }
    out = it->template get<T>();
    return ok();
  }

  template <typename T>
  Result<void> opt(const json& obj, const char* key, std::optional<T>& out) const {
    if (obj.find(key) == obj.end()) {
      return ok();
    }
    T v{};
    COLOD_TRY_VOID(num(obj, key, v), "");
    out = v;
    return ok();
  }

  // An optional true/false field: `out` untouched when it is absent.
  Result<void> flag(const json& obj, const char* key, bool& out) const {
    auto it = obj.find(key);
    if (it == obj.end()) {
      return ok();
    }
    if (!it->is_boolean()) {
      return err(key, "expected true or false");
    }
    out = it->get<bool>();
    return ok();
  }

  Result<void> str(const json& obj,
                   const char* key,
                   std::string& out,
                   bool required = false) const {
    auto it = obj.find(key);
    if (it == obj.end()) {
      if (required) {
        return err(key, "missing");
      }
      return ok();
    }
    if (!it->is_string()) {
      return err(key, "expected a string");
    }
    out = it->get<std::string>();
    return ok();
  }

  Result<void> strMap(const json& obj,
                      const char* key,
                      std::map<std::string, std::string>& out) const {
    auto it = obj.find(key);
    if (it == obj.end()) {
      return ok();
    }
    if (!it->is_object()) {
      return err(key, "expected an object of strings");
    }
    for (auto kv = it->begin(); kv != it->end(); ++kv) {
      if (!kv.value().is_string()) {
        return err(std::string(key) + "." + kv.key(), "expected a string");
      }
      out[kv.key()] = kv.value().get<std::string>();
    }
    return ok();
  }

 private:
  std::string where_;
};

// COLOD_TRY_VOID wraps with " -- "; here the reader already names line and key, so plain return.
#define COLOD_TRY_PLAIN(expr)       \
  do {                              \
    auto r_ = (expr);               \
    if (!r_.has_value()) {          \
      return std::move(r_).error(); \
    }                               \
  } while (0)

Result<Resources> decodeResources(const Reader& rd, const json& j) {
  Resources r;
  if (!j.is_object()) {
    return rd.err("resources", "expected an object");
  }
  COLOD_TRY_PLAIN(rd.opt(j, "cpu_shares", r.cpu_shares));
  COLOD_TRY_PLAIN(rd.opt(j, "cpu_quota", r.cpu_quota));
  COLOD_TRY_PLAIN(rd.opt(j, "cpu_period", r.cpu_period));
  COLOD_TRY_PLAIN(rd.opt(j, "memory_limit", r.memory_limit));
  for (const char* key : {"cpuset_cpus", "cpuset_mems"}) {
    if (j.find(key) != j.end()) {
      std::string v;
      COLOD_TRY_PLAIN(rd.str(j, key, v));
      (std::string_view(key) == "cpuset_cpus" ? r.cpuset_cpus : r.cpuset_mems) = v;
    }
  }
  COLOD_TRY_PLAIN(rd.strMap(j, "unified", r.unified));
  return r;
}

Result<ContainerInfo> decodeInfo(const Reader& rd, const json& j) {
  if (!j.is_object()) {
    return rd.err("container", "expected an object");
  }
  ContainerInfo c;
  COLOD_TRY_PLAIN(rd.str(j, "id", c.id, true));
  if (c.id.empty()) {
    return rd.err("id", "must not be empty");
  }
  COLOD_TRY_PLAIN(rd.str(j, "pod_name", c.pod_name));
  COLOD_TRY_PLAIN(rd.str(j, "pod_namespace", c.pod_namespace));
  COLOD_TRY_PLAIN(rd.str(j, "pod_uid", c.pod_uid));
  COLOD_TRY_PLAIN(rd.str(j, "container_name", c.container_name));
  COLOD_TRY_PLAIN(rd.strMap(j, "pod_labels", c.pod_labels));
  COLOD_TRY_PLAIN(rd.strMap(j, "pod_annotations", c.pod_annotations));
  COLOD_TRY_PLAIN(rd.strMap(j, "container_labels", c.container_labels));
  COLOD_TRY_PLAIN(rd.strMap(j, "container_annotations", c.container_annotations));
  COLOD_TRY_PLAIN(rd.str(j, "cgroup_parent", c.cgroup_parent));
  COLOD_TRY_PLAIN(rd.str(j, "cgroup_path", c.cgroup_path));
  if (j.find("tier") != j.end()) {
    std::string t;
    COLOD_TRY_PLAIN(rd.str(j, "tier", t));
    auto tier = tierFromName(t);
    if (!tier) {
      return rd.err("tier", "unknown tier \"" + t + "\" (ls, be, system)");
    }
    c.tier = *tier;
  }
  if (auto it = j.find("resources"); it != j.end()) {
    auto r = decodeResources(rd, *it);
    if (!r) {
      return std::move(r).error();
    }
    c.resources = std::move(*r);
  }
  if (auto it = j.find("cpuset"); it != j.end()) {
    if (!it->is_array()) {
      return rd.err("cpuset", "expected an array of CPU numbers");
    }
    for (const auto& v : *it) {
      if (!v.is_number_unsigned() || v.get<uint64_t>() > 65535) {
        return rd.err("cpuset", "expected CPU numbers in [0, 65535]");
      }
      c.cpuset.push_back(v.get<int>());
    }
  }
  COLOD_TRY_PLAIN(rd.flag(j, "exclusive_cpus", c.exclusive_cpus));
  return c;
}

// The "container" object of an upsert or admit line.
Result<ContainerInfo> decodeContainerOf(const Reader& rd, const json& j) {
  auto it = j.find("container");
  if (it == j.end()) {
    return rd.err("container", "missing");
  }
  return decodeInfo(rd, *it);
}

Result<std::optional<Psi>> decodePsi(const Reader& rd, const json& j, const char* key) {
  auto it = j.find(key);
  if (it == j.end()) {
    return std::optional<Psi>{};
  }
  if (!it->is_object()) {
    return rd.err(key, "expected an object");
  }
  Psi p;
  COLOD_TRY_PLAIN(rd.num(*it, "avg10", p.avg10));
  COLOD_TRY_PLAIN(rd.num(*it, "total_delta_us", p.total_delta_us));
  return std::optional<Psi>(p);
}

Result<ContainerSample> decodeSample(const Reader& rd, const json& j) {
  if (!j.is_object()) {
    return rd.err("containers[]", "expected an object");
  }
  ContainerSample s;
  COLOD_TRY_PLAIN(rd.str(j, "id", s.id, true));
  if (auto it = j.find("runq_hist"); it != j.end()) {
    if (!it->is_array()) {
      return rd.err("runq_hist", "expected [[slot, count], ...]");
    }
    for (const auto& pair : *it) {
      if (!pair.is_array() || pair.size() != 2 || !pair[0].is_number_unsigned() ||
          !pair[1].is_number_unsigned() || pair[0].get<uint64_t>() >= kRunqSlots ||
          pair[1].get<uint64_t>() > UINT32_MAX) {
        return rd.err("runq_hist", "expected [[slot < 26, count], ...]");
      }
      s.runq_hist[pair[0].get<size_t>()] = pair[1].get<uint32_t>();
    }
  }
  COLOD_TRY_PLAIN(rd.num(j, "runq_count", s.runq_count));
  COLOD_TRY_PLAIN(rd.num(j, "p50", s.runq_p50_us));
  COLOD_TRY_PLAIN(rd.num(j, "p90", s.runq_p90_us));
  COLOD_TRY_PLAIN(rd.num(j, "p99", s.runq_p99_us));
  COLOD_TRY_PLAIN(rd.num(j, "max", s.runq_max_us));
  COLOD_TRY_PLAIN(rd.num(j, "runq_wait_ns", s.runq_wait_ns));
  if (auto it = j.find("preempted_by"); it != j.end()) {
    if (!it->is_array()) {
      return rd.err("preempted_by", "expected an array");
    }
    for (const auto& pj : *it) {
      if (!pj.is_object()) {
        return rd.err("preempted_by[]", "expected an object");
      }
      Preemption p;
      COLOD_TRY_PLAIN(rd.str(pj, "by", p.aggressor_id));
      COLOD_TRY_PLAIN(rd.num(pj, "count", p.count));
      COLOD_TRY_PLAIN(rd.num(pj, "wait_ns", p.wait_ns));
      COLOD_TRY_PLAIN(rd.num(pj, "behind_waits", p.behind_waits));
      COLOD_TRY_PLAIN(rd.num(pj, "behind_ns", p.behind_ns));
      s.preempted_by.push_back(std::move(p));
    }
  }
  COLOD_TRY_PLAIN(rd.num(j, "oncpu_ns", s.oncpu_ns));
  COLOD_TRY_PLAIN(rd.num(j, "nr_involuntary", s.nr_involuntary));
  COLOD_TRY_PLAIN(rd.num(j, "nr_throttled", s.nr_throttled));
  COLOD_TRY_PLAIN(rd.num(j, "throttled_ns", s.throttled_ns));
  COLOD_TRY_PLAIN(rd.num(j, "reclaim_stall_ns", s.reclaim_stall_ns));
  for (auto [key, dst] : {std::pair{"psi_cpu_some", &s.psi_cpu_some},
                          std::pair{"psi_memory_some", &s.psi_memory_some},
                          std::pair{"psi_memory_full", &s.psi_memory_full}}) {
    auto p = decodePsi(rd, j, key);
    if (!p) {
      return std::move(p).error();
    }
    *dst = *p;
  }
  COLOD_TRY_PLAIN(rd.opt(j, "memory_bytes", s.memory_bytes));
  return s;
}

Result<Snapshot> decodeSnapshot(const Reader& rd, const json& j) {
  Snapshot s;
  COLOD_TRY_PLAIN(rd.num(j, "now_ns", s.now_ns, true));
  COLOD_TRY_PLAIN(rd.num(j, "interval_ns", s.interval_ns, true));
  COLOD_TRY_PLAIN(rd.num(j, "node_cpus", s.node_cpus, true));
  if (s.interval_ns <= 0 || s.node_cpus < 0) {
    return rd.err("interval_ns/node_cpus", "interval_ns must be > 0 and node_cpus >= 0");
  }
  COLOD_TRY_PLAIN(rd.flag(j, "event_round", s.event_round));
  if (auto it = j.find("node_cpu_list"); it != j.end()) {
    if (!it->is_array()) {
      return rd.err("node_cpu_list", "expected an array");
    }
    for (const auto& v : *it) {
      if (!v.is_number_unsigned() || v.get<uint64_t>() > 65535) {
        return rd.err("node_cpu_list", "expected CPU numbers in [0, 65535]");
      }
      s.node_cpu_list.push_back(v.get<int>());
    }
  }
  COLOD_TRY_PLAIN(rd.flag(j, "absent_quiet", s.absent_quiet));
  if (auto u = j.find("unmeasured"); u != j.end()) {
    if (!u->is_array()) {
      return rd.err("unmeasured", "expected an array of container ids");
    }
    for (const auto& v : *u) {
      if (!v.is_string()) {
        return rd.err("unmeasured", "expected an array of container ids");
      }
      s.unmeasured.push_back(v.get<std::string>());
    }
  }
  auto it = j.find("containers");
  if (it != j.end()) {
    if (!it->is_array()) {
      return rd.err("containers", "expected an array");
    }
    s.containers.reserve(it->size());
    for (const auto& cj : *it) {
      auto c = decodeSample(rd, cj);
      if (!c) {
        return std::move(c).error();
      }
      s.containers.push_back(std::move(*c));
    }
  }
  return s;
}

json encodeAntagonist(const Antagonist& a) {
  return json{{"id", a.id},
              {"name", a.name},
              {"preemptions", a.preemptions},
              {"wait_ns", a.wait_ns},
              {"oncpu_ns", a.oncpu_ns},
              {"memory_growth_bytes", a.memory_growth_bytes},
              {"score", a.score}};
}

std::optional<DecisionKind> kindFromName(std::string_view n) {
  for (auto k : {DecisionKind::Engage, DecisionKind::Escalate, DecisionKind::Undo,
                 DecisionKind::Relax, DecisionKind::Restore}) {
    if (decisionKindName(k) == n) {
      return k;
    }
  }
  return std::nullopt;
}

}  // namespace

std::string encodeTraceHeader(const TraceHeader& header) {
  json j{{"type", "header"}, {"version", header.version}};
  if (header.config_yaml) {
    j["config"] = *header.config_yaml;
  }
  return j.dump();
}

std::string encodeUpsert(const ContainerInfo& info) {
  return json{{"type", "upsert"}, {"container", encodeInfo(info)}}.dump();
}

std::string encodeRemove(std::string_view id) {
  return json{{"type", "remove"}, {"id", std::string(id)}}.dump();
}

std::string encodeAdmit(const ContainerInfo& info, int64_t now_ns) {
  return json{{"type", "admit"}, {"now_ns", now_ns}, {"container", encodeInfo(info)}}.dump();
}

std::string encodeSnapshot(const Snapshot& s) {
  json j{{"type", "snapshot"},
         {"now_ns", s.now_ns},
         {"interval_ns", s.interval_ns},
         {"node_cpus", s.node_cpus}};
  if (s.event_round) {
    j["event_round"] = true;
  }
  if (!s.node_cpu_list.empty()) {
    j["node_cpu_list"] = s.node_cpu_list;
  }
  if (s.absent_quiet) {
    j["absent_quiet"] = true;
  }
  if (!s.unmeasured.empty()) {
    j["unmeasured"] = s.unmeasured;
  }
  json cs = json::array();
  for (const auto& c : s.containers) {
    cs.push_back(encodeSample(c));
  }
  j["containers"] = std::move(cs);
  return j.dump();
}

std::string encodeTrace(const Trace& trace) {
  std::string out;
  if (trace.header) {
    out += encodeTraceHeader(*trace.header);
    out += '\n';
  }
  for (const auto& ev : trace.events) {
    if (const auto* info = std::get_if<ContainerInfo>(&ev)) {
      out += encodeUpsert(*info);
    } else if (const auto* rm = std::get_if<TraceRemove>(&ev)) {
      out += encodeRemove(rm->id);
    } else if (const auto* ad = std::get_if<TraceAdmit>(&ev)) {
      out += encodeAdmit(ad->info, ad->now_ns);
    } else {
      out += encodeSnapshot(std::get<Snapshot>(ev));
    }
    out += '\n';
  }
  return out;
}

Result<Trace> decodeTrace(std::string_view text) {
  Trace trace;
  size_t pos = 0;
  int line_no = 0;
  bool any = false;
  while (pos < text.size()) {
    size_t nl = text.find('\n', pos);
    if (nl == std::string_view::npos) {
      nl = text.size();
    }
    std::string_view line = text.substr(pos, nl - pos);
    pos = nl + 1;
    ++line_no;
    if (!line.empty() && line.back() == '\r') {
      line.remove_suffix(1);
    }
    if (line.find_first_not_of(" \t") == std::string_view::npos || line.front() == '#') {
      continue;
    }
    const std::string where = "line " + std::to_string(line_no);
    const Reader rd(where);
    json j = json::parse(line, nullptr, /*allow_exceptions=*/false);
    if (j.is_discarded()) {
      return Error(EINVAL, where + ": not valid JSON");
    }
    if (!j.is_object()) {
      return Error(EINVAL, where + ": expected a JSON object");
    }
    std::string type;
    COLOD_TRY_PLAIN(rd.str(j, "type", type, true));
    if (type == "header") {
      if (any) {
        return Error(EINVAL, where + ": header must be the first line");
      }
      TraceHeader h;
      COLOD_TRY_PLAIN(rd.num(j, "version", h.version, true));
      if (h.version != kTraceVersion) {
        return Error(EINVAL, where + ": unsupported trace version " + std::to_string(h.version) +
                                 " (this build reads " + std::to_string(kTraceVersion) + ")");
      }
      if (j.find("config") != j.end()) {
        std::string cfg;
        COLOD_TRY_PLAIN(rd.str(j, "config", cfg));
        h.config_yaml = std::move(cfg);
      }
      trace.header = std::move(h);
    } else if (type == "upsert") {
      auto info = decodeContainerOf(rd, j);
      if (!info) {
        return std::move(info).error();
      }
      trace.events.emplace_back(std::move(*info));
    } else if (type == "admit") {
      TraceAdmit ad;
      COLOD_TRY_PLAIN(rd.num(j, "now_ns", ad.now_ns, true));
      auto info = decodeContainerOf(rd, j);
      if (!info) {
        return std::move(info).error();
      }
      ad.info = std::move(*info);
      trace.events.emplace_back(std::move(ad));
    } else if (type == "remove") {
      TraceRemove rm;
      COLOD_TRY_PLAIN(rd.str(j, "id", rm.id, true));
      trace.events.emplace_back(std::move(rm));
    } else if (type == "snapshot") {
      auto snap = decodeSnapshot(rd, j);
      if (!snap) {
        return std::move(snap).error();
      }
      trace.events.emplace_back(std::move(*snap));
    } else {
      return rd.err("type",
                    "unknown type \"" + type + "\" (header, upsert, remove, snapshot, admit)");
    }
    any = true;
  }
  return trace;
}

std::string encodeFinding(const Finding& f, int64_t at_ns) {
  return json{{"at_ns", at_ns},
              {"finding", f.rule},
              {"container_id", f.container_id},
              {"message", f.message}}
      .dump();
}

std::string encodeDecision(const Decision& d) {
  json ants = json::array();
  for (const auto& a : d.antagonists) {
    ants.push_back(encodeAntagonist(a));
  }
  const Evidence& e = d.evidence;
  json ev{{"victim_p99_us", e.victim_p99_us},
          {"threshold_us", e.threshold_us},
          {"baseline_p99_us", e.baseline_p99_us},
          {"engaged_p99_us", e.engaged_p99_us},
          {"psi_cpu_some_avg10", e.psi_cpu_some_avg10},
          {"reclaim_stall_ns", e.reclaim_stall_ns},
          {"victim_throttled_ns", e.victim_throttled_ns},
          {"hits", e.hits},
          {"window", e.window},
          {"quiet_intervals", e.quiet_intervals},
          {"victim_wait_load", e.victim_wait_load},
          {"wait_load_before", e.wait_load_before},
          {"quota_budget_cpus", e.quota_budget_cpus}};
  json j{{"seq", d.seq},
         {"at_ns", d.at_ns},
         {"kind", std::string(decisionKindName(d.kind))},
         {"lever", std::string(leverName(d.lever))},
         {"target_id", d.target_id},
         {"target_name", d.target_name},
         {"new", encodeResourcesJson(d.new_values)},
         {"original", encodeResourcesJson(d.original_values)},
         {"victim_id", d.victim_id},
         {"victim_name", d.victim_name},
         {"antagonists", std::move(ants)},
         {"evidence", std::move(ev)},
         {"rung", d.rung},
         {"rule", d.rule},
         {"explanation", d.explanation},
         {"dry_run", d.dry_run}};
  return j.dump();
}

Result<Decision> decodeDecision(std::string_view text) {
  json j = json::parse(text, nullptr, false);
  if (j.is_discarded() || !j.is_object()) {
    return Error(EINVAL, "decision: not a JSON object");
  }
  const Reader rd("decision");
  Decision d;
  COLOD_TRY_PLAIN(rd.num(j, "seq", d.seq, true));
  COLOD_TRY_PLAIN(rd.num(j, "at_ns", d.at_ns));
  std::string kind;
  std::string lever;
  COLOD_TRY_PLAIN(rd.str(j, "kind", kind, true));
  COLOD_TRY_PLAIN(rd.str(j, "lever", lever, true));
  auto k = kindFromName(kind);
  auto l = leverFromName(lever);
  if (!k) {
    return rd.err("kind", "unknown \"" + kind + "\"");
  }
  if (!l) {
    return rd.err("lever", "unknown \"" + lever + "\"");
  }
  d.kind = *k;
  d.lever = *l;
  COLOD_TRY_PLAIN(rd.str(j, "target_id", d.target_id, true));
  COLOD_TRY_PLAIN(rd.str(j, "target_name", d.target_name));
  for (auto [key, dst] :
       {std::pair{"new", &d.new_values}, std::pair{"original", &d.original_values}}) {
    if (auto it = j.find(key); it != j.end()) {
      auto r = decodeResources(rd, *it);
      if (!r) {
        return std::move(r).error();
      }
      *dst = std::move(*r);
    }
  }
  COLOD_TRY_PLAIN(rd.str(j, "victim_id", d.victim_id));
  COLOD_TRY_PLAIN(rd.str(j, "victim_name", d.victim_name));
  if (auto it = j.find("antagonists"); it != j.end() && it->is_array()) {
    for (const auto& aj : *it) {
      if (!aj.is_object()) {
        return rd.err("antagonists[]", "expected an object");
      }
      Antagonist a;
      COLOD_TRY_PLAIN(rd.str(aj, "id", a.id));
      COLOD_TRY_PLAIN(rd.str(aj, "name", a.name));
      COLOD_TRY_PLAIN(rd.num(aj, "preemptions", a.preemptions));
      COLOD_TRY_PLAIN(rd.num(aj, "wait_ns", a.wait_ns));
      COLOD_TRY_PLAIN(rd.num(aj, "oncpu_ns", a.oncpu_ns));
      COLOD_TRY_PLAIN(rd.num(aj, "memory_growth_bytes", a.memory_growth_bytes));
      COLOD_TRY_PLAIN(rd.num(aj, "score", a.score));
      d.antagonists.push_back(std::move(a));
    }
  }
  if (auto it = j.find("evidence"); it != j.end() && it->is_object()) {
    Evidence& e = d.evidence;
    const json& ej = *it;
    COLOD_TRY_PLAIN(rd.num(ej, "victim_p99_us", e.victim_p99_us));
    COLOD_TRY_PLAIN(rd.num(ej, "threshold_us", e.threshold_us));
    COLOD_TRY_PLAIN(rd.num(ej, "baseline_p99_us", e.baseline_p99_us));
    COLOD_TRY_PLAIN(rd.num(ej, "engaged_p99_us", e.engaged_p99_us));
    COLOD_TRY_PLAIN(rd.num(ej, "psi_cpu_some_avg10", e.psi_cpu_some_avg10));
    COLOD_TRY_PLAIN(rd.num(ej, "reclaim_stall_ns", e.reclaim_stall_ns));
    COLOD_TRY_PLAIN(rd.num(ej, "victim_throttled_ns", e.victim_throttled_ns));
    COLOD_TRY_PLAIN(rd.num(ej, "hits", e.hits));
    COLOD_TRY_PLAIN(rd.num(ej, "window", e.window));
    COLOD_TRY_PLAIN(rd.num(ej, "quiet_intervals", e.quiet_intervals));
    COLOD_TRY_PLAIN(rd.num(ej, "victim_wait_load", e.victim_wait_load));
    COLOD_TRY_PLAIN(rd.num(ej, "wait_load_before", e.wait_load_before));
    COLOD_TRY_PLAIN(rd.num(ej, "quota_budget_cpus", e.quota_budget_cpus));
  }
  COLOD_TRY_PLAIN(rd.num(j, "rung", d.rung));
  COLOD_TRY_PLAIN(rd.str(j, "rule", d.rule));
  COLOD_TRY_PLAIN(rd.str(j, "explanation", d.explanation));
  COLOD_TRY_PLAIN(rd.flag(j, "dry_run", d.dry_run));
  return d;
}

Result<std::vector<RoundResult>> replayTrace(const Trace& trace, const Config& config) {
  auto engine = Engine::create(config);
  if (!engine) {
    return std::move(engine).error();
  }
  std::vector<RoundResult> rounds;
  for (const auto& ev : trace.events) {
    if (const auto* info = std::get_if<ContainerInfo>(&ev)) {
      engine->upsertContainer(*info);
    } else if (const auto* rm = std::get_if<TraceRemove>(&ev)) {
      engine->removeContainer(rm->id);
    } else if (const auto* ad = std::get_if<TraceAdmit>(&ev)) {
      rounds.push_back(engine->admit(ad->info, ad->now_ns));
    } else {
      rounds.push_back(engine->evaluate(std::get<Snapshot>(ev)));
    }
  }
  return rounds;
}

// --- Resources JSON (resources_json.h) -------------------------------------------------------

json encodeResourcesJson(const Resources& r) {
  json j = json::object();
  if (r.cpu_shares) {
    j["cpu_shares"] = *r.cpu_shares;
  }
  if (r.cpu_quota) {
    j["cpu_quota"] = *r.cpu_quota;
  }
  if (r.cpu_period) {
    j["cpu_period"] = *r.cpu_period;
  }
  if (r.cpuset_cpus) {
    j["cpuset_cpus"] = *r.cpuset_cpus;
  }
  if (r.cpuset_mems) {
    j["cpuset_mems"] = *r.cpuset_mems;
  }
  if (r.memory_limit) {
    j["memory_limit"] = *r.memory_limit;
  }
  if (!r.unified.empty()) {
    j["unified"] = r.unified;
  }
  return j;
}

Result<Resources> decodeResourcesJson(const json& j, std::string_view where) {
  return decodeResources(Reader(std::string(where)), j);
}

}  // namespace colod::policy
