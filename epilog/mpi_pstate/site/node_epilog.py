# SPDX-License-Identifier: BSD-3-Clause
"""The node Epilog (root, once per job on every node of the job, after all
its steps): run the restore backstop, then publish the node's record of the
job into the collection directory.  Always exits 0: a failing Epilog
drains the node, and nothing here is worth that."""
import argparse
import errno
import json
import os
import stat
import re
import signal
import socket
import time
from typing import Any, Callable, Dict, List, Optional, Tuple

from . import delivery, failcount, metrics, pending, rankfigures
from ..core import (audit, collect, layout, livesteps, log, noderecord, parse, safeio, siteconf,
                    slurm, steprecords)
from ..model import powermodel

AGENT_MAX_BYTES = 1 << 20
SUMS_MAX_BYTES = 4 << 10
BACKSTOP_TIMEOUT = 30.0
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


def find_tool(name: str, dirs: List[str], env: Optional[str] = None,
              given: Optional[str] = None, refused: Optional[List[str]] = None
              ) -> Optional[str]:
    """The program root or SlurmUser runs: `given` (a configured path, e.g.
    agent=), else $env (from a source checkout only: safeio.env_override),
    else the first dirs/name that exists.  Each must pass the plugin's
    trusted-path rule (safeio.trusted_exec); why one did not goes to
    refused, and the next is tried."""
    cands = [given] if given else []
    override = safeio.env_override(env, privileged=True) if env else None
    cands += [override] if override else [os.path.join(d, name) for d in dirs if d]
    for p in cands:
        try:  # a relative $MPI_PSTATE_BUILD (a checkout's build-24) is the caller's cwd's
            return safeio.trusted_exec(os.path.abspath(p))
        except safeio.Missing:
            continue
        except OSError as e:
            if refused is not None:
                refused.append(f"{name} not run: {e.strerror}")
    return None


def backstop(agent: Optional[str], restore_dir: str, job: int,
             refused: Optional[List[str]] = None) -> Dict[str, Any]:
    """Every core this job still holds back to its saved state, through the
    agent's own restore code (one implementation of restore).  Without an
    agent the record says why: the trust rule's refusal, when there was one,
    not "not installed" (an admin would look for a missing file)."""
    if not agent:
        why = "; ".join(refused) if refused else "mpi-pstate-agent not installed"
        return {"status": "skipped", "why": noderecord.clip(why)}
    t0 = time.monotonic()
    try:
        r = slurm.run([agent, "--restore", restore_dir, "--job", str(job)],
                      timeout=BACKSTOP_TIMEOUT)
    except slurm.SlurmError as e:
        return {"status": "failed", "why": noderecord.clip(e)}
    out = {"status": "ok" if r.returncode == 0 else "failed", "rc": r.returncode,
           "seconds": round(time.monotonic() - t0, 3)}
    msg = (r.stderr.strip() or r.stdout.strip()).splitlines()
    if msg:
        out["message"] = noderecord.clip(msg[-1])
    return out


AGENT_STOP_S = 2.0
CMDLINE_MAX = 64 << 10


def stop_leftover_agents(agent: str, job: int, proc: str = "/proc") -> List[str]:
    """Agents of this job still running when its Epilog starts: the plugin
    stops each at its step's end, so one here outlived that (a slurmstepd
    killed, a plugin that lost track of it).  Each is stopped (SIGTERM, then
    SIGKILL after AGENT_STOP_S) before the backstop restores, so none lowers
    a core after it.  An agent is a process whose executable is the agent
    the Epilog trusts and whose command line has "--job <job>"; nothing else
    is signalled.  Returns what was done, for the record's problems."""
    exe = os.path.realpath(agent)
    found: List[int] = []
    try:
        names = os.listdir(proc)
    except OSError:
        return []
    for n in names:
        if not n.isdigit() or int(n) == os.getpid():
            continue
        try:
            if os.readlink(os.path.join(proc, n, "exe")) != exe:
                continue
            with open(os.path.join(proc, n, "cmdline"), "rb") as f:
                args = f.read(CMDLINE_MAX).split(b"\0")
        except OSError:  # gone, or a kernel thread
            continue
        if any(args[i] == b"--job" and args[i + 1] == str(job).encode()
               for i in range(len(args) - 1)):
            found.append(int(n))
    done: List[str] = []
    for pid in found:
        try:
            os.kill(pid, signal.SIGTERM)
        except OSError:
            continue
        end = time.monotonic() + AGENT_STOP_S
        how = "stopped"
        while safeio.process_running(pid, proc):
            if time.monotonic() > end:
                try:
                    os.kill(pid, signal.SIGKILL)
                except OSError:
                    pass
                how = "killed (ignored SIGTERM)"
                break
            time.sleep(0.02)
        done.append(f"agent {pid} of job {job} outlived its step: {how}")
    return done


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


