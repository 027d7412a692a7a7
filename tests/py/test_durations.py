# SPDX-License-Identifier: BSD-3-Clause
"""One duration grammar: common/parse.c's mpi_pstate_parse_duration_us is
the reference, epilog/mpi_pstate/core/parse.py mirrors it, and every Python
reader of a duration (the report, `mpi-pstate exec`, the evaluation tool
bench/eval/evaluate.py)
goes through that mirror.  tests/data/durations.txt holds the cases;
tests/unit/common/test_parse.c runs them through C, this module through Python.
The mode words `mpi-pstate exec` offers are common/options.def's."""
import contextlib
import io
import json
import os
import subprocess
import sys
import unittest
from typing import List, Optional, Tuple

import test_epilog_fixtures as fx
from mpi_pstate.core import parse
from mpi_pstate.user import launcher

if str(fx.TOP / "bench" / "eval") not in sys.path:
    sys.path.insert(0, str(fx.TOP / "bench" / "eval"))
import evaluate as bench  # noqa: E402  the evaluation tool (bench/eval/), not installed

CASES = fx.TOP / "tests" / "data" / "durations.txt"
PYTHON = "/usr/bin/python3" if os.path.exists("/usr/bin/python3") else sys.executable


def cases() -> List[Tuple[Optional[int], str]]:
    """(microseconds, or None where the text is refused; the text)."""
    out = []
    for line in CASES.read_text().splitlines():
        if not line or line.startswith("#"):
            continue
        want, _, quoted = line.partition(" ")
        assert quoted[:1] == quoted[-1:] == '"', line
        text = quoted[1:-1].replace("\\n", "\n").replace("\\t", "\t")
        out.append((None if want == "bad" else int(want), text))
    return out


class SharedCases(unittest.TestCase):
    def test_parse_agrees_with_the_c_cases(self) -> None:
        got = cases()
        self.assertGreaterEqual(len(got), 40)
        for us, text in got:
            with self.subTest(text=text):
                if us is None:
                    self.assertRaises(ValueError, parse.duration_us, text)
                else:
                    self.assertEqual(parse.duration_us(text), us)

    def test_exec_refuses_what_the_library_refuses(self) -> None:
        for us, text in cases():
            if us is not None or not text.strip():
                continue
            with self.subTest(text=text), contextlib.redirect_stderr(io.StringIO()) as err:
                self.assertEqual(launcher.main(["--threshold", text, "true"]), 2)
                self.assertIn("invalid --threshold", err.getvalue())

    def test_bench_thresholds_read_the_same(self) -> None:
        self.assertEqual(bench.parse_thresholds("0, .5ms,2S"), [0, 500, 2_000_000])
        with self.assertRaises(ValueError):
            bench.parse_thresholds("500 us")


class Frequencies(unittest.TestCase):
    def test_as_mpi_pstate_parse_freq_khz(self) -> None:
        for text, khz in (("1200000", 1200000), ("1.2GHz", 1200000), ("800mhz", 800000),
                          (" 1.5GHz\n", 1500000), ("4294967295", 4294967295)):
            with self.subTest(text=text):
                self.assertEqual(parse.freq_khz(text), khz)
        for text in ("0", "0GHz", "4294967296", "1.2 GHz", "1.0000001GHz", "1THz", "GHz"):
            with self.subTest(text=text), self.assertRaises(ValueError):
                parse.freq_khz(text)


class Modes(unittest.TestCase):
    def test_exec_offers_the_option_table_s_modes(self) -> None:
        r = subprocess.run([PYTHON, str(fx.TOP / "spank" / "gen_options.py"), "--json"],
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, universal_newlines=True,
                           timeout=60, check=True)
        mode = [o for o in json.loads(r.stdout) if o["ID"] == "MODE"]
        self.assertEqual(len(mode), 1)
        self.assertEqual(list(launcher.MODES), [w["word"] for w in mode[0]["words"]])


if __name__ == "__main__":
    unittest.main()
