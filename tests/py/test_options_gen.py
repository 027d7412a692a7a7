# SPDX-License-Identifier: BSD-3-Clause
"""The option table and the documents generated from it.

Fails when the committed man page or docs/options.md differ from what
common/options.def generates, when the Python reader of the table and the C
compiler disagree about its content, when the man page does not lint, and
when the shipped plugstack example stops parsing cleanly.
"""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import unittest
from pathlib import Path

TOP = Path(__file__).resolve().parents[2]
GEN = TOP / "spank" / "gen_options.py"
DEF = TOP / "common" / "options.def"
MAN = TOP / "man" / "mpi_pstate.8.in"
MD = TOP / "docs" / "options.md"
AGENT_MAN = TOP / "man" / "mpi-pstate-agent.8"
AGENT_MD = TOP / "docs" / "agent.md"
EXAMPLE = TOP / "spank" / "plugstack.conf.example.in"
PYTHON = "/usr/bin/python3" if os.path.exists("/usr/bin/python3") else sys.executable
CC = shutil.which("gcc")


def gen(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([PYTHON, str(GEN), *args], capture_output=True, text=True, timeout=60)


def table() -> list[dict]:
    r = gen("--json")
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)


class CommittedDocuments(unittest.TestCase):
    def test_man_page_and_options_md_are_current(self) -> None:
        r = gen("--check")
        self.assertEqual(r.returncode, 0,
                         "regenerate with spank/gen_options.py --update:\n" + r.stdout + r.stderr)

    def test_generated_sections_hold_every_option(self) -> None:
        man = MAN.read_text()
        md = MD.read_text()
        for o in table():
            self.assertIn("\\fB\\-\\-" + o["name"].replace("-", "\\-") + "\\fR", man)
            self.assertIn(".B " + o["env"], man)
            self.assertIn(f"`{o['env']}`", md)


class StalenessIsDetected(unittest.TestCase):
    """The check must fail on a table edit that was not regenerated."""

    def setUp(self) -> None:
        self.tmp = Path(tempfile.mkdtemp(prefix="mpst-gen-"))
        for f in (DEF, MAN, MD, AGENT_MAN, AGENT_MD):
            shutil.copy(f, self.tmp / f.name)
        self.args = ["--def", str(self.tmp / DEF.name), "--man", str(self.tmp / MAN.name),
                     "--md", str(self.tmp / MD.name), "--agent-man", str(self.tmp / AGENT_MAN.name),
                     "--agent-md", str(self.tmp / AGENT_MD.name)]

    def tearDown(self) -> None:
        shutil.rmtree(self.tmp)

    def test_edit_fails_check_then_update_fixes_it(self) -> None:
        d = self.tmp / DEF.name
        text = d.read_text()
        self.assertIn('"500us"', text)
        d.write_text(text.replace('"500us"', '"750us"', 1))
        r = gen("--check", *self.args)
        self.assertEqual(r.returncode, 1)
        self.assertIn("+Default: \\fB750us\\fR", r.stdout)
        self.assertIn("gen_options.py --update", r.stderr)
        r = gen("--update", *self.args)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn("750us", (self.tmp / MAN.name).read_text())
        self.assertEqual(gen("--check", *self.args).returncode, 0)

    def test_hand_edit_inside_markers_fails_check(self) -> None:
        m = self.tmp / MAN.name
        m.write_text(m.read_text().replace("Exported to the tasks as", "Exported as", 1))
        self.assertEqual(gen("--check", *self.args).returncode, 1)

    def test_missing_markers_is_an_error(self) -> None:
        m = self.tmp / MAN.name
        m.write_text(m.read_text().replace(".\\\" END GENERATED OPTIONS", ""))
        r = gen("--check", *self.args)
        self.assertEqual(r.returncode, 2)
        self.assertIn("markers", r.stderr)

    def test_malformed_table_is_an_error(self) -> None:
        d = self.tmp / DEF.name
        d.write_text(d.read_text() + "\nMPI_PSTATE_WORD_BIND(X, \"x\")\n")
        r = gen("--check", *self.args)
        self.assertEqual(r.returncode, 2)
        self.assertIn("takes 3 arguments", r.stderr)

    def test_outdir_writes_fragments(self) -> None:
        out = self.tmp / "gen"
        r = gen("--outdir", str(out), "--def", str(self.tmp / DEF.name))
        self.assertEqual(r.returncode, 0, r.stderr)
        frag = (out / "options-options.man").read_text()
        self.assertTrue(frag.startswith(".TP\n"))
        self.assertIn("MPI_PSTATE_BIND", (out / "options-environment.man").read_text())
        self.assertIn("| Option |", (out / "options-options.md").read_text())


