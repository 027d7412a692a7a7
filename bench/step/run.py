#!/usr/bin/python3
# SPDX-License-Identifier: BSD-3-Clause
"""Job-step start overhead of the mpi-pstate plugin: `srun hostname` with and
without --mpi-pstate, interleaved, N samples each.

    /usr/bin/python3 bench/step/run.py [--n 30] [--scope job,step] [--nodes 1] [--ntasks 1]
                                       [--partition P] [--extra-args ARGS] [--mode on] [--json]

Two scopes, both as the user who runs this (root is fine too):
  job   each sample is one `srun [--mpi-pstate=MODE] hostname` that gets its
        own allocation: what a user at the prompt waits for (allocation,
        Prolog, step, Epilog); timed here around the srun process
  step  one batch job runs every sample as a step of its allocation, timed
        inside the job with bash's EPOCHREALTIME: the plugin's per-step work
        alone (pinning, segment, library, agent start and stop)
The variants alternate in ABBA order (without, with, with, without, ...), so
neither always goes first; --warmup samples of each are run first and
dropped.  Prints Markdown (median, p90, min, ratio of medians with/without
and the ms added) or JSON.  Exit status 1 when a sample failed.
"""
from __future__ import annotations

import argparse
import json
import math
import os
import shlex
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Dict, List, Optional, Sequence, Tuple

# bench/machine.py; beside this file when a test copied both where its user can read them
sys.path.append(str(Path(__file__).resolve().parents[1]))
import machine as bm  # noqa: E402

VARIANTS = ("without", "with")


def abba(n: int) -> List[str]:
    """n samples of each variant, in without/with/with/without blocks."""
    out: List[str] = []
    for i in range(n):
        out += list(VARIANTS) if i % 2 == 0 else list(reversed(VARIANTS))
    return out


def percentile(xs: Sequence[float], p: float) -> Optional[float]:
    """Nearest rank: always one of the samples."""
    v = sorted(xs)
    if not v:
        return None
    return v[min(len(v), max(1, math.ceil(p / 100 * len(v)))) - 1]


def stats(samples: Dict[str, List[float]]) -> Dict[str, Any]:
    out: Dict[str, Any] = {}
    for v, xs in samples.items():
        out[v] = {"n": len(xs), "median_ms": statistics.median(xs) * 1e3 if xs else None,
                  "p90_ms": (percentile(xs, 90) or 0) * 1e3 if xs else None,
                  "min_ms": min(xs) * 1e3 if xs else None,
                  "mean_ms": statistics.fmean(xs) * 1e3 if xs else None}
    a, b = out.get("without", {}), out.get("with", {})
    if a.get("median_ms") and b.get("median_ms") is not None:
        out["ratio_median"] = b["median_ms"] / a["median_ms"]
        out["added_median_ms"] = b["median_ms"] - a["median_ms"]
        out["ratio_p90"] = b["p90_ms"] / a["p90_ms"] if a.get("p90_ms") else None
    return out


def srun_argv(variant: str, a: argparse.Namespace) -> List[str]:
    argv = ["srun", "-N", str(a.nodes), "-n", str(a.ntasks)]
    if a.partition:
        argv += ["-p", a.partition]
    argv += shlex.split(a.extra_args)
    if variant == "with":
        argv.append(f"--mpi-pstate={a.mode}")
    return argv + ["hostname"]


def scope_job(a: argparse.Namespace) -> Tuple[Dict[str, List[float]], List[str]]:
    samples: Dict[str, List[float]] = {v: [] for v in VARIANTS}
    failures: List[str] = []
    order = abba(a.warmup) + abba(a.n)
    for i, v in enumerate(order):
        argv = srun_argv(v, a)
        t0 = time.perf_counter()
        r = subprocess.run(argv, capture_output=True, text=True, timeout=a.timeout)
        dt = time.perf_counter() - t0
        if r.returncode != 0:
            failures.append(f"{shlex.join(argv)}: exit {r.returncode}: {r.stderr.strip()[:200]}")
        elif i >= 2 * a.warmup:
            samples[v].append(dt)
    return samples, failures


