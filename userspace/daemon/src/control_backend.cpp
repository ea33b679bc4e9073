// SPDX-License-Identifier: Apache-2.0
#include "colod/daemon/control_backend.h"

#include <algorithm>
#include <nlohmann/json.hpp>
#include <sstream>

#include "colod/control/names.h"
#include "colod/daemon/config_values.h"
#include "colod/daemon/convert.h"
#include "colod/policy/config.h"
#include "colod/policy/tier.h"
#include "colod/policy/trace.h"

namespace colod::daemon {

namespace v1 = control::v1;

namespace {

// When colod first applied `lever` on `target` for `victim`, from the decision log (oldest
// first): the first engage/escalate/relax of that lever since the last undo or restore. 0 when the
// decision is no longer in the log (it keeps the last daemon.decisions_kept) or the restriction
// came back from the journal after a restart.
int64_t sinceUnixMs(const std::vector<v1::Decision>& about_target,
                    const std::string& target_id,
                    const std::string& victim_id,
                    std::string_view lever) {
  int64_t since = 0;
  for (const auto& d : about_target) {
    if (d.container_id() != target_id) {
      continue;
    }
    const std::string_view kind(d.kind());
    if (kind.starts_with("restore")) {
      since = 0;  // everything on the target released
      continue;
    }
    if (d.victim_id() != victim_id || d.lever() != lever) {
      continue;
    }
    if (kind.starts_with("undo")) {
      since = 0;
    } else if (since == 0 && d.outcome().rfind("failed", 0) != 0) {
      since = d.unix_ms();
    }
  }
  return since;
}

}  // namespace

ControlBackend::ControlBackend(const ViewStore& views,
                               const DecisionLog& log,
                               TraceRecorders& recorders,
                               ControlHooks hooks)
    : views_(views), log_(log), recorders_(recorders), hooks_(std::move(hooks)) {}

Result<v1::StatusReply> ControlBackend::status() {
  auto v = views_.fresh();
  v1::StatusReply st = v->status;
  const auto self = hooks_.self_stats();
  st.set_rss_bytes(self.rss_bytes);
  st.set_cpu_seconds(self.cpu_seconds);
  return st;
}

Result<v1::ListContainersReply> ControlBackend::listContainers() {
  auto v = views_.fresh();
  v1::ListContainersReply out;
  for (const auto& c : v->containers) {
    *out.add_containers() = c;
  }
  out.set_unix_ms(v->unix_ms);
  out.set_interval_ms(v->status.interval_ms());
  return out;
}

Result<v1::DumpReply> ControlBackend::dump() {
  using nlohmann::json;
  auto v = views_.fresh();
  json doc;
  const auto self = hooks_.self_stats();
  doc["status"] = {{"mode", v->status.mode()},
                   {"nri_connected", v->status.nri_connected()},
                   {"nri_reconnects", v->status.nri_reconnects()},
                   {"containers", v->status.containers()},
                   {"ticks", v->status.ticks()},
                   {"interval_ms", v->status.interval_ms()},
                   {"cgroup_mode", v->status.cgroup_mode()},
                   {"updates_sent", v->status.updates_sent()},
                   {"update_failures", v->status.update_failures()},
                   {"journal_entries", v->status.journal_entries()},
                   {"rss_bytes", self.rss_bytes},
                   {"cpu_seconds", self.cpu_seconds}};
  json ctrs = json::array();
  for (const auto& c : v->containers) {
    json agg = json::array();
    for (const auto& a : c.preempted_by()) {
      agg.push_back({{"container", a.container()}, {"preemptions", a.preemptions()}});
    }
    ctrs.push_back({{"id", c.id()},
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
                    {"cpu_util", c.cpu_util()}});
  }
  doc["containers"] = ctrs;
  json applied = json::array();
  {
    for (const auto& a : hooks_.applied()) {
      applied.push_back({{"target_id", a.target_id},
                         {"victim_id", a.victim_id},
                         {"lever", std::string(policy::leverName(a.lever))},
                         {"rung", a.rung + 1},
                         {"applied", describeResources(a.applied_values)}});
    }
  }
  doc["applied"] = applied;
  json overlays = json::array();
  for (const auto& e : hooks_.overlays()) {
    overlays.push_back({{"id", e.id},
                        {"name", e.name},
                        {"overlay", describeResources(e.overlay)},
                        {"base", describeResources(e.base)},
                        {"spec", describeResources(e.spec)},
                        {"pending", e.pending},
                        {"attempts", e.attempts},
                        {"last_error", e.last_error},
                        {"why", e.why}});
  }
  doc["overlays"] = overlays;
  json decs = json::array();
  {
    for (const auto& d : log_.recent(0)) {
      decs.push_back({{"seq", d.seq()},
                      {"unix_ms", d.unix_ms()},
                      {"container", d.container()},
                      {"kind", d.kind()},
                      {"values", d.values()},
                      {"outcome", d.outcome()},
                      {"reason", d.reason()}});
    }
  }
  doc["decisions"] = decs;
  v1::DumpReply out;
  out.set_json(doc.dump(2));
  return out;
}

Result<v1::HistogramReply> ControlBackend::histogram(const std::string& query) {
  auto v = views_.fresh();
  auto idx = control::resolveContainer(v->containers, query);
  if (!idx) {
    return std::move(idx).error();
  }
  const auto& c = v->containers[*idx];
  v1::HistogramReply out;
  *out.mutable_container() = c;
  const std::size_t src = v->source[*idx];
  for (auto s : v->metrics.containers[src].runq_slots) {
    out.add_runq_slots(s);
  }
  if (const auto& last = v->last[src]) {
    for (auto s : *last) {
      out.add_last_slots(s);
    }
  }
  return out;
}

Result<v1::DecisionsReply> ControlBackend::decisions(uint32_t limit) {
  v1::DecisionsReply out;
  for (auto& d : log_.recent(limit)) {
    *out.add_decisions() = std::move(d);
  }
  return out;
}

Result<v1::ExplainReply> ControlBackend::explain(const std::string& query) {
  auto v = views_.fresh();
  auto idx = control::resolveContainer(v->containers, query);
  if (!idx) {
    return std::move(idx).error();
  }
  const auto& c = v->containers[*idx];
  v1::ExplainReply out;
  *out.mutable_container() = c;
  std::ostringstream text;
  Result<policy::ContainerView> view = COLOD_ERR(ENOENT, "unknown");
  { view = hooks_.describe(c.id()); }
  text << control::displayName(c) << " (" << c.id().substr(0, 12) << ")\n";
  if (!view) {
    text << "  the engine does not track it: " << view.error().message() << "\n";
  } else {
    const auto& cv = *view;
    text << "  tier: " << policy::tierName(cv.tier) << " (from " << cv.tier_source << ")\n";
    text << "  thresholds: run-queue p99 > " << cv.thresholds.runq_p99_us << " us or > "
         << cv.thresholds.baseline_factor << " x baseline (floor "
         << cv.thresholds.baseline_floor_us << " us)\n";
    text << "  baseline p99: " << cv.baseline_p99_us << " us; hits in window: " << cv.hits_in_window
         << "\n";
    text << "  victim now: " << (cv.victim ? "yes" : "no") << "\n";
    out.set_victim(cv.victim);
    for (const auto& b : cv.blame) {
      auto* e = out.add_blame();
      e->set_victim_id(b.victim_id);
      e->set_victim(b.victim_name);
      e->set_preemptions(b.preemptions);
      e->set_wait_us(b.wait_ns / 1000);
      e->set_overlap_us(b.overlap_ns / 1000);
      e->set_score(b.score);
      e->set_blamed(b.blamed);
      e->set_restricted(b.restricted);
      e->set_why(b.why);
    }
    if (!cv.last_explanation.empty()) {
      text << "  last: " << cv.last_explanation << "\n";
    }
  }
  // What colod holds on the container, from the actuator (the only writer): this is what the
  // runtime has or is being asked to have, whatever the engine believes.
  {
    const auto entries = hooks_.overlays();
    auto e = std::find_if(entries.begin(), entries.end(),
                          [&](const ReconcileEntry& x) { return x.id == c.id(); });
    if (e == entries.end()) {
      text << "  held by colod: nothing (the runtime's own values are in force)\n";
    } else {
      const bool releasing = e->overlay == policy::Resources{};
      text << "  held by colod: "
           << (releasing ? std::string("nothing; releasing to the runtime's own values")
                         : describeResources(e->overlay))
           << " (runtime's own: " << describeResources(e->base) << ")";
      if (!e->why.empty() && !releasing) {
        text << " because " << e->why;
      }
      text << "\n";
      if (e->pending) {
        const auto age_ms = (hooks_.now_ns() - e->pending_since_ns) / 1000000;
        text << "  not yet confirmed by the runtime: pending " << age_ms << " ms, " << e->attempts
             << " failed attempts"
             << (e->last_error.empty() ? std::string() : ", last: " + e->last_error) << "\n";
      } else {
        text << "  confirmed by the runtime: " << describeResources(e->spec) << "\n";
      }
    }
  }
  text << "  cgroup: " << (c.cgroup_id() != 0 ? c.cgroup_path() : "unresolved") << "\n";
  text << "  last interval: run-queue p50 " << c.runq_p50_us() << " us, p99 " << c.runq_p99_us()
       << " us over " << c.runq_count() << " wake-ups, " << c.preemptions() << " preemptions\n";
  for (auto& d : log_.about(c.id())) {
    *out.add_decisions() = std::move(d);
  }
  // Structured: what protects it (restrictions whose victim it is) and what colod holds on it
  // (restrictions whose target it is), with the runtime's own values a release returns to.
  out.set_structured(true);
  {
    const auto entries = hooks_.overlays();
    auto nameOf = [&v](const std::string& id) {
      for (const auto& x : v->containers) {
        if (x.id() == id) {
          return control::displayName(x);
        }
      }
      return id.substr(0, 12);
    };
    for (const auto& a : hooks_.applied()) {
      const bool protects = a.victim_id == c.id();
      const bool holds = a.target_id == c.id();
      if (!protects && !holds) {
        continue;
      }
      v1::Restriction r;
      r.set_target_id(a.target_id);
      r.set_target(nameOf(a.target_id));
      r.set_victim_id(a.victim_id);
      r.set_victim(nameOf(a.victim_id));
      r.set_lever(std::string(policy::leverName(a.lever)));
      r.set_rung(static_cast<uint32_t>(a.rung + 1));
      r.set_values(describeResources(a.applied_values));
      r.set_since_unix_ms(
          sinceUnixMs(log_.about(a.target_id), a.target_id, a.victim_id, r.lever()));
      auto e = std::find_if(entries.begin(), entries.end(),
                            [&](const ReconcileEntry& x) { return x.id == a.target_id; });
      if (e != entries.end()) {
        r.set_runtime_own(describeResources(e->base));
        r.set_confirmed(!e->pending);
      } else {
        r.set_runtime_own(describeResources(a.original_values));
      }
      if (protects) {
        *out.add_protections() = r;
      }
      if (holds) {
        *out.add_restrictions() = std::move(r);
      }
    }
  }
  out.set_text(text.str());
  return out;
}

Result<v1::ConfigShowReply> ControlBackend::configShow() {
  v1::ConfigShowReply out;
  const auto conf = hooks_.config();
  out.set_path(hooks_.config_path);
  if (conf->text.empty()) {
    std::string yaml =
        "# built-in defaults (colod started without --config)\ndaemon: {}\npolicy:\n";
    std::istringstream in{std::string(policy::defaultConfigYaml())};
    std::string line;
    while (std::getline(in, line)) {
      yaml += line.empty() ? "\n" : "  " + line + "\n";
    }
    out.set_yaml(yaml);
  } else {
    out.set_yaml(conf->text);
  }
  out.set_loaded_unix_ms(conf->loaded_unix_ms > 0 ? conf->loaded_unix_ms : hooks_.started_unix_ms);
  for (const auto& e : effectiveValues(*conf, hooks_.overrides)) {
    auto* v = out.add_values();
    v->set_key(e.key);
    v->set_value(e.value);
    switch (e.source) {
      case ValueSource::Default:
        v->set_source(v1::ConfigValue::SOURCE_DEFAULT);
        break;
      case ValueSource::File:
        v->set_source(v1::ConfigValue::SOURCE_FILE);
        break;
      case ValueSource::CommandLine:
        v->set_source(v1::ConfigValue::SOURCE_COMMAND_LINE);
        break;
    }
    v->set_flag(e.flag);
    v->set_note(e.note);
  }
  return out;
}

Result<v1::ConfigCheckReply> ControlBackend::configCheck(const v1::ConfigCheckRequest& req) {
  v1::ConfigCheckReply out;
  auto r = parseConfig(req.yaml(), req.path().empty() ? "<config>" : req.path());
  out.set_ok(r.has_value());
  if (!r) {
    // A configuration error is its own sentence (file:line:col: key: value: why), no strerror.
    out.set_error(r.error().errnoValue() == EINVAL ? r.error().context() : r.error().message());
  }
  return out;
}

Result<v1::ConfigReloadReply> ControlBackend::configReload() {
  auto r = hooks_.reload();
  v1::ConfigReloadReply out;
  out.set_ok(r.has_value());
  if (!r) {
    // A configuration error is its own sentence (file:line:col: key: value: why), no strerror.
    out.set_error(r.error().errnoValue() == EINVAL ? r.error().context() : r.error().message());
  } else {
    out.set_changed(*r);
  }
  return out;
}

Result<void> ControlBackend::record(uint32_t seconds,
                                    const std::function<bool(const v1::RecordChunk&)>& write,
                                    const std::function<bool()>& cancelled) {
  return recorders_.serve(
      seconds, hooks_.trace_head,
      [&write](const RecordChunk& c) {
        v1::RecordChunk chunk;
        chunk.set_data(c.data);
        chunk.set_snapshots(c.snapshots);
        return write(chunk);
      },
      cancelled);
}

}  // namespace colod::daemon
