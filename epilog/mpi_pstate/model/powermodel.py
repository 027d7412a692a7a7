# SPDX-License-Identifier: BSD-3-Clause
"""The node power model file that `mpi-pstate calibrate` writes and the
node Epilog embeds in its record (docs/evaluation.md, "The model file"):
its format, where it is, a strict bounded reader, and the power it gives
at a frequency.  The what-if predictor (whatif.py) uses it; the Epilog and
calibrate need only this module, not the predictor."""
import errno
import math
import os
import re
from typing import Any, Dict, List, Optional

from ..core import layout, noderecord, parse, safeio

MODEL_FORMAT = "mpi-pstate-model"
MODEL_VERSION = 1
MODEL_ENV = "MPI_PSTATE_MODEL"
MODEL_MAX_BYTES = 1 << 20
# The agent's reaction after a threshold passes and after a rank leaves a
# lowered wait, besides the frequency write itself: a timer or futex
# wake-up on a node whose CPUs are busy.  calibrate measures it (median,
# p90); these are for models without it (tens of microseconds on an idle
# node, bench/agent/RESULTS.md).  The bounds: 0 and twice the p90.
REACTION_US = (50.0, 0.0, 1000.0)  # est, lo, hi
# The uncore figures a model may carry (calibrate on a node with
# intel_uncore_frequency): the node's power with the uncore's maximum at its
# lowest and at its highest frequency, one CPU busy or polling at core_khz.
UNCORE_WATTS = ("busy_w_at_min", "busy_w_at_max", "poll_w_at_min", "poll_w_at_max")
UNCORE_MAX_DOMAINS = 64
UNCORE_NAME = re.compile(r"package_[0-9]{2,4}_die_[0-9]{2,4}").fullmatch


class ModelError(ValueError):
    pass


def _num(v: Any, what: str, lo: float = 0.0, hi: float = 1e9) -> float:
    if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v) \
            or not lo <= v <= hi:
        raise ModelError(f"model: {what} is not a number in [{lo:g}, {hi:g}]")
    return float(v)


def validate_model(m: Any) -> Dict[str, Any]:
    """A model as calibrate writes it (docs/evaluation.md, "The model file"):
    exact format and version, every figure a finite number in range, points
    sorted by frequency.  Returns the figures the prediction uses."""
    if not isinstance(m, dict) or m.get("format") != MODEL_FORMAT:
        raise ModelError("not an mpi-pstate node power model")
    if m.get("version") != MODEL_VERSION:
        raise ModelError(f"model version {m.get('version')!r} not supported "
                         f"(this mpi-pstate reads {MODEL_VERSION})")
    pts = m.get("points")
    if not isinstance(pts, list) or not 2 <= len(pts) <= 64:
        raise ModelError("model: points must list 2 to 64 frequencies")
    points = []
    for p in pts:
        if not isinstance(p, dict):
            raise ModelError("model: a point is not an object")
        points.append({"khz": int(_num(p.get("khz"), "points.khz", 1, 1e8)),
                       "busy_w": _num(p.get("busy_w"), "points.busy_w", 0, 1e5),
                       "poll_w": _num(p.get("poll_w"), "points.poll_w", 0, 1e5)})
    points.sort(key=lambda p: p["khz"])
    if len({p["khz"] for p in points}) != len(points):
        raise ModelError("model: two points at the same frequency")
    tr = m.get("transition") if isinstance(m.get("transition"), dict) else {}
    out = {
        "format": MODEL_FORMAT, "version": MODEL_VERSION,
        "node": str(m.get("node", "?"))[:64], "cpu_model": str(m.get("cpu_model", "?"))[:100],
        "driver": str(m.get("driver", "?"))[:40], "method": str(m.get("method", "?"))[:40],
        "meter": m.get("meter") if m.get("meter") in ("rapl", "simulated", "hwmon") else "unknown",
        "created": _num(m.get("created", 0), "created", 0, 1e11),
        "idle_w": _num(m.get("idle_w"), "idle_w", 0, 1e5),
        "noise_w": _num(m.get("noise_w", 0), "noise_w", 0, 1e5),
        "domain_cpus": int(_num(m.get("domain_cpus", 1), "domain_cpus", 1, 1e5)),
        "points": points,
        "write_us": _num(tr.get("write_us", 0), "transition.write_us", 0, 1e6),
        "reaction_us": _num(tr.get("reaction_us", REACTION_US[0]), "transition.reaction_us",
                            0, 1e6),
        # the high bound: twice the measured p90, or REACTION_US's
        "reaction_us_hi": 2 * _num(tr["reaction_us_p90"], "transition.reaction_us_p90", 0, 1e6)
        if "reaction_us_p90" in tr else REACTION_US[2],
        "transition_uj": _num(tr.get("energy_uj", 0), "transition.energy_uj", -1e6, 1e6),
        # CPU of a lower+raise pair with its wake-ups (models of earlier
        # releases lack it: the budget is then taken as spent on scans only)
        "pair_cpu_us": _num(tr["pair_cpu_us"], "transition.pair_cpu_us", 0, 1e6)
        if "pair_cpu_us" in tr else None,
    }
    if "knee_khz" in m:
        out["knee_khz"] = _knee(m["knee_khz"], points)
    if "uncore" in m:
        out["uncore"] = _uncore(m["uncore"])
    return out


