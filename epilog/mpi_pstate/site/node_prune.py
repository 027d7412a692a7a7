# SPDX-License-Identifier: BSD-3-Clause
"""`mpi-pstate node-prune` (root, on every compute node, from
mpi-pstate-node-prune.timer or the cron line): removes what jobs that no
longer run left on the node, and delivers the node records an Epilog
could not publish: without it, a job whose Epilog failed or stopped at its
bounds would leave its segments in tmpfs and its figures undelivered.

What it removes, per job: its shared-memory segments
(/dev/shm/mpi-pstate.<job>.*) and its step directories
(<runtime>/steps/<job>.<step>/).  Never <runtime>/restore: a restore
record is the agent's backstop's business.  A job's data is removed only
when all of these say it is over:

- slurmctld: `squeue -t all` lists it in a finished state, or not at all
  (squeue failing, or printing what cannot be parsed, removes nothing);
- the node: no cgroup of the job (job_<id> under slurmstepd's cgroup tree);
- time: nothing of it changed within --min-age seconds (a job that
  started after squeue answered is not in its answer)."""
import argparse
import glob
import os
import re
import time
from typing import Dict, List, Optional, Sequence, Set

from . import delivery, node_epilog, pending, rankfigures
from ..core import layout, log, safeio, siteconf, slurm

PROG = "mpi-pstate node-prune"
MIN_AGE_S = 600.0
PASS_S = 120.0  # one pass's time for collect_dir (delivery.Share)
_SQUEUE_LINE = re.compile(r"([0-9]{1,10}) ([A-Z_]{1,32})")


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog=PROG, description="remove the segments and step "
                                "directories of jobs that no longer run on this node, and "
                                "deliver node records that wait (root)")
    p.add_argument("--collect-dir", help="override collect_dir of the plugstack line")
    p.add_argument("--runtime-dir", help="override runtime_dir of the plugstack line")
    p.add_argument("--slurm-conf", help="slurm.conf (default: $SLURM_CONF)")
    p.add_argument("--min-age", type=float, default=MIN_AGE_S,
                   help="seconds a job's files must be unchanged (default %(default)s)")
    p.add_argument("--dry-run", action="store_true", help="say what would be removed")
    p.add_argument("--quiet", action="store_true", help="syslog only, nothing on stderr")
    p.add_argument("--shm-dir", default=layout.SHM_DIR, help=argparse.SUPPRESS)
    p.add_argument("--cgroup-root", default=layout.CGROUP_ROOT, help=argparse.SUPPRESS)
    return p


def live_jobs() -> Set[int]:
    """Jobs slurmctld does not know as finished; SlurmError when it cannot
    tell (then nothing may be removed)."""
    r = slurm.run([slurm.which("squeue"), "-h", "-t", "all", "-o", "%A %T"], timeout=60)
    if r.returncode != 0:
        raise slurm.SlurmError("squeue: " + (r.stderr.strip().splitlines() or ["failed"])[-1])
    live = set()
    for line in r.stdout.splitlines():
        m = _SQUEUE_LINE.fullmatch(line.strip())
        if not m:
            raise slurm.SlurmError(f"squeue printed {line[:80]!r}")
        if m.group(2) not in slurm.TERMINAL:
            live.add(int(m.group(1)))
    return live


def cgroup_jobs(root: str) -> Set[int]:
    out = set()
    for g in layout.CGROUP_GLOBS:
        for p in glob.glob(os.path.join(root, g)):
            m = layout.CGROUP_JOB_RE.fullmatch(os.path.basename(p))
            if m:
                out.add(int(m.group(1)))
    return out


def step_dir_jobs(runtime: str) -> Dict[int, List[str]]:
    """job -> its step directory names under <runtime>/steps."""
    out: Dict[int, List[str]] = {}
    try:
        sfd = safeio.open_dir(os.path.join(runtime, layout.STEPS_DIR), trusted={0})
    except OSError:
        return out
    try:
        for n in os.listdir(sfd):
            m = layout.STEP_DIR_RE.fullmatch(n)
            if m:
                out.setdefault(int(m.group(1)), []).append(n)
    finally:
        os.close(sfd)
    return out


def newest(dirpath: str, names: List[str]) -> float:
    """Latest mtime of the names (0 when none can be seen)."""
    t = 0.0
    for n in names:
        try:
            t = max(t, os.stat(os.path.join(dirpath, n), follow_symlinks=False).st_mtime)
        except OSError:
            continue
    return t


def prune(runtime: str, shm_dir: str, cgroup_root: str, min_age: float, now: float,
          dry_run: bool = False) -> Dict[int, int]:
    """Removes the leftovers of finished jobs; returns job -> entries
    removed (or that would be).  SlurmError when squeue cannot tell."""
    segs = rankfigures.job_names(shm_dir)
    dirs = step_dir_jobs(runtime)
    cands = set(segs) | set(dirs)
    if not cands:
        return {}
    keep = live_jobs() | cgroup_jobs(cgroup_root)
    done: Dict[int, int] = {}
    for job in sorted(cands - keep):
        changed = max(newest(shm_dir, segs.get(job, [])),
                      newest(os.path.join(runtime, layout.STEPS_DIR), dirs.get(job, [])))
        if now - changed < min_age:
            continue
        if dry_run:
            done[job] = len(segs.get(job, [])) + len(dirs.get(job, []))
            continue
        n = rankfigures.remove_segments(job, segs.get(job, []), shm_dir)
        k, problems = node_epilog.remove_step_dirs(runtime, job)
        for p in problems[:4]:
            log.warning(p)
        done[job] = n + k
    return done


def main(argv: Sequence[str], paths: Optional[Dict[str, str]] = None) -> int:
    a = build_parser().parse_args(list(argv))
    log.setup("mpi-pstate-node-prune", quiet=a.quiet)
    cfg = siteconf.load(a.slurm_conf, a.collect_dir, a.runtime_dir)
    siteconf.export_slurm_conf(cfg)
    runtime = siteconf.expand_host(cfg.runtime_dir, siteconf.short_host())
    rc = 0
    if not a.dry_run:
        before = len(pending.waiting(runtime))
        # a timer, not an Epilog: no drain to fear, but a hung share must
        # not keep it (and the next one) forever
        share = delivery.Share(cfg.collect_dir, cfg.slurm_uid,
                               max(PASS_S, cfg.publish_timeout_s))
        for p in pending.deliver(runtime, lambda j, n, d: node_epilog.publish(cfg, j, n, d, share=share),
                                 limit=pending.MAX_FILES):
            log.warning(p)
            rc = 1
        if before:
            log.info(f"{before - len(pending.waiting(runtime))} of {before} waiting node "
                     "records delivered")
    try:
        done = prune(runtime, a.shm_dir, a.cgroup_root, a.min_age, time.time(), a.dry_run)
    except (OSError, slurm.SlurmError) as e:
        log.error(f"nothing removed: {e}")
        return 1
    verb = "would remove" if a.dry_run else "removed"
    if done:
        log.info(f"{verb} the leftovers of {len(done)} finished jobs ({sum(done.values())} "
                 f"segments and step directories): {' '.join(map(str, sorted(done)[:20]))}"
                 + (" ..." if len(done) > 20 else ""))
    return rc
