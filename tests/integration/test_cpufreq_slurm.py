"""Slurm's own frequency controls (--cpu-freq, CpuFreqDef) and mpi-pstate on
one step: Slurm's step setting is the agent's "high", its --cpu-freq minimum
and the admin's floor bound the "low", and every core ends the job exactly as
it was before, whichever of Slurm's cpu_freq_reset and mpi-pstate's restore
writes last (fake sysfs write log, lab snapshot before and after)."""
from __future__ import annotations

import os
import unittest

import labtools as lt
import test_plugin as tp

PROBE = os.environ.get("MPI_PSTATE_FREQ_PROBE")


class SlurmCpuFreq(tp.PluginCase):
    def run_step(self, name: str, srun_opts: str) -> tuple[int, list[tuple[str, str, str]], str]:
        wd = self.workdir(name, ("imbalance.mpich",))
        job, out = self.batch(wd, ["-N1", "-w", "n1", "-n2"],
                              f"srun {srun_opts} --mpi=pmi2 ./wrap.sh ./imbalance.mpich 10 40")
        t0, t1 = tp.window(out)
        w = tp.writes("n1", t0, t1 + 5)
        if PROBE:
            print(f"\n== {srun_opts}\n" + "\n".join(" ".join(x) for x in w))
            print("after:\n" + "\n".join(tp.state_of(lt.snapshot("n1"))))
        return job, w, out

    def test_probe(self) -> None:
        if not PROBE:
            self.skipTest("probe")
        for opts in ("--mpi-pstate", "--cpu-freq=2000000 --mpi-pstate",
                     "--cpu-freq=1800000-2400000 --mpi-pstate", "--cpu-freq=powersave --mpi-pstate",
                     "--cpu-freq=2000000 --mpi-pstate=off"):
            print("before:\n" + "\n".join(tp.state_of(lt.snapshot("n1"))))
            self.run_step("probe", opts)


if __name__ == "__main__":
    unittest.main()
