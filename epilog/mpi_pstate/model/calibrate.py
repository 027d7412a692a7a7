# SPDX-License-Identifier: BSD-3-Clause
"""`mpi-pstate calibrate` (root, on an idle node): the node power model that
`report --what-if` predicts with (format "mpi-pstate-model", version 1,
docs/evaluation.md "The model file").

It measures, from the RAPL energy counters (package + DRAM, as the agent
counts a job's energy) and through the cpufreq driver, the node's power

  * idle (every CPU at its highest frequency, nothing running),
  * with one CPU busy (a scalar arithmetic loop) and with one CPU polling
    (spinning on a shared-memory word, as MPI libraries wait) at the
    highest, the lowest and some frequencies in between,
  * and the cost of a transition: how long one frequency write takes and
    what a lower+raise pair costs in energy beyond the steady states,
  * the knee: the frequency of least energy per cycle of a busy core
    (find_knee), which the agent's --low efficient uses where the driver
    names no lowest nonlinear frequency (it reads it from knee_khz beside
    the model),
  * where the node has intel_uncore_frequency, the node's power with the
    measured CPU's uncore limited to its lowest and to its highest
    frequency (the uncore lever's step),

then writes the model atomically.  On a node without RAPL or without a
cpufreq driver it says so and stores nothing; on a node where a job may
hold a core (a restore record, a step's agent running) it refuses: the
"as found" settings it puts back would be a job's lowered ones, which later
jobs would save as their baseline.  The CPU's frequency policy is put back
and the uncore's limits are put back as they were found, whatever happens
(signals included)."""
import contextlib
import glob
import json
import math
import mmap
import os
import platform
import signal
import statistics
import sys
import time
from typing import Any, Callable, Dict, Iterator, List, Optional, Tuple

from . import powermodel
from ..core import layout, livesteps, parse, safeio, siteconf, steprecords

PROG = "mpi-pstate calibrate"
# sysfs is the kernel's, but a file under sysroot is never reached through a symlink
O_SYSFS_WRITE = os.O_WRONLY | os.O_NOFOLLOW | os.O_CLOEXEC
# Frequencies measured besides --points, spread over the range, so that the
# knee is one of them (a knee between two points would be priced by a
# straight line it does not follow).  Drivers without a frequency table
# (intel_pstate, amd-pstate, cppc) get this many, rounded to GRID_KHZ.
KNEE_POINTS = 6
GRID_KHZ = 100000
# A frequency whose energy per cycle is within this share of the least (or
# within the noise) counts as least: the knee is the lowest such one, since
# below the knee a waiting core saves power and a working one no energy.
KNEE_TOLERANCE = 0.01
UNCORE_DIR = "devices/system/cpu/intel_uncore_frequency"


class CalibrateError(RuntimeError):
    pass


# ---- the hardware -------------------------------------------------------------

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


def find_knee(points: List[Dict[str, Any]], idle_w: float, noise_w: float = 0.0
              ) -> Optional[int]:
    """The knee of measured points: the lowest frequency whose energy per
    cycle of a busy core, (busy_w - idle_w) / f, is within KNEE_TOLERANCE
    (or twice the noise of a difference) of the least.  Below it a lower
    clock makes work dearer (the core's static power is paid over more
    time); a node whose power falls in proportion to f or faster has its
    knee at the lowest frequency.  None when the core's share cannot be
    told: a busy CPU drawing no more than the idle node at some frequency."""
    pts = sorted(points, key=lambda p: p["khz"])
    if not pts:
        return None
    noise = 2 * math.sqrt(2) * noise_w
    per_cycle = []
    for p in pts:
        core = p["busy_w"] - idle_w
        if core <= noise or p["khz"] <= 0:
            return None
        per_cycle.append(core / p["khz"])
    least = min(per_cycle)
    for p, e in zip(pts, per_cycle):
        if e <= least * (1 + KNEE_TOLERANCE) + noise / p["khz"]:
            return int(p["khz"])
    return None  # unreachable: the least is within its own tolerance


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


# ---- the loads --------------------------------------------------------------

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


def pick_freqs(freqs: List[int], n: int) -> List[int]:
    """n frequencies from the available ones: both ends and evenly between."""
    if n >= len(freqs):
        return list(freqs)
    idx = sorted({round(i * (len(freqs) - 1) / (n - 1)) for i in range(n)})
    return [freqs[i] for i in idx]


def cpu_model() -> str:
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()[:100]
    except OSError:
        pass
    return platform.machine()


