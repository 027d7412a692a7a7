# SPDX-License-Identifier: BSD-3-Clause
"""The fake hardware of each node behaves like the kernel's sysfs: these are
the rules every later test relies on, so each is shown to hold.

FakeSysfs runs against the lab's nodes; the classes after it (the levers
beyond the cap: EPP, the P-state and uncore trees, the knee power model,
`lab relink`'s topology) mount fakesys.py themselves on a private directory,
as node.sh does, and need root and /dev/fuse but no Slurm."""
from __future__ import annotations

import errno
import json
import os
import re
import shutil
import stat
import subprocess
import sys
import tempfile
import time
import unittest
from pathlib import Path
from typing import Any, Optional

import labtools as lt

CPUFREQ = "/sys/devices/system/cpu/cpufreq"
RAPL = "/sys/class/powercap/intel-rapl:0"


def read(node: str, path: str) -> str:
    return lt.node_exec(node, f"cat {path}").stdout.strip()


def write(node: str, path: str, value: str) -> tuple[int, str]:
    r = lt.node_exec(node, f"echo {value} > {path}", check=False)
    return r.returncode, r.stderr


class FakeSysfs(unittest.TestCase):
    def setUp(self) -> None:
        for n in ("n1", "n2"):
            lt.flavour(n)  # power-on state, acpi-cpufreq, one CPU per policy

    def tearDown(self) -> None:
        for n in ("n1", "n2"):
            lt.flavour(n)

    def test_acpi_tree_shape(self) -> None:
        snap = lt.snapshot("n1")
        for attr in ("scaling_governor=performance", "scaling_driver=acpi-cpufreq", "related_cpus=0",
                     "affected_cpus=0", "cpuinfo_transition_latency=10000", "scaling_setspeed=<unsupported>",
                     "scaling_available_frequencies=3000000 2400000 1800000 1200000"):
            self.assertIn("policy0/" + attr, snap)
        self.assertIn("policy1/related_cpus=1", snap)
        self.assertIn("cpu1/cpufreq -> ../cpufreq/policy1", snap)
        self.assertIn("userspace", read("n1", f"{CPUFREQ}/policy0/scaling_available_governors"))

    def test_write_replaces_and_invalid_is_einval(self) -> None:
        self.assertEqual(write("n1", f"{CPUFREQ}/policy0/scaling_governor", "userspace")[0], 0)
        self.assertEqual(write("n1", f"{CPUFREQ}/policy0/scaling_governor", "powersave")[0], 0)
        # a shorter value leaves no tail of the longer one
        self.assertEqual(read("n1", f"{CPUFREQ}/policy0/scaling_governor"), "powersave")
        rc, err = write("n1", f"{CPUFREQ}/policy0/scaling_governor", "turbo")
        self.assertNotEqual(rc, 0)
        self.assertIn("Invalid argument", err)
        rc, err = write("n1", f"{CPUFREQ}/policy0/scaling_max_freq", "fast")
        self.assertIn("Invalid argument", err)
        self.assertEqual(read("n1", f"{CPUFREQ}/policy0/scaling_governor"), "powersave")

    def test_setspeed_only_under_userspace(self) -> None:
        rc, err = write("n1", f"{CPUFREQ}/policy0/scaling_setspeed", "1800000")
        self.assertNotEqual(rc, 0)
        self.assertIn("Invalid argument", err)
        write("n1", f"{CPUFREQ}/policy0/scaling_governor", "userspace")
        self.assertEqual(write("n1", f"{CPUFREQ}/policy0/scaling_setspeed", "1800000")[0], 0)
        self.assertEqual(read("n1", f"{CPUFREQ}/policy0/scaling_cur_freq"), "1800000")
        # clamped to the policy limits like cpufreq_driver_target()
        write("n1", f"{CPUFREQ}/policy0/scaling_min_freq", "2400000")
        self.assertEqual(read("n1", f"{CPUFREQ}/policy0/scaling_cur_freq"), "2400000")

    def test_write_log_records_exact_sequence(self) -> None:
        before = len(lt.write_log("n1"))
        write("n1", f"{CPUFREQ}/policy1/scaling_governor", "userspace")
        write("n1", f"{CPUFREQ}/policy1/scaling_setspeed", "1200000")
        write("n1", f"{CPUFREQ}/policy1/scaling_setspeed", "3000000")
        write("n1", f"{CPUFREQ}/policy1/scaling_governor", "nonsense")
        new = lt.write_log("n1")[before:]
        body = [l.split(" ", 1)[1] for l in new]
        self.assertEqual(body, ["policy1 scaling_governor=userspace", "policy1 scaling_setspeed=1200000",
                                "policy1 scaling_setspeed=3000000", "policy1 scaling_governor=nonsense EINVAL"])
        stamps = [float(l.split(" ", 1)[0]) for l in new]
        self.assertEqual(stamps, sorted(stamps))

    def test_nodes_are_independent(self) -> None:
        write("n1", f"{CPUFREQ}/policy0/scaling_governor", "powersave")
        self.assertEqual(read("n1", f"{CPUFREQ}/policy0/scaling_governor"), "powersave")
        self.assertEqual(read("n2", f"{CPUFREQ}/policy0/scaling_governor"), "performance")
        self.assertNotIn("powersave", "".join(lt.write_log("n2")[-3:]))

    def test_users_cannot_write_and_energy_is_root_only(self) -> None:
        wd = lt.workdir("fakesys-perm")
        r = lt.as_user(["srun", "-w", "n1", "-n1", "bash", "-c",
                        f"cat {CPUFREQ}/policy0/scaling_governor; echo powersave > {CPUFREQ}/policy0/scaling_governor;"
                        f" cat {RAPL}/energy_uj"], cwd=wd)
        self.assertEqual(r.stdout.strip(), "performance")
        self.assertIn("scaling_governor: Permission denied", r.stderr)
        self.assertRegex(r.stderr, r"energy_uj'?: Permission denied")
        self.assertEqual(read("n1", f"{CPUFREQ}/policy0/scaling_governor"), "performance")

    def test_intel_pstate_has_no_userspace(self) -> None:
        lt.flavour("n2", driver="intel_pstate")
        self.assertEqual(read("n2", f"{CPUFREQ}/policy0/scaling_driver"), "intel_pstate")
        self.assertEqual(read("n2", f"{CPUFREQ}/policy0/scaling_available_governors"), "performance powersave")
        rc, err = write("n2", f"{CPUFREQ}/policy0/scaling_governor", "userspace")
        self.assertIn("Invalid argument", err)
        rc, err = write("n2", f"{CPUFREQ}/policy0/scaling_setspeed", "1200000")
        self.assertIn("Invalid argument", err)
        self.assertEqual(lt.node_exec("n2", f"test -e {CPUFREQ}/policy0/scaling_available_frequencies",
                                      check=False).returncode, 1)
        # clamping max_freq is the mechanism that works with HWP
        self.assertEqual(write("n2", f"{CPUFREQ}/policy0/scaling_max_freq", "1200000")[0], 0)
        self.assertEqual(read("n2", f"{CPUFREQ}/policy0/scaling_cur_freq"), "1200000")
        self.assertEqual(read("n1", f"{CPUFREQ}/policy0/scaling_driver"), "acpi-cpufreq")

    def test_policy_spanning_cpus(self) -> None:
        lt.flavour("n1", cpus_per_policy=2)
        snap = lt.snapshot("n1")
        self.assertIn("policy0/related_cpus=0 1", snap)
        self.assertNotIn("policy1/", snap)
        self.assertIn("cpu1/cpufreq -> ../cpufreq/policy0", snap)
        self.assertEqual(read("n1", "/sys/devices/system/cpu/cpu1/cpufreq/related_cpus"), "0 1")

    def test_energy_advances_with_frequency_and_wraps(self) -> None:
        lt.flavour("n1", max_energy_range_uj=20_000_000, energy_start_uj=0)
        e = []
        for _ in range(5):
            e.append(int(read("n1", f"{RAPL}/energy_uj")))
            time.sleep(0.3)
        self.assertEqual(read("n1", f"{RAPL}/max_energy_range_uj"), "20000000")
        self.assertEqual(read("n1", f"{RAPL}/name"), "package-0")
        self.assertEqual(read("n1", "/sys/class/powercap/intel-rapl:0:0/name"), "dram")
        # 40 W at full speed: 20 J wrap every ~0.5 s, so 5 reads 0.3 s apart see it wrap
        deltas = [(b - a) % 20_000_000 for a, b in zip(e, e[1:])]
        self.assertTrue(any(b < a for a, b in zip(e, e[1:])), f"no wrap seen in {e}")
        for d in deltas:
            self.assertGreater(d, 0.2 * 40e6 * 0.3, deltas)
        # lower frequency, lower power: mean power must drop
        for p in (0, 1):
            write("n1", f"{CPUFREQ}/policy{p}/scaling_max_freq", "1200000")
        a = int(read("n1", f"{RAPL}/energy_uj")); t0 = time.monotonic()
        time.sleep(0.5)
        b = int(read("n1", f"{RAPL}/energy_uj")); t1 = time.monotonic()
        watts = ((b - a) % 20_000_000) / (t1 - t0) / 1e6
        self.assertLess(watts, 30.0)  # 10 W + 2 x 15 W x (1.2/3)^2 = 14.8 W nominal
        self.assertGreater(watts, 10.0)


