#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Do the scheduler attributes NRI v0.11+ can set at CreateContainer (LinuxScheduler: policy,
# nice, runtime) protect LS from BE in another pod? Each variant is a colod-probe run (2 threads
# x 300 us every 1000 us, as in colocation.sh) in an LS cgroup of weight 1024, redis bursts in a
# second LS cgroup of 1024, a stress-ng --cpu 2 hog in a BE cgroup of 4096 (the benchmark's 4:1),
# all on every CPU, alternated --rounds times:
#   solo         no BE
#   shared       BE on every CPU, nothing set (colocation.sh's "no colod")
#   be-idle      the BE hog in SCHED_IDLE (NRI LinuxScheduler policy)
#   ls-slice     the probe with a 100 us EEVDF slice (sched_runtime of a SCHED_OTHER task,
#                kernel >= 6.12; NRI LinuxScheduler runtime)
#   be-idle+ls-slice both
# Prints `variant: p50_us=.. p90_us=.. p99_us=.. p999_us=.. be_bogo_ops=..` per run.
#   scripts/bench/colocation/sched-levers.sh [--rounds 2] [--duration 10] [--build DIR]
# Needs root, the v1 cpu+cpuset controllers (as on this host), python3, stress-ng, redis.
set -euo pipefail

# shellcheck source=standalone.sh
source "$(dirname "${BASH_SOURCE[0]}")/standalone.sh"
standalone_init sched-levers "$@"
tag=colod-schedlevers-$$
port=$((20000 + $$ % 20000))
work=$(mktemp -d /tmp/colod-schedlevers.XXXXXX)

# sched.py RUNTIME_NS POLICY CMD...: sched_setattr(2) on itself (policy 0 = SCHED_OTHER,
# 5 = SCHED_IDLE; runtime = the EEVDF slice, 0 = default), then exec CMD; threads and children
# inherit it, as they do from a container's init when the runtime sets it.
cat >"$work/sched.py" <<'PY'
import ctypes, os, struct, sys
libc = ctypes.CDLL(None, use_errno=True)
attr = ctypes.create_string_buffer(struct.pack("IIQiIQQQ", 48, int(sys.argv[2]), 0, 0, 0, int(sys.argv[1]), 0, 0), 48)
if libc.syscall(314, 0, attr, 0) != 0:
    sys.exit("sched_setattr: " + os.strerror(ctypes.get_errno()))
os.execvp(sys.argv[3], sys.argv[3:])
PY

pids=()
cleanup() {
  standalone_cleanup be ls redis
  rm -rf "$work"
}
trap cleanup EXIT

mems=$(cat "$C/cpuset/cpuset.mems")
all=0-$(($(nproc) - 1))
for g in be ls redis; do
  for c in cpu cpuset; do mkdir -p "$C/$c/$tag-$g"; done
  echo "$all" >"$C/cpuset/$tag-$g/cpuset.cpus"
  echo "$mems" >"$C/cpuset/$tag-$g/cpuset.mems"
done
echo 4096 >"$C/cpu/$tag-be/cpu.shares"
echo 1024 >"$C/cpu/$tag-ls/cpu.shares"
echo 1024 >"$C/cpu/$tag-redis/cpu.shares"

standalone_start sched-levers redis
(standalone_join redis; while :; do redis-benchmark -p "$port" -n 1000 -c 2 -t get --csv >/dev/null 2>&1; sleep 0.5; done) &
pids+=("$!")

# run VARIANT BE(0|1) BE_POLICY PROBE_SLICE_NS
run() {
  local variant=$1 be=$2 policy=$3 slice=$4 hog= out ops=
  if ((be)); then
    (standalone_join be; exec python3 "$work/sched.py" 0 "$policy" stress-ng --cpu 2 --timeout $((duration + 3)) \
       --metrics-brief 2>"$work/be.out") &
    hog=$!
    sleep 1
  fi
  out=$(standalone_join ls; exec python3 "$work/sched.py" "$slice" 0 "$probe" -t 2 -w 300 -p 1000 \
          -d "$duration" --warmup 2 --iters-per-us "$iters")
  if [[ -n $hog ]]; then
    wait "$hog" 2>/dev/null || true
    ops=$(awk '$4 == "cpu" {print $5}' "$work/be.out")
  fi
  echo "$variant: $(grep -o 'p50_us=[0-9]* p90_us=[0-9]* p99_us=[0-9]* p999_us=[0-9]*' <<<"$out") be_bogo_ops=${ops:-NA}"
}

echo "sched-levers: load $(cut -d' ' -f1-3 /proc/loadavg), kernel $(uname -r), probe iters_per_us=$iters"
for ((r = 1; r <= rounds; r++)); do
  run solo 0 0 0
  run shared 1 0 0
  run be-idle 1 5 0
  run ls-slice 1 0 100000
  run be-idle+ls-slice 1 5 100000
done
