# SPDX-License-Identifier: BSD-3-Clause
"""The per-call baseline libraries of bench/baselines under both MPIs: the
timer design makes exactly two setitimer calls per MPI call and lowers the
frequency only in calls that outlive its timeout; the switch design makes
two pwrites per call; a bad setting gives a pass-through library; and the
side-by-side runner prints every design with the per-call designs far
above the library's added cost."""
from __future__ import annotations

import importlib.util
import re
import shutil
import subprocess
import sys
import tempfile
import unittest
from pathlib import Path

TOP = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(TOP / "tests" / "preload"))
import preload_helpers as ph  # noqa: E402

spec = importlib.util.spec_from_file_location("bench_baselines_run",
                                              TOP / "bench" / "baselines" / "run.py")
assert spec is not None and spec.loader is not None
br = importlib.util.module_from_spec(spec)
sys.modules["bench_baselines_run"] = br
spec.loader.exec_module(br)

STATS_RE = re.compile(r"mpi-pstate-baseline (timer|switch): pid \d+ calls (\d+) lowered (\d+) "
                      r"writes (\d+) active (\d)")
_built = False


def build() -> None:
    global _built
    if _built:
        return
    imb = [f"{ph.BUILD}/tests/mpi/imbalance.{m}" for m in ("openmpi", "mpich")]
    r = subprocess.run(["make", "-s", f"B={ph.BUILD}", "baselines-bench", *imb], cwd=TOP,
                       capture_output=True, text=True)
    if r.returncode != 0:
        raise RuntimeError("make baselines-bench failed:\n" + r.stdout + r.stderr)
    _built = True


def abis() -> list[str]:
    return [a for a in ph.ABIS if ph.have_abi(a)]


def stats(stderr: str) -> list[tuple[str, int, int, int, int]]:
    return [(m.group(1), *(int(m.group(i)) for i in range(2, 6)))
            for m in STATS_RE.finditer(stderr)]


def imbalance(abi: str) -> Path:
    return ph.BUILD / "tests" / "mpi" / f"imbalance.{'openmpi' if abi == 'ompi' else 'mpich'}"


