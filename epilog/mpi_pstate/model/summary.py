# SPDX-License-Identifier: BSD-3-Clause
"""Merging the node records of a job (format "mpi-pstate-job", the per-rank
detail kept beside the accounting record) and the accounting summary
written into the job's SystemComment ("mpi-pstate/2:" + compact JSON;
version 1 lived in AdminComment and is still read: normalize()), and its
reading back: read() checks it against SCHEMA before any reader uses it.

The summary's size does not depend on the number of ranks or nodes: every
list in it is cut to a fixed length and encode() enforces MAX_SUMMARY.
Pure: no Slurm, no file system."""
import json
import math
import re
from typing import Any, Callable, Dict, List, Optional, Tuple

from . import whatif
from ..core import audit, parse

JOB_FORMAT = "mpi-pstate-job"
JOB_VERSION = 1
SUMMARY_VERSION = 2
MARKER = "mpi-pstate/"
PREFIX = f"{MARKER}{SUMMARY_VERSION}:"
MAX_SUMMARY = 1024  # bytes of "mpi-pstate/2:{...}"
TOP_WAITERS = 3
MISSING_CHARS = 120
ADMIN_COMMENT_MAX = 60000  # slurmdbd keeps the comments in TEXT columns (64 KiB)
METERS = ("rapl", "hwmon", "simulated", "none")  # energy.meter of a node record


def _r(v: Optional[float], nd: int = 3) -> Optional[float]:
    return None if v is None else round(v, nd)


def _sum(xs: List[Optional[float]]) -> Optional[float]:
    v = [x for x in xs if x is not None]
    return sum(v) if v else None


def rank_label(r: Dict[str, Any], multi_step: bool) -> str:
    return f"{r['step']}.{r['rank']}" if multi_step else str(r["rank"])


def merge(job: int, expected: List[str], records: Dict[str, Dict[str, Any]],
          bad: Dict[str, str], job_state: Optional[str] = None,
          exit_code: Optional[str] = None, array: Optional[str] = None,
          elapsed_s: Optional[float] = None) -> Dict[str, Any]:
    """records: node -> validated node record; bad: node -> why its record
    was refused; elapsed_s: the job's wall time from sacct (Elapsed), when
    known.  Returns the job detail with its "summary"."""
    exp = list(dict.fromkeys(expected)) or sorted(records)
    missing = [n for n in exp if n not in records]
    extra = sorted(n for n in records if n not in exp)
    ranks: List[Dict[str, Any]] = []
    nodes: Dict[str, Any] = {}
    for n in exp + extra:
        rec = records.get(n)
        if rec is None:
            nodes[n] = {"status": "bad" if n in bad else "missing",
                        **({"why": bad[n]} if n in bad else {})}
            continue
        ranks.extend(rec["ranks"])
        nodes[n] = {k: rec[k] for k in ("status", "energy", "steps", "problems", "settings",
                                         "restore") if k in rec}
        nodes[n]["ranks"] = len(rec["ranks"])
    steps = sorted({r["step"] for r in ranks})
    multi = len(steps) > 1
    ranks.sort(key=lambda r: (not r["step"].isdigit(), int(r["step"]) if r["step"].isdigit()
                              else 0, r["step"], r["rank"], r["node"], r["local"]))
    with_data = [n for n in exp + extra if records.get(n, {}).get("status") == "ok"]
    rest = merge_rest([records[n]["rest"] for n in sorted(records) if records[n].get("rest")])
    if not with_data:
        state = "none" if not missing else "unknown"
    else:
        state = "partial" if missing or rest["why"] else "complete"
    detail: Dict[str, Any] = {
        "format": JOB_FORMAT, "version": JOB_VERSION, "job": job, "state": state,
        "job_state": job_state, "exit_code": exit_code, "array": array,
        "nodes_expected": parse.compress_hostlist(exp) if exp else "",
        "missing": missing, "nodes": nodes, "steps": steps, "ranks": ranks,
        "elapsed_s": elapsed_s,
    }
    if rest["why"]:
        detail["rest"] = rest
    detail["summary"] = summarize(detail, records)
    return detail


