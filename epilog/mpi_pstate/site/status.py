# SPDX-License-Identifier: BSD-3-Clause
"""`mpi-pstate status` (root, on a node): what mpi-pstate holds on this node
now, in one look, for the admin an alert sent there (docs/operations.md,
section 1): the restore records and whose they are, the node records that
wait in <runtime>/pending for collect_dir, the steps and their agents, and
the restore failures since boot with the last one's error.  What `mpi-pstate
audit` is for the hardware, this is for mpi-pstate's own state.

Everything it reads sits in runtime_dir, written by root from what users
influence (a job's step ids, its agent's messages): each file through
safeio (no symlink followed, root's, regular, bounded in size), each
directory looked at up to MAX_ENTRIES entries, every name and message
printed escaped.  A file that fails a check is a problem line, never a
traceback.

The restore failures since boot are kept by the node Epilog in
<runtime>/restore-failures.json (failcount.py: note_epilog() writes it,
read_failures() reads it): metrics.json (layout.NODE_STATE_FILE) counts them
only where metrics_dir= is set, and keeps no error.

Exit status: 0 all well; 1 something needs the admin (a restore failure
since boot not acknowledged with --ack, a restore record of a job no
longer running or one the agent would refuse, an unsafe runtime_dir); 2 it
could not tell (bad usage, not root, something unread: see the problem
lines).  --ack is its one write:
the failures counted so far are dealt with.

Python 3.6, like every root command (docs/security.md, "Python 3.6")."""
import argparse
import errno
import json
import os
import re
import stat
import sys
import time
from typing import Any, Callable, Dict, Iterator, List, Optional, Set, Tuple

from . import failcount, metrics, node_epilog, node_prune
from ..core import layout, livesteps, log, safeio, siteconf, slurm
from ..core.parse import printable

FORMAT = "mpi-pstate-status"
VERSION = 1
MAX_ENTRIES = 4096  # entries looked at in one directory (restore/, pending/, steps/)
RECORD_MAX_BYTES = 512  # MPI_PSTATE_RESTORE_MAX_BYTES (common/restore.h)
TEXT_LINES = 64  # lines a section of the text output lists (--json lists all)
NAME_MAX = 80  # characters of a planted name shown
# Slurm's special step ids (slurm.h), as spank/paths.c names them
STEP_NAMES = {0xFFFFFFFB: "batch", 0xFFFFFFFC: "extern", 0xFFFFFFFA: "interactive"}
_U32 = re.compile(r"0|[1-9][0-9]{0,9}")

EXIT_OK, EXIT_ATTENTION, EXIT_UNKNOWN = 0, 1, 2


def step_name(step: int) -> str:
    return STEP_NAMES.get(step, str(step))


def _scan(dfd: int) -> "Iterator[os.DirEntry]":
    """os.scandir() of an open directory: by its descriptor from 3.7, on
    3.6 through /proc/self/fd (the same open directory, not a path anyone
    could redirect)."""
    if sys.version_info >= (3, 7):
        return os.scandir(dfd)
    return os.scandir(f"/proc/self/fd/{dfd}")


def _entries(dfd: int, what: str, problems: List[str]) -> List[str]:
    """Names in the directory, temporaries and dot files left out, at most
    MAX_ENTRIES looked at (os.scandir reads the directory as it goes: a
    directory of a million entries costs no more than MAX_ENTRIES)."""
    names = []  # type: List[str]
    seen = 0
    it = _scan(dfd)
    try:
        for e in it:
            seen += 1
            if seen > MAX_ENTRIES:
                problems.append(f"{what}: more than {MAX_ENTRIES} entries; the rest not "
                                "looked at")
                break
            if not e.name.startswith("."):
                names.append(e.name)
    finally:
        it.close()
    return sorted(names, key=_natural)


def _natural(name: str) -> List[Any]:
    """policy2 before policy10: the text and the numbers between it (odd
    places of the split, ASCII digits only: int() of them never fails)."""
    parts = re.split(r"([0-9]+)", name)  # type: List[Any]
    parts[1::2] = [int(x) for x in parts[1::2]]
    return parts


