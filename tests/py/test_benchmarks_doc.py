# SPDX-License-Identifier: BSD-3-Clause
"""BENCHMARKS.md is the index bench/collect.py makes of bench/*/RESULTS.md:
one entry per folder, its headline read from the RESULTS.md's figures."""
from __future__ import annotations

import re
import shutil
import subprocess
import tempfile
import unittest
from pathlib import Path

TOP = Path(__file__).resolve().parents[2]
COLLECT = TOP / "bench" / "collect.py"


def collect(*args: str, top: Path = TOP) -> subprocess.CompletedProcess:
    return subprocess.run(["/usr/bin/python3", str(top / "bench" / "collect.py"), *args],
                          capture_output=True, text=True)


class BenchmarksDoc(unittest.TestCase):
    def test_up_to_date(self) -> None:
        r = collect("--check")
        self.assertEqual(r.returncode, 0, r.stderr)

    def test_one_entry_per_results_file(self) -> None:
        text = (TOP / "BENCHMARKS.md").read_text()
        links = re.findall(r"^- \[[^]]+\]\((bench/[^/)]+/RESULTS\.md)\)", text, re.M)
        want = sorted(str(p.relative_to(TOP)) for p in TOP.glob("bench/*/RESULTS.md"))
        self.assertEqual(sorted(links), want)
        self.assertEqual(len(links), len(set(links)))

    def test_an_index_not_a_copy(self) -> None:
        """No table of a RESULTS.md is copied into the index."""
        rows = [l for l in (TOP / "BENCHMARKS.md").read_text().splitlines() if l.startswith("|")]
        self.assertEqual(rows[:3], [])


class CollectInACopy(unittest.TestCase):
    """bench/collect.py run on a copy of bench/*/RESULTS.md, so that it may
    write and the RESULTS.md may be changed."""

    def setUp(self) -> None:
        self.td = tempfile.TemporaryDirectory()
        self.top = Path(self.td.name)
        (self.top / "bench").mkdir()
        shutil.copy(str(COLLECT), str(self.top / "bench" / "collect.py"))
        for p in TOP.glob("bench/*/RESULTS.md"):
            (self.top / "bench" / p.parent.name).mkdir()
            shutil.copy(str(p), str(self.top / "bench" / p.parent.name / "RESULTS.md"))
        self.out = self.top / "BENCHMARKS.md"
        shutil.copy(str(TOP / "BENCHMARKS.md"), str(self.out))

    def tearDown(self) -> None:
        self.td.cleanup()

    def test_anything_but_check_or_write_is_a_usage_error(self) -> None:
        self.out.write_text("left alone\n")
        for args in ([], ["--chek"], ["--check", "--write"], ["--write", "extra"], ["--wr"]):
            r = collect(*args, top=self.top)
            self.assertEqual(r.returncode, 2, (args, r.stderr))
            self.assertIn("usage:", r.stderr, args)
            self.assertEqual(self.out.read_text(), "left alone\n", args)

    def test_check_writes_nothing(self) -> None:
        self.out.write_text("stale\n")
        r = collect("--check", top=self.top)
        self.assertEqual(r.returncode, 1)
        self.assertIn("--write", r.stderr)
        self.assertEqual(self.out.read_text(), "stale\n")

    def test_write_then_check(self) -> None:
        self.out.unlink()
        self.assertEqual(collect("--write", top=self.top).returncode, 0)
        self.assertEqual(self.out.read_text(), (TOP / "BENCHMARKS.md").read_text())
        self.assertEqual(collect("--check", top=self.top).returncode, 0)

    def test_a_new_figure_moves_the_headline(self) -> None:
        res = self.top / "bench" / "epilog" / "RESULTS.md"
        text = res.read_text()
        row = "| in the EpilogSlurmctld process | "
        self.assertIn(row, text)
        start = text.index(row) + len(row)
        old = text[start:text.index(" |", start)]
        res.write_text(text[:start] + "0.250" + text[start + len(old):])
        r = collect("--check", top=self.top)
        self.assertEqual(r.returncode, 1, r.stderr)
        self.assertEqual(collect("--write", top=self.top).returncode, 0)
        entry = [e for e in self.out.read_text().split("\n- ") if "bench/epilog/RESULTS.md" in e][0]
        self.assertIn("0.250 s", entry)
        self.assertIn("ratio 0.25", " ".join(entry.split()))

    def test_a_results_file_without_an_entry_fails(self) -> None:
        (self.top / "bench" / "newbench").mkdir()
        (self.top / "bench" / "newbench" / "RESULTS.md").write_text("# New\n")
        r = collect("--write", top=self.top)
        self.assertNotEqual(r.returncode, 0)
        self.assertIn("bench/newbench/RESULTS.md has no entry", r.stderr)

    def test_a_row_gone_names_the_file(self) -> None:
        res = self.top / "bench" / "preload" / "RESULTS.md"
        res.write_text(res.read_text().replace("| mpich | test |", "| mpich | tested |"))
        r = collect("--check", top=self.top)
        self.assertNotEqual(r.returncode, 0)
        self.assertIn("bench/preload/RESULTS.md", r.stderr)


if __name__ == "__main__":
    unittest.main()
