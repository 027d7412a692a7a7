# SPDX-License-Identifier: BSD-3-Clause
"""The root node Epilog's scan of /dev/shm for what a job left there is
bounded: anyone can fill the directory (some 1.2 us an entry), so the scan
stops past a count of entries and once the Epilog's CPU budget is spent,
says so once in the Epilog's log, and the segments the job's step records
list are removed all the same (they are known by name: no scan needed).
A fake shm directory stands for /dev/shm (node.run takes it as shm_dir)."""
import argparse
import io
import os
import tempfile
import unittest
from pathlib import Path
from typing import List
from unittest import mock

import test_epilog_fixtures as fx
from mpi_pstate.core import log
from mpi_pstate.site import node_epilog, stepscan

JUNK = 3000  # other users' files in the shm directory


class ShmScan(unittest.TestCase):
    def setUp(self) -> None:
        self._td = tempfile.TemporaryDirectory()
        self.tmp = Path(self._td.name)
        os.chmod(self.tmp, 0o755)
        self.collect, self.runtime, self.shm, self.sys = fx.epilog_dirs(self.tmp)
        self.env = {"SLURM_JOB_ID": "4242", "SLURMD_NODENAME": "n1", "SLURM_JOB_UID": "1000",
                    "SLURM_CONF": str(self.tmp / "none.conf"), "PATH": os.environ["PATH"]}
        self.err = io.StringIO()
        for i in range(JUNK):
            (self.shm / f"psm2_shm.{i}").write_bytes(b"")

    def tearDown(self) -> None:
        self._td.cleanup()

    def plant(self) -> List[Path]:
        """Steps 0 and 1 of job 4242, each with the segment its plugin.json
        lists; and a segment of the job no step record lists."""
        listed = []
        for step, tag in (("0", "0123456789abcdef"), ("1", "fedcba9876543210")):
            seg = self.shm / f"mpi-pstate.4242.{step}.{tag}"
            fx.segment(seg, [{"rank": 0}, {"rank": 1}])
            os.chown(seg, 1000, -1)
            fx.plugin_json(self.runtime, 4242, step, seg, nslots=2)
            listed.append(seg)
        (self.shm / "mpi-pstate.4242.7.0000000000000007").write_bytes(b"")
        return listed

    def run_epilog(self) -> int:
        a = argparse.Namespace(collect_dir=str(self.collect), runtime_dir=str(self.runtime),
                               slurm_conf=None, sysroot=str(self.sys), shm_dir=str(self.shm),
                               keep_segments=False, quiet=False)
        with mock.patch.dict(os.environ, self.env, clear=True), \
                mock.patch.object(log, "_stream", [self.err]):
            return node_epilog.run(a, {"agent": []})

    def said(self) -> List[str]:
        return [ln for ln in self.err.getvalue().splitlines() if "the scan for what job" in ln]

    def junk_left(self) -> int:
        return sum(1 for p in self.shm.iterdir() if p.name.startswith("psm2_shm."))

    def test_a_count_bound_stops_the_scan_and_says_so(self) -> None:
        listed = self.plant()
        with mock.patch.object(stepscan, "SHM_SCAN_MAX", 100):
            self.assertEqual(self.run_epilog(), 0)
        said = self.said()
        self.assertEqual(len(said), 1, self.err.getvalue())
        self.assertIn(f"{self.shm}: the scan for what job 4242 left there stopped after 100 "
                      "entries, its bound", said[0])
        self.assertIn("the segments its steps listed (2) were removed by name; the entries "
                      "past those scanned are left for `mpi-pstate node-prune`", said[0])
        self.assertIn(", 1 problems,", self.err.getvalue())  # counted in the Epilog's line
        self.assertEqual([p.exists() for p in listed], [False, False])
        self.assertEqual(self.junk_left(), JUNK)  # nobody else's file touched
        self.assertIn("record of job 4242 published: status ok, 4 ranks", self.err.getvalue())
        # within the bounds: nothing said, and what no step listed goes too
        self.err.truncate(0)
        self.err.seek(0)
        self.env["SLURM_JOB_ID"] = "4243"
        (self.shm / "mpi-pstate.4243.0.00000000000000aa").write_bytes(b"")
        fx.plugin_json(self.runtime, 4243, "0", None)
        self.assertEqual(self.run_epilog(), 0)
        self.assertEqual(self.said(), [])
        self.assertFalse((self.shm / "mpi-pstate.4243.0.00000000000000aa").exists())
        self.assertEqual(self.junk_left(), JUNK)

    def test_the_cpu_budget_stops_the_scan_and_says_so(self) -> None:
        listed = self.plant()
        # a budget spent before the scan begins: no entry is looked at
        with mock.patch.object(stepscan, "SHM_SCAN_UNTIL_S", 0.0):
            self.assertEqual(self.run_epilog(), 0)
        said = self.said()
        self.assertEqual(len(said), 1, self.err.getvalue())
        self.assertIn("stopped after 0 entries, its CPU budget spent (the Epilog's 0.0 s of "
                      "CPU", said[0])
        self.assertEqual([p.exists() for p in listed], [False, False])
        # the unlisted one is not known by name: the next pass's
        self.assertTrue((self.shm / "mpi-pstate.4242.7.0000000000000007").exists())
        self.assertEqual(self.junk_left(), JUNK)
        self.assertIn("record of job 4242 published: status ok, 4 ranks", self.err.getvalue())


if __name__ == "__main__":
    unittest.main()
