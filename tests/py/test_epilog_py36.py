# SPDX-License-Identifier: BSD-3-Clause
"""Every Python file `make install` installs must run on Python 3.6 (RHEL
8's python3): a SyntaxError or a missing 3.7+ function there fails the
node Epilog (and Slurm drains the node) or the `mpi-pstate` command.

The files are those tests/py36-lint finds in `make -n install` (the
package, the entry script).  No 3.6 interpreter is at hand, so two checks
stand in for one, each run on every file: vermin (tests/py36-lint, from
PyPI into a cached venv; skipped only when PyPI cannot be reached), and,
so that something still guards without it, a mechanical one here: the
grammar with ast.parse(feature_version=(3, 6)) and, since that checks only
the grammar, a list of what 3.6 lacks that the grammar allows: postponed
annotations, builtin generics (list[int]), module generics
(os.PathLike[str]) and X | Y in annotations evaluated at definition, and
the 3.7+ modules, functions and keywords below (docs/security.md, "Python
3.6").  Both are shown to catch what they look for."""
import ast
import re
import subprocess
import sys
import tempfile
import unittest
from pathlib import Path
from typing import List, Set

TOP = Path(__file__).resolve().parents[2]
PKG = TOP / "epilog" / "mpi_pstate"
LINT = TOP / "tests" / "py36-lint"
# What Slurm, cron and systemd run: site/entry.py and (`mpi-pstate node-prune`,
# root's timer) site/node_prune.py
ENTRY = ["site.entry", "site.node_prune"]

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
             ("os", "register_at_fork"), ("time", "thread_time"), ("time", "thread_time_ns"),
             ("time", "perf_counter_ns"), ("time", "process_time_ns"),
             ("statistics", "fmean"), ("statistics", "quantiles"),
             ("statistics", "geometric_mean"), ("statistics", "multimode"),
             ("signal", "strsignal"), ("signal", "valid_signals")}
NEW_METHODS = {"removeprefix", "removesuffix", "fromisoformat", "is_relative_to",
               "with_stem", "readlink", "hardlink_to", "bit_count"}
NEW_KEYWORDS = {("run", "capture_output"), ("run", "text"), ("Popen", "text"),
                ("check_output", "text"), ("open", "newline_translation"),
                ("mkdir", "exist_ok_parents")}
BUILTIN_GENERICS = {"list", "dict", "tuple", "set", "frozenset", "type"}


def lint(*args: str, timeout: float = 900) -> "subprocess.CompletedProcess[str]":
    return subprocess.run([sys.executable, str(LINT)] + list(args), stdout=subprocess.PIPE,
                          stderr=subprocess.STDOUT, universal_newlines=True, timeout=timeout)


def installed() -> List[Path]:
    """Every Python file `make install` installs (tests/py36-lint --list)."""
    r = lint("--list", timeout=120)
    if r.returncode != 0:
        raise AssertionError("tests/py36-lint --list exited %d:\n%s" % (r.returncode, r.stdout))
    return [TOP / f for f in r.stdout.split()]


def module_file(m: str) -> Path:
    """The file of a module of the package ("site.entry"; "" and "core": the
    packages' __init__.py)."""
    p = PKG.joinpath(*m.split(".")) if m else PKG
    return p / "__init__.py" if p.is_dir() else p.with_suffix(".py")


def closure() -> List[Path]:
    """The package modules reached from ENTRY by its relative imports (any
    level, function-level ones included) and the packages holding them, in
    the order found."""
    seen: List[str] = []
    todo = list(ENTRY)
    while todo:
        m = todo.pop()
        if m in seen:
            continue
        seen.append(m)
        parts = m.split(".") if m else []
        todo += [".".join(parts[:i]) for i in range(len(parts))]  # its packages
        is_pkg = module_file(m).name == "__init__.py"
        tree = ast.parse(module_file(m).read_text())
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and node.level >= 1:
                base = parts if is_pkg else parts[:-1]
                base = base[:len(base) - (node.level - 1)]
                if node.module:
                    base = base + node.module.split(".")
                todo.append(".".join(base))
                for a in node.names:
                    sub = ".".join(base + [a.name])
                    if module_file(sub).exists():
                        todo.append(sub)
    return [module_file(m) for m in seen]


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
        # os.PathLike[str], subprocess.CompletedProcess[str]: 3.9
        if isinstance(node, ast.Subscript) and isinstance(node.value, ast.Attribute) and \
                id(node) in annotations and not (isinstance(node.value.value, ast.Name) and
                                                 node.value.value.id == "typing"):
            out.append(f"{where(node)}: .{node.value.attr}[...] (3.9) in an annotation")
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.BitOr) and \
                id(node) in annotations:
            out.append(f"{where(node)}: X | Y in an annotation (3.10)")
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and \
                id(node) in annotations and re.search(r"\|", node.value):
            out.append(f"{where(node)}: X | Y in a string annotation (typing.get_type_hints)")
    return out


