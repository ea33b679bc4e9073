#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Tests summarize.py from a synthetic run directory (verbatim tool output formats)."""
import json
import os
import subprocess
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import summarize  # noqa: E402

PROBE = ("probe: threads=2 period_us=1000 work_us=300 duration_s=40.0 requests=80000 missed={m} "
         "p50_us=360 p90_us=380 p99_us={p99} p999_us=9000 max_us=12000 mean_us=400.0 "
         "cpu_pct_node=30.0\n")
REDIS = ('"test","rps","avg_latency_ms","min_latency_ms","p50_latency_ms","p95_latency_ms",'
         '"p99_latency_ms","max_latency_ms"\n"GET","57142.86","0.024","0.008","0.023","0.039",'
         '"{p99}","0.175"\n')
STRESS = """stress-ng: info:  [7422] dispatching hogs: 2 cpu
stress-ng: metrc: [7422] stressor       bogo ops real time  usr time  sys time   bogo ops/s     bogo ops/s
stress-ng: metrc: [7422]                           (secs)    (secs)    (secs)   (real time) (usr+sys time)
stress-ng: metrc: [7422] cpu               {ops}      2.00      1.97      0.00      1233.93        1252.32
stress-ng: info:  [7422] successful run completed in 2.01s
"""


def write(d, name, text):
    with open(os.path.join(d, name), "w") as f:
        f.write(text)


