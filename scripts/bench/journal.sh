#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# The journal's write on colod's reaction path (journal_bench, Google Benchmark), on a quiet CPU
# and beside `stress-ng --cpu <online CPUs>` (a busy node, where colod reacts), in one run:
# the replace by rename the write-ahead used until session 53 against the write-ahead copy that
# replaced it (journal_ahead.h), 10 and 1000 containers, and at 1000 the copy's text encoded
# whole against kept per container with one changed (JournalEncoder, journal.h), printed as
#   journal-encoder: containers=1000 whole_us= kept_us= ratio= loaded_whole_us= loaded_kept_us=
# Last line:
#   journal: replace_us= ahead_us= loaded_replace_us= loaded_ahead_us= loaded_ratio=
# (medians of the repetitions, 10 containers; loaded_ratio = loaded replace / loaded ahead).
# Usage: scripts/bench/journal.sh [--repetitions N]   (COLOD_BUILD_DIR selects the build dir)
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
build=${COLOD_BUILD_DIR:-$root/build}
[[ $build == /* ]] || build=$root/$build
reps=15
if [[ ${1:-} == --repetitions ]]; then
  reps=${2:?--repetitions needs a number}
fi
cmake --build "$build" --target journal_bench -j "${COLOD_JOBS:-2}" >/dev/null
bin=$build/userspace/daemon/journal_bench
[[ -x $bin ]] || { echo "journal.sh: $bin was not built" >&2; exit 1; }
command -v stress-ng >/dev/null || { echo "journal.sh: stress-ng is needed (install-deps.sh)" >&2; exit 3; }

run() {
  "$bin" --benchmark_repetitions="$reps" --benchmark_report_aggregates_only=true \
    --benchmark_min_time=0.3
}
median() {  # <output> <benchmark name>: the median in µs
  awk -v name="$2_median" '$1 == name { print $2; unit = $3 } END {
    if (unit != "" && unit != "us") { print "unexpected unit " unit > "/dev/stderr"; exit 1 } }' <<<"$1"
}
quiet=$(run)
echo "quiet:"
echo "$quiet"
stress-ng --cpu "$(nproc)" --timeout 600 >/dev/null 2>&1 &
load=$!
trap 'kill $load 2>/dev/null; wait $load 2>/dev/null || true' EXIT
sleep 1
loaded=$(run)
echo "beside stress-ng --cpu $(nproc):"
echo "$loaded"
r=$(median "$quiet" BM_ReplaceByRename/10/real_time)
a=$(median "$quiet" BM_WriteAheadCopy/10/real_time)
lr=$(median "$loaded" BM_ReplaceByRename/10/real_time)
la=$(median "$loaded" BM_WriteAheadCopy/10/real_time)
[[ -n $r && -n $a && -n $lr && -n $la ]] || { echo "journal.sh: no median in the output" >&2; exit 1; }
w=$(median "$quiet" BM_WriteAheadCopy/1000/real_time)
k=$(median "$quiet" BM_WriteAheadKept/1000/real_time)
lw=$(median "$loaded" BM_WriteAheadCopy/1000/real_time)
lk=$(median "$loaded" BM_WriteAheadKept/1000/real_time)
[[ -n $w && -n $k && -n $lw && -n $lk ]] || { echo "journal.sh: no median at 1000" >&2; exit 1; }
awk -v w="$w" -v k="$k" -v lw="$lw" -v lk="$lk" 'BEGIN {
  printf "journal-encoder: containers=1000 whole_us=%.1f kept_us=%.1f ratio=%.1f loaded_whole_us=%.1f loaded_kept_us=%.1f\n",
    w, k, w / k, lw, lk }'
awk -v r="$r" -v a="$a" -v lr="$lr" -v la="$la" 'BEGIN {
  printf "journal: replace_us=%.1f ahead_us=%.1f loaded_replace_us=%.1f loaded_ahead_us=%.1f loaded_ratio=%.1f\n",
    r, a, lr, la, lr / la }'
