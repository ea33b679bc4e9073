#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# e2e_test.sh — runs in the vmtests guest (busybox sh, pure cgroup v2, kernel 6.1, TCG). The
# whole loop in a few tens of seconds: the real daemon (colod: BPF collector → policy → NRI)
# against the runtime peer (colod-testpeer, applies NRI updates to v2 cgroups like runc): an LS
# pod running the colod-probe request loop pinned to CPU 1, and a BE pod whose four CPU hogs may
# run on CPUs 0-1, so they contend on CPU 1 (the LS pod is not exclusive: Burstable, no static
# CPU manager). Checks: colod sees both containers with their tiers (annotations), detects the
# LS victim, its update lands in the BE container's v2 cgroup files through the peer's NRI
# update path, it is kept (at least half the time) while the hog runs, coloctl and /metrics report it
# against the live daemon, the BE going idle leads to release (original values, a relax
# decision), and, with the hog back and restricted again, a clean stop (SIGTERM) restores the
# runtime's own values and empties the journal.
# Output is TAP ("ok N - name" / "not ok N - name"), counted per check by vmtests/run. Waits
# are bounded polls with wide margins (TCG is slow and the host is shared); assertions are about
# direction and orders of magnitude, never exact values.
#
# Usage: e2e_test.sh

d=/tmp/e2e
root=/sys/fs/cgroup
parent=vme2e
ctl=/run/e2e-peer.ctl
nri=/run/nri/nri.sock
sock=$d/colod.sock
plog=$d/peer.log
clog=$d/colod.log
journal=$d/journal.json
bin=/vmtests/bin
mkdir -p $d
# The harness (this script, the peer, colod, coloctl) runs on CPU 0, like system-reserved CPUs:
# under TCG a coloctl start or a colod tick costs milliseconds of CPU, and on CPU 1 it would
# queue the LS probe as much as the BE does (colod rightly calls that self-inflicted). The
# containers' processes get their own cpusets' CPUs when the peer moves them into their
# cgroups (cpuset_attach resets the affinity); checked below.
taskset -p -c 0 $$ >/dev/null || echo "# taskset failed: the harness shares CPU 1 with the LS"

. /vmtests/tap.sh
# t0: guest uptime in ms when the script started; now_ms: ms since then.
uptime_ms() { awk '{printf "%d", $1 * 1000}' /proc/uptime; }
t0=$(uptime_ms)
now_ms() { echo $(($(uptime_ms) - t0)); }
# wait_for <seconds> <shell condition>: polls every 0.2 s; 0 when the condition held in time.
wait_for() {
  limit=$(($(uptime_ms) + $1 * 1000))
  while ! eval "$2"; do
    [ "$(uptime_ms)" -ge "$limit" ] && return 1
    sleep 0.2
  done
  return 0
}
req() { vm_unixcat "$ctl" "$1"; }
coloctl_() { coloctl --socket "$sock" "$@" 2>&1; }
# be_values: "weight=<cpu.weight> max=<cpu.max> cpus=<cpuset.cpus>" of the BE container.
be_values() {
  echo "weight=$(cat "$be_dir/cpu.weight") max=$(cat "$be_dir/cpu.max" | tr ' ' /) cpus=$(cat "$be_dir/cpuset.cpus")"
}
diag() {
  echo "# colod log tail:"
  tail -n 40 $clog | sed 's/^/#   /'
  echo "# peer log (cgroup writes, updates):"
  grep -E 'cgroup-write|update-re|plugin-closed' $plog | tail -n 20 | sed 's/^/#   /'
  echo "# coloctl top:"
  coloctl_ top --once | sed 's/^/#   /'
  echo "# probe:"
  tail -n 5 $d/probe.out 2>/dev/null | sed 's/^/#   /'
}
finish() {
  echo "1..$n"
  [ -n "$colod" ] && kill -KILL "$colod" 2>/dev/null
  if [ -n "$peer" ]; then
    kill -TERM "$peer" 2>/dev/null
    wait "$peer" 2>/dev/null
  fi
  [ $fails = 0 ] && exit 0
  exit 1
}

