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
lever")."""

import math
from typing import Any, Dict, Iterable, List, NamedTuple, Optional, Set, Tuple

from .powermodel import high_khz, low_khz, ModelError, power_at, validate_model
from ..agent_args import agent_default, job_default
from ..core import parse

BUCKETS = 64
POWER_SIGMAS = 2.0  # lo/hi of a power difference: +-2 standard errors
MAX_TIME_ADDED = 0.01  # the recommendation keeps the time added at or below 1 %
NEAR_BEST = 0.98  # ... and takes the highest threshold within 2 % of the best saving
# How much costlier than measured the agent's wake-ups and pairs may be in
# the run predicted (the low bound): its CPU per timer wake-up varied by
# half between runs on the lab's VM (12.7 to 18.9 us over 14 profile runs).
COST_SPREAD = 1.5
SCAN_US = (50.0, 100000.0)  # the agent's scan interval: the threshold, kept in here
SWEEP_US = (0, 10, 20, 50, 100, 200, 500, 1000, 2000, 5000, 10000, 20000, 50000, 100000)
# The agent's own defaults (common/agent_args.def, through the generated table)
UNCORE_THRESHOLD_US = parse.duration_us(agent_default("uncore-threshold") or "")
CAP_PPM_DEFAULT = parse.percent_ppm(agent_default("cpu-cap") or "")
# The job's default threshold (common/options.def)
THRESHOLD_US_DEFAULT = parse.duration_us(job_default("threshold"))

Triple = tuple  # (est, lo, hi)


class Bounds(NamedTuple):
    """A figure and its bounds: the estimate, the lowest and the highest
    value the inputs allow."""
    est: float
    low: float
    high: float


def _plus(a: Bounds, b: Bounds) -> Bounds:
    return Bounds(a.est + b.est, a.low + b.low, a.high + b.high)


# ---- one rank -----------------------------------------------------------------

def _bucket_bounds(b: int, cap_ns: float) -> Tuple[float, float]:
    if b == 0:
        return 0.0, 0.0
    lo = float(1 << (b - 1))
    hi = float(1 << b) if b < BUCKETS - 1 else max(lo, cap_ns)
    return lo, min(hi, max(lo, cap_ns))


def _fill(items: List[Tuple[float, float]], slack: float) -> float:
    """items: (slope, room); pours slack into the items by
    decreasing slope order as given; returns the value gained."""
    gain = 0.0
    for slope, room in items:
        take = min(room, slack)
        gain += slope * take
        slack -= take
        if slack <= 0:
            break
    return gain


def excess_bounds(hist: List[int], total_ns: float, thr_ns: float, cap_ns: float
                  ) -> Tuple[Triple, Triple]:
    """((D est, lo, hi), (n est, lo, hi)): D = sum over calls d >= thr of
    d - thr (ns), n = number of those calls, for any durations consistent
    with the histogram and the total.  Linear program solved greedily."""
    bs = []
    for b, c in enumerate(hist[:BUCKETS]):
        if c > 0:
            lo, hi = _bucket_bounds(b, cap_ns)
            bs.append((b, float(c), lo, hi))
    sum_lo = sum(c * lo for _, c, lo, _ in bs)
    sum_hi = sum(c * hi for _, c, _, hi in bs)
    total = min(max(total_ns, sum_lo), sum_hi)
    slack = total - sum_lo
    base_d = 0.0  # D with every call at its bucket's lower bound
    n_lo = n_hi = n_est = 0.0
    up, down = [], []  # greedy items for D max / D min
    for _, c, lo, hi in bs:
        room = c * (hi - lo)
        if lo >= thr_ns:
            base_d += c * (lo - thr_ns)
            n_lo += c
            n_hi += c
            n_est += c
            up.append((1.0, room))
            down.append((1.0, room))
        elif hi <= thr_ns:
            up.append((0.0, room))
            down.append((0.0, room))
        else:  # straddles the threshold
            n_hi += c
            n_est += c * (hi - thr_ns) / (hi - lo) if hi > lo else 0
            up.append(((hi - thr_ns) / (hi - lo), room))
            # min: spread evenly, nothing above thr until the mean passes it
            flat = c * (thr_ns - lo)
            down.append((0.0, flat))
            down.append((1.0, room - flat))
    d_hi = base_d + _fill(sorted(up, key=lambda i: -i[0]), slack)
    d_lo = base_d + _fill(sorted(down, key=lambda i: i[0]), slack)
    # estimate: every bucket filled in proportion to its room
    frac = slack / (sum_hi - sum_lo) if sum_hi > sum_lo else 0.0
    d_est = base_d
    for _, c, lo, hi in bs:
        mean = lo + frac * (hi - lo)
        if lo >= thr_ns:
            d_est += c * (mean - lo)
        elif hi > thr_ns:
            # between the least (all calls at the mean) and the most (calls
            # at the bucket's ends) this bucket's calls can exceed thr by
            s = c * mean
            d_est += (c * max(0.0, mean - thr_ns) + (s - c * lo) / (hi - lo) * (hi - thr_ns)) / 2
    d_est = min(max(d_est, d_lo), d_hi)
    return (d_est, d_lo, d_hi), (n_est, n_lo, n_hi)