FAKESYS = lt.TOP / "tests" / "cluster" / "fakesys.py"
PYTHON = "/usr/bin/python3"  # Debian's, which has python3-fusepy


def fuse_missing() -> str:
    """Why a private fakesys.py mount cannot be made here, or ''."""
    if os.geteuid() != 0:
        return "needs root"
    if not os.path.exists("/dev/fuse"):
        return "no /dev/fuse"
    if subprocess.run([PYTHON, "-c", "import fusepy"], capture_output=True).returncode != 0:
        return "no python3-fusepy"
    return ""


def load_fakesys() -> Any:
    """The fakesys module itself, for the power model's exact figures."""
    sys.path.insert(0, str(FAKESYS.parent))
    try:
        import fakesys  # type: ignore[import-not-found]
    finally:
        sys.path.pop(0)
    return fakesys


class Fake:
    """fakesys.py mounted on DIR/fuse with DIR/fakesys.json and the write log
    DIR/cpufreq-writes.log: a lab node's layout, without the lab."""

    def __init__(self, d: Optional[Path] = None, **cfg: Any) -> None:
        self.tmp = None if d else Path(tempfile.mkdtemp(prefix="mpi-pstate-fakesys."))
        self.dir = d or self.tmp
        assert self.dir is not None
        self.mnt = self.dir / "fuse"
        self.mnt.mkdir(parents=True, exist_ok=True)
        self.cfg = self.dir / "fakesys.json"
        self.logf = self.dir / "cpufreq-writes.log"
        self.flavour(**cfg)
        with open(self.dir / "fakesys.err", "w") as err:
            self.proc = subprocess.Popen([PYTHON, str(FAKESYS), str(self.mnt), str(self.cfg), str(self.logf)],
                                         stdout=subprocess.DEVNULL, stderr=err)
        for _ in range(200):
            if (self.mnt / "cpufreq").is_dir():
                break
            time.sleep(0.05)
        else:
            self.close()
            raise AssertionError("fakesys.py did not mount")

    def flavour(self, **cfg: Any) -> None:
        """A new flavour: the fake resets on its next access (a new mtime)."""
        tmp = self.cfg.with_suffix(".tmp")
        tmp.write_text(json.dumps(cfg))
        os.replace(tmp, self.cfg)
        t = time.time_ns()
        os.utime(self.cfg, ns=(t, t))
        self.read("cpufreq") if self.mnt.joinpath("cpufreq").exists() else None

    def path(self, rel: str) -> Path:
        return self.mnt / rel

    def read(self, rel: str) -> str:
        p = self.path(rel)
        return "" if p.is_dir() else p.read_text().strip()

    def read_errno(self, rel: str) -> int:
        try:
            self.path(rel).read_text()
        except OSError as e:
            return e.errno or -1
        return 0

    def write(self, rel: str, value: str) -> int:
        """0, or the errno of the refused open or write (as `echo` does it)."""
        try:
            fd = os.open(self.path(rel), os.O_WRONLY)
        except OSError as e:
            return e.errno or -1
        try:
            os.write(fd, value.encode() + b"\n")
        except OSError as e:
            return e.errno or -1
        finally:
            os.close(fd)
        return 0

    def log(self) -> list[str]:
        """The write log's lines without their time stamps."""
        return [line.split(" ", 1)[1] for line in self.logf.read_text().splitlines()]

    def mode(self, rel: str) -> int:
        return stat.S_IMODE(self.path(rel).stat().st_mode)

    def watts(self, seconds: float = 0.4, zone: str = "intel-rapl:0") -> float:
        rel = f"powercap/{zone}/energy_uj"
        a, t0 = int(self.read(rel)), time.monotonic()
        time.sleep(seconds)
        b, t1 = int(self.read(rel)), time.monotonic()
        return (b - a) / (t1 - t0) / 1e6

    def close(self) -> None:
        subprocess.run(["umount", "-l", str(self.mnt)], capture_output=True)
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        if self.tmp is not None:
            shutil.rmtree(self.tmp, ignore_errors=True)


