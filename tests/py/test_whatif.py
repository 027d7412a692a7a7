# SPDX-License-Identifier: BSD-3-Clause
"""`report --what-if` and `calibrate` without a cluster: the bounds of the
histogram prediction hold for random call durations, the blocking totals
tighten them, the model file is strict, the recommendation keeps the time
added within 1 %, the report prints it in every format, and calibrate says
so and stores nothing on a node without RAPL or cpufreq."""
import contextlib
import csv
import io
import json
import os
import random
import tempfile
import unittest
import xml.etree.ElementTree as ET
from pathlib import Path
from types import SimpleNamespace
from typing import Any, Dict, List, Tuple
from unittest import mock

import test_epilog_fixtures as fx
from mpi_pstate.core import noderecord, slurm
from mpi_pstate.model import calibrate, instruments, powermodel, summary, whatif, whatif_terms
from mpi_pstate.site import rankfigures
from mpi_pstate.user import command, report_whatif

MODEL = {"format": "mpi-pstate-model", "version": 1, "node": "n1", "idle_w": 43.0,
         "noise_w": 0.1, "domain_cpus": 1, "meter": "simulated",
         "points": [{"khz": 3000000, "busy_w": 58.0, "poll_w": 58.0},
                    {"khz": 1200000, "busy_w": 45.4, "poll_w": 45.4}],
         "transition": {"write_us": 50.0, "energy_uj": 0.0}}


def hist_of(durations_ns: List[int]) -> List[List[int]]:
    h: Dict[int, int] = {}
    for d in durations_ns:
        b = rankfigures._bucket(d)
        h[b] = h.get(b, 0) + 1
    return [[b, c] for b, c in sorted(h.items())]


def truth(durations_ns: List[int], thr_ns: float) -> Tuple[float, int]:
    over = [d - thr_ns for d in durations_ns if d >= thr_ns]
    return sum(over), len(over)


def waiting_rank(node: str, r: int, waits: List[int], thr_us: int = 500,
                 wall: float = 3.0) -> Dict[str, Any]:
    d = fx.rank(node, r, wall=wall, mpi=sum(waits) / 1e9)
    longs = [w for w in waits if w >= thr_us * 1000]
    d.update(hist_ns=hist_of(waits), threshold_us=thr_us, long_calls=len(longs),
             over_s=sum(w - thr_us * 1000 for w in longs) / 1e9, wait_s=sum(longs) / 1e9)
    return d


def imbalanced(node_waits: Dict[str, List[List[int]]]) -> Dict[str, Any]:
    ranks = []
    k = 0
    for n, per in node_waits.items():
        for w in per:
            r = waiting_rank(n, k, w)
            r["node"] = n
            ranks.append(r)
            k += 1
    return {"ranks": ranks, "nodes": {}, "elapsed_s": 3.0}


class Bounds(unittest.TestCase):
    def test_bounds_hold_for_random_durations(self) -> None:
        rnd = random.Random(14)
        for case in range(300):
            n = rnd.randint(1, 60)
            kind = case % 3
            durs = [int(rnd.lognormvariate(rnd.uniform(6, 18), rnd.uniform(0.1, 2.5)))
                    if kind else rnd.choice([2000, 60_000_000]) + rnd.randint(0, 3000)
                    for _ in range(n)]
            h = [0] * 64
            for b, c in hist_of(durs):
                h[b] = c
            for thr in (0, 1000, 100_000, 500_000, 2_000_000, 50_000_000):
                (d, dlo, dhi), (c, clo, chi) = whatif_terms.excess_bounds(
                    h, float(sum(durs)), thr, float(max(durs)) * 2 + 1)
                td, tc = truth(durs, thr)
                self.assertLessEqual(dlo, td + 1e-3 * max(1, td), (case, thr))
                self.assertGreaterEqual(dhi, td - 1e-3 * max(1, td), (case, thr))
                self.assertTrue(dlo <= d <= dhi)
                self.assertTrue(clo <= tc <= chi, (case, thr, clo, tc, chi))

    def test_total_time_pins_a_bimodal_wait_pattern(self) -> None:
        # 40 waits of 50 ms and 40 exchanges of 20 us: the histogram alone
        # says [33.5, 67) ms, the total says 50 ms: the bounds are within 1 %.
        durs = [50_000_000] * 40 + [20_000] * 40
        h = [0] * 64
        for b, c in hist_of(durs):
            h[b] = c
        (d, dlo, dhi), _ = whatif_terms.excess_bounds(h, float(sum(durs)), 1_000_000, 3e9)
        self.assertAlmostEqual(d, truth(durs, 1_000_000)[0], delta=0.01 * d)
        self.assertLess(dhi - dlo, 0.01 * d)

    def test_blocking_totals_bound_the_run_threshold(self) -> None:
        waits = [int(x) for x in (3e6, 5e6, 9e6, 17e6)] * 5
        r = waiting_rank("n1", 0, waits, thr_us=2000)
        w = whatif_terms.rank_what_if(r, 0.002, (0.0, 0.0, 0.0))
        est, lo, hi = w["down_ns"]
        exact = truth(waits, 2e6)[0]
        self.assertLessEqual(lo, exact)
        self.assertGreaterEqual(hi, exact)
        self.assertAlmostEqual(lo, exact, delta=1)  # the run's own threshold: exact
        self.assertIsNone(whatif_terms.rank_what_if(fx.rank("n1", 0), 0.002, (0, 0, 0)))


