# SPDX-License-Identifier: BSD-3-Clause
"""Helpers for integration tests against the local two-node cluster.

Jobs run as the non-root test user, exactly as a user would submit them; the
fake hardware of each node is read through `tests/cluster/lab`.

`run_job()` (submit a batch job and wait for it) and `run_mpi()` (an srun or
other launcher as the test user) run a job or step that died of Open MPI
4.1's own SIGSEGV in MPI_Init once more, and nothing else (upstream.py says
how that fault is told apart, and how tests/run counts the retries).
`sbatch()` and `wait_job()` on their own never retry.
"""
from __future__ import annotations

import contextlib
import fnmatch
import functools
import os
import pwd
import shutil
import subprocess
import time
from pathlib import Path
from typing import Callable, Iterable, Iterator, Sequence

import upstream

TOP = Path(__file__).resolve().parents[2]
LAB_SCRIPT = TOP / "tests" / "cluster" / "lab"
LAB = Path(os.environ.get("MPI_PSTATE_LAB", "/var/spool/mpi-pstate-lab"))
SLURM_CONF = str(LAB / "etc" / "slurm.conf")
BUILD = Path(os.environ.get("MPI_PSTATE_BUILD", TOP / "build"))
TEST_USER = os.environ.get("MPI_PSTATE_TEST_USER", "mpstuser")
TERMINAL = {"COMPLETED", "FAILED", "CANCELLED", "TIMEOUT", "NODE_FAIL", "OUT_OF_MEMORY", "PREEMPTED",
            "BOOT_FAIL", "DEADLINE"}


def installed_dirs() -> dict[str, str]:
    """Where `tests/cluster/lab install` put the product (`make print-dirs`
    of that installation): the system paths an admin's `make install` uses."""
    p = LAB / "etc" / "installed.env"
    if not p.exists():
        raise AssertionError(f"{p} missing: the product is not installed (tests/cluster/lab install)")
    return dict(line.split("=", 1) for line in p.read_text().splitlines() if "=" in line)


class Installed:
    """The installed product's files (tests fail, never skip, when it is absent)."""

    def __init__(self) -> None:
        d = installed_dirs()
        self.plugin = Path(d["SLURM_PLUGINDIR"]) / "spank_mpi_pstate.so"
        self.front = Path(d["libdir"]) / "mpi-pstate" / "libmpi-pstate.so"
        self.cli = Path(d["bindir"]) / "mpi-pstate"
        self.exec = Path(d["bindir"]) / "mpi-pstate-exec"
        self.agent = Path(d["sbindir"]) / "mpi-pstate-agent"
        self.pydir = Path(d["datadir"]) / "mpi-pstate" / "python"
        self.libexec = Path(d["libexecdir"]) / "mpi-pstate"


PLUGSTACK_DROPIN = LAB / "etc" / "plugstack.conf.d" / "mpi-pstate.conf"


def settle(timeout: float = 120) -> None:
    """Waits until no job is completing: a job's epilogs run after sacct and
    wait_job already say COMPLETED, and the SPANK job epilog's slurmstepd
    reads slurm.conf and plugstack.conf.  A configuration rewritten under
    it failed that epilog once and drained n2 (CI, 2026-11-27: every later
    test that needed n2 failed)."""
    t_end = time.monotonic() + timeout
    while time.monotonic() < t_end:
        r = root(["squeue", "-h", "-t", "CG", "-o", "%i"], check=False)
        if r.returncode == 0 and not r.stdout.strip():
            return
        time.sleep(0.2)


def write_config(path: Path, text: str) -> None:
    """Replaces a configuration file whole (a reader never sees it half
    written), with its mode and owner, once no epilog can be reading it."""
    settle()
    st = path.stat()
    tmp = path.with_name(f".{path.name}.new")
    tmp.write_text(text)
    os.chmod(tmp, st.st_mode & 0o7777)
    os.chown(tmp, st.st_uid, st.st_gid)
    os.replace(tmp, path)


