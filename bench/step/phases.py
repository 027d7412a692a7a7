#!/usr/bin/python3
# SPDX-License-Identifier: BSD-3-Clause
"""Per-phase cost of the mpi-pstate plugin's step work, without Slurm.

    /usr/bin/python3 bench/step/phases.py --build build [--baseline OTHER_BUILD]
        [--n 30] [--warmup 3] [--configs plain:tmpfs,fuse:tmpfs,fuse:disk]
        [--cores 0] [--tasks 1] [--task-ms 5] [--mode on] [--json]

Runs bench/step/hooks (built by `make step-bench` or
`make build/bench/step/hooks`) once per sample: one fresh process per step,
as slurmstepd is, driving spank_mpi_pstate.so's hooks through the unit
tests' stub libslurm with the real mpi-pstate-agent.  Root only (the agent
and the restore records are root's; the FUSE tree needs a mount).

A configuration is TREE:RUNTIME:
  TREE     plain  fake cpufreq tree of plain files (tests/agent/mkfakesys.py),
                  in-kernel like a real sysfs (a real cpufreq read is faster still)
           fuse   the lab's FUSE fake (tests/cluster/fakesys.py), every read and
                  write a round trip to a Python process
  RUNTIME  tmpfs  runtime_dir on tmpfs, as the default /run/mpi-pstate
           disk   runtime_dir on the root file system, as the lab's
                  $LAB/nodes/%h/run (fsync reaches the disk)
The topology is this machine's (hwloc), the same for every configuration.

With --baseline, the plugin and agent of that build are run too, each sample
of one build followed by the same sample of the other (alternating which
goes first), so both see the same machine load.  Prints, per configuration
and build, the median milliseconds of every hook and of every phase the
plugin logs itself (builds that log no phases show hooks only), and the
ratio of the candidate's per-step total to the baseline's.
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Dict, List, Optional

TOP = Path(__file__).resolve().parents[2]
PYTHON = "/usr/bin/python3"  # Debian's, with python3-fusepy for the FUSE fake
HOOKS = ("dlopen", "init", "init_post_opt", "task_post_fork", "task_init_privileged", "task_init",
         "task_run", "task_exit", "exit")
# What a step waits for: everything but the exit hook runs before srun hears
# that the tasks ended; exit (spank_fini) runs before the step-complete
# message that frees the step's CPUs for the next step.  All of it counts;
# the per-task hooks run inside task_run (the child), so they are not
# added twice.
# task_post_fork runs while the task it follows waits to exec: inside task_run.
TOTAL = ("dlopen", "init", "init_post_opt", "task_run", "task_exit", "exit")


def parse_phases(text: str, prefix: str) -> Dict[str, float]:
    """'topology=1.234 ... total=5.678' -> {prefix+'topology': 1.234, ...}."""
    out: Dict[str, float] = {}
    for item in text.split():
        k, _, v = item.partition("=")
        try:
            out[prefix + k] = float(v)
        except ValueError:
            continue
    return out


class Trees:
    """The fake sysfs trees and runtime directories, removed on close()."""

    def __init__(self, ncpu: int) -> None:
        self.tmp = Path(tempfile.mkdtemp(prefix="mpi-pstate-phases."))
        self.shm = Path(tempfile.mkdtemp(prefix="mpi-pstate-phases.", dir="/dev/shm"))
        self.ncpu = ncpu
        self.fuse_pid: Optional[int] = None
        self.mounts: List[Path] = []
        self.plain = self.tmp / "plain"
        subprocess.run([PYTHON, str(TOP / "tests/agent/mkfakesys.py"), str(self.plain),
                        "--cpus", str(ncpu)], check=True)
        self.fuse: Optional[Path] = None
        self.lib = self.tmp / "libmpi-pstate.so"
        self.lib.write_bytes(b"")
        self.lib.chmod(0o644)

    def start_fuse(self) -> Path:
        mnt, root = self.tmp / "fusemnt", self.tmp / "fuse"
        mnt.mkdir()
        cfg = self.tmp / "fakesys.json"
        cfg.write_text(json.dumps({"ncpu": self.ncpu}))
        p = subprocess.Popen([PYTHON, str(TOP / "tests/cluster/fakesys.py"), str(mnt),
                              str(cfg), str(self.tmp / "writes.log")])
        self.fuse_pid = p.pid
        for _ in range(200):
            if (mnt / "cpufreq").is_dir():
                break
            time.sleep(0.05)
        else:
            raise RuntimeError("fakesys.py did not mount")
        cpu = root / "devices/system/cpu"
        (cpu / "cpufreq").mkdir(parents=True)
        for c in range(self.ncpu):
            (cpu / f"cpu{c}").mkdir()
            (cpu / f"cpu{c}" / "cpufreq").symlink_to(f"../cpufreq/policy{c}")
        (root / "class/powercap").mkdir(parents=True)
        # As the lab binds them: the agent reads RAPL energy through the fake too.
        for src, dst in ((mnt / "cpufreq", cpu / "cpufreq"),
                         (mnt / "powercap", root / "class/powercap")):
            subprocess.run(["mount", "--bind", str(src), str(dst)], check=True)
            self.mounts.append(dst)
        self.mounts.append(mnt)
        self.fuse = root
        return root

    def sysroot(self, tree: str) -> Path:
        if tree == "plain":
            return self.plain
        return self.fuse or self.start_fuse()

    def runtime(self, where: str, build: str) -> Path:
        base = self.shm if where == "tmpfs" else self.tmp
        return base / f"run-{build}"

    def close(self) -> None:
        for m in self.mounts:
            subprocess.run(["umount", "-l", str(m)], check=False)
        if self.fuse_pid:
            try:
                os.kill(self.fuse_pid, signal.SIGTERM)
            except ProcessLookupError:
                pass
        shutil.rmtree(self.tmp, ignore_errors=True)
        shutil.rmtree(self.shm, ignore_errors=True)


def one_sample(hooks: Path, build: Optional[Path], sysroot: Path, runtime: Path, lib: Path,
               a: argparse.Namespace) -> Dict[str, Any]:
    plugin = str(build / "spank/spank_mpi_pstate.so") if build else "none"
    build = build or Path("/nonexistent")
    argv = [str(hooks), "--plugin", plugin,
            "--agent", str(build / "agent/mpi-pstate-agent"), "--sysroot", str(sysroot),
            "--runtime", str(runtime), "--preload", str(lib), "--cores", a.cores,
            "--tasks", str(a.tasks), "--task-ms", str(a.task_ms), "--mode", a.mode]
    r = subprocess.run(argv, capture_output=True, text=True, timeout=60)
    if r.returncode != 0:
        raise RuntimeError(f"{' '.join(argv)}: exit {r.returncode}: {r.stderr.strip()}")
    d = json.loads(r.stdout)
    out = {k: float(d[k]) for k in HOOKS}
    out["total"] = sum(out[k] for k in TOTAL)
    out.update(parse_phases(d.get("start_phases", ""), "start."))
    out.update(parse_phases(d.get("end_phases", ""), "end."))
    out["errors"] = d.get("errors", [])
    return out


def median_table(samples: List[Dict[str, Any]]) -> Dict[str, float]:
    keys = sorted({k for s in samples for k in s if k != "errors"})
    return {k: statistics.median(s[k] for s in samples if k in s) for k in keys}


def run(a: argparse.Namespace) -> Dict[str, Any]:
    builds: Dict[str, Optional[Path]] = {"none": None, "candidate": Path(a.build).resolve()}
    if a.baseline:
        builds["baseline"] = Path(a.baseline).resolve()
    hooks = Path(a.build).resolve() / "bench/step/hooks"
    configs = [c for c in a.configs.split(",") if c]
    trees = Trees(a.ncpu)
    samples: Dict[str, Dict[str, List[Dict[str, Any]]]] = {
        c: {b: [] for b in builds} for c in configs}
    errors: List[str] = []
    try:
        for i in range(a.warmup + a.n):
            for ci, conf in enumerate(configs):
                tree, _, where = conf.partition(":")
                # rotated per round and configuration: no build always goes first
                k = (i + ci) % len(builds)
                order = list(builds)[k:] + list(builds)[:k]
                for b in order:
                    s = one_sample(hooks, builds[b], trees.sysroot(tree),
                                   trees.runtime(where, b), trees.lib, a)
                    errors += [f"{conf} {b}: {e}" for e in s["errors"]]
                    if i >= a.warmup:
                        samples[conf][b].append(s)
    finally:
        trees.close()
    res: Dict[str, Any] = {"format": "mpi-pstate-bench-step-phases", "version": 1,
                           "command": "/usr/bin/python3 bench/step/phases.py " + " ".join(
                               sys.argv[1:]),
                           "n": a.n, "cores": a.cores, "tasks": a.tasks, "task_ms": a.task_ms,
                           "mode": a.mode,
                           "builds": {b: str(p) if p else "no plugin" for b, p in builds.items()},
                           "configs": {}, "errors": sorted(set(errors))[:20]}
    for conf in configs:
        med = {b: median_table(samples[conf][b]) for b in builds}
        entry: Dict[str, Any] = {"median_ms": med}
        # added per step: against the plugin-less run of the same samples
        for b in builds:
            if b != "none":
                med[b]["added"] = med[b]["total"] - med["none"]["total"]
        if "baseline" in med:
            entry["ratio_total"] = med["candidate"]["total"] / med["baseline"]["total"]
            entry["ratio_added"] = med["candidate"]["added"] / med["baseline"]["added"]
        res["configs"][conf] = entry
    return res


def fmt(v: Optional[float]) -> str:
    return "-" if v is None else f"{v:.2f}"


def markdown(res: Dict[str, Any]) -> str:
    builds = list(res["builds"])
    lines = [f"Command: `{res['command']}`", "",
             f"{res['n']} samples per build and configuration, interleaved; cores "
             f"{res['cores']}, {res['tasks']} task(s) of {res['task_ms']} ms, mode "
             f"{res['mode']}.  Median ms.", ""]
    for conf, e in res["configs"].items():
        med = e["median_ms"]
        keys = [k for k in ("added", "total") + HOOKS] + sorted(
            {k for b in builds for k in med[b] if "." in k},
            key=lambda k: (not k.startswith("start."), k.endswith(".total"), k))
        lines += [f"### {conf}", "", "| ms (median) | " + " | ".join(builds) + " |",
                  "|---|" + "---:|" * len(builds)]
        for k in keys:
            lines.append(f"| {k} | " + " | ".join(fmt(med[b].get(k)) for b in builds) + " |")
        if "ratio_total" in e:
            lines.append(f"\ncandidate/baseline: total {e['ratio_total']:.2f}, added "
                         f"{e['ratio_added']:.2f}")
        lines.append("")
    for err in res["errors"]:
        lines.append(f"plugin error: {err}")
    return "\n".join(lines) + "\n"


def main(argv: Optional[List[str]] = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--build", default="build", help="candidate build directory (build)")
    ap.add_argument("--baseline", help="another build directory, run interleaved")
    ap.add_argument("--n", type=int, default=30)
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--configs", default="plain:tmpfs,fuse:tmpfs,fuse:disk")
    ap.add_argument("--ncpu", type=int, default=os.cpu_count() or 1,
                    help="CPUs of the fake cpufreq trees (default: this machine's)")
    ap.add_argument("--cores", default="0", help="the step's cores (Slurm's list, default 0)")
    ap.add_argument("--tasks", type=int, default=1)
    ap.add_argument("--task-ms", type=int, default=5, help="run time of a task (5)")
    ap.add_argument("--mode", default="on", choices=("on", "profile"))
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args(argv)
    if os.geteuid() != 0:
        print("phases.py: run as root (the agent, restore records and the FUSE mount)",
              file=sys.stderr)
        return 2
    for c in a.configs.split(","):
        tree, _, where = c.partition(":")
        if tree not in ("plain", "fuse") or where not in ("tmpfs", "disk"):
            ap.error(f"--configs: TREE:RUNTIME with TREE plain|fuse, RUNTIME tmpfs|disk: {c}")
    res = run(a)
    sys.stdout.write(json.dumps(res, indent=1) + "\n" if a.json else markdown(res))
    return 1 if res["errors"] else 0


if __name__ == "__main__":
    sys.exit(main())
