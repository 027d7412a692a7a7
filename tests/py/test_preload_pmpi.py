# SPDX-License-Identifier: BSD-3-Clause
"""mpi-pstate stacked with a PMPI tool (tests/programs/preload/pmpi_tool.c: MPI_X
counts, then calls PMPI_X, as mpiP, Score-P, TAU or a site's tool do), on
Open MPI and MPICH, C and every Fortran binding, in every order:

  alone   LD_PRELOAD=tool                        the tool's own view (baseline)
  after   LD_PRELOAD=libmpi-pstate.so:tool       mpi-pstate first (what the plugin does)
  exec    mpi-pstate-exec --mode profile, the user's LD_PRELOAD=tool kept after it
  before  LD_PRELOAD=tool:libmpi-pstate.so
  linked  the tool linked into the program, run through mpi-pstate-exec
  chain-before, chain-after
          the same tool built to chain (its MPI_X calls the next MPI_X,
          dlsym(RTLD_NEXT)) before and after libmpi-pstate.so

Asserted, each exactly and against what the program called in the same run
(C programs count their own calls; polling loops make those vary): the tool
counts in every order what it counts alone, that is every call that reaches
the C MPI_X (mpi-pstate hides none and adds none); mpi-pstate records exactly
the program's calls when it comes first; with the tool ahead of it (before,
linked) a C program's MPI_Init never reaches mpi-pstate, which then records
nothing and says why, while Fortran programs (the tool has no Fortran
wrappers) are recorded exactly; a chaining tool may come first and both
see every call.  docs/preload.md "Living with PMPI tools"."""
from __future__ import annotations

import json
import shutil
import sys
import tempfile
import unittest
from pathlib import Path
from typing import Dict, List, Mapping, Tuple

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "tests" / "preload"))
import preload_helpers as ph  # noqa: E402

FORTRAN = ("f77_calls", "f90_calls", "f08_calls")
# The functions pmpi_tool.c counts (MPI-4 ones only where mpi.h has them).
TOOL_FUNCS = {"MPI_Init", "MPI_Init_thread", "MPI_Finalize", "MPI_Barrier", "MPI_Send",
              "MPI_Recv", "MPI_Sendrecv", "MPI_Isend", "MPI_Irecv", "MPI_Wait", "MPI_Waitall",
              "MPI_Test", "MPI_Bcast", "MPI_Reduce", "MPI_Allreduce", "MPI_Gather",
              "MPI_Send_c", "MPI_Recv_c", "MPI_Bcast_c", "MPI_Allreduce_c"}
# MPICH's mpi_f08 routines with a choice buffer (its TS 29113 mpi_x_f08ts_)
# call the C MPI_X; the others (Barrier, Init, Finalize, Waitall, Test, Wait)
# call PMPI_X.  Measured with the tool alone.
MPICH_F08_VIA_C = {"MPI_Send", "MPI_Recv", "MPI_Sendrecv", "MPI_Isend", "MPI_Irecv",
                   "MPI_Bcast", "MPI_Reduce", "MPI_Allreduce", "MPI_Gather", "MPI_Send_c",
                   "MPI_Recv_c", "MPI_Bcast_c", "MPI_Allreduce_c"}

Run = Tuple[object, Dict[int, Dict[str, int]], Dict[int, dict]]


def setUpModule() -> None:
    ph.build()


def tool_lib(abi: str, chain: bool = False) -> Path:
    return ph.BUILD / "tests" / "preload" / f"libpmpi_tool{'_chain' if chain else ''}.{abi}.so"


