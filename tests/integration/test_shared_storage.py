# SPDX-License-Identifier: BSD-3-Clause
"""collect_dir as sites mount it: a share at a parent directory, here
$LAB/share (collect_dir=$LAB/share/records, SlurmUser's, as docs/admin.md
has the admin make it).  On n1 alone (its own mount namespace) the share
fails as a site's does:

- hung: a FUSE file system (tests/cluster/hangfs.py) in front of it blocks
  every call, as a hard NFS mount whose server is gone;
- not mounted: an empty tmpfs over $LAB/share, so collect_dir is missing.

In both, a two-node job (n2 publishes as usual) completes, n1 stays in
service, n1's Epilog exits in time and keeps its record in the node's
pending directory, writes nothing in n1's view of the share, and the job's
summary is written without n1.  Once the share is back, the next job's
Epilog on n1 delivers the record (as SlurmUser) and the summary is
rewritten whole: nothing is lost."""
from __future__ import annotations

import json
import os
import pwd
import shutil
import time
import unittest
from pathlib import Path
from typing import Any

import labtools as lt
import test_accounting as ta
import test_faults as ft

SHARE = lt.LAB / "share"
COLLECT = SHARE / "records"
HANGFS = lt.TOP / "tests" / "cluster" / "hangfs.py"
ON = "--mpi-pstate=on --mpi-pstate-threshold=1ms"