P0 = "cpufreq/policy0/"
EPP = P0 + "energy_performance_preference"
AVAIL = P0 + "energy_performance_available_preferences"
U0 = "uncore/package_00_die_00/"


@unittest.skipIf(fuse_missing(), fuse_missing())
class PrivateFake(unittest.TestCase):
    """One fakesys.py mount per class; every test sets its own flavour."""

    fake: Fake

    @classmethod
    def setUpClass(cls) -> None:
        cls.fake = Fake()

    @classmethod
    def tearDownClass(cls) -> None:
        cls.fake.close()

    def flavour(self, **cfg: Any) -> Fake:
        self.fake.flavour(**cfg)
        return self.fake

    def new_log(self) -> tuple[Fake, int]:
        return self.fake, len(self.fake.log())


class FakeDrivers(PrivateFake):
    def test_each_driver_has_its_files_and_governors(self) -> None:
        shapes = {  # driver (and keys) -> governors, EPP files?, amd files?, table?
            "intel_pstate": ("performance powersave", "powersave", True, False),
            "intel_cpufreq": ("conservative ondemand userspace powersave performance schedutil", "schedutil",
                              True, False),
            "amd-pstate-epp": ("performance powersave", "powersave", True, True),
            "amd-pstate": ("conservative ondemand userspace powersave performance schedutil", "schedutil",
                           False, True),
            "acpi-cpufreq": ("conservative ondemand userspace powersave performance schedutil", "performance",
                             False, False),
        }
        for driver, (govs, gov, epp, amd) in shapes.items():
            with self.subTest(driver=driver):
                f = self.flavour(driver=driver)
                self.assertEqual(f.read(P0 + "scaling_driver"), driver)
                self.assertEqual(f.read(P0 + "scaling_available_governors"), govs)
                self.assertEqual(f.read(P0 + "scaling_governor"), gov)
                self.assertEqual(f.path(EPP).exists(), epp)
                self.assertEqual(f.path(AVAIL).exists(), epp)
                self.assertEqual(f.path(P0 + "amd_pstate_lowest_nonlinear_freq").exists(), amd)
                self.assertEqual(f.path(P0 + "scaling_available_frequencies").exists(), driver == "acpi-cpufreq")
                self.assertEqual(f.path("pstate").is_dir(), driver != "acpi-cpufreq")
                if epp:
                    self.assertEqual(f.mode(EPP), 0o644)
                    self.assertEqual(f.mode(AVAIL), 0o444)
        f = self.flavour(driver="intel_pstate", hwp=False)  # EPP and base_frequency come with HWP
        self.assertFalse(f.path(EPP).exists())
        self.assertFalse(f.path(P0 + "base_frequency").exists())
        self.assertFalse(f.path("pstate/hwp_dynamic_boost").exists())
        f = self.flavour(driver="intel_cpufreq", hwp=False)
        self.assertFalse(f.path(EPP).exists())

    def test_setspeed_is_a_floor_with_intel_hwp_passive_and_amd_guided(self) -> None:
        for cfg, cur in (({"driver": "intel_cpufreq"}, "3000000"),
                         ({"driver": "intel_cpufreq", "hwp": False}, "1800000"),
                         ({"driver": "amd-pstate"}, "1800000"),
                         ({"driver": "amd-pstate", "amd_mode": "guided"}, "3000000")):
            with self.subTest(**cfg):
                f = self.flavour(**cfg)
                self.assertEqual(f.write(P0 + "scaling_governor", "userspace"), 0)
                self.assertEqual(f.write(P0 + "scaling_setspeed", "1800000"), 0)
                self.assertEqual(f.read(P0 + "scaling_cur_freq"), cur)

    def test_amd_nonlinear_and_the_613_min(self) -> None:
        f = self.flavour(driver="amd-pstate-epp")
        self.assertEqual(f.read(P0 + "amd_pstate_lowest_nonlinear_freq"), "1800000")  # second-lowest
        self.assertEqual(f.read(P0 + "amd_pstate_max_freq"), "3000000")
        self.assertEqual(f.mode(P0 + "amd_pstate_lowest_nonlinear_freq"), 0o444)
        self.assertEqual(f.read(P0 + "scaling_min_freq"), "1200000")
        f = self.flavour(driver="amd-pstate", kernel="6.13", nonlinear_khz=2000000)
        self.assertEqual(f.read(P0 + "amd_pstate_lowest_nonlinear_freq"), "2000000")
        self.assertEqual(f.read(P0 + "scaling_min_freq"), "2000000")
        self.assertEqual(f.read("cpufreq/policy1/scaling_min_freq"), "2000000")
        f = self.flavour(driver="intel_pstate", kernel="6.13")  # an amd rule only
        self.assertEqual(f.read(P0 + "scaling_min_freq"), "1200000")

    def test_ro_attrs_refuse_with_eacces(self) -> None:
        f, n = self.flavour(driver="amd-pstate-epp", ro_attrs=["scaling_max_freq"]), len(self.fake.log())
        self.assertEqual(f.mode(P0 + "scaling_max_freq"), 0o444)
        self.assertEqual(f.write(P0 + "scaling_max_freq", "1800000"), errno.EACCES)
        self.assertEqual(f.read(P0 + "scaling_max_freq"), "3000000")
        self.assertEqual(f.write(P0 + "scaling_min_freq", "1800000"), 0)  # only the attributes named
        self.assertEqual(f.write(EPP, "power"), 0)
        self.assertEqual(f.log()[n:], ["policy0 scaling_max_freq EACCES", "policy0 scaling_min_freq=1800000",
                                       "policy0 energy_performance_preference=power"])
        f = self.flavour(driver="amd-pstate-epp")
        self.assertEqual(f.mode(P0 + "scaling_max_freq"), 0o644)
        self.assertEqual(f.write(P0 + "scaling_max_freq", "1800000"), 0)


