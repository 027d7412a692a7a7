# SPDX-License-Identifier: BSD-3-Clause
"""The terms a what-if prediction (model/whatif.py) is built from, each a
bounded triple (est, lo, hi): a rank's clocked-down time from the
histogram of its MPI calls, the agent's reaction, CPU cost, ceiling and
announcements, a node's power terms from its model, and what a job's
prediction adds up over its nodes and ranks.  Pure: no Slurm, no file
system."""
import math
from typing import Any, Dict, List, NamedTuple, Optional, Set, Tuple

from .powermodel import high_khz, low_khz, ModelError, power_at, validate_model
from ..agent_args import agent_default
from ..core import parse

BUCKETS = 64
POWER_SIGMAS = 2.0  # lo/hi of a power difference: +-2 standard errors
# How much costlier than measured the agent's wake-ups and pairs may be in
# the run predicted (the low bound): its CPU per timer wake-up varied by
# half between runs on the lab's VM (12.7 to 18.9 us over 14 profile runs).
COST_SPREAD = 1.5
SCAN_US = (50.0, 100000.0)  # the agent's scan interval: the threshold, kept in here
CAP_PPM_DEFAULT = parse.percent_ppm(agent_default("cpu-cap") or "")
Triple = tuple  # (est, lo, hi)


class Bounds(NamedTuple):
    """A figure and its bounds: the estimate, the lowest and the highest
    value the inputs allow."""
    est: float
    low: float
    high: float


def plus(a: Bounds, b: Bounds) -> Bounds:
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
    e = energy(Bounds(*dn), Bounds(*tn), t, shared)
    for i in range(3):
        saved[i] += e[i]


def energy(dn: Bounds, tn: Bounds, t: Dict[str, Any], shared: bool) -> Bounds:
    """The energy dn clocked-down seconds and tn transitions save on a node
    of terms t.  The low bound takes the most transitions at their dearest,
    the high bound the fewest: a transition costs (or, negative, saves)."""
    dps, e_tr = Bounds(*t["dps"]), t["e_tr"]
    return Bounds(dn.est * dps.est - tn.est * e_tr,
                  (0.0 if shared else dn.low * dps.low) - tn.high * abs(e_tr),
                  dn.high * dps.high - tn.low * min(e_tr, 0.0))


def shared_domains(detail: Dict[str, Any], node: str, m: Dict[str, Any], nranks: int) -> bool:
    dom = max(m["domain_cpus"], _domain_cpus(
        ((detail.get("nodes") or {}).get(node) or {}).get("settings")))
    return dom > 1 and nranks > 1


# (node, model, terms, ranks, their rank_what_if, shared domain)
NodeRow = Tuple[str, Dict[str, Any], Dict[str, Any], List[Dict[str, Any]],
                 List[Optional[Dict[str, Any]]], bool]


class JobSum:
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
        self.nodes: List[NodeRow] = []
