// SPDX-License-Identifier: Apache-2.0
// From the engine's restrictions to the actuator: overlays, the write-ahead journal, the
// journal reconcile at start, the NRI handlers and the clean stop.
#include <filesystem>

#include "daemon_impl.h"

namespace colod::daemon {

void Daemon::Impl::loadJournal(const DaemonSettings& s) {
  auto ahead = readJournalAhead(s.journal_path);
  if (ahead && *ahead) {
    // colod stopped after the write-ahead and before the journal took the same content: what
    // it may have sent is in the copy only. The journal catches up now.
    journal_loaded_ = std::move(**ahead);
    log()->info(
        "journal {}: loaded from its write-ahead copy {} (colod stopped between the two "
        "writes), {} containers to reconcile once the runtime has synchronized",
        s.journal_path, journalAheadPath(s.journal_path), journal_loaded_.containers.size());
    if (auto w = writeJournal(s.journal_path, journal_loaded_, s.journal_max_entries); w) {
      (void)journal_ahead_->settle();  // a failure leaves it live and newer: read again
    } else {
      log()->warn("journal {} not brought up to its write-ahead copy: {}", s.journal_path,
                  w.error().message());
    }
    return;
  }
  if (!ahead) {
    // Torn by a kill in the middle of its write: nothing was sent on it (the send follows the
    // write), so the journal is the truth.
    log()->warn("journal {}: write-ahead copy ignored, the journal is the truth: {}",
                s.journal_path, ahead.error().message());
  }
  auto journal = readJournal(s.journal_path);
  if (!journal) {
    // A corrupt journal must not stop the daemon, nor be lost: it is kept for a person, and once
    // the runtime has synchronized colod says which containers may still carry a restriction it
    // can no longer prove it made.
    const std::string aside = s.journal_path + ".corrupt-" + std::to_string(unixMs());
    std::error_code ec;
    std::filesystem::rename(s.journal_path, aside, ec);
    log()->error("journal unreadable, kept as {}{}: {}", aside,
                 ec ? " (rename failed: " + ec.message() + ")" : std::string(),
                 journal.error().message());
    journal_corrupt_ = true;
    return;
  }
  journal_loaded_ = std::move(journal).value();
  if (!journal_loaded_.containers.empty()) {
    log()->info("journal {}: {} containers to reconcile once the runtime has synchronized",
                s.journal_path, journal_loaded_.containers.size());
  }
}

void Daemon::Impl::reconcileJournal(int64_t now_ns) {
  reconciled_ = true;
  if (journal_corrupt_) {
    checkUnprovenRestrictions();
  }
  if (journal_loaded_.containers.empty()) {
    return;
  }
  const auto conf = cfg();
  std::vector<policy::AppliedAction> reseed;
  for (const auto& c : journal_loaded_.containers) {
    const auto& e = c.state;
    const std::string name = e.name.empty() ? e.id : e.name;
    if (known_.count(e.id) == 0) {
      log()->info("journal: {} ({}) is gone, nothing to restore", name, e.id.substr(0, 12));
      continue;
    }
    if (conf->daemon.reconcile == Reconcile::Reseed && !c.actions.empty()) {
      for (auto a : c.actions) {
        a.original_values = e.base;  // the runtime's own values, never colod's
        reseed.push_back(std::move(a));
      }
      continue;
    }
    log()->info(
        "decision kind=restore target={} values=\"{}\" reason=\"journal reconcile after "
        "restart: returning to the runtime's own values\"",
        name, describeResources(e.base));
    v1::Decision d;
    d.set_unix_ms(unixMs());
    d.set_container_id(e.id);
    d.set_container(name);
    d.set_kind("restore");
    d.set_reason("journal reconcile after restart");
    d.set_values(describeResources(e.base));
    d.set_outcome(conf->daemon.mode == Mode::Act ? "pending" : "pending (restores always run)");
    decisions_.add(std::move(d), "restore");
  }
  if (!reseed.empty()) {
    Result<void> r;
    {
      std::lock_guard lk(engine_mu_);
      r = engine_->seedApplied(reseed, now_ns);
    }
    if (r) {
      log()->info("journal: {} restrictions handed back to the engine", reseed.size());
    } else {
      // The overlays the engine does not hold are released at the next commit.
      log()->warn("journal: engine refused the restrictions ({}); releasing them instead",
                  r.error().message());
    }
  }
  journal_loaded_ = {};
  commitOverlays(nullptr);
}

// After a corrupt journal colod cannot prove what it changed. What it can say: where the
// runtime's spec and the cgroup disagree, something outside the runtime's knowledge (maybe an
// earlier colod) changed the cgroup. Those containers are named for the operator.
void Daemon::Impl::checkUnprovenRestrictions() {
  std::size_t suspects = 0;
  for (const auto& [id, k] : known_) {
    if (k.cgroup_id == 0) {
      continue;
    }
    const std::string dir = hierarchy_root_ + k.rel;
    const auto& spec = k.ctr->resources.cpu;
    std::string why;
    // cgroup v2 cpu.max "quota|max period"; v1 cpu.cfs_quota_us.
    std::string quota = readSmallFile(dir + "/cpu.max");
    if (!quota.empty()) {
      const std::string q = quota.substr(0, quota.find(' '));
      const std::string want = spec.quota && *spec.quota > 0 ? std::to_string(*spec.quota) : "max";
      if (q != want) {
        why += "cpu.max " + q + " (runtime spec " + want + ")";
      }
    } else if (auto v1 = readSmallFile(dir + "/cpu.cfs_quota_us"); !v1.empty()) {
      const std::string q = v1.substr(0, v1.find('\n'));
      const std::string want = spec.quota && *spec.quota > 0 ? std::to_string(*spec.quota) : "-1";
      if (q != want) {
        why += "cpu.cfs_quota_us " + q + " (runtime spec " + want + ")";
      }
    }
    if (!why.empty()) {
      ++suspects;
      log()->warn(
          "journal was corrupt: {} ({}) may still carry a restriction colod can no longer "
          "prove it made: {}",
          k.display, id.substr(0, 12), why);
    }
  }
  log()->warn(
      "journal was corrupt: {} containers whose cgroup differs from the runtime's spec; "
      "colod reconciles from the runtime's truth from now on",
      suspects);
}

void Daemon::Impl::onConverged(const std::string& id) {
  auto it = awaiting_.find(id);
  if (it != awaiting_.end()) {
    for (uint64_t seq : it->second) {
      setOutcome(seq, "applied");
    }
    awaiting_.erase(it);
  }
  // Confirmed releases leave the journal; base changes are recorded.
  commitOverlays(nullptr);
}

Journal Daemon::Impl::journalOfNow(const std::vector<ReconcileEntry>& entries) {
  std::vector<policy::AppliedAction> applied;
  {
    std::lock_guard lk(engine_mu_);
    applied = engine_->applied();
  }
  return journalOf(entries, applied);
}

Result<void> Daemon::Impl::writeJournalOf(const std::vector<ReconcileEntry>& entries) {
  const auto conf = cfg();
  const Journal j = journalOfNow(entries);
  journal_entries_ = j.containers.size();
  auto r = writeJournal(conf->daemon.journal_path, j, conf->daemon.journal_max_entries,
                        journal_encoder_);
  if (!r) {
    if (journal_errors_++ % 100 == 0) {
      log()->error("journal write failed ({} so far): {}", journal_errors_.load(),
                   r.error().message());
    }
    return r;
  }
  // The journal holds what the copy held, or newer: a restart reads the journal again. Left
  // live on failure, the copy is still newer than the journal, and a restart reads it.
  if (journal_ahead_ && journal_ahead_->live()) {
    if (auto s = journal_ahead_->settle(); !s && journal_errors_++ % 100 == 0) {
      log()->error("journal write-ahead copy not settled ({} so far): {}", journal_errors_.load(),
                   s.error().message());
    }
  }
  return {};
}

Result<void> Daemon::Impl::writeAheadOf(const std::vector<ReconcileEntry>& entries) {
  if (!journal_ahead_) {
    return writeJournalOf(entries);  // (not opened: start() failed before; never on the loop)
  }
  auto r = journal_ahead_->write(journalOfNow(entries), cfg()->daemon.journal_max_entries,
                                 journal_encoder_);
  if (!r && journal_errors_++ % 100 == 0) {
    log()->error("journal write-ahead failed ({} so far): {}", journal_errors_.load(),
                 r.error().message());
  }
  return r;
}

void Daemon::Impl::commitOverlays(const policy::RoundResult* round) {
  if (!reconciled_) {
    return;  // the journal's containers are not known yet: nothing may be decided about them
  }
  const auto conf = cfg();
  Wishes wishes;
  if (conf->daemon.mode == Mode::Act) {
    std::vector<policy::AppliedAction> applied;
    {
      std::lock_guard lk(engine_mu_);
      applied = engine_->applied();
    }
    wishes = wishesFromRestrictions(applied, [this](const std::string& id) {
      auto kt = known_.find(id);
      return kt != known_.end() ? kt->second.display : std::string();
    });
  }
  if (wishes == committed_) {
    if (actuator_->version() != journaled_version_) {
      const uint64_t v = actuator_->version();
      if (writeJournalOf(actuator_->entries())) {
        journaled_version_ = v;
      }
    }
    return;
  }
  // Write-ahead: the journal's copy holds the new overlays before the actuator may send them
  // (journal_ahead.h: a pwrite, where the journal's own replace took milliseconds on the
  // reaction path). The journal takes the same content right after the actuator has them.
  const std::vector<ReconcileEntry> planned = actuator_->preview(wishes);
  const bool journaled = writeAheadOf(planned).has_value();
  if (!journaled) {
    // Nothing new may be sent that no journal knows: keep what is journaled, let releases go
    // (the journal still lists them, which is safe), and tell the engine its new restrictions
    // did not land so it does not believe in them.
    Wishes safe;
    for (const auto& [id, w] : committed_) {
      if (wishes.count(id) != 0) {
        safe.emplace(id, w);
      }
    }
    if (round != nullptr) {
      std::lock_guard lk(engine_mu_);
      for (const auto& d : round->decisions) {
        if (d.kind == policy::DecisionKind::Engage || d.kind == policy::DecisionKind::Escalate) {
          engine_->reportApplyFailure(d);
          setOutcome(d.seq, "failed: journal not writable");
        }
      }
    }
    wishes = std::move(safe);
    if (wishes == committed_) {
      return;
    }
  }
  const Actuator::Committed committed = actuator_->setOverlays(wishes);
  if (journaled) {
    (void)writeJournalOf(planned);  // logged there; the copy stays live, and newer, if it fails
  }
  for (const auto& id : committed.refused) {
    if (known_.count(id) != 0) {
      log()->warn(
          "overlay for {} not taken (container unknown to the runtime or the bound of {} "
          "tracked containers reached)",
          id.substr(0, 12), conf->daemon.journal_max_entries);
      ++updates_dropped_;
    } else {
      // Placed at creation while the runtime was not synchronized: taken once it lists it.
      log()->debug("overlay for {} waits until the runtime lists the container", id.substr(0, 12));
      wishes.erase(id);  // not committed: the next commit offers it again
    }
  }
  if (!std::equal(committed_.begin(), committed_.end(), wishes.begin(), wishes.end(),
                  [](const auto& a, const auto& b) { return a.first == b.first; })) {
    ++watch_inputs_gen_;  // the restricted containers changed: their files every tick
  }
  committed_ = std::move(wishes);
  if (journaled) {
    // The version of exactly what was journaled (plus the commit): a release the actuator
    // confirms right after is a newer version, and rewrites the journal.
    journaled_version_ = committed.version;
  }
}

// ---------------------------------------------------------------------------------------------
// NRI handlers (stub handler thread: the runtime waits for these, so they only read and update
// state; nothing is sent from here)

Result<nri::CreateContainerResult> Daemon::Impl::createContainer(const nri::PodSandbox& pod,
                                                                 const nri::Container& ctr) {
  log()->debug("create container {}/{}/{} ({})", pod.namespace_name, pod.name, ctr.name,
               ctr.id.substr(0, 12));
  if (cfg()->policy.actions.admission == policy::AdmissionMode::Off) {
    return nri::CreateContainerResult{};
  }
  // Decided on the loop thread, which owns the engine's view, the overlays and the journal. The
  // runtime waits for this reply (and holds its NRI lock meanwhile), so the wait is bounded: a
  // late decision is not lost, it is placed by an update once the container exists.
  struct Handoff {
    std::mutex mu;
    bool abandoned = false;
  };
  auto handoff = std::make_shared<Handoff>();
  auto reply = std::make_shared<std::promise<nri::ContainerAdjustment>>();
  auto future = reply->get_future();
  post([this, handoff, reply, pod, ctr] {
    std::lock_guard lk(handoff->mu);
    reply->set_value(admit(pod, ctr, /*may_adjust=*/!handoff->abandoned));
  });
  if (future.wait_for(kAdmissionWait) != std::future_status::ready) {
    std::unique_lock lk(handoff->mu);
    if (future.wait_for(std::chrono::seconds(0)) != std::future_status::ready) {
      handoff->abandoned = true;
      lk.unlock();
      log()->warn(
          "admission of {}/{}/{} not decided within {} ms (colod's loop is busy); it is created "
          "as asked and placed by an update right after if it must be",
          pod.namespace_name, pod.name, ctr.name, kAdmissionWait.count());
      return nri::CreateContainerResult{};
    }
  }
  nri::CreateContainerResult out;
  auto adjust = future.get();
  if (adjust.resources) {
    out.adjust = std::move(adjust);
  }
  return out;
}

// Loop thread. The engine decides whether the new container must start restricted; the fields
// the runtime (the kubelet) or another plugin already set in the spec colod is handed are left
// out of the reply -- two plugins setting one field fail the container's creation (brief §3.5)
// -- and reach the container by an update once it exists.
nri::ContainerAdjustment Daemon::Impl::admit(const nri::PodSandbox& pod,
                                             const nri::Container& ctr,
                                             bool may_adjust) {
  const auto conf = cfg();
  const int64_t now_ns =
      std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now().time_since_epoch()).count();
  policy::ContainerInfo info = toContainerInfo(&pod, ctr, node_cpus_);
  if (recorders_.active()) {
    // In the loop thread's order with the snapshots: a replay places what the engine placed.
    recorders_.broadcast(policy::encodeAdmit(info, now_ns), false);
  }
  policy::RoundResult round;
  {
    std::lock_guard lk(engine_mu_);
    round = engine_->admit(std::move(info), now_ns);
  }
  const auto placed =
      std::find_if(round.decisions.begin(), round.decisions.end(),
                   [&](const policy::Decision& d) { return d.target_id == ctr.id; });
  if (placed == round.decisions.end()) {
    handleDecisions(round);  // findings only (or nothing)
    return {};
  }
  // What colod would set, and which of it goes into the reply.
  policy::Resources wanted;
  for (const auto& d : round.decisions) {
    if (d.target_id != ctr.id) {
      continue;
    }
    for (Field f : kAllFields) {
      if (hasField(d.new_values, f)) {
        copyField(wanted, d.new_values, f);
      }
    }
  }
  const policy::Resources handed = toPolicyResources(ctr.resources);
  policy::Resources adjusted;
  std::vector<std::string> left_out;
  for (Field f : kAllFields) {
    if (!hasField(wanted, f)) {
      continue;
    }
    if (!may_adjust) {
      left_out.emplace_back(std::string(fieldName(f)) + " (decided after the reply)");
    } else if (setAtCreation(handed, f)) {
      left_out.emplace_back(std::string(fieldName(f)) + " (already set in the spec colod was " +
                            "handed: by the kubelet or another plugin)");
    } else {
      copyField(adjusted, wanted, f);
    }
  }
  if (!left_out.empty()) {
    // Said where the operator looks: the decision (coloctl explain / decisions) carries it.
    for (auto& d : round.decisions) {
      if (d.target_id == ctr.id) {
        d.explanation += "; left out of the creation reply: " + joinText(left_out, ", ") +
                         "; applied by an update once the container exists";
      }
    }
    ++admission_deferred_;
    log()->info(
        "admission of {}/{}/{}: {} left out of the creation reply; placed by an update once the "
        "container exists",
        pod.namespace_name, pod.name, ctr.name, joinText(left_out, ", "));
  }
  if (conf->daemon.mode == Mode::Act && nri_connected_) {
    actuator_->expectCreation(ctr.id, handed, adjusted);
  }
  handleDecisions(round);  // logged, journaled (write-ahead) and handed to the actuator
  if (committed_.count(ctr.id) == 0) {
    actuator_->forgetCreation(ctr.id);
    return {};  // dry-run, observe-only, or the journal refused it: created as asked
  }
  if (adjusted == policy::Resources{}) {
    return {};
  }
  ++admissions_;
  nri::ContainerAdjustment out;
  out.resources = toLinuxResources(adjusted, all_cpus_);
  return out;
}

