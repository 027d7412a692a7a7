# SPDX-License-Identifier: BSD-3-Clause
"""The node Epilog (root, once per job on every node of the job, after all
its steps): run the restore backstop, then publish the node's record of the
job into the collection directory.  Always exits 0: a failing Epilog
drains the node, and nothing here is worth that."""
import argparse
import errno
import os
import stat
import re
import signal
import socket
import time
from typing import Any, Callable, Dict, List, Optional, Tuple

from . import delivery, failcount, metrics, pending, rankfigures, stepscan
from ..core import (audit, collect, layout, livesteps, log, noderecord, parse, safeio, siteconf,
                    slurm, steprecords)
from ..model import powermodel

BACKSTOP_TIMEOUT = 30.0


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
        for _, d in stepscan.job_step_dirs(sfd, job):
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
        return bool(stepscan.job_step_dirs(sfd, job))
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


def _settings(a: argparse.Namespace, scan: "stepscan.StepScan", problems: List[str]
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
             uid: int, data: bytes, share: delivery.Share, scan: "stepscan.StepScan",
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
                                            scan_max=stepscan.SHM_SCAN_MAX, cpu_until=scan.shm_until)
        if stopped:
            problems.append(
                f"{a.shm_dir}: the scan for what job {job} left there stopped {stopped} (the "
                f"Epilog's {stepscan.SHM_SCAN_UNTIL_S} s of CPU, {stepscan.SHM_SCAN_MAX} entries): the segments "
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
        scan = stepscan.StepScan(job, uid, node, a.shm_dir)
        stepscan.scan_steps(runtime, job, node, scan)
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
