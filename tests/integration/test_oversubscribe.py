# SPDX-License-Identifier: BSD-3-Clause
"""Another job's cores: a step never clocks down a core another job also
holds.  On a partition with
OverSubscribe=FORCE two jobs get the same cores of n1: the step of the second
(mpi-pstate on) keeps only the CPUs its cgroup allows and no other job's
cgroup does (spank/cgroup.c), so here none: no frequency write while it runs,
no agent (no SCHED_FIFO on the other job's CPUs), and its step record and the
slurmd log say why.  The same step alone on the same partition does clock
down: the check can fail.  The partition is made at run time and removed
after (tests/cluster/etc stays as it is); the lab's cgroup.conf has
ConstrainCores=no, so every job's cpuset is the whole node and any other
running job shares every CPU."""
from __future__ import annotations

import time
import unittest

import labtools as lt
import test_plugin as tp

NODE = "n1"
PART = "mpstovs"


def squeue_state(job: int) -> str:
    return lt.root(["squeue", "-h", "-j", str(job), "-o", "%T"], check=False).stdout.strip()


class OverSubscribeForce(tp.PluginCase):
    @classmethod
    def setUpClass(cls) -> None:
        super().setUpClass()
        lt.root(["scontrol", "delete", f"PartitionName={PART}"], check=False)
        lt.root(["scontrol", "create", f"PartitionName={PART}", f"Nodes={NODE}", "OverSubscribe=FORCE:2",
                 "State=UP", "MaxTime=10", "Default=NO"])
        cls.addClassCleanup(lt.root, ["scontrol", "delete", f"PartitionName={PART}"], check=False)

    def step(self, wd) -> tuple[int, str]:
        """Two ranks of the imbalanced program in one srun step on n1."""
        script = (f"{tp.MONO} start\nexport MPI_PSTATE_VERBOSE=1\n"
                  "srun --mpi=pmi2 ./wrap.sh ./imbalance.mpich 10 40\n"
                  f"{tp.MONO} end\n")
        job = lt.sbatch(["-p", PART, "-w", NODE, "-n2", "-t", "2", "--mpi-pstate"], script, wd)
        got = lt.wait_job(job, timeout=150)
        out = (wd / f"slurm-{job}.out").read_text()
        self.assertEqual(got, "COMPLETED", out)
        return job, out

    def test_other_jobs_cores_left_alone(self) -> None:
        wd = self.workdir("oversubscribe", ("imbalance.mpich",))
        # Alone on the partition: the step clocks a core down.
        job, out = self.step(wd)
        t0, t1 = tp.window(out)
        self.check_clocked_down(NODE, t0, t1, None)
        rec = tp.step_record(NODE, job, "0")
        self.assertEqual((rec["cgroup"]["shared"], rec["cgroup"]["first_other"]), ("", None), rec)
        self.assertNotEqual(rec["cpus"], "", rec)
        self.assert_nodes_restored((NODE,))

        # Another job on the same cores (mpi-pstate off: it changes nothing itself).
        other = lt.sbatch(["-p", PART, "-w", NODE, "-n2", "-t", "2", "--mpi-pstate=off", "-o", "/dev/null"],
                          "sleep 120\n", wd)
        try:
            t_end = time.monotonic() + 60
            while squeue_state(other) != "RUNNING" and time.monotonic() < t_end:
                time.sleep(0.2)
            self.assertEqual(squeue_state(other), "RUNNING")
            job, out = self.step(wd)
            self.assertEqual(squeue_state(other), "RUNNING")  # they did share the cores
        finally:
            lt.root(["scancel", str(other)], check=False)
            lt.wait_job(other, timeout=60)
        t0, t1 = tp.window(out)
        self.assertEqual(tp.writes(NODE, t0, t1), [])
        rec = tp.step_record(NODE, job, "0")
        self.assertEqual(rec["cgroup"]["shared"], rec["cgroup"]["cpus"], rec)
        self.assertGreaterEqual(rec["cgroup"]["other_jobs"], 1, rec)
        self.assertEqual(rec["cgroup"]["first_other"], f"job_{other}", rec)
        self.assertEqual((rec["cpus"], rec["domains"], rec["agent"]["status"]), ("", [], "none"), rec)
        log = (lt.LAB / "log" / f"slurmd-{NODE}.log").read_text(errors="replace")
        self.assertRegex(log, rf"job {job} step 0: CPUs none outside the step's cgroup \S+, CPUs "
                              rf"\S+ shared with 1 other job\(s\) \(job_{other}, \.\.\.\): their frequency "
                              rf"domains are left alone")
        self.assert_nodes_restored((NODE,))


if __name__ == "__main__":
    unittest.main()