class FakeEpp(PrivateFake):
    def test_intel_strings_numbers_and_refusals(self) -> None:
        f, n = self.flavour(driver="intel_pstate"), len(self.fake.log())
        self.assertEqual(f.read(EPP), "balance_performance")
        self.assertEqual(f.read(AVAIL), "default performance balance_performance balance_power power")
        for value, shown in (("balance_power", "balance_power"), ("192", "balance_power"), ("100", "100"),
                             ("0", "performance"), ("255", "power"), ("default", "balance_performance")):
            self.assertEqual(f.write(EPP, value), 0, value)
            self.assertEqual(f.read(EPP), shown, value)
        for value in ("256", "fast", "-1", "0x10"):
            self.assertEqual(f.write(EPP, value), errno.EINVAL, value)
        self.assertEqual(f.read(EPP), "balance_performance")
        self.assertEqual(f.log()[n + 6:], [f"policy0 energy_performance_preference={v} EINVAL"
                                           for v in ("256", "fast", "-1", "0x10")])
        f = self.flavour(driver="intel_pstate", epp_default=0x70)
        self.assertEqual(f.read(EPP), "112")
        self.assertEqual(f.write(EPP, "power"), 0)
        self.assertEqual(f.write(EPP, "default"), 0)
        self.assertEqual(f.read(EPP), "112")

    def test_amd_strings_only_and_a_nonstandard_value_is_unreadable(self) -> None:
        f = self.flavour(driver="amd-pstate-epp")
        self.assertEqual(f.read(EPP), "balance_performance")
        self.assertEqual(f.write(EPP, "balance_power"), 0)
        self.assertEqual(f.read(EPP), "balance_power")
        for value in ("255", "0", "191", "fast"):
            self.assertEqual(f.write(EPP, value), errno.EINVAL, value)
        f = self.flavour(driver="amd-pstate-epp", epp_default=0x70)
        self.assertEqual(f.read_errno(EPP), errno.EINVAL)
        self.assertEqual(f.write(EPP, "power"), 0)
        self.assertEqual(f.read(EPP), "power")
        self.assertEqual(f.write(EPP, "default"), 0)
        self.assertEqual(f.read_errno(EPP), errno.EINVAL)

    def test_ebusy_under_performance_on_the_active_drivers(self) -> None:
        f, n = self.flavour(driver="intel_pstate"), len(self.fake.log())
        self.assertEqual(f.write(EPP, "balance_power"), 0)
        self.assertEqual(f.write(P0 + "scaling_governor", "performance"), 0)
        self.assertEqual(f.read(EPP), "performance")  # the driver writes EPP 0
        self.assertEqual(f.write(EPP, "power"), errno.EBUSY)
        self.assertEqual(f.write(EPP, "default"), errno.EBUSY)
        self.assertEqual(f.write(EPP, "performance"), 0)
        self.assertEqual(f.write("cpufreq/policy1/" + "energy_performance_preference", "power"), 0)
        self.assertEqual(f.write(P0 + "scaling_governor", "powersave"), 0)
        self.assertEqual(f.read(EPP), "balance_power")  # intel restores the saved value
        self.assertEqual(f.log()[n:], [
            "policy0 energy_performance_preference=balance_power", "policy0 scaling_governor=performance",
            "policy0 energy_performance_preference=power EBUSY",
            "policy0 energy_performance_preference=default EBUSY",
            "policy0 energy_performance_preference=performance", "policy1 energy_performance_preference=power",
            "policy0 scaling_governor=powersave"])

        f = self.flavour(driver="amd-pstate-epp")
        self.assertEqual(f.write(P0 + "scaling_governor", "performance"), 0)
        self.assertEqual(f.read(AVAIL), "performance")
        self.assertEqual(f.write(EPP, "power"), errno.EBUSY)
        self.assertEqual(f.write(P0 + "scaling_governor", "powersave"), 0)
        self.assertEqual(f.read(EPP), "performance")  # amd keeps the cached 0
        self.assertEqual(f.write(EPP, "power"), 0)

        f = self.flavour(driver="intel_cpufreq")  # passive: no EBUSY rule
        self.assertEqual(f.write(P0 + "scaling_governor", "performance"), 0)
        self.assertEqual(f.write(EPP, "power"), 0)
        self.assertEqual(f.read(EPP), "power")


