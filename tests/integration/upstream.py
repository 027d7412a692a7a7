# SPDX-License-Identifier: BSD-3-Clause
"""Open MPI 4.1's own SIGSEGV inside MPI_Init, told apart from every other
failure, and the one retry the lab's job helpers give it.

In the lab, Open MPI 4.1 ranks now and then die of SIGSEGV inside `MPI_Init`:
a NULL callback in its TCP transport (`mca_btl_tcp`), reached from
`opal_progress`, with or without mpi-pstate (about 1 of 150 plain starts
under load; docs/operations.md, "Open MPI 4.1"). An integration test whose
job dies so fails for a reason that is not ours. `classify()` reads a failed
job's or step's output and calls it **upstream** only when all of these hold:

(a) the output holds a SIGSEGV backtrace: Open MPI's own report (`*** Process
    received signal ***`, `Signal: Segmentation fault`, one `[ n]` line a
    frame, `*** End of error message ***`: a report cut short does not count),
    or a gdb / `coredumpctl` backtrace (`#0 ...` lines after a line naming
    SIGSEGV, `Signal: 11 (SEGV)`);
(b) its frames include Open MPI's `MPI_Init` (`MPI_Init`, `PMPI_Init`, the
    `_thread` variants or `ompi_mpi_init`), `opal_progress` and a frame of the
    TCP transport (`btl_tcp`), and every frame inside the init frame (from the
    innermost out to it) is Open MPI's, the C library's or an address without
    a name;
(c) none of its frames is ours: no `libmpi-pstate*.so` (the preload front and
    its backends, preload/rules.mk), no `mpi_pstate` symbol or plugin, no
    `mpi-pstate-*` program;

and every signal report in the output is such a one (one rank of Open MPI's
fault and another rank's crash in our code is not upstream). Anything else,
a failure without a signal, a SIGSEGV elsewhere, a report with a frame of
ours, is not upstream, and nothing retries it.

The helpers that submit a job and wait for it (`labtools.run_job`,
`labtools.run_mpi`, and test_accounting's `submit_finished` and `started`,
which test_faults and the suites borrowing its `AccountingJobs` share) run a
job or step whose output classifies as upstream once more, never twice:
the second result is the test's, whatever it is. Each retry is logged as it
happens, on stderr, as `UPSTREAM integration: ...` (job, directory, the
rank and its frames), and counted in `RETRIED`, which tests/run prints before
its closing line (`UPSTREAM` lines and `N upstream faults retried`).
`labtools.sbatch` and `labtools.wait_job` on their own never retry: their
caller holds the job id and reads that job's output and records, so the
retry must be where the id is handed out (use `run_job` there).

tests/py/test_upstream_faults.py checks the classifier on fixture texts.
"""
from __future__ import annotations

import re
import sys
from typing import Callable, NamedTuple, Optional, TypeVar

T = TypeVar("T")

LABEL = "upstream Open MPI MPI_Init SIGSEGV"

# Each retry, as tests/run repeats it before its closing line.
RETRIED: list[str] = []

# Frames of ours: the preload library (libmpi-pstate.so, libmpi-pstate-ompi.so,
# libmpi-pstate-mpich.so), its and the plugin's symbols (mpi_pstate_*,
# spank_mpi_pstate.so), the launcher and the agent (mpi-pstate-exec,
# mpi-pstate-agent).
OURS = re.compile(r"libmpi-pstate|mpi_pstate|mpi-pstate", re.I)
INIT = re.compile(r"\b(P?MPI_Init(_thread)?|ompi_mpi_init)\b")
PROGRESS = re.compile(r"\bopal_progress\b")
BTL_TCP = re.compile(r"btl_tcp")
# Open MPI's libraries and components, the C library and the loader: what may
# lie between the faulting instruction and Open MPI's MPI_Init.
THEIRS = re.compile(r"libopen-pal|libopen-rte|libmpi\.so|libmpi_|mca_[a-z]+_|libpmix|libevent|"
                    r"libhwloc|libc\.so|libc-|libpthread|ld-linux|linux-vdso|\[0x0\]|\?\?|"
                    r"^\s*\[0x[0-9a-f]+\]\s*$|n/a \(n/a \+|__restore_rt|"
                    r"\b(opal|ompi|orte|pmix|mca)_\w+", re.I)

# Open MPI: "[n1:12345] [ 3] /usr/lib/.../libmpi.so.40(ompi_mpi_init+0x9a)[0x7f..]"
OMPI_LINE = re.compile(r"\[([\w.-]+:\d+)\]\s?(.*)$")
OMPI_FRAME = re.compile(r"^\[\s*(\d+)\]\s+(.*)$")
# gdb "#3  0x.. in ompi_mpi_init () from /lib/.../libmpi.so.40",
# coredumpctl "#3  0x00007f.. ompi_mpi_init (libmpi.so.40 + 0x6a1e3)"
GDB_FRAME = re.compile(r"^\s*(?:\d+:\s*)?#(\d+)\s+(.*)$")
SEGV = re.compile(r"SIGSEGV|Signal: 11 \(SEGV\)|Segmentation fault", re.I)
OTHER_SIGNAL = re.compile(r"\bSIG(?!SEGV)[A-Z]{2,5}\b|Signal: \d+ \((?!SEGV)[A-Z]+\)")


class Report(NamedTuple):
    """One signal report: whose (Open MPI's host:pid, or "gdb"), whether the
    signal was SIGSEGV, its frames innermost first, complete or cut short."""
    who: str
    segv: bool
    frames: list[str]
    complete: bool


