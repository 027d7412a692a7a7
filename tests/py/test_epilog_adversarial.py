# SPDX-License-Identifier: BSD-3-Clause
"""The node Epilog and the flusher under the attacks docs/security.md lists,
replayed as the job's user and as another user, each asserting its bound
(docs/security.md, "Epilog side").  The Epilog runs as a child process, as
Slurm runs it; its cost is the child's getrusage (CPU seconds, peak RSS),
never wall clock, with bounds far above the measured figures
(bench/epilog/RESULTS.md) and far below the attacks' before the fix
(hard links: 13.4 s CPU, 249 MiB, 65,536 ranks)."""
import contextlib
import importlib.util
import io
import json
import os
import shutil
import sys
import tempfile
import time
import unittest
from pathlib import Path
from typing import Any, Dict, Tuple
from unittest import mock

import test_epilog_fixtures as fx
from mpi_pstate.core import collect, layout, log, noderecord, siteconf, slurm, steprecords
from mpi_pstate.model import summary
from mpi_pstate.site import rankfigures, spool

TOP = Path(__file__).resolve().parents[2]
spec = importlib.util.spec_from_file_location("bench_epilog_attack",
                                              TOP / "bench" / "epilog" / "attack.py")
assert spec and spec.loader
attack = importlib.util.module_from_spec(spec)
spec.loader.exec_module(attack)  # type: ignore[attr-defined]
if not hasattr(os, "waitstatus_to_exitcode"):
    # Python before 3.9 (EL8's 3.6, where the node Epilog runs): the small
    # process that measures the Epilog decodes the wait status from the
    # os.W* macros, as os.waitstatus_to_exitcode does, so that the Epilog
    # itself is measured on that Python.
    _WAIT = "os.waitstatus_to_exitcode(status)"
    assert _WAIT in attack.MEASURE
    attack.MEASURE = attack.MEASURE.replace(
        _WAIT, "(os.WEXITSTATUS(status) if os.WIFEXITED(status) else -os.WTERMSIG(status))")

CPU_BOUND_S = 5.0  # the honest 4096-rank segment takes ~0.7 s here
RSS_BOUND_MIB = 150.0  # ~35 MiB for 4096 ranks


