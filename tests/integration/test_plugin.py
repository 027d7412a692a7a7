# SPDX-License-Identifier: BSD-3-Clause
"""The SPANK plugin in real jobs on the local two-node cluster, as the test
user: what each rank sees (library, segment, slot, pinning, governor) for both
MPI families and every way of launching them, what the fake cpufreq hardware
of each node went through (write log), and that every node is back where it
was after every job (lab snapshot).

Jobs take whole nodes (--exclusive): the window between the job's first and
last line then belongs to the job alone, so the write-log lines inside it
are the job's.  Every test restores the fake hardware's flavour."""
from __future__ import annotations

import json
import os
import pwd
import re
import subprocess
import time
import unittest
from pathlib import Path
from typing import Optional

import labtools as lt

PLUGIN = lt.installed().plugin
FRONT = lt.installed().front
NODES = ("n1", "n2")
LOW_KHZ = 1200000

# Printed by every rank before it execs the MPI program (wrap.sh below).
RANK_RE = re.compile(r"^RANK host=(\S+) cpus=(\S*) gov=(\S*) mode=(\S*) shm=(\S*) slot=(\S*) "
                     r"thr=(\S*) low=(\S*) bind=(\S*) ld=(\S*)$", re.M)
# The library's own line per rank (MPI_PSTATE_VERBOSE=1), see preload/hooks.c.
LIB_RE = re.compile(r"^mpi-pstate: rank (\d+)/(\d+): (\w+) backend, (\S+) slot (\d+), .* mode (\w+), MPI waits \w+$",
                    re.M)
WINDOW_RE = re.compile(r"^WINDOW (start|end) ([0-9.]+)$", re.M)

WRAP = r"""#!/bin/bash
# What this rank sees, then the program itself (same process).
cpus=$(sed -n 's/^Cpus_allowed_list:\s*//p' /proc/self/status)
gov=-
case $cpus in *[,-]*) ;; *) gov=$(cat /sys/devices/system/cpu/cpu$cpus/cpufreq/scaling_governor) ;; esac
echo "RANK host=$(hostname) cpus=$cpus gov=$gov mode=${MPI_PSTATE_MODE:--} shm=${MPI_PSTATE_SHM:--} slot=${MPI_PSTATE_LOCAL_RANK:-${OMPI_COMM_WORLD_LOCAL_RANK:-${MPI_LOCALRANKID:--}}} thr=${MPI_PSTATE_THRESHOLD:--} low=${MPI_PSTATE_LOW:--} bind=${MPI_PSTATE_BIND:--} ld=${LD_PRELOAD:--}"
exec "$@"
"""

MARKER_C = r"""#define _GNU_SOURCE
#include <errno.h>
#include <stdio.h>
#include <string.h>
/* A user's own preload: says so once in every MPI program it lands in. */
__attribute__((constructor)) static void mark(void)
{
        if (strncmp(program_invocation_short_name, "imbalance", 9) == 0)
                fprintf(stderr, "USER-PRELOAD-MARKER %s\n", program_invocation_short_name);
}
"""

MONO = "python3 -c 'import time; print(\"WINDOW %s %.6f\" % (__import__(\"sys\").argv[1], time.monotonic()))'"


# The writable cpufreq state of every node the step runs on, as the job finds
# it: dumped by an off step (the plugin leaves it alone) at the start of the
# allocation, when no other job can hold the node (--exclusive).  A snapshot
# taken from outside before submitting could catch another job's state.
ATTRS = ("scaling_governor", "scaling_min_freq", "scaling_max_freq", "scaling_setspeed")
STATE_DUMP = ("srun --mpi-pstate=off --ntasks-per-node=1 bash -c 'cd /sys/devices/system/cpu/cpufreq"
              " && for f in policy*/scaling_*; do case $f in */scaling_governor|*/scaling_min_freq|"
              "*/scaling_max_freq|*/scaling_setspeed) echo \"STATE $(hostname) $f=$(cat $f)\";; esac;"
              " done'")
# The first step of a job after the dump.
FIRST = "1"
STATE_RE = re.compile(r"^STATE (\S+) (\S+=.*)$", re.M)


def state_of(snapshot: str) -> list[str]:
    return sorted(l for l in snapshot.splitlines()
                  if "=" in l and l.split("=", 1)[0].rsplit("/", 1)[-1] in ATTRS)


