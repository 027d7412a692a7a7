#!/usr/bin/python3
# SPDX-License-Identifier: BSD-3-Clause
"""Fake cpufreq, P-state driver, uncore and RAPL powercap hardware with the
kernel's sysfs semantics.

One FUSE file system serves up to four trees below MOUNTPOINT:

  MOUNTPOINT/cpufreq/   bind-mounted on /sys/devices/system/cpu/cpufreq
  MOUNTPOINT/powercap/  bind-mounted on /sys/class/powercap
  MOUNTPOINT/pstate/    (intel and amd drivers only) bind-mounted on
                        /sys/devices/system/cpu/intel_pstate or .../amd_pstate
  MOUNTPOINT/uncore/    (flavour "uncore" only) bind-mounted on
                        /sys/devices/system/cpu/intel_uncore_frequency

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

Levers beyond the core's cap (every key below is opt-in; without it the
fake is what it was):

Drivers ("driver"): acpi-cpufreq (default), cppc_cpufreq, intel_pstate (active),
intel_cpufreq (intel passive), amd-pstate-epp (amd active), amd-pstate (amd
passive or guided: "amd_mode": "passive" (default) | "guided").  intel takes
"hwp": true (default) | false.  intel_pstate and amd-pstate-epp offer only the
performance and powersave governors (powersave is the hardware's own choice:
a busy CPU runs at the max); intel_cpufreq and amd-pstate offer the generic
governors and start under schedutil.  Under userspace, scaling_setspeed sets
the frequency except with intel_cpufreq+HWP and amd guided, where it is only a
floor (a busy CPU runs at the max).

EPP (energy_performance_preference 0644 and ..._available_preferences 0444,
per policy) exists for intel with HWP (both modes) and amd-pstate-epp only.
Strings default, performance (0), balance_performance (0x80), balance_power
(intel 0xC0, amd 0xBF), power (0xFF); "default" is "epp_default" (flavour,
default 0x80).  Reads show the string when the value is one of the four, else
the number (intel) or fail with EINVAL (amd).  A write fails with EINVAL for
an unknown string, a number > 255 or any number on amd; with EBUSY when the
value is > 0 under the performance governor of intel_pstate or
amd-pstate-epp.  Switching to performance there sets EPP 0; back to
powersave, intel restores the saved value when the EPP is still 0, amd
keeps 0.  amd lists only "performance" as available under performance.

"ro_attrs": ["scaling_max_freq", ...] makes those policy attributes 0444;
opening them for writing fails with EACCES (a cap the kernel does not offer).

amd per policy: amd_pstate_lowest_nonlinear_freq and amd_pstate_max_freq
(0444).  "nonlinear_khz" (default: the second-lowest of freqs_khz) is the
lowest nonlinear frequency on every driver (the knee of the "knee" model);
"kernel": "6.13" or later (default "6.12") starts amd's scaling_min_freq
there, as amd-pstate does since 6.13.

pstate/: intel: status (active|passive|off), no_turbo (EPERM for 0 when
"turbo_bios_off": true), max_perf_pct and min_perf_pct (clamped silently),
hwp_dynamic_boost (active with HWP only); amd: status
(active|passive|guided|disable), prefcore.  A status write that changes the
mode re-registers the driver: every policy goes back to that mode's power-on
defaults (energy counters and the uncore are kept) and the log says
"reset status=...".  amd passive <-> guided keeps the limits; writing the
current mode does nothing.  A re-registration removes the old policies'
files: a read or write through an fd opened before it fails with ENODEV
(logged "policyN attr=value ENODEV"), as kernfs answers.  Under off/disable the cpufreq tree has no policy
and the other pstate files fail with EAGAIN.

uncore/: "uncore": {"style": "msr" | "tpmi", "khz": [800000, 2500000],
"latency_s": 0.01, "clusters": 1, "write_blocked": false}.  msr: one
package_%02d_die_00 per socket ("sockets") with min_freq_khz, max_freq_khz
(0644), initial_min_freq_khz, initial_max_freq_khz (0444), current_freq_khz
(0400).  A write is kstrtouint (EINVAL when malformed, ERANGE above 2^32-1),
rounded down to 100 MHz; ratio 0 or > 127 is EINVAL; min <= max is not
checked.  current_freq_khz moves to the max (clamped to "khz") latency_s after
the write.  tpmi: the package dir has no current_freq_khz, reads the lowest
min and highest max of its clusters, and a write there sets the package limit
and fans out to them; uncoreNN (one per cluster, numbered over all packages)
holds the same files plus package_id, domain_id, fabric_cluster_id (0400) and,
on kernel >= 6.16, die_id and agent_types (0444).  A cluster write outside the
package's limits is EINVAL; "write_blocked": true makes every uncore write
EPERM.

Topology ("topology": true with "sockets" > 1, or any "uncore"): `lab
relink` writes cpuN/topology/physical_package_id = N * sockets // ncpu (the
same mapping as the RAPL zones below), die_id = 0 and the matching masks.

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

"knee": true (or "model": "knee") charges each CPU instead

    busy * (core_static_w + core_dyn_w * (f / fmax) * (V(f) / V(fmax))^2)

with V(f) / V(fmax) = v_min_ratio up to nonlinear_khz, rising linearly to 1
at fmax (defaults core_static_w 2, core_dyn_w 13, v_min_ratio 0.65: fmax
still costs 15 W; below the knee power falls only linearly with f, so the
energy per cycle is lowest at the knee).  With "uncore", every socket also
draws uncore_static_w + uncore_dyn_w * (fu / fu_max)^2 (defaults 2 and 6),
fu its current uncore frequency (tpmi: the mean over its clusters), fu_max
the top of "khz"; without "uncore" nothing is added.

"unreadable": true makes every cpufreq attribute fail to read and write with
EIO (a driver or firmware fault: root cannot read it either), and
"delay_s": S makes every cpufreq read and write take S seconds more (a slow
firmware interface), for the tests that such a node is never drained
(test_never_drain.py).

Every accepted write, and every refused one, is appended to the write log as
"<CLOCK_MONOTONIC seconds> policy<N> <attr>=<value> [ERRNO]" (ERRNO the
symbolic name: EINVAL, EBUSY, EACCES...), "... pstate <attr>=<value>" and
"... uncore <dir> <attr>=<value>", so tests can assert the exact sequence of
changes; an open for writing refused with EACCES logs "policy<N> <attr>
EACCES".

usage: fakesys.py MOUNTPOINT CONFIG.json WRITELOG
"""
from __future__ import annotations

