# SPDX-License-Identifier: BSD-3-Clause
"""Accounting on the real two-node cluster: node Epilog, EpilogSlurmctld,
the summary in slurmdbd (the job's SystemComment; the AdminComment is left
to admins and jobstats: test_jobstats_coexist.py), `mpi-pstate report` and
`backfill`.

Jobs run MPI programs (both MPIs, two nodes) under the plugin (srun
--mpi-pstate=profile: it makes each step's segment, lists it in its step
record and preloads the library; the node Epilog reads no other segment,
docs/security.md), and synthetic agent records where energy matters.  Needs
the plugin and the epilog hooks in etc/epilog.d and etc/epilog_slurmctld.d
(mpi-pstate-epilog(8)).

A job whose Open MPI rank died of Open MPI 4.1's own SIGSEGV in MPI_Init
(upstream.py) is submitted once more by `submit_finished` and `started`,
the helpers a test uses where it waits for its job, and by nothing else."""
from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
import time
import unittest
from pathlib import Path
from typing import Any

import labtools as lt
import upstream

sys.path.insert(0, str(lt.TOP / "epilog"))
from mpi_pstate.core import siteconf, slurm  # noqa: E402
from mpi_pstate.model import summary  # noqa: E402

INST = lt.installed()
CLI, SLOTPY, FRONT = INST.cli, INST.pydir, INST.front
FAMILIES = {"mpich": ("mpicc.mpich", "pmi2"), "openmpi": ("mpicc.openmpi", "pmix")}
# Jobs of test_hundred_jobs_back_to_back: 100 in make check; fewer, the same
# assertions, where CI runs the whole suite a second time (make check-26).
QUEUE_JOBS = int(os.environ.get("MPI_PSTATE_QUEUE_JOBS", "100"))
# The plugin makes the step's segment (the only kind the node Epilog reads)
PLUGIN = "--mpi-pstate=profile --mpi-pstate-threshold=1ms"
# What submit() submitted, by job id: what submit_finished and started
# submit once more after the upstream fault.
SUBMITTED: dict[int, tuple[list[str], str, str]] = {}

# Rank 0 computes ms per iteration, the others a tenth of it and then wait:
# the imbalance mpi-pstate exists for.  "hold" seconds of waiting at the end
# (in MPI_Barrier, one second at a time) keep a job alive to be cancelled.
PROGRAM = r"""
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>
static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + t.tv_nsec * 1e-9;
}
int main(int argc, char **argv) {
    int r, n, it = argc > 1 ? atoi(argv[1]) : 10, hold = argc > 3 ? atoi(argv[3]) : 0;
    double ms = argc > 2 ? atof(argv[2]) : 5;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &r);
    MPI_Comm_size(MPI_COMM_WORLD, &n);
    if (r == 0) { printf("started %d ranks\n", n); fflush(stdout); }
    for (int i = 0; i < it; i++) {
        double e = now() + (r == 0 ? ms : ms / 10) / 1000.0, a = r, b;
        volatile double x = 1;
        while (now() < e) x *= 1.0000001;
        MPI_Barrier(MPI_COMM_WORLD);
        MPI_Allreduce(&a, &b, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
    }
    for (int i = 0; i < hold; i++) { if (r == 0) sleep(1); MPI_Barrier(MPI_COMM_WORLD); }
    MPI_Finalize();
    return 0;
}
"""


def hook_wired(hook: str, entry: str) -> bool:
    d = lt.LAB / "etc" / f"{hook}.d"
    for p in sorted(d.glob("*")) if d.is_dir() else []:
        try:
            target = os.path.realpath(p)
            if entry in target or entry in p.read_text(errors="replace"):
                return True
        except OSError:
            continue
    return False


def sha(path: str) -> str:
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


