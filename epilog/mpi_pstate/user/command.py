# SPDX-License-Identifier: BSD-3-Clause
"""The `mpi-pstate` command: report, backfill, audit, exec, and the two
epilog entry points (epilog, epilog-slurmctld)."""
import argparse
import json
import os
import sys
from typing import Any, Dict, List, Optional, Sequence, Set, Tuple

from . import htmlpage, report, report_list, report_svg, report_whatif
from .. import VERSION
from ..core import audit, collect, layout, log, parse, plugincheck, safeio, siteconf, slurm
from ..model import calibrate, carbon, powermodel, summary
from ..site import ctld, entry, node_epilog

PROG = "mpi-pstate"


# Subcommands with a command line of their own (modules of this package; exec
# is also installed under its own name, mpi-pstate-exec):
# `mpi-pstate NAME ARGS` hands ARGS over unchanged (their --help included).
DELEGATED = ("exec", "node-prune")


def _common_dirs(p: argparse.ArgumentParser) -> None:
    p.add_argument("--collect-dir", help="override collect_dir of the plugstack line")
    p.add_argument("--runtime-dir", help="override runtime_dir of the plugstack line")
    p.add_argument("--slurm-conf", help="slurm.conf (default: $SLURM_CONF)")


def build_parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog=PROG, description="mpi-pstate: MPI wait time, clocked-"
                                 "down time and energy of Slurm jobs")
    ap.add_argument("--version", action="version", version=f"{PROG} {VERSION}")
    sub = ap.add_subparsers(dest="cmd", metavar="COMMAND")
    sub.required = True

    p = sub.add_parser("report", help="per job, node and rank figures; one line per job "
                       "in list mode")
    p.add_argument("jobs", nargs="*", metavar="JOBID",
                   help="4242, a step 4242.0, 4242.batch, 4242.extern, an array task 4242_3, "
                   "tasks 4242_[1-3], or every task of array 4242")
    p.add_argument("-j", "--jobs", dest="job_lists", action="append", metavar="LIST",
                   help="JOBIDs, comma-separated (sacct -j)")
    fmt = p.add_mutually_exclusive_group()
    fmt.add_argument("--json", action="store_true", help="everything as JSON")
    fmt.add_argument("--csv", action="store_true",
                     help="one line per rank; in list mode one line per job")
    fmt.add_argument("--svg", metavar="PATH",
                     help="per-rank chart; several jobs: PATH is a directory or holds %%j")
    fmt.add_argument("--html", metavar="PATH",
                     help="one self-contained page a job: figures, per-rank chart, per-node "
                     "timeline, energy against full clock, the what-if; PATH as for --svg")
    _common_dirs(p)
    report_list.add_list_args(p)
    report.add_select_args(p)
    report_whatif.add_what_if_args(p)

    p = sub.add_parser("backfill", help="write summaries the EpilogSlurmctld missed")
    p.add_argument("jobs", nargs="*", metavar="JOBID",
                   help="jobs to check (default: every job in collect_dir)")
    p.add_argument("--dry-run", action="store_true", help="say what would be written")
    _common_dirs(p)

    p = sub.add_parser("audit", help="node settings that decide a job's speed, and whether "
                       "this Slurm loads the installed plugin")
    p.add_argument("--json", action="store_true")
    p.add_argument("--plugin", action="store_true",
                   help="only check the plugin against this node's Slurm; exit 1 on a problem "
                   "(run it after every Slurm upgrade)")
    p.add_argument("--slurm-conf", help="slurm.conf to find plugstack.conf from")
    p.add_argument("--sysroot", default="/sys", help=argparse.SUPPRESS)

    entry.add_parsers(sub)  # epilog, epilog-slurmctld, flush, prune

    p = sub.add_parser("calibrate", help="measure this node's power model for `report "
                       "--what-if` (root, on an idle node)")
    p.add_argument("--model", metavar="PATH", help="where to store it (default "
                   f"${powermodel.MODEL_ENV}, else {layout.DEFAULT_MODEL}; '-': print, store "
                   "nothing)")
    p.add_argument("--cpu", type=int, help="CPU to measure on (default: the last one allowed)")
    p.add_argument("--seconds", type=float, default=2.0, help="per point (default 2)")
    p.add_argument("--reps", type=int, default=2, help="repetitions of every point (default 2)")
    p.add_argument("--points", type=int, default=3,
                   help="frequencies measured, both ends included (default 3)")
    p.add_argument("--json", action="store_true", help="print the model as JSON")
    p.add_argument("--runtime-dir", help="runtime_dir checked for running jobs "
                   "(default: the plugstack line's)")
    p.add_argument("--slurm-conf", help="slurm.conf to find plugstack.conf from")
    p.add_argument("--quiet", action="store_true", help="no progress on stderr")
    p.add_argument("--sysroot", default="/sys", help=argparse.SUPPRESS)

    sub.add_parser("exec", help="run a program with the preload library (mpi-pstate-exec)",
                   add_help=False)
    sub.add_parser("node-prune", help="remove what finished jobs left on this node, deliver "
                   "waiting node records (root; timer)", add_help=False)
    return ap