def remove_step_dirs(runtime: str, job: int) -> Tuple[int, List[str]]:
    """Deletes the job's <runtime>/steps/<job>.<step>/ once read (nobody
    else does: agent.json and agent.log would stay for ever): the files in each
    (root's directory: root wrote them; no sub-directory is entered, a
    symlink is unlinked, never followed), then the directory."""
    problems: List[str] = []
    n = 0
    try:
        sfd = safeio.open_dir(os.path.join(runtime, layout.STEPS_DIR), trusted={0})
    except OSError as e:
        return 0, [] if e.errno == errno.ENOENT else [f"{os.path.join(runtime, layout.STEPS_DIR)}: {e.strerror}"]
    try:
        for _, d in job_step_dirs(sfd, job):
            # The usual directory goes in 6 system calls (a 10,000-step job:
            # half the Epilog's time went into the listing way below): its
            # known files by name, then rmdir; anything else, the long way.
            try:
                st = os.stat(d, dir_fd=sfd, follow_symlinks=False)
                if stat.S_ISDIR(st.st_mode) and st.st_uid == 0:
                    for f in layout.STEP_KNOWN_FILES:
                        try:
                            os.unlink(f"{d}/{f}", dir_fd=sfd)
                        except FileNotFoundError:
                            pass
                    os.rmdir(d, dir_fd=sfd)
                    n += 1
                    continue
            except OSError:
                pass
            try:
                dfd = os.open(d, safeio.O_DIR, dir_fd=sfd)
            except OSError as e:
                problems.append(f"step directory {d}: {e.strerror}")
                continue
            try:
                if os.fstat(dfd).st_uid != 0:
                    problems.append(f"step directory {d}: not root's, left")
                    continue
                for f in os.listdir(dfd)[:4096]:
                    st = safeio.entry_stat(dfd, f)
                    if st is not None and not stat.S_ISDIR(st.st_mode):
                        os.unlink(f, dir_fd=dfd)
            except OSError as e:
                problems.append(f"step directory {d}: {e.strerror}")
            finally:
                os.close(dfd)
            try:
                os.rmdir(d, dir_fd=sfd)
                n += 1
            except OSError as e:
                problems.append(f"step directory {d} not removed: {e.strerror}")
    finally:
        os.close(sfd)
    return n, problems


def restore_records(runtime: str) -> Optional[int]:
    """How many records <runtime>/restore holds (the agent and the plugin
    remove theirs once restored); None when it cannot tell."""
    try:
        return sum(1 for n in os.listdir(os.path.join(runtime, layout.RESTORE_DIR))
                   if not n.startswith("."))
    except FileNotFoundError:
        return 0
    except OSError:
        return None


def restore_pending(runtime: str) -> bool:
    """Whether the backstop has work; when that cannot be told, yes: the
    agent's own checks decide."""
    return restore_records(runtime) != 0


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


def plugin_ran(runtime: str, job: int) -> bool:
    """Whether the plugin did anything for this job on this node: a step
    directory of the job (the plugin makes one for every step it is on
    for).  Without one the Epilog writes nothing: a job the plugin was off
    for costs the node and collect_dir nothing."""
    try:
        sfd = safeio.open_dir(os.path.join(runtime, layout.STEPS_DIR), trusted={0})
    except OSError:
        return False
    try:
        return bool(job_step_dirs(sfd, job))
    finally:
        os.close(sfd)


