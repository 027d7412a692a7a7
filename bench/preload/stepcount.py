#!/usr/bin/python3
# SPDX-License-Identifier: BSD-3-Clause
"""Instructions per intercepted call, counted exactly by single-stepping.

Runs bench/preload/hotpath.c as a singleton (no launcher) under gdb, stops at
its first getppid() marker (after MPI_Init and the warm-up calls), then
single-steps every instruction until the second marker: the timed loop of N
calls.  The count is taken with and without the library (mpi-pstate-exec
--mode on), for N and 2N calls; the instructions the library adds per call
are (with(2N) - with(N) - (without(2N) - without(N))) / N, so start-up,
clock reads and loop overhead cancel out.  The count is the executed path
(trampoline, wrapper, hooks, slot stores, clock reads), on any architecture
gdb can step: natively, or an aarch64 build under qemu-user through its gdb
stub (--qemu, run on the host with gdb-multiarch against the arm64 root).

    bench/preload/stepcount.py --build build [--abi mpich,ompi] [--kinds test,barrier] [--n 4]
    bench/preload/stepcount.py --build build-arm64 --qemu ROOTDIR ...   (from the host)

Prints one line per (abi, kind): "abi kind without with added".  Stdlib only;
needs gdb (gdb-multiarch for --qemu).
"""
from __future__ import annotations

import argparse
import os
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Dict, Optional

# ---- inside gdb ----------------------------------------------------------


def _in_gdb() -> None:  # pragma: no cover - runs inside gdb only
    import gdb  # type: ignore

    out = os.environ["STEPCOUNT_OUT"]
    gdb.execute("set pagination off")
    gdb.execute("set confirm off")
    if os.environ.get("STEPCOUNT_REMOTE"):
        gdb.execute(f"target remote {os.environ['STEPCOUNT_REMOTE']}")
        gdb.execute("break getppid")
        gdb.execute("continue")
    else:
        gdb.execute("break getppid")
        gdb.execute("run")
    # first marker: the getppid() that main calls (MPI_Init may call it too)
    while True:
        gdb.execute("finish", to_string=True)
        if gdb.selected_frame().name() == "main":
            break
        gdb.execute("continue", to_string=True)
    target = int(gdb.parse_and_eval("(unsigned long)&getppid"))
    gdb.execute("set scheduler-locking step")
    n = 0
    while True:
        gdb.execute("stepi", to_string=True)
        n += 1
        if int(gdb.parse_and_eval("(unsigned long)$pc")) == target:
            break
        # The vDSO's clock_gettime retries its seqlock for as long as a
        # single-stepped read is slower than a timer tick: step over it
        # uncounted (hotpath's own clock reads are the same with and
        # without the library; the library reads the CPU counter).
        name = gdb.selected_frame().name() or ""
        if "clock_gettime" in name:
            gdb.execute("finish", to_string=True)
        if n > 50_000_000:
            raise RuntimeError("no second marker")
    Path(out).write_text(f"{n}\n")
    gdb.execute("kill")


# ---- driver --------------------------------------------------------------


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def listening(port: int) -> bool:
    for line in Path("/proc/net/tcp").read_text().splitlines()[1:]:
        f = line.split()
        if f[3] == "0A" and int(f[1].split(":")[1], 16) == port:
            return True
    return False


def lib_env(build: Path, root: Optional[Path]) -> Dict[str, str]:
    """The environment mpi-pstate-exec --mode on gives a program."""
    exe = build / "preload" / "mpi-pstate-exec"
    r = subprocess.run([str(exe), "--mode", "on", "--", "env", "-0"], capture_output=True, check=True)
    env = dict(kv.split("=", 1) for kv in r.stdout.decode().split("\0") if "=" in kv)
    return {k: v for k, v in env.items() if k == "LD_PRELOAD" or k.startswith("MPI_PSTATE_")}