class Model(unittest.TestCase):
    def test_strict(self) -> None:
        m = powermodel.validate_model(MODEL)
        self.assertEqual([p["khz"] for p in m["points"]], [1200000, 3000000])
        self.assertAlmostEqual(powermodel.power_at(m, 2100000, "poll_w"), 51.7)
        for bad, why in (({"version": 2}, "version 2"), ({"format": "x"}, "not an mpi"),
                         ({"idle_w": float("nan")}, "idle_w"), ({"idle_w": True}, "idle_w"),
                         ({"points": MODEL["points"][:1]}, "points"),
                         ({"points": [MODEL["points"][0]] * 2}, "same frequency")):
            with self.assertRaisesRegex(ValueError, why):
                powermodel.validate_model(dict(MODEL, **bad))

    def test_load_refuses_non_json_constants(self) -> None:
        with tempfile.TemporaryDirectory() as td:
            p = Path(td) / "m.json"
            p.write_text(json.dumps(MODEL).replace('"idle_w": 43.0', '"idle_w": NaN'))
            with self.assertRaisesRegex(ValueError, "not JSON"):
                powermodel.load_model(str(p))
            p.write_text(json.dumps(MODEL))
            self.assertEqual(powermodel.load_model(str(p))["path"], str(p))


class Predict(unittest.TestCase):
    def setUp(self) -> None:
        self.m = powermodel.validate_model(MODEL)
        w = [50_000_000] * 40 + [20_000] * 40
        self.d = imbalanced({"n1": [[20_000] * 80], "n2": [w]})

    def test_saving_is_clocked_down_time_times_the_power_difference(self) -> None:
        p = whatif.predict(self.d, self.m, 500, measured_j=250.0)
        react = (50 + 50) / 1e6  # write + reaction estimate
        # lowered react after the deadline, raised react after the wait
        # (the core stays low until then: the agent counts it as down)
        down = 40 * (0.05 - 0.0005 - react + react)
        self.assertAlmostEqual(p["clocked_down_s"][0], down, delta=0.002)
        self.assertAlmostEqual(p["saved_j"][0], down * 12.6 - p["time_added_s"][0] * (
            2 * 43 + 2 * 15), delta=0.05)
        self.assertTrue(p["saved_j"][1] <= p["saved_j"][0] <= p["saved_j"][2])
        self.assertEqual(p["transitions"][0], 40)
        # rank 0 (the critical path) never waits long: the waiting rank's
        # raise delays are absorbed by its slack; at most they add up
        self.assertEqual(p["time_added_s"][0], 0.0)
        self.assertGreater(p["time_added_s"][2], 0.0)
        self.assertAlmostEqual(p["saved_pct"][0], 100 * p["saved_j"][0] / 250, places=1)
        self.assertEqual(p["low_khz"], 1200000)
        p3 = whatif.predict(self.d, self.m, 500, reaction_us=10000)  # an agent 10 ms late
        self.assertAlmostEqual(p3["clocked_down_s"][0], 40 * (0.05 - 0.0005 - 0.01005 + react),
                               delta=0.002)
        self.assertLessEqual(p3["clocked_down_s"][1],
                             40 * (0.05 - 0.0005 - 0.02005 + 50e-6) + 0.002)
        p2 = whatif.predict(self.d, self.m, 500, low=2100000)
        self.assertAlmostEqual(p2["saved_j"][0] / p["saved_j"][0], 0.5, delta=0.02)

    def test_announced_waits_are_lowered_on_time_under_the_ceiling(self) -> None:
        """The agent of this release announces waits while reactions cost it
        under 3/4 of its ceiling (docs/agent.md, "Budgets"): no spacing then,
        the same as without a budget; past it, the budget's spacing."""
        plain = whatif.predict(self.d, self.m, 500)
        self.d["nodes"] = {"n2": {"steps": [{"agent": {
            "settings": {"cpu_budget_ppm": 5000},  # no cpu_cap_ppm: the default 5 %
            "agent": {"timeouts": 900, "timer_cpu_us": 20.0, "cpu_s": 0.5}}}]}}
        p = whatif.predict(self.d, self.m, 500)
        self.assertEqual((p["agent_gap_us"], p["announced_nodes"]), (0.0, 1))
        self.assertEqual(p["clocked_down_s"], plain["clocked_down_s"])
        self.assertNotIn("spaces its wake-ups", " ".join(p["notes"]))
        # 40 pairs in 3 s: 3 wake-ups of 20 us and a pair of 100 us each
        # are 0.2 % of a core; a ceiling of 0.2 % (3/4: 0.15 %) turns them off
        self.assertTrue(whatif_terms.announces(20.0, 50000, 100.0, 40 / 3))
        self.assertFalse(whatif_terms.announces(20.0, 2000, 100.0, 40 / 3))
        self.assertTrue(whatif_terms.announces(20.0, 0, 100.0, 1e9))  # no ceiling
        # this model's writes cost no CPU: 40 pairs in 3 s of 3 wake-ups of
        # 20 us are 0.08 %, over 3/4 of a 0.1 % ceiling
        self.d["nodes"]["n2"]["steps"][0]["agent"]["settings"]["cpu_cap_ppm"] = 1000
        self.assertEqual(whatif.predict(self.d, self.m, 500)["announced_nodes"], 0)

    def test_saving_after_the_fact(self) -> None:
        """An on run's saving: the agent's clocked-down time of each rank
        priced with its node's model, less the energy of the time the
        raises added on the critical path."""
        d = {"ranks": [dict(fx.rank("n1", 0, mpi=1.0, down=0.5, transitions=10), node="n1"),
                       dict(fx.rank("n2", 1, mpi=8.0, down=6.0, transitions=40), node="n2")],
             "nodes": {"n1": {}, "n2": {}}}
        self.assertIsNone(whatif.saving(d))  # no model in the records
        d["nodes"]["n2"] = {"settings": {"power_model": MODEL}}
        one = whatif.saving(d)
        assert one is not None
        self.assertEqual((one["nodes"], one["missing"], one["meter"]), (1, 1, "simulated"))
        # n2's rank alone, which is then its own critical path
        self.assertAlmostEqual(one["saved_j"][0], 6.0 * 12.6 - 40 * 100e-6 * 0.6 * 58.0,
                               delta=0.01)
        d["nodes"]["n1"] = {"settings": {"power_model": MODEL}}
        sv = whatif.saving(d, measured_j=500.0)
        assert sv is not None
        slow, raise_s = 1 - 1.2 / 3.0, (50 + 50) / 1e6  # write + reaction estimate
        added = 10 * raise_s * slow  # rank 0 waits least: the critical path
        self.assertAlmostEqual(sv["time_added_s"][0], added, places=4)
        self.assertAlmostEqual(sv["time_added_s"][2], 40 * (50 + 1000) / 1e6 * slow, places=4)
        node_w = 2 * 43.0 + 2 * (58.0 - 43.0)
        self.assertAlmostEqual(sv["saved_j"][0], 6.5 * 12.6 - added * node_w, delta=0.01)
        self.assertTrue(sv["saved_j"][1] <= sv["saved_j"][0] <= sv["saved_j"][2], sv)
        self.assertEqual(sv["full_clock_j"], [round(500.0 + x, 1) for x in sv["saved_j"]])
        self.assertAlmostEqual(sv["saved_pct"][0], 100 * sv["saved_j"][0] / sv["full_clock_j"][0],
                               places=1)
        # steps past the detail bound count at the nodes' mean power step
        d["rest"] = {"down_s": 1.0, "transitions": 0}
        self.assertAlmostEqual(whatif.saving(d)["saved_j"][0] - sv["saved_j"][0], 12.6,
                               delta=0.01)
        # the summary carries it, labelled by what priced it
        recs = {n: fx.node_record(7, n, [r for r in d["ranks"] if r["node"] == n],
                                  settings={"power_model": MODEL}) for n in ("n1", "n2")}
        recs = {n: noderecord.validate(json.loads(json.dumps(r)), 7, n) for n, r in recs.items()}
        det = summary.merge(7, ["n1", "n2"], recs, {}, "COMPLETED", "0:0", None, 60)
        s = det["summary"]
        self.assertEqual(s["saved_src"], "simulated")
        self.assertEqual(len(s["saved_j"]), 3)
        self.assertEqual(s["full_j"], [round(s["energy_j"] + x, 1) for x in s["saved_j"]])

    def test_the_agents_figures_are_the_agents(self) -> None:
        """The prediction's ceiling and uncore threshold are the agent's
        defaults (common/agent_args.def), its announcement rule the agent's
        (agent/agentd.h)."""
        table = (fx.TOP / "common" / "agent_args.def").read_text()
        hdr = (fx.TOP / "agent" / "agentd.h").read_text()
        self.assertRegex(table, r'MPI_PSTATE_AGENT_ARG\(CAP, "cpu-cap", PERCENT, cap_ppm, "%g"'
                         % (whatif_terms.CAP_PPM_DEFAULT / 10000))
        self.assertRegex(table, r'MPI_PSTATE_AGENT_ARG\(UNCORE_THR, "uncore-threshold", DURATION, '
                         r'uncore_threshold_us, "%dms"' % (whatif.UNCORE_THRESHOLD_US // 1000))
        self.assertIn(f"#define AGENTD_ANNOUNCE_OFF_PCT {round(100 * whatif_terms.ANNOUNCE_OFF_SHARE)}u",
                      hdr)

    def test_the_agents_cpu_budget_makes_drops_late(self) -> None:
        # an agent record of the run: 20 us of CPU per timer wake-up, the
        # default budget (0.5 %): scanning every 500 us costs 4 %, so its
        # wake-ups are spaced 20 / 0.004 = 5 ms; every 20 ms costs 0.1 %.
        # Its ceiling (0.1 %) is too low for announced waits: they are
        # found by the spaced polls.
        agent = {"settings": {"cpu_budget_ppm": 5000, "cpu_cap_ppm": 1000},
                 "agent": {"timeouts": 900, "timer_cpu_us": 20.0, "cpu_s": 0.5}}
        self.assertEqual(whatif_terms.budget_gap_us(20.0, 5000, 500), 5000.0)
        self.assertEqual(whatif_terms.budget_gap_us(20.0, 5000, 20000), 0.0)
        self.assertEqual(whatif_terms.budget_gap_us(20.0, 0, 500), 0.0)  # --cpu-budget 0
        self.assertEqual(whatif_terms.budget_gap_us(2000.0, 5000, 500), 100000.0)  # at most 100 ms
        # the lower+raise pairs spend the budget too: 25 pairs of 100 us a
        # second leave 0.15 % of the 0.4 % to scans every 10 ms (0.2 %)
        self.assertEqual(whatif_terms.budget_gap_us(20.0, 5000, 10000), 0.0)
        self.assertAlmostEqual(whatif_terms.budget_gap_us(20.0, 5000, 10000, 100.0, 25.0), 13333.3,
                               delta=0.1)
        self.assertEqual(whatif_terms.budget_gap_us(20.0, 5000, 10000, 100.0, 50.0), 100000.0)
        # without timer_cpu_us (a short run): CPU over timer wake-ups
        self.assertEqual(whatif_terms.agent_cost({"nodes": {"n2": {"steps": [
            {"agent": {"settings": {"cpu_budget_ppm": 5000},
                       "agent": {"timeouts": 1000, "cpu_s": 0.03}}}]}}}, "n2"), (30.0, 5000))
        self.assertIsNone(whatif_terms.agent_cost({"nodes": {"n2": {"steps": [{"agent": "x"}]}}}, "n2"))
        plain = whatif.predict(self.d, self.m, 500)
        self.d["nodes"] = {"n2": {"steps": [{"agent": agent}]}}
        p = whatif.predict(self.d, self.m, 500)
        react = (50 + 50) / 1e6
        self.assertEqual(p["agent_gap_us"], 5000.0)
        self.assertIn("CPU budget spaces its wake-ups by up to 5ms on n2", " ".join(p["notes"]))
        # half the gap late on average; at the low bound the whole gap of
        # wake-ups half as costly again (30 / 0.004 = 7.5 ms), with twice
        # the wake-up p90; on time at the high one
        self.assertAlmostEqual(p["clocked_down_s"][0],
                               40 * (0.05 - 0.0005 - react - 0.0025 + react), delta=0.002)
        self.assertAlmostEqual(p["clocked_down_s"][1], plain["clocked_down_s"][1] - 40 * 0.0075,
                               delta=0.002)
        self.assertEqual(p["clocked_down_s"][2], plain["clocked_down_s"][2])
        # the model's CPU per pair: 40 pairs in 3 s of 200 us (0.27 %) and
        # scans every 10 ms (0.2 %) are over the aim: scans every
        # 20 / (0.004 - 0.00267) = 15 ms
        self.assertEqual(whatif.predict(self.d, self.m, 10000)["agent_gap_us"], 0.0)
        m2 = powermodel.validate_model(dict(MODEL, transition=dict(MODEL["transition"],
                                                                pair_cpu_us=200.0)))
        self.assertAlmostEqual(whatif.predict(self.d, m2, 10000)["agent_gap_us"], 15000, delta=10)
        # another budget than the run's: none, or one that affords the scans
        # even at 1.5 times their cost (30 us every 500 us: 6 % of 10 %)
        for b in (0, 100000):
            q = whatif.predict(self.d, self.m, 500, budget_ppm=b)
            self.assertEqual(q["agent_gap_us"], 0.0)
            self.assertEqual(q["clocked_down_s"], plain["clocked_down_s"])
        # a threshold the budget allows scanning at: as without a record
        self.assertEqual(whatif.predict(self.d, self.m, 20000)["clocked_down_s"],
                         whatif.predict(imbalanced({"n1": [[20_000] * 80], "n2": [
                             [50_000_000] * 40 + [20_000] * 40]}), self.m, 20000)["clocked_down_s"])

    def test_no_model_and_shared_domains_are_stated(self) -> None:
        p = whatif.predict(self.d, None, 500)
        self.assertEqual(p["ranks"], 0)
        self.assertIn("no power model for n1,n2", p["notes"][0])
        d = imbalanced({"n1": [[50_000_000] * 40, [20_000] * 40]})
        d["nodes"] = {"n1": {"settings": {"cpufreq": {"groups": [{"cpus": "0-1",
                                                                  "domain_cpus": 2}]}}}}
        p = whatif.predict(d, self.m, 500)
        self.assertIn("shared frequency domains on n1", " ".join(p["notes"]))
        self.assertLessEqual(p["saved_j"][1], 0.0)
        self.assertGreater(p["saved_j"][0], 10)

    def test_model_from_the_node_record_wins(self) -> None:
        self.d["nodes"] = {"n2": {"settings": {"power_model": dict(MODEL, points=[
            {"khz": 3000000, "busy_w": 80.0, "poll_w": 80.0},
            {"khz": 1200000, "busy_w": 45.4, "poll_w": 45.4}])}}}
        a = whatif.predict(self.d, self.m, 500)
        self.assertIn("node record", a["model"])
        self.assertGreater(a["saved_j"][0], 2 * whatif.predict(
            imbalanced({"n2": [[50_000_000] * 40]}), self.m, 500)["saved_j"][0])

    def test_recommendation_keeps_time_added_within_one_percent(self) -> None:
        # many short waits of 300 us: a low threshold clocks down in each,
        # and the raise delay after each one costs more than 1 %
        w = [300_000] * 4000 + [50_000_000] * 20
        d = imbalanced({"n1": [w]})
        d["elapsed_s"] = 3.0
        rows, best = whatif.sweep([d], self.m)
        self.assertIsNotNone(best)
        self.assertLessEqual(best["time_added_pct"][2], 1.0)
        low = [r for r in rows if r["threshold_us"] == 0][0]
        self.assertGreater(low["time_added_pct"][2], 1.0)
        ok = [r for r in rows if r["time_added_pct"][2] <= 1.0]
        most = max(r["saved_j"][0] for r in ok)
        self.assertGreaterEqual(best["saved_j"][0], 0.98 * most)
        self.assertEqual(best["threshold_us"], max(r["threshold_us"] for r in ok
                                                   if r["saved_j"][0] >= 0.98 * most))
        self.assertIn("recommended threshold", report_whatif.text_sweep(rows, best))


def knee_core_w(f: float, knee: float = 1800000, fmax: float = 3000000) -> float:
    """A busy CPU in the fake's knee model (tests/cluster/fakesys.py)."""
    v = 0.65 if f <= knee else 0.65 + 0.35 * (f - knee) / (fmax - knee)
    return 2 + 13 * (f / fmax) * v * v


KNEE_FREQS = (1200000, 1800000, 2400000, 3000000)
UNCORE = {"min_khz": 800000, "max_khz": 2500000, "core_khz": 1200000,
          "busy_w_at_min": 20.0, "busy_w_at_max": 25.4, "poll_w_at_min": 20.0,
          "poll_w_at_max": 25.0, "write_us": 50.0, "latency_us": 10000.0,
          "domains": [{"name": "package_00_die_00", "cpus": "0-1"},
                      {"name": "package_01_die_00", "cpus": "2-3"}]}
KNEE_MODEL = dict(MODEL, idle_w=13.0, knee_khz=1800000, uncore=UNCORE, points=[
    {"khz": f, "busy_w": round(13 + knee_core_w(f), 3), "poll_w": round(13 + knee_core_w(f), 3)}
    for f in KNEE_FREQS])


class ModelLevers(unittest.TestCase):
    def test_optional_knee_and_uncore_are_strict(self) -> None:
        m = powermodel.validate_model(KNEE_MODEL)
        self.assertEqual(m["knee_khz"], 1800000)
        self.assertEqual(m["uncore"]["domains"][1], {"name": "package_01_die_00",
                                                     "cpus": [2, 3]})
        self.assertEqual(powermodel.uncore_step_w(m), 5.0)
        self.assertNotIn("knee_khz", powermodel.validate_model(MODEL))  # version 1 as it was
        self.assertIsNone(powermodel.uncore_step_w(powermodel.validate_model(MODEL)))
        u = KNEE_MODEL["uncore"]
        for bad, why in (({"knee_khz": 900000}, "knee_khz"), ({"knee_khz": 1.8e6}, "knee_khz"),
                         ({"knee_khz": True}, "knee_khz"), ({"uncore": []}, "uncore is not"),
                         ({"uncore": dict(u, min_khz=2500000)}, "not below"),
                         ({"uncore": dict(u, poll_w_at_min=float("inf"))}, "poll_w_at_min"),
                         ({"uncore": {k: v for k, v in u.items() if k != "busy_w_at_max"}},
                          "busy_w_at_max"),
                         ({"uncore": dict(u, latency_us=-1)}, "latency_us"),
                         ({"uncore": dict(u, domains=[{"name": "uncore00", "cpus": "0"}])},
                          "package_NN_die_NN"),
                         ({"uncore": dict(u, domains=[{"name": "package_00_die_00",
                                                       "cpus": "0-x"}])}, "CPU list"),
                         ({"uncore": dict(u, domains=[{"name": "package_00_die_00", "cpus": "0-1"},
                                                      {"name": "package_01_die_00", "cpus": "1"}])},
                          "shares CPUs"),
                         ({"uncore": dict(u, domains=[{"name": f"package_{i:02d}_die_00",
                                                       "cpus": str(i)} for i in range(65)])},
                          "at most 64")):
            with self.assertRaisesRegex(ValueError, why):
                powermodel.validate_model(dict(KNEE_MODEL, **bad))


def on_cpu(r: Dict[str, Any], cpu: int) -> Dict[str, Any]:
    r["cpu"] = cpu
    return r


class Levers(unittest.TestCase):
    """Each lever alone on synthetic details and the knee model with an
    uncore sweep: the formulas of docs/evaluation.md, "Each lever"."""

    def setUp(self) -> None:
        self.m = powermodel.validate_model(KNEE_MODEL)

    def detail(self, per_cpu: Dict[int, List[int]]) -> Dict[str, Any]:
        ranks = [dict(on_cpu(waiting_rank("n1", k, w), c), node="n1")
                 for k, (c, w) in enumerate(per_cpu.items())]
        return {"ranks": ranks, "nodes": {}, "elapsed_s": 3.0}

    def test_core_lever_is_the_prediction(self) -> None:
        p = whatif.predict(self.detail({0: [50_000_000] * 40}), self.m, 500)
        c = p["levers"]["core"]
        for k in ("saved_j", "time_added_s", "clocked_down_s", "transitions", "low_khz"):
            self.assertEqual(c[k], p[k], k)
        # the sweep needs only the cap's figures
        rows, _ = whatif.sweep([self.detail({0: [50_000_000] * 40})], self.m)
        self.assertTrue(rows)
        self.assertNotIn("levers", whatif.predict(self.detail({0: [1]}), self.m, 500,
                                                  with_levers=False))

    def test_efficient_is_the_knee_step_difference_and_may_be_negative(self) -> None:
        p = whatif.predict(self.detail({0: [50_000_000] * 40}), self.m, 500)
        e = p["levers"]["efficient"]
        self.assertTrue(e["predicted"])
        self.assertEqual((e["knee_khz"], e["instead_of_khz"]), ([1800000], [1200000]))
        # the same clocked-down time at the knee's polling step instead of
        # the lowest's: the knee draws knee_core_w(1.8) - knee_core_w(1.2)
        # more; the one rank is the critical path: after each of its 40
        # waits it computes 0.2 of the raise delay (write + wake-up, 100 us)
        # faster, at the node's power (idle 13 W and its busy core 15 W)
        down = p["clocked_down_s"][0]
        dw = knee_core_w(1800000) - knee_core_w(1200000)
        less = 40 * 100e-6 * (1.8 - 1.2) / 3.0
        self.assertAlmostEqual(e["saved_j"][0], -down * dw + less * 28.0, delta=0.005)
        self.assertAlmostEqual(e["time_added_s"][0], -less, places=4)
        self.assertLess(e["saved_j"][2], 0.0)  # a polling wait: worse at the knee
        self.assertTrue(e["saved_j"][1] <= e["saved_j"][0] <= e["saved_j"][2])
        # at most: the high bound's raise (write + twice the default p90)
        self.assertAlmostEqual(-e["time_added_s"][1], 40 * 1050e-6 * 0.2, places=4)
        self.assertIn("not in the records", e["note"])
        # a knee at the lowest frequency: nothing to gain or lose
        flat = powermodel.validate_model(dict(KNEE_MODEL, knee_khz=1200000))
        e0 = whatif.predict(self.detail({0: [50_000_000] * 40}), flat, 500)["levers"]["efficient"]
        self.assertEqual(e0["saved_j"][0], 0.0)
        # no knee in the model: said, not guessed
        nk = powermodel.validate_model(MODEL)
        e1 = whatif.predict(self.detail({0: [50_000_000] * 40}), nk, 500)["levers"]["efficient"]
        self.assertFalse(e1["predicted"])
        self.assertIn("no knee in the model of n1", e1["why"])

    def test_efficient_pays_where_work_is_done_low(self) -> None:
        # many short lowered waits on the critical path with a node that draws
        # a lot: the time the knee gives back outweighs its dearer waits
        heavy = powermodel.validate_model(dict(KNEE_MODEL, idle_w=400.0, points=[
            dict(p, busy_w=p["busy_w"] + 387, poll_w=p["poll_w"] + 387)
            for p in KNEE_MODEL["points"]]))
        d = self.detail({0: [1_000_000] * 2000, 1: [1_000_000] * 2000})
        e = whatif.predict(d, heavy, 500, reaction_us=400)["levers"]["efficient"]
        self.assertGreater(e["saved_j"][0], 0.0, e)
        self.assertLess(e["time_added_s"][0], 0.0)

    def test_uncore_needs_every_rank_of_the_package(self) -> None:
        long, short = [50_000_000] * 40, [20_000_000] * 40
        u1 = whatif.predict(self.detail({0: long}), self.m, 500)["levers"]["uncore"]
        self.assertTrue(u1["predicted"])
        # one rank: its waits past 10 ms and the reaction, the raise delay
        # after each; priced at the uncore's polling step (5 W)
        self.assertAlmostEqual(u1["low_s"][0], 40 * 0.040, delta=0.005)
        self.assertAlmostEqual(u1["saved_j"][0], 5.0 * u1["low_s"][0], delta=0.01)
        self.assertEqual((u1["packages"], u1["threshold_us"], u1["transitions"][0]),
                         (1, 10000, 40))
        # two ranks of one package: the least of theirs (estimate and high),
        # the overlap their times force in 3 s at least (none here)
        u2 = whatif.predict(self.detail({0: long, 1: short}), self.m, 500)["levers"]["uncore"]
        self.assertAlmostEqual(u2["low_s"][0], 40 * 0.010, delta=0.005)
        # high: the short rank's, at the fastest reaction and slowest raise
        self.assertAlmostEqual(u2["low_s"][2], 40 * (0.010 - 50e-6 + 1050e-6), delta=0.001)
        self.assertEqual(u2["low_s"][1], 0.0)
        # a rank that never waits long keeps its package up
        u3 = whatif.predict(self.detail({0: long, 1: [20_000] * 80}), self.m, 500)
        self.assertEqual(u3["levers"]["uncore"]["low_s"], [0.0, 0.0, 0.0])
        # on two packages each waits alone: the sum
        u4 = whatif.predict(self.detail({0: long, 2: short}), self.m, 500)["levers"]["uncore"]
        self.assertAlmostEqual(u4["low_s"][0], 40 * 0.040 + 40 * 0.010, delta=0.01)
        self.assertEqual(u4["packages"], 2)
        # two ranks that wait long enough must overlap: 2 x 2.9 s in 3 s
        d = self.detail({0: [2_930_000_000], 1: [2_930_000_000]})
        d["ranks"][0]["wall_s"] = d["ranks"][1]["wall_s"] = 3.0
        u5 = whatif.predict(d, self.m, 500)["levers"]["uncore"]
        self.assertGreater(u5["low_s"][1], 2.7)
        # a longer uncore threshold from the run's agent record
        d = self.detail({0: long})
        d["nodes"] = {"n1": {"steps": [{"agent": {"settings": {"uncore_threshold_us": 30000}}}]}}
        u6 = whatif.predict(d, self.m, 500)["levers"]["uncore"]
        self.assertAlmostEqual(u6["low_s"][0], 40 * 0.020, delta=0.005)

    def test_uncore_refused_or_unmodelled_is_said(self) -> None:
        d = self.detail({0: [50_000_000] * 40, 2: [50_000_000] * 40})
        d["nodes"] = {"n1": {"steps": [{"agent": {"uncore": [
            {"domain": "package_00_die_00", "status": "outside"},
            {"domain": "package_01_die_00", "status": "managed"}]}}]}}
        u = whatif.predict(d, self.m, 500)["levers"]["uncore"]
        self.assertEqual(u["packages"], 1)
        self.assertIn("refused n1:package_00_die_00 (outside)", " ".join(u["notes"]))
        self.assertNotIn("assumed", " ".join(u["notes"]))
        # a profile run's agent records the packages it owns whole as "profile"
        d["nodes"]["n1"]["steps"][0]["agent"]["uncore"][1]["status"] = "profile"
        self.assertEqual(whatif.predict(d, self.m, 500)["levers"]["uncore"]["packages"], 1)
        d["nodes"]["n1"]["steps"][0]["agent"]["uncore"][1]["status"] = "managed"
        nu = powermodel.validate_model({k: v for k, v in KNEE_MODEL.items() if k != "uncore"})
        u = whatif.predict(d, nu, 500)["levers"]["uncore"]
        self.assertFalse(u["predicted"])
        self.assertIn("no uncore sweep in the model of n1", u["why"])
        # ranks without a CPU on a node of two packages: one package, said
        for r in d["ranks"]:
            r.pop("cpu")
        u = whatif.predict(dict(d, nodes={}), self.m, 500)["levers"]["uncore"]
        self.assertIn("each node taken as one package", " ".join(u["notes"]))

    def test_the_records_model_is_the_files(self) -> None:
        """The node Epilog embeds the model in the file's form: read back from
        a record it is the model file's, transition figures and uncore sweep
        included, and predicts what the file predicts.  (The validated form
        embedded before read back with every transition figure at its
        default, and a model with an uncore sweep not at all.)"""
        raw = dict(KNEE_MODEL, transition={"write_us": 271.8, "reaction_us": 89.6,
                                           "reaction_us_p90": 98.5, "energy_uj": 10772.5,
                                           "pair_cpu_us": 154.9})
        with tempfile.TemporaryDirectory() as td:
            p = Path(td) / "model.json"
            p.write_text(json.dumps(raw))
            rec = json.loads(json.dumps(powermodel.model_for_record(str(p))))
        m = powermodel.validate_model(raw)
        self.assertEqual(powermodel.validate_model(rec), m)
        self.assertEqual((m["write_us"], m["pair_cpu_us"], len(m["uncore"]["domains"])),
                         (271.8, 154.9, 2))
        # figures a model leaves out come back as the same defaults
        for other in (MODEL, dict(raw, transition={"write_us": 50.0})):
            v = powermodel.validate_model(other)
            self.assertEqual(powermodel.validate_model(powermodel.file_form(v)), v)
        d = self.detail({0: [50_000_000] * 40, 1: [50_000_000] * 40})
        from_file = whatif.predict(d, m, 500)
        d["nodes"] = {"n1": {"settings": {"power_model": rec}}}
        from_rec = whatif.predict(d, None, 500)
        self.assertEqual(from_rec["model"], ["node record"])
        for k in ("saved_j", "clocked_down_s", "transitions", "time_added_s", "levers"):
            self.assertEqual(from_rec[k], from_file[k], k)
        self.assertTrue(from_rec["levers"]["uncore"]["predicted"])

    def test_text_names_each_lever(self) -> None:
        p = whatif.predict(self.detail({0: [50_000_000] * 40}), self.m, 500)
        t = report_whatif.text(p)
        # the figures' own lines, as a user reads them (a code move once
        # rewrote a word here into a module's name)
        for head in ("    energy saved   ", "    time added     ", "    clocked down   "):
            self.assertIn("\n" + head, t)
        self.assertNotRegex(t, r"whatif|_terms|[a-z]\.[a-z_]+\(")
        self.assertIn("core cap to 1.20 GHz", t)
        self.assertIn("efficient (knee 1.80 GHz) -", t)
        self.assertIn("uncore past 10ms", t)
        self.assertNotIn("not: uncore", t)
        t = report_whatif.text(whatif.predict(self.detail({0: [50_000_000] * 40}),
                                              powermodel.validate_model(MODEL), 500))
        self.assertIn("efficient: not predicted (no knee", t)
        self.assertIn("uncore: not predicted (no uncore sweep", t)


class RankFigures(unittest.TestCase):
    def test_life_cycle_calls_leave_the_wait_histogram(self) -> None:
        s = {"ticks_per_sec": 10**9, "app_start_ticks": 1, "app_end_ticks": 3 * 10**9,
             "functions": {"MPI_Init": {"calls": 1, "time_ns": 300_000_000, "bytes": 0},
                           "MPI_Barrier": {"calls": 2, "time_ns": 100_000_000, "bytes": 0},
                           "MPI_Finalize": {"calls": 1, "time_ns": 1000, "bytes": 0}},
             "hist_ns": [0] * 64, "state": "finalized", "rank": 0, "size": 1,
             "local_index": 0, "cpu": 0, "mode": "profile", "abi": "ompi",
             "threshold_ns": 500000, "long_ns": 10**8, "long_calls": 2, "over_ns": 99 * 10**6,
             "down_ns": 0, "transitions": 0, "wakeups": 0}
        for d in (300_000_000, 50_000_000, 50_000_000, 1000):
            s["hist_ns"][rankfigures._bucket(d)] += 1
        r = rankfigures.rank_figures(s, "0")
        self.assertEqual(r["hist_ns"], [[rankfigures._bucket(50_000_000), 2]])
        self.assertEqual(noderecord.validate_rank(r)["hist_ns"], r["hist_ns"])
        # A bad histogram is dropped and named, like any bad counter: the
        # rank and the node's record stay.
        for bad in ([[64, 1]], [[1, -1]], [[1, 2, 3]], [["1", 2]], [[1, 1.5]]):
            v = noderecord.validate_rank(dict(r, hist_ns=bad))
            self.assertNotIn("hist_ns", v, bad)
            self.assertIn("hist_ns", v["dropped"], bad)


class Calibrate(unittest.TestCase):
    def args(self, root: Path, model: Path, **kw: Any) -> SimpleNamespace:
        # an idle node's runtime_dir (test_root_trust.CalibrateBusyNode: a busy one)
        a = dict(sysroot=str(root), sysroot_given=True, cpu=1, seconds=0.02, reps=2, points=2,
                 model=str(model), json=False, quiet=True, slurm_conf=str(root / "none.conf"),
                 runtime_dir=str(root / "run"))
        a.update(kw)
        return SimpleNamespace(**a)

    def run_cal(self, a: SimpleNamespace) -> Tuple[int, str, str]:
        out, err = io.StringIO(), io.StringIO()
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            rc = calibrate.run(a)
        return rc, out.getvalue(), err.getvalue()

    def test_without_rapl_or_cpufreq_nothing_is_stored(self) -> None:
        with tempfile.TemporaryDirectory() as td:
            for kw, why in (({"rapl": False}, "no RAPL on this node"),
                            ({"driver": ""}, "no cpufreq driver for CPU 1")):
                root = fx.fake_sysfs(Path(td) / why.replace(" ", "_"), ncpus=2, **kw)
                model = Path(td) / "model.json"
                rc, out, err = self.run_cal(self.args(root, model))
                self.assertEqual(rc, 1)
                self.assertIn(why, err)
                self.assertIn("nothing stored", err)
                self.assertFalse(model.exists())

    def test_stores_a_model_it_can_read_and_restores_the_policy(self) -> None:
        with tempfile.TemporaryDirectory() as td:
            root = fx.fake_sysfs(Path(td) / "sys", ncpus=2)
            fx.write(root, "class/powercap/intel-rapl:0/max_energy_range_uj", "262143328850")
            pol = root / "devices/system/cpu/cpufreq/policy1"
            before = {f: (pol / f).read_text() for f in ("scaling_min_freq", "scaling_max_freq",
                                                          "scaling_governor")}
            model = Path(td) / "var" / "model.json"
            rc, out, err = self.run_cal(self.args(root, model))
            self.assertEqual(rc, 0, err)
            m = powermodel.load_model(str(model))
            # --points 2, and the knee's candidates: this driver lists no
            # frequencies, so a grid of instruments.KNEE_POINTS over its range
            self.assertEqual((m["method"], m["meter"], len(m["points"])),
                             ("max_freq", "simulated", instruments.KNEE_POINTS))
            self.assertEqual([m["points"][0]["khz"], m["points"][-1]["khz"]], [1200000, 3000000])
            self.assertIn("model stored in", out)
            self.assertGreaterEqual(m["reaction_us"], 0.0)  # wake-up delay on a busy node
            self.assertGreaterEqual(m["reaction_us_hi"], m["reaction_us"])
            self.assertEqual({f: (pol / f).read_text() for f in before}, before)


class ReportWhatIf(unittest.TestCase):
    def setUp(self) -> None:
        self._td = tempfile.TemporaryDirectory()
        self.tmp = Path(self._td.name)
        os.chmod(self.tmp, 0o755)
        self.collect = self.tmp / "records"
        self.collect.mkdir()
        self.model = self.tmp / "model.json"
        self.model.write_text(json.dumps(MODEL))
        self.rows: List[slurm.SacctJob] = []
        w = [50_000_000] * 40 + [20_000] * 40
        for raw in (701, 702):
            nodes = {"n1": [waiting_rank("n1", 0, [20_000] * 80)],
                     "n2": [waiting_rank("n2", 1, w)]}
            built = {n: fx.node_record(raw, n, r) for n, r in nodes.items()}
            recs = {n: noderecord.validate(json.loads(json.dumps(r)), raw, n)
                    for n, r in built.items()}
            d = self.collect / str(raw)
            d.mkdir()
            det = summary.merge(raw, list(nodes), recs, {}, "COMPLETED", "0:0", None, 3)
            (d / "job.json").write_bytes(noderecord.encode(det))
            self.rows.append(slurm.SacctJob(str(raw), str(raw), "COMPLETED", "0:0", "00:00:03",
                                            "n[1-2]", admin_comment="",
                                            system_comment=summary.encode(det["summary"])))

    def tearDown(self) -> None:
        self._td.cleanup()

    def report(self, *args: str) -> Tuple[int, str, str]:
        out, err = io.StringIO(), io.StringIO()
        with mock.patch.object(slurm, "sacct_jobs", lambda specs, timeout=60: [
                r for r in self.rows if r.raw in specs]), \
                mock.patch.object(slurm, "sacct_select", lambda **kw: ["701", "702"]), \
                contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            rc = command.main(["report", "--collect-dir", str(self.collect), "--slurm-conf",
                               str(self.tmp / "none.conf"), "--model", str(self.model), *args])
        return rc, out.getvalue(), err.getvalue()

    def test_text_json_csv_svg(self) -> None:
        rc, out, err = self.report("701", "--what-if")
        self.assertEqual(rc, 0, err)
        self.assertIn("what-if: threshold 500us, low frequency 1.20 GHz", out)
        self.assertIn("recommended threshold:", out)
        self.assertIn("energy saved", out)
        rc, out, _ = self.report("701", "--what-if", "--threshold", "2ms", "--json")
        j = json.loads(out)["jobs"][0]
        self.assertEqual(j["what_if"]["threshold_us"], 2000)
        self.assertGreater(j["what_if"]["saved_j"][0], 20)
        self.assertTrue(j["what_if_recommended"])
        lv = j["what_if"]["levers"]
        self.assertEqual(lv["core"]["saved_j"], j["what_if"]["saved_j"])
        self.assertEqual((lv["efficient"]["predicted"], lv["uncore"]["predicted"]), (False, False))
        rc, out, _ = self.report("701", "--what-if", "--csv")
        rows = list(csv.DictReader(io.StringIO(out)))
        self.assertEqual((rows[0]["job"], rows[0]["threshold_us"]), ("701", "500"))
        svgp = self.tmp / "c.svg"
        rc, out, _ = self.report("701", "--what-if", "--svg", str(svgp))
        root = ET.parse(svgp).getroot()
        texts = " ".join(t.text or "" for t in root.iter("{http://www.w3.org/2000/svg}text"))
        self.assertIn("what-if at 500us", texts)

    def test_many_jobs_from_accounting(self) -> None:
        rc, out, err = self.report("--what-if", "--user", "alice", "--since", "now-7days")
        self.assertEqual(rc, 0, err)
        self.assertIn("2 jobs with per-rank figures (4 ranks", out)
        self.assertIn("recommended threshold:", out)
        rc, out, _ = self.report("--what-if", "--user", "alice", "--json")
        tot = json.loads(out)["what_if_total"]
        one = json.loads(self.report("701", "--what-if", "--json")[1])["jobs"][0]["what_if"]
        self.assertEqual(tot["jobs"], 2)
        self.assertAlmostEqual(tot["saved_j"][0], 2 * one["saved_j"][0], delta=0.01)
        self.assertTrue(tot["recommended"])

    def test_usage(self) -> None:
        self.assertEqual(self.report("--what-if")[0], 2)
        self.assertEqual(self.report("701", "--threshold", "2ms")[0], 2)
        self.assertEqual(self.report("701", "--reaction", "2ms")[0], 2)
        rc, out, _ = self.report("701", "--what-if", "--reaction", "10ms", "--json")
        self.assertLess(json.loads(out)["jobs"][0]["what_if"]["clocked_down_s"][0], 1.6)
        self.assertEqual(self.report("701", "--what-if", "--threshold", "2 parsecs")[0], 2)
        self.assertEqual(self.report("701", "--cpu-budget", "2")[0], 2)
        for bad in ("0.5ms", "101", "0.00001", "-1"):
            rc, _, err = self.report("701", "--what-if", "--cpu-budget", bad)
            self.assertEqual(rc, 2, bad)
            self.assertIn("percentage" if bad != "101" else "100 %", err)
        self.assertEqual(self.report("701", "--what-if", "--cpu-budget", "2", "--json")[0], 0)
        rc, out, err = self.report("701", "--what-if", "--model", str(self.tmp / "none.json"))
        # no model: it says it cannot predict, why, and fails (never "0.0 J saved")
        self.assertEqual((rc, out), (1, ""))
        self.assertEqual(len(err.splitlines()), 1, err)
        self.assertTrue(err.startswith("mpi-pstate report: cannot predict the what-if: no power "
                                       "model for n1,n2"), err)
        self.assertIn("mpi-pstate calibrate", err)
        self.assertNotIn("saved", err)


if __name__ == "__main__":
    unittest.main()