def job_env() -> Tuple[int, str, int, Dict[str, Any]]:
    job = parse.slurm_job_id()
    node = os.environ.get("SLURMD_NODENAME") or socket.gethostname().split(".")[0]
    parse.safe_name(node)
    uid = int(parse.u64(os.environ.get("SLURM_JOB_UID", ""), 0, 0xFFFFFFFE))
    extra: Dict[str, Any] = {}
    for k, env in (("array_job", "SLURM_ARRAY_JOB_ID"), ("array_task", "SLURM_ARRAY_TASK_ID")):
        v = os.environ.get(env)
        if v and v.isdigit() and len(v) < 11:
            extra[k] = int(v)
    # Slurm 25.11+: the job's id unique across clusters and id wrap-arounds
    sluid = os.environ.get("SLURM_JOB_SLUID", "")
    if re.fullmatch(r"[0-9A-Za-z_-]{1,40}", sluid):
        extra["sluid"] = sluid
    return job, node, uid, extra


def _restore(agent: Optional[str], runtime: str, job: int, refused: List[str]
             ) -> Dict[str, Any]:
    """The restore backstop, when a restore record is left, and its log."""
    if restore_pending(runtime):
        restore = backstop(agent, os.path.join(runtime, layout.RESTORE_DIR), job, refused)
    else:
        restore = {"status": "ok", "why": "nothing to restore"}
    if restore["status"] == "failed":
        log.error(f"restore backstop failed: {restore}")
    elif restore["status"] == "skipped":
        log.info(f"restore backstop skipped: {restore['why']}")
    return restore


def _settings(a: argparse.Namespace, scan: "StepScan", problems: List[str]
              ) -> Optional[Dict[str, Any]]:
    """The node's settings for the record, with `mpi-pstate calibrate`'s
    model (for report --what-if); None when the job left no data here."""
    has_data = scan.steps or scan.infos or scan.rest_agents or scan.rest["steps"]
    settings = audit.node_settings(a.sysroot) if has_data else None
    if settings is not None:
        try:
            pm = powermodel.model_for_record()
            if pm:
                settings["power_model"] = pm
        except (OSError, ValueError) as e:
            problems.append(f"power model: {e}")
    return settings


def _deliver(a: argparse.Namespace, cfg: siteconf.Config, runtime: str, job: int, node: str,
             uid: int, data: bytes, share: delivery.Share, scan: "StepScan",
             problems: List[str]) -> str:
    """Publishes the record, else keeps it for a later pass, then removes
    the job's segments (the ones scan knows by name, then what a bounded
    scan of shm_dir finds: a scan stopped at its bound is one line added
    to problems) and step directories; says which it did."""
    done = "published"
    told = share.failed is not None  # the pending pass has said why already
    try:
        publish(cfg, job, node, data, uid, share=share)
    except OSError as e:
        done = "kept for a later pass"
        # collect_dir full, missing, hung, unsafe: the record waits in
        # <runtime>/pending for a later pass (the next Epilog here,
        # `mpi-pstate node-prune`); only if it cannot even wait there
        # are the segments and step directories kept
        if not told:
            log.error(f"publishing the record of job {job} failed: {e.strerror or e}: "
                      "kept for a later pass")
        pending.keep(runtime, job, node, data)
    if not a.keep_segments:
        n, stopped = rankfigures.remove_job(job, a.shm_dir, scan.segment_names,
                                            scan_max=SHM_SCAN_MAX, cpu_until=scan.shm_until)
        if stopped:
            problems.append(
                f"{a.shm_dir}: the scan for what job {job} left there stopped {stopped} (the "
                f"Epilog's {SHM_SCAN_UNTIL_S} s of CPU, {SHM_SCAN_MAX} entries): the segments "
                f"its steps listed ({len(set(scan.segment_names))}) were removed by name; the "
                "entries past those scanned are left for `mpi-pstate node-prune`")
        _, rprob = remove_step_dirs(runtime, job)
        for p in rprob[:4]:
            log.warning(p)
        if n:
            log.info(f"{n} segments of job {job} removed")
    return done


