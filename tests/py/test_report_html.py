# SPDX-License-Identifier: BSD-3-Clause
"""`mpi-pstate report --html`: one self-contained page a job, with its
figures, the per-rank chart, a per-node timeline, the energy against full
clock; and the charts' axes at round values.  The page is opened in a real
headless browser (Debian's chromium, where installed): it must load with
no console error, its DOM must hold every section, and its screenshot is
kept as the test's artefact (<build>/artefacts/report-page.png)."""
import contextlib
import json
import math
import os
import shutil
import subprocess
import tempfile
import unittest
import xml.etree.ElementTree as ET
from html.parser import HTMLParser
from pathlib import Path
from typing import Dict, List, Optional, Tuple

import test_epilog_fixtures as fx
import test_report as tr
from mpi_pstate.core import noderecord
from mpi_pstate.model import summary
from mpi_pstate.user import htmlpage, report_svg

BROWSER = shutil.which("chromium")
BROWSER_FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic",
                 "--no-first-run", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync"]


class Tags(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.tags: List[Tuple[str, Dict[str, Optional[str]]]] = []
        self.text: List[str] = []

    def handle_starttag(self, tag: str, attrs: List[Tuple[str, Optional[str]]]) -> None:
        self.tags.append((tag, dict(attrs)))

    def handle_data(self, data: str) -> None:
        self.text.append(data)


def parse(html: str) -> Tags:
    t = Tags()
    t.feed(html)
    return t


class Ticks(unittest.TestCase):
    def test_round_values_past_the_largest(self) -> None:
        self.assertEqual(report_svg.round_ticks(8.126), [0, 2, 4, 6, 8, 10])
        self.assertEqual(report_svg.round_ticks(60), [0, 10, 20, 30, 40, 50, 60])
        self.assertEqual(report_svg.round_ticks(0.37), [0, 0.1, 0.2, 0.3, 0.4])
        for v in (0.0042, 1, 3.3, 123, 98765):
            t = report_svg.round_ticks(v)
            self.assertGreaterEqual(t[-1], v)
            self.assertLessEqual(len(t) - 1, 6)
            step = t[1] - t[0]
            self.assertIn(round(step / 10 ** math.floor(math.log10(step)), 9), (1, 2, 5), t)


class Page(tr.Fixture):
    def job_with_timing(self) -> None:
        """Two nodes, one step each, the agents' clocks in their records."""
        self.two_node_job()
        det = json.loads((self.collect / "501" / "job.json").read_text())
        t0 = 1_795_812_915_000_000_000
        for i, v in enumerate(det["nodes"].values()):
            for st in v["steps"]:
                st["agent"] = {"start_ns": t0 + i * 500_000_000, "end_ns": t0 + 10_000_000_000}
        det["summary"].update(full_j=[240.0, 230.0, 250.0], saved_j=[40.0, 30.0, 50.0])
        (self.collect / "501" / "job.json").write_bytes(noderecord.encode(det))
        self.rows[-1] = self.rows[-1]._replace(
            system_comment="bb text " + summary.encode(det["summary"]))

    def test_every_section_of_a_job(self) -> None:
        self.job_with_timing()
        path = self.tmp / "job.html"
        rc, out, err = self.report("501", "--html", str(path))
        self.assertEqual((rc, err, out.strip()), (0, "", str(path)))
        html = path.read_text()
        t = parse(html)
        text = " ".join(t.text)
        for h in ("Figures", "Ranks", "Clocked down, per node over time", "Energy"):
            self.assertIn(h, text)
        self.assertEqual(len([1 for tag, _ in t.tags if tag == "svg"]), 3)
        # self-contained: nothing fetched, nothing run
        self.assertFalse([a for tag, a in t.tags if tag in ("script", "link", "img", "iframe")])
        self.assertNotIn("http://", html.replace("http://www.w3.org/2000/svg", ""))
        # the timeline: a bar per node, from each agent's clocks
        self.assertIn("10.000 s, clocked down", html)
        self.assertIn("9.500 s, clocked down", html)

    def test_a_job_without_figures_says_why(self) -> None:
        self.rows.append(tr.slurm.SacctJob("700", "700", "COMPLETED", "0:0", "00:00:01", "n1",
                                           ""))
        rc, out, _ = self.report("700", "--html", "-")
        self.assertIn("ran without mpi-pstate", out)
        self.assertIn("<!DOCTYPE html>", out)

    def test_several_jobs_into_a_directory(self) -> None:
        self.two_node_job()
        self.job(502, "502", {"n1": [fx.rank("n1", 0)]})
        d = self.tmp / "pages"
        d.mkdir()
        rc, out, _ = self.report("501", "502", "--html", str(d))
        self.assertEqual(rc, 0)
        self.assertEqual(sorted(os.listdir(d)), ["mpi-pstate-501.html", "mpi-pstate-502.html"])
        rc, _, err = self.report("501", "502", "--html", str(self.tmp / "one.html"))
        self.assertEqual(rc, 2)
        self.assertIn("--html needs a directory or %j", err)

    def test_svg_axis_is_labelled(self) -> None:
        self.two_node_job()
        rc, out, _ = self.report("501", "--svg", "-")
        root = ET.fromstring(out)
        texts = [t.text for t in root.iter("{http://www.w3.org/2000/svg}text")]
        self.assertIn("each rank's wall time in the step, seconds; the share is its time in "
                      "MPI", texts)
        self.assertEqual([x for x in texts if x in ("0", "2", "4", "6", "8", "10")],
                         ["0", "2", "4", "6", "8", "10"])

    @unittest.skipUnless(BROWSER, "chromium not installed (the host's tests/cluster/deps.sh "
                         "installs it)")
    def test_renders_in_a_browser_without_console_errors(self) -> None:
        self.job_with_timing()
        page = self.tmp / "job.html"
        self.assertEqual(self.report("501", "--html", str(page))[0], 0)
        art = Path(os.environ.get("MPI_PSTATE_BUILD", fx.TOP / "build")) / "artefacts"
        art.mkdir(parents=True, exist_ok=True)
        shot = art / "report-page.png"
        with contextlib.suppress(FileNotFoundError):
            shot.unlink()
        with tempfile.TemporaryDirectory() as prof:
            base = [BROWSER, *BROWSER_FLAGS, f"--user-data-dir={prof}"]
            r = subprocess.run([*base, "--enable-logging=stderr", "--v=0",
                                f"--screenshot={shot}", "--window-size=1000,1400",
                                page.as_uri()], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                               universal_newlines=True, timeout=120)
            self.assertEqual(r.returncode, 0, r.stderr[-2000:])
            console = [ln for ln in r.stderr.splitlines() if ":CONSOLE" in ln]
            self.assertEqual(console, [])
            dom = subprocess.run([*base, "--dump-dom", page.as_uri()], stdout=subprocess.PIPE,
                                 stderr=subprocess.PIPE, universal_newlines=True, timeout=120)
        self.assertEqual(dom.returncode, 0, dom.stderr[-2000:])
        t = parse(dom.stdout)
        self.assertEqual(len([1 for tag, _ in t.tags if tag == "svg"]), 3)
        self.assertGreaterEqual(len([1 for tag, _ in t.tags if tag == "rect"]), 9)
        self.assertTrue(shot.exists() and shot.stat().st_size > 10_000, shot)
        self.assertEqual(shot.read_bytes()[:8], b"\x89PNG\r\n\x1a\n")


class Unit(unittest.TestCase):
    def test_timeline_share_is_the_steps_clocked_down_share(self) -> None:
        d = {"ranks": [{"node": "n1", "step": "0", "down_s": 3.0},
                       {"node": "n1", "step": "0", "down_s": 1.0}],
             "nodes": {"n1": {"steps": [{"step": "0", "agent": {"start_ns": 0,
                                                                "end_ns": 4_000_000_000}}]},
                       "n2": {"steps": [{"step": "0", "agent": {"record": {}}}]}}}
        self.assertEqual(htmlpage.steps_by_node(d), {"n1": [(0.0, 4.0, 0.5)]})
        self.assertIsNone(htmlpage.timeline({"nodes": {}, "ranks": []}))


if __name__ == "__main__":
    unittest.main()
