# SPDX-License-Identifier: BSD-3-Clause
"""The merge behind `mpi-pstate flush` (spool.py, which also holds the
EpilogSlurmctld that queues the job) and `mpi-pstate backfill`: merge the nodes' records, keep the per-rank detail
beside them (job.json) and write the bounded summary into the job's
SystemComment, keeping whatever else the SystemComment holds.  AdminComment
is never touched: jobstats and admins own it (docs/records.md, "Where the
summary lives").

The EpilogSlurmctld (SlurmUser, once per job, on the controller, while
the job is COMPLETING) only queues the job and starts a flusher: it never
waits for a node or for slurmdbd, so a late node or a slurmdbd that is
down never holds the job in COMPLETING.  The flusher
(spool.process) takes a queued job once
 1. every node's record is there, or WAIT_RECORDS_S are over;
 2. slurmdbd has the job's end (sacct shows a final state): slurmctld's own
    job-complete message rewrites system_comment when the job has one, so
    ours must come after it; slurmctld's view (mpi-pstate-dbcomment
    --system --show) gives the newest SystemComment while it knows the job;
 3. then finish() writes through libslurm (quotes intact) and reads back.
Whatever is left undone stays queued; backfill repairs idempotently."""
import os
import time
from typing import Any, Callable, Dict, List, Optional, Set, Tuple

from . import metrics
from ..core import collect, layout, log, noderecord, parse, safeio, siteconf, slurm
from ..model import summary


class Deadline:
    def __init__(self, seconds: float) -> None:
        self.end = time.monotonic() + seconds

    def left(self) -> float:
        return max(0.0, self.end - time.monotonic())


def expected_nodes(nodelist: str) -> List[str]:
    if not nodelist or nodelist in ("None", "(null)") or nodelist.startswith("None "):
        return []
    try:
        return parse.expand_hostlist(nodelist)
    except ValueError:
        return slurm.hostnames(nodelist)


Accept = Callable[[Dict[str, Any]], Optional[str]]
# A node record written this long before its job ended (was queued) is a
# previous job's of the same id (job ids wrap at MaxJobId): never merged.
STALE_MARGIN_S = 3600.0


def accept_for(uid: Optional[int], not_before: Optional[float]) -> Accept:
    """The check every merge applies to a node record (the flusher, backfill,
    report): the job's user, and written no earlier than not_before (the
    job's start, or its end less STALE_MARGIN_S)."""
    def check(rec: Dict[str, Any]) -> Optional[str]:
        if uid is not None and rec.get("uid") is not None and rec["uid"] != uid:
            return f"record of uid {rec['uid']}, the job's is {uid}"
        w = rec.get("written")
        if not_before is not None and isinstance(w, (int, float)) and w < not_before:
            return "written before the job ran (a previous job of the same id)"
        return None
    return check


def accept_row(row: "slurm.SacctJob") -> Accept:
    """accept_for() of a job as sacct shows it (backfill, report).  Its UID
    0 proves nothing: slurmdbd shows a job that has just ended as root's
    for a second or two (seen on 22.05: UID 0, then the user's, on the same
    row), and a root job's records say uid 0 anyway; a record of an earlier
    job of the same id is still refused by its time."""
    start = row.start_epoch()
    return accept_for(row.uid or None, None if start is None else start - 60.0)


def load_records(cfg: siteconf.Config, job: int, nodes: List[str], trusted: Set[int],
                 accept: Optional[Accept] = None
                 ) -> Tuple[Dict[str, Dict[str, Any]], Dict[str, str], bool]:
    """(records, bad, dir_exists).  accept(record): why a record is not this
    job's (a previous job of the same id), or None; such a record is left
    out, as if absent."""
    cfd = collect.open_collect(cfg.collect_dir, trusted)
    try:
        jfd = collect.open_job_dir(cfd, job, trusted)
        if jfd is None:
            return {}, {}, False
        try:
            recs, bad = collect.read_node_records(jfd, job, nodes, trusted)
            for n in sorted(recs):
                why = accept(recs[n]) if accept else None
                if why:
                    log.warning(f"job {job}: node record of {n} left out: {why}")
                    del recs[n]
            return recs, bad, True
        finally:
            os.close(jfd)
    finally:
        os.close(cfd)