def run(a: argparse.Namespace, tools: Dict[str, List[str]]) -> int:
    t0 = time.monotonic()
    env = log.setup_job("mpi-pstate-epilog", "node epilog", a.quiet, job_env, lambda e: e[0])
    if env is None:
        return 0
    job, node, uid, extra = env
    try:
        cfg = siteconf.load(a.slurm_conf, a.collect_dir, a.runtime_dir)
        siteconf.export_slurm_conf(cfg)
        for p in cfg.problems:
            log.warning(p)
        runtime = siteconf.expand_host(cfg.runtime_dir, siteconf.short_host())
        refused: List[str] = []
        agent = find_tool("mpi-pstate-agent", tools["agent"], "MPI_PSTATE_AGENT", cfg.agent,
                          refused)
        for p in refused:
            log.error(p)
        if os.environ.get("MPI_PSTATE_EPILOG_CACHE") and not a.runtime_dir:
            write_cache(os.environ["MPI_PSTATE_EPILOG_CACHE"], runtime, cfg.sources)
        ran = plugin_ran(runtime, job)
        leftover = stop_leftover_agents(agent, job) if agent and ran else []
        for p in leftover:
            log.error(p)
        restore = _restore(agent, runtime, job, refused)
        share = share_of(cfg)
        for p in pending.deliver(runtime, lambda j, n, d: publish(cfg, j, n, d, share=share)):
            log.warning(p)
        failed = int(restore["status"] == "failed")
        if not ran:
            failcount.note_epilog(runtime, job, failed, restore, leftover)
            node_metrics(cfg, runtime, a.sysroot, agent, failed)
            return 0  # the plugin was off for this job here: nothing to say
        scan = StepScan(job, uid, node, a.shm_dir)
        scan_steps(runtime, job, node, scan)
        problems = leftover + scan.problems
        rec = noderecord.build(job, node, uid, settings=_settings(a, scan, problems),
                               steps=scan.steps, infos=scan.infos, restore=restore,
                               problems=problems, written=time.time(), extra_job=extra or None,
                               meter=meter_here(a.sysroot), rest=scan.rest,
                               rest_agents=scan.rest_agents)
        data = noderecord.encode(rec)
        late: List[str] = []  # the removal's, after the record was made
        done = _deliver(a, cfg, runtime, job, node, uid, data, share, scan, late)
        for p in problems[:8] + late:
            log.warning(p)
        problems += late
        failed += restore_failures(scan.infos)
        failcount.note_epilog(runtime, job, failed, restore, problems)
        node_metrics(cfg, runtime, a.sysroot, agent, failed)
        log.info(f"node {node}: record of job {job} {done}: status {rec['status']}, "
                 f"{len(rec['ranks'])} ranks in {len(rec['steps'])} steps"
                 + (f" (+{rec['rest']['steps']} steps summed)" if rec.get("rest") else "")
                 + f", energy "
                 f"{rec['energy']['status']}, {len(problems)} problems, {len(data)} bytes, "
                 f"{time.monotonic() - t0:.2f} s")
    except Exception as e:  # never fail the Epilog: it would drain the node
        log.error(f"node epilog of job {job} failed: {type(e).__name__}: {e}")
    return 0


def restore_failures(infos: List[Dict[str, Any]]) -> int:
    """Domains the job's agents failed to put back, from their records."""
    n = 0
    for i in infos:
        rec = (i.get("agent") or {}).get("record")
        failed = (rec.get("restore") or {}).get("failed") if isinstance(rec, dict) else None
        if isinstance(failed, int) and not isinstance(failed, bool) and 0 < failed < 1 << 20:
            n += failed
    return n


def node_gauges(cfg: siteconf.Config, runtime: str, sysroot: str,
                agent_alive: Callable[[int], bool], failures_add: int = 0,
                now: Optional[float] = None) -> str:
    """This node's Prometheus gauges written into metrics_dir; the text."""
    agents, doms = livesteps.live_step_domains(runtime, agent_alive)
    down = sum(metrics.is_down(sysroot, d) for d in doms)
    return metrics.write_node(cfg, runtime, agents, down, restore_records(runtime) or 0,
                              failures_add, now)