class Stacking(unittest.TestCase):
    def setUp(self) -> None:
        self.tmp = Path(tempfile.mkdtemp(prefix="test_preload_pmpi."))
        self.n = 0

    def tearDown(self) -> None:
        shutil.rmtree(self.tmp, ignore_errors=True)

    def need(self, abi: str) -> None:
        if not ph.have_abi(abi) or not tool_lib(abi).exists():
            self.skipTest(f"{abi} not built or its launcher missing")

    def run_order(self, abi: str, prog: str, order: str) -> Run:
        """Runs prog on 2 ranks in one order; returns (process, tool counts
        per rank, mpi-pstate profiles per rank)."""
        self.n += 1
        tool_dir = self.tmp / f"tool{self.n}"
        prof = self.tmp / f"prof{self.n}"
        tool_dir.mkdir()
        front, tool = str(ph.front()), str(tool_lib(abi, order.startswith("chain")))
        env: Dict[str, str] = {"PMPI_TOOL_DIR": str(tool_dir)}
        measured = {"MPI_PSTATE_MODE": "profile", "MPI_PSTATE_PROFILE_DIR": str(prof)}
        argv: List[object] = [ph.program(prog, abi)]
        if order == "alone":
            env["LD_PRELOAD"] = tool
        elif order == "after":
            env.update(measured, LD_PRELOAD=f"{front}:{tool}")
        elif order in ("before", "chain-before"):
            env.update(measured, LD_PRELOAD=f"{tool}:{front}")
        elif order == "chain-after":
            env.update(measured, LD_PRELOAD=f"{front}:{tool}")
        elif order == "exec":
            env["LD_PRELOAD"] = tool
            argv = ph.exec_argv(prof, argv, "--mode", "profile")
        elif order == "linked":
            argv = ph.exec_argv(prof, [ph.program(prog + "_tool", abi)], "--mode", "profile")
        elif order == "linked-alone":
            argv = [ph.program(prog + "_tool", abi)]
        else:
            raise ValueError(order)
        r = ph.run_mpi(abi, argv, env=env)
        self.assertEqual(r.returncode, 0, f"{order}: {r.stdout}{r.stderr}")
        tool_counts = {}
        for rank in (0, 1):
            p = tool_dir / f"tool-{rank}.json"
            self.assertTrue(p.exists(), f"{order}: the tool wrote no counts\n{r.stderr}")
            tool_counts[rank] = json.loads(p.read_text())
        return r, tool_counts, ph.read_profiles(prof)

    def program_calls(self, abi: str, prog: str, r) -> Dict[int, Dict[str, int]]:
        """What the program called, per rank."""
        if prog in FORTRAN:
            want = {f: n for f, (n, _) in ph.FORTRAN_EXPECTED.items()}
            return {0: want, 1: want}
        if prog == "f08_large_calls":
            return {rank: {f: n for f, (n, _) in ph.large_expected(rank, True).items()}
                    for rank in (0, 1)}
        return ph.parse_counts(r.stdout)

    def tool_expected(self, abi: str, prog: str,
                      made: Mapping[int, Mapping[str, int]]) -> Dict[int, Dict[str, int]]:
        """What the tool sees alone (measured): the calls that reach the C MPI_X."""
        out = {}
        for rank in (0, 1):
            seen = {f: n for f, n in made[rank].items() if f in TOOL_FUNCS}
            if abi == "ompi" and prog in FORTRAN + ("f08_large_calls",):
                seen = {}  # Open MPI 4.1's Fortran bindings call PMPI_X
            elif prog in ("f08_calls", "f08_large_calls"):
                seen = {f: n for f, n in seen.items() if f in MPICH_F08_VIA_C}
            out[rank] = seen
        return out

    def check(self, abi: str, prog: str, orders=("after", "exec", "before", "linked",
                                                  "chain-before", "chain-after")) -> None:
        self.need(abi)
        r, alone, _ = self.run_order(abi, prog, "alone")
        if "SKIP" in r.stdout:
            self.skipTest(r.stdout.splitlines()[0])
        self.assertEqual(alone, self.tool_expected(abi, prog, self.program_calls(abi, prog, r)))
        for order in orders:
            if order == "linked" and not ph.program(prog + "_tool", abi).exists():
                continue
            with self.subTest(order=order):
                r, tool, profs = self.run_order(abi, prog, order)
                made = self.program_calls(abi, prog, r)
                # 1. the tool: exactly its own view, whatever the order
                self.assertEqual(tool, self.tool_expected(abi, prog, made), r.stderr)
                # 2. mpi-pstate
                ahead = order in ("before", "linked")
                if ahead and prog not in FORTRAN + ("f08_large_calls",):
                    # the tool's MPI_Init calls PMPI_Init: mpi-pstate never starts
                    self.assertEqual(profs, {}, r.stderr)
                    self.assertIn("MPI_Init did not reach libmpi-pstate.so", r.stderr)
                    self.assertIn(f"{prog}_tool" if order == "linked" else tool_lib(abi).name,
                                  r.stderr)
                    continue
                self.assertNotIn("mpi-pstate:", r.stderr)
                self.assertEqual(sorted(profs), [0, 1], r.stderr)
                for rank in (0, 1):
                    self.assertEqual(ph.calls(profs[rank]), made[rank], f"rank {rank}")

    def test_c_ompi(self) -> None:
        self.check("ompi", "c_calls")

    def test_c_mpich(self) -> None:
        self.check("mpich", "c_calls")

    def test_mpifh_ompi(self) -> None:
        self.check("ompi", "f77_calls")

    def test_mpifh_mpich(self) -> None:
        self.check("mpich", "f77_calls")

    def test_use_mpi_ompi(self) -> None:
        self.check("ompi", "f90_calls")

    def test_use_mpi_mpich(self) -> None:
        self.check("mpich", "f90_calls")

    def test_f08_ompi(self) -> None:
        self.check("ompi", "f08_calls")

    def test_f08_mpich(self) -> None:
        self.check("mpich", "f08_calls")

    def test_large_c_mpich(self) -> None:
        self.check("mpich", "c_large_calls")

    def test_large_c_ompi(self) -> None:
        self.check("ompi", "c_large_calls")

    def test_large_f08_mpich(self) -> None:
        self.check("mpich", "f08_large_calls")

    def test_linked_tool_alone_is_the_same_tool(self) -> None:
        """The linked-in tool alone sees what the preloaded one sees alone (so
        the same expectation holds for 'linked')."""
        for abi in ph.ABIS:
            if not ph.have_abi(abi):
                continue
            with self.subTest(abi=abi):
                r, linked, _ = self.run_order(abi, "c_calls", "linked-alone")
                self.assertEqual(linked, self.tool_expected(abi, "c_calls", ph.parse_counts(r.stdout)))


