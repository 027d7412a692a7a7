# SPDX-License-Identifier: BSD-3-Clause
"""Attacks on the root side (node agent, its segment and log) by the job's
user, replayed without the cluster and asserted against the bounds of
docs/security.md ("Root side: plugin and agent").

The hostile rank is tests/programs/agent/hostile.c, run as an unprivileged user on a
segment that user owns, exactly what a rank of a job can do.  CPU time is the
agent's own, read from /proc/<pid>/stat (utime + stime) around the attack,
asserted against a generous multiple of the ceiling: never a wall timing.
"""
from __future__ import annotations

import json
import os
import pwd
import re
import shutil
import subprocess
import sys
import time
import unittest
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import test_agent_daemon as td  # noqa: E402  (Tree, Agent, the fake sysfs)

HOSTILE = td.BUILD / "tests" / "agent" / "hostile"
TICK = os.sysconf("SC_CLK_TCK")

def _user() -> pwd.struct_passwd | None:
    for name in ("mpstuser", "nobody"):
        try:
            return pwd.getpwnam(name)
        except KeyError:
            continue
    return None


PW = _user()
SKIP = td.SKIP or (None if HOSTILE.exists() and PW else f"needs {HOSTILE} and an unprivileged user")
CAP = 0.05            # the agent's default --cpu-cap (5 % of a core)
LOG_MAX = 1 << 20     # agent/log.c LOG_MAX_BYTES
LOG_RESERVE = 64 << 10
GONE_PER_S = 8        # agent/liveness.c GONE_LINES


def cpu_s(pid: int) -> float:
    f = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(f[11]) + int(f[12])) / TICK  # utime, stime


