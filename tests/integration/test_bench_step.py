# SPDX-License-Identifier: BSD-3-Clause
"""bench/step/run.py on the local cluster, as the test user, with a few
samples: both scopes run, every srun with and without --mpi-pstate
succeeds, the counts are right, and exactly the with samples got the
plugin (their jobs, and only theirs, carry an mpi-pstate summary)."""
from __future__ import annotations

import json
import time
import unittest

import labtools as lt

SCRIPT = lt.TOP / "bench" / "step" / "run.py"
N = 3


class BenchStep(unittest.TestCase):
    def test_few_samples(self) -> None:
        lt.installed()
        d = lt.workdir("bench-step")
        # the checkout may be unreadable to users: the script and the module it
        # imports (found beside it, Python's own first path entry)
        script = lt.give(SCRIPT, d)
        lt.give(lt.TOP / "bench" / "machine.py", d)
        since = time.strftime("%Y-%m-%dT%H:%M:%S", time.localtime(time.time() - 1))
        r = lt.as_user(["timeout", "-s", "INT", "150", "/usr/bin/python3", str(script), "--n",
                        str(N), "--warmup", "1", "--json", "--workdir", str(d / "wd")],
                       cwd=d, timeout=180)
        self.assertEqual(r.returncode, 0, r.stdout[-2000:] + r.stderr[-2000:])
        res = json.loads(r.stdout)
        self.assertEqual(sorted(res["scopes"]), ["job", "step"])
        for scope, s in res["scopes"].items():
            with self.subTest(scope=scope):
                self.assertEqual(s["failures"], [])
                st = s["stats"]
                for v in ("without", "with"):
                    self.assertEqual(st[v]["n"], N)
                    self.assertGreater(st[v]["min_ms"], 1.0)  # an srun is never this quick
                    self.assertLess(st[v]["median_ms"], 30_000)
                self.assertGreater(st["ratio_median"], 0)
        # job scope: one job per sample (warm-up included), in ABBA order, and exactly the
        # with jobs carry an mpi-pstate summary; slurmdbd stores the last ones a moment later
        def abba(n: int) -> list[str]:
            return [v for i in range(n) for v in (("without", "with") if i % 2 == 0
                                                  else ("with", "without"))]
        order = abba(1) + abba(N)
        t_end = time.monotonic() + 30
        while True:
            q = lt.root(["sacct", "-n", "-P", "-X", "-u", lt.TEST_USER, "-S", since, "-o",
                         "JobID,JobName,State,SystemComment"])
            jobs = [ln.split("|", 3) for ln in q.stdout.splitlines() if "|hostname|" in ln]
            got = ["with" if "mpi-pstate/2:" in j[3] else "without" for j in jobs]
            if got == order or time.monotonic() > t_end:
                break
            time.sleep(1)
        self.assertEqual(got, order, q.stdout)
        self.assertTrue(all(j[2] == "COMPLETED" for j in jobs), jobs)

if __name__ == "__main__":
    unittest.main()
