# SPDX-License-Identifier: BSD-3-Clause
"""Node settings that decide how fast a job can run, read from sysfs: the
cpufreq driver, governors and limits, turbo/boost, energy-performance
preference, C-states with their exit latencies, uncore limits, SMT, NUMA
nodes and distances, and whether RAPL energy is readable.  A misconfigured
BIOS or a leftover governor can halve a job's speed; this is what the node
record keeps and `mpi-pstate audit` prints.

Pure reading: every path is below `sysroot` (a fake tree in tests), nothing
is written, every value is bounded and parsed strictly (a malformed value is
reported as such, never guessed).  CPUs with identical settings are grouped
(cpus="0-63"), so the size grows with the number of distinct settings, not
with the number of CPUs."""
import os
import re
from typing import Any, Callable, Dict, List, Optional, Set, Tuple

from . import parse, safeio

FORMAT_VERSION = 1
MAX_CPUS = 8192
MAX_NUMA = 64
MAX_STATES = 16
MAX_GROUPS = 32
FAST_DRIVERS_POWERSAVE_OK = ("intel_pstate", "amd-pstate-epp")


def _rd(root: str, rel: str) -> Optional[str]:
    return safeio.read_sysfs(os.path.join(root, rel))


def _num(root: str, rel: str) -> Optional[int]:
    v = _rd(root, rel)
    if v is None:
        return None
    try:
        return parse.u64(v)
    except ValueError:
        return None


def _word(root: str, rel: str) -> Optional[str]:
    v = _rd(root, rel)
    if v is None:
        return None
    v = v.strip()
    return v if re.fullmatch(r"[A-Za-z0-9_.:+\- ]{1,64}", v) else "<malformed>"


def _ls(root: str, rel: str, pattern: str) -> List[str]:
    try:
        names = os.listdir(os.path.join(root, rel))
    except OSError:
        return []
    rx = re.compile(pattern)
    return sorted((n for n in names if rx.fullmatch(n)),
                  key=lambda n: int(re.sub(r"\D", "", n) or 0))


def _group(per_cpu: Dict[int, Dict[str, Any]]) -> List[Dict[str, Any]]:
    """CPUs with equal settings -> [{"cpus": "0-3", **settings}], at most
    MAX_GROUPS groups (the rest counted in a final "more" entry)."""
    groups: Dict[Tuple[Any, ...], List[int]] = {}
    first: Dict[Tuple[Any, ...], Dict[str, Any]] = {}
    for cpu in sorted(per_cpu):
        key = tuple(sorted((k, repr(v)) for k, v in per_cpu[cpu].items()))
        groups.setdefault(key, []).append(cpu)
        first.setdefault(key, per_cpu[cpu])
    out = [dict(cpus=parse.compress_list(c), **first[k]) for k, c in groups.items()]
    out.sort(key=lambda g: parse.cpu_list(g["cpus"])[0])
    if len(out) > MAX_GROUPS:
        rest = sum(len(parse.cpu_list(g["cpus"])) for g in out[MAX_GROUPS:])
        out = out[:MAX_GROUPS] + [{"more_groups": len(out) - MAX_GROUPS, "more_cpus": rest}]
    return out


def cpus(root: str) -> Dict[str, Any]:
    base = "devices/system/cpu"
    out: Dict[str, Any] = {}
    for k in ("online", "offline", "present"):
        v = _rd(root, f"{base}/{k}")
        if v is not None:
            try:
                out[k] = parse.compress_list(parse.cpu_list(v, MAX_CPUS))
            except ValueError:
                out[k] = "<malformed>"
    return out


