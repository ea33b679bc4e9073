#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Experiment helper (session 51, issue 15), not part of any benchmark: how much of the LS
probe's wait behind its own tasks fell in rounds where its CPUs were full and BE held half a CPU
of them (BE's displacement, policy/src/attribution.cpp), by the engine's estimate (own + BE run
time >= 0.9 x CPUs) and by measured idle time.

  idle_fullness.py sample OUT SECONDS      every 50 ms, "monotonic_ns idle0 idle1 ..." from
                                           /proc/stat (idle + iowait, USER_HZ ticks per CPU)
  idle_fullness.py join IDLE TRACE...      per trace (colocation.sh --record-traces, a phase whose
                                           LS probe is named ls-probe and BE jobs be-*), the share
                                           of the probe's self-wait each rule counts as displaced

Run `sample` beside `colocation.sh --phases colod --record-traces`. The probe's CPUs are the
node's (2 here); "full" by measure is at most 0.1 x CPUs idle over the round or the 100 ms before
it, whichever is longer (/proc/stat counts in 10 ms ticks).
"""
import bisect
import json
import os
import sys
import time

FULL_IDLE_FRACTION = 0.1
MIN_SPAN_NS = 100_000_000


def sample(out_path, seconds):
    end = time.monotonic() + seconds
    with open(out_path, "w") as out:
        while time.monotonic() < end:
            now = time.monotonic_ns()
            idle = []
            with open("/proc/stat") as f:
                for line in f:
                    if line.startswith("cpu") and line[3].isdigit():
                        fields = line.split()
                        idle.append(int(fields[4]) + int(fields[5]))
            out.write(f"{now} {' '.join(map(str, idle))}\n")
            out.flush()
            time.sleep(0.05)


def load_idle(path):
    with open(path) as f:
        rows = [list(map(int, line.split())) for line in f if line.strip()]
    return [r[0] for r in rows], [sum(r[1:]) for r in rows], len(rows[0]) - 1 if rows else 0


def idle_ticks_at(ts, total, t):
    i = bisect.bisect_left(ts, t)
    if i <= 0 or i >= len(ts):
        return None
    f = (t - ts[i - 1]) / (ts[i] - ts[i - 1])
    return total[i - 1] + f * (total[i] - total[i - 1])


def share(part, whole):
    return f"{part / whole:.0%}" if whole else "NA"


def join(idle_path, traces):
    ts, total, ncpu = load_idle(idle_path)
    hz = os.sysconf("SC_CLK_TCK")
    for trace in traces:
        names = {}
        snaps = []
        with open(trace) as f:
            for line in f:
                j = json.loads(line)
                if j.get("type") == "upsert":
                    names[j["container"]["id"]] = j["container"].get("container_name", "")
                elif j.get("type") == "snapshot":
                    snaps.append(j)
        probe = [k for k, v in names.items() if v == "ls-probe"]
        if not probe:
            print(f"{trace}: no ls-probe container")
            continue
        ls = probe[0]
        be = {k for k, v in names.items() if v.startswith("be-")}
        self_ns = by_estimate = by_measure = unmeasured = 0
        for s in snaps:
            interval, now = s["interval_ns"], s["now_ns"]
            sample_ls = next((c for c in s["containers"] if c["id"] == ls), None)
            if interval <= 0 or sample_ls is None:
                continue
            wait = sum(p["wait_ns"] + p.get("behind_ns", 0)
                       for p in sample_ls.get("preempted_by", []) if p["by"] == ls)
            if wait <= 0:
                continue
            cpus = s.get("node_cpus") or ncpu
            own = sample_ls.get("oncpu_ns", 0) / interval
            be_here = sum(c.get("oncpu_ns", 0) for c in s["containers"] if c["id"] in be) / interval
            self_ns += wait
            if be_here >= 0.5 and own + be_here >= 0.9 * cpus:
                by_estimate += wait
            span = max(interval, MIN_SPAN_NS)
            a, b = idle_ticks_at(ts, total, now - span), idle_ticks_at(ts, total, now)
            if a is None or b is None:
                unmeasured += 1
                continue
            idle_cpus = (b - a) * 1e9 / hz / span
            if be_here >= 0.5 and idle_cpus <= FULL_IDLE_FRACTION * cpus:
                by_measure += wait
        print(f"{trace}: self-wait {self_ns / 1e6:.0f} ms; displaced by the estimate "
              f"{share(by_estimate, self_ns)}, by measured idle {share(by_measure, self_ns)}; "
              f"rounds outside the idle samples {unmeasured}")


def main(argv):
    if len(argv) == 4 and argv[1] == "sample":
        sample(argv[2], float(argv[3]))
    elif len(argv) >= 4 and argv[1] == "join":
        join(argv[2], argv[3:])
    else:
        print(__doc__, file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
