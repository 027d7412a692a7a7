# SPDX-License-Identifier: BSD-3-Clause
"""The Slurm commands mpi-pstate runs: argument lists only (never a shell),
absolute paths, bounded time, and output parsed strictly."""
import os
import shutil
import subprocess
from typing import Dict, List, NamedTuple, Optional, Sequence, Tuple

from . import parse

SAFE_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
TERMINAL = {"COMPLETED", "FAILED", "CANCELLED", "TIMEOUT", "NODE_FAIL", "OUT_OF_MEMORY",
            "PREEMPTED", "BOOT_FAIL", "DEADLINE", "REVOKED"}


class SlurmError(RuntimeError):
    pass


def search_path() -> str:
    """PATH's absolute directories, then the system's.  An empty or relative
    component is the working directory (PATH unset, as in Slurm's Epilogs,
    gave ":/usr/local/sbin..."), where a root command must never look: any
    user may have left an `scontrol` there."""
    dirs = [d for d in os.environ.get("PATH", "").split(os.pathsep) if d.startswith("/")]
    return os.pathsep.join(dirs + SAFE_PATH.split(os.pathsep))


def which(cmd: str) -> str:
    p = shutil.which(cmd, path=search_path())
    if not p:
        raise SlurmError(f"{cmd} not found")
    return p


def run(argv: Sequence[str], timeout: float = 30, stdin: Optional[str] = None
        ) -> "subprocess.CompletedProcess[str]":
    try:
        # Python 3.6: no capture_output= or text= (docs/security.md, "Python 3.6")
        return subprocess.run(list(argv), input=stdin, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, universal_newlines=True,
                              timeout=timeout, errors="replace")
    except subprocess.TimeoutExpired:
        raise SlurmError(f"{os.path.basename(argv[0])}: no answer within {timeout:g} s") \
            from None
    except OSError as e:
        raise SlurmError(f"{os.path.basename(argv[0])}: {e.strerror or e}") from None


class SacctJob(NamedTuple):
    raw: str  # JobIDRaw
    job_id: str  # JobID as printed (4242, 4242_3)
    state: str  # first word: CANCELLED, not "CANCELLED by 0"
    exit_code: str
    elapsed: str
    nodes: str
    admin_comment: str
    system_comment: str = ""  # where mpi-pstate's summary lives (docs/records.md)
    uid: Optional[int] = None
    start: str = ""  # sacct's Start and End; "" when the caller did not ask
    end: str = ""
    submit: str = ""  # sacct's Submit: which of a job id's rows is the newest
    partition: str = ""  # the job's partition(s), comma-separated while pending
    user: str = ""  # the job's user and account, for the metrics' labels
    account: str = ""

    def wall_s(self) -> Optional[float]:
        """The job's wall time, End - Start; None while slurmdbd has no End
        (sacct's Elapsed then counts to now: 65 s for a 3 s job summarised
        a minute after a slurmdbd outage).  A row without the
        fields (a caller that did not ask for them): Elapsed."""
        if not self.start and not self.end:
            return parse.elapsed(self.elapsed)
        a, b = epoch(self.start), epoch(self.end)
        return b - a if a is not None and b is not None and b >= a else None

    def start_epoch(self) -> Optional[float]:
        return epoch(self.start)


def epoch(text: str) -> Optional[float]:
    """sacct's local time stamp (2026-11-27T02:45:12) as Unix time; None
    for Unknown, None and anything else."""
    import time
    try:
        return time.mktime(time.strptime(text.strip(), "%Y-%m-%dT%H:%M:%S"))
    except (ValueError, OverflowError):
        return None


SACCT_FIELDS = ("JobIDRaw", "JobID", "State", "ExitCode", "Elapsed", "NodeList", "UID", "Start",
                "End", "Submit", "Partition", "User", "Account", "SystemComment", "AdminComment")
# The two comments are free text (an admin's, a burst buffer plugin's,
# jobstats'): '|' is common there, the ASCII unit separator is not.
SACCT_DELIM = "\x1f"


def _state(word: str) -> str:
    """A State field's first word: CANCELLED, not "CANCELLED by 0"."""
    return (word.split() or [""])[0]


