# SPDX-License-Identifier: BSD-3-Clause
"""The preload library with real MPI programs, outside Slurm: every binding
(C, mpif.h, use mpi, use mpi_f08) on Open MPI and MPICH gives exactly one
event per call; threads lose no count; launch through mpi-pstate-exec, a
shell script or an interpreter; non-MPI processes and bad settings are left
alone.  Programs: tests/preload/; helpers: tests/preload/preload_helpers.py."""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import unittest
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "tests" / "preload"))
import preload_helpers as ph  # noqa: E402


def setUpModule() -> None:
    ph.build()


class Case(unittest.TestCase):
    def setUp(self) -> None:
        self.tmp = Path(tempfile.mkdtemp(prefix="test_preload."))

    def tearDown(self) -> None:
        shutil.rmtree(self.tmp, ignore_errors=True)

    def need(self, abi: str) -> None:
        if not ph.have_abi(abi):
            self.skipTest(f"{abi} not built or its launcher missing")

    def run_profiled(self, abi: str, prog: str, *args: str, options=(), env=None):
        prof = self.tmp / f"prof-{abi}-{prog}"
        r = ph.run_mpi(abi, ph.exec_argv(prof, [ph.program(prog, abi), *args], *options), env=env)
        return r, prof, ph.read_profiles(prof)


class Bindings(Case):
    """Exactly one event per MPI call, per binding, per MPI family."""

    def check_c(self, abi: str) -> None:
        self.need(abi)
        r, _, profs = self.run_profiled(abi, "c_calls")
        self.assertEqual(r.returncode, 0, r.stderr)
        want = ph.parse_counts(r.stdout)
        self.assertEqual(sorted(want), [0, 1], r.stdout)
        self.assertEqual(sorted(profs), [0, 1], r.stderr)
        for rank in (0, 1):
            with self.subTest(rank=rank):
                self.assertEqual(ph.calls(profs[rank]), want[rank])
                self.assertEqual(profs[rank]["state"], "finalized")
                self.assertEqual(profs[rank]["abi"], abi)
        # message sizes: 8000-byte Send/Recv, four 40-byte Sendrecv, in-place
        # Gather at the root records nothing, rank 1's Gather sends 8 bytes
        cb = {r: ph.calls_bytes(profs[r]) for r in (0, 1)}
        self.assertEqual(cb[1]["MPI_Send"], (1, 8000))
        self.assertEqual(cb[0]["MPI_Sendrecv"], (4, 160))
        self.assertEqual(cb[0]["MPI_Bcast"], (2, 800))
        self.assertEqual(cb[0]["MPI_Gather"], (1, 0))
        self.assertEqual(cb[1]["MPI_Gather"], (1, 8))
        self.assertEqual(cb[0]["MPI_Allreduce"], (3, 24))
        self.assertEqual(cb[1]["MPI_Mrecv"], (1, 16))
        hist = {h["lo"]: h["count"] for h in profs[1]["message_sizes"]}
        self.assertGreaterEqual(hist.get(4096, 0), 2)  # both 8000-byte messages
        total = sum(h["count"] for h in profs[0]["durations_ns"])
        self.assertEqual(total, profs[0]["calls"])  # one duration per call
        self.assertGreater(profs[0]["wall_s"], 0)
        self.assertGreater(profs[0]["mpi_share"], 0)
        self.assertLess(profs[0]["mpi_share"], 1)

    def test_c_ompi(self) -> None:
        self.check_c("ompi")

    def test_c_mpich(self) -> None:
        self.check_c("mpich")

    def check_fortran(self, abi: str, prog: str) -> None:
        self.need(abi)
        r, _, profs = self.run_profiled(abi, prog)
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        self.assertEqual(r.stdout.count(" OK "), 2, r.stdout)  # MPI_IN_PLACE results checked
        self.assertEqual(sorted(profs), [0, 1], r.stderr)
        for rank in (0, 1):
            with self.subTest(rank=rank):
                self.assertEqual(ph.calls_bytes(profs[rank]), ph.FORTRAN_EXPECTED)

    def test_mpifh_ompi(self) -> None:
        self.check_fortran("ompi", "f77_calls")

    def test_mpifh_mpich(self) -> None:
        self.check_fortran("mpich", "f77_calls")

    def test_use_mpi_ompi(self) -> None:
        self.check_fortran("ompi", "f90_calls")

    def test_use_mpi_mpich(self) -> None:
        self.check_fortran("mpich", "f90_calls")

    def test_f08_ompi(self) -> None:
        self.check_fortran("ompi", "f08_calls")

    def test_f08_mpich(self) -> None:
        self.check_fortran("mpich", "f08_calls")


