# SPDX-License-Identifier: BSD-3-Clause
"""What `mpi-pstate calibrate` measures with: the RAPL energy counters
(package + DRAM, as the agent counts a job's energy), one CPU's cpufreq
policy and its uncore limits (each put back as found), and the loads it
runs on that CPU: a scalar arithmetic loop and a poll on a shared-memory
word, as MPI libraries wait.  Root, on an idle node; model/calibrate.py
decides what to measure and writes the model."""
import glob
import mmap
import os
import signal
import statistics
import time
from typing import Any, Callable, Dict, List, Optional, Tuple

from . import powermodel
from ..core import safeio


# sysfs is the kernel's, but a file under sysroot is never reached through a symlink
O_SYSFS_WRITE = os.O_WRONLY | os.O_NOFOLLOW | os.O_CLOEXEC
# Frequencies measured besides --points, spread over the range, so that the
# knee is one of them (a knee between two points would be priced by a
# straight line it does not follow).  Drivers without a frequency table
# (intel_pstate, amd-pstate, cppc) get this many, rounded to GRID_KHZ.
KNEE_POINTS = 6
GRID_KHZ = 100000
UNCORE_DIR = "devices/system/cpu/intel_uncore_frequency"


class CalibrateError(RuntimeError):
    pass


def _read(path: str) -> Optional[str]:
    return safeio.read_sysfs(path)


def find_policy(sysroot: str, cpu: int) -> Optional[str]:
    for p in sorted(glob.glob(os.path.join(sysroot, "devices/system/cpu/cpufreq/policy*"))):
        cpus = (_read(os.path.join(p, "related_cpus")) or _read(os.path.join(p, "affected_cpus"))
                or "")
        if str(cpu) in cpus.split():
            return p
    return None


def rapl_zones(sysroot: str) -> List[str]:
    """Package zones and their DRAM sub-zones (what the agent sums)."""
    out = []
    for z in sorted(glob.glob(os.path.join(sysroot, "class/powercap/intel-rapl:*"))):
        name = _read(os.path.join(z, "name")) or ""
        if name.startswith("package") or name == "dram":
            out.append(z)
    return out


class Meter:
    """Joules since construction over the given zones, wrap-safe."""

    def __init__(self, zones: List[str]) -> None:
        self.fds, self.ranges, self.last = [], [], []
        for z in zones:
            rng = _read(os.path.join(z, "max_energy_range_uj"))
            try:
                fd = os.open(os.path.join(z, "energy_uj"), safeio.O_READ)
            except PermissionError:
                raise CalibrateError(f"{z}/energy_uj: permission denied (run as root)") from None
            self.fds.append(fd)
            self.ranges.append(int(rng) if rng and rng.isdigit() else 0)
        self.last = [self._raw(i) for i in range(len(self.fds))]
        self.total_uj = 0.0

    def _raw(self, i: int) -> int:
        v = os.pread(self.fds[i], 64, 0).decode().strip()
        if not v.isdigit():
            raise CalibrateError(f"energy_uj: malformed value {v[:20]!r}")
        return int(v)

    def read_j(self) -> float:
        for i in range(len(self.fds)):
            v = self._raw(i)
            d = v - self.last[i]
            if d < 0:
                d += self.ranges[i]
            self.total_uj += d
            self.last[i] = v
        return self.total_uj / 1e6

    def close(self) -> None:
        for fd in self.fds:
            os.close(fd)


