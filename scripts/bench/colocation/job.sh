#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# The process of a BE container that arrives as a new pod (kind job in lib.sh): runs its
# stress-ng workload once, for the phase pods.py started it for, then exits.
#   job.sh RUNDIR NAME STRESS-NG-ARGS...
# RUNDIR/job.NAME holds "TAG SECONDS" (written by pods.py before CreateContainer); the metrics
# go to RUNDIR/TAG.NAME.out and the exit code and end time to RUNDIR/TAG.NAME.done.
set -u
run=$1 name=$2
shift 2
read -r tag secs <"$run/job.$name" || { echo "job.sh: no $run/job.$name" >&2; exit 1; }
stress-ng "$@" --timeout "${secs}s" --metrics-brief >"$run/$tag.$name.out" 2>&1
rc=$?
# end_ns: summarize.py leaves out the dynamic phase's LS steps that ended after the BE did.
echo "rc=$rc end_ns=$(date +%s%N)" >"$run/$tag.$name.done"
