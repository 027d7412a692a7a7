# SPDX-License-Identifier: BSD-3-Clause
"""Prometheus metrics the way node_exporter takes batch data: files for its
textfile collector (--collector.textfile.directory), the directory the
plugstack key metrics_dir= names (docs/watching.md).  Files rather than an
exporter of our own: the figures are born in short-lived programs (the
summaries' flusher on the controller, the node Epilog), node_exporter is
already run and secured by sites, and a listener of ours would be one more
root-side service to harden for no gain.

On the controller the flusher writes one file a finished job
(mpi_pstate_job_<id>.prom) and the queue's gauges (mpi_pstate_queue.prom).
A job's file is deleted KEEP_S after it was written, and past MAX_JOBS files
the oldest go first: what one scrape returns stays bounded however many jobs
end.  Prometheus keeps what it scraped: totals per user, account and
partition are PromQL over the per-job series (docs/watching.md).

On every node the Epilog and `mpi-pstate node-metrics` (run by a timer)
write mpi_pstate_node.prom: agents running, domains clocked down now,
restore records held, restore failures since boot.

Python 3.6: the flusher and the node Epilog import this."""
import json
import os
import re
import stat
import time
from typing import Any, Dict, Iterable, List, Optional, Sequence, Tuple

from ..core import layout, safeio, siteconf
from ..model import carbon

KEEP_S = 3600.0
MAX_JOBS = 2000
LABEL_MAX = 128

JOB_LABELS = ("jobid", "user", "account", "partition")

# (name, help, what it is taken from: a summary key, or a function of the
# summary and the job's carbon figures).  Names follow Prometheus' rules
# (base units, _ratio for 0-1 shares) and, like jobstats and CEEMS, label
# each job's series with its id, user, account and partition.
JOB_METRICS = (
    ("mpi_ratio", "Share of the ranks' time spent inside MPI calls (0-1).", "mpi_share"),
    ("down_ratio", "Share of the ranks' time their cores were clocked down (0-1).",
     "down_share"),
    ("wall_seconds", "The job's wall time.", "wall_s"),
    ("mpi_seconds", "Rank-seconds inside MPI calls, summed over ranks.", "mpi_s"),
    ("wait_seconds", "Rank-seconds waiting in blocking MPI calls, summed over ranks.",
     "wait_s"),
    ("down_seconds", "Rank-seconds clocked down, summed over ranks.", "down_s"),
    ("transitions", "Clock changes (lowerings and raisings) made for the job.", "transitions"),
    ("ranks", "Distinct MPI ranks (the most one step had).", "ranks"),
    ("nodes", "Nodes that reported the job.", "nodes"),
    ("steps", "Job steps counted.", "steps"),
    ("energy_joules", "Energy the job's nodes used, as measured (see mpi_pstate_job_info's "
     "energy_src).", lambda s, c: s.get("energy_j") if s.get("energy") == "ok" else None),
    ("saved_joules", "Energy saved by clocking down, estimated after the fact.",
     lambda s, c: _bound(s.get("saved_j"), 0)),
    ("saved_low_joules", "Low bound of mpi_pstate_job_saved_joules.",
     lambda s, c: _bound(s.get("saved_j"), 1)),
    ("saved_high_joules", "High bound of mpi_pstate_job_saved_joules.",
     lambda s, c: _bound(s.get("saved_j"), 2)),
    ("full_clock_joules", "Energy the job would have used at full clock (estimate).",
     lambda s, c: _bound(s.get("full_j"), 0)),
    ("time_added_seconds", "Wall time the raises added on the critical path (estimate).",
     lambda s, c: _bound(s.get("time_added_s"), 0)),
    ("carbon_grams", "Grams of CO2 of the energy measured, at the site's carbon_g_per_kwh.",
     lambda s, c: c.get("spent_g") if c else None),
    ("carbon_saved_grams", "Grams of CO2 saved, at the site's carbon_g_per_kwh.",
     lambda s, c: _bound(c.get("saved_g"), 0) if c else None),
    ("agent_capped_seconds", "Seconds the node agents of the job spent at their CPU "
     "ceiling, summed over nodes and steps.", "agent_capped_s"),
    ("written_timestamp_seconds", "When the job's figures were written (Unix time).", "_written"),
)
INFO_LABELS = ("state", "job_state", "energy_src", "saved_src")


def _bound(v: Any, i: int) -> Optional[float]:
    """One of an (est, low, high) triple; a plain number stands for all three."""
    if isinstance(v, list) and len(v) == 3:
        v = v[i]
    return v if isinstance(v, (int, float)) and not isinstance(v, bool) else None


def escape(value: Any) -> str:
    """A label value as the text format wants it, clipped."""
    text = str(value)[:LABEL_MAX]
    return text.replace("\\", "\\\\").replace("\"", "\\\"").replace("\n", "\\n")


def _labels(pairs: Sequence[Tuple[str, Any]]) -> str:
    return "{" + ",".join(f'{k}="{escape(v)}"' for k, v in pairs) + "}"


