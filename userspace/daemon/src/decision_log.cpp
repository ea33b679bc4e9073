// SPDX-License-Identifier: Apache-2.0
#include "colod/daemon/decision_log.h"

#include <algorithm>

namespace colod::daemon {

void DecisionLog::add(control::v1::Decision decision, const std::string& kind) {
  std::lock_guard lk(mu_);
  ring_.push_back(std::move(decision));
  while (ring_.size() > kept_) {
    ring_.pop_front();
  }
  ++by_kind_[kind];
}

void DecisionLog::setOutcome(uint64_t seq, const std::string& outcome) {
  if (seq == 0) {
    return;
  }
  std::lock_guard lk(mu_);
  for (auto it = ring_.rbegin(); it != ring_.rend(); ++it) {
    if (it->seq() == seq) {
      it->set_outcome(outcome);
      return;
    }
  }
}

std::vector<control::v1::Decision> DecisionLog::recent(uint32_t limit) const {
  std::lock_guard lk(mu_);
  const std::size_t n = limit == 0 ? ring_.size() : std::min<std::size_t>(limit, ring_.size());
  return {ring_.end() - static_cast<std::ptrdiff_t>(n), ring_.end()};
}

std::vector<control::v1::Decision> DecisionLog::about(const std::string& container_id) const {
  std::lock_guard lk(mu_);
  std::vector<control::v1::Decision> out;
  for (const auto& d : ring_) {
    if (d.container_id() == container_id || d.victim_id() == container_id ||
        d.reason().find(container_id) != std::string::npos) {
      out.push_back(d);
    }
  }
  return out;
}

std::map<std::string, uint64_t> DecisionLog::countsByKind() const {
  std::lock_guard lk(mu_);
  return by_kind_;
}

void DecisionLog::setKept(std::size_t kept) {
  std::lock_guard lk(mu_);
  kept_ = kept == 0 ? 1 : kept;
  while (ring_.size() > kept_) {
    ring_.pop_front();
  }
}

}  // namespace colod::daemon