import errno
import json
import os
import re
import stat
import sys
import threading
import time
from typing import Any, Optional

from fusepy import FUSE, FuseOSError, Operations  # Debian python3-fusepy

DEFAULTS: dict[str, Any] = {
    "driver": "acpi-cpufreq",  # intel_pstate intel_cpufreq amd-pstate-epp amd-pstate cppc_cpufreq (Arm)
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
    "hwp": True,  # intel: HWP present (EPP files, base_frequency, hwp_dynamic_boost)
    "amd_mode": "passive",  # amd-pstate: "passive" or "guided"
    "kernel": "6.12",  # >= 6.13: amd starts scaling_min_freq at nonlinear_khz; >= 6.16: tpmi die_id
    "epp_default": 0x80,  # the firmware's EPP, what "default" writes
    "ro_attrs": [],  # policy attributes that refuse writes (EACCES, mode 0444)
    "nonlinear_khz": None,  # None: the second-lowest of freqs_khz
    "turbo_bios_off": False,  # intel no_turbo reads 1 and refuses 0 with EPERM
    "topology": False,  # with sockets > 1: `lab relink` writes the CPUs' packages
    "knee": False,  # or "model": "knee": the power model with a voltage knee
    "model": "default",
    "v_min_ratio": 0.65,  # knee model: V below the knee over V at fmax
    "uncore": None,  # {} or true (UNCORE_DEFAULTS) or a dict of its keys: the uncore tree
    "uncore_static_w": 2.0,  # with "uncore": per socket
    "uncore_dyn_w": 6.0,  # with "uncore": per socket at the top uncore frequency, * (fu/fu_max)^2
}
# The knee model's own defaults (a flavour's values win): fmax costs 2 + 13 = 15 W
# per busy CPU as in the default model.
KNEE_DEFAULTS: dict[str, Any] = {"core_static_w": 2.0, "core_dyn_w": 13.0}
UNCORE_DEFAULTS: dict[str, Any] = {"style": "msr", "khz": [800000, 2500000], "latency_s": 0.01,
                                   "clusters": 1, "write_blocked": False}

ACPI_GOVS = ["conservative", "ondemand", "userspace", "powersave", "performance", "schedutil"]
PSTATE_GOVS = ["performance", "powersave"]
INTEL = ("intel_pstate", "intel_cpufreq")
AMD = ("amd-pstate-epp", "amd-pstate")
ACTIVE = ("intel_pstate", "amd-pstate-epp")  # powersave = the hardware picks, busy runs at the max
EPP_NAMES = ["default", "performance", "balance_performance", "balance_power", "power"]
EPP_VALUES = {
    "intel": {"performance": 0x00, "balance_performance": 0x80, "balance_power": 0xC0, "power": 0xFF},
    "amd": {"performance": 0x00, "balance_performance": 0x80, "balance_power": 0xBF, "power": 0xFF},
}
# status value -> (driver, amd_mode) per family
STATUS_DRIVER = {
    "intel": {"active": ("intel_pstate", None), "passive": ("intel_cpufreq", None), "off": (None, None)},
    "amd": {"active": ("amd-pstate-epp", None), "passive": ("amd-pstate", "passive"),
            "guided": ("amd-pstate", "guided"), "disable": (None, None)},
}
UNCORE_STEP_KHZ = 100000