def busy(runtime: str) -> List[str]:
    """What says a job may hold a core of this node (docs/admin.md, "Files
    on the node"): restore records in <runtime>/restore (a domain a step
    changed and has not put back), and step directories
    <runtime>/steps/<job>.<step> whose agent.pid names a running process
    (the plugin removes the pidfile when it stops the agent).  A directory
    that cannot be trusted or read counts as busy: calibrate cannot tell."""
    out: List[str] = []
    for sub in (layout.RESTORE_DIR, layout.STEPS_DIR):
        d = os.path.join(runtime, sub)
        try:
            fd = safeio.open_dir(d, trusted={0})
        except safeio.Missing:
            continue
        except OSError as e:
            out.append(f"{d} cannot be read ({e.strerror})")
            continue
        try:
            names = safeio.list_dir(fd)
            if sub == layout.RESTORE_DIR:
                if names:
                    out.append(f"restore records in {d} ({', '.join(names[:8])}"
                               + (" ..." if len(names) > 8 else "") + "): a job holds cores "
                               "clocked down, or its agent died before putting them back")
                continue
            for n in names:
                m = layout.STEP_DIR_RE.fullmatch(n)
                if m:
                    pid = _agent_pid(fd, n)
                    if pid != 0:
                        out.append(f"job {m.group(1)} step {m.group(2)} has a running agent"
                                   + (f" (pid {pid})" if pid > 0 else
                                      f" ({d}/{n}/{layout.AGENT_PID} cannot be read)"))
        finally:
            os.close(fd)
    return out


def _agent_pid(sfd: int, step: str) -> int:
    """The live agent of a step directory: its pid, 0 when none runs, -1
    when the pidfile cannot be trusted."""
    try:
        dfd = os.open(step, safeio.O_DIR, dir_fd=sfd)
    except OSError:
        return -1
    try:
        pid = livesteps.agent_pid(dfd)
    except FileNotFoundError:
        return 0
    except (OSError, ValueError):
        return -1
    finally:
        os.close(dfd)
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return 0
    except PermissionError:
        pass
    return pid


def runtime_here(a: Any) -> str:
    """This node's runtime_dir: --runtime-dir, else the plugstack line's."""
    cfg = siteconf.load(getattr(a, "slurm_conf", None), None, getattr(a, "runtime_dir", None))
    return siteconf.expand_host(cfg.runtime_dir, siteconf.short_host())


def calibrate(sysroot: str, cpu: int, seconds: float, reps: int, npoints: int,
              meter_label: str, say: Callable[[str], None],
              runtime: Optional[str] = None) -> Dict[str, Any]:
    """The node's power model, measured on cpu; CalibrateError when the node
    cannot be measured or is not idle, KeyboardInterrupt on SIGTERM or
    SIGHUP, each with the CPU's policy and the uncore's limits put back."""
    zones, ppath = measurable(sysroot, cpu, runtime)
    pol = Policy(ppath)
    unc = open_uncore(sysroot, cpu, say)
    meter = Meter(zones)
    freqs = measured_freqs(pol.freqs, npoints)
    usamples: Dict[Tuple[str, int], List[float]] = {}
    utimes: Dict[str, List[float]] = {"write": [], "settle": []}
    with signals_interrupt((signal.SIGTERM, signal.SIGHUP)):
        try:
            pol.take()
            samples = measure_points(meter, pol, cpu, freqs, seconds, reps, say)
            if unc and unc.low < unc.high:
                uncore_sweep(unc, meter, pol, cpu, freqs[0], seconds, reps, usamples, utimes,
                             say)
            trans = measure_transition(meter, pol, cpu, freqs, seconds, samples, say)
        finally:
            if unc:
                unc.restore()
            pol.restore()
            meter.close()
    m: Dict[str, Any] = {"format": powermodel.MODEL_FORMAT,
                         "version": powermodel.MODEL_VERSION,
                         **how_measured(pol, cpu, meter_label, zones, seconds, reps),
                         **power_figures(samples, freqs, reps), "transition": trans}
    knee = find_knee(m["points"], m["idle_w"], m["noise_w"])
    if knee is not None:
        m["knee_khz"] = knee
    if unc and usamples:
        m["uncore"] = uncore_figures(unc, freqs[0], usamples, utimes)
    return m


