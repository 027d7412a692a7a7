# SPDX-License-Identifier: BSD-3-Clause
"""The installed node Epilog wrapper (epilog/mpi-pstate-epilog.in) exits 0
whatever the Python side does: an upgrade that has half unpacked the
package, or an interpreter that cannot start, must not drain the node
(Slurm drains a node whose Epilog exits non-zero).  The failure is said on
stderr, which slurmd logs."""
import os
import subprocess
import tempfile
import unittest
from pathlib import Path

TOP = Path(__file__).resolve().parents[2]


class WrapperNeverFails(unittest.TestCase):
    def run_wrapper(self, body: str) -> "subprocess.CompletedProcess[str]":
        with tempfile.TemporaryDirectory(prefix="mpi-pstate-wrapper.") as tmp:
            bindir = Path(tmp) / "bin"
            bindir.mkdir()
            fake = bindir / "mpi-pstate"
            fake.write_text("#!/bin/sh\n" + body)
            fake.chmod(0o755)
            wrapper = Path(tmp) / "mpi-pstate-epilog"
            wrapper.write_text((TOP / "epilog" / "mpi-pstate-epilog.in").read_text()
                               .replace("@BINDIR@", str(bindir)))
            wrapper.chmod(0o755)
            # No SLURM_JOB_ID: the fast path does not apply, the Python side runs.
            env = {"PATH": "/usr/bin:/bin", "SLURMD_NODENAME": "wrappertest%d" % os.getpid()}
            return subprocess.run([str(wrapper)], env=env, stdout=subprocess.PIPE,
                                  stderr=subprocess.PIPE, universal_newlines=True, timeout=60)

    def test_python_side_failing_exits_0_and_says_so(self) -> None:
        r = self.run_wrapper("echo 'ImportError: half unpacked' >&2\nexit 1\n")
        self.assertEqual(r.returncode, 0)
        self.assertIn("exited 1; the node is not drained for it", r.stderr)

    def test_python_side_missing_exits_0(self) -> None:
        r = self.run_wrapper("exec /nonexistent/python3 -I\n")
        self.assertEqual(r.returncode, 0)
        self.assertIn("the node is not drained for it", r.stderr)

    def test_python_side_succeeding_is_quiet(self) -> None:
        r = self.run_wrapper("exit 0\n")
        self.assertEqual(r.returncode, 0)
        self.assertNotIn("not drained", r.stderr)


if __name__ == "__main__":
    unittest.main()