def rank_what_if(r: Dict[str, Any], thr_s: float, react_s: Triple) -> Optional[Dict[str, Any]]:
    """Clocked-down seconds and transitions (triples) of one rank at
    threshold thr_s, or None without a histogram."""
    hist = r.get("hist_ns")
    if not isinstance(hist, list) or not hist or r.get("mpi_s") is None:
        return None
    h = [0] * BUCKETS
    for b, c in hist:
        if 0 <= b < BUCKETS and c > 0:
            h[b] += c
    wall = r.get("wall_s") or 0.0
    cap = max(wall, r["mpi_s"]) * 1e9 or float(1 << 62)
    total = r["mpi_s"] * 1e9
    outs = []
    for react in react_s:  # a later lowering shortens every clocked-down wait
        (d, dlo, dhi), n = excess_bounds(h, total, (thr_s + react) * 1e9, cap)
        outs.append(((d, dlo, dhi), n))
    (d, _, _), n = outs[0]
    dlo = outs[2][0][1]  # slowest reaction, lowest bound
    dhi = outs[1][0][2]  # instant reaction, highest bound
    n_est, n_lo, n_hi = n[0], outs[2][1][1], outs[1][1][2]
    # The blocking totals at the run's own threshold T0 bound the blocking
    # calls again: lowering the threshold adds excess, raising it removes at
    # most (T - T0) per long call.  They count only calls the agent acts on.
    t0 = r.get("threshold_us")
    over, longs = r.get("over_s"), r.get("long_calls")
    if isinstance(t0, int) and over is not None and isinstance(longs, int):
        t0s, over = t0 / 1e6, over * 1e9
        for react, k in ((react_s[2], "lo"), (react_s[1], "hi"), (react_s[0], "est")):
            t = thr_s + react
            if t >= t0s:
                blk_lo, blk_hi = max(0.0, over - longs * (t - t0s) * 1e9), over
                if k == "lo":
                    dlo = max(min(dlo, blk_hi), blk_lo)
                    n_lo = min(n_lo, longs)
                elif k == "hi":
                    dhi = min(dhi, blk_hi)
                    n_hi = min(n_hi, longs)
                else:
                    d = min(max(d, blk_lo), blk_hi)
                    n_est = min(n_est, longs)
            elif k == "lo":
                dlo = max(dlo, over + longs * (t0s - t) * 1e9)
        dhi = max(dhi, dlo)
        d = min(max(d, dlo), dhi)
    return {"down_ns": (d, min(dlo, d), max(dhi, d)),
            "transitions": (n_est, min(n_lo, n_est), max(n_hi, n_est))}


# ---- a job --------------------------------------------------------------------

def _domain_cpus(settings: Any) -> int:
    try:
        return max(int(g.get("domain_cpus") or 1) for g in settings["cpufreq"]["groups"]
                   if isinstance(g, dict) and "cpus" in g)
    except (KeyError, TypeError, ValueError, AttributeError):
        return 1


