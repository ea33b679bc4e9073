#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# BPF overhead of the colod programs on a context-switch-heavy load.
#
# Runs a pipe ping-pong pinned to one CPU, alternating runs without and with the programs
# attached (colod-collect running), with kernel.bpf_stats_enabled=1 so the kernel measures
# each program's run time. Built for a noisy shared machine:
#   - the runs are interleaved W0 C1 W1 C2 W2 ... Cn Wn (W: without, C: with), and each "with"
#     run is compared with the mean of the two "without" runs around it, so a load change
#     that drifts across a pair cancels to first order;
#   - many short pairs (default 15 x 1 s) and medians, never means, of the per-pair values;
#   - the spread (min, quartiles, max) of the per-pair ratios and per-run ns, and the load
#     average before and after, are printed, so a noisy run is visible as one.
# Prints per-pair numbers and, as the last line:
#   bpf-overhead: sched_switch_ns=<median> wakeup_ns=<median or 0> throughput_ratio=<with/without>
# sched_switch_ns/wakeup_ns: ns per program run (run_time_ns/run_cnt over each "with" run);
# throughput_ratio: median over pairs of (round trips/s with) / (mean round trips/s of the
# "without" runs before and after it).
#
# Usage: sudo scripts/bench/bpf-overhead.sh [pairs=15] [seconds=1]
#   BENCH_CPU=<cpu> (default 1)
#   BENCH_NICE=<nice> (default -20): the ping-pong's nice value. At -20 its CFS weight is ~87x
#     a default task's, so other work on that CPU barely takes turns in it; with the default 0
#     a shared machine swings the rate 10x between runs. The BPF path measured is the same.
#   BENCH_COLLECT_CPUS=<list> (default: every CPU but BENCH_CPU): where colod-collect itself
#     runs, so its userspace work (map reads, cgroup files every 100 ms) does not take turns on
#     the measured CPU: what is measured is the programs' cost on the ping-pong.
#   BENCH_STATS=0: leave kernel.bpf_stats_enabled off, so the ratio is what a node without
#     bpf_stats pays (stats cost two sched_clock() reads per program run, ~50 ns here);
#     sched_switch_ns then reads 0.
#   BENCH_FLOOR=0: skip the floor runs. By default every pair is followed by one with
#     colod-bpf-floor (an empty tp_btf/sched_switch program, bpf/switch_floor.bpf.c) attached
#     instead, compared the same way, and a line before the last gives the floor's ns and ratio
#     and the programs' ratio over it (with/floor): what colod adds to the least any
#     sched_switch program costs on this machine, on this day.
#   COLOD_BPF_FLOOR=<path to colod-bpf-floor> (default: next to colod-collect)
#   COLOD_COLLECT=<path to colod-collect> (default: first build*/ dir that has one)
#   COLLECT_ARGS="..." extra colod-collect flags (e.g. --wakeup-depth to add the wakeup hook)
#   BENCH_WATCH=1: every ping-pong run (with, without, floor) runs in a cgroup of its own that
#     colod-collect watches for wakeups (--watch, threshold BENCH_WATCH_US, default 3000 us of
#     wait within 10 ms): the switch handler then also pays the protected-cgroup path of
#     event-driven detection (one cg_watch lookup and the accumulator per wait; bpf/README.md).
#     The ping-pong's waits are µs, so no event is posted: what is measured is the path's cost.
set -euo pipefail
pairs=${1:-15}
secs=${2:-1}
cpu=${BENCH_CPU:-1}
nice_val=${BENCH_NICE:--20}
collect_cpus=${BENCH_COLLECT_CPUS:-$(seq 0 $(($(nproc) - 1)) | grep -vx "$cpu" | paste -sd, -)}
collect_cpus=${collect_cpus:-$cpu}  # one-CPU machine
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)

if [[ $(id -u) -ne 0 ]]; then
  echo "bpf-overhead: must run as root (loads BPF, sets kernel.bpf_stats_enabled)" >&2
  exit 3
fi
collect=${COLOD_COLLECT:-}
if [[ -z "$collect" ]]; then
  for b in "$root"/build*/userspace/collectview/colod-collect "$root"/build*/collectview/colod-collect; do
    if [[ -x "$b" ]]; then collect=$b; break; fi
  done
fi
if [[ -z "$collect" || ! -x "$collect" ]]; then
  echo "bpf-overhead: colod-collect not found; build it or set COLOD_COLLECT" >&2
  exit 3
fi

floor_bin=${COLOD_BPF_FLOOR:-$(dirname "$collect")/colod-bpf-floor}
if [[ ${BENCH_FLOOR:-1} != 0 && ! -x "$floor_bin" ]]; then
  echo "bpf-overhead: note: $floor_bin not built, no floor runs (cmake --build ... --target colod-bpf-floor)" >&2
