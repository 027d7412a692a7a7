# SPDX-License-Identifier: BSD-3-Clause
"""The node Epilog's reading of a job's steps on this node: every step
directory of the job under runtime_dir, each step's plugin record, agent
record, sums and log errors, and its ranks' figures from the segments the
plugin listed, all within the Epilog's CPU and memory budgets (what is
past them is counted, not read, and the summary says partial).  Run as
root by site/node_epilog.py; everything read was reachable by the job's
user, so every read is bounded (docs/security.md, "Epilog side")."""
import errno
import json
import os
import stat
import re
import time
from typing import Any, Dict, List, Optional, Tuple

from . import rankfigures
from ..core import layout, noderecord, safeio, steprecords

AGENT_MAX_BYTES = 1 << 20
SUMS_MAX_BYTES = 4 << 10
# CPU seconds the Epilog's reading of slots may take (docs/security.md: the
# root node Epilog stays under 2 s whatever the job's user writes); slots
# past it are not read, their steps still counted, the summary partial.
CPU_BUDGET_S = 1.2
# CPU seconds after which no step file is read at all (a step's sums.json
# costs some 30 us on the project VM: past 20,000 steps; Slurm allows
# 40,000 a job): the rest are counted by their directory names alone, the
# summary partial.  What is left of the 2 s is for the record and removal.
SCAN_BUDGET_S = 1.5
# The scan of shm_dir (/dev/shm) for what the job left there besides the
# segments its steps listed (those are removed by name, whatever the
# budget): anyone can fill the directory, some 1.2 us an entry, so it
# stops SHM_SCAN_UNTIL_S CPU seconds after the step scan began (the same
# clock as the budgets above) or past SHM_SCAN_MAX entries (0.3 s), and
# says so; what it did not reach is `mpi-pstate node-prune`'s.
SHM_SCAN_UNTIL_S = 1.8
SHM_SCAN_MAX = 1 << 18
# Segment names kept for that removal: one a step for Slurm's 40,000 steps.
SEGMENT_NAMES_MAX = 1 << 16
# Rank entries' text the Epilog holds for the record before it details no
# more steps (the record's bound is 16 MiB): memory stays under 100 MiB
# with maximal slots (2 kB a rank, some 13 kB of memory each while held);
# honest ranks (350 bytes) reach MAX_RANKS first.
DETAIL_BYTES = 6 << 20
SUMMED_WHY = (f"over {noderecord.MAX_DETAIL_STEPS} steps, {noderecord.MAX_RANKS} ranks or "
              f"{DETAIL_BYTES >> 20} MiB of rank entries: summed, not detailed")
CUT_WHY = (f"over the Epilog's {CPU_BUDGET_S} s of CPU or {rankfigures.MAX_NODE_RANKS} slots: "
           "summed from the agent's sums")

# agent.log is removed with its step directory: its errors (a restore that
# failed, a domain given up) go into the record's problems first.  Bounded
# because a 1000-step sweep has 1000 logs: the last LOG_TAIL_BYTES of each,
# LOG_BUDGET_BYTES in all, LOG_ERRORS_PER_STEP lines a step.
LOG_TAIL_BYTES = 64 << 10
LOG_BUDGET_BYTES = 1 << 20
LOG_ERRORS_PER_STEP = 4
LOG_ERROR_RE = re.compile(r"mpi-pstate-agent\[\d+\]: (?:job \d+\.\d+: )?error: (.*)")


def job_step_dirs(sfd: int, job: int) -> List[Tuple[str, str]]:
    """(step, directory name) of this job's step directories, in step order."""
    dirs = []
    for n in os.listdir(sfd):
        m = layout.STEP_DIR_RE.fullmatch(n)
        if m and int(m.group(1)) == job:
            dirs.append((m.group(2), n))
    dirs.sort(key=lambda d: (not d[0].isdigit(), int(d[0]) if d[0].isdigit() else 0, d[0]))
    return dirs