@contextlib.contextmanager
def plugstack_args(*args: str) -> Iterator[None]:
    """The lab's plugin line with args appended (every step started meanwhile
    reads them: slurmstepd loads the plugin per step), put back afterwards."""
    saved = PLUGSTACK_DROPIN.read_text()
    write_config(PLUGSTACK_DROPIN, "\n".join(" ".join((ln, *args)) if ln.startswith("optional ")
                                             else ln for ln in saved.splitlines()) + "\n")
    try:
        yield
    finally:
        write_config(PLUGSTACK_DROPIN, saved)


@contextlib.contextmanager
def slurm_conf_lines(*lines: str, dbd: Sequence[str] = ()) -> Iterator[None]:
    """The lab's slurm.conf with lines appended (and slurmdbd.conf with dbd),
    every Slurm daemon restarted on it (as an admin does after such a change),
    then put back and restarted again, whatever happens meanwhile."""
    adds = {LAB / "etc" / "slurm.conf": lines, LAB / "etc" / "slurmdbd.conf": dbd}
    saved = {c: c.read_text() for c, add in adds.items() if add}
    for c, text in saved.items():
        write_config(c, text + "".join(f"{ln}\n" for ln in adds[c]))
    try:
        lab("restart-slurm", timeout=300)
        yield
    finally:
        for c, text in saved.items():
            write_config(c, text)
        lab("restart-slurm", timeout=300)


def slurm_version() -> tuple[int, int]:
    """The lab's Slurm release, (major, minor): slurmd -V says "slurm 24.11.5"
    (Debian: "slurm-wlm 22.05.8")."""
    word = root(["/usr/sbin/slurmd", "-V"]).stdout.split()[-1]
    major, minor = word.split(".")[:2]
    return int(major), int(minor)


@functools.lru_cache(maxsize=None)
def srun_mpi_types() -> frozenset[str]:
    """srun --mpi=list's plugin types: Debian's Slurm 26.05 ships no mpi/pmix
    (Open MPI then starts only through mpirun inside an allocation)."""
    out = root(["srun", "--mpi=list"], check=False)
    words = (out.stdout + out.stderr).replace(":", " ").split()
    return frozenset(w.rstrip(",").removeprefix("mpi/") for w in words)


def selected(test_id: str) -> bool:
    """Whether tests/run runs the test (module.Class.method) in this run: the
    patterns it gave unittest's loader, matched as the loader does."""
    pats = [p for p in os.environ.get("MPI_PSTATE_TEST_PATTERNS", "").split("\n") if p]
    return not pats or any(fnmatch.fnmatchcase(test_id, p) for p in pats)


def srun_family() -> tuple[str, str]:
    """(MPI family, srun --mpi type) for a test whose point is not Open MPI:
    Open MPI over mpi/pmix where this Slurm has it, else MPICH over mpi/pmi2,
    which every release ships (Debian's 26.05 has no mpi/pmix), so such tests
    run on every release instead of failing where srun cannot start Open MPI."""
    return ("openmpi", "pmix") if "pmix" in srun_mpi_types() else ("mpich", "pmi2")


def skip_without_pmix(test: "object") -> None:
    """Skips a test that starts Open MPI with srun --mpi=pmix where this
    Slurm has no mpi/pmix plugin, saying so."""
    import unittest
    if "pmix" not in srun_mpi_types():
        raise unittest.SkipTest("this Slurm has no mpi/pmix plugin (srun --mpi=list): "
                                "Open MPI runs through mpirun here")


def node_state(node: str) -> str:
    """slurmctld's state of a node with its flags (idle, mixed, idle+drain, ...)
    and the reason an admin or Slurm gave, when there is one."""
    r = root(["scontrol", "show", "node", "-o", node])
    fields = dict(f.split("=", 1) for f in r.stdout.split() if "=" in f)
    reason = r.stdout.split("Reason=", 1)[1].strip() if "Reason=" in r.stdout else ""
    return fields.get("State", "?").lower() + (f" ({reason})" if reason else "")


def installed() -> Installed:
    return Installed()


def env() -> dict[str, str]:
    e = dict(os.environ)
    e["SLURM_CONF"] = SLURM_CONF
    return e


def user_home() -> Path:
    return Path(pwd.getpwnam(TEST_USER).pw_dir)


