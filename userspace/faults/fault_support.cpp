// SPDX-License-Identifier: Apache-2.0
#include "fault_support.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <ctime>
#include <limits>

#include "colod/base/unique_fd.h"

namespace colod::faults {

using json = nlohmann::json;

namespace {

// The kernel's list format, so "0,1" and "0-1" compare equal. Text that is not a list is kept.
std::string normalizeList(const std::string& s) {
  std::vector<std::pair<unsigned long, unsigned long>> spans;
  size_t pos = 0;
  while (pos < s.size()) {
    size_t end = s.find(',', pos);
    if (end == std::string::npos) {
      end = s.size();
    }
    const std::string part = s.substr(pos, end - pos);
    pos = end + 1;
    if (part.empty()) {
      continue;
    }
    char* rest = nullptr;
    errno = 0;
    const unsigned long lo = std::strtoul(part.c_str(), &rest, 10);
    unsigned long hi = lo;
    if (errno != 0 || rest == part.c_str()) {
      return s;
    }
    if (*rest == '-') {
      const char* hs = rest + 1;
      hi = std::strtoul(hs, &rest, 10);
      if (rest == hs || hi < lo) {
        return s;
      }
    }
    if (*rest != '\0' && *rest != '\n') {
      return s;
    }
    spans.emplace_back(lo, hi);
  }
  if (spans.empty()) {
    return "";
  }
  std::sort(spans.begin(), spans.end());
  std::vector<std::pair<unsigned long, unsigned long>> merged{spans.front()};
  for (size_t i = 1; i < spans.size(); ++i) {
    if (spans[i].first <= merged.back().second + 1) {
      merged.back().second = std::max(merged.back().second, spans[i].second);
    } else {
      merged.push_back(spans[i]);
    }
  }
  std::string out;
  for (const auto& [lo, hi] : merged) {
    out += (out.empty() ? "" : ",") + std::to_string(lo);
    if (hi != lo) {
      out += "-" + std::to_string(hi);
    }
  }
  return out;
}

std::optional<int64_t> intField(const json& j, const char* key) {
  if (!j.is_object() || !j.contains(key) || !j[key].is_number_integer()) {
    return std::nullopt;
  }
  return j[key].get<int64_t>();
}

std::optional<std::string> listField(const json& j, const char* key) {
  if (!j.is_object() || !j.contains(key) || !j[key].is_string()) {
    return std::nullopt;
  }
  const std::string v = normalizeList(j[key].get<std::string>());
  if (v.empty()) {
    return std::nullopt;
  }
  return v;
}

// Unset quota/memory = unlimited.
int64_t unlimited(const std::optional<int64_t>& v) { return v.value_or(-1); }

}  // namespace

std::vector<std::string> diffFields(const Res& a, const Res& b) {
  std::vector<std::string> out;
  if (unlimited(a.cpu_quota) != unlimited(b.cpu_quota)) {
    out.emplace_back("cpu_quota");
  }
  if (a.cpu_period && b.cpu_period && *a.cpu_period != *b.cpu_period) {
    out.emplace_back("cpu_period");
  }
  if (a.cpu_weight && b.cpu_weight) {
    if (*a.cpu_weight != *b.cpu_weight) {
      out.emplace_back("cpu_shares");
    }
  } else if (a.cpu_shares && b.cpu_shares && *a.cpu_shares != *b.cpu_shares) {
    out.emplace_back("cpu_shares");
  }
  if (a.cpus && b.cpus && *a.cpus != *b.cpus) {
    out.emplace_back("cpus");
  }
  if (a.mems && b.mems && *a.mems != *b.mems) {
    out.emplace_back("mems");
  }
  if (unlimited(a.memory_limit) != unlimited(b.memory_limit)) {
    out.emplace_back("memory_limit");
  }
  return out;
}

std::string fieldText(const Res& r, const std::string& field) {
  auto num = [](const std::optional<int64_t>& v) {
    return v ? std::to_string(*v) : std::string("unset");
  };
  if (field == "cpu_quota") {
    return std::to_string(unlimited(r.cpu_quota));
  }
  if (field == "cpu_period") {
    return num(r.cpu_period);
  }
  if (field == "cpu_shares") {
    return r.cpu_weight ? "weight " + std::to_string(*r.cpu_weight) : num(r.cpu_shares);
  }
  if (field == "cpus") {
    return r.cpus.value_or("unset");
  }
  if (field == "mems") {
    return r.mems.value_or("unset");
  }
  if (field == "memory_limit") {
    return std::to_string(unlimited(r.memory_limit));
  }
  return "?";
}

std::string describe(const Res& r) {
  std::string out;
  for (const char* f : {"cpu_quota", "cpu_period", "cpu_shares", "cpus", "mems", "memory_limit"}) {
    out += (out.empty() ? "" : " ") + std::string(f) + "=" + fieldText(r, f);
  }
  return out;
}

Res resFromState(const json& j) {
  Res r;
  r.cpu_quota = intField(j, "cpu_quota");
  r.cpu_period = intField(j, "cpu_period");
  r.cpu_shares = intField(j, "cpu_shares");
  r.cpu_weight = intField(j, "cpu_weight");
  r.cpus = listField(j, "cpus");
  r.mems = listField(j, "mems");
  r.memory_limit = intField(j, "memory_limit");
  return r;
}

Res resFromJournal(const json& j) {
  Res r = resFromState(j);
  // colod's own names (policy::encodeResourcesJson) for the cpuset fields.
  if (!r.cpus) {
    r.cpus = listField(j, "cpuset_cpus");
  }
  if (!r.mems) {
    r.mems = listField(j, "cpuset_mems");
  }
  return r;
}

std::vector<std::string> overlayFields(const json& overlay) {
  std::vector<std::string> out;
  if (!overlay.is_object()) {
    return out;
  }
  for (const auto& [key, value] : overlay.items()) {
    if (value.is_null()) {
      continue;
    }
    if (key == "cpuset_cpus") {
      out.emplace_back("cpus");
    } else if (key == "cpuset_mems") {
      out.emplace_back("mems");
    } else if (key == "cpu_weight") {
      out.emplace_back("cpu_shares");
    } else {
      out.push_back(key);
    }
  }
  return out;
}

Res overlayOnto(Res base, const Res& overlay) {
  auto over = [](auto& dst, const auto& src) {
    if (src) {
      dst = src;
    }
  };
  // colod only restricts: a limit of the runtime's own that is tighter than colod's stands.
  auto cpus = [](const Res& r) {
    return r.cpu_quota && *r.cpu_quota > 0 ? static_cast<double>(*r.cpu_quota) /
                                                 static_cast<double>(r.cpu_period.value_or(100000))
                                           : std::numeric_limits<double>::infinity();
  };
  if (overlay.cpu_quota && cpus(overlay) <= cpus(base)) {
    over(base.cpu_quota, overlay.cpu_quota);
    over(base.cpu_period, overlay.cpu_period);
  }
  auto bytes = [](const std::optional<int64_t>& m) {
    return m && *m > 0 ? static_cast<double>(*m) : std::numeric_limits<double>::infinity();
  };
  const bool memory =
      overlay.memory_limit && bytes(overlay.memory_limit) <= bytes(base.memory_limit);
  if (overlay.cpu_shares) {
    base.cpu_shares = overlay.cpu_shares;
    base.cpu_weight = overlay.cpu_weight;  // stale otherwise; compared only when both carry it
  }
  over(base.cpus, overlay.cpus);
  over(base.mems, overlay.mems);
  if (memory) {
    base.memory_limit = overlay.memory_limit;
  }
  return base;
}

Res kubeletBase(const colod::e2e::ContainerSpec& spec, bool cgroup_v2) {
  Res r;
  const int64_t shares = std::max<int64_t>(2, spec.cpu_request_milli * 1024 / 1000);
  r.cpu_shares = shares;
  if (cgroup_v2) {
    // runc's conversion (nri/testpeer/README.md): weight = 1 + (shares-2)*9999/262142.
    r.cpu_weight = 1 + (shares - 2) * 9999 / 262142;
  }
  r.cpu_period = 100000;
  r.cpu_quota = spec.cpu_limit_milli > 0 ? spec.cpu_limit_milli * 100 : -1;
  if (!spec.cpus.empty()) {
    r.cpus = normalizeList(spec.cpus);
  }
  r.memory_limit = -1;
  return r;
}

void applyKubeletLimit(Res& base, int64_t cpu_limit_milli) {
  base.cpu_quota = cpu_limit_milli * 100;
  base.cpu_period = 100000;
}

ContainerState queryState(colod::nri::interop::PeerProcess& peer, const std::string& container) {
  ContainerState st;
  const json reply = peer.control({{"op", "state"}, {"container", container}});
  if (!reply.value("ok", false)) {
    st.error = reply.value("error", reply.dump());
    return st;
  }
  const json& r = reply["result"];
  if (!r.is_object() || !r.contains("spec") || !r["spec"].is_object() || !r.contains("cgroup") ||
      !r["cgroup"].is_object()) {
    st.error = "state of " + container + " without spec and cgroup: " + reply.dump();
    return st;
  }
  st.ok = true;
  st.id = r.value("id", "");
  st.spec = resFromState(r["spec"]);
  st.cgroup = resFromState(r["cgroup"]);
  return st;
}

std::optional<json> journalEntry(const std::string& journal_path,
                                 const std::string& id,
                                 std::string* why) {
  auto doc = colod::e2e::readJournal(journal_path, why);
  if (!doc) {
    return std::nullopt;
  }
  for (const auto& c : (*doc)["containers"]) {
    if (c.is_object() && c.value("id", "") == id) {
      return c;
    }
  }
  return json(nullptr);
}

std::optional<json> journalOverlay(const std::string& journal_path,
                                   const std::string& id,
                                   std::string* why) {
  auto entry = journalEntry(journal_path, id, why);
  if (!entry) {
    return std::nullopt;
  }
  if (entry->is_object() && entry->contains("overlay") && (*entry)["overlay"].is_object()) {
    return (*entry)["overlay"];
  }
  return json::object();
}

int64_t realtimeNs() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

json ScenarioRecord::toJson() const {
  json j = {{"scenario", scenario}, {"test", test},     {"passed", passed},
            {"skipped", skipped},   {"leaked", leaked}, {"clobbered", clobbered},
            {"ts_ns", realtimeNs()}};
  j["converge_ms"] = converge_ms.empty()
                         ? json(nullptr)
                         : json(*std::max_element(converge_ms.begin(), converge_ms.end()));
  j["converge_samples_ms"] = converge_ms;
  return j;
}

bool ScenarioRecord::append() const {
  const char* path = std::getenv("COLOD_FAULTS_RESULTS");
  if (path == nullptr || *path == '\0') {
    return true;
  }
  const std::string line = toJson().dump() + "\n";
  // O_APPEND: one write per line, so concurrent writers never interleave within a line.
  const colod::UniqueFd fd(::open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644));
  if (fd.get() < 0) {
    return false;
  }
  return ::write(fd.get(), line.data(), line.size()) == static_cast<ssize_t>(line.size());
}

}  // namespace colod::faults
