# SPDX-License-Identifier: BSD-3-Clause
"""The node record: what the node Epilog publishes for one job on one node
(docs/records.md, format "mpi-pstate-node", version 1), and its strict
validation on the reading side.  Pure: no Slurm, no file system."""
import json
import math
import os
import re
from typing import Any, Dict, List, Optional, Tuple

from . import layout

FORMAT = "mpi-pstate-node"
VERSION = 1
# Bounds of one node record (docs/security.md, "Epilog side"): build()
# applies them, validate() refuses more.  16384 ranks (slots.MAX_NODE_RANKS)
# of about 450 bytes, 4 MiB of embedded step records and the rest fit.
MAX_BYTES = 16 << 20
MAX_RANKS = 16384
MAX_EMBED_BYTES = 4 << 20  # agent.json + plugin.json of all steps together
MAX_PROBLEMS = 32
MAX_TEXT = 200
STATUSES = ("ok", "none")
ENERGY_STATUSES = ("ok", "partial", "absent", "no_access", "unknown", "error")
METERS = ("rapl", "hwmon", "simulated", "none")
RANK_STATES = ("finalized", "aborted", "exited", "killed", "disabled", "free")

# field -> allowed JSON types (None = null allowed)
_NUM = (int, float, type(None))
_INT = (int, type(None))
# Counters may be None: a value out of range in the user's slot is dropped
# (named in "dropped"), never the rank (slots.rank_figures).
RANK_FIELDS: Dict[str, Tuple[type, ...]] = {
    "step": (str,), "rank": (int,), "size": (int,), "local": (int,), "cpu": (int,),
    "state": (str,), "mode": (str,), "abi": (str,), "threshold_us": _INT,
    "wall_s": _NUM, "mpi_s": _NUM, "mpi_share": _NUM, "wait_s": _NUM, "long_calls": _INT,
    "over_s": _NUM, "down_s": _NUM, "transitions": _INT, "calls": _INT, "bytes": _INT,
    "wakeups": _INT, "top": (list,), "note": (str,), "dropped": (list,), "hist_ns": (list,),
    "announced": _INT, "mispredicted": _INT, "wait_mode": (str,), "wait_cpu_share": _NUM,
}
RANK_REQUIRED = ("step", "rank", "local", "state", "wall_s", "mpi_s", "down_s", "transitions")
# A bad value of these voids the rank (it cannot be placed); any other bad
# field is set to None and named in the rank's "dropped".
RANK_KEYS = ("step", "rank", "local", "state")


def clip(text: Any, n: int = MAX_TEXT) -> str:
    s = str(text)
    s = "".join(c if c.isprintable() else "?" for c in s)
    return s if len(s) <= n else s[: n - 3] + "..."


# Past the detail bound (MAX_DETAIL_STEPS steps, MAX_RANKS ranks, MAX_BYTES)
# a node record still counts everything: "rest" sums what is not detailed
# (docs/records.md, "Aggregate").  Step names of the rest are kept as ranges
# (a sweep's steps are consecutive), at most MAX_REST_RANGES.
MAX_DETAIL_STEPS = 256
MAX_REST_RANGES = 1024
REST_SUMS = ("wall_s", "mpi_s", "paired_wall_s", "paired_mpi_s", "wait_s", "down_s")
REST_COUNTS = ("steps", "rank_steps", "ranks_max", "transitions", "unread_steps", "sums_steps")
_BULKY = ("hist_ns", "top")  # dropped first, in this order, when a record is too large


def new_rest() -> Dict[str, Any]:
    rest: Dict[str, Any] = {k: 0 for k in REST_COUNTS}
    rest.update({k: 0.0 for k in REST_SUMS})
    rest.update(step_wall_s=0.0, step_ids=[], named_steps=[], why=[])
    return rest


def _add_step_id(rest: Dict[str, Any], step: str) -> None:
    if not step.isdigit():
        if step not in rest["named_steps"]:
            rest["named_steps"].append(step)
        return
    n, ids = int(step), rest["step_ids"]
    if ids and ids[-1][1] + 1 == n:
        ids[-1][1] = n
    elif not any(lo <= n <= hi for lo, hi in ids):
        if len(ids) >= MAX_REST_RANGES:
            rest["ids_cut"] = True
        else:
            ids.append([n, n])


