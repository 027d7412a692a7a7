# SPDX-License-Identifier: BSD-3-Clause
"""`mpi-pstate report --what-if`: the options, the prediction for each job
selected (model/whatif.py) with the node power model, and its output as
text, CSV, JSON, SVG and HTML pages."""
import argparse
import csv
import io
import os
import sys
from typing import Any, Callable, Dict, List, Optional, Tuple

from . import report, report_list
from ..core import layout, parse, safeio
from ..model import powermodel
from ..model import whatif


# The levers beyond the core cap come last: a parser that reads the columns
# by position, written before they existed, keeps working.
LEVERS_CSV = ("efficient", "uncore")


WHATIF_CSV = ("job", "job_id", "threshold_us", "low_khz", "ranks", "saved_j", "saved_j_low",
              "saved_j_high", "measured_j", "saved_pct", "time_added_s", "time_added_s_high",
              "time_added_pct", "clocked_down_s", "transitions", "recommended_us",
              *(f"{lv}_{col}" for lv in LEVERS_CSV for col in ("saved_j", "predicted")))


def lever_cells(preds: List[Dict[str, Any]]) -> List[Any]:
    """The levers' CSV cells of one job's prediction, or of the total over
    several: per lever its central saving and "true", or an empty saving
    and "false" when a prediction does not have it (a sum over the jobs
    that have it would pass for the whole selection's)."""
    out: List[Any] = []
    for name in LEVERS_CSV:
        got = [((p.get("levers") or {}).get(name) or {}) for p in preds]
        ok = bool(got) and all(x.get("predicted") for x in got)
        out += [round(sum(x["saved_j"][0] for x in got), 3) if ok else "",
                "true" if ok else "false"]
    return out