class Policy:
    """One cpufreq policy, set to a frequency by the userspace governor's
    scaling_setspeed where it exists, else by scaling_max_freq (with
    scaling_min_freq at the bottom): the two ways the agent lowers."""

    ATTRS = ("scaling_governor", "scaling_min_freq", "scaling_max_freq")

    def __init__(self, path: str) -> None:
        self.path = path
        self.saved = {a: _read(os.path.join(path, a)) for a in self.ATTRS}
        govs = (_read(os.path.join(path, "scaling_available_governors")) or "").split()
        self.driver = _read(os.path.join(path, "scaling_driver")) or "?"
        self.hw_min = int(_read(os.path.join(path, "cpuinfo_min_freq")) or 0)
        self.hw_max = int(_read(os.path.join(path, "cpuinfo_max_freq")) or 0)
        if not self.hw_min or not self.hw_max:
            raise CalibrateError(f"{path}: no cpuinfo_min_freq/cpuinfo_max_freq")
        avail = (_read(os.path.join(path, "scaling_available_frequencies")) or "").split()
        table = {int(f) for f in avail if f.isdigit()}
        if not table:  # any value is rounded by the driver: a grid over the range
            step = (self.hw_max - self.hw_min) / (KNEE_POINTS - 1)
            table = {round((self.hw_min + i * step) / GRID_KHZ) * GRID_KHZ
                     for i in range(1, KNEE_POINTS - 1)}
            table = {f for f in table if self.hw_min < f < self.hw_max}
        self.freqs = sorted(table | {self.hw_min, self.hw_max})
        self.method = "setspeed" if "userspace" in govs else "max_freq"
        self.domain = len((_read(os.path.join(path, "related_cpus")) or "0").split())
        self.fd: Optional[int] = None

    def _write(self, attr: str, value: str) -> None:
        fd = os.open(os.path.join(self.path, attr), O_SYSFS_WRITE)
        try:
            os.write(fd, value.encode())
        finally:
            os.close(fd)

    def take(self) -> None:
        if self.method == "setspeed":
            self._write("scaling_governor", "userspace")
            self.fd = os.open(os.path.join(self.path, "scaling_setspeed"), O_SYSFS_WRITE)
        else:
            self._write("scaling_min_freq", str(self.hw_min))
            self.fd = os.open(os.path.join(self.path, "scaling_max_freq"), O_SYSFS_WRITE)

    def set(self, khz: int) -> None:
        assert self.fd is not None
        os.pwrite(self.fd, str(khz).encode(), 0)

    def restore(self) -> None:
        if self.fd is not None:
            os.close(self.fd)
            self.fd = None
        for a in ("scaling_governor", "scaling_max_freq", "scaling_min_freq",
                  "scaling_max_freq"):
            v = self.saved.get(a)
            if v:
                try:
                    self._write(a, v)
                except OSError:
                    pass


def _write_attr(path: str, value: int) -> None:
    """value as the agent writes an uncore limit: decimal, a newline."""
    fd = os.open(path, O_SYSFS_WRITE)
    try:
        os.write(fd, f"{value}\n".encode())
    finally:
        os.close(fd)


def _uint(text: Optional[str]) -> Optional[int]:
    return int(text) if text is not None and text.isdigit() and len(text) < 12 else None


def uncore_domains(sysroot: str) -> List[Dict[str, Any]]:
    """The node's intel_uncore_frequency package roots and their CPUs (by
    topology/physical_package_id and die_id, as the agent maps them)."""
    base = os.path.join(sysroot, UNCORE_DIR)
    try:
        names = sorted(n for n in os.listdir(base) if powermodel.UNCORE_NAME(n))
    except OSError:
        return []
    doms = []
    for n in names[:powermodel.UNCORE_MAX_DOMAINS]:
        pkg, die = n[len("package_"):].split("_die_")
        doms.append({"name": n, "dir": os.path.join(base, n), "package": int(pkg),
                     "die": int(die), "cpus": []})
    for c in sorted(glob.glob(os.path.join(sysroot, "devices/system/cpu/cpu[0-9]*"))):
        cpu = _uint(os.path.basename(c)[3:])
        pkg = _uint(_read(os.path.join(c, "topology/physical_package_id")))
        die = _uint(_read(os.path.join(c, "topology/die_id"))) or 0
        for d in doms:
            if cpu is not None and (d["package"], d["die"]) == (pkg, die):
                d["cpus"].append(cpu)
    return doms


