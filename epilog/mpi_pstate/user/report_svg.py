# SPDX-License-Identifier: BSD-3-Clause
"""`mpi-pstate report --svg`: the per-rank chart of a job (SVG, standard
library only), with the what-if's figures and levers under it."""
import math
from typing import Any, Dict, List, Optional, Tuple
from xml.sax.saxutils import escape

from . import report
from ..model import summary as summ
from ..model import whatif


def svg(j: Dict[str, Any]) -> str:
    """The chart, with the what-if's figures under it when there are some."""
    w, h, body = _chart(j)
    wi = j.get("what_if")
    if not wi or not wi.get("ranks"):
        return "\n".join([_open(w, h)] + body + ["</svg>\n"])
    lines = svg_lines(wi, h + 4)
    rec = j.get("what_if_recommended")
    if rec:
        lines.append(f'<text x="10" y="{h + 20}">recommended threshold '
                     f'{escape(whatif.duration_text(rec["threshold_us"]))}: saves most with at most 1 % '
                     'time added under the model</text>')
    levers = lever_lines(wi.get("levers"))
    for i, line in enumerate(levers):
        lines.append(f'<text x="{10 if i == 0 else 20}" y="{h + 36 + 16 * i}">{escape(line)}'
                     '</text>')
    return "\n".join([_open(w, h + 30 + 16 * len(levers))] + body + lines + ["</svg>\n"])


def svg_lines(p: Dict[str, Any], y: int, x: int = 10) -> List[str]:
    """Lines of text for the report's SVG (escaped by the caller's rules: only
    numbers and fixed words here)."""
    return [f'<text x="{x}" y="{y}">what-if at {whatif.duration_text(p["threshold_us"])}: saved '
            f'{p["saved_j"][0]:.1f} J ({p["saved_j"][1]:.1f} .. {p["saved_j"][2]:.1f}), '
            f'time added {p["time_added_s"][0]:.3f} s (at most {p["time_added_s"][2]:.3f})'
            '</text>']


def _open(width: int, height: int) -> str:
    return (f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
            'font-family="sans-serif" font-size="11">')


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
        line = f"{label}: saved {report.fmt_triple(x['saved_j'], 'J')}"
        if name == "efficient":
            line += " against the core cap"
        elif name == "uncore":
            line += f" on {x['packages']} packages"
        lines.append(line)
    return [ln if len(ln) <= SVG_LINE_CHARS else ln[:SVG_LINE_CHARS - 3] + "..." for ln in lines]


def _chart(j: Dict[str, Any]) -> Tuple[int, int, List[str]]:
    """Per-rank bars: time computing, time in MPI (long waits darker), and
    time clocked down as a line under each bar: the chart's width, height
    and elements (svg() opens and closes it, taller with the what-if)."""
    d = j.get("detail") or {}
    ranks = d.get("ranks", [])
    multi = len(d.get("steps", [])) > 1
    bar, gap, left, top_m, width = 14, 6, 150, 60, 600
    h = top_m + max(1, len(ranks)) * (bar + gap) + 60
    ticks = round_ticks(max((r.get("wall_s") or 0 for r in ranks), default=0) or 1.0)
    sc = width / ticks[-1]
    o = [f'<title>{escape("mpi-pstate job " + str(j["job_id"]))}</title>',
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
    return left + width + 40, h, o


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
