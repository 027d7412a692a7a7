# SPDX-License-Identifier: BSD-3-Clause
"""The code Slurm, cron and systemd run (node Epilog, EpilogSlurmctld, flush,
prune) must run on Python 3.6 (RHEL 8's python3): a SyntaxError or a
missing 3.7+ function there fails the Epilog, and Slurm drains the node.

No 3.6 interpreter is at hand, so the check is mechanical, on every module
the `mpi-pstate` script reaches for those commands (rootcli's imports,
followed): the grammar with ast.parse(feature_version=(3, 6)), and, since
that checks only the grammar, a list of what 3.6 lacks that the grammar
allows: postponed annotations, builtin generics (list[int]) and X | Y in
annotations evaluated at definition, and the 3.7+ modules, functions and
keywords below (docs/security.md, "Python 3.6")."""
import ast
import re
import unittest
from pathlib import Path
from typing import List, Set

TOP = Path(__file__).resolve().parents[2]
PKG = TOP / "epilog" / "mpi_pstate"
ENTRY = ["rootcli", "nodeprune"]  # nodeprune: `mpi-pstate node-prune` (root, timer)
EXTRA = [TOP / "epilog" / "mpi-pstate"]

# 3.7+ (and later) names, as module.attribute or module
NEW_MODULES = {"dataclasses", "contextvars", "importlib.resources", "importlib.metadata",
               "graphlib", "zoneinfo", "tomllib"}
NEW_ATTRS = {("datetime", "fromisoformat"), ("time", "time_ns"), ("time", "monotonic_ns"),
             ("math", "prod"), ("math", "isqrt"), ("math", "dist"), ("math", "comb"),
             ("math", "perm"), ("shlex", "join"), ("os", "memfd_create"),
             ("os", "pidfd_open"), ("os", "waitstatus_to_exitcode"), ("functools", "cache"),
             ("functools", "cached_property"), ("contextlib", "nullcontext"),
             ("asyncio", "run"), ("sys", "breakpointhook"), ("typing", "Literal"),
             ("typing", "Protocol"), ("typing", "TypedDict"), ("typing", "Final"),
             ("os", "register_at_fork"), ("subprocess", "CompletedProcess[")}
NEW_METHODS = {"removeprefix", "removesuffix", "fromisoformat", "is_relative_to",
               "with_stem", "readlink", "hardlink_to", "bit_count"}
NEW_KEYWORDS = {("run", "capture_output"), ("run", "text"), ("Popen", "text"),
                ("check_output", "text"), ("open", "newline_translation"),
                ("mkdir", "exist_ok_parents")}
BUILTIN_GENERICS = {"list", "dict", "tuple", "set", "frozenset", "type"}


def closure() -> List[Path]:
    """The package modules reached from ENTRY by `from . import x` and
    `from .x import y`, in the order found."""
    seen: List[str] = []
    todo = list(ENTRY)
    while todo:
        m = todo.pop()
        if m in seen:
            continue
        seen.append(m)
        tree = ast.parse((PKG / f"{m}.py").read_text())
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and node.level == 1:
                if node.module:
                    todo.append(node.module.split(".")[0])
                else:
                    todo.extend(a.name for a in node.names)
    return [PKG / "__init__.py"] + [PKG / f"{m}.py" for m in seen]