def snapshots() -> dict[str, str]:
    return {n: lt.snapshot(n) for n in NODES}


def window(out: str) -> tuple[float, float]:
    marks = dict(WINDOW_RE.findall(out))
    return float(marks["start"]), float(marks["end"])


def writes(node: str, t0: float, t1: float) -> list[tuple[str, str, str]]:
    """(policy, attr, value) of every accepted write of node between t0 and t1."""
    found = []
    for line in lt.write_log(node):
        parts = line.split()
        if len(parts) < 3 or parts[1] == "reset" or "EINVAL" in parts[3:]:
            continue
        t = float(parts[0])
        if t0 <= t <= t1:
            attr, _, value = parts[2].partition("=")
            found.append((parts[1], attr, value))
    return found


def runtime_dir(node: str) -> Path:
    return lt.LAB / "nodes" / node / "run"


def records_of(job: int) -> list[Path]:
    """Restore records of job left on any node (other jobs' are theirs)."""
    left = []
    for n in NODES:
        d = runtime_dir(n) / "restore"
        for f in d.iterdir() if d.is_dir() else []:
            if f"\njob={job}\n" in f.read_text():
                left.append(f)
    return left


def node_step(node: str, job: int, step: str) -> dict:
    """A step of the node's record of the job: the node Epilog keeps the
    plugin's and the agent's step records there, then removes the step
    directory (docs/records.md).  Waited for (bounded): srun and salloc
    return before the job's Epilog has run."""
    path = lt.LAB / "records" / str(job) / f"node.{node}.json"
    t_end = time.monotonic() + 60
    while not path.exists() and time.monotonic() < t_end:
        time.sleep(0.2)
    rec = json.loads(path.read_text())
    return next(s for s in rec["steps"] if s["step"] == step)


def step_record(node: str, job: int, step: str) -> dict:
    return node_step(node, job, step)["plugin"]


