# SPDX-License-Identifier: BSD-3-Clause
"""mpi-pstate-bench, the project's evaluation tool (not installed): run a
workload through Slurm with and without --mpi-pstate and print what it
changed (docs/evaluation.md).  Run from a checkout, by any user who may
submit jobs, through bench/eval/run.py (which stamps the result with the
checkout's commit):

    bench/eval/run.py [options] [-- COMMAND...]

Without COMMAND the workload is hpcc (Debian's, linked to Open MPI) with a
small problem size; with COMMAND, that command.  Either is started by the
launcher (--launcher, default "srun --mpi=pmix") inside one batch job per
run.  Each repetition runs the baseline (no --mpi-pstate, or --baseline) and
then --mpi-pstate at every threshold of --thresholds, so the variants
alternate (A B A B ...) and drift hits them alike; the order of the
thresholds rotates from one repetition to the next.  Every run of a
comparison is placed alike (--placement, default cores: Slurm binds each
task to cores in the baseline and in the --mpi-pstate runs), so that a delta
is the effect of clocking down and not also that of pinning.

Figures: walltime of the workload (timed inside the job, sacct Elapsed has
1 s resolution), `mpi-pstate report --json JOBID` (MPI time, long waits,
time clocked down, transitions, energy; sacct SystemComment when the report
command is not there) and sacct Elapsed/ConsumedEnergy.  Energy deltas are
shown only where RAPL is real: each job records which file system serves
/sys/class/powercap on its batch node, and a fake one (the test cluster's
FUSE hardware) is labelled simulated, never counted as a saving.

Exit status: 0 when every run completed, 1 when some did not (the table is
still printed), 2 for a usage error.  Progress goes to stderr.
"""
import argparse
import csv
import io
import json
import math
import os
import re
import shlex
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

from mpi_pstate.core import parse
from mpi_pstate.model import summary

PROG = "mpi-pstate-bench"
FORMAT = "mpi-pstate-bench"
VERSION = 1
TOP = Path(__file__).resolve().parents[2]
RUN = "bench/eval/run.py"  # how it is run, from the checkout's top
HPCC_TEMPLATE = Path("/usr/share/doc/hpcc/examples/_hpccinf.txt")
HPCC = "/usr/bin/hpcc"
DEFAULT_THRESHOLDS = "0,100us,500us,2ms"
TERMINAL = {"COMPLETED", "FAILED", "CANCELLED", "TIMEOUT", "NODE_FAIL", "OUT_OF_MEMORY",
            "PREEMPTED", "BOOT_FAIL", "DEADLINE", "REVOKED"}
# Files the job script leaves in its run directory.
TIME_FILE = "bench-time.txt"
ENV_FILE = "bench-env.txt"
PROBE_FILE = "bench-probe.txt"
# What the job's environment says about mpi-pstate: the options as Slurm
# carries them to every step, and the contract variables where present.
SPANK_OPT = "SLURM_SPANK__SLURM_SPANK_OPTION_mpi_pstate_"
ENV_PREFIXES = ("MPI_PSTATE_", SPANK_OPT)
# and the binding every srun of the job was given (--placement)
ENV_KEYS = ("SLURM_CPU_BIND",)
# --placement: a Slurm --cpu-bind type given to every run alike, or "native".
#
# mpi-pstate's mode on pins each rank itself (--mpi-pstate-bind) unless the
# step has an explicit --cpu-bind or SLURM_CPU_BIND, which it keeps
# (docs/pinning.md); a baseline without the option, off or profile never
# pins and keeps Slurm's placement, often none.  Left so ("native"), every
# delta mixes the effect of pinning with that of clocking down.  The one
# placement both sides can share is therefore Slurm's, chosen explicitly:
# the job script exports SLURM_CPU_BIND, which every srun of the job reads
# (the launcher, or one a self-launching COMMAND starts), so the baseline
# and the on runs are bound by the same task plugin in the same way.
# Pinning the baseline "like mpi-pstate" instead would need the cores Slurm
# allocates, known only inside the job, and a second copy of spank/placement.c's
# rules.  Slurm's binding to cores still gives each rank a core of its own,
# the core the agent clocks down while the rank waits.  A --cpu-bind in
# --launcher wins over the variable, in every run alike.
PLACEMENTS = ("cores", "threads", "sockets", "ldoms", "none", "native")
DEFAULT_PLACEMENT = "cores"


# ---------------------------------------------------------------- parsing

def format_us(us: Optional[int]) -> str:
    """The shortest exact spelling: 0, 100us, 2ms, 1500us, 1s."""
    if us is None:
        return "default"
    if us == 0:
        return "0"
    for unit, scale in (("s", 1_000_000), ("ms", 1000)):
        if us % scale == 0:
            return f"{us // scale}{unit}"
    return f"{us}us"


def parse_thresholds(text: str) -> List[Optional[int]]:
    """Comma-separated durations; "default" means the site's default (the
    option is not given).  Duplicates are refused: each is one variant."""
    out: List[Optional[int]] = []
    for item in (x.strip() for x in text.split(",")):
        if not item:
            raise ValueError(f"invalid threshold list {text!r}: empty item")
        v = None if item.lower() == "default" else parse.duration_us(item)
        if v in out:
            raise ValueError(f"invalid threshold list {text!r}: {item} given twice")
        out.append(v)
    return out


def process_grid(ranks: int) -> Tuple[int, int]:
    """P x Q = ranks with P <= Q and P as large as possible (HPL's advice)."""
    if ranks < 1:
        raise ValueError("at least one rank")
    p, d = 1, 1
    while d * d <= ranks:  # d up to isqrt(ranks), exactly (math.isqrt is 3.8)
        if ranks % d == 0:
            p = d
        d += 1
    return p, ranks // p


def hpccinf(template: str, n: int, p: int, q: int) -> str:
    """hpccinf.txt from Debian's template: one problem size N, one P x Q grid.
    Lines are located by their comment, so a reformatted template fails loudly
    instead of running the default (large) problem."""
    want = {"Ns": str(n), "Ps": str(p), "Qs": str(q), "# of problems sizes (N)": "1",
            "# of process grids (P x Q)": "1"}
    lines, done = template.splitlines(), set()
    for i, line in enumerate(lines):
        m = re.match(r"^(\S+)(\s+)(.*)$", line)
        if not m:
            continue
        label = m.group(3).strip()
        if label in want and label not in done:
            lines[i] = f"{want[label]:<13}{label}"
            done.add(label)
    if done != set(want):
        raise ValueError(f"hpcc template lacks {sorted(set(want) - done)}")
    return "\n".join(lines) + "\n"


