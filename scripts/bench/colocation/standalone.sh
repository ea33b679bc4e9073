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