def agent_cost(detail: Dict[str, Any], node: str) -> Optional[Tuple[float, int]]:
    """(CPU of one timer wake-up in us, CPU budget in ppm) of the node's
    agent in the recorded run: the record's timer_cpu_us (whole budget
    periods), else its CPU over its timer wake-ups (start-up included: a
    little high).  The step with the most timer wake-ups speaks."""
    best: Optional[Tuple[int, float, int]] = None
    for st in ((detail.get("nodes") or {}).get(node) or {}).get("steps") or []:
        rec = st.get("agent") if isinstance(st, dict) else None
        if not isinstance(rec, dict):
            continue
        ag, se = rec.get("agent"), rec.get("settings")
        if not isinstance(ag, dict) or not isinstance(se, dict):
            continue
        try:
            n, budget = int(ag.get("timeouts") or 0), int(se.get("cpu_budget_ppm"))
            c = float(ag.get("timer_cpu_us") or 0.0) or \
                (float(ag.get("cpu_s") or 0.0) * 1e6 / n if n else 0.0)
        except (TypeError, ValueError):
            continue
        if math.isfinite(c) and 0 < c < 1e5 and 0 <= budget <= 1_000_000 and \
                (best is None or n > best[0]):
            best = (n, c, budget)
    return (best[1], best[2]) if best else None


# An announced wait costs the agent about three wake-ups (the announcement,
# its deadline, the rank leaving) besides its lower+raise writes; the agent
# announces while that keeps it under ANNOUNCE_OFF_SHARE of its CPU ceiling
# (agent/agentd.h AGENTD_ANNOUNCE_OFF_PCT; docs/agent.md, "Budgets"), whose
# default is 5 % of a core.
ANNOUNCE_WAKES = 3
ANNOUNCE_OFF_SHARE = 0.75


def agent_cap_ppm(detail: Dict[str, Any], node: str) -> int:
    """The node agent's CPU ceiling in the recorded run (its settings'
    cpu_cap_ppm; the default when the record has none; 0: none)."""
    for st in ((detail.get("nodes") or {}).get(node) or {}).get("steps") or []:
        se = ((st.get("agent") or {}) if isinstance(st, dict) else {}).get("settings")
        v = se.get("cpu_cap_ppm") if isinstance(se, dict) else None
        if type(v) is int and 0 <= v <= 1_000_000:
            return v
    return CAP_PPM_DEFAULT


def announces(cost_us: float, cap_ppm: int, pair_cpu_us: float, pairs_per_s: float) -> bool:
    """Whether the agent keeps waits announced at this rate of lower+raise
    pairs (agent/budget.c: off past ANNOUNCE_OFF_SHARE of its ceiling): each pair then costs
    ANNOUNCE_WAKES wake-ups and its writes."""
    if not cap_ppm:
        return True
    per_pair = ANNOUNCE_WAKES * max(0.0, cost_us) + max(0.0, pair_cpu_us)
    return per_pair * max(0.0, pairs_per_s) <= cap_ppm * ANNOUNCE_OFF_SHARE


def budget_gap_us(cost_us: float, budget_ppm: int, threshold_us: float,
                  pair_cpu_us: float = 0.0, pairs_per_s: float = 0.0) -> float:
    """The spacing the agent's CPU budget puts between its timer wake-ups
    at a threshold (agent/agent.c, mpi_pstate_agent_budget_gap, in steady
    state), in us: none while scanning every threshold and the lower+raise
    pairs cost at most 80 % of the budget; else the spacing at which the
    scans cost what the pairs leave of it (at most the longest scan
    interval: pairs alone over it).  cost_us: one timer wake-up's CPU."""
    if not budget_ppm or cost_us <= 0:
        return 0.0
    scan = min(max(threshold_us, SCAN_US[0]), SCAN_US[1])
    aim = 0.8 * budget_ppm / 1e6  # of a core
    pairs = max(0.0, pair_cpu_us) * max(0.0, pairs_per_s) / 1e6
    if cost_us / scan + pairs <= aim:
        return 0.0
    gap = cost_us / (aim - pairs) if aim > pairs else SCAN_US[1]
    gap = min(gap, SCAN_US[1])
    return gap if gap > scan / 4 and gap >= SCAN_US[0] else 0.0