class StepScan:
    """The node's view of a job, built one step directory at a time
    (every step counted, whatever their number, in bounded memory): the
    first noderec.MAX_DETAIL_STEPS steps and MAX_RANKS ranks in detail,
    the rest summed into noderec's aggregate; no more than one step's
    slots and records held beyond what the record keeps."""

    def __init__(self, job: int, uid: int, node: str, shm_dir: str) -> None:
        self.job, self.uid, self.node, self.shm_dir = job, uid, node, shm_dir
        self.steps: List[Dict[str, Any]] = []
        self.infos: List[Dict[str, Any]] = []
        self.rest = noderecord.new_rest()
        self.rest_agents: List[Dict[str, Any]] = []
        self.problems: List[str] = []
        self.budget = [rankfigures.MAX_NODE_RANKS]
        self.embed = noderecord.MAX_EMBED_BYTES
        self.nranks = 0
        self.detail_bytes = 0
        self.cpu_until = time.process_time() + CPU_BUDGET_S
        self.scan_until = time.process_time() + SCAN_BUDGET_S
        self.shm_until = time.process_time() + SHM_SCAN_UNTIL_S
        # the segments the step records list, by name: removed without a
        # scan of shm_dir
        self.segment_names: List[str] = []

    def detailing(self) -> bool:
        """Whether the next step may still be detailed (else, summed)."""
        return len(self.infos) < noderecord.MAX_DETAIL_STEPS and \
            self.nranks < noderecord.MAX_RANKS and self.detail_bytes < DETAIL_BYTES

    def add_sums(self, step: str, sums: Dict[str, Any],
                 why: Optional[str] = None) -> None:
        """A step not detailed, from its agent's sums.json: its segment is
        not read (noderec.rest_add_sums)."""
        noderecord.rest_add_sums(self.rest, step, sums, why or SUMMED_WHY)
        self.rest["sums_steps"] += 1
        self.rest_agents.append({"energy": sums["energy"]})

    def add(self, step: str, info: Dict[str, Any]) -> None:
        listed = info.get("segments", [])
        if len(self.segment_names) < SEGMENT_NAMES_MAX:
            self.segment_names += [x["name"] for x in listed[:rankfigures.MAX_SEGMENTS]
                                   if isinstance(x.get("name"), str)]
        agent = info.get("agent") or {}
        sums = info.get("sums")
        room = noderecord.MAX_RANKS - self.nranks
        detail = self.detailing()
        if sums is not None and (not detail or sums["ranks"] > room or
                                 sum(x.get("nslots") or 0 for x in listed) > room):
            self.add_sums(step, sums)  # would not be detailed: its slots are not read
            return
        spent = bool(listed) and (self.budget[0] <= 0 or time.process_time() > self.cpu_until)
        if spent and sums is not None:
            self.add_sums(step, sums, CUT_WHY)
            return
        if spent:
            why = f"over the Epilog's {CPU_BUDGET_S} s of CPU" \
                if time.process_time() > self.cpu_until else \
                f"slots over the node's {rankfigures.MAX_NODE_RANKS}"
            noderecord.rest_add(self.rest, step, [], f"{why}: steps counted, not read",
                                unread=True)
            got: List[Dict[str, Any]] = []
        else:
            got, sprob, _ = rankfigures.job_segments(self.job, self.uid, listed, self.shm_dir,
                                                     self.budget, agent.get("ranks"),
                                                     cpu_until=self.cpu_until,
                                                     keep=noderecord.EncodedRank if detail
                                                     else noderecord.rank_sums)
            cut = [p for p in sprob if "CPU" in p and "not read" in p]
            if cut and sums is not None:  # cut by the CPU bound: the agent's sums count it whole
                self.problems += [p for p in sprob if p not in cut]
                self.add_sums(step, sums, CUT_WHY)
                return
            self.problems += sprob
            if cut:
                noderecord.rest_add(self.rest, step, [], f"over the Epilog's {CPU_BUDGET_S} s of "
                                    "CPU: slots not read")
        n = sum(len(s["ranks"]) for s in got)
        # a step read as sums (not detail) is never detailed; one with no
        # slot read keeps its place for its records (energy, restore)
        if (detail or not got) and len(self.infos) < noderecord.MAX_DETAIL_STEPS and \
                self.nranks + n <= noderecord.MAX_RANKS:
            self.steps += got
            self.nranks += n
            self.detail_bytes += sum(len(r.base) + sum(map(len, r.bulky.values()))
                                     for st in got for r in st["ranks"])
            self.infos.append(self._trim(info))
            return
        for s in got:
            noderecord.rest_add(self.rest, s["step"], s["ranks"], SUMMED_WHY)
        if not got:
            noderecord.rest_add(self.rest, step, [], f"over {noderecord.MAX_DETAIL_STEPS} steps: "
                                "summed, not detailed")
        if agent:
            self.rest_agents.append({"energy": agent.get("energy")})

    def _trim(self, info: Dict[str, Any]) -> Dict[str, Any]:
        """info without the embedded records once the node's budget for
        them is spent (memory: build() would cut them anyway)."""
        out = {"step": info["step"], "agent": info.get("agent"), "plugin": info.get("plugin")}
        if out["agent"]:
            out["agent"] = {k: v for k, v in out["agent"].items() if k != "ranks"}
        for k in ("agent", "plugin"):
            obj = out[k] if k == "plugin" else (out[k] or {}).get("record")
            if obj is None:
                continue
            self.embed -= len(json.dumps(obj, separators=(",", ":")))
            if self.embed < 0:
                if k == "plugin":
                    out[k] = {"truncated": {"budget": noderecord.MAX_EMBED_BYTES}}
                else:
                    out[k] = dict(out[k], record={"truncated": {
                        "budget": noderecord.MAX_EMBED_BYTES}})
        return out