def write_detail(cfg: siteconf.Config, job: int, detail: Dict[str, Any], trusted: Set[int]) -> None:
    cfd = collect.open_collect(cfg.collect_dir, trusted)
    try:
        jfd = collect.open_job_dir(cfd, job, trusted, create=True, private=cfg.private_jobs)
        assert jfd is not None
        try:
            safeio.write_atomic(jfd, layout.JOB_FILE, noderecord.encode(detail), mode=0o644)
        finally:
            os.close(jfd)
    finally:
        os.close(cfd)


def drop_job_dir(cfg: siteconf.Config, job: int, trusted: Set[int]) -> None:
    cfd = collect.open_collect(cfg.collect_dir, trusted)
    try:
        collect.remove_job_dir(cfd, job)
    finally:
        os.close(cfd)


def write_comment(db: slurm.DbTool, job: int, text: str, ours: str, dl: Deadline,
                  cluster: Optional[str], array: Optional[str] = None) -> str:
    """Writes and reads back until the summary is in slurmdbd; returns
    "written", "not in database" or "not confirmed"."""
    pause = 0.3
    result = "not in database"
    while True:
        try:
            rc = db.set(job, text, cluster, array=array)
            if rc == 0:
                row = slurm.sacct_one(job)
                if row and ours in row.system_comment:
                    return "written"
                result = "not confirmed"
        except slurm.SlurmError as e:
            log.warning(str(e))
            result = "error"
        if dl.left() <= 0:
            return result
        time.sleep(min(pause, dl.left()))
        pause = min(pause * 2, 3.0)


def finish(cfg: siteconf.Config, db: slurm.DbTool, job: int, nodes: List[str],
           trusted: Set[int], dl: Deadline, job_state: Optional[str], exit_code: Optional[str],
           current: Optional[str], array: Optional[str], dry_run: bool = False,
           cluster: Optional[str] = None, wall_s: Optional[float] = None,
           accept: Optional[Accept] = None, labels: Optional[Dict[str, str]] = None) -> str:
    """Merge, keep the detail, write the summary.  current: the job's
    SystemComment as it is now (None: read it from sacct); wall_s: the
    job's wall time (slurm.SacctJob.wall_s(): End - Start); labels: the
    job's user, account and partition, for its metrics (metrics_dir=).
    Returns what happened (one word for logs and backfill's tally)."""
    records, bad, exists = load_records(cfg, job, nodes, trusted, accept)
    for n, why in sorted(bad.items()):
        log.warning(f"node record of {n} refused: {why}")
    if not exists:
        return "no records"
    with_data = [r for r in records.values() if r["status"] == "ok"]
    missing = [n for n in nodes if n not in records]
    if not with_data:
        if not missing and not bad:
            if not dry_run:
                drop_job_dir(cfg, job, trusted)
            return "without mpi-pstate"
        return "no data yet"  # a node that has not reported may hold it: backfill later
    row = None
    if current is None or wall_s is None:
        row = slurm.sacct_one(job)
    if wall_s is None and row is not None and row.state in slurm.TERMINAL:
        wall_s = row.wall_s()
    detail = summary.merge(job, nodes, records, bad, job_state, exit_code, array, wall_s)
    ours = summary.encode(detail["summary"])
    if current is None:
        current = row.system_comment if row else ""
    old, _ = summary.find(current)
    if old == summary.find(ours)[0]:
        return "up to date"
    text = summary.combine(current, ours)
    if text is None:
        log.error(f"SystemComment of job {job} would exceed {summary.ADMIN_COMMENT_MAX} bytes; "
                  "summary not written")
        return "too long"
    if dry_run:
        return "would write"
    try:
        write_detail(cfg, job, detail, trusted)
    except OSError as e:
        log.error(f"cannot write {cfg.collect_dir}/{job}/{layout.JOB_FILE}: {e}")
    result = write_comment(db, job, text, ours, dl, cluster, array)
    lvl = log.info if result == "written" else log.error
    lvl(f"job {job}: summary {result} ({len(ours)} bytes): {summary.line(detail['summary'])}")
    if result == "written" and cfg.metrics_dir and labels is not None:
        publish_metrics(cfg, job, detail, labels)
    return result


def publish_metrics(cfg: siteconf.Config, job: int, detail: Dict[str, Any],
                    labels: Dict[str, str]) -> None:
    """The job's Prometheus metrics; a failure is logged, never the job's
    summary's problem."""
    try:
        s = dict(detail["summary"], agent_capped_s=metrics.capped_seconds(detail))
        metrics.write_job(cfg, job, s, labels)
    except (OSError, ValueError) as e:
        log.warning(f"job {job}: metrics not written to {cfg.metrics_dir}: {e}")
