# SPDX-License-Identifier: BSD-3-Clause
"""`mpi-pstate report` in list mode, one line per job as sacct prints
them (--format, --helpformat), and `--totals`: sums per user, account or
partition, as text or CSV."""
import argparse
import csv
import io
from typing import Any, Callable, Dict, List, Optional, Tuple

from . import report
from ..model import carbon
from ..model import summary as summ


TOTALS_BY = ("user", "account", "partition")


# A column added comes last: a parser reading them by position keeps working.
TOTALS_CSV = ("group", "jobs", "with_tool", "energy_j", "energy_jobs", "saved_j", "saved_j_lo",
              "saved_j_hi", "saved_jobs", "simulated", "down_s", "wait_s", "co2_spent_g",
              "co2_saved_g", "unreadable")


def totals(rows: List[Tuple[str, str, str, str, str, str]], by: str,
           carbon_cfg: Tuple[Optional[float], Dict[str, float]] = (None, {}),
           problems: Optional[List[str]] = None) -> List[Dict[str, Any]]:
    """Per user, account or partition (by): finished jobs, jobs with a
    summary of ours, energy (jobs whose energy is ok), energy saved (est,
    low, high: the summaries' after-the-fact estimates, summed, so the
    bounds are the safe side), clocked-down and wait seconds, and the
    jobs whose summary is unreadable (summary.read: counted in no sum; the
    problem of each, "job <id>: ...", appended to problems).  rows:
    slurm.sacct_totals.  Sorted by energy saved, largest first."""
    col = 1 + TOTALS_BY.index(by)
    groups: Dict[str, Dict[str, Any]] = {}
    for row in rows:
        g = groups.setdefault(row[col] or "?", {
            "group": row[col] or "?", "jobs": 0, "with_tool": 0, "energy_j": 0.0,
            "energy_jobs": 0, "saved_j": [0.0, 0.0, 0.0], "saved_jobs": 0, "simulated": 0,
            "down_s": 0.0, "wait_s": 0.0, "co2_spent_g": 0.0, "co2_saved_g": [0.0, 0.0, 0.0],
            "down_s_jobs": 0, "wait_s_jobs": 0, "unreadable": 0})
        g["jobs"] += 1
        hit = summ.find(row[5])[0]
        s, bad = summ.read(hit) if hit else (None, None)
        if bad:
            g["unreadable"] += 1
            if problems is not None:
                problems.append(f"job {row[0]}: the summary in the SystemComment is "
                                f"unreadable: {bad}")
        if not s:
            continue
        g["with_tool"] += 1
        if s.get("energy") == "ok" and isinstance(s.get("energy_j"), (int, float)):
            g["energy_j"] += s["energy_j"]
            g["energy_jobs"] += 1
        sv = s.get("saved_j")
        if isinstance(sv, list) and len(sv) == 3 and \
                all(isinstance(x, (int, float)) for x in sv):
            g["saved_j"] = [a + b for a, b in zip(g["saved_j"], sv)]
            g["saved_jobs"] += 1
            g["simulated"] += s.get("saved_src") == "simulated"
        for k in ("down_s", "wait_s"):
            if isinstance(s.get(k), (int, float)) and not isinstance(s.get(k), bool):
                g[k] += s[k]
                g[k + "_jobs"] += 1
        c = carbon.figures(s, carbon.intensity(carbon_cfg, row[3]))
        if c:
            g["co2_spent_g"] += c.get("spent_g", 0.0)
            g["co2_saved_g"] = [a + b for a, b in zip(g["co2_saved_g"], c.get("saved_g",
                                                                             [0.0] * 3))]
    out = sorted(groups.values(), key=lambda g: (-g["saved_j"][0], g["group"]))
    for g in out:
        # A sum over no job is unknown (null, empty, "-"), never 0.0
        g["energy_j"] = round(g["energy_j"], 3) if g["energy_jobs"] else None
        for k in ("down_s", "wait_s"):
            g[k] = round(g[k], 3) if g.pop(k + "_jobs") else None
        g["saved_j"] = [round(x, 2) for x in g["saved_j"]] if g["saved_jobs"] else None
        if carbon_cfg == (None, {}):
            del g["co2_spent_g"], g["co2_saved_g"]
        else:
            g["co2_spent_g"] = round(g["co2_spent_g"], 3) if g["energy_jobs"] else None
            g["co2_saved_g"] = [round(x, 3) for x in g["co2_saved_g"]] if g["saved_jobs"] \
                else None
    return out