def agent_log_errors(dfd: int, budget: List[int]) -> List[str]:
    """The error lines of a step's agent.log (root's file in root's step
    directory; its tail only, within budget[0] bytes left for all steps),
    control characters removed: what the log said before it is deleted."""
    if budget[0] <= 0:
        return []
    try:
        fd = os.open(layout.AGENT_LOG, safeio.O_READ, dir_fd=dfd)
    except OSError:
        return []
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode) or st.st_uid != 0 or st.st_size == 0:
            return []
        n = min(LOG_TAIL_BYTES, budget[0], st.st_size)
        budget[0] -= n
        data = os.pread(fd, n, st.st_size - n)
    except OSError:
        return []
    finally:
        os.close(fd)
    out: List[str] = []
    for line in data.decode("utf-8", "replace").splitlines():
        m = LOG_ERROR_RE.search(line)
        if m:
            out.append("".join(c for c in m.group(1) if c.isprintable()))
    return out[-LOG_ERRORS_PER_STEP:]


def scan_steps(runtime: str, job: int, node: str, scan: StepScan) -> None:
    """Feeds every step directory of the job on this node to scan, in
    step order: <runtime>/steps/<job>.<step>/{agent,plugin}.json, root-owned
    (spank/paths.h; docs/agent.md)."""
    try:
        sfd = safeio.open_dir(os.path.join(runtime, layout.STEPS_DIR), trusted={0})
    except FileNotFoundError:
        return
    except OSError as e:
        scan.problems.append(f"{os.path.join(runtime, layout.STEPS_DIR)}: {e.strerror}")
        return
    log_budget = [LOG_BUDGET_BYTES]
    try:
        for step, n in job_step_dirs(sfd, job):
            if time.process_time() > scan.scan_until:
                noderecord.rest_add(scan.rest, step, [], f"over the Epilog's {SCAN_BUDGET_S} s of "
                                    "CPU: steps counted by name, not read", unread=True)
                continue
            if not scan.detailing():
                sums = step_sums(sfd, n, step, node, scan.problems, log_budget)
                if sums is not None:
                    scan.add_sums(step, sums)
                    continue
            info = step_dir(sfd, n, step, node, scan.problems, log_budget)
            if info is not None:
                scan.add(step, info)
    finally:
        os.close(sfd)


