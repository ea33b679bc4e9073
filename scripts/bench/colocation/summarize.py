#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Summarises a colocation run directory (scripts/bench/colocation.sh).

  summarize.py RUNDIR               full report; the last line is the `colocation:` result
  summarize.py --phase TAG RUNDIR   one line for one phase (printed as the run goes)
  summarize.py --tsv RUNDIR         per-phase rows for plotting (demo)

Phase tags are r<round>-<kind>, kind in solo | nocolod | colod. Inputs in RUNDIR:
TAG.ls-probe.out (colod-probe line), TAG.ls-redis.out (redis-benchmark --csv rows),
TAG.be-*.out (stress-ng --metrics-brief), triggers.txt ("TAG NAME|event TS_NS"),
peer.log (colod-testpeer JSON lines), rss.txt ("colod_rss_mib=X").
"""
import glob
import json
import os
import re
import statistics
import sys

KINDS = ("solo", "nocolod", "colod")
LS_PROBE, LS_REDIS, ANTAGONIST = "ls-probe", "ls-redis", "be-antagonist"
METRIC_RE = re.compile(r"metrc: \[\d+\]\s+(\S+)\s+(\d+)\s+[\d.]+")


def read(path):
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            return f.read()
    except OSError:
        return None


def probe_result(run, tag):
    text = read(os.path.join(run, f"{tag}.{LS_PROBE}.out"))
    if not text:
        return None
    for line in text.splitlines():
        if line.startswith("probe: "):
            return {k: float(v) for k, v in (kv.split("=", 1) for kv in line[7:].split())}
    return None


def redis_p99_us(run, tag):
    """Median over the phase's bursts of each burst's p99 (redis-benchmark --csv, ms)."""
    text = read(os.path.join(run, f"{tag}.{LS_REDIS}.out"))
    if not text:
        return None
    p99s = []
    for line in text.splitlines():
        cols = [c.strip('"') for c in line.split(",")]
        if len(cols) >= 8 and cols[0] == "GET":
            try:
                p99s.append(float(cols[6]) * 1000.0)
            except ValueError:
                pass
    return statistics.median(p99s) if p99s else None


def be_ops(run, tag):
    """Sum of stress-ng bogo ops over every BE container of the phase."""
    total, seen = 0, False
    for path in glob.glob(os.path.join(run, f"{tag}.be-*.out")):
        for m in METRIC_RE.finditer(read(path) or ""):
            total += int(m.group(2))
            seen = True
    return total if seen else None


def triggers(run):
    out = {}
    for line in (read(os.path.join(run, "triggers.txt")) or "").splitlines():
        parts = line.split()
        if len(parts) == 3 and parts[2].isdigit():
            out.setdefault(parts[0], {})[parts[1]] = int(parts[2])
    return out


def colod_writes(run):
    """(ts_ns, container, file, new) of every cgroup write colod's UpdateContainers caused."""
    writes = []
    for line in (read(os.path.join(run, "peer.log")) or "").splitlines():
        try:
            e = json.loads(line)
        except ValueError:
            continue
        if e.get("event") == "cgroup-write" and e.get("source") == "update":
            writes.append((int(e["ts_ns"]), e.get("container", ""), e.get("file", ""),
                           e.get("new", ""), e.get("old", "")))
    writes.sort()
    return writes


def restricted_at(before):
    """Whether colod's writes before a moment left any file of the container changed: the last
    value written differs from the value before colod's first write to that file."""
    first_old, last_new = {}, {}
    for w in before:
        first_old.setdefault((w[1], w[2]), w[4])
        last_new[(w[1], w[2])] = w[3]
    return any(last_new[k] != first_old[k] for k in last_new)


