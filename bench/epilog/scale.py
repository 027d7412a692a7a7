#!/usr/bin/python3
# SPDX-License-Identifier: BSD-3-Clause
"""Production-scale figures of the epilogs (jobs of thousands of steps and
ranks), as CPU seconds and
peak RSS of this process (getrusage; the VM is shared, wall clock means
nothing):

  merge   the controller's read, validation and merge of a 64-node job of
          4096 ranks per node (262144 rank entries; 65536 kept in detail)
  queue   one flush pass over 10000 late entries of one user and one fresh
          entry of another (written in that pass)

Run (root, like the controller's SlurmUser would be):
    python3 bench/epilog/scale.py [merge|queue]
Each case runs in a child of its own, so the figures do not mix."""
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from unittest import mock

HERE = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(HERE / "tests" / "py"))
sys.path.insert(0, str(HERE / "epilog"))
import test_epilog_fixtures as fx  # noqa: E402
from mpi_pstate.core import collect, layout, log, noderecord, siteconf, slurm  # noqa: E402
from mpi_pstate.model import summary  # noqa: E402
from mpi_pstate.site import spool  # noqa: E402


def merge() -> dict:
    nodes = [f"n{i:02d}" for i in range(64)]
    one = fx.rank("n00", 0)
    data = noderecord.encode(fx.node_record(77, "n00", [dict(one, rank=k, local=k)
                                                        for k in range(4096)]))
    with tempfile.TemporaryDirectory() as d:
        os.chmod(d, 0o755)
        for n in nodes:
            Path(d, collect.node_file(n)).write_bytes(
                data.replace(b'"node":"n00"', f'"node":"{n}"'.encode(), 1))
        t0 = time.process_time()
        fd = os.open(d, os.O_RDONLY | os.O_DIRECTORY)
        try:
            recs, bad = collect.read_node_records(fd, 77, nodes, {os.geteuid()})
        finally:
            os.close(fd)
        det = summary.merge(77, nodes, recs, bad, "COMPLETED", "0:0", None, 100.0)
        text = noderecord.encode(det)
        cpu = time.process_time() - t0
    return {"cpu_s": round(cpu, 2), "rank_steps": det["summary"]["rank_steps"],
            "detail_ranks": len(det["ranks"]), "record_bytes": len(data),
            "job_json_bytes": len(text), "summary_bytes": len(summary.encode(det["summary"]))}


def queue() -> dict:
    with tempfile.TemporaryDirectory() as d:
        os.chmod(d, 0o755)
        coll = Path(d) / "records"
        q = coll / layout.QUEUE_DIR / layout.LATE_DIR
        q.mkdir(parents=True)
        os.chmod(q.parent, 0o700)
        now = time.time()
        for j in range(1, 10001):
            e = spool.entry_of(j, ["n1", "n2"], 1000, None, now - 600, seen=[])
            (q / f"{j}.json").write_bytes(noderecord.encode(e))
        rec = fx.node_record(20000, "n1", [fx.rank("n1", 0)])
        rec["uid"] = 2000
        (coll / "20000").mkdir()
        (coll / "20000" / "node.n1.json").write_bytes(noderecord.encode(rec))
        (q.parent / "20000.json").write_bytes(noderecord.encode(
            spool.entry_of(20000, ["n1"], 2000, None, now)))
        written = {}
        cfg = siteconf.Config(collect_dir=str(coll))
        row = slurm.SacctJob("20000", "20000", "COMPLETED", "0:0", "00:00:05", "n1", "")
        t0 = time.process_time()
        with mock.patch.object(slurm, "sacct_one", lambda job, timeout=30: row._replace(
                system_comment=written.get(job, ""))), \
                mock.patch.object(slurm.DbTool, "set", lambda s, j, t, c=None, timeout=60,
                                  array=None: written.__setitem__(j, t) or 0), \
                mock.patch.object(slurm.DbTool, "show", lambda s, j, timeout=30: None), \
                mock.patch.object(log, "_stream", [open(os.devnull, "w")]):
            tally = spool.flush(cfg, slurm.DbTool("/fake"), {0, os.geteuid()}, 0.0, wait=0.0,
                                sleep=lambda t: None)
        cpu = time.process_time() - t0
    return {"cpu_s": round(cpu, 2), "tally": tally, "other_user_written": 20000 in written}


def main() -> int:
    cases = {"merge": merge, "queue": queue}
    if len(sys.argv) == 2 and sys.argv[1] in cases:
        out = cases[sys.argv[1]]()
        out["maxrss_mib"] = round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)
        print(json.dumps(out))
        return 0
    for c in cases:
        r = subprocess.run([sys.executable, __file__, c], stdout=subprocess.PIPE, check=True)
        print(c, r.stdout.decode().strip())
    return 0


if __name__ == "__main__":
    sys.exit(main())