@unittest.skipUnless(os.geteuid() == 0, "the node Epilog is root's (chown to other users)")
class NodeEpilogUnderAttack(unittest.TestCase):
    def run_kind(self, kind: str, names: int = 16, nslots: int = 4096) -> Dict[str, Any]:
        u = attack.run_one(TOP, kind, names, nslots)
        self.assertEqual(u["rc"], 0, u["stderr"])
        self.assertLess(u["cpu_s"], CPU_BOUND_S, u)
        self.assertLess(u["maxrss_mib"], RSS_BOUND_MIB, u)
        return u

    def test_hard_linked_segment_counts_nothing(self) -> None:
        """One valid 4096-slot segment hard-linked under 16 names by the
        job's user: refused (16 links), the record stays small."""
        u = self.run_kind("hardlink")
        self.assertEqual(u["record_ranks"], 0)
        self.assertLess(u["record_bytes"], 64 << 10)
        self.assertTrue(any("16 links" in p for p in u["problems"]), u["problems"])

    def test_honest_largest_segment_is_read_whole(self) -> None:
        u = self.run_kind("big")
        self.assertEqual(u["record_ranks"], 4096)
        self.assertLess(u["record_bytes"], noderecord.MAX_BYTES)

    def test_zero_padded_names_of_another_user_take_no_place(self) -> None:
        """81 names mpi-pstate.J.00.. by another user before the victim's
        step 9: never looked at, the victim's 4 ranks are all there."""
        u = self.run_kind("padded")
        self.assertEqual(u["record_ranks"], 4)
        self.assertEqual(u["problems"], [])

    def test_counter_at_2_64_is_dropped_alone(self) -> None:
        u = self.run_kind("counter")
        self.assertEqual(u["record_ranks"], 4)
        self.assertTrue(any("out of range, dropped" in p for p in u["problems"]), u)

    def test_header_claiming_more_slots_reads_what_the_plugin_made(self) -> None:
        u = self.run_kind("header")
        self.assertEqual(u["record_ranks"], 4)
        self.assertTrue(any("header says 16384 slots" in p for p in u["problems"]), u)

    def test_segment_swapped_under_the_listed_name_is_refused(self) -> None:
        u = self.run_kind("swapped")
        self.assertEqual(u["record_ranks"], 0)
        self.assertTrue(any("not the file the plugin made" in p for p in u["problems"]), u)

    def test_plugin_off_writes_nothing_and_reads_no_segment(self) -> None:
        tmp = Path(tempfile.mkdtemp())
        try:
            shm = attack.scenario(tmp, "off", 0, 0)
            planted = shm / f"mpi-pstate.{attack.JOB}.0"
            fx.segment(planted, [{"rank": 0}])
            before = planted.stat()
            os.utime(planted, (before.st_atime - 100, before.st_mtime))
            (tmp / "slurm.conf").write_text("SlurmUser=root\n")
            env = {"SLURM_JOB_ID": str(attack.JOB), "SLURMD_NODENAME": "n1",
                   "SLURM_JOB_UID": "1000", "PATH": "/usr/bin:/bin"}
            u = attack.child_usage([sys.executable, "-I", str(TOP / "epilog" / "mpi-pstate"),
                                    "epilog", "--collect-dir", str(tmp / "records"),
                                    "--runtime-dir", str(tmp / "run"), "--slurm-conf",
                                    str(tmp / "slurm.conf"), "--shm-dir", str(shm)], env)
            self.assertEqual((u["rc"], u["stderr"]), (0, ""))
            self.assertEqual(list((tmp / "records").iterdir()), [])  # wrote nothing
            self.assertEqual(planted.stat().st_atime, before.st_atime - 100)  # not read
            self.assertTrue(planted.exists())
        finally:
            shutil.rmtree(tmp, ignore_errors=True)


