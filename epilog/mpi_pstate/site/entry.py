# SPDX-License-Identifier: BSD-3-Clause
"""The sub-commands Slurm, cron or systemd run as root or SlurmUser: epilog,
epilog-slurmctld, flush, prune, node-metrics; and status, which an admin
runs as root on a node.  The `mpi-pstate` script dispatches them
here without importing cli.py (and the report behind it), so that the
Epilog imports only the modules it needs.  Like every installed module,
these run on Python 3.6 (RHEL 8's python3; docs/security.md, "Python 3.6")."""
import argparse
import os
import sys
from typing import Dict, List, Optional, Sequence

from . import node_epilog, spool, status
from ..core import layout, livesteps, log, safeio, siteconf, slurm

COMMANDS = ("epilog", "epilog-slurmctld", "flush", "prune", "node-metrics", "status")
PROG = "mpi-pstate"


def _dirs(p: argparse.ArgumentParser) -> None:
    p.add_argument("--collect-dir", help="override collect_dir of the plugstack line")
    p.add_argument("--runtime-dir", help="override runtime_dir of the plugstack line")
    p.add_argument("--slurm-conf", help="slurm.conf (default: $SLURM_CONF)")


def add_parsers(sub: "argparse._SubParsersAction") -> None:
    p = sub.add_parser("epilog", help="node Epilog (root): restore backstop, node record")
    _dirs(p)
    p.add_argument("--sysroot", default="/sys", help=argparse.SUPPRESS)
    p.add_argument("--shm-dir", default=layout.SHM_DIR, help=argparse.SUPPRESS)
    p.add_argument("--keep-segments", action="store_true",
                   help="leave the job's shared-memory segments and step directories in place")
    p.add_argument("--quiet", action="store_true", help="syslog only, nothing on stderr")

    p = sub.add_parser("epilog-slurmctld",
                       help="EpilogSlurmctld (SlurmUser): queue the job, start a flusher")
    _dirs(p)
    p.add_argument("--wait", type=float, default=spool.WAIT_RECORDS_S,
                   help="seconds the flusher waits for the node records (default %(default)s)")
    p.add_argument("--flush-for", type=float, default=3600.0,
                   help="seconds the flusher it starts keeps retrying (default %(default)s)")
    p.add_argument("--db-wait", type=float, default=0.0, help=argparse.SUPPRESS)  # old option
    p.add_argument("--quiet", action="store_true", help="syslog only, nothing on stderr")

    p = sub.add_parser("flush", help="write the queued summaries (SlurmUser; timer or cron)")
    _dirs(p)
    p.add_argument("--for", dest="for_s", type=float, default=0.0,
                   help="keep retrying this many seconds (default: one pass)")
    p.add_argument("--wait", type=float, default=spool.WAIT_RECORDS_S,
                   help="seconds to wait for the node records (default %(default)s)")
    p.add_argument("--late", type=float, default=spool.LATE_S,
                   help="seconds a missing node's record is still awaited (default %(default)s)")
    p.add_argument("--quiet", action="store_true", help="syslog only, nothing on stderr")

    p = sub.add_parser("prune", help="delete records older than --keep-days")
    _dirs(p)
    p.add_argument("--keep-days", type=float, default=spool.KEEP_DAYS,
                   help="days records are kept (default %(default)s)")
    p.add_argument("--dry-run", action="store_true", help="say what would be deleted")


    p = sub.add_parser("node-metrics", help="write this node's Prometheus gauges into "
                       "metrics_dir= (root; a timer's, every 30 s)")
    _dirs(p)
    p.add_argument("--sysroot", default="/sys", help=argparse.SUPPRESS)
    p.add_argument("--quiet", action="store_true", help="print nothing")

    p = sub.add_parser("status", help="this node's restore records, waiting node records, "
                       "agents and restore failures (root); exit 1 when they need the admin")
    status.add_arguments(p)


def node_metrics(a: argparse.Namespace, dirs: Dict[str, List[str]]) -> int:
    """`mpi-pstate node-metrics`: what the node Epilog writes at a job's
    end, between jobs (a domain clocked down now, an agent running)."""
    log.setup("mpi-pstate-node-metrics", quiet=a.quiet)
    cfg = siteconf.load(a.slurm_conf, a.collect_dir, a.runtime_dir)
    for p in cfg.problems:
        log.warning(p)
    if not cfg.metrics_dir:
        log.error("no metrics_dir= in the plugin's plugstack line: nothing written")
        return 1
    runtime = siteconf.expand_host(cfg.runtime_dir, siteconf.short_host())
    agent = node_epilog.find_tool("mpi-pstate-agent", dirs["agent"], "MPI_PSTATE_AGENT", cfg.agent)
    try:
        text = node_epilog.node_gauges(cfg, runtime, a.sysroot, livesteps.agent_checker(agent))
    except (OSError, ValueError) as e:
        log.error(f"node metrics not written to {cfg.metrics_dir}: {e}")
        return 1
    if not a.quiet:
        print(text, end="")
    return 0


