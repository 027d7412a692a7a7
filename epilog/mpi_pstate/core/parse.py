# SPDX-License-Identifier: BSD-3-Clause
"""Strict parsers, the Python side of common/parse.h: whole string, decimal
only, no sign, no hex or octal surprises; a bad value raises ValueError so
that callers keep their default and say which value was refused."""
import os
import re
import time
from typing import Any, Dict, List, Optional, Set, Tuple, Union

_U64 = re.compile(r"[ \t]*([0-9]+)[ \t]*\n?")
# C's isalpha run is read into an 8-byte buffer: a longer unit is refused.
_NUMBER_UNIT = re.compile(r"[ \t]*([0-9.]*)([A-Za-z]{0,7})[ \t\n]*")
U64_MAX = (1 << 64) - 1
U32_MAX = (1 << 32) - 1
DAY_US = 86_400_000_000  # the longest duration: anything longer is a typo


def u64(text: str, lo: int = 0, hi: int = U64_MAX) -> int:
    """Decimal unsigned integer within [lo, hi] (sysfs style: blanks and one
    trailing newline allowed)."""
    m = _U64.fullmatch(text)
    if not m:
        raise ValueError(f"not a decimal number: {text!r}")
    v = int(m.group(1))
    if not lo <= v <= hi:
        raise ValueError(f"{v} outside [{lo}, {hi}]")
    return v


def _with_units(text: str, what: str, units: "dict[str, int]", limit: int) -> int:
    """common/parse.c's parse_with_units, step by step: blanks, a number
    with at most one point and no space before its unit (units: lower-case
    name -> power of ten to the base unit; none: the base unit), then
    blanks and newlines; a fraction finer than the base unit must be zeros.
    tests/data/durations.txt holds the cases both must agree on."""
    m = _NUMBER_UNIT.fullmatch(text)
    if not m:
        raise ValueError(f"not a {what}: {text!r}")
    number, unit = m.group(1), m.group(2).lower()
    if unit and unit not in units:
        raise ValueError(f"not a {what}: {text!r} (the unit is one of {', '.join(units)})")
    digits = units[unit] if unit else 0
    whole, point, frac = number.partition(".")
    if "." in frac:
        raise ValueError(f"not a {what}: {text!r}")
    kept = frac[:digits]
    if frac[digits:].strip("0"):
        raise ValueError(f"{what} {text!r}: more precision than the unit keeps")
    if not whole and not kept:  # as C: "." and ".0" (a bare point, no digit kept)
        raise ValueError(f"not a {what}: {text!r}")
    v = int((whole or "0") + kept.ljust(digits, "0"))
    if v > limit:
        raise ValueError(f"{what} {text!r} out of range")
    return v


def freq_khz(text: str) -> int:
    """"1200000" (kHz), "1200000kHz", "1200MHz", "1.2GHz" -> kHz, as
    mpi_pstate_parse_freq_khz: 0 and more than cpufreq's 32 bits refused."""
    v = _with_units(text, "frequency", {"khz": 0, "mhz": 3, "ghz": 6}, U32_MAX)
    if v == 0:
        raise ValueError(f"frequency {text!r} out of range")
    return v


def duration_us(text: str) -> int:
    """"500" (us), "500us", "2ms", "1.5ms", "1s" -> microseconds, at most a
    day, as mpi_pstate_parse_duration_us."""
    return _with_units(text, "duration", {"us": 0, "ms": 3, "s": 6}, DAY_US)


def boolean(text: str) -> bool:
    """yes/true/on/1 or no/false/off/0, any case, as mpi_pstate_parse_bool."""
    word = text.lower()
    if word in ("yes", "true", "on", "1"):
        return True
    if word in ("no", "false", "off", "0"):
        return False
    raise ValueError(f"{text!r} is not yes or no")


_PCT = re.compile(r"(0|[1-9][0-9]{0,2})(?:\.([0-9]+))?%?")


def percent_ppm(text: str) -> int:
    """"0.5", "5%" (of one core) -> millionths, at most 100 %, nothing finer
    than a millionth (the agent's --cpu-budget, common/parse.c)."""
    m = _PCT.fullmatch(text)
    frac = (m.group(2) or "") if m else ""
    if not m or frac[4:].strip("0"):
        raise ValueError(f"not a percentage such as 0.5: {text!r}")
    ppm = int(m.group(1)) * 10000 + int((frac[:4] or "0").ljust(4, "0"))
    if ppm > 1000000:
        raise ValueError(f"more than 100 %: {text!r}")
    return ppm