class Uncore:
    """The uncore domain holding the measured CPU: its package root and, on
    TPMI, that package's uncoreNN clusters, whose limits are saved here and
    put back exactly (root first: its write fans out to the clusters)."""

    def __init__(self, sysroot: str, cpu: int) -> None:
        doms = uncore_domains(sysroot)
        mine = [d for d in doms if cpu in d["cpus"]] or (doms if len(doms) == 1 else [])
        if not mine:
            raise CalibrateError(f"uncore: no {UNCORE_DIR} domain holds CPU {cpu}")
        self.domains = doms
        self.dom = mine[0]
        self.dirs = [self.dom["dir"]]
        base = os.path.dirname(self.dom["dir"])
        for c in sorted(glob.glob(os.path.join(base, "uncore[0-9]*"))):
            if _uint(_read(os.path.join(c, "package_id"))) == self.dom["package"]:
                self.dirs.append(c)
        self.saved: Dict[str, Tuple[int, int]] = {}
        for d in self.dirs:
            lo = _uint(_read(os.path.join(d, "min_freq_khz")))
            hi = _uint(_read(os.path.join(d, "max_freq_khz")))
            if lo is None or hi is None:
                raise CalibrateError(f"{d}: min_freq_khz/max_freq_khz unreadable")
            self.saved[d] = (lo, hi)
        lo, hi = self.saved[self.dom["dir"]]
        initial = _uint(_read(os.path.join(self.dom["dir"], "initial_min_freq_khz")))
        # the agent's low end: the initial minimum, an admin's raised minimum kept
        self.low, self.high = max(initial or lo, lo), hi
        self.changed = False

    def set_max(self, khz: int) -> float:
        """Limits the root's maximum; the write's time in s."""
        self.changed = True
        a = time.perf_counter()
        _write_attr(os.path.join(self.dom["dir"], "max_freq_khz"), khz)
        return time.perf_counter() - a

    def settle_s(self, khz: int, limit: float = 1.0) -> Optional[float]:
        """How long the uncore's current frequency takes to reach khz or
        below, where a current_freq_khz says (the root, else a cluster)."""
        cur = [os.path.join(d, "current_freq_khz") for d in self.dirs]
        cur = [c for c in cur if _read(c) is not None][:1]
        if not cur:
            return None
        a = time.monotonic()
        while time.monotonic() - a < limit:
            v = _uint(_read(cur[0]))
            if v is not None and v <= khz:
                return time.monotonic() - a
            time.sleep(0.0005)
        return None

    def restore(self) -> None:
        """Every saved limit back, maximum first (a raised maximum never
        refuses the minimum), the root before its clusters."""
        if not self.changed:
            return
        for d in self.dirs:
            lo, hi = self.saved[d]
            for attr, v in (("max_freq_khz", hi), ("min_freq_khz", lo)):
                try:
                    _write_attr(os.path.join(d, attr), v)
                except OSError:
                    pass
        self.changed = False


def _busy(flag: mmap.mmap) -> None:
    x = 1.0
    while flag[0] == 0:
        for _ in range(1000):
            x = x * 1.0000001 + 1e-9


def _poll(flag: mmap.mmap) -> None:
    while flag[0] == 0:  # what an MPI progress loop does: read a word, again
        pass


