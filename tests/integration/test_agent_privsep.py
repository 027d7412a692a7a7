# SPDX-License-Identifier: BSD-3-Clause
"""The agent, exploited, reaches nothing but its own step (docs/security.md).

The agent's own start-up path runs (mpi-pstate-agent-probe: the daemon's
objects and tests/programs/agent/probe.c, run inside it once it is confined), then
tries from inside it what an exploited slot reader would: read /etc/shadow,
open a root file with O_TRUNC, create a file in a stand-in of /etc/cron.d
and in /etc/cron.d, write, truncate, remove or rename another job's restore
record or plant a forged one, write 64 MiB to its own record, kill(pid, 0)
and SIGTERM a foreign process, setuid(0).  Each fails with the kernel's
Landlock support forced to ABI 0 (none: RHEL 8), 2 (Linux 5.13-6.1: Debian
12) and the kernel's own.  A lower, a raise and the restore still work
after all that, and the other job's CPU and record are untouched: the
forged-record reproduction (a record naming another job's CPU, applied by
root's backstop) no longer has a way in.  No cluster: a fake sysfs."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import unittest
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import test_agent_daemon as base  # noqa: E402  (Tree, Agent, FakeRank, wait_for)

PROBE = base.BUILD / "tests" / "agent" / "mpi-pstate-agent-probe"
SKIP = base.SKIP or (None if PROBE.exists() else f"needs {PROBE} (make agent-helpers)")
REFUSED = (
    "read /etc/shadow",
    "open with O_TRUNC",
    "open for writing",
    "create",
    "write another job's restore record",
    "truncate another job's restore record",
    "remove another job's restore record",
    "rename another job's restore record",
    "plant a forged restore record in",
    "write 64 MiB into its record",
    "kill(pid, 0) of a foreign process",
    "SIGTERM to a foreign process",
    "setuid(0)",
)


def kernel_abi() -> int:
    import ctypes
    libc = ctypes.CDLL(None, use_errno=True)
    abi = libc.syscall(444, None, 0, 1)  # landlock_create_ruleset(NULL, 0, VERSION)
    return abi if abi > 0 else 0


@unittest.skipIf(SKIP, SKIP or "")
class ExploitedAgent(base.AgentCase):

    def run_probe(self, abi: int) -> None:
        t = self.tree(cpus=2)
        # Another job on CPU 1: its agent saved policy1 and was killed.
        other = self.agent(t, 1, "--threshold", "1ms", cpus="1", job=78)
        other.kill()
        other_rec = other.runtime / "policy1"
        os.makedirs(t.run / "4242", mode=0o700, exist_ok=True)
        (t.run / "4242" / "policy1").write_bytes(other_rec.read_bytes())
        foreign_record = t.run / "4242" / "policy1"
        record_text = foreign_record.read_bytes()
        before = t.snapshot()
        root_file = t.dir / "root-file"
        root_file.write_text("root's\n")
        root_file.chmod(0o644)
        cron = t.dir / "cron.d"
        cron.mkdir(mode=0o755)
        victim = subprocess.Popen(["sleep", "120"])
        self.addCleanup(lambda: (victim.kill(), victim.wait()))
        env = {"MPI_PSTATE_PROBE_LANDLOCK_ABI": str(abi), "PROBE_SHADOW": "/etc/shadow",
               "PROBE_ROOT_FILE": str(root_file), "PROBE_CRON_DIR": str(cron),
               "PROBE_FOREIGN_RECORD": str(foreign_record), "PROBE_FOREIGN_PID": str(victim.pid)}
        a = base.Agent(t, 1, "--threshold", "1ms", cpus="0", binary=PROBE, env=env)
        self.agents.append(a)
        self.assertEqual(a.started.returncode, 0, a.started.stderr)
        base.wait_for(lambda: "worked" in a.log.read_text(), what="the probe's report")
        log = a.log.read_text()
        probe = [ln.split("probe: ", 1)[1] for ln in log.splitlines() if "probe: " in ln]
        self.assertIn("0 worked", probe, "\n".join(probe))
        for what in REFUSED:
            self.assertTrue(any(p.startswith(what) and "refused" in p for p in probe),
                            f"no refusal of {what!r} at ABI {abi}:\n" + "\n".join(probe))
        self.assertFalse([p for p in probe if "WORKED" in p], "\n".join(probe))
        self.assertTrue(any(p.startswith("uid 65531 gid 65531") for p in probe), probe)
        # Untouched: the foreign process, root's files, the other job's record.
        self.assertIsNone(victim.poll(), "the foreign process was signalled")
        self.assertEqual(root_file.read_text(), "root's\n")
        self.assertEqual(list(cron.iterdir()), [])
        self.assertEqual(foreign_record.read_bytes(), record_text)
        self.assertFalse((t.run / "4242" / "policy-forged").exists())
        # The job still works: a lower, a raise, the agent's own put-back.
        seg = self.live(a)
        r = base.FakeRank(seg, 0, cpu=0, threshold_us=1000)
        r.enter()
        base.wait_for(lambda: t.policy(0, "scaling_setspeed") == "1200000", what="lowered")
        r.leave()
        base.wait_for(lambda: t.policy(0, "scaling_setspeed") != "1200000", what="raised")
        rec = a.stop()
        self.assertEqual(rec["hardening"]["uid"], 65531, rec["hardening"])
        self.assertEqual(rec["hardening"]["landlock_abi"], abi if abi else 0, rec["hardening"])
        self.assertLessEqual(a.record.stat().st_size, (1 << 20) + (64 << 10))
        dom = {d["policy"]: d for d in rec["domains"]}
        self.assertEqual(dom["policy0"]["restore"], "restored", dom)
        self.assertEqual(t.policy(0, "scaling_governor"), before["policy0/scaling_governor"])
        # Root's step end: our record applied, the other job's left alone.
        self.assertIn("1 restored, 1 foreign, 0 failed", a.root_restore())
        self.assertEqual(t.snapshot(), before)
        self.assertEqual(foreign_record.read_bytes(), record_text)

    def test_abi_0_no_landlock(self) -> None:
        self.run_probe(0)

    def test_abi_2_no_truncation_right(self) -> None:
        self.run_probe(2)

    def test_kernel_abi(self) -> None:
        abi = kernel_abi()
        if not abi:
            self.skipTest("this kernel has no Landlock: ABI 0 above is the kernel's")
        self.run_probe(abi)


if __name__ == "__main__":
    unittest.main()
