#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# vmtests "daemon_scale" set (issue 17): the whole colod, as shipped (daemon, collector, NRI
# plugin, control API, /metrics), watching <containers> live containers on a guest booted with
# few online but many possible CPUs (-smp 2,maxcpus=N or possible_cpus=N). scale_test.sh
# measures the collector alone; this is the daemon's own memory at the issue's size, with every
# library, thread and registry it holds, where libbpf and anything sized by CPUs see N.
# The runtime is colod-testpeer with <containers> synthetic containers in <containers>/4 pods
# whose cgroups are the live cgroups made here (every third pod BestEffort: colod's BE; the rest
# Burstable, its LS), as scripts/bench/colod-scale.sh does on the host. colod only watches (its
# thresholds are set where no container crosses them: the cost of watching, not of acting).
# Prints `colod-scale-vm:` (recorded in docs/benchmarks.md). Checks: the possible CPUs, colod
# resolves every container to its cgroup, stays within the RSS budget over the window, its BPF
# maps within the issue's 48 MiB, cleanup. TAP output.
#   sh daemon_scale_test.sh <possible CPUs> [containers] [busy] [seconds]
want=${1:?possible CPUs}
count=${2:-1000}
busy=${3:-20}
seconds=${4:-20}
rss_budget_mib=32  # issue 17: colod at >= 256 possible CPUs and 1000 containers
maps_goal_mib=48
bin=/vmtests/bin
cgname=vmdscale
root=/sys/fs/cgroup/$cgname
d=/tmp/dscale
mkdir -p $d
export PATH="$bin:$PATH"

. /vmtests/tap.sh
. /vmtests/live_cgroups.sh
uptime_ms() { awk '{printf "%d", $1 * 1000}' /proc/uptime; }
wait_for() {  # <seconds> <shell condition>: polls every 0.5 s
  limit=$(($(uptime_ms) + $1 * 1000))
  while ! eval "$2"; do
    [ "$(uptime_ms)" -ge "$limit" ] && return 1
    sleep 0.5
  done
  return 0
}
# The harness (this script, the peer, coloctl) on CPU 0 where it can: colod's share of the
# emulated CPUs is what is measured, not the harness's.
taskset -p -c 0 $$ >/dev/null 2>&1

check_possible "$want"
# The containers' cgroups, c1..c<containers> (the peer's synthetic container i reports
# /$cgname/c<i>), the first <busy> spinning.
make_live_cgroups $root 1 "$count" "$busy" /tmp/dscale.

cleanup() {
  [ -n "${colod:-}" ] && kill "$colod" 2>/dev/null && wait "$colod" 2>/dev/null
  [ -n "${peer:-}" ] && kill "$peer" 2>/dev/null && wait "$peer" 2>/dev/null
  remove_live_cgroups
  echo "1..$n"
  [ $fails = 0 ]
  exit
}

# ---------------------------------------------------------------- the runtime and colod -----
pods=$((count / 4))
[ $pods -gt 0 ] || pods=1
colod-testpeer --socket $d/nri.sock --log $d/peer.log --cgroup-root /sys/fs/cgroup \
  --cgroup-parent vmdscale-peer --synth-pods $pods --synth-containers "$count" \
  --synth-cgroups "/$cgname/c" --synth-besteffort-every 3 >$d/peer.out 2>&1 &
peer=$!
wait_for 30 "[ -S $d/nri.sock ]" || { notok "peer up" "$(tail -n 5 $d/peer.log $d/peer.out)"; cleanup; }
# The benchmark config of the host's colod-scale.sh with COLOD_SCALE_WATCH=1: default policy,
# 100 ms ticks, thresholds no container crosses and no event rounds.
port=19480
cat >$d/colod.yaml <<EOF
daemon:
  interval_ms: 100
  nri_socket: $d/nri.sock
  mode: act
  cgroup_driver: cgroupfs
  control_socket: $d/colod.sock
  metrics_listen: "127.0.0.1:$port"
  journal_path: $d/journal.json
  restore_on_stop: true
  log_level: info
  event_wait_threshold_us: 0
policy:
  detection:
    wait_load_min: 1000
    severe_wait_load: 1000
  thresholds:
    runq_p99_us: 60000000
    baseline_factor: 1000
    reclaim_stall_us_per_s: 0
EOF
colod --config $d/colod.yaml >$d/colod.log 2>&1 &
colod=$!
metric() {  # <name>: the sum of that metric's samples on colod's /metrics ('' if none)
  wget -q -O - "http://127.0.0.1:$port/metrics" 2>/dev/null |
    awk -v m="$1" '{ split($1, a, "{") } a[1] == m { s += $NF; seen = 1 } END { if (seen) printf "%.0f", s }'
}
resolved() {
  c=$(metric colod_containers) u=$(metric colod_unresolved_containers)
  [ -n "$c" ] && [ -n "$u" ] && [ "$c" -ge "$count" ] && [ "$u" = 0 ]
}
start=$(uptime_ms)
if wait_for 300 "resolved || ! kill -0 $colod 2>/dev/null" && kill -0 $colod 2>/dev/null; then
  ok "colod resolved all $count containers to their cgroups ($(($(uptime_ms) - start)) ms after start)"
