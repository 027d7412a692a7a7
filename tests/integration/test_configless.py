# SPDX-License-Identifier: BSD-3-Clause
"""Configless Slurm (SlurmctldParameters=enable_configless, slurmd
--conf-server): node n2 keeps no Slurm configuration of its own and gets
slurm.conf and plugstack.conf from slurmctld.  What docs/admin.md says holds:
slurmctld ships plugstack.conf (the one beside slurm.conf) but not the files
it includes, so the plugin line must be in plugstack.conf itself; with it
there, a job on the configless node is clocked down and accounted like any
other, and the node epilog finds its settings in the conf-cache."""
from __future__ import annotations

import json
import re
import unittest
from pathlib import Path

import labtools as lt

NODE = "n2"
ETC = lt.LAB / "etc"
PLUGSTACK = ETC / "plugstack.conf"
DROPIN = ETC / "plugstack.conf.d" / "mpi-pstate.conf"


def reload_plugstack() -> None:
    """Make slurmctld read plugstack.conf again (it ships what it read at start
    or at reconfigure) the way an admin would: restart the Slurm daemons.  Not
    `scontrol reconfigure`: Slurm 24.11 re-executes slurmctld there, and
    24.11.5 (Debian 13) died with SIGSEGV in that re-exec in 3 runs of 3 (the
    faulting address in no mapped object; slurmctld never loads mpi-pstate)."""
    lt.lab("restart-slurm")


def plugin_line() -> str:
    lines = [ln for ln in DROPIN.read_text().splitlines() if ln.startswith("optional ")]
    assert len(lines) == 1, DROPIN.read_text()
    return lines[0]


def job_on_node(name: str, summary: bool = True) -> tuple[int, str, str]:
    """summary: wait (bounded) for the summary (lt.summary_comment)."""
    wd = lt.workdir(f"configless-{name}")
    fam, mpi = lt.srun_family()
    lt.give(lt.BUILD / "tests" / "mpi" / f"imbalance.{fam}", wd)
    job = lt.sbatch(["-w", NODE, "-N", "1", "-n", "2", "-J", f"configless-{name}", "--mpi-pstate"],
                    f"srun --mpi={mpi} ./imbalance.{fam} 4 20\n", wd)
    state = lt.wait_job(job)
    return job, state, lt.summary_comment(job, timeout=60 if summary else 0)


class Configless(unittest.TestCase):
    @classmethod
    def setUpClass(cls) -> None:
        lt.installed()
        cls.saved = PLUGSTACK.read_text()

    @classmethod
    def tearDownClass(cls) -> None:
        lt.write_config(PLUGSTACK, cls.saved)
        lt.lab("configless", NODE, "off")
        reload_plugstack()

    def conf_cache(self) -> Path:
        return lt.LAB / "state" / f"d-{NODE}" / "conf-cache"

    def test_line_in_plugstack_reaches_the_node(self) -> None:
        line = plugin_line()
        # The line itself in plugstack.conf (the include stays: the drop-in is
        # found first by everything that reads the include, same line twice is
        # not loaded twice by the nodes that see both -- so take it out).
        lt.write_config(PLUGSTACK, line + "\n")
        try:
            reload_plugstack()
            lt.lab("configless", NODE, "on")
            shipped = (self.conf_cache() / "plugstack.conf").read_text()
            self.assertIn(line, shipped)
            job, state, comment = job_on_node("inline")
            self.assertEqual(state, "COMPLETED")
            m = re.match(r"^mpi-pstate/\d+:(\{.*\})$", comment)
            self.assertIsNotNone(m, comment)
            summary = json.loads(m.group(1))
            # n2's own record, from a step the plugin served there.
            self.assertEqual((summary["state"], summary["nodes"], summary["steps"]), ("complete", 1, 1), comment)
            self.assertEqual(summary["ranks"], 2, comment)
        finally:
            lt.write_config(PLUGSTACK, self.saved)

    def test_included_line_does_not_reach_the_node(self) -> None:
        self.assertIn("include", PLUGSTACK.read_text())
        reload_plugstack()
        lt.lab("configless", NODE, "on")
        shipped = (self.conf_cache() / "plugstack.conf").read_text()
        self.assertNotIn("spank_mpi_pstate.so", shipped)
        # The submit side (this machine, the lab's files) knows the option;
        # the configless node never loads the plugin, so nothing is measured.
        job, state, comment = job_on_node("include", summary=False)
        self.assertEqual(state, "COMPLETED")
        self.assertFalse(comment.startswith("mpi-pstate/") and "partial" not in comment, comment)


if __name__ == "__main__":
    unittest.main()
