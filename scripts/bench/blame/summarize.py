#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Summarises a blame run (scripts/bench/blame.sh; README.md here defines every number).

  summarize.py OUTDIR                full report: one line per trial, one per scenario, the
                                     targets (PASS/FAIL), and last the `blame:` line
  summarize.py --scenario SCENDIR    the scenario line of one scenario directory (progress)

OUTDIR holds one directory per scenario (a colocation lib.sh run directory) with roles.txt
("NAME ls|antagonist|innocent"), triggers.txt ("TAG NAME|marker TS_NS"; markers phase-start,
colod-started, window-end), peer.log (colod-testpeer's JSON lines), TAG.NAME.out (colod-probe's
"probe:" line, stress-ng --metrics-brief) and phase-cpu.txt. Trial k has the phases t<k>-nocolod
and t<k>-colod. The parsers take text and are tested from strings (summarize_test.py).
"""
import importlib.util
import json
import os
import statistics
import sys

HERE = os.path.dirname(os.path.abspath(__file__))


def _load_colocation():
    """The colocation summarizer (read, phase_cpu, NOISY_OTHER_PCT: the same noise rule), loaded
    by path: it is also called summarize.py, so a plain import would find this file."""
    path = os.path.join(HERE, "..", "colocation", "summarize.py")
    spec = importlib.util.spec_from_file_location("colocation_summarize", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


colocation = _load_colocation()

# Writes a plugin caused: its CreateContainer adjustment and its UpdateContainers.
COLOD_SOURCES = ("adjust", "update")
GOALS = (("antagonist_hit", ">=", 0.95), ("innocent_spared", ">=", 0.95),
         ("innocent_work_ratio", ">=", 0.95), ("ls_p99_ratio", "<=", 0.1))


def parse_probe(text):
    """colod-probe's "probe: k=v ..." line as floats, or None."""
    for line in (text or "").splitlines():
        if line.startswith("probe: "):
            out = {}
            for kv in line[7:].split():
                k, _, v = kv.partition("=")
                try:
                    out[k] = float(v)
                except ValueError:
                    pass
            return out
    return None


def parse_stress_rate(text):
    """Bogo ops per second of wall time, summed over the stressors of a stress-ng
    --metrics-brief output ("metrc: [pid] NAME OPS REAL USR SYS OPS/S(real) OPS/S(cpu)"), or
    None if it has no metrics row."""
    total, seen = 0.0, False
    for line in (text or "").splitlines():
        f = line.split()
        if len(f) < 10 or f[1] != "metrc:":
            continue
        try:
            ops, real = float(f[4]), float(f[5])
        except ValueError:
            continue  # the header rows
        if real > 0:
            total += ops / real
            seen = True
    return total if seen else None


def parse_triggers(text):
    """{tag: {name_or_marker: ts_ns}}; the last value wins."""
    out = {}
    for line in (text or "").splitlines():
        p = line.split()
        if len(p) == 3 and p[2].isdigit():
            out.setdefault(p[0], {})[p[1]] = int(p[2])
    return out


def parse_roles(text):
    out = {}
    for line in (text or "").splitlines():
        p = line.split()
        if len(p) == 2:
            out[p[0]] = p[1]
    return out


def cpu_list(text):
    """A kernel cpu list as a set of ints ("0-2,4" -> {0,1,2,4}), or None if it is not one."""
    cpus = set()
    for part in text.strip().split(","):
        if not part:
            continue
        lo, _, hi = part.partition("-")
        if not lo.isdigit() or (hi and not hi.isdigit()):
            return None
        cpus.update(range(int(lo), int(hi or lo) + 1))
    return cpus


def changed(file, old, new):
    """Whether a cgroup write changed the value (cpu lists compared as sets: "0,1" == "0-1")."""
    old, new = str(old).strip(), str(new).strip()
    if file.endswith(".cpus") or file.endswith(".mems"):
        a, b = cpu_list(old), cpu_list(new)
        if a is not None and b is not None:
            return a != b
    return old != new


def parse_peer_log(text):
    """(writes, updaters): writes = [(ts_ns, container, file basename, old, new, source)] of the
    cgroup writes plugins caused; updaters = [(ts_ns, container, plugin)] of container-updated."""
    writes, updaters = [], []
    for line in (text or "").splitlines():
        try:
            e = json.loads(line)
        except ValueError:
            continue
        if not isinstance(e, dict) or "ts_ns" not in e:
            continue
        ev = e.get("event")
        if ev == "cgroup-write" and e.get("source") in COLOD_SOURCES:
            writes.append((int(e["ts_ns"]), e.get("container", ""),
                           os.path.basename(str(e.get("file", ""))), str(e.get("old", "")),
                           str(e.get("new", "")), e.get("source")))
        elif ev == "container-updated":
            updaters.append((int(e["ts_ns"]), e.get("container", ""), str(e.get("plugin", ""))))
    writes.sort()
    return writes, updaters