def job_detail(jfd: int, jid: int, r: slurm.SacctJob, trusted: Set[int]
               ) -> Optional[Dict[str, Any]]:
    """The job's merged detail: job.json when written for this job, else a
    merge of its node records.  Only what the flusher would merge, and
    nothing of an earlier job of the same id (the flusher's uid/time check)."""
    accept = ctld.accept_row(r)
    detail = collect.read_job_detail(jfd, trusted)
    st = safeio.entry_stat(jfd, layout.JOB_FILE)
    start = r.start_epoch()
    if detail is not None and st is not None and start is not None and st.st_mtime < start:
        detail = None
    if detail is None:
        recs, bad = collect.read_node_records(jfd, jid, ctld.expected_nodes(r.nodes), trusted)
        recs = {n: x for n, x in recs.items() if accept(x) is None}
        if any(x["status"] == "ok" for x in recs.values()):
            detail = summary.merge(jid, ctld.expected_nodes(r.nodes), recs, bad, r.state,
                                   r.exit_code, r.job_id if "_" in r.job_id else None,
                                   r.wall_s())
    return detail


def load_jobs(specs: Sequence[str], cfg: siteconf.Config) -> Tuple[List[Dict[str, Any]],
                                                                  List[str]]:
    """The jobs sacct -X gives for the job specs (4242, 4242_3, 4242_[1-3])
    with their summaries and detail, and the specs sacct knows nothing of."""
    rows = slurm.sacct_jobs(specs) if specs else []
    jobs = load_rows(rows, cfg)
    found = {r.job_id for r in rows} | {r.raw for r in rows}
    missing = [s for s in specs if s not in found and s.split("_")[0] not in
               {r.job_id.split("_")[0] for r in rows}]
    return jobs, missing


def load_rows(rows: Sequence[slurm.SacctJob], cfg: siteconf.Config) -> List[Dict[str, Any]]:
    """Each job id's newest row as the report's job: accounting fields,
    summary, detail (job_detail), carbon."""
    last = slurm.newest(rows)
    trusted = {0, cfg.slurm_uid}
    jobs = []
    for raw, r in sorted(last.items(), key=lambda kv: int(kv[0]) if kv[0].isdigit() else 0):
        j: Dict[str, Any] = {"raw": raw, "job_id": r.job_id, "sacct_state": r.state,
                             "exit_code": r.exit_code, "elapsed": r.elapsed, "nodes": r.nodes,
                             "user": r.user, "account": r.account, "start": r.start,
                             "end": r.end}
        hit, where = summary.find(r.system_comment)[0], "SystemComment"
        if hit is None:  # summary version 1 (earlier mpi-pstate): in the AdminComment
            hit, where = summary.find(r.admin_comment)[0], "AdminComment"
        s, bad = summary.read(hit) if hit is not None else (None, None)
        if hit is not None:
            j["summary_in"] = where
            if bad:
                j["problem"] = f"the summary in the {where} is unreadable: {bad}"
            elif s is None:
                j["note"] = (f"the summary in the {where} has version "
                             f"{json.dumps(hit.get('v'))[:24]}, written by a newer mpi-pstate: "
                             "update this one to read it")
        detail, why = None, None
        try:
            jid = parse.job_id(raw)
            with collect.job_dir(cfg.collect_dir, jid, trusted) as jfd:
                if jfd is not None:
                    detail = job_detail(jfd, jid, r, trusted)
        except (OSError, ValueError, slurm.SlurmError) as e:
            why = getattr(e, "strerror", None) or str(e)
        if detail is not None:
            j["detail"] = detail
            rx = report.reaction(detail.get("ranks") or [])
            if rx:
                j["reaction"] = rx
        elif why:
            j["detail_why"] = why
        j["partition"] = r.partition
        ds, dbad = (None, None)
        if s is None and not bad and detail is not None and \
                detail.get("state") in ("complete", "partial") and "summary" in detail:
            ds, dbad = summary.read(detail["summary"])
            if dbad:
                j["problem"] = f"the summary in the job's detail ({layout.JOB_FILE}) is " \
                    f"unreadable: {dbad}"
        if s is not None:
            j["status"], j["summary"] = "ok", s
        elif j.get("problem"):
            # one line naming the key: the job has a summary, not one this
            # report can show (summary.read)
            j["status"], j["message"] = "unreadable", j["problem"]
        elif ds is not None:
            j["status"], j["summary"] = "ok", ds
            j["note"] = ("the summary is not in the accounting record (the EpilogSlurmctld "
                         "missed it): an admin can run `mpi-pstate backfill " + raw + "`")
        elif r.state in ("PENDING", "RUNNING", "SUSPENDED", "REQUEUED", "RESIZING"):
            j["status"], j["message"] = "running", "still running: figures come at its end"
        else:
            j["status"] = "none"
            j["message"] = ("ran without mpi-pstate: no summary in its accounting record and "
                            "no per-rank records")
        if j.get("status") == "ok":
            c = carbon.figures(j["summary"], carbon.intensity(cfg.carbon, r.partition))
            if c:
                j["carbon"] = c
        jobs.append(j)
    return jobs


