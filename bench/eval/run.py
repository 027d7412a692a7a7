#!/usr/bin/python3
# SPDX-License-Identifier: BSD-3-Clause
"""The project's whole evaluation on one code: the evaluation tool
(bench/eval/evaluate.py, mpi-pstate-bench) run from this checkout, its
result stamped with the checkout's commit.

    bench/eval/run.py [options] [-- COMMAND...]

Takes every option of the evaluation (docs/evaluation.md, `--help`); its
JSON and its heading name the commit of this checkout (bench/checkout.py)
as their `source`.  bench/eval/RESULTS.md says how it was run.
"""
from __future__ import annotations

import sys
from pathlib import Path
from typing import List, Optional

TOP = Path(__file__).resolve().parents[2]
sys.path[:0] = [str(TOP / "epilog"), str(TOP / "bench"), str(TOP / "bench" / "eval")]
import checkout  # noqa: E402
import evaluate  # noqa: E402


def main(argv: Optional[List[str]] = None) -> int:
    return evaluate.main(argv, source=checkout.source_version(TOP))


if __name__ == "__main__":
    sys.exit(main())
