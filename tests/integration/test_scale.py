# SPDX-License-Identifier: BSD-3-Clause
"""A production-shaped job on the real cluster (sites run sweeps of
thousands of steps in one job): a parameter sweep
of at least 1000 steps, every step counted in the summary, and nothing of
the job left in /dev/shm or runtime_dir afterwards.

The steps are one-rank runs of a program that only initialises and
finalises MPI (the cheapest step that has a rank the plugin counts),
launched STEPS_PARALLEL at a time.  Needs the plugin and the epilog hooks
(as test_accounting.py); its cost is in bench/epilog/RESULTS.md, "Scale"."""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
import unittest
from pathlib import Path

import labtools as lt
from test_accounting import FAMILIES, PLUGIN, hook_wired

sys.path.insert(0, str(lt.TOP / "epilog"))
from mpi_pstate.core import siteconf  # noqa: E402
from mpi_pstate.model import summary  # noqa: E402

STEPS = int(os.environ.get("MPI_PSTATE_SCALE_STEPS", "1000"))
STEPS_PARALLEL = 2  # the lab node has 2 CPUs
TINY = r"""
#include <mpi.h>
int main(int argc, char **argv) { MPI_Init(&argc, &argv); MPI_Finalize(); return 0; }
"""


class Sweep(unittest.TestCase):
    @classmethod
    def setUpClass(cls) -> None:
        if lt.lab("status", check=False).returncode != 0:
            raise unittest.SkipTest("lab cluster not running")
        if "--mpi-pstate" not in lt.as_user(["sbatch", "--help"]).stdout:
            raise unittest.SkipTest("the plugin is not active in the lab")
        if not (hook_wired("epilog", "mpi-pstate-epilog") and
                hook_wired("epilog_slurmctld", "mpi-pstate-epilog-slurmctld")):
            raise unittest.SkipTest("mpi-pstate epilog hooks not wired")
        cc, cls.mpi = FAMILIES["mpich"]
        if not shutil.which(cc):
            raise unittest.SkipTest(f"{cc} not installed")
        cls.cfg = siteconf.load(lt.SLURM_CONF)
        cls.wd = lt.workdir("scale")
        (cls.wd / "tiny.c").write_text(TINY)
        cls.prog = cls.wd / "tiny"
        subprocess.run([cc, "-O2", "-o", str(cls.prog), str(cls.wd / "tiny.c")], check=True)
        shutil.chown(cls.prog, lt.TEST_USER)

    def leftovers(self, job: int, node: str) -> list[str]:
        """The job's segments in the node's /dev/shm and its step
        directories in the node's runtime_dir."""
        shm = lt.node_exec(node, f"ls /dev/shm | grep '^mpi-pstate\\.{job}\\.' || true").stdout
        steps = Path(siteconf.expand_host(self.cfg.runtime_dir, node)) / "steps"
        dirs = [p.name for p in steps.glob(f"{job}.*")] if steps.is_dir() else []
        return shm.split() + dirs

    def test_thousand_steps_every_one_counted_nothing_left(self) -> None:
        script = f"""set -u
seq 0 {STEPS - 1} | xargs -P{STEPS_PARALLEL} -I{{}} \\
  srun --mpi={self.mpi} {PLUGIN} -N1 -n1 --exact -Q -J s{{}} {self.prog}
"""
        path = self.wd / "sweep.sh"
        path.write_text("#!/bin/bash\n" + script)
        shutil.chown(path, lt.TEST_USER)
        t0 = time.monotonic()
        r = lt.as_user(["sbatch", "--parsable", "-N1", "-n", str(STEPS_PARALLEL), "-w", "n1",
                        "-t", "30", "-o", str(self.wd / "sweep-%j.out"), str(path)],
                       cwd=self.wd, check=True)
        job = int(r.stdout.strip().split(";")[0])
        self.addCleanup(lt.root, ["scancel", str(job)], check=False)
        state = lt.wait_job(job, timeout=1500)
        comment = lt.summary_comment(job, timeout=120)
        took = time.monotonic() - t0
        s, _ = summary.find(comment)
        out = (self.wd / f"sweep-{job}.out").read_text(errors="replace")[-2000:]
        self.assertIsNotNone(s, f"{state}: no summary in {comment!r}\n{out}")
        assert s is not None
        self.assertEqual(state, "COMPLETED", out)
        self.assertEqual((s["steps"], s["rank_steps"], s["ranks"]), (STEPS, STEPS, 1), s)
        # past the node record's detail bound the steps are summed: partial, and why
        self.assertEqual(s["state"], "partial" if STEPS > 256 else "complete", s)
        self.assertEqual(self.leftovers(job, "n1"), [])
        node_rec = json.loads((Path(self.cfg.collect_dir) / str(job) / "node.n1.json")
                              .read_text())
        # every summed step from its agent's sums.json: none cut, none unread
        rest = node_rec.get("rest") or {"unread_steps": 0, "why": []}
        self.assertEqual(rest["unread_steps"], 0, rest)
        self.assertEqual(rest.get("sums_steps"), STEPS - 256 if STEPS > 256 else None, rest)
        self.assertFalse([w for w in rest["why"] if "CPU" in w], rest)
        print(f"\nscale: {STEPS} steps, job {job}: {took:.0f} s submit to summary; node "
              f"record {len(json.dumps(node_rec))} bytes, {len(node_rec['ranks'])} ranks "
              f"detailed, rest {node_rec.get('rest', {}).get('steps')} steps",
              file=sys.stderr)


if __name__ == "__main__":
    unittest.main()