else
  notok "colod resolved all $count containers" "containers=${c:-?} unresolved=${u:-?}" \
    "$(tail -n 20 $d/colod.log)"
  cleanup
fi
sleep 3  # past the resolution's own burst

# ---------------------------------------------------------------- the window ----------------
hz=100  # USER_HZ: /proc/<pid>/stat counts in 1/100 s
cpu_ticks() { awk '{print $14 + $15}' /proc/$colod/stat; }
# Time colod's threads spent runnable but waiting for a CPU (ns, summed over its threads; the
# second field of schedstat, CONFIG_SCHED_INFO): a tick that overruns while colod waits is the
# node's load, one that overruns while it runs is colod's own work. Empty without schedstat.
runq_wait_ns() {
  cat /proc/$colod/task/*/schedstat 2>/dev/null | awk '{ s += $2; n++ } END { if (n) printf "%.0f", s }'
}
ticks0=$(metric colod_ticks_total) over0=$(metric colod_tick_overruns_total)
cpu0=$(cpu_ticks) wait0=$(runq_wait_ns) w0=$(uptime_ms)
max_kib=0
max_anon=0
k=0
while [ $k -lt $((seconds * 2)) ]; do
  # shellcheck disable=SC2046 # two numbers, split into $1 and $2 on purpose
  set -- $(awk '/^VmRSS:/ {r = $2} /^RssAnon:/ {a = $2} END {print r, a}' /proc/$colod/status)
  [ "${1:-0}" -gt $max_kib ] && max_kib=$1
  [ "${2:-0}" -gt $max_anon ] && max_anon=$2
  sleep 0.5
  k=$((k + 1))
done
cpu1=$(cpu_ticks) wait1=$(runq_wait_ns) w1=$(uptime_ms)
ticks1=$(metric colod_ticks_total) over1=$(metric colod_tick_overruns_total)
maps=$(metric colod_bpf_map_bytes)
hwm=$(awk '/^VmHWM:/ {print $2}' /proc/$colod/status)
line=$(awk -v p="$want" -v o="$online" -v n="$count" -v b="$busy" -v k="$max_kib" -v a="$max_anon" -v h="$hwm" \
  -v m="${maps:-0}" -v c=$((cpu1 - cpu0)) -v hz="$hz" -v w=$((w1 - w0)) \
  -v t=$((${ticks1:-0} - ${ticks0:-0})) -v ov=$((${over1:-0} - ${over0:-0})) \
  -v q0="${wait0:-}" -v q1="${wait1:-}" 'BEGIN {
  printf "colod-scale-vm: possible_cpus=%d online=%s containers=%d busy=%d colod_rss_mib=%.1f " \
    "colod_anon_mib=%.1f colod_hwm_mib=%.1f bpf_map_mib=%.1f colod_cpu_pct_tcg=%.2f ticks=%d " \
    "tick_overruns=%d",
    p, o, n, b, k / 1024, a / 1024, h / 1024, m / 1048576, 100 * c / hz / (w / 1000), t, ov
  # Per tick: the CPU colod used and the time it waited for one, in ms (schedstat; NA without).
  # (Parenthesized: in awk a bare > in a printf argument list redirects the output.)
  printf(" cpu_ms_per_tick=%.1f", (t > 0 ? 1000 * c / hz / t : 0))
  if (q0 != "" && q1 != "" && t > 0) printf(" runq_wait_ms_per_tick=%.1f\n", (q1 - q0) / 1e6 / t)
  else printf(" runq_wait_ms_per_tick=NA\n") }')
echo "$line"
awk -v r="$max_kib" -v b=$rss_budget_mib 'BEGIN{exit !(r > 0 && r / 1024 <= b)}' &&
  ok "colod RSS $(awk -v r="$max_kib" 'BEGIN{printf "%.1f", r / 1024}') MiB within $rss_budget_mib MiB over ${seconds} s ($count containers, $want possible CPUs)" ||
  notok "colod RSS within $rss_budget_mib MiB" "$line"
[ "${maps:-0}" -gt 0 ] && [ "$maps" -le $((maps_goal_mib * 1048576)) ] &&
  ok "colod's BPF maps within $maps_goal_mib MiB ($maps bytes)" ||
  notok "colod's BPF maps within $maps_goal_mib MiB" "colod_bpf_map_bytes=${maps:-none}"
kill -0 $colod 2>/dev/null && ok "colod still running after the window" ||
  notok "colod still running" "$(tail -n 20 $d/colod.log)"
cleanup
