#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# colod's collector cost against the number of live containers (issue 17), on this host.
# For each size (default 100 500 1000 2000) the bench holds that many cgroups (the v1 cpu
# hierarchy plus the unified one on hybrid hosts, or the cgroup2 tree), each with one process:
# one in BUSY_EVERY (10) wakes every BUSY_PERIOD_US (20000) and works BUSY_SPIN_US (50), the
# others wake every IDLE_PERIOD_US (1000000). colod-collect-scale then runs the collector at a
# 100 ms interval for SCALE_SECONDS (10), four times: with the read side from before issue 17
# (--legacy: full-size map dumps into fresh buffers, files opened per read), then the current one
# reading every cgroup's files at every tick (--files-every 1: the collector's own default),
# then as the daemon runs it: files every kFilesEveryNTicks-th tick (10) except for the cgroups
# the daemon names every tick (its victims and the containers it restricts), one in EVERY_TICK
# (10) here (--every-tick-share), CFS quotas and the named cgroups' PSI files every
# PRESSURE_EVERY-th (20: 2 s, the kernel's PSI period; --pressure-every, --pressure-named-only),
# first copying out every live cgroup's cg_sched entry at every tick (--every-slot, as before the
# change marks), then only the changed ones (the default).
# Then the daemon-cadence run again with a CFS quota (non-binding) on every bench cgroup: a named
# cgroup without a quota cannot be throttled, so its cpu.stat waits for the cadence, and this run
# shows the cost where every named container has a CPU limit (`scale-quota:`).
# The daemon-cadence run's syscalls are counted with perf (if installed) and priced at the cost
# of a null syscall measured at start (syscall-floor.c): `scale-floor:` syscalls_per_tick,
# null_syscall_ns and syscall_floor_pct, the CPU those calls cost here doing nothing at all.
# The daemon-cadence run once more with --no-usage (CPU time from BPF alone, no cgroup's usage
# counter read for its long slices: the read side before session 36), `scale-nousage:`.
# Output per size: `scale-legacy:`, `scale-files1:`, `scale-every-slot:`, `scale-quota:`,
# `scale-nousage:`,
# `scale-floor:`, the daemon-cadence probe's own line, and
# `scale:` (that probe);
# the last line is the largest size's
#   scale: possible_cpus=<N> containers=<n> colod_rss_mib= bpf_map_mib= colod_cpu_pct=
#          read_bytes_per_tick= tick_p99_ms=
# colod_* are the collector process (colod-collect-scale): RSS at the end of the window, CPU as %
# of one core over it; bpf_map_mib is the maps' kernel memory (fdinfo memlock), not in RSS.
# Usage: sudo scripts/bench/scale.sh [size...]    (COLOD_SCALE_PROBE: the probe binary)
# SCALE_HOLD=CMD: at each size run CMD (with SCALE_CONTAINERS set, and SCALE_CGROUP_PREFIX: the
# cgroups are SCALE_CGROUP_PREFIX1.. in each hierarchy, cgroupfs form) instead of the probe runs,
# the cgroups and their workers in place: for profiles and side-by-side runs of two builds.
set -euo pipefail
sizes=("$@")
[[ ${#sizes[@]} -gt 0 ]] || sizes=(100 500 1000 2000)
secs=${SCALE_SECONDS:-10}
max_cgroups=${MAX_CGROUPS:-4096}
busy_every=${BUSY_EVERY:-10}
busy_period=${BUSY_PERIOD_US:-20000}
busy_spin=${BUSY_SPIN_US:-50}
idle_period=${IDLE_PERIOD_US:-1000000}
every_tick=${EVERY_TICK:-10}
pressure_every=${PRESSURE_EVERY:-20}  # the daemon's: PSI and quotas every 2 s at 100 ms
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
[[ $(id -u) -eq 0 ]] || { echo "scale: must run as root" >&2; exit 3; }
probe=${COLOD_SCALE_PROBE:-}
if [[ -z "$probe" ]]; then
  for b in /work/build-collect/userspace/collect/colod-collect-scale \
           "$root"/build*/userspace/collect/colod-collect-scale; do
    if [[ -x "$b" ]]; then probe=$b; break; fi
  done
fi
[[ -x "$probe" ]] || { echo "scale: colod-collect-scale not found (COLOD_SCALE_PROBE)" >&2; exit 3; }

work=$(mktemp -d /tmp/colod-scale-XXXXXX)
worker=$work/scale-worker
cc -O2 -o "$worker" "$here/scale-worker.c"
cc -O2 -o "$work/syscall-floor" "$here/syscall-floor.c"
null_ns=$("$work/syscall-floor" | sed -n 's/^null_syscall_ns=//p')

if [[ -f /sys/fs/cgroup/cgroup.controllers ]]; then
  roots=(/sys/fs/cgroup)                    # cgroup2 only
else
  roots=(/sys/fs/cgroup/cpu)
  [[ -f /sys/fs/cgroup/unified/cgroup.controllers ]] && roots+=(/sys/fs/cgroup/unified)
  # runc makes a container's cgroup in every hierarchy: a cgroup's CPU time may be read from its
  # cpuacct.usage (session 36), where cpuacct is a hierarchy of its own.
  if [[ -d /sys/fs/cgroup/cpuacct && ! /sys/fs/cgroup/cpuacct -ef /sys/fs/cgroup/cpu ]]; then
    roots+=(/sys/fs/cgroup/cpuacct)
  fi
fi
name=colod-bench-scale-$$
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
  for r in "${roots[@]}"; do
    for d in "$r/$name"/cg*; do [[ -d $d ]] && rmdir "$d" 2>/dev/null || true; done
    rmdir "$r/$name" 2>/dev/null || true
  done
  rm -rf "$work"
}
trap cleanup EXIT
for r in "${roots[@]}"; do mkdir -p "$r/$name"; done

possible=$(cat /sys/devices/system/cpu/possible)
ncpu=$(( ${possible##*-} + 1 ))
echo "scale: host possible CPUs $possible ($ncpu), online $(nproc), max_cgroups=$max_cgroups," \
     "busy 1 in $busy_every (${busy_spin}us every ${busy_period}us), ${secs}s per run," \
     "files every tick for 1 in $every_tick;" \
     "load $(cut -d' ' -f1-3 /proc/loadavg)"
# quotas on|off: a 2-CPU CFS quota on every bench cgroup of the cpu hierarchy, or none
# (quota_set: how many took it; 0 where the cgroup has no cpu.max, v2 without +cpu).
quotas() {
  quota_set=0
  local d
  for d in "${roots[0]}/$name"/cg*; do
    if [[ -f $d/cpu.cfs_quota_us ]]; then
      if [[ $1 == on ]]; then echo 200000 > "$d/cpu.cfs_quota_us"; else echo -1 > "$d/cpu.cfs_quota_us"; fi
    elif [[ -f $d/cpu.max ]]; then
      if [[ $1 == on ]]; then echo "200000 100000" > "$d/cpu.max"; else echo "max 100000" > "$d/cpu.max"; fi
    else
      continue
    fi
    quota_set=$((quota_set + 1))
  done
}
get() { sed -n "s/.* $1=\([^ ]*\).*/\1/p" <<<"$2"; }
mib() { awk -v b="$1" 'BEGIN { printf "%.1f", b / 1048576 }'; }
have=0
for n in "${sizes[@]}"; do
  while (( have < n )); do
    have=$((have + 1))
    procs=()
    for r in "${roots[@]}"; do
      mkdir "$r/$name/cg$have"
      procs+=("$r/$name/cg$have/cgroup.procs")
    done
    if (( have % busy_every == 0 )); then
      "$worker" "$busy_period" "$busy_spin" "${procs[@]}" &
    else
      "$worker" "$idle_period" 0 "${procs[@]}" &
    fi
    pids+=($!)
  done
  sleep 2
  if [[ -n "${SCALE_HOLD:-}" ]]; then
    SCALE_CONTAINERS=$n SCALE_CGROUP_PREFIX="/$name/cg" bash -c "$SCALE_HOLD"
    continue
  fi
  old=$("$probe" --legacy --seconds "$secs" --max-cgroups "$max_cgroups" | grep '^probe:')
  f1=$("$probe" --files-every 1 --seconds "$secs" --max-cgroups "$max_cgroups" | grep '^probe:')
  every=$("$probe" --files-every 10 --every-tick-share "$every_tick" --pressure-every "$pressure_every" --pressure-named-only --seconds "$secs" \
          --max-cgroups "$max_cgroups" --every-slot | grep '^probe:')
  # The daemon-cadence run, its syscalls counted (perf, the raw_syscalls tracepoint) over the
  # middle of its window: with the cost of a null syscall they give the floor this host puts
  # under any collector that reads the same files and maps one call each.
  "$probe" --files-every 10 --every-tick-share "$every_tick" --pressure-every "$pressure_every" --pressure-named-only --seconds "$secs" \
    --max-cgroups "$max_cgroups" > "$work/new.out" &
  pp=$!
  calls=""
  count_s=$(( secs > 6 ? secs - 5 : 1 ))
  if command -v perf > /dev/null; then
    sleep 3
    calls=$(perf stat -e raw_syscalls:sys_enter -x, -p "$pp" -- sleep "$count_s" 2>&1 |
            awk -F, '/raw_syscalls:sys_enter/ { print ($1 ~ /^[0-9]+$/) ? $1 : "" }')
  fi
  wait "$pp"
  new=$(grep '^probe:' "$work/new.out")
  # The same without the usage counters of the cgroups that run long slices (CPU time from BPF
  # alone, as before session 36): the cost of reading them is the difference.
  nousage=$("$probe" --files-every 10 --every-tick-share "$every_tick" --pressure-every "$pressure_every" --pressure-named-only --seconds "$secs" \
            --max-cgroups "$max_cgroups" --no-usage | grep '^probe:')
  # The same with a CFS quota (non-binding: 2 CPUs) on every bench cgroup, as on a node whose
  # named containers all have CPU limits: theirs is the every-tick cpu.stat the collector skips
  # for a cgroup without a quota (it cannot be throttled).
  quotas on
  quota=$("$probe" --files-every 10 --every-tick-share "$every_tick" --pressure-every "$pressure_every" --pressure-named-only --seconds "$secs" \
          --max-cgroups "$max_cgroups" | grep '^probe:')
  quotas off
  echo "scale-legacy: possible_cpus=$ncpu containers=$n colod_rss_mib=$(get rss_mib "$old")" \
       "bpf_map_mib=$(mib "$(get bpf_map_bytes "$old")") colod_cpu_pct=$(get cpu_pct "$old")" \
       "read_bytes_per_tick=$(get read_bytes_per_tick "$old") tick_p99_ms=$(get tick_p99_ms "$old")" \
       "buffer_bytes_per_tick=$(get read_buffer_bytes "$old")" \
       "file_opens_per_tick=$(get file_opens_per_tick "$old")" \
       "reported_per_tick=$(get cgroups_reported_per_tick "$old") hwm_mib=$(get hwm_mib "$old")"
  echo "scale-files1: possible_cpus=$ncpu containers=$n colod_rss_mib=$(get rss_mib "$f1")" \
       "colod_cpu_pct=$(get cpu_pct "$f1") tick_p99_ms=$(get tick_p99_ms "$f1")"
  echo "scale-every-slot: possible_cpus=$ncpu containers=$n colod_cpu_pct=$(get cpu_pct "$every")" \
       "read_bytes_per_tick=$(get read_bytes_per_tick "$every") tick_p99_ms=$(get tick_p99_ms "$every")"
  echo "scale-quota: possible_cpus=$ncpu containers=$n quotas=$quota_set colod_cpu_pct=$(get cpu_pct "$quota")" \
       "file_reads_per_tick=$(get file_reads_per_tick "$quota") tick_p99_ms=$(get tick_p99_ms "$quota")"
  echo "scale-nousage: possible_cpus=$ncpu containers=$n colod_cpu_pct=$(get cpu_pct "$nousage")" \
       "file_reads_per_tick=$(get file_reads_per_tick "$nousage") tick_p99_ms=$(get tick_p99_ms "$nousage")" \
       "(with the usage counters: colod_cpu_pct=$(get cpu_pct "$new") file_reads_per_tick=$(get file_reads_per_tick "$new"))"
  if [[ -n "$calls" ]]; then
    awk -v c="$calls" -v s="$count_s" -v ns="$null_ns" -v n="$n" -v p="$ncpu" 'BEGIN {
      per_tick = c / (s * 10); pct = c / s * ns / 1e7
      printf "scale-floor: possible_cpus=%d containers=%d syscalls_per_tick=%.0f null_syscall_ns=%d syscall_floor_pct=%.2f\n", p, n, per_tick, ns, pct }'
  else
    echo "scale-floor: not measured (perf not found: apt install linux-perf)"
  fi
  echo "          $(sed 's/^probe: //' <<<"$new")"
  echo "scale: possible_cpus=$ncpu containers=$n colod_rss_mib=$(get rss_mib "$new")" \
       "bpf_map_mib=$(mib "$(get bpf_map_bytes "$new")") colod_cpu_pct=$(get cpu_pct "$new")" \
       "read_bytes_per_tick=$(get read_bytes_per_tick "$new") tick_p99_ms=$(get tick_p99_ms "$new")"
done
echo "scale: load at end $(cut -d' ' -f1-3 /proc/loadavg)" >&2
