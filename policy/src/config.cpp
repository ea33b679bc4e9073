// SPDX-License-Identifier: Apache-2.0
// YAML -> Config. yaml-cpp throws; every call into it is inside this file and wrapped so no
// exception leaves the module (style rules 12, 14). Scalars are converted with std::from_chars.
#include "colod/policy/config.h"

#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cmath>
#include <limits>
#include <set>
#include <sstream>

#include "colod/policy/tier.h"

namespace colod::policy {
namespace {

std::string joinPath(std::string_view prefix, std::string_view key) {
  if (prefix.empty()) {
    return std::string(key);
  }
  return std::string(prefix) + "." + std::string(key);
}

class Parser {
 public:
  explicit Parser(std::string_view file) : file_(file) {}

  Error err(const YAML::Node& node,
            std::string_view path,
            std::string_view value,
            std::string_view why) const {
    std::ostringstream os;
    os << file_;
    const YAML::Mark mark = node.Mark();
    if (mark.line >= 0) {
      os << ":" << mark.line + 1 << ":" << mark.column + 1;
    }
    os << ": " << path << ": ";
    if (!value.empty()) {
      os << "\"" << value << "\": ";
    }
    os << why;
    return Error(EINVAL, os.str());
  }

  static std::string show(const YAML::Node& node) {
    if (node.IsScalar()) {
      return node.Scalar();
    }
    if (node.IsMap()) {
      return "<mapping>";
    }
    if (node.IsSequence()) {
      return "<sequence>";
    }
    return "<null>";
  }

  Result<void> checkMap(const YAML::Node& node,
                        std::string_view path,
                        std::initializer_list<std::string_view> allowed) const {
    if (!node.IsMap()) {
      return err(node, path.empty() ? "<top>" : path, show(node), "expected a mapping");
    }
    for (const auto& kv : node) {
      if (!kv.first.IsScalar()) {
        return err(kv.first, path, show(kv.first), "keys must be strings");
      }
      const std::string& key = kv.first.Scalar();
      if (std::find(allowed.begin(), allowed.end(), key) == allowed.end()) {
        std::string why = "unknown key (allowed:";
        for (auto a : allowed) {
          why += " ";
          why += a;
        }
        why += ")";
        return err(kv.first, joinPath(path, key), "", why);
      }
    }
    return ok();
  }

  Result<uint64_t> u64(const YAML::Node& node,
                       std::string_view path,
                       uint64_t lo,
                       uint64_t hi) const {
    if (!node.IsScalar()) {
      return err(node, path, show(node), "expected an unsigned integer");
    }
    const std::string& s = node.Scalar();
    uint64_t v = 0;
    auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
    if (ec != std::errc() || p != s.data() + s.size()) {
      return err(node, path, s, "expected an unsigned integer");
    }
    if (v < lo || v > hi) {
      return err(node, path, s,
                 "out of range [" + std::to_string(lo) + ", " + std::to_string(hi) + "]");
    }
    return v;
  }

  Result<int> i32(const YAML::Node& node, std::string_view path, int lo, int hi) const {
    auto v = u64(node, path, static_cast<uint64_t>(std::max(lo, 0)), static_cast<uint64_t>(hi));
    if (!v) {
      return v.error();
    }
    return static_cast<int>(*v);
  }

  Result<double> dbl(const YAML::Node& node, std::string_view path, double lo, double hi) const {
    if (!node.IsScalar()) {
      return err(node, path, show(node), "expected a number");
    }
    const std::string& s = node.Scalar();
    double v = 0;
    auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
    if (ec != std::errc() || p != s.data() + s.size() || !std::isfinite(v)) {
      return err(node, path, s, "expected a number");
    }
    if (v < lo || v > hi) {
      std::ostringstream os;
      os << "out of range [" << lo << ", " << hi << "]";
      return err(node, path, s, os.str());
    }
    return v;
  }

  Result<bool> boolean(const YAML::Node& node, std::string_view path) const {
    if (node.IsScalar()) {
      const std::string& s = node.Scalar();
      if (s == "true" || s == "True" || s == "TRUE") {
        return true;
      }
      if (s == "false" || s == "False" || s == "FALSE") {
        return false;
      }
    }
    return err(node, path, show(node), "expected true or false");
  }