@unittest.skipUnless(os.geteuid() == 0 and os.path.isdir("/run"), "needs root and /run")
class FastPath(unittest.TestCase):
    """The installed Epilog wrapper (epilog/mpi-pstate-epilog.in): a job the
    plugin was off for costs a shell and no Python, and anything that might
    need the Epilog runs it."""

    def setUp(self) -> None:
        self._td = tempfile.TemporaryDirectory()
        self.tmp = Path(self._td.name)
        self.node = f"fastpath{os.getpid()}"
        self.cache = Path(f"/run/mpi-pstate-epilog.{self.node}.cache")
        self.called = self.tmp / "called"
        (self.tmp / "bin").mkdir()
        fake = self.tmp / "bin" / "mpi-pstate"
        fake.write_text(f"#!/bin/sh\necho \"$MPI_PSTATE_EPILOG_CACHE $*\" > {self.called}\n")
        fake.chmod(0o755)
        self.wrapper = self.tmp / "mpi-pstate-epilog"
        self.wrapper.write_text((TOP / "epilog" / "mpi-pstate-epilog.in").read_text()
                                .replace("@BINDIR@", str(self.tmp / "bin")))
        self.wrapper.chmod(0o755)
        self.conf = self.tmp / "slurm.conf"
        self.conf.write_text("SlurmUser=root\n")
        os.utime(self.conf, (time.time() - 3600,) * 2)  # not changed in the last seconds
        self.runtime = self.tmp / "run"
        (self.runtime / "steps").mkdir(parents=True)
        self.env = {"SLURM_JOB_ID": "4242", "SLURMD_NODENAME": self.node,
                    "SLURM_CONF": str(self.conf), "PATH": "/usr/bin:/bin"}

    def tearDown(self) -> None:
        with contextlib.suppress(FileNotFoundError):
            self.cache.unlink()
        self._td.cleanup()

    def write_cache(self) -> None:
        from mpi_pstate.site import node_epilog
        with mock.patch.dict(os.environ, {"SLURM_CONF": str(self.conf)}):
            node_epilog.write_cache(str(self.cache), str(self.runtime), [str(self.conf)])

    def epilog_ran(self) -> bool:
        with contextlib.suppress(FileNotFoundError):
            self.called.unlink()
        u = attack.child_usage(["/bin/sh", str(self.wrapper)], self.env)
        self.assertEqual(u["rc"], 0, u)
        return self.called.exists()

    def test_plugin_off_costs_no_python(self) -> None:
        self.assertTrue(self.epilog_ran())  # no cache yet: the Epilog runs (and makes it)
        self.assertIn(str(self.cache), self.called.read_text())
        self.write_cache()
        self.assertFalse(self.epilog_ran())  # nothing of job 4242 here: done in the shell
        step = self.runtime / "steps" / "4242.0"
        step.mkdir()
        self.assertTrue(self.epilog_ran())  # the plugin ran a step of it
        step.rmdir()
        (self.runtime / "steps" / "42420.0").mkdir()  # another job's: not ours
        self.assertFalse(self.epilog_ran())
        (self.runtime / "restore").mkdir()
        (self.runtime / "restore" / "policy0").write_text("job=1\n")
        self.assertTrue(self.epilog_ran())  # a restore record: the backstop must run
        (self.runtime / "restore" / "policy0").unlink()
        self.assertFalse(self.epilog_ran())

    def test_stale_cache_is_not_used(self) -> None:
        self.write_cache()
        self.assertFalse(self.epilog_ran())
        t = time.time() + 5
        os.utime(self.conf, (t, t))  # the configuration changed since
        self.assertTrue(self.epilog_ran())
        os.utime(self.conf, (time.time() - 60,) * 2)
        self.write_cache()  # the Epilog's next run: fresh again
        self.assertFalse(self.epilog_ran())
        self.env["SLURM_CONF"] = str(self.tmp / "other.conf")
        self.assertTrue(self.epilog_ran())
        self.env["SLURM_CONF"] = str(self.conf)
        os.chown(self.cache, 65534, -1)  # not root's: never trusted
        self.assertTrue(self.epilog_ran())
        self.env["SLURM_JOB_ID"] = "42;x"
        self.write_cache()
        self.assertTrue(self.epilog_ran())  # a strange id: the Epilog decides


class RecordBounds(unittest.TestCase):
    def test_build_caps_ranks_and_embedded_records(self) -> None:
        """noderec.build() applies MAX_RANKS and MAX_EMBED_BYTES whatever
        it is given: the record stays under MAX_BYTES and validates."""
        r = fx.rank("n1", 0)
        steps = [{"step": str(i), "segment": f"mpi-pstate.1.{i}", "slots": 4096,
                  "ranks": [dict(r, step=str(i), rank=k) for k in range(4096)]}
                 for i in range(6)]
        big = {"step": 0, "ranks": ["x" * 200] * 1200}  # ~250 kB each
        infos = [{"step": str(i), "agent": {"step": str(i), "energy": {"status": "unknown",
                                                                       "joules": None},
                                            "record": steprecords.bounded(dict(big, step=i))},
                  "plugin": steprecords.bounded(dict(big, step=i))} for i in range(64)]
        rec = noderecord.build(1, "n1", 1000, settings=None, steps=steps, infos=infos,
                               restore={"status": "ok"}, problems=[], written=time.time())
        data = noderecord.encode(rec)
        self.assertEqual(len(rec["ranks"]), noderecord.MAX_RANKS)
        self.assertLess(len(data), noderecord.MAX_BYTES)
        self.assertTrue(any("over the node's" in p for p in rec["problems"]))
        self.assertTrue(any("truncated" in p for p in rec["problems"]))
        self.assertEqual(len(noderecord.validate(noderecord.decode(data), 1, "n1")["ranks"]),
                         noderecord.MAX_RANKS)

    def test_node_rank_budget_spans_steps(self) -> None:
        """The node's slot budget counts every step: 64 honest segments of
        4096 slots read at most MAX_NODE_RANKS slots in all."""
        with tempfile.TemporaryDirectory() as d:
            shm = Path(d)
            listed = []
            for i in range(6):
                seg = shm / f"mpi-pstate.7.{i}"
                fx.segment(seg, [{"rank": 0}], nslots=4096)
                st = seg.stat()
                listed.append({"step": str(i), "name": seg.name, "dev": st.st_dev,
                               "ino": st.st_ino, "nslots": 4096, "bytes": st.st_size})
            with mock.patch.object(rankfigures, "MAX_NODE_RANKS", 3 * 4096):
                steps, problems, names = rankfigures.job_segments(7, os.getuid(), listed, str(shm))
            self.assertEqual(sum(s["slots"] for s in steps), 3 * 4096)
            self.assertTrue(any("are reached" in p for p in problems), problems)


