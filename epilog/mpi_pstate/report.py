# SPDX-License-Identifier: BSD-3-Clause
"""`mpi-pstate report`: per job, per node and per rank, as text, JSON, CSV
or an SVG chart (standard library only).  Input: the summary in the job's
SystemComment (sacct; AdminComment for the version 1 summaries of earlier
releases) and the per-rank detail beside it in collect_dir; a job whose
epilog was missed is merged on the fly from its node records."""
import argparse
import csv
import io
import json
import math
import os
import sys
from typing import Any, Callable, Dict, List, Optional, Tuple
from xml.sax.saxutils import escape

from . import carbon, parse
from . import summary as summ
from . import whatif

CSV_FIELDS = ("job", "job_id", "step", "node", "rank", "local", "cpu", "state", "wall_s",
              "mpi_s", "mpi_share", "wait_s", "long_calls", "down_s", "transitions", "calls",
              "bytes", "top_function")
TOP_WAITERS = 5
# The summary's "energy_src": joules are labelled by what measured them.
METER_TEXT = {"rapl": "measured: RAPL", "hwmon": "measured: hwmon", "none": "no energy figure",
              "simulated": "SIMULATED: powercap is not the kernel's sysfs, not a measurement",
              "mixed": "some nodes measured, some SIMULATED: not a measurement"}
WALL_SRC = {"sacct": "", "steps": " (sum of the steps; sacct had no Elapsed)"}


def _f(v: Any, fmt: str = "{:.3f}", none: str = "-") -> str:
    if v is None:
        return none
    try:
        return fmt.format(v)
    except (ValueError, TypeError):
        return str(v)


def _pct(v: Any) -> str:
    return _f(v, "{:.1%}")


def _sum(ranks: List[Dict[str, Any]], key: str) -> Optional[float]:
    vals = [r.get(key) for r in ranks]
    return None if any(v is None for v in vals) else sum(vals)  # type: ignore[arg-type]


def reaction(ranks: List[Dict[str, Any]]) -> Optional[Dict[str, Any]]:
    """How the job's long waits were found, per step and in all (docs/agent.md,
    "Reaction"): announced by a rank predicting them long, of those the ones
    that stayed short (mispredicted), and the rest left to the agent's polls;
    with the clocked-down time against the ideal, the time past the threshold
    (over_s).  None without the rank counters (records of older releases):
    a figure is given only when every rank of its group has it."""
    steps: Dict[str, List[Dict[str, Any]]] = {}
    for r in ranks:
        steps.setdefault(str(r.get("step")), []).append(r)

    def one(rs: List[Dict[str, Any]]) -> Optional[Dict[str, Any]]:
        longs, ann, short = (_sum(rs, k) for k in ("long_calls", "announced", "mispredicted"))
        if longs is None or ann is None or short is None:
            return None
        over, down = _sum(rs, "over_s"), _sum(rs, "down_s")
        return {"long_waits": int(longs), "announced": int(ann), "mispredicted": int(short),
                "polled": int(max(0, longs - (ann - short))),
                "over_s": None if over is None else round(over, 4),
                "down_s": None if down is None else round(down, 4),
                "down_of_ideal": round(down / over, 4) if over and down is not None else None}

    total = one(ranks)
    if total is None:
        return None
    total["steps"] = {k: v for k, v in ((k, one(rs)) for k, rs in steps.items()) if v}
    return total


def reaction_text(x: Dict[str, Any]) -> str:
    return (f"{x['long_waits']} long waits: {x['announced']} announced by the ranks "
            f"({x['mispredicted']} of those stayed short), {x['polled']} found by the agent's "
            f"polls; clocked down {_pct(x['down_of_ideal'])} of the time past the threshold")


# Below this share of a core over their long waits, a rank's waits sleep,
# whatever its environment says (docs/preload.md, "Wait mode").
SLEEP_SHARE = 0.2
WAIT_MODES = ("poll", "yield", "sleep")


def _share(r: Dict[str, Any]) -> Optional[float]:
    s = r.get("wait_cpu_share")
    return s if type(s) in (int, float) and 0.0 <= s <= 1.0 else None


