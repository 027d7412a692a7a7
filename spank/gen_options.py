#!/usr/bin/python3
# SPDX-License-Identifier: BSD-3-Clause
"""Generate the option documentation of mpi-pstate from common/options.def.

The C side expands options.def with the preprocessor; this script reads the
same file so that the man page and docs/options.md cannot drift from the
code.  It rewrites only the parts between the BEGIN/END GENERATED markers.

  gen_options.py --check            exit 1 (and print a diff) if a document is stale
  gen_options.py --update           rewrite the generated parts in place
  gen_options.py --outdir DIR       write the fragments into DIR (build tree)
  gen_options.py --json             print the parsed table (for the cross-check test)
"""
from __future__ import annotations

import argparse
import difflib
import json
import os
import re
import sys
from dataclasses import asdict, dataclass, field
from typing import Iterator

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DEF_FILE = os.path.join(ROOT, "common", "options.def")
MAN_FILE = os.path.join(ROOT, "man", "mpi_pstate.8.in")
MD_FILE = os.path.join(ROOT, "docs", "options.md")
AGENT_MAN_FILE = os.path.join(ROOT, "man", "mpi-pstate-agent.8")
AGENT_MD_FILE = os.path.join(ROOT, "docs", "agent.md")
AGENT_DEF_FILE = os.path.join(ROOT, "common", "agent_args.def")
AGENT_PY_FILE = os.path.join(ROOT, "epilog", "mpi_pstate", "agent_args.py")
AGENT_ARGS = ["ID", "flag", "TYPE", "field", "default", "arginfo", "PASS", "help"]

OPTION_ARGS = ["ID", "field", "TYPE", "name", "bare", "arginfo", "key", "env", "default",
               "usage", "doc"]
WORD_MACROS = {"MPI_PSTATE_WORD_MODE": "MODE", "MPI_PSTATE_WORD_GOVERNOR": "GOVERNOR",
               "MPI_PSTATE_WORD_BIND": "BIND"}

# How each value type travels in the environment (the C formatter's rules).
CANONICAL = {
    "MODE": "the mode word",
    "DURATION": "microseconds as a plain number",
    "FREQ": "kHz as a plain number, min or efficient",
    "GOVERNOR": "the governor word",
    "BIND": "the binding word",
}


@dataclass
class Word:
    ID: str
    word: str
    doc: str


@dataclass
class Option:
    ID: str
    field: str
    TYPE: str
    name: str
    bare: str | None
    arginfo: str
    key: str
    env: str
    default: str
    usage: str
    doc: str
    words: list[Word] = field(default_factory=list)


class DefError(Exception):
    pass


TOKEN = re.compile(r"""
    (?P<ws>\s+)
  | (?P<comment>/\*.*?\*/|//[^\n]*)
  | (?P<pp>^[ \t]*\#[^\n]*(?:\\\n[^\n]*)*)
  | (?P<string>"(?:[^"\\\n]|\\.)*")
  | (?P<ident>[A-Za-z_][A-Za-z0-9_]*)
  | (?P<number>[0-9]+)
  | (?P<punct>[(),])
""", re.VERBOSE | re.DOTALL | re.MULTILINE)

ESCAPES = {"n": "\n", "t": "\t", "\\": "\\", '"': '"', "'": "'"}


def tokens(text: str) -> Iterator[tuple[str, str, int]]:
    pos = 0
    while pos < len(text):
        m = TOKEN.match(text, pos)
        if not m:
            line = text.count("\n", 0, pos) + 1
            raise DefError(f"options.def:{line}: unexpected {text[pos:pos + 20]!r}")
        kind = m.lastgroup or ""
        if kind not in ("ws", "comment", "pp"):
            yield kind, m.group(), text.count("\n", 0, pos) + 1
        pos = m.end()


def unquote(lit: str) -> str:
    body = lit[1:-1]
    return re.sub(r"\\(.)", lambda m: ESCAPES.get(m.group(1), "\\" + m.group(1)), body)


def macro_calls(text: str) -> list[tuple[str, list[object], int]]:
    """Every macro invocation of a .def file: (macro, arguments, line)."""
    toks = list(tokens(text))
    calls: list[tuple[str, list[object], int]] = []
    i = 0
    while i < len(toks):
        kind, val, line = toks[i]
        if kind != "ident" or i + 1 >= len(toks) or toks[i + 1][1] != "(":
            raise DefError(f"options.def:{line}: expected a macro invocation, got {val!r}")
        i += 2
        args: list[object] = []
        cur: list[tuple[str, str]] = []
        while True:
            if i >= len(toks):
                raise DefError(f"options.def:{line}: unterminated {val}(")
            k, v, _ = toks[i]
            i += 1
            if v in (",", ")"):
                args.append(arg_value(cur, line))
                cur = []
                if v == ")":
                    break
            else:
                cur.append((k, v))
        calls.append((val, args, line))
    return calls


