# SPDX-License-Identifier: BSD-3-Clause
"""carbon_g_per_kwh=: the site's carbon intensity, site-wide and per
partition.  The plugin (common/parse.c) checks the value where the admin
sees errors; the reports (epilog/mpi_pstate/parse.py) use it: both accept
exactly the cases of tests/data/carbon_g_per_kwh.txt.  report gives each
job's grams of CO2 spent and saved, and --totals sums them."""
import contextlib
import io
import json
import unittest
from typing import List, Tuple
from unittest import mock

import test_epilog_fixtures as fx
from mpi_pstate.core import parse, siteconf
from mpi_pstate.model import summary
from mpi_pstate.model import carbon
from mpi_pstate.user import command, report, report_list

CASES = fx.TOP / "tests" / "data" / "carbon_g_per_kwh.txt"


def cases() -> List[Tuple[bool, str]]:
    out = []
    for line in CASES.read_text().splitlines():
        if line and not line.startswith("#"):
            word, _, value = line.partition(" ")
            out.append((word == "ok", value))
    return out


class Parse(unittest.TestCase):
    def test_the_shared_cases(self) -> None:
        got = cases()
        self.assertGreaterEqual(len(got), 20)
        for ok, value in got:
            with self.subTest(value=value):
                if ok:
                    parse.carbon(value)
                else:
                    self.assertRaises(ValueError, parse.carbon, value)

    def test_values(self) -> None:
        self.assertEqual(parse.carbon("350"), (350.0, {}))
        self.assertEqual(parse.carbon("gpu:120,350,cpu:450.5"),
                         (350.0, {"gpu": 120.0, "cpu": 450.5}))
        self.assertRaises(ValueError, parse.carbon, ",".join(f"p{i}:1" for i in range(65)))
        parse.carbon(",".join(f"p{i}:1" for i in range(64)))

    def test_intensity_of_a_partition(self) -> None:
        c = parse.carbon("350,gpu:120")
        self.assertEqual(carbon.intensity(c, "gpu"), 120.0)
        self.assertEqual(carbon.intensity(c, "cpu"), 350.0)
        self.assertIsNone(carbon.intensity(parse.carbon("gpu:120"), "cpu"))


class Config(unittest.TestCase):
    def test_plugstack_key(self) -> None:
        import tempfile
        from pathlib import Path
        with tempfile.TemporaryDirectory() as td:
            d = Path(td)
            plugin = d / "not-here" / "mpi_pstate.so"  # known by its name
            (d / "slurm.conf").write_text(f"PlugStackConfig={d}/plugstack.conf\n")
            for value, want, problem in (("350,gpu:120", (350.0, {"gpu": 120.0}), False),
                                         ("350,400", (None, {}), True)):
                (d / "plugstack.conf").write_text(
                    f"optional {plugin} carbon_g_per_kwh={value}\n")
                c = siteconf.load(str(d / "slurm.conf"))
                self.assertEqual(c.carbon, want)
                self.assertEqual(any("carbon_g_per_kwh" in p for p in c.problems), problem,
                                 c.problems)


class Report(unittest.TestCase):
    def test_grams_per_job(self) -> None:
        s = {"energy": "ok", "energy_j": 3.6e6, "saved_j": [360000.0, 180000.0, 720000.0]}
        c = carbon.figures(s, 400.0)
        self.assertEqual(c, {"g_per_kwh": 400.0, "spent_g": 400.0, "saved_g": [40.0, 20.0, 80.0]})
        self.assertIsNone(carbon.figures(s, None))
        self.assertIn("400.00 g spent, 40.000 g saved (20.000 .. 80.000) at 400 g/kWh",
                      report.carbon_text(c))

    def test_totals_count_each_job_at_its_partition(self) -> None:
        def comment(saved: float) -> str:
            return summary.encode({"v": summary.SUMMARY_VERSION, "state": "complete",
                                   "energy": "ok", "energy_j": 3.6e6,
                                   "saved_j": [saved, saved, saved]})
        rows = [("1", "alice", "a", "gpu", "COMPLETED", comment(3.6e6)),
                ("2", "alice", "a", "cpu", "COMPLETED", comment(3.6e6))]
        g = report_list.totals(rows, "user", parse.carbon("100,gpu:10"))[0]
        self.assertEqual(g["co2_spent_g"], 110.0)
        self.assertEqual(g["co2_saved_g"], [110.0, 110.0, 110.0])
        self.assertNotIn("co2_saved_g", report_list.totals(rows, "user")[0])
        out = io.StringIO()
        real = siteconf.load

        def with_carbon(*a: object, **k: object) -> siteconf.Config:
            c = real(*a, **k)  # type: ignore[arg-type]
            c.carbon = parse.carbon("100,gpu:10")
            return c
        with mock.patch.object(siteconf, "load", with_carbon), \
                mock.patch.object(command.slurm, "sacct_totals", lambda **kw: rows), \
                contextlib.redirect_stdout(out):
            rc = command.main(["report", "--slurm-conf", "/nonexistent.conf", "--collect-dir",
                               "/nonexistent", "--totals", "partition", "--json"])
        self.assertEqual(rc, 0)
        got = {x["group"]: x["co2_saved_g"][0] for x in json.loads(out.getvalue())["groups"]}
        self.assertEqual(got, {"gpu": 10.0, "cpu": 100.0})


if __name__ == "__main__":
    unittest.main()
