# SPDX-License-Identifier: BSD-3-Clause
"""Adding a key to the agent's command line is one entry in
common/agent_args.def and a regenerate, nothing else.

A throwaway entry goes into a copy of the tree; with no other edit, the
Python table is regenerated and the plugin's objects and the agent are
built; then the key is found wherever it must reach: the agent's --help
with its default, its parser (a good value taken, a bad one refused naming
it), the command line the plugin writes (when not the default), and the
table the Python side reads, whose writer passes it too."""
import runpy
import shutil
import subprocess
import sys
import tempfile
import unittest
from pathlib import Path
from typing import List

TOP = Path(__file__).resolve().parents[2]

ENTRY = '''MPI_PSTATE_AGENT_ARG(THROWAWAY, "throwaway-knob", DURATION, throwaway_us, "3ms", "D", SET,
                     "a throwaway key of the one-entry test")
'''

# Writes the plugin's agent command line with the key at its default, then not.
DRIVER = r'''
#include <stdio.h>
#include "agentctl.h"

static void show(struct mpi_pstate_agent_args *a)
{
        char *argv[MPI_PSTATE_AGENT_MAX_ARGS], buf[2048];
        int n = mpi_pstate_agentctl_argv(a, buf, sizeof(buf), argv, MPI_PSTATE_AGENT_MAX_ARGS);

        for (int i = 0; i < n; i++)
                printf("%s ", argv[i]);
        printf("%s\n", n < 0 ? "FAILED" : "");
}

int main(void)
{
        struct mpi_pstate_agent_args a;

        mpi_pstate_agentctl_args_init(&a);
        a.path = "/agent";
        a.shm = "/dev/shm/x";
        a.cpulist = "0";
        a.runtime_dir = "/r";
        a.record = "/r/agent.json";
        show(&a);
        a.throwaway_us = 5000;
        show(&a);
        return 0;
}
'''


def ignore(_dir: str, names: List[str]) -> List[str]:
    return [n for n in names if n.startswith("build") or n in (".git", "__pycache__")]


class AgentArgOneEntry(unittest.TestCase):
    @classmethod
    def setUpClass(cls) -> None:
        cls.tmp = Path(tempfile.mkdtemp(prefix="mpst-agent-one-entry-"))
        cls.tree = cls.tmp / "tree"
        shutil.copytree(str(TOP), str(cls.tree), ignore=ignore, symlinks=True)
        d = cls.tree / "common" / "agent_args.def"
        text = d.read_text()
        at = text.index("#undef MPI_PSTATE_AGENT_ARG")
        d.write_text(text[:at] + ENTRY + "\n" + text[at:])
        run = dict(cwd=str(cls.tree), stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                   universal_newlines=True)
        cls.gen = subprocess.run([sys.executable, "spank/gen_options.py", "--update"],
                                 timeout=120, **run)
        b = "build-one"
        cls.agent = cls.tree / b / "agent" / "mpi-pstate-agent"
        cls.make = subprocess.run(["make", "-j2", "B=" + b, "WERROR=-Werror",
                                   b + "/spank/agentctl.o", b + "/agent/mpi-pstate-agent"],
                                  timeout=900, **run)
        cls.lines = []  # type: List[str]
        if cls.make.returncode == 0:
            (cls.tmp / "driver.c").write_text(DRIVER)
            exe = cls.tmp / "driver"
            cc = subprocess.run(["gcc", "-std=c11", "-D_GNU_SOURCE", "-Icommon", "-Ispank",
                                 "-I" + b + "/gen", "-o", str(exe), str(cls.tmp / "driver.c"),
                                 b + "/spank/agentctl.o", b + "/libmpi-pstate-common.a",
                                 "-lhwloc", "-lm"], timeout=120, **run)
            if cc.returncode == 0:
                r = subprocess.run([str(exe)], stdout=subprocess.PIPE,
                                   universal_newlines=True, timeout=60)
                cls.lines = r.stdout.splitlines()
            else:
                cls.lines = ["cc failed: " + cc.stdout]

    @classmethod
    def tearDownClass(cls) -> None:
        shutil.rmtree(str(cls.tmp), ignore_errors=True)

    def test_regenerated_and_built(self) -> None:
        self.assertEqual(self.gen.returncode, 0, self.gen.stdout)
        self.assertEqual(self.make.returncode, 0, self.make.stdout[-3000:])

    def test_the_agent_shows_and_parses_it(self) -> None:
        self.assertEqual(self.make.returncode, 0)
        h = subprocess.run([str(self.agent), "--help"], stdout=subprocess.PIPE,
                           universal_newlines=True, timeout=60)
        self.assertIn("  --throwaway-knob D\n      a throwaway key of the one-entry test "
                      "(default 3ms)", h.stdout)
        ok = subprocess.run([str(self.agent), "--throwaway-knob", "2ms", "--version"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            universal_newlines=True, timeout=60)
        self.assertEqual(ok.returncode, 0, ok.stderr)
        bad = subprocess.run([str(self.agent), "--throwaway-knob", "2 parsecs", "--version"],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                             universal_newlines=True, timeout=60)
        self.assertEqual(bad.returncode, 2)
        self.assertIn("--throwaway-knob needs a duration", bad.stderr)

    def test_the_plugin_writes_it_when_not_the_default(self) -> None:
        self.assertEqual(len(self.lines), 2, self.lines)
        self.assertNotIn("--throwaway-knob", self.lines[0])
        self.assertIn(" --throwaway-knob 5000us ", self.lines[1])

    def test_the_python_side_has_it(self) -> None:
        where = subprocess.run(
            [sys.executable, "-c", "import sys; sys.path.insert(0, 'spank'); "
             "import gen_options; print(gen_options.AGENT_PY_FILE)"],
            cwd=str(self.tree), stdout=subprocess.PIPE, universal_newlines=True, timeout=60)
        t = runpy.run_path(where.stdout.strip())
        self.assertIn(("throwaway-knob", "DURATION", "3ms", "SET",
                       "a throwaway key of the one-entry test"), t["AGENT_ARGS"])


if __name__ == "__main__":
    unittest.main()
