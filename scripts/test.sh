#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# The test command: installs what is needed, builds everything with -Werror, runs every test
# (unit, policy, privileged, interop, e2e, vm) and the bounded fuzz run. Run as root.
#   sudo scripts/test.sh            # everything
#   sudo scripts/test.sh -L unit    # extra arguments go to ctest
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"
build=${COLOD_BUILD_DIR:-$root/build}
jobs=${COLOD_JOBS:-$(nproc)}

bash scripts/install-deps.sh
cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCOLOD_WERROR=ON >/dev/null
cmake --build "$build" -j "$jobs"

if [[ -x scripts/fuzz.sh && $# -eq 0 ]]; then
  bash scripts/fuzz.sh --seconds "${COLOD_FUZZ_SECONDS:-60}"
fi

# Unit tests run in parallel; tests marked RUN_SERIAL (privileged, interop, e2e, vm) run alone.
ctest --test-dir "$build" --output-on-failure -j "$jobs" "$@"
