# SPDX-License-Identifier: BSD-3-Clause
"""Failing parts on the lab cluster, none of which may hold a job up or lose
its figures: slurmdbd down
while jobs end, a node "crash" (the
step's slurmstepd and agent killed, the node's Epilog runs after), a node's
slurmd restarted while a step runs, slurmctld restarted while a job is
COMPLETING (a node whose collect_dir is full, with the other faults that
must never drain a node: test_never_drain.py).  Every job must end
without being held by mpi-pstate, every summary must arrive (or say which
node is missing) with no admin action (no `mpi-pstate backfill`), and the
lab is left as found.

The outage's size comes from the environment, for the figure of
bench/epilog/RESULTS.md: MPI_PSTATE_FAULT_JOBS (default 6) jobs end while
slurmdbd is down, which stays down at least MPI_PSTATE_FAULT_OUTAGE_S
(default 20) seconds."""
import json
import os
import re
import signal
import sys
import time
import unittest
from pathlib import Path
from typing import Dict, List

import labtools as lt
import test_accounting as ta

sys.path.insert(0, str(lt.TOP / "epilog"))
from mpi_pstate.model import summary  # noqa: E402

JOBS = int(os.environ.get("MPI_PSTATE_FAULT_JOBS", "6"))
OUTAGE_S = float(os.environ.get("MPI_PSTATE_FAULT_OUTAGE_S", "20"))
HOOK_LOG = lt.LAB / "log" / "hooks-slurm.log"


def squeue_empty(jobs: List[int]) -> bool:
    r = lt.root(["squeue", "-h", "-j", ",".join(map(str, jobs)), "-o", "%i"], check=False)
    return not r.stdout.strip()


def queued_times(jobs: List[int], since: int) -> Dict[int, float]:
    """Seconds each job's EpilogSlurmctld took, from its own log line."""
    out: Dict[int, float] = {}
    text = HOOK_LOG.read_text(errors="replace")[since:] if HOOK_LOG.exists() else ""
    for m in re.finditer(r"mpi-pstate-epilog-slurmctld\[(\d+)\]: mpi-pstate: job \d+: queued "
                         r"in ([0-9.]+) s", text):
        if int(m.group(1)) in jobs:
            out[int(m.group(1))] = float(m.group(2))
    return out


def end_orphans(job: int) -> None:
    """The ranks of a step whose slurmstepd was killed: nobody is left to
    end them at the job's end (its time limit would, after their own hold),
    and while they run their job's cgroup still holds a process, so the next
    test's step would see another job on every CPU and clock nothing down."""
    for _ in range(50):
        pids = [int(p) for f in Path("/sys/fs/cgroup").glob(f"*/slurm*/uid_*/job_{job}/**/cgroup.procs")
                for p in f.read_text().split()]
        if not pids:
            return
        for pid in pids:
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass
        time.sleep(0.2)


class AccountingJobs:
    """Accounting's set-up (lab, plugin, hooks, MPI programs) and helpers,
    borrowed, not inherited (its tests would run twice); a mixin of the
    fault suites here and in test_never_drain.py."""
    setUpClass = classmethod(ta.Accounting.setUpClass.__func__)  # type: ignore[attr-defined]
    tearDownClass = classmethod(ta.Accounting.tearDownClass.__func__)  # type: ignore
    # its class methods rebound, so that cls is the borrowing class
    script = classmethod(ta.Accounting.script.__func__)  # type: ignore[attr-defined]
    family = classmethod(ta.Accounting.family.__func__)  # type: ignore[attr-defined]
    submit_as_user = classmethod(ta.Accounting.submit_as_user.__func__)  # type: ignore[attr-defined]
    submit = ta.Accounting.submit
    comments = ta.Accounting.comments
    comment = ta.Accounting.comment
    wait_summary = ta.Accounting.wait_summary
    wait_output = ta.Accounting.wait_output
    # the helpers that run a job of the upstream Open MPI fault once more
    output = ta.Accounting.output
    submit_finished = ta.Accounting.submit_finished
    started = ta.Accounting.started

    def assert_in_service(self, node: str = "n1", reason_too: bool = True) -> None:
        """node neither drained, down nor failed (nor, with reason_too,
        given a reason by Slurm or an admin)."""
        state = lt.node_state(node)
        for bad in ("drain", "down", "fail") + (("(",) if reason_too else ()):
            self.assertNotIn(bad, state, f"{node} is out of service: {state}")  # type: ignore


