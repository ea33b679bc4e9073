#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""The blame benchmark's scenarios (scripts/bench/blame.sh; README.md here says why each exists).

  scenarios.py list                          the scenario names, one a line, in run order
  scenarios.py containers SCENARIO NCPU      one line per container for blame.sh's cb_add:
                                             "NAME ROLE MILLI KIND ARGS..." (KIND probe | job)
  scenarios.py roles SCENARIO                "NAME ROLE" lines (ls | antagonist | innocent)
  scenarios.py pin SCENARIO NCPU < JSON      the peer scenario lib.sh made, with each container's
                                             cpuset pinning (kubelet's static CPU manager) added
Exit 3 on an unknown scenario or a node with fewer than 2 CPUs.
"""
import json
import sys

# CPU placements, resolved against the node's CPU count: "ls" is the last CPU (the LS on
# CPU 1 of 2), "away" every other CPU, None the whole node (no pinning).
LS_CPU, AWAY = "ls", "away"

# The LS is colod-probe, as in the colocation benchmark: pinned, one thread at 30 % of its CPU;
# unpinned, a thread per CPU at 30 % of each (300 us of work due every 1000 us per thread).
PROBE_PINNED = ["-t", "1", "-w", "300", "-p", "1000"]
PROBE_NODE = ["-t", "2", "-w", "300", "-p", "1000"]

# BE workloads (stress-ng arguments). Innocents cannot hurt the LS: either they run on CPUs the
# LS never uses, or they are light (5 % of one CPU, 100m request). Antagonists share the LS's CPU.
HOG = "--cpu 2"  # a steady CPU hog over the whole node
AWAY_STEADY = "--cpu 1"  # a steady hog, pinned to the CPUs the LS does not use
LIGHT = "--cpu 1 --cpu-load 5"  # light and steady, anywhere
# Duty-cycled: 2 s busy, 3 s idle (stress-ng's busy slice is --cpu-load-slice ms, the idle time
# follows from --cpu-load), pinned away: it stops and starts all through the run.
DUTY = "--cpu 1 --cpu-load 40 --cpu-load-slice 2000"
# Bursty antagonist: 300 ms busy / 700 ms idle on both CPUs, the dodging pattern.
BURSTY = "--cpu 2 --cpu-load 30 --cpu-load-slice 300"
CACHE = "--cache 1 --vm 1 --vm-bytes 128M"  # cache thrashing + memory bandwidth
FORK = "--fork 2"  # short-lived processes: CPU time spread over many pids

# name -> (LS placement, [(container, role, request milli, placement, stress-ng args)])
SCENARIOS = {
    "other-cpus": (LS_CPU, [("be-hog", "antagonist", 1000, None, HOG),
                            ("be-away", "innocent", 1000, AWAY, AWAY_STEADY)]),
    "light": (None, [("be-hog", "antagonist", 1000, None, HOG),
                     ("be-light", "innocent", 100, None, LIGHT)]),
    "duty": (LS_CPU, [("be-hog", "antagonist", 1000, None, HOG),
                      ("be-duty", "innocent", 1000, AWAY, DUTY)]),
    "bursty": (LS_CPU, [("be-bursty", "antagonist", 1000, None, BURSTY),
                        ("be-away", "innocent", 1000, AWAY, AWAY_STEADY)]),
    "cache": (None, [("be-cache", "antagonist", 1000, None, CACHE),
                     ("be-light", "innocent", 100, None, LIGHT)]),
    "fork": (LS_CPU, [("be-fork", "antagonist", 1000, None, FORK),
                      ("be-away", "innocent", 1000, AWAY, AWAY_STEADY),
                      ("be-light", "innocent", 100, None, LIGHT)]),
}
LS_NAME, LS_MILLI = "ls-probe", 400


def cpus(placement, ncpu):
    """Kernel cpu-list string of a placement on a node of `ncpu` CPUs (None: not pinned)."""
    if placement == LS_CPU:
        return str(ncpu - 1)
    if placement == AWAY:
        return "0" if ncpu == 2 else f"0-{ncpu - 2}"
    return None


def containers(name):
    """[(container, role, milli, placement, kind, args)] of a scenario, the LS first."""
    ls_place, bes = SCENARIOS[name]
    probe = PROBE_PINNED if ls_place == LS_CPU else PROBE_NODE
    out = [(LS_NAME, "ls", LS_MILLI, ls_place, "probe", probe)]
    for ctr, role, milli, place, args in bes:
        out.append((ctr, role, milli, place, "job", args.split()))
    return out


def pin(scenario_json, name, ncpu):
    """The peer scenario (lib.sh's cb_scenario_json output) with resources.cpus set on every
    pinned container of scenario `name`. Pure: text in, text out."""
    doc = json.loads(scenario_json)
    place = {c[0]: cpus(c[3], ncpu) for c in containers(name)}
    for c in doc.get("containers", []):
        p = place.get(c.get("name"))
        if p is not None:
            c.setdefault("resources", {})["cpus"] = p
    return json.dumps(doc, indent=1)


def main(argv):
    if argv == ["list"]:
        print("\n".join(SCENARIOS))
        return 0
    if len(argv) < 2 or argv[1] not in SCENARIOS:
        print(__doc__, file=sys.stderr)
        return 3
    cmd, name = argv[0], argv[1]
    ncpu = int(argv[2]) if len(argv) > 2 and argv[2].isdigit() else 0
    if cmd in ("containers", "pin") and ncpu < 2:
        print("scenarios.py: the scenarios need a node of at least 2 CPUs", file=sys.stderr)
        return 3
    if cmd == "containers":
        for ctr, role, milli, _, kind, args in containers(name):
            print(" ".join([ctr, role, str(milli), kind] + args))
    elif cmd == "roles":
        for c in containers(name):
            print(f"{c[0]} {c[1]}")
    elif cmd == "pin":
        print(pin(sys.stdin.read(), name, ncpu))
    else:
        print(__doc__, file=sys.stderr)
        return 3
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