def cpufreq(root: str) -> Dict[str, Any]:
    base = "devices/system/cpu/cpufreq"
    pols = _ls(root, base, r"policy[0-9]{1,5}")
    out: Dict[str, Any] = {}
    if not pols:
        out["driver"] = None
        out["status"] = "no cpufreq driver"
    per_cpu: Dict[int, Dict[str, Any]] = {}
    drivers: Set[str] = set()
    governors: Set[str] = set()
    for p in pols:
        d = f"{base}/{p}"
        s: Dict[str, Any] = {
            "driver": _word(root, f"{d}/scaling_driver"),
            "governor": _word(root, f"{d}/scaling_governor"),
            "min_khz": _num(root, f"{d}/scaling_min_freq"),
            "max_khz": _num(root, f"{d}/scaling_max_freq"),
            "hw_min_khz": _num(root, f"{d}/cpuinfo_min_freq"),
            "hw_max_khz": _num(root, f"{d}/cpuinfo_max_freq"),
        }
        epp = _word(root, f"{d}/energy_performance_preference")
        if epp is not None:
            s["epp"] = epp
        if s["governor"] == "userspace":
            s["setspeed_khz"] = _num(root, f"{d}/scaling_setspeed")
        rel = _rd(root, f"{d}/related_cpus")
        try:
            members = parse.cpu_list(rel or "", MAX_CPUS)
        except ValueError:
            members = []
        s["domain_cpus"] = len(members)
        if s["driver"]:
            drivers.add(s["driver"])
        if s["governor"]:
            governors.add(s["governor"])
        for c in members or [int(p[6:])]:
            per_cpu[c] = s
    if pols:
        out["driver"] = ",".join(sorted(drivers)) or None
        out["governors"] = sorted(governors)
        out["policies"] = len(pols)
        out["groups"] = _group(per_cpu)
    boost = _num(root, f"{base}/boost")
    no_turbo = _num(root, "devices/system/cpu/intel_pstate/no_turbo")
    out["boost"] = (None if boost is None else bool(boost)) if no_turbo is None \
        else not bool(no_turbo)
    for drv in ("intel_pstate", "amd_pstate"):
        st = _word(root, f"devices/system/cpu/{drv}/status")
        if st is not None:
            out[f"{drv}_status"] = st
    for k in ("max_perf_pct", "min_perf_pct", "hwp_dynamic_boost"):
        v = _num(root, f"devices/system/cpu/intel_pstate/{k}")
        if v is not None:
            out[f"intel_pstate_{k}"] = v
    return out


def cstates(root: str) -> Dict[str, Any]:
    base = "devices/system/cpu"
    out: Dict[str, Any] = {
        "driver": _word(root, f"{base}/cpuidle/current_driver"),
        "governor": _word(root, f"{base}/cpuidle/current_governor")
        or _word(root, f"{base}/cpuidle/current_governor_ro"),
    }
    states: Dict[str, Dict[str, Any]] = {}
    order: List[str] = []
    for cpu in _ls(root, base, r"cpu[0-9]{1,5}")[:MAX_CPUS]:
        n = int(cpu[3:])
        for st in _ls(root, f"{base}/{cpu}/cpuidle", r"state[0-9]{1,2}")[:MAX_STATES]:
            d = f"{base}/{cpu}/cpuidle/{st}"
            name = _word(root, f"{d}/name") or st
            lat = _num(root, f"{d}/latency")
            key = f"{name}|{lat}"
            e = states.get(key)
            if e is None:
                e = states[key] = {"name": name, "exit_latency_us": lat,
                                   "residency_us": _num(root, f"{d}/residency"),
                                   "_on": [], "_off": []}
                order.append(key)
            dis = _num(root, f"{d}/disable")
            (e["_off"] if dis else e["_on"]).append(n)
    out["states"] = []
    for key in order:
        e = states[key]
        on, off = e.pop("_on"), e.pop("_off")
        e["enabled_cpus"] = parse.compress_list(on)
        if off:
            e["disabled_cpus"] = parse.compress_list(off)
        out["states"].append(e)
    if not out["states"]:
        out["status"] = "no cpuidle states"
    return out


def uncore(root: str) -> List[Dict[str, Any]]:
    base = "devices/system/cpu/intel_uncore_frequency"
    out = []
    for d in _ls(root, base, r"(package_[0-9]+_die_[0-9]+|uncore[0-9]+)")[:64]:
        e: Dict[str, Any] = {"domain": d}
        for k in ("min_freq_khz", "max_freq_khz", "initial_min_freq_khz",
                  "initial_max_freq_khz", "current_freq_khz"):
            e[k] = _num(root, f"{base}/{d}/{k}")
        out.append(e)
    return out


def smt(root: str) -> Dict[str, Any]:
    base = "devices/system/cpu"
    out: Dict[str, Any] = {"control": _word(root, f"{base}/smt/control")}
    active = _num(root, f"{base}/smt/active")
    out["active"] = None if active is None else bool(active)
    widths = set()
    for cpu in _ls(root, base, r"cpu[0-9]{1,5}")[:MAX_CPUS]:
        v = _rd(root, f"{base}/{cpu}/topology/thread_siblings_list")
        if v is None:
            continue
        try:
            widths.add(len(parse.cpu_list(v, MAX_CPUS)))
        except ValueError:
            continue
    out["threads_per_core"] = max(widths) if widths else None
    return out