def _dbtool(paths: Dict[str, str], dirs: Dict[str, List[str]]) -> Optional[str]:
    refused: List[str] = []
    found = node_epilog.find_tool("mpi-pstate-dbcomment", dirs["dbcomment"], "MPI_PSTATE_DBCOMMENT",
                                  refused=refused)
    for p in refused:
        log.error(p)
    return found


def dispatch(a: argparse.Namespace, paths: Dict[str, str], dirs: Dict[str, List[str]]) -> int:
    if a.cmd == "epilog":
        return node_epilog.run(a, dirs)
    if a.cmd == "epilog-slurmctld":
        return spool.epilog_slurmctld(a, _dbtool(paths, dirs))
    if a.cmd == "node-metrics":
        return node_metrics(a, dirs)
    if a.cmd == "status":
        return status.run(a, dirs["agent"])
    cfg = siteconf.load(a.slurm_conf, a.collect_dir, a.runtime_dir)
    siteconf.export_slurm_conf(cfg)
    trusted = {0, cfg.slurm_uid, os.geteuid()}
    if a.cmd == "flush":
        log.setup("mpi-pstate-flush", quiet=a.quiet)
        dbt = _dbtool(paths, dirs)
        if not dbt:
            log.error("mpi-pstate-dbcomment not found: nothing flushed")
            return 1
        try:
            tally = spool.flush(cfg, slurm.DbTool(dbt), trusted, a.for_s, a.wait, a.late)
        except OSError as e:
            log.error(f"flush: {e}")
            return 1
        if not a.quiet:
            print("; ".join(f"{v} {k}" for k, v in sorted(tally.items())) or "queue empty")
        return 0
    if a.cmd == "prune":
        import time
        try:
            gone = spool.prune(cfg, trusted, a.keep_days, time.time(), a.dry_run)
        except OSError as e:
            print(f"{PROG} prune: {e}", file=sys.stderr)
            return 1
        verb = "would delete" if a.dry_run else "deleted"
        print(f"{verb} the records of {len(gone)} jobs older than {a.keep_days:g} days"
              + (f": {' '.join(map(str, gone[:20]))}" + (" ..." if len(gone) > 20 else "")
                 if gone else ""))
        return 0
    return 2


def tool_dirs(paths: Dict[str, str]) -> Dict[str, List[str]]:
    """Where the helper programs are: installed locations first, then, in a
    source checkout only, its build directory (MPI_PSTATE_BUILD or ./build)."""
    top = os.path.dirname(os.path.dirname(safeio.PKG_DIR))  # the checkout's, in a checkout
    build = safeio.env_override("MPI_PSTATE_BUILD", privileged=True) or \
        os.path.join(top, "build")
    pkglibexec = os.path.join(paths["libexecdir"], "mpi-pstate") if paths.get("libexecdir") \
        else ""
    dev = safeio.dev_tree()
    return {
        "dbcomment": [pkglibexec, paths.get("here", "")] +
                     ([os.path.join(build, "epilog")] if dev else []),
        "agent": [pkglibexec, paths.get("sbindir", ""), paths.get("libexecdir", "")] +
                 ([os.path.join(build, "agent")] if dev else []),
    }


def main(argv: Sequence[str], paths: Optional[Dict[str, str]] = None) -> int:
    """`mpi-pstate COMMAND ...` for COMMAND in COMMANDS, without cli.py."""
    paths = paths or {}
    ap = argparse.ArgumentParser(prog=PROG)
    sub = ap.add_subparsers(dest="cmd", metavar="COMMAND")
    sub.required = True
    add_parsers(sub)
    a = ap.parse_args(list(argv))
    try:
        return dispatch(a, paths, tool_dirs(paths))
    except ValueError as e:
        print(f"{PROG} {a.cmd}: {e}", file=sys.stderr)
        return 0 if a.cmd in ("epilog", "epilog-slurmctld") else 2