def read_step_file(dfd: int, fname: str, max_bytes: int) -> bytes:
    """A root-owned file of a step directory (safeio.read_file); an empty
    agent record (layout.AGENT_RECORDS) raises FileNotFoundError, as a missing
    one does, so that every reader takes it for one."""
    data = safeio.read_file(dfd, fname, max_bytes, owners={0})
    if not data and fname in layout.AGENT_RECORDS:
        raise FileNotFoundError(errno.ENOENT, "empty: not written by the agent", fname)
    return data


def step_dir(sfd: int, n: str, step: str, node: str, problems: List[str],
             log_budget: Optional[List[int]] = None) -> Optional[Dict[str, Any]]:
    try:
        dfd = os.open(n, safeio.O_DIR, dir_fd=sfd)
    except OSError as e:
        problems.append(f"step directory {n}: {e.strerror}")
        return None
    info: Dict[str, Any] = {"step": step, "agent": None, "plugin": None, "segments": []}
    try:
        st = os.fstat(dfd)
        if st.st_uid != 0 or st.st_mode & 0o022:
            problems.append(f"step directory {n}: not root's, ignored")
            return None
        for fname in layout.STEP_RECORDS:
            try:
                data = read_step_file(dfd, fname, AGENT_MAX_BYTES)
                if fname == layout.AGENT_JSON:
                    info["agent"] = steprecords.parse_agent(data, node, default_step=step)
                else:
                    info["plugin"] = steprecords.parse_plugin(data, node)
                    if info["plugin"] is not None:  # this node's: the segments it lists
                        info["segments"] = steprecords.plugin_segments(noderecord.decode(data), step,
                                                                      problems)
            except FileNotFoundError:
                continue
            except (OSError, ValueError, UnicodeDecodeError) as e:
                problems.append(f"{n}/{fname}: {getattr(e, 'strerror', None) or e}")
        info["sums"] = read_sums(dfd, n, node, problems)
        if log_budget is not None:
            problems += [f"step {step} agent: {e}" for e in agent_log_errors(dfd, log_budget)]
    finally:
        os.close(dfd)
    return info if info["agent"] or info["plugin"] else None


def read_sums(dfd: int, n: str, node: str, problems: List[str]) -> Optional[Dict[str, Any]]:
    """The step's sums.json (noderec.parse_sums), root's; None without one
    (an agent killed, or from before sums; an empty one: created, never
    written), or with one not of this node."""
    try:
        return steprecords.parse_sums(read_step_file(dfd, layout.SUMS_JSON, SUMS_MAX_BYTES), node)
    except FileNotFoundError:
        return None
    except (OSError, ValueError, UnicodeDecodeError) as e:
        problems.append(f"{n}/{layout.SUMS_JSON}: {getattr(e, 'strerror', None) or e}")
        return None


def step_sums(sfd: int, n: str, step: str, node: str, problems: List[str],
              log_budget: List[int]) -> Optional[Dict[str, Any]]:
    """A step past the detail bound, the cheap way: its sums.json alone
    (and its agent.log when the agent counted errors in it), or None, and
    the caller reads the step whole."""
    try:
        dfd = os.open(n, safeio.O_DIR, dir_fd=sfd)
    except OSError as e:
        problems.append(f"step directory {n}: {e.strerror}")
        return None
    try:
        st = os.fstat(dfd)
        if st.st_uid != 0 or st.st_mode & 0o022:
            return None  # step_dir() says why
        sums = read_sums(dfd, n, node, problems)
        if sums is not None and sums["log_errors"]:
            problems += [f"step {step} agent: {e}" for e in agent_log_errors(dfd, log_budget)]
        return sums
    finally:
        os.close(dfd)
