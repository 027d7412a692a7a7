# SPDX-License-Identifier: BSD-3-Clause
"""Never hold, never lose: the EpilogSlurmctld (epilog_slurmctld())
only queues the job and returns (a job is never held in COMPLETING by a
late node or a slurmdbd that is down); `mpi-pstate flush` writes every
queued summary once the node records and slurmdbd are there, with no admin
action; `mpi-pstate prune` deletes records older than the kept time.

    <collect_dir>/.queue/            SlurmUser's, 0700 (the controller's side)
        <job>.json                   one queued job (QUEUE_FORMAT)
        late/<job>.json              a job written without some node's record,
                                     awaiting it (kept apart, so that many of
                                     them never keep a new job out of a pass)
        .lock                        one flusher at a time (flock)

A pass takes the queued jobs in order of queue time, one of each user in
turn (at most PER_USER_PASS of one user), then at most LATE_PER_PASS late
ones, those checked longest ago first: no user's jobs, and no number of
late ones, hold another user's summary back by more than a pass.

Who runs flush: the EpilogSlurmctld starts one in the background (detached,
its own session) after queueing, which also takes every older queued job;
sites with systemd add mpi-pstate-flush.timer (packaging/systemd), others
the cron line of packaging/cron/mpi-pstate (docs/admin.md)."""
import argparse
import errno
import fcntl
import os
import stat
import sys
import time
from typing import Any, Callable, Dict, List, Optional, Set, Tuple

from . import ctld, metrics
from .. import SUBPACKAGES
from ..core import collect, layout, log, noderecord, parse, safeio, siteconf, slurm

QUEUE_FORMAT = "mpi-pstate-queue"
ENTRY_MAX_BYTES = 1 << 20
MAX_ENTRIES = 100000  # queued jobs read per pass (all of any real queue)
PER_USER_PASS = 1000  # queued jobs of one user processed per pass
LATE_PER_PASS = 200  # late jobs checked per pass, those checked longest ago first
WAIT_RECORDS_S = 30.0  # node records awaited before a summary without them
STALE_TMP_S = 86400.0  # a temporary file older than this has no writer left
LATE_S = 86400.0  # a missing node's record is still taken this long after the job
KEEP_DAYS = 30.0  # default of `mpi-pstate prune --keep-days`
STALE_MARGIN_S = ctld.STALE_MARGIN_S


def open_subdir(dfd: int, name: str, create: bool) -> Optional[int]:
    """name under dfd, never through a symlink (None when absent); with
    create, made 0700 by its first writer (SlurmUser)."""
    if create:
        try:
            os.mkdir(name, 0o700, dir_fd=dfd)
        except FileExistsError:
            pass
    try:
        return os.open(name, safeio.O_DIR, dir_fd=dfd)
    except FileNotFoundError:
        return None


def open_queue(cfg: siteconf.Config, trusted: Set[int], create: bool = False) -> Optional[int]:
    """The queue directory, checked as ours and closed to others."""
    cfd = collect.open_collect(cfg.collect_dir, trusted)
    try:
        fd = open_subdir(cfd, layout.QUEUE_DIR, create)
        if fd is None:
            return None
        st = os.fstat(fd)
        if st.st_uid not in trusted or st.st_mode & 0o077:
            os.close(fd)
            raise safeio.UnsafeFile(errno.EPERM, f"{cfg.collect_dir}/{layout.QUEUE_DIR}: "
                                    "not ours or open to others")
        return fd
    finally:
        os.close(cfd)


def entry_of(job: int, nodes: List[str], uid: Optional[int], array: Optional[str],
             queued: float, seen: Optional[List[str]] = None,
             expects: bool = False) -> Dict[str, Any]:
    """seen: the nodes whose records the summary last written was made of
    (a job written without some node waits for a new record, not for
    slurmdbd); expects: the job was submitted with mpi-pstate on (the
    plugin's SPANK_MPI_PSTATE_MODE), so a job with no record yet waits."""
    e = {"format": QUEUE_FORMAT, "version": 1, "job": job, "nodes": nodes, "uid": uid,
         "array": array, "queued": round(queued, 3)}  # type: Dict[str, Any]
    if seen is not None:
        e["seen"] = seen
    if expects:
        e["expects"] = True
    return e


def expects_records(env: Dict[str, str]) -> bool:
    """Whether the job was submitted with mpi-pstate on (profile or on):
    the plugin sets MPI_PSTATE_MODE in the job control environment, which
    Slurm hands to the EpilogSlurmctld as SPANK_MPI_PSTATE_MODE.  The
    user can set it too: then their own job waits a day, no more."""
    return env.get("SPANK_MPI_PSTATE_MODE") in ("on", "profile")


