#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# The whole colod (daemon + collector, as shipped) against live containers (issue 17):
#   sudo scripts/bench/colod-scale.sh [size...]        (default 100 500 1000)
# scale.sh holds SIZE live cgroups, each with one process (1 in 10 wakes every 20 ms, the rest
# once a second); at each size this script starts colod-testpeer with SIZE synthetic containers
# in SIZE/4 pods whose cgroups paths are those cgroups (--synth-cgroups), every third pod
# BestEffort (--synth-besteffort-every 3: colod's BE; the rest Burstable, colod's LS, so about
# two thirds are protected containers the daemon reads every tick), then colod with the
# benchmark config (act, 100 ms), waits for the synchronization and for every container's cgroup
# to be resolved, and measures colod over COLOD_SCALE_SECONDS (20):
#   colod-scale: containers=<n> resolved=<n> node_cpus=<n> colod_rss_mib= colod_cpu_pct=
#                tick_overruns= ticks= event_rounds= decisions= colod_anon_mib=
# (event_rounds: decision rounds run on wakeups between ticks; decisions: what colod decided
# over the window. Where the protected containers wait past their thresholds, colod acts, and
# its cost is then that of acting, not of watching.)
# colod_cpu_pct is colod's user+sys CPU (every thread) over the window, % of one CPU;
# colod_rss_mib its largest VmRSS sampled over it; colod_anon_mib its largest RssAnon (its own
# heap, stacks and library data: the part that grows with containers; the rest of VmRSS is the
# libraries' and colod's mapped code, shared and reclaimable, which this host's DAMON reclaim
# makes vary by a MiB run to run). The last line is the largest size's.
# COLOD_BUILD_DIR: the build (default build); COLOD_DAEMON_SET / COLOD_POLICY_SET as
# colocation/colod-config.sh; COLOD_SCALE_PERF=FILE: `perf record -g` of colod over the window
# into FILE-<size> (the CPU figure then includes perf's own sampling cost);
# COLOD_SCALE_DECISIONS=FILE: `coloctl decisions -n 0` at the window's end into FILE-<size>
# (FILE-<label>-<size> with COLOD_SCALE_ALTERNATE).
# COLOD_SCALE_SCRAPES=N: before the window (and its own two scrapes for the counters), after 2 s
# of rest, N scrapes of /metrics 1 s apart; the line gains scrape_bytes= (the document),
# scrape_ms_max= (the slowest) and scrape_rss_growth_mib= (colod's VmRSS after them minus
# before, the first scrape of its life included: what scrapes leave resident).
# COLOD_SCALE_WATCH=1: colod only watches -- no protected container is ever over its threshold
# and no wakeup starts a round -- so the figure is the cost of watching, whatever this machine
# makes the LS wait (1000 here, session 42: 1.8-2.2 % watching; acting, 7.5-10.3 %).
# COLOD_SCALE_ALTERNATE="BIN..." (COLOD_SCALE_PAIRS, default 3): at each size, those colod
# binaries in turn, PAIRS times each, on the same live cgroups; each line is prefixed with its
# binary's file name (side-by-side runs: copy each build's colod aside first).
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(cd "$here/../.." && pwd)
build=${COLOD_BUILD_DIR:-$root/build}
[[ $build == /* ]] || build=$root/$build

if [[ -z ${SCALE_CONTAINERS:-} ]]; then
  # Outer call: scale.sh makes the cgroups and workers and calls this script back at each size.
  [[ $(id -u) -eq 0 ]] || { echo "colod-scale: must run as root" >&2; exit 3; }
  [[ -x $build/userspace/daemon/colod && -x $build/nri/testpeer/colod-testpeer &&
    -x $build/userspace/ctl/coloctl ]] ||
    { echo "colod-scale: build colod, colod-testpeer and coloctl in $build first" >&2; exit 3; }
  sizes=("$@")
  [[ ${#sizes[@]} -gt 0 ]] || sizes=(100 500 1000)
  out=$(mktemp /tmp/colod-scale-out-XXXXXX)
  trap 'rm -f "$out"' EXIT
  if [[ ${COLOD_SCALE_WATCH:-0} == 1 ]]; then
    never="runq_p99_us=60000000 baseline_factor=1000 wait_load_min=1000 severe_wait_load=1000"
    export COLOD_POLICY_SET="${COLOD_POLICY_SET:-} $never reclaim_stall_us_per_s=0"
    export COLOD_DAEMON_SET="${COLOD_DAEMON_SET:-} event_wait_threshold_us=0"
  fi
  hold="bash '$here/colod-scale.sh'"
  if [[ -n ${COLOD_SCALE_ALTERNATE:-} ]]; then
    for bin in $COLOD_SCALE_ALTERNATE; do
      [[ -x $bin ]] || { echo "colod-scale: $bin is not an executable colod" >&2; exit 3; }
    done
    hold="for _ in \$(seq 1 ${COLOD_SCALE_PAIRS:-3}); do for bin in $COLOD_SCALE_ALTERNATE; do
      COLOD_SCALE_COLOD=\$bin COLOD_SCALE_LABEL=\$(basename \$bin) $hold; done; done"
  fi
  COLOD_SCALE_OUT=$out COLOD_BUILD_DIR=$build SCALE_HOLD=$hold \
    bash "$here/scale.sh" "${sizes[@]}" | grep -v 'colod-scale:' || true
  cat "$out"
  exit 0
fi

# Inner call, from scale.sh: SCALE_CONTAINERS cgroups under SCALE_CGROUP_PREFIX<i> are live.
n=$SCALE_CONTAINERS prefix=${SCALE_CGROUP_PREFIX:?scale.sh names the cgroups}
secs=${COLOD_SCALE_SECONDS:-20}
run=$(mktemp -d /tmp/colod-scale-run-XXXXXX)
# shellcheck source=scripts/bench/colocation/lib.sh
source "$here/colocation/lib.sh"  # cb_stop_pids, cb_wait_socket
peer_pid='' colod_pid=''
trap 'cb_stop_pids "$colod_pid" "$peer_pid"; rm -rf "$run"' EXIT
die() { echo "colod-scale: $*" >&2; tail -5 "$run/colod.log" >&2 2>/dev/null || true; exit 1; }
pods=$(( n / 4 > 0 ? n / 4 : 1 ))
"$build/nri/testpeer/colod-testpeer" --socket "$run/nri.sock" --log "$run/peer.log" \
  --cgroup-parent "colod-scale-peer-$$" --synth-pods "$pods" --synth-containers "$n" \
  --synth-cgroups "$prefix" --synth-besteffort-every 3 >"$run/peer.stdout" 2>&1 &
peer_pid=$!
cb_wait_socket "$run/nri.sock" || die "peer socket did not appear"
bash "$here/colocation/colod-config.sh" "$run" >"$run/colod.yaml"
"${COLOD_SCALE_COLOD:-$build/userspace/daemon/colod}" --config "$run/colod.yaml" >"$run/colod.log" 2>&1 &
colod_pid=$!
ctl() { "$build/userspace/ctl/coloctl" -s "$run/colod.sock" "$@"; }
resolved=0
for _ in $(seq 1 600); do  # <= 60 s: synchronized and every cgroup resolved
  kill -0 "$colod_pid" 2>/dev/null || die "colod exited"
  resolved=$({ ctl dump 2>/dev/null || true; } | python3 -c '
import json, sys
try:
    d = json.load(sys.stdin)
except ValueError:
    print(0); sys.exit()
print(sum(1 for c in d.get("containers", []) if c.get("cgroup_id")))')
  ((resolved >= n)) && break
  sleep 0.1
done
((resolved >= n)) || die "$resolved of $n containers resolved to a cgroup in 60 s"
sleep 3  # past the resolution's own burst
stat_of() { ctl status -o json | python3 -c "import json,sys; print(json.load(sys.stdin)['$1'])"; }
ticks() { awk '{print $14 + $15}' "/proc/$colod_pid/stat"; }
hz=$(getconf CLK_TCK)
listen=$(sed -n 's/.*metrics_listen: "\(.*\)"/\1/p' "$run/colod.yaml")
counters() {  # "overruns event_rounds decisions" from colod's /metrics
  python3 -c "import sys, urllib.request
c = {'colod_tick_overruns_total': 0.0, 'colod_event_rounds_total': 0.0, 'colod_decisions_total': 0.0}
for l in urllib.request.urlopen('http://$listen/metrics', timeout=5).read().decode().splitlines():
    name = l.split('{')[0].split(' ')[0]
    if name in c:
        c[name] += float(l.split()[-1])
print(' '.join(str(int(v)) for v in c.values()))"
}
scrapes=''
if [[ -n ${COLOD_SCALE_SCRAPES:-} ]]; then  # N: before the window, N scrapes of /metrics, 1 s apart
  scrapes=$(python3 -c "import time, urllib.request
def rss():
    for l in open('/proc/$colod_pid/status'):
        if l.startswith('VmRSS:'):
            return int(l.split()[1])
time.sleep(2)
r0, worst, size = rss(), 0.0, 0
for _ in range($COLOD_SCALE_SCRAPES):
    t = time.monotonic()
    size = len(urllib.request.urlopen('http://$listen/metrics', timeout=10).read())
    worst = max(worst, time.monotonic() - t)
    time.sleep(1)
print(f' scrape_bytes={size} scrape_ms_max={worst * 1000:.0f} scrape_rss_growth_mib={(rss() - r0) / 1024:.1f}')")
fi
read -r ov0 ev0 dec0 < <(counters || echo "0 0 0")
t_0=$(stat_of ticks) cpu0=$(ticks) w0=$(date +%s.%N)
perf_pid=
if [[ -n ${COLOD_SCALE_PERF:-} ]]; then  # FILE: a perf profile of colod over the window
  perf record -q --call-graph "${COLOD_SCALE_PERF_CG:-fp}" -F "${COLOD_SCALE_PERF_FREQ:-499}" -p "$colod_pid" -o "$COLOD_SCALE_PERF-$n" -- sleep "$secs" \
    >/dev/null 2>&1 &
  perf_pid=$!
fi
max_kib=0 max_anon_kib=0
for _ in $(seq 1 $((secs * 2))); do
  read -r kib anon_kib < <(awk '/^VmRSS:/ {r = $2} /^RssAnon:/ {a = $2} END {print r, a}' \
    "/proc/$colod_pid/status")
  ((kib > max_kib)) && max_kib=$kib
  ((anon_kib > max_anon_kib)) && max_anon_kib=$anon_kib
  sleep 0.5
done
cpu1=$(ticks) w1=$(date +%s.%N) t_1=$(stat_of ticks)
[[ -z $perf_pid ]] || wait "$perf_pid" || true
if [[ -n ${COLOD_SCALE_DECISIONS:-} ]]; then  # FILE: what colod decided, kept for reading
  ctl decisions -n 0 >"$COLOD_SCALE_DECISIONS-${COLOD_SCALE_LABEL:+$COLOD_SCALE_LABEL-}$n" 2>&1 || true
fi
read -r ov1 ev1 dec1 < <(counters || echo "0 0 0")
python3 -c "import sys; n, r, k, c, hz, w0, w1, t, o0, o1, e0, e1, d0, d1, a = sys.argv[1:]; \
print(f'${COLOD_SCALE_LABEL:+$COLOD_SCALE_LABEL }colod-scale: containers={n} resolved={r} node_cpus=$(nproc) ' \
      f'colod_rss_mib={int(k) / 1024:.1f} ' \
      f'colod_cpu_pct={100 * int(c) / int(hz) / (float(w1) - float(w0)):.2f} ' \
      f'tick_overruns={int(o1) - int(o0)} ticks={t} ' \
      f'event_rounds={int(e1) - int(e0)} decisions={int(d1) - int(d0)} ' \
      f'colod_anon_mib={int(a) / 1024:.1f}$scrapes')" \
  "$n" "$resolved" "$max_kib" "$((cpu1 - cpu0))" "$hz" "$w0" "$w1" "$((t_1 - t_0))" \
  "${ov0:-0}" "${ov1:-0}" "${ev0:-0}" "${ev1:-0}" "${dec0:-0}" "${dec1:-0}" "$max_anon_kib" |
  tee -a "${COLOD_SCALE_OUT:-/dev/null}"