def rest_add(rest: Dict[str, Any], step: str, ranks: List[Dict[str, Any]], why: str,
             unread: bool = False) -> None:
    """Counts one step's rank entries into the aggregate, and the reason
    once; unread: a step that had ranks whose slots were not read (the
    node's slot bound): counted as a step, its figures unknown."""
    if unread:
        _why(rest, why)
        rest["unread_steps"] += 1
        _add_step_id(rest, step)
        return
    sums: Dict[str, Any] = {k: 0.0 for k in SUMS_FIGURES}
    sums.update(ranks=len(ranks), transitions=0)
    for r in ranks:
        for k in ("wall_s", "mpi_s", "wait_s", "down_s"):
            if r.get(k) is not None:
                sums[k] += r[k]
        sums["transitions"] += r.get("transitions") or 0
        if r.get("wall_s") and r.get("mpi_s") is not None:
            sums["paired_wall_s"] += r["wall_s"]
            sums["paired_mpi_s"] += r["mpi_s"]
        if r.get("wall_s") is not None:
            sums["step_wall_s"] = max(sums["step_wall_s"], r["wall_s"])
    rest_add_sums(rest, step, sums, why)


def _why(rest: Dict[str, Any], why: str) -> None:
    if why not in rest["why"] and len(rest["why"]) < 8:
        rest["why"].append(why)


def rest_add_sums(rest: Dict[str, Any], step: str, sums: Dict[str, Any], why: str) -> None:
    """Counts one step's totals into the aggregate: rest_add()'s own, or
    the agent's sums.json of the step (steprecords.parse_sums()), which it made from
    the same slots as the step ended: a step past the detail bound costs
    one small file, not its segment."""
    _why(rest, why)
    if not sums["ranks"]:
        return
    rest["steps"] += 1
    _add_step_id(rest, step)
    rest["rank_steps"] += sums["ranks"]
    rest["step_wall_s"] += sums["step_wall_s"]
    # the most ranks one step had here (not the slots' "size": the user's)
    rest["ranks_max"] = max(rest["ranks_max"], sums["ranks"])
    rest["transitions"] += sums["transitions"]
    for k in REST_SUMS:
        rest[k] += sums[k]


SUMS_FIGURES = REST_SUMS + ("step_wall_s",)


def _rest_out(rest: Dict[str, Any]) -> Dict[str, Any]:
    out = dict(rest)
    for k in REST_SUMS + ("step_wall_s",):
        out[k] = round(out[k], 6)
    out["why"] = [clip(w) for w in out["why"][:8]]
    return out


def _step_entry(by_step: Dict[str, Dict[str, Any]], step: str,
                segment: Optional[str]) -> Dict[str, Any]:
    return by_step.setdefault(step, {"step": step, "segment": segment, "slots": 0, "ranks": 0,
                                     "agent": None, "plugin": None})


def _step_ranks(steps: List[Dict[str, Any]], rest: Dict[str, Any], problems: List[str]
                ) -> Tuple[Dict[str, Dict[str, Any]], List[Dict[str, Any]]]:
    """(entry per step, every rank kept): ranks past the node's MAX_RANKS
    are counted in rest, not detailed."""
    by_step: Dict[str, Dict[str, Any]] = {}
    ranks: List[Dict[str, Any]] = []
    for st in steps:
        keep = st["ranks"][:max(0, MAX_RANKS - len(ranks))]
        if len(keep) < len(st["ranks"]):
            problems.append(f"step {st['step']}: {len(st['ranks']) - len(keep)} ranks over the "
                            f"node's {MAX_RANKS} dropped")
            rest_add(rest, st["step"], st["ranks"][len(keep):],
                     f"ranks over the node's {MAX_RANKS}")
        e = _step_entry(by_step, st["step"], st["segment"])
        e["slots"] += st["slots"]
        e["ranks"] += len(keep)
        ranks.extend(keep)
    return by_step, ranks


def _step_records(infos: List[Dict[str, Any]], by_step: Dict[str, Dict[str, Any]],
                  agents: List[Dict[str, Any]], problems: List[str]) -> None:
    """Embeds the agent and plugin records of the first MAX_DETAIL_STEPS
    steps (MAX_EMBED_BYTES in all) and adds every step's agent record to
    agents, whose energy counts whether embedded or not."""
    embed = [MAX_EMBED_BYTES]
    for i in infos[:MAX_DETAIL_STEPS]:
        e = _step_entry(by_step, str(i["step"]), None)
        if i.get("agent"):
            e["agent"] = _within(i["agent"]["record"], embed)
            agents.append(i["agent"])
        if i.get("plugin"):
            e["plugin"] = _within(i["plugin"], embed)
    for i in infos[MAX_DETAIL_STEPS:]:
        if i.get("agent"):
            agents.append(i["agent"])
    if embed[0] < 0:
        problems.append(f"step records over {MAX_EMBED_BYTES} bytes in all: the rest "
                        "truncated")


