# SPDX-License-Identifier: BSD-3-Clause
"""mpi-pstate beside jobstats on the real cluster: sites run both, and
both write the accounting record.

jobstats keeps "JS1:" + base64(gzip(JSON)) as a job's whole AdminComment,
written by its own EpilogSlurmctld part with sacctmgr, decodes the whole
field, and its backfill picks the jobs whose AdminComment is NULL.
mpi-pstate keeps its summary in the SystemComment (docs/records.md, "Where
the summary lives").  A jobstats-like part (jobstats_like_epilog.py; it
falls back to libslurm when sacctmgr 22.05 lower-cases its value) is put
into the lab's epilog_slurmctld.d/ before ours (40-) and after ours (60-);
either way jobstats' value must decode to its JSON, `mpi-pstate report
--json` must return our summary, and `backfill` must neither duplicate nor
clobber anything.  The part is removed again by the test."""
from __future__ import annotations

import base64
import gzip
import json
import shutil
import subprocess
import sys
import time
import unittest
from pathlib import Path
from typing import Any

import labtools as lt
import test_accounting as ta

sys.path.insert(0, str(lt.TOP / "epilog"))
sys.path.insert(0, str(Path(__file__).resolve().parent))
import jobstats_like_epilog as js  # noqa: E402
from mpi_pstate.core import slurm  # noqa: E402
from mpi_pstate.model import summary  # noqa: E402

HOOKS = lt.LAB / "etc" / "epilog_slurmctld.d"
PART = Path(__file__).resolve().parent / "jobstats_like_epilog.py"
DELIM = slurm.SACCT_DELIM


def jobstats_decode(value: str) -> Any:
    """What jobstats' reader does with the field: "JS1:" prefix, base64 of
    all the rest (Python's lenient b64decode), gunzip, JSON."""
    if not value.startswith("JS1:"):
        raise ValueError(f"no JS1: prefix: {value[:40]!r}")
    return json.loads(gzip.decompress(base64.b64decode(value[4:])))


def comments(job: str) -> tuple[str, str, str]:
    """(NodeList, SystemComment, AdminComment) of a job or array task."""
    r = lt.root(["sacct", "-n", "-X", "-P", "--delimiter", DELIM, "-j", job, "-o",
                 "NodeList,SystemComment,AdminComment"])
    lines = [ln for ln in r.stdout.splitlines() if ln]
    if not lines:
        return "", "", ""
    f = lines[-1].split(DELIM, 2)
    return (f + ["", "", ""])[0], (f + ["", ""])[1], (f + ["", "", ""])[2]


