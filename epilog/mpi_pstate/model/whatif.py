# SPDX-License-Identifier: BSD-3-Clause
"""`mpi-pstate report --what-if`: the energy a job would have saved, and the
time it would have added, under a threshold and a low frequency, predicted
from what a profile (or on) run recorded and the node power model that
`mpi-pstate calibrate` measured (docs/evaluation.md).

Inputs per rank (node record, docs/records.md): `hist_ns`, the log2
histogram of the durations of its MPI calls (life-cycle calls removed),
`mpi_s` (their total), and the blocking-call totals at the threshold the
run used (`long_calls`, `wait_s`, `over_s`).  A histogram bucket says only
that a call lasted between 2^(b-1) and 2^b ns; the total time in MPI ties
the buckets together, so the clocked-down time is bounded by a small linear
program (greedy: every term is monotone and piecewise linear), and the
blocking totals bound it again near the run's own threshold.  Every figure
is a triple (est, lo, hi); lo/hi also carry the model's power noise, the
agent's reaction time and shared frequency domains.  Pure: no Slurm, no
file system (the model file is powermodel.py's).

Besides the core cap, each lever is predicted alone against the same run
("levers"): the efficient low level (the model's knee instead of the low
frequency) as a difference to the core cap, and the uncore of a package
whose ranks all wait past the uncore threshold (docs/evaluation.md, "Each
lever").  The figures only: the report writes them (user/report_whatif.py,
user/report_svg.py)."""

import math
from typing import Any, Dict, Iterable, List, Optional, Set, Tuple

from . import whatif_terms
from ..agent_args import agent_default, job_default
from ..core import parse

MAX_TIME_ADDED = 0.01  # the recommendation keeps the time added at or below 1 %
NEAR_BEST = 0.98  # ... and takes the highest threshold within 2 % of the best saving
SWEEP_US = (0, 10, 20, 50, 100, 200, 500, 1000, 2000, 5000, 10000, 20000, 50000, 100000)
# The agent's own defaults (common/agent_args.def, through the generated table)
UNCORE_THRESHOLD_US = parse.duration_us(agent_default("uncore-threshold") or "")
# The job's default threshold (common/options.def)
THRESHOLD_US_DEFAULT = parse.duration_us(job_default("threshold"))


def predict(detail: Dict[str, Any], model: Optional[Dict[str, Any]], threshold_us: float,
            low: Optional[float] = None, measured_j: Optional[float] = None,
            reaction_us: Optional[float] = None, budget_ppm: Optional[int] = None,
            with_levers: bool = True) -> Dict[str, Any]:
    """The what-if of one job (its job detail: docs/records.md section 4).
    reaction_us: the agent's delay before it lowers a core, besides the
    write, instead of the model's wake-up delay and the agent's budget
    spacing (an on run's agent record shows it: drop_late_ns).  budget_ppm:
    the agent's CPU budget instead of the one the job ran with.
    with_levers: each lever's prediction too ("levers"; the sweep needs
    only the cap's)."""
    js = whatif_terms.JobSum()
    by_node: Dict[str, List[Dict[str, Any]]] = {}
    for r in detail.get("ranks") or []:
        by_node.setdefault(r.get("node", "?"), []).append(r)
    for node, rs in sorted(by_node.items()):
        m, src = whatif_terms.node_model(detail, node, model)
        if m is None:
            js.missing_model.append(node)
            continue
        js.sources.add(src)
        t = whatif_terms.node_terms(m, low)
        js.low_khz, js.high_khz = t["lk"], t["hk"]
        ws, gap, announced = _node_waits(detail, node, rs, m, t, threshold_us, reaction_us,
                                         budget_ppm)
        if announced:
            js.announced.append(node)
        if gap:
            js.gaps[node] = gap
        if whatif_terms.shared_domains(detail, node, m, len(rs)):
            js.shared.append(node)
        js.node_w += m["idle_w"] + t["busy_core"] * len(rs)
        for r, w in zip(rs, ws):
            _add_rank(js, r, w, t, node in js.shared)
        js.nodes.append((node, m, t, rs, ws, node in js.shared))
    out = _prediction(js, detail, threshold_us, measured_j, reaction_us)
    if with_levers:
        out["levers"] = levers(js, detail, out, reaction_us)
    return out


