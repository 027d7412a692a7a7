# SPDX-License-Identifier: BSD-3-Clause
"""preload/gen_wrappers.py: one declarative line per MPI function becomes
every entry point, deterministically, checked by each MPI's compiler."""
from __future__ import annotations

import re
import shutil
import subprocess
import sys
import tempfile
import unittest
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "tests" / "preload"))
import preload_helpers as ph  # noqa: E402

GEN = ph.TOP / "preload" / "gen_wrappers.py"
DEF = ph.TOP / "preload" / "mpi_functions.def"
PY = "/usr/bin/python3"
MPI_CFLAGS = {"ompi": "ompi-c", "mpich": "mpich"}


def gen(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([PY, str(GEN), *args], capture_output=True, text=True)


class Generator(unittest.TestCase):
    def setUp(self) -> None:
        self.tmp = Path(tempfile.mkdtemp(prefix="test_preload_gen."))

    def tearDown(self) -> None:
        shutil.rmtree(self.tmp, ignore_errors=True)

    def write_def(self, extra: str = "", replace: tuple = ()) -> Path:
        text = DEF.read_text()
        if replace:
            self.assertIn(replace[0], text)
            text = text.replace(replace[0], replace[1])
        p = self.tmp / "fn.def"
        p.write_text(text + extra)
        return p

    def compile_wrappers(self, out: Path, abi: str) -> subprocess.CompletedProcess:
        flags = subprocess.run(["pkg-config", "--cflags", MPI_CFLAGS[abi]], capture_output=True,
                               text=True).stdout.split()
        return subprocess.run(["gcc", "-std=c11", "-D_GNU_SOURCE", "-Wall", "-Werror",
                               "-fsyntax-only", "-I", str(ph.TOP / "preload"),
                               "-I", str(ph.TOP / "common"), "-I", str(out), *flags,
                               str(out / "wrappers.c")], capture_output=True, text=True)

    def test_build_tree_is_up_to_date(self) -> None:
        ph.build()
        r = gen("--out", str(ph.BUILD / "gen" / "preload"), "--check")
        self.assertEqual(r.returncode, 0, r.stderr)

    def test_deterministic_with_banner(self) -> None:
        a, b = self.tmp / "a", self.tmp / "b"
        self.assertEqual(gen("--out", str(a)).returncode, 0)
        self.assertEqual(gen("--out", str(b)).returncode, 0)
        names = sorted(p.name for p in a.iterdir())
        self.assertEqual(names, ["front.S", "front_syms.h", "mpi_pstate_fn.h", "wrappers.c"])
        for n in names:
            self.assertEqual((a / n).read_bytes(), (b / n).read_bytes(), n)
            self.assertIn("do not edit", (a / n).read_text().splitlines()[0], n)

    def test_check_reports_stale_output(self) -> None:
        out = self.tmp / "o"
        gen("--out", str(out))
        with open(out / "wrappers.c", "a") as f:
            f.write("/* hand edit */\n")
        r = gen("--out", str(out), "--check")
        self.assertEqual(r.returncode, 1)
        self.assertIn("wrappers.c", r.stderr)
        (out / "front.S").unlink()
        r = gen("--out", str(out), "--check")
        self.assertIn("front.S", r.stderr)
        self.assertTrue((out / "wrappers.c").read_text().endswith("/* hand edit */\n"))

    def test_bad_lines_are_refused_with_their_line(self) -> None:
        cases = {
            "MPI_Foo | since=1.0 | kind=slow | int MPI_Foo(int a)": "unknown kind",
            "MPI_Send | since=1.0 | kind=other | int MPI_Send(int a)": "already listed",
            "MPI_Foo | since=1.0 | kind=other | int MPI_Bar(int a)": "prototype names",
            "MPI_Foo | since=one | kind=other | int MPI_Foo(int a)": "since=",
            "MPI_Foo | since=1.0 | kind=other | bytes=n:t | int MPI_Foo(int a)": "unknown parameter",
            "MPI_Foo | since=1.0 | kind=other | colour=red | int MPI_Foo(int a)": "unknown key",
            "MPI_Foo | kind=other | int MPI_Foo(int a)": "want name",
            "MPI_Foo | kind=other | fortran=yes | int MPI_Foo(int a)": "missing since",
            "MPI_Foo | since=1.0 | kind=other | bytes=a:a | int MPI_Foo(int a)": "MPI_Datatype",
            "MPI_Neighbor_alltoallw_init_long_name | since=4.0 | kind=other | "
            "int MPI_Neighbor_alltoallw_init_long_name(int a)": "too long",
        }
        nlines = len(DEF.read_text().splitlines())
        for line, msg in cases.items():
            with self.subTest(line=line):
                r = gen("--def", str(self.write_def(line + "\n")), "--check")
                self.assertEqual(r.returncode, 2)
                self.assertIn(msg, r.stderr)
                self.assertIn(f":{nlines + 1}:", r.stderr)

    def test_bad_derived_lines_are_refused(self) -> None:
        cases = {
            "MPI_Barrier_c | derive=large-count": "no count to enlarge",
            "MPI_Waitall_c | derive=large-count": "no count to enlarge",
            "MPI_Foo_c | derive=large-count": "not listed above",
            "MPI_Send_c | derive=large-count": "already listed",
            "MPI_Isend_big | derive=large-count": "named MPI_X_c",
            "MPI_Isend_c | derive=huge-count": "unknown derive",
            "MPI_Isend_c | derive=large-count | kind=other": "takes its kind",
            "MPI_Isend_c | derive=large-count | int MPI_Isend_c(int a)": "has no prototype",
            "MPI_Init_c | derive=large-count": "not a call",
            "MPI_Send_c_c | derive=large-count": "not a call that has a large-count",
        }
        nlines = len(DEF.read_text().splitlines())
        for line, msg in cases.items():
            with self.subTest(line=line):
                r = gen("--def", str(self.write_def(line + "\n")), "--check")
                self.assertEqual(r.returncode, 2)
                self.assertIn(msg, r.stderr)
                self.assertIn(f":{nlines + 1}:", r.stderr)

    def test_large_count_variants_are_derived(self) -> None:
        """Every blocking call with a count has its MPI_X_c line; the derived
        prototype has MPI_Count counts and MPI_Aint displacements, only C and
        mpi_f08 entry points, MPI-4 guard, and the MPI_Count byte helper."""
        sys.path.insert(0, str(ph.TOP / "preload"))
        import gen_wrappers as gw  # noqa: E402
        funcs = {f.name: f for f in gw.parse_def(str(DEF))}
        base = [f for f in funcs.values() if f.blocking and not f.base and f.family == "call"
                and "MPI_Datatype" in " ".join(p.ctype for p in f.params)
                and any(p.ctype == "int" and p.name.endswith("count") or
                        p.ctype == "const int *" and p.name.endswith("counts")
                        for p in f.params)]
        self.assertEqual(len(base), 29)
        for f in base:
            with self.subTest(f=f.name):
                c = funcs.get(f.name + "_c")
                self.assertIsNotNone(c)
                self.assertEqual((c.kind, c.blocking, c.base, c.since), (f.kind, True, f.name,
                                                                           (4, 0)))
        rows = [l.split("\t") for l in gen("--list").stdout.splitlines()]
        bindings = sorted(b for _, _, fn, b in rows if fn == "MPI_Gatherv_c")
        self.assertEqual(bindings, ["c", "f08", "f08"])
        names = {sym for _, sym, fn, _ in rows if fn == "MPI_Allreduce_c"}
        self.assertEqual(names, {"MPI_Allreduce_c", "mpi_allreduce_c_f08ts_",
                                 "mpi_allreduce_f08ts_large_"})
        out = self.tmp / "o"
        self.assertEqual(gen("--out", str(out)).returncode, 0)
        w = (out / "wrappers.c").read_text()
        self.assertIn("int MPI_Gatherv_c(const void *sendbuf, MPI_Count sendcount, "
                      "MPI_Datatype sendtype, void *recvbuf, const MPI_Count *recvcounts, "
                      "const MPI_Aint *displs, MPI_Datatype recvtype, int root, MPI_Comm comm)", w)
        self.assertIn("int MPI_Neighbor_alltoallw_c(const void *sendbuf, "
                      "const MPI_Count *sendcounts, const MPI_Aint *sdispls,", w)
        body = w[w.index("/* ---- MPI_Send_c "):w.index("/* ---- MPI_Bsend_c ")]
        self.assertIn("#if MP_SINCE(4, 0)", body)
        self.assertIn("mp_count_bytes(count, datatype)", body)
        self.assertIn("mp_fcount_bytes(a1, a2)", body)

    def test_one_line_adds_a_large_count_function(self) -> None:
        """A derived line after the list: MPI_Isend_c with its C and two f08
        entry points, compiled against both mpi.h (Open MPI 4.1: left out)."""
        out = self.tmp / "o"
        base = self.tmp / "base"
        self.assertEqual(gen("--out", str(base)).returncode, 0)
        r = gen("--def", str(self.write_def("MPI_Isend_c | derive=large-count\n")), "--out",
                str(out))
        self.assertEqual(r.returncode, 0, r.stderr)
        syms = (out / "front_syms.h").read_text()
        for sym in ("MPI_Isend_c", "mpi_isend_c_f08ts_", "mpi_isend_f08ts_large_"):
            self.assertIn(f'"{sym}"', syms)
        n_old = int(re.search(r"NSYMS (\d+)", (base / "front_syms.h").read_text()).group(1))
        self.assertEqual(int(re.search(r"NSYMS (\d+)", syms).group(1)), n_old + 3)
        self.assertIn('"MPI_Isend_c", "nonblocking", 0, 1', (out / "mpi_pstate_fn.h").read_text())
        for abi in ph.ABIS:
            with self.subTest(abi=abi):
                r = self.compile_wrappers(out, abi)
                self.assertEqual(r.returncode, 0, r.stderr)

    def test_one_line_adds_a_function_everywhere(self) -> None:
        line = "MPI_Comm_dup | since=1.0 | kind=blocking-coll | " \
               "int MPI_Comm_dup(MPI_Comm comm, MPI_Comm *newcomm)\n"
        out = self.tmp / "o"
        base = self.tmp / "base"
        self.assertEqual(gen("--out", str(base)).returncode, 0)
        r = gen("--def", str(self.write_def(line)), "--out", str(out))
        self.assertEqual(r.returncode, 0, r.stderr)
        syms = (out / "front_syms.h").read_text()
        for s in ("MPI_Comm_dup", "mpi_comm_dup_", "mpi_comm_dup__", "mpi_comm_dup", "MPI_COMM_DUP",
                  "mpi_comm_dup_f08_", "mpi_comm_dup_f08ts_"):
            self.assertIn(f'"{s}"', syms)
        n_old = int(re.search(r"NSYMS (\d+)", (base / "front_syms.h").read_text()).group(1))
        n_new = int(re.search(r"NSYMS (\d+)", syms).group(1))
        self.assertEqual(n_new, n_old + 7)
        self.assertIn("jmp *mpi_pstate_front_slots+%d(%%rip)" % (8 * (n_new - 1)),
                      (out / "front.S").read_text())
        self.assertIn('"MPI_Comm_dup", "blocking-coll", 1, 1', (out / "mpi_pstate_fn.h").read_text())
        for abi in ph.ABIS:
            with self.subTest(abi=abi):
                r = self.compile_wrappers(out, abi)
                self.assertEqual(r.returncode, 0, r.stderr)

    def test_compiler_checks_every_prototype(self) -> None:
        bad = ("int MPI_Send(const void *buf, int count, MPI_Datatype datatype, int dest,",
               "int MPI_Send(const void *buf, int count, MPI_Datatype datatype, long dest,")
        out = self.tmp / "o"
        self.assertEqual(gen("--def", str(self.write_def(replace=bad)), "--out", str(out)).returncode, 0)
        for abi in ph.ABIS:
            with self.subTest(abi=abi):
                r = self.compile_wrappers(out, abi)
                self.assertNotEqual(r.returncode, 0)
                self.assertIn("MPI_Send", r.stderr)
                self.assertIn("conflicting types", r.stderr)

    def test_coverage_of_the_issue(self) -> None:
        r = gen("--list")
        self.assertEqual(r.returncode, 0, r.stderr)
        rows = [l.split("\t") for l in r.stdout.splitlines()]
        funcs = {f for _, _, f, _ in rows}
        required = """Send Bsend Ssend Rsend Recv Sendrecv Sendrecv_replace Mrecv
            Barrier Bcast Gather Gatherv Scatter Scatterv Allgather Allgatherv Alltoall Alltoallv
            Alltoallw Reduce Allreduce Reduce_scatter Reduce_scatter_block Scan Exscan
            Neighbor_allgather Neighbor_allgatherv Neighbor_alltoall Neighbor_alltoallv
            Neighbor_alltoallw Wait Waitall Waitany Waitsome Test Testall Testany Testsome
            Probe Iprobe Mprobe Improbe Isend Ibsend Issend Irsend Irecv Imrecv Ibarrier Ibcast
            Igather Igatherv Iscatter Iscatterv Iallgather Iallgatherv Ialltoall Ialltoallv
            Ialltoallw Ireduce Iallreduce Ireduce_scatter Ireduce_scatter_block Iscan Iexscan
            Ineighbor_allgather Ineighbor_allgatherv Ineighbor_alltoall Ineighbor_alltoallv
            Ineighbor_alltoallw Init Init_thread Finalize Abort""".split()
        self.assertEqual({"MPI_" + n for n in required} - funcs, set())
        per_func = {}
        for _, sym, f, binding in rows:
            per_func.setdefault(f, []).append(binding)
        self.assertEqual(sorted(per_func["MPI_Waitall"]), ["c"] + ["f08"] * 2 + ["f77"] * 4)

    def test_every_wrapper_calls_the_next_definition_of_its_own_symbol(self) -> None:
        """PMPI chaining: no C wrapper calls PMPI_X itself (a tool after us
        would go blind), and each calls next[] at its own symbol's index
        (another index would call another function); every pmpi name the
        front may fall back to is its own symbol's."""
        out = self.tmp / "g"
        self.assertEqual(gen("--out", str(out)).returncode, 0)
        index = {}
        for row in gen("--list").stdout.splitlines():
            i, sym, _, binding = row.split("\t")
            index[sym] = (int(i), binding)
        text = (out / "wrappers.c").read_text()
        bodies = re.findall(r"^(?:MP_WRAPPER )?int (MPI_\w+)\((?:.|\n)*?^}", text, re.M)
        self.assertEqual(sorted(bodies), sorted(s for s, (_, b) in index.items() if b == "c"))
        for m in re.finditer(r"^(?:MP_WRAPPER )?int (MPI_\w+)\(((?:.|\n)*?)^}", text, re.M):
            name, body = m.group(1), m.group(2)
            with self.subTest(name=name):
                self.assertNotRegex(body, r"\bPMPI_(?!Type_size|Type_f2c)\w+\(")
                used = set(re.findall(r"(?:mp_next\(|next\[)(\d+)[\])]", body))
                self.assertEqual(used, {str(index[name][0])})
        pmpi = re.search(r"#define MPI_PSTATE_SYM_PMPI \\\n((?:.*\\\n)*.*)",
                         (out / "front_syms.h").read_text()).group(1)
        names = re.findall(r'(NULL|"\w+")', pmpi)
        self.assertEqual(len(names), len(index))
        for sym, (i, binding) in index.items():
            self.assertEqual(names[i], f'"P{sym}"' if binding == "c" else "NULL", sym)

    def test_front_exports_exactly_the_symbol_list(self) -> None:
        ph.build()
        r = gen("--list")
        want = {l.split("\t")[1] for l in r.stdout.splitlines()}
        nm = subprocess.run(["nm", "-D", "--defined-only", str(ph.front())], capture_output=True,
                            text=True, check=True).stdout
        got = {l.split()[-1] for l in nm.splitlines() if l.split()[1] == "T"}
        # plus the one function another copy of the front asks to skip this one
        self.assertEqual(got, want | {"mpi_pstate_front_next"})
        for abi in ph.ABIS:
            lib = ph.BUILD / "preload" / f"libmpi-pstate-{abi}.so"
            if lib.exists():
                nm = subprocess.run(["nm", "-D", "--defined-only", str(lib)], capture_output=True,
                                    text=True, check=True).stdout
                self.assertEqual([l.split()[-1] for l in nm.splitlines()],
                                 ["mpi_pstate_backend_table"])
                deps = subprocess.run(["readelf", "-d", str(lib)], capture_output=True,
                                      text=True).stdout
                self.assertNotIn("libmpi", deps)  # any library of the family will do


if __name__ == "__main__":
    unittest.main()