def parse_mountinfo(text: str) -> List[Tuple[str, str, str]]:
    """(mount point, fs type, source) per line of /proc/self/mountinfo."""
    out = []
    for line in text.splitlines():
        left, sep, right = line.partition(" - ")
        f, r = left.split(), right.split()
        if not sep or len(f) < 5 or len(r) < 2:
            continue
        mp = re.sub(r"\\([0-7]{3})", lambda m: chr(int(m.group(1), 8)), f[4])
        out.append((mp, r[0], r[1]))
    return out


def fs_of(path: str, mounts: List[Tuple[str, str, str]]) -> Optional[Tuple[str, str]]:
    """The (fs type, source) that serves path: the longest mount point above
    it, the last mounted one when several share a point."""
    best: Optional[Tuple[str, str, str]] = None
    for mp, fs, src in mounts:
        base = mp.rstrip("/")
        if path == mp or path.startswith(base + "/") or mp == "/":
            if best is None or len(mp) >= len(best[0]):
                best = (mp, fs, src)
    return None if best is None else (best[1], best[2])


def rapl_kind(probe: Dict[str, Any]) -> Tuple[str, str]:
    """("real" | "simulated" | "absent" | "unknown", why) from a job's probe."""
    if not probe:
        return "unknown", "the job left no probe"
    if not probe.get("rapl"):
        return "absent", "no /sys/class/powercap/intel-rapl:* zone"
    fs = fs_of("/sys/class/powercap", probe.get("mounts", []))
    if fs is None:
        return "unknown", "no mount found for /sys/class/powercap"
    if fs[0] == "sysfs":
        return "real", "powercap served by sysfs"
    return "simulated", f"powercap served by {fs[0]} ({fs[1]}), not by the kernel's sysfs"


def parse_probe(text: str) -> Dict[str, Any]:
    probe: Dict[str, Any] = {"rapl": [], "mounts": []}
    mounts = []
    for line in text.splitlines():
        key, _, val = line.partition(" ")
        if key == "mount":
            mounts.append(val)
        elif key == "rapl":
            probe["rapl"].append(val.strip())
        elif key in ("host", "cpu", "ncpu", "kernel"):
            probe[key] = val.strip()
    probe["mounts"] = parse_mountinfo("\n".join(mounts))
    return probe


def parse_time_file(text: str) -> Dict[str, Any]:
    """"t0=<epoch> t1=<epoch> rc=<n>" from the job script; bash prints
    EPOCHREALTIME with the locale's decimal mark."""
    kv = dict(x.partition("=")[::2] for x in text.split())
    try:
        t0, t1 = (float(kv[k].replace(",", ".")) for k in ("t0", "t1"))
        rc = int(kv["rc"])
    except (KeyError, ValueError):
        return {}
    return {"wall_s": round(t1 - t0, 6), "rc": rc} if t1 >= t0 else {}


def parse_env_file(text: str) -> Dict[str, str]:
    out = {}
    for line in text.splitlines():
        k, sep, v = line.partition("=")
        if sep and (k.startswith(ENV_PREFIXES) or k in ENV_KEYS):
            out[k] = v
    return out


def num(v: Any) -> Optional[float]:
    return float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) and \
        math.isfinite(v) else None


def record_metrics(job: Optional[Dict[str, Any]], admin_summary: Optional[Dict[str, Any]]
                   ) -> Dict[str, Any]:
    """The figures of one run from its `mpi-pstate report --json` job entry
    (per-rank detail when present), else from the SystemComment summary."""
    m: Dict[str, Any] = {"record": None}
    s = None
    if job is not None and job.get("status") == "ok" and isinstance(job.get("summary"), dict):
        s, m["record"] = job["summary"], "report"
    elif admin_summary is not None:
        s, m["record"] = admin_summary, "admin_comment"
    if s is None:
        return m
    for k in ("mpi_share", "wait_s", "mpi_s", "down_s", "down_share", "energy_j"):
        m[k] = num(s.get(k))
    # the slowest rank's (summary version 2: step_wall_s; version 1: wall_s)
    m["rank_wall_s"] = num(s.get("step_wall_s") if s.get("v") != 1 else s.get("wall_s"))
    m["transitions"] = int(s.get("transitions") or 0)
    m["ranks"] = s.get("ranks")
    m["record_state"] = s.get("state")
    m["energy_status"] = s.get("energy")
    detail = (job or {}).get("detail") if m["record"] == "report" else None
    if isinstance(detail, dict) and isinstance(detail.get("ranks"), list):
        ranks = [r for r in detail["ranks"] if isinstance(r, dict)]
        for k in ("mpi_s", "wait_s", "over_s", "down_s", "wall_s"):
            vals = [num(r.get(k)) for r in ranks]
            m[f"sum_{k}"] = sum(v for v in vals if v is not None) if ranks else None
        m["long_calls"] = sum(int(r.get("long_calls") or 0) for r in ranks)
        m["calls"] = sum(int(r.get("calls") or 0) for r in ranks)
        thr = {r.get("threshold_us") for r in ranks if isinstance(r.get("threshold_us"), int)}
        m["threshold_us_ranks"] = sorted(thr)
        agent = None
        for node in (detail.get("nodes") or {}).values():
            for st in (node or {}).get("steps") or []:
                if isinstance(st, dict) and "agent" in st:
                    agent = bool(agent) or st.get("agent") is not None
        m["agent"] = agent
        m["restore"] = sorted({str((n or {}).get("restore", {}).get("why") or
                                   (n or {}).get("restore", {}).get("status"))
                               for n in (detail.get("nodes") or {}).values()
                               if isinstance((n or {}).get("restore"), dict)})
        st = {}
        for name, node in (detail.get("nodes") or {}).items():
            cf = ((node or {}).get("settings") or {}).get("cpufreq") or {}
            if cf:
                st[name] = {"driver": cf.get("driver"), "governors": cf.get("governors")}
        m["cpufreq"] = st
    return m


# ---------------------------------------------------------------- statistics

def median(xs: Sequence[Optional[float]]) -> Optional[float]:
    v = [x for x in xs if x is not None]
    return statistics.median(v) if v else None


def share(a: Optional[float], b: Optional[float]) -> Optional[float]:
    return a / b if a is not None and b else None


# ---------------------------------------------------------------- plan

