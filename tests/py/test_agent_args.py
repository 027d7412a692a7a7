# SPDX-License-Identifier: BSD-3-Clause
"""The agent's command line has one source, common/agent_args.def: the
Python side's generated copy is what the C preprocessor sees, the agent's
--help and its parser take every key, and the man page and docs/agent.md
name every key."""
import os
import re
import runpy
import subprocess
import sys
import tempfile
import unittest
from pathlib import Path
from typing import Any, Dict

TOP = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(TOP / "spank"))
import gen_options  # noqa: E402

BUILD = Path(os.environ.get("MPI_PSTATE_BUILD", TOP / "build"))
AGENT = BUILD / "agent" / "mpi-pstate-agent"

# Prints every entry as the compiler sees it.
DRIVER = r'''
#include <stdio.h>
int main(void)
{
#define MPI_PSTATE_AGENT_ARG(ID, flag, TYPE, field, def, arginfo, PASS, help) \
        printf("%s %s %s %s\n", flag, #TYPE, (const char *)def ? (const char *)def : "-", #PASS);
#include "agent_args.def"
        return 0;
}
'''

# A value each type refuses.
BAD = {"PATH": "relative/path", "TEXT": "", "NODE": "a/b", "CPUS": "3-1", "SLOTS": "0",
       "U32": "-1", "USER": "no-such-user-xyz", "GROUP": "no-such-group-xyz",
       "RUNUSER": "0", "RUNGROUP": "0", "MECH": "turbo", "BOOL": "maybe", "FREQ": "fast",
       "DURATION": "2 parsecs", "PERCENT": "lots", "PRIO": "100"}


def table() -> Dict[str, Any]:
    return runpy.run_path(gen_options.AGENT_PY_FILE)


class AgentArgs(unittest.TestCase):
    def test_the_python_table_is_what_the_compiler_sees(self) -> None:
        with tempfile.TemporaryDirectory() as d:
            src, exe = Path(d) / "t.c", Path(d) / "t"
            src.write_text(DRIVER)
            subprocess.run(["gcc", "-I", str(TOP / "common"), "-o", str(exe), str(src)],
                           check=True, timeout=120)
            out = subprocess.run([str(exe)], stdout=subprocess.PIPE, check=True,
                                 universal_newlines=True, timeout=60).stdout
        want = ["%s %s %s %s" % (f, t, d if d is not None else "-", p)
                for f, t, d, p, _ in table()["AGENT_ARGS"]]
        self.assertEqual(out.splitlines(), want)

    def test_the_generated_table_is_current(self) -> None:
        r = subprocess.run([sys.executable, str(TOP / "spank" / "gen_options.py"), "--check"],
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                           universal_newlines=True, timeout=120)
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)

    def test_the_documents_name_every_key(self) -> None:
        man = (TOP / "man" / "mpi-pstate-agent.8").read_text().replace("\\-", "-")
        md = (TOP / "docs" / "agent.md").read_text()
        md = md[md.index("## 2. Command line"):md.index("## 3.")]
        for flag, *_ in table()["AGENT_ARGS"]:
            word = re.compile(r"--%s(?![\w-])" % re.escape(flag))
            self.assertTrue(word.search(man), "--%s: not in man/mpi-pstate-agent.8" % flag)
            self.assertTrue(word.search(md), "--%s: not in docs/agent.md, section 2" % flag)

    @unittest.skipUnless(AGENT.exists(), "the agent is not built")
    def test_the_agent_shows_and_parses_every_key(self) -> None:
        h = subprocess.run([str(AGENT), "--help"], stdout=subprocess.PIPE,
                           universal_newlines=True, timeout=60)
        self.assertEqual(h.returncode, 0)
        for flag, typ, default, _pass, help_ in table()["AGENT_ARGS"]:
            self.assertIn("  --" + flag, h.stdout)
            self.assertIn(help_, h.stdout)
            if default is not None:
                self.assertIn("(default %s)" % default, h.stdout)
            if typ in BAD:
                r = subprocess.run([str(AGENT), "--" + flag, BAD[typ], "--version"],
                                   stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                   universal_newlines=True, timeout=60)
                self.assertEqual(r.returncode, 2, (flag, r.stdout))
                self.assertIn("--%s needs " % flag, r.stderr)
            if default is not None:  # its own default is a value it takes
                r = subprocess.run([str(AGENT), "--" + flag, default, "--version"],
                                   stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                   universal_newlines=True, timeout=60)
                self.assertEqual(r.returncode, 0, (flag, r.stderr))


if __name__ == "__main__":
    unittest.main()