class PluginCase(unittest.TestCase):
    @classmethod
    def setUpClass(cls) -> None:
        if not PLUGIN.exists() or not FRONT.exists():
            raise unittest.SkipTest("plugin or library not installed (tests/cluster/lab install)")
        conf = lt.PLUGSTACK_DROPIN
        if not conf.exists() or "runtime_dir=" not in conf.read_text():
            raise unittest.SkipTest("plugin not active (tests/cluster/lab install)")

    def setUp(self) -> None:
        self.flavoured: list[str] = []
        self.before = snapshots()
        self.found: dict[str, list[str]] = {}

    def tearDown(self) -> None:
        for n in self.flavoured:
            lt.flavour(n)

    def flavour(self, node: str, **cfg: object) -> None:
        """Reshapes node's fake hardware for this test only (reset in tearDown)."""
        self.flavoured.append(node)
        lt.flavour(node, **cfg)
        self.before[node] = lt.snapshot(node)

    def note_state(self, out: str) -> None:
        """Keeps the state the job found (STATE_DUMP lines of out)."""
        found: dict[str, set[str]] = {}
        for host, line in STATE_RE.findall(out):  # once per task of the dump step
            found.setdefault(host, set()).add(line)
        self.found = {host: sorted(lines) for host, lines in found.items()}

    def assert_nodes_restored(self, nodes: tuple[str, ...] = NODES) -> None:
        """Every node of the job back to the state the job found (or, without
        a dump, to the snapshot before the test).  Another job may hold a
        node right after ours: it restores too, so wait for it, bounded."""
        want = {n: self.found.get(n) or state_of(self.before[n]) for n in nodes}
        for _ in range(60):
            got = {n: state_of(lt.snapshot(n)) for n in nodes}
            if got == want:
                return
            time.sleep(0.5)
        self.maxDiff = None
        for n in nodes:
            self.assertEqual(got[n], want[n], f"{n} not restored")

    def workdir(self, name: str, programs: tuple[str, ...] = ("imbalance.openmpi", "imbalance.mpich")
                ) -> Path:
        wd = lt.workdir(f"plugin-{name}")
        for p in programs:
            lt.give(lt.BUILD / "tests" / "mpi" / p, wd)
        self.put(wd / "wrap.sh", WRAP, 0o755)
        return wd

    def put(self, path: Path, text: str, mode: int = 0o644) -> None:
        path.write_text(text)
        path.chmod(mode)
        pw = pwd.getpwnam(lt.TEST_USER)
        os.chown(path, pw.pw_uid, pw.pw_gid)

    def batch(self, wd: Path, args: list[str], body: str, state: str = "COMPLETED") -> tuple[int, str]:
        script = f"{STATE_DUMP}\n{MONO} start\nexport MPI_PSTATE_VERBOSE=1\n{body}\n{MONO} end\n"
        job = lt.sbatch(["-t", "2", "--exclusive", *args], script, wd)
        got = lt.wait_job(job, timeout=150)
        out = (wd / f"slurm-{job}.out").read_text()
        self.assertEqual(got, state, out)
        self.note_state(out)
        return job, out

    def ranks(self, out: str) -> list[dict[str, str]]:
        keys = ("host", "cpus", "gov", "mode", "shm", "slot", "thr", "low", "bind", "ld")
        return [dict(zip(keys, m)) for m in RANK_RE.findall(out)]

    def check_served(self, out: str, job: int, family: str, nranks: int, mode: str = "on",
                     governor: Optional[str] = None) -> list[dict[str, str]]:
        """Every rank: the library first in LD_PRELOAD and active with the
        family's backend, in a segment of this job, one slot per rank and node,
        in mode on pinned to one CPU of its own per node (profile leaves the
        placement alone: Placement below)."""
        ranks = self.ranks(out)
        self.assertEqual(len(ranks), nranks, out)
        libs = LIB_RE.findall(out)
        self.assertEqual(len(libs), nranks, out)
        self.assertEqual(sorted(int(l[0]) for l in libs), list(range(nranks)), out)
        abi = {"openmpi": "ompi", "mpich": "mpich"}[family]
        for r in ranks:
            self.assertEqual(r["ld"].split(":")[0], str(FRONT), out)
            self.assertEqual(r["mode"], mode, out)
            self.assertRegex(r["shm"], rf"^/dev/shm/mpi-pstate\.{job}\.\d+\.[0-9a-f]{{16}}$", out)
            if mode == "on":
                self.assertRegex(r["cpus"], r"^\d+$", f"rank not pinned to one CPU:\n{out}")
            if governor:
                self.assertEqual(r["gov"], governor, out)
        for rank, size, backend, seg, slot, lmode in libs:
            self.assertEqual(backend, abi, out)
            self.assertEqual(int(size), nranks)
            self.assertRegex(seg, rf"^/dev/shm/mpi-pstate\.{job}\.\d+\.[0-9a-f]{{16}}$", out)
            self.assertEqual(lmode, mode, out)
        for host in {r["host"] for r in ranks}:
            on = [r for r in ranks if r["host"] == host]
            if mode == "on":
                self.assertEqual(len({r["cpus"] for r in on}), len(on),
                                 f"ranks share a CPU on {host}:\n{out}")
            self.assertEqual(len({r["slot"] for r in on}), len(on), out)
        return ranks

    def check_clocked_down(self, node: str, t0: float, t1: float, governor_set: Optional[str]) -> None:
        w = writes(node, t0, t1)
        lows = [x for x in w if x[1] in ("scaling_setspeed", "scaling_max_freq") and x[2] == str(LOW_KHZ)]
        if not lows:  # the plugin's reason, when another job's cgroup kept it off
            log = (lt.LAB / "log" / f"slurmd-{node}.log").read_text(errors="replace")
            why = [l for l in log.splitlines() if "other job(s)" in l][-2:]
            self.fail(f"no core of {node} was clocked down: {w}; slurmd: {why}")
        if governor_set:
            self.assertIn(("scaling_governor", governor_set), {(a, v) for _, a, v in w}, w)