class Chain(unittest.TestCase):
    """The chain itself: two copies of the front (another build in the same
    LD_PRELOAD) record each call once and do not loop."""

    def test_two_fronts_record_once(self) -> None:
        abi = next((a for a in ph.ABIS if ph.have_abi(a)), None)
        if abi is None:
            self.skipTest("no MPI built")
        tmp = Path(tempfile.mkdtemp(prefix="test_preload_pmpi."))
        try:
            copy = tmp / "copy"
            copy.mkdir()
            for f in (ph.BUILD / "preload").glob("libmpi-pstate*.so"):
                shutil.copy(f, copy / f.name)
            tool_dir, prof = tmp / "tool", tmp / "prof"
            tool_dir.mkdir()
            env = {"LD_PRELOAD": f"{ph.front()}:{copy / 'libmpi-pstate.so'}:{tool_lib(abi)}",
                   "MPI_PSTATE_MODE": "profile", "MPI_PSTATE_PROFILE_DIR": str(prof),
                   "PMPI_TOOL_DIR": str(tool_dir)}
            r = ph.run_mpi(abi, [ph.program("c_calls", abi)], env=env, timeout=60)
            self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
            made = ph.parse_counts(r.stdout)
            profs = ph.read_profiles(prof)
            self.assertEqual(sorted(profs), [0, 1], r.stderr)  # one profile per rank, not two
            self.assertEqual(len(list(prof.glob("rank-*.json"))), 2)
            for rank in (0, 1):
                self.assertEqual(ph.calls(profs[rank]), made[rank])
                tool = json.loads((tool_dir / f"tool-{rank}.json").read_text())
                self.assertEqual(tool["MPI_Barrier"], made[rank]["MPI_Barrier"])
        finally:
            shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    unittest.main()