def wait_verdict(r: Dict[str, Any]) -> Optional[str]:
    """How one rank's long waits use its core: "sleep" (measured below
    SLEEP_SHARE, or set to sleep with nothing measured), "yield" (set to
    yield and not measured asleep: sched_yield leaves the core busy),
    "busy" (polls, or measured busy), "busy_not_sleep" (set to sleep but
    measured busy), None when nothing is known.  Both figures are the
    rank's own: a share outside [0, 1] or of another type is not used."""
    mode = r.get("wait_mode")
    mode = mode if mode in WAIT_MODES else None
    share = _share(r)
    if share is None:
        return {"sleep": "sleep", "yield": "yield", "poll": "busy"}.get(mode or "")
    if share < SLEEP_SHARE:
        return "sleep"
    return {"yield": "yield", "sleep": "busy_not_sleep"}.get(mode or "", "busy")


def wait_text(ranks: List[Dict[str, Any]], multi: bool) -> List[str]:
    """The lines that say where clocking down during waits buys little (the
    core already idles) and where a yielding library still keeps it busy."""
    groups: Dict[str, List[Dict[str, Any]]] = {}
    for r in ranks:
        v = wait_verdict(r)
        if v in ("sleep", "yield", "busy_not_sleep"):
            groups.setdefault(v, []).append(r)

    def names(rs: List[Dict[str, Any]]) -> str:
        some = ", ".join(f"{summ.rank_label(r, multi)}@{r.get('node')}"
                         for r in rs[:TOP_WAITERS])
        more = f" and {len(rs) - TOP_WAITERS} more" if len(rs) > TOP_WAITERS else ""
        return f"{len(rs)} rank{'s' if len(rs) != 1 else ''} ({some}{more}"

    def shares(rs: List[Dict[str, Any]]) -> str:
        s = [x for x in map(_share, rs) if x is not None]
        if not s:
            return "not measured"
        lo, hi = min(s), max(s)
        return "long waits used " + (_pct(lo) if lo == hi else f"{_pct(lo)}-{_pct(hi)}") + \
            " of a core"

    out = []
    rs = groups.get("sleep")
    if rs:
        out.append(f"waits sleep on {names(rs)}; {shares(rs)}): their "
                   "cores already idle while they wait, so clocking them down during waits "
                   "buys little")
    rs = groups.get("yield")
    if rs:
        out.append(f"the MPI library yields in its waits on {names(rs)}; "
                   f"{shares(rs)}): yield is not sleep, the core stays busy and clocking it "
                   "down still saves")
    rs = groups.get("busy_not_sleep")
    if rs:
        out.append(f"set to sleep in waits but measured busy on {names(rs)}; {shares(rs)}): "
                   "their waits keep the core busy")
    return out


def carbon_text(c: Dict[str, Any]) -> str:
    parts = []
    if "spent_g" in c:
        parts.append(f"{c['spent_g']:.2f} g spent")
    if "saved_g" in c:
        sv = c["saved_g"]
        parts.append(f"{sv[0]:.3f} g saved ({sv[1]:.3f} .. {sv[2]:.3f})")
    return f"CO2: {', '.join(parts)} at {c['g_per_kwh']:g} g/kWh (the site's carbon_g_per_kwh)"


def saved_text(s: Dict[str, Any]) -> str:
    """The summary's after-the-fact saving (whatif.saving), or ""."""
    sv, full, add = s.get("saved_j"), s.get("full_j"), s.get("time_added_s")
    if not isinstance(sv, list) or len(sv) != 3:
        return ""
    out = f"saved: {whatif.fmt_triple(sv, 'J')}"
    if isinstance(full, list) and len(full) == 3 and full[0]:
        out += f" = {100 * sv[0] / full[0]:.1f} % of the {full[0]:.1f} J it would have used at " \
               "full clock"
    if isinstance(add, list) and len(add) == 3:
        out += f"; time added {add[0]:.3f} s (at most {add[2]:.3f} s)"
    src = s.get("saved_src")
    out += " (SIMULATED: priced with a model calibrated on fake hardware)" \
        if src == "simulated" else f" (priced with the nodes' {src} power model)"
    return out