class Baselines(unittest.TestCase):
    @classmethod
    def setUpClass(cls) -> None:
        build()
        if not abis():
            raise unittest.SkipTest("no MPI family built")

    def setUp(self) -> None:
        self.tmp = Path(tempfile.mkdtemp(prefix="test_bench_baselines.", dir="/dev/shm"))
        self.addCleanup(shutil.rmtree, self.tmp, True)

    def run_lib(self, abi: str, design: str, argv: list, n: int = 2, **env: str
                ) -> subprocess.CompletedProcess:
        lib = br.baseline_lib(ph.BUILD, design, abi)
        e = {"MPI_PSTATE_BASELINE_STATS": "yes", **env}
        return ph.run_mpi(abi, ["env", f"LD_PRELOAD={lib}", *argv], env=e, n=n)

    def test_syscalls_per_call(self) -> None:
        if not shutil.which("strace"):
            self.skipTest("strace not installed")
        pb = br.preload_bench()
        for abi in abis():
            for variant, want in (("none", 0.0), ("mpi-pstate", 0.0), ("timer", 2.0),
                                  ("switch", 2.0)):
                with self.subTest(abi=abi, variant=variant):
                    got = br.syscalls_per_call(pb, ph.BUILD, abi, variant, "barrier", 500,
                                               self.tmp / "f", self.tmp)
                    self.assertAlmostEqual(got, want, delta=0.05)

    def test_timer_lowers_only_in_long_waits(self) -> None:
        for abi in abis():
            with self.subTest(abi=abi):
                f = self.tmp / f"setspeed.{abi}"
                r = self.run_lib(abi, "timer", [imbalance(abi), "6", "20"],
                                 MPI_PSTATE_BASELINE_FILE=str(f),
                                 MPI_PSTATE_BASELINE_TIMEOUT="2ms")
                self.assertEqual(r.returncode, 0, r.stderr)
                st = stats(r.stderr)
                self.assertEqual(len(st), 2, r.stderr)
                for design, calls, lowered, writes, active in st:
                    self.assertEqual((design, active), ("timer", 1))
                    self.assertEqual(calls, 12)  # 6 x (MPI_Barrier + MPI_Allreduce)
                    self.assertEqual(writes, 2 * lowered)
                # The waiting rank waits at least 20 ms in each barrier, so every one
                # outlives 2 ms (a busy machine only makes waits longer).  How long the
                # computing rank waits depends on scheduling: no bound is asserted on it.
                lows = sorted(s[2] for s in st)
                self.assertGreaterEqual(lows[1], 6)
                self.assertLessEqual(lows[1], 12)
                self.assertEqual(f.read_text(), "3000000\n")  # raised again at the end
                # "Only in long waits": with a timeout no wait here can reach, nothing
                # is lowered at all, whatever the load.
                r = self.run_lib(abi, "timer", [imbalance(abi), "6", "20"],
                                 MPI_PSTATE_BASELINE_FILE=str(f),
                                 MPI_PSTATE_BASELINE_TIMEOUT="600s")
                self.assertEqual(r.returncode, 0, r.stderr)
                st = stats(r.stderr)
                self.assertEqual([(s[1], s[2], s[3]) for s in st], [(12, 0, 0)] * 2, r.stderr)

    def test_switch_writes_twice_per_call(self) -> None:
        for abi in abis():
            with self.subTest(abi=abi):
                f = self.tmp / f"setspeed.{abi}"
                r = self.run_lib(abi, "switch", [imbalance(abi), "3", "5"],
                                 MPI_PSTATE_BASELINE_FILE=str(f))
                self.assertEqual(r.returncode, 0, r.stderr)
                st = stats(r.stderr)
                self.assertEqual([(s[0], s[1], s[3]) for s in st], [("switch", 6, 12)] * 2)
                self.assertEqual(f.read_text(), "3000000\n")

    def test_bad_setting_passes_through(self) -> None:
        abi = abis()[0]
        r = self.run_lib(abi, "timer", [imbalance(abi), "2", "1"],
                         MPI_PSTATE_BASELINE_TIMEOUT="soon")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn("invalid MPI_PSTATE_BASELINE_TIMEOUT", r.stderr)
        self.assertEqual({(s[1], s[4]) for s in stats(r.stderr)}, {(0, 0)})
        r = self.run_lib(abi, "switch", [imbalance(abi), "2", "1"],
                         MPI_PSTATE_BASELINE_FILE=str(self.tmp / "no" / "such" / "dir"))
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn("cannot open MPI_PSTATE_BASELINE_FILE", r.stderr)

    def test_default_file_is_removed(self) -> None:
        abi = abis()[0]
        before = set(Path("/dev/shm").glob("mpi-pstate-baseline.*"))
        r = self.run_lib(abi, "switch", [imbalance(abi), "2", "1"])
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(set(Path("/dev/shm").glob("mpi-pstate-baseline.*")), before)

    def test_runner_side_by_side(self) -> None:
        abi = abis()[0]
        out = subprocess.run(
            [sys.executable, str(TOP / "bench" / "baselines" / "run.py"), "--build",
             str(ph.BUILD), "--abi", abi, "--kinds", "barrier", "--rounds", "3", "-n", "200000",
             "--n-slow", "5000", "--no-strace"], capture_output=True, text=True, timeout=300)
        self.assertEqual(out.returncode, 0, out.stderr)
        rows = {}
        for line in out.stdout.splitlines():
            f = [c.strip() for c in line.strip("|").split("|")]
            if len(f) == 9 and f[0] == abi:
                rows[f[2]] = f
        self.assertEqual(sorted(rows), sorted(br.VARIANTS))
        lib_added = float(rows["mpi-pstate"][6])
        for design in ("timer", "switch"):
            # the per-call designs enter the kernel twice per call: far above the library
            self.assertGreater(float(rows[design][6]), 10 * max(lib_added, 10.0), rows)


if __name__ == "__main__":
    unittest.main()
