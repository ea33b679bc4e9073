// SPDX-License-Identifier: Apache-2.0
// colod::metrics — Prometheus text exposition format (version 0.0.4), pure formatting.
//
// TextWriter builds one exposition document family by family: every family gets its # HELP and
// # TYPE lines once, followed by all of its samples (the format requires a family's samples to
// be contiguous). Label values are escaped (\\, \", \n), HELP text too (\\, \n). Nothing here
// does I/O; the HTTP side is http_server.h.
//
// Threading: a TextWriter is a plain value, not shared between threads.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace colod::metrics {

using Labels = std::vector<std::pair<std::string, std::string>>;

enum class MetricType { Counter, Gauge, Histogram };

// Escapes a label value for the text format: backslash, double quote and newline.
std::string escapeLabelValue(std::string_view value);
// Escapes HELP text: backslash and newline.
std::string escapeHelp(std::string_view help);
// Formats a sample value: integers without exponent, NaN/+Inf/-Inf spelled as Prometheus does,
// everything else with enough digits to round-trip.
std::string formatValue(double value);
// [a-zA-Z_:][a-zA-Z0-9_:]* (metric names) — label names additionally exclude ':'.
bool validMetricName(std::string_view name);
bool validLabelName(std::string_view name);

class TextWriter {
 public:
  // Starts a family. The name must be valid (COLOD_CHECK: names are compile-time constants).
  void family(std::string_view name, MetricType type, std::string_view help);
  // One sample line `name{labels} value`. `name` may carry a suffix (_total, _bucket...).
  void sample(std::string_view name, const Labels& labels, double value);

  // A histogram from log2 slots (slot i counts values in [2^i, 2^(i+1)) units, slot 0 also 0):
  // emits cumulative `<name>_bucket{...,le="2^(i+1)*unit"}` for every slot up to the last
  // non-empty one (at least one bucket), `le="+Inf"`, `<name>_sum` and `<name>_count`.
  // `unit_seconds` converts a slot unit to the exposed unit (1e-6 for microsecond slots).
  void log2Histogram(std::string_view name,
                     const Labels& labels,
                     std::span<const uint64_t> slots,
                     double unit_seconds,
                     double sum);

  [[nodiscard]] const std::string& text() const { return out_; }
  std::string take() { return std::move(out_); }

 private:
  void appendLabels(const Labels& labels, const std::pair<std::string, std::string>* extra);
  std::string out_;
};

}  // namespace colod::metrics