class JobstatsCoexistence(unittest.TestCase):
    fam: str
    wd: Path
    prog: Path

    @classmethod
    def setUpClass(cls) -> None:
        if lt.lab("status", check=False).returncode != 0:
            raise unittest.SkipTest("lab cluster not running")
        if not ta.hook_wired("epilog_slurmctld", "mpi-pstate-epilog-slurmctld"):
            raise unittest.SkipTest("mpi-pstate's EpilogSlurmctld part is not in "
                                    "etc/epilog_slurmctld.d")
        cls.wd = lt.workdir("jobstats")
        (cls.wd / "imb.c").write_text(ta.PROGRAM)
        for fam, (cc, _) in ta.FAMILIES.items():
            if shutil.which(cc):
                cls.fam, cls.prog = fam, cls.wd / f"imb.{fam}"
                subprocess.run([cc, "-O2", "-o", str(cls.prog), str(cls.wd / "imb.c")],
                               check=True)
                shutil.chown(cls.prog, lt.TEST_USER)
                break
        else:
            raise unittest.SkipTest("no MPI compiler")

    def install_part(self, name: str) -> None:
        dest = HOOKS / name
        writer = lt.installed().libexec / "mpi-pstate-dbcomment"
        text = PART.read_text()
        self.assertIn('\nWRITER = ""', text)
        dest.write_text(text.replace('\nWRITER = ""', f"\nWRITER = {str(writer)!r}", 1))
        dest.chmod(0o755)
        self.addCleanup(dest.unlink, missing_ok=True)

    def script(self, nodes: int, ntasks: int) -> str:
        return f"""set -u
srun --mpi={ta.FAMILIES[self.fam][1]} {ta.PLUGIN} -N{nodes} -n{ntasks} {self.prog} 5 5
"""

    def submit(self, args: list[str], name: str, nodes: int = 2, ntasks: int = 2) -> int:
        path = self.wd / f"{name}.sh"
        path.write_text("#!/bin/bash\n" + self.script(nodes, ntasks))
        shutil.chown(path, lt.TEST_USER)
        r = lt.as_user(["sbatch", "--parsable", "-o", str(self.wd / f"{name}-%j.out"), "-J",
                        name, *args, str(path)], cwd=self.wd, check=True)
        job = int(r.stdout.strip().split(";")[0])
        self.addCleanup(lt.root, ["scancel", str(job)], check=False)
        return job

    def wait_both(self, job: str, timeout: float = 150) -> tuple[str, str, str]:
        """Until the job has our summary in SystemComment and jobstats' value
        in AdminComment (both EpilogSlurmctld parts done)."""
        t_end = time.monotonic() + timeout
        got = ("", "", "")
        while time.monotonic() < t_end:
            got = comments(job)
            if summary.find(got[1])[0] is not None and got[2].startswith("JS1:"):
                return got
            time.sleep(0.5)
        raise AssertionError(f"job {job}: SystemComment {got[1]!r}, AdminComment {got[2]!r}\n"
                             f"{lt.daemon_log_tail(15)}")

    def report(self, job: str) -> dict[str, Any]:
        r = lt.as_user([str(ta.CLI), "report", job, "--json"], cwd=self.wd)
        self.assertEqual(r.returncode, 0, r.stderr)
        return json.loads(r.stdout)["jobs"][0]

    def check_job(self, job: str, ranks: int, n_nodes: int) -> None:
        _, system, admin = self.wait_both(job)
        raw = job if "_" not in job else \
            lt.root(["sacct", "-n", "-X", "-P", "-j", job, "-o", "JobIDRaw"]).stdout.split()[0]
        # jobstats' value: the whole field, decodable, its JSON unchanged
        doc = jobstats_decode(admin)
        nodes = sorted(doc["nodes"])
        self.assertEqual(len(nodes), n_nodes, doc)
        self.assertEqual(doc, js.stats(raw, nodes))
        self.assertEqual(admin, js.encode(js.stats(raw, nodes)))  # nothing of ours in it
        # ours: exactly one summary, in SystemComment, found by report
        self.assertEqual(system.count(summary.MARKER), 1, system)
        ours = summary.find(system)[0]
        self.assertEqual((ours["v"], ours["state"], ours["ranks"]), (2, "complete", ranks), ours)
        rep = self.report(job)
        self.assertEqual((rep["status"], rep["summary_in"], rep["summary"]), ("ok", "SystemComment",
                                                                            ours))
        # backfill: nothing to do, nothing changed
        r = lt.root([str(ta.CLI), "backfill", raw])
        self.assertIn(f"job {raw}: up to date", r.stdout)
        self.assertEqual(comments(job)[1:], (system, admin))
        # our EpilogSlurmctld missed it (SystemComment emptied): backfill
        # writes it again, beside jobstats' value, once
        p = subprocess.run([str(lt.installed().libexec / "mpi-pstate-dbcomment"), "--system",
                            "--set", job], input="", text=True, capture_output=True,
                           env=lt.env(), timeout=60)
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertEqual(comments(job)[1:], ("", admin))
        r = lt.root([str(ta.CLI), "backfill", raw])
        self.assertIn(f"job {raw}: written", r.stdout)
        r = lt.root([str(ta.CLI), "backfill", raw])
        self.assertIn(f"job {raw}: up to date", r.stdout)
        _, system2, admin2 = comments(job)
        self.assertEqual(admin2, admin)
        self.assertEqual(system2.count(summary.MARKER), 1, system2)
        self.assertEqual({k: v for k, v in summary.find(system2)[0].items() if k != "wall_s"},
                         {k: v for k, v in ours.items() if k != "wall_s"})
        self.assertEqual(jobstats_decode(admin2), js.stats(raw, nodes))

    def test_jobstats_writes_first(self) -> None:
        self.install_part("40-jobstats-like")
        job = self.submit(["-N2", "--ntasks-per-node=1", "-t", "5"], "js-first")
        self.check_job(str(job), 2, 2)

    def test_jobstats_writes_after_us(self) -> None:
        self.install_part("60-jobstats-like")
        job = self.submit(["-N2", "--ntasks-per-node=1", "-t", "5"], "js-after")
        self.check_job(str(job), 2, 2)

    def test_array_tasks_after_us(self) -> None:
        """jobstats names an array task <array>_<task>; each task keeps its
        own value and its own summary."""
        self.install_part("60-jobstats-like")
        job = self.submit(["--array=1-2", "-N1", "-n1", "-t", "5"], "js-array", 1, 1)
        for task in (1, 2):
            with self.subTest(task=task):
                self.check_job(f"{job}_{task}", 1, 1)

    def test_scancel_admin_comment_left_untouched(self) -> None:
        """Slurm 25.11's `scancel --admin-comment` is one more AdminComment
        writer: an admin's reason for cancelling stays exactly as given,
        and our summary of the cancelled job arrives beside it."""
        if lt.slurm_version() < (25, 11):
            self.skipTest("scancel --admin-comment is new in Slurm 25.11")
        path = self.wd / "js-scancel.sh"
        # 2 iterations, then 120 s of 1 s barriers: alive until cancelled.
        path.write_text(f"#!/bin/bash\nsrun --mpi={ta.FAMILIES[self.fam][1]} {ta.PLUGIN} "
                        f"-N1 -n1 {self.prog} 2 1 120\n")
        shutil.chown(path, lt.TEST_USER)
        r = lt.as_user(["sbatch", "--parsable", "-o", str(self.wd / "js-scancel-%j.out"),
                        "-N1", "-n1", "-t", "5", str(path)], cwd=self.wd, check=True)
        job = int(r.stdout.strip().split(";")[0])
        self.addCleanup(lt.root, ["scancel", str(job)], check=False)
        t_end = time.monotonic() + 60
        while time.monotonic() < t_end and not lt.root(
                ["squeue", "-h", "-s", "-j", str(job), "-o", "%i"]).stdout.count(f"{job}.0"):
            time.sleep(0.3)
        reason = 'maintenance: "node n1" (ticket #42)'
        lt.root(["scancel", f"--admin-comment={reason}", str(job)])
        t_end = time.monotonic() + 150
        got = ("", "", "")
        while time.monotonic() < t_end:
            got = comments(str(job))
            if summary.find(got[1])[0] is not None:
                break
            time.sleep(0.5)
        self.assertIsNotNone(summary.find(got[1])[0], f"no summary: {got}")
        self.assertEqual(got[2], reason)
        self.assertEqual(summary.find(got[1])[0]["job_state"], "CANCELLED", got[1])

    def test_our_summary_leaves_the_admin_comment_to_jobstats(self) -> None:
        """Without jobstats: the AdminComment stays NULL in slurmdbd, so
        jobstats' backfill (admin_comment IS NULL) still picks the job."""
        job = self.submit(["-N1", "-n1", "-t", "5"], "js-none", 1, 1)
        t_end = time.monotonic() + 120
        while time.monotonic() < t_end and summary.find(comments(str(job))[1])[0] is None:
            time.sleep(0.5)
        _, system, admin = comments(str(job))
        self.assertIsNotNone(summary.find(system)[0], system)
        self.assertEqual(admin, "")
        cluster = lt.root(["scontrol", "show", "config"]).stdout
        name = [ln.split("=", 1)[1].strip() for ln in cluster.splitlines()
                if ln.startswith("ClusterName")][0]
        db = [ln.split("=", 1)[1].strip() for ln in
              (lt.LAB / "etc" / "slurmdbd.conf").read_text().splitlines()
              if ln.startswith("StorageLoc=")][0]
        r = lt.root(["mysql", "-N", "-B", db, "-e",
                     f"select admin_comment is null from `{name}_job_table` where id_job={job}"],
                    check=False)
        if r.returncode != 0:
            self.skipTest(f"no direct database access: {r.stderr.strip()[:200]}")
        self.assertEqual(r.stdout.split(), ["1"])


if __name__ == "__main__":
    unittest.main()
