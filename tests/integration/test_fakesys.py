"""The fake hardware of each node behaves like the kernel's sysfs: these are
the rules every later test relies on, so each is shown to hold."""
from __future__ import annotations

import re
import time
import unittest

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


if __name__ == "__main__":
    unittest.main()