def measurable(sysroot: str, cpu: int, runtime: Optional[str]) -> Tuple[List[str], str]:
    """(RAPL zones, cpu's cpufreq policy directory) of a node calibrate may
    measure; CalibrateError without either, or while a job may hold a core
    (busy(): what it puts back would be the job's lowered settings)."""
    zones = rapl_zones(sysroot)
    if not zones:
        raise CalibrateError(f"no RAPL on this node ({sysroot}/class/powercap has no "
                             "intel-rapl package zone)")
    ppath = find_policy(sysroot, cpu)
    if not ppath:
        raise CalibrateError(f"no cpufreq driver for CPU {cpu} ({sysroot}/devices/system/cpu/"
                             "cpufreq has no policy with it)")
    why = busy(runtime) if runtime else []
    if why:
        raise CalibrateError("this node is not idle: " + "; ".join(why) + ". Calibrate a "
                             "drained node once its jobs have ended (their Epilog removes "
                             "these); `mpi-pstate-agent --restore DIR` puts back what a dead "
                             "job left")
    return zones, ppath


def open_uncore(sysroot: str, cpu: int, say: Callable[[str], None]) -> Optional[Uncore]:
    """cpu's uncore domain, None where the node has none or it cannot be
    driven (said: the core is still measured)."""
    if not uncore_domains(sysroot):
        return None
    try:
        return Uncore(sysroot, cpu)
    except CalibrateError as e:
        say(f"  {e}: the uncore is not measured")
        return None


def measured_freqs(available: List[int], npoints: int) -> List[int]:
    """The frequencies measured, ascending: npoints (at least both ends)
    and KNEE_POINTS spread over the range, so that the knee is one of them."""
    return sorted(set(pick_freqs(available, max(2, npoints)))
                  | set(pick_freqs(available, KNEE_POINTS)))


@contextlib.contextmanager
def signals_interrupt(sigs: Tuple[int, ...]) -> Iterator[None]:
    """Within it, each of sigs raises KeyboardInterrupt, so that a finally
    puts the hardware back as for ^C; the handlers found are put back."""
    def stop(sig: int, _frame: Any) -> None:
        raise KeyboardInterrupt(f"signal {sig}")
    old = {s: signal.getsignal(s) for s in sigs}
    for s in sigs:
        signal.signal(s, stop)
    try:
        yield
    finally:
        for s, h in old.items():
            signal.signal(s, h)


def point_order(freqs: List[int], rep: int) -> List[Tuple[str, int]]:
    """The (kind, kHz) points of one repetition: idle at the highest
    frequency, then busy and polling at each; every other repetition in
    reverse, so that a slow drift of the node's power hits every point
    alike."""
    order = [("idle", freqs[-1])] + [(k, f) for f in freqs for k in ("busy", "poll")]
    return order[::-1] if rep % 2 else order


def measure_points(meter: Meter, pol: Policy, cpu: int, freqs: List[int], seconds: float,
                   reps: int, say: Callable[[str], None]
                   ) -> Dict[Tuple[str, int], List[float]]:
    """The node's power at each point of point_order(), reps times."""
    samples: Dict[Tuple[str, int], List[float]] = {}
    for rep in range(reps):
        for kind, khz in point_order(freqs, rep):
            w = measure(meter, pol, cpu, kind, khz, seconds)
            samples.setdefault((kind, khz), []).append(w)
            say(f"  rep {rep + 1}/{reps}: {kind:<4} at {khz / 1e6:.2f} GHz: {w:8.2f} W")
    return samples


def measure_transition(meter: Meter, pol: Policy, cpu: int, freqs: List[int],
                       seconds: float, samples: Dict[Tuple[str, int], List[float]],
                       say: Callable[[str], None]) -> Dict[str, float]:
    """The model's "transition": a lower+raise pair between the highest and
    the lowest frequency (priced against their busy power measured), and
    how late the agent wakes up on a busy node."""
    hi, lo = freqs[-1], freqs[0]
    trans = transition_cost(meter, pol, cpu, hi, lo, min(1.0, seconds),
                            statistics.median(samples[("busy", hi)]),
                            statistics.median(samples[("busy", lo)]))
    trans.update(reaction(sorted(os.sched_getaffinity(0))))
    say(f"  transition: write {trans['write_us']} us (p90 {trans['write_us_p90']}), "
        f"{trans['energy_uj']} uJ and {trans['pair_cpu_us']} us of CPU per lower+raise "
        f"pair ({trans['pairs']} pairs); wake-up "
        f"on a busy node {trans['reaction_us']} us (p90 {trans['reaction_us_p90']})")
    return trans


def how_measured(pol: Policy, cpu: int, meter_label: str, zones: List[str], seconds: float,
                 reps: int) -> Dict[str, Any]:
    """The model's fields that say where, when and how it was measured."""
    return {"created": round(time.time(), 3), "node": platform.node().split(".")[0],
            "cpu_model": cpu_model(), "driver": pol.driver, "method": pol.method, "cpu": cpu,
            "ncpu": os.cpu_count(), "domain_cpus": pol.domain, "meter": meter_label,
            "zones": [os.path.basename(z) for z in zones], "seconds": seconds, "reps": reps}