def job_text(j: Dict[str, Any]) -> str:
    """One job: summary, nodes, settings, ranks that wait most, every rank."""
    head = (f"job {j['job_id']} (raw {j['raw']}): {j.get('sacct_state', '?')}, "
            f"elapsed {j.get('elapsed', '?')}, exit {j.get('exit_code', '?')}\n")
    if j["status"] != "ok":
        return head + f"  {j['message']}\n"
    d = j.get("detail")
    if not d:
        return (head + summary_text(j) + "  (per-rank detail not available: "
                f"{j.get('detail_why', 'not found in the collection directory')})\n")
    return head + summary_text(j) + nodes_text(d) + waits_text(j, d) + ranks_text(d)


def summary_text(j: Dict[str, Any]) -> str:
    """The job's figures from its summary: state, size, time, energy and
    what was saved."""
    out = io.StringIO()
    w = out.write
    s = j["summary"]
    w(f"  mpi-pstate: {s.get('state')}"
      + (f" -- no record from {s.get('missing')} ({s.get('missing_n')} nodes)"
         if s.get("missing") else "") + "\n")
    if j.get("note"):
        w(f"  note: {j['note']}\n")
    w(f"  ranks {_f(s.get('ranks'), '{}', '?')} on {s.get('nodes')} nodes, steps "
      f"{s.get('steps')} ({_f(s.get('rank_steps'), '{}', '?')} rank-steps); job wall time "
      f"{_f(s.get('wall_s'), '{:.1f} s')}{WALL_SRC.get(s.get('wall_src'), '')}, longest step "
      f"{_f(s.get('step_wall_s'), '{:.3f} s')}\n")
    w(f"  MPI share {_pct(s.get('mpi_share'))}, long waits {_f(s.get('wait_s'))} s, "
      f"clocked down {_f(s.get('down_s'))} s ({_pct(s.get('down_share'))}), "
      f"transitions {_f(s.get('transitions'), '{}')}; imbalance {_pct(s.get('imbalance'))}\n")
    w(f"  energy: {_f(s.get('energy_j'), '{:.1f} J')} ({s.get('energy')}; "
      f"{METER_TEXT.get(s.get('energy_src'), 'source unknown')})\n")
    if saved_text(s):
        w(f"  {saved_text(s)}\n")
    if j.get("carbon"):
        w(f"  {carbon_text(j['carbon'])}\n")
    return out.getvalue()


def nodes_text(d: Dict[str, Any]) -> str:
    """A line per node (status, ranks, energy, restore, frequency
    settings), then its reasons, warnings, C-states and problems."""
    out = io.StringIO()
    w = out.write
    w("\n  node        status   ranks  energy        restore  settings\n")
    for n, v in d["nodes"].items():
        en = v.get("energy") or {}
        st = v.get("settings") or {}
        cf = st.get("cpufreq", {}) if isinstance(st, dict) else {}
        rs = (v.get("restore") or {}).get("status", "-")
        sets = ""
        if cf:
            sets = (f"driver {cf.get('driver') or 'none'}, governor "
                    f"{','.join(cf.get('governors') or []) or '-'}, boost {cf.get('boost')}")
        w(f"  {n:<11} {_f(v.get('status'), '{}', '?'):<8} {_f(v.get('ranks'), '{}', '0'):>5}  "
          f"{_f(en.get('joules'), '{:.1f} J'):>10} {_f(en.get('status'), '{}', ''):<3}"
          f"{'*' if en.get('meter') == 'simulated' else ' '} {_f(rs, '{}'):<8} "
          f"{sets}\n")
        if v.get("why"):
            w(f"              {v['why']}\n")
        for warn in (st.get("warnings") or [])[:6] if isinstance(st, dict) else []:
            w(f"              warning: {warn}\n")
        cs = st.get("cstates", {}) if isinstance(st, dict) else {}
        if cs.get("states"):
            w("              C-states: " + ", ".join(
                f"{c.get('name')} {c.get('exit_latency_us')}us"
                + ("" if not c.get("disabled_cpus") else f" (off on {c['disabled_cpus']})")
                for c in cs["states"][:8]) + "\n")
        for p in (v.get("problems") or [])[:5]:
            w(f"              problem: {p}\n")
    return out.getvalue()


