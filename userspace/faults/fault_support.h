// SPDX-License-Identifier: Apache-2.0
// What the fault suite compares and records: a container's resources as the kubelet asked for
// them (base), as the runtime's spec holds them and as its cgroup files read back (the peer's
// `state` op), colod's overlay (the v2 journal), and one JSON line of measurements per scenario
// run (COLOD_FAULTS_RESULTS).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "harness.h"
#include "peer_process.h"

namespace colod::faults {

// The fields colod may overlay, in the peer's `state` names. Unset fields are nullopt; an unset
// quota or memory limit means unlimited and compares equal to -1.
struct Res {
  std::optional<int64_t> cpu_quota;  // µs per period, -1 = unlimited
  std::optional<int64_t> cpu_period;
  std::optional<int64_t> cpu_shares;
  std::optional<int64_t> cpu_weight;  // cgroup v2 only (shares read back from v2 are inexact)
  std::optional<std::string> cpus;    // kernel list; unset/"" = the parent's
  std::optional<std::string> mems;
  std::optional<int64_t> memory_limit;  // bytes, -1 = unlimited
};

// Field names where a and b mean different things. cpuset fields are compared only when both
// are set; cpu_weight replaces cpu_shares when both sides carry it.
std::vector<std::string> diffFields(const Res& a, const Res& b);
// The value of one field as text ("unset" when nullopt), for messages and clobber checks.
std::string fieldText(const Res& r, const std::string& field);
std::string describe(const Res& r);

// From the `state` op's "spec"/"cgroup" objects (null = unset).
Res resFromState(const nlohmann::json& j);
// From a v2 journal "overlay"/"base" object (colod's names: cpu_quota, cpuset_cpus, ...).
Res resFromJournal(const nlohmann::json& j);
// The field names a journal "overlay" or "base" object sets (in the `state` names).
std::vector<std::string> overlayFields(const nlohmann::json& overlay);
// `base` with every field `overlay` sets replaced.
Res overlayOnto(Res base, const Res& overlay);

// What the kubelet asks the runtime for (nri/testpeer conversions: shares = max(2, m·1024/1000),
// period 100000, quota = limit·100 or unlimited, the given cpuset, no memory limit).
Res kubeletBase(const colod::e2e::ContainerSpec& spec, bool cgroup_v2);
// The same after a kubelet resize of the CPU limit.
void applyKubeletLimit(Res& base, int64_t cpu_limit_milli);

// One `state` op answer.
struct ContainerState {
  bool ok = false;
  std::string error;
  std::string id;
  Res spec;
  Res cgroup;
};
ContainerState queryState(colod::nri::interop::PeerProcess& peer, const std::string& container);

// The v2 journal's entry for container `id` ({"id","name","base","overlay","actions"}; null
// json when it has none); nullopt when the journal is not v2 (why says so).
std::optional<nlohmann::json> journalEntry(const std::string& journal_path,
                                           const std::string& id,
                                           std::string* why = nullptr);
// The overlay colod's journal holds for container `id` ({} when none); nullopt when the journal
// is not v2 (why says so).
std::optional<nlohmann::json> journalOverlay(const std::string& journal_path,
                                             const std::string& id,
                                             std::string* why = nullptr);

// CLOCK_REALTIME in ns: the peer's event log stamps events with it (ts_ns).
int64_t realtimeNs();

// One scenario run's measurements, appended as one JSON line to $COLOD_FAULTS_RESULTS when set.
struct ScenarioRecord {
  std::string scenario;  // stable name, e.g. "outage_mid_escalation"
  std::string test;      // gtest name
  bool passed = false;
  bool skipped = false;
  int leaked = 0;     // fields left restricted (cgroup or spec != base) after colod let go
  int clobbered = 0;  // fields where a kubelet update was overwritten
  std::vector<double> converge_ms;  // from the runtime's return / the fault's end to desired

  [[nodiscard]] nlohmann::json toJson() const;
  // Appends toJson() to $COLOD_FAULTS_RESULTS (no-op when unset); false on a write error.
  [[nodiscard]] bool append() const;
};

}  // namespace colod::faults