def power_figures(samples: Dict[Tuple[str, int], List[float]], freqs: List[int], reps: int
                  ) -> Dict[str, Any]:
    """The model's idle power, noise and points: each point's median over
    the repetitions; the noise, the standard error of one point's median
    pooled over every point, unknown (0, noise_known false) with one
    repetition."""
    med = {k: statistics.median(v) for k, v in samples.items()}
    devs = [statistics.stdev(v) for v in samples.values() if len(v) > 1]
    noise = (statistics.mean(devs) / reps ** 0.5) if devs else None
    return {"idle_w": round(med[("idle", freqs[-1])], 3),
            "noise_w": round(noise, 3) if noise is not None else 0.0,
            "noise_known": noise is not None,
            "points": [{"khz": f, "busy_w": round(med[("busy", f)], 3),
                        "poll_w": round(med[("poll", f)], 3)} for f in freqs]}


def uncore_sweep(unc: Uncore, meter: Meter, pol: Policy, cpu: int, khz: int, seconds: float,
                 reps: int, samples: Dict[Tuple[str, int], List[float]],
                 times: Dict[str, List[float]], say: Callable[[str], None]) -> None:
    """The node's power with the uncore's maximum at its low and its high
    end, the CPU busy or polling at khz (the core's low frequency: while a
    whole package waits, its cores are down too), and how long a write and
    the uncore's own change take."""
    for rep in range(reps):
        order = [(k, u) for u in (unc.low, unc.high) for k in ("busy", "poll")]
        if rep % 2:
            order.reverse()
        for kind, ukhz in order:
            times["write"].append(unc.set_max(ukhz))
            if ukhz == unc.low:
                t = unc.settle_s(ukhz)
                if t is not None:
                    times["settle"].append(t)
            w = measure(meter, pol, cpu, kind, khz, seconds)
            samples.setdefault((kind, ukhz), []).append(w)
            say(f"  rep {rep + 1}/{reps}: {kind:<4} at {khz / 1e6:.2f} GHz, uncore at most "
                f"{ukhz / 1e6:.2f} GHz: {w:8.2f} W")
    unc.restore()


def uncore_figures(unc: Uncore, khz: int, samples: Dict[Tuple[str, int], List[float]],
                   times: Dict[str, List[float]]) -> Dict[str, Any]:
    """The model's "uncore" object (docs/evaluation.md, "The model file")."""
    med = {k: statistics.median(v) for k, v in samples.items()}
    u: Dict[str, Any] = {"domain": unc.dom["name"], "min_khz": unc.low, "max_khz": unc.high,
                         "core_khz": khz}
    for kind in ("busy", "poll"):
        u[f"{kind}_w_at_min"] = round(med[(kind, unc.low)], 3)
        u[f"{kind}_w_at_max"] = round(med[(kind, unc.high)], 3)
    if times["write"]:
        u["write_us"] = round(statistics.median(times["write"]) * 1e6, 2)
    if times["settle"]:
        u["latency_us"] = round(statistics.median(times["settle"]) * 1e6, 1)
    u["domains"] = [{"name": d["name"], "cpus": parse.compress_list(d["cpus"])}
                    for d in unc.domains]
    return u


def knee_value(model: Dict[str, Any]) -> int:
    """What the knee file says: the knee, else the lowest frequency measured
    (the agent takes a knee at cpuinfo_min as none: --low efficient is then
    min), so that a new calibration never leaves an older knee behind."""
    return int(model.get("knee_khz") or model["points"][0]["khz"])


def store(model: Dict[str, Any], path: str) -> str:
    """Written as the node Epilog will read it: in a directory of root's (or
    the caller's) that nobody else may change, created if missing; the knee
    beside it, one decimal kHz number (layout.KNEE_FILE: what the agent reads for
    --low efficient, a file of root's not writable by others).  Returns the
    knee file's path."""
    d = os.path.dirname(os.path.abspath(path))
    dfd = safeio.open_dir(d, trusted=safeio.trusted_owners(), create_mode=0o755)
    try:
        safeio.write_atomic(dfd, os.path.basename(path),
                            (json.dumps(model, indent=1) + "\n").encode(), mode=0o644)
        safeio.write_atomic(dfd, layout.KNEE_FILE, f"{knee_value(model)}\n".encode(), mode=0o644)
    finally:
        os.close(dfd)
    return os.path.join(d, layout.KNEE_FILE)