STEP_SCRIPT = """#!/bin/bash
# bench/step/run.py: step-start samples inside one allocation
for v in {order}; do
  if [ "$v" = with ]; then opt={with_opt}; else opt=; fi
  t0=$EPOCHREALTIME
  srun {srun_args} $opt hostname >/dev/null 2>>steps.err
  rc=$?
  t1=$EPOCHREALTIME
  echo "sample $v $t0 $t1 $rc"
done
"""


def parse_step_output(text: str, warmup: int) -> Tuple[Dict[str, List[float]], List[str]]:
    """"sample VARIANT T0 T1 RC" lines; the first 2*warmup are dropped."""
    samples: Dict[str, List[float]] = {v: [] for v in VARIANTS}
    failures: List[str] = []
    seen = 0
    for line in text.splitlines():
        f = line.split()
        if len(f) != 5 or f[0] != "sample" or f[1] not in VARIANTS:
            continue
        seen += 1
        t0, t1 = (float(x.replace(",", ".")) for x in f[2:4])
        if f[4] != "0":
            failures.append(f"step sample {seen} ({f[1]}): exit {f[4]}")
        elif seen > 2 * warmup:
            samples[f[1]].append(t1 - t0)
    return samples, failures


def scope_step(a: argparse.Namespace, workdir: Path) -> Tuple[Dict[str, List[float]], List[str]]:
    srun_args = ["-N", str(a.nodes), "-n", str(a.ntasks)]
    script = workdir / "steps.sh"
    script.write_text(STEP_SCRIPT.format(
        order=" ".join(abba(a.warmup) + abba(a.n)), with_opt=shlex.quote(f"--mpi-pstate={a.mode}"),
        srun_args=shlex.join(srun_args)))
    script.chmod(0o755)
    out = workdir / "steps.out"
    argv = ["sbatch", "--wait", "--parsable", "--chdir", str(workdir), "-o", str(out),
            "-J", "mpi-pstate-step-bench", "-N", str(a.nodes), "-n", str(a.ntasks)]
    if a.partition:
        argv += ["-p", a.partition]
    argv += shlex.split(a.extra_args) + [str(script)]
    r = subprocess.run(argv, capture_output=True, text=True,
                       timeout=a.timeout * (2 * (a.n + a.warmup) + 2))
    samples, failures = parse_step_output(out.read_text() if out.exists() else "", a.warmup)
    a.step_job = r.stdout.strip().split(";")[0]
    if r.returncode != 0:
        failures.append(f"sbatch --wait: exit {r.returncode}: {r.stderr.strip()[:200]}")
    expected = a.n
    for v in VARIANTS:
        if len(samples[v]) != expected and not failures:
            failures.append(f"step scope: {len(samples[v])} {v} samples, expected {expected}")
    return samples, failures


# slurmd log lines (SlurmdDebug=verbose) that bound the phases of a step on
# its node: "[TIME] launch task StepId=J.S request ..." and "[TIME] [J.S] MSG".
LOG_MARKS = (
    ("launch", "launch task StepId="),
    ("stepd", "task affinity plugin loaded"),
    ("plugin", "mpi-pstate: job "),  # init_post_opt: the settings line
    ("policy", " saved, "),  # init_post_opt's end: topology, directories, policy save
    ("tasks", "starting "),
    ("set", " set, "),  # first task_post_fork: the policy set (the order that saves before the first task)
    ("agent", ": agent "),  # then the agent's start
    ("started", ") started "),
    ("exited", ") exited "),
    ("done", "done with "),  # "job" on 22.05, "step" on 24.11
)
# Intervals reported, between two marks; the plugin's only exist with it.
LOG_SPANS = (("stepd start", "launch", "stepd"), ("before tasks", "stepd", "tasks"),
             ("  plugin: topology+dirs+policy save", "plugin", "policy"),
             ("  after init_post_opt", "policy", "tasks"),
             ("task run", "started", "exited"),
             ("  plugin: tasks starting to agent started (policy set, agent)", "tasks", "agent"),
             ("step end", "exited", "done"),
             ("launch to done", "launch", "done"))