def _open_sub(runtime: str, sub: str, problems: List[str]) -> Optional[int]:
    """<runtime>/<sub> opened the safe way; None when missing (nothing
    there) or refused (a problem line)."""
    try:
        return safeio.open_dir(os.path.join(runtime, sub), trusted={0})
    except FileNotFoundError:
        return None
    except OSError as e:
        problems.append(f"{sub}/: {printable(e.strerror or e, 300)}")
        return None


def _why(e: BaseException, name: str = "") -> str:
    """Why, without the name safeio's errors start with (the line names it)."""
    why = str(getattr(e, "strerror", None) or e)
    if name and why.startswith(name + ": "):
        why = why[len(name) + 2:]
    return printable(why, 200)


# ---- restore records

def parse_record(text: str) -> Tuple[str, int, int]:
    """(kind, job, step) of a restore record's text (docs/cpufreq.md
    section 4: version=, job=, step= first, then policy= or uncore=);
    ValueError when it is not one the agent would read."""
    lines = text.split("\n")
    kv = []  # type: List[Tuple[str, str]]
    for line in lines[:16]:
        if line:
            k, sep, v = line.partition("=")
            if not sep:
                raise ValueError("not key=value lines")
            kv.append((k, v))
    if len(kv) < 4 or [k for k, _ in kv[:3]] != ["version", "job", "step"]:
        raise ValueError("does not start with version=, job=, step=")
    if kv[0][1] not in ("1", "2"):
        raise ValueError(f"record version {printable(kv[0][1], 12)} is not one this release reads")
    nums = []
    for _, v in kv[1:3]:
        if not _U32.fullmatch(v) or int(v) > 0xFFFFFFFF:
            raise ValueError(f"job or step {printable(v, 12)} is not a number")
        nums.append(int(v))
    kind = {"policy": "cpufreq", "uncore": "uncore"}.get(kv[3][0])
    if kind is None:
        raise ValueError("names neither a policy nor an uncore domain")
    return kind, nums[0], nums[1]


def restore_records(runtime: str, problems: List[str]) -> List[Dict[str, Any]]:
    """The records in <runtime>/restore: name, kind, job, step, problem."""
    dfd = _open_sub(runtime, layout.RESTORE_DIR, problems)
    if dfd is None:
        return []
    out = []
    try:
        for n in _entries(dfd, "restore/", problems):
            rec = {"name": printable(n), "kind": None, "job": None, "step": None,
                   "job_running": None, "problem": None}  # type: Dict[str, Any]
            try:
                if not layout.RESTORE_RECORD_RE.fullmatch(n):
                    raise ValueError("not a restore record's name")
                data = safeio.read_file(dfd, n, RECORD_MAX_BYTES, owners={0})
                rec["kind"], rec["job"], step = parse_record(data.decode("ascii"))
                rec["step"] = step_name(step)
            except (OSError, ValueError) as e:  # UnicodeDecodeError is a ValueError
                rec["problem"] = _why(e, n) if isinstance(e, OSError) else \
                    printable(e if not isinstance(e, UnicodeDecodeError) else "not ASCII text", 200)
            out.append(rec)
    except OSError as e:
        problems.append(f"restore/: {_why(e)}")
    finally:
        os.close(dfd)
    return out


# ---- node records waiting in <runtime>/pending

def pending_records(runtime: str, problems: List[str]) -> List[Dict[str, Any]]:
    dfd = _open_sub(runtime, layout.PENDING_DIR, problems)
    if dfd is None:
        return []
    out = []
    try:
        for n in _entries(dfd, layout.PENDING_DIR + "/", problems):
            m = layout.PENDING_RE.fullmatch(n)
            if not m:
                continue  # pending.deliver() does not look at it either
            rec = {"name": n, "job": int(m.group(1)), "node": m.group(2), "bytes": None,
                   "mtime": None, "problem": None}  # type: Dict[str, Any]
            st = safeio.entry_stat(dfd, n)
            if st is None:
                continue  # delivered meanwhile
            if not stat.S_ISREG(st.st_mode):
                rec["problem"] = "not a regular file: never delivered"
            elif st.st_uid != 0:
                rec["problem"] = f"owned by uid {st.st_uid}: never delivered"
            else:
                rec["bytes"], rec["mtime"] = st.st_size, round(st.st_mtime, 3)
            out.append(rec)
    except OSError as e:
        problems.append(f"{layout.PENDING_DIR}/: {_why(e)}")
    finally:
        os.close(dfd)
    return out