def reactions(run):
    """Per colod phase: time from a BE start (base BE, then the antagonist) to the first colod
    update landing in one of the started containers' cgroups. Returns (samples_ms, notes)."""
    trig, writes = triggers(run), colod_writes(run)
    samples, notes = [], []
    for tag, t in sorted(trig.items()):
        if not tag.endswith("-colod") or "colod-started" not in t:
            continue
        end = t.get("colod-stopped", 1 << 62)
        base = [n for n in t if n.startswith("be-") and n != ANTAGONIST]
        events = []
        if base:
            events.append(("be", min(t[n] for n in base), set(base)))
        if ANTAGONIST in t:
            events.append(("antagonist", t[ANTAGONIST], {ANTAGONIST}))
        for what, t0, names in events:
            before = [w for w in writes if t["colod-started"] <= w[0] < t0 and w[1] in names]
            after = [w for w in writes if t0 <= w[0] < end and w[1] in names]
            if restricted_at(before):
                # colod had already moved it (an idle BE joins a cpuset split at once): the
                # update landed before the start, so the start needed no reaction.
                samples.append(0.0)
                notes.append(f"{tag}: {what} already restricted before it started (reaction 0)")
                continue
            if after:
                samples.append((after[0][0] - t0) / 1e6)
            else:
                notes.append(f"{tag}: no colod update after the {what} start")
    return samples, notes


def phase_cpu(run):
    """tag -> (wall_s, other_cpu_pct, node_cpu_pct) from phase-cpu.txt: the share of the
    machine's CPUs used outside the simulated node during the phase (noise)."""
    out = {}
    for line in (read(os.path.join(run, "phase-cpu.txt")) or "").splitlines():
        f = line.split()
        if len(f) != 8:
            continue
        try:
            ncpu, w0, b0, n0, w1, b1, n1 = (int(x) for x in f[1:])
        except ValueError:
            continue
        wall = w1 - w0
        if wall <= 0 or ncpu <= 0:
            continue
        node = (n1 - n0) if n1 > 0 else None
        other = 100.0 * ((b1 - b0) - node) / (wall * ncpu) if node is not None else None
        out[f[0]] = (wall / 1e9, max(other, 0.0) if other is not None else None,
                     100.0 * node / (wall * ncpu) if node is not None else None)
    return out


NOISY_OTHER_PCT = 10.0


def phases(run):
    tags = set()
    for path in glob.glob(os.path.join(run, "r*-*.*.out")):
        tags.add(os.path.basename(path).split(".")[0])
    def key(tag):
        r, kind = tag[1:].split("-", 1)
        return (int(r) if r.isdigit() else 0, KINDS.index(kind) if kind in KINDS else 9)
    rows = []
    cpu = phase_cpu(run)
    for tag in sorted(tags, key=key):
        kind = tag.split("-", 1)[1]
        p = probe_result(run, tag)
        wall, other, node = cpu.get(tag, (None, None, None))
        rows.append({"tag": tag, "kind": kind,
                     "p99": p["p99_us"] if p else None, "p50": p["p50_us"] if p else None,
                     "missed": p["missed"] if p else None, "redis": redis_p99_us(run, tag),
                     "be_ops": be_ops(run, tag) if kind != "solo" else None,
                     "wall": wall, "other": other, "node": node})
    return rows


def fmt(x, nd=0):
    if x is None:
        return "NA"
    return f"{x:.{nd}f}"


def phase_line(row):
    return (f"phase {row['tag']}: ls_p99_us={fmt(row['p99'])} ls_p50_us={fmt(row['p50'])} "
            f"missed={fmt(row['missed'])} redis_p99_us={fmt(row['redis'])} "
            f"be_ops={fmt(row['be_ops'])} wall_s={fmt(row.get('wall'))} "
            f"node_cpu_pct={fmt(row.get('node'))} other_cpu_pct={fmt(row.get('other'))}"
            + (" NOISY" if (row.get("other") or 0) > NOISY_OTHER_PCT else ""))


def med(values):
    v = [x for x in values if x is not None]
    return (statistics.median(v), min(v), max(v), len(v)) if v else (None, None, None, 0)


