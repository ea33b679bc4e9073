// SPDX-License-Identifier: Apache-2.0
// StringMap: the string -> string map of NRI objects (labels, annotations, unified cgroup files).
//
// Why not std::map<std::string, std::string>: a production container carries ~17 such entries
// and most keys/values are longer than the small-string buffer, so a std::map costs ~3
// allocations per entry (node, key, value) -- ~50 per container, ~55 000 per 1000-container
// Synchronize, and ~2.5 KB of heap per container held by the registry. This map keeps all
// characters in one buffer and the entries in one sorted vector: 2 allocations per map, no
// per-entry overhead beyond 16 bytes.
//
// Semantics are those of a std::map: keys unique, iteration in key order (bytewise), equality
// by content. Iteration yields std::pair<std::string_view, std::string_view>, valid until the
// next mutation. Not thread-safe for concurrent mutation (like std::map); const use is safe.
#pragma once

#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <iterator>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace colod::nri {

class StringMap {
  // Offsets into chars_. 32 bits: a map comes from one ttrpc message (< 4 GiB by its header)
  // or from API calls, which COLOD_CHECK the bound.
  struct Entry {
    uint32_t key_off = 0;
    uint32_t key_len = 0;
    uint32_t value_off = 0;
    uint32_t value_len = 0;
  };

 public:
  using value_type = std::pair<std::string_view, std::string_view>;
  using size_type = std::size_t;

  class const_iterator {
   public:
    using iterator_category = std::random_access_iterator_tag;
    using value_type = StringMap::value_type;
    using difference_type = std::ptrdiff_t;
    using pointer = void;
    using reference = value_type;  // a proxy: yields views by value

    const_iterator() = default;
    value_type operator*() const { return map_->at(pos_); }
    const_iterator& operator++() {
      ++pos_;
      return *this;
    }
    const_iterator operator++(int) {
      auto old = *this;
      ++pos_;
      return old;
    }
    const_iterator& operator--() {
      --pos_;
      return *this;
    }
    const_iterator& operator+=(difference_type n) {
      pos_ = static_cast<std::size_t>(static_cast<difference_type>(pos_) + n);
      return *this;
    }
    friend const_iterator operator+(const_iterator it, difference_type n) { return it += n; }
    friend difference_type operator-(const const_iterator& a, const const_iterator& b) {
      return static_cast<difference_type>(a.pos_) - static_cast<difference_type>(b.pos_);
    }
    bool operator==(const const_iterator& o) const { return pos_ == o.pos_; }

   private:
    friend class StringMap;
    const_iterator(const StringMap* map, std::size_t pos) : map_(map), pos_(pos) {}
    const StringMap* map_ = nullptr;
    std::size_t pos_ = 0;
  };
  using iterator = const_iterator;

  StringMap() = default;
  StringMap(std::initializer_list<value_type> init);
  // From any range of string-like pairs (e.g. a std::map<std::string, std::string>); a later
  // duplicate key wins.
  template <typename Range>
  static StringMap from(const Range& range) {
    StringMap m;
    for (const auto& [k, v] : range) {
      m.append(k, v);
    }
    m.normalize();
    return m;
  }

  [[nodiscard]] bool empty() const { return entries_.empty(); }
  [[nodiscard]] size_type size() const { return entries_.size(); }
  [[nodiscard]] const_iterator begin() const { return {this, 0}; }
  [[nodiscard]] const_iterator end() const { return {this, entries_.size()}; }

  [[nodiscard]] const_iterator find(std::string_view key) const;
  [[nodiscard]] bool contains(std::string_view key) const { return find(key) != end(); }
  // The value of `key`, or nullopt. The view is valid until the next mutation.
  [[nodiscard]] std::optional<std::string_view> get(std::string_view key) const;

  // Sets key to value (a new key is inserted in order). O(size) for a new key.
  void insert_or_assign(std::string_view key, std::string_view value);  // NOLINT: std::map name
  // Removes key; returns whether it was present.
  bool erase(std::string_view key);
  void clear();

  // A std::map copy, for vocabularies that want one (policy::ContainerInfo).
  [[nodiscard]] std::map<std::string, std::string> toStdMap() const;

  // Bulk building, for decoders: append() in wire order without keeping the order, then one
  // normalize() sorts by key (stable) and keeps the last value of a duplicate key -- protobuf's
  // rule for map fields. O(n log n) however the input is shaped. Lookups and iteration are only
  // valid after normalize().
  void append(std::string_view key, std::string_view value);
  void normalize();
  // Capacity hints (bytes of key+value text, number of entries).
  void reserve(std::size_t chars, std::size_t entries);
  // The entries whose key `keep(key)` accepts, in a map sized to them exactly (a store that keeps
  // only the keys it reads must not keep the text of the others).
  template <typename Keep>
  [[nodiscard]] StringMap filtered(const Keep& keep) const {
    std::size_t chars = 0;
    std::size_t entries = 0;
    for (const auto& [k, v] : *this) {
      if (keep(k)) {
        chars += k.size() + v.size();
        ++entries;
      }
    }
    StringMap out;
    if (entries == 0) {
      return out;
    }
    out.reserve(chars, entries);
    for (const auto& [k, v] : *this) {
      if (keep(k)) {
        out.append(k, v);  // in key order already: normalize() only checks
      }
    }
    out.normalize();
    return out;
  }
  // Bytes of heap this map holds (for memory accounting and tests).
  [[nodiscard]] std::size_t heapBytes() const;

  friend bool operator==(const StringMap& a, const StringMap& b);

 private:
  [[nodiscard]] value_type at(std::size_t i) const {
    const Entry& e = entries_[i];
    const std::string_view all(chars_);
    return {all.substr(e.key_off, e.key_len), all.substr(e.value_off, e.value_len)};
  }
  [[nodiscard]] std::string_view keyOf(const Entry& e) const {
    return std::string_view(chars_).substr(e.key_off, e.key_len);
  }
  // Appends a then b to the text; returns their offsets.
  std::pair<uint32_t, uint32_t> put(std::string_view a, std::string_view b);
  // Drops the text no entry refers to any more, once it outweighs the live text.
  void maybeCompact();

  std::string chars_{};
  std::vector<Entry> entries_{};
  std::size_t garbage_ = 0;  // bytes of chars_ no entry refers to
};

}  // namespace colod::nri
