#!/usr/bin/python3
# SPDX-License-Identifier: BSD-3-Clause
"""Hot-path figures of the preload library, with and without it, side by side.

    make B=build preload-bench
    /usr/bin/python3 bench/preload/run.py --build build [--abi mpich,ompi] [--rounds 9]

For each MPI family and each kind of call (bench/preload/hotpath.c):
  time     ns per call without and with the library, alternating runs
           (each run: best of 5 repetitions of N calls; the table shows the
           median over the rounds), the ratio and the ns added per call;
  callgrind instructions per call added (difference of two call counts, so
           start-up and MPI_Init cancel out);
  strace   system calls per call with the library (strace -f -c, again the
           difference of two call counts: 0.000 means none on the hot path).
Prints a Markdown report on stdout.

    run.py --build build --before /tmp/old/build [--rounds 9]

compares two builds of the library instead (for example before and after a
change to the wrappers): without, with the --before build and with --build,
run alternately in each round, then callgrind instructions per call of all
three, side by side.
"""
from __future__ import annotations

import argparse
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Dict, Iterator, List, Tuple

TOP = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(TOP / "bench"))
import machine as bm  # noqa: E402

KINDS = ("test", "barrier", "iprobe", "allreduce", "allreduce_c")
UNSUPPORTED = 3  # hotpath's exit status for a kind this MPI lacks (allreduce_c before MPI-4)
LAUNCH = {"ompi": ["mpirun.openmpi", "-n", "1", "--bind-to", "core"],
          "mpich": ["mpiexec.mpich", "-n", "1", "-bind-to", "core"]}


def launch(abi: str) -> List[str]:
    argv = list(LAUNCH[abi])
    if abi == "ompi" and os.geteuid() == 0:
        argv.append("--allow-run-as-root")
    return argv


def clean_env() -> Dict[str, str]:
    return {k: v for k, v in os.environ.items()
            if k != "LD_PRELOAD" and not k.startswith("MPI_PSTATE_")}


def supported(build: Path, abi: str, kind: str) -> bool:
    prog = build / "bench" / "preload" / f"hotpath.{abi}"
    return subprocess.run([str(prog), kind, "0"], capture_output=True,
                          timeout=60).returncode != UNSUPPORTED


def run(argv: List[str], env: Dict[str, str]) -> str:
    r = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=600)
    if r.returncode != 0:
        raise RuntimeError(f"{' '.join(argv)} failed:\n{r.stdout}{r.stderr}")
    return r.stdout


def with_lib(build: Path, argv: List[str]) -> List[str]:
    return [str(build / "preload" / "mpi-pstate-exec"), "--mode", "on", "--"] + argv


def timing(build: Path, abi: str, kind: str, n: int, rounds: int) -> Dict[str, float]:
    prog = str(build / "bench" / "preload" / f"hotpath.{abi}")
    base: List[float] = []
    lib: List[float] = []
    for _ in range(rounds):
        base.append(float(run(launch(abi) + [prog, kind, str(n)], clean_env()).split()[2]))
        lib.append(float(run(launch(abi) + with_lib(build, [prog, kind, str(n)]),
                             clean_env()).split()[2]))
    b, w = statistics.median(base), statistics.median(lib)
    return {"base": b, "lib": w, "added": w - b, "ratio": w / b,
            "added_min": min(lib) - min(base)}


def callgrind_ir(build: Path, abi: str, kind: str, n: int, lib: bool, tmp: Path) -> int:
    prog = str(build / "bench" / "preload" / f"hotpath.{abi}")
    out = tmp / f"cg.{abi}.{kind}.{n}.{int(lib)}"
    vg = ["valgrind", "--tool=callgrind", f"--callgrind-out-file={out}", prog, kind, str(n), "1"]
    run(launch(abi) + (with_lib(build, vg) if lib else vg), clean_env())
    text = out.read_text()
    m = re.search(r"^(?:summary|totals):\s+(\d+)", text, re.M)
    if not m:
        raise RuntimeError(f"no totals in {out}")
    return int(m.group(1))