@unittest.skipIf(SKIP, SKIP or "")
class AdversarialRoot(unittest.TestCase):
    def setUp(self) -> None:
        self.tree = td.Tree(cpus=2)
        os.chmod(self.tree.dir, 0o755)  # the user reaches its segment and the copied binary
        self.bin = self.tree.dir / "hostile"
        shutil.copy(HOSTILE, self.bin)  # runs as the user: not from a 0700 checkout
        os.chmod(self.bin, 0o755)
        self.agent: td.Agent | None = None

    def tearDown(self) -> None:
        if self.agent:
            self.agent.kill()
        self.tree.remove()

    def start(self, nslots: int, *extra: str) -> td.Agent:
        self.agent = td.Agent(self.tree, nslots, "--uid", str(PW.pw_uid), "--gid", str(PW.pw_gid), *extra)
        self.assertEqual(self.agent.started.returncode, 0, self.agent.started.stderr)
        return self.agent

    def hostile(self, shm: str, *args: str, timeout: float = 120) -> subprocess.CompletedProcess:
        def drop() -> None:
            os.setgroups([])
            os.setgid(PW.pw_gid)
            os.setuid(PW.pw_uid)

        return subprocess.run([str(self.bin), "--shm", shm, *args], preexec_fn=drop, capture_output=True,
                              text=True, timeout=timeout)

    def test_toggling_rank_stays_under_the_cpu_ceiling(self) -> None:
        """Every slot's pid and state rewritten and the futex bumped in a
        loop (a hostile rank trying to burn root's CPU): the agent's CPU over the attack stays near its
        ceiling.  Without the ceiling the same attack takes 23-42 % of a core
        here (bench/agent/RESULTS.md)."""
        a = self.start(4096)
        seconds = 6
        c0 = cpu_s(a.pid)
        r = self.hostile(a.shm, "--slots", "4096", "--seconds", str(seconds))
        c1 = cpu_s(a.pid)
        self.assertEqual(r.returncode, 0, r.stderr)
        rec = a.stop()
        share = (c1 - c0) / seconds
        # generous: 3x the ceiling (tick granularity, a busy machine)
        self.assertLess(share, 3 * CAP, f"agent used {share:.1%} of a core under attack; record {rec['agent']}")
        self.assertEqual(rec["settings"]["cpu_cap_ppm"], 50000)
        self.assertGreater(rec["agent"]["capped"], 0, rec["agent"])

    def test_fake_pids_flood_neither_log_nor_cpu(self) -> None:
        """A new fake pid in 64 slots every 110 ms (each one "is gone" for the
        agent): at most GONE_PER_S such lines a second, the rest counted."""
        a = self.start(64)
        seconds = 3
        r = self.hostile(a.shm, "--slots", "64", "--seconds", str(seconds), "--period-ms", "110")
        self.assertEqual(r.returncode, 0, r.stderr)
        a.stop()
        log = a.log.read_text()
        gone = len(re.findall(r"is gone", log))
        # the hostile's own exit adds one "gone" per odd slot at the end
        self.assertLessEqual(gone, GONE_PER_S * (seconds + 2) + 64, log[-2000:])
        self.assertRegex(log, r"\d+ more \"is gone\" lines not logged")

    def test_log_is_size_capped(self) -> None:
        """The agent's log never grows past its cap, whatever the ranks make
        it say; the cap is reported once in the file."""
        self.tree.run.mkdir(exist_ok=True)
        log = self.tree.run / "agent.log"
        log.write_bytes(b"x" * (LOG_MAX - 300) + b"\n")
        log.chmod(0o600)
        a = self.start(64)
        r = self.hostile(a.shm, "--slots", "64", "--seconds", "2", "--period-ms", "110")
        self.assertEqual(r.returncode, 0, r.stderr)
        a.stop()
        size = log.stat().st_size
        self.assertLessEqual(size, LOG_MAX + LOG_RESERVE)
        self.assertIn(b"log size cap reached", log.read_bytes()[-(LOG_RESERVE + 4096):])

    def test_agent_keeps_no_privilege(self) -> None:
        """Once set up, every thread of the agent has no capability (not even
        in its bounding set), no_new_privs, Landlock and the seccomp
        allow-list; and it still lowers and restores (the loop and the
        restore need none).  What an exploited agent could still try is
        tests/unit/agent/test_harden.c's."""
        before = self.tree.snapshot()
        a = self.start(2)
        for task in Path(f"/proc/{a.pid}/task").iterdir():
            st = dict(line.split(":\t", 1) for line in (task / "status").read_text().splitlines() if ":\t" in line)
            self.assertEqual(int(st["CapEff"], 16), 0, st["CapEff"])
            self.assertEqual(int(st["CapPrm"], 16), 0, st["CapPrm"])
            self.assertEqual(int(st["CapBnd"], 16), 0, st["CapBnd"])
            self.assertEqual(st["NoNewPrivs"].strip(), "1")
            self.assertEqual(st["Seccomp"].strip(), "2")  # filter mode
        td.sim(a.shm, "--slots", "2", "--threshold-us", "1000", "--seconds", "2", "--compute-us", "2000",
               "--long-us", "5000", "--long-every", "2", user=PW)
        rec = a.stop()
        self.assertGreater(rec["agent"]["lowers"], 0, rec["agent"])
        self.assertEqual(rec["agent"]["lowers"], rec["agent"]["raises"])
        self.assertEqual(self.tree.snapshot(), before)
        # (SCHED_FIFO may be refused where the cgroup has no real-time budget,
        # as in the Debian 13 root: a warning of its own, not hardening's)
        self.assertNotRegex(a.log.read_text(), r"dropping capabilities|seccomp allow-list|Landlock")
        # Landlock confined its writes (this kernel has it: ABI >= 1); the
        # record says how far hardening went on the node
        hard = rec["hardening"]
        self.assertEqual((hard["capabilities"], hard["landlock"], hard["seccomp"]), ("dropped", "on", "on"), hard)
        self.assertGreaterEqual(hard["landlock_abi"], 1)

    def test_ceiling_sleeps_with_every_domain_up(self) -> None:
        """In debt to its CPU ceiling the agent sleeps deaf to the futex: it
        first raises what it lowered, so a rank leaving its wait meanwhile
        never computes clocked down until the sleep ends.  A ceiling of
        0.01 % of a core puts honest long waits in debt at once."""
        before = self.tree.snapshot()
        a = self.start(2, "--cpu-cap", "0.01")
        td.sim(a.shm, "--slots", "2", "--threshold-us", "1000", "--seconds", "3", "--compute-us", "2000",
               "--long-us", "20000", "--long-every", "1", user=PW)
        rec = a.stop()
        self.assertEqual(rec["settings"]["cpu_cap_ppm"], 100)
        self.assertGreater(rec["agent"]["capped"], 0, rec["agent"])
        self.assertGreater(rec["agent"]["lowers"], 0, rec["agent"])
        # every lower is followed by a raise before the next sleep
        self.assertGreater(rec["agent"]["capped_raises"], 0, rec["agent"])
        self.assertEqual(rec["agent"]["lowers"], rec["agent"]["raises"])
        self.assertEqual(self.tree.snapshot(), before)

    def test_forged_nslots_refused(self) -> None:
        """The user rewrites the header to 16384 slots (and grows the file to
        match) between the plugin's fchown and the agent's attach (to make root
        allocate for it): the agent, told the plugin's figure, refuses the segment
        instead of allocating and recording 16384 slots."""
        shm = str(self.tree.dir / "seg")
        td.ms.create_segment(shm, 2)
        os.chown(shm, PW.pw_uid, PW.pw_gid)
        r = self.hostile(shm, "--nslots", "16384")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(os.stat(shm).st_size, 4096 + 16384 * 16384)
        argv = [str(td.AGENT), "--shm", shm, "--nslots", "2", "--uid", str(PW.pw_uid), "--cpus", "0-1",
                "--job", "1", "--step", "0", "--sysroot", str(self.tree.sys), "--runtime-dir",
                str(self.tree.run / "1"), "--record", str(self.tree.run / "agent.json"), "--foreground",
                "--exit-when-done", "--log", "stderr"]
        p = subprocess.run(argv, capture_output=True, text=True, timeout=30)
        self.assertEqual(p.returncode, 1, p.stdout + p.stderr)
        self.assertIn("not the slot count it was made with", p.stderr)
        self.assertFalse((self.tree.run / "agent.json").exists() and
                         (self.tree.run / "agent.json").stat().st_size > 64 << 10)