class TableConventions(unittest.TestCase):
    def test_names_keys_and_env(self) -> None:
        opts = table()
        self.assertEqual([o["env"] for o in opts],
                         ["MPI_PSTATE_MODE", "MPI_PSTATE_THRESHOLD", "MPI_PSTATE_LOW",
                          "MPI_PSTATE_GOVERNOR", "MPI_PSTATE_BIND"])
        for o in opts:
            self.assertEqual(o["env"], "MPI_PSTATE_" + o["key"].upper())
            self.assertIn(o["name"], ("mpi-pstate", "mpi-pstate-" + o["key"]))
            self.assertLess(len(o["name"]), 75)  # SPANK_OPTION_MAXLEN
            self.assertLessEqual(len("[mpi-pstate] " + o["usage"]), 90, o["usage"])
            self.assertTrue(o["doc"].endswith("."), o["name"])

    def test_enumerations_are_complete_in_help_text(self) -> None:
        for o in table():
            words = [w["word"] for w in o["words"]]
            if not words:
                continue
            self.assertIn(o["default"], words, o["name"])
            if o["bare"]:
                self.assertIn(o["bare"], words)
            if o["TYPE"] in ("MODE", "BIND"):
                for w in words:
                    self.assertIn(w, o["usage"], f"--help of --{o['name']} omits {w}")
        by_name = {o["name"]: o for o in table()}
        self.assertEqual([w["word"] for w in by_name["mpi-pstate"]["words"]],
                         ["off", "on", "profile"])
        self.assertEqual(by_name["mpi-pstate"]["bare"], "on")
        self.assertEqual([w["word"] for w in by_name["mpi-pstate-bind"]["words"]],
                         ["none", "cores", "compact", "scatter"])
        self.assertEqual({w["word"] for w in by_name["mpi-pstate-governor"]["words"]},
                         {"keep", "performance", "powersave", "schedutil", "ondemand",
                          "conservative", "userspace"})


C_DUMP = r"""
#include <stdio.h>
static void s(const char *x)
{
        if (!x) { fputs("null", stdout); return; }
        putchar('"');
        for (; *x; x++) {
                if (*x == '"' || *x == '\\') printf("\\%c", *x);
                else if ((unsigned char)*x < 0x20) printf("\\u%04x", *x);
                else putchar(*x);
        }
        putchar('"');
}
#define F(x) fputs(",", stdout), s(x)
int main(void)
{
#define MPI_PSTATE_OPTION(ID, field, TYPE, name, bare, arginfo, key, env, def, usage, doc) \
        fputs("[\"O\"", stdout), F(#ID), F(#field), F(#TYPE), F(name), F(bare), F(arginfo), \
        F(key), F(env), F(def), F(usage), F(doc), puts("]");
#define MPI_PSTATE_WORD_MODE(ID, word, doc) fputs("[\"W\"", stdout), F("MODE"), F(#ID), F(word), F(doc), puts("]");
#define MPI_PSTATE_WORD_GOVERNOR(ID, word, doc) fputs("[\"W\"", stdout), F("GOVERNOR"), F(#ID), F(word), F(doc), puts("]");
#define MPI_PSTATE_WORD_BIND(ID, word, doc) fputs("[\"W\"", stdout), F("BIND"), F(#ID), F(word), F(doc), puts("]");
#include "options.def"
        return 0;
}
"""

C_KEYS = r"""
#include <stdio.h>
#include "plugstack.h"
static int problems;
static void report(void *ctx, const char *msg) { (void)ctx; problems++; printf("P %s\n", msg); }
int main(int argc, char **argv)
{
        struct mpi_pstate_config c;
        for (size_t i = 0; mpi_pstate_plugstack_key(i); i++)
                printf("K %s\n", mpi_pstate_plugstack_key(i));
        mpi_pstate_plugstack_defaults(&c);
        mpi_pstate_plugstack_parse(&c, argc - 1, argv + 1, report, NULL);
        printf("N %d\n", problems);
        return 0;
}
"""


# What spank/plugstack.c links from common/ (the table's parsers and the
# agent table's defaults).
PLUGSTACK_COMMON = ("options.c", "parse.c", "agent_args.c", "safeio.c", "errmsg.c",
                    "cpufreq_map.c", "cpufreq_discover.c")


