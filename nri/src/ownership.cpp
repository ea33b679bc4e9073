// SPDX-License-Identifier: Apache-2.0
#include "colod/nri/ownership.h"

#include <array>
#include <utility>

namespace colod::nri {
namespace {

constexpr std::array<std::pair<Field, std::string_view>, 10> kNames{{
    {Field::Annotations, "Annotations"},
    {Field::MemLimit, "MemLimit"},
    {Field::CPUShares, "CPUShares"},
    {Field::CPUQuota, "CPUQuota"},
    {Field::CPUPeriod, "CPUPeriod"},
    {Field::CPUSetCPUs, "CPUSetCPUs"},
    {Field::CPUSetMems, "CPUSetMems"},
    {Field::PidsLimit, "PidsLimit"},
    {Field::CgroupsUnified, "CgroupsUnified"},
    {Field::OomScoreAdj, "OomScoreAdj"},
}};

// Reads a Go %q string at text[pos] ('"' expected); returns the content and moves pos past it.
// Plugin names are [A-Za-z0-9_.+-]+, so escapes are not expected; one is kept verbatim.
std::optional<std::string> quoted(std::string_view text, std::size_t& pos) {
  if (pos >= text.size() || text[pos] != '"') {
    return std::nullopt;
  }
  const auto end = text.find('"', pos + 1);
  if (end == std::string_view::npos) {
    return std::nullopt;
  }
  std::string out(text.substr(pos + 1, end - pos - 1));
  pos = end + 1;
  return out;
}

bool consume(std::string_view text, std::size_t& pos, std::string_view lit) {
  if (text.substr(pos, lit.size()) != lit) {
    return false;
  }
  pos += lit.size();
  return true;
}

bool isSelf(std::string_view who, std::string_view name, std::string_view label) {
  return who == label || who == name;
}

}  // namespace

std::string fieldName(int32_t field) {
  for (const auto& [f, n] : kNames) {
    if (static_cast<int32_t>(f) == field) {
      return std::string(n);
    }
  }
  return "Field(" + std::to_string(field) + ")";
}

std::optional<OwnershipConflict> parseConflictMessage(std::string_view text,
                                                      std::string_view self_name,
                                                      std::string_view self_label) {
  // The conflict may be wrapped ("NRI CreateContainer failed: plugins ..."): find its start.
  const auto start = text.find("plugins \"");
  if (start == std::string_view::npos) {
    return std::nullopt;
  }
  std::size_t pos = start + 8;
  auto a = quoted(text, pos);
  if (!a || !consume(text, pos, " and ")) {
    return std::nullopt;
  }
  auto b = quoted(text, pos);
  if (!b || !consume(text, pos, " both tried to set ")) {
    return std::nullopt;
  }
  OwnershipConflict c;
  c.source = "runtime";
  c.message = std::string(text.substr(start));
  std::string_view rest = text.substr(pos);
  // <= v0.9 wording ends in " for container <id>"; v0.10+ stops after the field.
  if (const auto fc = rest.find(" for container "); fc != std::string_view::npos) {
    c.container_id = std::string(rest.substr(fc + 15));
    if (const auto sp = c.container_id.find_first_of(" :,"); sp != std::string::npos) {
      c.container_id.resize(sp);
    }
    rest = rest.substr(0, fc);
  }
  if (const auto cut = rest.find_first_of(":\n"); cut != std::string_view::npos) {
    rest = rest.substr(0, cut);  // a wrapper may append ": <more>"
  }
  c.field = std::string(rest);
  c.other_plugin = isSelf(*b, self_name, self_label) ? *a : *b;
  return c;
}

std::vector<Field> fieldsSet(const LinuxResources& r) {
  std::vector<Field> out;
  if (r.cpu.shares) {
    out.push_back(Field::CPUShares);
  }
  if (r.cpu.quota) {
    out.push_back(Field::CPUQuota);
  }
  if (r.cpu.period) {
    out.push_back(Field::CPUPeriod);
  }
  if (!r.cpu.cpus.empty()) {
    out.push_back(Field::CPUSetCPUs);
  }
  if (!r.cpu.mems.empty()) {
    out.push_back(Field::CPUSetMems);
  }
  if (r.memory.limit) {
    out.push_back(Field::MemLimit);
  }
  if (r.pids_limit) {
    out.push_back(Field::PidsLimit);
  }
  if (!r.unified.empty()) {
    out.push_back(Field::CgroupsUnified);
  }
  return out;
}

void OwnerTable::record(ContainerOwners owners) {
  std::lock_guard lock(mu_);
  std::string id = owners.container_id;
  by_id_.insert_or_assign(std::move(id), std::move(owners));
}

void OwnerTable::forget(std::string_view container_id) {
  std::lock_guard lock(mu_);
  if (auto it = by_id_.find(container_id); it != by_id_.end()) {
    by_id_.erase(it);
  }
}

void OwnerTable::clear() {
  std::lock_guard lock(mu_);
  by_id_.clear();
}

std::optional<std::string> OwnerTable::owner(std::string_view container_id, Field f) const {
  std::lock_guard lock(mu_);
  auto it = by_id_.find(container_id);
  if (it == by_id_.end()) {
    return std::nullopt;
  }
  auto o = it->second.simple.find(static_cast<int32_t>(f));
  if (o == it->second.simple.end()) {
    return std::nullopt;
  }
  return o->second;
}

std::optional<ContainerOwners> OwnerTable::owners(std::string_view container_id) const {
  std::lock_guard lock(mu_);
  auto it = by_id_.find(container_id);
  if (it == by_id_.end()) {
    return std::nullopt;
  }
  return it->second;
}

std::vector<OwnershipConflict> OwnerTable::stripOwnedByOthers(ContainerUpdate& u,
                                                              std::string_view self_name,
                                                              std::string_view self_label) const {
  std::vector<OwnershipConflict> out;
  std::lock_guard lock(mu_);
  auto it = by_id_.find(u.container_id);
  if (it == by_id_.end()) {
    return out;
  }
  const ContainerOwners& own = it->second;
  auto note = [&](Field f, const std::string& other, const std::string& key) {
    std::string field = fieldName(static_cast<int32_t>(f));
    if (!key.empty()) {
      field += " (" + key + ")";
    }
    out.push_back({.container_id = u.container_id,
                   .field = field,
                   .other_plugin = other,
                   .source = "owned",
                   .message = "left out of our update: " + field + " of container " +
                              u.container_id + " was set by plugin " + other});
  };
  auto r = u.resources;  // copy: StringMap keys are views into the map being edited
  for (Field f : fieldsSet(r)) {
    if (f == Field::CgroupsUnified) {
      auto c = own.compound.find(static_cast<int32_t>(f));
      if (c == own.compound.end()) {
        continue;
      }
      for (const auto& [k, v] : r.unified) {
        auto o = c->second.find(std::string(k));
        if (o != c->second.end() && !isSelf(o->second, self_name, self_label)) {
          u.resources.unified.erase(k);
          note(f, o->second, std::string(k));
        }
      }
      continue;
    }
    auto o = own.simple.find(static_cast<int32_t>(f));
    if (o == own.simple.end() || isSelf(o->second, self_name, self_label)) {
      continue;
    }
    switch (f) {
      case Field::CPUShares:
        u.resources.cpu.shares.reset();
        break;
      case Field::CPUQuota:
        u.resources.cpu.quota.reset();
        break;
      case Field::CPUPeriod:
        u.resources.cpu.period.reset();
        break;
      case Field::CPUSetCPUs:
        u.resources.cpu.cpus.clear();
        break;
      case Field::CPUSetMems:
        u.resources.cpu.mems.clear();
        break;
      case Field::MemLimit:
        u.resources.memory.limit.reset();
        break;
      case Field::PidsLimit:
        u.resources.pids_limit.reset();
        break;
      default:
        break;
    }
    note(f, o->second, "");
  }
  return out;
}

}  // namespace colod::nri
