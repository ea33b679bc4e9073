#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# NRI benchmark (issue 3). Builds nri_bench (C++, plugin side) and the Go rttbench of
# nri/testpeer and prints as its last line:
#   nri: sync1000_ms=<ms> create_p99_us=<us> rtt_ratio_vs_go=<ratio>
#   scripts/bench/nri.sh [--rounds 3] [--cpu 0] [--other-cpu 1] [--build DIR]
#
# sync/create ("nri_bench stub"): the real Stub in this process, the fake runtime in a forked
# process with pre-encoded requests; timings are plugin-side (first request byte read -> last
# reply byte written). Headline = plugin pinned to --cpu, runtime pinned to --other-cpu. Also
# printed: both on one CPU ("same_cpu", measures waiting behind the runtime) and unpinned.
# RTT ("nri_bench rtt" vs Go "rttbench"): client and server in one process, pinned to --cpu,
# alternating C++/Go runs; ratio of the medians of the per-run p50s. Also printed: the C++ RTT
# without caller reads (--caller-reads 0: the mux reader thread hands each reply to the caller),
# and the protocol-free floor in the same rounds ("nri_bench floor": two threads exchanging a
# 4 KB call's bytes with plain write/read on a socketpair), with the ratio that floor gives
# against Go: the best rtt_ratio_vs_go any implementation could read that run. Also each round's
# own ratio (its two runs back to back), and the thread switches per call of the three pairs
# (getrusage), which is where Go's pair differs: it switches goroutines in user space.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
build=${COLOD_BUILD_DIR:-$root/build}
rounds=3
cpu=0
other=1
while [[ $# -gt 0 ]]; do
  case "$1" in
    --rounds) rounds="$2"; shift 2 ;;
    --cpu) cpu="$2"; shift 2 ;;
    --other-cpu) other="$2"; shift 2 ;;
    --build) build="$2"; shift 2 ;;
    *) echo "usage: $0 [--rounds N] [--cpu N] [--other-cpu N] [--build DIR]" >&2; exit 2 ;;
  esac
done
cmake -S "$root" -B "$build" -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
cmake --build "$build" --target nri_bench -j "${COLOD_JOBS:-2}" >/dev/null
have_go=0
if cmake --build "$build" --target colod-testpeer -j "${COLOD_JOBS:-2}" >/dev/null 2>&1 &&
   [[ -x "$build/nri/testpeer/rttbench" ]]; then
  have_go=1
else
  echo "note: Go rttbench (nri/testpeer) not available; rtt_ratio_vs_go=NA" >&2
fi
bench="$build/nri/nri_bench"

median() { sort -g | awk '{a[NR]=$1} END {if (NR==0) {print "NA"} else if (NR%2) {print a[(NR+1)/2]} else {print (a[NR/2]+a[NR/2+1])/2}}'; }
val() { sed -n "s/^$1=//p"; }
quot() { awk -v a="$1" -v b="$2" 'BEGIN {printf "%.2f", a / b}'; }
# One Go rttbench run in round $r: its line to stderr, its p50 and switches per call appended to
# go and go_sw.
gorun() {
  local line
  line=$(taskset -c "$cpu" "$build/nri/testpeer/rttbench" -n 20000 -size 4096)
  echo "$line" | sed "s/^/round $r /" >&2
  go+=("$(echo "$line" | sed -n 's/.*p50_us=\([0-9.]*\).*/\1/p')")
  go_sw+=("$(echo "$line" | sed -n 's/.*switches_per_call=\([0-9.]*\).*/\1/p')")
}