class StepsBothFamilies(PluginCase):
    """srun, mpirun and mpiexec, both MPI families, two nodes."""

    def launch(self, family: str, how: str) -> None:
        # Waits of 100 ms: the agent may lower a domain several ms late when
        # its CPU budget spaces its wake-ups (a busy machine: bench/whatif),
        # and 40 ms waits on two ranks of a node were once all missed.
        wd = self.workdir(f"{family}-{how}")
        prog = f"./imbalance.{family}"
        cmd = {
            "srun": f"srun --mpi={'pmix' if family == 'openmpi' else 'pmi2'} ./wrap.sh {prog} 10 100",
            "mpirun": f"mpirun.openmpi ./wrap.sh {prog} 10 100",
            "mpiexec": f"mpiexec.mpich -bind-to core ./wrap.sh {prog} 10 100",
        }[how]
        job, out = self.batch(wd, ["-N2", "--ntasks-per-node=2", "--mpi-pstate"], cmd)
        ranks = self.check_served(out, job, family, 4)
        self.assertEqual({r["host"] for r in ranks}, set(NODES), out)
        t0, t1 = window(out)
        for n in NODES:
            self.check_clocked_down(n, t0, t1, None)
            rec = step_record(n, job, FIRST)
            self.assertEqual(rec["launcher"], how != "srun", rec)
            self.assertEqual(rec["mode"], "on")
            self.assertEqual({d["status"] for d in rec["domains"]}, {"set"}, rec)
            self.assertEqual(rec["agent"]["status"], "stopped", rec)
            self.assertTrue(node_step(n, job, FIRST)["agent"], f"no agent record on {n}")
        self.assertEqual(records_of(job), [])
        self.assert_nodes_restored()

    def test_openmpi_srun_pmix(self) -> None:
        lt.skip_without_pmix(self)
        self.launch("openmpi", "srun")

    def test_mpich_srun_pmi2(self) -> None:
        self.launch("mpich", "srun")

    def test_openmpi_mpirun_in_sbatch(self) -> None:
        self.launch("openmpi", "mpirun")

    def test_mpich_mpiexec_in_sbatch(self) -> None:
        self.launch("mpich", "mpiexec")


class Policy(PluginCase):
    def test_governor_visible_during_the_job_and_restored(self) -> None:
        wd = self.workdir("governor")
        job, out = self.batch(wd, ["-N1", "-w", "n1", "-n2", "--mpi-pstate",
                                   "--mpi-pstate-governor=powersave"],
                              "srun --mpi=pmi2 ./wrap.sh ./imbalance.mpich 10 40")
        self.check_served(out, job, "mpich", 2, governor="powersave")
        t0, t1 = window(out)
        # powersave is not userspace: the agent clocks down through max_freq.
        w = writes("n1", t0, t1)
        self.assertIn(("policy0", "scaling_governor", "powersave"), w)
        self.assertIn(("policy1", "scaling_governor", "powersave"), w)
        self.assertIn(("policy0", "scaling_governor", "performance"), w)
        self.assertFalse([x for x in w if x[1] == "scaling_setspeed"], w)
        self.check_clocked_down("n1", t0, t1, "powersave")
        self.assertEqual(step_record("n1", job, FIRST)["mechanism"], "max_freq")
        self.assert_nodes_restored(("n1",))

    def test_keep_governor_uses_setspeed_under_userspace(self) -> None:
        wd = self.workdir("setspeed")
        job, out = self.batch(wd, ["-N1", "-w", "n1", "-n2", "--mpi-pstate"],
                              "srun --mpi=pmi2 ./wrap.sh ./imbalance.mpich 10 40")
        self.check_served(out, job, "mpich", 2, governor="userspace")
        t0, t1 = window(out)
        w = writes("n1", t0, t1)
        self.assertIn(("policy1", "scaling_setspeed", str(LOW_KHZ)), w)
        self.assertEqual(step_record("n1", job, FIRST)["mechanism"], "setspeed")
        self.assert_nodes_restored(("n1",))

    def test_intel_pstate_flavour(self) -> None:
        self.flavour("n1", driver="intel_pstate")
        wd = self.workdir("intel")
        fam, mpi = lt.srun_family()
        job, out = self.batch(wd, ["-N1", "-w", "n1", "-n2", "--mpi-pstate"],
                              f"srun --mpi={mpi} ./wrap.sh ./imbalance.{fam} 10 40")
        self.check_served(out, job, fam, 2, governor="powersave")
        t0, t1 = window(out)
        self.assertTrue([x for x in writes("n1", t0, t1) if x[1] == "scaling_max_freq"])
        self.assertEqual(step_record("n1", job, FIRST)["driver"], "intel_pstate")
        self.assert_nodes_restored(("n1",))

    def test_shared_domain_left_alone(self) -> None:
        """One policy spans both CPUs: a one-core step must not touch it."""
        self.flavour("n1", cpus_per_policy=2)
        wd = self.workdir("shared")
        fam, mpi = lt.srun_family()
        job, out = self.batch(wd, ["-N1", "-w", "n1", "-n2", "--mpi-pstate",
                                   "--mpi-pstate-governor=powersave"],
                              f"srun -n1 --exact --mpi={mpi} ./wrap.sh ./imbalance.{fam} 2 10\n"
                              f"srun -n2 --mpi={mpi} ./wrap.sh ./imbalance.{fam} 2 10")
        t0, t1 = window(out)
        rec0, rec1 = step_record("n1", job, FIRST), step_record("n1", job, "2")
        self.assertEqual([d["status"] for d in rec0["domains"]], ["shared"], rec0)
        self.assertEqual([d["status"] for d in rec1["domains"]], ["set"], rec1)
        govs = [x for x in writes("n1", t0, t1) if x[1] == "scaling_governor"]
        self.assertEqual(govs, [("policy0", "scaling_governor", "powersave"),
                                ("policy0", "scaling_governor", "performance")], govs)
        self.assert_nodes_restored(("n1",))

    def test_restored_when_the_job_is_cancelled(self) -> None:
        wd = self.workdir("cancel", ())
        script = ("export MPI_PSTATE_VERBOSE=1\n"
                  "srun -n2 bash -c 'cat /sys/devices/system/cpu/cpufreq/policy0/scaling_governor; "
                  "sleep 60'\n")
        job = lt.sbatch(["-t", "2", "--exclusive", "-N1", "-w", "n1", "-n2", "--mpi-pstate",
                         "--mpi-pstate-governor=powersave"], script, wd)
        out = wd / f"slurm-{job}.out"
        for _ in range(300):
            if out.exists() and "powersave" in out.read_text():
                break
            time.sleep(0.1)
        self.assertIn("powersave", out.read_text())
        lt.root(["scancel", str(job)])
        self.assertEqual(lt.wait_job(job), "CANCELLED")
        # The step's exit hook and the job epilog may still run: bounded wait.
        self.assert_nodes_restored(("n1",))
        self.assertEqual(records_of(job), [])


