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

from ..core import layout, parse, safeio
from ..model import carbon, powermodel
from ..model import summary as summ
from ..model import whatif

CSV_FIELDS = ("job", "job_id", "step", "node", "rank", "local", "cpu", "state", "wall_s",
              "mpi_s", "mpi_share", "wait_s", "long_calls", "down_s", "transitions", "calls",
              "bytes", "top_function")
TOP_WAITERS = 5
# The summary's "energy_src": joules are labelled by what measured them.
METER_TEXT = {"rapl": "measured: RAPL", "hwmon": "measured: hwmon", "none": "no energy figure",
              "simulated": "SIMULATED: powercap is not the kernel's sysfs, not a measurement",
              "mixed": "some nodes measured, some SIMULATED: not a measurement"}
WALL_SRC = {"sacct": "", "steps": " (sum of the steps; sacct had no Elapsed)",
            "step": " (the step's longest rank)"}


def onoff(v: Any) -> str:
    """A setting that is on, off or not known (turbo/boost), in words."""
    return "on" if v is True else "off" if v is False else "unknown"


def figure(v: Any, fmt: str = "{:.3f}", none: str = "-") -> str:
    if v is None:
        return none
    if isinstance(v, bool):
        return "yes" if v else "no"
    try:
        return fmt.format(v)
    except (ValueError, TypeError):
        return str(v)


