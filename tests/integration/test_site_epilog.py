# SPDX-License-Identifier: BSD-3-Clause
"""Our node Epilog beside the site's own, in the three ways docs/admin.md
("Beside the site's own Epilog") gives: a wrapper that runs every part
(the lab's own Epilog, tests/cluster/etc/hookdir.sh), Slurm's glob with
ours named to run first, and, on Slurm 23.02 and later, two Epilog= lines.

Each time the site's script fails or runs long.  Ours delivers n1's record
every time (the job's summary is whole), and a node is drained only for
the site script's own failure: with a site script that only runs long,
nothing drains; with one that fails, the reason is the site's and our
part exited 0."""
from __future__ import annotations

import contextlib
import json
import re
import time
import unittest
from pathlib import Path
from typing import Iterator

import labtools as lt
import test_accounting as ta
import test_faults as ft

ON = "--mpi-pstate=on --mpi-pstate-threshold=1ms"
SLURM_CONF = lt.LAB / "etc" / "slurm.conf"
HOOKS_LOG = lt.LAB / "log" / "hooks-root.log"


class SiteEpilog(ft.AccountingJobs, unittest.TestCase):

    def setUp(self) -> None:
        super().setUp()
        self.since = HOOKS_LOG.stat().st_size if HOOKS_LOG.exists() else 0
        self.addCleanup(self.resume, "n1")

    @staticmethod
    def resume(node: str) -> None:
        if "drain" in lt.node_state(node):
            lt.root(["scontrol", "update", f"nodename={node}", "state=resume"], check=False)

    def site_script(self, path: Path, body: str) -> None:
        path.write_text(f"#!/bin/sh\n# a site's own Epilog, for the test\n{body}\n")
        path.chmod(0o755)
        self.addCleanup(path.unlink, missing_ok=True)

    def job_on_n1(self, name: str) -> int:
        script = self.script(self.family(), 1, 2, iters=3, ms=1).replace(ta.PLUGIN, ON)
        job = self.submit(["-N1", "-w", "n1", "-n2", "-t", "5"], script, name)
        self.assertEqual(lt.wait_job(job, 240), "COMPLETED", lt.daemon_log_tail(10))
        return job

    def assert_delivered(self, job: int) -> None:
        rec = Path(self.cfg.collect_dir) / str(job) / "node.n1.json"
        self.assertEqual(json.loads(rec.read_text())["job"], job)
        s = self.wait_summary(job)
        self.assertEqual((s["ranks"], s.get("missing")), (2, None), s)

    def assert_drained_by_site(self) -> None:
        t_end = time.monotonic() + 60
        while time.monotonic() < t_end and "drain" not in lt.node_state("n1"):
            time.sleep(0.5)
        self.assertIn("drain", lt.node_state("n1"), "n1 not drained by the site's failing Epilog")

    def hooks_log(self) -> str:
        return HOOKS_LOG.read_text(errors="replace")[self.since:] if HOOKS_LOG.exists() else ""

    @contextlib.contextmanager
    def epilog_lines(self, *lines: str) -> Iterator[None]:
        """slurm.conf with the lab's Epilog= line replaced by lines, every
        daemon restarted; put back and restarted afterwards."""
        saved = SLURM_CONF.read_text()
        text = re.sub(r"(?m)^Epilog=.*\n", "".join(f"{ln}\n" for ln in lines), saved, count=1)
        self.assertNotEqual(text, saved)
        lt.write_config(SLURM_CONF, text)
        try:
            lt.lab("restart-slurm", timeout=300)
            yield
        finally:
            self.resume("n1")  # the restart waits for every node to be idle
            lt.write_config(SLURM_CONF, saved)
            lt.lab("restart-slurm", timeout=300)

    def test_a_wrapper_running_every_part(self) -> None:
        """The lab's Epilog runs each part of epilog.d whatever the others
        do: a failing site part before ours, a slow one after."""
        d = lt.LAB / "etc" / "epilog.d"
        self.site_script(d / "10-site-fails", "sleep 2\nexit 1")
        job = self.job_on_n1("wrapfail")
        self.assert_delivered(job)
        self.assert_drained_by_site()
        log = self.hooks_log()
        self.assertRegex(log, rf"{job} .*10-site-fails exited 1")
        self.assertNotRegex(log, rf"{job} .*50-mpi-pstate exited")
        self.resume("n1")
        (d / "10-site-fails").unlink()
        self.site_script(d / "60-site-slow", "sleep 8\nexit 0")
        job = self.job_on_n1("wrapslow")
        self.assert_delivered(job)
        self.assert_in_service(reason_too=False)

    def ours(self) -> str:
        return str(Path(lt.installed_dirs()["sbindir"]) / "mpi-pstate-epilog")

    def test_slurm_glob_with_ours_first(self) -> None:
        """Epilog=DIR/*: Slurm runs the matches in reverse name order and
        stops at the first failure; zz-mpi-pstate runs first."""
        d = lt.LAB / "etc" / "site-epilog.d"
        d.mkdir(exist_ok=True)
        link = d / "zz-mpi-pstate"
        link.unlink(missing_ok=True)
        link.symlink_to(self.ours())
        self.addCleanup(link.unlink, missing_ok=True)
        self.site_script(d / "site-fails", "sleep 2\nexit 1")
        with self.epilog_lines(f"Epilog={d}/*"):
            job = self.job_on_n1("globfail")
            self.assert_delivered(job)
            self.assert_drained_by_site()

    def test_two_epilog_lines(self) -> None:
        """Slurm 23.02 and later: several Epilog= lines, run in order."""
        if lt.slurm_version() < (23, 2):
            self.skipTest("one Epilog= line only before Slurm 23.02 (use a glob)")
        site = lt.LAB / "etc" / "epilog.site"
        self.site_script(site, "sleep 2\nexit 1")
        with self.epilog_lines(f"Epilog={self.ours()}", f"Epilog={site}"):
            job = self.job_on_n1("linesfail")
            self.assert_delivered(job)
            self.assert_drained_by_site()


if __name__ == "__main__":
    unittest.main()