def parse_def(text: str) -> list[Option]:
    """Returns the options in table order, each with its enumerated words."""
    calls = macro_calls(text)
    options: list[Option] = []
    by_type: dict[str, list[Word]] = {}
    for macro, args, line in calls:
        if macro == "MPI_PSTATE_OPTION":
            if len(args) != len(OPTION_ARGS):
                raise DefError(f"options.def:{line}: {macro} takes {len(OPTION_ARGS)} arguments")
            options.append(Option(**dict(zip(OPTION_ARGS, args))))  # type: ignore[arg-type]
        elif macro in WORD_MACROS:
            if len(args) != 3:
                raise DefError(f"options.def:{line}: {macro} takes 3 arguments")
            by_type.setdefault(WORD_MACROS[macro], []).append(Word(*args))  # type: ignore[arg-type]
        else:
            raise DefError(f"options.def:{line}: unknown macro {macro}")
    for opt in options:
        opt.words = by_type.get(opt.TYPE, [])
    return options


def parse_agent_def(text: str) -> list[dict[str, object]]:
    """The entries of common/agent_args.def in table order."""
    out: list[dict[str, object]] = []
    for macro, args, line in macro_calls(text):
        if macro != "MPI_PSTATE_AGENT_ARG" or len(args) != len(AGENT_ARGS):
            raise DefError(f"agent_args.def:{line}: expected MPI_PSTATE_AGENT_ARG with "
                           f"{len(AGENT_ARGS)} arguments")
        out.append(dict(zip(AGENT_ARGS, args)))
    return out


def agent_py(entries: list[dict[str, object]], options: list[Option]) -> str:
    """The Python side's copy of both tables: data only, Python 3.6."""
    lines = [
        "# SPDX-License-Identifier: BSD-3-Clause",
        '"""The node agent\'s command line and the job\'s options, as the C side declares',
        "them (common/agent_args.def, common/options.def): what `mpi-pstate exec` passes",
        "and the defaults `report` and the what-if model assume.  Generated by",
        "spank/gen_options.py --update: do not edit (tests/py/test_options_gen.py fails",
        'when it is stale)."""',
        "from typing import Optional, Tuple",
        "",
        "# (flag, type, default as written, who passes it, help); PASS as in agent_args.def",
        "AGENT_ARGS = (",
    ]
    for e in entries:
        lines.append(f"    ({e['flag']!r}, {e['TYPE']!r}, {e['default']!r}, {e['PASS']!r},")
        lines.append(f"     {e['help']!r}),")
    lines += [")  # type: Tuple[Tuple[str, str, Optional[str], str, str], ...]", "",
              "# (srun name, short key, type, built-in default, environment variable)",
              "JOB_OPTIONS = ("]
    for o in options:
        lines.append(f"    ({o.name!r}, {o.key!r}, {o.TYPE!r}, {o.default!r}, {o.env!r}),")
    lines += [")  # type: Tuple[Tuple[str, str, str, str, str], ...]", "", "",
              "def agent_default(flag: str) -> Optional[str]:",
              '    """The agent\'s default for --flag, as written (None: none)."""',
              "    return {a[0]: a[2] for a in AGENT_ARGS}[flag]", "", "",
              "def job_default(key: str) -> str:",
              '    """The built-in default of the job\'s option with that short key."""',
              "    return {o[1]: o[3] for o in JOB_OPTIONS}[key]", ""]
    return "\n".join(lines)


def arg_value(toks: list[tuple[str, str]], line: int) -> object:
    if not toks:
        raise DefError(f"options.def:{line}: empty macro argument")
    if all(k == "string" for k, _ in toks):
        return "".join(unquote(v) for _, v in toks)
    if len(toks) == 1 and toks[0][0] == "ident":
        return None if toks[0][1] == "NULL" else toks[0][1]
    if len(toks) == 1 and toks[0][0] == "number":
        return int(toks[0][1])
    raise DefError(f"options.def:{line}: cannot read argument {' '.join(v for _, v in toks)}")


# ---- roff

# "--name" or "--name=value" in prose (a sentence's final period is not part of the value).
OPTION_IN_PROSE = re.compile(
    r"(?<![\w-])(--[a-z0-9][a-z0-9-]*(?:=[A-Za-z0-9]+(?:\.[A-Za-z0-9]+)*)?)")

def roff_escape(s: str) -> str:
    s = s.replace("\\", "\\e")
    # Options in prose become bold with real minus signs, so that they can be
    # searched and copied; other hyphens stay hyphens.
    s = OPTION_IN_PROSE.sub(lambda m: "\\fB" + m.group(1).replace("-", "\\-") + "\\fR", s)
    return s


