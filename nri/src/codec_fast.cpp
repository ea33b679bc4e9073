// SPDX-License-Identifier: Apache-2.0
// proto/, hot path: a hand-written decoder of the NRI requests the runtime sends most (see
// codec_internal.h for the contract). Field numbers are those of nri/proto/api.proto.
//
// Semantics mirrored from protobuf's parser, so the result equals the reference decoder's:
// a known field number with an unexpected wire type is an unknown field (skipped); a repeated
// occurrence of a singular scalar/string overwrites, of a message merges (we decode into the same
// struct again), of a repeated field appends; map entries insert-or-assign in wire order; a
// field number 0, a tag over 32 bits, wire types 6/7, a stray end-group tag, a length past the
// end or an over-long varint make the whole message malformed (EPROTO). Groups are skipped.
#include <cerrno>
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>

#include "codec_internal.h"
#include "pbwire.h"

namespace colod::nri::codec::fast {

namespace {

using Span = std::span<const std::byte>;
using wire::pb::Reader;
namespace wt = wire::pb;

// Outcome of one field visitor call.
enum class Field { Handled, Skip, Malformed };

// Walks the fields of one message, calling visit(field, wire_type, reader) for each; the visitor
// consumes the value (Handled), leaves it for skipping (Skip) or reports it broken.
template <typename Visit>
bool forEachField(Span in, Visit&& visit) {
  Reader r(in);
  while (!r.done()) {
    auto tag = r.tag();
    if (!tag) {
      return false;
    }
    const auto field = static_cast<uint32_t>(*tag >> 3);
    const auto type = static_cast<uint32_t>(*tag & 7);
    if (field == 0 || type == wt::kEndGroup || type > wt::kFixed32) {
      return false;
    }
    switch (visit(field, type, r)) {
      case Field::Handled:
        break;
      case Field::Skip:
        if (!r.skipField(field, type)) {
          return false;
        }
        break;
      case Field::Malformed:
        return false;
    }
  }
  return true;
}

Field readString(uint32_t type, Reader& r, std::string& out) {
  if (type != wt::kLen) {
    return Field::Skip;
  }
  auto b = r.bytes();
  if (!b) {
    return Field::Malformed;
  }
  out.assign(reinterpret_cast<const char*>(b->data()), b->size());  // NOLINT: bytes -> chars
  return Field::Handled;
}

template <typename Int>
Field readVarint(uint32_t type, Reader& r, Int& out) {
  if (type != wt::kVarint) {
    return Field::Skip;
  }
  auto v = r.varint();
  if (!v) {
    return Field::Malformed;
  }
  // Protobuf's rules: int32/uint32 keep the low 32 bits, int64 reinterprets, bool is != 0.
  if constexpr (std::is_same_v<Int, bool>) {
    out = *v != 0;
  } else {
    out = static_cast<Int>(*v);
  }
  return Field::Handled;
}

// A sub-message: decode(bytes) -> bool.
template <typename Decode>
Field readMessage(uint32_t type, Reader& r, Decode&& decode) {
  if (type != wt::kLen) {
    return Field::Skip;
  }
  auto b = r.bytes();
  if (!b) {
    return Field::Malformed;
  }
  return decode(*b) ? Field::Handled : Field::Malformed;
}

// Optional{Int64,UInt64,Int,Bool} { <scalar> value = 1; }: presence of the wrapper = set.
template <typename Int>
Field readOptional(uint32_t type, Reader& r, std::optional<Int>& out) {
  return readMessage(type, r, [&](Span b) {
    if (!out) {
      out = Int{};
    }
    return forEachField(b, [&](uint32_t f, uint32_t t, Reader& fr) {
      return f == 1 ? readVarint(t, fr, *out) : Field::Skip;
    });
  });
}

Field readOptionalString(uint32_t type, Reader& r, std::optional<std::string>& out) {
  return readMessage(type, r, [&](Span b) {
    if (!out) {
      out.emplace();
    }
    return forEachField(b, [&](uint32_t f, uint32_t t, Reader& fr) {
      return f == 1 ? readString(t, fr, *out) : Field::Skip;
    });
  });
}

// Map entries are not inserted one by one: each is recorded as views into the input, and the
// message that owns the map builds it when the message is complete (MapBuild), with one exact
// allocation per map and one sort. Entries of nested messages are stacked after those of their
// parent and consumed when the nested message completes, so one vector serves every depth.
struct PendingEntry {
  StringMap* map;
  Span key;
  Span value;
};
thread_local std::vector<PendingEntry> t_pending;  // NOLINT: per-thread scratch, reused
// Past this many entries the scratch is released after the outermost message: an adversarial
// message must not pin its peak for the life of the thread.
constexpr std::size_t kPendingKeep = 4096;

class MapBuild {
 public:
  MapBuild() : base_(t_pending.size()) {}
  ~MapBuild() {
    t_pending.resize(base_);  // also on the error paths
    if (base_ == 0 && t_pending.capacity() > kPendingKeep) {
      std::vector<PendingEntry>().swap(t_pending);
    }
  }
  MapBuild(const MapBuild&) = delete;
  MapBuild& operator=(const MapBuild&) = delete;
  MapBuild(MapBuild&&) = delete;
  MapBuild& operator=(MapBuild&&) = delete;

