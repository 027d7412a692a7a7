# SPDX-License-Identifier: BSD-3-Clause
"""Helpers for the preload library's tests, reusable by the cluster tests
(tests/integration) for their srun-launched variants:

  build()                         make the library and the test programs
  program(name, abi)              path of a test program built for an MPI family
  launcher(abi, n, env)           mpirun/mpiexec argv prefix passing env to the ranks
  run_mpi(abi, argv, env=...)     run argv on n ranks, return CompletedProcess
  exec_argv(profile, argv, ...)   argv run through mpi-pstate-exec
  parse_counts(stdout)            the COUNTS lines the test programs print
  read_profiles(dir)              rank -> rank-<R>.json
  calls(profile)                  function -> calls of one rank's profile
  large_expected(rank, fortran)   what c_large_calls / f08_large_calls must record
  slot_module()                   mpi_pstate.core.segment (segment/slot reader of the package)

BUILD is $MPI_PSTATE_BUILD (set by tests/run) or ./build.
"""
from __future__ import annotations

import glob
import importlib
import json
import os
import re
import signal
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Dict, Iterable, List, Mapping, Optional

TOP = Path(__file__).resolve().parents[2]
BUILD = Path(os.environ.get("MPI_PSTATE_BUILD", str(TOP / "build"))).resolve()
ABIS = ("ompi", "mpich")
LAUNCHERS = {"ompi": "mpirun.openmpi", "mpich": "mpiexec.mpich"}
PROGRAMS = ("c_calls", "f77_calls", "f90_calls", "f08_calls", "mt_calls", "c_large_calls",
            "f08_large_calls")

# What f77_calls, f90_calls and f08_calls do on each of their 2 ranks:
# function -> (calls, bytes).  MPI_Gather is in place at the root: Fortran
# bindings record no size for it (their MPI_IN_PLACE is not C's).
FORTRAN_EXPECTED = {
    "MPI_Init": (1, 0), "MPI_Finalize": (1, 0), "MPI_Barrier": (3, 0),
    "MPI_Send": (1, 800), "MPI_Recv": (1, 800), "MPI_Sendrecv": (2, 80),
    "MPI_Irecv": (2, 8), "MPI_Isend": (2, 8), "MPI_Waitall": (1, 0), "MPI_Test": (1, 0),
    "MPI_Bcast": (1, 20), "MPI_Allreduce": (2, 16), "MPI_Reduce": (1, 8), "MPI_Gather": (1, 0),
}

# What c_large_calls and f08_large_calls do on each of their 2 ranks:
# function -> (calls, bytes, guarded).  Function k of the list moves k
# MPI_INTs; bytes are what the wrapper records (docs/preload.md: sent size,
# posted size for receives, none for the v/w collectives but the v ones with
# a single send count).  guarded: a buf?-term, which Fortran bindings skip and
# which the in-place root of MPI_Gather_c (rank 0) does not count.
LARGE_CALLS = {
    "MPI_Init": (1, 0, False), "MPI_Finalize": (1, 0, False), "MPI_Barrier": (3, 0, False),
    "MPI_Irecv": (1, 16, False), "MPI_Wait": (1, 0, False), "MPI_Mprobe": (1, 0, False),
    "MPI_Send_c": (2, 4 * (1 + 5), False), "MPI_Bsend_c": (1, 8, False),
    "MPI_Ssend_c": (1, 12, False), "MPI_Rsend_c": (1, 16, False),
    "MPI_Recv_c": (3, 4 * (1 + 2 + 3), False), "MPI_Mrecv_c": (1, 20, False),
    "MPI_Sendrecv_c": (1, 24, False), "MPI_Sendrecv_replace_c": (1, 28, False),
    "MPI_Bcast_c": (1, 32, False), "MPI_Gather_c": (1, 36, True), "MPI_Gatherv_c": (1, 40, True),
    "MPI_Scatter_c": (1, 44, True), "MPI_Scatterv_c": (1, 48, True),
    "MPI_Allgather_c": (1, 52, False), "MPI_Allgatherv_c": (1, 56, True),
    "MPI_Alltoall_c": (1, 60, False), "MPI_Alltoallv_c": (1, 0, False),
    "MPI_Alltoallw_c": (1, 0, False), "MPI_Reduce_c": (1, 72, False),
    "MPI_Allreduce_c": (2, 2 * 76, False), "MPI_Reduce_scatter_c": (1, 0, False),
    "MPI_Reduce_scatter_block_c": (1, 84, False), "MPI_Scan_c": (1, 88, False),
    "MPI_Exscan_c": (1, 92, False), "MPI_Neighbor_allgather_c": (1, 96, False),
    "MPI_Neighbor_allgatherv_c": (1, 100, False), "MPI_Neighbor_alltoall_c": (1, 104, False),
    "MPI_Neighbor_alltoallv_c": (1, 0, False), "MPI_Neighbor_alltoallw_c": (1, 0, False),
}