class Modes(PluginCase):
    def test_off_touches_nothing(self) -> None:
        fam, mpi = lt.srun_family()
        for opt in ([], ["--mpi-pstate=off"]):
            with self.subTest(opt=opt):
                wd = self.workdir("off" + "".join(opt).replace("=", "-"))
                # mpirun starts Open MPI on every release (it needs no mpi/pmix)
                job, out = self.batch(wd, ["-N1", "-w", "n1", "-n2", *opt],
                                      f"srun --mpi={mpi} ./wrap.sh ./imbalance.{fam} 5 20\n"
                                      "mpirun.openmpi ./wrap.sh ./imbalance.openmpi 5 20")
                t0, t1 = window(out)
                self.assertEqual(writes("n1", t0, t1), [])
                ranks = self.ranks(out)
                self.assertEqual(len(ranks), 4, out)
                for r in ranks:
                    self.assertEqual((r["mode"], r["shm"], r["ld"]), ("-", "-", "-"), out)
                self.assertNotIn("mpi-pstate:", out)
                self.assertFalse((runtime_dir("n1") / "steps" / f"{job}.{FIRST}").exists())
                self.assert_nodes_restored(("n1",))

    def test_off_step_in_an_on_job(self) -> None:
        wd = self.workdir("off-step")
        fam, mpi = lt.srun_family()
        job, out = self.batch(wd, ["-N1", "-w", "n1", "-n2", "--mpi-pstate"],
                              f"srun --mpi-pstate=off --mpi={mpi} ./wrap.sh ./imbalance.{fam} 5 20")
        t0, t1 = window(out)
        self.assertEqual(writes("n1", t0, t1), [])
        for r in self.ranks(out):
            self.assertEqual((r["mode"], r["shm"], r["ld"]), ("-", "-", "-"), out)
        self.assert_nodes_restored(("n1",))

    def test_profile_measures_and_writes_nothing(self) -> None:
        wd = self.workdir("profile")
        job, out = self.batch(wd, ["-N1", "-w", "n1", "-n2", "--mpi-pstate=profile",
                                   "--mpi-pstate-governor=powersave"],
                              "srun --mpi=pmi2 ./wrap.sh ./imbalance.mpich 10 40")
        self.check_served(out, job, "mpich", 2, mode="profile", governor="performance")
        t0, t1 = window(out)
        self.assertEqual(writes("n1", t0, t1), [])
        rec = step_record("n1", job, FIRST)
        self.assertEqual({d["status"] for d in rec["domains"]}, {"untouched"}, rec)
        agent = node_step("n1", job, FIRST)["agent"]
        self.assertEqual(agent.get("mode"), "profile", agent)
        self.assert_nodes_restored(("n1",))