def job_pairs(a: argparse.Namespace) -> List[Tuple[str, Optional[str]]]:
    """(job part, step or None) of every JOBID of the command line, in
    order, once each."""
    texts = list(a.jobs) + [x for lst in a.job_lists or [] for x in lst.split(",") if x.strip()]
    return list(dict.fromkeys(parse.job_step_spec(x) for x in texts))


def cmd_report(a: argparse.Namespace) -> int:
    """report; every error one line on stderr: 2 for a usage error, 1 when
    sacct, a file or the figures fail."""
    try:
        return report_run(a)
    except ValueError as e:
        print(f"{PROG} report: {e}", file=sys.stderr)
        return 2
    except slurm.SlurmError as e:
        print(f"{PROG} report: {e}", file=sys.stderr)
        return 1
    except OSError as e:
        where = f"{e.filename}: " if getattr(e, "filename", None) else ""
        print(f"{PROG} report: {where}{e.strerror or e}", file=sys.stderr)
        return 1


def report_run(a: argparse.Namespace) -> int:
    if a.helpformat:
        sys.stdout.write(report_list.help_format())
        return 0
    pairs = job_pairs(a)
    wi = report_whatif.what_if_options(a)
    lo = report_list.list_options(a) if wi is None else None
    cfg = siteconf.load(a.slurm_conf, a.collect_dir, a.runtime_dir)
    siteconf.export_slurm_conf(cfg)
    if wi is not None and wi.get("totals"):
        rows = slurm.sacct_totals(**wi["select"])
        unreadable: List[str] = []
        groups = report_list.totals(rows, wi["totals"], cfg.carbon, unreadable)
        for p in unreadable:
            print(f"{PROG} report: {p}", file=sys.stderr)
        if a.json:
            sys.stdout.write(report.document("mpi-pstate-totals", by=wi["totals"],
                                             select=wi["select"], groups=groups) + "\n")
        elif a.csv:
            sys.stdout.write(report_list.totals_csv(groups))
        else:
            sys.stdout.write(report_list.totals_text(groups, wi["totals"],
                                                wi["select"].get("since", "now-30days")))
        return 0
    specs = list(dict.fromkeys(job for job, _ in pairs))
    sel = report.selection(a)
    if wi is not None and wi.get("select"):
        added = [x for x in slurm.sacct_select(**wi["select"]) if x not in specs]
        specs += added
        pairs += [(x, None) for x in added]
        if not specs:
            print(f"{PROG} report: no job matches", file=sys.stderr)
            return 1
    selected = wi is None and not specs  # list mode over a selection
    if selected:
        jobs, missing = load_rows(slurm.sacct_list(**sel), cfg), []
    else:
        jobs, missing = load_jobs(specs, cfg)
    for j in jobs:  # each job once, before it is shown once per step asked for
        if j.get("problem"):
            print(f"{PROG} report: job {j['job_id']}: {j['problem']}", file=sys.stderr)
    if not selected:
        jobs = report.with_steps(jobs, pairs)
    pages = (a.svg, report_svg.svg, "svg") if a.svg else (a.html, htmlpage.page, "html") \
        if a.html else None
    if wi is not None:
        return report_whatif.what_if_output(jobs, missing, wi, a, pages)
    for m in missing:
        print(f"{PROG} report: job {m} not found in the accounting database (or hidden "
              "from you by its PrivateData, as from sacct)", file=sys.stderr)
    if lo is not None:
        sys.stdout.write(report_list.list_json(jobs, lo) + "\n" if a.json else
                         report_list.list_csv(jobs, lo) if a.csv else report_list.list_text(jobs, lo))
        return 1 if missing else 0
    if a.json:
        sys.stdout.write(report.to_json(jobs) + "\n")
    elif a.csv:
        sys.stdout.write(report.to_csv(jobs))
    elif pages:
        rc = report_whatif.write_pages(jobs, *pages)
        if rc:
            return rc
    else:
        sys.stdout.write("\n".join(report.job_text(j) for j in jobs))
    return 1 if missing else 0


