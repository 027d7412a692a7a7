# SPDX-License-Identifier: BSD-3-Clause
"""`mpi-pstate calibrate`'s new figures without a cluster: the knee finder on
synthetic power curves, the knee file beside the model, and the uncore
sweep's limits put back exactly as found, after a normal run and after a
SIGTERM in the middle of the sweep; and calibrate()'s pure steps: which
points in which order, and the model's figures of their samples."""
import contextlib
import io
import os
import signal
import stat
import tempfile
import unittest
from pathlib import Path
from types import SimpleNamespace
from typing import Any, Dict, List, Tuple

import test_epilog_fixtures as fx
from mpi_pstate.model import calibrate, instruments, powermodel

FREQS = (1200000, 1500000, 1800000, 2100000, 2400000, 2700000, 3000000)
IDLE_W = 13.0


def knee_w(f: float, knee: float = 1800000, fmax: float = 3000000) -> float:
    """The fake's knee model (tests/cluster/fakesys.py): a busy CPU's watts."""
    v = 0.65 if f <= knee else 0.65 + 0.35 * (f - knee) / (fmax - knee)
    return 2 + 13 * (f / fmax) * v * v


def points(core_w: Any) -> List[Dict[str, Any]]:
    return [{"khz": f, "busy_w": IDLE_W + core_w(f), "poll_w": IDLE_W + core_w(f)}
            for f in FREQS]


class Knee(unittest.TestCase):
    def test_knee_model_has_its_knee(self) -> None:
        self.assertEqual(calibrate.find_knee(points(knee_w), IDLE_W), 1800000)
        self.assertEqual(calibrate.find_knee(points(lambda f: knee_w(f, knee=2400000)), IDLE_W),
                         2400000)
        # order does not matter
        self.assertEqual(calibrate.find_knee(points(knee_w)[::-1], IDLE_W), 1800000)

    def test_power_proportional_to_f_or_steeper_has_no_knee(self) -> None:
        # P proportional to f: the energy per cycle is flat, the lowest is the knee
        self.assertEqual(calibrate.find_knee(points(lambda f: 15 * f / 3e6), IDLE_W), 1200000)
        # the fake's default model, P proportional to f^2: the same
        self.assertEqual(calibrate.find_knee(points(lambda f: 15 * (f / 3e6) ** 2), IDLE_W),
                         1200000)

    def test_noise_and_unmeasurable_cores(self) -> None:
        # within the noise of the least, the lowest frequency wins
        pts = points(lambda f: 15 * f / 3e6 - (0.5 if f == 1800000 else 0.0))
        self.assertEqual(calibrate.find_knee(pts, IDLE_W, noise_w=0.2), 1200000)
        self.assertEqual(calibrate.find_knee(pts, IDLE_W, noise_w=0.0), 1800000)
        # a busy CPU that draws no more than the idle node: not measurable
        self.assertIsNone(calibrate.find_knee(points(knee_w), IDLE_W + 5))
        self.assertIsNone(calibrate.find_knee([], IDLE_W))

    def test_model_keeps_the_knee_and_the_file_says_it(self) -> None:
        m = {"format": "mpi-pstate-model", "version": 1, "idle_w": IDLE_W, "noise_w": 0.0,
             "points": points(knee_w), "transition": {}, "knee_khz": 1800000}
        self.assertEqual(powermodel.validate_model(m)["knee_khz"], 1800000)
        self.assertEqual(calibrate.knee_value(m), 1800000)
        self.assertEqual(calibrate.knee_value({k: v for k, v in m.items() if k != "knee_khz"}),
                         1200000)


def uncore_tree(td: Path) -> Path:
    root = fx.fake_sysfs(td / "sys", ncpus=2, uncore=True)
    for c in (0, 1):
        fx.write(root, f"devices/system/cpu/cpu{c}/topology/physical_package_id", "0")
        fx.write(root, f"devices/system/cpu/cpu{c}/topology/die_id", "0")
    fx.write(root, "class/powercap/intel-rapl:0/max_energy_range_uj", "262143328850")
    return root


U = "devices/system/cpu/intel_uncore_frequency/package_00_die_00"