def node_metrics(cfg: siteconf.Config, runtime: str, sysroot: str, agent: Optional[str],
                 failures: int) -> None:
    """The node's Prometheus gauges (metrics_dir=), now that the job is
    gone from it; never the Epilog's failure."""
    if not cfg.metrics_dir:
        return
    try:
        node_gauges(cfg, runtime, sysroot, livesteps.agent_checker(agent), failures)
    except (OSError, ValueError) as e:
        log.warning(f"node metrics not written to {cfg.metrics_dir}: {e}")


def write_cache(path: str, runtime: str, sources: List[str]) -> None:
    """The fast path's cache (epilog/mpi-pstate-epilog.in): the runtime
    directory, the SLURM_CONF it was resolved under, the files it was
    resolved from.  Only in a root-owned directory; never fatal."""
    try:
        lines = [runtime, "conf=" + os.environ.get("SLURM_CONF", "")]
        lines += [s for s in dict.fromkeys(sources) if os.path.exists(s)]
        if any("\n" in x for x in lines):
            return
        dfd = safeio.open_dir(os.path.dirname(path), trusted={0})
        try:
            name = os.path.basename(path)
            safeio.write_atomic(dfd, name, ("\n".join(lines) + "\n").encode(), mode=0o644)
            # 2 s in the past: a file changed in the same second as this
            # write still reads as newer in the shell's -nt (whole seconds)
            t = time.time() - 2
            os.utime(name, (t, t), dir_fd=dfd, follow_symlinks=False)
        finally:
            os.close(dfd)
    except OSError as e:
        log.warning(f"{path}: {e}")


def meter_here(sysroot: str) -> str:
    """noderec.rapl_meter() of this node (mountinfo read bounded, 4 MiB)."""
    try:
        with open("/proc/self/mountinfo", "rb") as f:
            text = f.read(4 << 20).decode("utf-8", "replace")
    except OSError:
        text = ""
    return steprecords.rapl_meter(os.path.realpath(sysroot), text)


def share_of(cfg: siteconf.Config) -> delivery.Share:
    """collect_dir for one pass of this node (delivery.py)."""
    return delivery.Share(cfg.collect_dir, cfg.slurm_uid,
                          delivery.deadline(cfg.publish_timeout_s, cfg.epilog_timeout_s))


def publish(cfg: siteconf.Config, job: int, node: str, data: bytes,
            uid: Optional[int] = None, share: Optional[delivery.Share] = None) -> None:
    """Writes the node record into the job's directory of collect_dir (made
    private to the job's user, uid or the record's own, under PrivateData),
    as SlurmUser and within the pass's deadline (delivery.py); raises
    OSError (ShareUnusable) when it could not."""
    owner = cfg.slurm_uid
    if cfg.private_jobs and uid is None:
        uid = noderecord.head_uid(data)

    def work() -> List[str]:
        try:
            cfd = collect.open_collect(cfg.collect_dir, trusted={0, owner})
        except OSError as e:
            if e.errno == errno.ENOENT:
                raise OSError(errno.ENOENT, f"{e.strerror}: is the share mounted? (a node "
                              "never creates collect_dir)") from None
            raise
        problems: List[str] = []
        try:
            jfd = collect.open_job_dir(cfd, job, trusted={0, owner}, create=True,
                                       private=cfg.private_jobs, reader=uid, problems=problems)
            assert jfd is not None
            try:
                safeio.write_atomic(jfd, collect.node_file(node), data, mode=0o644)
            finally:
                os.close(jfd)
        except PermissionError as e:
            raise OSError(errno.EACCES, f"{e.strerror}: collect_dir must be SlurmUser's "
                          f"(uid {owner}); a root-owned one is often an unmounted share's "
                          "mount point") from None
        finally:
            os.close(cfd)
        return problems

    for p in (share or share_of(cfg)).write(work):
        log.warning(p)
