# SPDX-License-Identifier: BSD-3-Clause
"""How a node reaches collect_dir, the share the controller reads: never as
root, never past a deadline, never by creating it.

- As SlurmUser.  collect_dir is SlurmUser's (the EpilogSlurmctld writes its
  queue there); on NFS with root squashing, root is nobody there, so a
  root write would fail or land as nobody.  Each write runs in a child that
  drops to SlurmUser's uid and gid with no supplementary group, so the
  records, the job directories and their PrivateData ACLs are SlurmUser's
  on every kind of mount.  It also keeps the node Epilog's root out of a
  directory tree other machines write.
- Within a deadline.  A hard NFS mount whose server is gone blocks every
  access, in the kernel, for as long as it is gone; an Epilog blocked past
  PrologEpilogTimeout drains the node.  The child does the access; the
  Epilog waits for its answer at most `publish_timeout` (and at most a
  quarter of PrologEpilogTimeout), then gives up on it (SIGKILL, not
  waited for: a process in an uninterruptible wait dies when the mount
  answers) and keeps the record in the node's pending directory
  (pending.py) for a later pass.  Once one access of a pass timed out or
  found the share unusable, the pass does not try again: one deadline
  per Epilog, not one per record.
- Never creating collect_dir.  A collect_dir that is missing is a share not
  mounted (yet): a directory made on the node's own disk would take every
  record where the controller never looks.  One that is root's is most
  likely the mount point of a share that is not mounted: SlurmUser cannot
  write it, which is what we want.

The child holds no descriptor it inherited but its answer pipe (0-2 are
/dev/null): slurmd reads an Epilog's output until end of file, and a child
left blocked in a mount with such a pipe open would keep the job
COMPLETING, and the node busy, until the mount answers."""
import errno
import os
import pwd
import select
import signal
import time
from typing import Callable, List, Optional, Tuple

PUBLISH_TIMEOUT_S = 10.0  # publish_timeout= default (docs/admin.md)
_ANSWER_MAX = 4096


class ShareUnusable(OSError):
    """collect_dir could not be written in this pass (missing, refused,
    full, hung): the record waits in pending."""


def account(slurm_uid: int) -> Tuple[int, int]:
    """SlurmUser's uid and primary gid (root's when SlurmUser is root)."""
    if slurm_uid == 0:
        return 0, 0
    return slurm_uid, pwd.getpwuid(slurm_uid).pw_gid


def deadline(publish_timeout_s: float, epilog_timeout_s: Optional[float]) -> float:
    """The time one pass gives the share: the site's publish_timeout, at
    most a quarter of the Epilog's timeout (it has more to do)."""
    t = publish_timeout_s
    if epilog_timeout_s and epilog_timeout_s > 0:
        t = min(t, epilog_timeout_s / 4.0)
    return max(t, 0.1)


Work = Callable[[], Optional[List[str]]]  # returns warnings for the Epilog's log


def _max_fd() -> int:
    try:
        return max(int(os.sysconf("SC_OPEN_MAX")), 4)
    except (ValueError, OSError):
        return 65536


def _child(uid: int, gid: int, work: Work, w: int) -> None:
    """In the child: no output of ours reaches slurmd, SlurmUser's ids, the
    work, one answer ("0 <warnings, US-separated>" or "<errno> <text>") on
    the pipe."""
    answer = b"0 "
    try:
        null = os.open(os.devnull, os.O_RDWR)
        for fd in (0, 1, 2):
            os.dup2(null, fd)
        # Nothing else inherited either: a shell's process substitution
        # (2> >(logger)) leaves its pipe open as fd 63, and whoever reads
        # it, slurmd included, would wait for this child
        os.dup2(w, 3)
        w = 3
        os.closerange(4, _max_fd())
        if os.getuid() == 0 and uid != 0:
            os.setgroups([])
            os.setresgid(gid, gid, gid)
            os.setresuid(uid, uid, uid)
        os.umask(0o022)
        warnings = work() or []
        answer = ("0 " + "\x1f".join(warnings)).encode("utf-8", "replace")
    except OSError as e:
        text = e.strerror or str(e)
        answer = f"{e.errno or errno.EIO} {text}".encode("utf-8", "replace")
    except BaseException as e:  # noqa: B902: every failure is an answer
        answer = f"{errno.EIO} {type(e).__name__}: {e}".encode("utf-8", "replace")
    try:
        os.write(w, answer[:_ANSWER_MAX])
    finally:
        os._exit(0)


def run_as(uid: int, gid: int, work: Work, timeout_s: float, where: str) -> List[str]:
    """Runs work() in a child as uid/gid; returns its warnings when it
    succeeded, raises ShareUnusable with its error, or with ETIMEDOUT when
    it gave no answer in timeout_s (the child is then killed and left)."""
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(r)
        _child(uid, gid, work, w)
    os.close(w)
    got = b""
    eof = False
    end = time.monotonic() + timeout_s
    try:
        while not eof:
            left = end - time.monotonic()
            if left <= 0:
                break
            ready, _, _ = select.select([r], [], [], left)
            if not ready:
                continue
            chunk = os.read(r, _ANSWER_MAX)
            eof = not chunk
            got += chunk
    finally:
        os.close(r)
    if not eof:
        try:
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, os.WNOHANG)
        except OSError:
            pass
        raise ShareUnusable(errno.ETIMEDOUT,
                            f"{where}: no answer in {timeout_s:g} s (a hung mount?)")
    os.waitpid(pid, 0)
    code, _, text = got.decode("utf-8", "replace").partition(" ")
    if not code.isdigit():
        raise ShareUnusable(errno.EIO, f"{where}: the writer died without an answer")
    if code != "0":
        raise ShareUnusable(int(code), f"{where}: {text}")
    return [t for t in text.split("\x1f") if t]


class Share:
    """collect_dir for one pass of the node Epilog or node-prune: every
    access through run_as(), all of them within one budget that starts at
    the first, and none after the first that failed."""

    def __init__(self, collect_dir: str, slurm_uid: int, timeout_s: float) -> None:
        self.collect_dir = collect_dir
        self.uid, self.gid = account(slurm_uid)
        self.timeout_s = timeout_s
        self.end = None  # type: Optional[float]
        self.failed = None  # type: Optional[ShareUnusable]

    def write(self, work: Work) -> List[str]:
        if self.failed is not None:
            raise self.failed
        if self.end is None:
            self.end = time.monotonic() + self.timeout_s
        left = self.end - time.monotonic()
        try:
            if left <= 0:
                raise ShareUnusable(errno.ETIMEDOUT, f"{self.collect_dir}: this pass's "
                                    f"{self.timeout_s:g} s for the share are spent")
            return run_as(self.uid, self.gid, work, left, self.collect_dir)
        except ShareUnusable as e:
            self.failed = e
            raise
