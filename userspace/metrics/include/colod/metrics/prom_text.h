// SPDX-License-Identifier: Apache-2.0
// colod::metrics — Prometheus text exposition format (version 0.0.4), pure formatting.
//
// TextWriter builds one exposition document family by family: every family gets its # HELP and
// # TYPE lines once, followed by all of its samples (the format requires a family's samples to
// be contiguous). Label values are escaped (\\, \", \n), HELP text too (\\, \n). Nothing here
// does I/O; the HTTP side is http_server.h.
//
// With a sink, the document leaves in pieces of about chunk_bytes (whole lines) as it is
// written, so a scrape of 1000 containers (2.6 MB of text) never holds more than one piece: a
// whole document was 2.6 MB of heap that stayed resident after every scrape (docs/benchmarks.md,
// session 47).
//
// Threading: a TextWriter is a plain value, not shared between threads.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
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
  // Receives each piece of the document, in order.
  using Sink = std::function<void(std::string_view piece)>;
  static constexpr std::size_t kDefaultChunkBytes = 64 * 1024;

  // Without a sink the whole document is kept (text(), take()).
  TextWriter() = default;
  explicit TextWriter(Sink sink, std::size_t chunk_bytes = kDefaultChunkBytes);

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

  // With a sink: hands over what is left. Call once, at the end of the document.
  void finish();

  // Without a sink: the document so far.
  [[nodiscard]] const std::string& text() const { return out_; }
  std::string take() { return std::move(out_); }

 private:
  void appendLabels(const Labels& labels, const std::pair<std::string, std::string>* extra);
  // Called at the end of every line: hands the buffer to the sink once it holds chunk_bytes_.
  void lineDone();
  std::string out_;
  Sink sink_;
  std::size_t chunk_bytes_ = kDefaultChunkBytes;
};

}  // namespace colod::metrics
