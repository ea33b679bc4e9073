# SPDX-License-Identifier: Apache-2.0
# Sourced by the standalone experiments (split-floor.sh, sched-levers.sh): their shared command
# line and preconditions. `standalone_init NAME "$@"` sets rounds, duration, build, probe and C
# (the v1 cgroup root), or exits with a message naming NAME.
standalone_init() {
  local name=$1
  shift
  rounds=2 duration=10 build=${COLOD_BUILD_DIR:-build}
  while (($#)); do
    case $1 in
      --rounds) rounds=$2; shift 2 ;;
      --duration) duration=$2; shift 2 ;;
      --build) build=$2; shift 2 ;;
      *) echo "usage: $name [--rounds N] [--duration S] [--build DIR]" >&2; exit 2 ;;
    esac
  done
  probe=$build/userspace/probe/colod-probe
  [[ -x $probe ]] || { echo "$name: no $probe (build colod-probe first)" >&2; exit 1; }
  C=/sys/fs/cgroup
  [[ -d $C/cpu && -d $C/cpuset ]] ||
    { echo "$name: needs the v1 cpu and cpuset controllers at $C" >&2; exit 1; }
}

# standalone_join GROUP [PID]: moves PID (default: the calling (sub)shell) into $tag-GROUP of
# the cpu and cpuset controllers.
standalone_join() {
  echo "${2:-$BASHPID}" >"$C/cpu/$tag-$1/cgroup.procs"
  echo "${2:-$BASHPID}" >"$C/cpuset/$tag-$1/cgroup.procs"
}

# standalone_start NAME REDIS_GROUP: one probe calibration for every run (as colocation.sh
# does, so the work per request is the same) into `iters`; a redis-server on `port` in
# $tag-REDIS_GROUP, its pid appended to `pids`.
standalone_start() {
  iters=$("$probe" -t 1 -w 100 -p 1000 -d 0.5 --json - | sed -n 's/.*"iters_per_us":\([0-9.]*\).*/\1/p')
  [[ -n $iters ]] || { echo "$1: probe calibration failed" >&2; exit 1; }
  redis-server --port "$port" --bind 127.0.0.1 --save "" --appendonly no --daemonize no \
    --logfile /dev/null &
  local redis_pid=$!
  pids+=("$redis_pid")
  for _ in $(seq 50); do redis-cli -p "$port" ping >/dev/null 2>&1 && break; sleep 0.1; done
  standalone_join "$2" "$redis_pid"
}

# standalone_cleanup GROUP...: kills `pids`, then whatever is still inside $tag-GROUP (a killed
# loop leaves its current redis-benchmark or sleep behind, which keeps rmdir from succeeding),
# and removes the groups from both controllers.
standalone_cleanup() {
  local p g c i
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  for g in "$@"; do
    [[ -r $C/cpu/$tag-$g/cgroup.procs ]] && xargs -r kill 2>/dev/null <"$C/cpu/$tag-$g/cgroup.procs" || true
  done
  wait 2>/dev/null || true
  for g in "$@"; do
    for c in cpu cpuset; do
      for i in 1 2 3 4 5; do rmdir "$C/$c/$tag-$g" 2>/dev/null && break; sleep 0.2; done
    done
  done
}