class FakePstate(PrivateFake):
    def test_intel_status_write_resets_to_the_modes_defaults(self) -> None:
        f = self.flavour(driver="intel_pstate")
        self.assertEqual(sorted(os.listdir(f.path("pstate"))),
                         ["hwp_dynamic_boost", "max_perf_pct", "min_perf_pct", "no_turbo", "status"])
        self.assertEqual(f.read("pstate/status"), "active")
        f.write(P0 + "scaling_max_freq", "1200000")
        f.write(EPP, "power")
        f.write("pstate/max_perf_pct", "50")
        e0 = int(f.read("powercap/intel-rapl:0/energy_uj"))
        n = len(f.log())
        self.assertEqual(f.write("pstate/status", "passive"), 0)
        self.assertEqual(f.log()[n:], ["pstate status=passive", "reset status=passive driver=intel_cpufreq"])
        self.assertEqual(f.read(P0 + "scaling_driver"), "intel_cpufreq")
        self.assertEqual(f.read(P0 + "scaling_max_freq"), "3000000")
        self.assertEqual(f.read(P0 + "scaling_governor"), "schedutil")
        self.assertEqual(f.read(EPP), "balance_performance")
        self.assertEqual(f.read("pstate/max_perf_pct"), "100")
        self.assertFalse(f.path("pstate/hwp_dynamic_boost").exists())  # active mode only
        self.assertGreater(int(f.read("powercap/intel-rapl:0/energy_uj")), e0)  # RAPL is not reset
        n = len(f.log())
        self.assertEqual(f.write("pstate/status", "passive"), 0)  # the current mode: nothing happens
        self.assertEqual(f.write("pstate/status", "guided"), errno.EINVAL)
        self.assertEqual(f.log()[n:], ["pstate status=passive", "pstate status=guided EINVAL"])
        self.assertEqual(f.write("pstate/status", "off"), 0)
        self.assertEqual(os.listdir(f.path("cpufreq")), [])
        self.assertEqual(f.write("pstate/no_turbo", "1"), errno.EAGAIN)
        self.assertEqual(f.write("pstate/status", "active"), 0)
        self.assertEqual(f.read(P0 + "scaling_driver"), "intel_pstate")

    def test_amd_passive_guided_keeps_limits_active_resets(self) -> None:
        f = self.flavour(driver="amd-pstate")
        self.assertEqual(f.read("pstate/status"), "passive")
        self.assertEqual(f.mode("pstate/prefcore"), 0o444)
        f.write(P0 + "scaling_max_freq", "1800000")
        n = len(f.log())
        self.assertEqual(f.write("pstate/status", "guided"), 0)
        self.assertEqual(f.read(P0 + "scaling_max_freq"), "1800000")
        self.assertEqual(f.write("pstate/status", "active"), 0)
        self.assertEqual(f.read(P0 + "scaling_driver"), "amd-pstate-epp")
        self.assertEqual(f.read(P0 + "scaling_max_freq"), "3000000")
        self.assertEqual(f.log()[n:], ["pstate status=guided", "mode status=guided",
                                       "pstate status=active", "reset status=active driver=amd-pstate-epp"])
        self.assertEqual(f.write("pstate/status", "off"), errno.EINVAL)  # intel's word

    def test_an_fd_opened_before_a_reset_is_gone(self) -> None:
        """kernfs: the re-registered driver's policies are new files; the
        old fd fails with ENODEV, a new open works, a mode flip that keeps
        the driver keeps the fd."""
        f = self.flavour(driver="intel_pstate")
        old = os.open(f.path(P0 + "scaling_max_freq"), os.O_RDWR)
        try:
            self.assertEqual(os.pwrite(old, b"1200000", 0), 7)
            self.assertEqual(f.write("pstate/status", "passive"), 0)
            n = len(f.log())
            with self.assertRaises(OSError) as e:
                os.pwrite(old, b"1200000", 0)
            self.assertEqual(e.exception.errno, errno.ENODEV)
            with self.assertRaises(OSError) as e:
                os.pread(old, 64, 0)
            self.assertEqual(e.exception.errno, errno.ENODEV)
            self.assertEqual(f.log()[n:], ["policy0 scaling_max_freq=1200000 ENODEV",
                                           "read policy0 scaling_max_freq ENODEV"])
            self.assertEqual(f.read(P0 + "scaling_max_freq"), "3000000")
            self.assertEqual(f.write(P0 + "scaling_max_freq", "1800000"), 0)
        finally:
            os.close(old)
        f = self.flavour(driver="amd-pstate")
        fd = os.open(f.path(P0 + "scaling_max_freq"), os.O_RDWR)
        try:
            self.assertEqual(f.write("pstate/status", "guided"), 0)
            self.assertEqual(os.pwrite(fd, b"1800000", 0), 7)
        finally:
            os.close(fd)

    def test_no_turbo_and_perf_pct_rules(self) -> None:
        f = self.flavour(driver="intel_pstate")
        self.assertEqual(f.write("pstate/max_perf_pct", "150"), 0)
        self.assertEqual(f.read("pstate/max_perf_pct"), "100")
        self.assertEqual(f.write("pstate/min_perf_pct", "0"), 0)
        self.assertEqual(f.read("pstate/min_perf_pct"), "40")  # 1.2 GHz of 3.0
        self.assertEqual(f.write("pstate/max_perf_pct", "abc"), errno.EINVAL)
        self.assertEqual(f.write("pstate/no_turbo", "7"), 0)
        self.assertEqual(f.read("pstate/no_turbo"), "1")
        f = self.flavour(driver="intel_pstate", turbo_bios_off=True)
        self.assertEqual(f.read("pstate/no_turbo"), "1")
        self.assertEqual(f.write("pstate/no_turbo", "0"), errno.EPERM)
        self.assertEqual(f.log()[-1], "pstate no_turbo=0 EPERM")


