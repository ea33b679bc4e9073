#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# rss.sh RUNDIR CONTAINERS [NODE_CPUS]: colod's resident memory with CONTAINERS containers known.
# NODE_CPUS: colod reads its online CPUs from a sysfs root that names 0..NODE_CPUS-1 (the
# `daemon.sys_root` key), so its per-container tables have a big node's shape (a container
# without a cpuset of its own runs on all of them); the collector stays at this host's size
# (its cost at many possible CPUs is scripts/bench/scale.sh's, in the guest). Starts a
# second colod-testpeer that reports CONTAINERS fake containers (no cgroups, shaped like real
# Kubernetes objects) in 1/10 as many pods, starts colod against it, waits for the Synchronize,
# lets it run 5 s more, and prints "colod_rss_mib=<max VmRSS over that time> containers=N
# colod_cpu_pct=<colod's user+sys CPU over those 5 s, % of one CPU>" (its cgroup-less
# containers: the registry, engine and view at that size, not the collector's cgroup reads,
# which scripts/bench/scale.sh measures).
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=lib.sh
source "$here/lib.sh"
CB_TAG=rss
run=$1/rss n=$2 node_cpus=${3:-}
mkdir -p "$run"
if [[ -n $node_cpus ]]; then
  if ! [[ $node_cpus =~ ^[0-9]+$ ]] || ((node_cpus < 1 || node_cpus > 8192)); then
    cb_die "NODE_CPUS must be 1..8192, not $node_cpus"
  fi
  mkdir -p "$run/sys/devices/system/cpu"
  echo "0-$((node_cpus - 1))" >"$run/sys/devices/system/cpu/online"
  COLOD_DAEMON_SET="${COLOD_DAEMON_SET:-} sys_root=$run/sys"
  export COLOD_DAEMON_SET
fi
peer=$(cb_bin colod-testpeer) colod=$(cb_bin colod)
[[ -n $peer && -n $colod ]] || cb_die "needs colod-testpeer and colod"
pods=$(( n / 10 > 0 ? n / 10 : 1 ))

peer_pid='' colod_pid=''
trap 'cb_stop_pids "$colod_pid" "$peer_pid"' EXIT
"$peer" --socket "$run/nri.sock" --log "$run/peer.log" --cgroup-parent "colobench-rss-$$" \
  --synth-pods "$pods" --synth-containers "$n" >"$run/peer.stdout" 2>&1 &
peer_pid=$!
cb_wait_socket "$run/nri.sock" || cb_die "peer socket did not appear"
bash "$here/colod-config.sh" "$run" >"$run/colod.yaml"
"$colod" --config "$run/colod.yaml" >"$run/colod.log" 2>&1 &
colod_pid=$!
synced=0
for _ in $(seq 1 300); do  # <= 30 s
  kill -0 "$colod_pid" 2>/dev/null || { tail -5 "$run/colod.log" >&2; cb_die "colod exited"; }
  if grep -q '"event":"plugin-synchronized"' "$run/peer.log"; then synced=1; break; fi
  sleep 0.1
done
((synced)) || cb_die "colod did not synchronize with $n containers in 30 s"
containers=$(grep '"event":"plugin-synchronized"' "$run/peer.log" | head -1 |
  python3 -c 'import json,sys; print(json.loads(sys.stdin.readline()).get("containers", "?"))')
sleep 2
ticks() { awk '{print $14 + $15}' "/proc/$colod_pid/stat"; }
hz=$(getconf CLK_TCK)
cpu0=$(ticks) t0=$(date +%s.%N)
max_kib=0
for _ in $(seq 1 10); do
  kib=$(awk '/^VmRSS:/ {print $2}' "/proc/$colod_pid/status")
  ((kib > max_kib)) && max_kib=$kib
  sleep 0.5
done
cpu1=$(ticks) t1=$(date +%s.%N)
python3 -c "import sys; k, n, c, hz, t0, t1, cpus = sys.argv[1:]; \
print(f'colod_rss_mib={int(k) / 1024:.1f} containers={n} ' \
      f'colod_cpu_pct={100 * int(c) / int(hz) / (float(t1) - float(t0)):.2f}' \
      + (f' node_cpus={cpus}' if cpus else ''))" \
  "$max_kib" "$containers" "$((cpu1 - cpu0))" "$hz" "$t0" "$t1" "$node_cpus"
