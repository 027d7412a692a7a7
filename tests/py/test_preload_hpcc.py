# SPDX-License-Identifier: BSD-3-Clause
"""HPC Challenge (Debian's hpcc, linked to Open MPI) under the preload
library: its own checks pass and every rank's profile is plausible."""
from __future__ import annotations

import os
import shutil
import sys
import tempfile
import unittest
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "tests" / "preload"))
import preload_helpers as ph  # noqa: E402

HPCC = "/usr/bin/hpcc"
TEMPLATE = "/usr/share/doc/hpcc/examples/_hpccinf.txt"


def small_input(src: str) -> str:
    """The example input with N=500 on a 1x2 grid: about a second here."""
    lines = Path(src).read_text().splitlines()
    lines[5] = "500          Ns"
    lines[10] = "1            Ps"
    lines[11] = "2            Qs"
    return "\n".join(lines) + "\n"


class Hpcc(unittest.TestCase):
    def test_hpcc_under_the_library(self) -> None:
        if not (os.access(HPCC, os.X_OK) and os.path.exists(TEMPLATE)):
            self.skipTest("hpcc not installed")
        ph.build()
        if not ph.have_abi("ompi"):
            self.skipTest("Open MPI backend not built")
        wd = Path(tempfile.mkdtemp(prefix="test_preload_hpcc."))
        self.addCleanup(shutil.rmtree, wd, True)
        (wd / "hpccinf.txt").write_text(small_input(TEMPLATE))
        r = ph.run_mpi("ompi", ph.exec_argv(wd / "prof", [HPCC]), cwd=wd, timeout=300)
        self.assertEqual(r.returncode, 0, r.stderr[-2000:])
        out = (wd / "hpccoutf.txt").read_text()
        self.assertIn("Success=1", out)
        self.assertIn("CommWorldProcs=2", out)
        self.assertIn("MPIRandomAccess_ErrorsFraction=0\n", out)
        self.assertNotIn("FAILED", out)
        self.assertIn("PASSED", out)
        profs = ph.read_profiles(wd / "prof")
        self.assertEqual(sorted(profs), [0, 1], r.stderr[-2000:])
        for rank, p in profs.items():
            with self.subTest(rank=rank):
                c = ph.calls(p)
                self.assertEqual(p["state"], "finalized")
                self.assertEqual(p["abi"], "ompi")
                self.assertGreater(p["wall_s"], 0.05)
                self.assertGreater(p["mpi_s"], 0)
                self.assertLess(p["mpi_s"], p["wall_s"])
                self.assertGreater(p["mpi_share"], 0.01)
                self.assertLess(p["mpi_share"], 1.0)
                for f in ("MPI_Allreduce", "MPI_Bcast", "MPI_Sendrecv", "MPI_Waitall",
                          "MPI_Irecv", "MPI_Barrier"):
                    self.assertGreater(c.get(f, 0), 0, f)
                self.assertEqual(c["MPI_Init"], 1)
                self.assertEqual(c["MPI_Finalize"], 1)
                self.assertEqual(sum(c.values()), p["calls"])
                self.assertGreater(p["calls"], 1000)
                self.assertEqual(sum(h["count"] for h in p["durations_ns"]), p["calls"])
                self.assertGreater(p["bytes"], 10_000_000)  # PTRANS, FFT, HPL panels
                self.assertGreater(len(p["message_sizes"]), 5)
                self.assertLessEqual(p["long_s"], p["mpi_s"] + 1e-6)


if __name__ == "__main__":
    unittest.main()
