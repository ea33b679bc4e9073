#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Experiment helper (session 33, issue 15 foreign phase), not part of any benchmark: while a
# colod process runs, hold every BE job container of the colocation benchmark (stress-ng
# --cpu 2 / --cache 2) at a CFS quota of QUOTA_US per 100 ms, written straight to its cgroup
# (cgroup v1 cpu controller). Run beside `colocation.sh --phases "foreign-nocolod foreign-colod"`
# to see what capping the BE a split holds gives the LS under the foreign hog, before a policy
# does it:
#   sudo scripts/bench/colocation/cap-held-be.sh 37500 & pid=$!
#   sudo scripts/bench/colocation.sh --phases "foreign-nocolod foreign-colod" ...; kill $pid
set -euo pipefail
quota=${1:?usage: $0 QUOTA_US}
[[ $quota =~ ^[0-9]+$ ]] || { echo "QUOTA_US: a number of microseconds" >&2; exit 2; }
[[ -d /sys/fs/cgroup/cpu ]] || { echo "needs the cgroup v1 cpu controller" >&2; exit 2; }
while true; do
  if pgrep -x colod >/dev/null; then
    for p in $(pgrep -f "stress-ng --(cpu 2|cache 2)" || true); do
      cg=$(awk -F: '$2 ~ /(^|,)cpu(,|$)/ {print $3}' "/proc/$p/cgroup" 2>/dev/null || true)
      f=/sys/fs/cgroup/cpu$cg/cpu.cfs_quota_us
      if [[ -n $cg && -f $f && $(cat "$f" 2>/dev/null) != "$quota" ]]; then
        echo "$quota" >"$f" 2>/dev/null || true
      fi
    done
  fi
  sleep 0.2
done
