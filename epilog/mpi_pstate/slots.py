"""Per-rank figures of a job on this node, from the shared-memory segments
the ranks wrote (layout: common/slot.h, read with preload's
mpi_pstate_slot.py, which this module imports rather than copies).

Everything in a segment was written by the job's user: the file is taken
only if it is a regular file (no symlink), owned by the job's user or root,
within the size bound; each slot is validated by the preload reader, and a
slot that fails is reported by index, never fatal."""
from __future__ import annotations

import os
import re
import stat
import sys
from typing import Any, Optional

from . import safeio

try:
    import mpi_pstate_slot as slotlib
except ImportError:  # in the source tree the reader sits in preload/
    sys.path.append(os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(
        os.path.abspath(__file__)))), "preload"))
    import mpi_pstate_slot as slotlib

SHM_DIR = "/dev/shm"
# Segment of job J, step S: /dev/shm/mpi-pstate.J.S (S: Slurm's step id or
# batch/extern).  Agreed with the plugin/agent (docs/records.md).
# The plugin's names end in 16 random hex digits (spank/paths.h); bare names are
# earlier releases' and mpi-pstate-agent --create's.
SEG_RE = re.compile(r"mpi-pstate\.([0-9]{1,10})\.([0-9]{1,10}|batch|extern|interactive)"
                    r"(?:\.[0-9a-f]{16})?")
MAX_SEGMENTS = 64  # steps per job and node we read; more are reported
MAX_SEG_SLOTS = 4096  # slots per segment we read (a node with 4096 ranks)
# Life-cycle calls frame the application (kind init/finalize/abort in
# preload/mpi_functions.def): not "time in MPI".
FRAME_FUNCS = frozenset({"MPI_Init", "MPI_Init_thread", "MPI_Finalize", "MPI_Abort"})
TOP_FUNCS = 3
NS_MAX = 10 * 365 * 86400 * 10**9  # a figure above ten years is garbage


def _s(ns: Optional[int]) -> Optional[float]:
    return None if ns is None else round(ns / 1e9, 6)


def _ns(v: int) -> Optional[int]:
    return v if 0 <= v <= NS_MAX else None


