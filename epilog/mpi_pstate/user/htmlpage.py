# SPDX-License-Identifier: BSD-3-Clause
"""`mpi-pstate report --html`: one self-contained page a job (no script, no
fetch: it opens from a mail attachment or an Open OnDemand file view): the
job's figures, the per-rank chart, a per-node timeline of each step's
clocked-down share, the energy measured against the estimate at full
clock, and the what-if, with each lever alone, when one was asked for."""
from html import escape
from typing import Any, Dict, List, Optional, Tuple

from . import report, report_svg
from ..model import whatif

STYLE = """body{font-family:sans-serif;margin:2em;max-width:60em;color:#222}
h1{font-size:1.4em}h2{font-size:1.1em;margin-top:1.6em}
table{border-collapse:collapse}td,th{padding:.2em .8em;text-align:left;border-bottom:1px solid #ddd}
td.n{text-align:right;font-variant-numeric:tabular-nums}.note{color:#555;font-size:.9em}"""


def _num(v: Any, fmt: str = "{:.3f}", unit: str = "") -> str:
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        return "-"
    return fmt.format(v) + (f" {unit}" if unit else "")


def _triple(v: Any, unit: str, fmt: str = "{:.1f}") -> str:
    if isinstance(v, list) and len(v) == 3 and all(isinstance(x, (int, float)) for x in v):
        return f"{fmt.format(v[0])} {unit} ({fmt.format(v[1])} .. {fmt.format(v[2])})"
    return "-"


def _or_why(text: str, why: str) -> str:
    """A figure, or "-" and why it is missing."""
    return text if text != "-" else f"- ({why})"


def about(j: Dict[str, Any]) -> List[Tuple[str, str]]:
    """What the page is of: the job, its user, account and partition, and
    the mode and threshold its ranks ran with (or why those are unknown)."""
    rs = report.run_settings(j)
    unknown = f"- ({rs['why']})" if rs["why"] else "-"
    return [("job", f"{j['job_id']} (raw id {j['raw']})"),
            ("user", j.get("user") or "- (not in the accounting row)"),
            ("account", j.get("account") or "- (not in the accounting row)"),
            ("partition", j.get("partition") or "- (not in the accounting row)"),
            ("accounting state", f"{j.get('sacct_state') or '-'}, exit "
             f"{j.get('exit_code') or '-'}, elapsed {j.get('elapsed') or '-'}"),
            ("mode", rs["mode"] or unknown),
            ("threshold", rs["threshold"] or unknown)]


def figures(j: Dict[str, Any]) -> List[Tuple[str, str]]:
    s = j["summary"]
    none = "no rank reported the figure"
    energy = _num(s.get("energy_j"), "{:.1f}", "J")
    no_model = ("no power model in the node records: `mpi-pstate calibrate` stores one for "
                "the jobs after it")
    rows = [("mpi-pstate", report.figure(s.get("state"), "{}")
             + (f" ({s['why']})" if s.get("why") else "")),
            ("ranks, nodes, steps", ", ".join(report.figure(s.get(k), "{}", "?")
                                               for k in ("ranks", "nodes", "steps"))),
            ("wall time", _or_why(_num(s.get("wall_s"), "{:.1f}", "s"),
                                  "sacct has no Elapsed and no step reported one")),
            ("share of rank time in MPI", _or_why(report.percent(s.get("mpi_share")),
                                                  "no rank reported both wall and MPI time")),
            ("long waits (rank-seconds)", _or_why(_num(s.get("wait_s"), unit="s"), none)),
            ("clocked down (rank-seconds)", _or_why(_num(s.get("down_s"), unit="s"),
                                                    "no agent vouched for it")
             + (f" ({report.percent(s.get('down_share'))} of rank time)"
                if s.get("down_share") is not None else "")),
            ("clock changes", _or_why(_num(s.get("transitions"), "{}"),
                                      "no agent vouched for it")),
            ("energy measured", (energy + " (" + report.METER_TEXT.get(
                s.get("energy_src") or "", "source unknown") + ")") if energy != "-" else
             f"- (energy {report.figure(s.get('energy'), '{}', 'unknown')}: no node's agent "
             "measured it)"),
            ("energy saved (estimate)", _or_why(_triple(s.get("saved_j"), "J"), no_model)
             + (" SIMULATED" if s.get("saved_src") == "simulated" else "")),
            ("time added (estimate)", _or_why(_triple(s.get("time_added_s"), "s", "{:.3f}"),
                                              no_model))]
    if j.get("carbon"):
        rows.append(("CO2", report.carbon_text(j["carbon"])))
    if j.get("reaction"):
        rows.append(("waits", report.reaction_text(j["reaction"])))
    return rows