def totals_text(groups: List[Dict[str, Any]], by: str, since: str) -> str:
    out = [f"jobs ended since {since}, by {by}: {sum(g['jobs'] for g in groups)} jobs, "
           f"{sum(g['with_tool'] for g in groups)} with mpi-pstate",
           f"  {by:<16} {'jobs':>6} {'with':>6} {'energy J':>12}  {'saved J (low .. high)':<32}"
           f" {'clocked down s':>14}" + (f" {'CO2 saved g':>12}" if any("co2_saved_g" in g
                                                                        for g in groups) else "")]
    for g in groups:
        sv = g["saved_j"]
        saved = f"{sv[0]:.1f} ({sv[1]:.1f} .. {sv[2]:.1f})" + ("*" if g["simulated"] else "") \
            if sv else "-"
        co2 = g.get("co2_saved_g")
        out.append(f"  {g['group'][:16]:<16} {g['jobs']:>6} {g['with_tool']:>6} "
                   f"{report.figure(g['energy_j'], '{:.1f}'):>12}  {saved:<32} "
                   f"{report.figure(g['down_s'], '{:.1f}'):>14}"
                   + (f" {report.figure(co2[0] if co2 else None, '{:.2f}'):>12}" if "co2_saved_g" in g
                      else ""))
    if any(g["simulated"] for g in groups):
        out.append("  * SIMULATED: some savings were priced with models calibrated on fake "
                   "hardware")
    bad = sum(g.get("unreadable", 0) for g in groups)
    if bad:
        out.append(f"  {bad} job{'s' if bad != 1 else ''} with an unreadable summary, in no "
                   "figure above (each named with its problem on stderr)")
    out.append("  (-: no job of the group has the figure)")
    return "\n".join(out) + "\n"


def totals_csv(groups: List[Dict[str, Any]]) -> str:
    buf = io.StringIO()
    wr = csv.writer(buf, lineterminator="\n")
    wr.writerow(TOTALS_CSV)
    for g in groups:
        wr.writerow([cell(x) for x in (
            g["group"], g["jobs"], g["with_tool"], g["energy_j"], g["energy_jobs"],
            *(g["saved_j"] or [None] * 3), g["saved_jobs"], g["simulated"], g["down_s"],
            g["wait_s"], g.get("co2_spent_g"), (g.get("co2_saved_g") or [None])[0],
            g.get("unreadable", 0))])
    return buf.getvalue()


