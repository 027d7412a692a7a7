# SPDX-License-Identifier: BSD-3-Clause
"""The step records a node record embeds, as the node Epilog reads them
from a step's runtime directory: the agent's agent.json and sums.json, the
plugin's plugin.json and the segments it lists, and which meter serves the
node's powercap.  Root wrote the files, but figures in them come from the
user's slots: each is parsed strictly and bounded.  Pure: no Slurm, no
file system (the caller reads the bytes)."""
import json
import math
import re
from typing import Any, Dict, List, Optional, Tuple

from . import layout, noderecord


AGENT_MAX_BYTES = 256 << 10
SUMS_FORMAT = "mpi-pstate-sums"
SUMS_COUNTS = ("ranks", "invalid", "transitions", "log_errors")
SUMS_MAX_RANKS = 16384  # a segment's slots (MPI_PSTATE_SEG_MAX_SLOTS)


def parse_sums(data: bytes, node: str) -> Optional[Dict[str, Any]]:
    """A step's sums.json (the agent's, written as the step ended:
    docs/agent.md, section 10) as rest_add_sums() takes it.  Root wrote the
    file, but every figure except the clocked-down ones comes from the
    user's slots: each is checked for type and range like a rank's.  None
    when it names another node; ValueError when it is not that format or a
    figure is out of range."""
    obj = noderecord.decode(data)
    if not isinstance(obj, dict) or obj.get("format") != SUMS_FORMAT or \
            obj.get("version") != 1:
        raise ValueError(f"not an {SUMS_FORMAT} record of version 1")
    if isinstance(obj.get("node"), str) and obj["node"] != node:
        return None
    out: Dict[str, Any] = {}
    for k in SUMS_COUNTS:
        v = obj.get(k)
        if type(v) is not int or not 0 <= v < 1 << 53 or (k == "ranks" and v > SUMS_MAX_RANKS):
            raise ValueError(f"{SUMS_FORMAT}: {k} out of range")
        out[k] = v
    for k in noderecord.SUMS_FIGURES:
        v = obj.get(k)
        # SUMS_MAX_RANKS ranks of at most ten years each
        if type(v) not in (int, float) or not math.isfinite(v) or not 0 <= v <= 5.2e12:
            raise ValueError(f"{SUMS_FORMAT}: {k} out of range")
        out[k] = float(v)
    out["energy"] = agent_energy(obj.get("energy"))
    return out


def parse_agent(data: bytes, node: str, default_step: Optional[str] = None
                ) -> Optional[Dict[str, Any]]:
    """An agent record (docs/agent.md, "mpi-pstate-agent" v1) as the sub-object
    of its step.  The epilog reads only the step and the energy from it and
    keeps the rest as it is (bounded).  The step directory's name, when
    given, is the step (the record numbers the batch step 4294967291).  None
    when the record names another node (the lab's nodes can share a
    runtime_dir); ValueError when it is not a JSON object."""
    obj = noderecord.decode(data)
    if not isinstance(obj, dict):
        raise ValueError("not a JSON object")
    if isinstance(obj.get("node"), str) and obj["node"] != node:
        return None
    step = default_step if default_step is not None else obj.get("step")
    if not isinstance(step, (int, str)) or isinstance(step, bool) or \
            not layout.STEP_NAME_RE.fullmatch(str(step)):
        raise ValueError("no valid step")
    return {"step": str(step), "energy": agent_energy(obj.get("energy")),
            "ranks": agent_ranks(obj.get("ranks")), "record": bounded(obj)}


def agent_ranks(ranks: Any) -> Dict[int, Dict[str, Any]]:
    """slot -> {"down_s", "transitions"} of an agent record's "ranks": the
    clocked-down time and transitions the agent (root) measured for each
    slot (docs/agent.md), the figures a node record gives for them.  An
    entry that is not exact (types, range) is left out: that slot's
    figures are null, never the rank's own."""
    out: Dict[int, Dict[str, Any]] = {}
    if not isinstance(ranks, list):
        return out
    for e in ranks[:noderecord.MAX_RANKS]:
        if not isinstance(e, dict):
            continue
        slot, down, tr = e.get("slot"), e.get("down_s"), e.get("transitions")
        if type(slot) is int and 0 <= slot < noderecord.MAX_RANKS and type(tr) is int and \
                0 <= tr < 1 << 53 and type(down) in (int, float) and math.isfinite(down) and \
                0 <= down < 1e9:
            out[slot] = {"down_s": round(float(down), 6), "transitions": tr}
    return out


def _joules(v: Any) -> Optional[float]:
    ok = isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v) and v >= 0
    return float(v) if ok else None


def agent_energy(en: Any) -> Dict[str, Any]:
    """{"status", "joules"} of an agent record's "energy": package plus DRAM
    (what RAPL measures of a node).  Status as the agent says (ok, absent,
    no_access, error); ok without a figure is "unknown"."""
    if not isinstance(en, dict):
        return {"status": "unknown", "joules": None}
    st = en.get("status")
    st = st if st in noderecord.ENERGY_STATUSES else "error"
    if "package_j" in en or "dram_j" in en:
        parts = [_joules(en.get(k)) for k in ("package_j", "dram_j") if en.get(k) is not None]
        j = sum(p for p in parts if p is not None) if parts and None not in parts else None
    else:
        j = _joules(en.get("joules"))
    if st == "ok" and j is None:
        st = "unknown"
    out = {"status": st, "joules": j if st == "ok" else None}
    if en.get("source") == "hwmon":  # a node without RAPL (agent/energy.h)
        out["meter"] = "hwmon"
    return out