# ---- steps and their agents

AgentAlive = Callable[[int], Optional[bool]]


def agent_alive(agent: Optional[str], proc: str = "/proc") -> AgentAlive:
    """Whether a pid is a running agent (livesteps.agent_checker: its executable
    is the agent root trusts); without a known agent, None for a running
    process (it may be one), False for none."""
    if agent:
        return livesteps.agent_checker(agent, proc)
    return lambda pid: None if safeio.process_running(pid, proc) else False


def steps(runtime: str, alive: AgentAlive, problems: List[str]) -> List[Dict[str, Any]]:
    """The step directories <runtime>/steps/<job>.<step>/ (what
    livesteps.live_step_domains() counts): job, step, the agent's pid from its
    agent.pid, whether that pid is the agent running now."""
    sfd = _open_sub(runtime, layout.STEPS_DIR, problems)
    if sfd is None:
        return []
    out = []
    try:
        for n in _entries(sfd, "steps/", problems):
            m = layout.STEP_DIR_RE.fullmatch(n)
            if not m:
                continue
            st = {"job": int(m.group(1)), "step": m.group(2), "pid": None, "alive": None,
                  "job_running": None}  # type: Dict[str, Any]
            out.append(st)
            try:
                dfd = os.open(n, safeio.O_DIR, dir_fd=sfd)
            except OSError as e:
                lst = safeio.entry_stat(sfd, n)
                why = "is a symlink" if lst is not None and stat.S_ISLNK(lst.st_mode) else \
                    "not a directory" if e.errno == errno.ENOTDIR else _why(e)
                problems.append(f"steps/{printable(n)}: {why}: not read")
                continue
            try:
                dst = os.fstat(dfd)
                if dst.st_uid != 0 or dst.st_mode & 0o022:
                    problems.append(f"steps/{printable(n)}: not root's alone (uid {dst.st_uid}, mode "
                                    f"{stat.S_IMODE(dst.st_mode):04o}): not read")
                    continue
                st["pid"] = livesteps.agent_pid(dfd)
                st["alive"] = alive(st["pid"])
            except FileNotFoundError:
                st["alive"] = False  # no agent started for the step (mode off, profile)
            except (OSError, ValueError) as e:
                problems.append(f"{layout.STEPS_DIR}/{printable(n)}/{layout.AGENT_PID}: "
                                f"{_why(e, layout.AGENT_PID) if isinstance(e, OSError) else e}")
            finally:
                os.close(dfd)
    except OSError as e:
        problems.append(f"steps/: {_why(e)}")
    finally:
        os.close(sfd)
    return out


# ---- the whole view

JobsRunning = Callable[[], Set[int]]


def squeue_jobs() -> Set[int]:
    """Jobs slurmctld does not know as finished (node-prune's question);
    slurm.SlurmError when it cannot tell."""
    return node_prune.live_jobs()


