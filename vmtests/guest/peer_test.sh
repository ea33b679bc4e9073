#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# peer_test.sh — runs in the vmtests guest (busybox sh, pure cgroup v2). Drives colod-testpeer
# over its control socket and checks, in the cgroup files themselves, that the updates a
# runtime applies land in v2 cgroups the way runc writes them: cpu.max, cpu.weight,
# cpuset.cpus, memory.max and cpu.idle via "unified". Also records one v2 kernel rule the
# daemon must live with: cpu.weight cannot be written while cpu.idle=1.
# Output is TAP ("ok N - name" / "not ok N - name"), which vmtests/run counts per check.
#
# Usage: peer_test.sh SCENARIO

scenario=$1
root=/sys/fs/cgroup
parent=vmpeer
ctl=/run/peer.ctl
log=/tmp/peer.log

. /vmtests/tap.sh
# check <name> <file> <expected>: the cgroup file's content (first line) equals expected.
check() {
  got=$(head -n 1 "$2" 2>&1)
  if [ "$got" = "$3" ]; then
    ok "$1 ($(basename "$2") = $got)"
  else
    notok "$1" "file: $2" "expected: $3" "got: $got"
  fi
}
req() {
  vm_unixcat "$ctl" "$1"
}

colod-testpeer --socket /run/nri/nri.sock --control "$ctl" --cgroup-root "$root" \
  --cgroup-parent "$parent" --scenario "$scenario" --log "$log" &
peer=$!
i=0
while [ ! -S "$ctl" ] && [ $i -lt 100 ]; do
  sleep 0.1
  i=$((i + 1))
done
if [ -S "$ctl" ]; then ok "peer control socket up"; else notok "peer control socket up" "$(cat $log)"; fi

# Pod + container: kubelet-shaped creation (request 500m → shares 512 → weight 20, limit 1 CPU,
# 256 MiB).
out=$(req '{"op":"run_pod","pod":"ls"}') && ok "run_pod" || notok "run_pod" "$out"
out=$(req '{"op":"create_start","container":"app"}') && ok "create_start" || notok "create_start" "$out"
cgpath=$(grep '"event":"container-created"' "$log" | head -n 1 | sed -n 's/.*"cgroups_path":"\([^"]*\)".*/\1/p')
dir=$root$cgpath
if [ -n "$cgpath" ] && [ -d "$dir" ]; then
  ok "container cgroup exists ($cgpath)"
else
  notok "container cgroup exists" "cgroups_path='$cgpath'" "$(tail -n 5 $log)"
fi
pid=$(grep '"event":"container-created"' "$log" | head -n 1 | sed -n 's/.*"pid":\([0-9]*\).*/\1/p')
if [ -n "$pid" ] && grep -qx "$pid" "$dir/cgroup.procs" 2>/dev/null; then
  ok "container process $pid is in its cgroup"
else
  notok "container process in its cgroup" "pid=$pid" "procs=$(cat "$dir/cgroup.procs" 2>&1)"
fi
check "create: cpu.max" "$dir/cpu.max" "100000 100000"
check "create: cpu.weight" "$dir/cpu.weight" "20"
check "create: memory.max" "$dir/memory.max" "268435456"

# A kubelet update with every v2 resource: request 250m → weight 10, limit 1.5 CPU, cpuset 1,
# 128 MiB.
out=$(req '{"op":"update","container":"app","resources":{"cpu_request_milli":250,"cpu_limit_milli":1500,"memory_limit_bytes":134217728,"cpus":"1","mems":"0"}}') &&
  ok "update (cpu, cpuset, memory)" || notok "update (cpu, cpuset, memory)" "$out"
check "update: cpu.max" "$dir/cpu.max" "150000 100000"
check "update: cpu.weight" "$dir/cpu.weight" "10"
check "update: cpuset.cpus" "$dir/cpuset.cpus" "1"
check "update: cpuset.cpus.effective" "$dir/cpuset.cpus.effective" "1"
check "update: memory.max" "$dir/memory.max" "134217728"
# The process is confined by the new cpuset (Cpus_allowed_list from the kernel).
allowed=$(awk '/^Cpus_allowed_list/{print $2}' /proc/$pid/status 2>/dev/null)
if [ "$allowed" = 1 ]; then ok "process runs only on cpu 1"; else notok "process runs only on cpu 1" "Cpus_allowed_list=$allowed"; fi

# cpu.idle through the unified map (the BE knob on >= 5.15).
out=$(req '{"op":"update","container":"app","resources":{"unified":{"cpu.idle":"1"}}}') &&
  ok "update (unified cpu.idle)" || notok "update (unified cpu.idle)" "$out"
check "update: cpu.idle" "$dir/cpu.idle" "1"
# Kernel rule (sched_group_set_shares, since 5.15 "sched: Cgroup SCHED_IDLE support"): an idle
# group refuses cpu.weight writes with EINVAL. Writers must clear cpu.idle first.
if echo 50 >"$dir/cpu.weight" 2>/dev/null; then
  notok "kernel refuses cpu.weight while cpu.idle=1" "the write succeeded"
else
  ok "kernel refuses cpu.weight while cpu.idle=1"
fi
out=$(req '{"op":"update","container":"app","resources":{"unified":{"cpu.idle":"0"}}}') &&
  ok "update (unified cpu.idle=0)" || notok "update (unified cpu.idle=0)" "$out"
check "update: cpu.idle back" "$dir/cpu.idle" "0"

# The event log records every write with its source; none failed.
writes=$(grep '"event":"cgroup-write"' "$log" | grep -c '"source":"kubelet"')
if [ "$writes" -ge 6 ]; then ok "cgroup-write events logged ($writes from kubelet updates)"; else notok "cgroup-write events logged" "count=$writes"; fi
failed=$(grep -c '"event":"cgroup-write-failed"' "$log")
if [ "$failed" = 0 ]; then ok "no cgroup-write-failed events"; else notok "no cgroup-write-failed events" "$(grep cgroup-write-failed $log)"; fi

out=$(req '{"op":"stop","container":"app"}') && ok "stop" || notok "stop" "$out"
out=$(req '{"op":"remove","container":"app"}') && ok "remove" || notok "remove" "$out"
if [ ! -d "$dir" ]; then ok "container cgroup removed"; else notok "container cgroup removed" "$dir still exists"; fi

kill -TERM $peer
wait $peer
rc=$?
if [ $rc = 0 ]; then ok "peer exits 0 on SIGTERM"; else notok "peer exits 0 on SIGTERM" "rc=$rc"; fi
if [ ! -d "$root/$parent" ]; then ok "peer removed $root/$parent"; else notok "peer removed $root/$parent" "$(find $root/$parent)"; fi

echo "1..$n"
if [ $fails != 0 ]; then
  echo "# peer log tail:"
  tail -n 30 "$log" | sed 's/^/# /'
  exit 1
fi
exit 0