def parse_sacct(text: str) -> List[SacctJob]:
    """sacct -P --delimiter SACCT_DELIM -o SACCT_FIELDS output.  AdminComment
    comes last, so a delimiter inside it stays in it; a line that does not
    have every field is skipped."""
    out = []
    for line in text.splitlines():
        f = line.split(SACCT_DELIM, len(SACCT_FIELDS) - 1)
        if len(f) != len(SACCT_FIELDS) or not f[0]:
            continue
        out.append(_job_row(f))
    return out


def _job_row(f: Sequence[str]) -> SacctJob:
    """A SacctJob of the SACCT_FIELDS, in order."""
    return SacctJob(f[0], f[1], _state(f[2]), f[3], f[4], f[5],
                    admin_comment=f[14], system_comment=f[13],
                    uid=int(f[6]) if f[6].isdigit() and len(f[6]) < 11 else None,
                    start=f[7], end=f[8], submit=f[9], partition=f[10], user=f[11],
                    account=f[12])


def failed(cmd: str, stderr: str, limit: int = 300) -> str:
    """One line of what a Slurm command said when it failed: its own name
    and "error:" dropped where it starts with them (sacct says "sacct:
    error: ..."; the caller names the command once), lines joined."""
    lines = []
    for ln in stderr.strip().splitlines():
        ln = ln.strip()
        for pre in (cmd + ":", "error:", "fatal:"):
            if ln.lower().startswith(pre):
                ln = ln[len(pre):].strip()
        if ln:
            lines.append(ln)
    text = "; ".join(lines) or "failed without a message"
    return f"{cmd}: " + (text if len(text) <= limit else text[:limit - 3] + "...")


def newest(rows: Sequence[SacctJob]) -> Dict[str, SacctJob]:
    """Each job id's newest row, by submit time.  An id has several rows
    when the job was requeued, and also when Slurm gave the id again (its
    controller state lost, or MaxJobId wrapped): sacct --duplicates lists
    those in the database's order, not by age, so the last row can be an
    older job of another user.  Rows without a submit time count as
    oldest; between equals the later row wins."""
    best: Dict[str, Tuple[float, SacctJob]] = {}
    for r in rows:
        t = epoch(r.submit)
        key = float("-inf") if t is None else t
        if r.raw not in best or key >= best[r.raw][0]:
            best[r.raw] = (key, r)
    return {raw: r for raw, (_, r) in best.items()}


def sacct_jobs(specs: Sequence[str], timeout: float = 60) -> List[SacctJob]:
    """Allocation lines (-X) of the given job specs (4242, 4242_3, 4242_[1-2])."""
    r = run([which("sacct"), "-n", "-X", "-P", "--delimiter", SACCT_DELIM, "--duplicates", "-j",
             ",".join(specs), "-o", ",".join(SACCT_FIELDS)], timeout=timeout)
    if r.returncode != 0:
        raise SlurmError(failed("sacct", r.stderr))
    return parse_sacct(r.stdout)


def sacct_one(job: int, timeout: float = 30) -> Optional[SacctJob]:
    """The newest database row of a job id (a requeued job has several)."""
    return newest(sacct_jobs([str(job)], timeout)).get(str(job))


def hostnames(nodelist: str) -> List[str]:
    """scontrol show hostnames, for hostlists our own parser refuses."""
    r = run([which("scontrol"), "show", "hostnames", nodelist], timeout=30)
    if r.returncode != 0:
        raise SlurmError(failed("scontrol show hostnames", r.stderr, 200))
    return [n for n in r.stdout.split() if n]


class DbTool:
    """epilog/mpi-pstate-dbcomment (libslurm), on the job's SystemComment
    (--system): mpi-pstate's summary lives there, AdminComment is left to
    admins and jobstats (docs/records.md)."""

    def __init__(self, path: str) -> None:
        self.path = path

    def show(self, job: int, timeout: float = 30) -> Optional[Tuple[str, str, str]]:
        """(base state, exit code, SystemComment) from slurmctld, or None when
        slurmctld no longer knows the job."""
        r = run([self.path, "--system", "--show", str(job)], timeout=timeout)
        if r.returncode == 4:
            return None
        if r.returncode != 0:
            raise SlurmError(f"{self.path} --show: {r.stderr.strip()[:300]}")
        head, _, comment = r.stdout.partition("\n")
        words = head.split()
        if len(words) != 2:
            raise SlurmError(f"{self.path} --show: unexpected output {head[:80]!r}")
        return words[0], words[1], comment

    def set(self, job: int, text: str, cluster: Optional[str] = None,
            timeout: float = 60, array: Optional[str] = None) -> int:
        """0 written; 3 job not in the database (yet); raises on other errors.
        array ("J_T") names an array task: slurmdbd takes a bare id that is
        also an array's id for the whole array, which would overwrite the
        summaries of the task's siblings."""
        argv = [self.path, "--system"] + (["--cluster", cluster] if cluster else []) + \
            ["--set", array or str(job)]
        r = run(argv, timeout=timeout, stdin=text)
        if r.returncode in (0, 3):
            return r.returncode
        raise SlurmError(f"{self.path} --set: {r.stderr.strip()[:300]}")