def node_model(detail: Dict[str, Any], node: str, fallback: Optional[Dict[str, Any]]
               ) -> Tuple[Optional[Dict[str, Any]], str]:
    """The model of a node: the one its record carried (settings.power_model,
    calibrated on that node), else the file given to the report."""
    st = ((detail.get("nodes") or {}).get(node) or {}).get("settings")
    pm = st.get("power_model") if isinstance(st, dict) else None
    if isinstance(pm, dict):
        try:
            return validate_model(pm), "node record"
        except ModelError:
            pass
    return fallback, "model file" if fallback else "none"


def node_terms(m: Dict[str, Any], low: Optional[float] = None) -> Dict[str, Any]:
    """What a node's model says one clocked-down second and one transition
    are worth (triples): the polling power step between the high and the
    low frequency with its noise, a transition's energy, the time a core
    stays low after its wait (write + the agent's wake-up), and the share of
    speed a compute-bound rank loses at the low frequency."""
    hk = high_khz(m)
    lk = float(low) if low else low_khz(m)
    lk = min(max(lk, low_khz(m)), hk)
    sig = POWER_SIGMAS * math.sqrt(2) * m["noise_w"]
    dp = power_at(m, hk, "poll_w") - power_at(m, lk, "poll_w")
    wake = Bounds(m["reaction_us"], 0.0, max(m["reaction_us_hi"], m["reaction_us"]))
    # Raising is never held back by the agent's CPU budget (a rank leaving
    # a lowered wait wakes it through the futex): a wake-up.
    return {"hk": hk, "lk": lk, "dps": Bounds(dp, max(0.0, dp - sig), dp + sig), "wake": wake,
            "raise_s": Bounds(*((m["write_us"] + x) / 1e6 for x in wake)),
            "e_tr": m["transition_uj"] / 1e6, "slow": 1.0 - lk / hk,
            "busy_core": max(0.0, power_at(m, hk, "busy_w") - m["idle_w"])}


def add_saving(saved: List[float], dn: Tuple[float, float, float],
               tn: Tuple[float, float, float], t: Dict[str, Any], shared: bool) -> None:
    """Adds to saved (est, lo, hi) the energy of dn clocked-down seconds and
    tn transitions on a node of terms t; nothing for the low bound on a
    shared frequency domain (its ranks' waits may never overlap)."""
    e = _energy(Bounds(*dn), Bounds(*tn), t, shared)
    for i in range(3):
        saved[i] += e[i]


def _energy(dn: Bounds, tn: Bounds, t: Dict[str, Any], shared: bool) -> Bounds:
    """The energy dn clocked-down seconds and tn transitions save on a node
    of terms t.  The low bound takes the most transitions at their dearest,
    the high bound the fewest: a transition costs (or, negative, saves)."""
    dps, e_tr = Bounds(*t["dps"]), t["e_tr"]
    return Bounds(dn.est * dps.est - tn.est * e_tr,
                  (0.0 if shared else dn.low * dps.low) - tn.high * abs(e_tr),
                  dn.high * dps.high - tn.low * min(e_tr, 0.0))


def _shared_domains(detail: Dict[str, Any], node: str, m: Dict[str, Any], nranks: int) -> bool:
    dom = max(m["domain_cpus"], _domain_cpus(
        ((detail.get("nodes") or {}).get(node) or {}).get("settings")))
    return dom > 1 and nranks > 1


# (node, model, terms, ranks, their rank_what_if, shared domain)
_NodeRow = Tuple[str, Dict[str, Any], Dict[str, Any], List[Dict[str, Any]],
                 List[Optional[Dict[str, Any]]], bool]