# ---------------------------------------------------------------- workloads -----------------
# LS: the open-loop request probe (one thread, a 500 µs request every 1 ms: half a CPU), one process for the whole test (a new process every few seconds
# brought kernel work onto CPU 1 that showed up as LS run-queue noise). Its demand is far above
# 80 % of the share the container weights give it against the BE (2 CPUs x 1/41), one of the two
# conditions for the policy to hold a cross-pod rung while the hog runs (see "hold"). BE: four
# shell busy loops that pin each work chunk to CPU 1 (taskset), so they contend with the LS on
# CPU 1 whenever their cpuset allows it; when colod's split leaves them CPU 0 only, the kernel
# refuses that affinity and the chunk runs where the cpuset says (6.1 resets a task's affinity
# to its cpuset on every cpuset change, so a one-time pin would be lost at the first relax; left
# to the balancer, the hogs sometimes all stayed on CPU 0 and nothing hurt the LS). They idle
# while the file pause-be exists (the "BE hog stops" phase) and end on stop.
cat >$d/ls.sh <<EOF
exec $bin/colod-probe -t 1 -w 500 -p 1000 -d 600 >$d/probe.out 2>&1
EOF
mkfifo $d/resume
cat >$d/be.sh <<EOF
chunk='i=0; while [ \$i -lt 20000 ]; do i=\$((i + 1)); done'
hog() {
  while [ ! -e $d/stop ]; do
    if [ -e $d/pause-be ]; then
      # Paused: blocked on the resume fifo, not running at all. A hog that polled with
      # "touch; sleep 0.2" forked twice per loop, and under TCG those forks preempted the LS
      # enough to be blamed: two CI runs saw colod restrict the "idle" hog again.
      : >$d/idle.\$1
      read _ <$d/resume
      continue
    fi
    rm -f $d/idle.\$1
    taskset -c 1 sh -c "\$chunk" 2>/dev/null || sh -c "\$chunk"
  done
}
hog 1 &
hog 2 &
hog 3 &
hog 4
wait
exec sleep 3600
EOF

# ---------------------------------------------------------------- the runtime ---------------
colod-testpeer --socket $nri --control $ctl --cgroup-root $root --cgroup-parent $parent \
  --log $plog &
peer=$!
if wait_for 20 "[ -S $ctl ] && [ -S $nri ]"; then
  ok "peer up (NRI socket and control socket)"
else
  notok "peer up" "$(tail -n 5 $plog)"
  finish
fi

# ---------------------------------------------------------------- colod ---------------------
# The policy's default windows (100 ms ticks, a rung judged after 1 s, given back after 1 s of
# quiet): the loop fits TCG's budget as it is, and shorter quiet windows only make the relax /
# re-engage cycles below faster.
# Detection tuned to what TCG can tell apart (measured in this guest): the LS's run-queue p99
# includes host-side steal of the emulated vCPU (the host has 2 cores for 2 vCPU threads plus
# other work), 8-16 ms in single intervals as soon as vCPU 0 is busy, even with the BE split
# away from CPU 1, while its wait load stays at 0.07-0.14 tasks (12-19 % of its runnable time).
# Behind the BE hog on CPU 1 its wait load is 0.2-0.6 tasks at 27-53 %. So the p99 path only
# fires on gross latency (> 30 ms; the effective threshold is min(runq_p99_us, max(baseline,
# floor) x 4)) and the wait signal does the work with wait_share 0.25 (default 0.5,
# wait_load_min stays 0.2).
cat >$d/colod.yaml <<EOF
daemon:
  interval_ms: 100
  nri_socket: $nri
  plugin_idx: "50"
  control_socket: $sock
  metrics_listen: 127.0.0.1:0
  journal_path: $journal
  log_level: info
policy:
  detection:
    wait_share: 0.25
  thresholds:
    runq_p99_us: 30000
    baseline_floor_us: 10000
