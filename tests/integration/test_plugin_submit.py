# SPDX-License-Identifier: BSD-3-Clause
"""The plugin's options at submit time, as the test user: listed by --help of
sbatch, salloc and srun; every good value accepted by each command; every
bad value refused by each command before anything is queued, with a message
naming the option and the value."""
from __future__ import annotations

import os
import re
import unittest

import labtools as lt

PLUGIN = lt.installed().plugin

OPTIONS = ["--mpi-pstate", "--mpi-pstate-threshold", "--mpi-pstate-low", "--mpi-pstate-governor",
           "--mpi-pstate-bind"]

GOOD = [
    ["--mpi-pstate"],
    ["--mpi-pstate=on"],
    ["--mpi-pstate=profile"],
    ["--mpi-pstate=off"],
    ["--mpi-pstate", "--mpi-pstate-threshold=2ms"],
    ["--mpi-pstate", "--mpi-pstate-threshold=0"],
    ["--mpi-pstate", "--mpi-pstate-low=1.5GHz"],
    ["--mpi-pstate", "--mpi-pstate-low=min"],
    ["--mpi-pstate", "--mpi-pstate-governor=powersave"],
    ["--mpi-pstate", "--mpi-pstate-bind=scatter"],
    ["--mpi-pstate=profile", "--mpi-pstate-threshold=1s", "--mpi-pstate-low=1800MHz",
     "--mpi-pstate-governor=keep", "--mpi-pstate-bind=compact"],
]

BAD = [
    ("--mpi-pstate=maybe", '"maybe" for --mpi-pstate: expected one of off, on, profile'),
    ("--mpi-pstate-threshold=abc", '"abc" for --mpi-pstate-threshold: expected a duration'),
    ("--mpi-pstate-threshold=-5ms", '"-5ms" for --mpi-pstate-threshold'),
    ("--mpi-pstate-low=fast", '"fast" for --mpi-pstate-low: expected a frequency'),
    ("--mpi-pstate-governor=turbo", '"turbo" for --mpi-pstate-governor: expected one of keep'),
    ("--mpi-pstate-bind=bogus", '"bogus" for --mpi-pstate-bind: expected one of none, cores, '
                                'compact, scatter'),
]


def command(cmd: str, opts: list[str], name: str = "plugin-submit") -> list[str]:
    """The command line of cmd with the plugin's options, never running
    anything long: sbatch and srun only test (--test-only); salloc has no
    such option and runs `true` in a one-minute allocation."""
    if cmd == "sbatch":
        return ["sbatch", "--test-only", "-J", name, "-t", "1", *opts, "--wrap", "true"]
    if cmd == "srun":
        return ["srun", "--test-only", "-J", name, "-t", "1", "-n1", *opts, "true"]
    return ["salloc", "-J", name, "-t", "1", "-n1", *opts, "true"]


def jobs_named(name: str) -> list[str]:
    """Every job of that name Slurm knows, queued or finished."""
    r = lt.root(["sacct", "-n", "-X", "-P", "-S", "now-1hour", "--name", name, "-o", "JobID"],
                check=False)
    q = lt.root(["squeue", "-h", "--name", name, "-o", "%i"], check=False)
    return r.stdout.split() + q.stdout.split()


class SubmitTime(unittest.TestCase):
    @classmethod
    def setUpClass(cls) -> None:
        if not PLUGIN.exists():
            raise unittest.SkipTest("plugin not installed (tests/cluster/lab install)")

    def test_help_lists_every_option(self) -> None:
        for cmd in ("sbatch", "salloc", "srun"):
            with self.subTest(cmd=cmd):
                r = lt.as_user([cmd, "--help"])
                self.assertEqual(r.returncode, 0, r.stderr)
                for o in OPTIONS:
                    self.assertRegex(r.stdout, rf"\n\s+{re.escape(o)}=", f"{cmd} --help lacks {o}")
                # The mode is optional: shown in brackets.
                self.assertIn("--mpi-pstate=[mode] ", r.stdout, f"{cmd} --help")
                self.assertEqual(r.stdout.count("[mpi-pstate] "), len(OPTIONS), f"{cmd} --help")

    def test_good_values_accepted(self) -> None:
        for cmd in ("sbatch", "srun", "salloc"):
            for opts in GOOD if cmd != "salloc" else GOOD[-2:]:
                with self.subTest(cmd=cmd, opts=opts):
                    r = lt.as_user(command(cmd, opts), timeout=90)
                    self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
                    self.assertNotIn("mpi-pstate:", r.stderr)

    def test_bad_values_refused_before_queueing(self) -> None:
        name = f"plugin-refused-{os.getpid()}"
        for cmd in ("sbatch", "srun", "salloc"):
            for opt, why in BAD:
                with self.subTest(cmd=cmd, opt=opt):
                    r = lt.as_user(command(cmd, [opt], name), timeout=60)
                    self.assertNotEqual(r.returncode, 0, r.stdout + r.stderr)
                    self.assertIn(f"{cmd}: error: mpi-pstate: invalid value {why}", r.stderr)
                    self.assertNotIn("Granted job allocation", r.stderr)
                    self.assertNotIn("Submitted batch job", r.stdout)
        self.assertEqual(jobs_named(name), [])

    def test_bad_value_through_the_environment(self) -> None:
        """SLURM_SPANK__SLURM_SPANK_OPTION_mpi_pstate_<option> is checked the same way."""
        r = lt.as_user(["sbatch", "--test-only", "-t", "1", "--wrap", "true"], extra_env={
            "SLURM_SPANK__SLURM_SPANK_OPTION_mpi_pstate_mpi_pstate_threshold": "abc"})
        self.assertNotEqual(r.returncode, 0)
        self.assertIn('invalid value "abc" for --mpi-pstate-threshold', r.stderr)
        r = lt.as_user(["sbatch", "--test-only", "-t", "1", "--wrap", "true"], extra_env={
            "SLURM_SPANK__SLURM_SPANK_OPTION_mpi_pstate_mpi_pstate_threshold": "3ms"})
        self.assertEqual(r.returncode, 0, r.stderr)

    def test_bare_option_cannot_take_a_separate_word(self) -> None:
        """--mpi-pstate profile: the word is the script, not the mode."""
        r = lt.as_user(["sbatch", "--test-only", "-t", "1", "--mpi-pstate", "profile"])
        self.assertNotEqual(r.returncode, 0)
        self.assertIn("profile", r.stderr)


if __name__ == "__main__":
    unittest.main()