def count(build: Path, abi: str, kind: str, n: int, lib: bool, qemu_root: Optional[Path],
          gdb: str) -> int:
    prog = (build / "bench" / "preload" / f"hotpath.{abi}").resolve()
    env = {k: v for k, v in os.environ.items() if k != "LD_PRELOAD" and not k.startswith("MPI_PSTATE_")}
    extra = lib_env(build, qemu_root) if lib else {}
    if lib:
        extra["MPI_PSTATE_CLOCK"] = "tsc"  # the counter (rdtsc, cntvct_el0), as auto picks on real nodes
        # A single-stepped call lasts milliseconds: with the default
        # threshold every blocking call would take the long-call branch.
        # The short path is the hot path (the timing table's case).
        extra["MPI_PSTATE_THRESHOLD"] = "3600s"
    with tempfile.TemporaryDirectory(prefix="stepcount-") as tmp:
        out = Path(tmp) / "n"
        genv = dict(env, STEPCOUNT_OUT=str(out))
        args = [gdb, "-nx", "-batch", "-x", str(Path(__file__).resolve())]
        proc = None
        if qemu_root is None:
            for k, v in extra.items():
                args[1:1] = ["-iex", f"set environment {k}={v}"]
            args += ["--args", str(prog), kind, str(n), "1"]
        else:
            port = free_port()
            qenv = dict(env, QEMU_GDB=str(port), **extra)
            # An Open MPI singleton forks a supporting daemon for MPI_Comm_spawn;
            # under qemu that child inherits QEMU_GDB, finds the stub's port
            # taken and exits 1, and MPI_Init with it.  hotpath never spawns.
            qenv["OMPI_MCA_ess_singleton_isolated"] = "1"
            # In a private mount namespace: the checkout at its own path,
            # /proc and /dev inside the root, then chroot (the host's
            # network, so that gdb reaches qemu's stub on the loopback).
            top = Path(__file__).resolve().parents[2]
            (qemu_root / str(top).lstrip("/")).mkdir(parents=True, exist_ok=True)
            inner = (f"mount --bind '{top}' '{qemu_root}{top}' && mount -t proc proc '{qemu_root}/proc' && "
                     f"mount --rbind /dev '{qemu_root}/dev' && cd '{qemu_root}' && "
                     f"exec chroot '{qemu_root}' '{prog}' {kind} {n} 1")
            proc = subprocess.Popen(["unshare", "-m", "--propagation", "private", "sh", "-c", inner], env=qenv,
                                    stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            for _ in range(300):  # qemu listens once the program is loaded; its stub
                if listening(port):  # takes one connection: gdb's, so no probe connects
                    break
                time.sleep(0.1)
            genv["STEPCOUNT_REMOTE"] = f"127.0.0.1:{port}"
            args[1:1] = ["-iex", f"set sysroot {qemu_root}", "-iex", "set architecture aarch64"]
            args += [str(prog)]  # the same file as inside the root (bind-mounted there)
        r = subprocess.run(args, env=genv, capture_output=True, text=True, timeout=3600)
        if proc:
            proc.kill()
            proc.wait()
        if not out.exists():
            raise RuntimeError(f"gdb counted nothing:\n{r.stdout[-2000:]}{r.stderr[-2000:]}")
        return int(out.read_text())


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--build", default="build")
    ap.add_argument("--abi", default="mpich,ompi", help="comma-separated: mpich, ompi")
    ap.add_argument("--kinds", default="test,barrier")
    ap.add_argument("--n", type=int, default=4)
    ap.add_argument("--qemu", help="the arm64 root directory (tests/cluster/debroot --arch arm64 path)")
    ap.add_argument("--gdb", default=None)
    a = ap.parse_args()
    build = Path(a.build).resolve()
    root = Path(a.qemu) if a.qemu else None
    gdb = a.gdb or ("gdb-multiarch" if root else "gdb")
    for abi in a.abi.split(","):
        for kind in a.kinds.split(","):
            per = {}
            for lib in (False, True):
                c1 = count(build, abi, kind, a.n, lib, root, gdb)
                c2 = count(build, abi, kind, 2 * a.n, lib, root, gdb)
                per[lib] = (c2 - c1) / a.n
            print(f"{abi} {kind} {per[False]:.1f} {per[True]:.1f} {per[True] - per[False]:.1f}", flush=True)
    return 0


if __name__ == "__main__":
    if "gdb" in sys.modules or os.environ.get("STEPCOUNT_OUT"):
        _in_gdb()
    else:
        sys.exit(main())