@unittest.skipUnless(CC, "gcc not installed")
class CompilerAgrees(unittest.TestCase):
    """The generator parses options.def itself; the C side gets it from the
    preprocessor.  Both views must be the same table."""

    def build(self, src: str, extra: list[str]) -> Path:
        tmp = Path(tempfile.mkdtemp(prefix="mpst-cc-"))
        self.addCleanup(shutil.rmtree, tmp)
        (tmp / "prog.c").write_text(src)
        exe = tmp / "prog"
        r = subprocess.run([CC, "-std=c11", "-D_GNU_SOURCE", "-Wall", "-Werror",
                            f"-I{TOP / 'common'}", f"-I{TOP / 'spank'}", "-o", str(exe), str(tmp / "prog.c"), *extra],
                           capture_output=True, text=True, timeout=120)
        self.assertEqual(r.returncode, 0, r.stderr)
        return exe

    def test_c_preprocessor_and_python_read_the_same_table(self) -> None:
        exe = self.build(C_DUMP, [])
        out = subprocess.run([str(exe)], capture_output=True, text=True, check=True).stdout
        c_opts, c_words = [], []
        for line in out.splitlines():
            rec = json.loads(line)
            (c_opts if rec[0] == "O" else c_words).append(rec[1:])
        py = table()
        self.assertEqual(len(c_opts), len(py))
        keys = ["ID", "field", "TYPE", "name", "bare", "arginfo", "key", "env", "default",
                "usage", "doc"]
        for c, p in zip(c_opts, py):
            self.assertEqual(c, [p[k] for k in keys])
        py_words = {(o["TYPE"], w["ID"], w["word"], w["doc"]) for o in py for w in o["words"]}
        self.assertEqual({tuple(w) for w in c_words}, py_words)

    def plugstack_tool(self) -> Path:
        return self.build(C_KEYS, [str(TOP / "spank" / "plugstack.c")] +
                          [str(TOP / "common" / f) for f in PLUGSTACK_COMMON])

    def test_example_snippet_documents_every_key(self) -> None:
        out = subprocess.run([str(self.plugstack_tool())], capture_output=True, text=True,
                             check=True).stdout
        keys = [line[2:] for line in out.splitlines() if line.startswith("K ")]
        self.assertEqual(len(keys), 24)
        text = EXAMPLE.read_text()
        for k in keys:
            self.assertIn(f"#   {k}=", text)

    def test_example_plugstack_lines_parse_cleanly(self) -> None:
        tool = self.plugstack_tool()
        lines = [line for line in EXAMPLE.read_text().splitlines()
                 if line.startswith("#optional ")]
        self.assertGreaterEqual(len(lines), 2)
        for line in lines:
            words = line.split()[2:]
            out = subprocess.run([str(tool), *words], capture_output=True, text=True,
                                 check=True).stdout
            self.assertIn("N 0", out, f"{line}\n{out}")
        # The tool itself notices a bad key, so the assertion above can fail.
        out = subprocess.run([str(tool), "freq_mni=1GHz"], capture_output=True, text=True,
                             check=True).stdout
        self.assertIn("N 1", out)


@unittest.skipUnless(shutil.which("groff"), "groff not installed (apt-get install groff-base)")
class ManPageLints(unittest.TestCase):
    def test_groff_has_no_warnings(self) -> None:
        text = (MAN.read_text().replace("@VERSION@", "0.0")
                .replace("@SLURM_PLUGINDIR@", "/usr/lib/slurm").replace("@DATADIR@", "/usr/share")
                .replace("@LIBDIR@", "/usr/lib").replace("@SBINDIR@", "/usr/sbin"))
        r = subprocess.run(["groff", "-ww", "-z", "-t", "-man"], input=text,
                           capture_output=True, text=True, timeout=60)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(r.stderr, "")

    def test_lint_catches_a_broken_page(self) -> None:
        r = subprocess.run(["groff", "-ww", "-z", "-t", "-man"], input=".TH X 8\n.BOGUS x\n",
                           capture_output=True, text=True, timeout=60)
        self.assertNotEqual(r.stderr, "")

    def test_sections_present(self) -> None:
        text = MAN.read_text()
        for sec in ("NAME", "SYNOPSIS", "DESCRIPTION", "CONFIGURATION", "USER OPTIONS",
                    "ENVIRONMENT", "FILES", "ERRORS", "EXAMPLES", "SEE ALSO"):
            self.assertIn(f"\n.SH {sec}\n", text)


if __name__ == "__main__":
    unittest.main()
