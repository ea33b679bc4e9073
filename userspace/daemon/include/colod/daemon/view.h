// SPDX-License-Identifier: Apache-2.0
// What the daemon loop publishes for the other threads (gRPC control API, /metrics): an
// immutable View built from plain rows when a reader asks for one, swapped whole in a
// ViewStore. Building is pure, so its sorting and conversions are tested from data.
#pragma once

#include <array>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "colod/collect/collector.h"
#include "colod/metrics/colod_metrics.h"
#include "colod/policy/types.h"
#include "control.pb.h"

namespace colod::daemon {

struct View {
  std::vector<control::v1::Container> containers;  // sorted by display name
  // Per container, in the order of metrics.containers (the rows' order, which also holds the
  // cumulative histograms): source[i] is the position there of containers[i]. Vectors, not maps
  // keyed by id: ~600 B less a container in every view.
  std::vector<std::size_t> source;
  std::vector<std::optional<std::array<uint32_t, collect::kHistSlots>>> last;  // last interval
  metrics::MetricsView metrics;
  control::v1::StatusReply status;
  int64_t unix_ms = 0;
};

// One container as the loop knows it.
struct ViewRow {
  std::string id;
  std::string name;
  std::string pod;
  std::string pod_namespace;
  std::string pod_uid;
  std::string tier;
  uint64_t cgroup_id = 0;  // 0 = unresolved
  std::string cgroup_rel;
  policy::Resources resources;  // as the runtime has them now (colod's overlay included)
  std::size_t cpuset_cpus = 0;  // CPUs in its cpuset (0 = all of the node's)
  bool managed = false;         // colod holds or is releasing an overlay on it
  // Cumulative, for Prometheus.
  std::array<uint64_t, collect::kHistSlots> runq_slots{};
  uint64_t runq_sum_ns = 0;
  uint64_t preemptions = 0;
  uint64_t throttled_periods = 0;
  uint64_t throttled_ns = 0;
  uint64_t reclaim_ns = 0;
  // The last interval, for coloctl top; aggressors already named (display name or "host").
  const collect::CgroupSample* last = nullptr;  // borrowed for buildView() only
  std::vector<std::pair<std::string, uint64_t>> preempted_by;
};

struct ViewInputs {
  // The rows, produced one at a time into one reused ViewRow (no table of copies: with 1000
  // containers a vector of rows was ~0.7 MB more at every publish).
  std::size_t row_count = 0;
  std::function<void(std::size_t i, ViewRow& row)> fill_row;
  metrics::DaemonMetrics daemon;
  control::v1::StatusReply status;  // filled by the loop except what buildView derives
  std::size_t node_cpus = 0;
  int64_t interval_ms = 100;
  int64_t unix_ms = 0;
};

// Pure: protos sorted by display name with their source positions, metrics per row.
std::shared_ptr<const View> buildView(const ViewInputs& in);

// The published view: one writer (the loop), any number of readers, none blocks the other for
// longer than a pointer swap.
//
// The loop builds a view when a reader asks for one (wanted()), not on a clock: with 1000
// containers a view is ~3 ms of the loop's CPU, an eighth of colod's when it was built every
// second for readers that come every 15 s (a scrape) or never (issue 17).
class ViewStore {
 public:
  ViewStore() : view_(std::make_shared<View>()) {}
  // Swaps the view in and answers every fresh() waiting.
  void publish(std::shared_ptr<const View> view);
  // The last published view, at once.
  [[nodiscard]] std::shared_ptr<const View> take() const;
  // A view published after this call: asks the loop for one (wanted()) and waits up to the
  // fresh wait for it; the last published if none comes by then (the loop is stopped or busy
  // past it). With no fresh wait set, take().
  [[nodiscard]] std::shared_ptr<const View> fresh() const;
  // Some reader waits for a view (loop thread: build and publish one).
  [[nodiscard]] bool wanted() const { return wanted_.load(std::memory_order_acquire); }
  // How long fresh() waits: a few of the loop's intervals (Daemon sets it from the config).
  void setFreshWait(std::chrono::milliseconds wait) {
    fresh_wait_ms_.store(wait.count(), std::memory_order_relaxed);
  }

 private:
  mutable std::mutex mu_;
  mutable std::condition_variable published_cv_;
  std::shared_ptr<const View> view_;
  uint64_t published_ = 0;  // views published so far (under mu_)
  // A request, not state of the view: fresh() is a reader's call, so these are mutable.
  mutable std::atomic<bool> wanted_{false};
  std::atomic<int64_t> fresh_wait_ms_{0};
};

}  // namespace colod::daemon
