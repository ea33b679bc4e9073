#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# The price of moving cgroups to fresh cg_sched slots (CollectorOptions::slot_move_*, issue 17),
# at its worst: scale.sh holds N containers (default 1000) and colod-collect-scale runs at the
# daemon's cadence with every read summed in the kernel, alternately without moves (A) and
# moving every cgroup that ran, 64 every tenth tick (B), ROUNDS times (default 2).
# Prints the probe lines, then
#   slot-moves: containers=<n> cpu_pct_off=<med> cpu_pct_worst=<med> slots_moved_per_s=<B's>
# Usage: sudo scripts/bench/slot-moves.sh [containers]   (COLOD_SCALE_PROBE: the probe binary)
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
if [[ "${1:-}" == --hold ]]; then
  probe=$COLOD_SCALE_PROBE
  common=(--files-every 10 --every-tick-share 10 --pressure-every 20 --pressure-named-only
          --seconds 10 --max-cgroups 4096 --kernel-sums)
  for ((r = 0; r < ${ROUNDS:-2}; r++)); do
    echo "A: $("$probe" "${common[@]}" --slot-move-min-cpus 0 | grep '^probe:')"
    echo "B: $("$probe" "${common[@]}" --slot-move-min-cpus 1 --slot-move-every 10 | grep '^probe:')"
  done
  exit 0
fi
n=${1:-1000}
root=$(cd "$here/../.." && pwd)
probe=${COLOD_SCALE_PROBE:-}
if [[ -z "$probe" ]]; then
  for b in "$root"/build*/userspace/collect/colod-collect-scale; do
    if [[ -x "$b" ]]; then probe=$b; break; fi
  done
fi
[[ -x "$probe" ]] || { echo "slot-moves: colod-collect-scale not found (COLOD_SCALE_PROBE)" >&2; exit 3; }
out=$(COLOD_SCALE_PROBE=$probe SCALE_HOLD="$here/slot-moves.sh --hold" "$here/scale.sh" "$n")
grep -E '^(A|B): ' <<<"$out"
awk -v n="$n" '
  /^[AB]: / {
    k = substr($1, 1, 1)
    for (i = 2; i <= NF; i++) {
      split($i, kv, "=")
      if (kv[1] == "cpu_pct") cpu[k] = cpu[k] " " kv[2]
      if (kv[1] == "slots_moved") moved[k] = kv[2]
      if (kv[1] == "ticks") ticks[k] = kv[2]
    }
  }
  function med(s,   a, m, i, j, t) {
    m = split(s, a, " ")
    for (i = 1; i <= m; i++) for (j = i + 1; j <= m; j++) if (a[j] < a[i]) { t = a[i]; a[i] = a[j]; a[j] = t }
    return m % 2 ? a[(m + 1) / 2] : (a[m / 2] + a[m / 2 + 1]) / 2
  }
  END {
    printf "slot-moves: containers=%d cpu_pct_off=%.2f cpu_pct_worst=%.2f slots_moved_per_s=%.1f\n",
      n, med(cpu["A"]), med(cpu["B"]), moved["B"] / (ticks["B"] / 10)
  }' <<<"$out"
