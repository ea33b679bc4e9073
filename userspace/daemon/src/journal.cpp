// SPDX-License-Identifier: Apache-2.0
#include "colod/daemon/journal.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
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

std::string encodeJournal(const Journal& journal) {
  json entries = json::array();
  for (const auto& e : journal.entries) {
    entries.push_back({{"target_id", e.action.target_id},
                       {"target_name", e.target_name},
                       {"victim_id", e.action.victim_id},
                       {"lever", std::string(policy::leverName(e.action.lever))},
                       {"rung", e.action.rung},
                       {"applied", policy::encodeResourcesJson(e.action.applied_values)},
                       {"original", policy::encodeResourcesJson(e.action.original_values)},
                       {"restore_pending", e.restore_pending}});
  }
  json doc = {{"version", kJournalVersion}, {"entries", entries}};
  return doc.dump(1) + "\n";
}

Result<Journal> decodeJournal(std::string_view text) {
  Journal out;
  try {
    const json doc = json::parse(text);
    if (!doc.is_object() || doc.value("version", 0) != kJournalVersion) {
      return COLOD_ERR(EINVAL, "journal: missing or unsupported version (want ", kJournalVersion,
                       ")");
    }
    for (const auto& e : doc.at("entries")) {
      JournalEntry entry;
      entry.action.target_id = e.at("target_id").get<std::string>();
      entry.target_name = e.value("target_name", "");
      entry.action.victim_id = e.value("victim_id", "");
      const auto lever = e.at("lever").get<std::string>();
      bool found = false;
      for (auto l : kLevers) {
        if (policy::leverName(l) == lever) {
          entry.action.lever = l;
          found = true;
        }
      }
      if (!found) {
        return COLOD_ERR(EINVAL, "journal: unknown lever '", lever, "'");
      }
      entry.action.rung = e.value("rung", 0);
      auto applied = policy::decodeResourcesJson(e.at("applied"), "journal: applied");
      if (!applied) {
        return std::move(applied).error();
      }
      auto original = policy::decodeResourcesJson(e.at("original"), "journal: original");
      if (!original) {
        return std::move(original).error();
      }
      entry.action.applied_values = std::move(applied).value();
      entry.action.original_values = std::move(original).value();
      entry.restore_pending = e.value("restore_pending", false);
      if (entry.action.target_id.empty()) {
        return COLOD_ERR(EINVAL, "journal: entry without target_id");
      }
      out.entries.push_back(std::move(entry));
    }
  } catch (const json::exception& e) {
    return COLOD_ERR(EINVAL, "journal: ", e.what());
  }
  return out;
}

Result<void> writeJournal(const std::string& path, const Journal& journal, uint32_t max_entries) {
  if (journal.entries.size() > max_entries) {
    return COLOD_ERR(E2BIG, "journal has ", journal.entries.size(), " entries, bound is ",
                     max_entries);
  }
  const std::filesystem::path p(path);
  std::error_code ec;
  if (p.has_parent_path()) {
    std::filesystem::create_directories(p.parent_path(), ec);
    if (ec) {
      return COLOD_ERR(ec.value(), "creating ", p.parent_path().string());
    }
  }
  const std::string tmp = path + ".tmp";
  const std::string data = encodeJournal(journal);
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
  const std::string dir = p.has_parent_path() ? p.parent_path().string() : ".";
  UniqueFd dfd(::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (dfd) {
    // The rename is durable only once the directory is synced.
    (void)::fsync(dfd.get());
  }
  return {};
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

ReconcilePlan planReconcile(const Journal& journal,
                            const std::set<std::string>& present_ids,
                            Reconcile mode) {
  ReconcilePlan plan;
  for (const auto& e : journal.entries) {
    if (present_ids.count(e.action.target_id) == 0) {
      plan.dropped.push_back(e);
    } else if (mode == Reconcile::Restore || e.restore_pending) {
      // A restore that was in flight is finished, whatever the mode.
      plan.restore.push_back(e);
    } else {
      plan.reseed.push_back(e);
    }
  }
  return plan;
}

policy::Resources originalValuesOf(std::string_view target_id,
                                   const std::vector<JournalEntry>& entries) {
  policy::Resources out;
  for (const auto& e : entries) {
    if (e.action.target_id == target_id) {
      mergeSet(out, completeOriginals(e.action.original_values, e.action.applied_values));
    }
  }
  return out;
}

}  // namespace colod::daemon