echo "load: $(cut -d' ' -f1-3 /proc/loadavg) on $(nproc) CPUs" >&2
sync=() create=() create_same=() create_free=() rss=() cpp=() cpp_nolead=() go=() floor=()
cpp_sw=() go_sw=() floor_sw=() pair=()
for ((r = 1; r <= rounds; r++)); do
  out=$("$bench" stub --sync-runs 10 --creates 5000 --plugin-cpu "$cpu" --runtime-cpu "$other")
  echo "$out" | sed "s/^/round $r split: /" >&2
  sync+=("$(echo "$out" | val sync1000_ms)")
  create+=("$(echo "$out" | val create_p99_us)")
  rss+=("$(echo "$out" | val rss_after_sync_mib)")
  out=$("$bench" stub --sync-runs 3 --creates 5000 --plugin-cpu "$cpu" --runtime-cpu "$cpu")
  echo "$out" | sed "s/^/round $r same_cpu: /" >&2
  create_same+=("$(echo "$out" | val create_p99_us)")
  out=$("$bench" stub --sync-runs 3 --creates 5000)
  echo "$out" | sed "s/^/round $r unpinned: /" >&2
  create_free+=("$(echo "$out" | val create_p99_us)")
  # Alternate which RTT side runs first, so drift in machine load hits both equally.
  if (( have_go && r % 2 == 0 )); then gorun; fi
  out=$(taskset -c "$cpu" "$bench" rtt --rtt-calls 20000 --size 4096)
  echo "$out" | sed "s/^/round $r rtt: /" >&2
  cpp+=("$(echo "$out" | val cpp_rtt_p50_us)")
  cpp_sw+=("$(echo "$out" | val cpp_rtt_switches_per_call)")
  if (( have_go && r % 2 == 1 )); then gorun; fi
  # This round's own ratio: both runs back to back, so usually in the same phase of the VM.
  if (( have_go )); then pair+=("$(quot "${cpp[-1]}" "${go[-1]}")"); fi
  # The same client without caller reads (the mux reader thread hands every reply over): what
  # the leader/follower reading saves, in the same run.
  out=$(taskset -c "$cpu" "$bench" rtt --rtt-calls 20000 --size 4096 --caller-reads 0)
  cpp_nolead+=("$(echo "$out" | val cpp_rtt_p50_us)")
  out=$(taskset -c "$cpu" "$bench" floor --rtt-calls 20000 --size 4096)
  floor+=("$(echo "$out" | val floor_rtt_p50_us)")
  floor_sw+=("$(echo "$out" | val floor_rtt_switches_per_call)")
done
s=$(printf '%s\n' "${sync[@]}" | median)
c=$(printf '%s\n' "${create[@]}" | median)
echo "create_p99_us: split=$c same_cpu=$(printf '%s\n' "${create_same[@]}" | median)" \
     "unpinned=$(printf '%s\n' "${create_free[@]}" | median)" \
     "rss_after_sync_mib=$(printf '%s\n' "${rss[@]}" | median) (medians of $rounds rounds)" >&2
cr=$(printf '%s\n' "${cpp[@]}" | median)
ratio=NA
if (( have_go )); then
  gr=$(printf '%s\n' "${go[@]}" | median)
  echo "cpp_rtt_p50_us=$cr go_rtt_p50_us=$gr (pinned to CPU $cpu, 4096 B, medians of $rounds rounds)" >&2
  echo "cpp_rtt_p50_us without caller reads: $(printf '%s\n' "${cpp_nolead[@]}" | median)" >&2
  fr=$(printf '%s\n' "${floor[@]}" | median)
  echo "floor: floor_rtt_p50_us=$fr floor_ratio_vs_go=$(quot "$fr" "$gr")" \
       "cpp_over_floor=$(quot "$cr" "$fr") (protocol-free ping-pong of the same bytes)" >&2
  # Thread switches per call explain the rest: Go's pair on one CPU switches goroutines in
  # user space; any pair of threads (ours, the floor) makes the kernel switch at least twice.
  echo "switches_per_call: cpp=$(printf '%s\n' "${cpp_sw[@]}" | median)" \
       "floor=$(printf '%s\n' "${floor_sw[@]}" | median) go=$(printf '%s\n' "${go_sw[@]}" | median)" >&2
  echo "per-round ratios: ${pair[*]} (median $(printf '%s\n' "${pair[@]}" | median))" >&2
  ratio=$(quot "$cr" "$gr")
fi
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)" >&2
# Synchronize and CreateContainer per NRI level against the Go peer (issue 18): the line before
# the last (scripts/bench/nri-levels.sh; NA without the Go peer or the test plugin).
cmake --build "$build" --target colod-testplugin -j "${COLOD_JOBS:-2}" >/dev/null 2>&1 || true
"$root/scripts/bench/nri-levels.sh" --build "$build" || echo "nri levels: NA"
echo "nri: sync1000_ms=$s create_p99_us=$c rtt_ratio_vs_go=$ratio"
