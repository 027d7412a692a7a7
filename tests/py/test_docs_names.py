# SPDX-License-Identifier: BSD-3-Clause
"""The documents name only what exists in the code.

docs/*.md, man/* and README.md are scanned for three kinds of code names,
and each must exist in the tree:

* C and Python identifiers of the project, `mpi_pstate_*` and
  `MPI_PSTATE_*` (functions, macros, variables, Prometheus metrics): the
  name must occur in a source file (C, headers, .def tables, Python, build
  and shell files), or be made by the code: an X-macro's `##` paste
  expanded with every invocation's argument (`MPI_PSTATE_OPT_##ID` over
  common/options.def), preload/gen_wrappers.py's `MPI_PSTATE_FN_<NAME>` for
  every line of preload/mpi_functions.def, metrics.py's
  `mpi_pstate_job_<name>` for every entry of its JOB_METRICS.  A name
  written with `*` or a `<placeholder>` (`mpi_pstate_placement_cpulist_*`,
  `MPI_PSTATE_OPT_<ID>`) must match at least one.
* Paths of the tree (`spank/placement.c`, `tests/py/test_x.py`, `agent/agent.[ch]`,
  `bench/<component>/rules.mk`): the file or directory must exist; a glob or
  placeholder must match one.
* `mpi-pstate SUBCOMMAND`, in code spans and code blocks (Markdown) and in
  bold or no-fill text (man pages): SUBCOMMAND must be one the command's
  parsers define (epilog/mpi_pstate/user/command.py and site/entry.py, read
  as text: importing the command would load the report and everything
  behind it).

A name a document must give although the code no longer has it (an old
release's, quoted as such) goes into EXCEPTIONS with the reason.

Python 3.6 and the standard library only."""
import ast
import fnmatch
import glob
import os
import re
import unittest
from pathlib import Path
from typing import Dict, Iterator, List, Set, Tuple

TOP = Path(__file__).resolve().parents[2]
SELF = Path(__file__).resolve()

# (document, name) -> why the document may give it although the tree has no
# such thing; the test fails once the name is back or the document drops it.
EXCEPTIONS = {
}  # type: Dict[Tuple[str, str], str]

# Where names are looked for: code, not prose.
CODE_SUFFIXES = (".c", ".h", ".def", ".S", ".lds", ".py", ".in", ".mk", ".sh", ".yml",
                 ".json", ".spec", ".map", ".service", ".timer", ".cron")
CODE_NAMES = ("Makefile", "mpi-pstate", "run", "lab", "debroot")
SKIP_DIRS = {".git", "__pycache__", "node_modules"}
MAX_BYTES = 4 << 20

IDENT_RE = re.compile(r"(?<![\w.])(?:mpi_pstate|MPI_PSTATE)_(?:[A-Za-z0-9_*]|<[A-Za-z0-9_ ]+>)*")
CODE_IDENT_RE = re.compile(r"\b(?:mpi_pstate|MPI_PSTATE)_[A-Za-z0-9_]*")
TOP_DIRS = ("agent", "bench", "common", "docs", "epilog", "man", "packaging", "preload", "spank",
            "tests", "watch", ".ci")
PATH_RE = re.compile(r"(?<![\w./$)~%@-])((?:" + "|".join(re.escape(d) for d in TOP_DIRS) +
                     r")/(?:[A-Za-z0-9_.*?/+-]|\[[A-Za-z0-9_-]+\]|<[A-Za-z0-9_ ]+>|"
                     r"\{[A-Za-z0-9_.,-]+\})*)")
SUBCOMMAND_RE = re.compile(r"(?<![\w/.-])mpi-pstate[ \t]+([a-z][a-z0-9-]*)")
# What may stand before "mpi-pstate SUBCOMMAND" on a command line; anything
# else is a sentence, such as a program's output ("reinstall mpi-pstate
# against this Slurm", "loads the mpi-pstate plugin").
COMMAND_BEFORE = {"$", "#", "|", "||", "&&", ";", "(", "$(", "`", "sudo", "exec", "env",
                  "time", "timeout", "nice", "srun", "mpirun", "mpiexec", "watch"}