class SummarizeTest(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        d = self.d = self.tmp.name
        p99 = {"solo": [500, 700, 600], "nocolod": [4_000_000, 5_000_000, 3_000_000],
               "colod": [800, 900, 650]}
        ops = {"nocolod": [1000, 1200, 1100], "colod": [900, 950, 1000]}
        trig = []
        base = 1_000_000_000_000
        writes = []
        for r in range(3):
            for k in ("solo", "nocolod", "colod"):
                tag = f"r{r + 1}-{k}"
                write(d, f"{tag}.ls-probe.out", PROBE.format(m=0, p99=p99[k][r]))
                write(d, f"{tag}.ls-redis.out", REDIS.format(p99="0.100"))
                if k != "solo":
                    write(d, f"{tag}.be-cpu.out", STRESS.format(ops=ops[k][r] // 2))
                    write(d, f"{tag}.be-antagonist.out", STRESS.format(ops=ops[k][r] // 2))
                if k == "colod":
                    t0 = base + r * 10**11
                    trig += [f"{tag} colod-started {t0}", f"{tag} be-cpu {t0 + 10**9}",
                             f"{tag} be-antagonist {t0 + 5 * 10**9}",
                             f"{tag} colod-stopped {t0 + 9 * 10**9}"]
                    # colod reacts 100+r ms after the BE start, 200 ms after the antagonist.
                    writes.append((t0 + 10**9 + (100 + r) * 10**6, "be-cpu"))
                    writes.append((t0 + 5 * 10**9 + 200 * 10**6, "be-antagonist"))
        write(d, "triggers.txt", "\n".join(trig) + "\n")
        log = ['{"event":"cgroup-write","container":"%s","file":"cpu.shares","new":"2",'
               '"source":"update","ts_ns":%d}' % (c, t) for t, c in writes]
        # Writes from other sources (kubelet, create) are not colod's.
        log.append('{"event":"cgroup-write","container":"be-cpu","source":"create","ts_ns":%d}'
                   % (base + 10**9 + 1))
        write(d, "peer.log", "\n".join(log) + "\n")
        write(d, "rss.txt", "colod_rss_mib=21.5 containers=1000\n")
        # 10 s on 2 CPUs: machine busy 8 s of CPU, the node 6 s -> other 10 %, node 30 %.
        write(d, "phase-cpu.txt", "r1-solo 2 0 100 50 10000000000 8000000100 6000000050\n"
                                  "r2-solo 2 0 0 0 10000000000 16000000000 6000000000\n")

    def tearDown(self):
        self.tmp.cleanup()

    def test_parsers(self):
        self.assertEqual(summarize.probe_result(self.d, "r1-solo")["p99_us"], 500)
        self.assertAlmostEqual(summarize.redis_p99_us(self.d, "r1-solo"), 100.0)
        self.assertEqual(summarize.be_ops(self.d, "r2-nocolod"), 1200)
        self.assertIsNone(summarize.be_ops(self.d, "r1-solo"))

    def test_phase_cpu_noise(self):
        cpu = summarize.phase_cpu(self.d)
        wall, other, node = cpu["r1-solo"]
        self.assertAlmostEqual(wall, 10.0)
        self.assertAlmostEqual(other, 10.0)
        self.assertAlmostEqual(node, 30.0)
        self.assertAlmostEqual(cpu["r2-solo"][1], 50.0)
        line = summarize.phase_line([r for r in summarize.phases(self.d)
                                     if r["tag"] == "r2-solo"][0])
        self.assertTrue(line.endswith("other_cpu_pct=50 NOISY"), line)

    def test_reactions_use_only_colod_updates(self):
        samples, notes = summarize.reactions(self.d)
        self.assertEqual(sorted(round(s) for s in samples), [100, 101, 102, 200, 200, 200])
        self.assertEqual(notes, [])

    def test_restricted_before_start_is_reaction_zero(self):
        def w(ts, c, new, old):
            return ('{"event":"cgroup-write","container":"%s","file":"cpuset.cpus","new":"%s",'
                    '"old":"%s","source":"update","ts_ns":%d}' % (c, new, old, ts))
        with tempfile.TemporaryDirectory() as d:
            s = 10**9
            write(d, "triggers.txt", "\n".join([
                "r1-colod colod-started 0", f"r1-colod be-cpu {s}",
                f"r1-colod be-antagonist {5 * s}", f"r1-colod colod-stopped {9 * s}",
                f"r2-colod colod-started {10 * s}", f"r2-colod be-cpu {11 * s}",
                f"r2-colod be-antagonist {15 * s}", f"r2-colod colod-stopped {19 * s}"]) + "\n")
            write(d, "peer.log", "\n".join([
                # r1: the idle antagonist joins the split at 1.2 s, long before it starts.
                w(s + 100 * 10**6, "be-cpu", "1", "0-1"),
                w(s + 200 * 10**6, "be-antagonist", "1", "0-1"),
                w(9 * s, "be-antagonist", "0-1", "1"),
                # r2: restricted, then given back before it starts: a real reaction follows.
                w(11 * s + 100 * 10**6, "be-cpu", "1", "0-1"),
                w(12 * s, "be-antagonist", "1", "0-1"),
                w(13 * s, "be-antagonist", "0-1", "1"),
                w(15 * s + 250 * 10**6, "be-antagonist", "1", "0-1")]) + "\n")
            samples, notes = summarize.reactions(d)
        self.assertEqual(sorted(round(x) for x in samples), [0, 100, 100, 250])
        self.assertEqual(notes, ["r1-colod: antagonist already restricted before it started "
                                 "(reaction 0)"])

    def test_final_line_is_medians(self):
        out = subprocess.run([sys.executable, os.path.join(HERE, "summarize.py"), self.d],
                             check=True, capture_output=True, text=True).stdout
        lines = out.strip().splitlines()
        self.assertEqual(lines[-2], "colocation: ls_p99_solo_us=600 ls_p99_nocolod_us=4000000 "
                                    "ls_p99_colod_us=800 be_ops_nocolod=1100 be_ops_colod=950 "
                                    "reaction_p50_ms=151 colod_rss_mib=21.5")
        # Phases this run did not have are NA, never guessed.
        self.assertEqual(lines[-1], "protection: ls_p99_solo_us=600 ls_p99_floor_us=NA "
                                    "ls_p99_colod_us=800 ls_p99_suppress_us=NA "
                                    "ls_p99_nocolod_us=4000000 be_ops_nocolod=1100 "
                                    "be_ops_colod=950 be_ops_suppress=NA reaction_busy_p50_ms=NA "
                                    "foreign_ls_ratio=NA foreign_be_ratio=NA be_harvest=NA "
                                    "colod_rss_mib=21.5")
        self.assertIn("target be_ops_colod >= 0.7 x nocolod: PASS", out)
        self.assertFalse([l for l in lines if l.startswith("target") and "floor" in l])



def cgw(ts, c, new, old, source="update", f="cpuset.cpus"):
    return ('{"event":"cgroup-write","container":"%s","file":"%s","new":"%s","old":"%s",'
            '"source":"%s","ts_ns":%d}' % (c, f, new, old, source, ts))


# colod's decision to restrict be-busy, 30 ms after busy_run()'s trigger (colod.log, UTC).
BUSY_DECISION = ("2026-11-28T21:06:40.030000 info decision seq=2 kind=engage lever=cpuset "
                 "target=bench/be-busy/be-busy victim=bench/ls-probe/ls-probe "
                 "values=\"cpus=1\"\n")


def busy_run(d, colod_log, requests_us):
    """A busy phase whose BE turned busy at 2026-11-28T21:06:40Z: colod.log as given, the
    runtime's update requests at the given µs after that, its cgroup write at +70 ms."""
    s = 10**9
    t0 = 1_795_900_000 * s  # 2026-11-28T21:06:40Z
    write(d, "triggers.txt", f"r1-busy colod-started {t0 - s}\nr1-busy be-busy {t0}\n"
                             f"r1-busy colod-stopped {t0 + 9 * s}\n")
    write(d, "colod.log", colod_log)
    write(d, "peer.log", "\n".join(
        [json.dumps({"event": "update-request", "ts_ns": t0 + us * 1000}) for us in requests_us]
        + [cgw(t0 + 70 * 10**6, "be-busy", "1", "0-1")]) + "\n")


class ProtectionTest(unittest.TestCase):
    """The issue-15 phases: floor, suppress, busy, foreign, dynamic and the protection line."""

    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        d = self.d = self.tmp.name
        s = 10**9
        p99 = {"solo": [500, 520], "floor": [1000, 1100], "split": [1500, 1700],
               "nocolod": [9_000_000, 8_000_000],
               "colod": [1150, 1250], "suppress": [3000, 2000], "busy": [1300, 1400],
               "foreign-nocolod": [40_000, 60_000], "foreign-colod": [30_000, 40_000]}
        ops = {"split": [900, 700], "nocolod": [1000, 1000], "colod": [800, 760],
               "suppress": [500, 700],
               "busy": [400, 400], "foreign-nocolod": [600, 600], "foreign-colod": [540, 600]}
        trig, log, usage = [], [], []
        for r in range(2):
            for k in list(p99) + ["dynamic"]:
                tag = f"r{r + 1}-{k}"
                if k in p99:
                    write(d, f"{tag}.ls-probe.out", PROBE.format(m=0, p99=p99[k][r]))
                if k in ops:
                    name = "be-busy" if k == "busy" else "be-cpu"
                    write(d, f"{tag}.{name}.out", STRESS.format(ops=ops[k][r]))
            t0 = (100 + 100 * r) * s
            # busy: be-busy triggered at +5 s; colod restricts it 12 / 18 ms later.
            trig += [f"r{r + 1}-busy colod-started {t0}", f"r{r + 1}-busy be-busy {t0 + 5 * s}",
                     f"r{r + 1}-busy colod-stopped {t0 + 9 * s}"]
            log.append(cgw(t0 + 5 * s + (12 + 6 * r) * 10**6, "be-busy", "1", "0-1"))
            # The LS probe's late requests: one before the trigger (not the BE's), then the first
            # after it 4 / 8 ms in.
            write(d, f"r{r + 1}-busy.ls-probe.late",
                  f"{t0 + 2 * s} 1500\n{t0 + 5 * s + (4 + 4 * r) * 10**6} 2100\n"
                  f"{t0 + 5 * s + 20 * 10**6} 9000\n")
            # colod: BE pods placed at creation (adjust, 3 ms after the arrival stamp).
            t1 = t0 + 20 * s
            trig += [f"r{r + 1}-colod colod-started {t1}", f"r{r + 1}-colod be-cpu {t1 + s}",
                     f"r{r + 1}-colod colod-stopped {t1 + 9 * s}"]
            log.append(cgw(t1 + s + 3 * 10**6, "be-cpu", "1", "0-1", source="adjust"))
            # The suppress plugin's writes in its own phase are not colod's reactions.
            trig += [f"r{r + 1}-suppress suppress-started {t1 + 30 * s}"]
            log.append(cgw(t1 + 31 * s, "be-cpu", "1", "0-1"))
            # dynamic: 3 steps of 10 s on 2 CPUs; LS 2 / 12 / 2 CPU-s; BE 16 / 7 / 17 CPU-s.
            tag = f"r{r + 1}-dynamic"
            for k, p in enumerate((700, 1500, 800)):
                write(d, f"{tag}@{k + 1}.ls-probe.out", PROBE.format(m=0, p99=p + r))
            ls = be = 0
            tu = 1000 * s * (r + 1)
            usage.append(f"{tag}@0 {tu} 2 ls-probe=0 be-cpu=0 be-busy=5")
            for k, (dl, db) in enumerate(((2, 16), (12, 7), (2, 17))):
                ls, be = ls + dl * s, be + db * s
                usage.append(f"{tag}@{k + 1} {tu + 10 * s * (k + 1)} 2 ls-probe={ls} "
                             f"be-cpu={be} be-busy=5")
        write(d, "triggers.txt", "\n".join(trig) + "\n")
        write(d, "peer.log", "\n".join(log) + "\n")
        write(d, "usage.txt", "\n".join(usage) + "\n")
        write(d, "rss.txt", "colod_rss_mib=30.0 containers=1000\n")
        write(d, "rss-big.txt", "colod_rss_mib=32.4 containers=1000 colod_cpu_pct=1.2 "
                                "node_cpus=192\n")

    def tearDown(self):
        self.tmp.cleanup()

    def test_harvest_from_usage_samples(self):
        h, steps = summarize.harvest(self.d, "r1-dynamic")
        # idle for BE: 20-2=18, 20-12=8, 20-2=18 CPU-s; BE used 16, 7, 17 -> 40/44.
        self.assertAlmostEqual(h, 40 / 44)
        self.assertEqual([round(x, 3) for x in steps], [round(16 / 18, 3), 0.875,
                                                         round(17 / 18, 3)])
        self.assertEqual(summarize.harvest(self.d, "r9-dynamic"), (None, []))

    def test_a_step_after_the_be_pods_ended_is_not_harvest(self):
        # r1's BE pods ended 5 s into its last step (job.sh's end_ns): that step is not
        # measured (None), the phase reads its first two: (16 + 7) / (18 + 8).
        s = 10**9
        tu = 1000 * s
        write(self.d, "r1-dynamic.be-cpu.done", f"rc=0 end_ns={tu + 25 * s}\n")
        write(self.d, "r1-dynamic.be-busy.done", f"rc=0 end_ns={tu + 40 * s}\n")
        h, steps = summarize.harvest(self.d, "r1-dynamic")
        self.assertAlmostEqual(h, 23 / 26)
        self.assertEqual(len(steps), 3)
        self.assertIsNone(steps[2])
        self.assertAlmostEqual(summarize.split_ceiling(self.d, "r1-dynamic"), 18 / 26)
        # Within the slack (1 s), and done files without end_ns (older runs): every step.
        write(self.d, "r1-dynamic.be-cpu.done", f"rc=0 end_ns={tu + 29 * s + 10**8}\n")
        self.assertAlmostEqual(summarize.harvest(self.d, "r1-dynamic")[0], 40 / 44)
        write(self.d, "r1-dynamic.be-cpu.done", "rc=0\n")
        write(self.d, "r1-dynamic.be-busy.done", "rc=0\n")
        self.assertAlmostEqual(summarize.harvest(self.d, "r1-dynamic")[0], 40 / 44)

    def test_split_ceiling_keeps_the_ls_alone_on_whole_cpus(self):
        # LS 0.2 / 1.2 / 0.2 CPUs of 2: it needs 1 / 2 / 1 CPUs, the split leaves BE at least
        # be_min_cpus (1): BE may have 10 of 18, 8 of 8 (all that is idle), 10 of 18 CPU-s.
        self.assertAlmostEqual(summarize.split_ceiling(self.d, "r1-dynamic"), 28 / 44)
        self.assertIsNone(summarize.split_ceiling(self.d, "r9-dynamic"))
        # On 8 CPUs an LS at half a CPU leaves BE 7 of the 7.5 idle.
        s = 10**9
        big = {"t@0": (0, 8, {"ls-a": 0, "be-b": 0}), "t@1": (10 * s, 8, {"ls-a": 5 * s,
                                                                          "be-b": 70 * s})}
        self.assertAlmostEqual(summarize.split_ceiling(self.d, "t", big), 70 / 75)
        # A larger BE floor than the LS leaves: BE keeps its floor.
        self.assertAlmostEqual(summarize.split_ceiling(self.d, "t", {
            "t@0": (0, 4, {"ls-a": 0}), "t@1": (10 * s, 4, {"ls-a": 35 * s})}, be_min_cpus=2), 1.0)
        self.assertAlmostEqual(summarize.split_ceiling(self.d, "t", {
            "t@0": (0, 4, {"ls-a": 0}), "t@1": (10 * s, 4, {"ls-a": 15 * s})}, be_min_cpus=1),
            20 / 25)

    def test_be_min_cpus_from_the_runs_colod_config(self):
        self.assertEqual(summarize.be_min_cpus_of(self.d), 1)  # no colod.yaml: the default
        write(self.d, "colod.yaml", "policy:\n  floors:\n    be_min_cpus: 3\n")
        self.assertEqual(summarize.be_min_cpus_of(self.d), 3)

    def test_dynamic_row_has_steps_and_worst_step_p99(self):
        row = [r for r in summarize.phases(self.d) if r["tag"] == "r2-dynamic"][0]
        self.assertEqual(row["step_p99"], [701, 1501, 801])
        self.assertEqual(row["p99"], 1501)
        # Step tags are not phases of their own.
        self.assertFalse([r for r in summarize.phases(self.d) if "@" in r["tag"]])
        self.assertIn("step_p99_us=701,1501,801 be_harvest=0.91", summarize.phase_line(row))

    def test_reactions_busy_and_admission(self):
        busy, notes = summarize.reactions(self.d, "busy")
        self.assertEqual(sorted(round(x) for x in busy), [12, 18])
        self.assertEqual(notes, [])
        arrive, _ = summarize.reactions(self.d)
        self.assertEqual(sorted(round(x) for x in arrive), [3, 3])

    def test_the_workers_own_start_stamp_wins(self):
        # r1's be-busy stamped its own start 10 ms after the harness's stamp: colod's write
        # 12 ms after the harness's is 2 ms after the start.
        t0 = 100 * 10**9 + 5 * 10**9
        write(self.d, "r1-busy.be-busy.start", f"{t0 + 10 * 10**6}\n")
        busy, _ = summarize.reactions(self.d, "busy")
        self.assertEqual(sorted(round(x) for x in busy), [2, 18])

    def test_busy_reaction_split_at_the_first_late_request(self):
        hurt, from_hurt = summarize.busy_split(self.d)
        self.assertEqual([round(x) for x in hurt], [4, 8])
        self.assertEqual([round(x) for x in from_hurt], [8, 10])

    def test_busy_write_before_the_first_late_request_is_zero(self):
        with tempfile.TemporaryDirectory() as d:
            s = 10**9
            write(d, "triggers.txt", f"r1-busy colod-started 0\nr1-busy be-busy {s}\n"
                                     f"r1-busy colod-stopped {9 * s}\n")
            write(d, "peer.log", cgw(s + 10 * 10**6, "be-busy", "1", "0-1") + "\n")
            write(d, "r1-busy.ls-probe.late", f"{s + 30 * 10**6} 1200\n")
            hurt, from_hurt = summarize.busy_split(d)
        self.assertEqual([round(x) for x in hurt], [30])
        self.assertEqual(from_hurt, [0.0])

    def test_busy_reaction_cut_where_it_changes_hands(self):
        # colod decided 30 ms after the start (colod.log, UTC), the runtime logged the request
        # 25 ms later and wrote the cgroup 15 ms after that; a decision on another container and
        # a request before the decision are not this reaction's.
        with tempfile.TemporaryDirectory() as d:
            busy_run(d, "2026-11-28T21:06:40.010000 info decision seq=1 kind=engage "
                        "lever=cpuset target=bench/be-cpu/be-cpu victim=x values=\"cpus=1\"\n"
                        + BUSY_DECISION +
                        "2026-11-28T21:06:40.031000 info finding container=abc rule=x\n",
                     [20_000, 55_000])
            decide, send, runtime = summarize.busy_chain(d)
        self.assertEqual([round(x) for x in decide], [30])
        self.assertEqual([round(x) for x in send], [25])
        self.assertEqual([round(x) for x in runtime], [15])

    def test_busy_send_cut_at_colods_send(self):
        # colod decided 30 ms after the start and logged its call answered 41.5 ms later with an
        # answer time of 40 ms: sent 1.5 ms after the decision; the runtime read it 20 ms after
        # that. A call for another container, and a request before the decision, are not this
        # reaction's.
        with tempfile.TemporaryDirectory() as d:
            busy_run(d, BUSY_DECISION +
                        "2026-11-28T21:06:40.040000 info nri: UpdateContainers for "
                        "bench/be-cpu/be-cpu answered in 2.0 ms\n"
                        "2026-11-28T21:06:40.071500 info nri: UpdateContainers for "
                        "bench/be-cache/be-cache,bench/be-busy/be-busy answered in 40.0 ms\n",
                     [25_000, 51_500])
            colod, reads = summarize.busy_send_split(d)
            _, send, _ = summarize.busy_chain(d)
        self.assertEqual([round(x, 1) for x in colod], [1.5])
        self.assertEqual([round(x, 1) for x in reads], [20.0])
        self.assertEqual([round(x, 1) for x in send], [21.5], "the two parts add up")

    def test_protection_line(self):
        out = subprocess.run([sys.executable, os.path.join(HERE, "summarize.py"), self.d],
                             check=True, capture_output=True, text=True).stdout
        last = out.strip().splitlines()[-1]
        self.assertEqual(last, "protection: ls_p99_solo_us=510 ls_p99_floor_us=1050 "
                               "ls_p99_colod_us=1200 ls_p99_suppress_us=2500 "
                               "ls_p99_nocolod_us=8500000 be_ops_nocolod=1000 be_ops_colod=780 "
                               "be_ops_suppress=600 reaction_busy_p50_ms=15 "
                               "foreign_ls_ratio=0.70 foreign_be_ratio=0.95 be_harvest=0.91 "
                               "colod_rss_mib=30.0")
        self.assertIn("target ls_p99_colod_us <= 1.2 x floor: PASS (1.14x)", out)
        # The static split with BE on the other CPU: LS p99 1600, BE 800 ops.
        self.assertIn("split: ls_p99_split_us=1600 be_ops_split=800 split/floor=1.52x "
                      "colod/split=0.75x", out)
        self.assertIn("target ls_p99_colod_us <= ls_p99_suppress_us: PASS", out)
        self.assertIn("target be_ops_colod >= be_ops_suppress: PASS (1.30x)", out)
        self.assertIn("target be_harvest >= 0.8: PASS (0.91)", out)
        self.assertIn("target reaction_busy_p50_ms <= 20: PASS (15 ms)", out)
        self.assertIn("target reaction from the LS's first late request p50 <= 20: PASS (9 ms; "
                      "trigger -> first late p50 6 ms)", out)
        self.assertIn("target foreign_ls_ratio <= 1.0: PASS (0.70)", out)
        self.assertIn("target foreign_be_ratio >= 0.9: PASS (0.95)", out)
        self.assertIn("LS p99 us per step (med) 700 1500 800", out)
        self.assertNotIn("harvest: ", out)  # no dynamic-nocolod phase: no ceiling

    def test_harvest_against_its_ceiling_without_colod(self):
        # dynamic-nocolod in both rounds: the same LS steps, BE 17 / 8 / 18 CPU-s of the
        # 18 / 8 / 18 left idle -> 43/44; colod's dynamic 40/44.
        s = 10**9
        usage = []
        for r in range(2):
            tag = f"r{r + 1}-dynamic-nocolod"
            for k, p in enumerate((600, 1400, 650)):
                write(self.d, f"{tag}@{k + 1}.ls-probe.out", PROBE.format(m=0, p99=p))
            ls = be = 0
            tu = 5000 * s * (r + 1)
            usage.append(f"{tag}@0 {tu} 2 ls-probe=0 be-cpu=0")
            for k, (dl, db) in enumerate(((2, 17), (12, 8), (2, 18))):
                ls, be = ls + dl * s, be + db * s
                usage.append(f"{tag}@{k + 1} {tu + 10 * s * (k + 1)} 2 ls-probe={ls} be-cpu={be}")
        with open(os.path.join(self.d, "usage.txt"), "a", encoding="utf-8") as f:
            f.write("\n".join(usage) + "\n")
        row = [r for r in summarize.phases(self.d) if r["tag"] == "r1-dynamic-nocolod"][0]
        self.assertEqual(row["kind"], "dynamic-nocolod")
        self.assertAlmostEqual(row["harvest"], 43 / 44)
        self.assertEqual(row["p99"], 1400)
        out = subprocess.run([sys.executable, os.path.join(HERE, "summarize.py"), self.d],
                             check=True, capture_output=True, text=True).stdout
        self.assertIn("dynamic-nocolod (LS 10% -> 60% -> 10% of the node, no colod): LS p99 us "
                      "per step (med) 600 1400 650; be_harvest per step 0.94 1.00 1.00", out)
        self.assertIn("harvest: be_harvest_nocolod=0.98 be_harvest_colod=0.91 "
                      "colod/nocolod=0.93x", out)
        self.assertIn("target be_harvest >= 0.8 x its ceiling (dynamic-nocolod): PASS "
                      "(0.91 vs 0.98: 0.93x)", out)
        # Keeping the LS alone on its CPUs leaves BE 28 of the 44 idle CPU-s; this colod took
        # more (it shared the LS's CPU).
        self.assertIn("colod/nocolod=0.93x split_ceiling=0.64 colod/split_ceiling=1.43x", out)
        self.assertIn("target be_harvest >= 0.8 x the split's ceiling (LS alone on whole CPUs): "
                      "PASS (0.91 vs 0.64: 1.43x)", out)
        # The protection line keeps colod's own figure.
        self.assertIn("be_harvest=0.91 colod_rss_mib=30.0", out.strip().splitlines()[-1])
        self.assertIn("colod rss on a 192-CPU node's tables: 32.4 MiB with 1000 containers", out)
        self.assertIn("target colod_rss_mib <= 32 on a 192-CPU node's tables: FAIL (32.4 MiB)",
                      out)


class RoundGapsTest(unittest.TestCase):
    """round_gaps.py: colod's round times from a recorded trace, against the busy BE's start."""

    def test_gaps_after_the_busy_start(self):
        import json
        import round_gaps
        with tempfile.TemporaryDirectory() as d:
            wall0, mono0 = 1_800_000_000_000_000_000, 50_000_000_000
            write(d, "r1-busy.trace.clock", f"{wall0} {mono0}\n")
            start = wall0 + 1_000_000_000  # the BE starts 1 s after the clock pair
            write(d, "r1-busy.be-busy.start", f"{start}\n")
            lines = [json.dumps({"type": "header", "version": 1})]
            # Rounds at -30, -10, 10, 30, 100 and 600 ms from the start (colod's steady clock).
            for ms in (-30, -10, 10, 30, 100, 600):
                lines.append(json.dumps({"type": "snapshot", "containers": [],
                                         "now_ns": mono0 + 1_000_000_000 + ms * 1_000_000}))
            lines.append('{"type": "snap')  # cut by the recorder's stop
            write(d, "r1-busy.trace", "\n".join(lines) + "\n")
            write(d, "r2-busy.trace", lines[0] + "\n")  # no clock, no stamp: not counted
            times = round_gaps.round_times_ms(os.path.join(d, "r1-busy.trace"),
                                              os.path.join(d, "r1-busy.trace.clock"), start)
            self.assertEqual([round(t) for t in times], [-30, -10, 10, 30, 100, 600])
            # In the 500 ms window: -10 -> 10, 10 -> 30, 30 -> 100; 600 is past it.
            self.assertEqual([round(g) for g in round_gaps.gaps_in_window(times, 500)],
                             [20, 20, 70])
            out = subprocess.run([sys.executable, os.path.join(HERE, "round_gaps.py"), d],
                                 check=True, capture_output=True, text=True).stdout
            self.assertIn("rounds: trace=r1-busy window_ms=500 n=3 gap_p50_ms=20.0 "
                          "gap_p90_ms=70.0 gap_max_ms=70.0", out)
            self.assertEqual(out.strip().splitlines()[-1],
                             "rounds: all traces=1 window_ms=500 n=3 gap_p50_ms=20.0 "
                             "gap_p90_ms=70.0 gap_max_ms=70.0")

    def test_no_trace_is_an_error(self):
        with tempfile.TemporaryDirectory() as d:
            r = subprocess.run([sys.executable, os.path.join(HERE, "round_gaps.py"), d],
                               capture_output=True, text=True)
            self.assertEqual(r.returncode, 1)
            self.assertIn("no trace with a be-busy start stamp", r.stderr)


if __name__ == "__main__":
    unittest.main()