def _node_waits(detail: Dict[str, Any], node: str, rs: List[Dict[str, Any]],
                m: Dict[str, Any], t: Dict[str, Any], threshold_us: float,
                reaction_us: Optional[float], budget_ppm: Optional[int]
                ) -> Tuple[List[Optional[Dict[str, Any]]], float, bool]:
    """The ranks' whatif_terms.rank_what_if() on one node, lowered as late as the agent
    lowers them; the agent's spacing of its wake-ups (the gap, us); whether
    their waits are announced.  Under its CPU budget the agent wakes at most
    every gap: a wait starting at random is lowered gap/2 late on average,
    at most gap (a wait that starts as the last one ended, the agent's
    wake-up for it just spent: the whole gap).  Its pairs spend the budget
    too, at their rate without a spacing (a spacing only lowers it); the low
    bound takes every wake-up and pair whatif_terms.COST_SPREAD times as costly: a busy
    node's wake-ups cost more."""
    thr = max(0.0, threshold_us) / 1e6
    cost = whatif_terms.agent_cost(detail, node)
    gap = gap_lo = 0.0
    announced = False
    plain = None  # the ranks' figures lowered as fast as a wake-up
    if cost and reaction_us is None:
        plain = [whatif_terms.rank_what_if(r, thr, t["raise_s"]) for r in rs]
        pairs = sum(w["transitions"][0] for w in plain if w)
        secs = max([r.get("wall_s") or 0.0 for r in rs] + [detail.get("elapsed_s") or 0.0])
        rate = pairs / secs if secs else 0.0
        budget = cost[1] if budget_ppm is None else budget_ppm
        # waits announced: lowered at their deadline, no spacing (the first
        # long wait at a call site, not announced, is not worth a term)
        announced = whatif_terms.announces(cost[0], whatif_terms.agent_cap_ppm(detail, node), m["pair_cpu_us"] or 0.0,
                              rate)
        if not announced:
            gap, gap_lo = (whatif_terms.budget_gap_us(k * cost[0], budget, threshold_us,
                                         k * (m["pair_cpu_us"] or 0.0), rate)
                           for k in (1.0, whatif_terms.COST_SPREAD))
    wake = t["wake"]
    rx = whatif_terms.Bounds(wake.est + gap / 2, 0.0, wake.high + max(gap, gap_lo)) \
        if reaction_us is None else whatif_terms.Bounds(reaction_us, 0.0, 2 * reaction_us)
    react = whatif_terms.Bounds(*((m["write_us"] + x) / 1e6 for x in rx))
    if plain is not None and react == t["raise_s"]:
        return plain, gap, announced
    return [whatif_terms.rank_what_if(r, thr, react) for r in rs], gap, announced


def _add_rank(js: whatif_terms.JobSum, r: Dict[str, Any], w: Optional[Dict[str, Any]],
              t: Dict[str, Any], shared: bool) -> None:
    """Adds one rank's whatif_terms.rank_what_if() w, on a node of terms t, to js."""
    if w is None:
        js.no_hist += 1
        return
    js.ranks += 1
    tn, raise_s = whatif_terms.Bounds(*w["transitions"]), t["raise_s"]
    # A core stays low after its wait until the agent's raise (the rank
    # wakes it as it leaves): the agent's down_s counts that too, and so
    # does the energy; it shows once waits are lowered at their deadline.
    # Low bound: the write alone.
    dn = whatif_terms.Bounds(*(x / 1e9 + tn[i] * raise_s[i] for i, x in enumerate(w["down_ns"])))
    js.down, js.trans = whatif_terms.plus(js.down, dn), whatif_terms.plus(js.trans, tn)
    js.saved = whatif_terms.plus(js.saved, whatif_terms.energy(dn, tn, t, shared))
    # After a lowered wait the rank computes at the low frequency until the
    # agent has raised it again: compute-bound, that is (1 - low/high) of
    # the raise delay lost per transition.  A rank that waits has slack:
    # its delay shortens its next wait.  Only the rank that waits least (the
    # critical path) delays the job (estimate); at most, every delay lands
    # on the slowest rank.
    js.crit.append((r.get("mpi_s") or 0.0, tn.est * raise_s.est * t["slow"]))
    js.added_high = max(js.added_high, tn.high * raise_s.high * t["slow"])