def problems(path: Path) -> List[str]:
    text = path.read_text()
    out: List[str] = []
    try:
        tree = ast.parse(text, str(path), feature_version=(3, 6))
    except SyntaxError as e:
        return [f"{path.name}:{e.lineno}: not Python 3.6 grammar: {e.msg}"]
    where = lambda n: f"{path.name}:{getattr(n, 'lineno', '?')}"  # noqa: E731
    annotations: Set[int] = set()
    for node in ast.walk(tree):
        for ann in ([node.annotation] if isinstance(node, (ast.arg, ast.AnnAssign))
                    and node.annotation is not None else []) + \
                ([node.returns] if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))
                 and node.returns is not None else []):
            for sub in ast.walk(ann):
                annotations.add(id(sub))
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module == "__future__":
            for a in node.names:
                if a.name == "annotations":
                    out.append(f"{where(node)}: from __future__ import annotations (3.7)")
        if isinstance(node, ast.Import):
            for a in node.names:
                if a.name in NEW_MODULES:
                    out.append(f"{where(node)}: import {a.name} (3.7+)")
        if isinstance(node, ast.ImportFrom) and node.module in NEW_MODULES:
            out.append(f"{where(node)}: from {node.module} import (3.7+)")
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            for a in node.names:
                if (node.module, a.name) in NEW_ATTRS:
                    out.append(f"{where(node)}: {node.module}.{a.name} (3.7+)")
        if isinstance(node, ast.Attribute):
            if isinstance(node.value, ast.Name) and (node.value.id, node.attr) in NEW_ATTRS:
                out.append(f"{where(node)}: {node.value.id}.{node.attr} (3.7+)")
            # Path.readlink is 3.9; os.readlink has always been there
            elif node.attr in NEW_METHODS and not (
                    isinstance(node.value, ast.Name) and node.value.id == "os"):
                out.append(f"{where(node)}: .{node.attr}() (3.8+)")
        if isinstance(node, ast.Call):
            fn = node.func.attr if isinstance(node.func, ast.Attribute) else \
                node.func.id if isinstance(node.func, ast.Name) else ""
            for kw in node.keywords:
                if (fn, kw.arg) in NEW_KEYWORDS:
                    out.append(f"{where(node)}: {fn}({kw.arg}=) (3.7)")
        if isinstance(node, ast.Subscript) and isinstance(node.value, ast.Name) and \
                node.value.id in BUILTIN_GENERICS:
            out.append(f"{where(node)}: {node.value.id}[...] (3.9) evaluated at definition")
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.BitOr) and \
                id(node) in annotations:
            out.append(f"{where(node)}: X | Y in an annotation (3.10)")
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and \
                id(node) in annotations and re.search(r"\|", node.value):
            out.append(f"{where(node)}: X | Y in a string annotation (typing.get_type_hints)")
    return out


class Python36(unittest.TestCase):
    def test_the_closure_is_what_slurm_runs(self) -> None:
        names = {p.stem for p in closure()}
        for m in ("node", "ctld", "spool", "noderec", "slots", "safeio", "config", "slurm",
                  "pending", "nodeprune"):
            self.assertIn(m, names)
        self.assertNotIn("cli", names)  # the user-facing commands may use newer Python
        self.assertNotIn("report", names)

    def test_every_module_slurm_runs_is_python_36(self) -> None:
        found = []
        for p in closure() + EXTRA:
            found += problems(p)
        self.assertEqual(found, [])

    def test_the_check_catches_what_it_says(self) -> None:
        tmp = Path(self.id().replace(".", "_") + ".py")
        samples = {
            "from __future__ import annotations\n": "__future__",
            "import dataclasses\n": "dataclasses",
            "def f(x: list[int]) -> None: pass\n": "list[...]",
            "def f(x: 'int | None') -> None: pass\n": "string annotation",
            "def f(x: int | None) -> None: pass\n": "X | Y",
            "import subprocess\nsubprocess.run(['x'], capture_output=True)\n": "capture_output",
            "import subprocess\nsubprocess.run(['x'], text=True)\n": "text=",
            "import datetime\ndatetime.datetime.fromisoformat('x')\n": "fromisoformat",
            "import time\ntime.time_ns()\n": "time.time_ns",
            "'abc'.removeprefix('a')\n": "removeprefix",
            "if (n := 1): pass\n": "grammar",
            "def f(a, /): pass\n": "grammar",
        }
        import tempfile
        with tempfile.TemporaryDirectory() as d:
            for src, what in samples.items():
                p = Path(d) / tmp.name
                p.write_text(src)
                with self.subTest(src=src):
                    got = problems(p)
                    self.assertTrue(got and any(what in g for g in got), (src, got))


if __name__ == "__main__":
    unittest.main()
