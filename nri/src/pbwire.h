// SPDX-License-Identifier: Apache-2.0
// Minimal protobuf wire-format reader/writer for the ttrpc envelope (private to wire/ttrpc).
// Bounds-first: every read checks the remaining length; malformed input is an error, never UB.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string_view>
#include <vector>

namespace colod::nri::wire::pb {

enum WireType : uint32_t {
  kVarint = 0,
  kFixed64 = 1,
  kLen = 2,
  kStartGroup = 3,
  kEndGroup = 4,
  kFixed32 = 5
};
inline constexpr int kMaxGroupDepth = 100;  // protobuf's default recursion limit

class Reader {
 public:
  explicit Reader(std::span<const std::byte> in) : in_(in) {}
  [[nodiscard]] bool done() const { return in_.empty(); }

  std::optional<uint64_t> varint() {
    // Fast path: most tags, lengths and small values are one byte.
    if (!in_.empty() && (std::to_integer<uint32_t>(in_[0]) & 0x80U) == 0) {
      const auto b = std::to_integer<uint64_t>(in_[0]);
      in_ = in_.subspan(1);
      return b;
    }
    uint64_t v = 0;
    for (int shift = 0; shift < 64; shift += 7) {
      if (in_.empty()) {
        return std::nullopt;
      }
      auto b = std::to_integer<uint64_t>(in_[0]);
      in_ = in_.subspan(1);
      v |= (b & 0x7F) << shift;
      if ((b & 0x80) == 0) {
        return v;
      }
    }
    return std::nullopt;  // more than 10 bytes: malformed
  }
  // A field tag, read the way protobuf's parser does (ReadTag): at most 5 bytes, accumulated in
  // 32 bits so the high bits of a 5th byte are dropped rather than rejected. The fast NRI decoder
  // must accept exactly what the reference decoder accepts (the fuzzer checks), and a tag
  // needing more than 5 bytes is malformed there too.
  std::optional<uint32_t> tag() {
    if (!in_.empty() && (std::to_integer<uint32_t>(in_[0]) & 0x80U) == 0) {
      const auto b = std::to_integer<uint32_t>(in_[0]);
      in_ = in_.subspan(1);
      return b;
    }
    uint32_t v = 0;
    for (int i = 0; i < 5; ++i) {
      if (in_.empty()) {
        return std::nullopt;
      }
      auto b = std::to_integer<uint32_t>(in_[0]);
      in_ = in_.subspan(1);
      v |= (b & 0x7FU) << (7 * i);  // bits past 32 fall off, as in protobuf
      if ((b & 0x80U) == 0) {
        return v;
      }
    }
    return std::nullopt;
  }
  std::optional<std::span<const std::byte>> bytes() {
    auto len = varint();
    if (!len || *len > in_.size()) {
      return std::nullopt;
    }
    auto out = in_.first(static_cast<std::size_t>(*len));
    in_ = in_.subspan(static_cast<std::size_t>(*len));
    return out;
  }
  // Skips a field of the given wire type. False when malformed or a group (never used by ttrpc).
  bool skip(uint32_t wire_type) {
    switch (wire_type) {
      case kVarint:
        return varint().has_value();
      case kFixed64:
        return advance(8);
      case kLen:
        return bytes().has_value();
      case kFixed32:
        return advance(4);
      default:
        return false;
    }
  }
  // Like skip(), but also skips a (deprecated) group started by field `field`, as protobuf's
  // parser does for unknown fields: everything up to the matching end-group tag, nesting at most
  // `depth` levels. False when malformed, unterminated or nested too deeply.
  bool skipField(uint64_t field, uint32_t wire_type, int depth = kMaxGroupDepth) {
    if (wire_type != kStartGroup) {
      return skip(wire_type);
    }
    if (depth <= 0) {
      return false;
    }
    while (!in_.empty()) {
      auto tag = this->tag();
      if (!tag) {
        return false;
      }
      auto f = *tag >> 3;
      auto wt = static_cast<uint32_t>(*tag & 7);
      if (f == 0) {
        return false;
      }
      if (wt == kEndGroup) {
        return f == field;
      }
      if (!skipField(f, wt, depth - 1)) {
        return false;
      }
    }
    return false;  // no end-group tag
  }
  // The unread rest.
  [[nodiscard]] std::span<const std::byte> rest() const { return in_; }

 private:
  bool advance(std::size_t n) {
    if (in_.size() < n) {
      return false;
    }
    in_ = in_.subspan(n);
    return true;
  }
  std::span<const std::byte> in_;
};

// Writes v as a varint at `out`, which must have room for kMaxVarint bytes; returns its length.
inline constexpr std::size_t kMaxVarint = 10;
inline std::size_t writeVarint(std::byte* out, uint64_t v) {
  std::size_t n = 0;
  while (v >= 0x80) {
    out[n++] = static_cast<std::byte>((v & 0x7F) | 0x80);
    v >>= 7;
  }
  out[n++] = static_cast<std::byte>(v);
  return n;
}
inline void putVarint(std::vector<std::byte>& out, uint64_t v) {
  std::byte buf[kMaxVarint];
  out.insert(out.end(), buf, buf + writeVarint(buf, v));
}
inline void putTag(std::vector<std::byte>& out, uint32_t field, WireType wt) {
  putVarint(out, (static_cast<uint64_t>(field) << 3) | wt);
}
inline void putBytes(std::vector<std::byte>& out, uint32_t field, std::span<const std::byte> b) {
  putTag(out, field, kLen);
  putVarint(out, b.size());
  out.insert(out.end(), b.begin(), b.end());
}
inline void putString(std::vector<std::byte>& out, uint32_t field, std::string_view s) {
  putBytes(out, field, std::as_bytes(std::span(s.data(), s.size())));
}
inline std::size_t varintSize(uint64_t v) {
  std::size_t n = 1;
  while (v >= 0x80) {
    v >>= 7;
    ++n;
  }
  return n;
}

}  // namespace colod::nri::wire::pb