  Result<std::vector<Lever>> ladder(const YAML::Node& node,
                                    std::string_view path,
                                    bool memory) const {
    if (!node.IsSequence()) {
      return err(node, path, show(node), "expected a list of levers");
    }
    std::vector<Lever> out;
    for (size_t i = 0; i < node.size(); ++i) {
      const YAML::Node item = node[i];
      const std::string ipath = std::string(path) + "[" + std::to_string(i) + "]";
      auto lever = item.IsScalar() ? leverFromName(item.Scalar()) : std::nullopt;
      if (!lever) {
        return err(item, ipath, show(item),
                   "unknown lever (allowed: cpu_shares cpuset cpu_quota memory_limit)");
      }
      const bool is_mem = *lever == Lever::MemoryLimit;
      if (is_mem != memory) {
        return err(item, ipath, show(item),
                   memory ? "only memory_limit belongs in the memory ladder"
                          : "memory_limit belongs in memory_ladder");
      }
      if (std::find(out.begin(), out.end(), *lever) != out.end()) {
        return err(item, ipath, show(item), "lever listed twice");
      }
      out.push_back(*lever);
    }
    return out;
  }

  Result<std::vector<Tier>> tiers(const YAML::Node& node, std::string_view path) const {
    if (!node.IsSequence()) {
      return err(node, path, show(node), "expected a list of tiers");
    }
    std::vector<Tier> out;
    for (size_t i = 0; i < node.size(); ++i) {
      const YAML::Node item = node[i];
      const std::string ipath = std::string(path) + "[" + std::to_string(i) + "]";
      auto tier = item.IsScalar() ? tierFromName(item.Scalar()) : std::nullopt;
      if (!tier || (*tier != Tier::Ls && *tier != Tier::System)) {
        return err(item, ipath, show(item), "victim tiers are ls or system");
      }
      if (std::find(out.begin(), out.end(), *tier) == out.end()) {
        out.push_back(*tier);
      }
    }
    return out;
  }

