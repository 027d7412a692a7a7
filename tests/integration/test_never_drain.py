# SPDX-License-Identifier: BSD-3-Clause
"""A fault of mpi-pstate's own never takes a node out of service, on every
Slurm release the lab runs (22.05 on the host, 24.11 and 26.05 in
tests/cluster/debroot's roots: make check-24, make check-26).  Slurm 25.05
and later count every non-zero SPANK return as an error, drain the node on a
failed remote slurm_spank_init (unless the plugin sets
slurm_spank_init_failure_mode) and on a SPANK job epilog that times out; an
Epilog that fails or times out drains a node on every release.

For each fault, a job of the test user asks for mpi-pstate on n1: it
completes, n1 stays in service (no drain, no down, no reason set), and what
went wrong is in the step record (the plugin's plugin.json, kept in the node
record n1's Epilog publishes).  A bad user option, on the other hand, still
refuses the submission, naming the option and the value."""
from __future__ import annotations

import json
import shutil
import time
import unittest
from pathlib import Path
from typing import Any

import labtools as lt
import test_accounting as ta
import test_faults as ft

ON = "--mpi-pstate=on --mpi-pstate-threshold=1ms"


class NeverDrain(ft.AccountingJobs, unittest.TestCase):

    def run_on_n1(self, name: str, timeout: float = 180) -> int:
        """A two-rank job on n1 with mpi-pstate on; returns its id once it
        has left the queue (Epilog done).  It must have completed."""
        script = self.script(self.family(), 1, 2, iters=3, ms=1).replace(ta.PLUGIN, ON)
        job = self.submit(["-N1", "-w", "n1", "-n2", "-t", "5"], script, name)
        state = lt.wait_job(job, timeout)
        self.assertEqual(state, "COMPLETED", f"job {job}\n{lt.daemon_log_tail(10)}")
        return job

    def step_record(self, job: int, node: str = "n1", step: str = "0",
                    timeout: float = 60) -> dict[str, Any]:
        """The plugin's record of the step on the node, from the node record
        the node's Epilog published (the step directory is gone by then)."""
        path = Path(self.cfg.collect_dir) / str(job) / f"node.{node}.json"
        t_end = time.monotonic() + timeout
        while time.monotonic() < t_end and not path.exists():
            time.sleep(0.5)
        rec = json.loads(path.read_text())
        steps = [s for s in rec.get("steps", []) if s.get("step") == step]
        self.assertTrue(steps, f"no step {step} in {path}: {rec.get('steps')}")
        plugin = steps[0].get("plugin")
        self.assertIsInstance(plugin, dict, f"no plugin record for step {step}: {steps[0]}")
        return plugin

    def test_agent_missing(self) -> None:
        with lt.plugstack_args("agent=/usr/sbin/mpi-pstate-agent-not-installed"):
            job = self.run_on_n1("noagent")
        self.assert_in_service()
        rec = self.step_record(job)
        self.assertEqual(rec["agent"]["status"], "absent", rec)
        self.assertEqual(self.wait_summary(job)["ranks"], 2)

    def test_agent_not_roots(self) -> None:
        """The agent runs as root: one the job's user could have replaced
        is never started."""
        fake = self.wd / "mpi-pstate-agent"
        shutil.copy2(lt.installed().agent, fake)
        shutil.chown(fake, lt.TEST_USER)
        with lt.plugstack_args(f"agent={fake}"):
            job = self.run_on_n1("useragent")
        self.assert_in_service()
        rec = self.step_record(job)
        self.assertEqual(rec["agent"], {"status": "failed", "pid": None}, rec)

    def test_bad_plugstack_keys(self) -> None:
        """Unknown keys and bad values are logged and ignored: the job is
        measured with the other settings."""
        with lt.plugstack_args("no_such_key=1", "freq_min=banana", "threshold_min=-3"):
            job = self.run_on_n1("badkeys")
        self.assert_in_service()
        self.assertEqual(self.step_record(job)["mode"], "on")
        self.assertEqual(self.wait_summary(job)["ranks"], 2)
        log = (lt.LAB / "log" / "slurmd-n1.log").read_text(errors="replace")
        self.assertIn("no_such_key", log)

    def test_bad_user_option_still_refused_at_submit(self) -> None:
        r = lt.as_user(["sbatch", "--mpi-pstate=banana", "--wrap", "true"])
        self.assertNotEqual(r.returncode, 0, r.stdout)
        self.assertIn("mpi-pstate", r.stderr)
        self.assertIn("banana", r.stderr)
        self.assert_in_service()
        self.assert_in_service("n2")

    def test_sysfs_unreadable(self) -> None:
        """Every cpufreq file of n1 fails with EIO: nothing is set, saved or
        restored, the record says no domain was set."""
        lt.flavour("n1", unreadable=True)
        self.addCleanup(lt.flavour, "n1")
        job = self.run_on_n1("nosysfs")
        self.assert_in_service()
        rec = self.step_record(job)
        self.assertIsNone(rec["mechanism"], rec)
        self.assertFalse([d for d in rec["domains"] if d["status"] == "set"], rec)

    def test_collect_dir_full(self) -> None:
        """n1's collect_dir is a full 64 KiB tmpfs (its own mount namespace):
        its Epilog fails to publish, logs it, exits 0 (the node is not
        drained); the summary says n1 is missing; the lab is restored."""
        rec_dir = self.cfg.collect_dir
        lt.node_exec("n1", f"mount -t tmpfs -o size=64k,mode=755 tmpfs {rec_dir} && "
                     f"chown slurm: {rec_dir} && "
                     f"dd if=/dev/zero of={rec_dir}/fill bs=4k count=1000 2>/dev/null; true")
        self.addCleanup(lt.node_exec, "n1", f"umount {rec_dir}", check=False)
        since = (lt.LAB / "log" / "hooks-root.log").stat().st_size
        job = self.submit(["-N2", "--ntasks-per-node=1", "-t", "5"],
                          self.script(self.family(), 2, 2, iters=3, ms=1), "enospc")
        # n1's record never comes: its queue entry would wait a day for it
        queued = Path(rec_dir) / ".queue" / f"{job}.json"
        self.addCleanup(lambda: queued.unlink(missing_ok=True))
        s = self.wait_summary(job, timeout=180)
        self.assertEqual((s["state"], s["missing"], s["ranks"]), ("partial", "n1", 1), s)
        self.assert_in_service()
        log = (lt.LAB / "log" / "hooks-root.log").read_text(errors="replace")[since:]
        self.assertRegex(log, rf"mpi-pstate-epilog\[{job}\].*(No space left|failed)")
        lt.node_exec("n1", f"umount {rec_dir}")
        out = lt.node_exec("n1", f"ls {rec_dir}/{job} 2>&1; true").stdout
        self.assertNotIn("node.n1.json", out)

    def test_slow_node_epilog(self) -> None:
        """Every cpufreq access on n1 takes 0.2 s (the plugin's save, set and
        restore, the agent's, the node Epilog's restore backstop and audit)
        under PrologEpilogTimeout=30: the job's SPANK job epilog and the node
        Epilog end in time, the node stays in service."""
        lt.flavour("n1", delay_s=0.2)
        self.addCleanup(lt.flavour, "n1")
        with lt.slurm_conf_lines("PrologEpilogTimeout=30"):
            job = self.run_on_n1("slowepilog", timeout=300)
            self.assert_in_service()
        rec = self.step_record(job)
        self.assertEqual(rec["restore"]["state"], "done", rec)

    def test_contain_spank(self) -> None:
        """SlurmdParameters=contain_spank (Slurm 24.05 and later) runs the
        user and task hooks inside the job's namespace: the job is served
        as without it."""
        if lt.slurm_version() < (24, 5):
            self.skipTest("SlurmdParameters=contain_spank is new in Slurm 24.05")
        with lt.slurm_conf_lines("SlurmdParameters=contain_spank"):
            job = self.run_on_n1("contain")
            self.assert_in_service()
        rec = self.step_record(job)
        self.assertEqual(rec["mode"], "on", rec)


if __name__ == "__main__":
    unittest.main()
