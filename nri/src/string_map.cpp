// SPDX-License-Identifier: Apache-2.0
#include "colod/nri/string_map.h"

#include <algorithm>
#include <functional>
#include <limits>
#include <tuple>

#include "colod/base/check.h"

namespace colod::nri {

StringMap::StringMap(std::initializer_list<value_type> init) {
  for (const auto& [k, v] : init) {
    append(k, v);
  }
  normalize();
}

StringMap::const_iterator StringMap::find(std::string_view key) const {
  auto it = std::lower_bound(entries_.begin(), entries_.end(), key,
                             [&](const Entry& e, std::string_view k) { return keyOf(e) < k; });
  if (it == entries_.end() || keyOf(*it) != key) {
    return end();
  }
  return {this, static_cast<std::size_t>(it - entries_.begin())};
}

std::optional<std::string_view> StringMap::get(std::string_view key) const {
  auto it = find(key);
  if (it == end()) {
    return std::nullopt;
  }
  return (*it).second;
}

std::pair<uint32_t, uint32_t> StringMap::put(std::string_view a, std::string_view b) {
  // An API caller's bug, not input: a decoded map is bounded by its message (< 4 GiB).
  COLOD_CHECK(a.size() + b.size() <= std::numeric_limits<uint32_t>::max() - chars_.size());
  // Either view may point into chars_ itself (a value read from this map): std::string::append
  // reads its source after reallocating, so such views are turned into offsets first, the
  // buffer is grown once, and both appends then run without reallocation.
  const char* base = chars_.data();
  auto offsetIn = [&](std::string_view v) -> std::optional<std::size_t> {
    const std::less<> lt;
    if (v.empty() || lt(v.data(), base) || !lt(v.data(), base + chars_.size())) {
      return std::nullopt;
    }
    return static_cast<std::size_t>(v.data() - base);
  };
  const auto in_a = offsetIn(a);
  const auto in_b = offsetIn(b);
  chars_.reserve(chars_.size() + a.size() + b.size());
  if (in_a) {
    a = std::string_view(chars_).substr(*in_a, a.size());
  }
  if (in_b) {
    b = std::string_view(chars_).substr(*in_b, b.size());
  }
  const auto off_a = static_cast<uint32_t>(chars_.size());
  chars_.append(a);
  const auto off_b = static_cast<uint32_t>(chars_.size());
  chars_.append(b);
  return {off_a, off_b};
}

void StringMap::insert_or_assign(std::string_view key, std::string_view value) {
  auto it = std::lower_bound(entries_.begin(), entries_.end(), key,
                             [&](const Entry& e, std::string_view k) { return keyOf(e) < k; });
  if (it != entries_.end() && keyOf(*it) == key) {
    const auto pos = it - entries_.begin();
    garbage_ += it->value_len;
    const uint32_t value_off = put({}, value).second;
    Entry& e = entries_[static_cast<std::size_t>(pos)];
    e.value_off = value_off;
    e.value_len = static_cast<uint32_t>(value.size());
    maybeCompact();
    return;
  }
  const auto pos = it - entries_.begin();
  Entry e;
  e.key_len = static_cast<uint32_t>(key.size());
  e.value_len = static_cast<uint32_t>(value.size());
  std::tie(e.key_off, e.value_off) = put(key, value);
  entries_.insert(entries_.begin() + pos, e);
}

bool StringMap::erase(std::string_view key) {
  auto it = find(key);
  if (it == end()) {
    return false;
  }
  const Entry& e = entries_[it.pos_];
  garbage_ += std::size_t{e.key_len} + e.value_len;
  entries_.erase(entries_.begin() + static_cast<std::ptrdiff_t>(it.pos_));
  if (entries_.empty()) {
    clear();
  } else {
    maybeCompact();
  }
  return true;
}

void StringMap::clear() {
  chars_.clear();
  entries_.clear();
  garbage_ = 0;
}

std::map<std::string, std::string> StringMap::toStdMap() const {
  std::map<std::string, std::string> out;
  for (const auto& [k, v] : *this) {
    out.emplace_hint(out.end(), k, v);  // already in key order
  }
  return out;
}

void StringMap::append(std::string_view key, std::string_view value) {
  Entry e;
  e.key_len = static_cast<uint32_t>(key.size());
  e.value_len = static_cast<uint32_t>(value.size());
  std::tie(e.key_off, e.value_off) = put(key, value);
  entries_.push_back(e);
}

void StringMap::normalize() {
  auto less = [&](const Entry& a, const Entry& b) { return keyOf(a) < keyOf(b); };
  // Stable, so equal keys keep their wire order and the last one wins below. Runtimes send map
  // entries in Go's random map order; real maps are small, where an insertion sort beats
  // std::stable_sort, which allocates a temporary buffer.
  if (entries_.size() <= 32) {
    for (std::size_t i = 1; i < entries_.size(); ++i) {
      const Entry e = entries_[i];
      std::size_t j = i;
      for (; j > 0 && less(e, entries_[j - 1]); --j) {
        entries_[j] = entries_[j - 1];
      }
      entries_[j] = e;
    }
  } else {
    std::stable_sort(entries_.begin(), entries_.end(), less);
  }
  std::size_t out = 0;
  for (std::size_t i = 0; i < entries_.size(); ++i) {
    if (i + 1 < entries_.size() && keyOf(entries_[i]) == keyOf(entries_[i + 1])) {
      garbage_ += std::size_t{entries_[i].key_len} + entries_[i].value_len;
      continue;  // a later duplicate follows: it wins
    }
    entries_[out++] = entries_[i];
  }
  entries_.resize(out);
  maybeCompact();
}

void StringMap::reserve(std::size_t chars, std::size_t entries) {
  chars_.reserve(chars_.size() + chars);
  entries_.reserve(entries_.size() + entries);
}

std::size_t StringMap::heapBytes() const {
  // libstdc++'s small-string buffer (15 chars) lives inside the object.
  const std::size_t text = chars_.capacity() > 15 ? chars_.capacity() + 1 : 0;
  return text + entries_.capacity() * sizeof(Entry);
}

void StringMap::maybeCompact() {
  if (garbage_ < 64 || garbage_ * 2 < chars_.size()) {
    return;
  }
  std::string live;
  live.reserve(chars_.size() - garbage_);
  for (Entry& e : entries_) {
    const std::string_view k = keyOf(e);
    const std::string_view v = std::string_view(chars_).substr(e.value_off, e.value_len);
    e.key_off = static_cast<uint32_t>(live.size());
    live.append(k);
    e.value_off = static_cast<uint32_t>(live.size());
    live.append(v);
  }
  chars_.swap(live);
  garbage_ = 0;
}

bool operator==(const StringMap& a, const StringMap& b) {
  return a.size() == b.size() && std::equal(a.begin(), a.end(), b.begin());
}

}  // namespace colod::nri