def enqueue(qfd: int, entry: Dict[str, Any]) -> None:
    safeio.write_atomic(qfd, layout.queue_name(entry['job']), noderecord.encode(entry), mode=0o600)


def read_entry(qfd: int, name: str) -> Dict[str, Any]:
    """A queue entry, strictly: ValueError when it is not one."""
    obj = noderecord.decode(safeio.read_file(qfd, name, ENTRY_MAX_BYTES, owners=None))
    if not isinstance(obj, dict) or obj.get("format") != QUEUE_FORMAT or \
            obj.get("version") != 1:
        raise ValueError("not a queue entry")
    job = obj.get("job")
    if type(job) is not int or name != layout.queue_name(job):
        raise ValueError("bad job")
    nodes = obj.get("nodes")
    if not isinstance(nodes, list) or not all(isinstance(n, str) for n in nodes):
        raise ValueError("bad node list")
    for n in nodes:
        parse.safe_name(n)
    q = obj.get("queued")
    if type(q) not in (int, float) or q < 0:
        raise ValueError("bad queue time")
    uid = obj.get("uid")
    arr = obj.get("array")
    seen = obj.get("seen")
    if seen is not None and (not isinstance(seen, list) or
                             not all(isinstance(n, str) for n in seen)):
        raise ValueError("bad seen list")
    return entry_of(job, nodes, uid if type(uid) is int else None,
                    arr if isinstance(arr, str) and len(arr) < 32 else None, float(q), seen,
                    obj.get("expects") is True)


def _names(dfd: int) -> List[str]:
    return [n for n in os.listdir(dfd) if n.endswith(layout.RECORD_SUFFIX) and n[0].isdigit()]


def _read_all(dfd: int, names: List[str]) -> Tuple[List[Dict[str, Any]], List[str]]:
    out, bad = [], []
    for n in names:
        try:
            out.append(read_entry(dfd, n))
        except FileNotFoundError:
            continue  # dropped meanwhile
        except (OSError, ValueError, UnicodeDecodeError):
            bad.append(n)
    return out, bad


def fair(es: List[Dict[str, Any]], per_user: int = PER_USER_PASS) -> List[Dict[str, Any]]:
    """es in order of queue time, one job of each user in turn (users in
    order of their oldest job), at most per_user of any user."""
    by_uid: Dict[Optional[int], List[Dict[str, Any]]] = {}
    for e in sorted(es, key=lambda e: (e["queued"], e["job"])):
        by_uid.setdefault(e["uid"], []).append(e)
    out = []
    for i in range(per_user):
        row = [lst[i] for lst in by_uid.values() if i < len(lst)]
        if not row:
            break
        out += row
    return out


def entries(qfd: int) -> Tuple[List[Dict[str, Any]], List[str]]:
    """Queued jobs (not the late ones) in the order a pass takes them
    (fair()), and the names of entries that are not valid (removed by the
    caller)."""
    names = sorted(_names(qfd), key=lambda n: (len(n), n))[:MAX_ENTRIES]
    out, bad = _read_all(qfd, names)
    return fair(out), bad


def drop(qfd: int, job: int) -> None:
    for d in (None, layout.LATE_DIR):
        try:
            os.unlink(layout.queue_name(job) if d is None else f"{d}/{layout.queue_name(job)}",
                      dir_fd=qfd)
        except (FileNotFoundError, NotADirectoryError):
            pass


def open_late(qfd: int, create: bool = False) -> Optional[int]:
    return open_subdir(qfd, layout.LATE_DIR, create)


def late_entries(lfd: int, limit: int = LATE_PER_PASS
                 ) -> Tuple[List[Dict[str, Any]], List[str]]:
    """At most `limit` late jobs, those checked longest ago first (each
    check touches its entry), and the names of invalid ones."""
    stamped = []
    for n in _names(lfd):
        st = safeio.entry_stat(lfd, n)
        if st is not None:
            stamped.append((st.st_mtime, n))
    stamped.sort()
    return _read_all(lfd, [n for _, n in stamped[:limit]])


def to_late(qfd: int, e: Dict[str, Any]) -> None:
    """The job, written without some node, waits apart for that node."""
    lfd = open_late(qfd, create=True)
    assert lfd is not None
    try:
        enqueue(lfd, e)
    finally:
        os.close(lfd)
    try:
        os.unlink(layout.queue_name(e['job']), dir_fd=qfd)
    except FileNotFoundError:
        pass