def text(m: Dict[str, Any]) -> str:
    lines = [f"node {m['node']} ({m['cpu_model']}), driver {m['driver']} via {m['method']}, "
             f"CPU {m['cpu']} (domain of {m['domain_cpus']}), energy {m['meter']} "
             f"({' + '.join(m['zones'])})",
             f"  idle {m['idle_w']:.2f} W; noise {m['noise_w']:.3f} W"
             + ("" if m.get("noise_known") else " (one repetition: unknown, give --reps 2+)"),
             "  frequency      busy W    poll W"]
    for p in m["points"]:
        lines.append(f"  {p['khz'] / 1e6:6.2f} GHz   {p['busy_w']:8.2f}  {p['poll_w']:8.2f}")
    hi, lo = m["points"][-1], m["points"][0]
    lines.append(f"  a waiting core clocked down from {hi['khz'] / 1e6:.2f} to "
                 f"{lo['khz'] / 1e6:.2f} GHz saves {hi['poll_w'] - lo['poll_w']:.2f} W")
    k = m.get("knee_khz")
    lines.append(f"  knee (least energy per cycle of a busy core): {k / 1e6:.2f} GHz"
                 + (" (the lowest frequency: no knee above it)" if k == lo["khz"] else "")
                 if k else "  knee: not measurable (a busy CPU draws no more than the idle "
                 "node at some frequency)")
    u = m.get("uncore")
    if u:
        lines.append(f"  uncore {u.get('domain', '?')} at most {u['min_khz'] / 1e6:.2f} instead "
                     f"of {u['max_khz'] / 1e6:.2f} GHz saves "
                     f"{u['poll_w_at_max'] - u['poll_w_at_min']:.2f} W polling, "
                     f"{u['busy_w_at_max'] - u['busy_w_at_min']:.2f} W busy (core at "
                     f"{u['core_khz'] / 1e6:.2f} GHz); settles in "
                     + (f"{u['latency_us'] / 1000:.1f} ms" if "latency_us" in u else "?"))
    t = m["transition"]
    lines.append(f"  transition: write {t['write_us']} us, {t['energy_uj']} uJ per pair; wake-up "
                 f"on a busy node {t.get('reaction_us')} us (p90 {t.get('reaction_us_p90')})")
    return "\n".join(lines) + "\n"


def run(a: Any) -> int:
    say = (lambda s: None) if a.quiet else (lambda s: print(s, file=sys.stderr, flush=True))
    if os.geteuid() != 0 and not a.sysroot_given:
        print(f"{PROG}: must run as root (RAPL energy_uj and cpufreq writes)", file=sys.stderr)
        return 1
    cpu = a.cpu if a.cpu is not None else max(os.sched_getaffinity(0))
    try:
        mi = open("/proc/self/mountinfo").read(4 << 20)
    except OSError:
        mi = ""
    label = steprecords.rapl_meter(os.path.realpath(a.sysroot), mi)
    say(f"{PROG}: CPU {cpu}, {a.seconds:g} s per point, {a.reps} repetitions"
        + ("" if label == "rapl" else " (powercap is not the kernel's sysfs: SIMULATED)"))
    try:
        runtime = runtime_here(a)
    except ValueError as e:  # a runtime_dir calibrate cannot check: it does not guess
        print(f"{PROG}: runtime_dir: {e}: nothing measured", file=sys.stderr)
        return 1
    try:
        m = calibrate(a.sysroot, cpu, a.seconds, a.reps, a.points, label, say, runtime)
    except CalibrateError as e:
        print(f"{PROG}: {e}: nothing stored", file=sys.stderr)
        return 1
    except KeyboardInterrupt as e:
        print(f"{PROG}: interrupted ({e}): frequencies restored, nothing stored",
              file=sys.stderr)
        return 1
    powermodel.validate_model(m)  # what we write, we can read
    if a.model == "-":
        sys.stdout.write(json.dumps(m, indent=1) + "\n")
        return 0
    path = powermodel.model_path(a.model)
    try:
        knee = store(m, path)
    except OSError as e:
        print(f"{PROG}: {path}: {e.strerror}: nothing stored", file=sys.stderr)
        return 1
    sys.stdout.write(json.dumps(m, indent=1) + "\n" if a.json else text(m))
    print(f"model stored in {path}, knee in {knee}"
          + ("" if knee == layout.AGENT_KNEE_FILE else
             f" (the agent reads {layout.AGENT_KNEE_FILE}: give it --knee-file {knee})"))
    return 0