CARBON_MAX = 5000  # g/kWh, common/parse.h MPI_PSTATE_CARBON_MAX
CARBON_ENTRIES = 64
_CARBON_G = re.compile(r"[0-9]+(?:\.[0-9]{1,3})?")
_CARBON_PART = re.compile(r"[A-Za-z0-9_.\-]{1,64}")


def carbon(text: str) -> Tuple[Optional[float], Dict[str, float]]:
    """carbon_g_per_kwh=: "350", "gpu:120", "350,gpu:120" -> (the site's
    grams of CO2 per kWh or None, per partition), the grammar of
    common/parse.c mpi_pstate_parse_carbon (tests/data/carbon_g_per_kwh.txt
    holds the cases both must agree on)."""
    site: Optional[float] = None
    parts: Dict[str, float] = {}
    entries = text.split(",")
    if not text or len(entries) > CARBON_ENTRIES:
        raise ValueError(f"not a carbon intensity such as 350 or 350,gpu:120: {text!r}")
    for e in entries:
        name, sep, g = e.rpartition(":")
        if not _CARBON_G.fullmatch(g) or (sep and not _CARBON_PART.fullmatch(name)) or \
                float(g) > CARBON_MAX or (not sep and site is not None):
            raise ValueError(f"not a carbon intensity such as 350 or 350,gpu:120: {text!r}")
        if sep:
            parts[name] = float(g)
        else:
            site = float(g)
    return site, parts


_JOBID = re.compile(r"([1-9][0-9]{0,9})(?:_([0-9]{1,9}|\[[0-9,\-]{1,64}\]))?")


def job_id(text: str) -> int:
    """A plain Slurm job id (1 .. 2^32-1)."""
    t = text.strip()
    if not re.fullmatch(r"[1-9][0-9]{0,9}", t) or int(t) > 0xFFFFFFFF:
        raise ValueError(f"not a job id: {text!r}")
    return int(t)


def slurm_job_id() -> int:
    """The job id in the environment Slurm gives its prologs and epilogs."""
    return job_id(os.environ.get("SLURM_JOB_ID", os.environ.get("SLURM_JOBID", "")))


def job_spec(text: str) -> str:
    """A job id as sacct takes it: 4242, 4242_3 or 4242_[1-3]; returned as is."""
    m = _JOBID.fullmatch(text.strip())
    if not m or int(m.group(1)) > 0xFFFFFFFF:
        raise ValueError(f"not a job id: {text!r}")
    return text.strip()


_NAME = re.compile(r"[A-Za-z0-9_.:\-]{1,64}")


def safe_name(text: str, maxlen: int = 64) -> str:
    """Name that may become part of a path (common/safeio.h's rule)."""
    if len(text) > maxlen or not _NAME.fullmatch(text) or text in (".", ".."):
        raise ValueError(f"unsafe name: {text!r}")
    return text


def cpu_list(text: str, max_cpu: int = 65535) -> List[int]:
    """Kernel CPU/node list "0-3,8,10-11" -> sorted list."""
    out: Set[int] = set()
    t = text.strip()
    if not t:
        return []
    for part in t.split(","):
        a, sep, b = part.partition("-")
        lo = u64(a, 0, max_cpu)
        hi = u64(b, 0, max_cpu) if sep else lo
        if hi < lo:
            raise ValueError(f"bad range {part!r}")
        out.update(range(lo, hi + 1))
    return sorted(out)


def _runs(values: List[int]) -> List[Tuple[int, int]]:
    """[0,1,2,3,8] -> [(0, 3), (8, 8)]: the runs of consecutive numbers."""
    vs = sorted(set(values))
    runs: List[Tuple[int, int]] = []
    i = 0
    while i < len(vs):
        j = i
        while j + 1 < len(vs) and vs[j + 1] == vs[j] + 1:
            j += 1
        runs.append((vs[i], vs[j]))
        i = j + 1
    return runs


def compress_list(values: List[int]) -> str:
    """[0,1,2,3,8] -> "0-3,8" (the kernel's notation)."""
    return ",".join(str(a) if a == b else f"{a}-{b}" for a, b in _runs(values))


_HOSTNAME = re.compile(r"[A-Za-z0-9_.\-]{1,64}")
MAX_HOSTS = 100000


def expand_hostlist(text: str) -> List[str]:
    """Slurm hostlist "n[1-3,05],login" -> names (what `scontrol show
    hostnames` prints), without running scontrol; ValueError when malformed
    or longer than MAX_HOSTS names."""
    out: List[str] = []
    i, t = 0, text.strip()
    while i < len(t):
        j, depth = i, 0
        while j < len(t) and (depth or t[j] != ","):
            depth += {"[": 1, "]": -1}.get(t[j], 0)
            if depth not in (0, 1):
                raise ValueError(f"bad hostlist {text!r}")
            j += 1
        if depth:
            raise ValueError(f"bad hostlist {text!r}")
        out.extend(_expand_one(t[i:j], text))
        if len(out) > MAX_HOSTS:
            raise ValueError("hostlist too long")
        i = j + 1
    return out


