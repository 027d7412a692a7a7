# SPDX-License-Identifier: BSD-3-Clause
"""The per-step agent is not root while the job runs (docs/security.md).

A two-rank job on n1 holds rank 1 in MPI_Barrier while rank 0 sleeps, so a
core is clocked down.  While it runs, the agent's /proc/PID/status shows no
0 among its real, effective, saved and file-system uids and gids, no
supplementary group and no capability; its record says whom it ran as.
Afterwards the job's summary has time clocked down, every core of n1 is as
it was, and the step's restore records are gone: root applied them at the
step's end.  Run on every release the lab has (make check-24, check-26)."""
from __future__ import annotations

import json
import time
import unittest
from pathlib import Path

import labtools as lt
import test_accounting as ta
import test_faults as ft

ON = "--mpi-pstate=on --mpi-pstate-threshold=1ms"


def status_fields(pid: int) -> dict[str, str]:
    out: dict[str, str] = {}
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        k, _, v = line.partition(":")
        out[k] = v.strip()
    return out


class AgentNotRoot(ft.AccountingJobs, unittest.TestCase):

    def agent_pid(self, job: int) -> int:
        step = lt.LAB / "nodes" / "n1" / "run" / "steps" / f"{job}.0" / "plugin.json"
        t_end = time.monotonic() + 60
        while time.monotonic() < t_end:
            if step.exists():
                pid = json.loads(step.read_text())["agent"].get("pid")
                if pid:
                    return int(pid)
            time.sleep(0.2)
        self.fail(f"no agent pid in {step}")

    def test_agent_runs_without_uid_0_and_the_job_is_clocked_down_and_restored(self) -> None:
        import test_plugin as tp
        fam = "mpich" if "mpich" in self.progs else next(iter(self.progs))
        before = tp.state_of(lt.snapshot("n1"))
        script = self.script(fam, 1, 2, iters=2, ms=1, hold=6).replace(ta.PLUGIN, ON)
        job = self.submit(["-N1", "-w", "n1", "-n2", "--exclusive", "-t", "3"], script, "privsep")
        job = self.started(job, "privsep", "started")
        pid = self.agent_pid(job)
        st = status_fields(pid)
        self.assertIn("mpi-pstate-agen", st["Name"])
        uids, gids = st["Uid"].split(), st["Gid"].split()
        self.assertEqual(len(uids), 4, st["Uid"])
        self.assertNotIn("0", uids, f"agent {pid} has uid 0: {st['Uid']}")
        self.assertNotIn("0", gids, f"agent {pid} has gid 0: {st['Gid']}")
        self.assertEqual(len(set(uids)), 1, st["Uid"])
        self.assertEqual(st.get("Groups", ""), "", "supplementary groups kept")
        for cap in ("CapEff", "CapPrm", "CapInh", "CapBnd", "CapAmb"):
            self.assertEqual(int(st[cap], 16), 0, f"{cap} {st[cap]}")
        self.assertEqual(st["NoNewPrivs"], "1")
        s = self.wait_summary(job, timeout=240)
        self.assertEqual((s["state"], s["ranks"]), ("complete", 2), s)
        self.assertGreater(s.get("down_s") or 0, 0, f"no core was clocked down: {s}")
        for _ in range(60):
            if tp.state_of(lt.snapshot("n1")) == before:
                break
            time.sleep(0.5)
        self.assertEqual(tp.state_of(lt.snapshot("n1")), before, "n1's cores not restored")
        restore = lt.LAB / "nodes" / "n1" / "run" / "restore"
        left = [p.name for p in restore.iterdir()] if restore.exists() else []
        self.assertEqual(left, [], "restore records left after the step")
        rec = Path(self.cfg.collect_dir) / str(job) / "node.n1.json"
        agents = [st.get("agent") or {} for st in json.loads(rec.read_text()).get("steps", [])]
        hard = [a.get("hardening") for a in agents if a.get("hardening")]
        if hard:  # the node record keeps the agent's hardening where it embeds the record
            self.assertEqual(hard[0]["uid"], int(uids[0]), hard[0])


if __name__ == "__main__":
    unittest.main()