def _prediction(js: whatif_terms.JobSum, detail: Dict[str, Any], threshold_us: float,
                measured_j: Optional[float], reaction_us: Optional[float]) -> Dict[str, Any]:
    """predict()'s result from the sums of the job's ranks."""
    wall = detail.get("elapsed_s") or (detail.get("summary") or {}).get("wall_s") or \
        max((r.get("wall_s") or 0 for r in detail.get("ranks") or []), default=0)
    added = whatif_terms.Bounds(min(js.crit)[1] if js.crit else 0.0, 0.0, js.added_high)
    # A longer job keeps every core of its nodes powered for longer: the
    # low saving pays the most time added, the high saving the least.
    cost = whatif_terms.Bounds(added.est * js.node_w, 0.0, added.high * js.node_w)
    saved = whatif_terms.Bounds(js.saved.est - cost.est, js.saved.low - cost.high, js.saved.high - cost.low)
    out: Dict[str, Any] = {"threshold_us": threshold_us, "ranks": js.ranks,
                           "notes": _notes(js, reaction_us)}
    out["saved_j"] = [round(x, 3) for x in saved]
    out["clocked_down_s"] = [round(x, 4) for x in js.down]
    out["transitions"] = [round(x) for x in js.trans]
    out["time_added_s"] = [round(x, 4) for x in added]
    out["time_added_pct"] = [round(100 * x / wall, 3) if wall else None
                             for x in out["time_added_s"]]
    out["wall_s"] = wall or None
    out["low_khz"], out["high_khz"] = js.low_khz, js.high_khz
    out["model"] = sorted(js.sources) or ["none"]
    if measured_j:
        out["measured_j"] = measured_j
        out["saved_pct"] = [round(100 * x / measured_j, 2) for x in out["saved_j"]]
    out["agent_gap_us"] = round(max(js.gaps.values()), 1) if js.gaps else 0.0
    out["announced_nodes"] = len(js.announced)
    return out


# ---- the levers beyond the cap ------------------------------------------------

def _rounded(b: whatif_terms.Bounds, nd: int = 3) -> List[float]:
    return [round(x, nd) for x in b]


def _span(a: whatif_terms.Bounds, lo: float, hi: float) -> Tuple[float, float]:
    """The least and the most of x * y over x in a's bounds, y in [lo, hi]."""
    xs = [x * y for x in (a.low, a.high) for y in (lo, hi)]
    return min(xs), max(xs)


def _with_model(js: whatif_terms.JobSum, key: str) -> Tuple[List[Tuple[whatif_terms.NodeRow, Any]], List[str]]:
    """The nodes whose power model has key (each with its value), and the
    names of those whose model has not: a lever prices only the first and
    names the others in its answer."""
    have: List[Tuple[whatif_terms.NodeRow, Any]] = []
    without: List[str] = []
    for row in js.nodes:
        node, m = row[0], row[1]
        if m.get(key) is None:
            without.append(node)
        else:
            have.append((row, m[key]))
    return have, without


def levers(js: whatif_terms.JobSum, detail: Dict[str, Any], core: Dict[str, Any],
           reaction_us: Optional[float]) -> Dict[str, Any]:
    """Each lever alone, against the same run: the core cap (predict()'s
    own figures), the efficient low level as a difference to the cap, and
    the uncore (docs/evaluation.md, "Each lever")."""
    return {"core": {k: core[k] for k in ("saved_j", "time_added_s", "clocked_down_s",
                                          "transitions", "low_khz")},
            "efficient": efficient_lever(js),
            "uncore": uncore_lever(js, detail, reaction_us)}


