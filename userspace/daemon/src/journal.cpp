// SPDX-License-Identifier: Apache-2.0
#include "colod/daemon/journal.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <deque>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "colod/base/unique_fd.h"
#include "colod/daemon/convert.h"
#include "colod/policy/resources_json.h"
#include "colod/policy/tier.h"

namespace colod::daemon {

using nlohmann::json;

namespace {

const policy::Lever kLevers[] = {policy::Lever::CpuShares, policy::Lever::Cpuset,
                                 policy::Lever::CpuQuota, policy::Lever::MemoryLimit};

void mergeSet(policy::Resources& into, const policy::Resources& from) {
  if (from.cpu_shares) {
    into.cpu_shares = from.cpu_shares;
  }
  if (from.cpu_quota) {
    into.cpu_quota = from.cpu_quota;
  }
  if (from.cpu_period) {
    into.cpu_period = from.cpu_period;
  }
  if (from.cpuset_cpus) {
    into.cpuset_cpus = from.cpuset_cpus;
  }
  if (from.cpuset_mems) {
    into.cpuset_mems = from.cpuset_mems;
  }
  if (from.memory_limit) {
    into.memory_limit = from.memory_limit;
  }
  for (const auto& [k, v] : from.unified) {
    into.unified[k] = v;
  }
}

}  // namespace

Journal journalOf(const std::vector<ReconcileEntry>& entries,
                  const std::vector<policy::AppliedAction>& applied) {
  // By target, in the engine's order: a scan of every restriction per entry was entries x
  // restrictions string compares (a million at 1000 restricted containers).
  std::unordered_map<std::string_view, std::vector<const policy::AppliedAction*>> by_target;
  for (const auto& a : applied) {
    by_target[a.target_id].push_back(&a);
  }
  Journal j;
  j.containers.reserve(entries.size());
  for (const auto& e : entries) {
    JournalContainer c;
    c.state.id = e.id;
    c.state.name = e.name;
    c.state.base = e.base;
    c.state.overlay = e.overlay;
    c.state.why = e.why;
    c.state.sent = e.sent;
    if (auto it = by_target.find(e.id); it != by_target.end()) {
      for (const policy::AppliedAction* a : it->second) {
        c.actions.push_back(*a);
      }
    }
    j.containers.push_back(std::move(c));
  }
  return j;
}

namespace {

// One container's line of the journal (compact JSON, no newline inside).
std::string encodeContainer(const JournalContainer& c) {
  json actions = json::array();
  for (const auto& a : c.actions) {
    json action = {{"victim_id", a.victim_id},
                   {"lever", std::string(policy::leverName(a.lever))},
                   {"rung", a.rung},
                   {"applied", policy::encodeResourcesJson(a.applied_values)}};
    if (a.uncontrolled_cap) {
      // Written only when set: journals without it read as before (a plain step).
      action["uncontrolled_cap"] = true;
    }
    actions.push_back(std::move(action));
  }
  const json doc = {{"id", c.state.id},
                    {"name", c.state.name},
                    {"base", policy::encodeResourcesJson(c.state.base)},
                    {"overlay", policy::encodeResourcesJson(c.state.overlay)},
                    {"why", c.state.why},
                    {"sent", c.state.sent},
                    {"actions", actions}};
  return doc.dump();
}

// The document around the containers' lines: the head, then each line (comma-separated), then
// the tail. `line(i)` is the i-th container's text.
template <typename Line>
void assembleJournal(std::string& out, std::size_t containers, Line line) {
  out += R"({"version":)";
  out += std::to_string(kJournalVersion);
  out += R"(,"containers":[)";
  for (std::size_t i = 0; i < containers; ++i) {
    out += i == 0 ? "\n" : ",\n";
    out += line(i);
  }
  out += "\n]}\n";
}

}  // namespace

std::string encodeJournal(const Journal& journal) {
  std::string out;
  assembleJournal(out, journal.containers.size(),
                  [&](std::size_t i) { return encodeContainer(journal.containers[i]); });
  return out;
}

const std::string& JournalEncoder::encode(const Journal& journal) {
  ++generation_;
  encoded_last_ = 0;
  std::vector<const std::string*> lines;
  lines.reserve(journal.containers.size());
  std::deque<std::string> repeated;  // an id listed twice (never by the actuator): its own text
  for (const auto& c : journal.containers) {
    auto [it, fresh] = kept_.try_emplace(c.state.id);
    Kept& k = it->second;
    if (!fresh && k.generation == generation_) {
      lines.push_back(&repeated.emplace_back(encodeContainer(c)));
      ++encoded_last_;
      continue;
    }
    if (fresh || k.container != c) {
      k.container = c;
      k.text = encodeContainer(c);
      ++encoded_last_;
    }
    k.generation = generation_;
    lines.push_back(&k.text);
  }
  std::erase_if(kept_, [this](const auto& kv) { return kv.second.generation != generation_; });
  text_.clear();  // keeps its capacity: the journal's size hardly changes between calls
  assembleJournal(text_, lines.size(),
                  [&](std::size_t i) -> const std::string& { return *lines[i]; });
  return text_;
}

namespace {

Result<policy::Lever> leverOf(const std::string& name) {
  for (auto l : kLevers) {
    if (policy::leverName(l) == name) {
      return l;
    }
  }
  return COLOD_ERR(EINVAL, "journal: unknown lever '", name, "'");
}

// One restriction as both versions write it: lever, rung, victim and applied values (v1 adds
// the stored original, read by its caller).
Result<policy::AppliedAction> decodeAction(const json& a, const std::string& target_id) {
  auto lever = leverOf(a.at("lever").get<std::string>());
  if (!lever) {
    return std::move(lever).error();
  }
  auto applied = policy::decodeResourcesJson(a.at("applied"), "journal: applied");
  if (!applied) {
    return std::move(applied).error();
  }
  return policy::AppliedAction{.target_id = target_id,
                               .victim_id = a.value("victim_id", ""),
                               .lever = *lever,
                               .rung = a.value("rung", 0),
                               .applied_values = std::move(applied).value(),
                               .original_values = {},
                               .uncontrolled_cap = a.value("uncontrolled_cap", false)};
}

// Version 1: one entry per restriction, with the original stored when it was first applied.
// Converted per container: the base is the stored original (what a release returns to), the
// overlay the applied values unless a restore was already in flight.
Result<Journal> decodeV1(const json& doc) {
  Journal out;
  for (const auto& e : doc.at("entries")) {
    const auto id = e.at("target_id").get<std::string>();
    if (id.empty()) {
      return COLOD_ERR(EINVAL, "journal: entry without target_id");
    }
    auto action = decodeAction(e, id);
    if (!action) {
      return std::move(action).error();
    }
    auto original = policy::decodeResourcesJson(e.at("original"), "journal: original");
    if (!original) {
      return std::move(original).error();
    }
    auto it = std::find_if(out.containers.begin(), out.containers.end(),
                           [&](const JournalContainer& c) { return c.state.id == id; });
    if (it == out.containers.end()) {
      out.containers.push_back({});
      it = out.containers.end() - 1;
      it->state.id = id;
      it->state.name = e.value("target_name", "");
    }
    mergeSet(it->state.base, completeOriginals(*original, action->applied_values));
    if (!e.value("restore_pending", false)) {
      mergeSet(it->state.overlay, action->applied_values);
      action->original_values = std::move(original).value();
      it->actions.push_back(std::move(action).value());
    }
  }
  return out;
}

}  // namespace

Result<Journal> decodeJournal(std::string_view text) {
  Journal out;
  try {
    const json doc = json::parse(text);
    if (!doc.is_object()) {
      return COLOD_ERR(EINVAL, "journal: not a JSON object");
    }
    const int version = doc.value("version", 0);
    if (version == 1) {
      return decodeV1(doc);
    }
    if (version != kJournalVersion) {
      return COLOD_ERR(EINVAL, "journal: missing or unsupported version ", version, " (want ",
                       kJournalVersion, ")");
    }
    for (const auto& c : doc.at("containers")) {
      JournalContainer jc;
      jc.state.id = c.at("id").get<std::string>();
      if (jc.state.id.empty()) {
        return COLOD_ERR(EINVAL, "journal: container without id");
      }
      jc.state.name = c.value("name", "");
      jc.state.why = c.value("why", "");
      auto base = policy::decodeResourcesJson(c.at("base"), "journal: base");
      if (!base) {
        return std::move(base).error();
      }
      auto overlay = policy::decodeResourcesJson(c.at("overlay"), "journal: overlay");
      if (!overlay) {
        return std::move(overlay).error();
      }
      jc.state.base = std::move(base).value();
      jc.state.overlay = std::move(overlay).value();
      if (auto it = c.find("sent"); it != c.end()) {
        if (!it->is_object()) {
          return COLOD_ERR(EINVAL, "journal: sent: not an object");
        }
        for (const auto& [field, values] : it->items()) {
          if (!values.is_array() || values.size() > 64) {
            return COLOD_ERR(EINVAL, "journal: sent.", field, ": not a short array");
          }
          for (const auto& v : values) {
            jc.state.sent[field].push_back(v.get<std::string>());
          }
        }
      }
      for (const auto& a : c.value("actions", json::array())) {
        auto action = decodeAction(a, jc.state.id);
        if (!action) {
          return std::move(action).error();
        }
        jc.actions.push_back(std::move(action).value());
      }
      out.containers.push_back(std::move(jc));
    }
  } catch (const json::exception& e) {
    return COLOD_ERR(EINVAL, "journal: ", e.what());
  }
  return out;
}

namespace {

// The rename of a file is durable only once its directory is synced.
Result<void> syncParentDir(const std::filesystem::path& p) {
  const std::string dir = p.has_parent_path() ? p.parent_path().string() : ".";
  UniqueFd dfd(::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (!dfd) {
    return COLOD_ERR(errno, "opening ", dir);
  }
  if (::fsync(dfd.get()) != 0) {
    return COLOD_ERR(errno, "fsync ", dir);
  }
  return {};
}

}  // namespace

Result<void> checkJournalBound(const Journal& journal, uint32_t max_entries) {
  if (journal.containers.size() > max_entries) {
    return COLOD_ERR(E2BIG, "journal has ", journal.containers.size(), " containers, bound is ",
                     max_entries);
  }
  return {};
}

namespace {

Result<void> replaceJournal(const std::string& path, std::string_view data) {
  const std::filesystem::path p(path);
  std::error_code ec;
  if (p.has_parent_path()) {
    std::filesystem::create_directories(p.parent_path(), ec);
    if (ec) {
      return COLOD_ERR(ec.value(), "creating ", p.parent_path().string());
    }
  }
  const std::string tmp = path + ".tmp";
  {
    UniqueFd fd(::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600));
    if (!fd) {
      return COLOD_ERR(errno, "opening ", tmp);
    }
    std::size_t off = 0;
    while (off < data.size()) {
      const ssize_t n = ::write(fd.get(), data.data() + off, data.size() - off);
      if (n < 0) {
        if (errno == EINTR) {
          continue;
        }
        return COLOD_ERR(errno, "writing ", tmp);
      }
      off += static_cast<std::size_t>(n);
    }
    if (::fsync(fd.get()) != 0) {
      return COLOD_ERR(errno, "fsync ", tmp);
    }
  }
  if (::rename(tmp.c_str(), path.c_str()) != 0) {
    return COLOD_ERR(errno, "renaming ", tmp, " to ", path);
  }
  return syncParentDir(p);
}

}  // namespace

Result<void> writeJournal(const std::string& path, const Journal& journal, uint32_t max_entries) {
  if (auto r = checkJournalBound(journal, max_entries); !r) {
    return r;
  }
  return replaceJournal(path, encodeJournal(journal));
}

Result<void> writeJournal(const std::string& path,
                          const Journal& journal,
                          uint32_t max_entries,
                          JournalEncoder& encoder) {
  if (auto r = checkJournalBound(journal, max_entries); !r) {
    return r;
  }
  return replaceJournal(path, encoder.encode(journal));
}

Result<Journal> readJournal(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    if (errno == ENOENT) {
      return Journal{};
    }
    return COLOD_ERR(errno, "reading journal ", path);
  }
  std::ostringstream ss;
  ss << in.rdbuf();
  auto j = decodeJournal(ss.str());
  if (!j) {
    return std::move(j).error().wrap("journal " + path);
  }
  return j;
}