def _bound(rec: Dict[str, Any], rest: Dict[str, Any], problems: List[str],
           max_bytes: int) -> None:
    """Fits rec within max_bytes and adds the rest and the problems (at most
    MAX_PROBLEMS, then a count)."""
    _fit(rec, rest, problems, max_bytes)
    if rest["why"]:
        rec["rest"] = _rest_out(rest)
    rec["problems"] = [clip(p) for p in problems[:MAX_PROBLEMS]]
    if len(problems) > MAX_PROBLEMS:
        rec["problems"].append(f"... {len(problems) - MAX_PROBLEMS} more")


def build(job: int, node: str, uid: int, *, settings: Optional[Dict[str, Any]],
          steps: List[Dict[str, Any]], infos: List[Dict[str, Any]],
          restore: Dict[str, Any], problems: List[str], written: float,
          extra_job: Optional[Dict[str, Any]] = None, meter: str = "rapl",
          rest: Optional[Dict[str, Any]] = None,
          rest_agents: Optional[List[Dict[str, Any]]] = None,
          max_bytes: int = MAX_BYTES) -> Dict[str, Any]:
    """steps: from rankfigures.job_segments(); infos: per step {"step",
    "agent" (steprecords.parse_agent() or None), "plugin"
    (steprecords.parse_plugin() or None)}; meter: what serves this node's
    powercap (steprecords.rapl_meter()), the label of its joules;
    rest: new_rest() with what is counted but not detailed, rest_agents:
    the agent records of its steps (their energy counts).  The encoded
    record is at most max_bytes: histograms go first, then top lists,
    then embedded step records, then rank entries (into rest)."""
    problems = list(problems)
    rest = rest if rest is not None else new_rest()
    by_step, ranks = _step_ranks(steps, rest, problems)
    agents = list(rest_agents or [])
    _step_records(infos, by_step, agents, problems)
    has_data = bool(ranks) or bool(infos) or bool(rest["steps"]) or bool(agents)
    rec: Dict[str, Any] = {
        "format": FORMAT, "version": VERSION, "job": job, "node": node, "uid": uid,
        "written": round(written, 3), "status": "ok" if has_data else "none",
        "restore": restore, "energy": energy_of(agents, settings, meter),
        "steps": sorted(by_step.values(), key=_step_key)[:MAX_DETAIL_STEPS], "ranks": ranks,
        "problems": [],
    }
    if extra_job:
        rec["job_info"] = extra_job
    if has_data:
        rec["settings"] = settings
    _bound(rec, rest, problems, max_bytes)
    return rec


def _size(obj: Any) -> int:
    return len(json.dumps(obj, separators=(",", ":")))


class EncodedRank:
    """A rank entry kept as JSON text, its bulky parts apart (the node
    Epilog holds up to MAX_RANKS of them: as dicts, 16384 maximal ones
    took 246 MiB).  Reads like the entry for what rest_add() needs."""
    __slots__ = ("step", "base", "bulky", "sums")

    def __init__(self, r: Dict[str, Any]) -> None:
        self.step = r["step"]
        self.bulky = {k: json.dumps(r[k], separators=(",", ":")) for k in _BULKY if k in r}
        self.base = json.dumps({k: v for k, v in r.items() if k not in _BULKY},
                               separators=(",", ":"))[:-1]
        self.sums = {k: r.get(k) for k in _SUMS}

    def get(self, k: str, default: Any = None) -> Any:
        return self.step if k == "step" else self.sums.get(k, default)

    def __getitem__(self, k: str) -> Any:
        return self.step if k == "step" else self.sums[k]

    def text(self) -> str:
        return self.base + "".join(f',"{k}":{v}' for k, v in self.bulky.items()) + "}"


_SUMS = ("wall_s", "mpi_s", "wait_s", "down_s", "transitions")


def rank_sums(r: Dict[str, Any]) -> Dict[str, Any]:
    """What rest_add() needs of a rank entry (a step that is summed only)."""
    out = {k: r.get(k) for k in _SUMS}
    out["step"] = r["step"]
    return out


