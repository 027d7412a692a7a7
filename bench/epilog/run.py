#!/usr/bin/python3
# SPDX-License-Identifier: BSD-3-Clause
"""Benchmark of the controller side of mpi-pstate's accounting: what
EpilogSlurmctld does after the node records are in (read and validate every
node record, merge, encode the summary, write job.json), on synthetic
records of N nodes x R ranks; and the size of the accounting summary as the
number of ranks and nodes grows.

usage: bench/epilog/run.py [--rounds 7] [--write]   (--write: bench/epilog/RESULTS.md)
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import random
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

TOP = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(TOP / "epilog"))
from mpi_pstate.core import audit, layout, noderecord, siteconf, steprecords  # noqa: E402
from mpi_pstate.model import summary  # noqa: E402
from mpi_pstate.site import ctld  # noqa: E402

FUNCS = ["MPI_Barrier", "MPI_Allreduce", "MPI_Waitall", "MPI_Recv", "MPI_Send", "MPI_Bcast"]


def fake_settings(root: Path, ncpus: int) -> dict[str, Any]:
    """The audit of a 2-socket, 2-NUMA, SMT node with ncpus CPUs (a real
    run of audit.py on a generated tree, so the size is the real one)."""
    def w(rel: str, v: str) -> None:
        p = root / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(v + "\n")
    cpu = "devices/system/cpu"
    w(f"{cpu}/online", f"0-{ncpus - 1}")
    w(f"{cpu}/cpufreq/boost", "1")
    w(f"{cpu}/smt/control", "on")
    w(f"{cpu}/smt/active", "1")
    w(f"{cpu}/cpuidle/current_driver", "intel_idle")
    for c in range(ncpus):
        p = f"{cpu}/cpufreq/policy{c}"
        for k, v in (("scaling_driver", "intel_cpufreq"), ("scaling_governor", "userspace"),
                     ("scaling_min_freq", "800000"), ("scaling_max_freq", "3000000"),
                     ("cpuinfo_min_freq", "800000"), ("cpuinfo_max_freq", "3000000"),
                     ("scaling_setspeed", "3000000"), ("related_cpus", str(c))):
            w(f"{p}/{k}", v)
        for i, (name, lat) in enumerate((("POLL", 0), ("C1", 2), ("C1E", 10), ("C6", 133))):
            for k, v in (("name", name), ("latency", str(lat)), ("residency", str(lat * 3)),
                         ("disable", "0")):
                w(f"{cpu}/cpu{c}/cpuidle/state{i}/{k}", v)
        w(f"{cpu}/cpu{c}/topology/thread_siblings_list", f"{c % (ncpus // 2)},"
          f"{c % (ncpus // 2) + ncpus // 2}")
    for n in range(2):
        w(f"devices/system/node/node{n}/cpulist", f"{n * ncpus // 2}-{(n + 1) * ncpus // 2 - 1}")
        w(f"devices/system/node/node{n}/distance", "10 21" if n == 0 else "21 10")
    return audit.node_settings(str(root))


def node_ranks(node: int, per: int, rnd: random.Random) -> list[dict[str, Any]]:
    out = []
    for k in range(per):
        wall = 3600.0
        mpi = rnd.uniform(100, 2000)
        out.append({"step": "0", "rank": node * per + k, "size": 0, "local": k, "cpu": k,
                    "state": "finalized", "mode": "on", "abi": "ompi", "threshold_us": 500,
                    "wall_s": wall, "mpi_s": round(mpi, 6), "mpi_share": round(mpi / wall, 4),
                    "wait_s": round(mpi * 0.9, 6), "long_calls": rnd.randrange(10**6),
                    "over_s": round(mpi * 0.8, 6), "down_s": round(mpi * 0.7, 6),
                    "transitions": rnd.randrange(10**6), "calls": rnd.randrange(10**8),
                    "bytes": rnd.randrange(10**12), "wakeups": rnd.randrange(10**5),
                    "top": [[f, round(mpi / (i + 2), 6), rnd.randrange(10**7)]
                            for i, f in enumerate(rnd.sample(FUNCS, 3))]})
    return out


def make_records(cdir: Path, job: int, nodes: int, per: int, settings: dict[str, Any]) -> list[str]:
    rnd = random.Random(job)
    names = [f"node{i:04d}" for i in range(nodes)]
    jd = cdir / str(job)
    jd.mkdir(parents=True)
    agent = {"format": "mpi-pstate-agent", "version": 1, "step": 0,
             "energy": {"status": "ok", "package_j": 1.0e6, "dram_j": 1.0e5, "sockets": []}}
    for i, n in enumerate(names):
        ranks = node_ranks(i, per, rnd)
        a = steprecords.parse_agent(json.dumps(agent).encode(), n, "0")
        rec = noderecord.build(job, n, 1000, settings=settings,
                               steps=[{"step": "0", "segment": f"mpi-pstate.{job}.0", "slots": per,
                                    "ranks": ranks}],
                            infos=[{"step": "0", "agent": a, "plugin": None}],
                            restore={"status": "ok"}, problems=[], written=time.time())
        (jd / f"node.{n}.json").write_bytes(noderecord.encode(rec))
    return names


def merge_once(cdir: Path, job: int, names: list[str]) -> tuple[float, int, int]:
    """The controller's work after the wait; returns seconds, summary bytes,
    job.json bytes."""
    cfg = siteconf.Config(collect_dir=str(cdir))
    trusted = {0, os.geteuid()}
    t0 = time.perf_counter()
    recs, bad, _ = ctld.load_records(cfg, job, names, trusted)
    detail = summary.merge(job, names, recs, bad, "COMPLETED", "0:0")
    text = summary.encode(detail["summary"])
    ctld.write_detail(cfg, job, detail, trusted)
    dt = time.perf_counter() - t0
    assert not bad and detail["state"] == "complete", bad
    return dt, len(text.encode()), (cdir / str(job) / layout.JOB_FILE).stat().st_size


def fresh_process(cdir: Path, job: int, nodes: int) -> float:
    """The same in a new interpreter: start, imports and all."""
    code = (f"import sys; sys.path.insert(0, {str(TOP / 'epilog')!r}); import os\n"
            "from mpi_pstate.core import siteconf\nfrom mpi_pstate.model import summary\n"
            "from mpi_pstate.site import ctld\n"
            f"cfg = siteconf.Config(collect_dir={str(cdir)!r}); t = {{0, os.geteuid()}}\n"
            f"names = ['node%04d' % i for i in range({nodes})]\n"
            f"recs, bad, _ = ctld.load_records(cfg, {job}, names, t)\n"
            f"d = summary.merge({job}, names, recs, bad, 'COMPLETED', '0:0')\n"
            "summary.encode(d['summary']); ctld.write_detail(cfg, " + str(job) + ", d, t)\n")
    t0 = time.perf_counter()
    subprocess.run(["/usr/bin/python3", "-I", "-c", code], check=True)
    return time.perf_counter() - t0


def merge_section(cdir: Path, settings: dict[str, Any], rounds: int) -> list[str]:
    """The merge of 100 nodes x 128 ranks, timed in this process and in a
    new one, as Markdown lines."""
    names = make_records(cdir, 1, 100, 128, settings)
    rec_bytes = sum((cdir / "1" / f"node.{n}.json").stat().st_size for n in names)
    times, fresh = [], []
    sbytes = jbytes = 0
    for _ in range(rounds):
        dt, sbytes, jbytes = merge_once(cdir, 1, names)
        times.append(dt)
        fresh.append(fresh_process(cdir, 1, 100))
    return [
        "## Merge of 100 nodes x 128 ranks (budget: 1 s)",
        "",
        f"{rounds} rounds; 100 node records of 128 ranks each "
        f"({rec_bytes / 1e6:.1f} MB in all, {rec_bytes / 100 / 1e3:.0f} kB per node, node "
        f"settings of a 128-CPU node included), read and validated, merged, summary "
        f"encoded, job.json ({jbytes / 1e6:.1f} MB) written atomically with fsync.",
        "",
        "| what | median (s) | worst (s) |",
        "|---|---:|---:|",
        f"| in the EpilogSlurmctld process | {statistics.median(times):.3f} | "
        f"{max(times):.3f} |",
        f"| a new python3 process (start and imports included) | "
        f"{statistics.median(fresh):.3f} | {max(fresh):.3f} |",
        "",
    ]


def size_section(cdir: Path, settings: dict[str, Any]) -> list[str]:
    """The summary's and job.json's sizes as the ranks and nodes grow, as
    Markdown lines."""
    sizes = []
    for i, (n, per) in enumerate(((1, 1), (1, 128), (10, 128), (100, 128), (1000, 16),
                                  (2, 4096))):
        job = 100 + i
        nm = make_records(cdir, job, n, per, settings)
        _, sb, jb = merge_once(cdir, job, nm)
        sizes.append((n, per, n * per, sb, jb))
    return [
        "## Summary size against ranks and nodes",
        "",
        "Bytes of the SystemComment summary (`mpi-pstate/2:{...}`, bound 1024) and of the",
        "per-rank detail kept beside it (job.json), for the same synthetic jobs:",
        "",
        "| nodes | ranks per node | ranks | summary (bytes) | job.json (bytes) |",
        "|---:|---:|---:|---:|---:|",
    ] + [f"| {n} | {p} | {r} | {sb} | {jb} |" for n, p, r, sb, jb in sizes] + [
        "",
        f"The summary stays between {min(s[3] for s in sizes)} and "
        f"{max(s[3] for s in sizes)} bytes from 1 to {max(s[2] for s in sizes)} ranks: it "
        "holds totals, the three ranks that wait most and fixed-size settings only; the "
        "few bytes of difference are the digits of the figures. The detail grows "
        "linearly and stays in the collection directory.",
    ]


def results_head(rounds: int) -> list[str]:
    """RESULTS.md's title and how the figures were measured."""
    return [
        "# Epilog: merge time and summary size",
        "",
        f"Measured on the project VM ({platform.processor() or platform.machine()}, "
        f"{os.cpu_count()} vCPUs, Python {platform.python_version()}, records on the local disk"
        "). Reproduce:",
        "",
        f"    /usr/bin/python3 bench/epilog/run.py --rounds {rounds} --write    "
        "# about a minute",
        "",
        "What is timed is what `EpilogSlurmctld` (`mpi-pstate epilog-slurmctld`) does once the",
        "node records are there; the Slurm round trips around it (`mpi-pstate-dbcomment`, one",
        "`sacct`) do not depend on the job's size and took 0.1-0.3 s on the lab cluster",
        "(its log line gives the phases of every job).",
        "",
    ]


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--write", action="store_true")
    a = ap.parse_args()
    with tempfile.TemporaryDirectory() as td:
        tdp = Path(td)
        os.chmod(tdp, 0o755)
        settings = fake_settings(tdp / "sys", 128)
        cdir = tdp / "records"
        cdir.mkdir(mode=0o755)
        lines = merge_section(cdir, settings, a.rounds) + size_section(cdir, settings)
    text = "\n".join(results_head(a.rounds) + lines) + "\n"
    print(text)
    if a.write:
        (TOP / "bench" / "epilog" / "RESULTS.md").write_text(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