class LargeCount(Case):
    """MPI-4 large-count calls (MPI_X_c): exactly one event and the right
    byte count per call, in C and through use mpi_f08, wherever the MPI has
    them; an MPI without them (Open MPI up to 5.0) gets no wrapper and the
    programs say SKIP."""

    def backend_has_large_count(self, abi: str) -> bool:
        """The backend was compiled with the MPI_X_c wrappers (its mpi.h says MPI-4)."""
        nm = subprocess.run(["nm", str(ph.BUILD / "preload" / f"libmpi-pstate-{abi}.so")],
                            capture_output=True, text=True, check=True).stdout
        return any(l.split()[-1] == "MPI_Send_c" for l in nm.splitlines() if l.strip())

    def run_large(self, abi: str, prog: str) -> tuple:
        self.need(abi)
        r, _, profs = self.run_profiled(abi, prog)
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        if "SKIP" in r.stdout:
            if prog == "c_large_calls":
                # the program and the generator decide alike (MPI_VERSION >= 4)
                self.assertFalse(self.backend_has_large_count(abi), r.stdout)
            self.skipTest(r.stdout.splitlines()[0])
        self.assertEqual(sorted(profs), [0, 1], r.stderr)
        return r, profs

    def check_c(self, abi: str) -> None:
        r, profs = self.run_large(abi, "c_large_calls")
        self.assertTrue(self.backend_has_large_count(abi))
        self.assertEqual(r.stdout.count("LARGE OK"), 2, r.stdout + r.stderr)
        made = ph.parse_counts(r.stdout)  # what the program counted itself
        for rank in (0, 1):
            with self.subTest(rank=rank):
                self.assertEqual(ph.calls(profs[rank]), made[rank])
                self.assertEqual(ph.calls_bytes(profs[rank]), ph.large_expected(rank, False))

    def check_f08(self, abi: str) -> None:
        r, profs = self.run_large(abi, "f08_large_calls")
        self.assertEqual(r.stdout.count("F08 LARGE OK"), 2, r.stdout + r.stderr)
        for rank in (0, 1):
            with self.subTest(rank=rank):
                self.assertEqual(ph.calls_bytes(profs[rank]), ph.large_expected(rank, True))

    def test_c_ompi(self) -> None:
        self.check_c("ompi")

    def test_c_mpich(self) -> None:
        self.check_c("mpich")

    def test_f08_ompi(self) -> None:
        self.check_f08("ompi")

    def test_f08_mpich(self) -> None:
        self.check_f08("mpich")

    def test_f08_entry_points_are_in_the_front(self) -> None:
        """MPICH's mpi_f08 large-count procedures call the C MPI_X_c, so the
        counts above would be exact even with wrong Fortran names: check that
        the program imports, for every large-count function, one of the f08
        symbols the front exports (4.0: mpi_x_f08ts_large_, 4.2: mpi_x_c_f08ts_)."""
        gen = subprocess.run(["/usr/bin/python3", str(ph.TOP / "preload" / "gen_wrappers.py"),
                              "--list"], capture_output=True, text=True, check=True).stdout
        f08: dict = {}
        for row in gen.splitlines():
            _, sym, func, binding = row.split("\t")
            if func.endswith("_c") and binding == "f08":
                f08.setdefault(func, set()).add(sym)
        self.assertEqual(len(f08), 29)
        tested = 0
        for abi in ph.ABIS:
            if not ph.have_abi(abi):
                continue
            r = ph.run_mpi(abi, [ph.program("f08_large_calls", abi)])
            if "SKIP" in r.stdout:
                continue
            nm = subprocess.run(["nm", "-D", "--undefined-only",
                                 str(ph.program("f08_large_calls", abi))],
                                capture_output=True, text=True, check=True).stdout
            imported = {l.split()[-1].split("@")[0] for l in nm.splitlines() if l.strip()}
            with self.subTest(abi=abi):
                self.assertEqual({f for f, syms in f08.items() if not syms & imported}, set())
                tested += 1
        if not tested:
            self.skipTest("no mpi_f08 with large-count procedures")