class Python36(unittest.TestCase):
    """The mechanical check, on every installed Python file."""

    @classmethod
    def setUpClass(cls) -> None:
        cls.files = installed()

    def test_installed_is_the_package_and_its_script(self) -> None:
        names = {p.relative_to(TOP).as_posix() for p in self.files}
        self.assertIn("epilog/mpi-pstate", names)
        for p in closure() + [PKG / "user" / "command.py", PKG / "user" / "report.py",
                              PKG / "user" / "launcher.py", PKG / "model" / "calibrate.py",
                              PKG / "core" / "audit.py"]:
            self.assertIn(p.relative_to(TOP).as_posix(), names)
        self.assertNotIn("bench/eval/evaluate.py", names)  # the project's tool, not installed
        # every module of the package and its subpackages, nothing else of it
        self.assertEqual(sorted(PKG.rglob("*.py")),
                         sorted(p for p in self.files if PKG in p.parents))

    def test_the_closure_is_what_slurm_runs(self) -> None:
        names = {p.relative_to(PKG).as_posix() for p in closure()}
        for m in ("site/node_epilog.py", "site/ctld.py", "site/spool.py",
                  "core/noderecord.py", "site/rankfigures.py", "core/safeio.py",
                  "core/siteconf.py", "core/slurm.py", "site/pending.py", "site/node_prune.py",
                  "__init__.py", "site/__init__.py"):
            self.assertIn(m, names)
        # the Epilog does not pay for importing the user commands
        self.assertEqual([m for m in names if m.startswith("user/")], [])

    def test_every_installed_module_is_python_36(self) -> None:
        found = []  # type: List[str]
        for p in self.files:
            found += problems(p)
        self.assertEqual(found, [])

    def test_the_check_catches_what_it_says(self) -> None:
        tmp = Path(self.id().replace(".", "_") + ".py")
        samples = {
            "from __future__ import annotations\n": "__future__",
            "import dataclasses\n": "dataclasses",
            "def f(x: list[int]) -> None: pass\n": "list[...]",
            "import os\ndef f(x: os.PathLike[str]) -> None: pass\n": "in an annotation",
            "def f(x: 'int | None') -> None: pass\n": "string annotation",
            "def f(x: int | None) -> None: pass\n": "X | Y",
            "import subprocess\nsubprocess.run(['x'], capture_output=True)\n": "capture_output",
            "import subprocess\nsubprocess.run(['x'], text=True)\n": "text=",
            "import datetime\ndatetime.datetime.fromisoformat('x')\n": "fromisoformat",
            "import time\ntime.time_ns()\n": "time.time_ns",
            "import time\ntime.thread_time()\n": "time.thread_time",
            "import math\nmath.isqrt(4)\n": "math.isqrt",
            "'abc'.removeprefix('a')\n": "removeprefix",
            "if (n := 1): pass\n": "grammar",
            "def f(a, /): pass\n": "grammar",
        }
        with tempfile.TemporaryDirectory() as d:
            for src, what in samples.items():
                p = Path(d) / tmp.name
                p.write_text(src)
                with self.subTest(src=src):
                    got = problems(p)
                    self.assertTrue(got and any(what in g for g in got), (src, got))
        with tempfile.TemporaryDirectory() as d:  # and lets 3.6 code through
            p = Path(d) / tmp.name
            p.write_text("from typing import List, Optional\nimport typing\n"
                         "def f(x: List[int], y: 'Optional[int]', z: typing.Dict[str, int]"
                         ") -> None:\n    print(f'{x}', {1} | {2})\n")
            self.assertEqual(problems(p), [])


class Vermin(unittest.TestCase):
    """tests/py36-lint: vermin on every installed Python file."""

    @classmethod
    def setUpClass(cls) -> None:
        # the first run installs vermin into its venv
        cls.run_ = lint()
        if cls.run_.returncode == 3:
            raise unittest.SkipTest("vermin cannot be installed here (PyPI not reachable, "
                                    "or no venv support): " +
                                    cls.run_.stdout.strip().splitlines()[0])

    def test_no_installed_file_needs_more_than_python_36(self) -> None:
        self.assertEqual(self.run_.returncode, 0, self.run_.stdout)
        self.assertRegex(self.run_.stdout, r"py36-lint: \d+ file\(s\), no violation")

    def test_vermin_names_each_violation(self) -> None:
        samples = {
            "future.py": ("from __future__ import annotations\n", "'__future__.annotations'"),
            "dc.py": ("import dataclasses\n", "'dataclasses' module"),
            "generic.py": ("def f(x: list[int]) -> None: pass\n", "list[..]"),
            "isqrt.py": ("import math\nmath.isqrt(4)\n", "'math.isqrt'"),
            "run.py": ("import subprocess\nsubprocess.run(['x'], capture_output=True)\n",
                       "capture_output"),
            "walrus.py": ("if (n := 1): pass\n", "named expressions"),
            "fine.py": ("from typing import List\ndef f(x: List[int]) -> None:\n"
                        "    print(f'{x}')\n", None),
        }
        with tempfile.TemporaryDirectory() as d:
            for name, (src, _) in samples.items():
                (Path(d) / name).write_text(src)
            r = lint(*(str(Path(d) / n) for n in sorted(samples)))
        self.assertEqual(r.returncode, 1, r.stdout)
        lines = r.stdout.splitlines()
        for name, (_, what) in samples.items():
            mine = [ln for ln in lines if "/" + name + ":" in ln]
            with self.subTest(name=name):
                if what is None:
                    self.assertEqual(mine, [])
                else:
                    self.assertTrue(any(what in ln for ln in mine), (name, r.stdout))
                    self.assertRegex(mine[0], r"/%s:\d+: " % re.escape(name))


if __name__ == "__main__":
    unittest.main()
