# SPDX-License-Identifier: BSD-3-Clause
"""One message, two places admins look: syslog (tag with the job id, as
jobstats does) and stderr, which slurmd/slurmctld copy into their logs.
Every message starts with "mpi-pstate: "."""
import sys
import syslog
from typing import Callable, List, Optional, TextIO, TypeVar

T = TypeVar("T")

_state = {"tag": "mpi-pstate", "open": False, "quiet": False}
_stream: List[TextIO] = [sys.stderr]


def setup(tag: str, quiet: bool = False, stream: Optional[TextIO] = None) -> None:
    """tag, e.g. "mpi-pstate-epilog[4242]"; quiet: syslog only."""
    _state["tag"] = tag
    _state["quiet"] = quiet
    if stream is not None:
        _stream[0] = stream
    try:
        syslog.openlog(tag, syslog.LOG_PID, syslog.LOG_DAEMON)
        _state["open"] = True
    except OSError:
        _state["open"] = False


def setup_job(tag: str, what: str, quiet: bool, read: Callable[[], T],
              job_of: Callable[[T], int]) -> Optional[T]:
    """Reads the job from Slurm's environment, then tags every message with
    its id; on a bad environment says so under the bare tag and gives None
    (the epilogs then do nothing and exit 0: never a drained node)."""
    try:
        env = read()
    except ValueError as e:
        setup(tag)
        error(f"{what}: bad Slurm environment ({e}); nothing done")
        return None
    setup(f"{tag}[{job_of(env)}]", quiet=quiet)
    return env


def _emit(prio: int, word: str, msg: str) -> None:
    text = msg if msg.startswith("mpi-pstate") else "mpi-pstate: " + msg
    # One line each: record contents never reach a log unescaped.
    text = text.replace("\n", "\\n")[:2000]
    if _state["open"]:
        try:
            syslog.syslog(prio, text)
        except OSError:
            pass
    if not _state["quiet"]:
        try:
            print(f"{_state['tag']}: {word}{text}", file=_stream[0], flush=True)
        except (OSError, ValueError):
            pass


def info(msg: str) -> None:
    _emit(syslog.LOG_INFO, "", msg)


def warning(msg: str) -> None:
    _emit(syslog.LOG_WARNING, "warning: ", msg)


def error(msg: str) -> None:
    _emit(syslog.LOG_ERR, "error: ", msg)