def waits_text(j: Dict[str, Any], d: Dict[str, Any]) -> str:
    """How the long waits were found, how the ranks wait, and the ranks
    that wait most."""
    out = io.StringIO()
    w = out.write
    ranks = d.get("ranks", [])
    multi = len(d.get("steps", [])) > 1
    rx = j.get("reaction")
    if rx:
        w("\n  waits: " + reaction_text(rx) + "\n")
        if multi:
            for step, x in list(rx["steps"].items())[:TOP_WAITERS]:
                w(f"    step {step}: " + reaction_text(x) + "\n")
    for line in wait_text(ranks, multi):
        w(f"\n  {line}\n")
    waiters = sorted((r for r in ranks if r.get("mpi_share") is not None),
                     key=lambda r: -r["mpi_share"])[:TOP_WAITERS]
    if waiters:
        w("\n  ranks that wait most: " + ", ".join(
            f"{summ.rank_label(r, multi)}@{r['node']} {_pct(r['mpi_share'])}"
            for r in waiters) + "\n")
    return out.getvalue()


def ranks_text(d: Dict[str, Any]) -> str:
    """The table of every rank."""
    out = ["\n  step rank node        cpu state       wall_s    mpi_s  share   wait_s   down_s "
           " trans  top function\n"]
    for r in d.get("ranks", []):
        top = r.get("top") or []
        # Every field through _f: a rank the agent did not vouch for has null
        # down_s and transitions, and the text must still print.
        out.append(f"  {_f(r.get('step'), '{}'):>4} {_f(r.get('rank'), '{}'):>4} "
                   f"{_f(r.get('node'), '{}'):<11} {_f(r.get('cpu'), '{}'):>3} "
                   f"{_f(r.get('state'), '{}'):<10} {_f(r.get('wall_s')):>8} "
                   f"{_f(r.get('mpi_s')):>8} {_pct(r.get('mpi_share')):>6} "
                   f"{_f(r.get('wait_s')):>8} {_f(r.get('down_s')):>8} "
                   f"{_f(r.get('transitions'), '{}'):>6}  "
                   f"{_f(top[0][0] if top else None, '{}')}\n")
    return "".join(out)


def to_csv(jobs: List[Dict[str, Any]]) -> str:
    buf = io.StringIO()
    wr = csv.writer(buf, lineterminator="\n")
    wr.writerow(CSV_FIELDS)
    for j in jobs:
        for r in (j.get("detail") or {}).get("ranks", []):
            top = r.get("top") or []
            wr.writerow([j["raw"], j["job_id"], r["step"], r["node"], r["rank"], r["local"],
                         r.get("cpu"), r["state"], r.get("wall_s"), r.get("mpi_s"),
                         r.get("mpi_share"), r.get("wait_s"), r.get("long_calls"),
                         r.get("down_s"), r.get("transitions"), r.get("calls"), r.get("bytes"),
                         top[0][0] if top else ""])
    return buf.getvalue()


def document(fmt: str, **body: Any) -> str:
    """Every JSON document report prints: its format, version 1, the body."""
    return json.dumps({"format": fmt, "version": 1, **body}, indent=1)


def to_json(jobs: List[Dict[str, Any]], **rest: Any) -> str:
    return document("mpi-pstate-report", jobs=jobs, **rest)


def svg(j: Dict[str, Any]) -> str:
    """The chart, with the what-if's figures under it when there are some."""
    text = _svg(j)
    wi = j.get("what_if")
    if not wi or not wi.get("ranks"):
        return text
    head, _, _ = text.rpartition("</svg>")
    h = int(head.split('height="', 1)[1].split('"', 1)[0])
    lines = whatif.svg_lines(wi, h + 4)
    rec = j.get("what_if_recommended")
    if rec:
        lines.append(f'<text x="10" y="{h + 20}">recommended threshold '
                     f'{escape(whatif._us(rec["threshold_us"]))}: saves most with at most 1 % '
                     'time added under the model</text>')
    levers = lever_lines(wi.get("levers"))
    for i, line in enumerate(levers):
        lines.append(f'<text x="{10 if i == 0 else 20}" y="{h + 36 + 16 * i}">{escape(line)}'
                     '</text>')
    grown = h + 30 + 16 * len(levers)
    head = head.replace(f'height="{h}"', f'height="{grown}"', 1)
    return head + "\n".join(lines) + "\n</svg>\n"


# What the chart's 790 px hold of a line at 11 px sans-serif.
SVG_LINE_CHARS = 130


