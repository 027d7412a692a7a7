# SPDX-License-Identifier: BSD-3-Clause
"""The node agent's levers beside the core cap, as a process on a plain-file
fake sysfs (tests/agent/mkfakesys.py) with ranks written from Python:

* the uncore of a package goes down only once every rank on it has waited
  past --uncore-threshold, comes back up when one leaves, never on a package
  that has CPUs outside the step, and is put back by the restore backstop
  after the agent is killed;
* --low efficient takes the driver's lowest nonlinear frequency, else
  calibrate's knee file, else min, and the record says which;
* --mechanism epp lowers energy_performance_preference and puts the saved
  preference back, on exit and through the backstop.

No Slurm: the lab tests (test_levers.py) do the same through sbatch/scancel.
"""
from __future__ import annotations

import os
import subprocess
import sys
import unittest
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import test_agent_daemon as base  # noqa: E402  (Tree, Agent, FakeRank, wait_for)

UNC = "devices/system/cpu/intel_uncore_frequency"


class LeverTree(base.Tree):
    """A fake sysfs with mkfakesys' lever options (--epp, --uncore, ...)."""

    def __init__(self, *mk: str, cpus: int = 4, driver: str = "acpi-cpufreq") -> None:
        super().__init__(cpus=cpus, driver=driver)
        subprocess.run([sys.executable, str(base.MKFAKE), str(self.sys), "--cpus", str(cpus),
                        "--driver", driver, *mk], check=True)

    def uncore(self, pkg: int, attr: str = "max_freq_khz") -> int:
        return int((self.sys / UNC / f"package_{pkg:02d}_die_00" / attr).read_text().split()[0])