EOF
if colod --check-config $d/colod.yaml >$d/check.out 2>&1; then
  ok "colod --check-config accepts the e2e config"
else
  notok "colod --check-config" "$(cat $d/check.out)"
fi
colod --config $d/colod.yaml >$clog 2>&1 &
colod=$!
start=$(now_ms)
if wait_for 60 "coloctl_ status >/dev/null || ! kill -0 $colod 2>/dev/null" && kill -0 $colod 2>/dev/null; then
  ok "colod up: control API answers ($(($(now_ms) - start)) ms after start)"
else
  notok "colod up" "$(tail -n 20 $clog)"
  finish
fi
if wait_for 30 "coloctl_ status | grep -q 'mode: *act'"; then
  ok "colod connected to the runtime (mode act)"
else
  notok "colod connected to the runtime (mode act)" "$(coloctl_ status)"
fi
grep -i 'attach\|bpf\|collector' $clog | head -n 5 | sed 's/^/# /'

# ---------------------------------------------------------------- pods ----------------------
# Tiers from the colod.io/tier pod annotation; BE asks for 40x the LS CPU request (a small
# Burstable LS, 100m, next to a big batch pod, 4 CPUs; cpu.weight 4 vs 157), using far more than
# its request, so CFS makes it wait behind the hogs (with 250m and a third of a CPU, on an idle
# host the LS's wake-ups preempted the hogs and nothing hurt it); LS pinned to CPU 1,
# BE on CPUs 0-1.
req '{"op":"add_pod","pod_spec":{"name":"web","namespace":"prod","qos":"burstable","annotations":{"colod.io/tier":"ls"}}}' >/dev/null &&
  req "{\"op\":\"add_container\",\"container_spec\":{\"name\":\"server\",\"pod\":\"web\",\"command\":[\"sh\",\"$d/ls.sh\"],\"resources\":{\"cpu_request_milli\":100,\"cpus\":\"1\"}}}" >/dev/null &&
  req '{"op":"add_pod","pod_spec":{"name":"batch","namespace":"jobs","qos":"burstable","annotations":{"colod.io/tier":"be"}}}' >/dev/null &&
  req "{\"op\":\"add_container\",\"container_spec\":{\"name\":\"hog\",\"pod\":\"batch\",\"command\":[\"sh\",\"$d/be.sh\"],\"resources\":{\"cpu_request_milli\":4000,\"cpus\":\"0-1\"}}}" >/dev/null &&
  ok "pods and containers defined" || notok "pods and containers defined"
out=$(req '{"op":"run_pod","pod":"web"}') && out=$(req '{"op":"create_start","container":"server"}') &&
  ok "LS container started" || notok "LS container started" "$out"
ls_pid=$(echo "$out" | sed -n 's/.*"pid":\([0-9]*\).*/\1/p')
a=$(awk '/^Cpus_allowed_list/{print $2}' /proc/$ls_pid/status 2>&1)
[ "$a" = 1 ] && ok "LS process runs on CPU 1 only" || notok "LS process runs on CPU 1 only" "pid=$ls_pid Cpus_allowed_list=$a"
# Quiet phase: the LS probe alone. colod must not act (no BE to blame, and noise is not a victim).
sleep 1
for i in 1 2 3 4; do
  sleep 1
  coloctl_ top --once | sed 's/^/# quiet: /'
done
coloctl_ explain prod/web/server | sed 's/^/# quiet: /'
c=$(grep -c 'decision seq=' $clog)
[ "$c" = 0 ] && ok "no decision while the LS runs alone (5 s)" ||
  notok "no decision while the LS runs alone" "$(grep 'decision seq=' $clog | cut -c 1-200)"
out=$(req '{"op":"run_pod","pod":"batch"}') && be=$(req '{"op":"create_start","container":"hog"}') &&
  ok "BE container started" || notok "BE container started" "$out $be"