class _JobSum:
    """What predict() adds up over a job's nodes and ranks."""

    def __init__(self) -> None:
        self.ranks = self.no_hist = 0
        self.saved = self.down = self.trans = Bounds(0.0, 0.0, 0.0)
        self.crit: List[Tuple[float, float]] = []  # (time in MPI, delay) per rank
        self.added_high = self.node_w = 0.0
        self.sources: Set[str] = set()
        self.missing_model: List[str] = []
        self.shared: List[str] = []
        self.announced: List[str] = []
        self.gaps: Dict[str, float] = {}
        self.low_khz: Optional[float] = None
        self.high_khz: Optional[float] = None
        # per node, what the levers beyond the cap are priced from
        self.nodes: List[_NodeRow] = []


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
    js = _JobSum()
    by_node: Dict[str, List[Dict[str, Any]]] = {}
    for r in detail.get("ranks") or []:
        by_node.setdefault(r.get("node", "?"), []).append(r)
    for node, rs in sorted(by_node.items()):
        m, src = node_model(detail, node, model)
        if m is None:
            js.missing_model.append(node)
            continue
        js.sources.add(src)
        t = node_terms(m, low)
        js.low_khz, js.high_khz = t["lk"], t["hk"]
        ws, gap, announced = _node_waits(detail, node, rs, m, t, threshold_us, reaction_us,
                                         budget_ppm)
        if announced:
            js.announced.append(node)
        if gap:
            js.gaps[node] = gap
        if _shared_domains(detail, node, m, len(rs)):
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
    """The ranks' rank_what_if() on one node, lowered as late as the agent
    lowers them; the agent's spacing of its wake-ups (the gap, us); whether
    their waits are announced.  Under its CPU budget the agent wakes at most
    every gap: a wait starting at random is lowered gap/2 late on average,
    at most gap (a wait that starts as the last one ended, the agent's
    wake-up for it just spent: the whole gap).  Its pairs spend the budget
    too, at their rate without a spacing (a spacing only lowers it); the low
    bound takes every wake-up and pair COST_SPREAD times as costly: a busy
    node's wake-ups cost more."""
    thr = max(0.0, threshold_us) / 1e6
    cost = agent_cost(detail, node)
    gap = gap_lo = 0.0
    announced = False
    plain = None  # the ranks' figures lowered as fast as a wake-up
    if cost and reaction_us is None:
        plain = [rank_what_if(r, thr, t["raise_s"]) for r in rs]
        pairs = sum(w["transitions"][0] for w in plain if w)
        secs = max([r.get("wall_s") or 0.0 for r in rs] + [detail.get("elapsed_s") or 0.0])
        rate = pairs / secs if secs else 0.0
        budget = cost[1] if budget_ppm is None else budget_ppm
        # waits announced: lowered at their deadline, no spacing (the first
        # long wait at a call site, not announced, is not worth a term)
        announced = announces(cost[0], agent_cap_ppm(detail, node), m["pair_cpu_us"] or 0.0,
                              rate)
        if not announced:
            gap, gap_lo = (budget_gap_us(k * cost[0], budget, threshold_us,
                                         k * (m["pair_cpu_us"] or 0.0), rate)
                           for k in (1.0, COST_SPREAD))
    wake = t["wake"]
    rx = Bounds(wake.est + gap / 2, 0.0, wake.high + max(gap, gap_lo)) \
        if reaction_us is None else Bounds(reaction_us, 0.0, 2 * reaction_us)
    react = Bounds(*((m["write_us"] + x) / 1e6 for x in rx))
    if plain is not None and react == t["raise_s"]:
        return plain, gap, announced
    return [rank_what_if(r, thr, react) for r in rs], gap, announced


def _add_rank(js: _JobSum, r: Dict[str, Any], w: Optional[Dict[str, Any]],
              t: Dict[str, Any], shared: bool) -> None:
    """Adds one rank's rank_what_if() w, on a node of terms t, to js."""
    if w is None:
        js.no_hist += 1
        return
    js.ranks += 1
    tn, raise_s = Bounds(*w["transitions"]), t["raise_s"]
    # A core stays low after its wait until the agent's raise (the rank
    # wakes it as it leaves): the agent's down_s counts that too, and so
    # does the energy; it shows once waits are lowered at their deadline.
    # Low bound: the write alone.
    dn = Bounds(*(x / 1e9 + tn[i] * raise_s[i] for i, x in enumerate(w["down_ns"])))
    js.down, js.trans = _plus(js.down, dn), _plus(js.trans, tn)
    js.saved = _plus(js.saved, _energy(dn, tn, t, shared))
    # After a lowered wait the rank computes at the low frequency until the
    # agent has raised it again: compute-bound, that is (1 - low/high) of
    # the raise delay lost per transition.  A rank that waits has slack:
    # its delay shortens its next wait.  Only the rank that waits least (the
    # critical path) delays the job (estimate); at most, every delay lands
    # on the slowest rank.
    js.crit.append((r.get("mpi_s") or 0.0, tn.est * raise_s.est * t["slow"]))
    js.added_high = max(js.added_high, tn.high * raise_s.high * t["slow"])


