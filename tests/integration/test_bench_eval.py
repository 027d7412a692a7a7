# SPDX-License-Identifier: BSD-3-Clause
"""The evaluation tool (bench/eval/evaluate.py) on the local cluster, as the test user, with
the imbalanced demo program: two repetitions of without / --mpi-pstate at
threshold 0 / at 2 ms.  Checks the interleaving, that the runs without the
option have no record and no transitions (also straight from sacct), that
the on runs have one with the figures an imbalanced program must show, that
the lab's fake RAPL is labelled simulated, and the text table of the same
result.  When the node agent clocks down, threshold 0 must show transitions
and time clocked down."""
from __future__ import annotations

import importlib
import json
import sys
import unittest
from types import ModuleType

import labtools as lt

ITER, WORK_MS = 8, 25


def bench_module() -> ModuleType:
    for d in (lt.TOP / "epilog", lt.TOP / "bench" / "eval"):
        if str(d) not in sys.path:
            sys.path.insert(0, str(d))
    return importlib.import_module("evaluate")


class BenchEval(unittest.TestCase):
    @classmethod
    def setUpClass(cls) -> None:
        # The checkout's evaluation tool (bench/eval/run.py, not installed)
        # with the installed report, as a user runs them.
        inst = lt.installed()
        family, mpi = lt.srun_family()
        prog = lt.BUILD / "tests" / "mpi" / f"imbalance.{family}"
        report, script = inst.cli, lt.TOP / "bench" / "eval" / "run.py"
        d = lt.workdir("bench-eval")
        exe = lt.give(prog, d)
        # timeout -s INT: the bench cancels its running job before it exits
        r = lt.as_user(["timeout", "-s", "INT", "170", "/usr/bin/python3", str(script),
                        "--reps", "2", "--thresholds", "0,2ms", "--json", "--workdir",
                        str(d / "runs"), "--report-cmd", str(report), "--record-wait", "20",
                        "--launcher", f"srun --mpi={mpi}", "--", str(exe), str(ITER), str(WORK_MS)], cwd=d, timeout=200)
        cls.proc = r
        cls.res = json.loads(r.stdout) if r.stdout.strip().startswith("{") else None

    def setUp(self) -> None:
        self.assertEqual(self.proc.returncode, 0, self.proc.stderr[-3000:])
        self.assertIsNotNone(self.res)
        self.rows = {r["variant"]: r for r in self.res["rows"]}

    def test_runs_interleaved_and_completed(self) -> None:
        runs = self.res["runs"]
        self.assertEqual([r["variant"] for r in runs],
                         ["base", "t0", "t2ms", "base", "t2ms", "t0"])
        for r in runs:
            with self.subTest(job=r["job"]):
                self.assertTrue(r["ok"], r)
                self.assertEqual(r["state"], "COMPLETED")
                # rank 0 computes ITER x WORK_MS whatever the variant
                self.assertGreater(r["wall_s"], ITER * WORK_MS / 1000)
                self.assertLess(r["wall_s"], 60)
        self.assertEqual(len({r["job"] for r in runs}), 6)

    def test_options_reached_the_jobs(self) -> None:
        opt = "SLURM_SPANK__SLURM_SPANK_OPTION_mpi_pstate_mpi_pstate"
        for r in self.res["runs"]:
            with self.subTest(job=r["job"]):
                if r["variant"] == "base":
                    self.assertEqual([k for k in r["env"] if "pstate" in k.lower()], [])
                else:
                    self.assertEqual(r["env"].get(opt), "on")
                    self.assertEqual(r["env"].get(opt + "_threshold"),
                                     "0us" if r["variant"] == "t0" else "2000us")

    def test_without_no_record_no_transitions(self) -> None:
        base = self.rows["base"]
        self.assertEqual((base["runs"], base["runs_ok"], base["records"]), (2, 2, 0))
        self.assertIsNone(base["transitions"])
        self.assertIsNone(base["wall_delta_pct"])
        for r in self.res["runs"]:
            if r["variant"] == "base":
                self.assertIsNone(r["record"])
                self.assertNotIn("transitions", r)
        # and straight from the accounting record, not through the bench
        # (the summary is written by the queue's flusher after the job:
        # waited for, bounded)
        for r in self.res["runs"]:
            rows = lt.sacct(r["job"], ["JobID", "SystemComment"])
            self.assertEqual(len(rows), 1)
            with self.subTest(job=r["job"], variant=r["variant"]):
                if r["variant"] == "base":
                    self.assertNotIn("mpi-pstate/", rows[0]["SystemComment"])
                else:
                    self.assertIn("mpi-pstate/2:", lt.summary_comment(r["job"]))

    def test_with_records_show_the_imbalance(self) -> None:
        t0, t2 = self.rows["t0"], self.rows["t2ms"]
        for row in (t0, t2):
            with self.subTest(variant=row["variant"]):
                self.assertEqual((row["runs_ok"], row["records"]), (2, 2))
                # rank 1 waits nearly all the time, rank 0 nearly never
                self.assertGreater(row["mpi_wait_pct"], 25)
                self.assertLess(row["mpi_wait_pct"], 75)
                self.assertIsNotNone(row["wall_delta_pct"])
        # threshold 0: every blocking call (barrier + allreduce, 2 ranks) is long
        self.assertGreaterEqual(t0["long_calls"], 2 * 2 * ITER)
        # 2 ms: only the waiting rank's barriers
        self.assertGreaterEqual(t2["long_calls"], ITER)
        self.assertLess(t2["long_calls"], t0["long_calls"])
        self.assertEqual(self.res["sweep"], ["t0", "t2ms"])
        self.assertIsNotNone(t2["avoided_pct"])
        # Not asserted > 0: on transitions it compares how often the agent
        # switched at 0 and at 2 ms, and at threshold 0 its CPU budget spaces
        # the switches on a loaded machine (once -4.5 %); the long calls above
        # are what the thresholds decide.
        self.assertLessEqual(t2["avoided_pct"], 100)
        self.assertIn(t2["avoided_basis"], ("transitions", "long calls"))
        self.assertGreater(t2["over_pct"], 50)

    def test_fake_rapl_labelled_simulated(self) -> None:
        self.assertEqual({r["rapl"] for r in self.res["runs"]}, {"simulated"})
        for row in self.res["rows"]:
            self.assertIsNone(row["energy_delta_pct"], row)
        self.assertTrue(any("SIMULATED" in n for n in self.res["notes"]), self.res["notes"])
        self.assertEqual(self.res["machine"]["rapl"], "simulated")

    def test_transitions_when_the_agent_works(self) -> None:
        t0 = self.rows["t0"]
        if t0["agent"]:
            self.assertGreater(t0["transitions"], 0)
            self.assertGreater(t0["down_pct"], 0)
            self.assertEqual(self.rows["t2ms"]["avoided_basis"], "transitions")
        else:
            self.assertEqual(t0["transitions"], 0)
            self.assertEqual(t0["down_pct"], 0)
            self.assertTrue(any(n.startswith("agent: no node agent") for n in self.res["notes"]))

    def test_text_table_of_this_run(self) -> None:
        text = bench_module().render_text(self.res)
        lines = text.splitlines()
        head = next(i for i, ln in enumerate(lines) if ln.startswith("variant"))
        for col in ("wall Δ%", "energy Δ%", "MPI wait %", "clocked down %", "transitions"):
            self.assertIn(col, lines[head])
        body = lines[head + 2:head + 5]
        self.assertEqual([ln.split("  ")[0].strip() for ln in body],
                         ["without", "on @ 0", "on @ 2ms"])
        self.assertTrue(body[0].rstrip().endswith("-"))
        self.assertIn("n/a", body[1])
        self.assertIn("threshold sweep", text)


if __name__ == "__main__":
    unittest.main()