def _int(v: Any, what: str, lo: int, hi: int) -> int:
    if type(v) is not int or not lo <= v <= hi:
        raise ModelError(f"model: {what} is not an integer in [{lo}, {hi}]")
    return v


def _knee(v: Any, points: List[Dict[str, Any]]) -> int:
    """The frequency of least energy per cycle of a busy core (optional,
    from a release whose calibrate measures it): one of the measured
    frequencies' range, where the prediction can price it."""
    return _int(v, "knee_khz", points[0]["khz"], points[-1]["khz"])


def _uncore(u: Any) -> Dict[str, Any]:
    """The optional uncore sweep: both limits, the four node powers, the
    write and settle times, and which CPUs each uncore domain of the node
    holds (what places a rank on a package)."""
    if not isinstance(u, dict):
        raise ModelError("model: uncore is not an object")
    out: Dict[str, Any] = {
        "min_khz": _int(u.get("min_khz"), "uncore.min_khz", 1, 10**8),
        "max_khz": _int(u.get("max_khz"), "uncore.max_khz", 1, 10**8),
    }
    if out["min_khz"] >= out["max_khz"]:
        raise ModelError("model: uncore.min_khz is not below uncore.max_khz")
    if "core_khz" in u:
        out["core_khz"] = _int(u["core_khz"], "uncore.core_khz", 1, 10**8)
    for k in UNCORE_WATTS:
        out[k] = _num(u.get(k), "uncore." + k, 0, 1e5)
    for k in ("write_us", "latency_us"):
        if k in u:
            out[k] = _num(u[k], "uncore." + k, 0, 1e7)
    doms = u.get("domains", [])
    if not isinstance(doms, list) or len(doms) > UNCORE_MAX_DOMAINS:
        raise ModelError(f"model: uncore.domains must list at most {UNCORE_MAX_DOMAINS} domains")
    out["domains"] = []
    seen: set = set()
    for d in doms:
        name = d.get("name") if isinstance(d, dict) else None
        if not isinstance(name, str) or not UNCORE_NAME(name) or name in seen:
            raise ModelError("model: uncore.domains: a name is not a distinct package_NN_die_NN")
        try:
            cpus = parse.cpu_list(d.get("cpus")) if isinstance(d.get("cpus"), str) else None
        except ValueError:
            cpus = None
        if cpus is None:
            raise ModelError(f"model: uncore.domains: {name}: cpus is not a CPU list")
        if seen and any(set(cpus) & set(o["cpus"]) for o in out["domains"]):
            raise ModelError(f"model: uncore.domains: {name} shares CPUs with another domain")
        seen.add(name)
        out["domains"].append({"name": name, "cpus": cpus})
    return out