class Threads(Case):
    """MPI_THREAD_MULTIPLE: 4 threads x 2000 calls each, no lost count."""

    def check(self, abi: str) -> None:
        self.need(abi)
        r, _, profs = self.run_profiled(abi, "mt_calls")
        self.assertEqual(r.returncode, 0, r.stderr)
        if "SKIP" in r.stdout:
            self.skipTest(r.stdout.strip())
        want = ph.parse_counts(r.stdout)
        for rank in (0, 1):
            self.assertEqual(ph.calls(profs[rank]), want[rank])
            self.assertEqual(profs[rank]["thread_level"], "multiple")

    def test_ompi(self) -> None:
        self.check("ompi")

    def test_mpich(self) -> None:
        self.check("mpich")


class Launch(Case):
    """The right backend whatever starts the program."""

    def test_plain_ld_preload_and_serialized_init(self) -> None:
        for abi in ph.ABIS:
            if not ph.have_abi(abi):
                continue
            with self.subTest(abi=abi):
                prof = self.tmp / f"p-{abi}"
                env = {"LD_PRELOAD": str(ph.front()), "MPI_PSTATE_MODE": "profile",
                       "MPI_PSTATE_PROFILE_DIR": str(prof)}
                r = ph.run_mpi(abi, [ph.program("c_calls", abi), "--thread"], env=env)
                self.assertEqual(r.returncode, 0, r.stderr)
                profs = ph.read_profiles(prof)
                want = ph.parse_counts(r.stdout)
                self.assertEqual(ph.calls(profs[0]), want[0])
                self.assertEqual(want[0]["MPI_Init_thread"], 1)
                self.assertEqual(profs[0]["thread_level"], "serialized")

    def test_through_shell_script(self) -> None:
        """mpirun starts bash, bash runs ls, then the program: only the program
        is touched, and counted exactly."""
        for abi in ph.ABIS:
            if not ph.have_abi(abi):
                continue
            with self.subTest(abi=abi):
                script = self.tmp / f"run-{abi}.sh"
                script.write_text("#!/bin/bash\nset -e\nls / > /dev/null\necho shell-ok\n"
                                  f"exec {ph.program('c_calls', abi)}\n")
                script.chmod(0o755)
                prof = self.tmp / f"script-{abi}"
                r = ph.run_mpi(abi, ph.exec_argv(prof, [script]))
                self.assertEqual(r.returncode, 0, r.stderr)
                self.assertEqual(r.stdout.count("shell-ok"), 2)
                profs = ph.read_profiles(prof)
                want = ph.parse_counts(r.stdout)
                self.assertEqual(sorted(profs), [0, 1])
                for rank in (0, 1):
                    self.assertEqual(ph.calls(profs[rank]), want[rank])
                self.assertEqual(sorted(os.listdir(prof)),
                                 ["rank-0.csv", "rank-0.json", "rank-1.csv", "rank-1.json"])

    def test_interpreter_mpi4py(self) -> None:
        """python3 loads MPI late and RTLD_LOCAL (mpi4py, linked to Open MPI):
        the front still finds it and counts the Python-level calls."""
        self.need("ompi")
        r0 = subprocess.run([sys.executable, "-c", "import mpi4py"], capture_output=True)
        if r0.returncode != 0:
            self.skipTest("python3-mpi4py not installed")
        code = ("from mpi4py import MPI\nc = MPI.COMM_WORLD\n"
                "for i in range(5): c.Barrier()\n"
                "x = c.allreduce(c.Get_rank())\nprint('PY OK', c.Get_rank(), x)\n")
        prof = self.tmp / "py"
        r = ph.run_mpi("ompi", ph.exec_argv(prof, ["/usr/bin/python3", "-c", code]))
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(r.stdout.count("PY OK"), 2, r.stdout)
        profs = ph.read_profiles(prof)
        self.assertEqual(sorted(profs), [0, 1], r.stderr)
        for rank in (0, 1):
            c = ph.calls(profs[rank])
            self.assertEqual(c["MPI_Barrier"], 5)
            self.assertEqual(c.get("MPI_Init", 0) + c.get("MPI_Init_thread", 0), 1)
            self.assertEqual(profs[rank]["abi"], "ompi")

    def test_non_mpi_process_untouched(self) -> None:
        """bash, coreutils and python under the preload: same output, no backend."""
        env = dict(os.environ, LD_PRELOAD=str(ph.front()), MPI_PSTATE_MODE="on",
                   MPI_PSTATE_VERBOSE="2")
        r = subprocess.run(["bash", "-c", "echo hello; cat /proc/self/maps"], env=env,
                           capture_output=True, text=True)
        self.assertEqual(r.returncode, 0)
        self.assertTrue(r.stdout.startswith("hello\n"))
        self.assertIn("libmpi-pstate.so", r.stdout)
        self.assertNotIn("libmpi-pstate-ompi", r.stdout)
        self.assertNotIn("libmpi-pstate-mpich", r.stdout)
        self.assertEqual(r.stderr, "")
        r = subprocess.run([sys.executable, "-c", "print(6*7)"], env=env, capture_output=True,
                           text=True)
        self.assertEqual((r.returncode, r.stdout, r.stderr), (0, "42\n", ""))

    def test_mpirun_itself_under_preload(self) -> None:
        """LD_PRELOAD set for the launcher too (what a job step does): the
        launcher runs, the ranks are counted."""
        for abi in ph.ABIS:
            if not ph.have_abi(abi):
                continue
            with self.subTest(abi=abi):
                prof = self.tmp / f"l-{abi}"
                env = {"LD_PRELOAD": str(ph.front()), "MPI_PSTATE_MODE": "profile",
                       "MPI_PSTATE_PROFILE_DIR": str(prof)}
                r = ph.run_mpi(abi, [ph.program("f08_calls", abi)], env=env)
                self.assertEqual(r.returncode, 0, r.stderr)
                profs = ph.read_profiles(prof)
                self.assertEqual(ph.calls_bytes(profs[1]), ph.FORTRAN_EXPECTED)