def add_what_if_args(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("what-if (docs/evaluation.md)")
    g.add_argument("--what-if", action="store_true",
                   help="predicted energy saved and time added under --threshold and --low")
    g.add_argument("--threshold", metavar="T",
                   help="threshold to predict for (500us, 2ms; default: the one the job ran with)")
    g.add_argument("--low", metavar="F", help="low frequency (1.2GHz, 1200000 kHz; default: the "
                   "lowest the model measured)")
    g.add_argument("--reaction", metavar="D", help="the agent's delay before it lowers a core "
                   "(default: the wake-up delay the model measured; an on run's agent record "
                   "shows the real one, drop_late_ns, when its CPU budget spaces its wake-ups)")
    g.add_argument("--cpu-budget", metavar="P", help="the node agent's CPU budget in percent of "
                   "a core to predict for (default: the one the job ran with; the site's "
                   "agent_cpu_budget, docs/admin.md)")
    g.add_argument("--model", metavar="PATH", help="node power model for nodes whose record has "
                   f"none (default ${powermodel.MODEL_ENV}, else {layout.DEFAULT_MODEL})")
    g.add_argument("--totals", choices=report_list.TOTALS_BY, help="sums per user, account or partition "
                   "of the jobs selected by --user, --account, --partition, --since, --until "
                   "and --state: jobs, energy, energy saved, clocked-down time")


def what_if_options(a: argparse.Namespace) -> Optional[Dict[str, Any]]:
    """None without --what-if or --totals; ValueError for a bad value."""
    sel = report.selection(a)
    jobs = getattr(a, "jobs", None) or getattr(a, "job_lists", None)
    listing = any(getattr(a, k, None) for k in ("list", "format", "parsable", "parsable2",
                                                 "noheader"))
    if getattr(a, "totals", None):
        if a.what_if or jobs or a.svg or a.html or listing:
            raise ValueError("--totals takes no JOBID, --what-if, --svg, --html or list mode "
                             "options: select jobs with --user, --account, --partition, "
                             "--since, --until and --state")
        return {"totals": a.totals, "select": sel}
    if not a.what_if:
        if a.threshold or a.low or a.model or a.reaction or a.cpu_budget:
            raise ValueError("--threshold, --low, --reaction, --cpu-budget and --model go "
                             "with --what-if")
        if not jobs and not sel:
            raise ValueError("give a JOBID (4242, 4242.0, 4242_3) or a selection (--user, "
                             "--account, --partition, --since, --until, --state)")
        return None
    if listing:
        raise ValueError("--what-if prints its own table: --list, --format, --parsable and "
                         "--noheader are for list mode")
    if not jobs and not sel:
        raise ValueError("give a JOBID or a selection (--user, --account, --partition, --since, "
                         "--until, --state)")
    return {"select": sel,
            "threshold_us": parse.duration_us(a.threshold) if a.threshold else None,
            "low_khz": parse.freq_khz(a.low) if a.low else None,
            "reaction_us": parse.duration_us(a.reaction) if a.reaction else None,
            "budget_ppm": parse.percent_ppm(a.cpu_budget) if a.cpu_budget else None}


def _load_model(path: Optional[str]) -> Tuple[Optional[Dict[str, Any]], Optional[str]]:
    try:
        return powermodel.load_model(path), None
    except FileNotFoundError:
        return None, f"no model file {powermodel.model_path(path)}"
    except (OSError, ValueError) as e:
        return None, str(e)


def no_model_why(nodes: List[str], model_why: Optional[str]) -> str:
    """Why nothing can be predicted for these nodes: no model."""
    names = ",".join(nodes[:8]) + (f" and {len(nodes) - 8} more" if len(nodes) > 8 else "")
    return (f"no power model for {names or 'its nodes'}: their node records carry none"
            + (f" and {model_why}" if model_why else "")
            + "; run `mpi-pstate calibrate` as root on an idle node of each type, or give "
            "--model PATH")


def what_if_jobs(jobs: List[Dict[str, Any]], wi: Dict[str, Any],
                 model: Optional[Dict[str, Any]], model_why: Optional[str] = None
                 ) -> List[Dict[str, Any]]:
    """Adds "what_if" (and the per-job sweep) to every job with detail
    and a power model for one of its nodes; returns those jobs.  A job
    with detail and no model gets "what_if_why" instead."""
    done = []
    for j in jobs:
        d = j.get("detail")
        if j.get("status") != "ok" or not d:
            continue
        s = j.get("summary") or {}
        thr = wi["threshold_us"]
        if thr is None:
            thr = whatif.run_threshold_us(d)
        meas = s.get("energy_j") if s.get("energy") == "ok" else None
        p = whatif.predict(d, model, whatif.THRESHOLD_US_DEFAULT if thr is None else thr, wi["low_khz"], meas,
                           wi["reaction_us"], wi.get("budget_ppm"))
        if p.get("model") == ["none"] and d.get("ranks"):
            j["what_if"] = None
            j["what_if_why"] = no_model_why(sorted({str(r.get("node")) for r in d["ranks"]}),
                                            model_why)
            continue
        j["what_if"] = p
        j["what_if"]["energy_src"] = s.get("energy_src")
        rows, best = whatif.sweep([d], model, wi["low_khz"], reaction_us=wi["reaction_us"],
                                  budget_ppm=wi.get("budget_ppm"))
        j["what_if_sweep"], j["what_if_recommended"] = rows, best
        done.append(j)
    return done


def write_pages(jobs: List[Dict[str, Any]], dest: str, render: Callable[[Dict[str, Any]], str],
                ext: str) -> int:
    """Each job's chart (--svg) or page (--html): on stdout with "-" for one
    job, else into the directory dest as mpi-pstate-<job>.<ext>, or at dest
    with %j the job; prints each path.  Returns the exit status."""
    for j in jobs:
        if dest == "-" and len(jobs) == 1:
            sys.stdout.write(render(j))
            continue
        name = j["raw"] + (f".{j['step']}" if j.get("step") is not None else "")
        path = dest.replace("%j", name) if "%j" in dest else dest
        if os.path.isdir(path):
            path = os.path.join(path, f"mpi-pstate-{name}.{ext}")
        elif len(jobs) > 1 and "%j" not in dest:
            print(f"mpi-pstate report: --{ext} needs a directory or %j for several jobs",
                  file=sys.stderr)
            return 2
        try:
            write_page(path, render(j).encode("utf-8"))
        except OSError as e:
            print(f"mpi-pstate report: cannot write {path}: {e.strerror or e}", file=sys.stderr)
            return 1
        print(path)
    return 0


def write_page(path: str, data: bytes) -> None:
    """path := data through a new file renamed into place in path's
    directory: a symlink planted at path (a shared directory, root running
    the report) is replaced, never followed, and a reader never sees half
    a page.  The mode is the umask's, as open() would give."""
    mask = os.umask(0)
    os.umask(mask)
    dfd = os.open(os.path.dirname(path) or ".", os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        safeio.write_atomic(dfd, os.path.basename(path), data, mode=0o666 & ~mask)
    finally:
        os.close(dfd)


def what_if_csv(done: List[Dict[str, Any]], total: Optional[Dict[str, Any]],
                best: Optional[Dict[str, Any]]) -> str:
    """--what-if --csv: a line per job with a prediction, then the total
    line when total is given (several jobs)."""
    buf = io.StringIO()
    wr = csv.writer(buf, lineterminator="\n")
    wr.writerow(WHATIF_CSV)
    for j in done:
        p, rec = j["what_if"], j.get("what_if_recommended")
        wr.writerow([j["raw"], j["job_id"], p["threshold_us"], p["low_khz"], p["ranks"],
                     *p["saved_j"], p.get("measured_j"), (p.get("saved_pct") or [None])[0],
                     p["time_added_s"][0], p["time_added_s"][2], p["time_added_pct"][0],
                     p["clocked_down_s"][0], p["transitions"][0],
                     rec["threshold_us"] if rec else "", *lever_cells([p])])
    if total:
        wr.writerow(["total", "", "", "", total["ranks"], *total["saved_j"],
                     total["measured_j"], "", total["time_added_s"][0],
                     total["time_added_s"][2], total["time_added_pct"][0],
                     total["clocked_down_s"][0], "", best["threshold_us"] if best else "",
                     *lever_cells([j["what_if"] for j in done])])
    return buf.getvalue()


def what_if_text(jobs: List[Dict[str, Any]], done: List[Dict[str, Any]],
                 total: Optional[Dict[str, Any]], rows: Optional[List[Dict[str, Any]]],
                 best: Optional[Dict[str, Any]], model_why: Optional[str]) -> str:
    """--what-if as text: of several jobs a line each, their sums and one
    sweep; of one, its prediction and sweep, or its report when it has
    nothing to predict from.  model_why: why no model file was read."""
    many = len(done) > 1
    out = []
    if many:
        out.append("job              saved J (low .. high)            % of measured  "
                   "time added % (max)\n")
    for j in jobs:
        if j in done:
            out.append(what_if_line(j) if many else what_if_job_text(j))
        elif j.get("what_if_why"):
            out.append(f"{j['job_id']:<14} cannot predict: {j['what_if_why']}\n")
        elif not many:
            out.append(report.job_text(j))
    if many and total:
        out.append(what_if_total_text(total, rows, best))
    if not done:
        out.append("no job with per-rank figures: nothing to predict from\n")
    if model_why:
        out.append(f"note: {model_why}: nodes whose record carries no model are left out\n")
    return "".join(out)


def what_if_line(j: Dict[str, Any]) -> str:
    """One job's line among several."""
    p = j["what_if"]
    pct = p.get("saved_pct")
    return (f"{j['job_id']:<14} {report.fmt_triple(p['saved_j'], 'J'):<32} "
            f"{report.figure(pct[0] if pct else None, '{:.1f} %'):>13}  "
            f"{report.figure(p['time_added_pct'][2], '{:.2f}'):>18}"
            + (f"  ({'; '.join(p['notes'])[:100]})" if p["notes"] else "") + "\n")


def what_if_job_text(j: Dict[str, Any]) -> str:
    """A job alone: what it was, then its prediction and sweep."""
    s = j.get("summary") or {}
    return (f"job {j['job_id']}: {report.figure(j.get('sacct_state'), '{}', '?')}, elapsed "
            f"{report.figure(j.get('elapsed'), '{}', '?')}, {report.figure(s.get('ranks'), '{}', '?')} ranks, MPI share "
            f"{report.percent(s.get('mpi_share'))}, energy "
            f"{report.figure(s.get('energy_j'), '{:.1f} J')} ({report.figure(s.get('energy'), '{}', 'unknown')}; "
            f"{report.METER_TEXT.get(s.get('energy_src') or '', 'source unknown')})\n"
            + text(j["what_if"], j["what_if_sweep"], j.get("what_if_recommended")))


def what_if_total_text(total: Dict[str, Any], rows: Optional[List[Dict[str, Any]]],
                       best: Optional[Dict[str, Any]]) -> str:
    """The sums over several jobs and their one sweep."""
    return (f"\n{total['jobs']} jobs with per-rank figures ({total['ranks']} ranks, "
            f"{total['jobs_with_energy']} with energy, "
            f"{report.figure(total['measured_j'], '{:.0f} J')} measured):\n"
            f"  energy saved   {report.fmt_triple(total['saved_j'], 'J')}\n"
            f"  time added     {report.fmt_triple(total['time_added_s'], 's', '{:.2f}')}"
            f" = {report.figure(total['time_added_pct'][0], '{:.2f}')} % of their wall time\n"
            + text_sweep(rows, best))


def text(p: Dict[str, Any], rows: Optional[List[Dict[str, Any]]] = None,
         best: Optional[Dict[str, Any]] = None) -> str:
    low = f"{p['low_khz'] / 1e6:.2f} GHz" if p.get("low_khz") else "?"
    out = [f"  what-if: threshold {whatif.duration_text(p['threshold_us'])}, low frequency {low} "
           f"(model: {', '.join(p['model'])})",
           f"    energy saved   {report.fmt_triple(p['saved_j'], 'J')}"
           + (f" = {p['saved_pct'][0]:.1f} % of the {p['measured_j']:.0f} J measured "
              f"({p['saved_pct'][1]:.1f} .. {p['saved_pct'][2]:.1f} %)"
              if p.get("saved_pct") else ""),
           f"    time added     {report.fmt_triple(p['time_added_s'], 's', '{:.3f}')}"
           + (f" = {p['time_added_pct'][0]:.2f} % (at most {p['time_added_pct'][2]:.2f} %)"
              if p["time_added_pct"][0] is not None else ""),
           f"    clocked down   {report.fmt_triple(p['clocked_down_s'], 's', '{:.3f}')}, "
           f"transitions {p['transitions'][0]} ({p['transitions'][1]} .. "
           f"{p['transitions'][2]})",
           "    (est (low .. high): histogram buckets, power noise, agent reaction time and "
           "CPU budget; "
           "not: memory-bound phases; see docs/evaluation.md)"]
    for n in p["notes"]:
        out.append(f"    note: {n}")
    out += text_levers(p.get("levers"))
    if rows is not None:
        out.append(text_sweep(rows, best).rstrip("\n"))
    return "\n".join(out) + "\n"


def text_levers(lv: Optional[Dict[str, Any]]) -> List[str]:
    """The levers' lines of text() (each alone, against the run)."""
    if not lv:
        return []
    c, e, u = lv["core"], lv["efficient"], lv["uncore"]
    low = f"{c['low_khz'] / 1e6:.2f} GHz" if c.get("low_khz") else "?"
    out = ["    levers, each alone:",
           f"      core cap to {low:<18} saved {report.fmt_triple(c['saved_j'], 'J')}"]
    if e["predicted"]:
        knee = ",".join(f"{k / 1e6:.2f}" for k in e["knee_khz"])
        out.append(f"      efficient (knee {knee} GHz) {report.fmt_triple(e['saved_j'], 'J')} against "
                   f"the core cap, time added {e['time_added_s'][0]:+.3f} s")
        out.append(f"        ({e['note']})")
        if e.get("without_knee"):
            out.append(f"        note: no knee in the model of {','.join(e['without_knee'])}")
    else:
        out.append(f"      efficient: not predicted ({e['why']})")
    if u["predicted"]:
        out.append(f"      uncore past {whatif.duration_text(u['threshold_us']):<11} saved "
                   f"{report.fmt_triple(u['saved_j'], 'J')}, low "
                   f"{report.fmt_triple(u['low_s'], 's', '{:.3f}')} on {u['packages']} packages")
        for n in u["notes"]:
            out.append(f"        note: {n}")
    else:
        out.append(f"      uncore: not predicted ({u['why']})")
    return out


def text_sweep(rows: Optional[List[Dict[str, Any]]], best: Optional[Dict[str, Any]]) -> str:
    out = []
    if rows:
        out.append("    threshold   saved J (low .. high)         time added % (max)  "
                   "transitions")
        for r in rows:
            mark = "  <- recommended" if best is r else ""
            ta = r["time_added_pct"][2]
            out.append(f"    {whatif.duration_text(r['threshold_us']):>9}  {r['saved_j'][0]:>8.1f} "
                       f"({r['saved_j'][1]:>8.1f} .. {r['saved_j'][2]:>8.1f})  "
                       f"{'-' if ta is None else f'{ta:.2f}':>18}  {r['transitions']:>11}{mark}")
    out.append("    recommended threshold: " + (
        f"{whatif.duration_text(best['threshold_us'])} (saves most, within 2 %, with at most 1 % time added "
        "under the model)" if best else "none saves energy within 1 % time added under the model"))
    return "\n".join(out) + "\n"


def what_if_output(jobs: List[Dict[str, Any]], missing: List[str], wi: Dict[str, Any],
                   a: argparse.Namespace,
                   pages: Optional[Tuple[str, Callable[[Dict[str, Any]], str], str]] = None
                   ) -> int:
    """pages: (destination, renderer, extension) of --svg or --html."""
    model, why = _load_model(a.model)
    done = what_if_jobs(jobs, wi, model, why)
    many = len(done) > 1
    total = whatif.summarise([j["what_if"] for j in done]) if done else None
    rows, best = (whatif.sweep([j["detail"] for j in done], model, wi["low_khz"],
                               reaction_us=wi["reaction_us"], budget_ppm=wi.get("budget_ppm"))
                   if many else (None, None))
    if total is not None:
        total["model_file"] = model.get("path") if model else why
        if many:
            total["sweep"], total["recommended"] = rows, best
    out = sys.stdout
    unpriced = [j for j in jobs if j.get("what_if_why")]
    if not done and unpriced:
        if a.json:
            out.write(report.to_json(jobs, what_if_total=None) + "\n")
        print(f"mpi-pstate report: cannot predict the what-if: {unpriced[0]['what_if_why']}",
              file=sys.stderr)
        return 1
    if a.json:
        out.write(report.to_json(jobs, what_if_total=total) + "\n")
    elif a.csv:
        out.write(what_if_csv(done, total if many else None, best))
    elif pages:
        return write_pages(done, *pages)
    else:
        out.write(what_if_text(jobs, done, total, rows, best, None if model else why))
    for m in missing:
        print(f"mpi-pstate report: job {m} not found in the accounting database", file=sys.stderr)
    return 1 if missing or not done else 0
