// SPDX-License-Identifier: Apache-2.0
#include "colod/daemon/reconciler.h"

#include <algorithm>
#include <limits>
#include <utility>

#include "colod/policy/tier.h"

namespace colod::daemon {

namespace {

// How many of colod's own past values per field are remembered to recognise them in a resync.
constexpr std::size_t kOursKept = 16;

std::string canonicalCpus(const std::optional<std::string>& v, std::string_view all_cpus) {
  if (!v || v->empty()) {
    return std::string(all_cpus);
  }
  auto parsed = policy::parseCpuList(*v);
  if (!parsed || parsed->empty()) {
    return *v;  // not a list we understand: compared as written
  }
  return policy::formatCpuList(*parsed);
}

std::string limitText(const std::optional<int64_t>& v) {
  if (!v || *v < 0) {
    return "max";
  }
  return std::to_string(*v);
}

// The explicit value an unset field means, so a release always carries a concrete value (NRI
// cannot clear a field, brief §3.5): no quota and no memory limit are "unlimited" (-1), no
// cpuset is every CPU, no period is the kernel's 100 ms, no shares the cgroup default.
void makeExplicit(policy::Resources& r, Field f, std::string_view all_cpus) {
  switch (f) {
    case Field::CpuShares:
      if (!r.cpu_shares) {
        r.cpu_shares = 1024;
      }
      break;
    case Field::CpuQuota:
      if (!r.cpu_quota || *r.cpu_quota < 0) {
        r.cpu_quota = -1;
      }
      break;
    case Field::CpuPeriod:
      if (!r.cpu_period) {
        r.cpu_period = 100000;
      }
      break;
    case Field::CpusetCpus:
      if (!r.cpuset_cpus || r.cpuset_cpus->empty()) {
        r.cpuset_cpus = std::string(all_cpus);
      }
      break;
    case Field::CpusetMems:
      if (!r.cpuset_mems) {
        r.cpuset_mems = "";
      }
      break;
    case Field::MemoryLimit:
      if (!r.memory_limit || *r.memory_limit < 0) {
        r.memory_limit = -1;
      }
      break;
  }
}

bool emptyOverlay(const policy::Resources& r) {
  return std::none_of(std::begin(kAllFields), std::end(kAllFields),
                      [&](Field f) { return hasField(r, f); });
}

// A memory limit in bytes; none (unset, -1 or 0) is unlimited.
double memoryLimit(const policy::Resources& r) {
  return r.memory_limit && *r.memory_limit > 0 ? static_cast<double>(*r.memory_limit)
                                               : std::numeric_limits<double>::infinity();
}

// colod only restricts: where the runtime's own limit (the kubelet's, after a resize) is tighter
// than colod's overlay, the runtime's stands -- an overlay must never loosen a container's
// limit. The quota and its period go together.
bool baseIsTighter(const policy::Resources& base, const policy::Resources& overlay, Field f) {
  switch (f) {
    case Field::CpuQuota:
    case Field::CpuPeriod:
      return hasField(overlay, Field::CpuQuota) &&
             policy::quotaCpus(base) < policy::quotaCpus(overlay);
    case Field::MemoryLimit:
      return hasField(overlay, Field::MemoryLimit) && memoryLimit(base) < memoryLimit(overlay);
    default:
      return false;
  }
}

}  // namespace

std::string_view fieldName(Field f) {
  switch (f) {
    case Field::CpuShares:
      return "cpu_shares";
    case Field::CpuQuota:
      return "cpu_quota";
    case Field::CpuPeriod:
      return "cpu_period";
    case Field::CpusetCpus:
      return "cpuset_cpus";
    case Field::CpusetMems:
      return "cpuset_mems";
    case Field::MemoryLimit:
      return "memory_limit";
  }
  return "?";
}

bool hasField(const policy::Resources& r, Field f) {
  switch (f) {
    case Field::CpuShares:
      return r.cpu_shares.has_value();
    case Field::CpuQuota:
      return r.cpu_quota.has_value();
    case Field::CpuPeriod:
      return r.cpu_period.has_value();
    case Field::CpusetCpus:
      return r.cpuset_cpus.has_value();
    case Field::CpusetMems:
      return r.cpuset_mems.has_value();
    case Field::MemoryLimit:
      return r.memory_limit.has_value();
  }
  return false;
}

void copyField(policy::Resources& to, const policy::Resources& from, Field f) {
  switch (f) {
    case Field::CpuShares:
      to.cpu_shares = from.cpu_shares;
      break;
    case Field::CpuQuota:
      to.cpu_quota = from.cpu_quota;
      break;
    case Field::CpuPeriod:
      to.cpu_period = from.cpu_period;
      break;
    case Field::CpusetCpus:
      to.cpuset_cpus = from.cpuset_cpus;
      break;
    case Field::CpusetMems:
      to.cpuset_mems = from.cpuset_mems;
      break;
    case Field::MemoryLimit:
      to.memory_limit = from.memory_limit;
      break;
  }
}

void clearField(policy::Resources& r, Field f) {
  policy::Resources none;
  copyField(r, none, f);
}

std::string canonicalField(const policy::Resources& r, Field f, std::string_view all_cpus) {
  switch (f) {
    case Field::CpuShares:
      return std::to_string(r.cpu_shares.value_or(1024));
    case Field::CpuQuota:
      return limitText(r.cpu_quota);
    case Field::CpuPeriod:
      return std::to_string(r.cpu_period.value_or(100000));
    case Field::CpusetCpus:
      return canonicalCpus(r.cpuset_cpus, all_cpus);
    case Field::CpusetMems:
      return r.cpuset_mems.value_or("");
    case Field::MemoryLimit:
      return limitText(r.memory_limit);
  }
  return "";
}

bool setAtCreation(const policy::Resources& handed, Field f) {
  switch (f) {
    case Field::CpuShares:
      return handed.cpu_shares.has_value();
    case Field::CpuQuota:
      return handed.cpu_quota.value_or(0) > 0;
    case Field::CpuPeriod:
      return handed.cpu_quota.value_or(0) > 0 && handed.cpu_period.has_value();
    case Field::CpusetCpus:
      return !handed.cpuset_cpus.value_or("").empty();
    case Field::CpusetMems:
      return !handed.cpuset_mems.value_or("").empty();
    case Field::MemoryLimit:
      return handed.memory_limit.value_or(0) > 0;
  }
  return true;
}

std::string joinText(const std::vector<std::string>& parts, std::string_view sep) {
  std::string out;
  for (const auto& p : parts) {
    if (!out.empty()) {
      out += sep;
    }
    out += p;
  }
  return out;
}

std::string_view outcomeName(SendOutcome o) {
  switch (o) {
    case SendOutcome::Applied:
      return "applied";
    case SendOutcome::Refused:
      return "refused";
    case SendOutcome::Unknown:
      return "unknown";
    case SendOutcome::NotConnected:
      return "not_connected";
  }
  return "?";
}

ReconcilerState::ReconcilerState(ReconcilerOptions options) : options_(std::move(options)) {}

void ReconcilerState::note(const Tracked& t, std::string text) {
  if (notes_.size() < 1024) {  // bounded: the driver drains them every pass
    notes_.push_back({t.e.id, t.e.name, std::move(text)});
  }
}

void ReconcilerState::remember(Tracked& t, Field f, const std::string& canon) {
  auto& v = t.e.sent[std::string(fieldName(f))];
  if (std::find(v.begin(), v.end(), canon) != v.end()) {
    return;
  }
  v.push_back(canon);
  if (v.size() > kOursKept) {
    // Bounded, but never forgetting the value the runtime is known to hold now: that is the one
    // a resync will show (seen: ten escalations while the runtime was away pushed out the value
    // applied before the outage, and the resync took it for the kubelet's).
    const std::string held = canonicalField(t.e.spec, f, options_.all_cpus);
    auto victim = std::find_if(v.begin(), v.end(), [&](const std::string& x) { return x != held; });
    v.erase(victim != v.end() ? victim : v.begin());
  }
}

policy::Resources ReconcilerState::desiredOf(const Tracked& t) const {
  policy::Resources d;
  for (Field f : kAllFields) {
    if (!hasField(t.e.base, f)) {
      continue;  // not tracked
    }
    const bool ours = hasField(t.e.overlay, f) && !baseIsTighter(t.e.base, t.e.overlay, f);
    copyField(d, ours ? t.e.overlay : t.e.base, f);
  }
  return d;
}

std::vector<Field> ReconcilerState::diffOf(const Tracked& t) const {
  std::vector<Field> out;
  if (!t.spec_known) {
    return out;  // loaded from the journal: wait until the runtime says what is there
  }
  const policy::Resources d = desiredOf(t);
  for (Field f : kAllFields) {
    if (hasField(t.e.base, f) &&
        canonicalField(d, f, options_.all_cpus) != canonicalField(t.e.spec, f, options_.all_cpus)) {
      out.push_back(f);
    }
  }
  // The kernel takes a quota relative to its period: they travel together.
  const bool quota = std::find(out.begin(), out.end(), Field::CpuQuota) != out.end();
  const bool period = std::find(out.begin(), out.end(), Field::CpuPeriod) != out.end();
  if (quota && !period && hasField(t.e.base, Field::CpuPeriod)) {
    out.push_back(Field::CpuPeriod);
  } else if (period && !quota && hasField(t.e.base, Field::CpuQuota)) {
    out.push_back(Field::CpuQuota);
  }
  return out;
}

void ReconcilerState::refresh(Tracked& t, int64_t now_ns) {
  const bool pending = !diffOf(t).empty();
  if (pending && !t.e.pending) {
    t.e.pending_since_ns = now_ns;
  }
  if (!pending) {
    t.e.pending_since_ns = 0;
    t.e.attempts = 0;
    t.e.last_error.clear();
    t.solo = false;
    t.next_try_ns = 0;
  }
  t.e.pending = pending;
}

void ReconcilerState::dropConverged() {
  for (auto it = tracked_.begin(); it != tracked_.end();) {
    const Tracked& t = it->second;
    if (t.spec_known && !t.e.pending && !t.in_flight && !t.unconfirmed &&
        emptyOverlay(t.e.overlay)) {
      it = tracked_.erase(it);  // released and confirmed: nothing of colod's is left on it
      ++version_;
    } else {
      ++it;
    }
  }
}

void ReconcilerState::observeSpec(const std::string& id,
                                  const policy::Resources& spec,
                                  int64_t now_ns) {
  auto it = tracked_.find(id);
  if (it == tracked_.end()) {
    return;
  }
  Tracked& t = it->second;
  t.creating = false;  // the runtime lists it: created
  t.unconfirmed = false;
  for (Field f : kAllFields) {
    if (!hasField(t.e.base, f)) {
      continue;
    }
    copyField(t.e.spec, spec, f);
    const std::string now_value = canonicalField(spec, f, options_.all_cpus);
    const std::string base_value = canonicalField(t.e.base, f, options_.all_cpus);
    if (now_value == base_value) {
      continue;
    }
    const auto& ours = t.e.sent[std::string(fieldName(f))];
    if (std::find(ours.begin(), ours.end(), now_value) != ours.end()) {
      continue;  // a value colod set (maybe before a restart, or a reply it never saw)
    }
    // Someone else (the kubelet, another agent, a person) changed it: that is the runtime's own
    // value now, and what a release must return to.
    copyField(t.e.base, spec, f);
    makeExplicit(t.e.base, f, options_.all_cpus);
    ++stats_.external_changes;
    ++version_;
    note(t, std::string(fieldName(f)) + " changed outside colod to " + now_value + " (was " +
                base_value + "): taken as the runtime's own value" +
                (hasField(t.e.overlay, f) ? "; colod's overlay is re-applied on top"
                                          : "; nothing of colod's is left on it"));
  }
  t.spec_known = true;
  refresh(t, now_ns);
  dropConverged();
}

void ReconcilerState::containerGone(const std::string& id) {
  auto it = tracked_.find(id);
  if (it == tracked_.end()) {
    return;
  }
  if (!emptyOverlay(it->second.e.overlay) || it->second.e.pending) {
    note(it->second, "container gone: what colod held on it went with it");
  }
  tracked_.erase(it);
  ++version_;
}

policy::Resources ReconcilerState::adjustUpdate(const std::string& id,
                                                const policy::Resources& requested,
                                                int64_t now_ns) {
  auto it = tracked_.find(id);
  if (it == tracked_.end()) {
    return {};
  }
  Tracked& t = it->second;
  std::string changed;
  for (Field f : kAllFields) {
    if (!hasField(t.e.base, f) || !hasField(requested, f)) {
      continue;
    }
    const std::string v = canonicalField(requested, f, options_.all_cpus);
    if (v != canonicalField(t.e.base, f, options_.all_cpus)) {
      copyField(t.e.base, requested, f);
      makeExplicit(t.e.base, f, options_.all_cpus);
      changed += (changed.empty() ? "" : ", ") + std::string(fieldName(f)) + "=" + v;
      ++version_;
    }
  }
  if (!changed.empty()) {
    ++stats_.external_changes;
    note(t, "runtime update (kubelet) sets " + changed + ": the new base" +
                (emptyOverlay(t.e.overlay) ? "" : "; colod's overlay is kept in the reply"));
  }
  refresh(t, now_ns);
  if (emptyOverlay(t.e.overlay)) {
    return {};
  }
  bool touches = false;
  for (Field f : kAllFields) {
    touches = touches || (hasField(requested, f) && hasField(t.e.overlay, f));
  }
  if (!touches) {
    return {};  // fields colod does not overlay pass untouched
  }
  policy::Resources reply;
  for (Field f : kAllFields) {
    if (hasField(t.e.overlay, f) && !baseIsTighter(t.e.base, t.e.overlay, f)) {
      copyField(reply, t.e.overlay, f);
      remember(t, f, canonicalField(t.e.overlay, f, options_.all_cpus));
    }
  }
  return reply;  // the kubelet's own tighter limit passes as it asked
}

bool ReconcilerState::setOverlay(const std::string& id,
                                 const std::string& name,
                                 const policy::Resources& overlay,
                                 const policy::Resources& spec_now,
                                 const std::string& why,
                                 int64_t now_ns) {
  auto it = tracked_.find(id);
  if (it == tracked_.end()) {
    if (emptyOverlay(overlay)) {
      return true;
    }
    if (tracked_.size() >= options_.max_containers) {
      ++stats_.dropped_full;
      return false;
    }
    it = tracked_.emplace(id, Tracked{}).first;
    it->second.e.id = id;
    it->second.spec_known = true;
    ++version_;
  }
  Tracked& t = it->second;
  if (!name.empty()) {
    t.e.name = name;
  }
  for (Field f : kAllFields) {
    if (hasField(overlay, f) && !hasField(t.e.base, f)) {
      // A field starts being tracked: its base is what the runtime has now.
      copyField(t.e.base, spec_now, f);
      makeExplicit(t.e.base, f, options_.all_cpus);
      copyField(t.e.spec, spec_now, f);
      ++version_;
    }
  }
  if (!(t.e.overlay == overlay)) {
    t.e.overlay = overlay;
    t.e.why = why;
    t.next_try_ns = now_ns;  // a new wish goes out at once (its backoff restarts if it fails)
    ++version_;
  }
  refresh(t, now_ns);
  dropConverged();
  return true;
}

void ReconcilerState::adjustedAtCreation(const std::string& id,
                                         const policy::Resources& adjusted,
                                         int64_t now_ns) {
  auto it = tracked_.find(id);
  if (it == tracked_.end()) {
    return;
  }
  Tracked& t = it->second;
  for (Field f : kAllFields) {
    if (!hasField(adjusted, f) || !hasField(t.e.base, f)) {
      continue;
    }
    copyField(t.e.spec, adjusted, f);
    makeExplicit(t.e.spec, f, options_.all_cpus);
    remember(t, f, canonicalField(adjusted, f, options_.all_cpus));
  }
  t.creating = true;
  t.created_at_ns = now_ns;
  ++version_;
  refresh(t, now_ns);
}

bool ReconcilerState::awaitingCreation(std::string_view id, int64_t now_ns) const {
  auto it = tracked_.find(id);
  return it != tracked_.end() && it->second.creating &&
         now_ns - it->second.created_at_ns < options_.creation_grace_ns;
}

std::map<std::string, policy::Resources> ReconcilerState::overlays() const {
  std::map<std::string, policy::Resources> out;
  for (const auto& [id, t] : tracked_) {
    if (!emptyOverlay(t.e.overlay)) {
      out.emplace(id, t.e.overlay);
    }
  }
  return out;
}

std::vector<PlannedUpdate> ReconcilerState::plan(int64_t now_ns) const {
  std::vector<const Tracked*> due;
  for (const auto& [id, t] : tracked_) {
    // A container still being created is updated once the runtime lists it (an update sent
    // before would find no container).
    if (t.e.pending && t.next_try_ns <= now_ns && !t.creating) {
      due.push_back(&t);
    }
  }
  std::stable_sort(due.begin(), due.end(), [](const Tracked* a, const Tracked* b) {
    return a->e.pending_since_ns < b->e.pending_since_ns;
  });
  std::vector<PlannedUpdate> out;
  for (const Tracked* t : due) {
    if (out.size() >= options_.max_batch) {
      break;
    }
    if (t->solo && !out.empty()) {
      continue;  // goes alone, in a later call
    }
    PlannedUpdate p{.id = t->e.id, .name = t->e.name, .values = {}};
    const policy::Resources d = desiredOf(*t);
    for (Field f : diffOf(*t)) {
      copyField(p.values, d, f);
    }
    out.push_back(std::move(p));
    if (t->solo) {
      break;
    }
  }
  return out;
}

void ReconcilerState::beginSend(const std::vector<PlannedUpdate>& batch) {
  for (const auto& p : batch) {
    auto it = tracked_.find(p.id);
    if (it == tracked_.end()) {
      continue;
    }
    it->second.in_flight = true;
  }
}

void ReconcilerState::onSent(const std::vector<PlannedUpdate>& sent,
                             SendOutcome outcome,
                             const std::string& error,
                             int64_t now_ns) {
  if (sent.empty()) {
    return;
  }
  if (outcome != SendOutcome::NotConnected) {
    ++stats_.sends;
  }
  if (outcome != SendOutcome::Applied) {
    ++stats_.failures[std::string(outcomeName(outcome))];
  }
  for (const auto& p : sent) {
    auto it = tracked_.find(p.id);
    if (it == tracked_.end()) {
      continue;  // gone meanwhile
    }
    Tracked& t = it->second;
    t.in_flight = false;
    if (outcome == SendOutcome::Applied) {
      t.unconfirmed = false;
    }
    for (Field f : kAllFields) {
      // Even a refused or lost call may have changed the runtime (a batch fails as a whole
      // though some of it landed): the resync must recognise these values as colod's. A call
      // made while no runtime was connected reached nothing.
      if (hasField(p.values, f) && outcome != SendOutcome::NotConnected) {
        remember(t, f, canonicalField(p.values, f, options_.all_cpus));
      }
    }
    switch (outcome) {
      case SendOutcome::Applied:
        for (Field f : kAllFields) {
          if (hasField(p.values, f)) {
            copyField(t.e.spec, p.values, f);
          }
        }
        ++stats_.updates_applied;
        t.solo = false;
        break;
      case SendOutcome::NotConnected:
        t.next_try_ns = now_ns + options_.backoff_initial_ns;
        break;
      case SendOutcome::Refused:
      case SendOutcome::Unknown: {
        // The runtime may hold the values now: the entry is not dropped on a release until the
        // runtime says what it holds (a value it reports that colod sent is not its own).
        t.unconfirmed = true;
        ++t.e.attempts;
        t.e.last_error = std::string(outcomeName(outcome)) + ": " + error;
        int64_t backoff = options_.backoff_initial_ns;
        for (uint32_t i = 1; i < t.e.attempts && backoff < options_.backoff_max_ns; ++i) {
          backoff *= 2;
        }
        t.next_try_ns = now_ns + std::min(backoff, options_.backoff_max_ns);
        if (sent.size() > 1) {
          t.solo = true;  // the runtime does not say which update failed: find out alone
        }
        break;
      }
    }
    refresh(t, now_ns);
  }
  dropConverged();
}

void ReconcilerState::resetBackoff() {
  for (auto& [id, t] : tracked_) {
    t.next_try_ns = 0;
  }
}

int64_t ReconcilerState::nextDueNs() const {
  int64_t due = std::numeric_limits<int64_t>::max();
  for (const auto& [id, t] : tracked_) {
    if (t.e.pending && !t.creating) {
      due = std::min(due, t.next_try_ns);
    }
  }
  return due;
}

std::vector<ReconcileEntry> ReconcilerState::entries() const {
  std::vector<ReconcileEntry> out;
  out.reserve(tracked_.size());
  for (const auto& [id, t] : tracked_) {
    out.push_back(t.e);
  }
  return out;
}

const ReconcileEntry* ReconcilerState::find(std::string_view id) const {
  auto it = tracked_.find(id);
  return it == tracked_.end() ? nullptr : &it->second.e;
}

policy::Resources ReconcilerState::baseView(const std::string& id,
                                            const policy::Resources& spec) const {
  policy::Resources out = spec;
  auto it = tracked_.find(id);
  if (it == tracked_.end()) {
    return out;
  }
  for (Field f : kAllFields) {
    if (hasField(it->second.e.base, f)) {
      copyField(out, it->second.e.base, f);
    }
  }
  return out;
}

ReconcileStats ReconcilerState::stats(int64_t now_ns) const {
  ReconcileStats s = stats_;
  s.tracked = tracked_.size();
  s.pending = 0;
  s.oldest_pending_ns = 0;
  for (const auto& [id, t] : tracked_) {
    if (t.e.pending) {
      ++s.pending;
      s.oldest_pending_ns = std::max(s.oldest_pending_ns, now_ns - t.e.pending_since_ns);
    }
    if (t.in_flight) {
      ++s.in_flight;
    }
  }
  return s;
}

std::vector<ReconcileNote> ReconcilerState::takeNotes() {
  std::vector<ReconcileNote> out;
  out.swap(notes_);
  return out;
}

void ReconcilerState::load(const std::vector<ReconcileEntry>& entries, bool keep_overlay) {
  for (const auto& e : entries) {
    if (tracked_.size() >= options_.max_containers) {
      ++stats_.dropped_full;
      break;
    }
    Tracked t;
    t.e = e;
    t.e.pending = false;
    t.e.pending_since_ns = 0;
    t.e.attempts = 0;
    t.e.last_error.clear();
    t.e.spec = {};
    t.spec_known = false;  // the resync says what the runtime has
    for (Field f : kAllFields) {
      if (hasField(e.overlay, f)) {
        // The overlay was journaled before it was sent: it may be in the runtime already.
        remember(t, f, canonicalField(e.overlay, f, options_.all_cpus));
        if (!hasField(t.e.base, f)) {
          // An entry without the base of a field it overlays cannot be released to a known
          // value: the unset meaning is the safe one (no restriction).
          makeExplicit(t.e.base, f, options_.all_cpus);
        }
      }
    }
    if (!keep_overlay) {
      t.e.overlay = {};
      t.e.why = "journal reconcile after restart: returning to the runtime's own values";
    }
    tracked_[e.id] = std::move(t);
  }
  ++version_;
}

}  // namespace colod::daemon