def main(argv):
    mode = "full"
    if argv and argv[0] in ("--phase", "--tsv"):
        mode = argv[0]
        argv = argv[1:]
    if mode == "--phase":
        tag, run = argv[0], argv[1]
        for row in phases(run):
            if row["tag"] == tag:
                print(phase_line(row), flush=True)
                return 0
        print(f"phase {tag}: no results", flush=True)
        return 1
    run = argv[0]
    rows = phases(run)
    if mode == "--tsv":
        print("tag\tkind\tls_p99_us\tredis_p99_us\tbe_ops")
        for r in rows:
            print(f"{r['tag']}\t{r['kind']}\t{fmt(r['p99'])}\t{fmt(r['redis'])}\t{fmt(r['be_ops'])}")
        return 0

    meta = read(os.path.join(run, "meta.txt"))
    if meta:
        print(meta.rstrip())
    for r in rows:
        print(phase_line(r))
    stats = {}
    print("\n%-8s %28s %28s %30s" % ("kind", "LS probe p99 us med [min-max]",
                                      "redis p99 us med [min-max]", "BE bogo ops med [min-max]"))
    for kind in KINDS:
        sel = [r for r in rows if r["kind"] == kind]
        if not sel:
            continue
        s = {k: med([r[k] for r in sel]) for k in ("p99", "redis", "be_ops")}
        stats[kind] = s
        cell = lambda m: f"{fmt(m[0])} [{fmt(m[1])}-{fmt(m[2])}] n={m[3]}"
        print("%-8s %28s %28s %30s" % (kind, cell(s["p99"]), cell(s["redis"]), cell(s["be_ops"])))

    noisy = [r["tag"] for r in rows if (r.get("other") or 0) > NOISY_OTHER_PCT]
    if noisy:
        print(f"noise: {len(noisy)} of {len(rows)} phases had > {NOISY_OTHER_PCT:.0f}% of the "
              f"machine's CPU used outside the benchmark: {' '.join(noisy)}")
    samples, notes = reactions(run)
    for n in notes:
        print("note:", n)
    reaction = statistics.median(samples) if samples else None
    if samples:
        print(f"reaction ms: n={len(samples)} p50={fmt(reaction)} min={fmt(min(samples))} "
              f"max={fmt(max(samples))}")
    rss = None
    m = re.search(r"colod_rss_mib=([\d.]+)", read(os.path.join(run, "rss.txt")) or "")
    if m:
        rss = float(m.group(1))
        small = re.search(r"colod_rss_mib=([\d.]+) containers=(\S+)",
                          read(os.path.join(run, "rss-small.txt")) or "")
        if small:
            print(f"colod rss: {rss:.1f} MiB with the large container set, {small.group(1)} MiB "
                  f"with {small.group(2)} containers")

    g = lambda kind, k: stats.get(kind, {}).get(k, (None,))[0]
    solo, noc, col = g("solo", "p99"), g("nocolod", "p99"), g("colod", "p99")
    ops_n, ops_c = g("nocolod", "be_ops"), g("colod", "be_ops")
    checks = []
    if solo and col is not None:
        checks.append(("ls_p99_colod_us <= 1.5 x solo", col <= 1.5 * solo, f"{col / solo:.2f}x"))
    if ops_n and ops_c is not None:
        checks.append(("be_ops_colod >= 0.7 x nocolod", ops_c >= 0.7 * ops_n,
                       f"{ops_c / ops_n:.2f}x"))
    if reaction is not None:
        checks.append(("reaction_p50_ms <= 300", reaction <= 300, f"{reaction:.0f} ms"))
    if rss is not None:
        checks.append(("colod_rss_mib <= 32", rss <= 32, f"{rss:.1f} MiB"))
    if solo and noc:
        print(f"nocolod/solo LS p99: {noc / solo:.1f}x")
    for name, ok, val in checks:
        print(f"target {name}: {'PASS' if ok else 'FAIL'} ({val})")
    print(f"colocation: ls_p99_solo_us={fmt(solo)} ls_p99_nocolod_us={fmt(noc)} "
          f"ls_p99_colod_us={fmt(col)} be_ops_nocolod={fmt(ops_n)} be_ops_colod={fmt(ops_c)} "
          f"reaction_p50_ms={fmt(reaction)} colod_rss_mib={fmt(rss, 1)}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