try:
    import labtools as lt
    LAB_SKIP = None if lt.installed().plugin.exists() and lt.installed().front.exists() and \
        "runtime_dir=" in (lt.LAB / "etc" / "plugstack.conf.d" / "mpi-pstate.conf").read_text() else \
        "plugin not installed in the lab (tests/cluster/lab install)"
except (ImportError, OSError) as e:  # no lab on this machine
    LAB_SKIP = f"no lab: {e}"
LIB_RE = re.compile(r"^mpi-pstate: rank (\d+)/(\d+): (\w+) backend, (\S+) slot (\d+), .* mode (\w+), MPI waits \w+$", re.M)


@unittest.skipIf(LAB_SKIP, LAB_SKIP or "")
class Squatting(unittest.TestCase):
    """Another user pre-creates every name of the next jobs' segments that
    earlier releases used (directories and files, squatting the
    predictable names): the
    victim's step is still measured, in a segment whose name has a random
    suffix, listed with its inode in the step record."""

    def test_predictable_names_blocked_by_another_user(self) -> None:
        wd = lt.workdir("adversarial-squat")
        # MPICH over pmi2: every release's Slurm has it (Debian's 26.05 has no mpi/pmix)
        lt.give(lt.BUILD / "tests" / "mpi" / "imbalance.mpich", wd)
        probe = lt.as_user(["sbatch", "--parsable", "-H", "-o", "/dev/null", "--wrap", "true"], cwd=wd, check=True)
        last = int(probe.stdout.strip().split(";")[0])
        lt.root(["scancel", str(last)], check=False)
        names = [f"/dev/shm/mpi-pstate.{j}.{s}" for j in range(last + 1, last + 4)
                 for s in ("0", "1", "2", "batch", "extern", "interactive")]
        squatter = "nobody"
        plant = " && ".join(f"mkdir -p {n} && touch {n}/x" for n in names[::2]) + " && " + \
            " && ".join(f"touch {n}" for n in names[1::2])
        try:
            for node in ("n1",):
                lt.node_exec(node, f"runuser -u {squatter} -- sh -c '{plant}'")
            r = lt.as_user(["srun", "-t", "2", "-N1", "-w", "n1", "-n2", "--mpi=pmi2", "--mpi-pstate=profile",
                            "./imbalance.mpich", "10", "40"], cwd=wd, extra_env={"MPI_PSTATE_VERBOSE": "1"},
                           timeout=150)
            self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
            libs = LIB_RE.findall(r.stdout + r.stderr)
            self.assertEqual(len(libs), 2, r.stdout + r.stderr)
            segs = {l[3] for l in libs}
            self.assertEqual(len(segs), 1, libs)
            seg = segs.pop()
            m = re.fullmatch(r"/dev/shm/mpi-pstate\.(\d+)\.0\.[0-9a-f]{16}", seg)
            self.assertIsNotNone(m, seg)
            job = int(m.group(1))
            self.assertIn(f"/dev/shm/mpi-pstate.{job}.0", names)  # the squatted job
            self.assertEqual(sorted(int(l[4]) for l in libs), [0, 1])  # the plugin's slots, not private ones
            rec = json.loads((lt.LAB / "nodes" / "n1" / "run" / "steps" / f"{job}.0" / "plugin.json").read_text())
            self.assertEqual(rec["version"], 2, rec)
            self.assertEqual([s["name"] for s in rec["segments"]], [seg.rsplit("/", 1)[1]], rec)
            self.assertGreaterEqual(rec["segments"][0]["nslots"], 2, rec)
        finally:
            lt.node_exec("n1", "rm -rf " + " ".join(names), check=False)


if __name__ == "__main__":
    unittest.main()