def model_path(path: Optional[str] = None, privileged: Optional[bool] = None) -> str:
    """path, else $MPI_PSTATE_MODEL (a user's command; root and SlurmUser
    only from a source checkout: safeio.env_override), else layout.DEFAULT_MODEL."""
    return path or safeio.env_override(MODEL_ENV, privileged) or layout.DEFAULT_MODEL


def load_model(path: Optional[str] = None, privileged: Optional[bool] = None) -> Dict[str, Any]:
    """The model file (model_path()), bounded and strict, read as root reads
    a file by name (safeio.read_trusted: root's or the caller's own, no
    symlink, no FIFO); ModelError/OSError say why not."""
    path = os.path.abspath(model_path(path, privileged))
    try:
        data = safeio.read_trusted(path, MODEL_MAX_BYTES)
    except safeio.Missing:
        raise
    except safeio.UnsafeFile as e:
        if e.errno == errno.EFBIG:
            raise ModelError(f"{path}: larger than {MODEL_MAX_BYTES} bytes") from None
        raise ModelError(f"model not read: {e.strerror}") from None
    try:
        obj = noderecord.decode(data)
    except ValueError as e:
        raise ModelError(f"{path}: not JSON ({e})") from None
    m = validate_model(obj)
    m["path"] = path
    return m


def model_for_record(path: Optional[str] = None) -> Optional[Dict[str, Any]]:
    """The node's model as the node Epilog (root) embeds it in the record's
    settings (settings.power_model): validated, in the file's form, or None
    when there is none; a bad or untrusted file is a warning for the caller,
    never a failure of the Epilog."""
    try:
        m = load_model(path, privileged=True)
    except FileNotFoundError:
        return None
    return file_form(m)


def file_form(m: Dict[str, Any]) -> Dict[str, Any]:
    """A validated model back in the file's form, the only one
    validate_model() reads: validate_model(file_form(m)) == m.  The record
    carries this, so that a report reads the model as calibrate wrote it
    (the validated form read again would lose the transition figures to
    their defaults, and an uncore sweep's CPU lists would refuse it)."""
    out = {k: m[k] for k in ("format", "version", "node", "cpu_model", "driver", "method",
                             "meter", "created", "idle_w", "noise_w", "domain_cpus")}
    out["points"] = [dict(p) for p in m["points"]]
    out["transition"] = {"write_us": m["write_us"], "reaction_us": m["reaction_us"],
                         "reaction_us_p90": m["reaction_us_hi"] / 2,
                         "energy_uj": m["transition_uj"]}
    if m["pair_cpu_us"] is not None:
        out["transition"]["pair_cpu_us"] = m["pair_cpu_us"]
    if "knee_khz" in m:
        out["knee_khz"] = m["knee_khz"]
    if "uncore" in m:
        out["uncore"] = dict(m["uncore"], domains=[
            {"name": d["name"], "cpus": parse.compress_list(d["cpus"])}
            for d in m["uncore"]["domains"]])
    return out


def power_at(m: Dict[str, Any], khz: float, kind: str) -> float:
    """Package power with one CPU busy/polling at khz (linear between the
    measured points, clamped at the ends)."""
    pts = m["points"]
    if khz <= pts[0]["khz"]:
        return pts[0][kind]
    for a, b in zip(pts, pts[1:]):
        if khz <= b["khz"]:
            x = (khz - a["khz"]) / (b["khz"] - a["khz"])
            return a[kind] + x * (b[kind] - a[kind])
    return pts[-1][kind]


def uncore_step_w(m: Dict[str, Any]) -> Optional[float]:
    """What lowering the uncore saves while a package's CPUs poll (W), or
    None for a model without the uncore sweep."""
    u = m.get("uncore")
    return u["poll_w_at_max"] - u["poll_w_at_min"] if u else None


def high_khz(m: Dict[str, Any]) -> int:
    return m["points"][-1]["khz"]


def low_khz(m: Dict[str, Any]) -> int:
    return m["points"][0]["khz"]