class Tasks(PluginCase):
    def test_user_preload_kept(self) -> None:
        """The user's own LD_PRELOAD runs too, after the library.  MPICH's
        mpiexec hands its own environment to the ranks, over the one the
        plugin gave its proxy: there the user adds theirs in the rank's
        wrapper (docs/admin.md), not in the batch script."""
        wd = self.workdir("user-preload")
        self.put(wd / "marker.c", MARKER_C)
        r = subprocess.run(["gcc", "-shared", "-fPIC", "-O1", "-o", str(wd / "marker.so"),
                            str(wd / "marker.c")], capture_output=True, text=True)
        self.assertEqual(r.returncode, 0, r.stderr)
        os.chmod(wd / "marker.so", 0o755)
        self.put(wd / "userwrap.sh", f'#!/bin/bash\nexport LD_PRELOAD="$LD_PRELOAD:{wd}/marker.so"\n'
                 'exec "$@"\n', 0o755)
        batch = f"export LD_PRELOAD={wd}/marker.so\n"
        fam, mpi = lt.srun_family()
        cases = (("srun", fam, batch + f"srun --mpi={mpi} ./wrap.sh ./imbalance.{fam} 5 20"),
                 ("mpirun", "openmpi", batch + "mpirun.openmpi ./wrap.sh ./imbalance.openmpi 5 20"),
                 ("mpiexec", "mpich",
                  "mpiexec.mpich -bind-to core ./userwrap.sh ./wrap.sh ./imbalance.mpich 5 20"))
        for how, family, body in cases:
            with self.subTest(how=how):
                job, out = self.batch(wd, ["-N1", "-w", "n1", "-n2", "--mpi-pstate=profile"], body)
                ranks = self.check_served(out, job, family, 2, mode="profile")
                for rk in ranks:
                    self.assertEqual(rk["ld"], f"{FRONT}:{wd}/marker.so", out)
                self.assertEqual(out.count(f"USER-PRELOAD-MARKER imbalance.{family}"), 2, out)

    def test_bind_modes_and_cpu_bind(self) -> None:
        wd = self.workdir("bind")
        fam, mpi = lt.srun_family()
        run = f"--mpi={mpi} ./wrap.sh ./imbalance.{fam} 2 5"
        job, out = self.batch(wd, ["-N1", "-w", "n1", "-n2", "--mpi-pstate"],
                              f"srun -l --mpi-pstate-bind=none {run}\n"
                              f"srun -l --cpu-bind=map_cpu:1,0 {run}\n"
                              f"srun -l --mpi-pstate-bind=scatter {run}")
        lines = re.findall(r"^(\d+): RANK host=\S+ cpus=(\S+) ", out, re.M)
        self.assertEqual(len(lines), 6, out)
        none, user, scatter = lines[0:2], lines[2:4], lines[4:6]
        self.assertEqual({c for _, c in none}, {"0-1"}, out)
        self.assertEqual(dict(user), {"0": "1", "1": "0"}, out)
        self.assertEqual(dict(scatter), {"0": "0", "1": "1"}, out)


CASE_RE = re.compile(r"^CASE (\S+) (\S+)$")
TASK_RE = re.compile(r"^(\d+): RANK host=\S+ cpus=(\S+) .* mode=(\S+) ")
BINDS = {"default": "", "none": "--cpu-bind=none", "map": "--cpu-bind=map_cpu:1,0",
         "cores": "--cpu-bind=cores"}


def placements(out: str) -> dict[tuple[str, str], dict[str, tuple[str, str]]]:
    """(mode, bind) -> {task: (Cpus_allowed_list, MPI_PSTATE_MODE)} from CASE blocks."""
    got: dict[tuple[str, str], dict[str, tuple[str, str]]] = {}
    case = None
    for line in out.splitlines():
        m = CASE_RE.match(line)
        if m:
            case = (m.group(1), m.group(2))
            got[case] = {}
            continue
        m = TASK_RE.match(line)
        if m and case:
            got[case][m.group(1)] = (m.group(2), m.group(3))
    return got