# Check suites are built as build/tests/unit/<name> from
# tests/unit/<component>/<name>.c (docs/CONTRIBUTING.md): a document may
# name the suite by its built path.
UNIT_SUITE_RE = re.compile(r"tests/unit/(test_\w+)")
UNIT_SUITE_SOURCES = ("tests/unit", "tests/unit/common", "tests/unit/spank", "tests/unit/agent",
                      "tests/unit/preload")


def doc_files(top: Path = TOP) -> List[Path]:
    """Every document the test reads."""
    out = sorted((top / "docs").glob("*.md")) + sorted(
        p for p in (top / "man").iterdir() if p.is_file())
    return out + [top / "README.md"]


def rel(p: Path, top: Path = TOP) -> str:
    try:
        return str(p.resolve().relative_to(top))
    except ValueError:
        return str(p)


# ---- the code's names

def code_files(top: Path = TOP) -> Iterator[Path]:
    """Source, build and configuration files: everything but documents, the
    build trees and this test (which names missing symbols on purpose)."""
    for root, dirs, files in os.walk(str(top)):
        here = Path(root)
        dirs[:] = [d for d in dirs if d not in SKIP_DIRS and not d.startswith("build")
                   and not (here == top and d in ("docs", "man"))]
        for f in files:
            p = here / f
            if p.resolve() == SELF or f.endswith(".md"):
                continue
            if f.endswith(CODE_SUFFIXES) or f in CODE_NAMES:
                yield p


def read(p: Path) -> str:
    try:
        with open(str(p), "rb") as f:
            return f.read(MAX_BYTES).decode("utf-8", "replace")
    except OSError:
        return ""


def split_args(text: str, start: int) -> Tuple[List[str], int]:
    """The arguments of a macro call whose "(" is at text[start]: split at
    top-level commas, string literals and nested parentheses kept whole.
    Returns (arguments, index after the closing parenthesis)."""
    args, cur, depth, i = [], [], 0, start + 1
    while i < len(text):
        c = text[i]
        if c == '"' or c == "'":
            j = i + 1
            while j < len(text) and text[j] != c:
                j += 2 if text[j] == "\\" else 1
            cur.append(text[i:j + 1])
            i = j + 1
            continue
        if c == "(":
            depth += 1
        elif c == ")":
            if depth == 0:
                args.append("".join(cur).strip())
                return args, i + 1
            depth -= 1
        elif c == "," and depth == 0:
            args.append("".join(cur).strip())
            cur = []
            i += 1
            continue
        cur.append(c)
        i += 1
    return args, i


DEFINE_RE = re.compile(r"^[ \t]*#[ \t]*define[ \t]+(\w+)\(([^)]*)\)((?:[^\n]*\\\n)*[^\n]*)", re.M)
PASTE_RE = re.compile(r"\w+(?:[ \t]*##[ \t]*\w+)+")


def pasted_names(sources: Dict[Path, str]) -> Set[str]:
    """Names made by `##` in function-like macros, expanded with the
    arguments of every invocation of those macros in the sources (the
    X-macro tables: common/options.def)."""
    rules = []  # type: List[Tuple[str, List[str], List[str]]]
    for text in sources.values():
        for m in DEFINE_RE.finditer(text):
            params = [p.strip() for p in m.group(2).split(",")]
            for paste in PASTE_RE.findall(m.group(3)):
                parts = [x.strip() for x in paste.split("##")]
                if any(x in params for x in parts):
                    rules.append((m.group(1), params, parts))
    out = set()  # type: Set[str]
    macros = {r[0] for r in rules}
    if not macros:
        return out
    call_re = re.compile(r"\b(" + "|".join(sorted(macros)) + r")[ \t]*\(")
    for text in sources.values():
        for m in call_re.finditer(text):
            line_start = text.rfind("\n", 0, m.start()) + 1
            if re.match(r"[ \t]*#", text[line_start:m.start()]):
                continue  # its own #define, or an #undef/#ifndef line
            args, _ = split_args(text, m.end() - 1)
            for name, params, parts in rules:
                if name != m.group(1) or len(args) != len(params):
                    continue
                vals = dict(zip(params, args))
                made = "".join(vals.get(x, x) for x in parts)
                if re.fullmatch(r"\w+", made):
                    out.add(made)
    return out