fi
use_floor=0
[[ ${BENCH_FLOOR:-1} != 0 && -x "$floor_bin" ]] && use_floor=1

work=$(mktemp -d /tmp/colod-bpf-overhead.XXXXXX)
collector_pid=
old_stats=$(sysctl -n kernel.bpf_stats_enabled)
# The watched cgroup (BENCH_WATCH=1), in the hierarchy whose ids colod-collect keys by: the v1
# cpu controller on v1/hybrid hosts, the cgroup2 root otherwise.
watch_dir=
if [[ ${BENCH_WATCH:-0} != 0 ]]; then
  watch_root=/sys/fs/cgroup
  [[ -d /sys/fs/cgroup/cpu ]] && watch_root=/sys/fs/cgroup/cpu
  watch_name=colod-bench-watch-$$
  watch_dir=$watch_root/$watch_name
  mkdir "$watch_dir"
  COLLECT_ARGS="${COLLECT_ARGS:-} --watch /$watch_name --watch-threshold-us ${BENCH_WATCH_US:-3000}"
fi
cleanup() {
  if [[ -n "$collector_pid" ]]; then kill "$collector_pid" 2>/dev/null || true; wait "$collector_pid" 2>/dev/null || true; fi
  sysctl -qw kernel.bpf_stats_enabled="$old_stats" || true
  if [[ -n "$watch_dir" ]]; then rmdir "$watch_dir" 2>/dev/null || true; fi
  rm -rf "$work"
}
trap cleanup EXIT
cc -O2 -Wall -o "$work/pingpong" "$here/pingpong.c"
pingpong() {
  if [[ -n "$watch_dir" ]]; then
    # shellcheck disable=SC2016
    nice -n "$nice_val" sh -c 'echo $$ > "$1/cgroup.procs" && shift && exec "$@"' sh "$watch_dir" "$work/pingpong" "$@"
  else
    nice -n "$nice_val" "$work/pingpong" "$@"
  fi
}
sysctl -qw kernel.bpf_stats_enabled="${BENCH_STATS:-1}"

# bpftool here reports no owning pids, so the collector's programs are the ones that appear
# after it starts (prog ids are never reused while the old ones exist).
all_ids() { bpftool -j prog show | python3 -c 'import json,sys; print(" ".join(str(p["id"]) for p in json.load(sys.stdin)))'; }
# prog_stats <ids...>: "<name> <run_time_ns> <run_cnt>" for those programs.
prog_stats() {
  bpftool -j prog show | python3 -c '
import json, sys
ids = set(int(x) for x in sys.argv[1:])
for p in json.load(sys.stdin):
    if p["id"] in ids:
        print(p.get("name", "?"), p.get("run_time_ns", 0), p.get("run_cnt", 0))
' "$@"
}

collector_ids=
# start_collector [floor]: colod-collect, or with "floor" colod-bpf-floor, off the measured CPU;
# returns once its sched_switch program is attached, with its programs' ids in collector_ids.
start_collector() {
  local before
  before=$(all_ids)
  if [[ ${1:-} == floor ]]; then
    taskset -c "$collect_cpus" "$floor_bin" > /dev/null 2> "$work/collect.err" &
  else
    # shellcheck disable=SC2086
    taskset -c "$collect_cpus" "$collect" --interval 100 --json ${COLLECT_ARGS:-} > /dev/null 2> "$work/collect.err" &
  fi
  collector_pid=$!
  for _ in $(seq 1 100); do
    collector_ids=$(comm -13 <(tr ' ' '\n' <<< "$before" | sort) <(all_ids | tr ' ' '\n' | sort) | tr '\n' ' ')
    if [[ -n "$collector_ids" ]] && prog_stats $collector_ids | grep handle_sched_sw > /dev/null; then
      sleep 0.2  # let the remaining programs attach
      collector_ids=$(comm -13 <(tr ' ' '\n' <<< "$before" | sort) <(all_ids | tr ' ' '\n' | sort) | tr '\n' ' ')
      return 0
    fi
    if ! kill -0 "$collector_pid" 2>/dev/null; then break; fi
    sleep 0.1
  done
  echo "bpf-overhead: colod-collect did not attach:" >&2
  cat "$work/collect.err" >&2
  exit 1
}
stop_collector() {
  kill "$collector_pid" 2>/dev/null || true
  wait "$collector_pid" 2>/dev/null || true
  collector_pid=
}

