#!/usr/bin/python3
# SPDX-License-Identifier: BSD-3-Clause
"""The hot path of mpi-pstate against the per-call designs, side by side in one run.

    make B=build baselines-bench
    /usr/bin/python3 bench/baselines/run.py --build build [--abi mpich,ompi] [--rounds 7] [--json]

Four variants of the same MPI microbenchmark (bench/preload/hotpath.c, the
preload engineer's program, run through the helpers of bench/preload/run.py):
  none        no library
  mpi-pstate  the preload library (mpi-pstate-exec --mode on): stamps the
              wait state into shared memory, no system call
  timer       per-call timer, COUNTDOWN's design: setitimer arm and disarm
              around every call (bench/baselines/percall.c, BASELINE_TIMER)
  switch      frequency switched on every call, the 2013 talk's design: a
              pwrite of the low and the high frequency around every call to a
              kept fd of a plain tmpfs file (BASELINE_SWITCH)
Each round runs every variant once, in an order that rotates from round to
round; a run prints the best of REPS repetitions of N calls (hotpath.c) and
the table shows the median over the rounds.  The per-call designs cost
microseconds, so they run fewer calls (--n-slow) than none and mpi-pstate
(-n): ns per call is comparable whatever N.  System calls per call come
from strace -ff between the program's two getppid() markers.
Prints Markdown (or JSON with --json) on stdout, progress on stderr.
"""
from __future__ import annotations

import argparse
import importlib.util
import json
import os
import shutil
import statistics
import sys
import tempfile
from pathlib import Path
from types import ModuleType
from typing import Any, Dict, List, Optional, Tuple

TOP = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(TOP / "bench"))
import machine as bm  # noqa: E402
VARIANTS = ("none", "mpi-pstate", "timer", "switch")
KINDS = ("test", "barrier", "iprobe")
DESCRIPTION = {
    "none": "no library",
    "mpi-pstate": "mpi-pstate preload library (mode on, no agent)",
    "timer": "per-call timer: setitimer arm + disarm (COUNTDOWN)",
    "switch": "switch on every call: pwrite low + high to a tmpfs file (2013 talk)",
}


def preload_bench() -> ModuleType:
    """bench/preload/run.py as a module: its launcher and environment helpers
    are the ones the library's own hot-path figures were measured with."""
    path = TOP / "bench" / "preload" / "run.py"
    spec = importlib.util.spec_from_file_location("mpi_pstate_preload_bench", path)
    if spec is None or spec.loader is None:
        raise RuntimeError(f"cannot load {path}")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def baseline_lib(build: Path, design: str, abi: str) -> Path:
    return build / "bench" / "baselines" / f"libmpst-baseline-{design}.{abi}.so"


def variant_argv(pb: ModuleType, build: Path, abi: str, variant: str, prog: List[str],
                 fake_file: Path) -> List[str]:
    """The command line of one run; every variant goes through the same
    launcher so that only the library differs."""
    if variant == "none":
        return pb.launch(abi) + prog
    if variant == "mpi-pstate":
        return pb.launch(abi) + pb.with_lib(build, prog)
    return pb.launch(abi) + ["env", f"LD_PRELOAD={baseline_lib(build, variant, abi)}",
                             f"MPI_PSTATE_BASELINE_FILE={fake_file}"] + prog


def rotation(rounds: int, items: Tuple[str, ...]) -> List[List[str]]:
    """Round r runs the variants starting at r mod len: no variant always runs
    first (cold caches) or right after the same neighbour."""
    k = len(items)
    return [[items[(r + i) % k] for i in range(k)] for r in range(rounds)]


def parse_hotpath(out: str) -> float:
    """hotpath prints "KIND N best_ns_per_call"; MPI may add lines around it."""
    for line in out.splitlines():
        f = line.split()
        if len(f) == 3 and f[0] in KINDS and f[1].isdigit():
            return float(f[2])
    raise RuntimeError(f"no hotpath result in output:\n{out}")


def count_between_markers(lines: List[str]) -> int:
    """System calls between the two getppid() markers of hotpath.c."""
    body = [ln for ln in lines if not ln.startswith(("+++", "---"))]
    marks = [i for i, ln in enumerate(body) if ln.startswith("getppid(")]
    if len(marks) != 2:
        raise RuntimeError(f"expected two getppid markers, found {len(marks)}")
    return marks[1] - marks[0] - 1


