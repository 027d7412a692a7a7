#!/usr/bin/python3
# SPDX-License-Identifier: BSD-3-Clause
"""The root agent under attack by the job's own ranks, against its budget.

    bench/security/run.py --build build [--before DIR] [--seconds 10]

Needs root, no cluster (the fake sysfs of tests/agent/mkfakesys.py, as
bench/agent/).  The hostile rank is tests/programs/agent/hostile.c:

  attack CPU   4096 slots (the most a plugin segment holds on a 4096-CPU
               node; 16384 is the format's cap) whose pid and state the rank
               rewrites in a loop, bumping the futex each time: the agent's
               CPU time from /proc/<pid>/stat over the attack.  Baseline: the
               same binary with the ceiling off (--cpu-cap 0), i.e. the
               behaviour before the root side was hardened, side by side.
  gone flood   64 slots given a real child that exits 20 ms later, every
               110 ms: bytes the agent's log grows per second.
  latency      bench/agent's latency run (default budget 0.5 %) for this build and for
               --before (a build of the main branch), to show what confining
               the agent to the step's CPUs and the ceiling cost the
               frequency changes when nobody attacks.
Writes bench/security/RESULTS.md (and prints it).
"""
from __future__ import annotations

import argparse
import os
import subprocess
import sys
from pathlib import Path

TOP = Path(__file__).resolve().parents[1].parent
sys.path[:0] = [str(TOP / "bench" / "agent"), str(TOP / "bench")]
import run as agentbench  # noqa: E402  (Bench: trees, agent start/stop, latency)
import machine as bm  # noqa: E402

TICK = os.sysconf("SC_CLK_TCK")
BUDGET = 0.05  # the agent's default --cpu-cap


def cpu_s(pid: int) -> float:
    f = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(f[11]) + int(f[12])) / TICK


class Security:
    def __init__(self, build: Path, seconds: int):
        self.b = agentbench.Bench(build, seconds)
        self.hostile = build / "tests/agent/hostile"
        self.seconds = seconds
        self.rows: list[tuple[str, ...]] = []
        self.notes: list[str] = []

    def attack(self, cap: str) -> tuple[float, dict]:
        d = self.b.tree(2)
        pid = self.b.run_agent(d, 4096, "0-1", "--threshold", "500us", "--cpu-cap", cap)
        c0 = cpu_s(pid)
        r = subprocess.run([str(self.hostile), "--shm", str(d / "seg"), "--slots", "4096", "--seconds",
                            str(self.seconds)], capture_output=True, text=True, check=True)
        c1 = cpu_s(pid)
        rec = self.b.stop_agent(d, pid)
        self.notes.append(f"attack --cpu-cap {cap}: hostile made {r.stdout.strip()}; agent {rec['agent']['wakeups']} "
                          f"wake-ups, {rec['agent']['throttled']} throttled, {rec['agent'].get('capped', '-')} "
                          f"capped sleeps ({rec['agent'].get('capped_ms', '-')} ms)")
        return (c1 - c0) / self.seconds, rec

    def cpu(self) -> None:
        before, _ = self.attack("0")
        after, _ = self.attack("5")
        cmd = "`bench/security/run.py` attack"
        self.row("agent CPU, hostile rank rewriting 4096 slots + futex in a loop, ceiling off (before)", "5 %",
                 f"{100 * before:.1f} %", "-", "-", cmd)
        self.row("agent CPU, same attack, default ceiling (--cpu-cap 5)", "5 %", f"{100 * after:.1f} %",
                 f"ceiling off {100 * before:.1f} %", f"{after / before:.2f}" if before else "-", cmd)

    def gone_rate(self, b: "agentbench.Bench") -> float:
        d = b.tree(2)
        pid = b.run_agent(d, 64, "0-1", "--threshold", "500us")
        log = d / "run/log"
        s0 = log.stat().st_size
        subprocess.run([str(self.hostile), "--shm", str(d / "seg"), "--slots", "64", "--seconds", str(self.seconds),
                        "--period-ms", "110"], capture_output=True, text=True, check=True)
        s1 = log.stat().st_size
        b.stop_agent(d, pid)
        return (s1 - s0) / self.seconds

    def gone(self, before: Path | None) -> None:
        rate = self.gone_rate(self.b)
        base, ratio = "-", "-"
        if before:
            old = agentbench.Bench(before, self.seconds)
            try:
                was = self.gone_rate(old)
            finally:
                old.cleanup()
            base, ratio = f"main (before) {was / 1024:.2f} KiB/s", f"{rate / was:.3f}" if was else "-"
        self.row("agent log growth, 64 slots each given a short-lived real pid every 110 ms", "8 lines/s, 1 MiB",
                 f"{rate / 1024:.2f} KiB/s", base, ratio, "`bench/security/run.py` gone")

    def latency(self, before: Path | None) -> None:
        runs = [("this build", self.b)]
        if before:
            runs.insert(0, ("main (before)", agentbench.Bench(before, self.seconds)))
        for tag, b in runs:
            b.latency("0.5")
            for r in b.rows:
                if r[0].startswith(("drop p99", "restore p99")):
                    self.row(f"{r[0].split(',')[0]}, {tag}", r[1], r[2], r[3], r[4],
                             "`bench/security/run.py` latency (= bench/agent latency, default budget)")
            if b is not self.b:
                b.cleanup()

    def row(self, *cells: str) -> None:
        self.rows.append(cells)

    def write(self, out: Path) -> str:
        return bm.write_results(out, "Root agent under attack: CPU and log against their bounds", self.seconds,
                                "`bench/security/run.py --build build --before <build of main>`, as root, no "
                                "cluster. Bounds and the tests that hold them: docs/security.md.", "bound",
                                "baseline (same machine, same run)",
                                self.rows, self.notes, [
                  "Agent CPU is utime + stime of the agent from /proc over the attack, divided by its wall time. "
                  "The ceiling is a token bucket on the agent's CPU time (agent/loop.c cpu_cap): in debt, "
                  "the agent raises every domain it lowered and leaves those waits up until they end, then sleeps, "
                  "deaf to the futex; the attacker's own "
                  "step pays (savings lost), nobody else.",
                  "The latency rows are bench/agent's latency run with the default budget for the build of "
                  "main and this one, one after the other on the same machine: the agent confined to the "
                  "step's CPUs and the ceiling must not change them beyond this machine's noise (compare the "
                  "bare-timer baselines).",
                  "Before: the build of main (or, for the CPU rows, this build with --cpu-cap 0), run in the "
                  "same invocation."])


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--build", default="build")
    ap.add_argument("--before", default=None, help="a build directory of the main branch, for the latency rows")
    ap.add_argument("--seconds", type=int, default=10)
    ap.add_argument("--out", default=str(TOP / "bench/security/RESULTS.md"))
    a = ap.parse_args()
    if os.geteuid() != 0:
        print("bench/security/run.py: run as root", file=sys.stderr)
        return 2
    s = Security((TOP / a.build).resolve(), a.seconds)
    try:
        s.cpu()
        s.gone(Path(a.before).resolve() if a.before else None)
        s.latency(Path(a.before).resolve() if a.before else None)
        print(s.write(Path(a.out)))
    finally:
        s.b.cleanup()
    return 0


if __name__ == "__main__":
    sys.exit(main())