hog_start=$(now_ms)
be_rel=$(echo "$be" | sed -n 's/.*"cgroup_rel":"\([^"]*\)".*/\1/p')
be_pid=$(echo "$be" | sed -n 's/.*"pid":\([0-9]*\).*/\1/p')
a=$(awk '/^Cpus_allowed_list/{print $2}' /proc/$be_pid/status 2>&1)
be_dir=$root/$be_rel
if [ -n "$be_rel" ] && [ -r "$be_dir/cpu.weight" ]; then
  ok "BE cgroup $be_rel"
else
  notok "BE cgroup" "reply: $be"
  finish
fi
# The original values are what the runtime wrote at create (the peer's log), not what the files
# hold by now: with the hog running colod may act within 100 ms.
created() {
  grep '"event":"cgroup-write"' $plog | grep '"source":"create"' | grep "$(basename "$be_rel")/$1\"" |
    head -n 1 | sed -n 's/.*"new":"\([^"]*\)".*/\1/p'
}
orig="weight=$(created cpu.weight) max=$(created cpu.max | tr ' ' /) cpus=$(created cpuset.cpus)"
echo "# BE original (written at create): $orig"
case "$orig" in
  *'= '* | *'=' ) notok "BE original values in the peer log" "$orig" ;;
  *) ok "BE original values in the peer log: $orig" ;;
esac
# The process was moved into its cgroup from the peer (on CPU 0): cpuset_attach gave it the
# cpuset's CPUs (colod's split may already have narrowed them to 0).
case "$a" in
  0-1 | 0) ok "BE process runs on its cpuset's CPUs ($a), not the harness's CPU 0 only" ;;
  *) notok "BE process runs on its cpuset's CPUs" "pid=$be_pid Cpus_allowed_list=$a" ;;
esac
# coloctl sees both containers with their tiers.
if wait_for 30 "coloctl_ top --once | grep -q 'prod/web/server' && coloctl_ top --once | grep -q 'jobs/batch/hog'"; then
  ok "coloctl top lists both containers"
else
  notok "coloctl top lists both containers" "$(coloctl_ top --once)"
fi
out=$(coloctl_ explain prod/web/server)
echo "$out" | grep -q 'tier: ls' && ok "explain server: tier ls" || notok "explain server: tier ls" "$out"
out=$(coloctl_ explain jobs/batch/hog)
echo "$out" | grep -q 'tier: be' && ok "explain hog: tier be" || notok "explain hog: tier be" "$out"

# ---------------------------------------------------------------- engage --------------------
# The journal is written before the update is sent, into its write-ahead copy <journal>.next
# (journal_ahead.h), and the journal itself takes the same right after: what a restarted colod
# would load is the copy while it is live ('W' and the journal's text), else the journal. The
# copy is taken first: the journal is whole before the copy is emptied.
journal_now() {
  cp $journal.next $d/journal.ahead 2>/dev/null || : >$d/journal.ahead
  if [ "$(head -c 1 $d/journal.ahead)" = W ]; then tail -c +2 $d/journal.ahead; else cat $journal; fi
}
# Copied as soon as the change is seen (a relax may follow a second later).
if wait_for 60 'engaged=$(be_values); [ "$engaged" != "$orig" ] && journal_now >$d/journal.engaged'; then
  ok "colod restricted the BE cgroup ($(($(now_ms) - hog_start)) ms after the hog started): $engaged"
else
  notok "colod restricted the BE cgroup within 60 s" "still $(be_values)"
  diag
  finish