def ir_per_call(build: Path, abi: str, kind: str, lib: bool, tmp: Path) -> float:
    """callgrind instructions per call: the difference of two call counts, so
    that start-up and MPI_Init cancel out."""
    n1, n2 = 20_000, 120_000
    i1 = callgrind_ir(build, abi, kind, n1, lib, tmp)
    i2 = callgrind_ir(build, abi, kind, n2, lib, tmp)
    return (i2 - i1) / (calls_made(n2) - calls_made(n1))


def cases(build: Path, abis: List[str], kinds: List[str]) -> Iterator[Tuple[str, str]]:
    """Each MPI family and kind of call to measure, the kinds its MPI lacks
    left out (each probed just before it is measured)."""
    for abi in abis:
        for kind in kinds:
            if supported(build, abi, kind):
                yield abi, kind


def counted_kinds(kinds: List[str]) -> List[str]:
    """The kinds asked for that the callgrind tables count."""
    return [k for k in ("test", "barrier", "allreduce", "allreduce_c") if k in kinds]


def strace_calls(build: Path, abi: str, kind: str, n: int, lib: bool,
                 tmp: Path) -> Tuple[int, int]:
    """System calls of the thread that calls MPI (strace -ff: one file per
    thread; the process's first thread is the one with the lowest id).  The
    MPIs' own helper threads (Open MPI's PMIx/libevent) poll on timers and are
    not part of any call's cost."""
    prog = str(build / "bench" / "preload" / f"hotpath.{abi}")
    prefix = tmp / f"st.{abi}.{kind}.{n}.{int(lib)}"
    st = ["strace", "-ff", "-qq", "-o", str(prefix), prog, kind, str(n), "1"]
    run(launch(abi) + (with_lib(build, st) if lib else st), clean_env())
    files = sorted(tmp.glob(prefix.name + ".*"), key=lambda p: int(p.suffix[1:]))
    if not files:
        raise RuntimeError(f"no strace output for {prefix}")
    main = [l for l in files[0].read_text().splitlines() if not l.startswith(("+++", "---"))]
    for f in files:
        f.unlink()
    marks = [i for i, l in enumerate(main) if l.startswith("getppid(")]
    if len(marks) != 2:
        raise RuntimeError(f"expected two getppid markers, found {len(marks)}")
    return len(main), marks[1] - marks[0] - 1


def compare(before: Path, build: Path, abis: List[str], kinds: List[str], n: int,
            rounds: int, tmp: Path, timed: bool = True, counted: bool = True) -> None:
    """Without / --before library / --build library, alternating per round
    (the machine is shared and noisy: only runs this close are comparable),
    then callgrind, which does not depend on the noise."""
    print(f"Timed: {rounds} alternating rounds per row (without, before, after), each the "
          f"best of 5 x {n} calls; median shown.\n")
    print("| MPI | call | without (ns) | before (ns) | after (ns) | added before | added after |")
    print("|---|---|---:|---:|---:|---:|---:|")
    for abi, kind in cases(build, abis if timed else [], kinds):
        prog = str(build / "bench" / "preload" / f"hotpath.{abi}")
        t: Dict[str, List[float]] = {"base": [], "before": [], "after": []}
        for _ in range(rounds):
            t["base"].append(float(run(launch(abi) + [prog, kind, str(n)],
                                       clean_env()).split()[2]))
            for key, lib in (("before", before), ("after", build)):
                t[key].append(float(run(launch(abi) + with_lib(lib, [prog, kind, str(n)]),
                                        clean_env()).split()[2]))
        m = {k: statistics.median(v) for k, v in t.items()}
        print(f"| {abi} | {kind} | {m['base']:.1f} | {m['before']:.1f} | {m['after']:.1f} | "
              f"{m['before'] - m['base']:.1f} | {m['after'] - m['base']:.1f} |", flush=True)
    if not counted or not shutil.which("valgrind"):
        return
    print("\n| MPI | call | instructions/call without | before | after | added before | "
          "added after |")
    print("|---|---|---:|---:|---:|---:|---:|")
    for abi, kind in cases(build, abis, counted_kinds(kinds)):
        per = {key: ir_per_call(lib, abi, kind, use, tmp)
               for key, lib, use in (("base", build, False), ("before", before, True),
                                     ("after", build, True))}
        print(f"| {abi} | {kind} | {per['base']:.1f} | {per['before']:.1f} | "
              f"{per['after']:.1f} | {per['before'] - per['base']:.1f} | "
              f"{per['after'] - per['base']:.1f} |", flush=True)


