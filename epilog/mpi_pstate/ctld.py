"""EpilogSlurmctld (SlurmUser, once per job, on the controller, while the
job is COMPLETING) and `mpi-pstate backfill`: wait (bounded) for every
node's record, merge them, keep the per-rank detail beside them (job.json)
and write the bounded summary into the job's SystemComment, keeping whatever
else the SystemComment holds.  AdminComment is never touched: jobstats and
admins own it (docs/records.md, "Where the summary lives").

Order, and why:
 1. node records: the node epilogs run concurrently with us;
 2. slurmctld's view of the job (mpi-pstate-dbcomment --system --show): the
    base state behind COMPLETING and the current SystemComment (slurmdbd may
    not have one set moments ago);
 3. wait until slurmdbd has the job's end (sacct shows a final state):
    slurmctld's own job-complete message rewrites system_comment when the
    job has one, so ours must come after it;
 4. write through libslurm (quotes intact), read back, retry within the
    deadline.  Whatever is left undone, backfill repairs idempotently."""
import argparse
import os
import time
from typing import Any, Dict, List, Optional, Set, Tuple

from . import collect, config, log, noderec, parse, safeio, slurm, summary


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


def wait_records(cfg: config.Config, job: int, nodes: List[str], seconds: float,
                 trusted: Set[int]) -> None:
    """Until every expected node's record exists, or the time is up."""
    dl = Deadline(seconds)
    pause = 0.05
    while True:
        try:
            cfd = collect.open_collect(cfg.collect_dir, trusted)
            try:
                jfd = collect.open_job_dir(cfd, job, trusted)
                if jfd is not None:
                    try:
                        if set(nodes) <= collect.present_nodes(jfd):
                            return
                    finally:
                        os.close(jfd)
            finally:
                os.close(cfd)
        except OSError:
            pass  # a node epilog is creating the directory right now
        if dl.left() <= 0:
            return
        time.sleep(min(pause, dl.left()))
        pause = min(pause * 1.5, 0.5)


def load_records(cfg: config.Config, job: int, nodes: List[str], trusted: Set[int]
                 ) -> Tuple[Dict[str, Dict[str, Any]], Dict[str, str], bool]:
    """(records, bad, dir_exists)"""
    cfd = collect.open_collect(cfg.collect_dir, trusted)
    try:
        jfd = collect.open_job_dir(cfd, job, trusted)
        if jfd is None:
            return {}, {}, False
        try:
            recs, bad = collect.read_node_records(jfd, job, nodes, trusted)
            return recs, bad, True
        finally:
            os.close(jfd)
    finally:
        os.close(cfd)


def write_detail(cfg: config.Config, job: int, detail: Dict[str, Any], trusted: Set[int]) -> None:
    cfd = collect.open_collect(cfg.collect_dir, trusted)
    try:
        jfd = collect.open_job_dir(cfd, job, trusted, create=True)
        assert jfd is not None
        try:
            safeio.write_atomic(jfd, collect.JOB_FILE, noderec.encode(detail), mode=0o644)
        finally:
            os.close(jfd)
    finally:
        os.close(cfd)


def drop_job_dir(cfg: config.Config, job: int, trusted: Set[int]) -> None:
    cfd = collect.open_collect(cfg.collect_dir, trusted)
    try:
        collect.remove_job_dir(cfd, job)
    finally:
        os.close(cfd)


def wait_db_final(job: int, dl: Deadline) -> Optional[slurm.SacctJob]:
    pause = 0.2
    while True:
        row = None
        try:
            row = slurm.sacct_one(job, timeout=max(5.0, dl.left()))
        except slurm.SlurmError as e:
            log.warning(f"sacct: {e}")
        if row and row.state in slurm.TERMINAL:
            return row
        if dl.left() <= 0:
            return row
        time.sleep(min(pause, dl.left()))
        pause = min(pause * 1.5, 2.0)


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


