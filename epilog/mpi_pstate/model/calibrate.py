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
import json
import math
import os
import platform
import signal
import statistics
import sys
import time
from typing import Any, Callable, Dict, Iterator, List, Optional, Tuple

from . import instruments, powermodel
from ..core import layout, livesteps, parse, safeio, siteconf, steprecords

PROG = "mpi-pstate calibrate"
# A frequency whose energy per cycle is within this share of the least (or
# within the noise) counts as least: the knee is the lowest such one, since
# below the knee a waiting core saves power and a working one no energy.
KNEE_TOLERANCE = 0.01


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
    """The node's power model, measured on cpu; instruments.CalibrateError when the node
    cannot be measured or is not idle, KeyboardInterrupt on SIGTERM or
    SIGHUP, each with the CPU's policy and the uncore's limits put back."""
    zones, ppath = measurable(sysroot, cpu, runtime)
    pol = instruments.Policy(ppath)
    unc = open_uncore(sysroot, cpu, say)
    meter = instruments.Meter(zones)
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
    measure; instruments.CalibrateError without either, or while a job may hold a core
    (busy(): what it puts back would be the job's lowered settings)."""
    zones = instruments.rapl_zones(sysroot)
    if not zones:
        raise instruments.CalibrateError(f"no RAPL on this node ({sysroot}/class/powercap has no "
                             "intel-rapl package zone)")
    ppath = instruments.find_policy(sysroot, cpu)
    if not ppath:
        raise instruments.CalibrateError(f"no cpufreq driver for CPU {cpu} ({sysroot}/devices/system/cpu/"
                             "cpufreq has no policy with it)")
    why = busy(runtime) if runtime else []
    if why:
        raise instruments.CalibrateError("this node is not idle: " + "; ".join(why) + ". Calibrate a "
                             "drained node once its jobs have ended (their Epilog removes "
                             "these); `mpi-pstate-agent --restore DIR` puts back what a dead "
                             "job left")
    return zones, ppath


def open_uncore(sysroot: str, cpu: int, say: Callable[[str], None]) -> Optional[instruments.Uncore]:
    """cpu's uncore domain, None where the node has none or it cannot be
    driven (said: the core is still measured)."""
    if not instruments.uncore_domains(sysroot):
        return None
    try:
        return instruments.Uncore(sysroot, cpu)
    except instruments.CalibrateError as e:
        say(f"  {e}: the uncore is not measured")
        return None


def measured_freqs(available: List[int], npoints: int) -> List[int]:
    """The frequencies measured, ascending: npoints (at least both ends)
    and instruments.KNEE_POINTS spread over the range, so that the knee is one of them."""
    return sorted(set(pick_freqs(available, max(2, npoints)))
                  | set(pick_freqs(available, instruments.KNEE_POINTS)))


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


def measure_points(meter: instruments.Meter, pol: instruments.Policy, cpu: int, freqs: List[int], seconds: float,
                   reps: int, say: Callable[[str], None]
                   ) -> Dict[Tuple[str, int], List[float]]:
    """The node's power at each point of point_order(), reps times."""
    samples: Dict[Tuple[str, int], List[float]] = {}
    for rep in range(reps):
        for kind, khz in point_order(freqs, rep):
            w = instruments.measure(meter, pol, cpu, kind, khz, seconds)
            samples.setdefault((kind, khz), []).append(w)
            say(f"  rep {rep + 1}/{reps}: {kind:<4} at {khz / 1e6:.2f} GHz: {w:8.2f} W")
    return samples


def measure_transition(meter: instruments.Meter, pol: instruments.Policy, cpu: int, freqs: List[int],
                       seconds: float, samples: Dict[Tuple[str, int], List[float]],
                       say: Callable[[str], None]) -> Dict[str, float]:
    """The model's "transition": a lower+raise pair between the highest and
    the lowest frequency (priced against their busy power measured), and
    how late the agent wakes up on a busy node."""
    hi, lo = freqs[-1], freqs[0]
    trans = instruments.transition_cost(meter, pol, cpu, hi, lo, min(1.0, seconds),
                            statistics.median(samples[("busy", hi)]),
                            statistics.median(samples[("busy", lo)]))
    trans.update(instruments.reaction(sorted(os.sched_getaffinity(0))))
    say(f"  transition: write {trans['write_us']} us (p90 {trans['write_us_p90']}), "
        f"{trans['energy_uj']} uJ and {trans['pair_cpu_us']} us of CPU per lower+raise "
        f"pair ({trans['pairs']} pairs); wake-up "
        f"on a busy node {trans['reaction_us']} us (p90 {trans['reaction_us_p90']})")
    return trans


def how_measured(pol: instruments.Policy, cpu: int, meter_label: str, zones: List[str], seconds: float,
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


def uncore_sweep(unc: instruments.Uncore, meter: instruments.Meter, pol: instruments.Policy, cpu: int, khz: int, seconds: float,
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
            w = instruments.measure(meter, pol, cpu, kind, khz, seconds)
            samples.setdefault((kind, ukhz), []).append(w)
            say(f"  rep {rep + 1}/{reps}: {kind:<4} at {khz / 1e6:.2f} GHz, uncore at most "
                f"{ukhz / 1e6:.2f} GHz: {w:8.2f} W")
    unc.restore()


def uncore_figures(unc: instruments.Uncore, khz: int, samples: Dict[Tuple[str, int], List[float]],
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
    except instruments.CalibrateError as e:
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
