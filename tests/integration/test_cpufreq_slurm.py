# SPDX-License-Identifier: BSD-3-Clause
"""Slurm's own frequency controls and mpi-pstate on one step (docs/cpufreq.md
"Slurm's frequency controls"): Slurm's --cpu-freq setting is the agent's
"high", its minimum bounds the "low", its governor stays, and every core ends
the job exactly as it was before (lab snapshot before and after), whichever
of Slurm's cpu_freq_reset and mpi-pstate's restore writes last (fake sysfs
write log).

Slurm applies --cpu-freq in the task plugin after the plugin's init_post_opt
and resets it after the tasks ended (after the agent restored, before
slurm_spank_exit).  CpuFreqDef takes the same path in slurmstepd as a
--cpu-freq governor; the plugin's reading of it is covered by the unit tests
(tests/unit/spank/test_freqlimits.c, tests/unit/spank/test_plugin.c), the lab's
slurm.conf does not set it."""
from __future__ import annotations

import os
import signal
import time
import unittest

import labtools as lt
import test_plugin as tp

NODE = "n1"


def agent_domains(job: int, step: str = tp.FIRST) -> dict[str, dict]:
    # The node Epilog keeps the agent's record in the node's record and
    # removes the step directory (docs/records.md).
    rec = tp.node_step(NODE, job, step)["agent"]
    return {d["policy"]: d for d in rec["domains"]}