fi
# Direction: every change is a restriction (no higher weight, no looser quota, CPUs only taken
# away), never a loosening; and something changed.
restrict=$(awk -v o="$orig" -v e="$engaged" '
  function cpus(l, set,   n, r, i, a, lo, hi, c) {
    n = split(l, r, ",")
    for (i = 1; i <= n; i++) {
      if (split(r[i], a, "-") == 2) { lo = a[1]; hi = a[2] } else { lo = r[i]; hi = r[i] }
      for (c = lo + 0; c <= hi + 0; c++) set[c] = 1
    }
  }
  BEGIN {
    split(o, a, " "); split(e, b, " "); ok = (o != e)
    for (i = 1; i <= 3; i++) { split(a[i], x, "="); split(b[i], y, "="); ov[x[1]] = x[2]; ev[y[1]] = y[2] }
    if (ev["weight"] + 0 > ov["weight"] + 0) ok = 0
    split(ov["max"], oq, "/"); split(ev["max"], eq, "/")
    if (oq[1] != eq[1]) { if (eq[1] == "max") ok = 0; else if (oq[1] != "max" && eq[1] + 0 > oq[1] + 0) ok = 0 }
    cpus(ov["cpus"], os); cpus(ev["cpus"], es)
    for (c in es) if (!(c in os)) ok = 0
    print ok
  }')
if [ "$restrict" = 1 ]; then
  ok "the change restricts BE ($orig -> $engaged)"
else
  notok "the change restricts BE" "$orig -> $engaged"
fi
# The update went through the runtime: the peer logged the cgroup write it applied for an NRI
# UpdateContainers (source update), not something colod wrote itself.
if grep '"event":"cgroup-write"' $plog | grep '"source":"update"' | grep -q "$(basename "$be_rel")"; then
  ok "the peer applied colod's NRI update to the BE cgroup"
else
  notok "the peer applied colod's NRI update" "$(grep cgroup-write $plog | tail -n 5)"
fi

line=$(grep -m1 'decision seq=' $clog)
if echo "$line" | grep -q 'victim=prod/web/server' && echo "$line" | grep -q 'target=jobs/batch/hog'; then
  ok "colod logged the decision: victim prod/web/server, target jobs/batch/hog"
else
  notok "colod logged the decision with victim and target" "$line"
fi
echo "# $line"
grep -q '"overlay":{"' $d/journal.engaged && grep -q '"base":{"' $d/journal.engaged &&
  ok "journal holds the overlay and the runtime's own values (write-ahead)" ||
  notok "journal holds the overlay and the runtime's own values" "$(cat $d/journal.engaged 2>&1)"

# ---------------------------------------------------------------- hold ----------------------
# How much of the time colod keeps the BE restricted while the hog runs (sampled every 0.25 s
# for 3 s). Reported, not asserted: the policy holds a cross-pod rung only while the BE uses
# >= 90 % of what the rung leaves it, and here the BE shares CPU 0 with the harness and colod,
# so relax and re-engage alternate (with a growing relax backoff) at a pace set by TCG and the
# host's load (5-9 of 5-9 samples in most runs, less on a loaded host). That colod comes back
# after a relax is asserted below (the hog back after the release).
r=0
t=0
limit=$(($(uptime_ms) + 3000))
while [ "$(uptime_ms)" -lt "$limit" ]; do
  t=$((t + 1))
  [ "$(be_values)" != "$orig" ] && r=$((r + 1))
  sleep 0.25
done
echo "# hold: BE restricted in $r of $t samples over 3 s while the hog runs"
grep 'decision seq=' $clog | cut -c 28-140 | sed 's/^/#   /'

# ---------------------------------------------------------------- coloctl, /metrics ---------
# Against the live daemon while the hog runs (coloctl starts cost CPU 0 time under TCG, so they
# come after the hold check). The decision on the BE was applied, with a reason.
if wait_for 10 "coloctl_ decisions | grep 'jobs/batch/hog' | grep -q applied"; then
  ok "coloctl decisions: applied decision on jobs/batch/hog"
else
  notok "coloctl decisions: applied decision on jobs/batch/hog" "$(coloctl_ decisions)"
fi
# (explain on a BE says "held by colod: <values> (runtime's own: <values>) because ...".)
if wait_for 10 "coloctl_ explain jobs/batch/hog >$d/explain.out; grep -q \"^ *held by colod: [a-z_]*=.*(runtime's own\" $d/explain.out"; then
  ok "explain hog shows the restriction held on it"
else
  notok "explain hog shows the restriction held on it" "$(cat $d/explain.out)"
fi
out=$(coloctl_ hist prod/web/server)
echo "$out" | grep -q usecs && ok "coloctl hist server (run-queue histogram)" || notok "coloctl hist server" "$out"
out=$(coloctl_ dump --json)
c=$(echo "$out" | grep -o '"tier": *"[a-z]*"' | sort | uniq -c | tr -s ' ' | tr '\n' ';')
case "$c" in
  *'1 "tier": "be"'* | *'1 "tier":"be"'*) ok "coloctl dump --json: containers with tiers ($c)" ;;
  *) notok "coloctl dump --json: containers with tiers" "$c" "$(echo "$out" | head -c 600)" ;;
