# SPDX-License-Identifier: BSD-3-Clause
"""BENCHMARKS.md must hold exactly the figures of bench/*/RESULTS.md."""
from __future__ import annotations

import subprocess
import unittest
from pathlib import Path

TOP = Path(__file__).resolve().parents[2]


class BenchmarksDoc(unittest.TestCase):
    def test_up_to_date(self) -> None:
        r = subprocess.run(["/usr/bin/python3", str(TOP / "bench" / "collect.py"), "--check"],
                           capture_output=True, text=True)
        self.assertEqual(r.returncode, 0, r.stderr)

    def test_every_results_file_is_included(self) -> None:
        text = (TOP / "BENCHMARKS.md").read_text()
        for p in TOP.glob("bench/*/RESULTS.md"):
            first_table_row = next((l for l in p.read_text().splitlines() if l.startswith("|")), None)
            if first_table_row:
                self.assertIn(first_table_row, text, p)


if __name__ == "__main__":
    unittest.main()
