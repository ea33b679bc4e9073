#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# ThreadSanitizer run of the real daemon (issue 14): builds colod and the test suites with
# -DCOLOD_SANITIZE=thread in a separate build dir, runs the e2e suite (and the fault suite with
# --faults, the actuator's unit tests always), with the suppressions for Debian's uninstrumented
# gRPC/abseil (scripts/tsan/suppressions.txt), and prints as its last line
#   tsan: suites=<n> tests=<n> failed=<n> warnings=<n>
#   scripts/bench/tsan.sh [--build DIR] [--faults]
# Every warning's report is kept in $out (default /tmp/colod-tsan) for reading.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
build=${COLOD_TSAN_BUILD_DIR:-$root/build-tsan}
out=${COLOD_TSAN_OUT:-/tmp/colod-tsan}
faults=0
while [[ $# -gt 0 ]]; do
  case "$1" in
    --build) build="$2"; shift 2 ;;
    --faults) faults=1; shift ;;
    *) echo "usage: $0 [--build DIR] [--faults]" >&2; exit 2 ;;
  esac
done
if [[ $(id -u) -ne 0 ]]; then
  echo "tsan.sh: needs root (BPF, cgroups, the runtime peer)" >&2
  exit 1
fi
targets=(colod coloctl colod-testpeer colod-probe colod_e2e_test actuator_test)
suites=(userspace/e2e/colod_e2e_test userspace/daemon/actuator_test)
if [[ $faults -eq 1 ]]; then
  targets+=(colod_fault_test)
  suites+=(userspace/faults/colod_fault_test)
fi
cmake -S "$root" -B "$build" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCOLOD_SANITIZE=thread \
  -DCOLOD_BUILD_BENCHMARKS=OFF >/dev/null
cmake --build "$build" --target "${targets[@]}" -j "$(nproc)" >/dev/null
rm -rf "$out"
mkdir -p "$out"
tests=0
failed=0
for suite in "${suites[@]}"; do
  log="$out/$(basename "$suite").log"
  TSAN_OPTIONS="halt_on_error=0 suppressions=$root/scripts/tsan/suppressions.txt log_path=$out/report" \
    "$build/$suite" >"$log" 2>&1 || true
  n=$(grep -cE '^\[ +(OK|FAILED) +\] [A-Za-z]' "$log" || true)
  f=$(grep -cE '^\[  FAILED  \] [A-Za-z].*\(' "$log" || true)
  echo "$(basename "$suite"): tests=$n failed=$f"
  tests=$((tests + n))
  failed=$((failed + f))
done
warnings=$(cat "$out"/report.* 2>/dev/null | grep -c 'WARNING: ThreadSanitizer' || true)
echo "tsan: suites=${#suites[@]} tests=$tests failed=$failed warnings=$warnings"
