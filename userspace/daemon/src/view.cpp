// SPDX-License-Identifier: Apache-2.0
#include "colod/daemon/view.h"

#include <algorithm>
#include <numeric>

#include "colod/control/names.h"

namespace colod::daemon {

namespace v1 = control::v1;

std::shared_ptr<const View> buildView(const ViewInputs& in) {
  auto v = std::make_shared<View>();
  v->unix_ms = in.unix_ms;
  v->containers.reserve(in.row_count);
  v->metrics.containers.reserve(in.row_count);
  v->last.reserve(in.row_count);
  const double interval_ns = static_cast<double>(in.interval_ms) * 1e6;
  ViewRow row;
  for (std::size_t i = 0; i < in.row_count; ++i) {
    row.last = nullptr;
    row.preempted_by.clear();
    row.managed = false;
    row.cpuset_cpus = 0;
    in.fill_row(i, row);
    v1::Container c;
    c.set_id(row.id);
    c.set_name(row.name);
    c.set_pod(row.pod);
    c.set_namespace_(row.pod_namespace);
    c.set_pod_uid(row.pod_uid);
    c.set_tier(row.tier);
    c.set_cgroup_id(row.cgroup_id);
    c.set_cgroup_path(row.cgroup_id != 0 ? row.cgroup_rel : "");
    const auto& r = row.resources;
    c.set_cpuset(r.cpuset_cpus.value_or(""));
    c.set_quota_us(r.cpu_quota.value_or(-1));
    c.set_period_us(r.cpu_period.value_or(0));
    c.set_shares(r.cpu_shares.value_or(0));
    c.set_managed(row.managed);
    std::optional<std::array<uint32_t, collect::kHistSlots>> last;
    if (row.last != nullptr) {
      const auto& s = *row.last;
      c.set_runq_count(s.runq.count);
      c.set_runq_p50_us(s.runq.p50_us);
      c.set_runq_p90_us(s.runq.p90_us);
      c.set_runq_p99_us(s.runq.p99_us);
      c.set_runq_max_us(s.runq.max_us);
      c.set_preemptions(s.involuntary_switches);
      for (const auto& [who, n] : row.preempted_by) {
        if (c.preempted_by_size() >= 3) {
          break;
        }
        auto* ag = c.add_preempted_by();
        ag->set_container(who);
        ag->set_preemptions(n);
      }
      if (s.throttling) {
        c.set_nr_throttled(s.throttling->nr_throttled);
        c.set_throttled_ns(s.throttling->throttled_ns);
      }
      c.set_reclaim_stall_ns(s.reclaim_stall_ns);
      c.set_cpu_util(interval_ns > 0 ? static_cast<double>(s.oncpu_ns) / interval_ns : 0);
      last = s.runq_hist;
    }
    v->last.push_back(last);
    v->containers.push_back(std::move(c));

    metrics::ContainerMetrics m;
    m.pod = row.pod;
    m.namespace_ = row.pod_namespace;
    m.container = row.name;
    m.tier = row.tier;
    m.runq_slots = row.runq_slots;
    m.runq_sum_seconds = static_cast<double>(row.runq_sum_ns) / 1e9;
    m.preemptions = row.preemptions;
    m.throttled_periods = row.throttled_periods;
    m.throttled_seconds = static_cast<double>(row.throttled_ns) / 1e9;
    m.reclaim_stall_seconds = static_cast<double>(row.reclaim_ns) / 1e9;
    m.cpuset_cpus = static_cast<uint32_t>(row.cpuset_cpus != 0 ? row.cpuset_cpus : in.node_cpus);
    if (r.cpu_quota && *r.cpu_quota > 0 && r.cpu_period && *r.cpu_period > 0) {
      m.quota_cpus = static_cast<double>(*r.cpu_quota) / static_cast<double>(*r.cpu_period);
    }
    m.cpu_shares = r.cpu_shares;
    v->metrics.containers.push_back(std::move(m));
  }
  // Sort the protos by display name, remembering where each came from (see View::source).
  std::vector<std::size_t> order(v->containers.size());
  std::iota(order.begin(), order.end(), std::size_t{0});
  std::vector<std::string> names;
  names.reserve(v->containers.size());
  for (const auto& c : v->containers) {
    names.push_back(control::displayName(c));
  }
  std::stable_sort(order.begin(), order.end(),
                   [&](std::size_t a, std::size_t b) { return names[a] < names[b]; });
  std::vector<v1::Container> sorted;
  sorted.reserve(order.size());
  for (auto i : order) {
    sorted.push_back(std::move(v->containers[i]));
  }
  v->containers = std::move(sorted);
  v->source = std::move(order);
  v->metrics.daemon = in.daemon;
  v->status = in.status;
  return v;
}

void ViewStore::publish(std::shared_ptr<const View> view) {
  std::shared_ptr<const View> old;
  {
    std::lock_guard lk(mu_);
    old = std::move(view_);
    view_ = std::move(view);
    ++published_;
    wanted_.store(false, std::memory_order_release);
  }
  published_cv_.notify_all();
  old.reset();  // freed outside the lock (unless a reader still holds it)
}

std::shared_ptr<const View> ViewStore::take() const {
  std::lock_guard lk(mu_);
  return view_;
}

std::shared_ptr<const View> ViewStore::fresh() const {
  const std::chrono::milliseconds wait(fresh_wait_ms_.load(std::memory_order_relaxed));
  std::unique_lock lk(mu_);
  if (wait.count() <= 0) {
    return view_;
  }
  const uint64_t asked_at = published_;
  wanted_.store(true, std::memory_order_release);  // under mu_: publish() cannot miss it
  published_cv_.wait_for(lk, wait, [&] { return published_ != asked_at; });
  return view_;
}

}  // namespace colod::daemon
