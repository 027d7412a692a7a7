# SPDX-License-Identifier: BSD-3-Clause
"""PrivateData=jobs in slurm.conf and slurmdbd.conf, as a site sets it to
hide jobs from other users: the job's user reads the job's records and
`mpi-pstate report` shows them whole; another user reads none of its files
in collect_dir, and report refuses the job as sacct hides it (records
once were world-readable whatever PrivateData said)."""
from __future__ import annotations

import json
import subprocess
import sys
import unittest

import labtools as lt

sys.path.insert(0, str(lt.TOP / "epilog"))
from mpi_pstate.core import siteconf  # noqa: E402

OTHER = "nobody"


def as_other(argv: list[str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["runuser", "-u", OTHER, "--", "env", "-i", "SLURM_CONF=" + lt.SLURM_CONF,
                           "PATH=/usr/local/bin:/usr/bin:/bin", "LANG=C.UTF-8", *argv],
                          cwd="/", capture_output=True, text=True, timeout=120)


class PrivateData(unittest.TestCase):
    def test_only_the_jobs_user_reads_its_records(self) -> None:
        cli = str(lt.installed().cli)
        fam, mpi = lt.srun_family()
        with lt.slurm_conf_lines("PrivateData=jobs", dbd=("PrivateData=jobs",)):
            wd = lt.workdir("private-data")
            lt.give(lt.BUILD / "tests" / "mpi" / f"imbalance.{fam}", wd)
            job = lt.sbatch(["-w", "n1", "-N1", "-n2", "-t", "3", "--mpi-pstate=on"],
                            f"srun --mpi={mpi} ./imbalance.{fam} 10 5\n", wd)
            self.assertEqual(lt.wait_job(job), "COMPLETED")
            self.assertIn("mpi-pstate/", lt.summary_comment(job))
            jd = f"{siteconf.load(lt.SLURM_CONF).collect_dir}/{job}"

            r = lt.as_user([cli, "report", str(job), "--json"], check=True)
            rep = json.loads(r.stdout)["jobs"][0]
            self.assertEqual(rep["status"], "ok", rep)
            self.assertEqual(len(rep["detail"]["ranks"]), 2, rep)
            self.assertEqual(lt.as_user(["cat", f"{jd}/node.n1.json"]).returncode, 0)

            r = as_other(["cat", f"{jd}/node.n1.json"])
            self.assertNotEqual(r.returncode, 0, r.stdout[:200])
            self.assertIn("Permission denied", r.stderr)
            self.assertNotEqual(as_other(["ls", jd]).returncode, 0)
            r = as_other([cli, "report", str(job)])
            self.assertEqual(r.returncode, 1, r.stdout + r.stderr)
            self.assertIn(f"job {job} not found", r.stderr)
            self.assertIn("PrivateData", r.stderr)
            self.assertEqual(r.stdout, "")


if __name__ == "__main__":
    unittest.main()