def fresh(entry: Dict[str, Any]) -> ctld.Accept:
    """The check a node record of the queued job must pass: same user,
    written after (a margin before) the job was queued at its end."""
    return ctld.accept_for(entry.get("uid"), entry["queued"] - STALE_MARGIN_S)


def process(cfg: siteconf.Config, db: slurm.DbTool, e: Dict[str, Any], trusted: Set[int],
            now: float, wait: float = WAIT_RECORDS_S, late: float = LATE_S) -> Tuple[str, bool]:
    """One queued job: (what happened, whether it stays queued)."""
    job, nodes, age = e["job"], e["nodes"], now - e["queued"]
    present: Set[str] = set()
    try:
        with collect.job_dir(cfg.collect_dir, job, trusted) as jfd:
            if jfd is not None:
                present = collect.present_nodes(jfd)
    except OSError as err:
        return f"collect_dir: {err.strerror or err}", True
    all_there = set(nodes) <= present
    if not all_there and age < wait:
        return "waiting for node records", True
    if e.get("seen") is not None and e["seen"] == sorted(present):
        return "waiting for a late node", age < late  # nothing new since the last write
    if not present:
        # No node wrote anything: the plugin was off for the job (the node
        # Epilog writes nothing then), or a crashed node comes later; or,
        # for a job submitted with it on, every record waits on its node
        # (a share down): that one waits apart, like a late node's.
        if e.get("expects") and age < late:
            e["seen"] = []
            return "no records yet", True
        return "no records", False
    try:
        row = slurm.sacct_one(job, timeout=10)
    except slurm.SlurmError as err:
        return f"database unreachable: {noderecord.clip(err, 120)}", True
    if row is None or row.state not in slurm.TERMINAL or row.wall_s() is None:
        # no End yet either: sacct's Elapsed would count to now
        return "not in the database yet", age < late
    state, code, current = row.state, row.exit_code, row.system_comment
    try:
        shown = db.show(job, timeout=5)
        if shown is not None:  # slurmctld's comment is newer than slurmdbd's
            current = shown[2]
            if shown[0] not in ("PENDING", "RUNNING", "SUSPENDED"):
                state, code = shown[0], shown[1]
    except slurm.SlurmError:
        pass
    res = ctld.finish(cfg, db, job, nodes, trusted, ctld.Deadline(5), state, code, current,
                      e["array"], wall_s=row.wall_s(), accept=fresh(e),
                      labels=metrics.job_labels(row))
    if res in ("written", "up to date"):
        keep = not all_there and age < late  # a late node's record still counts
        if keep:
            e["seen"] = sorted(present)
        return res, keep
    if res in ("without mpi-pstate", "no records", "too long"):
        return res, False
    return res, age < late


def take_lock(qfd: int) -> Optional[int]:
    fd = os.open(".lock", os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600,
                 dir_fd=qfd)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        return fd
    except OSError:
        os.close(fd)
        return None


def flush(cfg: siteconf.Config, db: slurm.DbTool, trusted: Set[int], for_s: float = 0.0,
          wait: float = WAIT_RECORDS_S, late: float = LATE_S,
          sleep: Callable[[float], None] = time.sleep) -> Dict[str, int]:
    """Passes over the queue until it is empty, or for_s seconds are over
    (0: one pass).  One flusher at a time: a second one returns at once,
    and the first looks at the queue again after letting go of the lock,
    so a job queued meanwhile is never left behind."""
    tally: Dict[str, int] = {}
    qfd = open_queue(cfg, trusted)
    if qfd is None:
        return tally
    end = time.monotonic() + for_s
    try:
        while True:
            lock = take_lock(qfd)
            if lock is None:
                tally["another flusher runs"] = tally.get("another flusher runs", 0) + 1
                return tally
            try:
                emptied = _passes(cfg, db, trusted, qfd, end, wait, late, sleep, tally)
            finally:
                os.close(lock)
            if not emptied or time.monotonic() >= end or not entries(qfd)[0]:
                return tally
    finally:
        os.close(qfd)


def _program_id() -> Tuple[Tuple[int, int, float], ...]:
    """What this flusher runs: the script and the package's directories (an
    upgrade replaces them; a flusher of the old code then stops and the next
    one runs the new)."""
    out = []
    for p in [os.path.abspath(sys.argv[0]), safeio.PKG_DIR] + \
            [os.path.join(safeio.PKG_DIR, s) for s in SUBPACKAGES]:
        try:
            st = os.stat(p)
            out.append((st.st_dev, st.st_ino, st.st_mtime))
        except OSError:
            out.append((0, 0, 0.0))
    return tuple(out)