def efficient_lever(js: whatif_terms.JobSum) -> Dict[str, Any]:
    """The cap to the model's knee instead of the low frequency, as a
    difference to the core lever: the same clocked-down time (the waits and
    the agent's reaction do not change) priced at the knee's polling power
    step, which is smaller, plus what it gives back: after each lowered
    wait the rank computes at the low level until the agent raised it, and
    at the knee it loses less speed, so less time added (priced at the
    nodes' power, as the core lever prices it).  May be negative: a wait
    that polls costs less at the lowest frequency than at any other."""
    gain = whatif_terms.Bounds(0.0, 0.0, 0.0)
    crit: List[Tuple[float, float]] = []
    less_hi = 0.0
    knees: Set[int] = set()
    lows: Set[int] = set()
    rows, without = _with_model(js, "knee_khz")
    for (node, m, t, rs, ws, shared), knee in rows:
        k = whatif_terms.node_terms(m, knee)
        knees.add(int(k["lk"]))
        lows.add(int(t["lk"]))
        # the polling power at the low level less at the knee: what each
        # clocked-down second gives up (negative when the knee draws more)
        step = t["dps"].est - k["dps"].est
        sig = whatif_terms.POWER_SIGMAS * math.sqrt(2) * m["noise_w"]
        for r, w in zip(rs, ws):
            if w is None:
                continue
            tn, raise_s = whatif_terms.Bounds(*w["transitions"]), t["raise_s"]
            dn = whatif_terms.Bounds(*(x / 1e9 + tn[i] * raise_s[i] for i, x in enumerate(w["down_ns"])))
            if shared:  # as the core lever: its ranks' waits may never overlap
                dn = whatif_terms.Bounds(dn.est, 0.0, dn.high)
            lo, hi = _span(dn, -step - sig, -step + sig)
            gain = whatif_terms.plus(gain, whatif_terms.Bounds(-dn.est * step, lo, hi))
            slow = t["slow"] - k["slow"]  # the share of speed the knee keeps
            crit.append((r.get("mpi_s") or 0.0, tn.est * raise_s.est * slow))
            less_hi = max(less_hi, tn.high * raise_s.high * slow)
    if not knees:
        return {"predicted": False, "why": "no knee in the model of " + ",".join(without[:8])
                + ": `mpi-pstate calibrate` of this release measures it" if without else
                "no node with a power model"}
    less = whatif_terms.Bounds(min(crit)[1] if crit else 0.0, 0.0, less_hi)
    saved = whatif_terms.Bounds(gain.est + less.est * js.node_w, gain.low, gain.high + less.high * js.node_w)
    out: Dict[str, Any] = {
        "predicted": True, "knee_khz": sorted(knees), "instead_of_khz": sorted(lows),
        "saved_j": _rounded(saved),
        "time_added_s": [-round(less.est, 4) or 0.0, -round(less.high, 4) or 0.0, 0.0],
        "note": "a difference to the core lever; a polling wait saves less per second at the "
                "knee than at the low frequency, the knee pays only for work done while low "
                "(here: the raise delay after each lowered wait; the copy part of MPI calls "
                "is not in the records)"}
    if without:
        out["without_knee"] = without[:8]
    return out


def _uncore_status(detail: Dict[str, Any], node: str) -> Dict[str, str]:
    """The agent's verdict per uncore domain in the recorded run (a run with
    the uncore lever on), by domain name."""
    out: Dict[str, str] = {}
    for st in ((detail.get("nodes") or {}).get(node) or {}).get("steps") or []:
        un = ((st.get("agent") or {}) if isinstance(st, dict) else {}).get("uncore")
        for d in un if isinstance(un, list) else []:
            if isinstance(d, dict) and isinstance(d.get("domain"), str) and \
                    isinstance(d.get("status"), str):
                out[d["domain"]] = d["status"]
    return out