def _expand_one(item: str, whole: str) -> List[str]:
    m = re.fullmatch(r"([^\[\]]*)\[([0-9,\-]+)\]([^\[\]]*)", item)
    if not m:
        if not _HOSTNAME.fullmatch(item):
            raise ValueError(f"bad host name {item!r} in {whole!r}")
        return [item]
    pre, ranges, post = m.groups()
    names: List[str] = []
    for r in ranges.split(","):
        a, sep, b = r.partition("-")
        if not a.isdigit() or (sep and not b.isdigit()):
            raise ValueError(f"bad range {r!r} in {whole!r}")
        width = len(a) if a.startswith("0") else 0
        lo, hi = int(a), int(b) if sep else int(a)
        if hi < lo or hi - lo > MAX_HOSTS:
            raise ValueError(f"bad range {r!r} in {whole!r}")
        names.extend(f"{pre}{n:0{width}d}{post}" for n in range(lo, hi + 1))
    for n in names:
        if not _HOSTNAME.fullmatch(n):
            raise ValueError(f"bad host name {n!r} in {whole!r}")
    return names


def compress_hostlist(names: List[str]) -> str:
    """["n1","n2","n3","x"] -> "n[1-3],x" (prefix + number runs, same width)."""
    groups: Dict[Tuple[str, int], List[int]] = {}
    plain: List[str] = []
    order: List[Union[Tuple[str, int], str]] = []
    for n in sorted(set(names), key=_natural):
        m = re.fullmatch(r"(.*?)([0-9]+)", n)
        if not m:
            plain.append(n)
            order.append(n)
            continue
        width = len(m.group(2)) if m.group(2).startswith("0") else 0
        key = (m.group(1), width)
        if key not in groups:
            groups[key] = []
            order.append(key)
        groups[key].append(int(m.group(2)))
    parts: List[str] = []
    for k in order:
        if isinstance(k, str):
            parts.append(k)
            continue
        pre, width = k
        nums = sorted(set(groups[k]))
        if len(nums) == 1:
            parts.append(f"{pre}{nums[0]:0{width}d}")
            continue
        runs = [f"{a:0{width}d}" if a == b else f"{a:0{width}d}-{b:0{width}d}"
                for a, b in _runs(nums)]
        parts.append(f"{pre}[{','.join(runs)}]")
    return ",".join(parts)


def _natural(name: str) -> Tuple[str, int, str]:
    m = re.fullmatch(r"(.*?)([0-9]+)", name)
    return (m.group(1), int(m.group(2)), name) if m else (name, -1, name)


def elapsed(text: Optional[str]) -> Optional[float]:
    """sacct's Elapsed ([D-]HH:MM:SS, MM:SS.mmm) in seconds; None when it is
    not one (Unknown, INVALID, empty)."""
    m = re.fullmatch(r"(?:([0-9]{1,6})-)?(?:([0-9]{1,2}):)?([0-9]{1,2}):([0-9]{2})(?:\.[0-9]+)?",
                     (text or "").strip())
    if not m:
        return None
    d, h, mi, sec = (int(x) if x else 0 for x in m.groups())
    return float(((d * 24 + h) * 60 + mi) * 60 + sec)


# ---- `mpi-pstate report`'s selections, as sacct takes them ---------------------

_JOB_STEP = re.compile(r"([1-9][0-9]{0,9})(?:_([0-9]{1,9}|\[[0-9,\-]{1,64}\]))?"
                       r"(?:\.([0-9]{1,9}|batch|extern|interactive))?")
MAX_ARRAY_TASKS = 100000


def job_step_spec(text: str) -> Tuple[str, Optional[str]]:
    """A job or step id as sacct -j takes it: 4242, 4242_3, 4242_[1-3],
    each optionally with a step (4242.0, 4242.batch, 4242_3.extern) ->
    (the job part, as sacct -X selects it; the step or None)."""
    t = text.strip()
    m = _JOB_STEP.fullmatch(t)
    if not m or int(m.group(1)) > 0xFFFFFFFF:
        raise ValueError(f"not a job or step id: {text!r} (4242, 4242.0, 4242.batch, "
                         "4242_3, 4242_[1-3])")
    if m.group(2) and m.group(2).startswith("["):
        array_tasks(m.group(2))
    job = m.group(1) + (f"_{m.group(2)}" if m.group(2) else "")
    return job, m.group(3)