def _passes(cfg: siteconf.Config, db: slurm.DbTool, trusted: Set[int], qfd: int, end: float,
            wait: float, late: float, sleep: Callable[[float], None],
            tally: Dict[str, int]) -> bool:
    """Until the queue is empty (returns True), time is up, only late nodes
    are awaited (the next flusher or the timer takes those), or mpi-pstate
    was upgraded under this flusher (its tools may be gone)."""
    pause = 1.0
    me = _program_id()
    tool = os.path.exists(db.path)
    while True:
        es, bad = entries(qfd)
        queued = list(es)  # the late ones' summaries are written: not waiting
        lfd = open_late(qfd)
        try:
            if lfd is not None:
                les, lbad = late_entries(lfd)
                es += les
                bad += [f"{layout.LATE_DIR}/{n}" for n in lbad]
            for n in bad:
                log.warning(f"queue entry {n} is not valid: removed")
                try:
                    os.unlink(n, dir_fd=qfd)
                except OSError:
                    pass
            db_down, idle, left = _pass(cfg, db, trusted, qfd, lfd, es, wait, late, tally)
        finally:
            if lfd is not None:
                os.close(lfd)
        queue_metrics(cfg, [e["queued"] for e in queued if e["job"] not in left])
        if not es:
            return True
        if idle or time.monotonic() >= end or _program_id() != me or \
                (tool and not os.path.exists(db.path)):
            return False
        sleep(min(pause, max(0.0, end - time.monotonic())))
        pause = min(pause * 1.5, 10.0)


def queue_metrics(cfg: siteconf.Config, waiting: List[float]) -> None:
    """The queue's gauges after a pass (metrics_dir=): the queue times of
    the jobs still waiting for their summary."""
    if not cfg.metrics_dir:
        return
    try:
        metrics.write_queue(cfg, waiting)
    except (OSError, ValueError) as e:
        log.warning(f"queue metrics not written to {cfg.metrics_dir}: {e}")


def _pass(cfg: siteconf.Config, db: slurm.DbTool, trusted: Set[int], qfd: int,
          lfd: Optional[int], es: List[Dict[str, Any]], wait: float, late: float,
          tally: Dict[str, int]) -> Tuple[bool, bool, Set[int]]:
    """One pass over es: (slurmdbd was down, only late nodes are awaited,
    the jobs that left the queue: dropped or moved to late)."""
    db_down = False
    idle = True
    left: Set[int] = set()
    for e in es:
        if db_down:
            break
        res, keep = process(cfg, db, e, trusted, time.time(), wait, late)
        db_down = res.startswith("database unreachable")
        idle = idle and res == "waiting for a late node"
        key = res.split(":")[0]
        tally[key] = tally.get(key, 0) + 1
        if keep and e.get("seen") is not None:
            if key in ("written", "up to date", "no records yet"):
                to_late(qfd, e)  # remembers which nodes the summary was made of
                left.add(e["job"])
            elif lfd is not None:
                try:  # checked now: the others' turn next pass
                    os.utime(layout.queue_name(e['job']), dir_fd=lfd)
                except OSError:
                    pass
        if not keep:
            drop(qfd, e["job"])
            left.add(e["job"])
            lvl = log.info if res in ("written", "up to date", "no records",
                                      "without mpi-pstate") else log.error
            lvl(f"job {e['job']}: {res} (queued {time.time() - e['queued']:.0f} s ago)")
    return db_down, idle, left