def finish(cfg: config.Config, db: slurm.DbTool, job: int, nodes: List[str],
           trusted: Set[int], dl: Deadline, job_state: Optional[str], exit_code: Optional[str],
           current: Optional[str], array: Optional[str], dry_run: bool = False,
           cluster: Optional[str] = None, elapsed: Optional[str] = None) -> str:
    """Merge, keep the detail, write the summary.  current: the job's
    SystemComment as it is now (None: read it from sacct); elapsed: sacct's
    Elapsed of the job.  Returns what happened (one word for logs and
    backfill's tally)."""
    records, bad, exists = load_records(cfg, job, nodes, trusted)
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
    if current is None or elapsed is None:
        row = slurm.sacct_one(job)
    if elapsed is None and row is not None and row.state in slurm.TERMINAL:
        elapsed = row.elapsed
    detail = summary.merge(job, nodes, records, bad, job_state, exit_code, array,
                           summary.elapsed_seconds(elapsed))
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
        log.error(f"cannot write {cfg.collect_dir}/{job}/{collect.JOB_FILE}: {e}")
    result = write_comment(db, job, text, ours, dl, cluster, array)
    lvl = log.info if result == "written" else log.error
    lvl(f"job {job}: summary {result} ({len(ours)} bytes): {summary.line(detail['summary'])}")
    return result


def run(a: argparse.Namespace, dbtool: Optional[str]) -> int:
    job = None
    try:
        job = parse.job_id(os.environ.get("SLURM_JOB_ID", os.environ.get("SLURM_JOBID", "")))
    except ValueError as e:
        log.setup("mpi-pstate-epilog-slurmctld")
        log.error(f"EpilogSlurmctld: bad Slurm environment ({e}); nothing done")
        return 0
    log.setup(f"mpi-pstate-epilog-slurmctld[{job}]", quiet=a.quiet)
    try:
        t0 = time.monotonic()
        cfg = config.load(a.slurm_conf, a.collect_dir, a.runtime_dir)
        config.export_slurm_conf(cfg)
        trusted = {0, cfg.slurm_uid, os.geteuid()}
        nodes = expected_nodes(os.environ.get("SLURM_JOB_NODELIST", ""))
        array = None
        aj, at = os.environ.get("SLURM_ARRAY_JOB_ID"), os.environ.get("SLURM_ARRAY_TASK_ID")
        if aj and at and aj.isdigit() and at.isdigit():
            array = f"{aj}_{at}"
        if not dbtool:
            log.error("mpi-pstate-dbcomment not found: summary cannot be written")
            return 0
        db = slurm.DbTool(dbtool)
        wait_records(cfg, job, nodes, a.wait, trusted)
        t_rec = time.monotonic()
        shown = None
        try:
            shown = db.show(job)
        except slurm.SlurmError as e:
            log.warning(str(e))
        state, code, current = shown if shown else (None, None, None)
        dl = Deadline(a.db_wait)
        records, _, exists = load_records(cfg, job, nodes, trusted)
        elapsed = ""  # unknown unless slurmdbd has the job's end
        if exists and any(r["status"] == "ok" for r in records.values()):
            row = wait_db_final(job, dl)
            if row is None:
                log.warning(f"job {job} not in the accounting database after {a.db_wait} s")
            else:
                if row.state in slurm.TERMINAL:
                    elapsed = row.elapsed
                if state is None or state in ("PENDING", "RUNNING", "SUSPENDED"):
                    state, code = row.state, row.exit_code
        t_db = time.monotonic()
        result = finish(cfg, db, job, nodes, trusted, dl, state, code, current, array,
                        elapsed=elapsed)
        t_end = time.monotonic()
        log.info(f"job {job}: {result} in {t_end - t0:.2f} s (node records {t_rec - t0:.2f} s, "
                 f"database {t_db - t_rec:.2f} s, merge and write {t_end - t_db:.2f} s; "
                 f"nodes {','.join(nodes)[:200]})")
    except Exception as e:  # never fail: the job would be marked with an epilog error
        log.error(f"EpilogSlurmctld of job {job} failed: {type(e).__name__}: {e}")
    return 0