class Verdict(NamedTuple):
    upstream: bool
    why: str

    def __bool__(self) -> bool:
        return self.upstream


def reports(text: str) -> list[Report]:
    """Every signal report of the output: Open MPI's, by process (reports of
    several ranks interleave), then gdb's or coredumpctl's backtraces."""
    out: list[Report] = []
    open_: dict[str, dict] = {}
    for line in text.splitlines():
        m = OMPI_LINE.search(line)
        if not m:
            continue
        who, rest = m.group(1), m.group(2).strip()
        if "*** Process received signal ***" in rest:
            open_[who] = {"segv": False, "frames": [], "signal": False}
            continue
        r = open_.get(who)
        if r is None:
            continue
        if rest.startswith("Signal:"):
            r["signal"] = True
            r["segv"] = bool(re.match(r"Signal: Segmentation fault", rest))
        elif "*** End of error message ***" in rest:
            out.append(Report(who, r["segv"] and r["signal"], r["frames"], True))
            del open_[who]
        else:
            f = OMPI_FRAME.match(rest)
            if f:
                r["frames"].append(f.group(2))
    for who, r in open_.items():  # cut short: still a report, never upstream
        out.append(Report(who, r["segv"] and r["signal"], r["frames"], False))
    out += gdb_reports(text)
    return out


def gdb_reports(text: str) -> list[Report]:
    """Backtraces as gdb (`bt`) and coredumpctl print them: a run of `#n`
    lines from #0 (an indented line continues the frame before it: gdb
    wraps `from LIB` and `at FILE:LINE`), whose signal is the last one a
    line names before it (none named: not a SIGSEGV)."""
    out: list[Report] = []
    signal = segv = False
    frames: list[str] | None = None
    for line in text.splitlines():
        f = GDB_FRAME.match(line)
        if f and (f.group(1) == "0" or frames is not None):
            if f.group(1) == "0":
                if frames:
                    out.append(Report("gdb", segv, frames, True))
                frames, segv = [], signal
            if frames is not None:
                frames.append(f.group(2).strip())
            continue
        if frames is not None and line[:1].isspace() and line.strip():
            frames[-1] += " " + line.strip()
            continue
        if frames is not None:
            out.append(Report("gdb", segv, frames, True))
            frames = None
        if SEGV.search(line):
            signal = True
        elif OTHER_SIGNAL.search(line):
            signal = False
    if frames:
        out.append(Report("gdb", segv, frames, True))
    return out


def upstream_report(r: Report) -> Verdict:
    """Whether one report is Open MPI's fault: (a), (b), (c) above."""
    if not r.segv:
        return Verdict(False, f"{r.who}: a signal other than SIGSEGV")
    if not r.complete:
        return Verdict(False, f"{r.who}: the report is cut short")
    if not r.frames:
        return Verdict(False, f"{r.who}: no frame")
    # Open MPI's own MPI_Init, innermost first: with the preload library
    # loaded, its MPI_Init wrapper is the next frame out, the caller, in
    # every rank (docs/operations.md, "Known upstream faults"): a frame of
    # ours counts only between the crash and Open MPI's MPI_Init
    init = next((i for i, f in enumerate(r.frames) if INIT.search(f) and not OURS.search(f)),
                None)
    inner = r.frames[:init] if init is not None else r.frames
    ours = [f for f in inner if OURS.search(f)]
    if ours:
        return Verdict(False, f"{r.who}: a frame of ours: {ours[0]}")
    if init is None:
        return Verdict(False, f"{r.who}: not inside MPI_Init")
    if not any(PROGRESS.search(f) for f in inner):
        return Verdict(False, f"{r.who}: no opal_progress inside MPI_Init")
    if not any(BTL_TCP.search(f) for f in inner):
        return Verdict(False, f"{r.who}: no frame of the TCP transport (btl_tcp)")
    foreign = [f for f in inner if not THEIRS.search(f)]
    if foreign:
        return Verdict(False, f"{r.who}: a frame inside MPI_Init that is not Open MPI's: "
                       f"{foreign[0]}")
    return Verdict(True, f"{r.who}: {LABEL} ({len(r.frames)} frames, none of ours inside it)")


def classify(text: str) -> Verdict:
    """Upstream only when the output has a signal report and every one of
    them is Open MPI 4.1's SIGSEGV in MPI_Init with no frame of ours."""
    rs = reports(text)
    if not rs:
        return Verdict(False, "no signal report")
    verdicts = [upstream_report(r) for r in rs]
    bad = next((v for v in verdicts if not v.upstream), None)
    if bad is not None:
        return bad
    return Verdict(True, verdicts[0].why + (f", and {len(rs) - 1} more" if len(rs) > 1 else ""))


def note(what: str, verdict: Verdict) -> None:
    """Logs a retry as it happens and counts it for tests/run."""
    line = f"integration: {what}: {verdict.why}; run once more"
    RETRIED.append(line)
    print(f"\nUPSTREAM {line}", file=sys.stderr, flush=True)


def once(first: T, output_of: Callable[[T], Optional[str]], again: Callable[[], T],
         what: Callable[[T], str]) -> T:
    """The result of a job or step, run once more when it failed of the
    upstream fault: first is the first attempt's result, output_of(result)
    its output when it failed (None when it did not), again() runs it anew,
    what(result) names it in the log line.  The second result is returned
    as it is, failed or not, upstream or not: nothing runs a third time."""
    out = output_of(first)
    if out is None:
        return first
    verdict = classify(out)
    if not verdict.upstream:
        return first
    note(what(first), verdict)
    return again()