def _prediction(js: _JobSum, detail: Dict[str, Any], threshold_us: float,
                measured_j: Optional[float], reaction_us: Optional[float]) -> Dict[str, Any]:
    """predict()'s result from the sums of the job's ranks."""
    wall = detail.get("elapsed_s") or (detail.get("summary") or {}).get("wall_s") or \
        max((r.get("wall_s") or 0 for r in detail.get("ranks") or []), default=0)
    added = Bounds(min(js.crit)[1] if js.crit else 0.0, 0.0, js.added_high)
    # A longer job keeps every core of its nodes powered for longer: the
    # low saving pays the most time added, the high saving the least.
    cost = Bounds(added.est * js.node_w, 0.0, added.high * js.node_w)
    saved = Bounds(js.saved.est - cost.est, js.saved.low - cost.high, js.saved.high - cost.low)
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

def _rounded(b: Bounds, nd: int = 3) -> List[float]:
    return [round(x, nd) for x in b]


def _span(a: Bounds, lo: float, hi: float) -> Tuple[float, float]:
    """The least and the most of x * y over x in a's bounds, y in [lo, hi]."""
    xs = [x * y for x in (a.low, a.high) for y in (lo, hi)]
    return min(xs), max(xs)


def _with_model(js: _JobSum, key: str) -> Tuple[List[Tuple[_NodeRow, Any]], List[str]]:
    """The nodes whose power model has key (each with its value), and the
    names of those whose model has not: a lever prices only the first and
    names the others in its answer."""
    have: List[Tuple[_NodeRow, Any]] = []
    without: List[str] = []
    for row in js.nodes:
        node, m = row[0], row[1]
        if m.get(key) is None:
            without.append(node)
        else:
            have.append((row, m[key]))
    return have, without


def levers(js: _JobSum, detail: Dict[str, Any], core: Dict[str, Any],
           reaction_us: Optional[float]) -> Dict[str, Any]:
    """Each lever alone, against the same run: the core cap (predict()'s
    own figures), the efficient low level as a difference to the cap, and
    the uncore (docs/evaluation.md, "Each lever")."""
    return {"core": {k: core[k] for k in ("saved_j", "time_added_s", "clocked_down_s",
                                          "transitions", "low_khz")},
            "efficient": efficient_lever(js),
            "uncore": uncore_lever(js, detail, reaction_us)}


def efficient_lever(js: _JobSum) -> Dict[str, Any]:
    """The cap to the model's knee instead of the low frequency, as a
    difference to the core lever: the same clocked-down time (the waits and
    the agent's reaction do not change) priced at the knee's polling power
    step, which is smaller, plus what it gives back: after each lowered
    wait the rank computes at the low level until the agent raised it, and
    at the knee it loses less speed, so less time added (priced at the
    nodes' power, as the core lever prices it).  May be negative: a wait
    that polls costs less at the lowest frequency than at any other."""
    gain = Bounds(0.0, 0.0, 0.0)
    crit: List[Tuple[float, float]] = []
    less_hi = 0.0
    knees: Set[int] = set()
    lows: Set[int] = set()
    rows, without = _with_model(js, "knee_khz")
    for (node, m, t, rs, ws, shared), knee in rows:
        k = node_terms(m, knee)
        knees.add(int(k["lk"]))
        lows.add(int(t["lk"]))
        # the polling power at the low level less at the knee: what each
        # clocked-down second gives up (negative when the knee draws more)
        step = t["dps"].est - k["dps"].est
        sig = POWER_SIGMAS * math.sqrt(2) * m["noise_w"]
        for r, w in zip(rs, ws):
            if w is None:
                continue
            tn, raise_s = Bounds(*w["transitions"]), t["raise_s"]
            dn = Bounds(*(x / 1e9 + tn[i] * raise_s[i] for i, x in enumerate(w["down_ns"])))
            if shared:  # as the core lever: its ranks' waits may never overlap
                dn = Bounds(dn.est, 0.0, dn.high)
            lo, hi = _span(dn, -step - sig, -step + sig)
            gain = _plus(gain, Bounds(-dn.est * step, lo, hi))
            slow = t["slow"] - k["slow"]  # the share of speed the knee keeps
            crit.append((r.get("mpi_s") or 0.0, tn.est * raise_s.est * slow))
            less_hi = max(less_hi, tn.high * raise_s.high * slow)
    if not knees:
        return {"predicted": False, "why": "no knee in the model of " + ",".join(without[:8])
                + ": `mpi-pstate calibrate` of this release measures it" if without else
                "no node with a power model"}
    less = Bounds(min(crit)[1] if crit else 0.0, 0.0, less_hi)
    saved = Bounds(gain.est + less.est * js.node_w, gain.low, gain.high + less.high * js.node_w)
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
        self.down = self.saved = self.trans = Bounds(0.0, 0.0, 0.0)
        self.added_hi = 0.0
        self.packages = 0
        self.refused: List[str] = []
        self.unplaced: List[str] = []


