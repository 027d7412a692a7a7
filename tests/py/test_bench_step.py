# SPDX-License-Identifier: BSD-3-Clause
"""bench/step/run.py without a cluster: ABBA order, nearest-rank p90, the
sample parser, and both scopes run end to end against a fake srun that is
slower with --mpi-pstate (and a fake sbatch --wait that runs the generated
job script with bash), so the ratio and the warm-up dropping are checked
on real timings."""
from __future__ import annotations

import importlib.util
import io
import json
import os
import shutil
import stat
import sys
import tempfile
import unittest
from contextlib import redirect_stderr, redirect_stdout
from pathlib import Path
from unittest import mock

TOP = Path(__file__).resolve().parents[2]
spec = importlib.util.spec_from_file_location("bench_step_run", TOP / "bench" / "step" / "run.py")
assert spec is not None and spec.loader is not None
sb = importlib.util.module_from_spec(spec)
sys.modules["bench_step_run"] = sb
spec.loader.exec_module(sb)

FAKE_SRUN = """#!/bin/bash
# with --mpi-pstate a step takes 310 ms, without 10 ms; FAIL_WITH=1 fails it.
# A sleep is a floor, never a ceiling: the gap is wide enough that a busy
# machine slowing the plain steps by up to 150 ms still passes.
echo "$*" >> "$FAKE_LOG"
for a in "$@"; do
  if [ "$a" = "--mpi-pstate=on" ]; then
    [ "${FAIL_WITH:-0}" = 1 ] && exit 3
    sleep 0.31; echo host; exit 0
  fi
done
sleep 0.01; echo host
"""

FAKE_SBATCH = """#!/usr/bin/python3
import subprocess, sys
args = sys.argv[1:]
out = args[args.index("-o") + 1]
wd = args[args.index("--chdir") + 1]
with open(out, "w") as f:
    rc = subprocess.run(["bash", args[-1]], cwd=wd, stdout=f).returncode
print("77")
sys.exit(rc)
"""


class Pure(unittest.TestCase):
    def test_abba(self) -> None:
        self.assertEqual(sb.abba(3), ["without", "with", "with", "without", "without", "with"])
        self.assertEqual(sb.abba(0), [])

    def test_percentile(self) -> None:
        xs = [float(i) for i in range(1, 31)]
        self.assertEqual(sb.percentile(xs, 90), 27.0)
        self.assertEqual(sb.percentile(xs, 50), 15.0)
        self.assertEqual(sb.percentile([2.0, 1.0], 90), 2.0)
        self.assertEqual(sb.percentile(xs, 100), 30.0)
        self.assertEqual(sb.percentile([3.0], 90), 3.0)
        self.assertIsNone(sb.percentile([], 90))

    def test_stats_ratio(self) -> None:
        st = sb.stats({"without": [0.1, 0.1, 0.2], "with": [0.15, 0.15, 0.3]})
        self.assertAlmostEqual(st["ratio_median"], 1.5)
        self.assertAlmostEqual(st["added_median_ms"], 50.0)
        self.assertAlmostEqual(st["ratio_p90"], 1.5)
        self.assertEqual(st["with"]["n"], 3)

    def test_parse_step_output(self) -> None:
        text = ("junk\nsample without 1.0 1.1 0\nsample with 2.0 2.5 0\n"
                "sample with 3,0 3,2 0\nsample without 4.0 4.3 0\nsample with 5.0 5.1 1\n"
                "sample bogus 1 2 0\n")
        samples, failures = sb.parse_step_output(text, warmup=1)
        self.assertEqual(len(samples["without"]), 1)
        self.assertAlmostEqual(samples["without"][0], 0.3)
        self.assertEqual(len(samples["with"]), 1)
        self.assertAlmostEqual(samples["with"][0], 0.2)
        self.assertEqual(len(failures), 1)
        self.assertIn("exit 1", failures[0])


class WithFakeSlurm(unittest.TestCase):
    def setUp(self) -> None:
        self.d = Path(tempfile.mkdtemp(prefix="test_bench_step."))
        self.addCleanup(shutil.rmtree, self.d, True)
        for name, text in (("srun", FAKE_SRUN), ("sbatch", FAKE_SBATCH)):
            p = self.d / name
            p.write_text(text)
            p.chmod(p.stat().st_mode | stat.S_IXUSR)
        self.log = self.d / "log"
        env = {"PATH": f"{self.d}:{os.environ['PATH']}", "FAKE_LOG": str(self.log)}
        patcher = mock.patch.dict(os.environ, env)
        patcher.start()
        self.addCleanup(patcher.stop)

    def main(self, *args: str) -> tuple[int, dict]:
        out = io.StringIO()
        with redirect_stdout(out), redirect_stderr(io.StringIO()):
            rc = sb.main(["--json", "--n", "4", "--warmup", "1", "--workdir",
                          str(self.d / "wd"), *args])
        return rc, json.loads(out.getvalue())

    def test_both_scopes(self) -> None:
        rc, res = self.main("--scope", "job,step", "-p", "debug")
        self.assertEqual(rc, 0, res)
        for scope in ("job", "step"):
            with self.subTest(scope=scope):
                st = res["scopes"][scope]["stats"]
                self.assertEqual(st["without"]["n"], 4)
                self.assertEqual(st["with"]["n"], 4)
                self.assertGreater(st["ratio_median"], 1.5)
                self.assertGreater(st["added_median_ms"], 150)
                self.assertEqual(res["scopes"][scope]["failures"], [])
        calls = self.log.read_text().splitlines()
        # 5 of each per scope (one warm-up); the job scope passes -p to srun
        self.assertEqual(len(calls), 20)
        self.assertEqual(sum("--mpi-pstate=on" in c for c in calls), 10)
        self.assertTrue(all("-p debug" in c for c in calls[:10]))

    def test_failures_make_exit_1(self) -> None:
        with mock.patch.dict(os.environ, {"FAIL_WITH": "1"}):
            rc, res = self.main("--scope", "step")
        self.assertEqual(rc, 1)
        self.assertEqual(res["scopes"]["step"]["stats"]["with"]["n"], 0)
        self.assertEqual(len(res["scopes"]["step"]["failures"]), 5)

    def test_markdown(self) -> None:
        out = io.StringIO()
        with redirect_stdout(out), redirect_stderr(io.StringIO()):
            rc = sb.main(["--n", "2", "--warmup", "0", "--scope", "job"])
        self.assertEqual(rc, 0)
        rows = [l for l in out.getvalue().splitlines() if l.startswith("| job |")]
        self.assertEqual(len(rows), 2)
        self.assertRegex(rows[1], r"^\| job \| with \| 2 \| [0-9.]+ \| [0-9.]+ \| [0-9.]+ \| "
                                  r"[0-9.]+ \| [0-9.]+ \| [0-9.]+ \|$")


if __name__ == "__main__":
    unittest.main()
