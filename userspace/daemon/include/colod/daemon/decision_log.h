// SPDX-License-Identifier: Apache-2.0
// The recent decisions served to `coloctl decisions` and `explain`, with their outcome as the
// actuator learns it ("pending" -> "applied"), and the count of decisions by kind for metrics.
// Bounded (a ring of `kept`); thread-safe (the loop writes, gRPC threads read).
#pragma once

#include <cstdint>
#include <deque>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "control.pb.h"

namespace colod::daemon {

class DecisionLog {
 public:
  explicit DecisionLog(std::size_t kept) : kept_(kept == 0 ? 1 : kept) {}

  // Appends one decision (the oldest goes when the ring is full) and counts `kind`.
  void add(control::v1::Decision decision, const std::string& kind);
  // Sets the outcome of the newest decision with this seq; 0 and unknown seqs are ignored.
  void setOutcome(uint64_t seq, const std::string& outcome);
  // The newest `limit` decisions, oldest first (0 = all kept).
  [[nodiscard]] std::vector<control::v1::Decision> recent(uint32_t limit) const;
  // Decisions about `container_id` (as target or victim, or named in the reason), oldest first.
  [[nodiscard]] std::vector<control::v1::Decision> about(const std::string& container_id) const;
  [[nodiscard]] std::map<std::string, uint64_t> countsByKind() const;
  void setKept(std::size_t kept);

 private:
  mutable std::mutex mu_;
  std::size_t kept_;
  std::deque<control::v1::Decision> ring_;
  std::map<std::string, uint64_t> by_kind_;
};

}  // namespace colod::daemon