Result<std::vector<nri::ContainerUpdate>> Daemon::Impl::updateContainer(
    const nri::PodSandbox& pod, const nri::Container& ctr, const nri::LinuxResources& requested) {
  // The kubelet (or anyone) resizes the container: its values become the runtime's own, and
  // colod's overlay rides in the reply so the restriction is not lost either.
  const policy::Resources adj = actuator_->adjustUpdate(ctr.id, requested);
  if (adj == policy::Resources{}) {
    return std::vector<nri::ContainerUpdate>{};
  }
  log()->info("runtime update of {}/{}/{} ({}) asks {}; colod keeps its overlay {} in the reply",
              pod.namespace_name, pod.name, ctr.name, ctr.id.substr(0, 12),
              describeResources(toPolicyResources(requested)), describeResources(adj));
  return std::vector<nri::ContainerUpdate>{
      {.container_id = ctr.id, .resources = toLinuxResources(adj, all_cpus_)}};
}

void Daemon::Impl::onPluginConflict(const nri::OwnershipConflict& c) {
  bool first = false;
  {
    std::lock_guard lk(conflicts_mu_);
    ++plugin_conflicts_[c.other_plugin.empty() ? "unknown" : c.other_plugin];
    if (conflicts_logged_.size() > 4096) {
      conflicts_logged_.clear();
    }
    first = conflicts_logged_.insert(c.container_id + "/" + c.field + "/" + c.other_plugin).second;
  }
  if (first) {
    log()->warn(
        "plugin {} owns {} of container {}: colod leaves it to that plugin ({}){}",
        c.other_plugin.empty() ? "(unnamed)" : c.other_plugin, c.field,
        c.container_id.empty() ? "(unnamed)" : c.container_id.substr(0, 12),
        c.source == "owned" ? "the runtime reported the owner" : "the runtime refused the write",
        c.message.empty() ? "" : ": " + c.message);
  }
}

