# SPDX-License-Identifier: BSD-3-Clause
"""The restore failures a node counted since boot, with the last error:
written by the node Epilog (note_epilog) and `mpi-pstate status --ack`,
read by `mpi-pstate status` (status.py); one lock between them.

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

from . import log, metrics, parse, safeio

VERSION = 1
FAILURES_FILE = "restore-failures.json"  # in runtime_dir, root's, 0600
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
    """FAILURES_FILE's object of this boot, else an empty one."""
    try:
        old = load_json(rfd, FAILURES_FILE) or {}
    except (OSError, ValueError):
        old = {}  # a file root cannot trust is replaced, not added to
    return old if old.get("boot") == boot else {}


def note_failures(runtime: str, job: int, count: int, error: Optional[str],
                  now: Optional[float] = None) -> None:
    """Adds count restore failures of job to FAILURES_FILE, with the last
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
        safeio.write_atomic(rfd, FAILURES_FILE, json.dumps(obj).encode(), mode=0o600)
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
        safeio.write_atomic(rfd, FAILURES_FILE, json.dumps(obj).encode(), mode=0o600)
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
        log.warning(f"restore failures not counted in {runtime}/{FAILURES_FILE}: {e}")