def steps_by_node(d: Dict[str, Any]) -> Dict[str, List[Tuple[float, float, float]]]:
    """node -> (start, end, clocked-down share) of each step its agent ran,
    from the agents' clocks and the ranks' clocked-down time."""
    down: Dict[Tuple[str, str], float] = {}
    ranks: Dict[Tuple[str, str], int] = {}
    for r in d.get("ranks") or []:
        k = (r.get("node"), str(r.get("step")))
        down[k] = down.get(k, 0.0) + (r.get("down_s") or 0.0)
        ranks[k] = ranks.get(k, 0) + 1
    out: Dict[str, List[Tuple[float, float, float]]] = {}
    for n, v in (d.get("nodes") or {}).items():
        for st in v.get("steps") or []:
            a = st.get("agent") if isinstance(st, dict) else None
            t0, t1 = (a or {}).get("start_ns"), (a or {}).get("end_ns")
            if not (isinstance(t0, int) and isinstance(t1, int) and t1 > t0):
                continue
            k = (n, str(st.get("step")))
            secs = (t1 - t0) / 1e9
            share = down.get(k, 0.0) / (ranks[k] * secs) if ranks.get(k) else 0.0
            out.setdefault(n, []).append((t0 / 1e9, t1 / 1e9, min(1.0, share)))
    return out


def timeline(d: Dict[str, Any]) -> Optional[str]:
    """Per node, a bar for each step from its start to its end, as dark as
    the share of its ranks' time clocked down."""
    spans = steps_by_node(d)
    if not spans:
        return None
    t0 = min(a for v in spans.values() for a, _, _ in v)
    ticks = report_svg.round_ticks(max(b for v in spans.values() for _, b, _ in v) - t0 or 1.0)
    left, width, row = 110, 600, 22
    h = 30 + len(spans) * row + 50
    o = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{left + width + 30}" height="{h}" '
         'font-family="sans-serif" font-size="11" role="img" aria-label="per-node timeline">']
    for i, (n, v) in enumerate(sorted(spans.items())):
        y = 20 + i * row
        o.append(f'<text x="{left - 6}" y="{y + 12}" text-anchor="end">{escape(n[:16])}</text>')
        for a, b, share in v:
            x, w = left + width * (a - t0) / ticks[-1], max(1.0, width * (b - a) / ticks[-1])
            o.append(f'<rect x="{x:.1f}" y="{y}" width="{w:.1f}" height="16" fill="#2b8a3e" '
                     f'fill-opacity="{0.15 + 0.85 * share:.2f}" stroke="#2b8a3e">'
                     f'<title>{b - a:.3f} s, clocked down {share:.0%} of its ranks\' time'
                     '</title></rect>')
    o += report_svg.axis(left, 20 + len(spans) * row + 6, width, ticks,
                     "seconds since the job's first step began; darker: more of the step's "
                     "rank time clocked down")
    return "\n".join(o + ["</svg>"])


def energy_chart(s: Dict[str, Any]) -> Optional[str]:
    """The energy measured beside the estimate at full clock (its bounds as
    a whisker): what clocking down saved, to scale."""
    full, got = s.get("full_j"), s.get("energy_j")
    if not (isinstance(full, list) and len(full) == 3 and isinstance(got, (int, float))):
        return None
    ticks = report_svg.round_ticks(max(max(full), got) or 1.0)
    left, width = 150, 500
    sc = width / ticks[-1]
    o = ['<svg xmlns="http://www.w3.org/2000/svg" width="700" height="120" '
         'font-family="sans-serif" font-size="11" role="img" aria-label="energy">']
    for y, label, v, end, color in ((10, "measured", got, got, "#7aa6d6"),
                                    (40, "at full clock (est.)", full[0], max(full), "#bbb")):
        o.append(f'<text x="{left - 6}" y="{y + 14}" text-anchor="end">{label}</text>'
                 f'<rect x="{left}" y="{y}" width="{v * sc:.1f}" height="20" fill="{color}">'
                 f'<title>{v:.1f} J</title></rect>'
                 f'<text x="{left + end * sc + 4:.1f}" y="{y + 14}">{v:.1f} J</text>')
    o.append(f'<line x1="{left + full[1] * sc:.1f}" y1="50" x2="{left + full[2] * sc:.1f}" '
             'y2="50" stroke="black"/>')
    o += report_svg.axis(left, 70, width, ticks, "joules")
    return "\n".join(o + ["</svg>"])