def _rank_size(r: Any) -> int:
    return len(r.text()) if isinstance(r, EncodedRank) else _size(r)


def _rank_drop(r: Any, key: str) -> int:
    """Leaves key out of a rank entry; returns the bytes that saves."""
    if isinstance(r, EncodedRank):
        v = r.bulky.pop(key, None)
    else:
        v = r.pop(key, None)
        v = None if v is None else json.dumps(v, separators=(",", ":"))
    return 0 if v is None else len(v) + len(key) + 4


def _fit(rec: Dict[str, Any], rest: Dict[str, Any], problems: List[str], limit: int) -> None:
    """Cuts rec to at most `limit` encoded bytes, the bulky parts first,
    each cut named in problems; rank entries cut are counted in rest.
    The reserve covers what is added after (rest, problems: bounded)."""
    budget = limit - 64 * 1024
    size = len(encode(rec))
    for key in _BULKY:
        if size <= budget:
            return
        size -= sum(_rank_drop(r, key) for r in rec["ranks"])
        problems.append(f"record over {limit} bytes: every rank's {key} left out")
    if size > budget:
        for e in rec["steps"]:
            for k in ("agent", "plugin"):
                if e.get(k) is not None:
                    n = _size(e[k])
                    e[k] = {"truncated": {"bytes": n}}
                    size -= n
        problems.append(f"record over {limit} bytes: embedded step records left out")
    if size > budget:
        keep, used = 0, size - sum(_rank_size(r) + 1 for r in rec["ranks"])
        for r in rec["ranks"]:
            used += _rank_size(r) + 1
            if used > budget:
                break
            keep += 1
        cut = rec["ranks"][keep:]
        del rec["ranks"][keep:]
        by_step: Dict[str, List[Any]] = {}
        for r in cut:
            by_step.setdefault(r["step"], []).append(r)
        for step, rs in by_step.items():
            rest_add(rest, step, rs, f"record over {limit} bytes")
        for e in rec["steps"]:
            e["ranks"] -= len(by_step.get(e["step"], []))
        problems.append(f"record over {limit} bytes: {len(cut)} rank entries counted in rest "
                        "only")


def _within(obj: Dict[str, Any], budget: List[int]) -> Dict[str, Any]:
    """obj, or its size only once the node's budget of embedded bytes is
    spent (budget[0] goes below 0 then)."""
    n = len(json.dumps(obj, separators=(",", ":")))
    budget[0] -= n
    return obj if budget[0] >= 0 else {"truncated": {"bytes": n}}


def _step_key(s: Dict[str, Any]) -> Tuple[int, int, str]:
    st = s["step"]
    return (0, int(st), "") if st.isdigit() else (1, 0, st)


def energy_of(agents: List[Dict[str, Any]], settings: Optional[Dict[str, Any]],
              meter: str = "rapl") -> Dict[str, Any]:
    """Node energy of the job: the sum of the agents' per-step figures.  No
    number is ever made up: without an agent figure the status says why.
    "meter" labels the joules: "rapl", "hwmon" (the agents measured with
    hwmon: no RAPL on the node) or "simulated" (absent without any)."""
    figures = [a.get("energy") for a in agents]
    known = [f for f in figures if isinstance(f, dict) and f.get("status") == "ok"
             and isinstance(f.get("joules"), (int, float)) and math.isfinite(f["joules"])
             and f["joules"] >= 0]
    if known and meter == "rapl" and all(f.get("meter") == "hwmon" for f in known):
        meter = "hwmon"  # the kernel's sysfs, but hwmon's counters or meters, not RAPL
    if agents and len(known) == len(agents):
        return {"status": "ok", "joules": round(sum(f["joules"] for f in known), 3),
                "source": "agent", "meter": meter}
    if known:
        return {"status": "partial", "joules": round(sum(f["joules"] for f in known), 3),
                "source": "agent", "steps_without": len(agents) - len(known), "meter": meter}
    rapl = (settings or {}).get("rapl", {}) if isinstance(settings, dict) else {}
    why = [f.get("status") for f in figures if isinstance(f, dict) and f.get("status")]
    status = why[0] if why and why[0] in ENERGY_STATUSES else \
        (rapl.get("status") if rapl.get("status") in ("absent", "no_access") else "unknown")
    return {"status": status, "joules": None, "source": "agent" if agents else None}


# ---- validation (reading side: the controller, report, backfill)