def merge_rest(rests: List[Dict[str, Any]]) -> Dict[str, Any]:
    """The nodes' aggregates (noderec "rest": what each counted past its
    detail bound) as one: sums added, step names united (a step on two
    nodes is one step), reasons once each."""
    out: Dict[str, Any] = {"rank_steps": 0, "ranks_max": 0, "transitions": 0,
                           "unread_steps": 0, "steps": set(), "why": [], "ids_cut": False,
                           "step_wall_s": 0.0}
    for k in _REST_SUMS:
        out[k] = 0.0
    for r in rests:
        for k in ("rank_steps", "transitions", "unread_steps") + _REST_SUMS:
            out[k] += r[k]
        out["ranks_max"] += r["ranks_max"]  # a step's ranks are spread over the nodes
        # steps of a node run one after the other; nodes side by side
        out["step_wall_s"] = max(out["step_wall_s"], r["step_wall_s"])
        out["steps"].update(str(n) for lo, hi in r["step_ids"] for n in range(lo, hi + 1))
        out["steps"].update(r["named_steps"])
        out["ids_cut"] = out["ids_cut"] or r["ids_cut"]
        out["why"] += [w for w in r["why"] if w not in out["why"]]
    out["steps"] = sorted(out["steps"], key=lambda x: (not x.isdigit(), int(x) if x.isdigit()
                                                       else 0, x))
    return out


_REST_SUMS = ("wall_s", "mpi_s", "paired_wall_s", "paired_mpi_s", "wait_s", "down_s")


def _share(part: Optional[float], whole: Optional[float]) -> Optional[float]:
    """part / whole clamped to [0, 1]: the parts come from the ranks'
    own slots, which can claim anything, and SystemComment must not."""
    if not whole or part is None:
        return None
    return min(1.0, max(0.0, part / whole))


def _step_of(r: Dict[str, Any]) -> str:
    return str(r["step"])


def imbalance(ranks: List[Dict[str, Any]]) -> Optional[float]:
    """Load imbalance in [0, 1]: per step, (max - mean) / max of the ranks'
    compute time (wall - MPI, never below 0); over several steps the mean
    weighted by each step's longest rank wall time.  0: every rank computes
    as long as the slowest; 1 - 1/N: one of N ranks does all the work.
    None without two figures to compare."""
    by_step: Dict[str, List[Tuple[float, float]]] = {}
    for r in ranks:
        w, m = r.get("wall_s"), r.get("mpi_s")
        if w and m is not None:
            by_step.setdefault(_step_of(r), []).append((w, max(0.0, w - m)))
    num = den = 0.0
    for pairs in by_step.values():
        comp = [c for _, c in pairs]
        hi = max(comp)
        if len(comp) < 2 or hi <= 0:
            continue
        weight = max(w for w, _ in pairs)
        num += weight * (hi - sum(comp) / len(comp)) / hi
        den += weight
    return min(1.0, max(0.0, num / den)) if den > 0 else None


def energy_meter(records: Dict[str, Dict[str, Any]]) -> str:
    """What the joules of a job are: "rapl" (the kernel's powercap), "hwmon"
    (hwmon energy counters or power meters, on nodes without RAPL),
    "simulated" (powercap served by something else, e.g. the test cluster's
    FUSE fake), "mixed", "none" (no figure) or "unknown" (records of an
    mpi-pstate that did not say)."""
    meters = {(records[n]["energy"].get("meter") or "unknown") for n in records
              if records[n]["status"] == "ok" and records[n]["energy"].get("joules") is not None}
    if not meters:
        return "none"
    return meters.pop() if len(meters) == 1 else "mixed"


def distinct_ranks(per_step: Dict[str, int], rest: Dict[str, Any]) -> int:
    """The most ranks one step had: its detailed ranks plus, for a step
    the nodes also summed (rest), the most ranks a summed step had on each
    node, added over the nodes (a step's ranks are spread over them)."""
    summed = set(rest["steps"])
    return max([per_step.get(st, 0) + (rest["ranks_max"] if st in summed else 0)
                for st in set(per_step) | summed], default=0)


def _plus(a: Optional[float], b: float) -> Optional[float]:
    return b if a is None and b else a if not b else (a or 0.0) + b


