# SPDX-License-Identifier: BSD-3-Clause
"""`mpi-pstate calibrate` and `report --what-if` on the local cluster, against
the fake hardware whose power model is known (tests/cluster/fakesys.py,
load "proc"): calibrate refuses a node without RAPL and stores nothing; on a
node with it, the model it stores reaches the node records; and the saving
predicted from a profile run of an imbalanced job contains, within its
stated range widened by the two runs' difference in duration, the energy
difference measured between that run and the on run of the same job (an
energy comparison, never a timing)."""
from __future__ import annotations

import importlib.util
import json
import unittest
from pathlib import Path

import labtools as lt

TOP = Path(__file__).resolve().parents[2]
_spec = importlib.util.spec_from_file_location("whatif_bench",
                                               str(TOP / "bench" / "whatif" / "run.py"))
assert _spec is not None and _spec.loader is not None
bench = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(bench)


class WhatIf(unittest.TestCase):
    @classmethod
    def setUpClass(cls) -> None:
        cls.cli = lt.installed().cli
        # calibrate stores the model and the agent's knee file on the node:
        # both go back to what they were, as the bench does
        cls.files = bench.model_files_kept(False)
        cls.files.__enter__()
        # The fakes in the running lab may come from a checkout without the
        # load model: restart the lab from this one then (we hold its lock).
        bench.fake_load(True, restart=True)

    @classmethod
    def tearDownClass(cls) -> None:
        bench.fake_load(False)
        cls.files.__exit__(None, None, None)

    def test_no_rapl_no_model(self) -> None:
        lt.flavour("n2", load="proc", rapl=False)
        try:
            r = lt.node_exec("n2", f"{self.cli} calibrate --model /run/mpst-test-model.json "
                                   "--seconds 0.1 --reps 1 --quiet", check=False)
            self.assertEqual(r.returncode, 1, r.stdout + r.stderr)
            self.assertIn("no RAPL on this node", r.stderr)
            self.assertIn("nothing stored", r.stderr)
            self.assertEqual(lt.node_exec("n2", "test -e /run/mpst-test-model.json",
                                          check=False).returncode, 1)
        finally:
            lt.flavour("n2", load="proc")

    def test_prediction_contains_the_measured_saving(self) -> None:
        model = bench.calibrate("n1", 1.0, 2, 2)
        self.assertEqual(model["meter"], "simulated")
        hi = [p for p in model["points"] if p["khz"] == 3000000][0]
        lo = [p for p in model["points"] if p["khz"] == 1200000][0]
        # the fake's model: a busy CPU draws core_dyn_w (15 W) * (f/fmax)^2
        self.assertAlmostEqual(hi["busy_w"] - lo["busy_w"], 15 * (1 - 0.16), delta=1.5)
        self.assertAlmostEqual(hi["poll_w"] - lo["poll_w"], 15 * (1 - 0.16), delta=1.5)
        self.assertLess(model["idle_w"], lo["busy_w"])

        wd = lt.workdir("whatif")
        prog = bench.program()
        lt.give(lt.BUILD / "tests" / "mpi" / prog, wd)
        cmd = f"./{prog} 80 50"
        # No pilot: the prediction charges the agent's CPU budget itself,
        # from the profile run's agent record (its CPU per timer wake-up)
        # and the model's CPU per lower+raise pair (docs/evaluation.md).
        # one rank per node: the two nodes share the VM's two cores
        prof_job = bench.submit(wd, "profile", None, cmd, 2, 1)
        self.assertEqual(lt.wait_job(prof_job, 300), "COMPLETED")
        prof = bench.figures(prof_job)
        on_job = bench.submit(wd, "on", "2000us", cmd, 2, 1)
        self.assertEqual(lt.wait_job(on_job, 300), "COMPLETED")
        on = bench.figures(on_job)
        self.assertEqual((prof["energy"], on["energy"]), ("ok", "ok"))

        r = lt.as_user([str(self.cli), "report", str(prof_job), "--what-if", "--threshold",
                        "2ms", "--json"], check=True)
        job = json.loads(r.stdout)["jobs"][0]
        p = job["what_if"]
        self.assertEqual(p["model"], ["node record"])  # the Epilog embedded the model
        self.assertEqual(p["ranks"], 2)
        self.assertIn("agent_gap_us", p)
        self.assertGreater(p["saved_j"][0], 10)
        # at equal duration: on the fake a lowered core computes as fast as
        # ever, so a difference in duration is the shared machine's noise
        measured = bench.saved_at_equal_time(prof, on)
        # The two runs are two runs: on this shared VM one may last longer
        # (0.54 s of 4.3 s was seen), and the extra time is spent waiting,
        # at the low power, which the scaling to equal time counts as saved.
        # The measurement's own uncertainty is that difference in duration
        # priced at the model's busy-wait power step; the prediction's range
        # widened by it must hold the measured saving.
        noise_j = bench.measure_noise_j({"profile": prof, "on": on}, bench.power_step_w(model))
        msg = (f"budget spacing {p['agent_gap_us']} us: predicted {p['saved_j']} J (clocked down "
               f"{p['clocked_down_s']} s), measured "
               f"{measured:.1f} J +- {noise_j:.1f} J from {prof['nodes']} and {on['nodes']} "
               f"(on run clocked down {on['down_s']} s)")
        # Both bounds price the clocked-down time at the power step
        # calibrate measured a minute before; on this shared VM the fake's
        # step moves between calibrate and the runs (13.2 W against 12.6 W;
        # measured savings 4 % under the low bound and 7 % over the high one
        # in two runs of 2026-11-27), which the bounds do not model: a
        # tenth either way is that calibration's error, not the what-if's.
        self.assertLessEqual(p["saved_j"][1] * 0.9 - noise_j, measured, msg)
        # Waits the ranks announce are lowered at their deadline: the run
        # reaches the high bound's instant reaction.
        self.assertLessEqual(measured, p["saved_j"][2] * 1.1 + noise_j, msg)
        # the what-if's accuracy after the fact: the estimate within 10 %
        self.assertLessEqual(abs(measured - p["saved_j"][0]), 0.1 * measured + noise_j, msg)
        self.assertLess(noise_j, p["saved_j"][0], msg)  # a comparison, not noise
        # The on run's own summary prices its clocked-down time after the
        # fact (whatif.saving): within 10 % of the saving measured against
        # the paired run that did not lower (profile), on the fake model.
        after = on["saved_j"]
        self.assertIsNotNone(after, on)
        self.assertEqual(on["saved_src"], "simulated")
        self.assertLessEqual(abs(measured - after[0]), 0.1 * measured + noise_j,
                             f"{msg}; after the fact {after}")
        text = lt.as_user([str(self.cli), "report", str(on_job)], check=True).stdout
        self.assertIn("saved: ", text)
        self.assertIn("SIMULATED: priced with a model calibrated on fake hardware", text)
        # A threshold is recommended only if its time added stays within 1 %
        # at the high bound; which one depends on the machine's raise delay
        # (none on Debian 13's root at 21:00, every high bound 1.2-2.4 %).
        sweep = job.get("what_if_sweep") or []
        ok = [e for e in sweep if e["time_added_pct"][2] is not None
              and e["time_added_pct"][2] <= 1.0 and e["saved_j"][0] > 0]
        if ok:
            self.assertTrue(job["what_if_recommended"], sweep)
        else:
            self.assertFalse(job["what_if_recommended"], sweep)

    def test_spread_waits_are_lowered_at_their_deadline(self) -> None:
        """The spread workload at the default budget: rank 0's work
        log-uniform in 0.2-20 ms, so rank 1 waits in MPI_Barrier for every
        length around the 500 us threshold.  Its waits are announced and
        lowered at their deadline: clocked down for most of the time past
        the threshold (over_s, the ideal; bench/agent measures 99.9 % of it
        on simulated ranks, polls alone 38 %), and `report` tells how the
        waits were found."""
        wd = lt.workdir("spread")
        prog = bench.program()
        lt.give(lt.BUILD / "tests" / "mpi" / prog, wd)
        job = bench.submit(wd, "on", "500us", f"./{prog} 300 2 10", 2, 1)
        self.assertEqual(lt.wait_job(job, 300), "COMPLETED")
        bench.figures(job)
        r = lt.as_user([str(self.cli), "report", str(job), "--json"], check=True)
        j = json.loads(r.stdout)["jobs"][0]
        waiter = [x for x in j["detail"]["ranks"] if x["rank"] == 1][0]
        msg = json.dumps({k: waiter.get(k) for k in ("long_calls", "announced", "mispredicted",
                                                    "over_s", "down_s", "transitions")})
        # about 80 % of 300 waits pass 500 us; after the first at its call
        # site, each is predicted long
        self.assertGreater(waiter["long_calls"], 150, msg)
        self.assertGreater(waiter["announced"], waiter["long_calls"] // 2, msg)
        self.assertLessEqual(waiter["mispredicted"], waiter["announced"], msg)
        self.assertGreater(waiter["over_s"], 0.5, msg)
        # The share depends on how soon the agent runs after each deadline
        # on this shared VM: 98 % was measured; announcements off (the
        # agent past 3/4 of its ceiling) gave 67 %, the polls alone 38 %.
        self.assertGreater(waiter["down_s"], 0.8 * waiter["over_s"], msg)
        rx = j["reaction"]
        self.assertEqual(rx["announced"], sum(x["announced"] for x in j["detail"]["ranks"]))
        self.assertEqual(rx["long_waits"] - (rx["announced"] - rx["mispredicted"]),
                         rx["polled"])
        text = lt.as_user([str(self.cli), "report", str(job)], check=True).stdout
        self.assertIn("announced by the ranks", text)
        # the user's totals from the real sacct hold this job and its saving
        r = lt.as_user([str(self.cli), "report", "--totals", "user", "--since", "now-1hours",
                        "--json"], check=True)
        mine = [g for g in json.loads(r.stdout)["groups"] if g["group"] == lt.TEST_USER]
        self.assertEqual(len(mine), 1, r.stdout)
        self.assertGreaterEqual(mine[0]["saved_jobs"], 1, mine)
        self.assertGreater(mine[0]["saved_j"][0], 0, mine)


if __name__ == "__main__":
    unittest.main()