def lever_name(name: str, x: Dict[str, Any]) -> str:
    """A lever as the text output names it: the core cap by its low
    frequency, the efficient level by its knee, the uncore by its threshold
    (the last two only when predicted: a lever not predicted has neither)."""
    if name == "core":
        low = x.get("low_khz")
        return f"core cap to {low / 1e6:.2f} GHz" if low else "core cap"
    if not x.get("predicted"):
        return name
    if name == "efficient":
        return "efficient (knee " + ",".join(f"{k / 1e6:.2f}" for k in x["knee_khz"]) + " GHz)"
    return f"uncore past {whatif._us(x['threshold_us'])}"


def lever_lines(lv: Optional[Dict[str, Any]]) -> List[str]:
    """The chart's lines of the levers, each alone against the run: its
    saving, or why it was not predicted, cut to the chart's width (the
    text, JSON and HTML keep the whole reason)."""
    if not lv:
        return []
    lines = ["levers, each alone against the run:"]
    for name in ("core", "efficient", "uncore"):
        x = lv.get(name) or {}
        label = lever_name(name, x)
        if name != "core" and not x.get("predicted"):
            lines.append(f"{label}: not predicted ({x.get('why', '?')})")
            continue
        line = f"{label}: saved {whatif.fmt_triple(x['saved_j'], 'J')}"
        if name == "efficient":
            line += " against the core cap"
        elif name == "uncore":
            line += f" on {x['packages']} packages"
        lines.append(line)
    return [ln if len(ln) <= SVG_LINE_CHARS else ln[:SVG_LINE_CHARS - 3] + "..." for ln in lines]


def _svg(j: Dict[str, Any]) -> str:
    """Per-rank bars: time computing, time in MPI (long waits darker), and
    time clocked down as a line under each bar."""
    d = j.get("detail") or {}
    ranks = d.get("ranks", [])
    multi = len(d.get("steps", [])) > 1
    bar, gap, left, top_m, width = 14, 6, 150, 60, 600
    h = top_m + max(1, len(ranks)) * (bar + gap) + 60
    ticks = round_ticks(max((r.get("wall_s") or 0 for r in ranks), default=0) or 1.0)
    sc = width / ticks[-1]
    o = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{left + width + 40}" height="{h}" '
         f'font-family="sans-serif" font-size="11">',
         f'<title>{escape("mpi-pstate job " + str(j["job_id"]))}</title>',
         f'<text x="10" y="20" font-size="14">{escape("job " + str(j["job_id"]))}: per-rank '
         f'time (s)</text>',
         '<rect x="10" y="32" width="10" height="10" fill="#7aa6d6"/>'
         '<text x="24" y="41">compute</text>'
         '<rect x="90" y="32" width="10" height="10" fill="#f2b36f"/>'
         '<text x="104" y="41">MPI</text>'
         '<rect x="140" y="32" width="10" height="10" fill="#d9662b"/>'
         '<text x="154" y="41">long waits</text>'
         '<rect x="230" y="36" width="10" height="3" fill="#2b8a3e"/>'
         '<text x="244" y="41">clocked down</text>']
    if not ranks:
        o.append(f'<text x="10" y="{top_m + 10}">no per-rank data</text>')
    for i, r in enumerate(ranks):
        y = top_m + i * (bar + gap)
        wall = r.get("wall_s") or 0.0
        mpi = min(r.get("mpi_s") or 0.0, wall)
        wait = min(r.get("wait_s") or 0.0, mpi)
        down = min(r.get("down_s") or 0.0, wall)
        label = f"{summ.rank_label(r, multi)} {r['node']}"
        o.append(f'<text x="{left - 6}" y="{y + bar - 3}" text-anchor="end">'
                 f'{escape(label[:24])}</text>')
        comp = (wall - mpi) * sc
        o.append(f'<rect x="{left}" y="{y}" width="{comp:.1f}" height="{bar}" fill="#7aa6d6">'
                 f'<title>{escape(f"compute {wall - mpi:.3f} s")}</title></rect>')
        o.append(f'<rect x="{left + comp:.1f}" y="{y}" width="{(mpi - wait) * sc:.1f}" '
                 f'height="{bar}" fill="#f2b36f"><title>{escape(f"MPI {mpi:.3f} s")}</title>'
                 '</rect>')
        o.append(f'<rect x="{left + comp + (mpi - wait) * sc:.1f}" y="{y}" '
                 f'width="{wait * sc:.1f}" height="{bar}" fill="#d9662b">'
                 f'<title>{escape(f"long waits {wait:.3f} s")}</title></rect>')
        if down > 0:
            o.append(f'<rect x="{left}" y="{y + bar}" width="{down * sc:.1f}" height="3" '
                     f'fill="#2b8a3e"><title>{escape(f"clocked down {down:.3f} s")}</title>'
                     '</rect>')
        if r.get("mpi_share") is not None:
            o.append(f'<text x="{left + wall * sc + 4:.1f}" y="{y + bar - 3}">'
                     f'{r["mpi_share"]:.0%}</text>')
    o += axis(left, top_m + len(ranks) * (bar + gap) + 10, width, ticks,
              "each rank's wall time in the step, seconds; the share is its time in MPI")
    o.append("</svg>\n")
    return "\n".join(o)