def numa(root: str) -> Dict[str, Any]:
    base = "devices/system/node"
    nodes = _ls(root, base, r"node[0-9]{1,4}")
    out: Dict[str, Any] = {"nodes": len(nodes), "cpus": {}, "distances": {}}
    for nd in nodes[:MAX_NUMA]:
        v = _rd(root, f"{base}/{nd}/cpulist")
        try:
            out["cpus"][nd[4:]] = parse.compress_list(parse.cpu_list(v or "", MAX_CPUS))
        except ValueError:
            out["cpus"][nd[4:]] = "<malformed>"
        d = _rd(root, f"{base}/{nd}/distance")
        try:
            out["distances"][nd[4:]] = [parse.u64(x, 0, 255) for x in (d or "").split()][:MAX_NUMA]
        except ValueError:
            out["distances"][nd[4:]] = "<malformed>"
    if len(nodes) > MAX_NUMA:
        out["truncated"] = True
    return out


def rapl(root: str) -> Dict[str, Any]:
    base = "class/powercap"
    zones = _ls(root, base, r"intel-rapl:[0-9]+(:[0-9]+)?")
    if not zones:
        return {"status": "absent"}
    names = []
    readable = True
    for z in zones[:64]:
        names.append(_word(root, f"{base}/{z}/name") or z)
        try:
            safeio.read_file(None, os.path.join(root, base, z, "energy_uj"), 64, owners=None,
                             strict_mode=False, sysfs=True)
        except OSError:
            readable = False
    return {"status": "ok" if readable else "no_access", "zones": names}


def warnings(s: Dict[str, Any]) -> List[str]:
    """What in the settings can slow a job down."""
    w: List[str] = []
    cf = s.get("cpufreq", {})
    if not cf.get("driver"):
        w.append("no cpufreq driver: frequencies are the firmware's (check BIOS power settings)")
    for g in cf.get("groups", []):
        if "cpus" not in g:
            continue
        if g.get("max_khz") and g.get("hw_max_khz") and g["max_khz"] < g["hw_max_khz"]:
            w.append(f"cpus {g['cpus']}: scaling_max_freq {g['max_khz']} kHz below the hardware "
                     f"maximum {g['hw_max_khz']} kHz")
        if g.get("governor") == "powersave" and g.get("driver") not in FAST_DRIVERS_POWERSAVE_OK:
            w.append(f"cpus {g['cpus']}: governor powersave with {g.get('driver')} runs at the "
                     "minimum frequency")
        if g.get("epp") == "power":
            w.append(f"cpus {g['cpus']}: energy_performance_preference is power")
    if cf.get("boost") is False:
        w.append("turbo/boost is off")
    if cf.get("intel_pstate_max_perf_pct") not in (None, 100):
        w.append(f"intel_pstate max_perf_pct is {cf['intel_pstate_max_perf_pct']}")
    for u in s.get("uncore", []):
        if u.get("max_freq_khz") and u.get("initial_max_freq_khz") and \
                u["max_freq_khz"] < u["initial_max_freq_khz"]:
            w.append(f"uncore {u['domain']}: max {u['max_freq_khz']} kHz below its initial "
                     f"{u['initial_max_freq_khz']} kHz")
    if s.get("cpus", {}).get("offline"):
        w.append(f"cpus {s['cpus']['offline']} are offline")
    return w


SECTIONS: Dict[str, Callable[[str], Any]] = {
    "cpus": cpus, "cpufreq": cpufreq, "cstates": cstates, "uncore": uncore, "smt": smt,
    "numa": numa, "rapl": rapl,
}


def node_settings(sysroot: str = "/sys") -> Dict[str, Any]:
    """Every section; a section that fails is reported, never fatal."""
    out: Dict[str, Any] = {"version": FORMAT_VERSION}
    for name, fn in SECTIONS.items():
        try:
            out[name] = fn(sysroot)
        except Exception as e:  # a kernel oddity must not cost the record
            out[name] = {"status": f"error: {type(e).__name__}: {e}"[:200]}
    out["warnings"] = warnings(out)
    return out


def brief(s: Dict[str, Any]) -> Dict[str, Any]:
    """The few settings the accounting summary shows (fixed size)."""
    cf = s.get("cpufreq", {}) if isinstance(s.get("cpufreq"), dict) else {}
    cs = s.get("cstates", {}) if isinstance(s.get("cstates"), dict) else {}
    sm = s.get("smt", {}) if isinstance(s.get("smt"), dict) else {}
    nu = s.get("numa", {}) if isinstance(s.get("numa"), dict) else {}
    states = [st for st in cs.get("states", []) if isinstance(st, dict)]
    deepest = max((st.get("exit_latency_us") or 0 for st in states if st.get("enabled_cpus")),
                  default=None)
    gov = cf.get("governors") or []
    return {
        "driver": (cf.get("driver") or "none")[:32],
        "governor": ",".join(gov)[:32] if gov else None,
        "boost": cf.get("boost"),
        "cstate_max_us": deepest,
        "smt": sm.get("threads_per_core"),
        "numa": nu.get("nodes"),
        "warnings": len(s.get("warnings", [])),
    }
