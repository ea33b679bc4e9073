#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""How regularly colod ran its decision rounds while a BE turned busy (issue 15).

Reads the policy traces colocation.sh records with --record-traces (RUN/TAG.trace, one per colod
run, with RUN/TAG.trace.clock: wall and monotonic ns taken together, since a trace's round times
are colod's steady clock) and the busy BE's start stamp (RUN/TAG.be-busy.start, written by the
worker). Over the window after that start, it reports the gaps between consecutive rounds (timer
ticks and event rounds alike). colod runs an event round at most every 20 ms while a protected
container waits, so gaps well above that are colod waiting for a CPU itself.

  round_gaps.py RUN [--window-ms 500] [--stamp be-busy]
"""
import argparse
import json
import os
import sys


def percentile(sorted_values, p):
    if not sorted_values:
        return float("nan")
    return sorted_values[min(len(sorted_values) - 1, int(p * len(sorted_values)))]


def round_times_ms(trace_path, clock_path, start_ns):
    """Round times of a trace in ms after start_ns (wall), in order."""
    with open(clock_path) as f:
        wall, mono = (int(x) for x in f.read().split())
    times = []
    with open(trace_path) as f:
        for line in f:
            try:
                j = json.loads(line)
            except ValueError:
                continue  # a line cut by the recorder's stop
            if j.get("type") == "snapshot":
                times.append((j["now_ns"] - mono + wall - start_ns) / 1e6)
    return times


def gaps_in_window(times, window_ms):
    """Gaps between consecutive rounds whose later round falls in (0, window_ms]; the first gap
    is from the last round at or before 0, so a round overdue at the start counts."""
    gaps = []
    prev = None
    for t in times:
        if prev is not None and 0 < t <= window_ms and prev <= window_ms:
            gaps.append(t - prev)
        prev = t
    return gaps


def fmt(gaps):
    g = sorted(gaps)
    return "n=%d gap_p50_ms=%.1f gap_p90_ms=%.1f gap_max_ms=%.1f" % (
        len(g), percentile(g, 0.5), percentile(g, 0.9), g[-1] if g else float("nan"))


def main(argv):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("run")
    ap.add_argument("--window-ms", type=float, default=500.0)
    ap.add_argument("--stamp", default="be-busy", help="worker whose .start stamp opens the window")
    args = ap.parse_args(argv)
    pooled = []
    found = 0
    for name in sorted(os.listdir(args.run)):
        if not name.endswith(".trace"):
            continue
        tag = name[: -len(".trace")]
        clock = os.path.join(args.run, name + ".clock")
        stamp = os.path.join(args.run, "%s.%s.start" % (tag, args.stamp))
        if not os.path.exists(clock) or not os.path.exists(stamp):
            continue
        with open(stamp) as f:
            start = int(f.read().split()[0])
        gaps = gaps_in_window(round_times_ms(os.path.join(args.run, name), clock, start),
                              args.window_ms)
        found += 1
        pooled += gaps
        print("rounds: trace=%s window_ms=%g %s" % (tag, args.window_ms, fmt(gaps)))
    if not found:
        print("rounds: no trace with a %s start stamp in %s" % (args.stamp, args.run),
              file=sys.stderr)
        return 1
    print("rounds: all traces=%d window_ms=%g %s" % (found, args.window_ms, fmt(pooled)))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