class SharedStorage(ft.AccountingJobs, unittest.TestCase):

    def setUp(self) -> None:
        super().setUp()
        slurm = pwd.getpwnam("slurm")
        COLLECT.mkdir(parents=True, exist_ok=True)
        os.chmod(SHARE, 0o755)
        os.chown(COLLECT, slurm.pw_uid, slurm.pw_gid)
        os.chmod(COLLECT, 0o755)
        self.slurm_uid = slurm.pw_uid
        ctx = lt.plugstack_args(f"collect_dir={COLLECT}", "publish_timeout=2s")
        ctx.__enter__()
        self.addCleanup(ctx.__exit__, None, None, None)
        self.since = self.hooks_log_size()

    @staticmethod
    def hooks_log_size() -> int:
        p = lt.LAB / "log" / "hooks-root.log"
        return p.stat().st_size if p.exists() else 0

    def hooks_log(self) -> str:
        p = lt.LAB / "log" / "hooks-root.log"
        return p.read_text(errors="replace")[self.since:] if p.exists() else ""

    def pending(self) -> list[str]:
        d = lt.LAB / "nodes" / "n1" / "run" / "pending"
        return sorted(p.name for p in d.iterdir()) if d.exists() else []

    def two_node_job(self, name: str) -> int:
        script = self.script(self.family(), 2, 2, iters=3, ms=1).replace(ta.PLUGIN, ON)
        job = self.submit(["-N2", "--ntasks-per-node=1", "-t", "5"], script, name)
        self.addCleanup(lambda: (COLLECT / ".queue" / f"{job}.json").unlink(missing_ok=True))
        state = lt.wait_job(job, 240)
        self.assertEqual(state, "COMPLETED", f"job {job}\n{lt.daemon_log_tail(10)}")
        return job

    def summary_of(self, job: int, whole: bool, timeout: float = 180) -> dict[str, Any]:
        """The job's summary once it is there (whole: once no node is
        missing from it)."""
        t_end = time.monotonic() + timeout
        s: dict[str, Any] | None = None
        while time.monotonic() < t_end:
            s, _ = ta.summary.find(self.comment(job))
            if s is not None and (not whole or not s.get("missing")):
                return s
            time.sleep(1)
        raise AssertionError(f"job {job}: summary {s} (whole={whole})\n"
                             f"{lt.daemon_log_tail(10)}")

    def share_fails_then_returns(self, name: str, why: str) -> None:
        job = self.two_node_job(name)
        self.assert_in_service()
        self.assertIn(f"{job}.n1.json", self.pending(), self.hooks_log())
        self.assertRegex(self.hooks_log(), rf"mpi-pstate-epilog\[{job}\].*{why}")
        self.assertIn(f"record of job {job} kept for a later pass", self.hooks_log())
        self.assertFalse((COLLECT / str(job) / "node.n1.json").exists())
        self.assertTrue((COLLECT / str(job) / "node.n2.json").exists())
        s = self.summary_of(job, whole=False)
        self.assertEqual((s["missing"], s["ranks"]), ("n1", 1), s)
        self.restore_share()
        # the next job's Epilog on n1 delivers the record, as SlurmUser
        later = self.submit(["-N1", "-w", "n1", "-t", "2"], "true\n", f"{name}-next")
        self.assertEqual(lt.wait_job(later, 180), "COMPLETED")
        self.assertNotIn(f"{job}.n1.json", self.pending(), self.hooks_log())
        rec = COLLECT / str(job) / "node.n1.json"
        self.assertEqual(rec.stat().st_uid, self.slurm_uid)
        self.assertEqual(json.loads(rec.read_text())["job"], job)
        s = self.summary_of(job, whole=True)
        self.assertEqual(s["ranks"], 2, s)
        self.assert_in_service()

    def test_a_hung_share(self) -> None:
        backing = lt.LAB / "nodes" / "n1" / "share-backing"
        flag = lt.LAB / "nodes" / "n1" / "share-hangs"
        backing.mkdir(exist_ok=True)
        flag.write_text("")
        log = lt.LAB / "log" / "hangfs-n1.log"
        lt.node_exec("n1", f"mount --bind {SHARE} {backing}")
        # setsid -f: the server holds none of node_exec's output pipes
        lt.node_exec("n1", f"setsid -f /usr/bin/python3 {HANGFS} {backing} {SHARE} {flag} "
                     f">>{log} 2>&1 </dev/null; "
                     f"for i in $(seq 100); do grep -q ' {SHARE} fuse' /proc/self/mounts && "
                     "exit 0; sleep 0.1; done; exit 1")
        self.addCleanup(self.unhang, backing, flag)
        self.restore_share = lambda: flag.unlink(missing_ok=True)
        self.share_fails_then_returns("hung", "no answer in")

    def unhang(self, backing: Path, flag: Path) -> None:
        flag.unlink(missing_ok=True)
        lt.node_exec("n1", f"umount -l {SHARE}; umount -l {backing}; "
                     f"pkill -f '{HANGFS} {backing}'; true", check=False)

    def test_a_share_not_mounted(self) -> None:
        lt.node_exec("n1", f"mount -t tmpfs -o size=1m,mode=755 tmpfs {SHARE}")
        self.addCleanup(lt.node_exec, "n1", f"umount {SHARE}", check=False)

        def back() -> None:
            # nothing was made in n1's empty view of the share
            self.assertEqual(lt.node_exec("n1", f"ls -A {SHARE}").stdout, "")
            lt.node_exec("n1", f"umount {SHARE}")

        self.restore_share = back
        self.share_fails_then_returns("unmounted", "does not exist.*mounted")

    def test_a_one_node_job_whose_record_waits(self) -> None:
        """Every record of the job waits (one node, share not mounted): the
        plugin marked the job at submission, so the controller keeps it
        apart, waiting, instead of taking it for a job without mpi-pstate;
        its summary comes once the record does."""
        lt.node_exec("n1", f"mount -t tmpfs -o size=1m,mode=755 tmpfs {SHARE}")
        self.addCleanup(lt.node_exec, "n1", f"umount {SHARE}", check=False)
        script = self.script(self.family(), 1, 2, iters=3, ms=1).replace(ta.PLUGIN, ON)
        # on sbatch's line: the submission is what marks the job (an option
        # given to the job's srun steps alone comes too late for that)
        job = self.submit(["-N1", "-w", "n1", "-n2", "-t", "5", *ON.split()], script,
                          "alllate")
        self.addCleanup(lambda: (COLLECT / ".queue" / "late" / f"{job}.json")
                        .unlink(missing_ok=True))
        self.assertEqual(lt.wait_job(job, 240), "COMPLETED", lt.daemon_log_tail(10))
        self.assertIn(f"{job}.n1.json", self.pending(), self.hooks_log())
        queued = COLLECT / ".queue" / f"{job}.json"
        t_end = time.monotonic() + 240
        while time.monotonic() < t_end and queued.exists():
            time.sleep(1)  # the flusher's pass after its wait for the records
        self.assertFalse(queued.exists(), "the flusher never looked at the job")
        self.assertTrue((COLLECT / ".queue" / "late" / f"{job}.json").exists(),
                        "dropped as a job without mpi-pstate")
        lt.node_exec("n1", f"umount {SHARE}")
        later = self.submit(["-N1", "-w", "n1", "-t", "2"], "true\n", "alllate-next")
        self.assertEqual(lt.wait_job(later, 180), "COMPLETED")
        s = self.summary_of(job, whole=True)
        self.assertEqual(s["ranks"], 2, s)


if __name__ == "__main__":
    unittest.main()