class Load:
    """A child process pinned to cpu running a busy or polling loop until
    stopped; kind "idle" runs nothing."""

    def __init__(self, kind: str, cpu: int) -> None:
        self.pid = 0
        self.flag = mmap.mmap(-1, mmap.PAGESIZE)
        if kind == "idle":
            return
        fn: Callable[[mmap.mmap], None] = _busy if kind == "busy" else _poll
        pid = os.fork()
        if pid == 0:  # child
            try:
                signal.signal(signal.SIGINT, signal.SIG_DFL)
                signal.signal(signal.SIGTERM, signal.SIG_DFL)
                os.sched_setaffinity(0, {cpu})
                fn(self.flag)
            finally:
                os._exit(0)
        self.pid = pid

    def stop(self) -> None:
        self.flag[0] = 1
        if self.pid:
            try:
                os.kill(self.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            os.waitpid(self.pid, 0)
            self.pid = 0


def measure(meter: Meter, pol: Policy, cpu: int, kind: str, khz: int, seconds: float,
            settle: float = 0.25) -> float:
    """Node power in W with `kind` on cpu at khz."""
    pol.set(khz)
    load = Load(kind, cpu)
    try:
        time.sleep(settle)
        e0, t0 = meter.read_j(), time.monotonic()
        time.sleep(seconds)
        e1, t1 = meter.read_j(), time.monotonic()
    finally:
        load.stop()
    return (e1 - e0) / (t1 - t0)


def thread_cpu_s() -> float:
    """This thread's CPU time: time.thread_time (3.7) on Linux."""
    return time.clock_gettime(time.CLOCK_THREAD_CPUTIME_ID)


def transition_cost(meter: Meter, pol: Policy, cpu: int, hi: int, lo: int, seconds: float,
                    p_hi: float, p_lo: float, period: float = 0.005) -> Dict[str, float]:
    """Lower+raise pairs under a busy load, one every `period` seconds from a
    writer that sleeps in between as the agent does: the write latency, the
    energy beyond what the time spent at each frequency costs in steady
    state (the writer's own wake-ups included, as the agent's would be), and
    the writer's CPU per pair."""
    load = Load("busy", cpu)
    lat: List[float] = []
    t_hi = t_lo = 0.0
    try:
        pol.set(hi)
        time.sleep(0.25)
        e0 = meter.read_j()
        c0 = thread_cpu_s()
        t = start = time.monotonic()
        while t - start < seconds:
            for khz, pause in ((lo, period * 0.4), (hi, period * 0.6)):
                a = time.perf_counter()
                pol.set(khz)
                lat.append(time.perf_counter() - a)
                time.sleep(pause)
                t2 = time.monotonic()
                if khz == lo:
                    t_lo += t2 - t
                else:
                    t_hi += t2 - t
                t = t2
        e1 = meter.read_j()
        cpu_s = thread_cpu_s() - c0
    finally:
        load.stop()
        pol.set(hi)
    pairs = len(lat) // 2
    extra = (e1 - e0) - (p_hi * t_hi + p_lo * t_lo)
    lat.sort()
    return {"write_us": round(statistics.median(lat) * 1e6, 2),
            "write_us_p90": round(lat[int(0.9 * (len(lat) - 1))] * 1e6, 2),
            "pairs": pairs, "energy_uj": round(extra / max(pairs, 1) * 1e6, 3),
            # what a pair costs the agent's CPU budget: two writes and the
            # two wake-ups around them (a deadline, a rank leaving)
            "pair_cpu_us": round(cpu_s / max(pairs, 1) * 1e6, 1)}


def reaction(cpus: List[int], samples: int = 200, nap: float = 0.002) -> Dict[str, float]:
    """How late a sleeping process wakes up while every CPU of the node runs
    a polling loop, as during a job whose ranks wait: the agent sleeps until
    a threshold passes, then has to get a CPU to lower the core."""
    loads = [Load("poll", c) for c in cpus]
    lat: List[float] = []
    try:
        time.sleep(0.25)
        for _ in range(samples):
            a = time.perf_counter()
            time.sleep(nap)
            lat.append(max(0.0, time.perf_counter() - a - nap))
    finally:
        for ld in loads:
            ld.stop()
    lat.sort()
    return {"reaction_us": round(statistics.median(lat) * 1e6, 1),
            "reaction_us_p90": round(lat[int(0.9 * (len(lat) - 1))] * 1e6, 1)}