def add_list_args(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("list mode: one line per job (or step), as sacct prints")
    g.add_argument("--list", action="store_true",
                   help="one line per job also for the JOBIDs given (a selection without "
                   "JOBID lists anyway)")
    g.add_argument("-o", "--format", metavar="FIELDS",
                   help="fields, comma-separated, each with an optional %%WIDTH (JobID%%20); "
                   "--helpformat lists them; default " + ",".join(DEFAULT_LIST))
    g.add_argument("--helpformat", action="store_true", help="list the fields of --format")
    g.add_argument("-p", "--parsable", action="store_true",
                   help="fields separated by |, with a | at the end of each line (sacct -p)")
    g.add_argument("-P", "--parsable2", action="store_true",
                   help="fields separated by |, none at the end (sacct -P)")
    g.add_argument("-n", "--noheader", action="store_true", help="no header line")


def list_options(a: argparse.Namespace) -> Optional[Dict[str, Any]]:
    """List mode's fields and form, or None when the jobs are reported
    whole: list mode is asked for (--list, --format, --parsable,
    --parsable2, --noheader) or a selection is given without a JOBID."""
    asked = any(getattr(a, k, None) for k in ("list", "format", "parsable", "parsable2",
                                               "noheader"))
    jobs = getattr(a, "jobs", None) or getattr(a, "job_lists", None)
    if not asked and (jobs or not report.selection(a)):
        return None
    if (a.parsable or a.parsable2) and (a.json or a.csv):
        raise ValueError("--parsable and --parsable2 are a text form: not with --json or --csv")
    if a.parsable and a.parsable2:
        raise ValueError("give one of --parsable and --parsable2")
    if a.svg or a.html:
        raise ValueError("list mode prints a line per job: --svg and --html write a chart or "
                         "a page per job, give them without list mode options")
    return {"fields": list_format(a.format) if a.format else
            [(f, LIST_FIELDS[f.lower()][1]) for f in DEFAULT_LIST],
            "delim": "|" if a.parsable or a.parsable2 else None, "end": bool(a.parsable),
            "header": not a.noheader}


def _sum_of(key: str) -> Callable[[Dict[str, Any]], Any]:
    return lambda j: (j.get("summary") or {}).get(key) if j.get("status") == "ok" else None


def _triple_of(key: str, i: int) -> Callable[[Dict[str, Any]], Any]:
    def get(j: Dict[str, Any]) -> Any:
        v = _sum_of(key)(j)
        return v[i] if isinstance(v, list) and len(v) == 3 else None
    return get


def _record(j: Dict[str, Any]) -> str:
    """What mpi-pstate has of the job: its summary's state (complete,
    partial), running, none (ran without it), newer (a summary of a version
    this release does not know), unreadable (one whose keys do not have
    their types: summary.read)."""
    if j.get("status") == "ok":
        return str((j.get("summary") or {}).get("state") or "unknown")
    if j.get("status") == "unreadable":
        return "unreadable"
    if j.get("summary_in"):
        return "newer"
    return str(j.get("status") or "none")


def _carbon_of(key: str) -> Callable[[Dict[str, Any]], Any]:
    def get(j: Dict[str, Any]) -> Any:
        v = (j.get("carbon") or {}).get(key)
        return v[0] if isinstance(v, list) else v
    return get


# lower-case name -> (name, width, value, kind); kind: "text", "int", "s"
# (seconds), "j" (joules), "share" (a fraction, a percentage in text), "g".
LIST_FIELDS: Dict[str, Tuple[str, int, Callable[[Dict[str, Any]], Any], str]] = {
    f[0].lower(): f for f in (
        ("JobID", 14, lambda j: j.get("job_id"), "text"),
        ("JobIDRaw", 10, lambda j: j.get("raw"), "text"),
        ("User", 9, lambda j: j.get("user") or None, "text"),
        ("Account", 10, lambda j: j.get("account") or None, "text"),
        ("Partition", 10, lambda j: j.get("partition") or None, "text"),
        ("State", 10, lambda j: j.get("sacct_state") or None, "text"),
        ("ExitCode", 8, lambda j: j.get("exit_code") or None, "text"),
        ("Elapsed", 10, lambda j: j.get("elapsed") or None, "text"),
        ("Start", 19, lambda j: j.get("start") or None, "text"),
        ("End", 19, lambda j: j.get("end") or None, "text"),
        ("NodeList", 15, lambda j: j.get("nodes") or None, "text"),
        ("Record", 10, _record, "text"),
        ("Mode", 7, lambda j: report.run_settings(j)["mode"], "text"),
        ("Threshold", 9, lambda j: report.run_settings(j)["threshold"], "text"),
        ("Nodes", 5, _sum_of("nodes"), "int"),
        ("Ranks", 6, _sum_of("ranks"), "int"),
        ("RankSteps", 9, _sum_of("rank_steps"), "int"),
        ("Steps", 5, _sum_of("steps"), "int"),
        ("WallS", 9, _sum_of("wall_s"), "s"),
        ("MPIShare", 8, _sum_of("mpi_share"), "share"),
        ("WaitS", 9, _sum_of("wait_s"), "s"),
        ("DownS", 9, _sum_of("down_s"), "s"),
        ("DownShare", 9, _sum_of("down_share"), "share"),
        ("Transitions", 11, _sum_of("transitions"), "int"),
        ("Imbalance", 9, _sum_of("imbalance"), "share"),
        ("EnergyJ", 10, lambda j: _sum_of("energy_j")(j) if _sum_of("energy")(j) in
         ("ok", "partial") else None, "j"),
        ("Energy", 8, _sum_of("energy"), "text"),
        ("EnergySrc", 9, _sum_of("energy_src"), "text"),
        ("SavedJ", 9, _triple_of("saved_j", 0), "j"),
        ("SavedJLow", 9, _triple_of("saved_j", 1), "j"),
        ("SavedJHigh", 10, _triple_of("saved_j", 2), "j"),
        ("SavedSrc", 9, _sum_of("saved_src"), "text"),
        ("FullJ", 10, _triple_of("full_j", 0), "j"),
        ("TimeAddedS", 10, _triple_of("time_added_s", 0), "s"),
        ("CO2SpentG", 9, _carbon_of("spent_g"), "g"),
        ("CO2SavedG", 9, _carbon_of("saved_g"), "g"))}


DEFAULT_LIST = ("JobID", "User", "Partition", "State", "Elapsed", "Record", "Ranks",
                "MPIShare", "DownShare", "EnergyJ", "SavedJ")


FIELD_TEXT = {"State": "the job's base state (sacct)",
              "Record": "complete, partial, running, none (ran without mpi-pstate), newer, "
              "unreadable (a summary whose keys do not have their types)",
              "Energy": "ok, partial, or why there is no energy figure",
              "EnergySrc": "rapl, hwmon, simulated, mixed, none, unknown",
              "SavedSrc": "what priced the saving: rapl, simulated, mixed"}


def list_format(text: str) -> List[Tuple[str, int]]:
    """--format: "JobID%20,User,energyj" -> [(name, width)]; names as sacct
    takes them, in any case; ValueError names the fields there are."""
    out = []
    for item in text.split(","):
        name, _, width = item.strip().partition("%")
        f = LIST_FIELDS.get(name.lower())
        if f is None:
            raise ValueError(f"--format: no field {name!r}; the fields: "
                             f"{', '.join(x[0] for x in LIST_FIELDS.values())}")
        if width and not (width.isdigit() and 0 < int(width) <= 1000):
            raise ValueError(f"--format: bad width {item.strip()!r} (JobID%20)")
        out.append((f[0], int(width) if width else f[1]))
    return out


def help_format() -> str:
    """--helpformat: every field, its unit and what it holds."""
    unit = {"text": "", "int": "count", "s": "seconds", "j": "joules",
            "share": "fraction (text: a percentage)", "g": "grams of CO2"}
    return "".join(f"{f[0]:<12} {unit[f[3]]}"
                   + (f"{'; ' if unit[f[3]] else ''}{FIELD_TEXT[f[0]]}" if f[0] in FIELD_TEXT
                      else "") + "\n" for f in LIST_FIELDS.values())


def cell(v: Any) -> str:
    """A value for CSV and --parsable: unknown is empty, never 0 or None."""
    if v is None:
        return ""
    if isinstance(v, bool):
        return "yes" if v else "no"
    if isinstance(v, float):
        return repr(round(v, 6))
    return str(v)


def _text_cell(v: Any, kind: str) -> str:
    if v is None:
        return "-"
    if kind == "share" and isinstance(v, (int, float)):
        return f"{v:.1%}"
    if kind == "j" and isinstance(v, (int, float)):
        return f"{v:.1f}"
    if kind == "s" and isinstance(v, (int, float)):
        return f"{v:.3f}"
    if kind == "g" and isinstance(v, (int, float)):
        return f"{v:.3f}"
    return report.figure(v, "{}")


def list_rows(jobs: List[Dict[str, Any]], fields: List[Tuple[str, int]]) -> List[List[Any]]:
    return [[LIST_FIELDS[name.lower()][2](j) for name, _ in fields] for j in jobs]


def list_text(jobs: List[Dict[str, Any]], lo: Dict[str, Any]) -> str:
    """The lines of list mode: columns of each field's width, right-aligned
    and cut with a + as sacct cuts them, under a header and a rule; or,
    with --parsable/--parsable2, fields between | (unknown: empty)."""
    fields = lo["fields"]
    out = []
    if lo["delim"]:
        end = lo["delim"] if lo["end"] else ""
        if lo["header"]:
            out.append(lo["delim"].join(n for n, _ in fields) + end)
        for row in list_rows(jobs, fields):
            out.append(lo["delim"].join(cell(v).replace("|", "/") for v in row) + end)
        return "".join(x + "\n" for x in out)

    def fit(text: str, w: int) -> str:
        return text.rjust(w) if len(text) <= w else text[:w - 1] + "+"
    if lo["header"]:
        out.append(" ".join(fit(n, w) for n, w in fields))
        out.append(" ".join("-" * w for _, w in fields))
    for row in list_rows(jobs, fields):
        out.append(" ".join(fit(_text_cell(v, LIST_FIELDS[n.lower()][3]), w)
                            for v, (n, w) in zip(row, fields)))
    return "".join(x + "\n" for x in out)


def list_csv(jobs: List[Dict[str, Any]], lo: Dict[str, Any]) -> str:
    buf = io.StringIO()
    wr = csv.writer(buf, lineterminator="\n")
    if lo["header"]:
        wr.writerow([n for n, _ in lo["fields"]])
    for row in list_rows(jobs, lo["fields"]):
        wr.writerow([cell(v) for v in row])
    return buf.getvalue()


def list_json(jobs: List[Dict[str, Any]], lo: Dict[str, Any]) -> str:
    names = [n for n, _ in lo["fields"]]
    return report.document("mpi-pstate-list", fields=names,
                    jobs=[dict(zip(names, row)) for row in list_rows(jobs, lo["fields"])])