TOTALS_FIELDS = ("JobIDRaw", "User", "Account", "Partition", "State", "SystemComment")


def _sacct_selected(fields: Sequence[str], user: Optional[str], account: Optional[str],
                    partition: Optional[str], since: Optional[str], timeout: float,
                    until: Optional[str] = None, states: Sequence[str] = ()
                    ) -> List[List[str]]:
    """The allocation rows (fields, in order) of the jobs that match: of
    `user` or of everyone (as far as PrivateData lets the caller see), of an
    account and a partition, that ran between `since` (default 30 days ago)
    and `until` (default now), in one of `states` (sacct -s) when given.
    The last field may hold the delimiter."""
    argv = [which("sacct"), "-n", "-X", "-P", "--delimiter", SACCT_DELIM, "-o", ",".join(fields),
            "-S", since or "now-30days", "-E", until or "now"]
    argv += ["-u", user] if user else ["-a"]
    if account:
        argv += ["-A", account]
    if partition:
        argv += ["-r", partition]
    if states:
        argv += ["-s", ",".join(states)]
    r = run(argv, timeout=timeout)
    if r.returncode != 0:
        raise SlurmError(failed("sacct", r.stderr))
    rows = [line.split(SACCT_DELIM, len(fields) - 1) for line in r.stdout.splitlines()]
    return [f for f in rows if len(f) == len(fields) and f[0].isdigit()]


def sacct_totals(user: Optional[str] = None, account: Optional[str] = None,
                 partition: Optional[str] = None, since: Optional[str] = None,
                 timeout: float = 120, until: Optional[str] = None,
                 state: Sequence[str] = ()) -> List[Tuple[str, str, str, str, str, str]]:
    """(raw id, user, account, partition, state, SystemComment) of every
    finished job that matches (report --totals), one row a job."""
    out: Dict[str, Tuple[str, str, str, str, str, str]] = {}
    for f in _sacct_selected(TOTALS_FIELDS, user, account, partition, since, timeout, until,
                             state):
        if _state(f[4]) in TERMINAL:
            out[f[0]] = (f[0], f[1], f[2], f[3], _state(f[4]), f[5])
    return list(out.values())


def sacct_select(user: Optional[str] = None, account: Optional[str] = None,
                 partition: Optional[str] = None, since: Optional[str] = None,
                 limit: int = 5000, timeout: float = 120, until: Optional[str] = None,
                 state: Sequence[str] = ()) -> List[str]:
    """Raw ids of the finished jobs that match (report --what-if over many
    jobs), oldest first, at most `limit` (the newest are kept)."""
    ids = [f[0] for f in _sacct_selected(("JobIDRaw", "State"), user, account, partition, since,
                                         timeout, until, state) if _state(f[1]) in TERMINAL]
    return list(dict.fromkeys(ids))[-limit:]


def sacct_list(user: Optional[str] = None, account: Optional[str] = None,
               partition: Optional[str] = None, since: Optional[str] = None,
               until: Optional[str] = None, state: Sequence[str] = (), limit: int = 5000,
               timeout: float = 120) -> List[SacctJob]:
    """The allocation rows of every job that matches, whatever its state
    unless `state` names some (report's list mode, as sacct lists them),
    each id's newest row, oldest first, at most `limit` (the newest)."""
    rows = [_job_row(f) for f in _sacct_selected(SACCT_FIELDS, user, account, partition, since,
                                                 timeout, until, state)]
    last = newest(rows)
    return sorted(last.values(), key=lambda r: int(r.raw))[-limit:]
