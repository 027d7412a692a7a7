# SPDX-License-Identifier: BSD-3-Clause
"""`mpi-pstate-exec --node-agent` outside Slurm: on a machine whose cpufreq
files root may write (node n2's fake hardware) it starts the node agent
around an mpirun, cores are clocked down during waits and every file is back
as before afterwards; a user who may not write cpufreq gets one message and a
measured-only run that touches nothing."""
from __future__ import annotations

import json
import unittest

import labtools as lt


class ExecNodeAgent(unittest.TestCase):
    def setUp(self) -> None:
        self.exec = lt.installed().exec
        lt.flavour("n2")
        self.wd = lt.workdir("exec-agent")
        self.exe = lt.give(lt.BUILD / "tests" / "mpi" / "imbalance.openmpi", self.wd)

    def tearDown(self) -> None:
        lt.flavour("n2")

    def test_root_run_clocks_down_and_restores(self) -> None:
        before, mark = lt.snapshot("n2"), len(lt.write_log("n2"))
        # The agent (root) writes its record only into a directory root owns:
        # the node's private /tmp, which is this path from outside.
        agent_dir = "/tmp/exec-agent-test"
        lt.node_exec("n2", f"rm -rf {agent_dir}")
        r = lt.node_exec("n2", f"{self.exec} --node-agent --threshold 1ms --agent-dir {agent_dir} -- "
                               f"mpirun.openmpi --allow-run-as-root --bind-to core -n 2 {self.exe} 8 20")
        self.assertIn("imbalance rank 1 of 2", r.stdout, r.stderr)
        self.assertNotIn("without the node agent", r.stderr)
        writes = [l.split(" ", 1)[1] for l in lt.write_log("n2")[mark:]]
        self.assertIn("policy1 scaling_setspeed=1200000", writes, writes)  # rank 1 waits: lowered
        self.assertFalse([w for w in writes if w.endswith("EINVAL")], writes)
        self.assertEqual(lt.snapshot("n2"), before)  # restored, whatever was lowered
        rec = json.loads((lt.LAB / "nodes" / "n2" / "tmp" / "exec-agent-test" / "agent.json").read_text())
        # Bound ranks, one core each: a core goes down while its own rank
        # waits.  Unbound (Open MPI 5's mpirun binds nothing with
        # --oversubscribe), every rank counts on every core and a core goes
        # down only while all ranks wait at once: nothing, on a busy machine.
        self.assertEqual(sorted(r["cpu"] for r in rec["ranks"]), [0, 1], rec["ranks"])
        self.assertGreater(sum(r.get("transitions", 0) for r in rec.get("ranks", [])), 0, rec)

    def test_user_without_cpufreq_access_runs_measured_only(self) -> None:
        before, mark = lt.snapshot("n2"), len(lt.write_log("n2"))
        r = lt.node_exec("n2", f"cd {self.wd} && runuser -u {lt.TEST_USER} -- {self.exec} --node-agent -- "
                               f"mpirun.openmpi --oversubscribe -n 2 {self.exe} 3 10")
        self.assertIn("imbalance rank 0 of 2", r.stdout, r.stderr)
        self.assertIn("running without the node agent (the cpufreq files are writable by root only)",
                      r.stderr)
        self.assertEqual(r.stderr.count("running without the node agent"), 1)
        self.assertEqual(lt.write_log("n2")[mark:], [])
        self.assertEqual(lt.snapshot("n2"), before)


if __name__ == "__main__":
    unittest.main()