def large_expected(rank: int, fortran: bool) -> Dict[str, tuple]:
    """function -> (calls, bytes) that one rank of c_large_calls (fortran=False)
    or f08_large_calls (fortran=True) must leave in its profile."""
    out = {}
    for name, (n, nbytes, guarded) in LARGE_CALLS.items():
        if guarded and (fortran or (name == "MPI_Gather_c" and rank == 0)):
            nbytes = 0
        out[name] = (n, nbytes)
    return out


_built: Dict[str, bool] = {}


def build(build_dir: Path = BUILD) -> None:
    """make preload-tests once per process (a no-op when up to date)."""
    key = str(build_dir)
    if _built.get(key):
        return
    r = subprocess.run(["make", "-s", f"B={build_dir}", "preload-tests"], cwd=TOP,
                       capture_output=True, text=True)
    if r.returncode != 0:
        raise RuntimeError("make preload-tests failed:\n" + r.stdout + r.stderr)
    _built[key] = True


def front(build_dir: Path = BUILD) -> Path:
    return build_dir / "preload" / "libmpi-pstate.so"


def exec_path(build_dir: Path = BUILD) -> Path:
    return build_dir / "preload" / "mpi-pstate-exec"


def have_abi(abi: str, build_dir: Path = BUILD) -> bool:
    return bool(shutil.which(LAUNCHERS[abi])) and \
        (build_dir / "preload" / f"libmpi-pstate-{abi}.so").exists()


def program(name: str, abi: str, build_dir: Path = BUILD) -> Path:
    return build_dir / "tests" / "preload" / f"{name}.{abi}"


def launcher(abi: str, n: int = 2, env: Optional[Mapping[str, str]] = None) -> List[str]:
    """Launcher argv prefix; env names are forwarded to the ranks explicitly
    (Open MPI's mpirun forwards only what -x names)."""
    if abi == "ompi":
        argv = ["mpirun.openmpi", "--oversubscribe", "-n", str(n)]
        if os.geteuid() == 0:
            argv.append("--allow-run-as-root")
        for k in sorted(env or {}):
            argv += ["-x", k]
        return argv
    return ["mpiexec.mpich", "-n", str(n)]


def run_mpi(abi: str, argv: List[str], env: Optional[Mapping[str, str]] = None, n: int = 2,
            timeout: float = 120, cwd: Optional[Path] = None) -> subprocess.CompletedProcess:
    if os.environ.get("MPI_PSTATE_TEST_EMULATED"):
        # make check-arm64: every rank under qemu-user, on a shared machine (a
        # run takes at most about 20 s there); MPICH under qemu now and then
        # spins for ever, and each such run costs CI its whole timeout
        timeout *= 1.5
    full_env = dict(os.environ)
    for k in list(full_env):
        if k.startswith("MPI_PSTATE_") and k != "MPI_PSTATE_BUILD":
            del full_env[k]  # a developer's own settings must not leak into the tests
    full_env.pop("LD_PRELOAD", None)
    full_env.update(env or {})
    # Its own process group, killed whole on a timeout: killing only the
    # launcher left a spinning rank behind that hung every later run (seen
    # with MPICH under qemu-user, make check-arm64).
    cmd = launcher(abi, n, env) + [str(a) for a in argv]
    p = subprocess.Popen(cmd, env=full_env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         text=True, cwd=str(cwd) if cwd else None, start_new_session=True)
    try:
        out, err = p.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        try:
            os.killpg(p.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        out, err = p.communicate()
        raise subprocess.TimeoutExpired(cmd, timeout, output=out, stderr=err)
    return subprocess.CompletedProcess(cmd, p.returncode, out, err)


def exec_argv(profile: Optional[Path], argv: Iterable, *options: str) -> List[str]:
    out = [str(exec_path())]
    if profile is not None:
        out += ["--profile", str(profile)]
    return out + list(options) + ["--"] + [str(a) for a in argv]


COUNTS_RE = re.compile(r"^COUNTS (\d+) (\{.*\})$", re.M)


def parse_counts(stdout: str) -> Dict[int, Dict[str, int]]:
    return {int(m.group(1)): json.loads(m.group(2)) for m in COUNTS_RE.finditer(stdout)}


def read_profiles(directory: Path) -> Dict[int, dict]:
    out = {}
    for p in glob.glob(os.path.join(str(directory), "rank-*.json")):
        with open(p, encoding="utf-8") as f:
            r = json.load(f)
        out[r["rank"]] = r
    return out


def calls(profile: dict) -> Dict[str, int]:
    return {f["name"]: f["calls"] for f in profile["functions"]}


def calls_bytes(profile: dict) -> Dict[str, tuple]:
    return {f["name"]: (f["calls"], f["bytes"]) for f in profile["functions"]}


def slot_module():
    if str(TOP / "epilog") not in sys.path:
        sys.path.insert(0, str(TOP / "epilog"))
    return importlib.import_module("mpi_pstate.core.segment")