def workdir(name: str) -> Path:
    """A fresh directory owned by the test user, for job files and outputs."""
    d = user_home() / "mpst-tests" / name
    if d.exists():
        shutil.rmtree(d)
    d.mkdir(parents=True)
    pw = pwd.getpwnam(TEST_USER)
    for p in (d.parent, d):
        os.chown(p, pw.pw_uid, pw.pw_gid)
    return d


def give(src: Path, dest_dir: Path) -> Path:
    """Copy a binary into a user's directory (build trees may not be readable)."""
    dest = dest_dir / src.name
    shutil.copy2(src, dest)
    pw = pwd.getpwnam(TEST_USER)
    os.chown(dest, pw.pw_uid, pw.pw_gid)
    return dest


def as_user(argv: Sequence[str], cwd: Path | None = None, timeout: float = 120,
            extra_env: dict[str, str] | None = None, check: bool = False,
            input: str | None = None) -> subprocess.CompletedProcess[str]:
    """Run argv as the test user with the lab's SLURM_CONF (input: its stdin)."""
    envv = ["SLURM_CONF=" + SLURM_CONF, "PATH=/usr/local/bin:/usr/bin:/bin:/usr/sbin:/sbin",
            "HOME=" + str(user_home()), "USER=" + TEST_USER, "LANG=C.UTF-8"]
    envv += [f"{k}={v}" for k, v in (extra_env or {}).items()]
    cmd = ["runuser", "-u", TEST_USER, "--", "env", "-i", *envv, *argv]
    r = subprocess.run(cmd, cwd=cwd or user_home(), capture_output=True, text=True, timeout=timeout,
                       input=input)
    if check and r.returncode != 0:
        raise AssertionError(f"{' '.join(argv)} exited {r.returncode}\nstdout:\n{r.stdout}\nstderr:\n{r.stderr}")
    return r


def root(argv: Sequence[str], timeout: float = 60, check: bool = True) -> subprocess.CompletedProcess[str]:
    r = subprocess.run(list(argv), capture_output=True, text=True, timeout=timeout, env=env())
    if check and r.returncode != 0:
        raise AssertionError(f"{' '.join(argv)} exited {r.returncode}\n{r.stdout}\n{r.stderr}")
    return r


def sbatch(args: Sequence[str], script: str, cwd: Path) -> int:
    """Submit a batch script as the test user; returns the job id."""
    path = cwd / "job.sh"
    path.write_text("#!/bin/bash\n" + script)
    pw = pwd.getpwnam(TEST_USER)
    os.chown(path, pw.pw_uid, pw.pw_gid)
    r = as_user(["sbatch", "--parsable", "-o", str(cwd / "slurm-%j.out"), *args, str(path)], cwd=cwd,
                check=True)
    return int(r.stdout.strip().split(";")[0])


def output_path(args: Sequence[str], cwd: Path, jobid: int) -> Path:
    """Where sbatch() put the job's output: its -o, unless args give their own
    -o/--output (its %j and %% expanded; another pattern is not guessed)."""
    path = str(cwd / "slurm-%j.out")
    for i, a in enumerate(args):
        if a in ("-o", "--output") and i + 1 < len(args):
            path = args[i + 1]
        elif a.startswith("--output="):
            path = a.split("=", 1)[1]
    p = Path(path.replace("%j", str(jobid)).replace("%%", "%"))
    return p if p.is_absolute() else cwd / p


def finished_once(submit: Callable[[], int], output_of: Callable[[int], str], timeout: float,
                  where: str) -> tuple[int, str]:
    """submit() then wait_job(): (job id, state).  A job that did not complete
    and whose output (output_of) shows Open MPI 4.1's own SIGSEGV in
    MPI_Init, with no frame of ours (upstream.classify), is submitted once
    more, logged ("job N (STATE) <where>") and counted; the second job's id
    and state are returned, whatever they are."""
    def attempt() -> tuple[int, str]:
        job = submit()
        return job, wait_job(job, timeout)
    return upstream.once(attempt(), lambda r: None if r[1] == "COMPLETED" else output_of(r[0]),
                         attempt, lambda r: f"job {r[0]} ({r[1]}) {where}")


