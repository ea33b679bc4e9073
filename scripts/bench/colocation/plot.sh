#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# plot.sh RUNDIR OUT.png: LS p99 (log scale) and BE work kept, per phase kind (medians over
# rounds): LS alone, LS+BE with nothing acting, under Koordinator's CPU Suppress rule, with colod
# (the kinds the run has), from summarize.py --tsv. gnuplot from Debian (gnuplot-nox).
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
run=$1 png=$2
python3 "$here/summarize.py" --tsv "$run" >"$run/phases.tsv"
python3 - "$run/phases.tsv" >"$run/plot.dat" <<'PY'
import statistics, sys
rows = [l.rstrip("\n").split("\t") for l in open(sys.argv[1])][1:]
def med(kind, col):
    v = [float(r[col]) for r in rows if r[1] == kind and r[col] != "NA"]
    return statistics.median(v) if v else None
base = med("nocolod", 4)
labels = {"solo": "LS alone", "floor": "LS alone, split CPUs", "nocolod": "LS+BE, nothing",
          "suppress": "LS+BE, Koordinator suppress", "colod": "LS+BE, colod"}
i = 0
for k in ("solo", "floor", "nocolod", "suppress", "colod"):
    p99, redis, ops = med(k, 2), med(k, 3), med(k, 4)
    if p99 is None:
        continue
    kept = 100.0 * ops / base if (ops is not None and base) else float("nan")
    print(f'{i} "{labels[k]}" {p99 / 1000.0:.3f} {(redis or 0) / 1000.0:.3f} {kept:.1f}')
    i += 1
PY
n=$(wc -l <"$run/plot.dat")
gnuplot <<GP
set terminal pngcairo size 1300,450 font ",10"
set output "$png"
set multiplot layout 1,2 title "colod colocation demo ($(nproc) CPUs; medians over rounds)"
set style fill solid 0.8 border -1
set boxwidth 0.35
set grid ytics
set xrange [-0.6:$((n > 0 ? n : 1))-0.4]
set title "LS latency p99 (ms, log scale; lower is better)"
set logscale y
set yrange [0.01:*]
set key left top
plot "$run/plot.dat" using (\$1-0.18):3:xtic(2) with boxes lc rgb "#3060c0" title "colod-probe p99", \
     "" using (\$1+0.18):(\$4 > 0 ? \$4 : 1/0) with boxes lc rgb "#c08030" title "redis GET p99", \
     "" using (\$1-0.18):3:(sprintf("%.1f", \$3)) with labels offset 0,0.8 notitle
unset logscale y
set yrange [0:130]
set title "BE work kept (stress-ng bogo ops, % of no-colod)"
plot "$run/plot.dat" using 1:5:xtic(2) with boxes lc rgb "#40a040" title "BE kept %", \
     "" using 1:5:(sprintf("%.0f%%", \$5)) with labels offset 0,0.8 notitle
unset multiplot
GP
echo "$png"
