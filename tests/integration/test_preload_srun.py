# SPDX-License-Identifier: BSD-3-Clause
"""The preload library under Slurm: ranks started by srun on both nodes (and
through a shell script) count exactly one event per MPI call, for every
binding and both MPI families.  The library is the installed one, loaded
with a plain LD_PRELOAD, so this holds without the plugin too."""
from __future__ import annotations

import os
import pwd
import sys
import unittest

import labtools as lt

sys.path.insert(0, str(lt.TOP / "tests" / "preload"))
import preload_helpers as ph  # noqa: E402

FRONT = lt.installed().front
SRUN_MPI = {"ompi": "pmix", "mpich": "pmi2"}


class PreloadUnderSrun(unittest.TestCase):
    @classmethod
    def setUpClass(cls) -> None:
        ph.build(lt.BUILD)
        if not FRONT.exists():
            raise unittest.SkipTest(f"{FRONT} not installed (tests/cluster/lab install)")

    def run_srun(self, abi: str, prog: str, through_script: bool = False) -> tuple[str, dict[int, dict]]:
        wd = lt.workdir(f"preload-srun-{abi}-{prog}{'-sh' if through_script else ''}")
        exe = lt.give(ph.program(prog, abi, lt.BUILD), wd)
        prof = wd / "prof"
        prof.mkdir()
        pw = pwd.getpwnam(lt.TEST_USER)
        os.chown(prof, pw.pw_uid, pw.pw_gid)
        argv = [str(exe)]
        if through_script:
            script = wd / "run.sh"
            script.write_text(f"#!/bin/bash\n# a wrapper script, as many job scripts use\nexec {exe} \"$@\"\n")
            script.chmod(0o755)
            os.chown(script, pw.pw_uid, pw.pw_gid)
            argv = [str(script)]
        env = {"LD_PRELOAD": str(FRONT), "MPI_PSTATE_MODE": "profile", "MPI_PSTATE_PROFILE_DIR": str(prof)}
        if SRUN_MPI[abi] in lt.srun_mpi_types():
            cmd = ["srun", "-t", "2", f"--mpi={SRUN_MPI[abi]}", "-N2", "-n2", "-c2", "--cpu-bind=none",
                   "--export=ALL," + ",".join(f"{k}={v}" for k, v in env.items()), *argv]
        else:
            # This Slurm cannot start Open MPI's ranks (Debian's 26.05 has no
            # mpi/pmix): mpirun does, inside an allocation of the same shape,
            # its daemons started on both nodes by srun, as such a site runs
            # Open MPI.  The library reaches only the ranks (-x), not mpirun.
            cmd = ["salloc", "-t", "2", "-N2", "-n2", "-c2", "mpirun.openmpi", "--bind-to", "none",
                   *[w for k, v in env.items() for w in ("-x", f"{k}={v}")], *argv]
        r = lt.as_user(cmd, cwd=wd)
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        profs = ph.read_profiles(prof)
        self.assertEqual(sorted(profs), [0, 1], r.stdout + r.stderr)
        self.assertEqual({p["host"] for p in profs.values()}, {"n1", "n2"})
        return r.stdout, profs

    def check_c(self, abi: str, prog: str, through_script: bool = False) -> None:
        out, profs = self.run_srun(abi, prog, through_script)
        want = ph.parse_counts(out)
        self.assertEqual(sorted(want), [0, 1], out)
        for rank in (0, 1):
            self.assertEqual(ph.calls(profs[rank]), want[rank], f"rank {rank}")
            self.assertEqual(profs[rank]["abi"], abi)

    def check_fortran(self, abi: str, prog: str) -> None:
        _, profs = self.run_srun(abi, prog)
        for rank in (0, 1):
            self.assertEqual(ph.calls_bytes(profs[rank]), ph.FORTRAN_EXPECTED, f"rank {rank}")

    def test_c(self) -> None:
        for abi in ph.ABIS:
            with self.subTest(abi=abi):
                self.check_c(abi, "c_calls")

    def test_c_through_script(self) -> None:
        for abi in ph.ABIS:
            with self.subTest(abi=abi):
                self.check_c(abi, "c_calls", through_script=True)

    def test_multithreaded(self) -> None:
        for abi in ph.ABIS:
            with self.subTest(abi=abi):
                self.check_c(abi, "mt_calls")

    def test_fortran_bindings(self) -> None:
        for abi in ph.ABIS:
            for prog in ("f77_calls", "f90_calls", "f08_calls"):
                with self.subTest(abi=abi, prog=prog):
                    self.check_fortran(abi, prog)


if __name__ == "__main__":
    unittest.main()