class JobBounds(unittest.TestCase):
    """The job's user shapes every node record of the job: the controller
    reads at most JOB_MAX_RECORD_BYTES of them in all, refusing (not
    reading) the rest, and keeps at most JOB_MAX_RANKS rank entries,
    summing the others, whatever the number of nodes."""

    def records(self, nodes: int, ranks: int, max_bytes: int, max_ranks: int
                ) -> Tuple[dict, dict, int]:
        with tempfile.TemporaryDirectory() as d:
            os.chmod(d, 0o755)
            size = 0
            for i in range(nodes):
                n = f"n{i}"
                data = noderecord.encode(fx.node_record(31, n, [fx.rank(n, i * ranks + k)
                                                                for k in range(ranks)]))
                size = max(size, len(data))
                Path(d, collect.node_file(n)).write_bytes(data)
            fd = os.open(d, os.O_RDONLY | os.O_DIRECTORY)
            try:
                with mock.patch.object(collect, "JOB_MAX_RECORD_BYTES", max_bytes(size)), \
                        mock.patch.object(collect, "JOB_MAX_RANKS", max_ranks):
                    recs, bad = collect.read_node_records(fd, 31, [f"n{i}" for i in range(nodes)],
                                                          {os.geteuid()})
            finally:
                os.close(fd)
        return recs, bad, size

    def test_bytes_of_records_per_job(self) -> None:
        recs, bad, _ = self.records(5, 2, lambda size: 2 * size + size // 2, 10**6)
        self.assertEqual(sorted(recs), ["n0", "n1"])
        self.assertEqual(sorted(bad), ["n2", "n3", "n4"])
        self.assertIn("more than", bad["n2"])  # the rest of the budget, not a whole record
        self.assertIn("budget of node records is spent", bad["n4"])

    def test_ranks_per_job(self) -> None:
        """Past the job's rank budget every record is still read, its ranks
        summed, not kept: every rank counts, memory stays bounded."""
        recs, bad, _ = self.records(4, 3, lambda size: 10**9, 7)
        self.assertEqual((sorted(recs), bad), (["n0", "n1", "n2", "n3"], {}))
        self.assertEqual([len(recs[n]["ranks"]) for n in sorted(recs)], [3, 3, 1, 0])
        self.assertEqual([recs[n].get("rest", {}).get("rank_steps") for n in sorted(recs)],
                         [None, None, 2, 3])
        s = summary.merge(31, sorted(recs), recs, bad)["summary"]
        self.assertEqual((s["rank_steps"], s["state"]), (12, "partial"))

    def test_honest_job_is_whole(self) -> None:
        recs, bad, _ = self.records(8, 4, lambda size: collect.JOB_MAX_RECORD_BYTES,
                                    collect.JOB_MAX_RANKS)
        self.assertEqual((len(recs), bad), (8, {}))


class FlushUnderFaults(unittest.TestCase):
    """The queue: slurmdbd down, a stale record after job-id reuse, prune."""

    def setUp(self) -> None:
        self._td = tempfile.TemporaryDirectory()
        self.tmp = Path(self._td.name)
        os.chmod(self.tmp, 0o755)
        self.collect = self.tmp / "records"
        self.collect.mkdir()
        self.cfg = siteconf.Config(collect_dir=str(self.collect))
        self.trusted = {0, os.geteuid()}
        self.db_up = True
        self.written: Dict[int, str] = {}

    def tearDown(self) -> None:
        self._td.cleanup()

    def queue(self, job: int, nodes: Any, queued: float, uid: int = 1000) -> None:
        qfd = spool.open_queue(self.cfg, self.trusted, create=True)
        assert qfd is not None
        try:
            spool.enqueue(qfd, spool.entry_of(job, list(nodes), uid, None, queued))
        finally:
            os.close(qfd)

    def queued(self) -> list:
        """Queue entries left, late ones included."""
        q = self.collect / layout.QUEUE_DIR
        return sorted([p.name for p in q.glob("*.json")] +
                      [f"late/{p.name}" for p in q.glob("late/*.json")])

    def publish(self, job: int, node: str, written: float, uid: int = 1000) -> None:
        rec = fx.node_record(job, node, [fx.rank(node, 0)])
        rec["written"], rec["uid"] = written, uid
        d = self.collect / str(job)
        d.mkdir(exist_ok=True)
        (d / f"node.{node}.json").write_bytes(noderecord.encode(rec))

    def sacct_one(self, job: int, timeout: float = 30) -> slurm.SacctJob:
        if not self.db_up:
            raise slurm.SlurmError("sacct: Connection refused (slurmdbd down)")
        return slurm.SacctJob(str(job), str(job), "COMPLETED", "0:0", "00:00:05", "n1", "",
                              system_comment=self.written.get(job, ""))

    def set(self, job: int, text: str, cluster: Any = None, timeout: float = 60,
            array: Any = None) -> int:
        if not self.db_up:
            raise slurm.SlurmError("slurmdbd down")
        self.written[job] = text
        return 0

    def flush(self, for_s: float = 0.0) -> Dict[str, int]:
        with mock.patch.object(slurm, "sacct_one", self.sacct_one), \
                mock.patch.object(slurm.DbTool, "set", lambda s, j, t, c=None, timeout=60,
                                  array=None: self.set(j, t)), \
                mock.patch.object(slurm.DbTool, "show", lambda s, j, timeout=30: None), \
                mock.patch.object(log, "_stream", [io.StringIO()]):
            return spool.flush(self.cfg, slurm.DbTool("/fake"), self.trusted, for_s,
                               wait=0.0, sleep=lambda t: None)

    def test_epilog_slurmctld_asks_nobody_and_only_queues(self) -> None:
        """It never waits: no sacct, no slurmctld, no node record read; the
        job is queued and one flusher started."""
        import argparse
        from mpi_pstate.site import ctld
        self.publish(9, "n1", time.time())
        a = argparse.Namespace(collect_dir=str(self.collect), runtime_dir=None, slurm_conf=None,
                               wait=30.0, flush_for=3600.0, quiet=True)
        env = {"SLURM_JOB_ID": "9", "SLURM_JOB_NODELIST": "n[1-2]", "SLURM_JOB_UID": "1000",
               "SLURM_CONF": str(self.tmp / "none.conf"), "PATH": "/usr/bin:/bin"}

        def refuse(*args: Any, **kw: Any) -> Any:
            raise AssertionError("the EpilogSlurmctld asked slurmdbd, slurmctld or a record")
        spawned: list = []
        with mock.patch.dict(os.environ, env, clear=True), \
                mock.patch.object(slurm, "run", refuse), \
                mock.patch.object(ctld, "load_records", refuse), \
                mock.patch.object(log, "_stream", [io.StringIO()]):
            self.assertEqual(spool.epilog_slurmctld(a, "/fake/dbcomment", spawn=spawned.append), 0)
        self.assertEqual(len(spawned), 1)
        self.assertEqual(spawned[0][3:8], ["flush", "--quiet", "--for", "3600.0", "--wait"])
        qfd = spool.open_queue(self.cfg, self.trusted)
        assert qfd is not None
        try:
            e = spool.read_entry(qfd, "9.json")
        finally:
            os.close(qfd)
        self.assertEqual((e["job"], e["nodes"], e["uid"]), (9, ["n1", "n2"], 1000))

    def test_slurmdbd_down_then_back_every_summary_written(self) -> None:
        now = time.time()
        for j in range(101, 151):  # 50 jobs end while slurmdbd is down
            self.publish(j, "n1", now)
            self.queue(j, ["n1"], now)
        self.db_up = False
        tally = self.flush()
        self.assertEqual(tally, {"database unreachable": 1})  # one try, then the pass stops
        self.assertEqual(len(os.listdir(self.collect / layout.QUEUE_DIR)), 51)  # 50 + .lock
        self.db_up = True
        tally = self.flush()
        self.assertEqual(tally, {"written": 50})
        self.assertEqual(sorted(self.written), list(range(101, 151)))
        self.assertEqual(self.queued(), [])

    def test_wall_time_is_the_jobs_not_the_flushs(self) -> None:
        """slurmdbd back after an outage shows the job's state before its End
        (sacct's Elapsed then counts to now: 65 s for a 3 s job): the job
        waits for the End, then wall_s is End - Start."""
        now = time.time()
        self.publish(60, "n1", now)
        self.queue(60, ["n1"], now)
        end = ["Unknown"]
        real = self.sacct_one

        def row(job: int, timeout: float = 30) -> slurm.SacctJob:
            return real(job)._replace(elapsed="00:01:05", start="2026-11-27T02:45:12",
                                      end=end[0])
        with mock.patch.object(self, "sacct_one", row):
            self.assertEqual(self.flush(), {"not in the database yet": 1})
            end[0] = "2026-11-27T02:45:15"
            self.assertEqual(self.flush(), {"written": 1})
        s = json.loads(self.written[60].split("mpi-pstate/2:", 1)[1])
        self.assertEqual((s["wall_s"], s["wall_src"]), (10.0, "sacct"))  # its step: 10 s

    def test_stale_record_of_a_reused_job_id_never_merges(self) -> None:
        now = time.time()
        self.publish(77, "n1", now)
        self.publish(77, "n2", now - 30 * 86400)  # job 77 of a month ago, same id
        self.publish(77, "n3", now, uid=2000)  # another user's job of that id
        self.queue(77, ["n1", "n2", "n3"], now)
        self.flush()
        s = json.loads(self.written[77].split("mpi-pstate/2:", 1)[1])
        self.assertEqual((s["ranks"], s["missing_n"]), (1, 2))

    def test_one_flusher_at_a_time(self) -> None:
        self.queue(5, ["n1"], time.time())
        qfd = spool.open_queue(self.cfg, self.trusted)
        assert qfd is not None
        lock = spool.take_lock(qfd)
        try:
            self.assertEqual(self.flush(), {"another flusher runs": 1})
        finally:
            os.close(lock)  # type: ignore[arg-type]
            os.close(qfd)

    def test_late_node_record_still_counts(self) -> None:
        now = time.time()
        self.publish(88, "n1", now)
        self.queue(88, ["n1", "n2"], now - 60)  # n2 crashed: its Epilog runs later
        self.flush()
        s = json.loads(self.written[88].split("mpi-pstate/2:", 1)[1])
        self.assertEqual((s["state"], s["missing"]), ("partial", "n2"))
        calls: list = []
        with mock.patch.object(self, "sacct_one", lambda *a, **k: calls.append(a)):
            self.assertEqual(self.flush(), {"waiting for a late node": 1})
        self.assertEqual(calls, [])  # nothing new: slurmdbd is not asked again
        self.publish(88, "n2", now)
        self.flush()
        s = json.loads(self.written[88].split("mpi-pstate/2:", 1)[1])
        self.assertEqual((s["state"], s["nodes"]), ("complete", 2))
        self.assertEqual(self.queued(), [])

    def test_flusher_does_not_linger(self) -> None:
        """A flusher given an hour stops when only late nodes are awaited,
        and when mpi-pstate is upgraded under it (its tools may be gone)."""
        now = time.time()
        self.publish(90, "n1", now)
        self.queue(90, ["n1", "n2"], now - 60)
        self.flush()  # written partial, n2 awaited
        self.assertEqual(self.flush(for_s=3600), {"waiting for a late node": 1})
        self.db_up = False
        self.queue(91, ["n1"], now)
        self.publish(91, "n1", now)
        ids = iter([1, 2, 2, 2])
        with mock.patch.object(spool, "_program_id", lambda: next(ids)):
            tally = self.flush(for_s=3600)
        self.assertEqual(tally.get("database unreachable"), 1)  # one pass, then it stopped

    def test_late_entries_of_one_user_hold_nobody_back(self) -> None:
        """10000 jobs of one user each waiting for a late node (as
        `sbatch -N2 --wrap 'srun -N1 true'` makes them): another user's job,
        queued after them all, is written in the next flush pass."""
        now = time.time()
        q = self.collect / layout.QUEUE_DIR
        (q / layout.LATE_DIR).mkdir(parents=True, mode=0o700)
        os.chmod(q, 0o700)
        for j in range(1, 10001):  # written partial once: "seen" names the nodes then
            e = spool.entry_of(j, ["n1", "n2"], 1000, None, now - 600, seen=[])
            (q / layout.LATE_DIR / f"{j}.json").write_bytes(noderecord.encode(e))
        self.publish(20000, "n1", now, uid=2000)
        self.queue(20000, ["n1"], now, uid=2000)
        tally = self.flush()
        self.assertIn(20000, self.written)
        self.assertEqual(tally["written"], 1)
        self.assertEqual(tally["waiting for a late node"], spool.LATE_PER_PASS)
        self.assertEqual(len(self.queued()), 10000)

    def test_one_user_fills_the_queue_another_is_next(self) -> None:
        """Fresh entries: one job of each user in turn, in queue time."""
        es = [spool.entry_of(j, ["n1"], 1000, None, float(j)) for j in range(1, 3001)]
        es.append(spool.entry_of(5000, ["n1"], 2000, None, 5000.0))
        order = [e["job"] for e in spool.fair(es)]
        self.assertEqual(order[:3], [1, 5000, 2])
        self.assertEqual(len(order), spool.PER_USER_PASS + 1)

    def test_prune_keeps_recent_records(self) -> None:
        now = time.time()
        self.publish(1, "n1", now)
        self.publish(2, "n1", now)
        old = now - 40 * 86400
        for p in (self.collect / "1").iterdir():
            os.utime(p, (old, old))
        os.utime(self.collect / "1", (old, old))
        self.assertEqual(spool.prune(self.cfg, self.trusted, 30, now, dry_run=True), [1])
        self.assertTrue((self.collect / "1").exists())
        self.assertEqual(spool.prune(self.cfg, self.trusted, 30, now), [1])
        self.assertFalse((self.collect / "1").exists())
        self.assertTrue((self.collect / "2").exists())

    def test_prune_removes_what_a_dead_writer_left(self) -> None:
        """A writer killed between its temporary file and the rename: the
        file goes once a day old, a fresh one (a writer at work) stays."""
        now = time.time()
        self.publish(2, "n1", now)
        dead = [self.collect / ".tmp.x.json.1.1", self.collect / "2" / ".tmp.node.n1.json.7.1"]
        live = self.collect / "2" / ".tmp.node.n2.json.8.1"
        for p in dead + [live]:
            p.write_text("half")
        for p in dead:
            os.utime(p, (now - 2 * 86400,) * 2)
        self.assertEqual(spool.prune(self.cfg, self.trusted, 30, now), [])
        self.assertEqual([p.exists() for p in dead + [live]], [False, False, True])


if __name__ == "__main__":
    unittest.main()