def rank_figures(s: dict[str, Any], step: str) -> dict[str, Any]:
    """The node-record entry of one validated slot (docs/records.md)."""
    tps = s["ticks_per_sec"]
    wall = None
    if tps and s["app_end_ticks"] > s["app_start_ticks"] > 0:
        wall = _ns((s["app_end_ticks"] - s["app_start_ticks"]) * 10**9 // tps)
    mpi = calls = nbytes = 0
    top = []
    for name, f in s["functions"].items():
        if not re.fullmatch(r"[A-Za-z][A-Za-z0-9_]{0,31}", name):
            continue
        calls += f["calls"]
        nbytes += f["bytes"]
        if name not in FRAME_FUNCS:
            mpi += f["time_ns"]
            if f["calls"]:
                top.append((f["time_ns"], name, f["calls"]))
    top.sort(reverse=True)
    state = s["state"]
    if state in ("attached", "running"):
        state = "killed"  # the job is over: this rank never reached finalize or exit
    mpi_ns = _ns(mpi)
    r = {
        "step": step, "rank": s["rank"], "size": s["size"], "local": s["local_index"],
        "cpu": s["cpu"], "state": state, "mode": s["mode"], "abi": s["abi"],
        "threshold_us": s["threshold_ns"] // 1000 if _ns(s["threshold_ns"]) else None,
        "wall_s": _s(wall), "mpi_s": _s(mpi_ns),
        "mpi_share": round(mpi_ns / wall, 4) if wall and mpi_ns is not None else None,
        "wait_s": _s(_ns(s["long_ns"])), "long_calls": s["long_calls"],
        "over_s": _s(_ns(s["over_ns"])),
        "down_s": _s(_ns(s["down_ns"])), "transitions": s["transitions"],
        "calls": calls, "bytes": nbytes, "wakeups": s["wakeups"],
        "top": [[n, _s(_ns(t)), c] for t, n, c in top[:TOP_FUNCS]],
    }
    if wall is None:
        r["note"] = "no end time (rank killed or never initialised)"
    return r


def read_segment(dirfd: int, name: str, owners: set[int],
                 max_slots: int = MAX_SEG_SLOTS) -> tuple[dict[str, int], list[Any]]:
    """Header and slots (dicts, None for free, SlotError for a bad slot)."""
    limit = slotlib.HEADER_SIZE + max_slots * slotlib.SLOT_SIZE
    buf = safeio.read_file(dirfd, name, limit, owners=owners, strict_mode=False)
    hdr = slotlib.parse_header(buf)
    if len(buf) != slotlib.HEADER_SIZE + hdr["nslots"] * slotlib.SLOT_SIZE:
        raise slotlib.SlotError(f"size {len(buf)} does not match {hdr['nslots']} slots")
    out: list[Any] = []
    for i in range(hdr["nslots"]):
        try:
            out.append(slotlib.parse_slot(buf, slotlib.HEADER_SIZE + i * slotlib.SLOT_SIZE))
        except slotlib.SlotError as e:
            out.append(e)
    return hdr, out


def job_segments(job_id: int, owner_uid: int, shm_dir: str = SHM_DIR
                 ) -> tuple[list[dict[str, Any]], list[str], list[str]]:
    """(steps, problems, names): per step {"step", "segment", "slots",
    "ranks"}; problems are one-line reasons; names are the files read."""
    steps: list[dict[str, Any]] = []
    problems: list[str] = []
    names: list[str] = []
    try:
        dfd = safeio.open_dir(shm_dir, trusted={0}, shared=True)
    except OSError as e:
        return steps, [f"{shm_dir}: {e.strerror}"], names
    try:
        cands = []
        for n in os.listdir(dfd):
            m = SEG_RE.fullmatch(n)
            if m and int(m.group(1)) == job_id:
                cands.append((m.group(2), n))
        cands.sort(key=lambda c: (not c[0].isdigit(), int(c[0]) if c[0].isdigit() else 0, c[0]))
        if len(cands) > MAX_SEGMENTS:
            problems.append(f"{len(cands)} segments, only the first {MAX_SEGMENTS} read")
            cands = cands[:MAX_SEGMENTS]
        for step, n in cands:
            names.append(n)
            try:
                hdr, slots = read_segment(dfd, n, {owner_uid, 0})
            except (OSError, slotlib.SlotError) as e:
                problems.append(f"segment {n}: {e.strerror if isinstance(e, OSError) else e}")
                continue
            ranks = []
            for i, s in enumerate(slots):
                if isinstance(s, Exception):
                    problems.append(f"segment {n} slot {i}: {s}")
                elif s is not None:
                    try:
                        ranks.append(rank_figures(s, step))
                    except (KeyError, TypeError, ValueError, ZeroDivisionError) as e:
                        problems.append(f"segment {n} slot {i}: {type(e).__name__}")
            steps.append({"step": step, "segment": n, "slots": hdr["nslots"], "ranks": ranks})
    finally:
        os.close(dfd)
    return steps, problems, names


def remove_segments(job_id: int, names: list[str], shm_dir: str = SHM_DIR) -> int:
    """Unlinks the job's segments once read (unlink never follows a symlink;
    only names of this job's pattern are touched)."""
    n = 0
    try:
        dfd = safeio.open_dir(shm_dir, trusted={0}, shared=True)
    except OSError:
        return 0
    try:
        for name in names:
            m = SEG_RE.fullmatch(name)
            st = safeio.entry_stat(dfd, name)
            if not m or int(m.group(1)) != job_id or st is None or \
                    not (stat.S_ISREG(st.st_mode) or stat.S_ISLNK(st.st_mode)):
                continue
            try:
                os.unlink(name, dir_fd=dfd)
                n += 1
            except OSError:
                pass
    finally:
        os.close(dfd)
    return n
