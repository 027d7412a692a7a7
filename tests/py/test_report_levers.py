# SPDX-License-Identifier: BSD-3-Clause
"""`mpi-pstate report --what-if` shows each lever beyond the core cap (the
efficient level, the uncore) in every format, not only the text: CSV
columns appended after the older ones, a table on the HTML page, lines
under the SVG chart; a lever not predicted says so, and why, in each.
The jobs are test_whatif's report fixture, priced with the knee model
(every lever predicted) or with a model that lacks the uncore sweep."""
import csv
import io
import json
import re
import unittest
import xml.etree.ElementTree as ET
from typing import Any, Dict, List

import test_epilog_fixtures as fx
import test_report_html as th
import test_whatif as tw
from mpi_pstate.user import htmlpage, report_svg, report_whatif

NO_UNCORE = {k: v for k, v in tw.KNEE_MODEL.items() if k != "uncore"}


class Levers(unittest.TestCase):
    # test_whatif's fixture (two jobs, a waiting rank on n2) without its
    # tests: inheriting ReportWhatIf would run them a second time here
    setUp = tw.ReportWhatIf.setUp
    tearDown = tw.ReportWhatIf.tearDown
    report = tw.ReportWhatIf.report

    def priced_with(self, model: Dict[str, Any]) -> None:
        self.model.write_text(json.dumps(model))

    def levers(self) -> Dict[str, Any]:
        rc, out, err = self.report("701", "--what-if", "--json")
        self.assertEqual(rc, 0, err)
        return json.loads(out)["jobs"][0]["what_if"]["levers"]

    def csv_rows(self, *jobs: str) -> List[Dict[str, str]]:
        rc, out, err = self.report(*jobs, "--what-if", "--csv")
        self.assertEqual(rc, 0, err)
        return list(csv.DictReader(io.StringIO(out)))

    def test_csv_appends_each_levers_saving(self) -> None:
        self.priced_with(tw.KNEE_MODEL)
        lv = self.levers()
        self.assertTrue(lv["efficient"]["predicted"] and lv["uncore"]["predicted"], lv)
        row = self.csv_rows("701")[0]
        # the older columns first, in their order: readers by position keep working
        self.assertEqual(list(row)[:16], ["job", "job_id", "threshold_us", "low_khz", "ranks",
                                          "saved_j", "saved_j_low", "saved_j_high",
                                          "measured_j", "saved_pct", "time_added_s",
                                          "time_added_s_high", "time_added_pct",
                                          "clocked_down_s", "transitions", "recommended_us"])
        self.assertEqual(list(row)[16:], ["efficient_saved_j", "efficient_predicted",
                                          "uncore_saved_j", "uncore_predicted"])
        for name in ("efficient", "uncore"):
            self.assertEqual(float(row[f"{name}_saved_j"]), lv[name]["saved_j"][0], name)
            self.assertEqual(row[f"{name}_predicted"], "true", name)

    def test_csv_of_a_lever_not_predicted_is_empty_and_false(self) -> None:
        self.priced_with(NO_UNCORE)
        lv = self.levers()
        self.assertFalse(lv["uncore"]["predicted"])
        self.assertIn("no uncore sweep in the model of n1,n2", lv["uncore"]["why"])
        row = self.csv_rows("701")[0]
        self.assertEqual((row["uncore_saved_j"], row["uncore_predicted"]), ("", "false"))
        self.assertEqual(row["efficient_predicted"], "true")

    def test_csv_total_sums_a_lever_only_when_every_job_has_it(self) -> None:
        self.priced_with(tw.KNEE_MODEL)
        rows = self.csv_rows("701", "702")
        self.assertEqual([r["job"] for r in rows], ["701", "702", "total"])
        self.assertAlmostEqual(float(rows[2]["uncore_saved_j"]),
                               sum(float(r["uncore_saved_j"]) for r in rows[:2]), places=3)
        self.assertEqual(rows[2]["uncore_predicted"], "true")
        self.assertEqual(report_whatif.lever_cells([{"levers": {"efficient": {"predicted": False}}},
                                             {"levers": {"efficient": {"predicted": True,
                                                                       "saved_j": [1, 0, 2]}}}]),
                         ["", "false", "", "false"])

    def test_html_page_has_a_table_of_the_levers(self) -> None:
        self.priced_with(NO_UNCORE)
        lv = self.levers()
        rc, out, err = self.report("701", "--what-if", "--html", "-")
        self.assertEqual(rc, 0, err)
        text = " ".join(th.parse(out).text)
        for h in ("lever", "energy saved", "time added", "note"):
            self.assertIn(h, text)
        self.assertIn("core cap to 1.20 GHz", text)
        self.assertIn("efficient (knee 1.80 GHz)", text)
        self.assertIn(lv["efficient"]["note"], text)
        rows = re.findall(r"<tr><td>(.*?)</td><td>(.*?)</td><td>.*?</td><td>(.*?)</td></tr>",
                          out)
        uncore = [r for r in rows if r[0] == "uncore"]
        self.assertEqual(len(uncore), 1, rows)
        self.assertEqual(uncore[0][1], "not predicted")
        self.assertIn("no uncore sweep in the model of n1,n2", uncore[0][2])

    def test_svg_names_each_lever_under_the_chart(self) -> None:
        self.priced_with(NO_UNCORE)
        rc, out, err = self.report("701", "--what-if", "--svg", "-")
        self.assertEqual(rc, 0, err)
        root = ET.fromstring(out)
        texts = [t.text or "" for t in root.iter("{http://www.w3.org/2000/svg}text")]
        self.assertIn("levers, each alone against the run:", texts)
        self.assertTrue(any(t.startswith("core cap to 1.20 GHz: saved ") for t in texts), texts)
        self.assertTrue(any(t.startswith("efficient (knee 1.80 GHz): ") and
                            t.endswith("against the core cap") for t in texts), texts)
        self.assertTrue(any(t.startswith("uncore: not predicted (no uncore sweep") for t in texts),
                        texts)
        # every line inside the picture
        height = float(root.get("height") or 0)
        self.assertLessEqual(max(float(t.get("y") or 0)
                                 for t in root.iter("{http://www.w3.org/2000/svg}text")),
                             height)
        self.assertLessEqual(max(len(t) for t in texts), report_svg.SVG_LINE_CHARS)


