// SPDX-License-Identifier: Apache-2.0
#include "colod/metrics/prom_text.h"

#include <charconv>
#include <cmath>
#include <limits>

#include "colod/base/check.h"

namespace colod::metrics {

std::string escapeLabelValue(std::string_view value) {
  std::string out;
  out.reserve(value.size());
  for (char c : value) {
    switch (c) {
      case '\\':
        out += "\\\\";
        break;
      case '"':
        out += "\\\"";
        break;
      case '\n':
        out += "\\n";
        break;
      default:
        out += c;
    }
  }
  return out;
}

std::string escapeHelp(std::string_view help) {
  std::string out;
  out.reserve(help.size());
  for (char c : help) {
    if (c == '\\') {
      out += "\\\\";
    } else if (c == '\n') {
      out += "\\n";
    } else {
      out += c;
    }
  }
  return out;
}

std::string formatValue(double value) {
  if (std::isnan(value)) {
    return "NaN";
  }
  if (std::isinf(value)) {
    return value > 0 ? "+Inf" : "-Inf";
  }
  // Exact integers (counters, sizes) print without exponent or fraction.
  if (value == std::floor(value) && std::fabs(value) < 9.007199254740992e15) {
    char buf[32];
    auto [end, ec] = std::to_chars(buf, buf + sizeof buf, static_cast<int64_t>(value));
    COLOD_CHECK(ec == std::errc());
    return std::string(buf, end);
  }
  char buf[64];
  // Shortest representation that round-trips.
  auto [end, ec] = std::to_chars(buf, buf + sizeof buf, value);
  COLOD_CHECK(ec == std::errc());
  return std::string(buf, end);
}

namespace {
bool nameChar(char c, bool first, bool allow_colon) {
  if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_') {
    return true;
  }
  if (c == ':') {
    return allow_colon;
  }
  return !first && c >= '0' && c <= '9';
}
bool validName(std::string_view name, bool allow_colon) {
  if (name.empty()) {
    return false;
  }
  for (std::size_t i = 0; i < name.size(); ++i) {
    if (!nameChar(name[i], i == 0, allow_colon)) {
      return false;
    }
  }
  return true;
}
const char* typeName(MetricType type) {
  switch (type) {
    case MetricType::Counter:
      return "counter";
    case MetricType::Gauge:
      return "gauge";
    case MetricType::Histogram:
      return "histogram";
  }
  return "untyped";
}
}  // namespace

bool validMetricName(std::string_view name) { return validName(name, true); }
bool validLabelName(std::string_view name) {
  return validName(name, false) && !name.starts_with("__");
}

TextWriter::TextWriter(Sink sink, std::size_t chunk_bytes)
    : sink_(std::move(sink)), chunk_bytes_(chunk_bytes) {
  if (sink_) {
    out_.reserve(chunk_bytes_ + 1024);  // a piece and the line that ends it, mostly
  }
}

void TextWriter::lineDone() {
  if (sink_ && out_.size() >= chunk_bytes_) {
    sink_(out_);
    out_.clear();  // keeps the capacity: one buffer for the whole document
  }
}

void TextWriter::finish() {
  if (sink_ && !out_.empty()) {
    sink_(out_);
    out_.clear();
  }
}

void TextWriter::family(std::string_view name, MetricType type, std::string_view help) {
  COLOD_CHECK(validMetricName(name));
  out_ += "# HELP ";
  out_ += name;
  out_ += ' ';
  out_ += escapeHelp(help);
  out_ += "\n# TYPE ";
  out_ += name;
  out_ += ' ';
  out_ += typeName(type);
  out_ += '\n';
  lineDone();
}

void TextWriter::appendLabels(const Labels& labels,
                              const std::pair<std::string, std::string>* extra) {
  if (labels.empty() && extra == nullptr) {
    return;
  }
  out_ += '{';
  bool first = true;
  auto add = [&](const std::pair<std::string, std::string>& kv) {
    COLOD_CHECK(validLabelName(kv.first));
    if (!first) {
      out_ += ',';
    }
    first = false;
    out_ += kv.first;
    out_ += "=\"";
    out_ += escapeLabelValue(kv.second);
    out_ += '"';
  };
  for (const auto& kv : labels) {
    add(kv);
  }
  if (extra != nullptr) {
    add(*extra);
  }
  out_ += '}';
}

void TextWriter::sample(std::string_view name, const Labels& labels, double value) {
  COLOD_CHECK(validMetricName(name));
  out_ += name;
  appendLabels(labels, nullptr);
  out_ += ' ';
  out_ += formatValue(value);
  out_ += '\n';
  lineDone();
}

void TextWriter::log2Histogram(std::string_view name,
                               const Labels& labels,
                               std::span<const uint64_t> slots,
                               double unit_seconds,
                               double sum) {
  std::size_t last = 0;
  for (std::size_t i = 0; i < slots.size(); ++i) {
    if (slots[i] != 0) {
      last = i;
    }
  }
  const std::string bucket = std::string(name) + "_bucket";
  uint64_t cumulative = 0;
  for (std::size_t i = 0; i <= last && i < slots.size(); ++i) {
    cumulative += slots[i];
    const double le = std::ldexp(1.0, static_cast<int>(i) + 1) * unit_seconds;
    std::pair<std::string, std::string> le_label{"le", formatValue(le)};
    out_ += bucket;
    appendLabels(labels, &le_label);
    out_ += ' ';
    out_ += formatValue(static_cast<double>(cumulative));
    out_ += '\n';
    lineDone();
  }
  uint64_t total = 0;
  for (uint64_t v : slots) {
    total += v;
  }
  std::pair<std::string, std::string> inf{"le", "+Inf"};
  out_ += bucket;
  appendLabels(labels, &inf);
  out_ += ' ';
  out_ += formatValue(static_cast<double>(total));
  out_ += '\n';
  lineDone();
  sample(std::string(name) + "_sum", labels, sum);
  sample(std::string(name) + "_count", labels, static_cast<double>(total));
}

}  // namespace colod::metrics
