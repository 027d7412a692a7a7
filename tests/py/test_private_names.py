# SPDX-License-Identifier: BSD-3-Clause
"""No module of the installed package reaches into another's private names
(`report._pct`, `from .whatif import _us`): a name with a leading
underscore may change with its module alone, so what another module uses
must be public.  Read from the syntax tree of every module of
epilog/mpi_pstate and of the project tools that import it (bench/)."""
import ast
import unittest
from pathlib import Path
from typing import Dict, Iterator, List, Tuple

TOP = Path(__file__).resolve().parents[2]
PKG = TOP / "epilog" / "mpi_pstate"
MODULES = {p.stem for p in PKG.glob("*.py")} - {"__init__"}


def sibling_aliases(tree: ast.AST, in_package: bool) -> Dict[str, str]:
    """{local name: module} of the package's modules this file imports."""
    out = {}  # type: Dict[str, str]
    for n in ast.walk(tree):
        if isinstance(n, ast.ImportFrom):
            pkg = (n.level == 1 and in_package and not n.module) or n.module == "mpi_pstate"
            if pkg:
                for a in n.names:
                    if a.name in MODULES:
                        out[a.asname or a.name] = a.name
    return out


def private_uses(path: Path, in_package: bool) -> Iterator[Tuple[int, str]]:
    tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
    aliases = sibling_aliases(tree, in_package)
    for n in ast.walk(tree):
        if isinstance(n, ast.Attribute) and isinstance(n.value, ast.Name) and \
                n.value.id in aliases and n.attr.startswith("_") and \
                not n.attr.startswith("__"):
            yield n.lineno, f"{aliases[n.value.id]}.{n.attr}"
        if isinstance(n, ast.ImportFrom) and n.module and \
                (n.module.split(".")[-1] in MODULES) and (n.level == 1 or
                                                         n.module.startswith("mpi_pstate.")):
            for a in n.names:
                if a.name.startswith("_") and not a.name.startswith("__"):
                    yield n.lineno, f"{n.module}.{a.name}"


class PrivateNames(unittest.TestCase):

    def test_no_module_uses_another_modules_private_name(self) -> None:
        found = []  # type: List[str]
        files = [(p, True) for p in sorted(PKG.glob("*.py"))]
        files += [(p, False) for p in sorted((TOP / "bench").rglob("*.py"))]
        for path, in_package in files:
            for line, name in private_uses(path, in_package):
                found.append(f"{path.relative_to(TOP)}:{line}: {name}")
        self.assertEqual(found, [])

    def test_the_check_sees_a_private_use(self) -> None:
        """The check itself: a planted use is found, a public one is not."""
        import tempfile
        with tempfile.TemporaryDirectory() as d:
            f = Path(d) / "m.py"
            f.write_text("from . import report, whatif as w\nx = report._pct(1) + w._us(2)"
                         " + report.percent(3)\n")
            self.assertEqual(sorted(name for _, name in private_uses(f, True)),
                             ["report._pct", "whatif._us"])


if __name__ == "__main__":
    unittest.main()
