# SPDX-License-Identifier: BSD-3-Clause
"""No module of the installed package reaches into another's private names
(`report._pct`, `from .whatif import _us`): a name with a leading
underscore may change with its module alone, so what another module uses
must be public.  Read from the syntax tree of every module of
epilog/mpi_pstate and its subpackages (walked recursively: relative imports
of any level, absolute ones, function-level ones) and of the project tools
that import it (bench/)."""
import ast
import unittest
from pathlib import Path
from typing import Dict, Iterator, List, Set, Tuple

TOP = Path(__file__).resolve().parents[2]
PKG = TOP / "epilog" / "mpi_pstate"


def module_names(pkg: Path = PKG) -> Set[str]:
    """Every module and subpackage name of the package, by its last part."""
    return {p.stem for p in pkg.rglob("*.py") if p.stem != "__init__"} | \
        {p.name for p in pkg.rglob("*") if p.is_dir() and (p / "__init__.py").exists()}


def ours(n: ast.ImportFrom, in_package: bool) -> bool:
    """Whether an import names the package: relative in the package, or
    absolute from mpi_pstate."""
    if n.level:
        return in_package
    return bool(n.module) and (n.module == "mpi_pstate" or n.module.startswith("mpi_pstate."))


def sibling_aliases(tree: ast.AST, in_package: bool, modules: Set[str]) -> Dict[str, str]:
    """{local name: module} of the package's modules this file imports."""
    out = {}  # type: Dict[str, str]
    for n in ast.walk(tree):
        if isinstance(n, ast.ImportFrom) and ours(n, in_package):
            for a in n.names:
                if a.name in modules:
                    out[a.asname or a.name] = a.name
        elif isinstance(n, ast.Import):
            for a in n.names:
                if a.name.startswith("mpi_pstate.") and a.asname:
                    out[a.asname] = a.name.rsplit(".", 1)[1]
    return out


def private_uses(path: Path, in_package: bool,
                 modules: Set[str] = frozenset()) -> Iterator[Tuple[int, str]]:
    modules = modules or module_names()
    tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
    aliases = sibling_aliases(tree, in_package, modules)
    for n in ast.walk(tree):
        if isinstance(n, ast.Attribute) and isinstance(n.value, ast.Name) and \
                n.value.id in aliases and n.attr.startswith("_") and \
                not n.attr.startswith("__"):
            yield n.lineno, f"{aliases[n.value.id]}.{n.attr}"
        if isinstance(n, ast.ImportFrom) and ours(n, in_package):
            for a in n.names:
                if a.name.startswith("_") and not a.name.startswith("__"):
                    yield n.lineno, f"{'.' * n.level}{n.module or ''}.{a.name}"


class PrivateNames(unittest.TestCase):

    def test_no_module_uses_another_modules_private_name(self) -> None:
        found = []  # type: List[str]
        files = [(p, True) for p in sorted(PKG.rglob("*.py"))]
        files += [(p, False) for p in sorted((TOP / "bench").rglob("*.py"))]
        self.assertTrue(any(p.parent != PKG for p, _ in files))  # the subpackages are read
        for path, in_package in files:
            for line, name in private_uses(path, in_package):
                found.append(f"{path.relative_to(TOP)}:{line}: {name}")
        self.assertEqual(found, [])

    def test_the_check_sees_a_private_use(self) -> None:
        """The check itself: a planted use is found, a public one is not, in
        a module of a subpackage as at the top."""
        import tempfile
        with tempfile.TemporaryDirectory() as d:
            pkg = Path(d) / "mpi_pstate"
            (pkg / "user").mkdir(parents=True)
            (pkg / "model").mkdir()
            for f in ("__init__.py", "user/__init__.py", "model/__init__.py",
                      "user/report.py", "model/whatif.py"):
                (pkg / f).write_text("")
            mods = module_names(pkg)
            f = pkg / "user" / "page.py"
            f.write_text("from . import report\nfrom ..model import whatif as w\n"
                         "from ..model.whatif import _bounds\n"
                         "def g():\n    from mpi_pstate.user import report as r\n"
                         "    return r._cell(1)\n"
                         "x = report._pct(1) + w._us(2) + report.percent(3)\n")
            self.assertEqual(sorted(name for _, name in private_uses(f, True, mods)),
                             ["..model.whatif._bounds", "report._cell", "report._pct",
                              "whatif._us"])
            g = Path(d) / "tool.py"  # a tool of bench/: absolute imports
            g.write_text("from mpi_pstate.model import summary as summ\nsumm._r(1)\n")
            self.assertEqual([name for _, name in private_uses(g, False, mods)], [])
            g.write_text("from mpi_pstate.user import report as summ\nsumm._r(1)\n")
            self.assertEqual([name for _, name in private_uses(g, False, mods)], ["report._r"])


if __name__ == "__main__":
    unittest.main()