def log_time(stamp: str) -> Optional[float]:
    try:
        hms = stamp.split("T")[1]
        h, m, sec = hms.split(":")
        return int(h) * 3600 + int(m) * 60 + float(sec)
    except (IndexError, ValueError):
        return None


def parse_slurmd_logs(paths: Sequence[str], job: str) -> Dict[str, Dict[str, float]]:
    """{step id: {mark: seconds of day}} for the steps of `job`, first match of each mark."""
    steps: Dict[str, Dict[str, float]] = {}
    for path in paths:
        try:
            lines = Path(path).read_text(errors="replace").splitlines()
        except OSError:
            continue
        for ln in lines:
            if not ln.startswith("["):
                continue
            stamp, _, rest = ln[1:].partition("] ")
            if rest.startswith(f"launch task StepId={job}."):
                step = rest.split()[2].split(".", 1)[1]
            elif rest.startswith(f"[{job}."):
                step, _, rest = rest[len(job) + 2:].partition("] ")
            else:
                continue
            t = log_time(stamp)
            for mark, needle in LOG_MARKS:
                if needle in rest and t is not None:
                    steps.setdefault(step, {}).setdefault(mark, t)
    return steps


def log_phases(paths: Sequence[str], job: str, warmup: int) -> Dict[str, Dict[str, float]]:
    """Median ms of each LOG_SPANS interval, per variant (a step that logged the
    plugin's settings line is a "with" step); the first 2*warmup steps dropped."""
    steps = parse_slurmd_logs(paths, job)
    per: Dict[str, Dict[str, List[float]]] = {v: {} for v in VARIANTS}
    numbered = sorted((int(s), m) for s, m in steps.items() if s.isdigit())
    for _, marks in numbered[2 * warmup:]:
        v = "with" if "plugin" in marks else "without"
        for name, a, b in LOG_SPANS:
            if a in marks and b in marks:
                per[v].setdefault(name, []).append((marks[b] - marks[a]) * 1e3)
    return {v: {k: statistics.median(xs) for k, xs in d.items()} for v, d in per.items()}


def markdown(res: Dict[str, Any]) -> str:
    lines = [f"## Job-step start overhead of the plugin ({res['machine']})", "",
             f"Command: `{res['command']}`", "",
             f"`srun -N {res['nodes']} -n {res['ntasks']} hostname` without and with "
             f"`--mpi-pstate={res['mode']}`, {res['n']} samples each, ABBA-interleaved after "
             f"{res['warmup']} dropped warm-up samples each.", "",
             "| scope | variant | N | median ms | p90 ms | min ms | with/without (median) "
             "| added ms (median) | with/without (p90) |",
             "|---|---|---:|---:|---:|---:|---:|---:|---:|"]
    for scope, st in res["scopes"].items():
        for v in VARIANTS:
            s = st["stats"][v]
            tail = ["", "", ""] if v == "without" else [
                bm.fmt(st["stats"].get("ratio_median"), "{:.2f}"),
                bm.fmt(st["stats"].get("added_median_ms")),
                bm.fmt(st["stats"].get("ratio_p90"), "{:.2f}")]
            lines.append(f"| {scope} | {v} | {s['n']} | {bm.fmt(s['median_ms'])} | "
                         f"{bm.fmt(s['p90_ms'])} | {bm.fmt(s['min_ms'])} | " + " | ".join(tail) + " |")
    if res.get("log_phases"):
        lp = res["log_phases"]
        lines += ["", "Step scope, per phase on the node (slurmd log, ms resolution; median ms):",
                  "", "| phase | without | with | added |", "|---|---:|---:|---:|"]
        for name, _, _ in LOG_SPANS:
            a, b = lp["without"].get(name), lp["with"].get(name)
            add = None if a is None or b is None else b - a
            lines.append(f"| {name} | {bm.fmt(a)} | {bm.fmt(b)} | {bm.fmt(add)} |")
    for scope, st in res["scopes"].items():
        for f in st["failures"]:
            lines.append(f"\nFAILED ({scope}): {f}")
    return "\n".join(lines) + "\n"