def function_ids(top: Path = TOP) -> Set[str]:
    """preload/gen_wrappers.py's MPI_PSTATE_FN_<NAME> for every function of
    preload/mpi_functions.def (the generated header is in the build tree)."""
    out = set()
    for line in read(top / "preload" / "mpi_functions.def").splitlines():
        m = re.match(r"(MPI_\w+)[ \t]*\|", line)
        if m:
            out.add("MPI_PSTATE_FN_" + m.group(1)[4:].upper())
    return out


def job_metric_names(top: Path = TOP) -> Set[str]:
    """metrics.py's mpi_pstate_job_<name> for each JOB_METRICS entry."""
    path = top / "epilog" / "mpi_pstate" / "site" / "metrics.py"
    text = read(path)
    if 'f"mpi_pstate_job_{name}"' not in text:
        return set()  # the rule below no longer holds: names are not made so
    out = set()
    for node in ast.walk(ast.parse(text)):
        if isinstance(node, ast.Assign) and any(
                isinstance(t, ast.Name) and t.id == "JOB_METRICS" for t in node.targets) and \
                isinstance(node.value, ast.Tuple):
            for e in node.value.elts:
                if isinstance(e, ast.Tuple) and e.elts:
                    try:
                        name = ast.literal_eval(e.elts[0])
                    except ValueError:
                        continue
                    if isinstance(name, str):
                        out.add("mpi_pstate_job_" + name)
    return out


def known_identifiers(top: Path = TOP) -> Set[str]:
    sources = {p: read(p) for p in code_files(top)}
    names = set()  # type: Set[str]
    for text in sources.values():
        names.update(CODE_IDENT_RE.findall(text))
    c_sources = {p: t for p, t in sources.items() if p.suffix in (".c", ".h", ".def")}
    return names | pasted_names(c_sources) | function_ids(top) | job_metric_names(top)


def subcommands(top: Path = TOP) -> Set[str]:
    """The `mpi-pstate` subcommands, from the parsers' source text."""
    out = set()
    for f in ("user/command.py", "site/entry.py"):
        text = read(top / "epilog" / "mpi_pstate" / f)
        out.update(re.findall(r"\.add_parser\(\s*\"([a-z][a-z0-9-]*)\"", text))
    return out


# ---- the documents' names

MAN_ESCAPES = ((r"\-", "-"), (r"\(aq", "'"), (r"\(dq", '"'), (r"\(em", " "), (r"\(en", " "),
               (r"\(bu", " "), (r"\(mu", "x"), (r"\e", "\\"), (r"\&", ""), (r"\ ", " "),
               (r"\~", " "), (r"\|", ""), (r"\^", ""))
FONT_RE = re.compile(r"\\f(?:[BIRP]|\(\w\w|\[\w*\])")


def unman(text: str) -> str:
    """A man page line as the reader sees it: no font changes, no escapes."""
    text = FONT_RE.sub("", text)
    for a, b in MAN_ESCAPES:
        text = text.replace(a, b)
    return text


def is_man(path: Path) -> bool:
    return path.parent.name == "man"


def plain_lines(path: Path, text: str) -> List[Tuple[int, str]]:
    """(line number, text) of every line, man escapes resolved."""
    lines = text.splitlines()
    if is_man(path):
        lines = [unman(x) for x in lines]
    return list(enumerate(lines, 1))


def code_regions(path: Path, text: str) -> List[Tuple[int, str]]:
    """(line number, text) of what a document shows as code: Markdown code
    spans and fenced blocks; a man page's bold text, its .B/.BR/.BI/.IB/.RB
    lines and its .nf/.EX blocks."""
    out = []  # type: List[Tuple[int, str]]
    fenced = False
    for n, line in enumerate(text.splitlines(), 1):
        if is_man(path):
            if re.match(r"\.(nf|EX)\b", line):
                fenced = True
            elif re.match(r"\.(fi|EE)\b", line):
                fenced = False
            elif fenced:
                out.append((n, unman(line)))
            elif re.match(r"\.(B|BR|BI|IB|RB)\s", line):
                out.append((n, unman(line.split(None, 1)[1]).replace('"', "")))
            else:
                out += [(n, unman(m)) for m in
                        re.findall(r"\\fB(.*?)(?=\\f[RPI]|$)", line)]
        else:
            if line.lstrip().startswith("```"):
                fenced = not fenced
            elif fenced:
                out.append((n, line))
            else:
                out += [(n, m[1]) for m in re.findall(r"(`+)(.+?)\1", line)]
    return out