class Robustness(Case):
    """The library never breaks or slows the job over its own problem."""

    def test_mode_unset_passes_through(self) -> None:
        for abi in ph.ABIS:
            if not ph.have_abi(abi):
                continue
            with self.subTest(abi=abi):
                env = {"LD_PRELOAD": str(ph.front()), "MPI_PSTATE_VERBOSE": "2",
                       "MPI_PSTATE_PROFILE_DIR": str(self.tmp / abi)}
                r = ph.run_mpi(abi, [ph.program("c_calls", abi)], env=env)
                self.assertEqual(r.returncode, 0, r.stderr)
                self.assertEqual(len(ph.parse_counts(r.stdout)), 2)
                self.assertIn("unset or off: passing MPI calls through", r.stderr)
                self.assertFalse((self.tmp / abi).exists())

    def test_bad_value_one_message_rank0_pass_through(self) -> None:
        for abi in ph.ABIS:
            if not ph.have_abi(abi):
                continue
            for var, value in (("MPI_PSTATE_THRESHOLD", "soon"), ("MPI_PSTATE_MODE", "turbo"),
                               ("MPI_PSTATE_LOW", "1.2THz"), ("MPI_PSTATE_CLOCK", "sundial"),
                               ("MPI_PSTATE_SHM", "relative/path")):
                with self.subTest(abi=abi, var=var):
                    prof = self.tmp / f"{abi}-{var}"
                    env = {"LD_PRELOAD": str(ph.front()), "MPI_PSTATE_MODE": "profile",
                           "MPI_PSTATE_PROFILE_DIR": str(prof), var: value}
                    r = ph.run_mpi(abi, [ph.program("c_calls", abi)], env=env)
                    self.assertEqual(r.returncode, 0, r.stderr)
                    self.assertEqual(len(ph.parse_counts(r.stdout)), 2)
                    lines = [l for l in r.stderr.splitlines() if "mpi-pstate" in l]
                    self.assertEqual(len(lines), 1, r.stderr)
                    self.assertIn(var, lines[0])
                    self.assertIn(value, lines[0])
                    self.assertIn("passing every MPI call through", lines[0])
                    self.assertEqual(ph.read_profiles(prof), {})

    def test_broken_segment_falls_back_to_private_slot(self) -> None:
        self.need("mpich")
        seg = self.tmp / "not-a-segment"
        seg.write_bytes(b"garbage" * 100)
        r, _, profs = self.run_profiled("mpich", "c_calls", env={"MPI_PSTATE_SHM": str(seg)})
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(r.stderr.count("cannot use slot"), 2, r.stderr)  # each rank says so
        self.assertEqual(ph.calls(profs[0]), ph.parse_counts(r.stdout)[0])

    def test_exit_without_finalize_writes_profile(self) -> None:
        self.need("mpich")
        r, _, profs = self.run_profiled("mpich", "c_calls", "--nofinalize")
        # Hydra kills the other ranks as soon as one exits without
        # MPI_Finalize (4.2 at once; 4.0 too when the exits are far enough
        # apart, as on a busy machine), possibly while its exit profile is
        # being written (docs/preload.md): the first rank to exit always writes.
        self.assertTrue(set(profs) <= {0, 1} and profs, r.stderr)
        for rank in sorted(profs):
            self.assertEqual(profs[rank]["state"], "exited")
            self.assertEqual(ph.calls(profs[rank]), ph.parse_counts(r.stdout)[rank])

    def test_abort_writes_profile_first(self) -> None:
        self.need("mpich")
        r, _, profs = self.run_profiled("mpich", "c_calls", "--abort")
        self.assertNotEqual(r.returncode, 0)
        self.assertIn(1, profs, r.stderr)
        self.assertEqual(profs[1]["state"], "aborted")
        want = ph.parse_counts(r.stdout)[1]
        want["MPI_Abort"] = 1
        self.assertEqual(ph.calls(profs[1]), want)

    def test_exec_usage_errors(self) -> None:
        ex = str(ph.exec_path())
        for argv, code in (([ex], 2), ([ex, "--threshold", "1.5us", "--", "true"], 2),
                           ([ex, "--mode", "fast", "--", "true"], 2),
                           ([ex, "--", "/nonexistent/prog"], 127)):
            with self.subTest(argv=argv[1:]):
                r = subprocess.run(argv, capture_output=True, text=True)
                self.assertEqual(r.returncode, code, r.stderr)
                self.assertIn("mpi-pstate-exec", r.stderr + r.stdout)
        r = subprocess.run([ex, "--profile", "rel/dir", "--threshold", "2ms", "--print-env"],
                           capture_output=True, text=True,
                           env=dict(os.environ, LD_PRELOAD="/x/other.so"))
        env = dict(l.split("=", 1) for l in r.stdout.splitlines())
        self.assertEqual(env["LD_PRELOAD"], f"{ph.front()}:/x/other.so")  # prepended, kept
        self.assertEqual(env["MPI_PSTATE_MODE"], "profile")
        self.assertEqual(env["MPI_PSTATE_THRESHOLD"], "2ms")
        self.assertEqual(env["MPI_PSTATE_PROFILE_DIR"], os.path.abspath("rel/dir"))

    def test_exec_summary(self) -> None:
        self.need("mpich")
        r, prof, _ = self.run_profiled("mpich", "c_calls")
        s = subprocess.run([str(ph.exec_path()), "--summary", str(prof)], capture_output=True,
                           text=True)
        self.assertEqual(s.returncode, 0, s.stderr)
        rows = s.stdout.splitlines()[1:]
        self.assertEqual([l.split()[0] for l in rows], ["0", "1"])
        self.assertTrue(all("finalized" in l for l in rows))


if __name__ == "__main__":
    unittest.main()
