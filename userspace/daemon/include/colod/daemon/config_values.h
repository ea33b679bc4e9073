// SPDX-License-Identifier: Apache-2.0
// The effective configuration as leaf settings, each with where its value comes from: the
// built-in default, the file, or a colod command-line flag (`coloctl config show`). Pure: built
// from the running Config (its settings and the text it was loaded from) and the overrides, so
// it is tested from strings. Part of colod::daemon_config (no BPF, no I/O).
#pragma once

#include <string>
#include <vector>

#include "colod/daemon/config.h"

namespace colod::daemon {

enum class ValueSource { Default, File, CommandLine };

struct EffectiveValue {
  std::string key;    // dotted path as written in the file: "daemon.interval_ms"
  std::string value;  // YAML text (flow style for lists and maps)
  ValueSource source = ValueSource::Default;
  std::string flag;  // CommandLine: the flag that set it ("--mode")
  // Why the value is not simply the file's or the default: "the file says X; takes effect after
  // a restart" for a restart-only setting changed by a reload, or "implied by daemon.mode:
  // dry-run". "" otherwise.
  std::string note;

  friend bool operator==(const EffectiveValue&, const EffectiveValue&) = default;
};

// Every leaf setting colod runs with: daemon.* in the order of DaemonSettings, then policy.* in
// the order of the built-in defaults (keys only the file has, such as tier_thresholds.ls.*,
// after their siblings). `running` is the configuration in force (after reloads); its `text` is
// the file it came from ("" = built-in defaults).
std::vector<EffectiveValue> effectiveValues(const Config& running,
                                            const SettingsOverrides& overrides);

}  // namespace colod::daemon