def now() -> float:
    return time.clock_gettime(time.CLOCK_MONOTONIC)


def family(driver: str) -> str:
    return "intel" if driver in INTEL else "amd" if driver in AMD else ""


def kernel_at_least(cfg: dict[str, Any], version: str) -> bool:
    def key(v: str) -> tuple[int, ...]:
        return tuple(int(x) for x in str(v).split("."))
    return key(cfg["kernel"]) >= key(version)


def kstrtouint(raw: str) -> int:
    """The kernel's kstrtouint(s, 10): an optional '+', decimal digits and at
    most one trailing newline; EINVAL when malformed, ERANGE past 32 bits."""
    s = raw[:-1] if raw.endswith("\n") else raw
    if not re.fullmatch(r"\+?[0-9]+", s):
        raise FuseOSError(errno.EINVAL)
    v = int(s, 10)
    if v > 0xFFFFFFFF:
        raise FuseOSError(errno.ERANGE)
    return v


def nonlinear_khz(cfg: dict[str, Any]) -> int:
    if cfg["nonlinear_khz"] is not None:
        return int(cfg["nonlinear_khz"])
    freqs = sorted(cfg["freqs_khz"])
    return freqs[1] if len(freqs) > 1 else freqs[0]


def uncore_on(cfg: dict[str, Any]) -> bool:
    return cfg.get("uncore") not in (None, False)


def knee_on(cfg: dict[str, Any]) -> bool:
    return bool(cfg["knee"]) or cfg["model"] == "knee"


