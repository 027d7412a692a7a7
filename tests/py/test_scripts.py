# SPDX-License-Identifier: BSD-3-Clause
"""Shell scripts that run under `set -o pipefail` never pipe into a reader
that stops early (`head`, `grep -q`, `grep -m`): the writer then dies of
SIGPIPE whenever its output outgrows one write, and pipefail turns that race
into a failure (make demo failed so, exit 141, once in a CI run)."""
from __future__ import annotations

import os
import re
import unittest
from pathlib import Path

TOP = Path(__file__).resolve().parents[2]
SKIP_DIRS = {".git", "build", "__pycache__"}
EARLY_READER = re.compile(r"(?<!\|)\|\s*(head\b|grep\s+-[A-Za-z]*[qm]|sed\s+(-n\s+)?['\"]?\d*q)")


def shell_scripts() -> list[Path]:
    found = []
    for root, dirs, files in os.walk(TOP):
        dirs[:] = [d for d in dirs if d not in SKIP_DIRS]
        for name in files:
            path = Path(root) / name
            try:
                with open(path, "rb") as f:
                    first = f.readline(200)
            except OSError:
                continue
            if first.startswith(b"#!") and (b"bash" in first or first.rstrip().endswith(b"/sh")):
                found.append(path)
    return found


def early_readers(text: str) -> list[str]:
    bad = []
    for n, line in enumerate(text.splitlines(), 1):
        code = line.split("#", 1)[0] if line.lstrip().startswith("#") else line
        # `|| true` states that the pipeline's status is not wanted.
        if EARLY_READER.search(code) and not re.search(r"\|\|\s*true\b", code):
            bad.append(f"{n}: {line.strip()}")
    return bad


class Pipefail(unittest.TestCase):
    def test_the_check_sees_what_it_must(self) -> None:
        self.assertTrue(early_readers('x=$(sacct -o State | head -1)'))
        self.assertTrue(early_readers("tail -n +3 f | head -12"))
        self.assertTrue(early_readers("ls | grep -qx a || b"))
        self.assertFalse(early_readers("ls | sed -n 1p"))
        self.assertFalse(early_readers("a || head -1 f"))
        self.assertFalse(early_readers("x=$(ls | head -1 || true)"))

    def test_no_pipefail_script_pipes_into_an_early_reader(self) -> None:
        scripts = shell_scripts()
        self.assertIn(TOP / "tests" / "cluster" / "demo.sh", scripts)
        bad = {}
        for path in scripts:
            text = path.read_text(errors="replace")
            if "pipefail" in text and (lines := early_readers(text)):
                bad[str(path.relative_to(TOP))] = lines
        self.assertEqual(bad, {})


if __name__ == "__main__":
    unittest.main()
