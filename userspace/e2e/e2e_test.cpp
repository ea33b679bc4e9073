// SPDX-License-Identifier: Apache-2.0
// colod end to end: a real colod process, the real Go runtime peer (colod-testpeer) applying
// updates to real cgroups, real workloads (stress-ng hogs and the colod-probe LS probe), driven
// and observed through the control API, coloctl, /metrics and the cgroup files themselves.
//
// Every wait is a bounded poll with a wide margin (the machine is shared and noisy); nothing
// sleeps as an assertion. Cgroups live under the peer's unique prefix and are removed by it.
#include <gtest/gtest.h>

#include <chrono>
#include <csignal>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>

#include "harness.h"

namespace {

namespace fs = std::filesystem;
using colod::e2e::CgroupValues;
using colod::e2e::ColodFixture;
using colod::e2e::ColodProcess;
using colod::e2e::journalOverlays;
using colod::e2e::metricValue;
using colod::e2e::readValues;
using colod::e2e::run;
using colod::e2e::slurp;
using colod::e2e::str;
using colod::e2e::waitFor;
using json = nlohmann::json;
using namespace std::chrono_literals;

class ColodE2E : public ColodFixture {
 protected:
  ColodE2E() : ColodFixture("colod-e2e") {}

  std::string config(const std::string& extra_daemon = "") {
    return daemonConfig(extra_daemon,
                        "  thresholds:\n"
                        "    runq_p99_us: 1000\n");
  }

  void startColod(const std::string& yaml) { ColodFixture::startColod(yaml); }

  // One LS pod (the open-loop colod-probe: a request every 2 ms needing 200 us of CPU) and one
  // BE pod (stress-ng hogs) pinned to the same CPU, the BE with 4x the LS CPU request (as
  // Burstable batch pods get). Tiers come from the colod.io/tier annotation. Each workload stops
  // when its stop file appears.
  void startWorkloads() {
    const std::string cpu = "1";
    addPod("web", "prod", "ls");
    addContainer({.name = "server",
                  .pod = "web",
                  .command = probeLoop("stop-ls"),
                  .cpu_request_milli = 1000,
                  .cpus = cpu});
    addPod("batch", "jobs", "be");
    addContainer({.name = "hog",
                  .pod = "batch",
                  .command = hogLoop("stop-be", 2),
                  .cpu_request_milli = 4000,
                  .cpus = cpu});
    peer_->mustControl({{"op", "run_pod"}, {"pod", "web"}});
    ls_ = createStart("server");
    peer_->mustControl({{"op", "run_pod"}, {"pod", "batch"}});
    be_ = createStart("hog");
    be_rel_ = be_["cgroup_rel"].get<std::string>();
    original_ = readValues(be_rel_);
    ASSERT_FALSE(original_.shares.empty()) << "cannot read the BE cgroup " << be_rel_;
  }

  void stopLoads() {
    touchStopFile("stop-be");
    touchStopFile("stop-ls");
  }

  // Waits until colod changed the BE cgroup.
  bool waitEngaged(std::chrono::milliseconds timeout = 90s) {
    return waitFor([&] { return !(readValues(be_rel_) == original_); }, timeout);
  }
  bool waitReleased(std::chrono::milliseconds timeout = 90s) {
    return waitFor([&] { return readValues(be_rel_) == original_; }, timeout);
  }

  colod::Result<colod::control::v1::DecisionsReply> decisions() {
    return colod_->client().decisions(0);
  }