def _package_waits(rs: List[Dict[str, Any]], ws: List[Optional[Dict[str, Any]]],
                   idx: List[int], thr: float, react: Bounds
                   ) -> Optional[List[Tuple[Bounds, Bounds]]]:
    """Per rank of a package, its time past the threshold (with the
    reaction) and its transitions; None when a rank has no histogram, since
    the joint condition needs every rank of the package."""
    per = []
    for i in idx:
        w = rank_what_if(rs[i], thr, react) if ws[i] is not None else None
        if w is None:
            return None
        tn = Bounds(*w["transitions"])
        per.append((Bounds(*(x / 1e9 + tn[k] * react[k]
                             for k, x in enumerate(w["down_ns"]))), tn))
    return per or None


def _add_package(us: _UncoreSum, per: List[Tuple[Bounds, Bounds]], wall: float, step: float,
                 sig: float, u: Dict[str, Any], react: Bounds) -> None:
    """Adds one package, from its ranks' times (see uncore_lever), to us."""
    us.packages += 1
    n = len(per)
    dn = Bounds(min(d.est for d, _ in per),
                max(0.0, sum(d.low for d, _ in per) - (n - 1) * wall),
                min(d.high for d, _ in per))
    tn = Bounds(min(x.est for _, x in per), min(x.low for _, x in per) if n == 1 else 0.0,
                min(x.high for _, x in per))
    us.down, us.trans = _plus(us.down, dn), _plus(us.trans, tn)
    us.saved = _plus(us.saved, Bounds(dn.est * step, dn.low * max(0.0, step - sig),
                                      dn.high * (step + sig)))
    lat = u.get("latency_us", 0.0) / 1e6
    us.added_hi = max(us.added_hi,
                      tn.high * (react.high + lat) * (1 - u["min_khz"] / u["max_khz"]))


def _uncore_node(us: _UncoreSum, row: _NodeRow, u: Dict[str, Any], detail: Dict[str, Any],
                 thr: float, reaction_us: Optional[float]) -> None:
    """Adds the packages of one node with an uncore model to us."""
    node, m, t, rs, ws, _ = row
    status = _uncore_status(detail, node)
    wake = t["wake"] if reaction_us is None else Bounds(reaction_us, 0.0, 2 * reaction_us)
    react = Bounds(*((u.get("write_us", m["write_us"]) + x) / 1e6 for x in wake))
    wall = max([r.get("wall_s") or 0.0 for r in rs] + [detail.get("elapsed_s") or 0.0])
    step = u["poll_w_at_max"] - u["poll_w_at_min"]
    sig = POWER_SIGMAS * math.sqrt(2) * m["noise_w"]
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