def what_if_table(p: Dict[str, Any]) -> str:
    rows = [("threshold", whatif.duration_text(p["threshold_us"])),
            ("energy saved", _triple(p.get("saved_j"), "J")),
            ("time added", _triple(p.get("time_added_s"), "s", "{:.3f}")),
            ("clocked down", _triple(p.get("clocked_down_s"), "s"))]
    return table(rows)


def lever_note(name: str, x: Dict[str, Any]) -> str:
    """What a reader of one lever's row must know: for the efficient level
    that it is a difference to the cap, for the uncore how long and on how
    many packages it was low, and each caveat of the prediction."""
    if name == "core":
        return "the prediction above"
    if name == "efficient":
        return x["note"] + (f"; no knee in the model of {','.join(x['without_knee'])}"
                            if x.get("without_knee") else "")
    return "; ".join([f"low {_triple(x.get('low_s'), 's', '{:.3f}')} on {x['packages']} "
                      "packages", *x.get("notes", [])])


def lever_rows(lv: Dict[str, Any]) -> List[Tuple[str, str, str, str]]:
    """(lever, energy saved, time added, note) of each lever alone; a
    lever not predicted says why in its note."""
    rows = []
    for name in ("core", "efficient", "uncore"):
        x = lv.get(name) or {}
        label = report_svg.lever_name(name, x)
        if name != "core" and not x.get("predicted"):
            rows.append((label, "not predicted", "-", x.get("why", "")))
            continue
        rows.append((label, _triple(x.get("saved_j"), "J"),
                     _triple(x.get("time_added_s"), "s", "{:.3f}"), lever_note(name, x)))
    return rows


def levers_table(lv: Dict[str, Any]) -> str:
    head = "".join(f"<th>{h}</th>" for h in ("lever", "energy saved", "time added", "note"))
    body = "\n".join("<tr>" + "".join(f"<td>{escape(c)}</td>" for c in row) + "</tr>"
                     for row in lever_rows(lv))
    return f"<table>\n<tr>{head}</tr>\n{body}\n</table>"


def table(rows: List[Tuple[str, str]]) -> str:
    return "<table>\n" + "\n".join(f"<tr><th>{escape(k)}</th><td>{escape(v)}</td></tr>"
                                   for k, v in rows) + "\n</table>"


def page(j: Dict[str, Any]) -> str:
    """The job's page; a job without figures says why."""
    title = f"mpi-pstate: job {j['job_id']}" + (f" of {j['user']}" if j.get("user") else "")
    o = ["<!DOCTYPE html>", '<html lang="en"><head><meta charset="utf-8">',
         f"<title>{escape(title)}</title>", f"<style>{STYLE}</style></head><body>",
         f"<h1>{escape(title)}</h1>"]
    o += [table(about(j))]
    if j.get("step") is not None:
        o.append(f'<p class="note">Step {escape(str(j["step"]))}: '
                 f'{escape(j.get("step_note") or report.STEP_FIGURES)}</p>')
    if j.get("status") != "ok":
        o.append(f"<p>{escape(j.get('message') or j.get('note') or 'no figures for this job')}"
                 "</p>")
        return "\n".join(o + ["</body></html>\n"])
    o += ["<h2>Figures</h2>", table(figures(j))]
    d = j.get("detail")
    if d:
        o += ["<h2>Ranks</h2>",
              '<p class="note">Each rank\'s time computing (blue), in MPI (orange; long waits '
              'darker) and clocked down (the green line under it).</p>', report_svg.svg(j)]
        tl = timeline(d)
        if tl:
            o += ["<h2>Clocked down, per node over time</h2>", tl]
    else:
        why = j.get("detail_why", "not found in the collection directory")
        o.append(f'<p class="note">No per-rank detail: {escape(why)}</p>')
    en = energy_chart(j["summary"])
    if not en:
        o.append('<p class="note">No energy chart: it needs the energy measured and the '
                 "estimate at full clock, which needs a power model in the node records.</p>")
    if en:
        o += ["<h2>Energy</h2>", '<p class="note">What the job used, beside the estimate of '
              "what it would have used at full clock (its bounds: the line).</p>", en]
    if j.get("what_if_why"):
        o += ["<h2>What if</h2>", f"<p>Cannot predict: {escape(j['what_if_why'])}</p>"]
    if j.get("what_if"):
        o += ["<h2>What if</h2>", what_if_table(j["what_if"])]
        if j["what_if"].get("levers"):
            o += ['<p class="note">Each lever alone against the same run; the efficient level '
                  "as a difference to the core cap (docs/evaluation.md, \"Each lever\").</p>",
                  levers_table(j["what_if"]["levers"])]
    return "\n".join(o + ["</body></html>\n"])