def percent(v: Any) -> str:
    return figure(v, "{:.1%}")


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
            f"polls; clocked down {percent(x['down_of_ideal'])} of the time past the threshold")


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
        return "long waits used " + (percent(lo) if lo == hi else f"{percent(lo)}-{percent(hi)}") + \
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
    head = (f"job {j['job_id']} (raw {j['raw']}): {figure(j.get('sacct_state'), '{}')}, "
            f"elapsed {figure(j.get('elapsed'), '{}')}, exit {figure(j.get('exit_code'), '{}')}\n")
    if j.get("step") is not None:
        head += f"  step {j['step']}: {j.get('step_note') or STEP_FIGURES}\n"
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
    w(f"  mpi-pstate: {figure(s.get('state'), '{}')}"
      + (f" -- no record from {s.get('missing')} ({figure(s.get('missing_n'), '{}', '?')} nodes)"
         if s.get("missing") else "") + "\n")
    if j.get("note"):
        w(f"  note: {j['note']}\n")
    w(f"  ranks {figure(s.get('ranks'), '{}', '?')} on {figure(s.get('nodes'), '{}', '?')} nodes, steps "
      f"{figure(s.get('steps'), '{}', '?')} ({figure(s.get('rank_steps'), '{}', '?')} rank-steps); "
      f"{'step' if j.get('step') is not None else 'job'} wall time "
      f"{figure(s.get('wall_s'), '{:.1f} s')}{WALL_SRC.get(s.get('wall_src') or '', '')}, "
      f"longest step {figure(s.get('step_wall_s'), '{:.3f} s')}\n")
    w(f"  MPI share {percent(s.get('mpi_share'))}, long waits {figure(s.get('wait_s'))} s, "
      f"clocked down {figure(s.get('down_s'))} s ({percent(s.get('down_share'))}), "
      f"transitions {figure(s.get('transitions'), '{}')}; imbalance {percent(s.get('imbalance'))}\n")
    w(f"  energy: {figure(s.get('energy_j'), '{:.1f} J')} ({figure(s.get('energy'), '{}', 'unknown')}; "
      f"{METER_TEXT.get(s.get('energy_src') or '', 'source unknown')})\n")
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
    w("\n  node        status   ranks  energy                   restore  settings\n")
    for n, v in d["nodes"].items():
        en = v.get("energy") or {}
        st = v.get("settings") or {}
        cf = st.get("cpufreq", {}) if isinstance(st, dict) else {}
        rs = (v.get("restore") or {}).get("status", "-")
        sets = ""
        if cf:
            sets = (f"driver {cf.get('driver') or 'none'}, governor "
                    f"{','.join(cf.get('governors') or []) or '-'}, turbo/boost "
                    f"{onoff(cf.get('boost'))}")
        # SIMULATED spelt out: the node's powercap is not the kernel's
        energy = (f"{figure(en.get('joules'), '{:.1f} J'):>10} {figure(en.get('status'), '{}', '')}"
                  + (" SIMULATED" if en.get("meter") == "simulated" else ""))
        w(f"  {n:<11} {figure(v.get('status'), '{}', '?'):<8} {figure(v.get('ranks'), '{}', '0'):>5}  "
          f"{energy:<24} {figure(rs, '{}'):<8} {sets}\n")
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
            f"{summ.rank_label(r, multi)}@{r['node']} {percent(r['mpi_share'])}"
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
        out.append(f"  {figure(r.get('step'), '{}'):>4} {figure(r.get('rank'), '{}'):>4} "
                   f"{figure(r.get('node'), '{}'):<11} {figure(r.get('cpu'), '{}'):>3} "
                   f"{figure(r.get('state'), '{}'):<10} {figure(r.get('wall_s')):>8} "
                   f"{figure(r.get('mpi_s')):>8} {percent(r.get('mpi_share')):>6} "
                   f"{figure(r.get('wait_s')):>8} {figure(r.get('down_s')):>8} "
                   f"{figure(r.get('transitions'), '{}'):>6}  "
                   f"{figure(top[0][0] if top else None, '{}')}\n")
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
                     f'{escape(whatif.duration_text(rec["threshold_us"]))}: saves most with at most 1 % '
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
    return f"uncore past {whatif.duration_text(x['threshold_us'])}"


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
                   f"{figure(g['energy_j'], '{:.1f}'):>12}  {saved:<32} "
                   f"{figure(g['down_s'], '{:.1f}'):>14}"
                   + (f" {figure(co2[0] if co2 else None, '{:.2f}'):>12}" if "co2_saved_g" in g
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


def add_select_args(p: argparse.ArgumentParser) -> None:
    """The selection of jobs from accounting, with sacct's option names."""
    g = p.add_argument_group("selection, as sacct takes it (list mode without JOBID; "
                             "--what-if and --totals sum over it)")
    g.add_argument("-u", "--user", help="jobs of this user (default: every job you may see)")
    g.add_argument("-A", "--account", help="jobs of this account")
    g.add_argument("-r", "--partition", help="jobs in this partition")
    g.add_argument("-S", "--since", "--starttime", dest="since", metavar="TIME",
                   help="jobs that ran since TIME (sacct -S: 2026-11-01, 2026-11-01T08:00, "
                   "now-7days, midnight; default now-30days)")
    g.add_argument("-E", "--until", "--endtime", dest="until", metavar="TIME",
                   help="jobs that ran until TIME (sacct -E; default now)")
    g.add_argument("-s", "--state", metavar="STATES",
                   help="jobs in these states, comma-separated (sacct -s: COMPLETED,FAILED "
                   "or CD,F)")


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
    g.add_argument("--totals", choices=TOTALS_BY, help="sums per user, account or partition "
                   "of the jobs selected by --user, --account, --partition, --since, --until "
                   "and --state: jobs, energy, energy saved, clocked-down time")


SELECT_KEYS = ("user", "account", "partition", "since", "until", "state")


def selection(a: argparse.Namespace) -> Dict[str, Any]:
    """The sacct selection of the command line, checked: names printable and
    not options, times as sacct takes them, states by name or code."""
    sel: Dict[str, Any] = {}
    for k in SELECT_KEYS:
        v = getattr(a, k, None)
        if not v:
            continue
        if k in ("since", "until"):
            sel[k] = parse.sacct_time(v)
        elif k == "state":
            sel[k] = parse.job_states(v)
        elif not 0 < len(v) <= 128 or not v.isprintable() or v.startswith("-") or "," in v:
            raise ValueError(f"--{k}: bad value {v!r}")
        else:
            sel[k] = v
    return sel


def what_if_options(a: argparse.Namespace) -> Optional[Dict[str, Any]]:
    """None without --what-if or --totals; ValueError for a bad value."""
    sel = selection(a)
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


def list_options(a: argparse.Namespace) -> Optional[Dict[str, Any]]:
    """List mode's fields and form, or None when the jobs are reported
    whole: list mode is asked for (--list, --format, --parsable,
    --parsable2, --noheader) or a selection is given without a JOBID."""
    asked = any(getattr(a, k, None) for k in ("list", "format", "parsable", "parsable2",
                                               "noheader"))
    jobs = getattr(a, "jobs", None) or getattr(a, "job_lists", None)
    if not asked and (jobs or not selection(a)):
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
            f"{figure(pct[0] if pct else None, '{:.1f} %'):>13}  "
            f"{figure(p['time_added_pct'][2], '{:.2f}'):>18}"
            + (f"  ({'; '.join(p['notes'])[:100]})" if p["notes"] else "") + "\n")


