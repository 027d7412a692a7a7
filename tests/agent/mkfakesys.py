#!/usr/bin/python3
"""Builds a plain-file fake sysfs tree for the node agent's tests and benchmarks.

    mkfakesys.py ROOT --cpus 128 [--driver acpi-cpufreq|intel_pstate|cppc_cpufreq|scmi]
                 [--cpus-per-policy 1] [--rapl SOCKETS] [--hwmon energy|power]

Same layout as tests/unit/fakesys.h: devices/system/cpu/cpufreq/policyN with
the attributes the backend reads, cpuN/cpufreq symlinks, and optionally
class/powercap/intel-rapl:S with a dram subzone.  Plain files on tmpfs: a
frequency write is one ~1 us pwrite, the cost the benchmarks subtract, and
unlike the FUSE fake a shorter value leaves a tail after its newline (the
backend reads the first line only).
"""
from __future__ import annotations

import argparse
import os
from pathlib import Path

ACPI_GOVS = "conservative ondemand userspace powersave performance schedutil"


def put(path: Path, text: str, mode: int = 0o644) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    os.chmod(path, mode)


def build(root: Path, ncpu: int, driver: str, span: int, rapl: int, hwmon: str = "") -> None:
    cpu = root / "devices/system/cpu"
    for first in range(0, ncpu, span):
        cpus = list(range(first, min(ncpu, first + span)))
        pol = cpu / "cpufreq" / f"policy{first}"
        lst = " ".join(map(str, cpus)) + "\n"
        if driver == "intel_pstate":
            lo, hi, govs, gov = 800000, 4200000, "performance powersave", "powersave"
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
        for c in cpus:
            (cpu / f"cpu{c}" / "topology").mkdir(parents=True, exist_ok=True)
            link = cpu / f"cpu{c}" / "cpufreq"
            if link.is_symlink():
                link.unlink()
            link.symlink_to(f"../cpufreq/policy{first}")
    if driver == "intel_pstate":
        put(cpu / "intel_pstate/status", "active\n")
        put(cpu / "intel_pstate/no_turbo", "0\n")
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
    ap.add_argument("--driver", default="acpi-cpufreq", choices=["acpi-cpufreq", "intel_pstate", "cppc_cpufreq", "scmi"])
    ap.add_argument("--cpus-per-policy", type=int, default=1)
    ap.add_argument("--rapl", type=int, default=0, help="number of sockets with RAPL zones")
    ap.add_argument("--hwmon", default="", choices=["", "energy", "power"],
                    help="hwmon energy counters or a power meter (for nodes without RAPL)")
    a = ap.parse_args()
    build(Path(a.root), a.cpus, a.driver, max(1, a.cpus_per_policy), a.rapl, a.hwmon)


if __name__ == "__main__":
    main()