def _check(cond: bool, why: str) -> None:
    if not cond:
        raise ValueError(why)


def _finite(v: Any) -> bool:
    return not isinstance(v, float) or math.isfinite(v)


_TYPES = {k: frozenset(t) for k, t in RANK_FIELDS.items()}  # exact: bool is not an int here
_STEP_OK = layout.STEP_NAME_RE.fullmatch
_FN_OK = re.compile(r"[A-Za-z][A-Za-z0-9_]{0,31}").fullmatch
_LIMIT = 1e19


def validate_rank(r: Any) -> Dict[str, Any]:
    """One rank entry: known keys only, exact JSON types, finite numbers
    below 1e19, short strings.  A bad value of a key field (RANK_KEYS)
    raises ValueError; any other bad field is None, named in "dropped".
    Written for speed: 12800 ranks of a 100-node job are validated inside
    the EpilogSlurmctld's budget."""
    _check(type(r) is dict, "rank entry is not an object")
    out: Dict[str, Any] = {}
    dropped: List[str] = []
    for k, v in r.items():
        allowed = _TYPES.get(k)
        if allowed is None or k == "dropped":
            continue
        t = type(v)
        ok = t in allowed
        if ok and (t is float or t is int):
            ok = -_LIMIT < v < _LIMIT  # NaN fails this too
        elif ok and t is str:
            ok = len(v) <= MAX_TEXT
        if ok:
            out[k] = v
        elif k in RANK_KEYS:
            raise ValueError(f"rank field {k} is bad")
        else:
            dropped.append(k)
            out[k] = None
    for k in RANK_KEYS:
        _check(k in out, f"rank field {k} missing")
    if out.get("mpi_share") is not None:  # a share is in [0, 1] whoever wrote the record
        out["mpi_share"] = min(1.0, max(0.0, out["mpi_share"]))
    for k in RANK_REQUIRED:
        out.setdefault(k, None)
    _check(_STEP_OK(out["step"]) is not None, "bad step")
    _check(out["state"] in RANK_STATES, "bad rank state")
    top = out.get("top") or []
    out["top"] = [t for t in top[:8] if type(t) is list and len(t) == 3 and type(t[0]) is str
                  and _FN_OK(t[0]) is not None and type(t[1]) in (int, float, type(None))
                  and type(t[2]) is int]
    if len(out["top"]) < len(top[:8]):
        dropped.append("top")
    if "hist_ns" in out:  # [bucket, calls] pairs, bucket 0..63 (common/slot.h)
        h = out["hist_ns"]
        if not (len(h) <= 64 and all(
                type(e) is list and len(e) == 2 and type(e[0]) is int and 0 <= e[0] < 64 and
                type(e[1]) is int and 0 <= e[1] < _LIMIT for e in h)):
            del out["hist_ns"]
            dropped.append("hist_ns")
    old = r.get("dropped")
    if type(old) is list:
        dropped = [d for d in old[:32] if type(d) is str and len(d) <= 32] + dropped
    if dropped:
        out["dropped"] = dropped
    return out


def validate(rec: Any, job: int, node: str) -> Dict[str, Any]:
    """A node record as read from the collection directory: exact format,
    version, job and node; every rank entry type-checked.  Returns the record
    with only known keys; ValueError says what is wrong."""
    _check(isinstance(rec, dict), "not a JSON object")
    _check(rec.get("format") == FORMAT, "not a node record")
    _check(rec.get("version") == VERSION, f"version {rec.get('version')!r} not supported")
    _check(rec.get("job") == job, f"record of job {rec.get('job')!r}, expected {job}")
    _check(rec.get("node") == node, f"record of node {rec.get('node')!r}, expected {node}")
    _check(rec.get("status") in STATUSES, "bad status")
    ranks = rec.get("ranks", [])
    _check(isinstance(ranks, list) and len(ranks) <= MAX_RANKS, "bad rank list")
    good, refused = [], []
    for i, r in enumerate(ranks):
        try:
            good.append(validate_rank(r))
        except ValueError as e:  # that rank only, never the node's record
            refused.append(f"rank entry {i}: {e}")
    out = {k: rec[k] for k in ("format", "version", "job", "node", "status")}
    out["uid"] = rec.get("uid") if isinstance(rec.get("uid"), int) else None
    out["written"] = rec.get("written") if isinstance(rec.get("written"), (int, float)) else None
    out["ranks"] = good
    for r in out["ranks"]:
        r["node"] = node
    en = rec.get("energy")
    if isinstance(en, dict) and en.get("status") in ENERGY_STATUSES:
        j = en.get("joules")
        out["energy"] = {"status": en["status"],
                         "joules": j if isinstance(j, (int, float)) and not isinstance(j, bool)
                         and _finite(j) and j >= 0 else None}
        if en.get("meter") in METERS:
            out["energy"]["meter"] = en["meter"]
    else:
        out["energy"] = {"status": "unknown", "joules": None}
    steps = rec.get("steps", [])
    _check(isinstance(steps, list) and len(steps) <= 256, "bad step list")
    out["steps"] = [s for s in steps if isinstance(s, dict)]
    probs = rec.get("problems", [])
    out["problems"] = [clip(p) for p in probs[: MAX_PROBLEMS + 1]] if isinstance(probs, list) \
        else []
    if refused:
        out["problems"].append(clip(f"{len(refused)} rank entries refused, first: {refused[0]}"))
    for k in ("settings", "restore", "job_info"):
        if isinstance(rec.get(k), dict):
            out[k] = rec[k]
    if "rest" in rec:
        out["rest"] = validate_rest(rec["rest"])
    return out