class Variant:
    def __init__(self, key: str, label: str, mode: Optional[str], threshold_us: Optional[int],
                 baseline: bool = False) -> None:
        self.key = key                    # "base", "t0", "t100us", "tdefault"
        self.label = label
        self.mode = mode                  # None: option not given
        self.threshold_us = threshold_us  # None: site default
        self.baseline = baseline

    def sbatch_args(self) -> List[str]:
        if self.mode is None:
            return []
        args = [f"--mpi-pstate={self.mode}"]
        if self.threshold_us is not None:
            args.append(f"--mpi-pstate-threshold={self.threshold_us}us")
        return args


def variants(baseline: str, mode: str, thresholds: List[Optional[int]]) -> List[Variant]:
    base_mode = None if baseline == "none" else baseline
    out = [Variant("base", "without" if base_mode is None else f"--mpi-pstate={base_mode}",
                   base_mode, None, baseline=True)]
    for t in thresholds:
        out.append(Variant(f"t{format_us(t)}", f"{mode} @ {format_us(t)}", mode, t))
    return out


def plan(reps: int, vs: List[Variant]) -> List[Tuple[int, Variant]]:
    """Baseline first in every repetition, then the others in an order that
    rotates, so no threshold always follows the baseline."""
    others = [v for v in vs if not v.baseline]
    base = [v for v in vs if v.baseline]
    out: List[Tuple[int, Variant]] = []
    for r in range(reps):
        k = len(others)
        order = [others[(r + i) % k] for i in range(k)] if k else []
        out.extend((r, v) for v in base + order)
    return out


# ---------------------------------------------------------------- Slurm

class SlurmError(RuntimeError):
    pass


def run_captured(argv: List[str], timeout: float = 60) -> subprocess.CompletedProcess:
    # Python 3.6: no capture_output= or text= (docs/security.md, "Python 3.6")
    return subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                          universal_newlines=True, timeout=timeout)


