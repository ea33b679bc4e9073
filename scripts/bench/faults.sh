#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Fault benchmark (issue 14). Builds colod_fault_test (userspace/faults) and runs every scenario
# of the fault suite --runs times (default 5), each run appending one JSON line per scenario to a
# results file (COLOD_FAULTS_RESULTS), then prints per-scenario figures on stderr and as its
# last line:
#   faults: scenarios=<n> runs=<n> passed=<n> leaked=<n> clobbered=<n> converge_p99_ms=<ms>
# scenarios = tests in the suite; runs = scenarios x --runs (a run that crashed or never wrote
# its line counts as run and not passed; a skipped one too, with the reason on stderr);
# leaked = fields left restricted after colod let go (sum); clobbered = kubelet values
# overwritten (sum); converge_p99_ms = nearest-rank p99 over every convergence time measured
# (from the runtime's return / the fault's end to cgroup == desired), NA when none.
#   sudo scripts/bench/faults.sh [--runs N] [--build DIR] [--filter GTEST_FILTER] [--out DIR]
# Root: real cgroups, BPF, the runtime peer. Logs and results.jsonl stay in --out (default a new
# /tmp/colod-faults.XXXXXX).
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
build=${COLOD_BUILD_DIR:-$root/build}
runs=5
filter='*'
out=
while [[ $# -gt 0 ]]; do
  case "$1" in
    --runs) runs="$2"; shift 2 ;;
    --build) build="$2"; shift 2 ;;
    --filter) filter="$2"; shift 2 ;;
    --out) out="$2"; shift 2 ;;
    *) echo "usage: $0 [--runs N] [--build DIR] [--filter GTEST_FILTER] [--out DIR]" >&2; exit 2 ;;
  esac
done
[[ $runs =~ ^[1-9][0-9]*$ ]] || { echo "faults.sh: --runs needs a positive number" >&2; exit 2; }
if [[ $(id -u) -ne 0 ]]; then
  echo "faults.sh: must run as root (real cgroups, BPF, the runtime peer)" >&2
  exit 1
fi

cmake -S "$root" -B "$build" -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
cmake --build "$build" --target colod_fault_test -j "${COLOD_JOBS:-2}" >/dev/null
bin=$build/userspace/faults/colod_fault_test
[[ -x $bin ]] || { echo "faults.sh: $bin was not built" >&2; exit 1; }

# gtest lists "Suite." lines and indented test names (a parameterized one followed by a comment).
mapfile -t tests < <("$bin" --gtest_list_tests --gtest_filter="$filter" |
  awk '/^[^ ]/ { suite = $1 } /^  / { print suite $1 }')
(( ${#tests[@]} > 0 )) || { echo "faults.sh: no test matches --filter '$filter'" >&2; exit 1; }

if [[ -z $out ]]; then
  out=$(mktemp -d /tmp/colod-faults.XXXXXX)
fi
mkdir -p "$out"
results=$out/results.jsonl
: >"$results"
echo "load: $(cut -d' ' -f1-3 /proc/loadavg) on $(nproc) CPUs; ${#tests[@]} scenarios x $runs runs;" \
     "logs in $out" >&2
for ((r = 1; r <= runs; r++)); do
  start=$(date +%s)
  rc=0
  COLOD_FAULTS_RESULTS=$results "$bin" --gtest_filter="$filter" >"$out/run$r.log" 2>&1 || rc=$?
  echo "run $r: exit $rc in $(( $(date +%s) - start )) s, $(grep -c '^\[       OK \]' "$out/run$r.log" || true)" \
       "passed, $(grep -c '^\[  FAILED  \] .*(' "$out/run$r.log" || true) failed ($out/run$r.log)" >&2
done

python3 - "$results" "${#tests[@]}" "$runs" <<'PY'
import json, math, sys
from collections import defaultdict

path, n_tests, n_runs = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
lines = []
with open(path) as f:
    for raw in f:
        raw = raw.strip()
        if not raw:
            continue
        try:
            lines.append(json.loads(raw))
        except json.JSONDecodeError:
            print(f"faults: unreadable result line: {raw[:120]}", file=sys.stderr)
per = defaultdict(lambda: {"runs": 0, "passed": 0, "skipped": 0, "leaked": 0, "clobbered": 0,
                           "converge": []})
samples = []
for l in lines:
    s = per[l.get("scenario", "?")]
    s["runs"] += 1
    s["passed"] += 1 if l.get("passed") and not l.get("skipped") else 0
    s["skipped"] += 1 if l.get("skipped") else 0
    s["leaked"] += int(l.get("leaked", 0))
    s["clobbered"] += int(l.get("clobbered", 0))
    conv = [float(x) for x in l.get("converge_samples_ms") or []]
    s["converge"].extend(conv)
    samples.extend(conv)

def pct(values, p):
    if not values:
        return None
    v = sorted(values)
    return v[max(0, math.ceil(p / 100 * len(v)) - 1)]

def fmt(x):
    return "NA" if x is None else f"{x:.0f}"

print(f"{'scenario':<58} {'passed':>7} {'leaked':>6} {'clobb':>5} {'conv_p50':>8} {'conv_max':>8}",
      file=sys.stderr)
for name in sorted(per):
    s = per[name]
    print(f"{name:<58} {s['passed']:>3}/{s['runs']:<3} {s['leaked']:>6} {s['clobbered']:>5} "
          f"{fmt(pct(s['converge'], 50)):>8} {fmt(max(s['converge']) if s['converge'] else None):>8}",
          file=sys.stderr)
skipped = sum(s["skipped"] for s in per.values())
if skipped:
    print(f"faults: {skipped} scenario runs were skipped (see the run logs for the reason); they "
          "count as not passed", file=sys.stderr)
expected = n_tests * n_runs
if len(lines) < expected:
    print(f"faults: {expected - len(lines)} scenario runs wrote no result (crash or timeout); "
          "they count as not passed", file=sys.stderr)
passed = sum(s["passed"] for s in per.values())
leaked = sum(s["leaked"] for s in per.values())
clobbered = sum(s["clobbered"] for s in per.values())
print(f"faults: scenarios={n_tests} runs={max(expected, len(lines))} passed={passed} "
      f"leaked={leaked} clobbered={clobbered} converge_p99_ms={fmt(pct(samples, 99))}")
PY