// ---------------------------------------------------------------------------------------------
// Stop

void Daemon::Impl::restoreOnStop() {
  const auto conf = cfg();
  if (!conf->daemon.restore_on_stop || conf->daemon.mode != Mode::Act) {
    log()->info(
        "leaving current values in place (restore_on_stop={}, mode={}); the journal keeps "
        "{} containers for the next start",
        conf->daemon.restore_on_stop, modeName(conf->daemon.mode), actuator_->entries().size());
    return;
  }
  std::vector<policy::Decision> restores;
  {
    std::lock_guard lk(engine_mu_);
    restores = engine_->restoreAll(
        std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now().time_since_epoch())
            .count());
  }
  for (const auto& d : restores) {
    log()->info(
        "decision seq={} kind=restore target={} values=\"{}\" reason=\"colod is stopping: "
        "{}\"",
        d.seq, d.target_name.empty() ? d.target_id : d.target_name, describeResources(d.new_values),
        d.explanation);
  }
  // Every overlay is released through the reconciler (the only writer), to the runtime's own
  // current values; the journal keeps each container until the runtime confirmed it.
  reconciled_ = true;  // a stop before the first resync still releases what the journal lists
  commitOverlays(nullptr);
  const auto tracked = actuator_->entries().size();
  if (tracked == 0) {
    (void)writeJournalOf({});
    return;
  }
  log()->info("releasing {} containers (waiting up to {} ms for the runtime to confirm)", tracked,
              conf->daemon.stop_timeout.count());
  const bool done = actuator_->waitConverged(conf->daemon.stop_timeout);
  actuator_->stop();
  const auto left = actuator_->entries();
  if (auto r = writeJournalOf(left); !r) {
    log()->error("journal not updated on stop: {}", r.error().message());
  }
  if (done && left.empty()) {
    log()->info("every container is back to the runtime's own values");
  } else {
    log()->warn(
        "{} containers not confirmed released (runtime {}); the journal keeps them and the "
        "next colod releases them",
        left.size(), nri_connected_ ? "refusing or slow" : "away");
  }
}

}  // namespace colod::daemon
