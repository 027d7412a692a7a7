#!/usr/bin/python3
# SPDX-License-Identifier: BSD-3-Clause
"""The project's whole evaluation on one code: `mpi-pstate bench` run from
this checkout, its result stamped with the checkout's commit.

    bench/eval/run.py [mpi-pstate bench options] [-- COMMAND...]

Takes every option of `mpi-pstate bench` (docs/evaluation.md); the only
difference is the `source` of its JSON and of its heading: the commit of
this checkout (bench/checkout.py), which a site's installed `mpi-pstate
bench` cannot know.  bench/eval/RESULTS.md says how it was run.
"""
from __future__ import annotations

import sys
from pathlib import Path
from typing import List, Optional

TOP = Path(__file__).resolve().parents[2]
sys.path[:0] = [str(TOP / "epilog"), str(TOP / "bench")]
import checkout  # noqa: E402
from mpi_pstate import bench  # noqa: E402


def main(argv: Optional[List[str]] = None) -> int:
    return bench.main(argv, source=checkout.source_version(TOP))


if __name__ == "__main__":
    sys.exit(main())