  json ls_;
  json be_;
  std::string be_rel_;
  CgroupValues original_;
};

// Tiers from annotations; the victim detected and its antagonist changed in the real cgroup;
// everything released once the antagonist stops; coloctl and /metrics against the live daemon.
TEST_F(ColodE2E, DetectsVictimRestrictsAntagonistAndReleases) {
  startPeer();
  startColod(config());
  startWorkloads();
  auto client = colod_->client();
  ASSERT_TRUE(waitFor(
      [&] {
        auto l = client.listContainers();
        return l && l->containers_size() == 2;
      },
      30s))
      << diagnostics();
  {
    auto l = client.listContainers();
    ASSERT_TRUE(l.has_value());
    std::map<std::string, std::string> tiers;
    for (const auto& c : l->containers()) {
      tiers[c.name()] = c.tier();
    }
    EXPECT_EQ(tiers["server"], "ls");
    EXPECT_EQ(tiers["hog"], "be");
  }
  ASSERT_TRUE(waitEngaged()) << "BE cgroup never changed (" << str(original_) << ")\n"
                             << diagnostics();
  const CgroupValues engaged = readValues(be_rel_);
  std::printf("[ e2e      ] BE %s -> %s\n", str(original_).c_str(), str(engaged).c_str());
  // The decision is visible with its reason and was applied.
  ASSERT_TRUE(waitFor(
      [&] {
        auto d = decisions();
        if (!d) {
          return false;
        }
        for (const auto& x : d->decisions()) {
          if (x.container() == "jobs/batch/hog" && x.outcome() == "applied" &&
              !x.reason().empty()) {
            return true;
          }
        }
        return false;
      },
      10s))
      << colod_->coloctl("decisions").out;
  // The journal (v2) holds colod's overlay (write-ahead) and every decision is logged.
  EXPECT_NE(colod::e2e::loadedJournalText(colod_->journalPath()).find("\"overlay\""),
            std::string::npos)
      << slurp(colod_->journalPath());
  EXPECT_NE(slurp(colod_->logPath()).find("decision seq="), std::string::npos);

  // coloctl against the live daemon.
  auto top = colod_->coloctl("top --once");
  EXPECT_EQ(top.exit_code, 0) << top.out;
  EXPECT_NE(top.out.find("prod/web/server"), std::string::npos) << top.out;
  EXPECT_NE(top.out.find("jobs/batch/hog"), std::string::npos) << top.out;
  auto dump = colod_->coloctl("dump --json");
  ASSERT_EQ(dump.exit_code, 0) << dump.out;
  auto doc = json::parse(dump.out, nullptr, false);
  ASSERT_FALSE(doc.is_discarded()) << dump.out;
  EXPECT_EQ(doc["containers"].size(), 2U);
  EXPECT_GE(doc["decisions"].size(), 1U);
  // The last interval of a container that runs (read from the round's snapshot at publish):
  // the hog, on its CPU every round, shows its CPU use and its run-queue samples.
  EXPECT_TRUE(waitFor(
      [&] {
        auto l = client.listContainers();
        if (!l) {
          return false;
        }
        for (const auto& c : l->containers()) {
          if (c.name() == "hog" && c.cpu_util() > 0.1 && c.runq_count() > 0) {
            return true;
          }
        }
        return false;
      },
      10s))
      << colod_->coloctl("top --once").out;
  auto hist = colod_->coloctl("hist web/server");
  EXPECT_EQ(hist.exit_code, 0) << hist.out;
  EXPECT_NE(hist.out.find("usecs"), std::string::npos) << hist.out;
  auto explain = colod_->coloctl("explain hog");
  EXPECT_EQ(explain.exit_code, 0) << explain.out;
  EXPECT_NE(explain.out.find("tier: be"), std::string::npos) << explain.out;
  auto dec = colod_->coloctl("decisions");
  EXPECT_EQ(dec.exit_code, 0);
  EXPECT_NE(dec.out.find("jobs/batch/hog"), std::string::npos) << dec.out;
  auto unknown = colod_->coloctl("explain no-such-container");
  EXPECT_EQ(unknown.exit_code, 1);
  EXPECT_NE(unknown.out.find("no container matches"), std::string::npos) << unknown.out;
  auto status = colod_->coloctl("status");
  EXPECT_NE(status.out.find("mode:           act"), std::string::npos) << status.out;
  // The runtime's answer time to the update above (the view is republished within a tick of
  // the reply).
  for (int i = 0;
       i < 20 && status.out.find("answers UpdateContainers in p50 <= ") == std::string::npos; ++i) {
    std::this_thread::sleep_for(100ms);
    status = colod_->coloctl("status");
  }
  EXPECT_NE(status.out.find("runtime:        answers UpdateContainers in p50 <= "),
            std::string::npos)
      << status.out;
  auto rec = colod_->coloctl("record " + dir_ + "/trace.jsonl --seconds 2");
  EXPECT_EQ(rec.exit_code, 0) << rec.out;
  auto replay = colod_->coloctl("replay " + dir_ + "/trace.jsonl");
  EXPECT_EQ(replay.exit_code, 0) << replay.out;
  EXPECT_NE(replay.out.find("rounds"), std::string::npos) << replay.out;
  EXPECT_NE(slurp(dir_ + "/trace.jsonl").find("\"type\":\"snapshot\""), std::string::npos);

  // /metrics scraped and parsed.
  const std::string m = colod_->scrape();
  ASSERT_FALSE(m.empty());
  EXPECT_EQ(metricValue(m, "colod_nri_connected"), 1);
  EXPECT_GE(metricValue(m, "colod_decisions_total"), 1);
  EXPECT_GT(metricValue(m, "colod_runqueue_latency_seconds_count", "container=\"server\""), 0) << m;
  EXPECT_GT(metricValue(m, "colod_runqueue_latency_seconds_bucket",
                        "container=\"server\",tier=\"ls\",le=\"+Inf\""),
            0);
  EXPECT_GT(metricValue(m, "colod_process_resident_memory_bytes"), 1 << 20);
  EXPECT_GE(metricValue(m, "colod_nri_updates_sent_total"), 1);
  EXPECT_GE(metricValue(m, "colod_nri_update_duration_seconds_count"), 1) << m;
  // The LS wakes colod between ticks; its files and the restricted BE's are read every tick
  // (issue #17: the sets follow the containers and the overlays without a walk per tick).
  EXPECT_EQ(metricValue(m, "colod_watched_cgroups"), 1) << m;
  EXPECT_TRUE(
      waitFor([&] { return metricValue(colod_->scrape(), "colod_every_tick_cgroups") == 2; }, 5s))
      << colod_->scrape();

  // Release: the antagonist (and the victim's load) stop; colod gives everything back.
  stopLoads();
  ASSERT_TRUE(waitReleased()) << "still " << str(readValues(be_rel_)) << ", original "
                              << str(original_) << "\n"
                              << diagnostics();
  EXPECT_TRUE(waitFor([&] { return journalOverlays(colod_->journalPath()) == 0; }, 10s))
      << slurp(colod_->journalPath());
  EXPECT_TRUE(
      waitFor([&] { return metricValue(colod_->scrape(), "colod_every_tick_cgroups") == 1; }, 5s))
      << "the released BE is still read every tick\n"
      << colod_->scrape();
  EXPECT_EQ(colod_->kill(SIGTERM), 0);
}

// The runtime restarts while a restriction is held: colod reconnects, resynchronizes, does not
// repeat or lose decisions, and still releases afterwards.
TEST_F(ColodE2E, RuntimeRestartReconnectsWithoutDuplicateDecisions) {
  startPeer();
  startColod(config());
  startWorkloads();
  ASSERT_TRUE(waitEngaged()) << diagnostics();
  auto seqs_before = decisions();
  ASSERT_TRUE(seqs_before.has_value());
  peer_->mustControl({{"op", "restart_runtime"}, {"delay_ms", 500}});
  ASSERT_TRUE(waitFor(
      [&] {
        const std::string m = colod_->scrape();
        return metricValue(m, "colod_nri_reconnects_total") >= 1 &&
               metricValue(m, "colod_nri_connected") == 1;
      },
      60s))
      << diagnostics();
  // Every decision has a unique sequence number and ends applied (none lost, none replayed by
  // the resync).
  ASSERT_TRUE(waitFor(
      [&] {
        auto d = decisions();
        if (!d) {
          return false;
        }
        for (const auto& x : d->decisions()) {
          if (x.outcome() != "applied") {
            return false;
          }
        }
        return true;
      },
      30s))
      << colod_->coloctl("decisions").out;
  auto d = decisions();
  ASSERT_TRUE(d.has_value());
  std::map<uint64_t, int> seen;
  for (const auto& x : d->decisions()) {
    EXPECT_EQ(++seen[x.seq()], 1) << "decision #" << x.seq() << " twice";
  }
  EXPECT_GE(d->decisions_size(), seqs_before->decisions_size());
  stopLoads();
  ASSERT_TRUE(waitReleased()) << "not released after the runtime restart; now "
                              << str(readValues(be_rel_)) << "\n"
                              << diagnostics();
}

// colod is SIGKILLed while holding a restriction: the journal keeps the originals and the next
// colod restores them once the runtime has synchronized.
TEST_F(ColodE2E, SigkillThenRestartReconcilesFromTheJournal) {
  startPeer();
  startColod(config());
  startWorkloads();
  ASSERT_TRUE(waitEngaged()) << diagnostics();
  ASSERT_TRUE(waitFor([&] { return journalOverlays(colod_->journalPath()) > 0; }, 10s))
      << slurp(colod_->journalPath());
  colod_->kill(SIGKILL);
  stopLoads();
  // Nothing restores the cgroup while colod is dead.
  EXPECT_FALSE(readValues(be_rel_) == original_);
  // What the next colod loads: the journal, or its write-ahead copy if colod died between them.
  const std::string journal = colod::e2e::loadedJournalText(colod_->journalPath());
  EXPECT_NE(journal.find(be_["id"].get<std::string>()), std::string::npos) << journal;
  colod_.reset();
  startColod(config());
  ASSERT_TRUE(waitReleased(60s)) << "journal not reconciled; now " << str(readValues(be_rel_))
                                 << "\n"
                                 << diagnostics();
  EXPECT_TRUE(waitFor([&] { return journalOverlays(colod_->journalPath()) == 0; }, 10s))
      << slurp(colod_->journalPath());
  EXPECT_NE(slurp(colod_->logPath()).find("journal reconcile"), std::string::npos);
  EXPECT_EQ(colod_->kill(SIGTERM), 0);
}

// A clean stop (SIGTERM) returns every restricted container to its original values.
TEST_F(ColodE2E, CleanStopRestoresOriginals) {
  startPeer();
  startColod(config());
  startWorkloads();
  ASSERT_TRUE(waitEngaged()) << diagnostics();
  EXPECT_EQ(colod_->kill(SIGTERM), 0);
  EXPECT_EQ(readValues(be_rel_), original_) << "now " << str(readValues(be_rel_));
  EXPECT_EQ(journalOverlays(colod_->journalPath()), 0) << slurp(colod_->journalPath());
  EXPECT_NE(slurp(colod_->logPath()).find("colod is stopping"), std::string::npos);
}

// Reload on file change (rename-on-save), on SIGHUP and via coloctl; a bad file is rejected and
// the running configuration kept; --check-config exit codes.
TEST_F(ColodE2E, ConfigReloadGoodAndBad) {
  startPeer();
  startColod(config());
  auto reloads = [&] { return metricValue(colod_->scrape(), "colod_config_reloads_total"); };
  auto failures = [&] {
    return metricValue(colod_->scrape(), "colod_config_reload_failures_total");
  };
  ASSERT_EQ(reloads(), 0);
  // Good change, picked up from the file without a signal.
  colod_->writeConfig(config("  decisions_kept: 64\n"));
  ASSERT_TRUE(waitFor([&] { return reloads() == 1; }, 20s)) << diagnostics();
  // Bad change: rejected and counted, the daemon keeps running with the old config.
  colod_->writeConfig(config("  interval_ms: 1\n"));
  ASSERT_TRUE(waitFor([&] { return failures() == 1; }, 20s)) << diagnostics();
  auto show = colod_->coloctl("config show");
  EXPECT_EQ(show.exit_code, 0);
  // config show prints the effective configuration: decisions_kept is restart-only, so the running
  // value stays, with what the reloaded file says.
  EXPECT_NE(show.out.find("the file says 64; takes effect after a restart"), std::string::npos)
      << show.out;
  EXPECT_EQ(show.out.find("interval_ms: 1\n"), std::string::npos) << show.out;
  auto bad_reload = colod_->coloctl("config reload");
  EXPECT_EQ(bad_reload.exit_code, 3) << bad_reload.out;
  EXPECT_NE(bad_reload.out.find("daemon.interval_ms: '1': out of range"), std::string::npos)
      << bad_reload.out;
  // SIGHUP with a good file.
  colod_->writeConfig(config("  interval_ms: 200\n"));
  ::kill(colod_->pid(), SIGHUP);
  ASSERT_TRUE(waitFor([&] { return reloads() == 2; }, 20s)) << diagnostics();
  EXPECT_TRUE(waitFor(
      [&] {
        auto s = colod_->client().status();
        return s && s->interval_ms() == 200;
      },
      10s));
  EXPECT_FALSE(colod_->exited());

  // coloctl config check and colod --check-config.
  std::ofstream(dir_ + "/bad.yaml") << "daemon:\n  mode: fast\n";
  auto check = colod_->coloctl("config check " + dir_ + "/bad.yaml");
  EXPECT_EQ(check.exit_code, 3);
  EXPECT_NE(check.out.find("bad.yaml:2:9: daemon.mode: 'fast'"), std::string::npos) << check.out;
  auto cc = run(std::string(colod::e2e::colodBin()) + " --check-config " + dir_ + "/bad.yaml");
  EXPECT_EQ(cc.exit_code, 3);
  EXPECT_NE(cc.out.find("bad.yaml:2:9: daemon.mode: 'fast': expected one of"), std::string::npos)
      << cc.out;
  auto good = run(std::string(colod::e2e::colodBin()) + " --check-config " + colod_->configPath());
  EXPECT_EQ(good.exit_code, 0) << good.out;
  EXPECT_EQ(colod_->kill(SIGTERM), 0);
}

// No NRI socket: colod starts observe-only (metrics flow), keeps retrying, and connects when the
// runtime appears. A second colod exits 3 with one clear line. coloctl explains a dead daemon.
TEST_F(ColodE2E, ObserveOnlyUntilTheRuntimeAppears) {
  const std::string socket = dir_ + "/nri/nri.sock";
  colod_ = std::make_unique<ColodProcess>(
      dir_, "daemon:\n  nri_socket: " + socket + "\n  control_socket: " + dir_ +
                "/colod.sock\n  metrics_listen: 127.0.0.1:0\n  journal_path: " + dir_ +
                "/journal.json\n");
  ASSERT_TRUE(colod_->start()) << slurp(colod_->logPath());
  auto st = colod_->client().status();
  ASSERT_TRUE(st.has_value());
  EXPECT_EQ(st->mode(), "observe-only");
  EXPECT_FALSE(st->nri_connected());
  EXPECT_EQ(metricValue(colod_->scrape(), "colod_mode", "mode=\"observe-only\""), 1);
  EXPECT_TRUE(waitFor([&] { return metricValue(colod_->scrape(), "colod_ticks_total") > 5; }, 20s));

  auto dup = run(std::string(colod::e2e::colodBin()) + " --config " + colod_->configPath());
  EXPECT_EQ(dup.exit_code, 3) << dup.out;
  EXPECT_NE(dup.out.find("another colod"), std::string::npos) << dup.out;

  // The runtime appears at the configured path: the stub's reconnect finds it.
  startPeer();
  fs::create_directories(dir_ + "/nri");
  fs::create_symlink(peer_->socketPath(), socket);
  EXPECT_TRUE(waitFor(
      [&] {
        auto s = colod_->client().status();
        return s && s->nri_connected() && s->mode() == "act";
      },
      60s))
      << diagnostics();
  EXPECT_EQ(colod_->kill(SIGTERM), 0);
  auto dead =
      run(std::string(colod::e2e::coloctlBin()) + " --socket " + dir_ + "/colod.sock status");
  EXPECT_EQ(dead.exit_code, 1);
  EXPECT_NE(dead.out.find("cannot reach colod at " + dir_ +
                          "/colod.sock: is the daemon running? (connect: No such file or "
                          "directory)"),
            std::string::npos)
      << dead.out;
}

}  // namespace