def array_tasks(text: str) -> Set[int]:
    """"[1-3,7]" or "1-3,7" -> the task ids; ValueError for a malformed
    list or more than MAX_ARRAY_TASKS."""
    t = text.strip()
    if t.startswith("[") and t.endswith("]"):
        t = t[1:-1]
    out: Set[int] = set()
    for part in t.split(","):
        a, sep, b = part.partition("-")
        if not a.isdigit() or (sep and not b.isdigit()) or len(a) > 9 or len(b) > 9:
            raise ValueError(f"not an array task list: {text!r}")
        lo, hi = int(a), int(b) if sep else int(a)
        if hi < lo or len(out) + hi - lo >= MAX_ARRAY_TASKS:
            raise ValueError(f"not an array task list: {text!r}")
        out.update(range(lo, hi + 1))
    return out


# sacct(1), "TIME FORMATS" (-S, -E); checked here so that a typo is said in
# one line rather than by sacct's own message, and never reaches its argv.
_CLOCK = r"[0-9]{1,2}:[0-9]{2}(?::[0-9]{2})?"
_SACCT_TIME = [re.compile(p, re.I) for p in (
    r"now(?:[+-][0-9]{1,9}(?:s|sec|secs|second|seconds|m|min|mins|minute|minutes|h|hour|hours|"
    r"d|day|days|w|week|weeks)?)?",
    r"today|midnight|noon|elevenses|fika|teatime|tomorrow",
    _CLOCK + r"(?:am|pm)?",
    r"[0-9]{4}-[0-9]{2}-[0-9]{2}(?:T" + _CLOCK + r")?",
    r"[0-9]{2}[0-9]{2}(?:[0-9]{2})?(?:-" + _CLOCK + r")?",
    r"[0-9]{1,2}[./][0-9]{1,2}(?:[./][0-9]{2,4})?(?:-" + _CLOCK + r")?")]


def sacct_time(text: str) -> str:
    """A time sacct -S/-E takes (2026-11-01, 2026-11-01T08:00, now-7days,
    midnight, 11/01, 08:00...), returned as given; ValueError otherwise,
    including a date or clock that does not exist (month 13, 25:00)."""
    t = text.strip()
    if len(t) > 40 or not any(p.fullmatch(t) for p in _SACCT_TIME):
        raise ValueError(f"not a time sacct takes: {text!r} (2026-11-01, 2026-11-01T08:00, "
                         "now-7days, midnight, 08:00)")
    iso = re.fullmatch(r"([0-9]{4}-[0-9]{2}-[0-9]{2})(?:T(" + _CLOCK + "))?", t)
    clock = iso.group(2) if iso else (re.search(_CLOCK, t).group(0)  # type: ignore[union-attr]
                                      if re.search(_CLOCK, t) else None)
    try:
        if iso:
            time.strptime(iso.group(1), "%Y-%m-%d")
        if clock:
            hms = [int(x) for x in clock.split(":")]
            if hms[0] > 23 or hms[1] > 59 or (len(hms) > 2 and hms[2] > 59):
                raise ValueError(clock)
    except ValueError:
        raise ValueError(f"not a time sacct takes: {text!r} (no such date or time)") from None
    return t


# sacct(1), "JOB STATE CODES": what -s takes, by name or code.
JOB_STATES = {"BF": "BOOT_FAIL", "CA": "CANCELLED", "CD": "COMPLETED", "DL": "DEADLINE",
              "F": "FAILED", "NF": "NODE_FAIL", "OOM": "OUT_OF_MEMORY", "PD": "PENDING",
              "PR": "PREEMPTED", "R": "RUNNING", "RQ": "REQUEUED", "RS": "RESIZING",
              "RV": "REVOKED", "S": "SUSPENDED", "TO": "TIMEOUT"}


def job_states(text: str) -> List[str]:
    """"CD,F", "completed,failed" -> ["COMPLETED", "FAILED"] (sacct -s)."""
    out: List[str] = []
    for w in text.split(","):
        u = w.strip().upper()
        name = JOB_STATES.get(u, u if u in JOB_STATES.values() else None)
        if name is None:
            raise ValueError(f"not a job state: {w.strip()!r} (one of "
                             f"{', '.join(sorted(JOB_STATES.values()))}, or its code: CD, F...)")
        if name not in out:
            out.append(name)
    return out


def printable(text: Any, n: int = 80) -> str:
    """A planted name or a message as one printable ASCII line: what is
    not printable ASCII is escaped (\\n, \\xff), the rest clipped."""
    s = str(text).encode("utf-8", "surrogateescape").decode("ascii", "backslashreplace")
    s = "".join(c if c.isprintable() else c.encode("unicode_escape").decode("ascii")
                for c in s)
    return s if len(s) <= n else s[:n - 3] + "..."
