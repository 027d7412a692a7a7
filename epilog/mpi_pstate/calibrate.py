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

then writes the model atomically.  On a node without RAPL or without a
cpufreq driver it says so and stores nothing; on a node where a job may
hold a core (a restore record, a step's agent running) it refuses: the
"as found" settings it puts back would be a job's lowered ones, which later
jobs would save as their baseline.  The CPU's frequency policy is put back
as it was found, whatever happens (signals included)."""
from __future__ import annotations

import glob
import json
import mmap
import os
import platform
import signal
import statistics
import sys
import time
from typing import Any, Callable, Optional

from . import config, node, noderec, powermodel, safeio

PROG = "mpi-pstate calibrate"
# sysfs is the kernel's, but a file under sysroot is never reached through a symlink
O_SYSFS_WRITE = os.O_WRONLY | os.O_NOFOLLOW | os.O_CLOEXEC


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


def rapl_zones(sysroot: str) -> list[str]:
    """Package zones and their DRAM sub-zones (what the agent sums)."""
    out = []
    for z in sorted(glob.glob(os.path.join(sysroot, "class/powercap/intel-rapl:*"))):
        name = _read(os.path.join(z, "name")) or ""
        if name.startswith("package") or name == "dram":
            out.append(z)
    return out


class Meter:
    """Joules since construction over the given zones, wrap-safe."""

    def __init__(self, zones: list[str]) -> None:
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
        self.freqs = sorted({int(f) for f in avail if f.isdigit()} | {self.hw_min, self.hw_max})
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


def transition_cost(meter: Meter, pol: Policy, cpu: int, hi: int, lo: int, seconds: float,
                    p_hi: float, p_lo: float, period: float = 0.005) -> dict[str, float]:
    """Lower+raise pairs under a busy load, one every `period` seconds from a
    writer that sleeps in between as the agent does: the write latency, the
    energy beyond what the time spent at each frequency costs in steady
    state (the writer's own wake-ups included, as the agent's would be), and
    the writer's CPU per pair."""
    load = Load("busy", cpu)
    lat: list[float] = []
    t_hi = t_lo = 0.0
    try:
        pol.set(hi)
        time.sleep(0.25)
        e0 = meter.read_j()
        c0 = time.thread_time()
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
        cpu_s = time.thread_time() - c0
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


def reaction(cpus: list[int], samples: int = 200, nap: float = 0.002) -> dict[str, float]:
    """How late a sleeping process wakes up while every CPU of the node runs
    a polling loop, as during a job whose ranks wait: the agent sleeps until
    a threshold passes, then has to get a CPU to lower the core."""
    loads = [Load("poll", c) for c in cpus]
    lat: list[float] = []
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


def pick_freqs(freqs: list[int], n: int) -> list[int]:
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


def busy(runtime: str) -> list[str]:
    """What says a job may hold a core of this node (docs/admin.md, "Files
    on the node"): restore records in <runtime>/restore (a domain a step
    changed and has not put back), and step directories
    <runtime>/steps/<job>.<step> whose agent.pid names a running process
    (the plugin removes the pidfile when it stops the agent).  A directory
    that cannot be trusted or read counts as busy: calibrate cannot tell."""
    out: list[str] = []
    for sub in ("restore", "steps"):
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
            if sub == "restore":
                if names:
                    out.append(f"restore records in {d} ({', '.join(names[:8])}"
                               + (" ..." if len(names) > 8 else "") + "): a job holds cores "
                               "clocked down, or its agent died before putting them back")
                continue
            for n in names:
                m = node.STEP_DIR_RE.fullmatch(n)
                if m:
                    pid = _agent_pid(fd, n)
                    if pid != 0:
                        out.append(f"job {m.group(1)} step {m.group(2)} has a running agent"
                                   + (f" (pid {pid})" if pid > 0 else
                                      f" ({d}/{n}/agent.pid cannot be read)"))
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
        text = safeio.read_file(dfd, "agent.pid", 32, owners={0}).decode("ascii")
        pid = int(text.strip()) if text.strip().isdigit() else -1
    except FileNotFoundError:
        return 0
    except (OSError, UnicodeDecodeError):
        return -1
    finally:
        os.close(dfd)
    if pid <= 0:
        return -1
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return 0
    except PermissionError:
        pass
    return pid


def runtime_here(a: Any) -> str:
    """This node's runtime_dir: --runtime-dir, else the plugstack line's."""
    cfg = config.load(getattr(a, "slurm_conf", None), None, getattr(a, "runtime_dir", None))
    return config.expand_host(cfg.runtime_dir, config.short_host())


def calibrate(sysroot: str, cpu: int, seconds: float, reps: int, npoints: int,
              meter_label: str, say: Callable[[str], None],
              runtime: Optional[str] = None) -> dict[str, Any]:
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
    pol = Policy(ppath)
    meter = Meter(zones)
    freqs = pick_freqs(pol.freqs, max(2, npoints))
    hi, lo = freqs[-1], freqs[0]
    samples: dict[tuple[str, int], list[float]] = {}
    old = {s: signal.getsignal(s) for s in (signal.SIGTERM, signal.SIGHUP)}

    def stop(sig: int, _frame: Any) -> None:
        raise KeyboardInterrupt(f"signal {sig}")
    for s in old:
        signal.signal(s, stop)
    try:
        pol.take()
        for rep in range(reps):
            order = [("idle", hi)] + [(k, f) for f in freqs for k in ("busy", "poll")]
            if rep % 2:
                order.reverse()  # slow drift hits every point alike
            for kind, khz in order:
                w = measure(meter, pol, cpu, kind, khz, seconds)
                samples.setdefault((kind, khz), []).append(w)
                say(f"  rep {rep + 1}/{reps}: {kind:<4} at {khz / 1e6:.2f} GHz: {w:8.2f} W")
        med = {k: statistics.median(v) for k, v in samples.items()}
        trans = transition_cost(meter, pol, cpu, hi, lo, min(1.0, seconds),
                                med[("busy", hi)], med[("busy", lo)])
        trans.update(reaction(sorted(os.sched_getaffinity(0))))
        say(f"  transition: write {trans['write_us']} us (p90 {trans['write_us_p90']}), "
            f"{trans['energy_uj']} uJ and {trans['pair_cpu_us']} us of CPU per lower+raise "
            f"pair ({trans['pairs']} pairs); wake-up "
            f"on a busy node {trans['reaction_us']} us (p90 {trans['reaction_us_p90']})")
    finally:
        pol.restore()
        meter.close()
        for s, h in old.items():
            signal.signal(s, h)
    # standard error of one point's median, pooled over every point
    devs = [statistics.stdev(v) for v in samples.values() if len(v) > 1]
    noise = (statistics.mean(devs) / reps ** 0.5) if devs else None
    return {
        "format": powermodel.MODEL_FORMAT, "version": powermodel.MODEL_VERSION,
        "created": round(time.time(), 3), "node": platform.node().split(".")[0],
        "cpu_model": cpu_model(), "driver": pol.driver, "method": pol.method, "cpu": cpu,
        "ncpu": os.cpu_count(), "domain_cpus": pol.domain, "meter": meter_label,
        "zones": [os.path.basename(z) for z in zones], "seconds": seconds, "reps": reps,
        "idle_w": round(med[("idle", hi)], 3),
        "noise_w": round(noise, 3) if noise is not None else 0.0,
        "noise_known": noise is not None,
        "points": [{"khz": f, "busy_w": round(med[("busy", f)], 3),
                    "poll_w": round(med[("poll", f)], 3)} for f in freqs],
        "transition": trans,
    }


def store(model: dict[str, Any], path: str) -> None:
    """Written as the node Epilog will read it: in a directory of root's (or
    the caller's) that nobody else may change, created if missing."""
    d = os.path.dirname(os.path.abspath(path))
    dfd = safeio.open_dir(d, trusted=safeio.trusted_owners(), create_mode=0o755)
    try:
        safeio.write_atomic(dfd, os.path.basename(path),
                            (json.dumps(model, indent=1) + "\n").encode(), mode=0o644)
    finally:
        os.close(dfd)


def text(m: dict[str, Any]) -> str:
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
    label = noderec.rapl_meter(os.path.realpath(a.sysroot), mi)
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
        store(m, path)
    except OSError as e:
        print(f"{PROG}: {path}: {e.strerror}: nothing stored", file=sys.stderr)
        return 1
    sys.stdout.write(json.dumps(m, indent=1) + "\n" if a.json else text(m))
    print(f"model stored in {path}")
    return 0
