# SPDX-License-Identifier: BSD-3-Clause
"""The Python package's import graph, read from the syntax tree of every
module of epilog/mpi_pstate (imports at any level, relative or absolute,
inside functions too):

- no module imports itself through others (no circle);
- a role's subpackage imports only its own modules and those of the roles
  below it: core < model < site < user (agent_args, generated from the C
  side's tables, and the package's __init__ count as core): the node
  Epilog never loads the user's report, and the pure parts load no role.

Each check also runs on a planted package, where it must fail."""
import ast
import tempfile
import unittest
from pathlib import Path
from typing import Dict, List, Set

import test_code_shape

TOP = Path(__file__).resolve().parents[2]
PKG = TOP / "epilog" / "mpi_pstate"
ROLES = ("core", "model", "site", "user")


def module_of(path: Path, pkg: Path) -> str:
    """The dotted name of a module below the package, without the package's."""
    rel = path.relative_to(pkg).with_suffix("")
    parts = rel.parts[:-1] if rel.name == "__init__" else rel.parts
    return ".".join(parts)


def modules(pkg: Path) -> Dict[str, Path]:
    """{dotted name: file} of every module and subpackage ('' is the package)."""
    return {module_of(p, pkg): p for p in sorted(pkg.rglob("*.py"))}


def imports(path: Path, pkg: Path, known: Set[str]) -> Set[str]:
    """The package's modules one file imports."""
    me = module_of(path, pkg)
    here = me.split(".") if me else []
    if path.name != "__init__.py":
        here = here[:-1]  # a module's relative imports start at its package
    out = set()  # type: Set[str]

    def add(name: str) -> None:
        # the deepest known module the name lies in ("core.parse.printable" -> "core.parse")
        parts = name.split(".") if name else []
        while parts and ".".join(parts) not in known:
            parts.pop()
        out.add(".".join(parts))

    for n in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(n, ast.Import):
            for a in n.names:
                if a.name == "mpi_pstate" or a.name.startswith("mpi_pstate."):
                    add(a.name[len("mpi_pstate."):] if "." in a.name else "")
        elif isinstance(n, ast.ImportFrom):
            if n.level:
                if n.level - 1 > len(here):
                    continue
                base = here[:len(here) - (n.level - 1)] + (n.module.split(".") if n.module else [])
            elif n.module == "mpi_pstate" or (n.module or "").startswith("mpi_pstate."):
                base = n.module.split(".")[1:]
            else:
                continue
            for a in n.names:
                full = ".".join(base + [a.name])
                add(full if full in known else ".".join(base))
    out.discard(me)
    return out


def graph(pkg: Path) -> Dict[str, Set[str]]:
    mods = modules(pkg)
    return {m: imports(p, pkg, set(mods)) for m, p in mods.items()}


def role(module: str) -> int:
    """A module's rank: its subpackage's place in ROLES (core when outside one)."""
    top = module.split(".")[0]
    return ROLES.index(top) if top in ROLES else 0


def upward(edges: Dict[str, Set[str]]) -> List[str]:
    """The imports of a higher role by a lower one."""
    return sorted(f"{a} imports {b}" for a, bs in edges.items() for b in bs
                  if role(b) > role(a))


def plant(root: Path, files: Dict[str, str]) -> Path:
    pkg = root / "mpi_pstate"
    for rel, text in files.items():
        f = pkg / rel
        f.parent.mkdir(parents=True, exist_ok=True)
        f.write_text(text)
    for d in [pkg] + [p for p in pkg.rglob("*") if p.is_dir()]:
        (d / "__init__.py").touch()
    return pkg


class ImportGraph(unittest.TestCase):
    def test_every_module_is_read(self) -> None:
        g = graph(PKG)
        self.assertIn("site.node_epilog", g)
        self.assertIn("core.parse", g["site.node_epilog"])
        self.assertIn("model.powermodel", g["site.node_epilog"])

    def test_no_circle(self) -> None:
        self.assertEqual(test_code_shape.cycles(graph(PKG)), [])

    def test_roles_import_only_downward(self) -> None:
        self.assertEqual(upward(graph(PKG)), [])

    def test_the_entry_script_loads_no_user_module_for_slurm(self) -> None:
        # what Slurm, cron and systemd run starts at site/entry.py and site/node_prune.py
        g = graph(PKG)
        for start in ("site.entry", "site.node_prune"):
            seen, todo = set(), [start]
            while todo:
                m = todo.pop()
                if m not in seen:
                    seen.add(m)
                    todo += g.get(m, ())
            self.assertEqual(sorted(m for m in seen if role(m) == ROLES.index("user")), [],
                             start)


class TheCheckCanFail(unittest.TestCase):
    def test_a_planted_circle_is_found(self) -> None:
        with tempfile.TemporaryDirectory() as d:
            pkg = plant(Path(d), {
                "core/a.py": "from . import b\n",
                "core/b.py": "def f():\n    from .c import x\n",
                "core/c.py": "from mpi_pstate.core import a\nx = 1\n",
                "core/d.py": "from . import a\n"})
            self.assertEqual(test_code_shape.cycles(graph(pkg)), [["core.a", "core.b", "core.c"]])

    def test_a_planted_upward_import_is_found(self) -> None:
        with tempfile.TemporaryDirectory() as d:
            pkg = plant(Path(d), {
                "core/a.py": "from ..site import s\n",
                "model/m.py": "from ..core import a\nimport mpi_pstate.user.u\n",
                "site/s.py": "from ..model import m\nfrom .. import VERSION\n",
                "user/u.py": "from ..site import s\n"})
            self.assertEqual(upward(graph(pkg)), ["core.a imports site.s",
                                                  "model.m imports user.u"])


if __name__ == "__main__":
    unittest.main()