def what_if_job_text(j: Dict[str, Any]) -> str:
    """A job alone: what it was, then its prediction and sweep."""
    s = j.get("summary") or {}
    return (f"job {j['job_id']}: {figure(j.get('sacct_state'), '{}', '?')}, elapsed "
            f"{figure(j.get('elapsed'), '{}', '?')}, {figure(s.get('ranks'), '{}', '?')} ranks, MPI share "
            f"{percent(s.get('mpi_share'))}, energy "
            f"{figure(s.get('energy_j'), '{:.1f} J')} ({figure(s.get('energy'), '{}', 'unknown')}; "
            f"{METER_TEXT.get(s.get('energy_src') or '', 'source unknown')})\n"
            + whatif.text(j["what_if"], j["what_if_sweep"], j.get("what_if_recommended")))


def what_if_total_text(total: Dict[str, Any], rows: Optional[List[Dict[str, Any]]],
                       best: Optional[Dict[str, Any]]) -> str:
    """The sums over several jobs and their one sweep."""
    return (f"\n{total['jobs']} jobs with per-rank figures ({total['ranks']} ranks, "
            f"{total['jobs_with_energy']} with energy, "
            f"{figure(total['measured_j'], '{:.0f} J')} measured):\n"
            f"  energy saved   {whatif.fmt_triple(total['saved_j'], 'J')}\n"
            f"  time added     {whatif.fmt_triple(total['time_added_s'], 's', '{:.2f}')}"
            f" = {figure(total['time_added_pct'][0], '{:.2f}')} % of their wall time\n"
            + whatif.text_sweep(rows, best))


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
            out.write(to_json(jobs, what_if_total=None) + "\n")
        print(f"mpi-pstate report: cannot predict the what-if: {unpriced[0]['what_if_why']}",
              file=sys.stderr)
        return 1
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


# ---- step ids (4242.0, 4242.batch) ---------------------------------------------

STEP_FIGURES = ("the figures below are this step's, from its ranks' records (the accounting "
                "summary holds whole-job figures only)")


def spec_matches(spec: str, j: Dict[str, Any]) -> bool:
    """Whether the job part of a JOBID (4242, 4242_3, 4242_[1-3]) selects
    the job j, as sacct -j does: a bare id is the job, an array task by its
    raw id, or every task of that array."""
    base, _, task = spec.partition("_")
    jid, raw = str(j.get("job_id")), str(j.get("raw"))
    jbase, _, jtask = jid.partition("_")
    if not task:
        return raw == base or jid == base or jbase == base
    if task.startswith("["):
        return jbase == base and jtask.isdigit() and int(jtask) in parse.array_tasks(task)
    return jid == spec


def with_steps(jobs: List[Dict[str, Any]], pairs: List[Tuple[str, Optional[str]]]
               ) -> List[Dict[str, Any]]:
    """The jobs as the JOBIDs asked for them: a job named without a step
    whole, and once per step named (step_view)."""
    out = []
    for j in jobs:
        hits = [st for spec, st in pairs if spec_matches(spec, j)]
        if not hits or None in hits:
            out.append(j)
        for st in dict.fromkeys(x for x in hits if x is not None):
            out.append(step_view(j, st))
    return out


def _step_energy(node: Dict[str, Any], step: str, only: bool) -> Dict[str, Any]:
    """A node's energy in one step: its agent record's, or the node's when
    the job ran that one step there."""
    from ..core import steprecords  # the node record's own reading of an agent's energy
    meter = (node.get("energy") or {}).get("meter")
    for st in node.get("steps") or []:
        if isinstance(st, dict) and str(st.get("step")) == step and \
                isinstance(st.get("agent"), dict) and "energy" in st["agent"]:
            e = steprecords.agent_energy(st["agent"]["energy"])
            break
    else:
        e = dict(node.get("energy") or {}) if only else {"status": "unknown", "joules": None}
    if meter and "meter" not in e:
        e["meter"] = meter
    return e