def _uncore_threshold_us(detail: Dict[str, Any]) -> int:
    """The run's uncore threshold (its agent records), else the default."""
    for n in (detail.get("nodes") or {}).values():
        steps = n.get("steps") if isinstance(n, dict) else None
        for st in steps if isinstance(steps, list) else []:
            se = ((st.get("agent") or {}) if isinstance(st, dict) else {}).get("settings")
            v = se.get("uncore_threshold_us") if isinstance(se, dict) else None
            if type(v) is int and 1000 <= v <= 10**8:
                return v
    return UNCORE_THRESHOLD_US


def _packages(u: Dict[str, Any], rs: List[Dict[str, Any]]) -> Tuple[Dict[str, List[int]], bool]:
    """The ranks (indices into rs) of each uncore domain, by the CPU each
    ran on; a node whose ranks cannot all be placed is one package (and
    the second value says so)."""
    where = {c: d["name"] for d in u["domains"] for c in d["cpus"]}
    groups: Dict[str, List[int]] = {}
    for i, r in enumerate(rs):
        name = where.get(r.get("cpu")) if isinstance(r.get("cpu"), int) else None
        if name is None:
            one = u["domains"][0]["name"] if len(u["domains"]) == 1 else "node"
            return {one: list(range(len(rs)))}, len(u["domains"]) > 1
        groups.setdefault(name, []).append(i)
    return groups, False


class _UncoreSum:
    """What uncore_lever() adds up over the packages."""

    def __init__(self) -> None:
        self.down = self.saved = self.trans = whatif_terms.Bounds(0.0, 0.0, 0.0)
        self.added_hi = 0.0
        self.packages = 0
        self.refused: List[str] = []
        self.unplaced: List[str] = []


def _package_waits(rs: List[Dict[str, Any]], ws: List[Optional[Dict[str, Any]]],
                   idx: List[int], thr: float, react: whatif_terms.Bounds
                   ) -> Optional[List[Tuple[whatif_terms.Bounds, whatif_terms.Bounds]]]:
    """Per rank of a package, its time past the threshold (with the
    reaction) and its transitions; None when a rank has no histogram, since
    the joint condition needs every rank of the package."""
    per = []
    for i in idx:
        w = whatif_terms.rank_what_if(rs[i], thr, react) if ws[i] is not None else None
        if w is None:
            return None
        tn = whatif_terms.Bounds(*w["transitions"])
        per.append((whatif_terms.Bounds(*(x / 1e9 + tn[k] * react[k]
                             for k, x in enumerate(w["down_ns"]))), tn))
    return per or None


def _add_package(us: _UncoreSum, per: List[Tuple[whatif_terms.Bounds, whatif_terms.Bounds]], wall: float, step: float,
                 sig: float, u: Dict[str, Any], react: whatif_terms.Bounds) -> None:
    """Adds one package, from its ranks' times (see uncore_lever), to us."""
    us.packages += 1
    n = len(per)
    dn = whatif_terms.Bounds(min(d.est for d, _ in per),
                max(0.0, sum(d.low for d, _ in per) - (n - 1) * wall),
                min(d.high for d, _ in per))
    tn = whatif_terms.Bounds(min(x.est for _, x in per), min(x.low for _, x in per) if n == 1 else 0.0,
                min(x.high for _, x in per))
    us.down, us.trans = whatif_terms.plus(us.down, dn), whatif_terms.plus(us.trans, tn)
    us.saved = whatif_terms.plus(us.saved, whatif_terms.Bounds(dn.est * step, dn.low * max(0.0, step - sig),
                                      dn.high * (step + sig)))
    lat = u.get("latency_us", 0.0) / 1e6
    us.added_hi = max(us.added_hi,
                      tn.high * (react.high + lat) * (1 - u["min_khz"] / u["max_khz"]))


