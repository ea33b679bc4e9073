#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# The process inside every benchmark/demo "container": it waits on a FIFO for commands, so the
# container (its cgroup, its NRI identity) lives for the whole benchmark while the workload it
# runs is started per phase.
#   worker.sh FIFO OUTDIR NAME KIND [ARGS...]
# KIND: probe  ARGS = colod-probe binary, then its extra flags (e.g. --iters-per-us X)
#       redis  ARGS = port            (redis-server runs for the container's life; a phase runs
#                                      redis-benchmark bursts against it from inside the container)
#       stress ARGS = stress-ng stressor flags (e.g. --cpu 2)
# Commands, one per line on the FIFO:
#   run TAG SECONDS   run the workload SECONDS, write OUTDIR/TAG.NAME.out, then OUTDIR/TAG.NAME.done
#                     (probe: "run TAG SECONDS FLAGS..." adds the flags, e.g. -w 100 for a lighter load)
#   exit              stop
set -u
fifo=$1 outdir=$2 name=$3 kind=$4
shift 4

redis_pid=
cleanup() {
  if [[ -n $redis_pid ]]; then
    kill "$redis_pid" 2>/dev/null
    wait "$redis_pid" 2>/dev/null
  fi
}
trap cleanup EXIT
trap 'exit 0' TERM INT

if [[ $kind == redis ]]; then
  port=$1
  redis-server --port "$port" --bind 127.0.0.1 --save "" --appendonly no --daemonize no \
    --logfile "$outdir/redis-$name.log" &
  redis_pid=$!
  for _ in $(seq 1 100); do
    redis-cli -p "$port" ping >/dev/null 2>&1 && break
    sleep 0.05
  done
fi

run_redis() {  # TAG SECONDS: bursts of 1000 GETs every 0.5 s (light: a second LS, not a hog)
  local end=$((SECONDS + $2)) i=0
  while ((SECONDS < end && i < 100000)); do
    redis-benchmark -p "$port" -n 1000 -c 2 -t get --csv 2>/dev/null | tail -n 1
    sleep 0.5
    i=$((i + 1))
  done
}

# Bounded: at most 10000 commands, each a bounded run.
for _ in $(seq 1 10000); do
  if ! read -r cmd tag secs extra <"$fifo"; then
    sleep 0.05
    continue
  fi
  case $cmd in
    run)
      out=$outdir/$tag.$name.out
      # When the workload starts, stamped here: the harness's own stamp, taken by a shell
      # starved beside the phase's load, was off by up to hundreds of ms (summarize.py prefers
      # this one).
      date +%s%N >"$outdir/$tag.$name.start"
      case $kind in
        probe)
          # shellcheck disable=SC2086  # extra: the phase's probe flags, e.g. "-w 100"
          # The late log (requests over 1 ms) times when the LS was first hurt (summarize.py).
          "$1" "${@:2}" ${extra:-} -d "$secs" --late-us 1000 \
            --late-log "$outdir/$tag.$name.late" >"$out" 2>&1 ;;
        redis) run_redis "$tag" "$secs" >"$out" 2>&1 ;;
        stress) stress-ng "$@" --timeout "${secs}s" --metrics-brief >"$out" 2>&1 ;;
      esac
      echo "rc=$?" >"$outdir/$tag.$name.done"
      ;;
    exit) exit 0 ;;
  esac
done
