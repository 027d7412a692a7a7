# SPDX-License-Identifier: BSD-3-Clause
"""Both MPI families, every language binding, launched the ways users launch
them, across both nodes of the local cluster, as the non-root test user."""
from __future__ import annotations

import re
import time
import unittest

import labtools as lt

BINDINGS = ["hello_c", "hello_mpifh", "hello_mod", "hello_f08"]
LINE = re.compile(r"hello (\w+) rank (\d+) of (\d+) on (\S+) sum (\w+)")


class MpiSmoke(unittest.TestCase):
    def check_output(self, text: str, ntasks: int, lang: str) -> None:
        hits = [m.groups() for m in LINE.finditer(text)]
        self.assertEqual(len(hits), ntasks, text)
        self.assertEqual(sorted(int(h[1]) for h in hits), list(range(ntasks)), text)
        for tag, _, size, _, ok in hits:
            self.assertEqual(tag, lang)
            self.assertEqual(int(size), ntasks, text)
            self.assertEqual(ok, "ok", text)
        self.assertEqual({h[3] for h in hits}, {"n1", "n2"}, "ranks must run on both nodes:\n" + text)

    def run_srun(self, family: str, mpi: str) -> None:
        wd = lt.workdir(f"smoke-srun-{family}")
        for b in BINDINGS:
            with self.subTest(binding=b):
                exe = lt.give(lt.BUILD / "tests" / "mpi" / f"{b}.{family}", wd)
                r = lt.as_user(["srun", "-t", "2", f"--mpi={mpi}", "-N2", "-n2", "-c2", "--cpu-bind=none", str(exe)], cwd=wd)
                self.assertEqual(r.returncode, 0, r.stderr)
                lang = b.split("_", 1)[1]
                self.check_output(r.stdout, 2, lang)

    def test_mpich_srun_pmi2(self) -> None:
        self.run_srun("mpich", "pmi2")

    def test_openmpi_srun_pmix(self) -> None:
        lt.skip_without_pmix(self)  # the point is Open MPI over srun's mpi/pmix (none in Debian's 26.05)
        self.run_srun("openmpi", "pmix")

    def run_batch_launcher(self, family: str, launcher: str) -> None:
        wd = lt.workdir(f"smoke-batch-{family}")
        exes = [lt.give(lt.BUILD / "tests" / "mpi" / f"{b}.{family}", wd) for b in BINDINGS]
        script = "set -e\n" + "".join(f"{launcher} {e}\n" for e in exes)
        job = lt.sbatch(["-N2", "--ntasks-per-node=1", "-c2", "-t", "3", "-J", f"smoke-{family}"], script, wd)
        state = lt.wait_job(job)
        out = (wd / f"slurm-{job}.out").read_text()
        self.assertEqual(state, "COMPLETED", out)
        for b in BINDINGS:
            lang = b.split("_", 1)[1]
            self.check_output("\n".join(l for l in out.splitlines() if f"hello {lang} " in l), 2, lang)
        # sacct knows the job, its nodes and the launcher's steps.
        # slurmdbd may still hold the batch host only for a moment after the end.
        for _ in range(50):
            rows = lt.sacct(job, ["JobID", "State", "NodeList", "User"], allocation_only=False)
            if any(r["JobID"] == str(job) and r["NodeList"] == "n[1-2]" for r in rows):
                break
            time.sleep(0.2)
        alloc = [r for r in rows if r["JobID"] == str(job)]
        self.assertEqual(len(alloc), 1, rows)
        self.assertEqual(alloc[0]["NodeList"], "n[1-2]", rows)
        self.assertEqual(alloc[0]["User"], lt.TEST_USER)
        self.assertGreaterEqual(len([r for r in rows if re.fullmatch(rf"{job}\.\d+", r["JobID"])]), len(BINDINGS))

    def test_openmpi_mpirun_in_sbatch(self) -> None:
        self.run_batch_launcher("openmpi", "mpirun.openmpi")

    def test_mpich_mpiexec_in_sbatch(self) -> None:
        self.run_batch_launcher("mpich", "mpiexec.mpich")


if __name__ == "__main__":
    unittest.main()