def prune(cfg: siteconf.Config, trusted: Set[int], keep_days: float, now: float,
          dry_run: bool = False) -> List[int]:
    """Deletes the job directories of collect_dir (and queue entries) whose
    newest file is older than keep_days, and the temporary files a writer
    that died left in collect_dir, the queue and the jobs kept (a day old:
    safeio.write_atomic renames its own within a second).  Returns the jobs
    pruned."""
    limit = now - keep_days * 86400
    gone = []
    cfd = collect.open_collect(cfg.collect_dir, trusted)
    try:
        for job in collect.job_dirs(cfd):
            try:
                jfd = os.open(str(job), safeio.O_DIR, dir_fd=cfd)
            except OSError:
                continue
            try:
                newest = os.fstat(jfd).st_mtime
                for n in os.listdir(jfd):
                    st = safeio.entry_stat(jfd, n)
                    if st is not None and stat.S_ISREG(st.st_mode):
                        newest = max(newest, st.st_mtime)
                if newest >= limit and not dry_run:
                    safeio.remove_stale_tmp(jfd, STALE_TMP_S)
            finally:
                os.close(jfd)
            if newest < limit:
                gone.append(job)
                if not dry_run:
                    collect.remove_job_dir(cfd, job)
        if not dry_run:
            safeio.remove_stale_tmp(cfd, STALE_TMP_S)
    finally:
        os.close(cfd)
    qfd = open_queue(cfg, trusted)
    if qfd is not None:
        lfd = open_late(qfd)
        try:
            for dfd in (qfd, lfd):
                if dfd is not None and not dry_run:
                    safeio.remove_stale_tmp(dfd, STALE_TMP_S)
                for n in os.listdir(dfd) if dfd is not None else []:
                    st = safeio.entry_stat(dfd, n)
                    if n.endswith(layout.RECORD_SUFFIX) and st is not None and \
                            st.st_mtime < limit and not dry_run:
                        os.unlink(n, dir_fd=dfd)
        finally:
            if lfd is not None:
                os.close(lfd)
            os.close(qfd)
    return gone


def spawn_flusher(argv: List[str]) -> None:
    """Starts `mpi-pstate flush` detached (double fork, its own session,
    no inherited descriptors): slurmctld waits for the EpilogSlurmctld, not
    for it."""
    pid = os.fork()
    if pid:
        os.waitpid(pid, 0)
        return
    try:  # the child: never return into the caller's code
        os.setsid()
        if os.fork():
            os._exit(0)
        null = os.open(os.devnull, os.O_RDWR)
        for fd in (0, 1, 2):
            os.dup2(null, fd)
        os.closerange(3, 1024)
        os.execv(argv[0], argv)
    finally:
        os._exit(0)


def epilog_slurmctld(a: argparse.Namespace, dbtool: Optional[str],
                     spawn: Optional[Callable[[List[str]], None]] = spawn_flusher) -> int:
    """The EpilogSlurmctld: queues the job and returns (within 1 s whatever
    slurmdbd or a late node does, so the job never stays COMPLETING); the
    flusher it starts writes the summary (flush)."""
    job = log.setup_job("mpi-pstate-epilog-slurmctld", "EpilogSlurmctld", a.quiet, parse.slurm_job_id,
                        lambda j: j)
    if job is None:
        return 0
    try:
        t0 = time.monotonic()
        cfg = siteconf.load(a.slurm_conf, a.collect_dir, a.runtime_dir)
        siteconf.export_slurm_conf(cfg)
        trusted = {0, cfg.slurm_uid, os.geteuid()}
        nodes = ctld.expected_nodes(os.environ.get("SLURM_JOB_NODELIST", ""))
        array = None
        aj, at = os.environ.get("SLURM_ARRAY_JOB_ID"), os.environ.get("SLURM_ARRAY_TASK_ID")
        if aj and at and aj.isdigit() and at.isdigit():
            array = f"{aj}_{at}"
        uid_text = os.environ.get("SLURM_JOB_UID", "")
        uid = int(uid_text) if uid_text.isdigit() and len(uid_text) < 11 else None
        if not dbtool:
            log.error("mpi-pstate-dbcomment not found: summary cannot be written")
            return 0
        try:
            qfd = open_queue(cfg, trusted, create=True)
            assert qfd is not None
        except FileNotFoundError:
            log.error(f"{cfg.collect_dir} does not exist yet: job {job} not queued "
                      "(no node wrote a record)")
            return 0
        try:
            enqueue(qfd, entry_of(job, nodes, uid, array, time.time(),
                                  expects=expects_records(dict(os.environ))))
        finally:
            os.close(qfd)
        if spawn is not None:
            argv = [sys.executable, "-I", os.path.abspath(sys.argv[0]), "flush", "--quiet",
                    "--for", str(a.flush_for), "--wait", str(a.wait)]
            for opt, v in (("--collect-dir", a.collect_dir), ("--runtime-dir", a.runtime_dir),
                           ("--slurm-conf", cfg.slurm_conf)):
                if v:
                    argv += [opt, v]
            spawn(argv)
        log.info(f"job {job}: queued in {time.monotonic() - t0:.2f} s "
                 f"(nodes {','.join(nodes)[:200]})")
    except Exception as e:  # never fail: the job would be marked with an epilog error
        log.error(f"EpilogSlurmctld of job {job} failed: {type(e).__name__}: {e}")
    return 0