def round_ticks(v: float, most: int = 6) -> List[float]:
    """Axis ticks at round values (1, 2 or 5 times a power of ten) from 0
    to the first at or past v, at most `most` intervals."""
    step = 10.0 ** math.floor(math.log10(v / most)) if v > 0 else 1.0
    for m in (1, 2, 5, 10):
        if v / (step * m) <= most:
            step *= m
            break
    n = max(1, math.ceil(v / step - 1e-9))
    return [round(k * step, 12) for k in range(n + 1)]


def axis(left: float, y: float, width: float, ticks: List[float], label: str) -> List[str]:
    """A horizontal axis from ticks[0] to ticks[-1] over width, its ticks
    labelled, and what it measures under it."""
    o = [f'<line x1="{left}" y1="{y}" x2="{left + width}" y2="{y}" stroke="black"/>']
    for t in ticks:
        x = left + width * (t - ticks[0]) / (ticks[-1] - ticks[0])
        o.append(f'<line x1="{x:.1f}" y1="{y}" x2="{x:.1f}" y2="{y + 4}" stroke="black"/>'
                 f'<text x="{x:.1f}" y="{y + 16}" text-anchor="middle">{t:g}</text>')
    o.append(f'<text x="{left + width / 2:.1f}" y="{y + 32}" text-anchor="middle">'
             f'{escape(label)}</text>')
    return o


# ---- report --what-if ---------------------------------------------------------

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


TOTALS_BY = ("user", "account", "partition")
TOTALS_CSV = ("group", "jobs", "with_tool", "energy_j", "energy_jobs", "saved_j", "saved_j_lo",
              "saved_j_hi", "saved_jobs", "simulated", "down_s", "wait_s", "co2_spent_g",
              "co2_saved_g")


def totals(rows: List[Tuple[str, str, str, str, str, str]], by: str,
           carbon_cfg: Tuple[Optional[float], Dict[str, float]] = (None, {})
           ) -> List[Dict[str, Any]]:
    """Per user, account or partition (by): finished jobs, jobs with a
    summary of ours, energy (jobs whose energy is ok), energy saved (est,
    low, high: the summaries' after-the-fact estimates, summed, so the
    bounds are the safe side), clocked-down and wait seconds.  rows:
    slurm.sacct_totals.  Sorted by energy saved, largest first."""
    col = 1 + TOTALS_BY.index(by)
    groups: Dict[str, Dict[str, Any]] = {}
    for row in rows:
        g = groups.setdefault(row[col] or "?", {
            "group": row[col] or "?", "jobs": 0, "with_tool": 0, "energy_j": 0.0,
            "energy_jobs": 0, "saved_j": [0.0, 0.0, 0.0], "saved_jobs": 0, "simulated": 0,
            "down_s": 0.0, "wait_s": 0.0, "co2_spent_g": 0.0, "co2_saved_g": [0.0, 0.0, 0.0]})
        g["jobs"] += 1
        hit = summ.find(row[5])[0]
        s = summ.normalize(hit) if hit else None
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
            if isinstance(s.get(k), (int, float)):
                g[k] += s[k]
        c = carbon.figures(s, carbon.intensity(carbon_cfg, row[3]))
        if c:
            g["co2_spent_g"] += c.get("spent_g", 0.0)
            g["co2_saved_g"] = [a + b for a, b in zip(g["co2_saved_g"], c.get("saved_g",
                                                                             [0.0] * 3))]
    out = sorted(groups.values(), key=lambda g: (-g["saved_j"][0], g["group"]))
    for g in out:
        g["energy_j"], g["down_s"], g["wait_s"] = (round(g[k], 3)
                                                   for k in ("energy_j", "down_s", "wait_s"))
        g["saved_j"] = [round(x, 2) for x in g["saved_j"]]
        if carbon_cfg == (None, {}):
            del g["co2_spent_g"], g["co2_saved_g"]
        else:
            g["co2_spent_g"] = round(g["co2_spent_g"], 3)
            g["co2_saved_g"] = [round(x, 3) for x in g["co2_saved_g"]]
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
            if g["saved_jobs"] else "-"
        out.append(f"  {g['group'][:16]:<16} {g['jobs']:>6} {g['with_tool']:>6} "
                   f"{g['energy_j']:>12.1f}  {saved:<32} {g['down_s']:>14.1f}"
                   + (f" {g['co2_saved_g'][0]:>12.2f}" if "co2_saved_g" in g else ""))
    if any(g["simulated"] for g in groups):
        out.append("  * SIMULATED: some savings were priced with models calibrated on fake "
                   "hardware")
    return "\n".join(out) + "\n"