def cmd_backfill(a: argparse.Namespace, paths: Dict[str, str]) -> int:
    log.setup("mpi-pstate-backfill")
    cfg = siteconf.load(a.slurm_conf, a.collect_dir, a.runtime_dir)
    siteconf.export_slurm_conf(cfg)
    trusted = {0, cfg.slurm_uid, os.geteuid()}
    dbt = node_epilog.find_tool("mpi-pstate-dbcomment", entry.tool_dirs(paths)["dbcomment"],
                                "MPI_PSTATE_DBCOMMENT")
    if not dbt and not a.dry_run:
        print(f"{PROG} backfill: mpi-pstate-dbcomment not found", file=sys.stderr)
        return 1
    db = slurm.DbTool(dbt or "mpi-pstate-dbcomment")
    try:
        if a.jobs:
            jobs = [parse.job_id(x) for x in a.jobs]
        else:
            cfd = collect.open_collect(cfg.collect_dir, trusted)
            try:
                jobs = collect.job_dirs(cfd)
            finally:
                os.close(cfd)
    except (OSError, ValueError) as e:
        print(f"{PROG} backfill: {e}", file=sys.stderr)
        return 1
    tally: Dict[str, int] = {}
    for job in jobs:
        try:
            row = slurm.sacct_one(job)
            if row is None:
                res = "not in accounting"
            elif row.state not in slurm.TERMINAL:
                res = "still running"
            else:
                nodes = ctld.expected_nodes(row.nodes)
                res = ctld.finish(cfg, db, job, nodes, trusted, ctld.Deadline(10), row.state,
                                  row.exit_code, row.system_comment,
                                  row.job_id if "_" in row.job_id else None, a.dry_run,
                                  wall_s=row.wall_s(), accept=ctld.accept_row(row))
        except (OSError, ValueError, slurm.SlurmError) as e:
            res = "error"
            print(f"job {job}: {e}", file=sys.stderr)
        tally[res] = tally.get(res, 0) + 1
        print(f"job {job}: {res}")
    print("; ".join(f"{v} {k}" for k, v in sorted(tally.items())) or "nothing to do")
    return 1 if tally.get("error") else 0


def plugin_text(pc: Dict[str, Any]) -> str:
    state = "ok" if pc["ok"] else f"PROBLEM: {pc['problem']}"
    return (f"plugin:           {pc['path'] or 'not configured'} (built for Slurm "
            f"{pc['built_for'] or '?'}, this node's Slurm {pc['slurm'] or '?'}): {state}\n")


def _w(v: Any) -> str:
    """An audit value in words: unknown for a missing one, yes or no."""
    if v is None:
        return "unknown"
    if isinstance(v, bool):
        return "yes" if v else "no"
    return str(v)