def _number(v: Any) -> Optional[str]:
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        return None
    if isinstance(v, float) and v != v:
        return None
    return repr(float(v)) if isinstance(v, float) else str(v)


def family(name: str, help_text: str, kind: str,
           samples: Iterable[Tuple[str, Any]]) -> List[str]:
    """One metric family in the text format (samples: label text, value);
    none at all when no sample has a value."""
    lines = [f"{name}{lab} {txt}" for lab, txt in ((lab, _number(v)) for lab, v in samples)
             if txt is not None]
    if not lines:
        return []
    return [f"# HELP {name} {help_text}", f"# TYPE {name} {kind}"] + lines


def job_text(job: int, s: Dict[str, Any], labels: Dict[str, str],
             carbon_cfg: Tuple[Optional[float], Dict[str, float]] = (None, {}),
             written: Optional[float] = None) -> str:
    """A finished job's metrics (mpi_pstate_job_<id>.prom) from its summary.
    labels: user, account, partition."""
    base = [("jobid", job)] + [(k, labels.get(k, "")) for k in JOB_LABELS[1:]]
    lab = _labels(base)
    cf = carbon.figures(s, carbon.intensity(carbon_cfg, labels.get("partition", "")))
    vals = dict(s, _written=round(written if written is not None else time.time(), 3))
    out = family("mpi_pstate_job_info", "A job summarised by mpi-pstate; its state and where "
                 "its energy figures come from are labels.", "gauge",
                 [(_labels(base + [(k, s.get(k) or "") for k in INFO_LABELS]), 1)])
    for name, help_text, src in JOB_METRICS:
        v = src(s, cf) if callable(src) else vals.get(src)
        out += family(f"mpi_pstate_job_{name}", help_text, "gauge", [(lab, v)])
    return "\n".join(out) + "\n"


def capped_seconds(detail: Dict[str, Any]) -> Optional[float]:
    """Seconds the job's agents spent at their CPU ceiling, from the agent
    records the nodes embedded (None when no record says)."""
    total, seen = 0.0, False
    for rec in (detail.get("nodes") or {}).values():
        for st in (rec.get("steps") or []) if isinstance(rec, dict) else []:
            a = ((st.get("agent") or {}).get("agent") or {}) if isinstance(st, dict) else {}
            ms = a.get("capped_ms") if isinstance(a, dict) else None
            if isinstance(ms, int) and not isinstance(ms, bool) and ms >= 0:
                total += ms / 1000.0
                seen = True
    return round(total, 3) if seen else None


def open_dir(cfg: siteconf.Config, owners: Iterable[int]) -> int:
    """metrics_dir, this host's: the directory itself root's (or one of
    owners') and writable by nobody else, reached without a symlink; its
    parents may be anyone's (Debian's /var/lib/prometheus is prometheus')
    but writable by no one else unless sticky."""
    assert cfg.metrics_dir
    path = siteconf.expand_host(cfg.metrics_dir, siteconf.short_host())
    return safeio.open_dir(path, trusted=None, final_owner=set(owners) | {0})


def write_job(cfg: siteconf.Config, job: int, s: Dict[str, Any], labels: Dict[str, str],
              now: Optional[float] = None) -> None:
    """Publishes a finished job's metrics and ages out the old ones.
    Raises OSError (safeio.UnsafeFile) or ValueError."""
    now = time.time() if now is None else now
    fd = open_dir(cfg, {cfg.slurm_uid, os.geteuid()})
    try:
        text = job_text(job, s, labels, cfg.carbon, now)
        safeio.write_atomic(fd, layout.job_metrics_file(job), text.encode(), mode=0o644)
        prune_jobs(fd, now)
    finally:
        os.close(fd)


def prune_jobs(fd: int, now: float, keep_s: float = KEEP_S, max_jobs: int = MAX_JOBS) -> int:
    """Deletes the job files older than keep_s, then the oldest past
    max_jobs, and temporaries a dead writer left.  Returns how many went."""
    files = []
    for n in os.listdir(fd):
        if layout.JOB_METRICS_RE.fullmatch(n):
            st = safeio.entry_stat(fd, n)
            if st is not None and stat.S_ISREG(st.st_mode):
                files.append((st.st_mtime, n))
    files.sort()
    old = [n for t, n in files if now - t > keep_s]
    rest = [n for t, n in files if now - t <= keep_s]
    gone = 0
    for n in old + rest[:max(0, len(rest) - max_jobs)]:
        try:
            os.unlink(n, dir_fd=fd)
            gone += 1
        except OSError:
            pass
    return gone + safeio.remove_stale_tmp(fd, 600.0)


def queue_text(queued: Sequence[float], now: float) -> str:
    """The summaries waiting to be written: how many, and since when (a
    timestamp, so that an alert fires even when no flusher runs to update
    this file)."""
    out = family("mpi_pstate_summaries_queued", "Jobs whose summary is not written yet.",
                 "gauge", [("", len(queued))])
    out += family("mpi_pstate_summaries_oldest_queued_timestamp_seconds",
                  "When the oldest job still waiting for its summary was queued (Unix time).",
                  "gauge", [("", round(min(queued), 3))] if queued else [])
    out += family("mpi_pstate_summaries_updated_timestamp_seconds",
                  "When the summaries' flusher last looked at its queue (Unix time).", "gauge",
                  [("", round(now, 3))])
    return "\n".join(out) + "\n"


