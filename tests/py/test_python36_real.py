# SPDX-License-Identifier: BSD-3-Clause
"""The installed Python on a real Python 3.6, EL8's /usr/bin/python3, where
the node Epilog runs (a failure there drains the node): every module of
epilog/mpi_pstate and its subpackages imports, `mpi-pstate --help` and every subcommand's
--help exit 0 (with -I, as the installed script runs, and only PATH in
the environment, as Slurm starts an Epilog), and the suites that exercise
the installed code pass.  The static checks (tests/py36-lint,
test_epilog_py36.py) see the syntax and the library names; this sees what
3.6 does at run time.

Everything runs in the C locale: an Epilog's environment sets none, and
3.6 neither coerces it to UTF-8 nor has a UTF-8 mode (both 3.7), so its
text I/O there is ASCII.

The interpreter: $MPI_PSTATE_PYTHON36, else /root/.pyenv/versions/3.6*/
bin/python3, else python3.6 on PATH; none (the Debian roots) skips."""
import glob
import os
import re
import shutil
import subprocess
import sys
import time
import unittest
from pathlib import Path
from typing import Dict, List, Optional

TOP = Path(__file__).resolve().parents[2]
HERE = Path(__file__).resolve().parent
CLI = TOP / "epilog" / "mpi-pstate"
PKG = TOP / "epilog" / "mpi_pstate"

# The suites of tests/py that exercise the installed code and run on 3.6
# (the report's browser test needs chromium and skips where it is missing,
# as it does everywhere).  About 50 s on a 2-CPU machine.
SUITES = ["test_epilog", "test_epilog_summary", "test_epilog_sums", "test_epilog_adversarial",
          "test_root_trust", "test_slots", "test_metrics", "test_report", "test_report_html",
          "test_report_levers", "test_whatif", "test_calibrate", "test_carbon",
          "test_durations", "test_status", "test_report_cli", "test_delivery",
          "test_report_types", "test_epilog_shm_scan", "test_epilog_empty_records"]
TIMEOUT_S = 900
# One subcommand's line of the top-level --help: four spaces, its name.
SUBCOMMAND_LINE = re.compile(r"^    ([a-z][a-z0-9-]*)(?:\s|$)")


def find_python36() -> Optional[str]:
    """The 3.6 interpreter to run, or None when there is none."""
    env = os.environ.get("MPI_PSTATE_PYTHON36")
    if env:
        return env  # named: it must work (checked by the test, not skipped)
    found = sorted(glob.glob("/root/.pyenv/versions/3.6*/bin/python3"))
    for p in reversed(found):
        if os.access(p, os.X_OK):
            return p
    return shutil.which("python3.6")


PY36 = find_python36()


# An Epilog's environment: slurmd sets no locale and no search path (the
# package's Slurm commands are found through slurm.SAFE_PATH); a plain PATH.
EPILOG_ENV = {"PATH": "/usr/sbin:/usr/bin:/sbin:/bin", "LC_ALL": "C"}


def py_phase_env(**extra: str) -> Dict[str, str]:
    """The py phase's environment (tests/run's MPI_PSTATE_BUILD and the
    rest) in the C locale, without PYTHON* (a 3.11 path or home must not
    reach 3.6), with extra set."""
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("PYTHON", "LC_")) and k != "LANG"}
    env.update(LC_ALL="C", **extra)
    return env


def run36(args: List[str], timeout: float = 120, env: Optional[Dict[str, str]] = None
          ) -> subprocess.CompletedProcess:
    assert PY36 is not None
    return subprocess.run([PY36] + args, cwd=str(TOP), env=env or EPILOG_ENV,
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                          universal_newlines=True, timeout=timeout)


def subcommands(help_text: str) -> List[str]:
    """The subcommands the top-level --help lists."""
    return [m.group(1) for m in map(SUBCOMMAND_LINE.match, help_text.splitlines()) if m]


@unittest.skipIf(PY36 is None, "no Python 3.6 interpreter ($MPI_PSTATE_PYTHON36, "
                 "/root/.pyenv/versions/3.6*/bin/python3, python3.6 on PATH)")
class Python36(unittest.TestCase):
    @classmethod
    def setUpClass(cls) -> None:
        r = run36(["-I", "-c", "import sys; print('%d.%d' % sys.version_info[:2])"])
        if r.returncode != 0 or r.stdout.strip() != "3.6":
            raise AssertionError(f"{PY36} is not a working Python 3.6: "
                                 f"{r.stdout.strip()} {r.stderr.strip()}")

    def test_every_installed_module_imports(self) -> None:
        mods = sorted(".".join(p.relative_to(PKG).with_suffix("").parts)
                      for p in PKG.rglob("*.py"))
        self.assertIn("site.entry", mods)
        for mod in mods:
            name = "mpi_pstate." + mod[:-len(".__init__")] if mod.endswith(".__init__") else \
                "mpi_pstate" if mod == "__init__" else "mpi_pstate." + mod
            with self.subTest(module=name):
                r = run36(["-I", "-c", f'import sys; sys.path.insert(0, "epilog"); import {name}'])
                self.assertEqual(r.returncode, 0, r.stderr)

    def test_every_subcommand_s_help(self) -> None:
        r = run36(["-I", str(CLI), "--help"])
        self.assertEqual(r.returncode, 0, r.stderr)
        subs = subcommands(r.stdout)
        for sub in ("report", "epilog", "epilog-slurmctld", "flush", "node-prune", "status"):
            self.assertIn(sub, subs, r.stdout)
        for sub in subs:
            with self.subTest(subcommand=sub):
                h = run36(["-I", str(CLI), sub, "--help"])
                self.assertEqual(h.returncode, 0, h.stderr)
                self.assertIn("usage:", h.stdout)

    def test_suites_pass(self) -> None:
        """The suites above, in one 3.6 process, as the py phase runs them
        (tests/py first on the path, the build tests/run names), in the C
        locale."""
        build = os.environ.get("MPI_PSTATE_BUILD", str(TOP / "build"))
        t0 = time.monotonic()
        r = run36(["-m", "unittest"] + SUITES, timeout=TIMEOUT_S,
                  env=py_phase_env(PYTHONPATH=os.pathsep.join([str(HERE), str(TOP / "epilog")]),
                                   MPI_PSTATE_BUILD=build))
        out = r.stdout + r.stderr
        took = time.monotonic() - t0
        self.assertEqual(r.returncode, 0, f"the suites failed on {PY36} "
                         f"({took:.0f} s):\n{out[-30000:]}")
        self.assertRegex(out, r"\nRan [1-9][0-9]* tests? in ", out[-3000:])


if __name__ == "__main__":
    unittest.main()