def totals_csv(groups: List[Dict[str, Any]]) -> str:
    buf = io.StringIO()
    wr = csv.writer(buf, lineterminator="\n")
    wr.writerow(TOTALS_CSV)
    for g in groups:
        wr.writerow([g["group"], g["jobs"], g["with_tool"], g["energy_j"], g["energy_jobs"],
                     *g["saved_j"], g["saved_jobs"], g["simulated"], g["down_s"], g["wait_s"],
                     g.get("co2_spent_g", ""), (g.get("co2_saved_g") or [""])[0]])
    return buf.getvalue()


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
                   f"none (default ${whatif.MODEL_ENV}, else {whatif.DEFAULT_MODEL})")
    g.add_argument("--totals", choices=TOTALS_BY, help="sums per user, account or partition "
                   "of the jobs selected by --user, --account, --partition and --since: jobs, "
                   "energy, energy saved, clocked-down time")
    g.add_argument("--user", help="every finished job of this user (with --what-if or --totals)")
    g.add_argument("--account", help="every finished job of this account")
    g.add_argument("--partition", help="every finished job in this partition")
    g.add_argument("--since", metavar="TIME", help="jobs that ended since (sacct -S; default "
                   "now-30days when a selection is given)")


def what_if_options(a: argparse.Namespace) -> Optional[Dict[str, Any]]:
    """None without --what-if; ValueError for a bad value."""
    sel = {k: getattr(a, k) for k in ("user", "account", "partition", "since")
           if getattr(a, k, None)}
    if getattr(a, "totals", None):
        if a.what_if or a.jobs or a.svg or a.html:
            raise ValueError("--totals takes no JOBID, --what-if, --svg or --html: select jobs "
                             "with --user, --account, --partition and --since")
        for k, v in sel.items():
            if not 0 < len(v) <= 128 or not v.isprintable() or v.startswith("-"):
                raise ValueError(f"--{k}: bad value {v!r}")
        return {"totals": a.totals, "select": sel}
    if not a.what_if:
        if sel or a.threshold or a.low or a.model or a.reaction or a.cpu_budget:
            raise ValueError("--threshold, --low, --reaction, --cpu-budget, --model, --user, "
                             "--account, --partition and --since go with --what-if")
        if not a.jobs:
            raise ValueError("give a JOBID")
        return None
    if not a.jobs and not sel:
        raise ValueError("give a JOBID or a selection (--user, --account, --partition, --since)")
    for k, v in sel.items():
        if not 0 < len(v) <= 128 or not v.isprintable() or v.startswith("-"):
            raise ValueError(f"--{k}: bad value {v!r}")
    return {"select": sel,
            "threshold_us": parse.duration_us(a.threshold) if a.threshold else None,
            "low_khz": parse.freq_khz(a.low) if a.low else None,
            "reaction_us": parse.duration_us(a.reaction) if a.reaction else None,
            "budget_ppm": parse.percent_ppm(a.cpu_budget) if a.cpu_budget else None}