def write_queue(cfg: siteconf.Config, queued: Sequence[float], now: Optional[float] = None) -> None:
    fd = open_dir(cfg, {cfg.slurm_uid, os.geteuid()})
    try:
        safeio.write_atomic(fd, layout.QUEUE_METRICS_FILE, queue_text(queued, time.time() if now is None
                                                       else now).encode(), mode=0o644)
    finally:
        os.close(fd)


# ---- node gauges

def _read_small(dfd: int, name: str, limit: int) -> Optional[bytes]:
    try:
        return safeio.read_file(dfd, name, limit, owners={0})
    except (OSError, ValueError):
        return None


def is_down(sysroot: str, dom: Dict[str, Any]) -> bool:
    """A domain of a step's record (plugin.json "domains") that the step
    set is below the step's own full clock now."""
    up, policy = dom.get("max_khz"), dom.get("policy")
    if dom.get("status") != "set" or not isinstance(up, int) or not isinstance(policy, str) \
            or not re.fullmatch(r"policy[0-9]{1,5}", policy):
        return False
    pdir = os.path.join(sysroot, "devices/system/cpu/cpufreq", policy)

    def khz(name: str) -> Optional[int]:
        text = safeio.read_sysfs(os.path.join(pdir, name))
        return int(text) if text is not None and text.strip().isdigit() else None
    cap = khz("scaling_max_freq")
    if cap is not None and cap < up:
        return True
    gov = safeio.read_sysfs(os.path.join(pdir, "scaling_governor"))
    speed = khz("scaling_setspeed") if gov is not None and gov.strip() == "userspace" else None
    return speed is not None and speed < up


def boot_time(proc: str = "/proc") -> Optional[int]:
    try:
        with open(os.path.join(proc, "stat"), "rb") as f:
            for line in f.read(1 << 16).splitlines():
                if line.startswith(b"btime "):
                    return int(line.split()[1])
    except (OSError, ValueError, IndexError):
        pass
    return None


def node_failures(runtime: str, add: int = 0) -> int:
    """Restore failures on this node since boot, kept in runtime_dir (root's);
    add: new ones to count first."""
    boot = boot_time()
    try:
        rfd = safeio.open_dir(runtime, trusted={0})
    except OSError:
        return add
    try:
        raw = _read_small(rfd, layout.NODE_STATE_FILE, 4096)
        try:
            st = json.loads(raw.decode()) if raw else {}
        except ValueError:
            st = {}
        n = st.get("restore_failures") if isinstance(st, dict) and st.get("boot") == boot else 0
        n = n if isinstance(n, int) and not isinstance(n, bool) and n >= 0 else 0
        if add:
            n += add
            safeio.write_atomic(rfd, layout.NODE_STATE_FILE, json.dumps(
                {"boot": boot, "restore_failures": n}).encode(), mode=0o600)
        return n
    finally:
        os.close(rfd)


def node_text(agents: int, down: int, records: int, failures: int, now: float) -> str:
    out = family("mpi_pstate_node_agents_running", "mpi-pstate agents running on the node "
                 "(one a job step that clocks down).", "gauge", [("", agents)])
    out += family("mpi_pstate_node_domains_down", "Frequency domains clocked down right now.",
                  "gauge", [("", down)])
    out += family("mpi_pstate_node_restore_records", "Saved settings not yet put back (a "
                  "running step's, or one a restore failed to put back).", "gauge",
                  [("", records)])
    out += family("mpi_pstate_node_restore_failures_total", "Restores that failed on the "
                  "node since boot (the agent's, the Epilog's backstop).", "counter",
                  [("", failures)])
    out += family("mpi_pstate_node_updated_timestamp_seconds", "When these gauges were "
                  "written (Unix time).", "gauge", [("", round(now, 3))])
    return "\n".join(out) + "\n"


def write_node(cfg: siteconf.Config, runtime: str, agents: int, down: int, records: int,
               failures_add: int = 0, now: Optional[float] = None) -> str:
    """Writes this node's gauges (node.node_gauges gathers them); returns
    the text written."""
    text = node_text(agents, down, records, node_failures(runtime, failures_add),
                     time.time() if now is None else now)
    fd = open_dir(cfg, {0})
    try:
        safeio.write_atomic(fd, layout.NODE_METRICS_FILE, text.encode(), mode=0o644)
    finally:
        os.close(fd)
    return text


def job_labels(row: Any) -> Dict[str, str]:
    """user, account, partition of a slurm.SacctJob."""
    return {"user": getattr(row, "user", "") or "", "account": getattr(row, "account", "") or "",
            "partition": getattr(row, "partition", "") or ""}