class Cluster:
    """Every Slurm and report command goes through run(); tests replace it."""

    def __init__(self, report_cmd: Optional[List[str]],
                 run: Callable[..., subprocess.CompletedProcess] = run_captured,
                 sleep: Callable[[float], None] = time.sleep,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.report_cmd = report_cmd
        self.run = run
        self.sleep = sleep
        self.clock = clock

    def submit(self, args: List[str], script: Path) -> int:
        r = self.run(["sbatch", "--parsable", *args, str(script)], timeout=60)
        if r.returncode != 0:
            raise SlurmError(f"sbatch failed: {(r.stderr or r.stdout).strip()}")
        try:
            return int(r.stdout.strip().split(";")[0])
        except ValueError:
            raise SlurmError(f"sbatch printed no job id: {r.stdout!r}") from None

    def sacct(self, job: int) -> Optional[Dict[str, str]]:
        fields = ["JobID", "State", "ExitCode", "ElapsedRaw", "ConsumedEnergyRaw", "NodeList",
                  "SystemComment"]  # where mpi-pstate keeps its summary (docs/records.md §5)
        r = self.run(["sacct", "-n", "-P", "-X", "-j", str(job), "-o", ",".join(fields)])
        if r.returncode != 0:
            return None
        for line in r.stdout.splitlines():
            parts = line.split("|")
            if len(parts) >= len(fields) and parts[0] == str(job):
                # SystemComment is last: a "|" inside it stays in it
                return dict(zip(fields, parts[:len(fields) - 1] +
                                ["|".join(parts[len(fields) - 1:])]))
        return None

    def in_queue(self, job: int) -> bool:
        r = self.run(["squeue", "-h", "-j", str(job), "-o", "%T"])
        return r.returncode == 0 and bool(r.stdout.strip())

    def wait(self, job: int, timeout: float) -> Dict[str, str]:
        """Until the job has left the queue and accounting has its end."""
        t_end = self.clock() + timeout
        delay = 0.2
        while True:
            row = None if self.in_queue(job) else self.sacct(job)
            if row and row["State"].split(" ")[0] in TERMINAL:
                return row
            if self.clock() > t_end:
                raise SlurmError(f"job {job} not finished after {timeout:.0f} s")
            self.sleep(delay)
            delay = min(delay * 1.5, 2.0)

    def cancel(self, job: int) -> None:
        self.run(["scancel", str(job)])

    def report(self, job: int) -> Optional[Dict[str, Any]]:
        """The job's entry of `mpi-pstate report --json`, or None."""
        if not self.report_cmd:
            return None
        r = self.run([*self.report_cmd, "report", "--json", str(job)], timeout=120)
        try:
            doc = json.loads(r.stdout)
        except ValueError:
            return None
        for j in doc.get("jobs", []) if isinstance(doc, dict) else []:
            if isinstance(j, dict) and str(j.get("raw")) == str(job):
                return j
        return None

    def record(self, job: int, want: bool, timeout: float
               ) -> Tuple[Optional[Dict[str, Any]], Optional[Dict[str, Any]],
                          Optional[Dict[str, str]]]:
        """(report entry, SystemComment summary, sacct row).  With want, waits
        (bounded) for the summary: the EpilogSlurmctld writes it while the job
        completes and slurmdbd stores it a moment later."""
        t_end = self.clock() + (timeout if want else 0)
        while True:
            row = self.sacct(job)
            adm = summary.find(row["SystemComment"])[0] if row else None
            rep = self.report(job)
            if not want or (rep and rep.get("status") == "ok") or \
                    (adm and not self.report_cmd) or self.clock() > t_end:
                return rep, adm, row
            self.sleep(0.5)


def find_report_cmd(given: Optional[str]) -> Optional[List[str]]:
    """--report-cmd, else mpi-pstate from PATH, else the checkout's."""
    if given:
        return shlex.split(given)
    exe = shutil.which("mpi-pstate")
    if exe:
        return [exe]
    c = TOP / "epilog" / "mpi-pstate"
    if c.is_file() and os.access(c, os.X_OK):
        return [str(c)]
    return None


# ---------------------------------------------------------------- runs

JOB_SCRIPT = """#!/bin/bash
# {prog}: {label}, repetition {rep}
# Probe first (outside the timed part): which file system serves the energy
# counters decides whether energy figures are real or simulated.
{{
  echo "host $(hostname)"
  echo "cpu $(grep -m1 '^model name' /proc/cpuinfo 2>/dev/null | cut -d: -f2-)"
  echo "ncpu $(nproc --all 2>/dev/null)"
  echo "kernel $(uname -r)"
  for z in /sys/class/powercap/intel-rapl:*; do [ -e "$z" ] && echo "rapl $z"; done
  sed 's/^/mount /' /proc/self/mountinfo
}} >{probe} 2>/dev/null
{placement}env | grep -E -e '^(MPI_PSTATE_|SLURM_SPANK__SLURM_SPANK_OPTION_mpi_pstate_)' \
  -e '^SLURM_CPU_BIND=' | sort >{envf}
t0=$EPOCHREALTIME
{command}
rc=$?
t1=$EPOCHREALTIME
echo "t0=$t0 t1=$t1 rc=$rc" >{timef}
exit $rc
"""


def shell_join(command: Sequence[str]) -> str:
    """shlex.join (3.8): one shell word per argument."""
    return " ".join(shlex.quote(a) for a in command)


def placement_lines(placement: str) -> str:
    """The job script's lines that place its tasks (--placement): the same
    in every variant, so that baseline and on runs are bound alike."""
    if placement == "native":
        return ""
    return (f"# --placement={placement}: every run of the comparison is bound alike\n"
            f"export SLURM_CPU_BIND={shlex.quote(placement)}\n")


def job_script(label: str, rep: int, command: List[str],
               placement: str = DEFAULT_PLACEMENT) -> str:
    return JOB_SCRIPT.format(prog=PROG, label=label.replace("\n", " "), rep=rep + 1,
                             probe=PROBE_FILE, envf=ENV_FILE, timef=TIME_FILE,
                             placement=placement_lines(placement),
                             command=shell_join(command))


def read_text(p: Path, limit: int = 1 << 20) -> str:
    try:
        with open(p, "rb") as f:
            return f.read(limit).decode(errors="replace")
    except OSError:
        return ""


class Options:
    def __init__(self, nodes: int, ntasks_per_node: int, reps: int, partition: Optional[str],
                 extra: List[str], exclusive: bool, job_timeout: float,
                 record_wait: float, placement: str = DEFAULT_PLACEMENT) -> None:
        self.nodes = nodes
        self.ntasks_per_node = ntasks_per_node
        self.reps = reps
        self.partition = partition
        self.extra = extra
        self.exclusive = exclusive
        self.job_timeout = job_timeout
        self.record_wait = record_wait
        self.placement = placement


def run_one(cl: Cluster, o: Options, v: Variant, rep: int, command: List[str], rundir: Path,
            setup: Callable[[Path], None]) -> Dict[str, Any]:
    rundir.mkdir(parents=True, exist_ok=True)
    setup(rundir)
    script = rundir / "job.sh"
    script.write_text(job_script(v.label, rep, command, o.placement))
    script.chmod(0o755)
    args = ["--chdir", str(rundir), "-o", str(rundir / "slurm-%j.out"), "-J", f"{PROG}",
            "-N", str(o.nodes), f"--ntasks-per-node={o.ntasks_per_node}"]
    if o.partition:
        args += ["-p", o.partition]
    if o.exclusive:
        args.append("--exclusive")
    args += v.sbatch_args() + o.extra
    run: Dict[str, Any] = {"variant": v.key, "label": v.label, "rep": rep, "dir": str(rundir)}
    job = cl.submit(args, script)
    run["job"] = job
    try:
        row = cl.wait(job, o.job_timeout)
    except BaseException:
        cl.cancel(job)
        raise
    rep_entry, adm, row2 = cl.record(job, v.mode in ("on", "profile"), o.record_wait)
    row = row2 or row
    run["state"] = row["State"].split(" ")[0]
    run["exit_code"] = row["ExitCode"]
    run["nodes"] = row.get("NodeList")
    run["elapsed_s"] = int(row["ElapsedRaw"]) if row["ElapsedRaw"].isdigit() else None
    ce = row.get("ConsumedEnergyRaw", "")
    run["slurm_energy_j"] = float(ce) if re.fullmatch(r"[0-9]+(\.[0-9]+)?", ce or "") and \
        float(ce) > 0 else None
    run.update(parse_time_file(read_text(rundir / TIME_FILE)))
    run["env"] = parse_env_file(read_text(rundir / ENV_FILE))
    run["cpu_bind"] = run["env"].get("SLURM_CPU_BIND")  # what the job was given
    probe = parse_probe(read_text(rundir / PROBE_FILE))
    run["rapl"], run["rapl_why"] = rapl_kind(probe if probe.get("host") else {})
    run["host"] = {k: probe.get(k) for k in ("host", "cpu", "ncpu", "kernel")}
    run.update(record_metrics(rep_entry, adm))
    # the threshold the ranks ran with: their record, else the contract variable
    env_thr = run["env"].get("MPI_PSTATE_THRESHOLD", "")
    run["threshold_effective_us"] = run.get("threshold_us_ranks") or \
        ([int(env_thr)] if env_thr.isdigit() else [])
    run["ok"] = run["state"] == "COMPLETED" and run.get("rc") == 0 and "wall_s" in run
    if not run["ok"]:
        out = read_text(rundir / f"slurm-{job}.out").strip().splitlines()
        run["output_tail"] = [ln[:200] for ln in out[-3:]]
    return run


def energy_of(run: Dict[str, Any]) -> Tuple[Optional[float], Optional[str]]:
    """(joules, source) of a run: mpi-pstate's node energy, else Slurm's."""
    if run.get("energy_status") == "ok" and run.get("energy_j") is not None:
        return run["energy_j"], "mpi-pstate"
    if run.get("slurm_energy_j") is not None:
        return run["slurm_energy_j"], "slurm"
    return None, None


def deltas(v: Variant, base: Variant, ok: List[Dict[str, Any]],
           by: Dict[Tuple[str, int], Dict[str, Any]]) -> Tuple[List[float], ...]:
    """(walltime, real energy, simulated energy) of v's completed runs, each
    in % against the baseline of the same repetition; none for the
    baseline itself or a repetition whose baseline failed."""
    wall_d: List[float] = []
    en_d: List[float] = []
    en_sim: List[float] = []
    for r in ok:
        b = by.get((base.key, r["rep"]))
        if v.baseline or not b or not b.get("ok"):
            continue
        if b.get("wall_s"):
            wall_d.append((r["wall_s"] / b["wall_s"] - 1) * 100)
        (ej, es), (bj, bs) = energy_of(r), energy_of(b)
        if ej is not None and bj and es == bs:
            d = (ej / bj - 1) * 100
            real = es == "slurm" or (r["rapl"] == "real" and b["rapl"] == "real")
            (en_d if real else en_sim).append(d)
    return wall_d, en_d, en_sim


def variant_row(v: Variant, mine: List[Dict[str, Any]], ok: List[Dict[str, Any]],
                d: Tuple[List[float], ...]) -> Dict[str, Any]:
    """The table's row of one variant: medians over its completed runs."""
    wall_d, en_d, en_sim = d
    eff = sorted({t for r in ok for t in r.get("threshold_effective_us") or []})
    return {
        "variant": v.key, "label": v.label, "mode": v.mode,
        "threshold_us": v.threshold_us, "threshold": format_us(v.threshold_us)
        if v.mode else "-", "threshold_effective_us": eff,
        "baseline": v.baseline, "runs": len(mine), "runs_ok": len(ok),
        "wall_s": median([r["wall_s"] for r in ok]),
        "wall_min_s": min((r["wall_s"] for r in ok), default=None),
        "wall_max_s": max((r["wall_s"] for r in ok), default=None),
        "wall_delta_pct": median(wall_d),
        "wall_delta_range_pct": [min(wall_d), max(wall_d)] if wall_d else None,
        "energy_delta_pct": median(en_d),
        "energy_delta_simulated_pct": median(en_sim),
        "records": sum(1 for r in ok if r.get("record")),
        "mpi_wait_pct": pct(median([r.get("mpi_share") for r in ok])),
        "down_pct": pct(median([r.get("down_share") for r in ok])),
        "transitions": median([r.get("transitions") for r in ok if r.get("record")]),
        "long_calls": median([r.get("long_calls") for r in ok]),
        "over_pct": pct(median([share(r.get("sum_over_s"), r.get("sum_mpi_s"))
                                for r in ok])),
        "covered_pct": pct(median([share(r.get("sum_down_s"), r.get("sum_mpi_s"))
                                   for r in ok])),
        "agent": any(r.get("agent") for r in ok) if ok else None,
    }


def sweep_of(rows: List[Dict[str, Any]]) -> Dict[str, Any]:
    """The threshold sweep: the on rows by threshold, each with the share of
    transitions (else of long calls) it avoided against the lowest."""
    sweep_rows = [r for r in rows if not r["baseline"] and r["mode"] == "on"
                  and r["threshold_us"] is not None]
    sweep_rows.sort(key=lambda r: r["threshold_us"])
    ref = sweep_rows[0] if sweep_rows else None
    for r in sweep_rows:
        r["avoided_pct"], r["avoided_basis"] = None, None
        if ref is None or r is ref:
            continue
        if ref["transitions"]:
            r["avoided_pct"] = (1 - (r["transitions"] or 0) / ref["transitions"]) * 100
            r["avoided_basis"] = "transitions"
        elif ref["long_calls"]:
            r["avoided_pct"] = (1 - (r["long_calls"] or 0) / ref["long_calls"]) * 100
            r["avoided_basis"] = "long calls"
    return {"rows": rows, "sweep": [r["variant"] for r in sweep_rows],
            "sweep_reference": ref["variant"] if ref else None}


def aggregate(vs: List[Variant], runs: List[Dict[str, Any]]) -> Dict[str, Any]:
    """One row per variant (medians over its completed runs; deltas are
    medians of per-repetition ratios to that repetition's baseline) and the
    threshold sweep."""
    base = next(v for v in vs if v.baseline)
    by = {(r["variant"], r["rep"]): r for r in runs}
    rows = []
    for v in vs:
        mine = [r for r in runs if r["variant"] == v.key]
        ok = [r for r in mine if r.get("ok")]
        rows.append(variant_row(v, mine, ok, deltas(v, base, ok, by)))
    return sweep_of(rows)


def pct(x: Optional[float]) -> Optional[float]:
    return None if x is None else x * 100


def launcher_binding(launcher: Sequence[str]) -> Optional[str]:
    """The launcher's own --cpu-bind option, if it has one (srun's option
    wins over SLURM_CPU_BIND)."""
    for i, word in enumerate(launcher):
        for opt in ("--cpu-bind", "--cpu_bind"):
            if word.startswith(opt + "="):
                return word
            if word == opt:
                return f"{word}={launcher[i + 1]}" if i + 1 < len(launcher) else word
    return None


def placement_label(c: Dict[str, Any]) -> str:
    """How the runs were placed, in words (the heading, the JSON)."""
    p, own = c.get("placement", "native"), c.get("launcher_cpu_bind")
    if own:
        return f"the launcher's {own} in every run"
    if p == "native":
        return ("native (the baseline Slurm's, "
                + ("mpi-pstate's own pinning in the on runs)" if c.get("mode") == "on"
                   else "the variants Slurm's too)"))
    return f"{p} in every run (SLURM_CPU_BIND={p})"


def notes(result: Dict[str, Any]) -> List[str]:
    out = []
    runs, rows = result["runs"], result["rows"]
    c = result["config"]
    if c.get("placement") == "native" and c.get("mode") == "on" and \
            not c.get("launcher_cpu_bind"):
        out.append("placement: native: the baseline ran with Slurm's placement, the on runs "
                   "with mpi-pstate's own pinning (--mpi-pstate-bind): each delta mixes the "
                   "effect of pinning with that of clocking down; --placement=cores binds "
                   "every run alike")
    kinds = {r["rapl"] for r in runs if r.get("ok")}
    sim = [r for r in rows if r.get("energy_delta_simulated_pct") is not None]
    if "simulated" in kinds:
        why = next(r["rapl_why"] for r in runs if r["rapl"] == "simulated")
        text = (f"energy: RAPL is SIMULATED on these nodes ({why}); its joules come from a "
                "power model, not a measurement, and are never shown as a saving")
        if sim:
            text += ". Simulated energy delta, for checking the pipeline only: " + ", ".join(
                f"{r['label']} {r['energy_delta_simulated_pct']:+.1f}%" for r in sim)
        out.append(text)
    elif kinds == {"absent"}:
        out.append("energy: no RAPL zone on the nodes: no energy figure")
    base = next(r for r in rows if r["baseline"])
    if not any(r.get("energy_delta_pct") is not None or
               r.get("energy_delta_simulated_pct") is not None for r in rows if r is not base):
        if result["config"]["baseline"] == "none" and not any(
                r.get("slurm_energy_j") for r in runs):
            out.append("energy delta: the baseline has no energy figure (no mpi-pstate record, "
                        "no Slurm ConsumedEnergy): run with --baseline=profile to measure both "
                        "sides through mpi-pstate")
        elif any(r.get("record") and r.get("energy_status") not in (None, "ok")
                 for r in runs):
            st = sorted({str(r.get("energy_status")) for r in runs if r.get("record")})
            out.append(f"energy: mpi-pstate recorded no energy (status {', '.join(st)})")
    on = [r for r in rows if not r["baseline"] and r["mode"] == "on" and r["runs_ok"]]
    if on and not any(r["agent"] for r in on):
        why = sorted({w for r in runs for w in r.get("restore") or [] if w})
        out.append("agent: no node agent ran in the on runs"
                   + (f" ({'; '.join(why)})" if why else "")
                   + ": nothing was clocked down, so transitions and clocked-down time are 0 "
                   "by construction; the sweep's 'long calls' and 'beyond thr %' are what the "
                   "library measured as the opportunity at each threshold")
    for r in rows:
        if r["mode"] and r["threshold_us"] is not None and r["threshold_effective_us"] and \
                r["threshold_effective_us"] != [r["threshold_us"]]:
            out.append(f"threshold: {r['label']} asked for {format_us(r['threshold_us'])}, the "
                       "site ran " + ", ".join(format_us(x) for x in
                                               r["threshold_effective_us"])
                       + " (threshold_min/threshold_max)")
        if r["mode"] in ("on", "profile") and r["runs_ok"] and r["records"] < r["runs_ok"]:
            out.append(f"record: {r['runs_ok'] - r['records']} of {r['runs_ok']} {r['label']} "
                       "runs have no mpi-pstate record (see `mpi-pstate report JOBID`)")
    if base["records"] and result["config"]["baseline"] != "profile":
        out.append(f"baseline: {base['records']} baseline runs have an mpi-pstate record: the "
                   "site's default_mode is not off; use --baseline=off")
    bad = [r for r in runs if not r.get("ok")]
    if bad:
        out.append("failed: " + ", ".join(f"job {r.get('job')} ({r['label']}: {r.get('state')}"
                                          f" exit {r.get('exit_code')})" for r in bad))
        tail = next((r["output_tail"] for r in bad if r.get("output_tail")), None)
        if tail:
            out.append("first failure's output: " + " / ".join(tail))
    if len(runs) < result["config"]["reps"] * len(rows):
        out.append(f"stopped after {len(runs)} of {result['config']['reps'] * len(rows)} runs")
    return out


# ---------------------------------------------------------------- output

def f_(v: Optional[float], spec: str = "{:.1f}") -> str:
    return "-" if v is None else spec.format(v)


def table(header: List[str], body: List[List[str]], right: Sequence[int],
          markdown: bool = False) -> str:
    if markdown:
        rule = ["---:" if i in right else "---" for i in range(len(header))]
        return "\n".join("| " + " | ".join(r) + " |" for r in [header, rule] + body)
    w = [max(len(h), *(len(r[i]) for r in body)) if body else len(h)
         for i, h in enumerate(header)]

    def line(cells: List[str]) -> str:
        return "  ".join(c.rjust(w[i]) if i in right else c.ljust(w[i])
                         for i, c in enumerate(cells)).rstrip()
    return "\n".join([line(header), line(["-" * x for x in w])] + [line(r) for r in body])


def energy_cell(r: Dict[str, Any]) -> str:
    if r["baseline"]:
        return "-"
    if r["energy_delta_pct"] is not None:
        return f"{r['energy_delta_pct']:+.1f}%"
    return "n/a"


def main_table(result: Dict[str, Any], markdown: bool = False) -> str:
    body = []
    for r in result["rows"]:
        rng = r.get("wall_delta_range_pct")
        body.append([r["label"], r["threshold"], f"{r['runs_ok']}/{r['runs']}",
                     f_(r["wall_s"], "{:.3f}"),
                     "-" if r["baseline"] else f_(r["wall_delta_pct"], "{:+.1f}%"),
                     f"{rng[0]:+.0f}..{rng[1]:+.0f}" if rng else "-",
                     energy_cell(r), f_(r["mpi_wait_pct"]), f_(r["down_pct"]),
                     f_(r["transitions"], "{:.0f}") if r["records"] else "-"])
    return table(["variant", "threshold", "runs", "wall s", "wall Δ%", "Δ% range",
                  "energy Δ%", "MPI wait %", "clocked down %", "transitions"], body,
                 (2, 3, 4, 5, 6, 7, 8, 9), markdown)


def sweep_table(result: Dict[str, Any], markdown: bool = False) -> str:
    rows = {r["variant"]: r for r in result["rows"]}
    body = []
    for key in result["sweep"]:
        r = rows[key]
        av = "-" if r["avoided_pct"] is None else \
            f"{r['avoided_pct']:.1f}%" + (" (calls)" if r["avoided_basis"] == "long calls"
                                          else "")
        body.append([r["threshold"], f_(r["long_calls"], "{:.0f}"),
                     f_(r["transitions"], "{:.0f}"), av, f_(r["over_pct"]),
                     f_(r["covered_pct"])])
    return table(["threshold", "long calls", "transitions", "avoided vs " +
                  (rows[result["sweep_reference"]]["threshold"] if result["sweep"] else "0"),
                  "beyond thr % of MPI", "clocked down % of MPI"], body, (1, 2, 3, 4, 5),
                 markdown)


def render_text(result: Dict[str, Any], markdown: bool = False) -> str:
    """The table, the sweep and the notes; markdown: the same as Markdown
    tables (for reports and RESULTS.md files)."""
    c, m = result["config"], result["machine"]
    nl = "\n" if markdown else ""
    out = [f"{PROG}: {c['workload']} on {c['nodes']} node(s) x {c['ntasks_per_node']} tasks, "
           f"{c['reps']} repetitions interleaved after {c.get('warmup', 0)} warm-up, baseline "
           f"{c['baseline_label']}, placement {c.get('placement_label') or placement_label(c)}"
           + (f"; {result['started']}" if result.get("started") else "")
           + (f", source {result['source']}" if result.get("source") else ""),
           f"machine: {m.get('hosts') or '?'} ({m.get('cpu') or '?'}, {m.get('ncpu') or '?'} "
           f"CPUs, kernel {m.get('kernel') or '?'}); cpufreq {m.get('cpufreq') or '?'}; "
           f"RAPL {m.get('rapl')}",
           f"runs in {c['workdir']}", "", main_table(result, markdown)]
    if markdown:
        out[:3] = [line + "  " for line in out[:3]]  # Markdown line breaks
    if result["sweep"]:
        out += ["", "threshold sweep (mode on; medians per run; 'long calls' = blocking calls "
                "lasting at least the threshold):" + nl, sweep_table(result, markdown)]
    if result["notes"]:
        out += ["", "notes:" + nl] + [f"{'' if markdown else '  '}* {n}" for n in result["notes"]]
    return "\n".join(out) + "\n"


CSV_FIELDS = ("variant", "label", "mode", "threshold_us", "runs", "runs_ok", "wall_s",
              "wall_delta_pct", "energy_delta_pct", "energy_delta_simulated_pct",
              "mpi_wait_pct", "down_pct", "transitions", "long_calls", "avoided_pct",
              "avoided_basis", "over_pct", "covered_pct", "agent", "records")


def render_csv(result: Dict[str, Any]) -> str:
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(CSV_FIELDS)
    for r in result["rows"]:
        w.writerow(["" if r.get(k) is None else
                    (f"{r[k]:.4f}" if isinstance(r.get(k), float) else r[k])
                    for k in CSV_FIELDS])
    return buf.getvalue()


def progress(head: str, run: Dict[str, Any], tail: str) -> None:
    """One line per job on stderr, with the end of its output when it failed."""
    print(f"{head} job {run.get('job', '-')} {run.get('state')} "
          f"wall {f_(run.get('wall_s'), '{:.3f}')} s{tail}"
          + "".join(f"\n    {ln}" for ln in run.get("output_tail", [])),
          file=sys.stderr, flush=True)


def machine_of(runs: List[Dict[str, Any]]) -> Dict[str, Any]:
    ok = [r for r in runs if r.get("ok")] or runs
    hosts = sorted({r["host"].get("host") for r in ok if r.get("host", {}).get("host")})
    first = next((r["host"] for r in ok if r.get("host", {}).get("host")), {})
    cf = sorted({f"{v.get('driver') or 'none'}/{','.join(v.get('governors') or []) or '-'}"
                 for r in ok for v in (r.get("cpufreq") or {}).values()})
    kinds = sorted({r["rapl"] for r in ok})
    return {"hosts": ",".join(hosts), "cpu": first.get("cpu"), "ncpu": first.get("ncpu"),
            "kernel": first.get("kernel"), "cpufreq": "; ".join(cf) or None,
            "rapl": "/".join(kinds) if kinds else "unknown"}


# ---------------------------------------------------------------- main

def build_parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(
        prog=PROG, usage=f"{RUN} [options] [-- COMMAND...]",
        description="Run a workload through Slurm with and without --mpi-pstate, repetitions "
        "interleaved, and print walltime and energy deltas, MPI wait, time clocked down, "
        "transitions and a threshold sweep.  Without COMMAND: hpcc.")
    ap.add_argument("--nodes", "-N", type=int, default=1, help="nodes per job (1)")
    ap.add_argument("--ntasks-per-node", type=int, default=2, help="MPI ranks per node (2)")
    ap.add_argument("--reps", type=int, default=3, help="repetitions of every variant (3)")
    ap.add_argument("--thresholds", default=DEFAULT_THRESHOLDS,
                    help=f"--mpi-pstate-threshold values, one variant each; 'default' = the "
                    f"site's ({DEFAULT_THRESHOLDS})")
    ap.add_argument("--partition", "-p", help="Slurm partition")
    ap.add_argument("--extra-sbatch-args", default="", metavar="ARGS",
                    help="more sbatch options, one shell-quoted string (e.g. '-t 10 -A proj')")
    ap.add_argument("--mode", default="on", choices=("on", "profile"),
                    help="--mpi-pstate mode of the variants (on)")
    ap.add_argument("--baseline", default="none", choices=("none", "off", "profile"),
                    help="the runs to compare with: none = option not given (default), off, "
                    "or profile (measures MPI wait and energy without changing frequency)")
    ap.add_argument("--placement", default=DEFAULT_PLACEMENT, choices=PLACEMENTS,
                    help="how every run's tasks are bound, baseline and variants alike: a "
                    "Slurm --cpu-bind type given to each run as SLURM_CPU_BIND, or 'native' "
                    "(the baseline keeps Slurm's placement, --mpi-pstate=on pins with "
                    f"--mpi-pstate-bind) ({DEFAULT_PLACEMENT})")
    ap.add_argument("--launcher", default="srun --mpi=pmix",
                    help="prefix of the workload inside the job ('srun --mpi=pmix'; "
                    "'srun --mpi=pmi2' for MPICH; '' when COMMAND launches itself)")
    ap.add_argument("--warmup", type=int, default=1,
                    help="baseline runs before the first repetition, not counted (1)")
    ap.add_argument("--hpcc-n", type=int, default=500, help="hpcc problem size N (500)")
    ap.add_argument("--no-exclusive", action="store_true",
                    help="share nodes with other jobs (default: --exclusive)")
    ap.add_argument("--workdir", help="where job scripts and outputs go; must be visible on "
                    "the nodes (default: ./mpi-pstate-bench.<date>)")
    ap.add_argument("--report-cmd", help="the mpi-pstate command (default: from PATH, then "
                    "the source tree)")
    ap.add_argument("--job-timeout", type=float, default=900, help="seconds per job (900)")
    ap.add_argument("--record-wait", type=float, default=30,
                    help="seconds to wait for a job's mpi-pstate record (30)")
    out = ap.add_mutually_exclusive_group()
    out.add_argument("--json", action="store_true", help="everything as JSON")
    out.add_argument("--csv", action="store_true", help="one CSV line per variant")
    out.add_argument("--markdown", action="store_true", help="the text output as Markdown")
    return ap


def split_command(argv: List[str]) -> Tuple[List[str], List[str]]:
    if "--" in argv:
        i = argv.index("--")
        return argv[:i], argv[i + 1:]
    return argv, []


class Stop(Exception):
    """Ends the command with this exit status; the message is out already."""

    def __init__(self, status: int) -> None:
        super().__init__(status)
        self.status = status


def parse_args(argv: Optional[List[str]]
               ) -> Tuple[argparse.Namespace, List[str], List[Optional[int]], List[str]]:
    """(options, COMMAND, thresholds, extra sbatch arguments); a usage error
    exits with status 2."""
    args, command = split_command(list(sys.argv[1:] if argv is None else argv))
    ap = build_parser()
    a = ap.parse_args(args)
    try:
        thresholds = parse_thresholds(a.thresholds)
        extra = shlex.split(a.extra_sbatch_args)
    except ValueError as e:
        ap.error(str(e))
    for name in ("nodes", "ntasks_per_node", "reps", "hpcc_n"):
        if getattr(a, name) < 1:
            ap.error(f"--{name.replace('_', '-')} must be at least 1")
    if a.warmup < 0:
        ap.error("--warmup must not be negative")
    return a, command, thresholds, extra


class Workload:
    def __init__(self, label: str, command: List[str], setup: Callable[[Path], None]) -> None:
        self.label = label
        self.command = command
        self.setup = setup  # prepares a run directory


def workload(a: argparse.Namespace, command: List[str]) -> Workload:
    """COMMAND as given, else hpcc with its input file in every run
    directory (Stop(2) when hpcc is not installed)."""
    if command:
        return Workload(shell_join(command), command, lambda d: None)
    if not os.access(HPCC, os.X_OK) or not HPCC_TEMPLATE.is_file():
        print(f"{PROG}: hpcc is not installed ({HPCC}, {HPCC_TEMPLATE}): give a COMMAND",
              file=sys.stderr)
        raise Stop(2)
    p, q = process_grid(a.nodes * a.ntasks_per_node)
    inf = hpccinf(HPCC_TEMPLATE.read_text(), a.hpcc_n, p, q)

    def setup(d: Path) -> None:
        (d / "hpccinf.txt").write_text(inf)  # hpcc reads it from its cwd
    return Workload(f"hpcc (N={a.hpcc_n}, P x Q = {p} x {q})", [HPCC], setup)


def warm_up(cl: Cluster, o: Options, v: Variant, n: int, command: List[str], workdir: Path,
            setup: Callable[[Path], None]) -> List[Dict[str, Any]]:
    """The first job after a quiet spell pays for cold caches and page cache
    misses of the workload: run n of them, kept out of the figures."""
    warmups = []
    for w in range(n):
        try:
            run = run_one(cl, o, v, -1 - w, command, workdir / f"w{w + 1:02d}-{v.key}", setup)
        except SlurmError as e:
            print(f"{PROG}: warm-up: {e}", file=sys.stderr)
            raise Stop(1) from None
        warmups.append(run)
        progress(f"[warm-up {w + 1}/{n}] {v.label}:", run, " (not counted)")
    return warmups


def repetitions(cl: Cluster, o: Options, vs: List[Variant], command: List[str], workdir: Path,
                setup: Callable[[Path], None]) -> List[Dict[str, Any]]:
    """Every run of the plan; a run Slurm refused is kept as failed."""
    runs: List[Dict[str, Any]] = []
    todo = plan(o.reps, vs)
    for i, (rep, v) in enumerate(todo):
        rundir = workdir / f"r{rep + 1:02d}-{v.key}"
        try:
            run = run_one(cl, o, v, rep, command, rundir, setup)
        except SlurmError as e:
            print(f"{PROG}: {e}", file=sys.stderr)
            if "sbatch failed" in str(e) and i == 0:
                raise Stop(1) from None  # nothing else would run either
            run = {"variant": v.key, "label": v.label, "rep": rep, "dir": str(rundir),
                   "ok": False, "state": "ERROR", "error": str(e), "env": {},
                   "rapl": "unknown", "host": {}}
        runs.append(run)
        progress(f"[{i + 1}/{len(todo)}] {v.label} rep {rep + 1}:", run,
                 f", transitions {run.get('transitions')}" if run.get("record") else "")
        if i + 1 == len(vs) and not any(r.get("ok") for r in runs):
            # a workload that fails in every variant would fail the same way in every
            # repetition: stop instead of filling the queue
            print(f"{PROG}: every run of the first repetition failed; stopping",
                  file=sys.stderr)
            break
    return runs


def config_of(a: argparse.Namespace, w: Workload, command: List[str],
              thresholds: List[Optional[int]], extra: List[str], baseline_label: str,
              report_cmd: Optional[List[str]], workdir: Path) -> Dict[str, Any]:
    return {"workload": w.label, "command": command, "nodes": a.nodes,
            "ntasks_per_node": a.ntasks_per_node, "reps": a.reps,
            "thresholds_us": thresholds, "mode": a.mode, "baseline": a.baseline,
            "baseline_label": baseline_label, "partition": a.partition,
            "extra_sbatch_args": extra, "exclusive": not a.no_exclusive,
            "workdir": str(workdir), "report_cmd": report_cmd, "warmup": a.warmup,
            "placement": a.placement,
            "launcher_cpu_bind": launcher_binding(shlex.split(a.launcher))}


def write_result(result: Dict[str, Any], a: argparse.Namespace) -> None:
    if a.json:
        sys.stdout.write(json.dumps(result, indent=1) + "\n")
    elif a.csv:
        sys.stdout.write(render_csv(result))
    else:
        sys.stdout.write(render_text(result, a.markdown))


def main(argv: Optional[List[str]] = None, cluster: Optional[Cluster] = None,
         source: Optional[str] = None) -> int:
    """source: what the caller knows of the code it measures (bench/eval/run.py
    gives its checkout's commit); without it the result's source stays
    null."""
    a, command, thresholds, extra = parse_args(argv)
    workdir = Path(a.workdir or f"mpi-pstate-bench.{time.strftime('%Y%m%d-%H%M%S')}").resolve()
    try:
        w = workload(a, command)
        cl = cluster or Cluster(find_report_cmd(a.report_cmd))
        o = Options(a.nodes, a.ntasks_per_node, a.reps, a.partition, extra, not a.no_exclusive,
                    a.job_timeout, a.record_wait, a.placement)
        vs = variants(a.baseline, a.mode, thresholds)
        if not cl.report_cmd:
            print(f"{PROG}: mpi-pstate not found: figures come from sacct SystemComment only",
                  file=sys.stderr)
        workdir.mkdir(parents=True, exist_ok=True)
        started = time.strftime("%Y-%m-%dT%H:%M:%S%z")
        full = shlex.split(a.launcher) + w.command
        warmups = warm_up(cl, o, vs[0], a.warmup, full, workdir, w.setup)
        runs = repetitions(cl, o, vs, full, workdir, w.setup)
    except Stop as e:
        return e.status
    except KeyboardInterrupt:
        print(f"{PROG}: interrupted", file=sys.stderr)
        return 130
    result: Dict[str, Any] = {
        "format": FORMAT, "version": VERSION, "started": started, "source": source,
        "config": config_of(a, w, full, thresholds, extra, vs[0].label, cl.report_cmd, workdir),
        "runs": runs, "warmup_runs": warmups}
    result["config"]["placement_label"] = placement_label(result["config"])
    result.update(aggregate(vs, runs))
    result["machine"] = machine_of(runs)
    result["notes"] = notes(result)
    write_result(result, a)
    return 0 if all(r.get("ok") for r in runs) else 1