def _uncore_answer(us: _UncoreSum, js: _JobSum, detail: Dict[str, Any], thr_us: int,
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


def uncore_lever(js: _JobSum, detail: Dict[str, Any], reaction_us: Optional[float]
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


def _notes(js: _JobSum, reaction_us: Optional[float]) -> List[str]:
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
        m, _ = node_model(detail, node, None)
        rs = [r for r in rs if r.get("down_s") is not None and r.get("transitions") is not None]
        if m is None or not rs:
            missing.append(node)
            continue
        nodes += 1
        meters.add(m["meter"])
        t = node_terms(m)
        terms.append((t, len(rs)))
        shared = _shared_domains(detail, node, m, len(rs))
        node_w += m["idle_w"] + t["busy_core"] * len(rs)
        for r in rs:
            dn, tn = float(r["down_s"]), float(r["transitions"])
            down += dn
            add_saving(saved, (dn, dn, dn), (tn, tn, tn), t, shared)
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
        add_saving(saved, (rd, rd, rd), (rt, rt, rt), mean, False)
    added = (min(crit)[1] if crit else 0.0, 0.0, added_hi)
    return _saving_result(saved, down, added, node_w, nodes, meters, missing, measured_j)


def _saving_result(saved: List[float], down: float, added: Triple, node_w: float, nodes: int,
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


def fmt_triple(t: List[float], unit: str, fmt: str = "{:.1f}") -> str:
    return f"{fmt.format(t[0])} {unit} ({fmt.format(t[1])} .. {fmt.format(t[2])})"


def text(p: Dict[str, Any], rows: Optional[List[Dict[str, Any]]] = None,
         best: Optional[Dict[str, Any]] = None) -> str:
    low = f"{p['low_khz'] / 1e6:.2f} GHz" if p.get("low_khz") else "?"
    out = [f"  what-if: threshold {duration_text(p['threshold_us'])}, low frequency {low} "
           f"(model: {', '.join(p['model'])})",
           f"    energy saved   {fmt_triple(p['saved_j'], 'J')}"
           + (f" = {p['saved_pct'][0]:.1f} % of the {p['measured_j']:.0f} J measured "
              f"({p['saved_pct'][1]:.1f} .. {p['saved_pct'][2]:.1f} %)"
              if p.get("saved_pct") else ""),
           f"    time added     {fmt_triple(p['time_added_s'], 's', '{:.3f}')}"
           + (f" = {p['time_added_pct'][0]:.2f} % (at most {p['time_added_pct'][2]:.2f} %)"
              if p["time_added_pct"][0] is not None else ""),
           f"    clocked down   {fmt_triple(p['clocked_down_s'], 's', '{:.3f}')}, "
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
           f"      core cap to {low:<18} saved {fmt_triple(c['saved_j'], 'J')}"]
    if e["predicted"]:
        knee = ",".join(f"{k / 1e6:.2f}" for k in e["knee_khz"])
        out.append(f"      efficient (knee {knee} GHz) {fmt_triple(e['saved_j'], 'J')} against "
                   f"the core cap, time added {e['time_added_s'][0]:+.3f} s")
        out.append(f"        ({e['note']})")
        if e.get("without_knee"):
            out.append(f"        note: no knee in the model of {','.join(e['without_knee'])}")
    else:
        out.append(f"      efficient: not predicted ({e['why']})")
    if u["predicted"]:
        out.append(f"      uncore past {duration_text(u['threshold_us']):<11} saved "
                   f"{fmt_triple(u['saved_j'], 'J')}, low "
                   f"{fmt_triple(u['low_s'], 's', '{:.3f}')} on {u['packages']} packages")
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
            out.append(f"    {duration_text(r['threshold_us']):>9}  {r['saved_j'][0]:>8.1f} "
                       f"({r['saved_j'][1]:>8.1f} .. {r['saved_j'][2]:>8.1f})  "
                       f"{'-' if ta is None else f'{ta:.2f}':>18}  {r['transitions']:>11}{mark}")
    out.append("    recommended threshold: " + (
        f"{duration_text(best['threshold_us'])} (saves most, within 2 %, with at most 1 % time added "
        "under the model)" if best else "none saves energy within 1 % time added under the model"))
    return "\n".join(out) + "\n"


def duration_text(us: float) -> str:
    if us >= 1000 and us % 1000 == 0:
        return f"{us / 1000:g}ms"
    return f"{us:g}us"


def svg_lines(p: Dict[str, Any], y: int, x: int = 10) -> List[str]:
    """Lines of text for the report's SVG (escaped by the caller's rules: only
    numbers and fixed words here)."""
    return [f'<text x="{x}" y="{y}">what-if at {duration_text(p["threshold_us"])}: saved '
            f'{p["saved_j"][0]:.1f} J ({p["saved_j"][1]:.1f} .. {p["saved_j"][2]:.1f}), '
            f'time added {p["time_added_s"][0]:.3f} s (at most {p["time_added_s"][2]:.3f})'
            '</text>']