def _load_model(path: Optional[str]) -> Tuple[Optional[Dict[str, Any]], Optional[str]]:
    try:
        return whatif.load_model(path), None
    except FileNotFoundError:
        return None, f"no model file {whatif.model_path(path)}"
    except (OSError, ValueError) as e:
        return None, str(e)


def what_if_jobs(jobs: List[Dict[str, Any]], wi: Dict[str, Any],
                 model: Optional[Dict[str, Any]]) -> List[Dict[str, Any]]:
    """Adds "what_if" (and the per-job sweep) to every job with detail;
    returns those jobs."""
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
        j["what_if"] = whatif.predict(d, model, 500 if thr is None else thr, wi["low_khz"], meas,
                                      wi["reaction_us"], wi.get("budget_ppm"))
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
        path = dest.replace("%j", j["raw"]) if "%j" in dest else dest
        if os.path.isdir(path):
            path = os.path.join(path, f"mpi-pstate-{j['raw']}.{ext}")
        elif len(jobs) > 1 and "%j" not in dest:
            print(f"mpi-pstate report: --{ext} needs a directory or %j for several jobs",
                  file=sys.stderr)
            return 2
        with open(path, "w") as f:
            f.write(render(j))
        print(path)
    return 0


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
        elif not many:
            out.append(job_text(j))
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
    return (f"{j['job_id']:<14} {whatif.fmt_triple(p['saved_j'], 'J'):<32} "
            f"{_f(pct[0] if pct else None, '{:.1f} %'):>13}  "
            f"{_f(p['time_added_pct'][2], '{:.2f}'):>18}"
            + (f"  ({'; '.join(p['notes'])[:100]})" if p["notes"] else "") + "\n")


def what_if_job_text(j: Dict[str, Any]) -> str:
    """A job alone: what it was, then its prediction and sweep."""
    s = j.get("summary") or {}
    return (f"job {j['job_id']}: {j.get('sacct_state', '?')}, elapsed "
            f"{j.get('elapsed', '?')}, {s.get('ranks', '?')} ranks, MPI share "
            f"{_pct(s.get('mpi_share'))}, energy "
            f"{_f(s.get('energy_j'), '{:.1f} J')} ({s.get('energy')}; "
            f"{METER_TEXT.get(s.get('energy_src'), 'source unknown')})\n"
            + whatif.text(j["what_if"], j["what_if_sweep"], j.get("what_if_recommended")))


def what_if_total_text(total: Dict[str, Any], rows: Optional[List[Dict[str, Any]]],
                       best: Optional[Dict[str, Any]]) -> str:
    """The sums over several jobs and their one sweep."""
    return (f"\n{total['jobs']} jobs with per-rank figures ({total['ranks']} ranks, "
            f"{total['jobs_with_energy']} with energy, "
            f"{_f(total['measured_j'], '{:.0f} J')} measured):\n"
            f"  energy saved   {whatif.fmt_triple(total['saved_j'], 'J')}\n"
            f"  time added     {whatif.fmt_triple(total['time_added_s'], 's', '{:.2f}')}"
            f" = {_f(total['time_added_pct'][0], '{:.2f}')} % of their wall time\n"
            + whatif.text_sweep(rows, best))


def what_if_output(jobs: List[Dict[str, Any]], missing: List[str], wi: Dict[str, Any],
                   a: argparse.Namespace,
                   pages: Optional[Tuple[str, Callable[[Dict[str, Any]], str], str]] = None
                   ) -> int:
    """pages: (destination, renderer, extension) of --svg or --html."""
    model, why = _load_model(a.model)
    done = what_if_jobs(jobs, wi, model)
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
    if a.json:
        out.write(to_json(jobs, what_if_total=total) + "\n")
    elif a.csv:
        out.write(what_if_csv(done, total if many else None, best))
    elif pages:
        return write_pages(done, *pages)
    else:
        out.write(what_if_text(jobs, done, total, rows, best, None if model else why))
    for m in missing:
        print(f"mpi-pstate report: job {m} not found in the accounting database", file=sys.stderr)
    return 1 if missing or not done else 0