def placement_body(modes: tuple[str, ...], binds: tuple[str, ...], fam: str, mpi: str) -> str:
    """One step per (mode, bind): each task prints its affinity (wrap.sh);
    fam and mpi: lt.srun_family()."""
    lines = []
    for b in binds:
        for mode in modes:
            opt = "" if mode == "default" else f"--mpi-pstate={mode}"
            lines.append(f"echo CASE {mode} {b}; srun -l {opt} {BINDS[b]} --mpi={mpi} "
                         f"./wrap.sh ./imbalance.{fam} 2 5 | sort")
    return "\n".join(lines)


class Placement(PluginCase):
    """What each task's Cpus_allowed_list is with and without the plugin:
    profile never changes it, an explicit --cpu-bind (none included) wins
    over mpi-pstate's own binding in mode on."""

    def cpus(self, got: dict, case: tuple[str, str]) -> dict[str, str]:
        self.assertEqual(len(got.get(case, {})), 2, f"{case}: {got.get(case)}")
        return {t: c for t, (c, _) in got[case].items()}

    def test_profile_and_cpu_bind_keep_slurms_placement(self) -> None:
        fam, mpi = lt.srun_family()
        wd = self.workdir("placement", (f"imbalance.{fam}",))
        binds = ("default", "none", "map", "cores")
        job, out = self.batch(wd, ["-N1", "-w", "n1", "-n2"],
                              placement_body(("off", "profile", "on"), binds, fam, mpi))
        got = placements(out)
        for b in binds:
            with self.subTest(bind=b):
                off = self.cpus(got, ("off", b))
                self.assertEqual(self.cpus(got, ("profile", b)), off, out)
                if b != "default":
                    self.assertEqual(self.cpus(got, ("on", b)), off, out)
        # the cases differ from each other, so the comparisons above can fail
        self.assertEqual(self.cpus(got, ("off", "map")), {"0": "1", "1": "0"}, out)
        self.assertEqual(self.cpus(got, ("off", "none")), {"0": "0-1", "1": "0-1"}, out)
        # and mode on without --cpu-bind does pin: one CPU per task
        self.assertEqual(sorted(self.cpus(got, ("on", "default")).values()), ["0", "1"], out)
        lt.wait_job(job)
        self.assert_nodes_restored(("n1",))

    def test_site_default_profile_keeps_placement(self) -> None:
        fam, mpi = lt.srun_family()
        with lt.plugstack_args("default_mode=profile"):
            wd = self.workdir("placement-site", (f"imbalance.{fam}",))
            _, out = self.batch(wd, ["-N1", "-w", "n1", "-n2"],
                                placement_body(("off", "default"), ("default", "none"), fam, mpi))
        got = placements(out)
        for b in ("default", "none"):
            self.assertEqual({m for _, m in got[("default", b)].values()}, {"profile"}, out)
            self.assertEqual(self.cpus(got, ("default", b)), self.cpus(got, ("off", b)), out)


class AgentBudget(PluginCase):
    """The site's agent_cpu_budget reaches every node's agent (its record's
    settings), and the built-in one without it."""

    def test_site_budget_reaches_the_agents(self) -> None:
        fam, mpi = lt.srun_family()
        wd = self.workdir("agent-budget", (f"imbalance.{fam}",))
        body = f"srun --mpi={mpi} ./wrap.sh ./imbalance.{fam} 4 20"
        job0, _ = self.batch(wd, ["-N2", "-n2", "--ntasks-per-node=1", "--mpi-pstate"], body)
        with lt.plugstack_args("agent_cpu_budget=2.5"):
            job, _ = self.batch(wd, ["-N2", "-n2", "--ntasks-per-node=1", "--mpi-pstate"], body)
        for n in NODES:
            # the MPI step follows the state dump's (step 0)
            self.assertEqual(node_step(n, job0, "1")["agent"]["settings"]["cpu_budget_ppm"], 5000)
            self.assertEqual(node_step(n, job, "1")["agent"]["settings"]["cpu_budget_ppm"], 25000)


