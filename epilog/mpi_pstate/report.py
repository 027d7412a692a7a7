"""`mpi-pstate report`: per job, per node and per rank, as text, JSON, CSV
or an SVG chart (standard library only).  Input: the summary in the job's
AdminComment (sacct) and the per-rank detail beside it in collect_dir; a job
whose epilog was missed is merged on the fly from its node records."""
from __future__ import annotations

import csv
import io
import json
from typing import Any
from xml.sax.saxutils import escape

from . import summary as summ

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


def job_text(j: dict[str, Any]) -> str:
    """One job: summary, nodes, settings, ranks that wait most, every rank."""
    out = io.StringIO()
    w = out.write
    w(f"job {j['job_id']} (raw {j['raw']}): {j.get('sacct_state', '?')}, "
      f"elapsed {j.get('elapsed', '?')}, exit {j.get('exit_code', '?')}\n")
    if j["status"] != "ok":
        w(f"  {j['message']}\n")
        return out.getvalue()
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
      f"transitions {s.get('transitions', 0)}; imbalance {_pct(s.get('imbalance'))}\n")
    w(f"  energy: {_f(s.get('energy_j'), '{:.1f} J')} ({s.get('energy')}; "
      f"{METER_TEXT.get(s.get('energy_src'), 'source unknown')})\n")
    d = j.get("detail")
    if not d:
        w("  (per-rank detail not available: "
          f"{j.get('detail_why', 'not found in the collection directory')})\n")
        return out.getvalue()
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
        w(f"  {n:<11} {v.get('status', '?'):<8} {v.get('ranks', 0):>5}  "
          f"{_f(en.get('joules'), '{:.1f} J'):>10} {en.get('status', ''):<3}"
          f"{'*' if en.get('meter') == 'simulated' else ' '} {rs:<8} "
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
    ranks = d.get("ranks", [])
    multi = len(d.get("steps", [])) > 1
    waiters = sorted((r for r in ranks if r.get("mpi_share") is not None),
                     key=lambda r: -r["mpi_share"])[:TOP_WAITERS]
    if waiters:
        w("\n  ranks that wait most: " + ", ".join(
            f"{summ.rank_label(r, multi)}@{r['node']} {_pct(r['mpi_share'])}"
            for r in waiters) + "\n")
    w("\n  step rank node        cpu state       wall_s    mpi_s  share   wait_s   down_s "
      " trans  top function\n")
    for r in ranks:
        top = r.get("top") or []
        w(f"  {r['step']:>4} {r['rank']:>4} {r['node']:<11} {_f(r.get('cpu'), '{}'):>3} "
          f"{r['state']:<10} {_f(r.get('wall_s')):>8} {_f(r.get('mpi_s')):>8} "
          f"{_pct(r.get('mpi_share')):>6} {_f(r.get('wait_s')):>8} {_f(r.get('down_s')):>8} "
          f"{r.get('transitions', 0):>6}  {top[0][0] if top else '-'}\n")
    return out.getvalue()


def to_csv(jobs: list[dict[str, Any]]) -> str:
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


def to_json(jobs: list[dict[str, Any]]) -> str:
    return json.dumps({"format": "mpi-pstate-report", "version": 1, "jobs": jobs}, indent=1)


def svg(j: dict[str, Any]) -> str:
    """Per-rank bars: time computing, time in MPI (long waits darker), and
    time clocked down as a line under each bar."""
    d = j.get("detail") or {}
    ranks = d.get("ranks", [])
    multi = len(d.get("steps", [])) > 1
    bar, gap, left, top_m, width = 14, 6, 150, 60, 600
    h = top_m + max(1, len(ranks)) * (bar + gap) + 60
    wall_max = max((r.get("wall_s") or 0 for r in ranks), default=0) or 1.0
    sc = width / wall_max
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
    ya = top_m + len(ranks) * (bar + gap) + 10
    o.append(f'<line x1="{left}" y1="{ya}" x2="{left + width}" y2="{ya}" stroke="black"/>')
    for k in range(5):
        x = left + width * k / 4
        o.append(f'<line x1="{x:.1f}" y1="{ya}" x2="{x:.1f}" y2="{ya + 4}" stroke="black"/>'
                 f'<text x="{x:.1f}" y="{ya + 16}" text-anchor="middle">'
                 f'{wall_max * k / 4:.3g}</text>')
    o.append("</svg>\n")
    return "\n".join(o)