esac
# /metrics on the loopback (busybox wget).
port=$(sed -n 's|.*metrics on http://[^:]*:\([0-9]*\)/metrics.*|\1|p' $clog | head -n 1)
m=$(wget -q -O - "http://127.0.0.1:$port/metrics" 2>&1)
conn=$(echo "$m" | awk '$1 == "colod_nri_connected" {print $2}')
dec=$(echo "$m" | awk '$1 == "colod_decisions_total" || $1 ~ /^colod_decisions_total\{/ {s += $2} END {print s + 0}')
lat=$(echo "$m" | awk '$1 ~ /^colod_runqueue_latency_seconds_count\{.*container="server"/ {s += $2} END {print s + 0}')
if [ "$conn" = 1 ] && [ "$dec" -ge 1 ] && [ "$lat" -gt 0 ]; then
  ok "/metrics: nri_connected=1 decisions_total=$dec server runq samples=$lat"
else
  notok "/metrics" "port=$port connected=$conn decisions=$dec server_samples=$lat" "$(echo "$m" | head -c 400)"
fi


# ---------------------------------------------------------------- release -------------------
# The BE hog goes idle: the contention is gone, colod gives everything back (a relax decision,
# not an undo of a rung judged ineffective). Wait until the BE is restricted at the moment the
# hog stops, so the release is the consequence of the stop.
wait_for 30 '[ "$(be_values)" != "$orig" ]'
before=$(grep -c 'decision seq=' $clog)
touch $d/pause-be
start=$(now_ms)
# A hog finishes the work chunk it is in before it sees the pause (under TCG a chunk can take a
# few seconds: 6 s seen with four hogs on CPU 0), and colod may relax on its quiet timer and
# re-engage on that chunk meanwhile (a CI run failed on exactly that): the
# release is judged from when all four hogs are idle (each marks it with idle.N).
if wait_for 30 '[ $(ls $d/idle.* 2>/dev/null | wc -l) = 4 ]'; then
  idle_at=$(now_ms)
  echo "# BE hogs idle $((idle_at - start)) ms after the pause"
else
  notok "BE hogs idle within 30 s of the pause" "$(ls $d/idle.* 2>&1)"
fi
if wait_for 60 '[ "$(be_values)" = "$orig" ]'; then
  ok "BE idle: released to the original values ($(($(now_ms) - ${idle_at:-$start})) ms after the hogs went idle)"
else
  notok "BE idle: released to the original values within 60 s" "now $(be_values), original $orig"
  diag
fi
after=$(grep 'decision seq=' $clog | tail -n +$((before + 1)))
if echo "$after" | grep -q 'kind=relax'; then
  ok "the release is a relax decision: $(echo "$after" | grep -m1 -o 'kind=relax.* rule=[a-z_]*' | cut -c 1-120)"
else
  notok "the release is a relax decision" "$(echo "$after" | cut -c 1-200)"
fi
if wait_for 10 "! grep -q '\"id\"' $journal"; then
  ok "journal empty after the release"
else
  notok "journal empty after the release" "$(cat $journal)"
fi
# With the hog idle nothing brings the restriction back (while it ran, relax and re-engage could
# alternate, see "hold").
back=0
limit=$(($(uptime_ms) + 3000))
while [ "$(uptime_ms)" -lt "$limit" ]; do
  [ "$(be_values)" != "$orig" ] && back=1
  sleep 0.25