: > "$work/results"
load_before=$(cut -d' ' -f1-3 /proc/loadavg)
echo "bpf-overhead: $pairs pairs of ${secs}s on CPU $cpu (nice $nice_val, bpf_stats ${BENCH_STATS:-1}, collector on CPUs $collect_cpus, watch ${BENCH_WATCH:-0}), load average $load_before, $(nproc) CPUs"
pingpong "$cpu" 0.3 > /dev/null  # warm-up (page cache, frequency), not recorded
without=$(pingpong "$cpu" "$secs")
# measure KIND: one run with the programs of KIND (colod: colod-collect; floor: the empty one)
# attached, then one without; appends "KIND sw_ns wakeup_ns ratio without with without" to the
# results, the ratio taken against the mean of the runs without around it.
measure() {
  local kind=$1
  if [[ $kind == floor ]]; then start_collector floor; else start_collector; fi
  # shellcheck disable=SC2086
  prog_stats $collector_ids > "$work/before"
  with=$(pingpong "$cpu" "$secs")
  # shellcheck disable=SC2086
  prog_stats $collector_ids > "$work/after"
  stop_collector
  after=$(pingpong "$cpu" "$secs")
  printf '%s ' "$kind" >> "$work/results"
  python3 - "$work/before" "$work/after" "$without" "$with" "$after" >> "$work/results" <<'PY'
import sys
def load(p):
    d = {}
    for line in open(p):
        n, t, c = line.split()
        d.setdefault(n, [0, 0])
        d[n][0] += int(t); d[n][1] += int(c)
    return d
b, a = load(sys.argv[1]), load(sys.argv[2])
def per_run(prefix):
    t = c = 0
    for n in a:
        if n.startswith(prefix) and not n.endswith("raw"):
            t += a[n][0] - b.get(n, [0, 0])[0]; c += a[n][1] - b.get(n, [0, 0])[1]
    return (t / c) if c else 0.0
sw, wk = per_run("handle_sched_sw"), per_run("handle_sched_wa")
w0, w, w1 = float(sys.argv[3]), float(sys.argv[4]), float(sys.argv[5])
print(f"{sw:.1f} {wk:.1f} {w / ((w0 + w1) / 2):.4f} {w0:.0f} {w:.0f} {w1:.0f}")
PY
  read -r _ sw wk ratio wo w w1 < <(tail -n1 "$work/results")
  echo "pair $i $kind: without=${wo}/s with=${w}/s without=${w1}/s ratio=$ratio sched_switch_ns=$sw wakeup_ns=$wk"
  without=$after
}
for i in $(seq 1 "$pairs"); do
  measure colod
  if ((use_floor)); then measure floor; fi
done
load_after=$(cut -d' ' -f1-3 /proc/loadavg)
python3 - "$work/results" "$load_before" "$load_after" <<'PY'
import statistics, sys
lines = [l.split() for l in open(sys.argv[1]) if l.strip()]
rows = [list(map(float, l[1:])) for l in lines if l[0] == "colod"]
floor = [list(map(float, l[1:])) for l in lines if l[0] == "floor"]
def spread(xs, fmt):
    xs = sorted(xs)
    q = statistics.quantiles(xs, n=4) if len(xs) >= 2 else [xs[0]] * 3
    return "min " + " q1 ".join([fmt.format(xs[0]), fmt.format(q[0])]) + " median " + \
        fmt.format(q[1]) + " q3 " + fmt.format(q[2]) + " max " + fmt.format(xs[-1])
sw = statistics.median(r[0] for r in rows)
wk = statistics.median(r[1] for r in rows)
ratio = statistics.median(r[2] for r in rows)
print(f"spread: throughput_ratio {spread([r[2] for r in rows], '{:.3f}')}")
print(f"spread: sched_switch_ns {spread([r[0] for r in rows], '{:.1f}')}")
wo = [r[3] for r in rows] + [rows[-1][5]]
print(f"spread: without rt/s {spread(wo, '{:.0f}')}")
print(f"load average: before {sys.argv[2]}, after {sys.argv[3]}")
if floor:
    fsw = statistics.median(r[0] for r in floor)
    fratio = statistics.median(r[2] for r in floor)
    print(f"spread: floor throughput_ratio {spread([r[2] for r in floor], '{:.3f}')}")
    print(f"floor: sched_switch_ns={fsw:.0f} throughput_ratio={fratio:.3f} "
          f"(empty tp_btf/sched_switch program, {len(floor)} runs interleaved); "
          f"colod over the floor: throughput_ratio_vs_floor={ratio / fratio:.3f}")
print(f"bpf-overhead: sched_switch_ns={sw:.0f} wakeup_ns={wk:.0f} throughput_ratio={ratio:.3f}")
PY