def roff_lines(text: str) -> list[str]:
    out = []
    for line in text.split("\n"):
        if line.startswith((".", "'")):
            line = "\\&" + line
        out.append(line)
    return out


def dash(s: str) -> str:
    return s.replace("-", "\\-")


def man_options(options: list[Option]) -> list[str]:
    out: list[str] = []
    for o in options:
        out.append(".TP")
        arg = f"[=\\fI{dash(o.arginfo)}\\fR]" if o.bare else f"=\\fI{dash(o.arginfo)}\\fR"
        out.append(f"\\fB\\-\\-{dash(o.name)}\\fR{arg}")
        out += roff_lines(roff_escape(o.doc))
        if o.words:
            documented = [w for w in o.words if w.doc]
            plain = [w for w in o.words if not w.doc]
            out.append(".RS")
            for w in documented:
                out.append(".TP")
                out.append(f".B {dash(w.word)}")
                out += roff_lines(roff_escape(w.doc))
            out.append(".RE")
            if plain:
                names = ", ".join(f"\\fB{dash(w.word)}\\fR" for w in plain)
                out.append(".IP")
                out.append(f"Also accepted: {names}.")
            out.append(".IP")
        else:
            out.append(".IP")
        bare = f" Without a value: \\fB{dash(o.bare)}\\fR." if o.bare else ""
        out.append(f"Default: \\fB{dash(o.default)}\\fR, or the site's "
                   f"\\fBdefault_{o.key}\\fR.{bare}")
        out.append(f"Exported to the tasks as \\fB{o.env}\\fR.")
    return out


def man_environment(options: list[Option]) -> list[str]:
    out: list[str] = []
    for o in options:
        out.append(".TP")
        out.append(f".B {o.env}")
        words = ""
        if o.words:
            words = ": one of " + ", ".join(dash(w.word) for w in o.words)
        out.append(f"Canonical value of \\fB\\-\\-{dash(o.name)}\\fR: "
                   f"{CANONICAL[o.TYPE]}{words}.")
    return out


# ---- markdown

def md_escape(s: str) -> str:
    s = OPTION_IN_PROSE.sub(r"`\1`", s)
    return s.replace("|", "\\|")


def md_options(options: list[Option]) -> list[str]:
    out: list[str] = ["| Option | Environment | Default | Admin default key |",
                      "|---|---|---|---|"]
    for o in options:
        arg = f"[={o.arginfo}]" if o.bare else f"={o.arginfo}"
        cell = f"--{o.name}{arg}".replace("|", "\\|")
        out.append(f"| `{cell}` | `{o.env}` | `{o.default}` | `default_{o.key}` |")
    for o in options:
        arg = f"[={o.arginfo}]" if o.bare else f"={o.arginfo}"
        out += ["", f"### `--{o.name}{arg}`", "", md_escape(o.doc)]
        if o.bare:
            out += ["", f"Without a value: `{o.bare}`."]
        if o.words:
            out += ["", "| Value | Meaning |", "|---|---|"]
            for w in o.words:
                out.append(f"| `{w.word}` | {md_escape(w.doc) or '(the kernel governor)'} |"
                           if o.TYPE == "GOVERNOR" else
                           f"| `{w.word}` | {md_escape(w.doc)} |")
        out += ["", f"In the tasks' environment: `{o.env}` = {CANONICAL[o.TYPE]}."]
        out += ["", f"`--help` text: `[mpi-pstate] {o.usage}`"]
    return out


# ---- the agent's command line (agent/main.c takes every entry under its
# srun name and its key; the plugin writes the srun names)

def plain_usage(o: Option) -> str:
    return o.usage[len("[mpi-pstate] "):] if o.usage.startswith("[mpi-pstate] ") else o.usage


def agent_default(o: Option) -> str:
    return "on" if o.ID == "MODE" else o.default


def agent_man_options(options: list[Option]) -> list[str]:
    out: list[str] = []
    for o in options:
        out.append(".TP")
        out.append(f"\\fB\\-\\-{dash(o.name)}\\fR, \\fB\\-\\-{dash(o.key)}\\fR "
                   f"\\fI{dash(o.arginfo)}\\fR")
        out += roff_lines(roff_escape(plain_usage(o)[:1].upper() + plain_usage(o)[1:] + "."))
        out.append(f"Default \\fB{dash(agent_default(o))}\\fR, or \\fB{o.env}\\fR "
                   "from the environment.")
    return out


def agent_md_options(options: list[Option]) -> list[str]:
    out: list[str] = ["| option | meaning |", "|---|---|"]
    for o in options:
        u = plain_usage(o).replace("|", "\\|")
        arg = o.arginfo.replace("|", "\\|")
        out.append(f"| `--{o.name} {arg}`, `--{o.key}` | {u}; default `{agent_default(o)}` "
                   f"or `{o.env}` |")
    return out