class Faults(AccountingJobs, unittest.TestCase):

    def stop_slurmdbd(self) -> None:
        pidf = lt.LAB / "run" / "slurmdbd.pid"
        pid = int(pidf.read_text())
        self.addCleanup(lt.lab, "start")  # whatever happens: the lab as found
        os.kill(pid, 15)
        t_end = time.monotonic() + 30
        while time.monotonic() < t_end and Path(f"/proc/{pid}").exists():
            time.sleep(0.2)
        self.assertFalse(Path(f"/proc/{pid}").exists(), "slurmdbd did not stop")
        r = lt.root(["sacct", "-n", "-X", "-j", "1"], check=False)
        self.assertNotEqual(r.returncode, 0, "sacct still answers: slurmdbd is not down")

    def test_slurmdbd_down_while_jobs_end(self) -> None:
        fam = "mpich" if "mpich" in self.progs else next(iter(self.progs))
        since = HOOK_LOG.stat().st_size if HOOK_LOG.exists() else 0
        self.stop_slurmdbd()
        t_down = time.monotonic()
        jobs = [self.submit(["-N1", "-n1", "-c1", "-t", "5"], self.script(fam, 1, 1, iters=3, ms=1),
                            f"dbdown{i}") for i in range(JOBS)]
        t_end = time.monotonic() + 120 + 10 * JOBS
        while time.monotonic() < t_end and not squeue_empty(jobs):
            time.sleep(0.5)
        # Every job left COMPLETING while slurmdbd was still down: nobody held it.
        self.assertTrue(squeue_empty(jobs), "jobs still queued or completing")
        times = queued_times(jobs, since)
        self.assertEqual(sorted(times), sorted(jobs), "an EpilogSlurmctld did not queue its job")
        left = OUTAGE_S - (time.monotonic() - t_down)
        if left > 0:
            time.sleep(left)
        outage = time.monotonic() - t_down
        lt.lab("start")  # slurmdbd back; nothing else done by hand
        t_back = time.monotonic()
        got: Dict[int, dict] = {}
        t_end = time.monotonic() + 180 + 2 * JOBS
        while time.monotonic() < t_end and len(got) < len(jobs):
            for j in jobs:
                if j not in got:
                    s, _ = summary.find(self.comment(j))
                    if s is not None:
                        got[j] = s
            time.sleep(1)
        self.assertEqual(sorted(got), sorted(jobs), "summaries missing after slurmdbd came back")
        for j, s in got.items():
            self.assertEqual((s["state"], s["ranks"]), ("complete", 1), (j, s))
        print(f"\n  slurmdbd down {outage:.0f} s while {len(jobs)} jobs ended: EpilogSlurmctld "
              f"max {max(times.values()):.2f} s, all {len(got)} summaries "
              f"{time.monotonic() - t_back:.0f} s after slurmdbd was back", file=sys.stderr)

    def test_node_crash_agent_and_stepd_killed(self) -> None:
        """The step's slurmstepd and agent killed (-9) mid-job on n1 while the
        cores are clocked down: the node Epilog's backstop puts every core
        back, and the summary is there.  The job is cancelled once both are
        dead, as its user would (its time limit would end it two minutes
        later, with the same Epilog: only slower)."""
        import test_plugin as tp
        fam = "mpich" if "mpich" in self.progs else next(iter(self.progs))
        before = tp.state_of(lt.snapshot("n1"))
        script = self.script(fam, 1, 2, iters=2, ms=1, hold=120).replace(
            ta.PLUGIN, "--mpi-pstate=on --mpi-pstate-threshold=1ms")
        job = self.submit(["-N1", "-w", "n1", "-n2", "--exclusive", "-t", "2"], script, "crash")
        job = self.started(job, "crash", "started")
        step = lt.LAB / "nodes" / "n1" / "run" / "steps" / f"{job}.0" / "plugin.json"
        t_end = time.monotonic() + 30
        while time.monotonic() < t_end and not step.exists():
            time.sleep(0.2)
        agent = json.loads(step.read_text())["agent"].get("pid")
        stepd = lt.root(["pgrep", "-f", rf"slurmstepd: \[{job}\.0\]"], check=False).stdout.split()
        self.assertTrue(stepd, "no slurmstepd of the step")
        lt.root(["kill", "-9", *stepd, *([str(agent)] if agent else [])], check=False)
        time.sleep(2)  # the kill lands first: nothing of ours restores before the Epilog
        lt.root(["scancel", str(job)], check=False)
        self.addCleanup(end_orphans, job)
        s = self.wait_summary(job, timeout=240)
        self.assertIn(s["state"], ("complete", "partial"), s)
        for _ in range(60):
            if tp.state_of(lt.snapshot("n1")) == before:
                break
            time.sleep(0.5)
        self.assertEqual(tp.state_of(lt.snapshot("n1")), before, "n1's cores not restored")

    def test_slurmd_restarted_mid_step(self) -> None:
        """n1's slurmd stopped and started again (in the node's namespaces, as
        after a crash or an upgrade) while a step runs with a core clocked
        down: slurmstepd, the agent and the ranks live on, the job completes,
        its summary is complete and every core is back as it was."""
        import test_plugin as tp
        fam = "mpich" if "mpich" in self.progs else next(iter(self.progs))
        before = tp.state_of(lt.snapshot("n1"))
        # rank 1 waits in MPI_Barrier while rank 0 sleeps 8 s: lowered.
        script = self.script(fam, 1, 2, iters=2, ms=1, hold=8).replace(
            ta.PLUGIN, "--mpi-pstate=on --mpi-pstate-threshold=1ms")
        job = self.submit(["-N1", "-w", "n1", "-n2", "--exclusive", "-t", "3"], script, "slurmdre")
        job = self.started(job, "slurmdre", "started")
        self.addCleanup(lt.lab, "start")  # whatever happens: the lab as found
        lt.lab("restart-daemon", "slurmd", "n1", timeout=120)
        s = self.wait_summary(job, timeout=240)
        self.assertEqual(lt.root(["sacct", "-n", "-X", "-P", "-j", str(job), "-o", "State"]
                                 ).stdout.split(), ["COMPLETED"])
        self.assertEqual((s["state"], s["ranks"]), ("complete", 2), s)
        self.assertGreater(s.get("down_s") or 0, 0, f"no core was clocked down: {s}")
        for _ in range(60):
            if tp.state_of(lt.snapshot("n1")) == before:
                break
            time.sleep(0.5)
        self.assertEqual(tp.state_of(lt.snapshot("n1")), before, "n1's cores not restored")
        self.assertNotIn("drain", lt.root(["sinfo", "-h", "-n", "n1", "-o", "%T"]).stdout)

    def test_slurmctld_restarted_while_completing(self) -> None:
        """A job held in COMPLETING by a slow node Epilog (a hook of the
        lab's that waits for a file) when slurmctld is stopped and started
        again: once the Epilog ends the job leaves COMPLETING, nothing of
        ours held it, its summary arrives with no admin action, and every
        core is back."""
        import test_plugin as tp
        fam = "mpich" if "mpich" in self.progs else next(iter(self.progs))
        before = tp.state_of(lt.snapshot("n1"))
        flag = lt.LAB / "run" / "hold-epilog"
        hook = lt.LAB / "etc" / "epilog.d" / "00-hold-for-test"
        # Bounded: whatever the test does, the hook lets go after 90 s.
        hook.write_text("#!/bin/sh\nfor i in $(seq 180); do [ -e %s ] || exit 0; sleep 0.5; done\n"
                        % flag)
        hook.chmod(0o755)
        flag.touch()
        self.addCleanup(lambda: hook.unlink(missing_ok=True))
        self.addCleanup(lambda: flag.unlink(missing_ok=True))
        self.addCleanup(lt.lab, "start")
        job = self.submit(["-N1", "-w", "n1", "-n2", "-t", "3"],
                          self.script(fam, 1, 2, iters=20, ms=5), "ctldre")
        t_end = time.monotonic() + 120
        state = ""
        while time.monotonic() < t_end:
            state = lt.root(["squeue", "-h", "-j", str(job), "-o", "%T"], check=False).stdout.strip()
            if state == "COMPLETING":
                break
            time.sleep(0.2)
        self.assertEqual(state, "COMPLETING", "the job never sat in COMPLETING")
        lt.lab("restart-daemon", "slurmctld", timeout=120)
        self.assertEqual(lt.root(["squeue", "-h", "-j", str(job), "-o", "%T"],
                                 check=False).stdout.strip(), "COMPLETING")
        flag.unlink()
        t_end = time.monotonic() + 120
        while time.monotonic() < t_end and not squeue_empty([job]):
            time.sleep(0.5)
        self.assertTrue(squeue_empty([job]), "the job did not leave COMPLETING")
        s = self.wait_summary(job, timeout=180)
        self.assertEqual((s["state"], s["ranks"]), ("complete", 2), s)
        for _ in range(60):
            if tp.state_of(lt.snapshot("n1")) == before:
                break
            time.sleep(0.5)
        self.assertEqual(tp.state_of(lt.snapshot("n1")), before, "n1's cores not restored")
        self.assertNotIn("drain", lt.root(["sinfo", "-h", "-n", "n1", "-o", "%T"]).stdout)


if __name__ == "__main__":
    unittest.main()
