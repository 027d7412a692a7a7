#!/usr/bin/python3
"""Fake cpufreq and RAPL powercap hardware with the kernel's sysfs semantics.

One FUSE file system serves two trees below MOUNTPOINT:

  MOUNTPOINT/cpufreq/   bind-mounted on /sys/devices/system/cpu/cpufreq
  MOUNTPOINT/powercap/  bind-mounted on /sys/class/powercap

The shape ("flavour") comes from a JSON file that is re-read whenever its
mtime changes, which resets the hardware to its power-on state, so a test can
switch a running node from acpi-cpufreq to intel_pstate without restarting
slurmd.  Rules that hold as on a real kernel:

* a write replaces the value (no stale tail as on a plain file);
* a governor that is not available, a malformed number, or scaling_setspeed
  under any governor but userspace fails with EINVAL;
* read-only attributes are 0444 and energy_uj is 0400 root (Linux >= 5.10),
  enforced by the kernel through default_permissions;
* energy_uj advances with a power model driven by the current frequencies and
  wraps at max_energy_range_uj.

Power model (watts, per socket): pkg_idle_w + the sum over its CPUs of
core_dyn_w * (f / fmax)^2 * busy, plus dram_w on the DRAM zone.  With the
default "load": "none", busy is 1 for every CPU whatever runs on it (the
model every test before the what-if validation was written against).  With
"load": "proc", busy is the share of samples (every load_period_s) in which
a task of this node (a process in the fake's own mount namespace) was
running or runnable (state R in /proc/PID/stat) and last ran on that CPU
(field 39): a computing task and an MPI wait that polls are busy, a task
blocked in the kernel (an MPI that sleeps, an idle core) draws nothing
dynamic.  Contention with the machine's other work does not change it: a
runnable task counts as if it had its own core.

"unreadable": true makes every cpufreq attribute fail to read and write with
EIO (a driver or firmware fault: root cannot read it either), and
"delay_s": S makes every cpufreq read and write take S seconds more (a slow
firmware interface), for the tests that such a node is never drained
(test_never_drain.py).

Every accepted write, and every refused one, is appended to the write log as
"<CLOCK_MONOTONIC seconds> policy<N> <attr>=<value> [EINVAL]" so tests can
assert the exact sequence of P-state changes.

usage: fakesys.py MOUNTPOINT CONFIG.json WRITELOG
"""
from __future__ import annotations

import errno
import json
import os
import stat
import sys
import threading
import time
from typing import Any, Optional

from fusepy import FUSE, FuseOSError, Operations  # Debian python3-fusepy

DEFAULTS: dict[str, Any] = {
    "driver": "acpi-cpufreq",  # or "intel_pstate", or "cppc_cpufreq" (Arm: no frequency table)
    "ncpu": 2,
    "cpus_per_policy": 1,  # 2 = one policy spanning both CPUs (package-wide domain)
    "freqs_khz": [3000000, 2400000, 1800000, 1200000],
    "sockets": 1,
    "rapl": True,
    "max_energy_range_uj": 262143328850,
    "energy_start_uj": 123456789,
    "pkg_idle_w": 10.0,
    "core_dyn_w": 15.0,  # per CPU at the maximum frequency, scales with (f/fmax)^2
    "dram_w": 3.0,
    "load": "none",  # or "proc": the CPU's dynamic power only while a task of this node runs there
    "load_period_s": 0.02,
    "unreadable": False,  # True: every cpufreq attribute read or write fails with EIO
    "delay_s": 0.0,  # every cpufreq attribute read or write takes this much longer
}

ACPI_GOVS = ["conservative", "ondemand", "userspace", "powersave", "performance", "schedutil"]
PSTATE_GOVS = ["performance", "powersave"]
RW_ATTRS = {"scaling_governor", "scaling_setspeed", "scaling_min_freq", "scaling_max_freq"}


def now() -> float:
    return time.clock_gettime(time.CLOCK_MONOTONIC)


