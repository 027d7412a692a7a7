"""Merging the node records of a job (format "mpi-pstate-job", the per-rank
detail kept beside the accounting record) and the accounting summary
written into AdminComment ("mpi-pstate/1:" + compact JSON).

The summary's size does not depend on the number of ranks or nodes: every
list in it is cut to a fixed length and encode() enforces MAX_SUMMARY.
Pure: no Slurm, no file system."""
from __future__ import annotations

import json
import re
from typing import Any, Optional

from . import audit, parse

JOB_FORMAT = "mpi-pstate-job"
JOB_VERSION = 1
SUMMARY_VERSION = 1
MARKER = "mpi-pstate/"
PREFIX = f"{MARKER}{SUMMARY_VERSION}:"
MAX_SUMMARY = 1024  # bytes of "mpi-pstate/1:{...}"
TOP_WAITERS = 3
MISSING_CHARS = 120
ADMIN_COMMENT_MAX = 60000  # slurmdbd keeps AdminComment in a TEXT column (64 KiB)


def _r(v: Optional[float], nd: int = 3) -> Optional[float]:
    return None if v is None else round(v, nd)


def _sum(xs: list[Optional[float]]) -> Optional[float]:
    v = [x for x in xs if x is not None]
    return sum(v) if v else None


def rank_label(r: dict[str, Any], multi_step: bool) -> str:
    return f"{r['step']}.{r['rank']}" if multi_step else str(r["rank"])


def merge(job: int, expected: list[str], records: dict[str, dict[str, Any]],
          bad: dict[str, str], job_state: Optional[str] = None,
          exit_code: Optional[str] = None, array: Optional[str] = None) -> dict[str, Any]:
    """records: node -> validated node record; bad: node -> why its record
    was refused.  Returns the job detail with its "summary"."""
    exp = list(dict.fromkeys(expected)) or sorted(records)
    missing = [n for n in exp if n not in records]
    extra = sorted(n for n in records if n not in exp)
    ranks: list[dict[str, Any]] = []
    nodes: dict[str, Any] = {}
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
    if not with_data:
        state = "none" if not missing else "unknown"
    else:
        state = "partial" if missing else "complete"
    detail: dict[str, Any] = {
        "format": JOB_FORMAT, "version": JOB_VERSION, "job": job, "state": state,
        "job_state": job_state, "exit_code": exit_code, "array": array,
        "nodes_expected": parse.compress_hostlist(exp) if exp else "",
        "missing": missing, "nodes": nodes, "steps": steps, "ranks": ranks,
    }
    detail["summary"] = summarize(detail, records)
    return detail


def summarize(detail: dict[str, Any], records: dict[str, dict[str, Any]]) -> dict[str, Any]:
    ranks = detail["ranks"]
    multi = len(detail["steps"]) > 1
    wall = _sum([r.get("wall_s") for r in ranks])
    mpi = _sum([r.get("mpi_s") for r in ranks])
    paired = [(r["wall_s"], r["mpi_s"]) for r in ranks
              if r.get("wall_s") and r.get("mpi_s") is not None]
    pw = sum(w for w, _ in paired)
    s: dict[str, Any] = {
        "v": SUMMARY_VERSION, "state": detail["state"], "job_state": detail["job_state"],
        "nodes": len(detail["nodes"]) - len(detail["missing"]), "ranks": len(ranks),
        "steps": len(detail["steps"]),
        "wall_s": _r(max((r["wall_s"] for r in ranks if r.get("wall_s") is not None),
                         default=None)),
        "mpi_s": _r(mpi), "mpi_share": _r(sum(m for _, m in paired) / pw if pw else None),
        "wait_s": _r(_sum([r.get("wait_s") for r in ranks])),
        "down_s": _r(_sum([r.get("down_s") for r in ranks])),
        "down_share": _r((_sum([r.get("down_s") for r in ranks]) or 0) / wall if wall else None),
        "transitions": sum(r.get("transitions") or 0 for r in ranks),
    }
    # Imbalance: how much longer the slowest rank computes than the mean
    # (0 = balanced); the ranks that wait most are the ones waiting for it.
    comp = [w - m for w, m in paired]
    if comp and sum(comp) > 0:
        s["imbalance"] = _r(max(comp) / (sum(comp) / len(comp)) - 1)
    top = sorted((r for r in ranks if r.get("mpi_share") is not None),
                 key=lambda r: (-r["mpi_share"], r["rank"]))[:TOP_WAITERS]
    s["top_wait"] = [[rank_label(r, multi), r["node"][:32], r["mpi_share"]] for r in top]
    energies = [records[n]["energy"] for n in records if records[n]["status"] == "ok"]
    joules = [e["joules"] for e in energies if e["status"] == "ok" and e["joules"] is not None]
    if energies and len(joules) == len(energies) and not detail["missing"]:
        s["energy_j"], s["energy"] = _r(sum(joules), 1), "ok"
    elif joules:
        s["energy_j"], s["energy"] = _r(sum(joules), 1), "partial"
    else:
        st = {e["status"] for e in energies}
        s["energy_j"], s["energy"] = None, (st.pop() if len(st) == 1 else "unknown")
    briefs = [audit.brief(records[n]["settings"]) for n in sorted(records)
              if isinstance(records[n].get("settings"), dict)]
    if briefs:
        distinct = {json.dumps(b, sort_keys=True) for b in
                    ({k: v for k, v in b.items() if k != "warnings"} for b in briefs)}
        s["settings"] = {k: v for k, v in briefs[0].items() if k != "warnings"}
        s["settings"]["same"] = len(distinct) == 1
        s["warn_nodes"] = sum(1 for b in briefs if b.get("warnings"))
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
    return {k: v for k, v in s.items() if v is not None}


# Dropped first when a summary would exceed MAX_SUMMARY (never seen with
# 64-char names; the bound holds whatever the input).
_OPTIONAL = ("settings", "top_wait", "missing", "array", "imbalance", "warn_nodes")


def encode(summary: dict[str, Any]) -> str:
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


def find(text: str) -> tuple[Optional[dict[str, Any]], Optional[tuple[int, int]]]:
    """Our summary inside an AdminComment and its span, or (None, None).
    Only the first mpi-pstate summary counts; other text is not ours."""
    for m in _MARK_RE.finditer(text or ""):
        try:
            obj, end = json.JSONDecoder().raw_decode(text, m.end())
        except ValueError:
            continue
        if isinstance(obj, dict) and obj.get("v") == int(m.group(1)):
            return obj, (m.start(), end)
    return None, None


def combine(existing: str, ours: str) -> Optional[str]:
    """existing AdminComment with our summary put in (replacing an earlier
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


def line(summary: dict[str, Any]) -> str:
    """One human line of a summary (report, logs)."""
    parts = [f"state={summary.get('state')}"]
    for k, fmt in (("job_state", "{}"), ("nodes", "{}"), ("ranks", "{}"),
                   ("mpi_share", "{:.1%}"), ("down_share", "{:.1%}"),
                   ("transitions", "{}"), ("energy_j", "{:.1f}J")):
        v = summary.get(k)
        if v is not None:
            try:
                parts.append(f"{k}=" + fmt.format(v))
            except (ValueError, TypeError):
                parts.append(f"{k}={v}")
    if summary.get("missing"):
        parts.append(f"missing={summary['missing']}")
    return " ".join(parts)