def _uncore_node(us: _UncoreSum, row: whatif_terms.NodeRow, u: Dict[str, Any], detail: Dict[str, Any],
                 thr: float, reaction_us: Optional[float]) -> None:
    """Adds the packages of one node with an uncore model to us."""
    node, m, t, rs, ws, _ = row
    status = _uncore_status(detail, node)
    wake = t["wake"] if reaction_us is None else whatif_terms.Bounds(reaction_us, 0.0, 2 * reaction_us)
    react = whatif_terms.Bounds(*((u.get("write_us", m["write_us"]) + x) / 1e6 for x in wake))
    wall = max([r.get("wall_s") or 0.0 for r in rs] + [detail.get("elapsed_s") or 0.0])
    step = u["poll_w_at_max"] - u["poll_w_at_min"]
    sig = whatif_terms.POWER_SIGMAS * math.sqrt(2) * m["noise_w"]
    groups, guessed = _packages(u, rs)
    if guessed:
        us.unplaced.append(node)
    for name, idx in sorted(groups.items()):
        # "profile": a profile run found the package the step's whole
        if status and status.get(name, "managed") not in ("managed", "profile"):
            us.refused.append(f"{node}:{name} ({status[name]})")
            continue
        per = _package_waits(rs, ws, idx, thr, react)
        if per is not None:
            _add_package(us, per, wall, step, sig, u, react)


def _uncore_answer(us: _UncoreSum, js: whatif_terms.JobSum, detail: Dict[str, Any], thr_us: int,
                   without: List[str]) -> Dict[str, Any]:
    """uncore_lever()'s answer from its sums."""
    if not us.packages and not us.refused:
        why = ("no uncore sweep in the model of " + ",".join(without[:8]) +
               ": `mpi-pstate calibrate` of this release measures it on a node with "
               "intel_uncore_frequency") if without else "no rank with a wait histogram"
        return {"predicted": False, "why": why}
    out: Dict[str, Any] = {
        "predicted": True, "threshold_us": thr_us, "packages": us.packages,
        "saved_j": [round(us.saved.est, 3), round(us.saved.low - us.added_hi * js.node_w, 3),
                    round(us.saved.high, 3)],
        "time_added_s": [0.0, 0.0, round(us.added_hi, 4)],
        "low_s": _rounded(us.down, 4), "transitions": [round(x) for x in us.trans]}
    notes = []
    if us.refused:
        notes.append("the agent refused " + ", ".join(us.refused[:8]) + " in this run")
    if us.unplaced:
        notes.append("ranks not placed on packages on " + ",".join(us.unplaced[:8]) +
                     ": each node taken as one package")
    if without:
        notes.append("no uncore sweep in the model of " + ",".join(without[:8]))
    if status_unknown(detail):
        notes.append("assumed: each step owns its ranks' packages whole (the agent lowers "
                     "no package it shares)")
    out["notes"] = notes
    return out


def uncore_lever(js: whatif_terms.JobSum, detail: Dict[str, Any], reaction_us: Optional[float]
                 ) -> Dict[str, Any]:
    """The uncore of a package at its lowest frequency while every rank on
    it has waited past the uncore threshold.  Per rank, the time past that
    threshold (and the agent's reaction) is bounded from its histogram as
    the core's is; the joint condition needs every rank of the package:
    at most the least of theirs (all waits of the package overlap), at
    least what the ranks' times force to overlap within the wall time
    (sum - (n - 1) x wall), estimated as the least (the ranks of a package
    leave a collective together: the last to arrive waits least, in every
    iteration when the imbalance keeps its order).  Priced at the model's
    polling power step between the uncore at its highest and its lowest;
    the high bound of the time added: a compute phase after each lowered
    wait runs memory-bound at the low uncore until it is back up."""
    thr_us = _uncore_threshold_us(detail)
    us = _UncoreSum()
    rows, without = _with_model(js, "uncore")
    for row, u in rows:
        _uncore_node(us, row, u, detail, thr_us / 1e6, reaction_us)
    return _uncore_answer(us, js, detail, thr_us, without)


def status_unknown(detail: Dict[str, Any]) -> bool:
    """Whether the run recorded no agent verdict on any uncore domain."""
    return not any(_uncore_status(detail, n) for n in (detail.get("nodes") or {}))