# ---- markers

SECTIONS = {
    # (file, section): (begin marker, end marker, generator)
    ("man", "options"): (r'.\" BEGIN GENERATED OPTIONS', r'.\" END GENERATED OPTIONS',
                         man_options),
    ("man", "environment"): (r'.\" BEGIN GENERATED ENVIRONMENT',
                             r'.\" END GENERATED ENVIRONMENT', man_environment),
    ("md", "options"): ("<!-- BEGIN GENERATED OPTIONS -->", "<!-- END GENERATED OPTIONS -->",
                        md_options),
    ("agentman", "agent-options"): (r'.\" BEGIN GENERATED OPTIONS', r'.\" END GENERATED OPTIONS',
                                    agent_man_options),
    ("agentmd", "agent-options"): ("<!-- BEGIN GENERATED OPTIONS -->",
                                   "<!-- END GENERATED OPTIONS -->", agent_md_options),
}
NOTE = {"man": r'.\" generated from common/options.def by spank/gen_options.py: do not edit',
        "md": "<!-- generated from common/options.def by spank/gen_options.py: do not edit -->"}
NOTE["agentman"], NOTE["agentmd"] = NOTE["man"], NOTE["md"]


def splice(text: str, kind: str, options: list[Option], path: str) -> str:
    for (k, _name), (begin, end, gen) in SECTIONS.items():
        if k != kind:
            continue
        lines = text.split("\n")
        try:
            b = lines.index(begin)
            e = lines.index(end, b)
        except ValueError:
            raise DefError(f"{path}: markers {begin!r} ... {end!r} not found") from None
        lines[b + 1:e] = [NOTE[kind]] + gen(options)
        text = "\n".join(lines)
    return text


def targets(man: str, md: str, agent_man: str, agent_md: str) -> list[tuple[str, str]]:
    return [(man, "man"), (md, "md"), (agent_man, "agentman"), (agent_md, "agentmd")]


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--def", dest="deffile", default=DEF_FILE)
    ap.add_argument("--man", default=MAN_FILE)
    ap.add_argument("--md", default=MD_FILE)
    ap.add_argument("--agent-man", default=AGENT_MAN_FILE)
    ap.add_argument("--agent-md", default=AGENT_MD_FILE)
    ap.add_argument("--agent-def", default=AGENT_DEF_FILE)
    ap.add_argument("--agent-py", default=AGENT_PY_FILE)
    mode = ap.add_mutually_exclusive_group(required=True)
    mode.add_argument("--check", action="store_true")
    mode.add_argument("--update", action="store_true")
    mode.add_argument("--outdir")
    mode.add_argument("--json", action="store_true")
    args = ap.parse_args(argv)

    try:
        with open(args.deffile, encoding="utf-8") as f:
            options = parse_def(f.read())
        if args.json:
            json.dump([asdict(o) for o in options], sys.stdout, indent=1)
            print()
            return 0
        if args.outdir:
            os.makedirs(args.outdir, exist_ok=True)
            for (kind, name), (_b, _e, gen) in SECTIONS.items():
                out = os.path.join(args.outdir, f"options-{name}.{kind}")
                with open(out + ".tmp", "w", encoding="utf-8") as f:
                    f.write("\n".join(gen(options)) + "\n")
                os.replace(out + ".tmp", out)
            return 0
        with open(args.agent_def, encoding="utf-8") as f:
            agent_entries = parse_agent_def(f.read())
        stale = 0
        # Another table than the tree's (a test's copy) never rewrites the
        # tree's Python table unless told where to write.
        py = [] if args.deffile != DEF_FILE and args.agent_py == AGENT_PY_FILE else \
            [(args.agent_py, "py")]
        for path, kind in targets(args.man, args.md, args.agent_man, args.agent_md) + py:
            try:
                with open(path, encoding="utf-8") as f:
                    old = f.read()
            except FileNotFoundError:
                if kind != "py":
                    raise
                old = ""
            new = agent_py(agent_entries, options) if kind == "py" else \
                splice(old, kind, options, path)
            if new == old:
                continue
            if args.update:
                with open(path + ".tmp", "w", encoding="utf-8") as f:
                    f.write(new)
                os.replace(path + ".tmp", path)
                print(f"updated {os.path.relpath(path, ROOT)}")
            else:
                stale += 1
                sys.stdout.writelines(difflib.unified_diff(
                    old.splitlines(True), new.splitlines(True), path, path + " (generated)"))
        if stale:
            print("stale generated sections: run spank/gen_options.py --update",
                  file=sys.stderr)
            return 1
        return 0
    except (DefError, OSError) as e:
        print(f"gen_options.py: {e}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