class UncoreSweep(unittest.TestCase):
    def limits(self, root: Path) -> Tuple[str, str]:
        """The first lines (a plain file keeps a longer old value's tail)."""
        return tuple((root / U / f).read_text().split("\n")[0]  # type: ignore[return-value]
                     for f in ("min_freq_khz", "max_freq_khz"))

    def test_swept_recorded_and_put_back(self) -> None:
        with tempfile.TemporaryDirectory() as td:
            root = uncore_tree(Path(td))
            before = self.limits(root)
            seen: List[str] = []

            def say(s: str) -> None:
                if "uncore at most" in s:  # the sweep's writes are there meanwhile
                    seen.append((root / U / "max_freq_khz").read_text().split("\n")[0])
            m = calibrate.calibrate(str(root), 1, 0.01, 1, 2, "simulated", say)
            self.assertEqual(self.limits(root), before)
            self.assertEqual(sorted(set(seen)), ["1800000", "800000"])
            u = powermodel.validate_model(m)["uncore"]
            self.assertEqual((u["min_khz"], u["max_khz"], u["core_khz"]),
                             (800000, 1800000, 1200000))
            self.assertEqual(u["domains"], [{"name": "package_00_die_00", "cpus": [0, 1]}])
            self.assertIn("write_us", u)
            # stored: the knee file beside the model, root's, 0644, one number
            model = Path(td) / "var" / "model.json"
            knee = Path(calibrate.store(m, str(model)))
            self.assertEqual(knee, model.parent / "knee_khz")
            st = knee.stat()
            self.assertEqual((stat.S_IMODE(st.st_mode), st.st_uid), (0o644, os.geteuid()))
            self.assertEqual(knee.read_text(), f"{calibrate.knee_value(m)}\n")

    def test_sigterm_in_the_sweep_puts_the_uncore_back(self) -> None:
        with tempfile.TemporaryDirectory() as td:
            root = uncore_tree(Path(td))
            (root / U / "min_freq_khz").write_text("900000")  # an admin's raised minimum
            before = self.limits(root)
            pol = root / "devices/system/cpu/cpufreq/policy1"
            pol_before = (pol / "scaling_max_freq").read_text()
            lowered: List[str] = []

            def say(s: str) -> None:
                if "uncore at most 0.90" in s:
                    lowered.append((root / U / "max_freq_khz").read_text().split("\n")[0])
                    os.kill(os.getpid(), signal.SIGTERM)
            with self.assertRaises(KeyboardInterrupt):
                calibrate.calibrate(str(root), 1, 0.01, 1, 2, "simulated", say)
            self.assertEqual(lowered, ["900000"])  # the kept minimum is the low end
            self.assertEqual(self.limits(root), before)
            self.assertEqual((pol / "scaling_max_freq").read_text(), pol_before)
            self.assertEqual(signal.getsignal(signal.SIGTERM), signal.SIG_DFL)

    def test_run_says_where_the_knee_went(self) -> None:
        with tempfile.TemporaryDirectory() as td:
            root = uncore_tree(Path(td))
            model = Path(td) / "m" / "model.json"
            a = SimpleNamespace(sysroot=str(root), sysroot_given=True, cpu=1, seconds=0.01,
                                reps=1, points=2, model=str(model), json=False, quiet=True,
                                slurm_conf=str(root / "none.conf"),
                                runtime_dir=str(Path(td) / "run"))
            out, err = io.StringIO(), io.StringIO()
            with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
                rc = calibrate.run(a)
            self.assertEqual(rc, 0, err.getvalue())
            self.assertIn(f"knee in {model.parent / 'knee_khz'} (the agent reads "
                          "/var/lib/mpi-pstate/knee_khz", out.getvalue())
            self.assertIn("uncore package_00_die_00 at most 0.80 instead of 1.80 GHz",
                          out.getvalue())


class Plan(unittest.TestCase):
    """The pure steps of calibrate(): which points, in which order, and
    what the model says of their samples."""

    def test_points_are_the_asked_and_the_knees_candidates(self) -> None:
        avail = list(range(1000000, 3100000, 100000))
        got = calibrate.measured_freqs(avail, 2)
        self.assertEqual(got, sorted(set(got)))
        self.assertEqual((got[0], got[-1]), (1000000, 3000000))
        self.assertEqual(len(got), instruments.KNEE_POINTS)
        self.assertEqual(calibrate.measured_freqs([1200000, 3000000], 5), [1200000, 3000000])

    def test_every_other_repetition_runs_backwards(self) -> None:
        first = calibrate.point_order([1200000, 3000000], 0)
        self.assertEqual(first, [("idle", 3000000), ("busy", 1200000), ("poll", 1200000),
                                 ("busy", 3000000), ("poll", 3000000)])
        self.assertEqual(calibrate.point_order([1200000, 3000000], 1), first[::-1])
        self.assertEqual(calibrate.point_order([1200000, 3000000], 2), first)

    def test_figures_are_medians_and_pooled_noise(self) -> None:
        samples = {("idle", 3000000): [40.0, 42.0, 41.0], ("busy", 1200000): [50.0, 52.0, 51.0],
                   ("poll", 1200000): [45.0, 45.0, 45.0], ("busy", 3000000): [60.0, 61.0, 62.0],
                   ("poll", 3000000): [55.0, 55.0, 55.0]}
        f = calibrate.power_figures(samples, [1200000, 3000000], 3)
        self.assertEqual(f["idle_w"], 41.0)
        self.assertEqual(f["points"], [{"khz": 1200000, "busy_w": 51.0, "poll_w": 45.0},
                                       {"khz": 3000000, "busy_w": 61.0, "poll_w": 55.0}])
        # stdevs 1, 1, 0, 1, 0: their mean over sqrt(3) repetitions
        self.assertEqual((f["noise_w"], f["noise_known"]), (round(0.6 / 3 ** 0.5, 3), True))
        one = calibrate.power_figures({k: v[:1] for k, v in samples.items()},
                                      [1200000, 3000000], 1)
        self.assertEqual((one["noise_w"], one["noise_known"]), (0.0, False))

    def test_signals_interrupt_and_their_handlers_come_back(self) -> None:
        before = signal.getsignal(signal.SIGHUP)
        with self.assertRaisesRegex(KeyboardInterrupt, f"signal {int(signal.SIGHUP)}"):
            with calibrate.signals_interrupt((signal.SIGHUP,)):
                os.kill(os.getpid(), signal.SIGHUP)
        self.assertEqual(signal.getsignal(signal.SIGHUP), before)


if __name__ == "__main__":
    unittest.main()
