#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Tests the blame benchmark's summarizer and scenario table from strings (verbatim formats of
colod-probe, stress-ng --metrics-brief and colod-testpeer's event log); one test goes through a
synthetic run directory end to end (ctest blame_summarize_test, label unit)."""
import io
import json
import os
import sys
import tempfile
import unittest
from contextlib import redirect_stderr, redirect_stdout

HERE = os.path.dirname(os.path.abspath(__file__))
sys.dont_write_bytecode = True  # no __pycache__ in the source tree
sys.path.insert(0, HERE)
import scenarios  # noqa: E402
import summarize  # noqa: E402

PROBE = ("probe: threads=1 period_us=1000 work_us=300 duration_s=9.0 requests=9000 missed=0 "
         "p50_us=360 p90_us=380 p99_us={p99} p999_us=9000 max_us=12000 mean_us=400.0 "
         "cpu_pct_node=15.0\n")
STRESS = """stress-ng: info:  [7422] dispatching hogs: 1 cpu
stress-ng: metrc: [7422] stressor       bogo ops real time  usr time  sys time   bogo ops/s     bogo ops/s
stress-ng: metrc: [7422]                           (secs)    (secs)    (secs)   (real time) (usr+sys time)
stress-ng: metrc: [7422] cpu               {ops}     10.00      9.70      0.00      1233.93        1252.32
stress-ng: info:  [7422] successful run completed in 10.01s
"""
T0 = 1_795_624_000_000_000_000


def write_ev(ctr, file, old, new, source, ts):
    return json.dumps({"event": "cgroup-write", "container": ctr,
                       "file": f"/sys/fs/cgroup/cpu/x/{file}", "old": old, "new": new,
                       "source": source, "ts_ns": ts})


def updated_ev(ctr, plugin, ts):
    return json.dumps({"event": "container-updated", "container": ctr, "plugin": plugin,
                       "source": "update", "fields": ["CPUQuota"], "ts_ns": ts})


class ParseTest(unittest.TestCase):
    def test_probe(self):
        self.assertEqual(summarize.parse_probe("noise\n" + PROBE.format(p99=4242))["p99_us"], 4242)
        self.assertIsNone(summarize.parse_probe("colod-probe: error\n"))
        self.assertIsNone(summarize.parse_probe(None))

    def test_stress_rate_is_ops_over_wall_time(self):
        self.assertAlmostEqual(summarize.parse_stress_rate(STRESS.format(ops=12000)), 1200.0)
        two = STRESS.format(ops=1000) + STRESS.format(ops=3000).replace("cpu      ", "fork     ")
        self.assertAlmostEqual(summarize.parse_stress_rate(two), 400.0)
        self.assertIsNone(summarize.parse_stress_rate("stress-ng: info: no metrics\n"))

    def test_cpu_lists_compare_as_sets(self):
        self.assertEqual(summarize.cpu_list("0-2,4"), {0, 1, 2, 4})
        self.assertIsNone(summarize.cpu_list("max"))
        self.assertFalse(summarize.changed("cpuset.cpus", "0,1", "0-1"))
        self.assertTrue(summarize.changed("cpuset.cpus", "0-1", "0"))
        self.assertFalse(summarize.changed("cpu.shares", "1024", "1024\n"))
        self.assertTrue(summarize.changed("cpu.cfs_quota_us", "-1", "20000"))

    def test_peer_log_keeps_plugin_writes_only(self):
        log = "\n".join([
            write_ev("be-a", "cpu.shares", "1024", "409", "create", T0),
            write_ev("be-a", "cpuset.cpus", "0-1", "0", "adjust", T0 + 1),
            write_ev("be-a", "cpu.cfs_quota_us", "-1", "20000", "update", T0 + 2),
            write_ev("be-a", "cpu.shares", "1024", "512", "kubelet", T0 + 3),
            updated_ev("be-a", "50-colod", T0 + 2),
            "not json", '{"event":"cgroup-write"}'])
        writes, updaters = summarize.parse_peer_log(log)
        self.assertEqual([(w[2], w[5]) for w in writes],
                         [("cpuset.cpus", "adjust"), ("cpu.cfs_quota_us", "update")])
        self.assertEqual(updaters, [(T0 + 2, "be-a", "50-colod")])

    def test_restrictions_need_a_change_inside_the_window(self):
        writes, _ = summarize.parse_peer_log("\n".join([
            write_ev("be-a", "cpu.shares", "1024", "1024", "adjust", T0 + 5),  # no-op re-apply
            write_ev("be-b", "cpu.cfs_quota_us", "-1", "20000", "update", T0 + 5),
            write_ev("be-c", "cpuset.cpus", "0-1", "0", "update", T0 + 50),  # after the window
        ]))
        self.assertEqual(list(summarize.restrictions(writes, T0, T0 + 10)), ["be-b"])

    def test_triggers_and_roles(self):
        trig = summarize.parse_triggers("t1-colod colod-started 5\nt1-colod be-a 7\nbad line\n")
        self.assertEqual(trig, {"t1-colod": {"colod-started": 5, "be-a": 7}})
        self.assertEqual(summarize.parse_roles("ls-probe ls\nbe-a antagonist\n"),
                         {"ls-probe": "ls", "be-a": "antagonist"})


ROLES = {"ls-probe": "ls", "be-hog": "antagonist", "be-away": "innocent"}


def trial_inputs(p99=(100_000, 5_000), ops=(10000, 9800)):
    trig = {"t1-nocolod": {"phase-start": T0, "window-end": T0 + 10**10},
            "t1-colod": {"phase-start": T0 + 2 * 10**10, "colod-started": T0 + 21 * 10**9,
                         "window-end": T0 + 31 * 10**9}}
    outputs = {("t1-nocolod", "ls-probe"): PROBE.format(p99=p99[0]),
               ("t1-colod", "ls-probe"): PROBE.format(p99=p99[1]),
               ("t1-nocolod", "be-away"): STRESS.format(ops=ops[0]),
               ("t1-colod", "be-away"): STRESS.format(ops=ops[1])}
    return trig, outputs


class TrialTest(unittest.TestCase):
    def test_hit_and_spared(self):
        trig, outputs = trial_inputs()
        writes, up = summarize.parse_peer_log(
            write_ev("be-hog", "cpu.cfs_quota_us", "-1", "20000", "update", T0 + 25 * 10**9)
            + "\n" + updated_ev("be-hog", "50-colod", T0 + 25 * 10**9))
        r = summarize.trial(1, ROLES, trig, writes, up, outputs)
        self.assertTrue(r["complete"])
        self.assertTrue(r["hit"])
        self.assertTrue(r["spared"])
        self.assertAlmostEqual(r["work"]["be-away"], 0.98)
        self.assertAlmostEqual(r["p99"], 0.05)
        self.assertEqual(r["notes"], [])

    def test_innocent_restricted_and_antagonist_missed(self):
        trig, outputs = trial_inputs()
        writes, up = summarize.parse_peer_log(
            write_ev("be-away", "cpuset.cpus", "0", "1", "adjust", T0 + 22 * 10**9))
        r = summarize.trial(1, ROLES, trig, writes, up, outputs)
        self.assertFalse(r["hit"])
        self.assertFalse(r["spared"])
        self.assertIn("cpuset.cpus 0->1 @+1.0s (adjust)", summarize.trial_line("s", r))

    def test_writes_outside_colod_and_other_plugins_are_noted(self):
        trig, outputs = trial_inputs()
        writes, up = summarize.parse_peer_log("\n".join([
            write_ev("be-hog", "cpu.shares", "1024", "2", "update", T0 + 5 * 10**9),
            updated_ev("be-hog", "10-other", T0 + 25 * 10**9)]))
        r = summarize.trial(1, ROLES, trig, writes, up, outputs)
        self.assertFalse(r["hit"])  # the nocolod-phase write is not colod's restriction
        self.assertTrue(any("nocolod" in n for n in r["notes"]))
        self.assertTrue(any("10-other" in n for n in r["notes"]))

    def test_trial_without_colod_is_incomplete(self):
        trig, outputs = trial_inputs()
        del trig["t1-colod"]["colod-started"]
        r = summarize.trial(1, ROLES, trig, [], [], outputs)
        self.assertFalse(r["complete"])
        self.assertIsNone(r["hit"])
        self.assertIn("INCOMPLETE", summarize.trial_line("s", r))

    def test_aggregate_targets_and_last_line(self):
        mk = lambda hit, spared, work, p99: {"complete": True, "hit": hit, "spared": spared,
                                              "work": {"be-away": work}, "p99": p99}
        a = summarize.aggregate([mk(True, True, 1.0, 0.05), mk(True, False, 0.5, 0.02),
                                 mk(False, True, 0.97, 0.2),
                                 {"complete": False, "hit": None, "spared": None, "work": {},
                                  "p99": None}])
        self.assertEqual(a["trials"], 3)
        self.assertEqual(a["incomplete"], 1)
        self.assertAlmostEqual(a["antagonist_hit"], 2 / 3)
        self.assertAlmostEqual(a["innocent_work_ratio"], 0.97)
        self.assertAlmostEqual(a["ls_p99_ratio"], 0.05)
        self.assertEqual(summarize.blame_line(2, a),
                         "blame: scenarios=2 trials=3 antagonist_hit=0.67 innocent_spared=0.67 "
                         "innocent_work_ratio=0.97 ls_p99_ratio=0.050")
        verdicts = [t for t, _ in summarize.targets(a)]
        self.assertEqual(verdicts[0], "target antagonist_hit >= 0.95: FAIL (0.667)")
        self.assertEqual(verdicts[2], "target innocent_work_ratio >= 0.95: PASS (0.970)")
        self.assertEqual(verdicts[3], "target ls_p99_ratio <= 0.1: PASS (0.050)")
        self.assertIn("1 incomplete", verdicts[4])

    def test_unmeasured_goal_fails(self):
        a = summarize.aggregate([])
        self.assertTrue(all(not ok for _, ok in summarize.targets(a)))
        self.assertIn("antagonist_hit=NA", summarize.blame_line(0, a))


class ScenariosTest(unittest.TestCase):
    def test_every_scenario_has_one_antagonist_and_an_innocent(self):
        for name in scenarios.SCENARIOS:
            roles = [c[1] for c in scenarios.containers(name)]
            self.assertEqual(roles[0], "ls", name)
            self.assertEqual(roles.count("antagonist"), 1, name)
            self.assertGreaterEqual(roles.count("innocent"), 1, name)

    def test_placements(self):
        self.assertEqual(scenarios.cpus(scenarios.LS_CPU, 2), "1")
        self.assertEqual(scenarios.cpus(scenarios.AWAY, 2), "0")
        self.assertEqual(scenarios.cpus(scenarios.AWAY, 8), "0-6")
        self.assertIsNone(scenarios.cpus(None, 2))

    def test_pin_adds_cpusets_to_the_peer_scenario(self):
        doc = {"pods": [], "timeline": [], "containers": [
            {"name": "ls-probe", "resources": {"cpu_request_milli": 400}},
            {"name": "be-hog", "resources": {"cpu_request_milli": 1000}},
            {"name": "be-away"}]}
        out = json.loads(scenarios.pin(json.dumps(doc), "other-cpus", 2))
        res = {c["name"]: c.get("resources", {}) for c in out["containers"]}
        self.assertEqual(res["ls-probe"], {"cpu_request_milli": 400, "cpus": "1"})
        self.assertNotIn("cpus", res["be-hog"])
        self.assertEqual(res["be-away"], {"cpus": "0"})

    def test_cli_rejects_unknown_and_small_nodes(self):
        with redirect_stderr(io.StringIO()) as err:
            self.assertEqual(scenarios.main(["containers", "nope", "2"]), 3)
            self.assertEqual(scenarios.main(["containers", "light", "1"]), 3)
        self.assertIn("at least 2 CPUs", err.getvalue())


class EndToEndTest(unittest.TestCase):
    def test_run_directory(self):
        with tempfile.TemporaryDirectory() as d:
            with open(os.path.join(d, "scenarios.txt"), "w") as f:
                f.write("other-cpus\n")
            s = os.path.join(d, "other-cpus")
            os.mkdir(s)
            trig, outputs = trial_inputs()
            files = {"roles.txt": "".join(f"{n} {r}\n" for n, r in ROLES.items()),
                     "triggers.txt": "".join(f"{t} {k} {v}\n" for t, m in trig.items()
                                             for k, v in m.items()),
                     "peer.log": write_ev("be-hog", "cpuset.cpus", "0-1", "0", "adjust",
                                          T0 + 23 * 10**9) + "\n"}
            files.update({f"{t}.{n}.out": text for (t, n), text in outputs.items()})
            for name, text in files.items():
                with open(os.path.join(s, name), "w") as f:
                    f.write(text)
            buf = io.StringIO()
            with redirect_stdout(buf):
                self.assertEqual(summarize.main([d]), 0)
            lines = buf.getvalue().splitlines()
            self.assertEqual(lines[-1], "blame: scenarios=1 trials=1 antagonist_hit=1.00 "
                                        "innocent_spared=1.00 innocent_work_ratio=0.98 "
                                        "ls_p99_ratio=0.050")
            self.assertIn("scenario other-cpus: trials=1 antagonist_hit=1.00", buf.getvalue())
            self.assertIn("target ls_p99_ratio <= 0.1: PASS", buf.getvalue())


if __name__ == "__main__":
    unittest.main()