class Hybrid(PluginCase):
    """A rank pinned to a block of two cores whose frequency domains are per
    core (one cpufreq policy per CPU here): while its MPI thread waits, only
    the domain of that thread's CPU goes down, never the whole block (the
    block's other core may be computing OpenMP work)."""

    def test_only_the_waiting_threads_core_goes_down(self) -> None:
        fam, mpi = lt.srun_family()
        wd = self.workdir("hybrid", (f"imbalance.{fam}",))
        job, out = self.batch(wd, ["-N2", "-n2", "--ntasks-per-node=1", "-c2", "--mpi-pstate"],
                              # 22.05: srun does not inherit sbatch -c
                              f"srun -c2 --mpi={mpi} ./wrap.sh ./imbalance.{fam} 10 60")
        ranks = self.ranks(out)
        self.assertEqual(len(ranks), 2, out)
        self.assertEqual({r["cpus"] for r in ranks}, {"0-1"}, out)  # the block
        t0, t1 = window(out)
        # rank 0 computes on one node while rank 1 waits on the other
        lows = 0
        for n in NODES:
            low: set[str] = set()
            most = 0
            for pol, attr, value in writes(n, t0, t1):
                if attr not in ("scaling_setspeed", "scaling_max_freq"):
                    continue
                if value == str(LOW_KHZ):
                    low.add(pol)
                    lows += 1
                else:
                    low.discard(pol)
                most = max(most, len(low))
            self.assertLessEqual(most, 1, f"{n}: both cores of a block were down at once: "
                                          f"{writes(n, t0, t1)}")
        self.assertGreater(lows, 0, "no core was clocked down")
        lt.wait_job(job)
        self.assert_nodes_restored()


class Commands(PluginCase):
    """Every option given to sbatch, salloc and a bare srun reaches the tasks."""

    OPTS = ["--mpi-pstate", "--mpi-pstate-threshold=2ms", "--mpi-pstate-low=1.8GHz",
            "--mpi-pstate-governor=performance", "--mpi-pstate-bind=compact"]

    def check_options(self, out: str, job: int, fam: str, step: str = FIRST) -> None:
        ranks = self.check_served(out, job, fam, 2, governor="performance")
        for r in ranks:
            self.assertEqual((r["thr"], r["low"], r["bind"]), ("2000", "1800000", "compact"), out)
        rec = step_record("n1", job, step)
        self.assertEqual((rec["mode"], rec["governor"]), ("on", "performance"), rec)
        lt.wait_job(job)
        self.assert_nodes_restored(("n1",))

    def test_sbatch_options_reach_every_step(self) -> None:
        wd = self.workdir("sbatch-options")
        fam, mpi = lt.srun_family()
        job, out = self.batch(wd, ["-N1", "-w", "n1", "-n2", *self.OPTS],
                              f"srun --mpi={mpi} ./wrap.sh ./imbalance.{fam} 10 40")
        self.check_options(out, job, fam)

    def test_salloc_then_srun(self) -> None:
        wd = self.workdir("salloc")
        fam, mpi = lt.srun_family()
        r = lt.as_user(["salloc", "-t", "2", "--exclusive", "-N1", "-w", "n1", "-n2", *self.OPTS,
                        "bash", "-c", f"{STATE_DUMP}; srun --mpi={mpi} ./wrap.sh ./imbalance.{fam} 10 40"],
                       cwd=wd, extra_env={"MPI_PSTATE_VERBOSE": "1"}, timeout=150)
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        job = int(re.search(r"Granted job allocation (\d+)", r.stderr).group(1))
        self.note_state(r.stdout)
        self.check_options(r.stdout + r.stderr, job, fam)

    def test_bare_srun(self) -> None:
        wd = self.workdir("srun")
        fam, mpi = lt.srun_family()
        r = lt.as_user(["srun", "-t", "2", "--exclusive", "-N1", "-w", "n1", "-n2", *self.OPTS,
                        f"--mpi={mpi}", "./wrap.sh", f"./imbalance.{fam}", "10", "40"],
                       cwd=wd, extra_env={"MPI_PSTATE_VERBOSE": "1"}, timeout=150)
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        shm = re.search(r"shm=/dev/shm/mpi-pstate\.(\d+)\.0\.[0-9a-f]{16} ", r.stdout)
        self.assertIsNotNone(shm, r.stdout)
        self.check_options(r.stdout + r.stderr, int(shm.group(1)), fam, "0")


if __name__ == "__main__":
    unittest.main()