class Policy:
    def __init__(self, idx: int, cpus: list[int], cfg: dict[str, Any]):
        self.idx = idx
        self.cpus = cpus
        self.driver = cfg["driver"]
        freqs = sorted(cfg["freqs_khz"], reverse=True)
        self.freqs = freqs
        self.hw_min, self.hw_max = min(freqs), max(freqs)
        self.govs = PSTATE_GOVS if self.driver == "intel_pstate" else ACPI_GOVS
        self.governor = "powersave" if self.driver == "intel_pstate" else "performance"
        self.min_req, self.max_req = self.hw_min, self.hw_max
        self.setspeed = self.hw_max

    # Effective limits as the cpufreq core derives them from the QoS requests.
    def eff_max(self) -> int:
        return max(self.hw_min, min(self.hw_max, self.max_req))

    def eff_min(self) -> int:
        return min(max(self.hw_min, min(self.hw_max, self.min_req)), self.eff_max())

    def cur(self) -> int:
        if self.governor == "userspace":
            return max(self.eff_min(), min(self.eff_max(), self.setspeed))
        if self.governor == "powersave" and self.driver != "intel_pstate":
            return self.eff_min()
        return self.eff_max()  # performance, and busy HWP / ondemand / schedutil

    def attrs(self) -> dict[str, tuple[int, str]]:
        """attr -> (mode, value)"""
        ro, rw = 0o444, 0o644
        a = {
            "affected_cpus": (ro, " ".join(map(str, self.cpus))),
            "related_cpus": (ro, " ".join(map(str, self.cpus))),
            "cpuinfo_min_freq": (ro, str(self.hw_min)),
            "cpuinfo_max_freq": (ro, str(self.hw_max)),
            "cpuinfo_transition_latency": (ro, "10000" if self.driver != "intel_pstate" else "0"),
            "scaling_driver": (ro, self.driver),
            "scaling_available_governors": (ro, " ".join(self.govs)),
            "scaling_governor": (rw, self.governor),
            "scaling_min_freq": (rw, str(self.eff_min())),
            "scaling_max_freq": (rw, str(self.eff_max())),
            "scaling_cur_freq": (ro, str(self.cur())),
            "scaling_setspeed": (rw, str(self.cur()) if self.governor == "userspace" else "<unsupported>"),
        }
        if self.driver == "intel_pstate":
            a["energy_performance_preference"] = (rw, "balance_performance")
            a["energy_performance_available_preferences"] = (
                ro, "default performance balance_performance balance_power power")
            a["base_frequency"] = (ro, str(self.freqs[len(self.freqs) // 2]))
        else:
            a["cpuinfo_cur_freq"] = (0o400, str(self.cur()))
            if self.driver != "cppc_cpufreq":  # CPPC: any level between the cpuinfo limits
                a["scaling_available_frequencies"] = (ro, " ".join(map(str, self.freqs)) + " ")
        return a

    def write(self, attr: str, value: str) -> None:
        """Apply a write with the kernel's rules; raises FuseOSError(EINVAL)."""
        if attr == "scaling_governor":
            if value not in self.govs:
                raise FuseOSError(errno.EINVAL)
            if value == "userspace" and self.governor != "userspace":
                self.setspeed = self.cur()  # the userspace governor starts at the current speed
            self.governor = value
            return
        if attr == "energy_performance_preference":
            return
        try:
            v = int(value, 10)
        except ValueError:
            raise FuseOSError(errno.EINVAL) from None
        if v < 0 or v > 0xFFFFFFFF:
            raise FuseOSError(errno.EINVAL)
        if attr == "scaling_setspeed":
            if self.governor != "userspace":
                raise FuseOSError(errno.EINVAL)
            self.setspeed = v
        elif attr == "scaling_min_freq":
            self.min_req = v
        elif attr == "scaling_max_freq":
            self.max_req = v
        else:
            raise FuseOSError(errno.EACCES)


class Load:
    """Per CPU, the share of samples since the last take() in which a task
    of this mount namespace was running or runnable on it (load "proc").
    The namespace's processes are listed again every RESCAN_S; between
    rescans only their /proc/PID/stat is read, a few files per sample."""

    RESCAN_S = 0.1

    def __init__(self, ncpu: int, period: float) -> None:
        self.ncpu, self.period = ncpu, max(0.002, float(period))
        self.me = os.getpid()
        self.ns = os.readlink("/proc/self/ns/mnt")
        self.mtx = threading.Lock()
        self.hits = [0] * ncpu
        self.samples = 0
        self.pids: list[int] = []
        self.t_scan = 0.0
        self.stopped = threading.Event()
        threading.Thread(target=self._run, daemon=True).start()

    def _scan(self) -> None:
        pids = []
        for d in os.listdir("/proc"):
            if d.isdigit() and int(d) != self.me:
                try:
                    if os.readlink(f"/proc/{d}/ns/mnt") == self.ns:
                        pids.append(int(d))
                except OSError:
                    pass
        self.pids = pids

    def sample(self) -> list[int]:
        if now() - self.t_scan > self.RESCAN_S:
            self._scan()
            self.t_scan = now()
        busy = [0] * self.ncpu
        for pid in self.pids:
            try:
                with open(f"/proc/{pid}/stat", "rb") as f:
                    st = f.read().rsplit(b")", 1)[1].split()
            except (OSError, IndexError):
                continue
            # after "pid (comm)": state is field 3, processor field 39
            if st[0] == b"R" and len(st) > 36:
                c = int(st[36])
                if 0 <= c < self.ncpu:
                    busy[c] = 1
        return busy

    def _run(self) -> None:
        while not self.stopped.wait(self.period):
            b = self.sample()
            with self.mtx:
                for c in range(self.ncpu):
                    self.hits[c] += b[c]
                self.samples += 1

    def take(self) -> list[float]:
        """Busy share per CPU since the previous take() (the latest sample's
        state when no sample fell in between: a write right after another)."""
        with self.mtx:
            if self.samples:
                out = [h / self.samples for h in self.hits]
                self.hits, self.samples = [0] * self.ncpu, 0
                self.last = out
                return out
            return getattr(self, "last", [0.0] * self.ncpu)

    def stop(self) -> None:
        self.stopped.set()


class Hardware:
    """State of one node's fake hardware, rebuilt whenever the config changes."""

    def __init__(self, cfg: dict[str, Any]):
        self.cfg = cfg
        ncpu, span = cfg["ncpu"], max(1, cfg["cpus_per_policy"])
        self.policies: dict[int, Policy] = {}
        for first in range(0, ncpu, span):
            cpus = list(range(first, min(ncpu, first + span)))
            self.policies[first] = Policy(first, cpus, cfg)
        self.t_last = now()
        self.energy = {}  # zone name -> accumulated µJ (float, unbounded)
        if cfg["rapl"]:
            for s in range(cfg["sockets"]):
                self.energy[f"intel-rapl:{s}"] = float(cfg["energy_start_uj"])
                self.energy[f"intel-rapl:{s}:0"] = float(cfg["energy_start_uj"]) / 7

        self.load: Optional[Load] = Load(ncpu, cfg["load_period_s"]) if cfg["load"] == "proc" \
            else None

    def power(self, busy: Optional[list[float]] = None) -> dict[str, float]:
        cfg, out = self.cfg, {}
        ncpu, nsock = cfg["ncpu"], cfg["sockets"]
        for s in range(nsock):
            watts = cfg["pkg_idle_w"]
            for p in self.policies.values():
                for c in p.cpus:
                    if c * nsock // ncpu == s:
                        watts += cfg["core_dyn_w"] * (p.cur() / p.hw_max) ** 2 * \
                            (busy[c] if busy is not None else 1.0)
            out[f"intel-rapl:{s}"] = watts
            out[f"intel-rapl:{s}:0"] = cfg["dram_w"]
        return out

    def advance(self) -> None:
        """Integrate energy up to now at the power of the state that held since t_last."""
        t = now()
        dt = t - self.t_last
        busy = self.load.take() if self.load is not None else None
        for zone, watts in self.power(busy).items():
            self.energy[zone] += watts * dt * 1e6
        self.t_last = t

    def close(self) -> None:
        if self.load is not None:
            self.load.stop()


    def rapl_attrs(self, zone: str) -> dict[str, tuple[int, str]]:
        rng = int(self.cfg["max_energy_range_uj"])
        sub = zone.count(":") == 2
        sock = zone.split(":")[1]
        return {
            "name": (0o444, "dram" if sub else f"package-{sock}"),
            "enabled": (0o644, "1"),
            "max_energy_range_uj": (0o444, str(rng)),
            "energy_uj": (0o400, str(int(self.energy[zone]) % rng)),
        }


class FakeSys(Operations):
    def __init__(self, cfg_path: str, log_path: str):
        self.cfg_path = cfg_path
        self.mtx = threading.Lock()
        self.log = open(log_path, "a", buffering=1)
        self.cfg_mtime = -1.0
        self.hw: Hardware
        self._maybe_reload()

    def _maybe_reload(self) -> None:
        try:
            mt = os.stat(self.cfg_path).st_mtime
        except FileNotFoundError:
            mt = 0.0
        if mt == self.cfg_mtime:
            return
        cfg = dict(DEFAULTS)
        if mt:
            with open(self.cfg_path) as f:
                cfg.update(json.load(f))
        self.cfg_mtime = mt
        if getattr(self, "hw", None) is not None:
            self.hw.close()
        self.hw = Hardware(cfg)
        self.log.write(f"{now():.6f} reset driver={cfg['driver']} cpus_per_policy={cfg['cpus_per_policy']}"
                       + (f" load={cfg['load']}" if cfg["load"] != "none" else "") + "\n")

    def _resolve(self, path: str) -> tuple[str, Any, str | None]:
        """path -> (kind, object, attr).  kind: root|cpufreq|policy|powercap|zone."""
        parts = [p for p in path.split("/") if p]
        hw = self.hw
        if not parts:
            return "root", None, None
        if parts[0] == "cpufreq":
            if len(parts) == 1:
                return "cpufreq", None, None
            name = parts[1]
            if name == "boost" and len(parts) == 2 and hw.cfg["driver"] != "intel_pstate":
                return "boost", None, "boost"
            if not name.startswith("policy") or not name[6:].isdigit():
                raise FuseOSError(errno.ENOENT)
            pol = hw.policies.get(int(name[6:]))
            if pol is None or len(parts) > 3:
                raise FuseOSError(errno.ENOENT)
            if len(parts) == 2:
                return "policy", pol, None
            if parts[2] not in pol.attrs():
                raise FuseOSError(errno.ENOENT)
            return "policy", pol, parts[2]
        if parts[0] == "powercap" and hw.cfg["rapl"]:
            if len(parts) == 1:
                return "powercap", None, None
            if parts[1] not in hw.energy or len(parts) > 3:
                raise FuseOSError(errno.ENOENT)
            if len(parts) == 2:
                return "zone", parts[1], None
            if parts[2] not in hw.rapl_attrs(parts[1]):
                raise FuseOSError(errno.ENOENT)
            return "zone", parts[1], parts[2]
        if parts[0] == "powercap" and len(parts) == 1:
            return "powercap", None, None
        raise FuseOSError(errno.ENOENT)

    def _file(self, kind: str, obj: Any, attr: str) -> tuple[int, str]:
        if kind == "boost":
            return 0o644, "1"
        if kind == "policy":
            return obj.attrs()[attr]
        self.hw.advance()
        return self.hw.rapl_attrs(obj)[attr]

    def getattr(self, path: str, fh: Any = None) -> dict[str, Any]:
        with self.mtx:
            self._maybe_reload()
            kind, obj, attr = self._resolve(path)
            t = time.time()
            base = dict(st_uid=0, st_gid=0, st_atime=t, st_mtime=t, st_ctime=t)
            if attr is None:
                return dict(base, st_mode=stat.S_IFDIR | 0o755, st_nlink=2)
            mode, _ = self._file(kind, obj, attr)
            return dict(base, st_mode=stat.S_IFREG | mode, st_nlink=1, st_size=4096)

    def readdir(self, path: str, fh: Any) -> list[str]:
        with self.mtx:
            self._maybe_reload()
            kind, obj, _ = self._resolve(path)
            hw = self.hw
            if kind == "root":
                names = ["cpufreq", "powercap"]
            elif kind == "cpufreq":
                names = [f"policy{i}" for i in sorted(hw.policies)]
                if hw.cfg["driver"] != "intel_pstate":
                    names.append("boost")
            elif kind == "policy":
                names = sorted(obj.attrs())
            elif kind == "powercap":
                names = sorted(hw.energy)
            else:
                names = sorted(hw.rapl_attrs(obj))
            return [".", ".."] + names

    def open(self, path: str, flags: int) -> int:
        with self.mtx:
            self._resolve(path)
        return 0

    def truncate(self, path: str, length: int, fh: Any = None) -> int:
        return 0  # O_TRUNC on sysfs is a no-op

    def slow(self, path: str) -> None:
        """A slow flavour's delay, outside the lock (as a slow firmware call
        blocks only its caller)."""
        delay = float(self.hw.cfg["delay_s"])
        if delay > 0 and path.startswith("/cpufreq/"):
            time.sleep(delay)

    def read(self, path: str, size: int, offset: int, fh: Any) -> bytes:
        self.slow(path)
        with self.mtx:
            self._maybe_reload()
            kind, obj, attr = self._resolve(path)
            if attr is None:
                raise FuseOSError(errno.EISDIR)
            if kind in ("boost", "policy") and self.hw.cfg["unreadable"]:
                raise FuseOSError(errno.EIO)
            _, val = self._file(kind, obj, attr)
        return (val + "\n").encode()[offset:offset + size]

    def write(self, path: str, data: bytes, offset: int, fh: Any) -> int:
        self.slow(path)
        with self.mtx:
            self._maybe_reload()
            kind, obj, attr = self._resolve(path)
            value = data.decode(errors="replace").strip()
            if kind != "policy" or attr not in RW_ATTRS | {"energy_performance_preference"}:
                raise FuseOSError(errno.EACCES)
            if self.hw.cfg["unreadable"]:
                self.log.write(f"{now():.6f} policy{obj.idx} {attr}={value} EIO\n")
                raise FuseOSError(errno.EIO)
            self.hw.advance()  # energy up to now belongs to the old frequency
            tag = f"policy{obj.idx} {attr}={value}"
            try:
                obj.write(attr, value)
            except FuseOSError:
                self.log.write(f"{now():.6f} {tag} EINVAL\n")
                raise
            self.log.write(f"{now():.6f} {tag}\n")
        return len(data)


def main() -> None:
    if len(sys.argv) != 4:
        sys.exit(__doc__)
    mnt, cfg, log = sys.argv[1:]
    FUSE(FakeSys(cfg, log), mnt, foreground=True, allow_other=True, default_permissions=True,
         nothreads=False, attr_timeout=0, entry_timeout=0, direct_io=True)


if __name__ == "__main__":
    main()