class FakeUncore(PrivateFake):
    def test_msr_tree_shape_and_modes(self) -> None:
        f = self.flavour(sockets=2, uncore={})
        self.assertEqual(sorted(os.listdir(f.path("uncore"))), ["package_00_die_00", "package_01_die_00"])
        modes = {"min_freq_khz": 0o644, "max_freq_khz": 0o644, "initial_min_freq_khz": 0o444,
                 "initial_max_freq_khz": 0o444, "current_freq_khz": 0o400}
        self.assertEqual({a: f.mode(U0 + a) for a in os.listdir(f.path(U0))}, modes)
        self.assertEqual([f.read(U0 + a) for a in sorted(modes)],
                         ["2500000", "2500000", "800000", "2500000", "800000"])
        self.assertFalse(self.flavour().path("uncore").exists())

    def test_write_rounds_down_and_refuses_ratios_out_of_range(self) -> None:
        f = self.flavour(uncore={"khz": [800000, 2500000]})
        n = len(f.log())
        self.assertEqual(f.write(U0 + "max_freq_khz", "1234567"), 0)
        self.assertEqual(f.read(U0 + "max_freq_khz"), "1200000")
        self.assertEqual(f.write(U0 + "max_freq_khz", "99999"), errno.EINVAL)  # ratio 0
        self.assertEqual(f.write(U0 + "max_freq_khz", "12800000"), errno.EINVAL)  # ratio 128
        self.assertEqual(f.write(U0 + "max_freq_khz", "12799999"), 0)  # ratio 127
        self.assertEqual(f.write(U0 + "max_freq_khz", "1.2e6"), errno.EINVAL)
        self.assertEqual(f.write(U0 + "max_freq_khz", "4294967296"), errno.ERANGE)
        # no min <= max check: both orders are accepted
        self.assertEqual(f.write(U0 + "min_freq_khz", "2000000"), 0)
        self.assertEqual(f.write(U0 + "max_freq_khz", "1000000"), 0)
        self.assertEqual((f.read(U0 + "min_freq_khz"), f.read(U0 + "max_freq_khz")), ("2000000", "1000000"))
        self.assertEqual(f.write(U0 + "initial_max_freq_khz", "1000000"), errno.EACCES)
        self.assertEqual(f.write(U0 + "current_freq_khz", "1000000"), errno.EACCES)
        self.assertEqual(f.log()[n:], [
            "uncore package_00_die_00 max_freq_khz=1234567", "uncore package_00_die_00 max_freq_khz=99999 EINVAL",
            "uncore package_00_die_00 max_freq_khz=12800000 EINVAL", "uncore package_00_die_00 max_freq_khz=12799999",
            "uncore package_00_die_00 max_freq_khz=1.2e6 EINVAL",
            "uncore package_00_die_00 max_freq_khz=4294967296 ERANGE",
            "uncore package_00_die_00 min_freq_khz=2000000", "uncore package_00_die_00 max_freq_khz=1000000"])

    def test_current_follows_the_max_after_the_latency(self) -> None:
        f = self.flavour(uncore={"latency_s": 0.3})
        t0 = time.monotonic()
        self.assertEqual(f.write(U0 + "max_freq_khz", "1000000"), 0)
        now = f.read(U0 + "current_freq_khz")
        if time.monotonic() - t0 < 0.25:
            self.assertEqual(now, "2500000")
        time.sleep(0.4)
        self.assertEqual(f.read(U0 + "current_freq_khz"), "1000000")
        self.assertEqual(f.write(U0 + "max_freq_khz", "300000"), 0)  # below the hardware's range: clamped
        time.sleep(0.4)
        self.assertEqual(f.read(U0 + "current_freq_khz"), "800000")

    def test_tpmi_root_fans_out_and_clusters_stay_within_it(self) -> None:
        f = self.flavour(uncore={"style": "tpmi", "clusters": 2}, sockets=2, ncpu=4)
        self.assertEqual(sorted(os.listdir(f.path("uncore"))),
                         ["package_00_die_00", "package_01_die_00", "uncore00", "uncore01", "uncore02", "uncore03"])
        self.assertFalse(f.path(U0 + "current_freq_khz").exists())  # ENODATA at the root
        self.assertFalse(f.path("uncore/uncore00/die_id").exists())  # before 6.16
        self.assertEqual([f.read(f"uncore/uncore02/{a}") for a in ("package_id", "domain_id", "fabric_cluster_id")],
                         ["1", "0", "0"])
        self.assertEqual(f.mode("uncore/uncore02/package_id"), 0o400)
        self.assertEqual(f.write(U0 + "max_freq_khz", "2000000"), 0)
        self.assertEqual([f.read(f"uncore/uncore0{i}/max_freq_khz") for i in range(4)],
                         ["2000000", "2000000", "2500000", "2500000"])
        self.assertEqual(f.write("uncore/uncore00/max_freq_khz", "2200000"), errno.EINVAL)  # above the package
        self.assertEqual(f.write("uncore/uncore00/max_freq_khz", "1500000"), 0)
        self.assertEqual(f.read(U0 + "max_freq_khz"), "2000000")  # the highest of its clusters
        self.assertEqual(f.write("uncore/uncore01/min_freq_khz", "1000000"), 0)
        self.assertEqual(f.read(U0 + "min_freq_khz"), "800000")  # the lowest
        f = self.flavour(uncore={"style": "tpmi", "write_blocked": True}, kernel="6.16")
        self.assertEqual(f.read("uncore/uncore00/die_id"), "0")
        self.assertEqual(f.mode("uncore/uncore00/die_id"), 0o444)
        self.assertEqual(f.write(U0 + "max_freq_khz", "2000000"), errno.EPERM)
        self.assertEqual(f.write("uncore/uncore00/max_freq_khz", "2000000"), errno.EPERM)