def _notes(js: whatif_terms.JobSum, reaction_us: Optional[float]) -> List[str]:
    """What a reader of the prediction must know to trust it."""
    notes = []
    if js.missing_model:
        notes.append("no power model for " + ",".join(js.missing_model[:8]) +
                     ": run `mpi-pstate calibrate` there (or give --model)")
    if js.no_hist:
        notes.append(f"{js.no_hist} ranks without a wait histogram (records of an older "
                     "release, or killed before their figures were read)")
    if js.gaps and reaction_us is None:
        notes.append(f"the agent's CPU budget spaces its wake-ups by up to "
                     f"{duration_text(round(max(js.gaps.values())))} on {','.join(sorted(js.gaps)[:8])} "
                     "at this threshold: each wait is lowered half that late on average, at "
                     "most all of it (docs/agent.md, CPU budget)")
    if js.shared:
        notes.append("shared frequency domains on " + ",".join(js.shared[:8]) +
                     ": a core is lowered only while every rank of its domain waits; the low "
                     "bound assumes their waits never overlap")
    return notes


def saving(detail: Dict[str, Any], measured_j: Optional[float] = None
           ) -> Optional[Dict[str, Any]]:
    """The energy a finished job saved, after the fact: each rank's
    clocked-down time as the agent measured it (root's figure), priced with
    its node's power model (the one the node Epilog put in the record), the
    way predict() prices a prediction, and the time the raises added.
    measured_j: the job's energy; with it, what the job would have used at
    full clock.  None when no node of the job has a model or no rank has
    the agent's figures.  Steps summed past the detail bound (the detail's
    "rest", not placed on a node) count at the mean power step of the
    job's nodes."""
    by_node: Dict[str, List[Dict[str, Any]]] = {}
    for r in detail.get("ranks") or []:
        by_node.setdefault(r.get("node", "?"), []).append(r)
    saved = [0.0, 0.0, 0.0]
    down = 0.0
    crit: List[Tuple[float, float]] = []
    added_hi = node_w = 0.0
    nodes, missing, meters = 0, [], set()
    terms: List[Tuple[Dict[str, Any], int]] = []
    for node, rs in sorted(by_node.items()):
        m, _ = whatif_terms.node_model(detail, node, None)
        rs = [r for r in rs if r.get("down_s") is not None and r.get("transitions") is not None]
        if m is None or not rs:
            missing.append(node)
            continue
        nodes += 1
        meters.add(m["meter"])
        t = whatif_terms.node_terms(m)
        terms.append((t, len(rs)))
        shared = whatif_terms.shared_domains(detail, node, m, len(rs))
        node_w += m["idle_w"] + t["busy_core"] * len(rs)
        for r in rs:
            dn, tn = float(r["down_s"]), float(r["transitions"])
            down += dn
            whatif_terms.add_saving(saved, (dn, dn, dn), (tn, tn, tn), t, shared)
            crit.append((r.get("mpi_s") or 0.0, tn * t["raise_s"][0] * t["slow"]))
            added_hi = max(added_hi, tn * t["raise_s"][2] * t["slow"])
    if not nodes:
        return None
    rest = detail.get("rest") if isinstance(detail.get("rest"), dict) else {}
    rd, rt = rest.get("down_s") or 0.0, rest.get("transitions") or 0
    if rd > 0 and terms:
        # the mean node's terms, weighted by its ranks
        w = sum(n for _, n in terms)
        mean = {"dps": tuple(sum(t["dps"][i] * n for t, n in terms) / w for i in range(3)),
                "e_tr": sum(t["e_tr"] * n for t, n in terms) / w}
        down += rd
        whatif_terms.add_saving(saved, (rd, rd, rd), (rt, rt, rt), mean, False)
    added = (min(crit)[1] if crit else 0.0, 0.0, added_hi)
    return _saving_result(saved, down, added, node_w, nodes, meters, missing, measured_j)