def gather(runtime: str, alive: AgentAlive, jobs: JobsRunning, cgroup_root: str,
           node_name: str, problems: Optional[List[str]] = None,
           now: Optional[float] = None) -> Dict[str, Any]:
    """The status as its JSON object (docs: mpi-pstate-epilog(8), "status")."""
    problems = list(problems or [])
    attention = []  # type: List[str]
    boot = metrics.boot_time()
    out = {"format": FORMAT, "version": VERSION, "node": node_name, "runtime_dir": runtime,
           "time": round(time.time() if now is None else now, 3), "boot": boot,
           "restore_records": [], "pending": [], "steps": [], "agents_running": 0,
           "restore_failures": None, "jobs_known": None, "problems": problems,
           "attention": attention, "status": "ok", "exit": EXIT_OK}  # type: Dict[str, Any]
    try:
        os.close(safeio.open_dir(runtime, trusted={0}))
    except FileNotFoundError:
        pass  # nothing ran here since boot: all well, and all below finds nothing
    except OSError as e:
        attention.append(f"runtime_dir {printable(runtime, 200)} refused: {_why(e)}; the plugin "
                         "and the Epilog refuse it too")
        out.update(status="attention", exit=EXIT_ATTENTION, restore_failures=None)
        return out
    recs = restore_records(runtime, problems)
    steps_ = steps(runtime, alive, problems)
    out["restore_records"], out["steps"] = recs, steps_
    out["pending"] = pending_records(runtime, problems)
    out["agents_running"] = sum(1 for s in steps_ if s["alive"])
    unsure = [s for s in steps_ if s["alive"] is None and s["pid"] is not None]
    if unsure:
        problems.append(f"pid {unsure[0]['pid']} of step {unsure[0]['job']}."
                        f"{unsure[0]['step']} runs, but mpi-pstate-agent is not found: "
                        "whether it is the agent is not known")
    out["restore_failures"] = failcount.read_failures(runtime, boot, problems)
    wanted = {r["job"] for r in recs if r["job"] is not None} | {s["job"] for s in steps_}
    running = {s["job"] for s in steps_ if s["alive"]} | \
        (node_prune.cgroup_jobs(cgroup_root) if wanted else set())
    known = None  # type: Optional[bool]
    if wanted - running:
        try:
            running |= jobs()
            known = True
        except (OSError, slurm.SlurmError) as e:
            known = False
            problems.append(f"which jobs run is not known ({printable(e, 200)}): a record of a job "
                            "neither an agent nor a cgroup of this node shows is unknown")
    out["jobs_known"] = known
    for x in recs + steps_:
        if x["job"] is not None:
            x["job_running"] = True if x["job"] in running else (False if known else None)
    for r in recs:
        if r["problem"]:
            attention.append(f"restore record {r['name']}: {r['problem']}: the agent refuses "
                             "it; inspect it (docs/operations.md, section 1, step 4)")
        elif r["job_running"] is False:
            attention.append(f"restore record {r['name']} of job {r['job']}, which no longer "
                             "runs: put it back with mpi-pstate-agent --restore "
                             f"{printable(runtime, 200)}/restore --job {r['job']}")
    f = out["restore_failures"]
    fails = (f["since_boot"] or 0) - f["acknowledged"]
    if fails > 0:
        attention.append(f"{fails} restore failure{'s' if fails != 1 else ''} since boot"
                         + (f" (and {f['acknowledged']} acknowledged)" if f["acknowledged"]
                            else "") + ": once dealt with, mpi-pstate status --ack")
    if attention:
        out.update(status="attention", exit=EXIT_ATTENTION)
    elif problems:
        out.update(status="unknown", exit=EXIT_UNKNOWN)
    return out


# ---- output

def _when(t: Optional[float]) -> str:
    return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(t)) if t is not None else "?"


def _listed(lines: List[str], items: List[str]) -> None:
    lines += items[:TEXT_LINES]
    if len(items) > TEXT_LINES:
        lines.append(f"  ... {len(items) - TEXT_LINES} more (--json lists them all)")


def _running(v: Optional[bool]) -> str:
    return {True: "job running", False: "job not running", None: "job ?"}[v]


