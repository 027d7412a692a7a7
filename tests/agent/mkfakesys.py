#!/usr/bin/python3
# SPDX-License-Identifier: BSD-3-Clause
"""Builds a plain-file fake sysfs tree for the node agent's tests and benchmarks.

    mkfakesys.py ROOT --cpus 128 [--driver acpi-cpufreq|intel_pstate|intel_cpufreq|
                 amd-pstate-epp|cppc_cpufreq|scmi] [--cpus-per-policy 1] [--rapl SOCKETS]
                 [--hwmon energy|power] [--epp] [--nonlinear KHZ] [--uncore SOCKETS]
                 [--packages N]

Same layout as tests/unit/fakesys.h: devices/system/cpu/cpufreq/policyN with
the attributes the backend reads, cpuN/cpufreq symlinks, and optionally
class/powercap/intel-rapl:S with a dram subzone.  Plain files on tmpfs: a
frequency write is one ~1 us pwrite, the cost the benchmarks subtract, and
unlike the FUSE fake a shorter value leaves a tail after its newline (the
backend reads the first line only).

The levers beyond the cap, each only when asked for: --epp writes
energy_performance_preference (balance_performance) and
energy_performance_available_preferences per policy (amd-pstate-epp always
has them); --nonlinear KHZ amd_pstate_lowest_nonlinear_freq (amd-pstate-epp:
1800000 unless given); --uncore SOCKETS
intel_uncore_frequency/package_XX_die_00 with min, max and initial limits
800000..2500000 kHz and current_freq_khz; --packages N
cpuN/topology/physical_package_id (cpu i -> package i * N // ncpu, as the
FUSE fake maps its RAPL zones) and die_id 0.
"""
from __future__ import annotations

import argparse
import os
from pathlib import Path

ACPI_GOVS = "conservative ondemand userspace powersave performance schedutil"
EPP_AVAILABLE = "default performance balance_performance balance_power power"
UNCORE_KHZ = (800000, 2500000)


def put(path: Path, text: str, mode: int = 0o644) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    os.chmod(path, mode)


