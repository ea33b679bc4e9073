#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# top.sh COLOCTL RUNDIR SECONDS: `coloctl top` against the run's colod for SECONDS (bounded: it
# is interrupted with SIGINT, which coloctl handles as a normal stop).
set -uo pipefail
coloctl=$1 run=$2 secs=$3
timeout -s INT -k 2 "$secs" "$coloctl" --socket "$run/colod.sock" top -d 2
rc=$?
# 124: stopped by timeout, as intended.
((rc == 0 || rc == 124 || rc == 130)) || exit "$rc"
exit 0