def as_glob(name: str) -> str:
    return re.sub(r"<[^>]*>", "*", name)


def braces(path: str) -> List[str]:
    """{a,b} alternatives expanded (one level, as the documents use them)."""
    m = re.search(r"\{([^{}]*)\}", path)
    if not m:
        return [path]
    return [x for alt in m.group(1).split(",")
            for x in braces(path[:m.start()] + alt + path[m.end():])]


def identifier_matches(name: str, known: Set[str]) -> bool:
    if name in known:
        return True
    pattern = as_glob(name)
    if pattern.endswith("_"):
        pattern += "*"  # MPI_PSTATE_ followed by prose: a prefix
    if "*" not in pattern:
        return False
    return any(fnmatch.fnmatchcase(k, pattern) for k in known)


def path_exists(path: str, top: Path) -> bool:
    m = UNIT_SUITE_RE.fullmatch(path)
    if m and any((top / d / (m.group(1) + ".c")).is_file() for d in UNIT_SUITE_SOURCES):
        return True
    for p in braces(as_glob(path)):
        p = p.rstrip("/") or p
        if any(c in p for c in "*?["):
            if not glob.glob(str(top / p)):
                return False
        elif not (top / p).exists():
            return False
    return True


def at_command(before: str) -> bool:
    """Whether what precedes "mpi-pstate" on its line puts it where a
    command starts: nothing, a prompt or shell operator, a launcher, or an
    argument (an option, its value, an assignment, a number)."""
    words = before.split()
    if not words:
        return True
    last = words[-1]
    return last in COMMAND_BEFORE or not any(c.isalnum() for c in last) or \
        last.startswith("-") or "=" in last or last.isdigit() or \
        (len(words) > 1 and words[-2].startswith("-"))


def clean_path(raw: str) -> str:
    """A path as matched, less what ends the sentence around it."""
    while raw and raw[-1] in ".:":
        raw = raw[:-1]
    return raw


class Names:
    """What the code has, gathered once."""

    def __init__(self, top: Path = TOP) -> None:
        self.top = top
        self.identifiers = known_identifiers(top)
        self.subcommands = subcommands(top)


def problems(path: Path, text: str, names: Names) -> List[str]:
    """Every name in the document that the code does not have, as
    "<file>:<line>: <name>: <why>"."""
    where = rel(path, names.top)
    out = []  # type: List[str]
    for n, line in plain_lines(path, text):
        for name in IDENT_RE.findall(line):
            if not identifier_matches(name, names.identifiers) and \
                    (where, name) not in EXCEPTIONS:
                out.append(f"{where}:{n}: {name}: no such name in the code")
        for raw in PATH_RE.findall(line):
            p = clean_path(raw)
            if p and not path_exists(p, names.top) and (where, p) not in EXCEPTIONS:
                out.append(f"{where}:{n}: {p}: no such file or directory in the tree")
    for n, code in code_regions(path, text):
        for m in SUBCOMMAND_RE.finditer(code):
            if at_command(code[:m.start()]) and m.group(1) not in names.subcommands:
                out.append(f"{where}:{n}: mpi-pstate {m.group(1)}: no such subcommand")
    return out


_NAMES = []  # type: List[Names]


def names() -> Names:
    if not _NAMES:
        _NAMES.append(Names())
    return _NAMES[0]


class DocsNameTheCode(unittest.TestCase):

    def test_every_document_names_only_what_exists(self) -> None:
        found = []  # type: List[str]
        for p in doc_files():
            found += problems(p, read(p), names())
        self.assertEqual(found, [], "names in the documents that the code does not have:\n" +
                         "\n".join(found))

    def test_exceptions_have_reasons_and_are_still_needed(self) -> None:
        for (doc, name), why in EXCEPTIONS.items():
            self.assertTrue(why.strip(), name)
            text = read(TOP / doc)
            self.assertIn(name, unman(text) if doc.startswith("man/") else text,
                          f"{doc} no longer names {name}: drop it from EXCEPTIONS")
            self.assertFalse(identifier_matches(name, names().identifiers) or
                             path_exists(name, TOP),
                             f"{name} exists again: drop it from EXCEPTIONS")


