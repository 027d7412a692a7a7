# SPDX-License-Identifier: BSD-3-Clause
"""Adding an option is one entry in common/options.def and nothing else.

A throwaway entry goes into a copy of the tree; with no other edit, the
generated documents are regenerated, the plugin and the agent are built, and
the option is found in every place it must reach: the SPANK --help text in
the plugin, the plugin's man page and docs/options.md, the agent's man page
and docs/agent.md, the tasks' environment, the command line the plugin writes
for the agent, and the agent's parser and --help.
"""
from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
import unittest
from pathlib import Path

TOP = Path(__file__).resolve().parents[2]
PYTHON = "/usr/bin/python3" if os.path.exists("/usr/bin/python3") else "python3"

ENTRY = '''
MPI_PSTATE_OPTION(THROWAWAY, throwaway_us, DURATION, "mpi-pstate-throwaway", NULL, "duration",
                  "throwaway", "MPI_PSTATE_THROWAWAY", "3ms",
                  "a throwaway option of the one-entry test",
                  "Exists only in the copy of the tree that tests/py/test_option_one_entry.py "
                  "builds.")
'''

# Prints the environment the plugin exports and the agent command line it
# writes, for default options (the throwaway's default is 3ms).
DRIVER = r'''
#include <stdio.h>
#include "agentctl.h"
#include "options.h"

static int show(void *ctx, const char *name, const char *value)
{
        (void)ctx;
        printf("env %s=%s\n", name, value);
        return 0;
}

int main(void)
{
        struct mpi_pstate_agent_args a;
        char *argv[MPI_PSTATE_AGENT_MAX_ARGS], buf[2048];
        int n;

        mpi_pstate_agentctl_args_init(&a);
        a.path = "/agent";
        a.shm = "/dev/shm/x";
        a.cpulist = "0";
        a.runtime_dir = "/r";
        a.record = "/r/agent.json";
        mpi_pstate_options_defaults(&a.opt);
        a.opt.mode = MPI_PSTATE_MODE_ON;
        if (mpi_pstate_options_to_env(&a.opt, show, NULL) != 0)
                return 1;
        n = mpi_pstate_agentctl_argv(&a, buf, sizeof(buf), argv, MPI_PSTATE_AGENT_MAX_ARGS);
        for (int i = 0; i < n; i++)
                printf("arg %s\n", argv[i]);
        return n < 0;
}
'''


def ignore(_dir: str, names: list[str]) -> list[str]:
    return [n for n in names if n.startswith("build") or n in (".git", "__pycache__")]


class OneEntry(unittest.TestCase):
    @classmethod
    def setUpClass(cls) -> None:
        cls.tmp = Path(tempfile.mkdtemp(prefix="mpst-one-entry-"))
        cls.tree = cls.tmp / "tree"
        shutil.copytree(TOP, cls.tree, ignore=ignore, symlinks=True)
        d = cls.tree / "common" / "options.def"
        text = d.read_text()
        first_undef = text.index("#undef MPI_PSTATE_OPTION")
        d.write_text(text[:first_undef] + ENTRY.lstrip("\n") + "\n" + text[first_undef:])
        cls.gen = subprocess.run([PYTHON, "spank/gen_options.py", "--update"], cwd=cls.tree,
                                 capture_output=True, text=True, timeout=120)
        b = "build-one"
        cls.so = cls.tree / b / "spank" / "spank_mpi_pstate.so"
        cls.agent = cls.tree / b / "agent" / "mpi-pstate-agent"
        cls.make = subprocess.run(
            ["make", "-j2", f"B={b}", str(cls.so.relative_to(cls.tree)),
             str(cls.agent.relative_to(cls.tree))],
            cwd=cls.tree, capture_output=True, text=True, timeout=900)
        cls.driver_out = ""
        if cls.make.returncode == 0:
            (cls.tmp / "driver.c").write_text(DRIVER)
            exe = cls.tmp / "driver"
            cc = subprocess.run(
                ["gcc", "-std=c11", "-D_GNU_SOURCE", "-Icommon", "-Ispank", f"-I{b}/gen", "-o",
                 str(exe), str(cls.tmp / "driver.c"), f"{b}/spank/agentctl.o",
                 f"{b}/libmpi-pstate-common.a", "-lhwloc", "-lm"],
                cwd=cls.tree, capture_output=True, text=True, timeout=120)
            cls.driver_out = cc.stdout + cc.stderr
            if cc.returncode == 0:
                r = subprocess.run([str(exe)], capture_output=True, text=True, timeout=60)
                cls.driver_out = r.stdout if r.returncode == 0 else r.stdout + r.stderr + "FAILED"

    @classmethod
    def tearDownClass(cls) -> None:
        shutil.rmtree(cls.tmp, ignore_errors=True)

    def test_documents_regenerated(self) -> None:
        self.assertEqual(self.gen.returncode, 0, self.gen.stdout + self.gen.stderr)
        for doc in ("man/mpi_pstate.8.in", "man/mpi-pstate-agent.8"):
            self.assertIn("\\-\\-mpi\\-pstate\\-throwaway", (self.tree / doc).read_text(), doc)
        self.assertIn(".B MPI_PSTATE_THROWAWAY", (self.tree / "man/mpi_pstate.8.in").read_text())
        for doc in ("docs/options.md", "docs/agent.md"):
            self.assertIn("--mpi-pstate-throwaway", (self.tree / doc).read_text(), doc)
        self.assertIn("`default_throwaway`", (self.tree / "docs/options.md").read_text())

    def test_plugin_and_agent_build(self) -> None:
        self.assertEqual(self.make.returncode, 0, self.make.stdout[-3000:] + self.make.stderr[-3000:])

    def test_spank_help_text_in_the_plugin(self) -> None:
        self.assertEqual(self.make.returncode, 0)
        self.assertIn(b"[mpi-pstate] a throwaway option of the one-entry test",
                      self.so.read_bytes())
        self.assertIn(b"mpi-pstate-throwaway\0", self.so.read_bytes())

    def test_environment_and_agent_command_line(self) -> None:
        self.assertEqual(self.make.returncode, 0)
        self.assertIn("env MPI_PSTATE_THROWAWAY=3000\n", self.driver_out)
        self.assertIn("arg --mpi-pstate-throwaway\narg 3000\n", self.driver_out)

    def test_agent_parses_it_and_shows_it(self) -> None:
        self.assertEqual(self.make.returncode, 0)
        h = subprocess.run([str(self.agent), "--help"], capture_output=True, text=True, timeout=60)
        self.assertEqual(h.returncode, 0)
        self.assertIn("--mpi-pstate-throwaway, --throwaway duration", h.stdout)
        for flag in ("--mpi-pstate-throwaway", "--throwaway"):
            ok = subprocess.run([str(self.agent), flag, "2ms", "--version"],
                                capture_output=True, text=True, timeout=60)
            self.assertEqual(ok.returncode, 0, ok.stderr)
        bad = subprocess.run([str(self.agent), "--mpi-pstate-throwaway", "2 parsecs", "--version"],
                             capture_output=True, text=True, timeout=60)
        self.assertEqual(bad.returncode, 2)
        self.assertIn("--mpi-pstate-throwaway", bad.stderr)


if __name__ == "__main__":
    unittest.main()