 private:
  std::string file_;
};

// Assigns `out` from map[key] when present, converted by `conv`.
#define COLOD_FIELD(map, path, key, out, conv)   \
  do {                                           \
    if (const YAML::Node n_ = (map)[key]) {      \
      auto r_ = conv(n_, joinPath((path), key)); \
      if (!r_) {                                 \
        return std::move(r_).error();            \
      }                                          \
      (out) = *r_;                               \
    }                                            \
  } while (0)

// Propagates an error unchanged: messages already carry file, line and key path.
#define COLOD_TRY_PLAIN(expr)       \
  do {                              \
    auto r_ = (expr);               \
    if (!r_.has_value()) {          \
      return std::move(r_).error(); \
    }                               \
  } while (0)

constexpr uint64_t kMaxU64 = std::numeric_limits<int64_t>::max();

Result<void> parseThresholdOverride(const Parser& p,
                                    const YAML::Node& node,
                                    const std::string& path,
                                    ThresholdOverride& out) {
  COLOD_TRY_PLAIN(p.checkMap(node, path,
                             {"runq_p99_us", "baseline_factor", "baseline_floor_us",
                              "psi_cpu_some_avg10", "reclaim_stall_us_per_s"}));
  auto us = [&](const YAML::Node& n, const std::string& k) { return p.u64(n, k, 1, 60'000'000); };
  auto fac = [&](const YAML::Node& n, const std::string& k) { return p.dbl(n, k, 1.0, 1000.0); };
  auto pct = [&](const YAML::Node& n, const std::string& k) { return p.dbl(n, k, 0.0, 100.0); };
  auto stall = [&](const YAML::Node& n, const std::string& k) { return p.u64(n, k, 0, 1'000'000); };
  COLOD_FIELD(node, path, "runq_p99_us", out.runq_p99_us, us);
  COLOD_FIELD(node, path, "baseline_factor", out.baseline_factor, fac);
  COLOD_FIELD(node, path, "baseline_floor_us", out.baseline_floor_us, us);
  COLOD_FIELD(node, path, "psi_cpu_some_avg10", out.psi_cpu_some_avg10, pct);
  COLOD_FIELD(node, path, "reclaim_stall_us_per_s", out.reclaim_stall_us_per_s, stall);
  return ok();
}

void applyOverride(Thresholds& t, const ThresholdOverride& o) {
  if (o.runq_p99_us) {
    t.runq_p99_us = *o.runq_p99_us;
  }
  if (o.baseline_factor) {
    t.baseline_factor = *o.baseline_factor;
  }
  if (o.baseline_floor_us) {
    t.baseline_floor_us = *o.baseline_floor_us;
  }
  if (o.psi_cpu_some_avg10) {
    t.psi_cpu_some_avg10 = *o.psi_cpu_some_avg10;
  }
  if (o.reclaim_stall_us_per_s) {
    t.reclaim_stall_us_per_s = *o.reclaim_stall_us_per_s;
  }
}

Result<Config> parseSectionNode(const Parser& p, const YAML::Node& root, const std::string& pre) {
  Config c;
  if (!root || root.IsNull()) {
    return c;
  }
  COLOD_TRY_PLAIN(p.checkMap(
      root, pre,
      {"dry_run", "detection", "thresholds", "tier_thresholds", "actions", "floors", "levers"}));
  auto boolean = [&](const YAML::Node& n, const std::string& k) { return p.boolean(n, k); };
  COLOD_FIELD(root, pre, "dry_run", c.dry_run, boolean);

  if (const YAML::Node d = root["detection"]) {
    const std::string path = joinPath(pre, "detection");
    COLOD_TRY_PLAIN(
        p.checkMap(d, path,
                   {"window_intervals", "hit_intervals", "min_samples", "baseline_alpha",
                    "victim_tiers", "self_throttle_fraction", "self_wait_fraction", "wait_share",
                    "wait_load_min", "severe_wait_load"}));
    auto win = [&](const YAML::Node& n, const std::string& k) { return p.i32(n, k, 1, 1000); };
    auto samples = [&](const YAML::Node& n, const std::string& k) {
      return p.u64(n, k, 1, 1'000'000);
    };
    auto frac = [&](const YAML::Node& n, const std::string& k) { return p.dbl(n, k, 0.0, 1.0); };
    auto alpha = [&](const YAML::Node& n, const std::string& k) { return p.dbl(n, k, 0.001, 1.0); };
    auto tiers = [&](const YAML::Node& n, const std::string& k) { return p.tiers(n, k); };
    COLOD_FIELD(d, path, "window_intervals", c.detection.window_intervals, win);
    COLOD_FIELD(d, path, "hit_intervals", c.detection.hit_intervals, win);
    COLOD_FIELD(d, path, "min_samples", c.detection.min_samples, samples);
    COLOD_FIELD(d, path, "baseline_alpha", c.detection.baseline_alpha, alpha);
    COLOD_FIELD(d, path, "victim_tiers", c.detection.victim_tiers, tiers);
    COLOD_FIELD(d, path, "self_throttle_fraction", c.detection.self_throttle_fraction, frac);
    COLOD_FIELD(d, path, "self_wait_fraction", c.detection.self_wait_fraction, frac);
    COLOD_FIELD(d, path, "wait_share", c.detection.wait_share, frac);
    auto load = [&](const YAML::Node& n, const std::string& k) { return p.dbl(n, k, 0.0, 1e6); };
    COLOD_FIELD(d, path, "wait_load_min", c.detection.wait_load_min, load);
    COLOD_FIELD(d, path, "severe_wait_load", c.detection.severe_wait_load, load);
    if (c.detection.hit_intervals > c.detection.window_intervals) {
      return p.err(d["hit_intervals"] ? d["hit_intervals"] : d, joinPath(path, "hit_intervals"),
                   std::to_string(c.detection.hit_intervals),
                   "must not exceed window_intervals (" +
                       std::to_string(c.detection.window_intervals) + ")");
    }
  }

  if (const YAML::Node t = root["thresholds"]) {
    ThresholdOverride o;
    COLOD_TRY_PLAIN(parseThresholdOverride(p, t, joinPath(pre, "thresholds"), o));
    applyOverride(c.thresholds, o);
  }

  if (const YAML::Node tt = root["tier_thresholds"]) {
    const std::string path = joinPath(pre, "tier_thresholds");
    COLOD_TRY_PLAIN(p.checkMap(tt, path, {"ls", "system"}));
    for (const auto& kv : tt) {
      const std::string key = kv.first.Scalar();
      ThresholdOverride o;
      COLOD_TRY_PLAIN(parseThresholdOverride(p, kv.second, joinPath(path, key), o));
      c.tier_thresholds[*tierFromName(key)] = o;
    }
  }

  if (const YAML::Node a = root["actions"]) {
    const std::string path = joinPath(pre, "actions");
    COLOD_TRY_PLAIN(p.checkMap(
        a, path,
        {"cpu_ladder", "memory_ladder", "verify_intervals", "improve_ratio", "quiet_intervals",
         "relax_cooldown_intervals", "change_cooldown_intervals", "max_changes_per_round",
         "max_antagonists", "min_antagonist_score", "max_escalations", "idle_hold_intervals",
         "admission", "blame_window_intervals", "min_blame_preemptions", "min_blame_wait_us"}));
    auto cpu = [&](const YAML::Node& n, const std::string& k) { return p.ladder(n, k, false); };
    auto mem = [&](const YAML::Node& n, const std::string& k) { return p.ladder(n, k, true); };
    auto pos = [&](const YAML::Node& n, const std::string& k) { return p.i32(n, k, 1, 100000); };
    auto nonneg = [&](const YAML::Node& n, const std::string& k) { return p.i32(n, k, 0, 100000); };
    auto ratio = [&](const YAML::Node& n, const std::string& k) { return p.dbl(n, k, 0.05, 1.0); };
    auto frac = [&](const YAML::Node& n, const std::string& k) { return p.dbl(n, k, 0.0, 1.0); };
    COLOD_FIELD(a, path, "cpu_ladder", c.actions.cpu_ladder, cpu);
    COLOD_FIELD(a, path, "memory_ladder", c.actions.memory_ladder, mem);
    COLOD_FIELD(a, path, "verify_intervals", c.actions.verify_intervals, pos);
    COLOD_FIELD(a, path, "improve_ratio", c.actions.improve_ratio, ratio);
    COLOD_FIELD(a, path, "quiet_intervals", c.actions.quiet_intervals, pos);
    COLOD_FIELD(a, path, "relax_cooldown_intervals", c.actions.relax_cooldown_intervals, nonneg);
    COLOD_FIELD(a, path, "change_cooldown_intervals", c.actions.change_cooldown_intervals, nonneg);
    COLOD_FIELD(a, path, "max_changes_per_round", c.actions.max_changes_per_round, pos);
    COLOD_FIELD(a, path, "max_antagonists", c.actions.max_antagonists, pos);
    COLOD_FIELD(a, path, "min_antagonist_score", c.actions.min_antagonist_score, frac);
    COLOD_FIELD(a, path, "max_escalations", c.actions.max_escalations, pos);
    COLOD_FIELD(a, path, "idle_hold_intervals", c.actions.idle_hold_intervals, nonneg);
    COLOD_FIELD(a, path, "blame_window_intervals", c.actions.blame_window_intervals, pos);
    auto count = [&](const YAML::Node& n, const std::string& k) {
      return p.dbl(n, k, 0.0, 1'000'000.0);
    };
    COLOD_FIELD(a, path, "min_blame_preemptions", c.actions.min_blame_preemptions, count);
    auto wait_us = [&](const YAML::Node& n, const std::string& k) {
      return p.u64(n, k, 0, 60'000'000);
    };
    COLOD_FIELD(a, path, "min_blame_wait_us", c.actions.min_blame_wait_us, wait_us);
    auto admission = [&](const YAML::Node& n, const std::string& k) -> Result<AdmissionMode> {
      if (n.IsScalar() && n.Scalar() == "restrict") {
        return AdmissionMode::Restrict;
      }
      if (n.IsScalar() && n.Scalar() == "off") {
        return AdmissionMode::Off;
      }
      return p.err(n, k, n.IsScalar() ? n.Scalar() : std::string("?"), "expected restrict or off");
    };
    COLOD_FIELD(a, path, "admission", c.actions.admission, admission);
  }

  if (const YAML::Node f = root["floors"]) {
    const std::string path = joinPath(pre, "floors");
    COLOD_TRY_PLAIN(p.checkMap(f, path,
                               {"be_min_cpu_shares", "be_min_cpus", "be_min_quota_millicores",
                                "be_min_memory_bytes", "be_min_quota_node_fraction"}));
    auto shares = [&](const YAML::Node& n, const std::string& k) {
      return p.u64(n, k, 2, 262144);  // kernel cpu.shares range
    };
    auto cpus = [&](const YAML::Node& n, const std::string& k) { return p.i32(n, k, 1, 65536); };
    auto milli = [&](const YAML::Node& n, const std::string& k) {
      return p.u64(n, k, 1, 1'000'000);
    };
    auto bytes = [&](const YAML::Node& n, const std::string& k) {
      return p.u64(n, k, 1 << 20, kMaxU64);
    };
    COLOD_FIELD(f, path, "be_min_cpu_shares", c.floors.be_min_cpu_shares, shares);
    COLOD_FIELD(f, path, "be_min_cpus", c.floors.be_min_cpus, cpus);
    COLOD_FIELD(f, path, "be_min_quota_millicores", c.floors.be_min_quota_millicores, milli);
    auto nfrac = [&](const YAML::Node& n, const std::string& k) { return p.dbl(n, k, 0.0, 1.0); };
    COLOD_FIELD(f, path, "be_min_quota_node_fraction", c.floors.be_min_quota_node_fraction, nfrac);
    if (const YAML::Node n = f["be_min_memory_bytes"]) {
      auto r = bytes(n, joinPath(path, "be_min_memory_bytes"));
      if (!r) {
        return std::move(r).error();
      }
      c.floors.be_min_memory_bytes = static_cast<int64_t>(*r);
    }
  }

  if (const YAML::Node l = root["levers"]) {
    const std::string path = joinPath(pre, "levers");
    COLOD_TRY_PLAIN(p.checkMap(
        l, path,
        {"be_cpu_shares", "be_cpuset_max_fraction", "be_quota_fraction", "quota_headroom_fraction",
         "quota_step_fraction", "quota_period_us", "memory_step_fraction"}));
    auto shares = [&](const YAML::Node& n, const std::string& k) { return p.u64(n, k, 2, 262144); };
    auto frac = [&](const YAML::Node& n, const std::string& k) { return p.dbl(n, k, 0.01, 1.0); };
    auto step = [&](const YAML::Node& n, const std::string& k) { return p.dbl(n, k, 0.01, 0.9); };
    auto period = [&](const YAML::Node& n, const std::string& k) {
      return p.u64(n, k, 1000, 1'000'000);  // kernel cfs_period_us range
    };
    COLOD_FIELD(l, path, "be_cpu_shares", c.levers.be_cpu_shares, shares);
    COLOD_FIELD(l, path, "be_cpuset_max_fraction", c.levers.be_cpuset_max_fraction, frac);
    COLOD_FIELD(l, path, "be_quota_fraction", c.levers.be_quota_fraction, frac);
    auto head = [&](const YAML::Node& n, const std::string& k) { return p.dbl(n, k, 0.0, 0.9); };
    COLOD_FIELD(l, path, "quota_headroom_fraction", c.levers.quota_headroom_fraction, head);
    COLOD_FIELD(l, path, "quota_step_fraction", c.levers.quota_step_fraction, step);
    COLOD_FIELD(l, path, "quota_period_us", c.levers.quota_period_us, period);
    COLOD_FIELD(l, path, "memory_step_fraction", c.levers.memory_step_fraction, step);
  }
  return c;
}

Result<YAML::Node> load(std::string_view text, std::string_view file) {
  try {
    return YAML::Load(std::string(text));
  } catch (const YAML::Exception& e) {
    std::ostringstream os;
    os << file;
    if (e.mark.line >= 0) {
      os << ":" << e.mark.line + 1 << ":" << e.mark.column + 1;
    }
    os << ": invalid YAML: " << e.msg;
    return Error(EINVAL, os.str());
  }
}

Result<Config> parseGuarded(const YAML::Node& node, std::string_view file, std::string_view pre) {
  // yaml-cpp may still throw on odd documents (e.g. aliases); keep it inside.
  try {
    Parser p(file);
    auto c = parseSectionNode(p, node, std::string(pre));
    if (!c) {
      return c;
    }
    if (auto v = validateConfig(*c, file); !v) {
      return std::move(v).error();
    }
    return c;
  } catch (const YAML::Exception& e) {
    return Error(EINVAL, std::string(file) + ": invalid YAML: " + e.msg);
  }
}

}  // namespace

std::optional<Lever> leverFromName(std::string_view name) {
  if (name == "cpu_shares") {
    return Lever::CpuShares;
  }
  if (name == "cpuset") {
    return Lever::Cpuset;
  }
  if (name == "cpu_quota") {
    return Lever::CpuQuota;
  }
  if (name == "memory_limit") {
    return Lever::MemoryLimit;
  }
  return std::nullopt;
}

std::optional<Tier> tierFromName(std::string_view name) {
  if (name == "ls") {
    return Tier::Ls;
  }
  if (name == "be") {
    return Tier::Be;
  }
  if (name == "system") {
    return Tier::System;
  }
  return std::nullopt;
}

Result<void> validateConfig(const Config& c, std::string_view file) {
  auto bad = [&](std::string_view key, const std::string& value, std::string_view why) {
    return Error(EINVAL, std::string(file) + ": " + std::string(key) + ": \"" + value +
                             "\": " + std::string(why));
  };
  const auto& d = c.detection;
  if (d.window_intervals < 1 || d.window_intervals > 1000) {
    return bad("detection.window_intervals", std::to_string(d.window_intervals),
               "out of range [1, 1000]");
  }
  if (d.hit_intervals < 1 || d.hit_intervals > d.window_intervals) {
    return bad("detection.hit_intervals", std::to_string(d.hit_intervals),
               "must be in [1, window_intervals]");
  }
  if (!(d.baseline_alpha > 0.0 && d.baseline_alpha <= 1.0)) {
    return bad("detection.baseline_alpha", std::to_string(d.baseline_alpha), "out of range (0, 1]");
  }
  if (d.victim_tiers.empty()) {
    return bad("detection.victim_tiers", "[]", "at least one tier");
  }
  for (Tier t : d.victim_tiers) {
    if (t != Tier::Ls && t != Tier::System) {
      return bad("detection.victim_tiers", std::string(tierName(t)),
                 "victim tiers are ls or system");
    }
  }
  if (c.thresholds.runq_p99_us == 0) {
    return bad("thresholds.runq_p99_us", "0", "must be > 0");
  }
  if (c.thresholds.baseline_factor < 1.0) {
    return bad("thresholds.baseline_factor", std::to_string(c.thresholds.baseline_factor),
               "must be >= 1");
  }
  const auto& a = c.actions;
  if (a.cpu_ladder.empty()) {
    return bad("actions.cpu_ladder", "[]", "at least one lever");
  }
  std::set<Lever> seen;
  for (Lever l : a.cpu_ladder) {
    if (l == Lever::MemoryLimit || !seen.insert(l).second) {
      return bad("actions.cpu_ladder", std::string(leverName(l)), "duplicate or memory lever");
    }
  }
  for (Lever l : a.memory_ladder) {
    if (l != Lever::MemoryLimit) {
      return bad("actions.memory_ladder", std::string(leverName(l)),
                 "only memory_limit belongs here");
    }
  }
  if (a.verify_intervals < 1 || a.quiet_intervals < 1 || a.max_changes_per_round < 1 ||
      a.max_antagonists < 1 || a.max_escalations < 1 || a.blame_window_intervals < 1 ||
      a.min_blame_preemptions < 0 || a.relax_cooldown_intervals < 0 ||
      a.change_cooldown_intervals < 0 || a.idle_hold_intervals < 0) {
    return bad("actions", "", "interval counts and limits must be >= 1 (cooldowns >= 0)");
  }
  if (!(a.improve_ratio > 0.0 && a.improve_ratio <= 1.0)) {
    return bad("actions.improve_ratio", std::to_string(a.improve_ratio), "out of range (0, 1]");
  }
  const auto& f = c.floors;
  if (f.be_min_cpu_shares < 2) {
    return bad("floors.be_min_cpu_shares", std::to_string(f.be_min_cpu_shares),
               "must be >= 2 (kernel minimum)");
  }
  if (f.be_min_cpus < 1) {
    return bad("floors.be_min_cpus", std::to_string(f.be_min_cpus), "must be >= 1");
  }
  if (f.be_min_quota_millicores < 1) {
    return bad("floors.be_min_quota_millicores", "0", "must be > 0 (never zero)");
  }
  if (f.be_min_memory_bytes < (1 << 20)) {
    return bad("floors.be_min_memory_bytes", std::to_string(f.be_min_memory_bytes),
               "must be >= 1 MiB");
  }
  const auto& l = c.levers;
  if (l.be_cpu_shares < 2 || l.quota_period_us < 1000 || l.quota_period_us > 1'000'000 ||
      !(l.be_cpuset_max_fraction > 0.0 && l.be_cpuset_max_fraction <= 1.0) ||
      !(l.be_quota_fraction > 0.0 && l.be_quota_fraction <= 1.0) ||
      !(l.quota_headroom_fraction >= 0.0 && l.quota_headroom_fraction <= 0.9) ||
      !(l.quota_step_fraction >= 0.01 && l.quota_step_fraction <= 0.9) ||
      !(c.floors.be_min_quota_node_fraction >= 0.0 && c.floors.be_min_quota_node_fraction <= 1.0) ||
      !(c.detection.wait_share >= 0.0 && c.detection.wait_share <= 1.0) ||
      !(c.detection.wait_load_min >= 0.0) || !(c.detection.severe_wait_load >= 0.0) ||
      !(l.memory_step_fraction > 0.0 && l.memory_step_fraction < 1.0)) {
    return bad("levers", "", "a lever setting is out of range (see policy/README.md)");
  }
  return ok();
}

Result<Config> parsePolicySection(std::string_view yaml_text,
                                  std::string_view file,
                                  std::string_view key_prefix) {
  auto node = load(yaml_text, file);
  if (!node) {
    return std::move(node).error();
  }
  return parseGuarded(*node, file, key_prefix);
}

Result<Config> parseConfigDocument(std::string_view yaml_text, std::string_view file) {
  auto node = load(yaml_text, file);
  if (!node) {
    return std::move(node).error();
  }
  try {
    if (!node->IsDefined() || node->IsNull()) {
      return Config{};
    }
    if (!node->IsMap()) {
      return Error(EINVAL, std::string(file) + ": <top>: expected a mapping");
    }
    const YAML::Node section = (*node)["policy"];
    if (!section) {
      return Config{};
    }
    return parseGuarded(section, file, "policy");
  } catch (const YAML::Exception& e) {
    return Error(EINVAL, std::string(file) + ": invalid YAML: " + e.msg);
  }
}

Thresholds effectiveThresholds(const Config& config,
                               Tier tier,
                               const ContainerInfo& info,
                               std::vector<std::string>* problems) {
  Thresholds t = config.thresholds;
  if (auto it = config.tier_thresholds.find(tier); it != config.tier_thresholds.end()) {
    applyOverride(t, it->second);
  }
  auto parseU = [&](const std::string& key, const std::string& v, uint64_t lo, uint64_t hi,
                    uint64_t& out) {
    uint64_t x = 0;
    auto [p, ec] = std::from_chars(v.data(), v.data() + v.size(), x);
    if (ec != std::errc() || p != v.data() + v.size() || x < lo || x > hi) {
      if (problems != nullptr) {
        problems->push_back("annotation " + key + "=\"" + v +
                            "\" ignored: expected an integer in [" + std::to_string(lo) + ", " +
                            std::to_string(hi) + "]");
      }
      return;
    }
    out = x;
  };
  auto parseD = [&](const std::string& key, const std::string& v, double lo, double hi,
                    double& out) {
    double x = 0;
    auto [p, ec] = std::from_chars(v.data(), v.data() + v.size(), x);
    if (ec != std::errc() || p != v.data() + v.size() || !(x >= lo && x <= hi)) {
      if (problems != nullptr) {
        std::ostringstream os;
        os << "annotation " << key << "=\"" << v << "\" ignored: expected a number in [" << lo
           << ", " << hi << "]";
        problems->push_back(os.str());
      }
      return;
    }
    out = x;
  };
  for (const auto* map : {&info.pod_annotations, &info.container_annotations}) {
    for (const auto& [key, value] : *map) {
      if (key == kAnnotationRunqP99) {
        parseU(key, value, 1, 60'000'000, t.runq_p99_us);
      } else if (key == kAnnotationBaselineFactor) {
        parseD(key, value, 1.0, 1000.0, t.baseline_factor);
      } else if (key == kAnnotationPsiCpuSome) {
        parseD(key, value, 0.0, 100.0, t.psi_cpu_some_avg10);
      } else if (key == kAnnotationReclaimStall) {
        parseU(key, value, 0, 1'000'000, t.reclaim_stall_us_per_s);
      }
    }
  }
  return t;
}

}  // namespace colod::policy