class TheCheckCanFail(unittest.TestCase):
    """A document naming what does not exist is caught, in Markdown and in
    a man page; names the code makes (X-macros, generated ids, metric
    names, globs) are not taken for missing ones."""

    MISSING = "mpi_pstate_" + "no_such_symbol"  # never written whole in this file

    def test_a_missing_symbol_path_and_subcommand_are_found(self) -> None:
        doc = TOP / "docs" / "fake.md"
        text = (f"The agent calls `{self.MISSING}()` (see `spank/" + "no_such_file.c`).\n"
                "Run `mpi-pstate " + "frobnicate 4242`, then `mpi-pstate report 4242`.\n"
                "```\n$ sudo -u slurm mpi-pstate " + "flish\n"
                "PROBLEM: no plugstack line loads the mpi-pstate plugin\n```\n")
        found = problems(doc, text, names())
        self.assertEqual(len(found), 4, found)
        self.assertIn(f"docs/fake.md:1: {self.MISSING}: no such name in the code", found)
        self.assertTrue(any("no_such_file.c: no such file" in f for f in found), found)
        self.assertIn("docs/fake.md:2: mpi-pstate frobnicate: no such subcommand", found)
        # a command after sudo is checked, a sentence of output ("the ... plugin") is not
        self.assertIn("docs/fake.md:4: mpi-pstate flish: no such subcommand", found)

    def test_man_page_escapes_are_read_through(self) -> None:
        page = TOP / "man" / "fake.8"
        text = (".TH FAKE 8\n"
                f".B {self.MISSING}\n"
                "Run \\fBmpi\\-pstate " + "frobnicate\\fR or\n"
                ".BR \"mpi\\-pstate audit\" ,\n"
                "see \\fIepilog/mpi_pstate/" + "nope.py\\fR.\n")
        found = problems(page, text, names())
        self.assertEqual(len(found), 3, found)
        self.assertTrue(any("mpi-pstate frobnicate" in f for f in found), found)
        self.assertTrue(any("epilog/mpi_pstate/nope.py" in f for f in found), found)

    def test_names_the_code_makes_are_known(self) -> None:
        doc = TOP / "docs" / "fake.md"
        text = ("`MPI_PSTATE_OPT_THRESHOLD`, `MPI_PSTATE_BIND_COMPACT` (options.def), "
                "`MPI_PSTATE_FN_ALLREDUCE`, `mpi_pstate_job_wall_seconds`, "
                "`mpi_pstate_placement_cpulist_*`, `MPI_PSTATE_OPT_<ID>`, `MPI_PSTATE_*`, "
                "`agent/agent.[ch]`, `tests/py/test_epilog*.py`, `bench/<component>/rules.mk`, "
                "`tests/unit/spank/`, `mpi-pstate node-prune`, `mpi-pstate flush`.\n")
        self.assertEqual(problems(doc, text, names()), [])

    def test_x_macro_pastes_are_expanded(self) -> None:
        made = pasted_names({Path("x.h"): "#define W(ID, word) PFX_##ID##_SFX,\n"
                             "W(ONE, \"one\")\nW(TWO, \"a, b\")\n"})
        self.assertEqual(made, {"PFX_ONE_SFX", "PFX_TWO_SFX"})
        self.assertIn("MPI_PSTATE_OPT_MODE", names().identifiers)
        self.assertIn("MPI_PSTATE_GOVERNOR_USERSPACE", names().identifiers)

    def test_generated_lists_are_read(self) -> None:
        self.assertIn("MPI_PSTATE_FN_INIT", function_ids())
        self.assertIn("mpi_pstate_job_mpi_seconds", job_metric_names())
        self.assertTrue({"report", "audit", "epilog", "flush", "node-prune", "exec"} <=
                        subcommands())


if __name__ == "__main__":
    unittest.main()
