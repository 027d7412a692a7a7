# SPDX-License-Identifier: BSD-3-Clause
"""The levers beside the core cap on the lab, through sbatch and the
installed plugin: the uncore of a package a step owns whole (uncore=yes),
EPP where scaling_max_freq cannot be written, --mpi-pstate-low=efficient
on amd-pstate, and a driver re-registered mid-job (its restore record is
dropped, never written into the new driver).  Each is shown written only when its condition holds and put
back after a normal end, a scancel and a killed agent; a package another job
shares is never touched.  The fake hardware logs every write
(tests/cluster/fakesys.py); test_agent_levers.py covers the same decisions
without Slurm."""
from __future__ import annotations

import re
import time
import unittest

import labtools as lt
import test_plugin as tp

UNC = "/sys/devices/system/cpu/intel_uncore_frequency/package_00_die_00"
UNCORE_LINE = re.compile(r"^([0-9.]+) uncore (package_\d+_die_\d+) (\w+)=(\d+)$")
UNCORE_ARGS = ("uncore=yes", "uncore_threshold=5ms")


def read(node: str, path: str) -> str:
    """A file of node's fake sysfs, read now (lt.node_exec caches)."""
    return lt.lab("exec", node, "cat", path).stdout.strip()


def uncore_writes(node: str, start: int = 0) -> list[tuple[str, str, int]]:
    """(domain, attr, kHz) of node's uncore writes after line start of its log."""
    found = []
    for line in lt.write_log(node)[start:]:
        m = UNCORE_LINE.match(line)
        if m:
            found.append((m.group(2), m.group(3), int(m.group(4))))
    return found


def wait_until(pred, what: str, timeout: float = 60) -> None:
    t_end = time.monotonic() + timeout
    while time.monotonic() < t_end:
        if pred():
            return
        time.sleep(0.2)
    raise AssertionError(f"timed out waiting for {what}")