def summarize(detail: Dict[str, Any], records: Dict[str, Dict[str, Any]]) -> Dict[str, Any]:
    ranks = detail["ranks"]
    rest = detail.get("rest") or merge_rest([])
    all_steps = set(detail["steps"]) | set(rest["steps"])
    multi = len(all_steps) > 1
    wall = _plus(_sum([r.get("wall_s") for r in ranks]), rest["wall_s"])
    mpi = _plus(_sum([r.get("mpi_s") for r in ranks]), rest["mpi_s"])
    paired = [(r["wall_s"], r["mpi_s"]) for r in ranks
              if r.get("wall_s") and r.get("mpi_s") is not None]
    pw = sum(w for w, _ in paired) + rest["paired_wall_s"]
    pm = sum(m for _, m in paired) + rest["paired_mpi_s"]
    down = _plus(_sum([r.get("down_s") for r in ranks]), rest["down_s"])
    per_step: Dict[str, int] = {}
    step_wall: Dict[str, float] = {}
    for r in ranks:
        st = _step_of(r)
        per_step[st] = per_step.get(st, 0) + 1
        if r.get("wall_s") is not None:
            step_wall[st] = max(step_wall.get(st, 0.0), r["wall_s"])
    elapsed = detail.get("elapsed_s")
    steps_wall = sum(step_wall.values()) + rest["step_wall_s"]
    s: Dict[str, Any] = {
        "v": SUMMARY_VERSION, "state": detail["state"], "job_state": detail["job_state"],
        "nodes": len(detail["nodes"]) - len(detail["missing"]),
        # distinct ranks: the most ranks one step had (8 steps of 4 ranks: 4)
        "ranks": distinct_ranks(per_step, rest),
        "rank_steps": len(ranks) + rest["rank_steps"],
        "steps": len(all_steps),
        # sacct counts whole seconds: a job under a second has Elapsed 0,
        # and no job is shorter than its longest step
        "wall_s": _r(max(float(elapsed), max(step_wall.values(), default=0.0)))
        if elapsed is not None else _r(steps_wall) if steps_wall else None,
        "wall_src": "sacct" if elapsed is not None else "steps" if steps_wall else None,
        "step_wall_s": _r(max(step_wall.values(), default=None)),
        "mpi_s": _r(mpi), "mpi_share": _r(_share(pm, pw)),
        "wait_s": _r(_plus(_sum([r.get("wait_s") for r in ranks]), rest["wait_s"])),
        "down_s": _r(down),
        "down_share": _r(_share(down or 0.0, wall)),
        "transitions": sum(r.get("transitions") or 0 for r in ranks) + rest["transitions"],
        "imbalance": _r(imbalance(ranks)),
        # figures only the ranks know, from their own slots: the job's user
        # can write them (docs/records.md, "Who vouches for what")
        "user": "mpi,wait",
    }
    top = sorted((r for r in ranks if r.get("mpi_share") is not None),
                 key=lambda r: (-r["mpi_share"], r["rank"]))[:TOP_WAITERS]
    s["top_wait"] = [[rank_label(r, multi), r["node"][:32], r["mpi_share"]] for r in top]
    _energy_fields(s, detail, records)
    _settings_fields(s, records)
    _partial_fields(s, detail, rest)
    return {k: v for k, v in s.items() if v is not None}


def _energy_fields(s: Dict[str, Any], detail: Dict[str, Any],
                   records: Dict[str, Dict[str, Any]]) -> None:
    """The summary's energy: measured (whole, partial or why not) and, with
    the nodes' power models, saved."""
    energies = [records[n]["energy"] for n in records if records[n]["status"] == "ok"]
    joules = [e["joules"] for e in energies if e["status"] == "ok" and e["joules"] is not None]
    if energies and len(joules) == len(energies) and not detail["missing"]:
        s["energy_j"], s["energy"] = _r(sum(joules), 1), "ok"
    elif joules:
        s["energy_j"], s["energy"] = _r(sum(joules), 1), "partial"
    else:
        st = {e["status"] for e in energies}
        s["energy_j"], s["energy"] = None, (st.pop() if len(st) == 1 else "unknown")
    s["energy_src"] = energy_meter(records)
    # The energy saved, priced after the fact with the nodes' power models
    # (docs/evaluation.md, "After the fact"); est, low, high.
    try:
        sv = whatif.saving(detail, s["energy_j"] if s["energy"] == "ok" else None)
    except (ArithmeticError, KeyError, TypeError, ValueError):
        sv = None  # an estimate never costs the job its summary
    if sv:
        s["saved_j"], s["saved_src"] = sv["saved_j"], sv["meter"]
        s["time_added_s"] = sv["time_added_s"]
        if "full_clock_j" in sv:
            s["full_j"] = sv["full_clock_j"]