def calls_made(n: int) -> int:
    """hotpath makes n/10+1 warm-up calls and then REPS(=1) x n."""
    return n // 10 + 1 + n


def timing_table(build: Path, abis: List[str], kinds: List[str], n: int, rounds: int,
                 timed: bool) -> None:
    """ns per call without and with the library (the header alone when not timed)."""
    print(f"Timed: {rounds} alternating rounds per row, each the best of 5 x {n} calls; "
          "median shown.\n")
    print("| MPI | call | without (ns) | with (ns) | ratio | added (ns, median) | added (ns, best) |")
    print("|---|---|---:|---:|---:|---:|---:|")
    for abi, kind in cases(build, abis if timed else [], kinds):
        t = timing(build, abi, kind, n, rounds)
        print(f"| {abi} | {kind} | {t['base']:.1f} | {t['lib']:.1f} | {t['ratio']:.2f} | "
              f"{t['added']:.1f} | {t['added_min']:.1f} |", flush=True)


def callgrind_table(build: Path, abis: List[str], kinds: List[str], tmp: Path) -> None:
    """callgrind instructions per call without and with the library."""
    print("\n| MPI | call | instructions/call without | with | added |")
    print("|---|---|---:|---:|---:|")
    for abi, kind in cases(build, abis, counted_kinds(kinds)):
        per = {lib: ir_per_call(build, abi, kind, lib, tmp) for lib in (False, True)}
        print(f"| {abi} | {kind} | {per[False]:.1f} | {per[True]:.1f} | "
              f"{per[True] - per[False]:.1f} |", flush=True)


def strace_table(build: Path, abis: List[str], kinds: List[str], tmp: Path) -> None:
    """System calls without and with the library, whole run and timed calls."""
    n = 1_000_000
    print(f"\n| MPI | call | syscalls of the calling thread, whole run, without / with | "
          f"inside the {n} timed calls, without / with |")
    print("|---|---|---:|---:|")
    for abi, kind in cases(build, abis, kinds):
        b_all, b_loop = strace_calls(build, abi, kind, n, False, tmp)
        w_all, w_loop = strace_calls(build, abi, kind, n, True, tmp)
        print(f"| {abi} | {kind} | {b_all} / {w_all} | {b_loop} / {w_loop} |", flush=True)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--build", default="build")
    ap.add_argument("--abi", default="mpich,ompi")
    ap.add_argument("--rounds", type=int, default=9)
    ap.add_argument("--kinds", default=",".join(KINDS), help="calls to measure (hotpath.c)")
    ap.add_argument("-n", type=int, default=2_000_000, help="calls per timed repetition")
    ap.add_argument("--no-callgrind", action="store_true")
    ap.add_argument("--no-strace", action="store_true")
    ap.add_argument("--no-timing", action="store_true")
    ap.add_argument("--before", help="another build of the library to compare with --build")
    a = ap.parse_args()
    kinds = [k for k in a.kinds.split(",") if k in KINDS]
    build = (TOP / a.build).resolve()
    abis = [x for x in a.abi.split(",") if (build / "bench" / "preload" / f"hotpath.{x}").exists()]
    if not abis:
        print("build first: make B=... preload-bench", file=sys.stderr)
        return 2
    tmp = Path(tempfile.mkdtemp(prefix="bench-preload."))
    print(f"## Preload hot path ({bm.machine()})\n")
    if a.before:
        compare((TOP / a.before).resolve(), build, abis, kinds, a.n, a.rounds, tmp,
                timed=not a.no_timing, counted=not a.no_callgrind)
    else:
        timing_table(build, abis, kinds, a.n, a.rounds, not a.no_timing)
        if not a.no_callgrind and shutil.which("valgrind"):
            callgrind_table(build, abis, kinds, tmp)
        if not a.no_strace and shutil.which("strace"):
            strace_table(build, abis, kinds, tmp)
    shutil.rmtree(tmp, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
