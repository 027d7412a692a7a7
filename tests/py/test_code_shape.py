# SPDX-License-Identifier: BSD-3-Clause
"""The shape the next engineer relies on, checked on every product source
file (agent/, spank/, preload/, common/, epilog/; tests and generated files
excepted):

- no circle among the C files: neither in what headers include nor in who
  calls whom (a function an exported name is defined in one file; a file
  that calls it depends on that file);
- no file over 700 lines;
- every .c file opens, after its SPDX line, with a comment that says what
  it is.

Each check also runs on a planted tree, where it must fail."""
import re
import subprocess
import tempfile
import unittest
from pathlib import Path
from typing import Dict, List, Set

TOP = Path(__file__).resolve().parents[2]
PRODUCT = ("agent", "spank", "preload", "common", "epilog")
MAX_LINES = 700
# Written by a generator, checked against it by its own test.
GENERATED = {"epilog/mpi_pstate/agent_args.py"}

DEF = re.compile(r"^(?!static\b)[A-Za-z_][\w \t*]*?\b(mpi_pstate_\w+)\s*\([^;{]*$", re.M)
CALL = re.compile(r"\b(mpi_pstate_\w+)\s*\(")
INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.M)
COMMENT = re.compile(r"/\*.*?\*/", re.S)


def product_files(top: Path) -> List[Path]:
    """Tracked files where git knows the tree, else every file."""
    try:
        out = subprocess.run(["git", "ls-files", "--", *PRODUCT], cwd=str(top),
                             stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                             universal_newlines=True, timeout=60, check=True).stdout
        paths = [top / p for p in out.splitlines()]
    except (OSError, subprocess.CalledProcessError):
        paths = [p for d in PRODUCT for p in (top / d).rglob("*") if p.is_file()]
    return [p for p in paths if p.is_file() and "tests" not in p.relative_to(top).parts
            and str(p.relative_to(top)) not in GENERATED]


def cycles(edges: Dict[str, Set[str]]) -> List[List[str]]:
    """The strongly connected components of more than one node (Tarjan)."""
    index, low, stack, on, out = {}, {}, [], set(), []  # type: ignore[var-annotated]

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in sorted(edges.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    for v in sorted(edges):
        if v not in index:
            visit(v)
    return out


def call_graph(files: List[Path], top: Path) -> Dict[str, Set[str]]:
    text = {str(f.relative_to(top)): COMMENT.sub("", f.read_text(errors="replace"))
            for f in files if f.suffix == ".c"}
    where = {}  # type: Dict[str, str]
    for name, t in text.items():
        for m in DEF.finditer(t):
            where.setdefault(m.group(1), name)
    return {name: {where[m.group(1)] for m in CALL.finditer(t)
                   if where.get(m.group(1), name) != name} for name, t in text.items()}


def include_graph(files: List[Path], top: Path) -> Dict[str, Set[str]]:
    headers = {f.name: str(f.relative_to(top)) for f in files if f.suffix == ".h"}
    return {str(f.relative_to(top)): {headers[i] for i in INCLUDE.findall(f.read_text())
                                      if i in headers and headers[i] != str(f.relative_to(top))}
            for f in files if f.suffix == ".h"}


def too_long(files: List[Path], top: Path) -> List[str]:
    out = []
    for f in files:
        if f.suffix in (".c", ".h", ".py") or f.name.startswith("mpi-pstate"):
            n = f.read_bytes().count(b"\n")
            if n > MAX_LINES:
                out.append("%s: %d lines" % (f.relative_to(top), n))
    return out


def without_opening(files: List[Path], top: Path) -> List[str]:
    out = []
    for f in files:
        if f.suffix != ".c":
            continue
        lines = f.read_text().splitlines()
        rest = [ln for ln in lines[1:] if ln.strip()]
        if not lines or "SPDX-License-Identifier" not in lines[0] or not rest or \
                not rest[0].lstrip().startswith("/*") or len(rest[0].strip()) < 12:
            out.append(str(f.relative_to(top)))
    return out


class CodeShape(unittest.TestCase):
    def test_no_call_circle_between_c_files(self) -> None:
        self.assertEqual(cycles(call_graph(product_files(TOP), TOP)), [])

    def test_no_include_circle(self) -> None:
        self.assertEqual(cycles(include_graph(product_files(TOP), TOP)), [])

    def test_no_product_file_over_700_lines(self) -> None:
        self.assertEqual(too_long(product_files(TOP), TOP), [])

    def test_every_c_file_says_what_it_is(self) -> None:
        self.assertEqual(without_opening(product_files(TOP), TOP), [])


class Planted(unittest.TestCase):
    """Each check finds what it is for."""

    def tree(self, files: Dict[str, str]) -> Path:
        d = Path(tempfile.mkdtemp(prefix="mpst-shape-"))
        self.addCleanup(subprocess.run, ["rm", "-rf", str(d)])
        for name, text in files.items():
            (d / name).parent.mkdir(parents=True, exist_ok=True)
            (d / name).write_text(text)
        return d

    def test_a_call_circle_is_found(self) -> None:
        d = self.tree({
            "agent/hw.c": "/* x */\nint mpi_pstate_a_hw(void)\n{\n return mpi_pstate_u_b(); }\n",
            "agent/uncore.c": "/* x */\nint mpi_pstate_u_b(void)\n{\n return 0; }\n"
                              "int mpi_pstate_u_c(void)\n{\n return mpi_pstate_a_hw(); }\n"})
        self.assertEqual(cycles(call_graph(product_files(d), d)),
                         [["agent/hw.c", "agent/uncore.c"]])

    def test_an_include_circle_is_found(self) -> None:
        d = self.tree({"common/a.h": '#include "b.h"\n', "common/b.h": '#include "a.h"\n',
                       "common/c.h": '#include "a.h"\n'})
        self.assertEqual(cycles(include_graph(product_files(d), d)),
                         [["common/a.h", "common/b.h"]])

    def test_a_long_file_and_a_bare_c_file_are_found(self) -> None:
        d = self.tree({"spank/long.py": "x = 1\n" * 701,
                       "spank/bare.c": "/* SPDX-License-Identifier: BSD-3-Clause */\n#include <x.h>\n",
                       "spank/tests/test_long.c": "x\n" * 900})
        self.assertEqual(too_long(product_files(d), d), ["spank/long.py: 701 lines"])
        self.assertEqual(without_opening(product_files(d), d), ["spank/bare.c"])


if __name__ == "__main__":
    unittest.main()
