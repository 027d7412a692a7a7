# SPDX-License-Identifier: BSD-3-Clause
"""`mpi-pstate exec` passes the agent every option the plugin passes: both
write the agent's command line from common/agent_args.def, exec with the
site's settings read from the plugin's own plugstack line, and the agent
takes what exec writes."""
import argparse
import os
import subprocess
import sys
import tempfile
import unittest
from pathlib import Path

TOP = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(TOP / "epilog"))
from mpi_pstate import agent_args
from mpi_pstate.user import launcher  # noqa: E402

AGENT = Path(os.environ.get("MPI_PSTATE_BUILD", TOP / "build")) / "agent" / "mpi-pstate-agent"
# A site whose every setting the plugin passes is not the agent's default.
SITE = {"mechanism": "setspeed", "freq_min": "1.1GHz", "agent_cpu_budget": "1.5",
        "uncore": "yes", "uncore_threshold": "20ms", "sysroot": "/tmp/fakesys",
        "agent_user": "daemon", "default_low": "efficient", "default_governor": "performance"}
# What the plugin passes: ALWAYS and SET entries, and its own (PLUGIN).
PLUGIN_PASSES = {f for f, _t, _d, p, _h in agent_args.AGENT_ARGS if p in ("ALWAYS", "SET")}


def args(mode: str = "on") -> argparse.Namespace:
    return argparse.Namespace(mode=mode, threshold=None)


class ExecArgv(unittest.TestCase):
    def setUp(self) -> None:
        self.work = tempfile.mkdtemp(prefix="mpst-exec-argv-")
        self.addCleanup(subprocess.run, ["rm", "-rf", self.work])
        for env in [o[4] for o in agent_args.JOB_OPTIONS]:
            if env in os.environ:
                self.addCleanup(os.environ.__setitem__, env, os.environ[env])
                del os.environ[env]

    def argv(self, site: dict) -> list:
        values, job = launcher.agent_values(args(), self.work, site, [0, 1], "/dev/shm/x")
        self.assertEqual(PLUGIN_PASSES - set(values), set(), "exec decides no value for these")
        return launcher.agent_argv(str(AGENT), values, job)

    def test_every_option_the_plugin_passes(self) -> None:
        argv = self.argv(SITE)
        flags = [a[2:] for a in argv if a.startswith("--")]
        # only allow-governor stays at the agent's default outside Slurm: the
        # plugin passes "no" only when Slurm set the step's frequencies
        self.assertEqual(sorted(PLUGIN_PASSES - set(flags)), ["allow-governor"])
        for name, *_ in agent_args.JOB_OPTIONS:
            self.assertIn(name, flags)
        line = " ".join(argv)
        for want in ("--mechanism setspeed", "--freq-min 1.1GHz", "--cpu-budget 1.5",
                     "--uncore yes", "--uncore-threshold 20ms", "--sysroot /tmp/fakesys",
                     "--mpi-pstate-low efficient", "--mpi-pstate-governor performance",
                     "--create 2", "--cpus 0-1"):
            self.assertIn(want, line)

    def test_the_agents_own_defaults_are_not_written(self) -> None:
        line = " ".join(self.argv({"uncore_threshold": "10000us", "agent_cpu_budget": "0.5"}))
        for flag in ("--uncore-threshold", "--cpu-budget", "--uncore ", "--sysroot", "--freq-min"):
            self.assertNotIn(flag, line)
        self.assertIn("--mechanism auto", line)  # always passed, default or not

    def test_a_missing_value_the_plugin_always_passes_is_refused(self) -> None:
        values, job = launcher.agent_values(args(), self.work, {}, [0], "/dev/shm/x")
        del values["record"]
        with self.assertRaises(ValueError):
            launcher.agent_argv("agent", values, job)

    @unittest.skipUnless(AGENT.exists(), "the agent is not built")
    def test_the_agent_takes_what_exec_writes(self) -> None:
        argv = self.argv(SITE)
        r = subprocess.run(argv + ["--version"], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                           universal_newlines=True, timeout=60)
        self.assertEqual(r.returncode, 0, r.stderr)


if __name__ == "__main__":
    unittest.main()