def syscalls_per_call(pb: ModuleType, build: Path, abi: str, variant: str, kind: str, n: int,
                      fake_file: Path, tmp: Path) -> float:
    """strace -ff of the calling thread (the lowest thread id: the process's
    first); the MPIs' helper threads poll on their own and are no call's cost."""
    prog = str(build / "bench" / "preload" / f"hotpath.{abi}")
    prefix = tmp / f"st.{abi}.{variant}.{kind}"
    st = ["strace", "-ff", "-qq", "-o", str(prefix)]
    inner = [prog, kind, str(n), "1"]
    if variant == "none":
        argv = pb.launch(abi) + st + inner
    elif variant == "mpi-pstate":
        argv = pb.launch(abi) + pb.with_lib(build, st + inner)
    else:
        # -E: the baseline goes into the traced program only, not into strace.
        # The timer design's cost per call is its arm and disarm; a timeout
        # far beyond any call keeps a call slowed by strace or by a busy
        # machine from firing it (its handler's writes are no short call's).
        argv = pb.launch(abi) + st + [
            "-E", f"LD_PRELOAD={baseline_lib(build, variant, abi)}",
            "-E", "MPI_PSTATE_BASELINE_TIMEOUT=60s",
            "-E", f"MPI_PSTATE_BASELINE_FILE={fake_file}"] + inner
    pb.run(argv, pb.clean_env())
    files = sorted(tmp.glob(prefix.name + ".*"), key=lambda p: int(p.suffix[1:]))
    if not files:
        raise RuntimeError(f"no strace output for {prefix}")
    try:
        # The calling thread is the one whose trace holds the markers: thread
        # ids wrap around on a busy machine, so the lowest is not always it.
        traces = [f.read_text().splitlines() for f in files]
        marked = [t for t in traces if any(ln.startswith("getppid(") for ln in t)]
        return count_between_markers(marked[0] if marked else traces[0]) / n
    finally:
        for f in files:
            f.unlink()


def summarize(samples: Dict[str, List[float]]) -> Dict[str, Dict[str, Optional[float]]]:
    """Median per variant, the ns it adds to a call, and how many times the
    library's added cost that is."""
    med = {v: statistics.median(s) for v, s in samples.items() if s}
    base = med.get("none")
    lib_added = (med["mpi-pstate"] - base) if base is not None and "mpi-pstate" in med else None
    out: Dict[str, Dict[str, Optional[float]]] = {}
    for v, m in med.items():
        added = None if base is None else m - base
        times_lib = None
        if added is not None and lib_added is not None and lib_added > 0 and v != "none":
            times_lib = added / lib_added
        out[v] = {"ns": m, "added_ns": added, "ratio_to_none": (m / base) if base else None,
                  "times_lib_added": times_lib, "min_ns": min(samples[v]),
                  "max_ns": max(samples[v]), "runs": float(len(samples[v]))}
    return out


def markdown(result: Dict[str, Any]) -> str:
    lines = [f"## Hot path against the per-call designs ({result['machine']})", "",
             f"Command: `{result['command']}`", "",
             f"{result['rounds']} rotating rounds per row; each run the best of "
             f"{result['reps']} x N calls (N = {result['n']} for none and mpi-pstate, "
             f"{result['n_slow']} for timer and switch); medians shown. "
             f"Timer timeout {result['timeout']}.", "",
             "| MPI | call | design | ns/call | best round | x none | added ns/call "
             "| x mpi-pstate's added | syscalls/call |",
             "|---|---|---|---:|---:|---:|---:|---:|---:|"]
    for row in result["rows"]:
        for v in VARIANTS:
            s = row["variants"].get(v)
            if not s:
                continue
            sc = row.get("syscalls", {}).get(v)
            lines.append(f"| {row['abi']} | {row['kind']} | {v} | {bm.fmt(s['ns'])} | "
                         f"{bm.fmt(s['min_ns'])} | {bm.fmt(s['ratio_to_none'], '{:.1f}')} | "
                         f"{bm.fmt(s['added_ns']) if v != 'none' else '-'} | "
                         f"{bm.fmt(s['times_lib_added'], '{:.0f}')} | {bm.fmt(sc, '{:.2f}')} |")
    lines += ["", "Designs: " + "; ".join(f"**{v}**: {DESCRIPTION[v]}" for v in VARIANTS) + "."]
    return "\n".join(lines) + "\n"


def parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--build", default="build", help="build directory (make B=...)")
    ap.add_argument("--abi", default="mpich,ompi")
    ap.add_argument("--kinds", default=",".join(KINDS))
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--reps", type=int, default=3, help="repetitions inside one run (best kept)")
    ap.add_argument("-n", type=int, default=1_000_000, help="calls per repetition, none and "
                    "mpi-pstate")
    ap.add_argument("--n-slow", type=int, default=100_000, help="calls per repetition, the "
                    "per-call designs")
    ap.add_argument("--timeout", default="500us", help="timer design: timeout (COUNTDOWN's "
                    "default 500us)")
    ap.add_argument("--no-strace", action="store_true")
    ap.add_argument("--json", action="store_true", help="JSON instead of Markdown")
    return ap


def bench_row(pb: ModuleType, build: Path, abi: str, kind: str, a: argparse.Namespace,
              fake: Path, tmp: Path) -> Dict[str, Any]:
    """One MPI and kind of call: every variant in rotating rounds, then (unless
    --no-strace or no strace) the system calls per call of each."""
    prog = str(build / "bench" / "preload" / f"hotpath.{abi}")
    samples: Dict[str, List[float]] = {v: [] for v in VARIANTS}
    for order in rotation(a.rounds, VARIANTS):
        for v in order:
            n = a.n if v in ("none", "mpi-pstate") else a.n_slow
            argv_v = variant_argv(pb, build, abi, v, [prog, kind, str(n), str(a.reps)], fake)
            env = pb.clean_env()
            env["MPI_PSTATE_BASELINE_TIMEOUT"] = a.timeout
            samples[v].append(parse_hotpath(pb.run(argv_v, env)))
    row: Dict[str, Any] = {"abi": abi, "kind": kind, "samples": samples,
                           "variants": summarize(samples)}
    if not a.no_strace and shutil.which("strace"):
        row["syscalls"] = {v: syscalls_per_call(pb, build, abi, v, kind, 2000, fake, tmp)
                           for v in VARIANTS}
    return row


def main(argv: Optional[List[str]] = None) -> int:
    ap = parser()
    a = ap.parse_args(argv)
    if a.rounds < 1 or a.reps < 1 or a.n < 1 or a.n_slow < 1:
        ap.error("--rounds, --reps, -n and --n-slow must be positive")
    build = (TOP / a.build).resolve()
    pb = preload_bench()
    kinds = [k for k in a.kinds.split(",") if k]
    if any(k not in KINDS for k in kinds):
        ap.error(f"--kinds: choose from {','.join(KINDS)}")
    abis = [x for x in a.abi.split(",") if x]
    missing = [str(p) for x in abis for p in
               [build / "bench" / "preload" / f"hotpath.{x}", baseline_lib(build, "timer", x),
                baseline_lib(build, "switch", x)] if not p.exists()]
    if missing:
        print("build first: make B=... baselines-bench (missing: " + ", ".join(missing) + ")",
              file=sys.stderr)
        return 2
    tmp = Path(tempfile.mkdtemp(prefix="bench-baselines.", dir="/dev/shm"
                                if os.path.isdir("/dev/shm") else None))
    fake = tmp / "scaling_setspeed"
    result: Dict[str, Any] = {
        "format": "mpi-pstate-bench-baselines", "version": 1, "machine": bm.machine(),
        "command": "/usr/bin/python3 bench/baselines/run.py " + " ".join(
            sys.argv[1:] if argv is None else argv),
        "rounds": a.rounds, "reps": a.reps, "n": a.n, "n_slow": a.n_slow,
        "timeout": a.timeout, "rows": []}
    try:
        for abi in abis:
            for kind in kinds:
                row = bench_row(pb, build, abi, kind, a, fake, tmp)
                result["rows"].append(row)
                print(f"{abi} {kind}: " + ", ".join(
                    f"{v} {row['variants'][v]['ns']:.1f} ns" for v in VARIANTS),
                    file=sys.stderr, flush=True)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    sys.stdout.write(json.dumps(result, indent=1) + "\n" if a.json else markdown(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