def run_job(args: Sequence[str], script: str, cwd: Path, timeout: float = 120) -> tuple[int, str]:
    """sbatch() then wait_job(), through finished_once()."""
    def output_of(job: int) -> str:
        p = output_path(args, cwd, job)
        return p.read_text(errors="replace") if p.is_file() else ""
    return finished_once(lambda: sbatch(args, script, cwd), output_of, timeout, f"in {cwd}")


def run_mpi(argv: Sequence[str], cwd: Path | None = None, timeout: float = 120,
            extra_env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """as_user() for a launcher (srun, mpirun, ...): a run that exited non-zero
    of Open MPI 4.1's own SIGSEGV in MPI_Init (its stdout and stderr read by
    upstream.classify) runs once more, logged and counted; the second run is
    returned as it is."""
    def attempt() -> subprocess.CompletedProcess[str]:
        return as_user(argv, cwd=cwd, timeout=timeout, extra_env=extra_env)
    return upstream.once(attempt(), lambda r: None if r.returncode == 0 else r.stdout + r.stderr,
                         attempt, lambda r: f"{' '.join(argv[:1])} exited {r.returncode} in "
                         f"{cwd or user_home()}")


def job_state(jobid: int) -> str:
    r = root(["sacct", "-n", "-X", "-P", "-j", str(jobid), "-o", "State"], check=False)
    s = r.stdout.strip().split("\n")[0].split(" ")[0] if r.stdout.strip() else ""
    return s


def wait_job(jobid: int, timeout: float = 120) -> str:
    """Wait until the job is finished in slurmctld and recorded by slurmdbd."""
    t_end = time.monotonic() + timeout
    while time.monotonic() < t_end:
        q = root(["squeue", "-h", "-j", str(jobid), "-o", "%T"], check=False).stdout.strip()
        if not q:
            s = job_state(jobid)
            if s in TERMINAL:
                return s
        time.sleep(0.2)
    raise AssertionError(f"job {jobid} not finished after {timeout} s (squeue: {q!r})")


def sacct(jobid: int, fields: Iterable[str], allocation_only: bool = True) -> list[dict[str, str]]:
    fl = list(fields)
    r = root(["sacct", "-n", "-P", *(["-X"] if allocation_only else []), "-j", str(jobid),
              "-o", ",".join(fl)])
    return [dict(zip(fl, line.split("|"))) for line in r.stdout.splitlines() if line]


def job_field(jobid: int, field: str) -> str:
    """One field of the job's allocation record; "" when it is empty (sacct
    then prints an empty line, which sacct() drops)."""
    rows = sacct(jobid, [field])
    return rows[0][field] if rows else ""


def summary_comment(jobid: int, timeout: float = 60) -> str:
    """The job's SystemComment once it holds mpi-pstate's summary, waited for
    at most timeout seconds (0: as it is now): the EpilogSlurmctld only queues
    the job, the flusher it starts writes the summary just after the job's end
    (docs/records.md)."""
    t_end = time.monotonic() + timeout
    comment = job_field(jobid, "SystemComment")
    while "mpi-pstate/" not in comment and time.monotonic() < t_end:
        time.sleep(0.5)
        comment = job_field(jobid, "SystemComment")
    return comment


def lab(*args: str, check: bool = True, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    return root([str(LAB_SCRIPT), *args], check=check, timeout=timeout)


def node_exec(node: str, shell: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    """Run a shell command as root inside a node's namespaces (its fake sysfs)."""
    return lab("exec", node, "bash", "-c", shell, check=check)


def snapshot(node: str) -> str:
    return lab("snapshot", node).stdout


def write_log(node: str) -> list[str]:
    p = LAB / "nodes" / node / "cpufreq-writes.log"
    return p.read_text().splitlines() if p.exists() else []


def flavour(node: str, **cfg: object) -> None:
    import json
    lab("flavour", node, *(f"{k}={json.dumps(v)}" for k, v in cfg.items()))


def daemon_log_tail(lines: int = 30) -> str:
    out = []
    for p in sorted((LAB / "log").glob("*.log")):
        try:
            tail = p.read_text(errors="replace").splitlines()[-lines:]
        except OSError:
            continue
        out.append(f"==> {p} <==\n" + "\n".join(tail))
    return "\n".join(out)