class FakePower(PrivateFake):
    """The power model: the default one unchanged to the bit, the knee model
    and the uncore term as the module's docstring writes them."""

    @staticmethod
    def hardware(**cfg: Any) -> Any:
        fs = load_fakesys()
        return fs.Hardware(fs.flavour_cfg(cfg))

    def test_default_model_is_unchanged(self) -> None:
        for extra in ({}, {"driver": "amd-pstate-epp", "epp_default": 0x70, "ro_attrs": ["scaling_min_freq"]},
                      {"driver": "intel_pstate", "hwp": False, "kernel": "6.16", "topology": True}):
            hw = self.hardware(ncpu=4, sockets=2, **extra)
            hw.policies[0].max_req, hw.policies[3].max_req = 1200000, 2400000
            busy = [1.0, 0.5, 0.0, 0.25]
            got = hw.power(busy)
            # the formula as it always was: 10 + sum 15 * (f/fmax)^2 * busy, in this order
            s0 = 10.0
            s0 += 15.0 * (1200000 / 3000000) ** 2 * 1.0
            s0 += 15.0 * (3000000 / 3000000) ** 2 * 0.5
            s1 = 10.0
            s1 += 15.0 * (3000000 / 3000000) ** 2 * 0.0
            s1 += 15.0 * (2400000 / 3000000) ** 2 * 0.25
            self.assertEqual(got, {"intel-rapl:0": s0, "intel-rapl:0:0": 3.0, "intel-rapl:1": s1,
                                   "intel-rapl:1:0": 3.0}, extra)
            hw.close()

    def test_knee_model_is_the_formula(self) -> None:
        def cpu_w(f: float, knee: float = 1800000, fmax: float = 3000000, vmin: float = 0.65) -> float:
            v = vmin if f <= knee else vmin + (1 - vmin) * (f - knee) / (fmax - knee)
            return 2.0 + 13.0 * (f / fmax) * v ** 2

        for key in ({"knee": True}, {"model": "knee"}):
            hw = self.hardware(**key)
            self.assertAlmostEqual(hw.power()["intel-rapl:0"], 10 + 2 * 15.0)  # fmax costs 15 W as before
            for f in (1200000, 1800000, 2400000):
                hw.policies[0].max_req = hw.policies[1].max_req = f
                self.assertAlmostEqual(hw.power()["intel-rapl:0"], 10 + 2 * cpu_w(f), msg=f)
            hw.close()
        # energy per cycle is lowest at the knee, as the model is meant to show
        per_cycle = {f: cpu_w(f) / f for f in (1200000, 1800000, 2400000, 3000000)}
        self.assertEqual(min(per_cycle, key=lambda f: per_cycle[f]), 1800000)
        hw = self.hardware(knee=True, core_static_w=1.0, core_dyn_w=20.0, v_min_ratio=0.5, nonlinear_khz=2400000)
        hw.policies[0].max_req = 1200000
        self.assertAlmostEqual(hw.power()["intel-rapl:0"], 10 + (1 + 20 * 0.4 * 0.25) + 21.0)
        hw.close()

    def test_knee_model_measured_through_energy_uj(self) -> None:
        f = self.flavour(knee=True)
        fast = f.watts()
        for p in (0, 1):
            f.write(f"cpufreq/policy{p}/scaling_max_freq", "1200000")
        slow = f.watts()
        self.assertAlmostEqual(fast, 40.0, delta=40.0 * 0.03)
        expect = 10 + 2 * (2 + 13 * 0.4 * 0.65 ** 2)  # 18.39 W
        self.assertAlmostEqual(slow, expect, delta=expect * 0.03)

    def test_uncore_term_follows_the_current_uncore_frequency(self) -> None:
        hw = self.hardware(uncore={"latency_s": 0.0}, sockets=2)
        self.assertAlmostEqual(hw.power()["intel-rapl:1"], 10 + 15.0 + 2.0 + 6.0)
        hw.uncore.write("package_01_die_00", "max_freq_khz", "1250000\n", 0.0)  # rounded to 1.2 GHz
        self.assertAlmostEqual(hw.power(at=1.0)["intel-rapl:1"], 10 + 15.0 + 2.0 + 6.0 * (1.2 / 2.5) ** 2)
        self.assertAlmostEqual(hw.power(at=1.0)["intel-rapl:0"], 10 + 15.0 + 2.0 + 6.0)
        hw.close()
        f = self.flavour(uncore={"latency_s": 0.05})
        before = f.watts(0.3)
        f.write(U0 + "max_freq_khz", "800000")
        time.sleep(0.1)
        after = f.watts(0.3)
        drop = 6.0 * (1 - (0.8 / 2.5) ** 2)  # 5.39 W
        self.assertAlmostEqual(before - after, drop, delta=1.0)