@unittest.skipIf(base.SKIP, base.SKIP or "")
class AgentLevers(base.AgentCase):
    def tree(self, *mk: str, **kw) -> LeverTree:  # type: ignore[override]
        t = LeverTree(*mk, **kw)
        self.trees.append(t)
        return t

    def ranks(self, a: base.Agent, cpus: list[int], thr_us: int = 1000) -> list[base.FakeRank]:
        seg = self.live(a)
        return [base.FakeRank(seg, i, cpu=c, threshold_us=thr_us) for i, c in enumerate(cpus)]

    # ---- uncore

    def test_uncore_waits_for_the_whole_package_then_follows_it(self) -> None:
        t = self.tree("--uncore", "2", "--packages", "2")
        before = t.snapshot()
        a = self.agent(t, 4, "--threshold", "1ms", "--uncore", "yes",
                       "--uncore-threshold", "30ms", cpus="0-3")
        r = self.ranks(a, [0, 1, 2, 3])
        r[0].enter()
        base.wait_for(lambda: t.policy(0, "scaling_setspeed") == "1200000", what="core 0 down")
        # one rank of package 0 waits, the other computes: the uncore stays up
        base.time.sleep(0.1)
        self.assertEqual(t.uncore(0), 2500000)
        r[1].enter()
        base.wait_for(lambda: t.uncore(0) == 800000, what="package 0 uncore down")
        self.assertEqual(t.uncore(1), 2500000)  # nobody waits on package 1
        r[1].leave()
        base.wait_for(lambda: t.uncore(0) == 2500000, what="package 0 uncore back up")
        r[0].leave()
        rec = a.stop()
        unc = {u["domain"]: u for u in rec["uncore"]}
        self.assertEqual(unc["package_00_die_00"]["status"], "managed")
        self.assertEqual(unc["package_00_die_00"]["transitions"], 1)
        self.assertEqual(unc["package_01_die_00"]["transitions"], 0)
        self.assertEqual((unc["package_00_die_00"]["low_khz"], unc["package_00_die_00"]["high_khz"]),
                         (800000, 2500000))
        self.assertEqual(unc["package_00_die_00"]["restore"], "restored")
        self.assertEqual(t.uncore(0, "min_freq_khz"), 800000)
        self.assertEqual(t.snapshot(), before)
        # the agent put back what it changed; its records, root's, wait for root
        self.assertEqual(sorted(p.name for p in a.runtime.iterdir()),
                         ["policy0", "policy1", "policy2", "policy3", "uncore-package_00_die_00",
                          "uncore-package_01_die_00"])
        self.assertIn("6 restored, 0 foreign, 0 failed", a.root_restore())
        self.assertEqual(t.snapshot(), before)
        self.assertFalse(any(a.runtime.iterdir()))

    def test_uncore_never_touched_on_a_package_shared_with_others(self) -> None:
        """CPU 3 is not the step's: package 1 is someone else's too."""
        t = self.tree("--uncore", "2", "--packages", "2")
        a = self.agent(t, 3, "--threshold", "1ms", "--uncore", "yes", "--uncore-threshold", "5ms",
                       cpus="0-2")
        r = self.ranks(a, [0, 1, 2])
        for x in r:
            x.enter()
        base.wait_for(lambda: t.uncore(0) == 800000, what="package 0 uncore down")
        base.time.sleep(0.1)
        self.assertEqual(t.uncore(1), 2500000)
        self.assertFalse((a.runtime / "uncore-package_01_die_00").exists())
        for x in r:
            x.leave()
        rec = a.stop()
        unc = {u["domain"]: u for u in rec["uncore"]}
        self.assertEqual(unc["package_01_die_00"]["status"], "outside")
        self.assertEqual(t.uncore(0), 2500000)

    def test_uncore_off_by_default_and_busy_under_another_job(self) -> None:
        t = self.tree("--uncore", "1", "--packages", "1")
        a = self.agent(t, 2, "--threshold", "1ms", cpus="0-3")
        rec_off = None
        r = self.ranks(a, [0, 1])
        for x in r:
            x.enter()
        base.wait_for(lambda: t.policy(0, "scaling_setspeed") == "1200000", what="core down")
        base.time.sleep(0.05)
        self.assertEqual(t.uncore(0), 2500000)
        rec_off = a.stop()
        self.assertNotIn("uncore", rec_off)
        # another job's record for the package: this step leaves it alone
        runtime = t.run / "4243"
        runtime.mkdir(mode=0o700)
        (runtime / "uncore-package_00_die_00").write_text(
            "version=1\njob=9\nstep=0\nuncore=package_00_die_00\nmin_khz=800000\nmax_khz=2500000\n")
        os.chmod(runtime / "uncore-package_00_die_00", 0o600)
        b = self.agent(t, 1, "--uncore", "yes", "--runtime-dir", str(runtime), cpus="0-3", job=4243)
        rec = b.stop()
        self.assertEqual(rec["uncore"][0]["status"], "busy")
        self.assertIn("job 9", rec["uncore"][0]["reason"])

    def test_profile_run_records_which_packages_it_owns(self) -> None:
        """A profile run writes nothing but says which packages an on run
        could lower (the what-if's input), whether or not --uncore is given."""
        t = self.tree("--uncore", "2", "--packages", "2")
        before = t.snapshot()
        a = self.agent(t, 3, "--mpi-pstate", "profile", cpus="0-2")
        r = self.ranks(a, [0, 1, 2])
        for x in r:
            x.enter()
        base.time.sleep(0.1)
        rec = a.stop()
        unc = {u["domain"]: u["status"] for u in rec["uncore"]}
        self.assertEqual(unc, {"package_00_die_00": "profile", "package_01_die_00": "outside"})
        self.assertEqual((t.uncore(0), t.uncore(1)), (2500000, 2500000))
        self.assertFalse(a.runtime.exists() and any(a.runtime.iterdir()))
        self.assertEqual(t.snapshot(), before)

    def test_uncore_restored_by_the_backstop_after_a_kill(self) -> None:
        t = self.tree("--uncore", "1", "--packages", "1")
        a = self.agent(t, 2, "--threshold", "1ms", "--uncore", "yes", "--uncore-threshold", "5ms",
                       cpus="0-3", job=91)
        r = self.ranks(a, [0, 1])
        for x in r:
            x.enter()
        base.wait_for(lambda: t.uncore(0) == 800000, what="uncore down")
        a.kill()
        self.assertEqual(t.uncore(0), 800000)
        self.assertTrue((a.runtime / "uncore-package_00_die_00").exists())
        out = subprocess.run([str(base.AGENT), "--restore", str(a.runtime), "--job", "91", "--sysroot",
                              str(t.sys)], capture_output=True, text=True)
        self.assertEqual(out.returncode, 0, out.stdout + out.stderr)
        self.assertIn("0 failed", out.stdout)
        self.assertEqual(t.uncore(0), 2500000)
        self.assertFalse((a.runtime / "uncore-package_00_die_00").exists())

    # ---- efficient low

    def test_efficient_low_takes_the_nonlinear_frequency(self) -> None:
        t = self.tree("--nonlinear", "1800000", driver="amd-pstate-epp", cpus=2)
        a = self.agent(t, 1, "--threshold", "1ms", "--low", "efficient")
        r = self.ranks(a, [0])
        r[0].enter()
        base.wait_for(lambda: t.policy(0, "scaling_max_freq") == "1800000", what="down to nonlinear")
        r[0].leave()
        rec = a.stop()
        d = rec["domains"][0]
        self.assertEqual((d["low_khz"], d["low_src"]), (1800000, "nonlinear"))
        self.assertEqual(rec["settings"]["low"], "efficient")

    def test_efficient_low_knee_file_then_min(self) -> None:
        t = self.tree(cpus=2)
        knee = t.run / "knee_khz"
        knee.write_text("1800000\n")
        os.chmod(knee, 0o644)
        a = self.agent(t, 1, "--threshold", "1ms", "--low", "efficient", "--knee-file", str(knee))
        rec = a.stop()
        d = rec["domains"][0]
        self.assertEqual((d["low_khz"], d["low_src"]), (1800000, "knee"))
        self.assertEqual(rec["settings"]["knee_khz"], 1800000)
        # a knee file anyone could have written is not believed
        os.chmod(knee, 0o666)
        b = self.agent(t, 1, "--threshold", "1ms", "--low", "efficient", "--knee-file", str(knee))
        d = b.stop()["domains"][0]
        self.assertEqual((d["low_khz"], d["low_src"]), (1200000, "min"))

    # ---- EPP

    def test_epp_mechanism_lowers_the_preference_and_puts_it_back(self) -> None:
        t = self.tree(driver="amd-pstate-epp", cpus=2)
        before = t.snapshot()
        a = self.agent(t, 1, "--threshold", "1ms", "--mechanism", "epp", job=93)
        r = self.ranks(a, [0])
        r[0].enter()
        base.wait_for(lambda: t.policy(0, "energy_performance_preference") == "power", what="EPP power")
        self.assertEqual(t.policy(0, "scaling_max_freq"), "3700000")  # the cap untouched
        r[0].leave()
        base.wait_for(lambda: t.policy(0, "energy_performance_preference") == "balance_performance",
                      what="EPP back")
        r[0].enter()
        base.wait_for(lambda: t.policy(0, "energy_performance_preference") == "power", what="EPP power")
        self.assertIn("epp=balance_performance", (a.runtime / "policy0").read_text())
        a.kill()
        out = subprocess.run([str(base.AGENT), "--restore", str(a.runtime), "--job", "93", "--sysroot",
                              str(t.sys)], capture_output=True, text=True)
        self.assertEqual(out.returncode, 0, out.stdout + out.stderr)
        self.assertEqual(t.policy(0, "energy_performance_preference"), "balance_performance")
        self.assertEqual(t.snapshot(), before)

    def test_epp_refused_under_performance(self) -> None:
        t = self.tree(driver="amd-pstate-epp", cpus=2)
        for p in (0, 1):
            (t.sys / f"devices/system/cpu/cpufreq/policy{p}/scaling_governor").write_text("performance\n")
        a = self.agent(t, 1, "--mechanism", "epp")
        d = a.stop()["domains"][0]
        self.assertEqual(d["status"], "unsupported")
        self.assertIn("performance governor", d["reason"])


if __name__ == "__main__":
    unittest.main()