class SlurmCpuFreq(tp.PluginCase):
    """Each test: one step of two MPICH ranks on n1 with --cpu-freq, the
    write log of the job's window, the agent's record, the node after."""

    def run_step(self, name: str, srun_opts: str, iters: int = 10) -> tuple[int, list[tuple[str, str, str]], str]:
        wd = self.workdir(name, ("imbalance.mpich",))
        job, out = self.batch(wd, ["-N1", "-w", NODE, "-n2"],
                              f"srun {srun_opts} --mpi=pmi2 ./wrap.sh ./imbalance.mpich {iters} 40")
        t0, t1 = tp.window(out)
        w = tp.writes(NODE, t0, t1)
        if os.environ.get("MPI_PSTATE_FREQ_PROBE"):
            print(f"\n== {srun_opts}\n" + "\n".join(" ".join(x) for x in w))
        self.check_served(out, job, "mpich", 2)
        return job, w, out

    def lowered(self, w: list[tuple[str, str, str]], attr: str, low: str) -> None:
        self.assertTrue([x for x in w if x[1] == attr and x[2] == low], f"never lowered to {low}: {w}")

    def test_single_frequency_is_the_high(self) -> None:
        """--cpu-freq=2000000: Slurm puts the cores under userspace at 2.4 GHz
        (rounded up to the table).  22.05 leaves scaling_min_freq alone: the
        agent alternates 1.2/2.4 GHz through setspeed on the waiting rank's core.  24.11 also sets
        scaling_min/max_freq to 2.4 GHz: nothing may go below, the agent
        leaves the cores alone (no_range).  Never 3.0 GHz during the step;
        mpi-pstate's restore (the pre-step governor) comes before Slurm's
        reset, which ends the job as it began."""
        job, w, out = self.run_step("single", "--cpu-freq=2000000 --mpi-pstate")
        for pol, d in agent_domains(job).items():
            mine = [(a, v) for p, a, v in w if p == pol]
            self.assertEqual(mine[:2], [("scaling_governor", "userspace"), ("scaling_setspeed", "2400000")], mine)
            pinned = ("scaling_min_freq", "2400000") in mine  # Slurm 24.11
            if pinned:
                self.assertEqual(d["status"], "no_range", d)
                self.assertNotIn(("scaling_setspeed", "1200000"), mine)
            else:
                self.assertEqual((d["status"], d["mechanism"], d["low_khz"], d["high_khz"]),
                                 ("managed", "setspeed", 1200000, 2400000), d)
                # Only rank 1 waits (rank 0 computes while it waits in
                # MPI_Barrier), and the agent lowers only the domain of the
                # core the waiting rank runs on: rank 0's core may never go down.
                if 1 in d["ranks"]:
                    self.assertIn(("scaling_setspeed", "1200000"), mine)
                self.assertEqual(d["transitions"] > 0, ("scaling_setspeed", "1200000") in mine, (d, mine))
            reset = len(mine) - 1 - mine[::-1].index(("scaling_governor", "userspace"))
            self.assertEqual(mine[reset + 1], ("scaling_setspeed", "3000000"), mine)  # Slurm's saved speed
            self.assertEqual(mine[-1], ("scaling_governor", "performance"), mine)
            during = mine[2:reset]
            self.assertFalse([x for x in during if x[0] == "scaling_setspeed" and x[1] not in ("1200000", "2400000")],
                             mine)
            self.assertIn(("scaling_governor", "performance"), during, mine)  # mpi-pstate's restore
            self.assertNotIn(("scaling_governor", "userspace"), during[during.index(("scaling_governor", "performance")):],
                             mine)
        self.assertEqual(tp.records_of(job), [])
        self.assert_nodes_restored((NODE,))

    def test_min_max_range_bounds_low_and_high(self) -> None:
        """--cpu-freq=1800000-2400000:ondemand (24.11 wants a governor with a
        range): Slurm sets scaling_min/max and the governor; the agent clocks
        down through max_freq between them (the user's minimum is the low,
        whatever --mpi-pstate-low says) and writes no governor."""
        job, w, out = self.run_step("range", "--cpu-freq=1800000-2400000:ondemand --mpi-pstate "
                                    "--mpi-pstate-low=1.2GHz")
        for pol, d in agent_domains(job).items():
            self.assertEqual((d["mechanism"], d["low_khz"], d["high_khz"]), ("max_freq", 1800000, 2400000), d)
        self.lowered(w, "scaling_max_freq", "1800000")
        for pol in ("policy0", "policy1"):
            mine = [(a, v) for p, a, v in w if p == pol]
            # Never below Slurm's minimum, never above its maximum, until the
            # restores bring back 3.0/1.2 and performance.
            first_restore = mine.index(("scaling_max_freq", "3000000"))
            self.assertIn(("scaling_governor", "ondemand"), mine[:first_restore])
            self.assertTrue(all(v in ("1800000", "2400000") for a, v in mine[:first_restore]
                                if a in ("scaling_max_freq", "scaling_min_freq", "scaling_setspeed")), mine)
            self.assertNotIn(("scaling_max_freq", "1200000"), mine)
            self.assertEqual(mine[-1], ("scaling_governor", "performance"), mine)
        self.assert_nodes_restored((NODE,))

    def test_governor_stays_slurms(self) -> None:
        """--cpu-freq=powersave --mpi-pstate-governor=ondemand: Slurm's
        governor wins (ours is not applied, the step says so in the slurmd
        log); the agent uses max_freq, so no userspace either."""
        job, w, out = self.run_step("governor", "--cpu-freq=powersave --mpi-pstate --mpi-pstate-governor=ondemand")
        for pol, d in agent_domains(job).items():
            self.assertEqual((d["mechanism"], d["low_khz"], d["high_khz"]), ("max_freq", 1200000, 3000000), d)
        self.lowered(w, "scaling_max_freq", "1200000")
        govs = [(p, v) for p, a, v in w if a == "scaling_governor"]
        self.assertEqual(sorted(set(govs)), [("policy0", "performance"), ("policy0", "powersave"),
                                             ("policy1", "performance"), ("policy1", "powersave")], w)
        for pol in ("policy0", "policy1"):
            mine = [v for p, a, v in w if p == pol and a == "scaling_governor"]
            self.assertEqual(mine[0], "powersave", w)  # Slurm's, before anything of ours
            self.assertEqual(mine[-1], "performance", w)
        self.assert_nodes_restored((NODE,))

    def test_without_cpu_freq_unchanged(self) -> None:
        """No --cpu-freq: mpi-pstate's own policy as before (userspace,
        setspeed 1.2/3.0 GHz), everything back after."""
        job, w, out = self.run_step("none", "--mpi-pstate")
        for pol, d in agent_domains(job).items():
            self.assertEqual((d["mechanism"], d["low_khz"], d["high_khz"]), ("setspeed", 1200000, 3000000), d)
        self.lowered(w, "scaling_setspeed", "1200000")
        for pol in ("policy0", "policy1"):
            mine = [(a, v) for p, a, v in w if p == pol]
            self.assertEqual(mine[:2], [("scaling_governor", "userspace"), ("scaling_setspeed", "3000000")], mine)
            self.assertEqual(mine[-1], ("scaling_governor", "performance"), mine)
        self.assert_nodes_restored((NODE,))

    def test_agent_killed_mpi_pstate_restores_after_slurm(self) -> None:
        """The agent killed in the middle of the step: root's restore from
        the record made before Slurm's set runs as the last task ends, as it
        does for a step whose agent lived, and Slurm's reset after it agrees
        (the test's name is from when the agent restored and root came only
        at the spank exit, after Slurm)."""
        wd = self.workdir("killed", ("imbalance.mpich",))
        script = (f"{tp.STATE_DUMP}\n{tp.MONO} start\n"
                  "srun --cpu-freq=1800000-2400000:ondemand --mpi-pstate --mpi=pmi2 ./wrap.sh ./imbalance.mpich 150 40\n"
                  f"{tp.MONO} end\n")
        job = lt.sbatch(["-t", "2", "--exclusive", "-N1", "-w", NODE, "-n2"], script, wd)
        pidfile = tp.runtime_dir(NODE) / "steps" / f"{job}.{tp.FIRST}" / "agent.pid"
        killed = False
        for _ in range(600):
            if pidfile.exists() and pidfile.read_text().strip():
                time.sleep(1.0)  # the agent has lowered a few times
                os.kill(int(pidfile.read_text().split()[0]), signal.SIGKILL)
                killed = True
                break
            time.sleep(0.05)
        self.assertTrue(killed, "the agent never started")
        self.assertEqual(lt.wait_job(job, timeout=150), "COMPLETED")
        out = (wd / f"slurm-{job}.out").read_text()
        self.note_state(out)
        t0, t1 = tp.window(out)
        w = tp.writes(NODE, t0, t1 + 1)
        if os.environ.get("MPI_PSTATE_FREQ_PROBE"):
            print("\n== killed\n" + "\n".join(" ".join(x) for x in w))
        self.assertEqual(tp.records_of(job), [])
        for pol in ("policy0", "policy1"):
            mine = [(a, v) for p, a, v in w if p == pol]
            # mpi-pstate's restore from the record, root's, as the last task
            # ended (the agent is not root and was dead anyway), then Slurm's
            # reset to the same 3.0/1.2 and performance: the job ends as it began.
            self.assertEqual(mine.count(("scaling_max_freq", "3000000")), 2, mine)
            self.assertEqual(mine[-3:], [("scaling_max_freq", "3000000"), ("scaling_min_freq", "1200000"),
                                         ("scaling_governor", "performance")], mine)
        self.assert_nodes_restored((NODE,))

    def test_interactive_step_gets_cpu_freq(self) -> None:
        """Slurm 25.11's LaunchParameters=interactive_step_set_cpu_freq (the
        lab sets it, with use_interactive_step, from 25.11 on): salloc's
        interactive step runs at --cpu-freq although the job asked for
        mpi-pstate too, which leaves that step (no MPI rank) to Slurm; the
        node ends as it began."""
        if lt.slurm_version() < (25, 11):
            self.skipTest("LaunchParameters=interactive_step_set_cpu_freq is new in Slurm 25.11")
        before = tp.state_of(lt.snapshot(NODE))
        probe = ("c=$(sed -n 's/^Cpus_allowed_list:[[:space:]]*//p' /proc/self/status | cut -d, -f1 | "
                 "cut -d- -f1); echo \"STEP gov=$(cat /sys/devices/system/cpu/cpu$c/cpufreq/"
                 "scaling_governor) speed=$(cat /sys/devices/system/cpu/cpu$c/cpufreq/"
                 "scaling_setspeed)\"; exit\n")
        # The interactive step is $SHELL on a terminal: Python's pty gives it one.
        r = lt.as_user(["python3", "-c", "import pty, sys; pty.spawn(sys.argv[1:])", "salloc",
                        "-N1", "-w", NODE, "-n1", "--exclusive", "-t", "2", "--cpu-freq=1800000",
                        "--mpi-pstate"], input=probe, timeout=120, extra_env={"SHELL": "/bin/bash"})
        self.assertRegex(r.stdout, r"STEP gov=userspace speed=1800000", r.stdout + r.stderr)
        for _ in range(60):
            if tp.state_of(lt.snapshot(NODE)) == before:
                break
            time.sleep(0.5)
        self.assertEqual(tp.state_of(lt.snapshot(NODE)), before, "n1's cores not as before")


if __name__ == "__main__":
    unittest.main()