class Policy:
    def __init__(self, idx: int, cpus: list[int], cfg: dict[str, Any]):
        self.idx = idx
        self.cpus = cpus
        self.driver = cfg["driver"]
        self.family = family(self.driver)
        self.hwp = bool(cfg["hwp"])
        self.amd_mode = cfg["amd_mode"]
        freqs = sorted(cfg["freqs_khz"], reverse=True)
        self.freqs = freqs
        self.hw_min, self.hw_max = min(freqs), max(freqs)
        self.nonlinear = nonlinear_khz(cfg)
        active = self.driver in ACTIVE
        self.govs = PSTATE_GOVS if active else ACPI_GOVS
        if active:
            self.governor = "powersave"
        elif self.family:
            self.governor = "schedutil"
        else:
            self.governor = "performance"
        self.min_req, self.max_req = self.hw_min, self.hw_max
        if self.family == "amd" and kernel_at_least(cfg, "6.13"):
            self.min_req = self.nonlinear
        self.setspeed = self.hw_max
        self.has_epp = (self.family == "intel" and self.hwp) or self.driver == "amd-pstate-epp"
        self.epp_default = int(cfg["epp_default"])
        self.epp = self.epp_default
        self.epp_powersave: Optional[int] = None  # intel: EPP kept while performance forces 0
        self.ro = set(cfg["ro_attrs"])

    # Effective limits as the cpufreq core derives them from the QoS requests.
    def eff_max(self) -> int:
        return max(self.hw_min, min(self.hw_max, self.max_req))

    def eff_min(self) -> int:
        return min(max(self.hw_min, min(self.hw_max, self.min_req)), self.eff_max())

    def setspeed_is_floor(self) -> bool:
        return (self.driver == "intel_cpufreq" and self.hwp) or \
            (self.driver == "amd-pstate" and self.amd_mode == "guided")

    def cur(self) -> int:
        if self.governor == "userspace" and not self.setspeed_is_floor():
            return max(self.eff_min(), min(self.eff_max(), self.setspeed))
        if self.governor == "powersave" and self.driver not in ACTIVE:
            return self.eff_min()
        return self.eff_max()  # performance, and busy HWP / ondemand / schedutil

    def epp_show(self) -> Optional[str]:
        """The EPP as its string, else the number (intel), else None: the
        amd driver fails the read with EINVAL."""
        for name, v in EPP_VALUES[self.family].items():
            if v == self.epp:
                return name
        return str(self.epp) if self.family == "intel" else None

    def attrs(self) -> dict[str, tuple[int, Optional[str]]]:
        """attr -> (mode, value); value None: a read fails with EINVAL"""
        ro, rw = 0o444, 0o644
        if self.driver in ("intel_pstate", "amd-pstate-epp"):
            latency = "0"
        elif self.family:
            latency = "20000"
        else:
            latency = "10000"
        a: dict[str, tuple[int, Optional[str]]] = {
            "affected_cpus": (ro, " ".join(map(str, self.cpus))),
            "related_cpus": (ro, " ".join(map(str, self.cpus))),
            "cpuinfo_min_freq": (ro, str(self.hw_min)),
            "cpuinfo_max_freq": (ro, str(self.hw_max)),
            "cpuinfo_transition_latency": (ro, latency),
            "scaling_driver": (ro, self.driver),
            "scaling_available_governors": (ro, " ".join(self.govs)),
            "scaling_governor": (rw, self.governor),
            "scaling_min_freq": (rw, str(self.eff_min())),
            "scaling_max_freq": (rw, str(self.eff_max())),
            "scaling_cur_freq": (ro, str(self.cur())),
            "scaling_setspeed": (rw, str(self.cur()) if self.governor == "userspace" else "<unsupported>"),
        }
        if self.has_epp:
            a["energy_performance_preference"] = (rw, self.epp_show())
            avail = "default performance balance_performance balance_power power"
            if self.family == "amd" and self.governor == "performance":
                avail = "performance"
            a["energy_performance_available_preferences"] = (ro, avail)
        if self.family == "intel":
            if self.hwp:
                a["base_frequency"] = (ro, str(self.freqs[len(self.freqs) // 2]))
        elif self.family == "amd":
            a["amd_pstate_lowest_nonlinear_freq"] = (ro, str(self.nonlinear))
            a["amd_pstate_max_freq"] = (ro, str(self.hw_max))
        else:
            a["cpuinfo_cur_freq"] = (0o400, str(self.cur()))
            if self.driver != "cppc_cpufreq":  # CPPC: any level between the cpuinfo limits
                a["scaling_available_frequencies"] = (ro, " ".join(map(str, self.freqs)) + " ")
        for name in self.ro & a.keys():
            a[name] = (ro, a[name][1])
        return a

    def writable(self, attr: str) -> bool:
        return attr not in self.ro and bool(self.attrs()[attr][0] & 0o200)

    def _set_governor(self, value: str) -> None:
        if value not in self.govs:
            raise FuseOSError(errno.EINVAL)
        if value == "userspace" and self.governor != "userspace":
            self.setspeed = self.cur()  # the userspace governor starts at the current speed
        if self.has_epp and self.driver in ACTIVE and value != self.governor:
            if value == "performance":
                # Both drivers write EPP 0 under performance; intel keeps the old value to
                # restore, amd's cached EPP becomes 0 for good.
                if self.family == "intel":
                    self.epp_powersave = self.epp
                self.epp = 0
            elif self.family == "intel" and self.epp == 0 and self.epp_powersave is not None:
                self.epp = self.epp_powersave
        self.governor = value

    def _set_epp(self, value: str) -> None:
        if value == "default":
            epp = self.epp_default
        elif value in EPP_VALUES[self.family]:
            epp = EPP_VALUES[self.family][value]
        elif self.family == "intel" and re.fullmatch(r"[0-9]+", value):
            epp = int(value, 10)
            if epp > 255:
                raise FuseOSError(errno.EINVAL)
        else:
            raise FuseOSError(errno.EINVAL)  # amd matches strings only
        if epp > 0 and self.driver in ACTIVE and self.governor == "performance":
            raise FuseOSError(errno.EBUSY)
        self.epp = epp

    def write(self, attr: str, value: str) -> None:
        """Apply a write with the kernel's rules; raises FuseOSError."""
        if not self.writable(attr):
            raise FuseOSError(errno.EACCES)
        if attr == "scaling_governor":
            self._set_governor(value)
            return
        if attr == "energy_performance_preference":
            self._set_epp(value)
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


class UncoreDomain:
    """One uncore control: an msr package dir, a tpmi package root or one of
    its clusters.  Limits are kept as ratios (100 MHz steps) as the MSR holds
    them; current_freq_khz follows the max latency_s after a write."""

    def __init__(self, package: int, lo: int, hi: int, latency: float, cluster: Optional[int] = None):
        self.package, self.cluster = package, cluster
        self.lo, self.hi, self.latency = lo, hi, latency
        self.min_ratio, self.max_ratio = lo // UNCORE_STEP_KHZ, hi // UNCORE_STEP_KHZ
        self.cur_old = self.cur_new = hi
        self.t_change = -1e18

    def target(self) -> int:
        # Outside the hardware's range the PCU ignores the request: clamp.
        return max(self.lo, min(self.hi, self.max_ratio * UNCORE_STEP_KHZ))

    def current(self, at: float) -> int:
        return self.cur_new if at - self.t_change >= self.latency else self.cur_old

    def set_ratio(self, attr: str, ratio: int, t: float) -> None:
        if attr == "min_freq_khz":
            self.min_ratio = ratio
            return
        self.cur_old = self.current(t)
        self.max_ratio = ratio
        self.cur_new = self.target()
        self.t_change = t


class Uncore:
    def __init__(self, cfg: dict[str, Any]):
        u = dict(UNCORE_DEFAULTS, **(cfg["uncore"] if isinstance(cfg["uncore"], dict) else {}))
        self.style = u["style"]
        if self.style not in ("msr", "tpmi"):
            raise ValueError(f"uncore style {self.style!r}")
        self.lo, self.hi = int(u["khz"][0]), int(u["khz"][1])
        self.latency = float(u["latency_s"])
        self.blocked = bool(u["write_blocked"])
        self.die_id = kernel_at_least(cfg, "6.16")
        self.dirs: dict[str, UncoreDomain] = {}
        self.clusters: dict[int, list[UncoreDomain]] = {}
        n = 0
        for s in range(cfg["sockets"]):
            self.dirs[f"package_{s:02d}_die_00"] = UncoreDomain(s, self.lo, self.hi, self.latency)
            self.clusters[s] = []
            if self.style == "tpmi":
                for c in range(max(1, int(u["clusters"]))):
                    d = UncoreDomain(s, self.lo, self.hi, self.latency, cluster=c)
                    self.dirs[f"uncore{n:02d}"] = d
                    self.clusters[s].append(d)
                    n += 1

    def is_root(self, d: UncoreDomain) -> bool:
        return self.style == "tpmi" and d.cluster is None

    def attrs(self, name: str, at: float) -> dict[str, tuple[int, str]]:
        d = self.dirs[name]
        lo, hi = d.min_ratio, d.max_ratio
        if self.is_root(d):
            lo = min(c.min_ratio for c in self.clusters[d.package])
            hi = max(c.max_ratio for c in self.clusters[d.package])
        a = {
            "min_freq_khz": (0o644, str(lo * UNCORE_STEP_KHZ)),
            "max_freq_khz": (0o644, str(hi * UNCORE_STEP_KHZ)),
            "initial_min_freq_khz": (0o444, str(self.lo)),
            "initial_max_freq_khz": (0o444, str(self.hi)),
        }
        if not self.is_root(d):  # a tpmi root answers ENODATA, so the file is absent
            a["current_freq_khz"] = (0o400, str(d.current(at)))
        if d.cluster is not None:
            a["package_id"] = (0o400, str(d.package))
            a["domain_id"] = (0o400, str(d.cluster))
            a["fabric_cluster_id"] = (0o400, str(d.cluster))
            if self.die_id:
                a["die_id"] = (0o444, "0")
                a["agent_types"] = (0o444, "core cache memory")
        return a

    def write(self, name: str, attr: str, raw: str, t: float) -> None:
        d = self.dirs[name]
        if not self.attrs(name, t)[attr][0] & 0o200:
            raise FuseOSError(errno.EACCES)
        if self.blocked:
            raise FuseOSError(errno.EPERM)
        ratio = kstrtouint(raw) // UNCORE_STEP_KHZ
        if ratio == 0 or ratio > 127:
            raise FuseOSError(errno.EINVAL)
        if self.style == "tpmi" and d.cluster is not None:
            root = self.dirs[f"package_{d.package:02d}_die_00"]
            if ratio > root.max_ratio or ratio < root.min_ratio:
                raise FuseOSError(errno.EINVAL)
        d.set_ratio(attr, ratio, t)
        if self.is_root(d):
            for c in self.clusters[d.package]:
                c.set_ratio(attr, ratio, t)

    def fu(self, socket: int, at: float) -> float:
        if self.style == "tpmi":
            cl = self.clusters[socket]
            return sum(c.current(at) for c in cl) / len(cl)
        return float(self.dirs[f"package_{socket:02d}_die_00"].current(at))

    def change_times(self) -> list[float]:
        return [d.t_change + d.latency for d in self.dirs.values()]


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
        self.family = family(cfg["driver"])
        ncpu = cfg["ncpu"]
        self.policies: dict[int, Policy] = {}
        self._build_policies()
        if self.family == "intel":
            self.status = "active" if cfg["driver"] == "intel_pstate" else "passive"
        elif self.family == "amd":
            self.status = "active" if cfg["driver"] == "amd-pstate-epp" else cfg["amd_mode"]
        else:
            self.status = ""
        hw_min, hw_max = min(cfg["freqs_khz"]), max(cfg["freqs_khz"])
        self.min_perf_floor = -(-hw_min * 100 // hw_max)
        self._pstate_defaults()
        self.uncore: Optional[Uncore] = Uncore(cfg) if uncore_on(cfg) else None
        self.t_last = now()
        self.energy = {}  # zone name -> accumulated µJ (float, unbounded)
        if cfg["rapl"]:
            for s in range(cfg["sockets"]):
                self.energy[f"intel-rapl:{s}"] = float(cfg["energy_start_uj"])
                self.energy[f"intel-rapl:{s}:0"] = float(cfg["energy_start_uj"]) / 7

        self.load: Optional[Load] = Load(ncpu, cfg["load_period_s"]) if cfg["load"] == "proc" \
            else None

    def _build_policies(self) -> None:
        cfg = self.cfg
        ncpu, span = cfg["ncpu"], max(1, cfg["cpus_per_policy"])
        self.policies = {}
        for first in range(0, ncpu, span):
            cpus = list(range(first, min(ncpu, first + span)))
            self.policies[first] = Policy(first, cpus, cfg)

    def _pstate_defaults(self) -> None:
        # intel's re-registration clears its globals (memset): max_perf_pct
        # back to 100, no_turbo to what the BIOS says.
        self.no_turbo = 1 if self.cfg["turbo_bios_off"] else 0
        self.max_perf_pct, self.min_perf_pct = 100, self.min_perf_floor
        self.hwp_dynamic_boost = 0

    def pstate_attrs(self) -> dict[str, tuple[int, str]]:
        rw = 0o644
        a = {"status": (rw, self.status)}
        if self.family == "intel":
            a["no_turbo"] = (rw, str(self.no_turbo))
            a["max_perf_pct"] = (rw, str(self.max_perf_pct))
            a["min_perf_pct"] = (rw, str(self.min_perf_pct))
            if self.status == "active" and self.cfg["hwp"]:
                a["hwp_dynamic_boost"] = (rw, str(self.hwp_dynamic_boost))
        else:
            a["prefcore"] = (0o444, "enabled")
        return a

    def pstate_write(self, attr: str, raw: str) -> str:
        """Apply a write to the pstate tree; returns what to log after it
        (a reset), raises FuseOSError."""
        if not self.pstate_attrs()[attr][0] & 0o200:
            raise FuseOSError(errno.EACCES)
        if attr == "status":
            return self.set_status(raw.strip())
        if self.status in ("off", "disable"):
            raise FuseOSError(errno.EAGAIN)  # no driver registered
        v = kstrtouint(raw)
        if attr == "no_turbo":
            v = min(v, 1)
            if v == 0 and self.cfg["turbo_bios_off"]:
                raise FuseOSError(errno.EPERM)
            self.no_turbo = v
        elif attr == "max_perf_pct":
            self.max_perf_pct = max(self.min_perf_pct, min(100, v))
        elif attr == "min_perf_pct":
            self.min_perf_pct = max(self.min_perf_floor, min(self.max_perf_pct, v))
        elif attr == "hwp_dynamic_boost":
            self.hwp_dynamic_boost = min(v, 1)
        return ""

    def set_status(self, mode: str) -> str:
        table = STATUS_DRIVER[self.family]
        if mode not in table:
            raise FuseOSError(errno.EINVAL)
        if mode == self.status:
            return ""
        driver, amd_mode = table[mode]
        if {mode, self.status} == {"passive", "guided"}:
            # amd passive <-> guided flips auto_sel only: the limits stay.
            self.status = mode
            self.cfg["amd_mode"] = mode
            for p in self.policies.values():
                p.amd_mode = mode
            return f"mode status={mode}"
        self.status = mode
        if driver is None:
            self.policies = {}
        else:
            self.cfg["driver"] = driver
            if amd_mode:
                self.cfg["amd_mode"] = amd_mode
            self._build_policies()
        self._pstate_defaults()
        return f"reset status={mode} driver={driver or 'none'}"

    def power(self, busy: Optional[list[float]] = None, at: float = 0.0) -> dict[str, float]:
        cfg, out = self.cfg, {}
        ncpu, nsock = cfg["ncpu"], cfg["sockets"]
        knee = knee_on(cfg)
        for s in range(nsock):
            watts = cfg["pkg_idle_w"]
            for p in self.policies.values():
                for c in p.cpus:
                    if c * nsock // ncpu == s:
                        if knee:
                            watts += self.knee_w(p) * (busy[c] if busy is not None else 1.0)
                        else:
                            watts += cfg["core_dyn_w"] * (p.cur() / p.hw_max) ** 2 * \
                                (busy[c] if busy is not None else 1.0)
            if self.uncore is not None:
                watts += cfg["uncore_static_w"] + \
                    cfg["uncore_dyn_w"] * (self.uncore.fu(s, at) / self.uncore.hi) ** 2
            out[f"intel-rapl:{s}"] = watts
            out[f"intel-rapl:{s}:0"] = cfg["dram_w"]
        return out

    def knee_w(self, p: Policy) -> float:
        """A busy CPU's watts in the knee model (module docstring)."""
        cfg = self.cfg
        f, fmax, knee, vmin = p.cur(), p.hw_max, p.nonlinear, float(cfg["v_min_ratio"])
        v = vmin if f <= knee or fmax <= knee else vmin + (1.0 - vmin) * (f - knee) / (fmax - knee)
        return cfg["core_static_w"] + cfg["core_dyn_w"] * (f / fmax) * v ** 2

    def advance(self) -> None:
        """Integrate energy up to now at the power of the state that held since
        t_last, cut where an uncore frequency moved in between."""
        t = now()
        busy = self.load.take() if self.load is not None else None
        cuts = sorted(x for x in self.uncore.change_times() if self.t_last < x < t) \
            if self.uncore is not None else []
        t0 = self.t_last
        for t1 in cuts + [t]:
            dt = t1 - t0
            for zone, watts in self.power(busy, (t0 + t1) / 2).items():
                self.energy[zone] += watts * dt * 1e6
            t0 = t1
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


def flavour_cfg(given: dict[str, Any]) -> dict[str, Any]:
    """DEFAULTS overlaid with a flavour, and the knee model's own defaults
    where the flavour does not set them."""
    cfg = dict(DEFAULTS, **given)
    if knee_on(cfg):
        for k, v in KNEE_DEFAULTS.items():
            if k not in given:
                cfg[k] = v
    return cfg


def load_flavour(path: str) -> dict[str, Any]:
    given: dict[str, Any] = {}
    if os.path.exists(path):
        with open(path) as f:
            given = json.load(f)
    return flavour_cfg(given)


class FakeSys(Operations):
    def __init__(self, cfg_path: str, log_path: str):
        self.cfg_path = cfg_path
        self.mtx = threading.Lock()
        self.log = open(log_path, "a", buffering=1)
        self.cfg_mtime = -1.0
        self.hw: Hardware
        # An open policy attribute -> the policy object it was opened on: a
        # driver re-registered since has removed that kobject, and the
        # kernel answers a read or write through the old fd with ENODEV.
        self.opened: dict[int, Any] = {}
        self.next_fh = 1
        self._maybe_reload()

    def _maybe_reload(self) -> None:
        try:
            mt = os.stat(self.cfg_path).st_mtime
        except FileNotFoundError:
            mt = 0.0
        if mt == self.cfg_mtime:
            return
        cfg = load_flavour(self.cfg_path) if mt else dict(DEFAULTS)
        self.cfg_mtime = mt
        if getattr(self, "hw", None) is not None:
            self.hw.close()
        self.hw = Hardware(cfg)
        self.log.write(f"{now():.6f} reset driver={cfg['driver']} cpus_per_policy={cfg['cpus_per_policy']}"
                       + (f" load={cfg['load']}" if cfg["load"] != "none" else "") + "\n")

    def _resolve(self, path: str) -> tuple[str, Any, str | None]:
        """path -> (kind, object, attr).
        kind: root|cpufreq|boost|policy|powercap|zone|pstate|uncore|udir."""
        parts = [p for p in path.split("/") if p]
        hw = self.hw
        if not parts:
            return "root", None, None
        if parts[0] == "cpufreq":
            if len(parts) == 1:
                return "cpufreq", None, None
            name = parts[1]
            if name == "boost" and len(parts) == 2 and hw.family != "intel":
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
        if parts[0] == "pstate" and hw.family and len(parts) <= 2:
            if len(parts) == 1:
                return "pstate", None, None
            if parts[1] not in hw.pstate_attrs():
                raise FuseOSError(errno.ENOENT)
            return "pstate", None, parts[1]
        if parts[0] == "uncore" and hw.uncore is not None and len(parts) <= 3:
            if len(parts) == 1:
                return "uncore", None, None
            if parts[1] not in hw.uncore.dirs:
                raise FuseOSError(errno.ENOENT)
            if len(parts) == 2:
                return "udir", parts[1], None
            if parts[2] not in hw.uncore.attrs(parts[1], now()):
                raise FuseOSError(errno.ENOENT)
            return "udir", parts[1], parts[2]
        raise FuseOSError(errno.ENOENT)

    def _file(self, kind: str, obj: Any, attr: str) -> tuple[int, Optional[str]]:
        if kind == "boost":
            return 0o644, "1"
        if kind == "policy":
            return obj.attrs()[attr]
        if kind == "pstate":
            return self.hw.pstate_attrs()[attr]
        if kind == "udir":
            return self.hw.uncore.attrs(obj, now())[attr]
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
                names = ["cpufreq", "powercap"] + (["pstate"] if hw.family else []) + \
                    (["uncore"] if hw.uncore is not None else [])
            elif kind == "cpufreq":
                names = [f"policy{i}" for i in sorted(hw.policies)]
                if hw.family != "intel":
                    names.append("boost")
            elif kind == "policy":
                names = sorted(obj.attrs())
            elif kind == "powercap":
                names = sorted(hw.energy)
            elif kind == "pstate":
                names = sorted(hw.pstate_attrs())
            elif kind == "uncore":
                names = sorted(hw.uncore.dirs)
            elif kind == "udir":
                names = sorted(hw.uncore.attrs(obj, now()))
            else:
                names = sorted(hw.rapl_attrs(obj))
            return [".", ".."] + names

    def open(self, path: str, flags: int) -> int:
        with self.mtx:
            # before the fd notes its policy: else an fd opened just after a
            # flavour change would note the old one and fail its first write
            self._maybe_reload()
            kind, obj, attr = self._resolve(path)
            # sysfs refuses at open a file without a store method, even to
            # root; the existing read-only policy attributes keep refusing at
            # write() as before, a cap made read-only by "ro_attrs" refuses here.
            if kind == "policy" and attr in obj.ro and flags & os.O_ACCMODE != os.O_RDONLY:
                self.log.write(f"{now():.6f} policy{obj.idx} {attr} EACCES\n")
                raise FuseOSError(errno.EACCES)
            if kind in ("pstate", "udir") and attr is not None and flags & os.O_ACCMODE != os.O_RDONLY \
                    and not self._file(kind, obj, attr)[0] & 0o200:
                raise FuseOSError(errno.EACCES)
            if kind != "policy" or attr is None:
                return 0
            fh, self.next_fh = self.next_fh, self.next_fh + 1
            self.opened[fh] = obj
        return fh

    def release(self, path: str, fh: Any) -> int:
        with self.mtx:
            self.opened.pop(fh, None)
        return 0

    def _gone(self, fh: Any, tag: str) -> None:
        """ENODEV (logged with tag) for an fd whose policy was removed."""
        pol = self.opened.get(fh)
        if pol is not None and all(p is not pol for p in self.hw.policies.values()):
            self.log.write(f"{now():.6f} {tag} ENODEV\n")
            raise FuseOSError(errno.ENODEV)

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
            self._gone(fh, f"read {path.rsplit('/', 2)[-2]} {path.rsplit('/', 1)[-1]}")
            kind, obj, attr = self._resolve(path)
            if attr is None:
                raise FuseOSError(errno.EISDIR)
            if kind in ("boost", "policy") and self.hw.cfg["unreadable"]:
                raise FuseOSError(errno.EIO)
            _, val = self._file(kind, obj, attr)
            if val is None:
                raise FuseOSError(errno.EINVAL)
        return (val + "\n").encode()[offset:offset + size]

    def _logged(self, tag: str, apply: Any) -> str:
        """Run apply() and log tag with the errno name of a refusal."""
        try:
            after = apply()
        except FuseOSError as e:
            self.log.write(f"{now():.6f} {tag} {errno.errorcode.get(e.errno, str(e.errno))}\n")
            raise
        self.log.write(f"{now():.6f} {tag}\n")
        if after:
            self.log.write(f"{now():.6f} {after}\n")
        return after

    def write(self, path: str, data: bytes, offset: int, fh: Any) -> int:
        self.slow(path)
        with self.mtx:
            self._maybe_reload()
            raw = data.decode(errors="replace")
            value = raw.strip()
            self._gone(fh, f"{path.rsplit('/', 2)[-2]} {path.rsplit('/', 1)[-1]}={value}")
            kind, obj, attr = self._resolve(path)
            if kind == "pstate" and attr is not None:
                self.hw.advance()  # a reset changes the frequencies: energy so far is the old state's
                self._logged(f"pstate {attr}={value}", lambda: self.hw.pstate_write(attr, raw))
                return len(data)
            if kind == "udir" and attr is not None:
                self.hw.advance()
                self._logged(f"uncore {obj} {attr}={value}", lambda: self.hw.uncore.write(obj, attr, raw, now()))
                return len(data)
            if kind != "policy" or not (obj.attrs()[attr][0] & 0o200 or attr in obj.ro):
                raise FuseOSError(errno.EACCES)
            if self.hw.cfg["unreadable"]:
                self.log.write(f"{now():.6f} policy{obj.idx} {attr}={value} EIO\n")
                raise FuseOSError(errno.EIO)
            self.hw.advance()  # energy up to now belongs to the old frequency
            self._logged(f"policy{obj.idx} {attr}={value}", lambda: obj.write(attr, value))
        return len(data)


def main() -> None:
    if len(sys.argv) != 4:
        sys.exit(__doc__)
    mnt, cfg, log = sys.argv[1:]
    FUSE(FakeSys(cfg, log), mnt, foreground=True, allow_other=True, default_permissions=True,
         nothreads=False, attr_timeout=0, entry_timeout=0, direct_io=True)


if __name__ == "__main__":
    main()