def _settings_fields(s: Dict[str, Any], records: Dict[str, Dict[str, Any]]) -> None:
    """The nodes' settings in brief, whether they agree, and how many warn."""
    briefs = [audit.brief(records[n]["settings"]) for n in sorted(records)
              if isinstance(records[n].get("settings"), dict)]
    if briefs:
        distinct = {json.dumps(b, sort_keys=True) for b in
                    ({k: v for k, v in b.items() if k != "warnings"} for b in briefs)}
        s["settings"] = {k: v for k, v in briefs[0].items() if k != "warnings"}
        s["settings"]["same"] = len(distinct) == 1
        s["warn_nodes"] = sum(1 for b in briefs if b.get("warnings"))


def _partial_fields(s: Dict[str, Any], detail: Dict[str, Any], rest: Dict[str, Any]) -> None:
    """What the summary lacks (missing and refused nodes, why it is
    partial), and the array task it is of."""
    if detail["missing"]:
        text = parse.compress_hostlist(detail["missing"])
        s["missing"] = text if len(text) <= MISSING_CHARS else \
            text[:MISSING_CHARS - 3] + "..."
        s["missing_n"] = len(detail["missing"])
    bad = [n for n, v in detail["nodes"].items() if v.get("status") == "bad"]
    if bad:
        s["bad_n"] = len(bad)
    if detail.get("array"):
        s["array"] = detail["array"][:24]
    unread = [w for w in rest["why"] if "not read" in w]
    why = (["nodes missing"] if detail["missing"] else []) + \
        (["steps summed past the detail bound"] if rest["rank_steps"] or
         len(unread) < len(rest["why"]) else []) + \
        ([f"slots not read: {'CPU' if any('CPU' in w for w in unread) else 'slot'} bound"]
         if unread else [])
    if why and detail["state"] == "partial":
        s["why"] = "; ".join(why)


# Dropped first when a summary would exceed MAX_SUMMARY (never seen with
# 64-char names; the bound holds whatever the input).
_OPTIONAL = ("settings", "top_wait", "missing", "array", "imbalance", "warn_nodes",
             "step_wall_s", "wall_src", "full_j", "time_added_s")


def encode(summary: Dict[str, Any]) -> str:
    s = dict(summary)
    text = PREFIX + json.dumps(s, separators=(",", ":"))
    for k in _OPTIONAL:
        if len(text.encode()) <= MAX_SUMMARY:
            break
        s.pop(k, None)
        s["cut"] = True
        text = PREFIX + json.dumps(s, separators=(",", ":"))
    if len(text.encode()) > MAX_SUMMARY:
        text = PREFIX + json.dumps({"v": SUMMARY_VERSION, "state": s.get("state"), "cut": True},
                                   separators=(",", ":"))
    return text


_MARK_RE = re.compile(re.escape(MARKER) + r"([0-9]{1,3}):")


def find(text: str) -> Tuple[Optional[Dict[str, Any]], Optional[Tuple[int, int]]]:
    """Our summary ("mpi-pstate/<v>:{json}") inside a SystemComment and its
    span, or (None, None).
    Only the first mpi-pstate summary counts; other text is not ours."""
    for m in _MARK_RE.finditer(text or ""):
        try:
            obj, end = json.JSONDecoder().raw_decode(text, m.end())
        except ValueError:
            continue
        if isinstance(obj, dict) and obj.get("v") == int(m.group(1)):
            return obj, (m.start(), end)
    return None, None