def audit_text(s: Dict[str, Any]) -> str:
    lines = []
    cf = s.get("cpufreq", {})
    lines.append(f"cpufreq driver:   {cf.get('driver') or 'none'}"
                 + (f" ({cf['intel_pstate_status']})" if cf.get("intel_pstate_status") else "")
                 + (f" ({cf['amd_pstate_status']})" if cf.get("amd_pstate_status") else ""))
    for g in cf.get("groups", []):
        if "cpus" not in g:
            lines.append(f"  ... {_w(g.get('more_groups'))} more groups")
            continue
        lines.append(f"  cpus {g['cpus']}: governor {_w(g.get('governor'))}, "
                     f"{_w(g.get('min_khz'))}-{_w(g.get('max_khz'))} kHz (hardware "
                     f"{_w(g.get('hw_min_khz'))}-{_w(g.get('hw_max_khz'))})"
                     + (f", epp {g['epp']}" if g.get("epp") else "")
                     + f", {_w(g.get('domain_cpus'))} cpus per domain")
    lines.append(f"turbo/boost:      {report.onoff(cf.get('boost'))}")
    cs = s.get("cstates", {})
    lines.append(f"cpuidle:          driver {_w(cs.get('driver'))}, governor "
                 f"{_w(cs.get('governor'))}")
    for st in cs.get("states", []):
        lines.append(f"  {_w(st.get('name'))}: exit latency {_w(st.get('exit_latency_us'))} us, "
                     f"enabled on {st.get('enabled_cpus') or 'none'}"
                     + (f", disabled on {st['disabled_cpus']}" if st.get("disabled_cpus")
                        else ""))
    for u in s.get("uncore", []):
        lines.append(f"uncore {u['domain']}: {_w(u.get('min_freq_khz'))}-"
                     f"{_w(u.get('max_freq_khz'))} "
                     f"kHz (initial {_w(u.get('initial_min_freq_khz'))}-"
                     f"{_w(u.get('initial_max_freq_khz'))})")
    sm = s.get("smt", {})
    lines.append(f"SMT:              control {_w(sm.get('control'))}, "
                 f"{_w(sm.get('threads_per_core'))} threads per core")
    nu = s.get("numa", {})
    lines.append(f"NUMA:             {_w(nu.get('nodes'))} nodes")
    for n, c in (nu.get("cpus") or {}).items():
        lines.append(f"  node {n}: cpus {c}, distances {_w(nu.get('distances', {}).get(n))}")
    ra = s.get("rapl", {})
    lines.append(f"RAPL:             {_w(ra.get('status'))} {' '.join(ra.get('zones', []))}")
    lines.append(f"cpus:             online {_w(s.get('cpus', {}).get('online'))}")
    for w in s.get("warnings", []):
        lines.append(f"WARNING: {w}")
    return "\n".join(lines) + "\n"


def cmd_delegate(sub: str, argv: List[str], paths: Dict[str, str]) -> int:
    # Imported here: neither is needed by any other command.
    if sub == "exec":
        from . import launcher
        return launcher.main(argv, paths)
    from ..site import node_prune
    return node_prune.main(argv, paths)


def main(argv: Optional[Sequence[str]] = None, paths: Optional[Dict[str, str]] = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    paths = paths or {}
    if args and args[0] in DELEGATED:
        return cmd_delegate(args[0], args[1:], paths)
    a = build_parser().parse_args(args)
    try:
        if a.cmd == "report":
            return cmd_report(a)
        if a.cmd == "backfill":
            return cmd_backfill(a, paths)
        if a.cmd == "calibrate":
            a.sysroot_given = a.sysroot != "/sys"
            return calibrate.run(a)
        if a.cmd == "audit":
            pc = plugincheck.check(siteconf.load(a.slurm_conf).plugin, plugincheck.slurm_release())
            s = {"plugin": pc} if a.plugin else dict(audit.node_settings(a.sysroot), plugin=pc)
            sys.stdout.write(json.dumps(s, indent=1) + "\n" if a.json else
                             plugin_text(pc) if a.plugin else audit_text(s) + plugin_text(pc))
            return 1 if a.plugin and not pc["ok"] else 0
        if a.cmd in entry.COMMANDS:
            return entry.dispatch(a, paths, entry.tool_dirs(paths))
    except BrokenPipeError:
        return 0
    except ValueError as e:
        print(f"{PROG} {a.cmd}: {e}", file=sys.stderr)
        return 2
    return 2