def restrictions(writes, t0, t1):
    """{container: [(ts_ns, file, old, new, source)]}: the writes in [t0, t1] that changed a
    value. A container with an entry was restricted (README: "Restricted")."""
    out = {}
    for ts, ctr, file, old, new, source in writes:
        if t0 <= ts <= t1 and changed(file, old, new):
            out.setdefault(ctr, []).append((ts, file, old, new, source))
    return out


def ratio(a, b):
    return a / b if (a is not None and b) else None


def med(values):
    v = [x for x in values if x is not None]
    return statistics.median(v) if v else None


def share(flags):
    v = [x for x in flags if x is not None]
    return sum(1 for x in v if x) / len(v) if v else None


def trial(k, roles, trig, writes, updaters, outputs, cpu=None):
    """The result of trial k from parsed inputs. outputs: {(tag, name): text}. Returns a dict
    with complete, hit, spared, restricted, work (per innocent ratio), p99 and notes."""
    tn, tc = f"t{k}-nocolod", f"t{k}-colod"
    r = {"k": k, "notes": [], "restricted": {}, "work": {}, "noisy": False}
    pn, pc = (parse_probe(outputs.get((t, "ls-probe"))) for t in (tn, tc))
    r["p99_nocolod"] = pn.get("p99_us") if pn else None
    r["p99_colod"] = pc.get("p99_us") if pc else None
    r["p99"] = ratio(r["p99_colod"], r["p99_nocolod"])
    ants = sorted(n for n, role in roles.items() if role == "antagonist")
    inns = sorted(n for n, role in roles.items() if role == "innocent")
    for n in inns:
        r["work"][n] = ratio(parse_stress_rate(outputs.get((tc, n))),
                             parse_stress_rate(outputs.get((tn, n))))
    mc = trig.get(tc, {})
    t0, t1 = mc.get("colod-started"), mc.get("window-end")
    r["complete"] = (t0 is not None and t1 is not None and r["p99"] is not None
                     and all(v is not None for v in r["work"].values()))
    if t0 is None:
        r["notes"].append("colod did not run")
    if t0 is not None and t1 is not None:
        rs = restrictions(writes, t0, t1)
        r["restricted"] = {n: w for n, w in rs.items() if n in roles and roles[n] != "ls"}
        if rs.get("ls-probe"):
            r["notes"].append("colod changed the LS container: " + describe(rs["ls-probe"], t0))
        others = sorted({p for ts, _, p in updaters if t0 <= ts <= t1 and not p.endswith("colod")})
        if others:
            r["notes"].append("updates from other plugins: " + " ".join(others))
    mn = trig.get(tn, {})
    if mn.get("phase-start") is not None and mn.get("window-end") is not None:
        stray = restrictions(writes, mn["phase-start"], mn["window-end"])
        if stray:
            r["notes"].append("writes during the nocolod phase: " + " ".join(sorted(stray)))
    r["hit"] = all(a in r["restricted"] for a in ants) if r["complete"] else None
    r["spared"] = (not any(i in r["restricted"] for i in inns)) if r["complete"] else None
    for tag in (tn, tc):
        c = (cpu or {}).get(tag)
        if c and c[1] is not None and c[1] > colocation.NOISY_OTHER_PCT:
            r["noisy"] = True
    r["t0"] = t0
    return r


def describe(ws, t0):
    """"file old->new @+s (source)" for each write, seconds after colod started."""
    return ", ".join(f"{f} {o}->{n} @+{(ts - t0) / 1e9:.1f}s ({s})" for ts, f, o, n, s in ws)


def fmt(x, nd=2):
    return "NA" if x is None else f"{x:.{nd}f}"


def load_scenario(d):
    """(roles, [trial dicts]) of one scenario directory."""
    read = lambda name: colocation.read(os.path.join(d, name))
    roles = parse_roles(read("roles.txt"))
    trig = parse_triggers(read("triggers.txt"))
    writes, updaters = parse_peer_log(read("peer.log"))
    cpu = colocation.phase_cpu(d)
    ks = sorted({int(t[1:].split("-", 1)[0]) for t in trig
                 if t.startswith("t") and t[1:].split("-", 1)[0].isdigit()})
    trials = []
    for k in ks:
        outputs = {}
        for tag in (f"t{k}-nocolod", f"t{k}-colod"):
            for n in roles:
                text = read(f"{tag}.{n}.out")
                if text is not None:
                    outputs[(tag, n)] = text
        trials.append(trial(k, roles, trig, writes, updaters, outputs, cpu))
    return roles, trials