def text(s: Dict[str, Any]) -> str:
    lines = [f"node:             {printable(s['node'])} (runtime_dir {printable(s['runtime_dir'], 200)})"]
    recs = s["restore_records"]
    lines.append(f"restore records:  {len(recs)}")
    _listed(lines, [f"  {r['name']:<16} " + (
        f"PROBLEM: {r['problem']}" if r["problem"] else
        f"job {r['job']} step {r['step']:<6} {r['kind']:<8} {_running(r['job_running'])}"
        + (": LEFT" if r["job_running"] is False else ""))
        for r in recs])
    pend = s["pending"]
    lines.append(f"pending records:  {len(pend)}" + (" (node records waiting for collect_dir; "
                                                     "the next Epilog or node-prune delivers "
                                                     "them)" if pend else ""))
    _listed(lines, [f"  {p['name']:<24} job {p['job']}: " + (
        f"PROBLEM: {p['problem']}" if p["problem"] else
        f"{p['bytes']} bytes, since {_when(p['mtime'])}") for p in pend])
    st = s["steps"]
    lines.append(f"agents:           {s['agents_running']} running, {len(st)} step "
                 f"director{'ies' if len(st) != 1 else 'y'}")
    _listed(lines, [f"  job {x['job']} step {x['step']:<6} " + (
        f"agent pid {x['pid']:<8} " + {True: "running", False: "exited",
                                        None: "? (a process runs)"}[x["alive"]]
        if x["pid"] is not None else "no agent") + f", {_running(x['job_running'])}"
        for x in st])
    f = s["restore_failures"]
    if f is None or f["since_boot"] is None:
        lines.append("restore failures: ? since boot")
    else:
        lines.append(f"restore failures: {f['since_boot']} since boot"
                     + (f" ({f['acknowledged']} acknowledged)" if f["acknowledged"] else "")
                     + (f"; last: job {f['last_job']} at {_when(f['last_time'])}: "
                        f"{f['last_error']}" if f["since_boot"] and f["last_error"] else ""))
    lines += [f"problem: {p}" for p in s["problems"][:TEXT_LINES]]
    if len(s["problems"]) > TEXT_LINES:
        lines.append(f"problem: ... {len(s['problems']) - TEXT_LINES} more")
    lines += [f"ATTENTION: {a}" for a in s["attention"][:TEXT_LINES]]
    lines.append({"ok": "status:           ok",
                  "attention": "status:           needs the admin",
                  "unknown": "status:           not all could be read"}[s["status"]])
    return "\n".join(lines) + "\n"


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--runtime-dir", help="override runtime_dir of the plugstack line")
    p.add_argument("--slurm-conf", help="slurm.conf (default: $SLURM_CONF)")
    p.add_argument("--json", action="store_true", help="one JSON object (mpi-pstate-epilog(8))")
    p.add_argument("--ack", action="store_true", help="the restore failures counted so far "
                   "are dealt with: only later ones make the exit status 1 (writes "
                   f"<runtime_dir>/{layout.FAILURES_FILE})")
    p.add_argument("--cgroup-root", default=layout.CGROUP_ROOT, help=argparse.SUPPRESS)
    p.add_argument("--proc", default="/proc", help=argparse.SUPPRESS)


def run(a: argparse.Namespace, agent_dirs: List[str]) -> int:
    """`mpi-pstate status`: prints the status, returns its exit status."""
    if os.geteuid() != 0:
        print("mpi-pstate status: run it as root (the runtime directory is root's)",
              file=sys.stderr)
        return EXIT_UNKNOWN
    log.setup("mpi-pstate-status", quiet=True)  # find_tool's refusals go to problems
    cfg = siteconf.load(a.slurm_conf, None, a.runtime_dir)
    siteconf.export_slurm_conf(cfg)
    problems = [printable(p, 300) for p in cfg.problems]
    host = siteconf.short_host()
    runtime = siteconf.expand_host(cfg.runtime_dir, host)
    refused = []  # type: List[str]
    agent = node_epilog.find_tool("mpi-pstate-agent", agent_dirs, "MPI_PSTATE_AGENT", cfg.agent,
                                  refused)
    problems += [printable(p, 300) for p in refused]
    alive = agent_alive(agent, a.proc)
    if a.ack:
        seen = failcount.read_failures(runtime, metrics.boot_time(), [])["since_boot"]
        if seen is None:
            print(f"mpi-pstate status: --ack: the failures cannot be read in {printable(runtime)}",
                  file=sys.stderr)
            return EXIT_UNKNOWN
        if seen:
            try:
                failcount.acknowledge(runtime, seen)
            except OSError as e:
                print(f"mpi-pstate status: --ack: {printable(e, 300)}", file=sys.stderr)
                return EXIT_UNKNOWN
    s = gather(runtime, alive, squeue_jobs, a.cgroup_root, host, problems)
    try:
        if a.json:
            print(json.dumps(s, indent=1, sort_keys=True))
        else:
            print(text(s), end="")
    except BrokenPipeError:
        pass
    return s["exit"]