def main(argv: Optional[List[str]] = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--n", type=int, default=30, help="samples per variant (30)")
    ap.add_argument("--warmup", type=int, default=2, help="dropped samples per variant (2)")
    ap.add_argument("--scope", default="job,step", help="job, step or both (job,step)")
    ap.add_argument("--nodes", "-N", type=int, default=1)
    ap.add_argument("--ntasks", "-n", type=int, default=1)
    ap.add_argument("--partition", "-p")
    ap.add_argument("--extra-args", default="", help="more srun/sbatch options, one string")
    ap.add_argument("--mode", default="on", choices=("on", "profile", "off"),
                    help="value of --mpi-pstate in the with samples (on)")
    ap.add_argument("--timeout", type=float, default=120, help="seconds per srun (120)")
    ap.add_argument("--workdir", help="for the step scope's job files (default: a fresh "
                    "directory under the current one, removed afterwards)")
    ap.add_argument("--slurmd-log", action="append", default=[],
                    help="slurmd log(s) of the nodes (readable, SlurmdDebug=verbose): adds the "
                    "step scope's per-phase split from their timestamps")
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args(argv)
    a.step_job = None
    scopes = [s for s in a.scope.split(",") if s]
    if not scopes or any(s not in ("job", "step") for s in scopes):
        ap.error("--scope: job, step or job,step")
    if a.n < 1 or a.warmup < 0 or a.nodes < 1 or a.ntasks < a.nodes:
        ap.error("--n >= 1, --warmup >= 0, --ntasks >= --nodes >= 1")
    if not shutil.which("srun"):
        print("srun not found", file=sys.stderr)
        return 2
    res: Dict[str, Any] = {
        "format": "mpi-pstate-bench-step", "version": 1, "machine": bm.machine(host=True),
        "command": "/usr/bin/python3 bench/step/run.py " + " ".join(
            sys.argv[1:] if argv is None else argv),
        "n": a.n, "warmup": a.warmup, "nodes": a.nodes, "ntasks": a.ntasks, "mode": a.mode,
        "scopes": {}}
    for scope in scopes:
        if scope == "job":
            samples, failures = scope_job(a)
        else:
            made = a.workdir is None
            wd = Path(a.workdir) if a.workdir else Path(tempfile.mkdtemp(
                prefix="mpi-pstate-step.", dir="."))
            wd = wd.resolve()
            wd.mkdir(parents=True, exist_ok=True)
            try:
                samples, failures = scope_step(a, wd)
            finally:
                if made and not os.environ.get("MPI_PSTATE_BENCH_KEEP"):
                    shutil.rmtree(wd, ignore_errors=True)
        res["scopes"][scope] = {"stats": stats(samples), "failures": failures,
                                "samples_s": samples}
        st = res["scopes"][scope]["stats"]
        print(f"{scope}: without {bm.fmt(st['without']['median_ms'])} ms, with "
              f"{bm.fmt(st['with']['median_ms'])} ms (median)", file=sys.stderr, flush=True)
    res["step_job"] = a.step_job
    if a.slurmd_log and a.step_job:
        res["log_phases"] = log_phases(a.slurmd_log, a.step_job, a.warmup)
    sys.stdout.write(json.dumps(res, indent=1) + "\n" if a.json else markdown(res))
    return 1 if any(s["failures"] for s in res["scopes"].values()) else 0


if __name__ == "__main__":
    sys.exit(main())