class Documented(unittest.TestCase):
    def test_man_page_lists_the_csv_columns_in_order(self) -> None:
        """The column list of mpi-pstate(1) is written by hand: it must
        follow WHATIF_CSV, or a reader of the page parses the wrong column."""
        text = " ".join((fx.TOP / "man" / "mpi-pstate.1").read_text().split())
        self.assertIn(", ".join(report_whatif.WHATIF_CSV) + " (", text.replace("\\-", "-"))


class LeverRows(unittest.TestCase):
    def test_predicted_and_not(self) -> None:
        lv = {"core": {"saved_j": [10.0, 8.0, 12.0], "time_added_s": [0.01, 0.0, 0.02],
                       "low_khz": 1200000},
              "efficient": {"predicted": False, "why": "no knee in the model of n1"},
              "uncore": {"predicted": True, "threshold_us": 10000, "packages": 2,
                         "saved_j": [5.0, 4.0, 6.0], "time_added_s": [0.0, 0.0, 0.1],
                         "low_s": [1.0, 0.5, 1.5], "notes": ["assumed: whole packages"]}}
        self.assertEqual(htmlpage.lever_rows(lv), [
            ("core cap to 1.20 GHz", "10.0 J (8.0 .. 12.0)", "0.010 s (0.000 .. 0.020)",
             "the prediction above"),
            ("efficient", "not predicted", "-", "no knee in the model of n1"),
            ("uncore past 10ms", "5.0 J (4.0 .. 6.0)", "0.000 s (0.000 .. 0.100)",
             "low 1.000 s (0.500 .. 1.500) on 2 packages; assumed: whole packages")])
        lines = report_svg.lever_lines(dict(lv, efficient={"predicted": False, "why": "x" * 300}))
        self.assertEqual(lines[2][-3:], "...")
        self.assertEqual(len(lines[2]), report_svg.SVG_LINE_CHARS)
        self.assertEqual(report_svg.lever_lines(None), [])


if __name__ == "__main__":
    unittest.main()