class Levers(tp.PluginCase):
    def uncore_nodes(self) -> None:
        for n in tp.NODES:
            self.flavour(n, uncore={})

    def assert_uncore_back(self, nodes: tuple[str, ...] = tp.NODES) -> None:
        for n in nodes:
            wait_until(lambda: read(n, f"{UNC}/max_freq_khz") == "2500000", f"{n} uncore back")
            self.assertEqual(read(n, f"{UNC}/min_freq_khz"), "800000")

    def test_uncore_follows_the_package_and_is_put_back(self) -> None:
        """Two ranks per node, each node the step's whole: n2's ranks wait in
        every iteration while n1's rank 0 computes, so n2's uncore goes down
        and up.  One rank per node owning both CPUs would be a hybrid rank,
        whose wait on one core never counts for the package (docs/agent.md)."""
        self.uncore_nodes()
        fam, mpi = lt.srun_family()
        start = {n: len(lt.write_log(n)) for n in tp.NODES}
        wd = self.workdir("uncore")
        with lt.plugstack_args(*UNCORE_ARGS):
            job, out = self.batch(wd, ["-N2", "-n4", "--ntasks-per-node=2", "--mpi-pstate"],
                                  f"srun --mpi={mpi} ./wrap.sh ./imbalance.{fam} 8 150")
        n2 = uncore_writes("n2", start["n2"])
        self.assertIn(("package_00_die_00", "max_freq_khz", 800000), n2, out)
        self.assertEqual(n2[-1], ("package_00_die_00", "max_freq_khz", 2500000), n2)
        rec = tp.node_step("n2", job, tp.FIRST)["agent"]
        unc = rec["uncore"][0]
        self.assertEqual((unc["domain"], unc["status"]), ("package_00_die_00", "managed"), unc)
        self.assertGreaterEqual(unc["transitions"], 1, unc)
        self.assertEqual(unc["restore"], "restored", unc)
        self.assert_uncore_back()
        self.assert_nodes_restored()
        self.assertEqual(tp.records_of(job), [])

    def test_uncore_left_alone_on_a_shared_package(self) -> None:
        """A one-CPU step shares the package with whatever runs on the other
        CPU: no uncore write at all, and the record says why."""
        self.uncore_nodes()
        fam, mpi = lt.srun_family()
        start = len(lt.write_log("n2"))
        wd = self.workdir("uncore-shared")
        with lt.plugstack_args(*UNCORE_ARGS):
            job = lt.sbatch(["-t", "2", "-N1", "-n1", "-w", "n2", "--mpi-pstate"],
                            f"srun --mpi={mpi} ./wrap.sh ./imbalance.{fam} 4 50\n", wd)
            self.assertEqual(lt.wait_job(job, timeout=150), "COMPLETED")
        self.assertEqual(uncore_writes("n2", start), [])
        unc = tp.node_step("n2", job, "0")["agent"]["uncore"][0]
        self.assertEqual(unc["status"], "outside", unc)

    def lowered_then(self, name: str, act) -> int:
        """A job whose n2 ranks wait a second per iteration; once n2's uncore
        is down, act(job) interrupts it.  Returns the job."""
        self.uncore_nodes()
        fam, mpi = lt.srun_family()
        wd = self.workdir(name)
        with lt.plugstack_args(*UNCORE_ARGS):
            job = lt.sbatch(["-t", "3", "--exclusive", "-N2", "-n4", "--ntasks-per-node=2",
                             "--mpi-pstate"],
                            f"srun --mpi={mpi} ./wrap.sh ./imbalance.{fam} 40 1000\n", wd)
            wait_until(lambda: read("n2", f"{UNC}/max_freq_khz") == "800000", "n2 uncore down", 120)
            act(job)
            lt.wait_job(job, timeout=150)
        return job

    def test_uncore_restored_after_scancel(self) -> None:
        job = self.lowered_then("uncore-scancel", lambda j: lt.root(["scancel", str(j)]))
        self.assertEqual(lt.job_state(job), "CANCELLED")
        self.assert_uncore_back()
        self.assertEqual(tp.records_of(job), [])

    def test_uncore_restored_after_the_agent_is_killed(self) -> None:
        """SIGKILL leaves the uncore low with its record: the step's exit
        (or the node Epilog) puts it back from the record."""
        def kill_agent(job: int) -> None:
            lt.lab("exec", "n2", "pkill", "-KILL", "-f", f"mpi-pstate-agent .*--job {job} ")
            time.sleep(1)
            self.assertEqual(read("n2", f"{UNC}/max_freq_khz"), "800000")
            lt.root(["scancel", str(job)])

        job = self.lowered_then("uncore-kill", kill_agent)
        self.assert_uncore_back()
        self.assertEqual(tp.records_of(job), [])

    def test_epp_where_the_cap_cannot_be_written(self) -> None:
        """intel_pstate whose scaling_max_freq refuses writes (EACCES): the
        agent falls back to energy_performance_preference, and puts it back."""
        self.flavour("n1", driver="intel_pstate", ro_attrs=["scaling_max_freq"])
        fam, mpi = lt.srun_family()
        start = len(lt.write_log("n1"))
        wd = self.workdir("epp")
        job, out = self.batch(wd, ["-N1", "-w", "n1", "-n2", "--mpi-pstate"],
                              f"srun --mpi={mpi} ./wrap.sh ./imbalance.{fam} 8 100")
        epp = [ln.split()[2] for ln in lt.write_log("n1")[start:]
               if "energy_performance_preference=" in ln and "EACCES" not in ln]
        self.assertIn("energy_performance_preference=power", epp, out)
        self.assertEqual(epp[-1], "energy_performance_preference=balance_performance", epp)
        self.assertFalse([ln for ln in lt.write_log("n1")[start:]
                          if "scaling_max_freq=" in ln and "EACCES" not in ln])
        mechs = {d["mechanism"] for d in tp.node_step("n1", job, tp.FIRST)["agent"]["domains"]
                 if d["status"] == "managed"}
        self.assertEqual(mechs, {"epp"})
        for p in ("policy0", "policy1"):
            self.assertEqual(read("n1", f"/sys/devices/system/cpu/cpufreq/{p}/"
                                        "energy_performance_preference"), "balance_performance")
        self.assertEqual(tp.records_of(job), [])

    def test_epp_restored_after_the_agent_is_killed_and_the_job_cancelled(self) -> None:
        """The EPP lever's own backstop: SIGKILL leaves a core at power with
        its version 2 record, and the step's end after scancel puts back
        the preference the step started with."""
        self.flavour("n1", driver="intel_pstate", ro_attrs=["scaling_max_freq"])
        fam, mpi = lt.srun_family()
        wd = self.workdir("epp-kill")
        job = lt.sbatch(["-t", "3", "-N1", "-w", "n1", "-n2", "--mpi-pstate"],
                        f"srun --mpi={mpi} ./wrap.sh ./imbalance.{fam} 40 1000\n", wd)
        pref = "/sys/devices/system/cpu/cpufreq/{}/energy_performance_preference"
        pols = ("policy0", "policy1")
        wait_until(lambda: any(read("n1", pref.format(p)) == "power" for p in pols),
                   "a core at power", 120)
        lt.lab("exec", "n1", "pkill", "-KILL", "-f", f"mpi-pstate-agent .*--job {job} ")
        time.sleep(1)
        self.assertIn("power", [read("n1", pref.format(p)) for p in pols])
        lt.root(["scancel", str(job)])
        lt.wait_job(job, timeout=150)
        for p in pols:
            wait_until(lambda: read("n1", pref.format(p)) == "balance_performance", f"{p} back")
        self.assertEqual(tp.records_of(job), [])

    def test_driver_reset_mid_job_drops_the_record_unwritten(self) -> None:
        """An admin writes intel_pstate/status=passive while a step runs: the
        kernel recreates the policies under intel_cpufreq with its defaults.
        The agent's kept fds then fail with ENODEV: it stops there (no retry,
        no write into the new policies), the step's end writes none of the
        intel_pstate record into them (no governor, no minimum), leaves no
        record, and the node stays up with the new driver's defaults."""
        self.flavour("n1", driver="intel_pstate")
        fam, mpi = lt.srun_family()
        wd = self.workdir("status")
        start = len(lt.write_log("n1"))
        job = lt.sbatch(["-t", "3", "-N1", "-w", "n1", "-n2", "--mpi-pstate"],
                        f"srun --mpi={mpi} ./wrap.sh ./imbalance.{fam} 40 250\n", wd)
        wait_until(lambda: tp.records_of(job) and any(
            "scaling_max_freq=" in ln and not ln.endswith("=3000000")
            for ln in lt.write_log("n1")[start:]), "a record and a core lowered", 120)
        lt.lab("exec", "n1", "sh", "-c",
               "echo passive > /sys/devices/system/cpu/intel_pstate/status")
        reset = len(lt.write_log("n1"))
        self.assertIn("reset status=passive", " ".join(lt.write_log("n1")[start:]))
        self.assertEqual(read("n1", "/sys/devices/system/cpu/cpufreq/policy0/scaling_driver"),
                         "intel_cpufreq")
        self.assertEqual(lt.wait_job(job, timeout=150), "COMPLETED")
        after = lt.write_log("n1")[reset:]
        self.assertFalse([ln for ln in after if "scaling_governor=" in ln
                          or "scaling_min_freq=" in ln], after)
        # through the old fds: refused, and once a policy at most
        # (the agent's read of its lever at exit, which tells it the driver
        # went away, is refused too: not a write)
        refused = [ln for ln in after if ln.endswith(" ENODEV") and " read " not in ln]
        self.assertFalse([ln for ln in after if "scaling_max_freq=" in ln
                          and ln not in refused], after)
        self.assertLessEqual(len(refused), 2, refused)
        self.assertEqual(tp.records_of(job), [])
        doms = tp.node_step("n1", job, "0")["agent"]["domains"]
        self.assertEqual({d["policy"]: d["restore"] for d in doms},
                         {"policy0": "stale", "policy1": "stale"}, doms)
        self.assertEqual(sorted(d["policy"] for d in doms if d["gone"]),
                         sorted(ln.split()[1] for ln in refused), (doms, refused))
        for p in ("policy0", "policy1"):
            self.assertEqual(read("n1", f"/sys/devices/system/cpu/cpufreq/{p}/scaling_max_freq"),
                             read("n1", f"/sys/devices/system/cpu/cpufreq/{p}/cpuinfo_max_freq"))
        self.assertNotIn("drain", lt.node_state("n1"))

    def test_efficient_low_is_the_nonlinear_frequency(self) -> None:
        self.flavour("n1", driver="amd-pstate-epp", nonlinear_khz=1800000)
        fam, mpi = lt.srun_family()
        wd = self.workdir("efficient")
        job, out = self.batch(wd, ["-N1", "-w", "n1", "-n2", "--mpi-pstate",
                                   "--mpi-pstate-low=efficient"],
                              f"srun --mpi={mpi} ./wrap.sh ./imbalance.{fam} 8 100")
        t0, t1 = tp.window(out)
        lows = {v for (_, a, v) in tp.writes("n1", t0, t1) if a == "scaling_max_freq"}
        self.assertIn("1800000", lows, out)
        self.assertNotIn("1200000", lows)
        doms = [d for d in tp.node_step("n1", job, tp.FIRST)["agent"]["domains"]
                if d["status"] == "managed"]
        self.assertTrue(doms)
        self.assertEqual({(d["low_khz"], d["low_src"]) for d in doms}, {(1800000, "nonlinear")})
        self.assert_nodes_restored(("n1",))


if __name__ == "__main__":
    unittest.main()