def _saving_result(saved: List[float], down: float, added: whatif_terms.Triple, node_w: float, nodes: int,
                   meters: Set[str], missing: List[str], measured_j: Optional[float]
                   ) -> Dict[str, Any]:
    """saving()'s result: the energy saved less what the time added cost
    (the low bound pays the most time added), and what priced it."""
    out: Dict[str, Any] = {
        "saved_j": [round(saved[0] - added[0] * node_w, 2), round(saved[1] - added[2] * node_w, 2),
                    round(saved[2], 2)],
        "time_added_s": [round(x, 4) for x in added],
        "clocked_down_s": round(down, 3), "nodes": nodes,
        # what priced it: "simulated" when any model was calibrated on a fake
        "meter": "simulated" if "simulated" in meters else
        "rapl" if meters == {"rapl"} else "mixed" if len(meters) > 1 else next(iter(meters)),
    }
    if missing:
        out["missing"] = len(missing)
    if measured_j is not None and measured_j > 0:
        out["full_clock_j"] = [round(measured_j + x, 1) for x in out["saved_j"]]
        out["saved_pct"] = [round(100 * x / (measured_j + x), 2) if measured_j + x > 0 else None
                            for x in out["saved_j"]]
    return out


def sweep(details: List[Dict[str, Any]], model: Optional[Dict[str, Any]],
          low: Optional[float] = None, thresholds: Iterable[float] = SWEEP_US,
          reaction_us: Optional[float] = None, budget_ppm: Optional[int] = None
          ) -> Tuple[List[Dict[str, Any]], Optional[Dict[str, Any]]]:
    """The what-if of the jobs together at every threshold, and the
    recommendation: the threshold that saves most (estimate) with at most
    MAX_TIME_ADDED of their wall time added (upper bound: the promise holds
    for compute-bound code too)."""
    rows = []
    for t in thresholds:
        ps = [p for p in (predict(d, model, t, low, reaction_us=reaction_us,
                                  budget_ppm=budget_ppm, with_levers=False) for d in details)
              if p["ranks"]]
        if not ps:
            continue
        tot = summarise(ps)
        rows.append({"threshold_us": t, "saved_j": tot["saved_j"],
                     "time_added_pct": tot["time_added_pct"],
                     "transitions": sum(p["transitions"][0] for p in ps)})
    ok = [r for r in rows if r["time_added_pct"][2] is not None and
          r["time_added_pct"][2] <= 100 * MAX_TIME_ADDED and r["saved_j"][0] > 0]
    if not ok:
        return rows, None
    # Of the thresholds that save about as much as the best, the highest:
    # fewer transitions, and the same saving does not hang on short waits.
    most = max(r["saved_j"][0] for r in ok)
    return rows, max((r for r in ok if r["saved_j"][0] >= NEAR_BEST * most),
                     key=lambda r: r["threshold_us"])


def run_threshold_us(detail: Dict[str, Any]) -> Optional[int]:
    """The threshold most of the job's ranks ran with."""
    seen: Dict[int, int] = {}
    for r in detail.get("ranks") or []:
        t = r.get("threshold_us")
        if isinstance(t, int):
            seen[t] = seen.get(t, 0) + 1
    return max(seen, key=lambda t: seen[t]) if seen else None


def summarise(preds: List[Dict[str, Any]]) -> Dict[str, Any]:
    """Sum over many jobs: est and bounds add up (the bounds of a sum of
    independent jobs are narrower; this is the safe side)."""
    tot: Dict[str, Any] = {"jobs": len(preds), "ranks": sum(p["ranks"] for p in preds)}
    for k in ("saved_j", "time_added_s", "clocked_down_s"):
        tot[k] = [round(sum(p[k][i] for p in preds), 3) for i in range(3)]
    meas = [p["measured_j"] for p in preds if p.get("measured_j")]
    tot["measured_j"] = round(sum(meas), 1) if meas else None
    tot["jobs_with_energy"] = len(meas)
    walls = sum(p["wall_s"] or 0 for p in preds)
    tot["time_added_pct"] = [round(100 * x / walls, 3) if walls else None
                             for x in tot["time_added_s"]]
    return tot


def duration_text(us: float) -> str:
    if us >= 1000 and us % 1000 == 0:
        return f"{us / 1000:g}ms"
    return f"{us:g}us"
