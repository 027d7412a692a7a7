#!/usr/bin/python3
# SPDX-License-Identifier: BSD-3-Clause
"""A stand-in for jobstats' EpilogSlurmctld part (Princeton's jobstats,
slurm/slurmctldepilog.sh), for tests/integration/test_jobstats_coexist.py:
written from its documented behaviour, not from its code.

What it does, as jobstats does: wait a little for slurmdbd to have the job,
then store "JS1:" + base64(gzip(JSON)) as the job's whole AdminComment with
`sacctmgr -i update job where jobid=ID set AdminComment=...`, an array task
named <array job>_<task>.  The JSON depends only on the job id and its
nodes, so a test can tell what must come back out of the field.  Always
exits 0 (a failing EpilogSlurmctld part would only be logged).

Measured on Slurm 22.05.8: sacctmgr stores the value in lower case
("JS1:AbC" comes back as "js1:abc", quoted or not), which no base64 decoder
survives; this part then writes the same whole-field value through WRITER
(mpi-pstate-dbcomment without --system: libslurm's slurmdb_job_modify(),
what sacctmgr calls), set by the test when it installs the part."""
from __future__ import annotations

import base64
import gzip
import json
import os
import subprocess
import sys
import time

WRITER = ""  # replaced by the test: the installed mpi-pstate-dbcomment
TERMINAL = {"COMPLETED", "FAILED", "CANCELLED", "TIMEOUT", "NODE_FAIL", "OUT_OF_MEMORY",
            "PREEMPTED", "BOOT_FAIL", "DEADLINE"}


def stats(job: str, nodes: list[str]) -> dict:
    """What the test expects back: a jobstats-shaped document."""
    return {"gpus": 0, "total_time": int(job) % 1000 + 0.5,
            "nodes": {n: {"cpus": 1, "total_memory": 1 << 30, "used_memory": 3 << 20,
                          "total_time": 1.5} for n in nodes}}


def encode(doc: dict) -> str:
    raw = gzip.compress(json.dumps(doc, separators=(",", ":")).encode(), mtime=0)
    return "JS1:" + base64.b64encode(raw).decode()


def main() -> int:
    job = os.environ.get("SLURM_JOB_ID", "")
    aj, at = os.environ.get("SLURM_ARRAY_JOB_ID", ""), os.environ.get("SLURM_ARRAY_TASK_ID", "")
    if not job.isdigit():
        print("no SLURM_JOB_ID", file=sys.stderr)
        return 0
    target = f"{aj}_{at}" if aj.isdigit() and at.isdigit() else job
    nodes = subprocess.run(["scontrol", "show", "hostnames",
                            os.environ.get("SLURM_JOB_NODELIST", "")],
                           capture_output=True, text=True, timeout=30).stdout.split()
    # jobstats sleeps 5 s for the same reason.  The row of the task itself
    # (an array task's raw id can be its array's id: that row says nothing
    # of this task); mpi-pstate's part no longer waits before this one runs.
    t_end = time.monotonic() + 30
    while time.monotonic() < t_end:
        r = subprocess.run(["sacct", "-n", "-X", "-P", "-j", target, "-o", "State"],
                           capture_output=True, text=True, timeout=30)
        if (r.stdout.split() or [""])[0] in TERMINAL:
            break
        time.sleep(0.3)
    value = encode(stats(job, nodes))
    r = subprocess.run(["sacctmgr", "-i", "update", "job", "where", f"jobid={target}", "set",
                        f"AdminComment={value}"], capture_output=True, text=True, timeout=60)
    print(f"jobstats-like: job {target}: sacctmgr exited {r.returncode}: "
          f"{(r.stdout + r.stderr).strip()[:200]}", file=sys.stderr)
    back = subprocess.run(["sacct", "-n", "-X", "-P", "-j", target, "-o", "AdminComment"],
                          capture_output=True, text=True, timeout=30).stdout.strip()
    if back != value and WRITER:
        r = subprocess.run([WRITER, "--set", target], input=value, capture_output=True,
                           text=True, timeout=60)
        print(f"jobstats-like: job {target}: sacctmgr stored {back[:12]!r}..., not the value; "
              f"{WRITER} --set exited {r.returncode} {r.stderr.strip()[:200]}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