def step_view(j: Dict[str, Any], step: str) -> Dict[str, Any]:
    """The job j as its step `step` (4242.0): the step's ranks, nodes and
    figures, summarised from the per-rank detail the way the job's summary
    is; with only job-level figures (no detail, or none for that step),
    the job's, and step_note says so."""
    v = dict(j, step=step, job_id=f"{j['job_id']}.{step}")
    d = j.get("detail")
    if j.get("status") != "ok":
        return v
    if not d:
        v["step_note"] = ("only job-level figures exist: per-step figures come from the "
                          "per-rank detail, which is not available ("
                          + str(j.get("detail_why") or "not found in the collection directory")
                          + "); the figures below are the whole job's")
        return v
    ranks = [r for r in d.get("ranks") or [] if str(r.get("step")) == step]
    if not ranks:
        have = ", ".join(str(x) for x in d.get("steps") or []) or "none"
        v["step_note"] = (f"only job-level figures exist: no rank of step {step} is in the "
                          f"records (steps with records: {have}); the figures below are the "
                          "whole job's")
        return v
    alone = [str(x) for x in d.get("steps") or []] == [step]
    on = sorted({str(r.get("node")) for r in ranks})
    nodes: Dict[str, Any] = {}
    records: Dict[str, Dict[str, Any]] = {}
    for n in on:
        src = (d.get("nodes") or {}).get(n) or {}
        en = _step_energy(src, step, alone)
        nodes[n] = dict(src, energy=en, ranks=sum(1 for r in ranks if r.get("node") == n),
                        steps=[x for x in src.get("steps") or []
                               if isinstance(x, dict) and str(x.get("step")) == step])
        records[n] = {"status": "ok", "energy": en, "settings": src.get("settings")}
    for n in d.get("missing") or []:
        nodes[n] = (d.get("nodes") or {}).get(n) or {"status": "missing"}
    nd = dict(d, ranks=ranks, steps=[step], nodes=nodes, elapsed_s=None)
    nd.pop("rest", None)
    nd.pop("summary", None)
    try:
        s = summ.summarize(nd, records)
    except (ArithmeticError, KeyError, TypeError, ValueError) as e:
        v["step_note"] = (f"only job-level figures exist: the step's records do not add up "
                          f"({e}); the figures below are the whole job's")
        return v
    s["wall_src"] = "step"
    v.update(summary=s, job_summary=j.get("summary"), detail=nd)
    rx = reaction(ranks)
    v.pop("reaction", None)
    if rx:
        v["reaction"] = rx
    v.pop("carbon", None)
    return v


def run_settings(j: Dict[str, Any]) -> Dict[str, Optional[str]]:
    """The mode and threshold the job's ranks ran with ("on", "500us"; two
    values joined by commas), or None with "why" when the records do not
    say."""
    ranks = (j.get("detail") or {}).get("ranks") or []
    modes = sorted({str(r["mode"]) for r in ranks if isinstance(r.get("mode"), str)})
    thr = sorted({r["threshold_us"] for r in ranks
                  if isinstance(r.get("threshold_us"), int) and
                  not isinstance(r.get("threshold_us"), bool)})
    why = None
    if not ranks:
        why = ("no per-rank detail: " + str(j.get("detail_why") or "not found in the "
                                            "collection directory")) \
            if j.get("status") == "ok" else (j.get("message") or "no figures for this job")
    elif not modes or not thr:
        why = "the ranks' records do not say (records of an older release)"
    return {"mode": ",".join(modes) or None,
            "threshold": ",".join(whatif.duration_text(t) for t in thr) or None, "why": why}


# ---- list mode: one line per job, sacct's way ----------------------------------

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
        ("Mode", 7, lambda j: run_settings(j)["mode"], "text"),
        ("Threshold", 9, lambda j: run_settings(j)["threshold"], "text"),
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
    return figure(v, "{}")


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
    return document("mpi-pstate-list", fields=names,
                    jobs=[dict(zip(names, row)) for row in list_rows(jobs, lo["fields"])])
