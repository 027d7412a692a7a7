"""The node Epilog (root, once per job on every node of the job, after all
its steps): run the restore backstop, then publish the node's record of the
job into the collection directory.  Always exits 0: a failing Epilog
drains the node, and nothing here is worth that."""
from __future__ import annotations

import argparse
import os
import re
import socket
import time
from typing import Any, Optional

from . import audit, collect, config, log, noderec, parse, safeio, slots, slurm

AGENT_RE = re.compile(r"agent[A-Za-z0-9_.\-]{0,64}\.json")
AGENT_MAX_BYTES = 1 << 20
MAX_AGENT_RECORDS = 64
BACKSTOP_TIMEOUT = 30.0


def find_tool(name: str, dirs: list[str], env: Optional[str] = None) -> Optional[str]:
    if env and os.environ.get(env):
        p = os.environ[env]
        return p if os.path.isfile(p) and os.access(p, os.X_OK) else None
    for d in dirs:
        p = os.path.join(d, name)
        if d and os.path.isfile(p) and os.access(p, os.X_OK):
            return p
    return None


def backstop(agent: Optional[str], runtime_dir: str, job: int) -> dict[str, Any]:
    """Every core this job still holds back to its saved state, through the
    agent's own restore code (one implementation of restore)."""
    if not agent:
        return {"status": "skipped", "why": "mpi-pstate-agent not installed"}
    t0 = time.monotonic()
    try:
        r = slurm.run([agent, "--restore", runtime_dir, "--job", str(job)],
                      timeout=BACKSTOP_TIMEOUT)
    except slurm.SlurmError as e:
        return {"status": "failed", "why": noderec.clip(e)}
    out = {"status": "ok" if r.returncode == 0 else "failed", "rc": r.returncode,
           "seconds": round(time.monotonic() - t0, 3)}
    msg = (r.stderr.strip() or r.stdout.strip()).splitlines()
    if msg:
        out["message"] = noderec.clip(msg[-1])
    return out


def agent_records(runtime_dir: str, job: int, node: str) -> tuple[list[dict[str, Any]],
                                                                   list[str]]:
    """The agent's per-step records of this job (root-owned files in
    <runtime_dir>/<jobid>/, docs/agent.md)."""
    out: list[dict[str, Any]] = []
    problems: list[str] = []
    try:
        rfd = safeio.open_dir(os.path.join(runtime_dir, str(job)), trusted={0})
    except FileNotFoundError:
        return out, problems
    except OSError as e:
        if e.errno != 2:
            problems.append(f"runtime dir: {e.strerror}")
        return out, problems
    try:
        names = [n for n in safeio.list_dir(rfd) if AGENT_RE.fullmatch(n)]
        for n in names[:MAX_AGENT_RECORDS]:
            try:
                a = noderec.parse_agent(safeio.read_file(rfd, n, AGENT_MAX_BYTES, owners={0}),
                                        node)
            except (OSError, ValueError, UnicodeDecodeError) as e:
                problems.append(f"agent record {n}: {getattr(e, 'strerror', None) or e}")
                continue
            if a is not None:
                out.append(a)
        if len(names) > MAX_AGENT_RECORDS:
            problems.append(f"{len(names)} agent records, {MAX_AGENT_RECORDS} read")
    finally:
        os.close(rfd)
    return out, problems


def job_env() -> tuple[int, str, int, dict[str, Any]]:
    job = parse.job_id(os.environ.get("SLURM_JOB_ID", os.environ.get("SLURM_JOBID", "")))
    node = os.environ.get("SLURMD_NODENAME") or socket.gethostname().split(".")[0]
    parse.safe_name(node)
    uid = int(parse.u64(os.environ.get("SLURM_JOB_UID", ""), 0, 0xFFFFFFFE))
    extra: dict[str, Any] = {}
    for k, env in (("array_job", "SLURM_ARRAY_JOB_ID"), ("array_task", "SLURM_ARRAY_TASK_ID")):
        v = os.environ.get(env)
        if v and v.isdigit() and len(v) < 11:
            extra[k] = int(v)
    return job, node, uid, extra


def run(a: argparse.Namespace, tools: dict[str, list[str]]) -> int:
    t0 = time.monotonic()
    job = None
    try:
        job, node, uid, extra = job_env()
    except ValueError as e:
        log.setup("mpi-pstate-epilog")
        log.error(f"node epilog: bad Slurm environment ({e}); nothing done")
        return 0
    log.setup(f"mpi-pstate-epilog[{job}]", quiet=a.quiet)
    try:
        cfg = config.load(a.slurm_conf, a.collect_dir, a.runtime_dir)
        for p in cfg.problems:
            log.warning(p)
        agent = find_tool("mpi-pstate-agent", tools["agent"], "MPI_PSTATE_AGENT")
        restore = backstop(agent, cfg.runtime_dir, job)
        if restore["status"] == "failed":
            log.error(f"restore backstop failed: {restore}")
        elif restore["status"] == "skipped":
            log.info(f"restore backstop skipped: {restore['why']}")
        steps, problems, segs = slots.job_segments(job, uid, a.shm_dir)
        agents, aprob = agent_records(cfg.runtime_dir, job, node)
        problems += aprob
        has_data = any(s["ranks"] for s in steps) or agents
        settings = audit.node_settings(a.sysroot) if has_data else None
        rec = noderec.build(job, node, uid, settings=settings, steps=steps, agents=agents,
                            restore=restore, problems=problems, written=time.time(),
                            extra_job=extra or None)
        data = noderec.encode(rec)
        publish(cfg, job, node, data)
        if segs and not a.keep_segments:
            slots.remove_segments(job, segs, a.shm_dir)
        for p in problems[:8]:
            log.warning(p)
        log.info(f"node {node}: record of job {job} published: status {rec['status']}, "
                 f"{len(rec['ranks'])} ranks in {len(rec['steps'])} steps, energy "
                 f"{rec['energy']['status']}, {len(problems)} problems, {len(data)} bytes, "
                 f"{time.monotonic() - t0:.2f} s")
    except Exception as e:  # never fail the Epilog: it would drain the node
        log.error(f"node epilog of job {job} failed: {type(e).__name__}: {e}")
    return 0


def publish(cfg: config.Config, job: int, node: str, data: bytes) -> None:
    owner = cfg.slurm_uid
    try:
        cfd = collect.open_collect(cfg.collect_dir, trusted={0, owner})
    except FileNotFoundError:
        # First job on a fresh node: make collect_dir (not its parents) and
        # give it to SlurmUser, which writes beside the node records.
        os.mkdir(cfg.collect_dir, 0o755)
        cfd = collect.open_collect(cfg.collect_dir, trusted={0, owner})
        if owner:
            import pwd
            os.fchown(cfd, owner, pwd.getpwuid(owner).pw_gid)
    try:
        jfd = collect.open_job_dir(cfd, job, trusted={0, owner}, create=True)
        assert jfd is not None
        try:
            safeio.write_atomic(jfd, collect.node_file(node), data, mode=0o644)
        finally:
            os.close(jfd)
    finally:
        os.close(cfd)