done
[ $back = 0 ] && ok "BE idle: stays at the original values (3 s)" ||
  notok "BE idle: stays at the original values (3 s)" "$(grep -E 'decision seq=|finding' $clog | tail -n 4 | cut -c 1-900)"
coloctl_ decisions | grep -q relax && ok "coloctl decisions shows the relax" ||
  notok "coloctl decisions shows the relax" "$(coloctl_ decisions)"

# ---------------------------------------------------------------- clean stop ----------------
# The hog comes back, colod restricts it again, and is stopped right then: a rung stays at
# least a verify / quiet window (1 s) after it was applied, so the SIGTERM finds it in force
# (polling sees the change within ~0.5 s). Clean stop: originals restored.
rm -f $d/pause-be
# Wake the paused hogs: opening the fifo for writing releases every hog blocked opening it; one
# that reached the open just after is released by the next round.
for _ in 1 2 3 4 5 6 7 8 9 10; do
  [ "$(ls $d/idle.* 2>/dev/null | wc -l)" = 0 ] && break
  timeout 1 sh -c "echo >$d/resume" 2>/dev/null
  sleep 0.3
done
start=$(now_ms)
if wait_for 60 '[ "$(be_values)" != "$orig" ]'; then
  at_kill=$(be_values)
  stop_start=$(now_ms)
  kill -TERM $colod
  ok "BE busy again: restricted again ($(($(now_ms) - start)) ms): $at_kill"
else
  notok "BE busy again: restricted again within 60 s" "still $(be_values)"
  diag
fi

[ -n "$stop_start" ] || stop_start=$(now_ms)
kill -TERM $colod 2>/dev/null
# CPU time of colod over the whole run (utime + stime ticks; readable until it is reaped).
cpu_ticks=$(awk '{print $14 + $15}' /proc/$colod/stat 2>/dev/null)
if wait_for 30 "! kill -0 $colod 2>/dev/null"; then
  wait $colod
  rc=$?
  [ $rc = 0 ] && ok "colod exits 0 on SIGTERM ($(($(now_ms) - stop_start)) ms)" || notok "colod exits 0 on SIGTERM" "rc=$rc" "$(tail -n 10 $clog)"
else
  notok "colod exits on SIGTERM within 30 s" "$(tail -n 10 $clog)"
fi
colod=""
if [ "$at_kill" != "$orig" ] && [ "$(be_values)" = "$orig" ]; then
  ok "clean stop restored the originals ($at_kill -> $orig)"
else
  notok "clean stop restored the originals" "at SIGTERM $at_kill, now $(be_values), original $orig"
fi
grep -q target_id $journal && notok "journal empty after the clean stop" "$(cat $journal)" ||
  ok "journal empty after the clean stop"
grep -q 'colod is stopping' $clog && ok "colod logged its stop" || notok "colod logged its stop"
# No write the peer applied failed.
if grep -q '"event":"cgroup-write-failed"' $plog; then
  notok "no cgroup-write-failed in the peer log" "$(grep cgroup-write-failed $plog | head -n 3)"
else
  ok "no cgroup-write-failed in the peer log"
fi
touch $d/stop
echo "# decisions:"
grep 'decision seq=' $clog | sed 's/^/#   /' | cut -c 1-220
echo "# $(grep -c '"source":"update"' $plog) cgroup writes from NRI updates; colod CPU: ${cpu_ticks} ticks in $(($(now_ms) / 1000)) s"

kill -TERM $peer
wait $peer
rc=$?
peer=""
[ $rc = 0 ] && ok "peer exits 0 on SIGTERM" || notok "peer exits 0 on SIGTERM" "rc=$rc"
[ ! -d $root/$parent ] && ok "peer removed $root/$parent" || notok "peer removed $root/$parent" "$(find $root/$parent | head)"
[ $fails != 0 ] && diag
finish