  // Builds `maps` from the entries recorded since construction (merging into what they already
  // hold: a repeated message field). A later duplicate key wins (StringMap::normalize).
  template <typename... Maps>
  void finish(Maps&... maps) {
    (build(maps), ...);
  }

 private:
  void build(StringMap& map) const {
    std::size_t chars = 0;
    std::size_t entries = 0;
    for (std::size_t i = base_; i < t_pending.size(); ++i) {
      if (t_pending[i].map == &map) {
        chars += t_pending[i].key.size() + t_pending[i].value.size();
        ++entries;
      }
    }
    if (entries == 0) {
      return;
    }
    map.reserve(chars, entries);
    for (std::size_t i = base_; i < t_pending.size(); ++i) {
      if (t_pending[i].map == &map) {
        map.append(text(t_pending[i].key), text(t_pending[i].value));
      }
    }
    map.normalize();
  }
  static std::string_view text(Span b) {
    return {reinterpret_cast<const char*>(b.data()), b.size()};  // NOLINT: bytes -> chars
  }
  std::size_t base_;
};

// StringEntry { string key = 1; string value = 2; }, recorded for its map's MapBuild.
Field readEntry(uint32_t type, Reader& r, StringMap& out) {
  return readMessage(type, r, [&](Span b) {
    Span key{};
    Span value{};
    bool ok = forEachField(b, [&](uint32_t f, uint32_t t, Reader& fr) {
      if ((f == 1 || f == 2) && t == wt::kLen) {
        auto s = fr.bytes();
        if (!s) {
          return Field::Malformed;
        }
        (f == 1 ? key : value) = *s;
        return Field::Handled;
      }
      return Field::Skip;
    });
    if (!ok) {
      return false;
    }
    t_pending.push_back({&out, key, value});
    return true;
  });
}

Field readRepeatedString(uint32_t type, Reader& r, std::vector<std::string>& out) {
  if (type != wt::kLen) {
    return Field::Skip;
  }
  auto b = r.bytes();
  if (!b) {
    return Field::Malformed;
  }
  out.emplace_back(reinterpret_cast<const char*>(b->data()), b->size());  // NOLINT
  return Field::Handled;
}

bool decodeMemory(Span in, MemoryResources& m) {
  return forEachField(in, [&](uint32_t f, uint32_t t, Reader& r) {
    switch (f) {
      case 1: return readOptional(t, r, m.limit);
      case 2: return readOptional(t, r, m.reservation);
      case 3: return readOptional(t, r, m.swap);
      case 4: return readOptional(t, r, m.kernel);
      case 5: return readOptional(t, r, m.kernel_tcp);
      case 6: return readOptional(t, r, m.swappiness);
      case 7: return readOptional(t, r, m.disable_oom_killer);
      case 8: return readOptional(t, r, m.use_hierarchy);
      default: return Field::Skip;
    }
  });
}

bool decodeCpu(Span in, CpuResources& c) {
  return forEachField(in, [&](uint32_t f, uint32_t t, Reader& r) {
    switch (f) {
      case 1: return readOptional(t, r, c.shares);
      case 2: return readOptional(t, r, c.quota);
      case 3: return readOptional(t, r, c.period);
      case 4: return readOptional(t, r, c.realtime_runtime);
      case 5: return readOptional(t, r, c.realtime_period);
      case 6: return readString(t, r, c.cpus);
      case 7: return readString(t, r, c.mems);
      default: return Field::Skip;
    }
  });
}

bool decodeResources(Span in, LinuxResources& res) {
  MapBuild maps;
  const bool ok = forEachField(in, [&](uint32_t f, uint32_t t, Reader& r) {
    switch (f) {
      case 1: return readMessage(t, r, [&](Span b) { return decodeMemory(b, res.memory); });
      case 2: return readMessage(t, r, [&](Span b) { return decodeCpu(b, res.cpu); });
      case 3:
        return readMessage(t, r, [&](Span b) {
          HugepageLimit h;
          if (!forEachField(b, [&](uint32_t hf, uint32_t ht, Reader& hr) {
                if (hf == 1) return readString(ht, hr, h.page_size);
                if (hf == 2) return readVarint(ht, hr, h.limit);
                return Field::Skip;
              })) {
            return false;
          }
          res.hugepage_limits.push_back(std::move(h));
          return true;
        });
      case 4: return readOptionalString(t, r, res.blockio_class);
      case 5: return readOptionalString(t, r, res.rdt_class);
      case 6: return readEntry(t, r, res.unified);
      case 8:  // LinuxPids { int64 limit = 1; }: presence of the message = set
        return readMessage(t, r, [&](Span b) {
          if (!res.pids_limit) {
            res.pids_limit = 0;
          }
          return forEachField(b, [&](uint32_t pf, uint32_t pt, Reader& pr) {
            return pf == 1 ? readVarint(pt, pr, *res.pids_limit) : Field::Skip;
          });
        });
      default: return Field::Skip;  // 7 devices, newer fields
    }
  });
  if (ok) {
    maps.finish(res.unified);
  }
  return ok;
}

bool decodePod(Span in, PodSandbox& p) {
  MapBuild maps;
  const bool ok = forEachField(in, [&](uint32_t f, uint32_t t, Reader& r) {
    switch (f) {
      case 1: return readString(t, r, p.id);
      case 2: return readString(t, r, p.name);
      case 3: return readString(t, r, p.uid);
      case 4: return readString(t, r, p.namespace_name);
      case 5: return readEntry(t, r, p.labels);
      case 6: return readEntry(t, r, p.annotations);
      case 7: return readString(t, r, p.runtime_handler);
      case 8:  // LinuxPodSandbox
        return readMessage(t, r, [&](Span b) {
          return forEachField(b, [&](uint32_t lf, uint32_t lt, Reader& lr) {
            switch (lf) {
              case 1:
                return readMessage(lt, lr, [&](Span x) { return decodeResources(x, p.pod_overhead); });
              case 2:
                return readMessage(lt, lr,
                                   [&](Span x) { return decodeResources(x, p.pod_resources); });
              case 3: return readString(lt, lr, p.cgroup_parent);
              case 4: return readString(lt, lr, p.cgroups_path);
              case 6:
                return readMessage(lt, lr, [&](Span x) { return decodeResources(x, p.resources); });
              default: return Field::Skip;  // 5 namespaces
            }
          });
        });
      case 9: return readVarint(t, r, p.pid);
      case 10: return readRepeatedString(t, r, p.ips);
      default: return Field::Skip;
    }
  });
  if (ok) {
    maps.finish(p.labels, p.annotations);
  }
  return ok;
}

ContainerState stateFrom(int32_t v) {
  return v >= 0 && v <= 4 ? static_cast<ContainerState>(v) : ContainerState::Unknown;
}

bool decodeContainer(Span in, Container& c, const DecodeOptions& opts) {
  MapBuild maps;
  const bool ok = forEachField(in, [&](uint32_t f, uint32_t t, Reader& r) {
    switch (f) {
      case 1: return readString(t, r, c.id);
      case 2: return readString(t, r, c.pod_sandbox_id);
      case 3: return readString(t, r, c.name);
      case 4: {
        int32_t s = 0;
        auto res = readVarint(t, r, s);
        if (res == Field::Handled) {
          c.state = stateFrom(s);
        }
        return res;
      }
      case 5: return readEntry(t, r, c.labels);
      case 6: return readEntry(t, r, c.annotations);
      case 7: return opts.args_env ? readRepeatedString(t, r, c.args) : Field::Skip;
      case 8: return opts.args_env ? readRepeatedString(t, r, c.env) : Field::Skip;
      case 11:  // LinuxContainer
        return readMessage(t, r, [&](Span b) {
          return forEachField(b, [&](uint32_t lf, uint32_t lt, Reader& lr) {
            switch (lf) {
              case 3:
                return readMessage(lt, lr, [&](Span x) { return decodeResources(x, c.resources); });
              case 4: return readOptional(lt, lr, c.oom_score_adj);
              case 5: return readString(lt, lr, c.cgroups_path);
              default: return Field::Skip;  // namespaces, devices, seccomp, ...
            }
          });
        });
      case 12: return readVarint(t, r, c.pid);
      default: return Field::Skip;  // mounts, hooks, rlimits, timestamps, CDI, user, image
    }
  });
  if (ok) {
    maps.finish(c.labels, c.annotations);
  }
  return ok;
}

Error malformed(const char* what) { return COLOD_ERR(EPROTO, "malformed ", what); }

}  // namespace

Result<SynchronizeRequest> decodeSynchronizeRequest(Span in, const DecodeOptions& opts) {
  SynchronizeRequest out;
  // Bounds-first sizing: count the top-level entries before decoding, so the two vectors are
  // allocated once (a pod is >= 2 bytes on the wire, so the counts are bounded by the input).
  std::size_t npods = 0;
  std::size_t nctrs = 0;
  if (!forEachField(in, [&](uint32_t f, uint32_t t, Reader&) {
        if (t == wt::kLen) {
          npods += f == 1 ? 1 : 0;
          nctrs += f == 2 ? 1 : 0;
        }
        return Field::Skip;
      })) {
    return malformed("SynchronizeRequest");
  }
  out.pods.reserve(npods);
  out.containers.reserve(nctrs);
  bool ok = forEachField(in, [&](uint32_t f, uint32_t t, Reader& r) {
    switch (f) {
      case 1:
        return readMessage(t, r, [&](Span b) { return decodePod(b, out.pods.emplace_back()); });
      case 2:
        return readMessage(
            t, r, [&](Span b) { return decodeContainer(b, out.containers.emplace_back(), opts); });
      case 3: return readVarint(t, r, out.more);
      default: return Field::Skip;
    }
  });
  if (!ok) {
    return malformed("SynchronizeRequest");
  }
  return out;
}

Result<PodEvent> decodePodEvent(Span in) {
  PodEvent out;
  if (!forEachField(in, [&](uint32_t f, uint32_t t, Reader& r) {
        return f == 1 ? readMessage(t, r, [&](Span b) { return decodePod(b, out.pod); })
                      : Field::Skip;
      })) {
    return malformed("pod event request");
  }
  return out;
}

Result<ContainerEvent> decodeContainerEvent(Span in, const DecodeOptions& opts) {
  ContainerEvent out;
  if (!forEachField(in, [&](uint32_t f, uint32_t t, Reader& r) {
        if (f == 1) {
          return readMessage(t, r, [&](Span b) { return decodePod(b, out.pod); });
        }
        if (f == 2) {
          return readMessage(t, r, [&](Span b) { return decodeContainer(b, out.container, opts); });
        }
        return Field::Skip;
      })) {
    return malformed("container event request");
  }
  return out;
}

Result<UpdateContainerEvent> decodeUpdateContainerRequest(Span in) {
  UpdateContainerEvent out;
  const DecodeOptions all{};
  if (!forEachField(in, [&](uint32_t f, uint32_t t, Reader& r) {
        switch (f) {
          case 1: return readMessage(t, r, [&](Span b) { return decodePod(b, out.pod); });
          case 2:
            return readMessage(t, r,
                               [&](Span b) { return decodeContainer(b, out.container, all); });
          case 3:
            return readMessage(t, r, [&](Span b) { return decodeResources(b, out.requested); });
          default: return Field::Skip;
        }
      })) {
    return malformed("UpdateContainerRequest");
  }
  return out;
}

Result<StateChange> decodeStateChange(Span in) {
  StateChange out;
  const DecodeOptions all{};
  int32_t event = 0;
  if (!forEachField(in, [&](uint32_t f, uint32_t t, Reader& r) {
        switch (f) {
          case 1: return readVarint(t, r, event);
          case 2: return readMessage(t, r, [&](Span b) { return decodePod(b, out.pod); });
          case 3:
            return readMessage(t, r, [&](Span b) {
              if (!out.container) {
                out.container.emplace();
              }
              return decodeContainer(b, *out.container, all);
            });
          default: return Field::Skip;
        }
      })) {
    return malformed("StateChangeEvent");
  }
  out.event = event >= 1 && event <= 14 ? static_cast<Event>(event) : Event::Unknown;
  return out;
}

}  // namespace colod::nri::codec::fast
