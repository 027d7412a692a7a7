# SPDX-License-Identifier: BSD-3-Clause
"""No module of the package reads a name bound nowhere in it.

The node Epilog catches every exception so that a failing Epilog never
drains a node; a name left behind when a function moves to another
module is then a NameError nobody sees (the node's gauges stopped being
written that way once).  Read from the syntax tree: a name a module
loads must be bound somewhere in it (an import, a definition, a
parameter, an assignment or loop target, an `except ... as`) or be a
builtin.  A name bound only in another function of the same module
passes: the check is cheap and has no false alarm, and the suites catch
the rest.  It also runs on a planted module, where it must fail."""
import ast
import builtins
import unittest
from pathlib import Path
from typing import List, Set

TOP = Path(__file__).resolve().parents[2]
PKG = TOP / "epilog" / "mpi_pstate"
MODULE_NAMES = {"__file__", "__name__", "__doc__", "__spec__", "__path__", "__package__"}


def bound(tree: ast.AST) -> Set[str]:
    """Every name the module binds, in any scope."""
    out = set()  # type: Set[str]
    for n in ast.walk(tree):
        if isinstance(n, ast.Name) and isinstance(n.ctx, (ast.Store, ast.Del)):
            out.add(n.id)
        elif isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            out.add(n.name)
        elif isinstance(n, ast.arg):
            out.add(n.arg)
        elif isinstance(n, (ast.Import, ast.ImportFrom)):
            out |= {(a.asname or a.name).split(".")[0] for a in n.names}
        elif isinstance(n, ast.ExceptHandler) and n.name:
            out.add(n.name)
        elif isinstance(n, (ast.Global, ast.Nonlocal)):
            out |= set(n.names)
    return out


def unbound(text: str, name: str = "<module>") -> List[str]:
    """'line: name' of every load of a name the module never binds."""
    tree = ast.parse(text, name)
    known = bound(tree) | set(dir(builtins)) | MODULE_NAMES
    return sorted({f"{n.lineno}: {n.id}" for n in ast.walk(tree)
                   if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)
                   and n.id not in known})


class UnboundNames(unittest.TestCase):
    def test_every_module_binds_what_it_reads(self) -> None:
        found = []
        for p in sorted(PKG.rglob("*.py")):
            found += [f"{p.relative_to(TOP)}:{x}" for x in unbound(p.read_text(), str(p))]
        self.assertEqual(found, [])

    def test_the_entry_script_too(self) -> None:
        self.assertEqual(unbound((TOP / "epilog" / "mpi-pstate").read_text()), [])

    def test_a_planted_module_fails(self) -> None:
        text = ("import os\nfrom . import livesteps\n\n"
                "def f(a, *rest, k=1):\n"
                "    try:\n        x = [y for y in rest]\n    except OSError as e:\n"
                "        return e\n"
                "    return os.sep, a, k, x, livesteps.agent_pid, agent_checker(a), len\n")
        self.assertEqual(unbound(text), ["9: agent_checker"])


if __name__ == "__main__":
    unittest.main()