def bounded(obj: Dict[str, Any]) -> Dict[str, Any]:
    """A record embedded as is, or without its per-rank and per-domain lists
    (histograms) when larger than AGENT_MAX_BYTES."""
    text = json.dumps(obj, separators=(",", ":"))
    if len(text) <= AGENT_MAX_BYTES:
        return obj
    slim = {k: v for k, v in obj.items() if k not in ("ranks", "domains")}
    slim["truncated"] = {"bytes": len(text), "dropped": ["ranks", "domains"]}
    if len(json.dumps(slim, separators=(",", ":"))) <= AGENT_MAX_BYTES:
        return slim
    return {"truncated": {"bytes": len(text)}}


MAX_PLUGIN_SLOTS = 16384  # the plugin's own cap (MPI_PSTATE_SEG_MAX_SLOTS)


def _uint(v: Any, hi: int) -> Optional[int]:
    return v if type(v) is int and 0 <= v <= hi else None


def plugin_segments(obj: Any, step: str, problems: List[str]) -> List[Dict[str, Any]]:
    """The segments the plugin made for a step, from its root-owned step
    record: version 2 lists them ({"name", "dev", "ino", "nslots",
    "bytes", "uid"}); version 1 has only "shm" (the path), taken without
    an inode or slot count (slots.read_listed bounds it by size).  Each
    entry is checked here; a bad one is named in problems and skipped."""
    out: List[Dict[str, Any]] = []
    if not isinstance(obj, dict):
        return out
    if obj.get("version") == 1:
        shm = obj.get("shm")
        if isinstance(shm, str) and shm:
            name = shm.rsplit("/", 1)[-1]
            m = layout.SEGMENT_RE.fullmatch(name)
            if m and m.group(2) == step:
                out.append({"step": step, "name": name, "dev": None, "ino": None,
                            "nslots": None, "bytes": None})
            else:
                problems.append(f"step {step}: plugin.json names segment {noderecord.clip(shm, 80)}")
        return out
    segs = obj.get("segments")
    if not isinstance(segs, list):
        problems.append(f"step {step}: plugin.json version {noderecord.clip(obj.get('version'), 20)} "
                        "lists no segments")
        return out
    for e in segs[:4]:
        if not isinstance(e, dict):
            continue
        name = e.get("name")
        m = layout.SEGMENT_RE.fullmatch(name) if isinstance(name, str) else None
        dev, ino = _uint(e.get("dev"), (1 << 64) - 1), _uint(e.get("ino"), (1 << 64) - 1)
        nslots = _uint(e.get("nslots"), MAX_PLUGIN_SLOTS)
        nbytes = _uint(e.get("bytes"), 4096 + MAX_PLUGIN_SLOTS * 16384)
        if not m or m.group(2) != step or dev is None or ino is None or not nslots or \
                nbytes is None or e.get("dir", layout.SHM_DIR) != layout.SHM_DIR:
            problems.append(f"step {step}: plugin.json has a bad segment entry")
            continue
        out.append({"step": step, "name": name, "dev": dev, "ino": ino, "nslots": nslots,
                    "bytes": nbytes})
    return out


def parse_plugin(data: bytes, node: str) -> Optional[Dict[str, Any]]:
    """The plugin's step record (plugin.json: mode, mechanism, governor,
    domains, restore state), kept as it is when small enough; None when it
    is another node's."""
    obj = noderecord.decode(data)
    if not isinstance(obj, dict):
        raise ValueError("not a JSON object")
    if isinstance(obj.get("node"), str) and obj["node"] != node:
        return None
    return bounded(obj)


def parse_mountinfo(text: str) -> List[Tuple[str, str]]:
    """(mount point, file system type) per line of /proc/self/mountinfo."""
    out = []
    for line in text.splitlines()[:100000]:
        left, sep, right = line.partition(" - ")
        f, r = left.split(), right.split()
        if sep and len(f) >= 5 and r:
            out.append((re.sub(r"\\([0-7]{3})", lambda m: chr(int(m.group(1), 8)), f[4]),
                        r[0]))
    return out


def rapl_meter(sysroot: str, mountinfo: str) -> str:
    """"rapl" when <sysroot>/class/powercap is served by the kernel's sysfs,
    else "simulated" (a FUSE fake like the test cluster's, a copied tree):
    only the kernel's powercap measures anything.  The last mount on the
    longest mount point above the path is the one that serves it."""
    path = sysroot.rstrip("/") + "/class/powercap"
    best: Optional[Tuple[str, str]] = None
    for mp, fs in parse_mountinfo(mountinfo):
        base = mp.rstrip("/")
        if path == mp or path.startswith(base + "/"):
            if best is None or len(mp) >= len(best[0]):
                best = (mp, fs)
    return "rapl" if best is not None and best[1] == "sysfs" else "simulated"
