#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Times one policy decision round at 100 and 1000 containers (Google Benchmark, policy_bench),
# and one on a busy node (BM_BusyRound: busy_round_1000_us), builds it first if needed, and
# prints as its last line:
#   policy: round_1000_us=<median µs>
# Usage: scripts/bench/policy.sh [--repetitions N]   (COLOD_BUILD_DIR selects the build dir)
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
build=${COLOD_BUILD_DIR:-$root/build}
reps=9
if [[ ${1:-} == --repetitions ]]; then
  reps=${2:?--repetitions needs a number}
fi

if [[ ! -f $build/CMakeCache.txt ]]; then
  cmake -S "$root" -B "$build" -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
fi
cmake --build "$build" --target policy_bench -j "${COLOD_JOBS:-2}" >/dev/null
bin=$build/policy/policy_bench
[[ -x $bin ]] || { echo "policy.sh: $bin was not built" >&2; exit 1; }

out=$("$bin" --benchmark_repetitions="$reps" --benchmark_report_aggregates_only=true \
  --benchmark_min_time=0.2)
echo "$out"
# Aggregate rows look like: "BM_Round/1000_median   412 us   411 us   9 ...".
median() {
  awk -v name="BM_Round/$1_median" '$1 == name { print $2; unit = $3 } END {
    if (unit != "" && unit != "us") { print "unexpected unit " unit > "/dev/stderr"; exit 1 } }' \
    <<<"$out"
}
m100=$(median 100)
m1000=$(median 1000)
busy=$(awk '$1 == "BM_BusyRound/1000/iterations:300_median" { print $2 }' <<<"$out")
[[ -n $m100 && -n $m1000 ]] || { echo "policy.sh: no median in benchmark output" >&2; exit 1; }
awk -v a="$m100" -v b="$m1000" 'BEGIN { printf "policy: scaling round_1000/round_100 = %.1fx (10x containers)\n", b / a }'
# A busy node: 399 of 666 LS hurt at once, every BE running (the evidence per victim and BE).
[[ -z $busy ]] || printf 'policy: busy_round_1000_us=%.0f\n' "$busy"
printf 'policy: round_1000_us=%s\n' "$(awk -v b="$m1000" 'BEGIN { printf "%.0f", b }')"
