# SPDX-License-Identifier: BSD-3-Clause
"""`mpi-pstate report` (users, admins at a shell): a job's figures per job,
per node and per rank as text, JSON and CSV; the selection of jobs by
sacct's options; a job as one of its steps (4242.0).  Input: the summary
in the job's SystemComment (sacct; AdminComment for the version 1
summaries of earlier releases) and the per-rank detail beside it in
collect_dir; a job whose epilog was missed is merged on the fly from its
node records.  The chart, list mode and --totals, and --what-if are
report_svg.py, report_list.py and report_whatif.py."""
import argparse
import csv
import io
import json
from typing import Any, Dict, List, Optional, Tuple

from ..core import parse
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


def fmt_triple(t: List[float], unit: str, fmt: str = "{:.1f}") -> str:
    return f"{fmt.format(t[0])} {unit} ({fmt.format(t[1])} .. {fmt.format(t[2])})"


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
    out = f"saved: {fmt_triple(sv, 'J')}"
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


# ---- the selection of jobs, as sacct takes it ---------------------------------


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