def trial_line(name, r):
    restricted = "; ".join(f"{n}: {describe(w[:3], r['t0'])}{' ...' if len(w) > 3 else ''}"
                           for n, w in sorted(r["restricted"].items())) or "none"
    work = " ".join(f"{n}={fmt(v)}" for n, v in sorted(r["work"].items()))
    flag = lambda v: "NA" if v is None else ("yes" if v else "no")
    return (f"trial {name}/t{r['k']}: hit={flag(r['hit'])} spared={flag(r['spared'])} "
            f"work_ratio {work or 'NA'} ls_p99_us nocolod={fmt(r['p99_nocolod'], 0)} "
            f"colod={fmt(r['p99_colod'], 0)} ratio={fmt(r['p99'], 3)}"
            f"{' NOISY' if r['noisy'] else ''}{'' if r['complete'] else ' INCOMPLETE'}; "
            f"restricted: {restricted}" + "".join(f"; note: {n}" for n in r["notes"]))


def aggregate(trials):
    done = [r for r in trials if r["complete"]]
    return {"trials": len(done), "incomplete": len(trials) - len(done),
            "antagonist_hit": share(r["hit"] for r in done),
            "innocent_spared": share(r["spared"] for r in done),
            "innocent_work_ratio": med(v for r in done for v in r["work"].values()),
            "ls_p99_ratio": med(r["p99"] for r in done)}


def scenario_line(name, a):
    return (f"scenario {name}: trials={a['trials']} antagonist_hit={fmt(a['antagonist_hit'])} "
            f"innocent_spared={fmt(a['innocent_spared'])} "
            f"innocent_work_ratio={fmt(a['innocent_work_ratio'])} "
            f"ls_p99_ratio={fmt(a['ls_p99_ratio'], 3)}"
            + (f" incomplete={a['incomplete']}" if a["incomplete"] else ""))


def blame_line(n_scenarios, a):
    return (f"blame: scenarios={n_scenarios} trials={a['trials']} "
            f"antagonist_hit={fmt(a['antagonist_hit'])} "
            f"innocent_spared={fmt(a['innocent_spared'])} "
            f"innocent_work_ratio={fmt(a['innocent_work_ratio'])} "
            f"ls_p99_ratio={fmt(a['ls_p99_ratio'], 3)}")


def targets(a):
    """[(text, ok)] for issue 19's goals; a value that was not measured FAILs."""
    out = []
    for key, op, goal in GOALS:
        v = a[key]
        ok = v is not None and (v >= goal if op == ">=" else v <= goal)
        out.append((f"target {key} {op} {goal}: {'PASS' if ok else 'FAIL'} ({fmt(v, 3)})", ok))
    if a["incomplete"]:
        out.append((f"target every trial measured: FAIL ({a['incomplete']} incomplete)", False))
    return out


def scenario_dirs(out):
    order = [l.strip() for l in (colocation.read(os.path.join(out, "scenarios.txt")) or "")
             .splitlines() if l.strip()]
    return [(n, os.path.join(out, n)) for n in order if os.path.isdir(os.path.join(out, n))]


def main(argv):
    if len(argv) == 2 and argv[0] == "--scenario":
        d = argv[1].rstrip("/")
        _, trials = load_scenario(d)
        print(scenario_line(os.path.basename(d), aggregate(trials)), flush=True)
        return 0
    if len(argv) != 1:
        print(__doc__, file=sys.stderr)
        return 3
    out = argv[0]
    meta = colocation.read(os.path.join(out, "meta.txt"))
    if meta:
        print(meta.rstrip())
    per, every = [], []
    for name, d in scenario_dirs(out):
        _, trials = load_scenario(d)
        for r in trials:
            print(trial_line(name, r))
        per.append((name, aggregate(trials)))
        every += trials
    for name, a in per:
        print(scenario_line(name, a))
    a = aggregate(every)
    noisy = sum(1 for r in every if r["noisy"])
    if noisy:
        print(f"noise: {noisy} of {len(every)} trials had a phase with > "
              f"{colocation.NOISY_OTHER_PCT:.0f}% of the machine used outside the benchmark")
    for text, _ in targets(a):
        print(text)
    print(blame_line(len(per), a))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
