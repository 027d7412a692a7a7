# SPDX-License-Identifier: BSD-3-Clause
"""tests/run: a failed integration test is run once more, alone; one that
then passes counts as passed and is named FLAKY; one that fails again, or
more failures than RERUN_MAX, stay failures."""
from __future__ import annotations

import contextlib
import importlib.machinery
import importlib.util
import io
import tempfile
import textwrap
import unittest
from pathlib import Path

TOP = Path(__file__).resolve().parents[2]


def load_runner():  # noqa: ANN201  (the module has no static type)
    loader = importlib.machinery.SourceFileLoader("mpi_pstate_tests_run", str(TOP / "tests" / "run"))
    spec = importlib.util.spec_from_loader(loader.name, loader)
    assert spec is not None
    mod = importlib.util.module_from_spec(spec)
    loader.exec_module(mod)
    return mod


SUITE = '''
import os, unittest
MARK = os.path.join(os.path.dirname(__file__), "ran-once")
class T(unittest.TestCase):
    def test_flaky(self):
        first = not os.path.exists(MARK)
        open(MARK, "w").close()
        self.assertFalse(first, "fails the first time only")
    def test_ok(self):
        pass
'''


class RunAgain(unittest.TestCase):
    def run_phase(self, body: str, rerun: bool):  # noqa: ANN201
        run = load_runner()
        with tempfile.TemporaryDirectory() as d:
            mod = f"test_rr_{abs(hash((body, rerun, d))) % 10**8}"
            (Path(d) / f"{mod}.py").write_text(textwrap.dedent(body))
            tally = run.Tally()
            with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
                ok = run.run_unittest("integration", Path(d), tally, [], False, rerun=rerun)
        return run, ok, tally

    def test_flake_counts_as_passed_and_is_named(self) -> None:
        _, ok, t = self.run_phase(SUITE, rerun=True)
        self.assertTrue(ok)
        self.assertEqual((t.passed, t.failed), (2, 0))
        self.assertEqual(len(t.flaky), 1)
        self.assertIn("T.test_flaky (failed, passed when run again)", t.flaky[0])

    def test_without_rerun_a_flake_fails(self) -> None:
        _, ok, t = self.run_phase(SUITE, rerun=False)
        self.assertFalse(ok)
        self.assertEqual((t.passed, t.failed, t.flaky), (1, 1, []))

    def test_a_test_failing_again_stays_failed(self) -> None:
        body = SUITE + "    def test_bad(self):\n        self.fail('always')\n"
        _, ok, t = self.run_phase(body, rerun=True)
        self.assertFalse(ok)
        self.assertEqual((t.passed, t.failed, len(t.flaky)), (2, 1, 1))
        self.assertIn("test_bad", t.failures[0])

    def test_many_failures_are_not_run_again(self) -> None:
        run = load_runner()
        body = SUITE + "".join(f"    def test_bad{i}(self):\n        self.fail('always')\n"
                               for i in range(run.RERUN_MAX))
        _, ok, t = self.run_phase(body, rerun=True)
        self.assertFalse(ok)
        self.assertEqual((t.failed, t.flaky), (run.RERUN_MAX + 1, []))


if __name__ == "__main__":
    unittest.main()
