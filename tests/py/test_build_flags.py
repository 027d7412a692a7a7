# SPDX-License-Identifier: BSD-3-Clause
"""The build as packagers drive it: CPPFLAGS, CFLAGS and LDFLAGS from the
command line or the environment reach every compile and link of `make all`
and `make unit`, after the project's own flags (hardening stays); -Werror
is only there when asked for (CI and `make check` pass WERROR=-Werror); and
SLURM_PREFIX points the build at a Slurm installed elsewhere.  Read from
`make -n -B` (nothing is built)."""
import os
import re
import subprocess
import tempfile
import unittest
from pathlib import Path
from typing import Dict, List

TOP = Path(__file__).resolve().parents[2]
COMPILERS = re.compile(r"^\s*(gcc|cc|clang|mpicc\S*)\s")


def dry_run(*args: str, env: Dict[str, str] = None) -> List[str]:
    """The compiler command lines `make -n -B` would run, continuation
    lines joined."""
    with tempfile.TemporaryDirectory(prefix="mpi-pstate-flags.") as tmp:
        out = subprocess.run(["make", "-C", str(TOP), "--no-print-directory", "-n", "-B",
                              "B=%s/b" % tmp, *args],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                             universal_newlines=True, env=env, timeout=120)
    if out.returncode != 0:
        raise AssertionError("make -n failed: %s" % out.stderr[-2000:])
    text = re.sub(r"\\\n", " ", out.stdout)
    return [ln for ln in text.splitlines() if COMPILERS.match(ln)]


def is_compile(line: str) -> bool:
    return " -c " in line or " -E " in line


class PackagerFlags(unittest.TestCase):
    FLAGS = ["CPPFLAGS=-DMPST_CPP", "CFLAGS=-DMPST_C", "LDFLAGS=-Wl,-O1,--mpst-ld"]

    def check_lines(self, lines: List[str]) -> None:
        self.assertGreater(len(lines), 40)
        for line in lines:
            with self.subTest(line=line[:120]):
                self.assertIn("-DMPST_C", line)  # CFLAGS: compiles and links
                if is_compile(line):
                    self.assertIn("-DMPST_CPP", line)
                else:
                    self.assertIn("-Wl,-O1,--mpst-ld", line)

    def test_command_line_flags_reach_every_compile_and_link(self) -> None:
        self.check_lines(dry_run("all", "unit", *self.FLAGS))

    def test_environment_flags_reach_every_compile_and_link(self) -> None:
        env = dict(os.environ)
        env.update(f.split("=", 1) for f in self.FLAGS)
        self.check_lines(dry_run("all", "unit", env=env))

    def test_user_flags_come_after_the_hardening(self) -> None:
        for line in dry_run("all", *self.FLAGS):
            if is_compile(line) and "-fstack-protector-strong" in line:
                self.assertLess(line.index("-fstack-protector-strong"), line.index("-DMPST_C"))

    def test_a_packagers_fortify_level_is_not_redefined(self) -> None:
        lines = [ln for ln in dry_run("all", "CPPFLAGS=-D_FORTIFY_SOURCE=3") if is_compile(ln)]
        hardened = [ln for ln in lines if "-fstack-protector-strong" in ln]
        self.assertTrue(hardened)
        for line in hardened:
            self.assertEqual(line.count("_FORTIFY_SOURCE"), 1, line)
        plain = [ln for ln in dry_run("all") if "-fstack-protector-strong" in ln]
        self.assertTrue(all("-D_FORTIFY_SOURCE=2" in ln for ln in plain))

    def test_werror_only_when_asked(self) -> None:
        env = dict(os.environ)
        env.pop("WERROR", None)
        env.pop("MAKEFLAGS", None)
        self.assertFalse([ln for ln in dry_run("all", "unit", env=env) if "-Werror" in ln])
        asked = dry_run("all", "WERROR=-Werror", env=env)
        self.assertTrue(all("-Werror" in ln for ln in asked if is_compile(ln)))


class SlurmPrefix(unittest.TestCase):
    def test_prefix_gives_headers_library_and_plugin_dir(self) -> None:
        with tempfile.TemporaryDirectory(prefix="mpi-pstate-slurm.") as pfx:
            (Path(pfx) / "include" / "slurm").mkdir(parents=True)
            (Path(pfx) / "lib64").mkdir()
            (Path(pfx) / "lib64" / "libslurm.so").write_text("")
            lines = dry_run("all", "SLURM_PREFIX=" + pfx)
            dirs = subprocess.run(["make", "-C", str(TOP), "--no-print-directory", "print-dirs",
                                   "SLURM_PREFIX=" + pfx], stdout=subprocess.PIPE,
                                  universal_newlines=True, check=True).stdout
        spank = [ln for ln in lines if "spank/mpi_pstate.c" in ln]
        self.assertTrue(spank)
        self.assertIn("-isystem %s/include" % pfx, spank[0])
        dbcomment = [ln for ln in lines if "mpi-pstate-dbcomment.c" in ln]
        self.assertEqual(len(dbcomment), 1)
        self.assertIn("-L%s/lib64" % pfx, dbcomment[0])
        self.assertIn("-Wl,-rpath,%s/lib64" % pfx, dbcomment[0])
        self.assertIn("SLURM_PLUGINDIR=%s/lib64/slurm\n" % pfx, dirs)


if __name__ == "__main__":
    unittest.main()
