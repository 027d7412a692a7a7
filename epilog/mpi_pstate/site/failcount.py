# SPDX-License-Identifier: BSD-3-Clause
"""The restore failures a node counted since boot, with the last error:
written by the node Epilog (note_epilog) and `mpi-pstate status --ack`,
read by `mpi-pstate status` (status.py, through read_failures()); one lock
between the writers.

    <runtime>/restore-failures.json   root's, 0600:
        {"version": 1, "boot": <boot time>, "count": N, "acked": N,
         "last": {"job": J, "time": T, "error": "..."}}

A file of an earlier boot counts as none."""
import errno
import fcntl
import json
import os
import time
from typing import Any, Dict, List, Optional

from . import metrics
from ..core import layout, log, parse, safeio

VERSION = 1
FAILURES_MAX_BYTES = 4096
ERROR_MAX = 512  # characters of the last error kept and shown
LOCK_TRIES = 50  # 20 ms each: the Epilog waits at most 1 s for another one's count

def load_json(dfd: int, name: str) -> Optional[Dict[str, Any]]:
    """A small root-owned JSON object of runtime_dir; None when missing;
    OSError/ValueError when refused or malformed."""
    try:
        raw = safeio.read_file(dfd, name, FAILURES_MAX_BYTES, owners={0})
    except FileNotFoundError:
        return None
    obj = json.loads(raw.decode("utf-8"))
    if not isinstance(obj, dict):
        raise ValueError("not a JSON object")
    return obj


def count_of(v: Any) -> Optional[int]:
    return v if isinstance(v, int) and not isinstance(v, bool) and 0 <= v < 1 << 40 else None


def read_failures(runtime: str, boot: Optional[int], problems: List[str]) -> Dict[str, Any]:
    """The restore failures since boot: layout.FAILURES_FILE's count (the node
    Epilog's, with the last error and what --ack acknowledged) or
    metrics.json's (written only where metrics_dir= is set), the larger
    where both are of this boot.  A file of an earlier boot counts 0.
    since_boot None when it cannot be told."""
    out = {"since_boot": 0, "acknowledged": 0, "source": None, "last_job": None,
           "last_time": None, "last_error": None}  # type: Dict[str, Any]
    try:
        rfd = safeio.open_dir(runtime, trusted={0})
    except FileNotFoundError:
        return out  # no job ran with mpi-pstate since boot
    except OSError as e:
        out["since_boot"] = None
        problems.append(f"runtime_dir: {_why(e)}")
        return out
    counts = []  # type: List[int]
    try:
        for name, key in ((layout.FAILURES_FILE, "count"),
                          (layout.NODE_STATE_FILE, "restore_failures")):
            try:
                obj = load_json(rfd, name)
            except (OSError, ValueError) as e:
                problems.append(f"{name}: {_why(e)}")
                out["since_boot"] = None
                return out
            if obj is None:
                continue
            n = count_of(obj.get(key))
            if n is None:
                problems.append(f"{name}: no count of restore failures in it")
                out["since_boot"] = None
                return out
            if obj.get("boot") != boot:
                continue  # counted before the last boot
            if not counts or n > counts[0]:
                out["source"] = name
            counts.append(n)
            if name == layout.FAILURES_FILE:
                out["acknowledged"] = min(n, count_of(obj.get("acked")) or 0)
                last = obj.get("last") if isinstance(obj.get("last"), dict) else {}
                out["last_job"] = count_of(last.get("job"))
                t = last.get("time")
                out["last_time"] = t if isinstance(t, (int, float)) and \
                    not isinstance(t, bool) else None
                err = last.get("error")
                out["last_error"] = parse.printable(err, ERROR_MAX) \
                    if isinstance(err, str) else None
        out["since_boot"] = max(counts) if counts else 0
        return out
    finally:
        os.close(rfd)


def _why(e: BaseException) -> str:
    return parse.printable(getattr(e, "strerror", None) or e, 200)


def epilog_error(restore: Dict[str, Any], problems: List[str]) -> Optional[str]:
    """The error worth keeping of a node Epilog's restores: its backstop's
    message when that failed, else the last agent log line about a restore
    (the record's problems: "step S agent: policy3: restore failed: ...")."""
    if restore.get("status") == "failed":
        msg = restore.get("message") or restore.get("why")
        if msg:
            return f"restore backstop failed: {msg}"
        return f"restore backstop failed (exit {restore.get('rc')})"
    for p in reversed(problems):
        if "restore" in p:
            return p
    return None


def _lock(rfd: int) -> None:
    """Two Epilogs ending at once (or one and --ack) count one after the
    other; past LOCK_TRIES (anyone may flock a directory they can open)
    the write goes on unlocked rather than hold the Epilog."""
    for _ in range(LOCK_TRIES):
        try:
            fcntl.flock(rfd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return
        except OSError as e:
            if e.errno not in (errno.EWOULDBLOCK, errno.EAGAIN):
                return
            time.sleep(0.02)


def _current(rfd: int, boot: Optional[int]) -> Dict[str, Any]:
    """layout.FAILURES_FILE's object of this boot, else an empty one."""
    try:
        old = load_json(rfd, layout.FAILURES_FILE) or {}
    except (OSError, ValueError):
        old = {}  # a file root cannot trust is replaced, not added to
    return old if old.get("boot") == boot else {}


def note_failures(runtime: str, job: int, count: int, error: Optional[str],
                  now: Optional[float] = None) -> None:
    """Adds count restore failures of job to layout.FAILURES_FILE, with the last
    error; a file of an earlier boot starts again at 0.  Raises OSError
    (runtime_dir refused or not writable)."""
    if count <= 0:
        return
    boot = metrics.boot_time()
    rfd = safeio.open_dir(runtime, trusted={0})
    try:
        _lock(rfd)
        old = _current(rfd, boot)
        obj = {"version": VERSION, "boot": boot, "count": (count_of(old.get("count")) or 0) + count,
               "acked": count_of(old.get("acked")) or 0,
               "last": {"job": job, "time": round(time.time() if now is None else now, 3),
                        "error": parse.printable(error, ERROR_MAX) if error else None}}
        safeio.write_atomic(rfd, layout.FAILURES_FILE, json.dumps(obj).encode(), mode=0o600)
    finally:
        os.close(rfd)  # releases the lock


def acknowledge(runtime: str, count: int) -> None:
    """`status --ack`: the first count failures of this boot (those the
    admin saw) are dealt with; later ones need the admin again.  Raises
    OSError."""
    boot = metrics.boot_time()
    rfd = safeio.open_dir(runtime, trusted={0})
    try:
        _lock(rfd)
        obj = _current(rfd, boot)
        n = max(count, count_of(obj.get("count")) or 0)  # metrics.json's count, or more since
        obj.update(version=VERSION, boot=boot, count=n, acked=min(count, n))
        safeio.write_atomic(rfd, layout.FAILURES_FILE, json.dumps(obj).encode(), mode=0o600)
    finally:
        os.close(rfd)


def note_epilog(runtime: str, job: int, count: int, restore: Dict[str, Any],
                problems: List[str]) -> None:
    """The node Epilog's one call once its restores are known (count as it
    gives node_metrics()): the failures counted with their last error.
    Never raises: a count not kept is logged, never the Epilog's failure."""
    try:
        note_failures(runtime, job, count, epilog_error(restore, problems))
    except (OSError, ValueError) as e:
        log.warning(f"restore failures not counted in {runtime}/{layout.FAILURES_FILE}: {e}")