class Accounting(unittest.TestCase):
    cfg: siteconf.Config
    wd: Path
    progs: dict[str, Path]
    timed_out: int | None

    @classmethod
    def setUpClass(cls) -> None:
        if lt.lab("status", check=False).returncode != 0:
            raise unittest.SkipTest("lab cluster not running")
        if not CLI.exists():
            raise unittest.SkipTest(f"{CLI} not installed (lab install)")
        if "--mpi-pstate" not in lt.as_user(["sbatch", "--help"]).stdout:
            raise unittest.SkipTest("the plugin is not active in the lab")
        if not (hook_wired("epilog", "mpi-pstate-epilog") and
                hook_wired("epilog_slurmctld", "mpi-pstate-epilog-slurmctld")):
            raise unittest.SkipTest("mpi-pstate epilog hooks not in etc/epilog.d, "
                                    "etc/epilog_slurmctld.d")
        cls.cfg = siteconf.load(lt.SLURM_CONF)
        cls.wd = lt.workdir("accounting")
        (cls.wd / "imb.c").write_text(PROGRAM)
        cls.progs = {}
        for fam, (cc, _) in FAMILIES.items():
            if shutil.which(cc):
                out = cls.wd / f"imb.{fam}"
                subprocess.run([cc, "-O2", "-o", str(out), str(cls.wd / "imb.c")], check=True)
                shutil.chown(out, lt.TEST_USER)
                cls.progs[fam] = out
        cls.cleanup_dirs: list[Path] = []
        # A job that runs into its time limit: Slurm's limits are whole
        # minutes, checked every 30 s, so it ends 60-90 s after it starts.
        # It is submitted first and checked by test_timed_out_job, which the
        # other tests' jobs have kept busy meanwhile (one core of one node),
        # and only when that test runs: a job of both whole nodes waits for it.
        cls.timed_out = None
        # test_faults reuses this set-up for classes without the test
        if hasattr(cls, "test_timed_out_job") and \
                lt.selected(f"{cls.__module__}.{cls.__name__}.test_timed_out_job"):
            cls.timed_out = cls.submit_as_user(["-N1", "-n1", "-c1", "-t", "1"],
                                               cls.script(cls.family(), 1, 1, hold=600), "timeout")

    @classmethod
    def tearDownClass(cls) -> None:
        if getattr(cls, "timed_out", None):
            lt.root(["scancel", str(cls.timed_out)], check=False)
        for d in getattr(cls, "cleanup_dirs", []):
            shutil.rmtree(d, ignore_errors=True)

    # ---- helpers

    @classmethod
    def family(cls) -> str:
        return "mpich" if "mpich" in cls.progs else next(iter(cls.progs))

    @classmethod
    def script(cls, fam: str, nodes: int, ntasks: int, iters: int = 10, ms: float = 5,
               hold: int = 0, before_end: str = "", after: str = "") -> str:
        mpi = FAMILIES[fam][1]
        return f"""set -u
srun --mpi={mpi} {PLUGIN} -N{nodes} -n{ntasks} {cls.progs[fam]} {iters} {ms} {hold}
rc=$?
{before_end}
{after}
exit $rc
"""

    @classmethod
    def submit_as_user(cls, args: list[str], script: str, name: str) -> int:
        path = cls.wd / f"{name}.sh"
        path.write_text("#!/bin/bash\n" + script)
        shutil.chown(path, lt.TEST_USER)
        r = lt.as_user(["sbatch", "--parsable", "-o", str(cls.wd / f"{name}-%j.out"), "-J", name,
                        *args, str(path)], cwd=cls.wd, check=True)
        return int(r.stdout.strip().split(";")[0])

    def submit(self, args: list[str], script: str, name: str) -> int:
        job = self.submit_as_user(args, script, name)
        self.addCleanup(lt.root, ["scancel", str(job)], check=False)
        SUBMITTED[job] = (list(args), script, name)
        return job

    def output(self, job: int, name: str) -> str:
        out = self.wd / f"{name}-{job}.out"
        return out.read_text(errors="replace") if out.exists() else ""

    def submit_finished(self, args: list[str], script: str, name: str,
                        timeout: float = 120) -> int:
        """submit(), then until the job has finished (lt.wait_job); one that
        did not complete and died of the upstream fault (upstream.classify
        on its output) is submitted once more.  Returns the id of the job
        that finished: its state and figures are the caller's to check."""
        return lt.finished_once(lambda: self.submit(args, script, name),
                                lambda job: self.output(job, name), timeout,
                                f"{name} in {self.wd}")[0]

    def started(self, job: int, name: str, text: str, timeout: float = 60) -> int:
        """wait_output(), except that a job whose output shows the upstream
        fault first (a whole report: a rank died in MPI_Init, so text never
        comes) is cancelled and submitted once more, once.  Returns the id of
        the job whose output holds text; the test goes on with that job."""
        t_end = time.monotonic() + timeout
        retried = False
        while time.monotonic() < t_end:
            got = self.output(job, name)
            if text in got:
                return job
            if not retried and upstream.classify(got).upstream:
                lt.root(["scancel", str(job)], check=False)
                args, script, _ = SUBMITTED[job]
                retried = True
                job = upstream.once((job, got), lambda r: r[1],
                                    lambda: (self.submit(args, script, name), ""),
                                    lambda r: f"job {r[0]} {name} in {self.wd}")[0]
                t_end = time.monotonic() + timeout
                continue
            time.sleep(0.2)
        raise AssertionError(f"job {job}: {text!r} not in its output")

    def comments(self, job: int) -> tuple[str, str]:
        """(SystemComment, AdminComment): both free text, so not '|'-split."""
        r = lt.root(["sacct", "-n", "-X", "-P", "--delimiter", slurm.SACCT_DELIM, "-j", str(job),
                     "-o", "SystemComment,AdminComment"])
        lines = [ln for ln in r.stdout.splitlines() if ln]
        if not lines:
            return "", ""
        sc, _, ac = lines[-1].partition(slurm.SACCT_DELIM)
        return sc, ac

    def comment(self, job: int) -> str:
        """Where our summary lives: the SystemComment."""
        return self.comments(job)[0]

    def wait_summary(self, job: int, timeout: float = 120) -> dict[str, Any]:
        state = lt.wait_job(job, timeout)
        t_end = time.monotonic() + 60
        while time.monotonic() < t_end:
            s, _ = summary.find(self.comment(job))
            if s is not None:
                return s
            time.sleep(0.5)
        raise AssertionError(f"job {job} ({state}): no mpi-pstate summary in SystemComment "
                             f"{self.comment(job)!r}\n{lt.daemon_log_tail(10)}")

    def detail(self, job: int) -> dict[str, Any]:
        return json.loads((Path(self.cfg.collect_dir) / str(job) / "job.json").read_text())

    def report(self, *args: str) -> subprocess.CompletedProcess[str]:
        return lt.as_user([str(CLI), "report", *args], cwd=self.wd)

    def agent_record(self, job: int, step: str, node: str, package_j: float) -> None:
        """A synthetic agent record in place of the real agent's, written
        once the plugin has rewritten its step record at the step's end
        (restore state "done"; the agent's own record is written before)."""
        runtime = Path(siteconf.expand_host(self.cfg.runtime_dir, node))
        d = runtime / "steps" / f"{job}.{step}"
        t_end = time.monotonic() + 60
        while time.monotonic() < t_end:
            try:
                rec = json.loads((d / "plugin.json").read_text())
                if rec.get("restore", {}).get("state") == "done":
                    break
            except (OSError, ValueError):
                pass
            time.sleep(0.2)
        d.mkdir(parents=True, mode=0o700, exist_ok=True)
        type(self).cleanup_dirs.append(d)
        rec = {"format": "mpi-pstate-agent", "version": 1, "host": node, "job": job,
               "step": int(step), "mode": "profile",
               "energy": {"status": "ok", "samples": 10, "package_j": package_j,
                          "dram_j": 10.0, "sockets": []}}
        tmp = d / ".tmp.agent.json"
        tmp.write_text(json.dumps(rec))
        tmp.rename(d / "agent.json")

    def wait_output(self, job: int, name: str, text: str, timeout: float = 60) -> None:
        out = self.wd / f"{name}-{job}.out"
        t_end = time.monotonic() + timeout
        while time.monotonic() < t_end:
            if out.exists() and text in out.read_text(errors="replace"):
                return
            time.sleep(0.2)
        raise AssertionError(f"job {job}: {text!r} not in its output")

    def check_two_node(self, fam: str) -> None:
        if fam not in self.progs:
            self.skipTest(f"{fam} not installed")
        go = self.wd / f"go-{fam}"
        job = self.submit(["-N2", "--ntasks-per-node=2", "-t", "5"],
                          self.script(fam, 2, 4, before_end=f"while [ ! -e {go} ]; do sleep 0.1; "
                                                            "done"), f"two-{fam}")
        job = self.started(job, f"two-{fam}", "started 4 ranks")
        for n, j in (("n1", 100.0), ("n2", 50.5)):
            self.agent_record(job, "0", n, j)
        go.touch()
        s = self.wait_summary(job)
        self.assertEqual((s["state"], s["job_state"], s["nodes"], s["ranks"], s["rank_steps"]),
                         ("complete", "COMPLETED", 2, 4, 4), s)
        # the lab's RAPL is a FUSE fake: its joules are labelled simulated
        self.assertEqual((s["energy"], s["energy_j"], s["energy_src"]), ("ok", 170.5, "simulated"))
        self.assertTrue(0 < s["mpi_share"] <= 1, s)
        self.assertTrue(0 <= s["imbalance"] <= 1, s)
        elapsed = lt.sacct(job, ["ElapsedRaw"])[0]["ElapsedRaw"]
        # sacct's whole seconds, or the longest step when that is longer (a job
        # under a second has ElapsedRaw 0: summary.py)
        self.assertEqual((s["wall_s"], s["wall_src"]),
                         (max(float(elapsed), s["step_wall_s"]), "sacct"))
        self.assertLessEqual(s["step_wall_s"], s["wall_s"])
        self.assertEqual(self.comments(job)[1], "")  # AdminComment untouched
        self.assertEqual(s["settings"]["driver"], "acpi-cpufreq")
        raw = self.comment(job)
        self.assertIn('"state":"complete"', raw)  # quotes intact in plain sacct
        d = self.detail(job)
        self.assertEqual(sorted((r["node"], r["rank"]) for r in d["ranks"]),
                         [("n1", 0), ("n1", 1), ("n2", 2), ("n2", 3)])
        self.assertEqual({r["state"] for r in d["ranks"]}, {"finalized"})
        self.assertEqual(len({r["calls"] for r in d["ranks"]}), 1)  # same calls on every rank
        self.assertEqual(d["ranks"][0]["abi"], "mpich" if fam == "mpich" else "ompi")
        top = s["top_wait"][0]
        self.assertNotEqual(top[0], "0", "rank 0 computes most; it must not wait most")
        r = self.report(str(job), "--json")
        self.assertEqual(r.returncode, 0, r.stderr)
        rep = json.loads(r.stdout)["jobs"][0]
        self.assertEqual((rep["status"], len(rep["detail"]["ranks"])), ("ok", 4))
        r = self.report(str(job))
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn("mpi-pstate: complete", r.stdout, r.stderr)
        self.assertIn("ranks that wait most", r.stdout)
        self.assertIn("SIMULATED", r.stdout)
        self.assertNotIn("measured: RAPL", r.stdout)

    # ---- tests

    def test_two_nodes_mpich(self) -> None:
        self.check_two_node("mpich")

    def test_two_nodes_openmpi(self) -> None:
        lt.skip_without_pmix(self)  # Debian's Slurm 26.05: Open MPI runs through mpirun only
        self.check_two_node("openmpi")

    def test_cancelled_and_failed_jobs(self) -> None:
        fam = self.family()
        one = ["-N1", "-n1", "-c1"]
        cancel = self.submit(one + ["-t", "5"], self.script(fam, 1, 1, hold=300), "cancel")
        fail = self.submit(one + ["-t", "5"], self.script(fam, 1, 1, after="exit 3"), "fail")
        cancel = self.started(cancel, "cancel", "started")
        time.sleep(1)
        lt.root(["scancel", str(cancel)])
        s = self.wait_summary(cancel)
        self.assertEqual((s["state"], s["job_state"], s["ranks"]), ("complete", "CANCELLED", 1))
        self.assertIn(self.detail(cancel)["ranks"][0]["state"], ("killed", "exited"))
        s = self.wait_summary(fail)
        self.assertEqual((s["state"], s["job_state"]), ("complete", "FAILED"))

    def test_timed_out_job(self) -> None:
        assert self.timed_out is not None
        s = self.wait_summary(self.timed_out, timeout=240)
        self.assertEqual((s["state"], s["job_state"]), ("complete", "TIMEOUT"))

    def test_hundred_jobs_back_to_back(self) -> None:
        """100 small jobs (QUEUE_JOBS), a third across both nodes, some with
        an admin's comment set before they run: every one gets its own
        complete summary, and it is still there a while later."""
        fam = self.family()
        jobs: dict[int, tuple[int, int]] = {}  # job -> (iters, ranks)
        admin: set[int] = set()
        t0 = time.monotonic()
        for i in range(QUEUE_JOBS):
            nodes = 2 if i % 3 == 0 else 1
            held = i % 10 == 5
            job = self.submit(["-N", str(nodes), "-n", str(nodes), "-c1", "-t", "5"] +
                              (["--hold"] if held else []),
                              self.script(fam, nodes, nodes, iters=i + 1, ms=1), f"load{i}")
            jobs[job] = (i + 1, nodes)
            if held:
                lt.root(["scontrol", "update", f"JobId={job}", f'AdminComment=admin "{job}" note'])
                lt.root(["scontrol", "release", str(job)])
                admin.add(job)
        seen: dict[int, dict[str, Any]] = {}
        base: set[int] = set()
        for job, (iters, ranks) in jobs.items():
            s = self.wait_summary(job, timeout=600)
            seen[job] = s
            self.assertEqual((s["state"], s["job_state"], s["ranks"], s["nodes"]),
                             ("complete", "COMPLETED", ranks, ranks), (job, s))
            d = self.detail(job)
            self.assertEqual(d["job"], job)
            for r in d["ranks"]:
                # each rank calls Barrier and Allreduce once per iteration: the
                # rest is the same in every job, so a mixed-up record shows
                base.add(r["calls"] - 2 * iters)
            # the admin's text (slurmctld writes it at the job's end) is left alone;
            # scontrol cannot set a SystemComment (22.05: "not supported")
            sc, ac = self.comments(job)
            self.assertTrue(sc.startswith("mpi-pstate/2:{"), sc)
            self.assertEqual(ac, f'admin "{job}" note' if job in admin else "")
        self.assertEqual(len(base), 1, f"per-job call counts do not match their jobs: {base}")
        elapsed = time.monotonic() - t0
        time.sleep(5)
        again = {j: summary.find(self.comment(j))[0] for j in jobs}
        self.assertEqual(again, seen, "a summary changed or vanished after the jobs ended")
        print(f"\n  {QUEUE_JOBS} jobs: all summaries in slurmdbd after {elapsed:.0f} s",
              file=sys.stderr)

    def test_hostile_inputs(self) -> None:
        fam = self.family()
        before = sha("/etc/shadow")
        # Names of this job's pattern the job's user makes: never looked at
        # (only the plugin's step record names a segment); the plugin's own
        # segment of step 0, garbled in slot 1: that rank alone is out.
        plant = ("ln -s /etc/shadow /dev/shm/mpi-pstate.$SLURM_JOB_ID.7\n"
                 "truncate -s 512M /dev/shm/mpi-pstate.$SLURM_JOB_ID.8\n"
                 "mkfifo /dev/shm/mpi-pstate.$SLURM_JOB_ID.9\n"
                 "seg=$(ls /dev/shm/mpi-pstate.$SLURM_JOB_ID.0* | head -1)\n"
                 "echo \"segment $seg\"\n"
                 "/usr/bin/python3 -c \"import os; f = open('$seg', 'r+b'); "
                 "f.seek(4096 + 16384); f.write(os.urandom(16384))\"\n")
        job = self.submit_finished(["-N1", "-n2", "-t", "5"],
                                   self.script(fam, 1, 2, before_end=plant), "hostile")
        s = self.wait_summary(job)
        self.assertEqual((s["state"], s["ranks"]), ("complete", 1), s)  # the garbled rank is out
        node = self.detail(job)["ranks"][0]["node"]
        rec = json.loads((Path(self.cfg.collect_dir) / str(job) / f"node.{node}.json").read_text())
        probs = "\n".join(rec["problems"])
        seg = rec["steps"][0]["segment"]
        self.assertIn(f"{seg} slot 1", probs)
        for n in (7, 8, 9):
            self.assertNotIn(f"mpi-pstate.{job}.{n}", probs)  # not looked at
            lt.root(["rm", "-f", f"/dev/shm/mpi-pstate.{job}.{n}"], check=False)
        self.assertEqual(sha("/etc/shadow"), before)
        # A planted symlink and an oversized record in the collection
        # directory: backfill refuses both, and repairs once they are gone.
        jd = Path(self.cfg.collect_dir) / str(job)
        good = (jd / f"node.{node}.json").read_bytes()
        (jd / f"node.{node}.json").unlink()
        (jd / f"node.{node}.json").symlink_to("/etc/shadow")
        other = "n2" if node == "n1" else "n1"
        with open(jd / f"node.{other}.json", "wb") as f:
            f.truncate(64 << 20)
        r = lt.root([str(CLI), "backfill", str(job)])
        self.assertIn(f"job {job}: no data yet", r.stdout)  # nothing trusted: summary kept
        self.assertEqual(summary.find(self.comment(job))[0], s)
        self.assertEqual(sha("/etc/shadow"), before)
        (jd / f"node.{node}.json").unlink()
        (jd / f"node.{other}.json").unlink()
        (jd / f"node.{node}.json").write_bytes(good)
        r = lt.root([str(CLI), "backfill", str(job)])
        # Seconds after the job's end: slurmdbd still shows it as root's
        # (UID 0) then, which must not leave the user's record out
        self.assertIn(f"job {job}: up to date", r.stdout,
                      r.stdout + r.stderr + lt.root(["ls", "-la", str(jd)], check=False).stdout)

    def test_array_job_and_report(self) -> None:
        fam = self.family()
        job = self.submit(["--array=1-3", "-N1", "-n1", "-t", "5"],
                          self.script(fam, 1, 1, iters=3), "array")
        rows = []
        t_end = time.monotonic() + 180
        while time.monotonic() < t_end:
            rows = lt.root(["sacct", "-n", "-X", "-P", "-j", str(job), "-o",
                            "JobIDRaw,JobID,State,SystemComment"]).stdout.splitlines()
            if len(rows) == 3 and all(summary.MARKER in r for r in rows):
                break
            time.sleep(1)
        self.assertEqual(len(rows), 3, rows)
        for line in rows:
            raw, jid, state, comment = line.split("|", 3)
            s, _ = summary.find(comment)
            self.assertIsNotNone(s, line)
            self.assertEqual((s["array"], s["state"]), (jid, "complete"))
        r = self.report(str(job), "--csv")
        self.assertEqual(r.returncode, 0, r.stderr)
        ids = sorted(l.split(",")[1] for l in r.stdout.splitlines()[1:])
        self.assertEqual(ids, [f"{job}_1", f"{job}_2", f"{job}_3"])

    def test_several_steps(self) -> None:
        """3 steps of 2 ranks: 2 distinct ranks, 6 rank-steps; the job's wall
        time is sacct's Elapsed, longer than any one step."""
        fam = self.family()
        steps = "".join(f"srun --mpi={FAMILIES[fam][1]} {PLUGIN} -N1 -n2 {self.progs[fam]} 5 5\n"
                        for i in range(3))
        job = self.submit_finished(["-N1", "-n2", "-t", "5"], "set -u\n" + steps, "steps")
        s = self.wait_summary(job)
        self.assertEqual((s["state"], s["steps"], s["ranks"], s["rank_steps"]),
                         ("complete", 3, 2, 6), s)
        self.assertEqual(s["wall_src"], "sacct")
        self.assertGreaterEqual(s["wall_s"], s["step_wall_s"])
        self.assertTrue(0 <= s["imbalance"] <= 1, s)
        r = self.report(str(job))
        self.assertIn("ranks 2 on 1 nodes, steps 3 (6 rank-steps)", r.stdout)

    def test_job_without_the_tool(self) -> None:
        job = self.submit(["-N2", "-n2", "-t", "2"], "srun hostname\n", "plain")
        lt.wait_job(job)
        time.sleep(1)
        self.assertNotIn(summary.MARKER, self.comment(job))
        self.assertFalse((Path(self.cfg.collect_dir) / str(job)).exists())
        r = self.report(str(job))
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn("ran without mpi-pstate", r.stdout)

    def test_plugin_job(self) -> None:
        if "--mpi-pstate" not in lt.as_user(["sbatch", "--help"]).stdout:
            self.skipTest("the plugin is not active in the lab")
        fam = self.family()
        job = self.submit_finished(["-N2", "--ntasks-per-node=2", "-t", "5",
                                    "--mpi-pstate=profile"],
                                   f"srun --mpi={FAMILIES[fam][1]} {self.progs[fam]} 10 5\n",
                                   "plugin")
        s = self.wait_summary(job)
        self.assertEqual((s["state"], s["nodes"], s["ranks"]), ("complete", 2, 4), s)
        rec = json.loads((Path(self.cfg.collect_dir) / str(job) / "node.n1.json").read_text())
        step0 = [st for st in rec["steps"] if st["step"] == "0"][0]
        self.assertEqual(step0["plugin"]["mode"], "profile")


if __name__ == "__main__":
    unittest.main()