def _is_num(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def normalize(obj: Dict[str, Any]) -> Optional[Dict[str, Any]]:
    """A summary of any known version in the current version's terms, or
    None for a version this mpi-pstate does not know (written by a newer
    one).  Version 1 counted rank-steps as "ranks", had the longest rank's
    wall time as "wall_s" and imbalance = max/mean - 1 of all ranks
    together; converted here ("converted_from": 1), what cannot be known
    is left out."""
    v = obj.get("v")
    if v == SUMMARY_VERSION:
        return dict(obj)
    if v != 1:
        return None
    s = {k: x for k, x in obj.items() if k not in ("ranks", "wall_s", "imbalance")}
    s["v"], s["converted_from"] = SUMMARY_VERSION, 1
    rs = obj.get("ranks")
    if isinstance(rs, int) and not isinstance(rs, bool):
        s["rank_steps"] = rs
        if obj.get("steps") == 1:
            s["ranks"] = rs
    if _is_num(obj.get("wall_s")):
        s["step_wall_s"] = obj["wall_s"]
    im = obj.get("imbalance")
    if _is_num(im) and im >= 0:
        s["imbalance"] = round(im / (1 + im), 3)  # (max-mean)/max of the same figures
    s.setdefault("energy_src", "unknown")
    return s


# ---- a summary read back: its schema ----------------------------------------
#
# What summarize(), encode() and normalize() write, key by key.  A summary
# read back (a SystemComment, an AdminComment of version 1, a job.json) is
# checked against it once, by read(), before any reader uses it: report's
# text, JSON, list mode, pages and totals then take its types as given.
# The comment is a text column an admin (or any tool with the rights) can
# edit, so a wrong type is a named problem, never a traceback; a key the
# schema does not know is left alone (a newer minor release's).

Check = Callable[[Any, str], Optional[str]]


def _what(v: Any) -> str:
    """A JSON value's type in words."""
    if v is None:
        return "null"
    if isinstance(v, bool):
        return "a boolean"
    if isinstance(v, int):
        return "an integer"
    if isinstance(v, float):
        return "a number"
    if isinstance(v, str):
        return "a string"
    if isinstance(v, list):
        return "a list"
    if isinstance(v, dict):
        return "an object"
    return type(v).__name__


def _number(lo: Optional[float] = None, hi: Optional[float] = None,
            integer: bool = False) -> Check:
    """A finite number (an integer with integer), not a boolean, in
    [lo, hi] where given."""
    want = "an integer" if integer else "a number"
    if lo is not None and hi is not None:
        want += f" from {lo:g} to {hi:g}"
    elif lo is not None:
        want += f" >= {lo:g}"

    def check(v: Any, path: str) -> Optional[str]:
        if isinstance(v, bool) or not isinstance(v, (int, float)):
            return f"{path} is {_what(v)}, expected {want}"
        if isinstance(v, float) and not math.isfinite(v):
            return f"{path} is not a finite number, expected {want}"
        if (integer and not isinstance(v, int)) or (lo is not None and v < lo) or \
                (hi is not None and v > hi):
            return f"{path} is {json.dumps(v)[:24]}, expected {want}"
        return None
    return check


def _text(v: Any, path: str) -> Optional[str]:
    return None if isinstance(v, str) else f"{path} is {_what(v)}, expected a string"


def _flag(v: Any, path: str) -> Optional[str]:
    return None if isinstance(v, bool) else f"{path} is {_what(v)}, expected true or false"


def _items(*checks: Check) -> Check:
    """A list of len(checks) items, each item its check's."""
    def check(v: Any, path: str) -> Optional[str]:
        if not isinstance(v, list):
            return f"{path} is {_what(v)}, expected a list of {len(checks)}"
        if len(v) != len(checks):
            return f"{path} has {len(v)} items, expected {len(checks)}"
        for i, (x, c) in enumerate(zip(v, checks)):
            why = c(x, f"{path}[{i}]")
            if why:
                return why
        return None
    return check


def _list_of(item: Check) -> Check:
    def check(v: Any, path: str) -> Optional[str]:
        if not isinstance(v, list):
            return f"{path} is {_what(v)}, expected a list"
        for i, x in enumerate(v):
            why = item(x, f"{path}[{i}]")
            if why:
                return why
        return None
    return check


def _object(keys: Dict[str, Check], required: Tuple[str, ...] = ()) -> Check:
    """An object whose known keys have their types, or are null (unknown,
    as when absent: readers show "-"); other keys are not looked at; the
    required ones must be there, not null."""
    def check(v: Any, path: str) -> Optional[str]:
        if not isinstance(v, dict):
            return f"{path} is {_what(v)}, expected an object"
        for k, c in keys.items():
            where = f"{path}.{k}" if path else k
            if k in required and v.get(k) is None:
                return f"{where} is {'null' if k in v else 'missing'}"
            if v.get(k) is not None:
                why = c(v[k], where)
                if why:
                    return why
        return None
    return check


_COUNT = _number(0, integer=True)
_SECONDS = _number(0)
_SHARE = _number(0, 1)
_TRIPLE = _items(_number(), _number(), _number())

SCHEMA: Dict[str, Check] = {
    "v": _COUNT, "state": _text, "job_state": _text, "nodes": _COUNT, "ranks": _COUNT,
    "rank_steps": _COUNT, "steps": _COUNT, "wall_s": _SECONDS, "wall_src": _text,
    "step_wall_s": _SECONDS, "mpi_s": _SECONDS, "mpi_share": _SHARE, "wait_s": _SECONDS,
    "down_s": _SECONDS, "down_share": _SHARE, "transitions": _COUNT, "imbalance": _SHARE,
    "user": _text, "top_wait": _list_of(_items(_text, _text, _SHARE)),
    "energy_j": _number(0), "energy": _text, "energy_src": _text,
    "saved_j": _TRIPLE, "saved_src": _text, "full_j": _TRIPLE,
    "time_added_s": _items(_SECONDS, _SECONDS, _SECONDS),
    # audit.brief() without "warnings", and whether every node agreed
    "settings": _object({"driver": _text, "governor": _text, "boost": _flag,
                         "cstate_max_us": _COUNT, "smt": _COUNT, "numa": _COUNT,
                         "same": _flag}),
    "warn_nodes": _COUNT, "missing": _text, "missing_n": _COUNT, "bad_n": _COUNT,
    "array": _text, "why": _text, "cut": _flag, "converted_from": _COUNT,
}
REQUIRED = ("v", "state")
_CHECK = _object(SCHEMA, REQUIRED)


def problem(s: Any) -> Optional[str]:
    """Why s is not a summary as this release writes it, in one line that
    names the key ("summary: wait_s is a string, expected a number"), or
    None."""
    if not isinstance(s, dict):
        return f"summary is {_what(s)}, expected an object"
    why = _CHECK(s, "")
    return f"summary: {why}" if why else None


def read(obj: Any) -> Tuple[Optional[Dict[str, Any]], Optional[str]]:
    """A summary found in a comment (find()) or a job.json, for a reader:
    (the summary in the current version's terms, None) when it is one;
    (None, None) for a version this release does not know (normalize());
    (None, the problem) for one whose keys do not have their types."""
    if not isinstance(obj, dict) or isinstance(obj.get("v"), bool):
        return None, problem(obj)
    s = normalize(obj)
    if s is None:
        return None, None
    why = problem(s)
    return (None, why) if why else (s, None)


def combine(existing: str, ours: str) -> Optional[str]:
    """existing SystemComment (or AdminComment) with our summary put in (replacing an earlier
    one of ours, keeping everything else), or None when the result would not
    fit the column."""
    existing = existing or ""
    _, span = find(existing)
    if span:
        a, b = span
        rest = (existing[:a].rstrip() + " " + existing[b:].lstrip()).strip()
    else:
        rest = existing.strip()
    out = f"{rest} {ours}" if rest else ours
    return out if len(out.encode()) <= ADMIN_COMMENT_MAX else None


def line(summary: Dict[str, Any]) -> str:
    """One human line of a summary (report, logs)."""
    parts = [f"state={summary.get('state')}"]
    for k, fmt in (("job_state", "{}"), ("nodes", "{}"), ("ranks", "{}"), ("rank_steps", "{}"),
                   ("mpi_share", "{:.1%}"), ("down_share", "{:.1%}"),
                   ("transitions", "{}"), ("energy_j", "{:.1f}J"), ("energy_src", "{}")):
        v = summary.get(k)
        if v is not None:
            try:
                parts.append(f"{k}=" + fmt.format(v))
            except (ValueError, TypeError):
                parts.append(f"{k}={v}")
    if summary.get("missing"):
        parts.append(f"missing={summary['missing']}")
    return " ".join(parts)