def validate_rest(rest: Any) -> Dict[str, Any]:
    """A node record's aggregate (build(), docs/records.md): known keys,
    exact types, numbers finite, non-negative and below 1e19; ValueError
    otherwise (the record is refused: a whole node's counts are at stake)."""
    _check(isinstance(rest, dict), "rest is not an object")
    out: Dict[str, Any] = {}
    for k in REST_COUNTS:
        v = rest.get(k, 0)
        _check(type(v) is int and 0 <= v < _LIMIT, f"rest.{k} is bad")
        out[k] = v
    for k in REST_SUMS + ("step_wall_s",):
        v = rest.get(k, 0.0)
        _check(type(v) in (int, float) and 0 <= v < _LIMIT, f"rest.{k} is bad")
        out[k] = float(v)
    ids, names, why = rest.get("step_ids", []), rest.get("named_steps", []), rest.get("why", [])
    _check(isinstance(ids, list) and len(ids) <= MAX_REST_RANGES and all(
        type(r) is list and len(r) == 2 and type(r[0]) is int and type(r[1]) is int and
        0 <= r[0] <= r[1] < 1 << 32 for r in ids), "rest.step_ids is bad")
    _check(isinstance(names, list) and len(names) <= 8 and
           all(isinstance(n, str) and _STEP_OK(n) for n in names), "rest.named_steps is bad")
    _check(isinstance(why, list) and len(why) <= 8 and all(isinstance(w, str) for w in why),
           "rest.why is bad")
    out.update(step_ids=ids, named_steps=names, why=[clip(w) for w in why],
               ids_cut=rest.get("ids_cut") is True)
    return out


_HEAD_UID = re.compile(rb'\{"format":[^,]{1,40},"version":[^,]{1,40},"job":[0-9]{1,10},'
                       rb'"node":"[A-Za-z0-9._-]{1,64}","uid":([0-9]{1,10})[,}]')


def head_uid(data: bytes) -> Optional[int]:
    """The uid at the head of an encoded record of ours (build() puts it
    there), without decoding the whole record; None if it is not there."""
    m = _HEAD_UID.match(data[:512])
    return int(m.group(1)) if m else None


def encode(rec: Dict[str, Any]) -> bytes:
    """The record as compact JSON and a newline; rank entries may be
    EncodedRank (their text is put in as it is)."""
    ranks = rec.get("ranks")
    if not any(isinstance(r, EncodedRank) for r in ranks or []):
        return (json.dumps(rec, separators=(",", ":")) + "\n").encode()
    mark = "\u0001" + os.urandom(8).hex()  # no text in the record can hold it
    head = json.dumps(dict(rec, ranks=mark), separators=(",", ":"))
    body = ",".join(r.text() if isinstance(r, EncodedRank) else
                    json.dumps(r, separators=(",", ":")) for r in ranks)
    return head.replace(json.dumps(mark), "[" + body + "]", 1).encode() + b"\n"


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a number")


def decode(data: bytes) -> Any:
    """JSON from an untrusted file: UTF-8, no NaN/Infinity; deep nesting
    (RecursionError) is turned into ValueError."""
    try:
        return json.loads(data.decode("utf-8"), parse_constant=_no_constant)
    except RecursionError:
        raise ValueError("nested too deeply") from None