def build(root: Path, ncpu: int, driver: str, span: int, rapl: int, hwmon: str = "", epp: bool = False,
          nonlinear: int = 0, uncore: int = 0, packages: int = 0) -> None:
    cpu = root / "devices/system/cpu"
    if driver == "amd-pstate-epp":
        epp = True
        nonlinear = nonlinear or 1800000
    for first in range(0, ncpu, span):
        cpus = list(range(first, min(ncpu, first + span)))
        pol = cpu / "cpufreq" / f"policy{first}"
        lst = " ".join(map(str, cpus)) + "\n"
        if driver == "intel_pstate":
            lo, hi, govs, gov = 800000, 4200000, "performance powersave", "powersave"
        elif driver == "intel_cpufreq":  # intel passive: the generic governors, no table
            lo, hi, govs, gov = 800000, 4200000, ACPI_GOVS, "schedutil"
        elif driver == "amd-pstate-epp":
            lo, hi, govs, gov = 1500000, 3700000, "performance powersave", "powersave"
        elif driver == "cppc_cpufreq":  # Arm servers: no table, any level in range
            lo, hi, govs, gov = 1000000, 3000000, ACPI_GOVS, "schedutil"
        elif driver == "scmi":  # Arm SCMI firmware: a table, usually per-cluster domains
            lo, hi, govs, gov = 1300000, 2600000, ACPI_GOVS, "schedutil"
            put(pol / "scaling_available_frequencies", "2600000 2200000 1700000 1300000 \n")
        else:
            lo, hi, govs, gov = 1200000, 3000000, ACPI_GOVS, "performance"
            put(pol / "scaling_available_frequencies", "3000000 2400000 1800000 1200000 \n")
        for name, value in (("scaling_driver", driver), ("cpuinfo_min_freq", lo), ("cpuinfo_max_freq", hi),
                            ("cpuinfo_transition_latency", 10000), ("scaling_min_freq", lo),
                            ("scaling_max_freq", hi), ("scaling_cur_freq", hi),
                            ("scaling_available_governors", govs), ("scaling_governor", gov),
                            ("scaling_setspeed", "<unsupported>")):
            put(pol / name, f"{value}\n")
        put(pol / "related_cpus", lst)
        put(pol / "affected_cpus", lst)
        if epp:
            put(pol / "energy_performance_preference", "balance_performance\n")
            put(pol / "energy_performance_available_preferences", EPP_AVAILABLE + "\n", 0o444)
        if nonlinear:
            put(pol / "amd_pstate_lowest_nonlinear_freq", f"{nonlinear}\n", 0o444)
            put(pol / "amd_pstate_max_freq", f"{hi}\n", 0o444)
        for c in cpus:
            (cpu / f"cpu{c}" / "topology").mkdir(parents=True, exist_ok=True)
            link = cpu / f"cpu{c}" / "cpufreq"
            if link.is_symlink():
                link.unlink()
            link.symlink_to(f"../cpufreq/policy{first}")
    if driver in ("intel_pstate", "intel_cpufreq"):
        put(cpu / "intel_pstate/status", "active\n" if driver == "intel_pstate" else "passive\n")
        put(cpu / "intel_pstate/no_turbo", "0\n")
    elif driver == "amd-pstate-epp":
        put(cpu / "amd_pstate/status", "active\n")
    for s in range(uncore):
        u = cpu / f"intel_uncore_frequency/package_{s:02d}_die_00"
        for name, value, mode in (("min_freq_khz", UNCORE_KHZ[0], 0o644), ("max_freq_khz", UNCORE_KHZ[1], 0o644),
                                  ("initial_min_freq_khz", UNCORE_KHZ[0], 0o444),
                                  ("initial_max_freq_khz", UNCORE_KHZ[1], 0o444),
                                  ("current_freq_khz", UNCORE_KHZ[1], 0o400)):
            put(u / name, f"{value}\n", mode)
    if packages:
        for c in range(ncpu):
            put(cpu / f"cpu{c}/topology/physical_package_id", f"{c * packages // ncpu}\n", 0o444)
            put(cpu / f"cpu{c}/topology/die_id", "0\n", 0o444)
    for s in range(rapl):
        z = root / f"class/powercap/intel-rapl:{s}"
        put(z / "name", f"package-{s}\n", 0o444)
        put(z / "max_energy_range_uj", "262143328850\n", 0o444)
        put(z / "energy_uj", "123456789\n", 0o400)
        d = root / f"class/powercap/intel-rapl:{s}:0"
        put(d / "name", "dram\n", 0o444)
        put(d / "max_energy_range_uj", "65532610987\n", 0o444)
        put(d / "energy_uj", "1000\n", 0o400)
    # hwmon, the energy source of nodes without RAPL (agent/energy.h): two
    # energy counters as on Ampere Altra, or an ACPI power meter as on Grace.
    h = root / "class/hwmon/hwmon0"
    if hwmon == "energy":
        put(h / "name", "smpro\n", 0o444)
        for m, label in ((1, "CPU energy"), (2, "IO energy")):
            put(h / f"energy{m}_input", "1000000\n", 0o444)
            put(h / f"energy{m}_label", f"{label}\n", 0o444)
    elif hwmon == "power":
        put(h / "name", "power_meter\n", 0o444)
        put(h / "power1_average", "250000000\n", 0o444)
        put(h / "power1_average_interval", "100\n", 0o444)
        put(h / "power1_oem_info", "Module Power Socket 0\n", 0o444)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("root")
    ap.add_argument("--cpus", type=int, default=2)
    ap.add_argument("--driver", default="acpi-cpufreq",
                    choices=["acpi-cpufreq", "intel_pstate", "intel_cpufreq", "amd-pstate-epp", "cppc_cpufreq", "scmi"])
    ap.add_argument("--cpus-per-policy", type=int, default=1)
    ap.add_argument("--rapl", type=int, default=0, help="number of sockets with RAPL zones")
    ap.add_argument("--hwmon", default="", choices=["", "energy", "power"],
                    help="hwmon energy counters or a power meter (for nodes without RAPL)")
    ap.add_argument("--epp", action="store_true", help="EPP files per policy")
    ap.add_argument("--nonlinear", type=int, default=0, metavar="KHZ",
                    help="amd_pstate_lowest_nonlinear_freq per policy")
    ap.add_argument("--uncore", type=int, default=0, metavar="SOCKETS", help="intel_uncore_frequency package dirs")
    ap.add_argument("--packages", type=int, default=0, metavar="N", help="cpuN/topology package ids")
    a = ap.parse_args()
    build(Path(a.root), a.cpus, a.driver, max(1, a.cpus_per_policy), a.rapl, a.hwmon, a.epp, a.nonlinear,
          a.uncore, a.packages)


if __name__ == "__main__":
    main()