pid_t parseLockPid(std::string_view text) {
  pid_t pid = 0;
  const char* b = text.data();
  const char* e = b + text.size();
  while (b < e && (*b == ' ' || *b == '\n')) {
    ++b;
  }
  auto [ptr, ec] = std::from_chars(b, e, pid);
  return ec == std::errc() && pid > 0 ? pid : 0;
}

Result<UniqueFd> openJournalFile(const std::string& path, std::string_view what) {
  const std::filesystem::path p(path);
  std::error_code ec;
  if (p.has_parent_path()) {
    std::filesystem::create_directories(p.parent_path(), ec);
    if (ec) {
      return COLOD_ERR(ec.value(), "creating ", p.parent_path().string());
    }
  }
  UniqueFd fd(::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600));
  if (!fd) {
    return COLOD_ERR(errno, "opening ", what, " ", path);
  }
  return fd;
}

Result<JournalLock> JournalLock::acquire(const std::string& journal_path) {
  const std::string path = journal_path + ".lock";
  auto opened = openJournalFile(path, "the journal lock");
  if (!opened) {
    return std::move(opened).error();
  }
  UniqueFd fd = std::move(opened).value();
  if (::flock(fd.get(), LOCK_EX | LOCK_NB) != 0) {
    const int err = errno;
    if (err != EWOULDBLOCK) {
      return COLOD_ERR(err, "locking ", path);
    }
    char buf[32] = {};
    const ssize_t n = ::pread(fd.get(), buf, sizeof buf - 1, 0);
    const pid_t holder = n > 0 ? parseLockPid(std::string_view(buf, static_cast<size_t>(n))) : 0;
    return COLOD_ERR(EBUSY, "journal ", journal_path, " is in use by colod pid ",
                     holder > 0 ? std::to_string(holder) : std::string("(unknown)"),
                     ": another colod holds ", path,
                     " (two colods on one journal would undo each other's restrictions)");
  }
  const std::string pid = std::to_string(::getpid()) + "\n";
  if (::ftruncate(fd.get(), 0) != 0 ||
      ::pwrite(fd.get(), pid.data(), pid.size(), 0) != static_cast<ssize_t>(pid.size())) {
    return COLOD_ERR(errno, "writing the pid to ", path);
  }
  return JournalLock(std::move(fd), path);
}

}  // namespace colod::daemon
