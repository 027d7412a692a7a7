# SPDX-License-Identifier: BSD-3-Clause
"""What every benchmark says about where it ran, and how it prints a figure.

Imported by the bench/<component>/run.py scripts (each puts bench/ on its
path): one description of the machine, one formatter, one RESULTS.md writer.
"""
from __future__ import annotations

import os
import platform
import time
from pathlib import Path
from typing import List, Optional, Sequence


def cpu_model() -> str:
    try:
        with open("/proc/cpuinfo") as f:
            return next((ln.split(":", 1)[1].strip() for ln in f
                         if ln.startswith("model name")), "?")
    except OSError:
        return "?"


def machine(host: bool = False) -> str:
    """'<cpu>, N CPUs, kernel K', prefixed with the host name when asked."""
    text = f"{cpu_model()}, {os.cpu_count()} CPUs, kernel {platform.release()}"
    return f"{platform.node()}: {text}" if host else text


def fmt(v: Optional[float], spec: str = "{:.1f}") -> str:
    return "-" if v is None else spec.format(v)


def write_results(out: Path, title: str, seconds: float, reproduce: str, bound: str, baseline: str,
                  rows: List[Sequence[str]], notes: List[str], howto: List[str]) -> str:
    """A RESULTS.md whose rows are measure | bound | measured | baseline |
    ratio | command: when, where, under what load and how to run it again,
    the rows, the runs' notes and how to read them.  Returns the text."""
    lines = [f"# {title}", "",
             f"Measured {time.strftime('%Y-%m-%d %H:%M')} on `{platform.node()}`: {platform.platform()}, "
             f"{os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.2f} at the end; {seconds} s per "
             f"run. Reproduce: {reproduce}", "",
             f"| measure | {bound} | measured | {baseline} | ratio | command |",
             "|---|---|---|---|---|---|"]
    lines += ["| " + " | ".join(r) + " |" for r in rows]
    lines += ["", "Runs:", ""] + [f"- {n}" for n in notes]
    lines += ["", "How to read it:", ""] + [f"- {h}" for h in howto]
    text = "\n".join(lines) + "\n"
    out.write_text(text)
    return text