@unittest.skipIf(fuse_missing() or not shutil.which("unshare"), fuse_missing() or "no unshare")
class LabRelink(unittest.TestCase):
    """`lab relink` in a throwaway mount namespace laid out as node.sh lays a
    node (an overlay over /sys/devices/system/cpu, the fake's cpufreq bound
    in): the pstate and uncore trees appear where the kernel has them, the
    package ids follow the flavour, hwloc still pins by package, and a
    default flavour puts everything back."""

    def setUp(self) -> None:
        self.lab = Path(tempfile.mkdtemp(prefix="mpi-pstate-relink."))
        self.nd = self.lab / "nodes" / "n9"
        self.fake = Fake(self.nd, driver="intel_pstate", sockets=2, uncore={})

    def tearDown(self) -> None:
        self.fake.close()
        shutil.rmtree(self.lab, ignore_errors=True)

    def test_relink_binds_trees_and_splits_packages(self) -> None:
        nd, cpu = self.nd, "/sys/devices/system/cpu"
        hw = "hwloc-calc --number-of package machine:0; hwloc-bind package:1 -- grep Cpus_allowed_list " \
             "/proc/self/status" if shutil.which("hwloc-calc") else "echo no-hwloc"
        script = f"""set -e
mkdir -p {nd}/ovl/up {nd}/ovl/work
mount -t overlay overlay -o lowerdir={cpu},upperdir={nd}/ovl/up,workdir={nd}/ovl/work {cpu}
mount --bind {nd}/fuse/cpufreq {cpu}/cpufreq
MPI_PSTATE_LAB={self.lab} {lt.LAB_SCRIPT} relink n9
echo "status=$(cat {cpu}/intel_pstate/status)"
echo "uncore=$(echo $(ls {cpu}/intel_uncore_frequency))"
echo "amd=$(ls -d {cpu}/amd_pstate 2>/dev/null || echo none)"
for c in {cpu}/cpu[0-9]*; do echo "${{c##*/}} pkg=$(cat $c/topology/physical_package_id)" \
    "die=$(cat $c/topology/die_id) cpus=$(cat $c/topology/package_cpus_list)"; done
{hw}
echo '{{}}' > {nd}/fakesys.json
MPI_PSTATE_LAB={self.lab} {lt.LAB_SCRIPT} relink n9
echo "after: $(ls -d {cpu}/intel_pstate {cpu}/intel_uncore_frequency 2>/dev/null | wc -l)" \
    "$(grep -c -e ' {cpu}/intel_pstate ' -e ' {cpu}/intel_uncore_frequency ' /proc/self/mountinfo || true)"
for c in {cpu}/cpu[0-9]*; do echo "after ${{c##*/}} pkg=$(cat $c/topology/physical_package_id)" \
    "cpus=$(cat $c/topology/package_cpus_list)"; done
"""
        real = {c: (Path(cpu) / c / "topology/package_cpus_list").read_text().strip()
                for c in os.listdir(cpu) if re.fullmatch(r"cpu[0-9]+", c)}
        r = subprocess.run(["unshare", "--mount", "--propagation", "private", "bash", "-c", script],
                           capture_output=True, text=True, timeout=60)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(r.stderr, "")  # hwloc says nothing about an inconsistent topology
        out = r.stdout.splitlines()
        self.assertIn("status=active", out)
        self.assertIn("uncore=package_00_die_00 package_01_die_00", out)
        self.assertIn("amd=none", out)
        ncpu = len(real)
        if ncpu >= 2:
            for c in range(ncpu):
                pkg = min(c * 2 // 2, 1)
                members = [m for m in range(ncpu) if min(m * 2 // 2, 1) == pkg]
                lst = str(members[0]) if len(members) == 1 else f"{members[0]}-{members[-1]}"
                self.assertIn(f"cpu{c} pkg={pkg} die=0 cpus={lst}", out)
            if shutil.which("hwloc-calc"):
                self.assertIn("2", out)  # two packages seen by hwloc
                self.assertIn("Cpus_allowed_list:\t1" if ncpu == 2 else "Cpus_allowed_list:\t1-" + str(ncpu - 1),
                              out)
        self.assertIn("after: 0 0", out)  # neither mounted nor left as an empty directory
        for c, lst in real.items():
            self.assertIn(f"after {c} pkg={(Path(cpu) / c / 'topology/physical_package_id').read_text().strip()}"
                          f" cpus={lst}", out)


if __name__ == "__main__":
    unittest.main()
