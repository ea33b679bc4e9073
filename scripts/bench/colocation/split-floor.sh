#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# What the LS probe's p99 costs when all LS work shares the CPUs a cpuset split leaves it, with
# no BE contention on those CPUs: the floor under colocation.sh's `ls_p99_colod_us` that no
# colod lever can remove. Variants, alternated --rounds times, each a colod-probe run of
# --duration s (the colocation probe: 2 threads x 300 us every 1000 us):
#   probe       alone, on CPUs LS_CPUS (one CPU) and on every CPU
#   probe+redis with colocation.sh's second LS (redis-benchmark bursts of 1000 GETs every 0.5 s),
#               same two placements
#   probe|be-X  probe on LS_CPUS, a stress-ng --X 2 hog in a cgroup of 4x the weight pinned to
#               the other CPUs (what the BE costs LS through shared caches/memory, not the run
#               queue)
# Prints one line per run: `variant cpus=..: p50_us=.. p90_us=.. p99_us=.. p999_us=..`.
#   scripts/bench/colocation/split-floor.sh [--rounds 2] [--duration 10] [--build DIR]
# Needs root (v1 cpu+cpuset controllers, as on this host) and a built colod-probe.
set -euo pipefail

# shellcheck source=standalone.sh
source "$(dirname "${BASH_SOURCE[0]}")/standalone.sh"
standalone_init split-floor "$@"
ncpu=$(nproc)
((ncpu >= 2)) || { echo "split-floor: needs 2 CPUs or more" >&2; exit 1; }
ls_cpus=0
be_cpus=1-$((ncpu - 1))
all_cpus=0-$((ncpu - 1))
port=$((20000 + $$ % 20000))
tag=colod-splitfloor-$$

pids=()
trap "standalone_cleanup be ls" EXIT

for c in cpu cpuset; do mkdir -p "$C/$c/$tag-be" "$C/$c/$tag-ls"; done
echo 4096 >"$C/cpu/$tag-be/cpu.shares"
echo 1024 >"$C/cpu/$tag-ls/cpu.shares"
mems=$(cat "$C/cpuset/cpuset.mems")
echo "$be_cpus" >"$C/cpuset/$tag-be/cpuset.cpus"
echo "$mems" >"$C/cpuset/$tag-be/cpuset.mems"
echo "$all_cpus" >"$C/cpuset/$tag-ls/cpuset.cpus"
echo "$mems" >"$C/cpuset/$tag-ls/cpuset.mems"

standalone_start split-floor ls

# run VARIANT CPUS [BE-STRESSOR]
run() {
  local variant=$1 cpus=$2 be=${3:-} loop= hog= out
  echo "$cpus" >"$C/cpuset/$tag-ls/cpuset.cpus"
  if [[ -n $be ]]; then
    (standalone_join be; exec stress-ng "--$be" 2 --timeout $((duration + 30)) -q) &
    hog=$!
    pids+=("$hog")
    sleep 1
  fi
  if [[ $variant == *redis* ]]; then
    (standalone_join ls; while :; do redis-benchmark -p "$port" -n 1000 -c 2 -t get --csv >/dev/null 2>&1; sleep 0.5; done) &
    loop=$!
    pids+=("$loop")
  fi
  out=$(standalone_join ls; exec "$probe" -t 2 -w 300 -p 1000 -d "$duration" --warmup 2 --iters-per-us "$iters")
  echo "$variant cpus=$cpus: $(grep -o 'p50_us=[0-9]* p90_us=[0-9]* p99_us=[0-9]* p999_us=[0-9]*' <<<"$out")"
  for p in $loop $hog; do kill "$p" 2>/dev/null || true; wait "$p" 2>/dev/null || true; done
}

echo "split-floor: load $(cut -d' ' -f1-3 /proc/loadavg), LS CPUs $ls_cpus, BE CPUs $be_cpus, probe iters_per_us=$iters"
for ((r = 1; r <= rounds; r++)); do
  run probe "$ls_cpus"
  run probe "$all_cpus"
  run probe+redis "$ls_cpus"
  run probe+redis "$all_cpus"
  run probe\|be-cpu "$ls_cpus" cpu
  run probe\|be-cache "$ls_cpus" cache
done
