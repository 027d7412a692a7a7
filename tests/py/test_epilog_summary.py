# SPDX-License-Identifier: BSD-3-Clause
"""Controller side without a cluster: merging node records, the bounded
accounting summary (size independent of ranks and nodes; ranks vs
rank-steps, job wall time, bounded imbalance, energy source), reading
version 1 summaries, how it sits in a SystemComment next to other text,
EpilogSlurmctld with a fake mpi-pstate-dbcomment and sacct (AdminComment,
jobstats' field, never touched), backfill idempotence, and the real
mpi-pstate-dbcomment's refusals that need no slurmdbd."""
import argparse
import io
import json
import os
import subprocess
import tempfile
import time
import unittest
from pathlib import Path
from typing import Dict, List, Optional, Tuple
from unittest import mock

import test_epilog_fixtures as fx
from mpi_pstate.core import layout, log, noderecord, parse, siteconf, slurm, steprecords
from mpi_pstate.model import summary
from mpi_pstate.site import ctld, spool

BUILD = Path(os.environ.get("MPI_PSTATE_BUILD", fx.TOP / "build"))
DBCOMMENT = BUILD / "epilog" / "mpi-pstate-dbcomment"
# What jobstats keeps in a job's AdminComment: "JS1:" + base64(gzip(JSON)).
JOBSTATS = "JS1:H4sIAAAAAAACA6tWystPSS1WslKoVsozBFPJBaUgvlFtbS0AINb4JB4AAAA="


def validated(job: int, recs: Dict[str, dict]) -> Dict[str, dict]:
    return {n: noderecord.validate(json.loads(json.dumps(r)), job, n) for n, r in recs.items()}


class Merge(unittest.TestCase):
    def test_complete_job(self) -> None:
        recs = validated(7, {
            "n1": fx.node_record(7, "n1", [fx.rank("n1", 0, mpi=1.0), fx.rank("n1", 1, mpi=6.0)],
                                 joules=100.0),
            "n2": fx.node_record(7, "n2", [fx.rank("n2", 2, mpi=2.0, down=2.0, transitions=3),
                                           fx.rank("n2", 3, mpi=5.0)], joules=50.5)})
        d = summary.merge(7, ["n1", "n2"], recs, {}, "COMPLETED", "0:0")
        s = d["summary"]
        self.assertEqual((s["state"], s["nodes"], s["ranks"], s["rank_steps"], s["job_state"]),
                         ("complete", 2, 4, 4, "COMPLETED"))
        self.assertEqual((s["v"], s["wall_s"], s["wall_src"], s["step_wall_s"]),
                         (2, 10.0, "steps", 10.0))  # no Elapsed given: the steps' sum
        self.assertEqual(s["mpi_share"], round(14.0 / 40.0, 3))
        self.assertEqual((s["down_s"], s["transitions"]), (3.5, 24))
        self.assertEqual((s["energy_j"], s["energy"]), (150.5, "ok"))
        self.assertEqual(s["top_wait"][0], ["1", "n1", 0.6])  # the rank that waits most
        self.assertEqual([w[0] for w in s["top_wait"]], ["1", "3", "2"])
        # compute times 9, 4, 8, 5: (slowest 9 - mean 6.5) / 9
        self.assertEqual(s["imbalance"], round((9 - 6.5) / 9, 3))
        self.assertEqual(s["energy_src"], "rapl")
        self.assertEqual(s["settings"]["driver"], "acpi-cpufreq")
        self.assertTrue(s["settings"]["same"])
        self.assertNotIn("missing", s)
        self.assertEqual([r["rank"] for r in d["ranks"]], [0, 1, 2, 3])

    def test_partial_names_the_missing_nodes(self) -> None:
        recs = validated(8, {"c001": fx.node_record(8, "c001", [fx.rank("c001", 0)])})
        nodes = [f"c{i:03d}" for i in range(1, 5)]
        d = summary.merge(8, nodes, recs, {"c003": "node.c003.json: is a symlink"}, "TIMEOUT",
                          "0:0")
        s = d["summary"]
        self.assertEqual((s["state"], s["missing"], s["missing_n"], s["bad_n"]),
                         ("partial", "c[002-004]", 3, 1))
        self.assertEqual(s["energy"], "partial")
        self.assertEqual(d["nodes"]["c003"], {"status": "bad",
                                              "why": "node.c003.json: is a symlink"})
        self.assertEqual(d["nodes"]["c002"]["status"], "missing")
        self.assertEqual(s["job_state"], "TIMEOUT")

    def test_without_the_tool(self) -> None:
        recs = validated(9, {"n1": fx.node_record(9, "n1", [], joules=None),
                             "n2": fx.node_record(9, "n2", [], joules=None)})
        self.assertEqual(summary.merge(9, ["n1", "n2"], recs, {})["state"], "none")
        self.assertEqual(summary.merge(9, ["n1", "n2", "n3"], recs, {})["state"], "unknown")

    def test_several_steps_label_ranks_by_step(self) -> None:
        recs = validated(10, {"n1": fx.node_record(10, "n1", [
            fx.rank("n1", 0, step="0", mpi=9.0), fx.rank("n1", 0, step="1", mpi=1.0)])})
        s = summary.merge(10, ["n1"], recs, {})["summary"]
        self.assertEqual((s["steps"], s["top_wait"][0][0]), (2, "0.0"))

    def test_eight_steps_of_four_ranks(self) -> None:
        """4 distinct ranks, 32 rank-steps; the job's wall time is sacct's
        Elapsed, not the longest step; imbalance per step, within [0, 1]."""
        def step_ranks(node: str, first: int, step: str) -> List[dict]:
            # rank 0 computes 9 s, the others 1 s, in every step
            return [fx.rank(node, r, step=step, wall=10.0 + int(step),
                            mpi=(1.0 if r == 0 else 9.0) + int(step)) for r in (first, first + 1)]
        recs = validated(12, {
            "n1": fx.node_record(12, "n1", [r for st in range(8)
                                            for r in step_ranks("n1", 0, str(st))]),
            "n2": fx.node_record(12, "n2", [r for st in range(8)
                                            for r in step_ranks("n2", 2, str(st))])})
        s = summary.merge(12, ["n1", "n2"], recs, {}, "COMPLETED", "0:0",
                          elapsed_s=parse.elapsed("00:02:03"))["summary"]
        self.assertEqual((s["ranks"], s["rank_steps"], s["steps"]), (4, 32, 8))
        self.assertEqual((s["wall_s"], s["wall_src"], s["step_wall_s"]), (123.0, "sacct", 17.0))
        # every step: rank 0 computes 9 s, ranks 1-3 1 s: (9 - 3) / 9
        self.assertEqual(s["imbalance"], round(6 / 9, 3))
        self.assertIn("rank_steps=32", summary.line(s))

    def test_job_under_a_second_is_not_shorter_than_its_step(self) -> None:
        """sacct's Elapsed is whole seconds: 0 for a job under a second."""
        recs = validated(13, {"n1": fx.node_record(13, "n1", [
            fx.rank("n1", r, step="0", wall=0.027, mpi=0.01) for r in (0, 1)])})
        s = summary.merge(13, ["n1"], recs, {}, "COMPLETED", "0:0",
                          elapsed_s=parse.elapsed("00:00:00"))["summary"]
        self.assertEqual((s["wall_s"], s["wall_src"], s["step_wall_s"]), (0.027, "sacct", 0.027))

    def test_imbalance_is_bounded(self) -> None:
        def im(pairs: List[Tuple[float, float]], steps: str = "0") -> float:
            return summary.imbalance([{"step": steps, "wall_s": w, "mpi_s": m} for w, m in pairs])
        self.assertEqual(im([(10, 2)] * 4), 0.0)  # balanced
        self.assertAlmostEqual(im([(10, 0)] + [(10, 10)] * 3), 0.75)  # one of 4 does it all
        self.assertEqual(im([(10, 0), (10, 50)]), 0.5)  # MPI beyond wall: compute 0, not < 0
        self.assertIsNone(im([(10, 2)]))  # one rank: nothing to compare
        self.assertIsNone(im([(10, 10), (10, 10)]))  # nobody computes
        for n in (2, 64, 4096):
            v = im([(1e9, 0)] + [(1e9, 1e9)] * (n - 1))
            self.assertTrue(0 <= v <= 1, v)

    def test_elapsed_seconds(self) -> None:
        for text, want in (("00:00:05", 5), ("01:02:03", 3723), ("2-00:00:01", 172801),
                           ("12:34", 754), ("Unknown", None), ("", None), ("1:2:3:4", None),
                           ("INVALID", None)):
            self.assertEqual(parse.elapsed(text), want, text)

    def test_energy_is_labelled_by_its_meter(self) -> None:
        def rec(node: str, meter: str, joules: Optional[float] = 10.0) -> dict:
            r = fx.node_record(13, node, [fx.rank(node, 0)], joules=joules)
            if joules is not None:
                r["energy"]["meter"] = meter
            return r
        for meters, want in ((("rapl", "rapl"), "rapl"), (("simulated", "simulated"), "simulated"),
                             (("rapl", "simulated"), "mixed")):
            recs = validated(13, {"n1": rec("n1", meters[0]), "n2": rec("n2", meters[1])})
            self.assertEqual(summary.merge(13, ["n1", "n2"], recs, {})["summary"]["energy_src"],
                             want)
        recs = validated(13, {"n1": rec("n1", "rapl", None)})
        self.assertEqual(summary.merge(13, ["n1"], recs, {})["summary"]["energy_src"], "none")
        old = rec("n1", "rapl")
        del old["energy"]["meter"]  # a record of an earlier mpi-pstate
        self.assertEqual(summary.merge(13, ["n1"], validated(13, {"n1": old}), {})
                         ["summary"]["energy_src"], "unknown")
        bad = rec("n1", "made-up")  # hostile label: dropped, not passed on
        self.assertNotIn("meter", validated(13, {"n1": bad})["n1"]["energy"])

    def test_meter_hwmon_on_nodes_without_rapl(self) -> None:
        """An agent that measured with hwmon (agent/energy.h) labels its
        node's joules "hwmon", never "rapl"; a simulated tree stays simulated;
        the summary and the report say so."""
        hw = steprecords.parse_agent(b'{"step": 0, "energy": {"status": "ok", "source": "hwmon", '
                                    b'"kind": "power_meter", "joules": 41.5, "channels": []}}', "n1")
        self.assertEqual(hw["energy"], {"status": "ok", "joules": 41.5, "meter": "hwmon"})
        self.assertEqual(noderecord.energy_of([hw], None, "rapl")["meter"], "hwmon")
        self.assertEqual(noderecord.energy_of([hw], None, "simulated")["meter"], "simulated")
        ra = steprecords.parse_agent(b'{"step": 1, "energy": {"status": "ok", "source": "rapl", '
                                    b'"package_j": 1.0, "dram_j": 1.0}}', "n1")
        self.assertEqual(noderecord.energy_of([ra], None, "rapl")["meter"], "rapl")
        self.assertEqual(noderecord.energy_of([hw, ra], None, "rapl")["meter"], "rapl")
        r = fx.node_record(13, "n1", [fx.rank("n1", 0)], joules=41.5)
        r["energy"]["meter"] = "hwmon"
        recs = validated(13, {"n1": r})
        self.assertEqual(summary.merge(13, ["n1"], recs, {})["summary"]["energy_src"], "hwmon")

    def test_meter_from_the_powercap_file_system(self) -> None:
        line = "{id} 1 0:{id} / {mp} rw,nosuid - {fs} {src} rw"
        sysfs = line.format(id=20, mp="/sys", fs="sysfs", src="sysfs")
        fake = line.format(id=90, mp="/sys/class/powercap", fs="fuse.fakesys", src="FakeSys")
        root = line.format(id=1, mp="/", fs="ext4", src="/dev/vda1")
        self.assertEqual(steprecords.rapl_meter("/sys", "\n".join([root, sysfs])), "rapl")
        self.assertEqual(steprecords.rapl_meter("/sys", "\n".join([root, sysfs, fake])), "simulated")
        self.assertEqual(steprecords.rapl_meter("/tmp/tree", "\n".join([root, sysfs])), "simulated")
        self.assertEqual(steprecords.rapl_meter("/sys", "garbage\n\n - \n"), "simulated")
        esc = line.format(id=91, mp="/my\\040sys", fs="sysfs", src="sysfs")  # octal escape
        self.assertEqual(steprecords.rapl_meter("/my sys", esc), "rapl")


class SummaryBound(unittest.TestCase):
    def test_size_does_not_grow_with_ranks_or_nodes(self) -> None:
        sizes = []
        for nodes, per in ((1, 1), (4, 32), (100, 128), (1000, 64)):
            names = [f"node-with-a-rather-long-name-{i:05d}" for i in range(nodes)]
            recs = {n: {"status": "ok", "energy": {"status": "ok", "joules": 1e6},
                        "ranks": [dict(fx.rank(n, i * per + k), node=n) for k in range(per)],
                        "settings": {"cpufreq": {"driver": "intel_pstate",
                                                 "governors": ["performance", "powersave"]},
                                     "warnings": ["x"]}}
                    for i, n in enumerate(names)}
            missing = names + [f"gone-{i}" for i in range(500)]
            d = summary.merge(11, missing, recs, {}, "NODE_FAIL", "0:0", "12345_678")
            text = summary.encode(d["summary"])
            sizes.append(len(text.encode()))
            self.assertLessEqual(len(text.encode()), summary.MAX_SUMMARY)
            back, _ = summary.find(text)
            self.assertEqual(back["state"], "partial")
            self.assertEqual((back["ranks"], back["rank_steps"]), (nodes * per, nodes * per))
        self.assertLess(max(sizes) - min(sizes), 200, sizes)

    def test_encode_cuts_rather_than_exceeds(self) -> None:
        s = {"v": 2, "state": "complete", "settings": {"driver": "x" * 2000}}
        text = summary.encode(s)
        self.assertLessEqual(len(text), summary.MAX_SUMMARY)
        self.assertTrue(summary.find(text)[0]["cut"])
        s = {"v": 2, "state": "complete", "junk": "y" * 5000}
        self.assertEqual(summary.find(summary.encode(s))[0], {"v": 2, "state": "complete",
                                                              "cut": True})


class CommentText(unittest.TestCase):
    def test_kept_beside_other_text_and_replaced_idempotently(self) -> None:
        ours1 = summary.encode({"v": 2, "state": "partial"})
        ours2 = summary.encode({"v": 2, "state": "complete"})
        admin = 'ticket "4711": check node n7 | JS1:H4sIAAAA'
        t1 = summary.combine(admin, ours1)
        self.assertEqual(t1, f"{admin} {ours1}")
        t2 = summary.combine(t1, ours2)
        self.assertEqual(t2, f"{admin} {ours2}")
        self.assertEqual(summary.combine(t2, ours2), t2)
        self.assertEqual(summary.find(t2)[0]["state"], "complete")
        self.assertEqual(summary.combine("", ours1), ours1)
        self.assertIsNone(summary.combine("x" * summary.ADMIN_COMMENT_MAX, ours1))
        # text that merely looks like ours is not taken for it
        self.assertEqual(summary.find("mpi-pstate/1:{broken mpi-pstate/2:{}"), (None, None))
        self.assertIn("state=complete", summary.line({"state": "complete", "mpi_share": 0.5}))
        # a version 1 summary (AdminComment of an earlier mpi-pstate) is replaced too
        v1 = 'mpi-pstate/1:{"v":1,"state":"partial"}'
        self.assertEqual(summary.combine(f"bb: stage-out done {v1}", ours2),
                         f"bb: stage-out done {ours2}")

    def test_version_1_is_read_in_version_2_terms(self) -> None:
        v1 = {"v": 1, "state": "complete", "ranks": 32, "steps": 8, "wall_s": 17.0,
              "imbalance": 1.18, "energy_j": 5.0, "energy": "ok"}
        n = summary.normalize(v1)
        self.assertEqual((n["v"], n["converted_from"], n["rank_steps"], n["step_wall_s"]),
                         (2, 1, 32, 17.0))
        self.assertNotIn("ranks", n)  # distinct ranks of 8 steps: not knowable
        self.assertNotIn("wall_s", n)  # the job's wall time: not in version 1
        self.assertEqual(n["imbalance"], round(1.18 / 2.18, 3))
        self.assertLessEqual(n["imbalance"], 1)
        self.assertEqual(n["energy_src"], "unknown")  # v1 never said what measured it
        one = summary.normalize({"v": 1, "state": "complete", "ranks": 4, "steps": 1})
        self.assertEqual((one["ranks"], one["rank_steps"]), (4, 4))
        self.assertIsNone(summary.normalize({"v": 3, "state": "complete"}))
        v2 = {"v": 2, "state": "complete", "ranks": 4}
        self.assertEqual(summary.normalize(v2), v2)

    def test_sacct_output_with_delimiters_inside_the_comments(self) -> None:
        d = slurm.SACCT_DELIM
        ours = summary.encode({"v": 2, "state": "complete"})
        line = d.join(["77", "77", "CANCELLED by 0", "0:15", "00:01:05", "n[1-2]", "1000",
                       "2026-11-27T02:45:12", "2026-11-27T02:45:15", "2026-11-27T02:45:11",
                       "cpu", "alice", "phys", f"bb | x {ours}", f"JS1:abc|def{d}tail"])
        rows = slurm.parse_sacct(line + "\nshort" + d + "line\n")
        self.assertEqual(len(rows), 1)
        r = rows[0]
        self.assertEqual((r.state, r.system_comment, r.admin_comment, r.uid, r.partition,
                          r.user, r.account, r.submit),
                         ("CANCELLED", f"bb | x {ours}", f"JS1:abc|def{d}tail", 1000, "cpu",
                          "alice", "phys", "2026-11-27T02:45:11"))
        # the wall time is End - Start, not Elapsed (Elapsed counts to now
        # while slurmdbd has no End); no End: none at all
        self.assertEqual(r.wall_s(), 3.0)
        self.assertIsNone(r._replace(end="Unknown").wall_s())
        self.assertEqual(summary.find(r.system_comment)[0]["state"], "complete")

    def test_dbcomment_tool_is_told_the_system_comment(self) -> None:
        calls = []

        def fake_run(argv, timeout=30, stdin=None):  # noqa: ANN001, ANN202
            calls.append(list(argv))
            return subprocess.CompletedProcess(argv, 0, "COMPLETED 0:0\nbb text", "")
        with mock.patch.object(slurm, "run", fake_run):
            db = slurm.DbTool("/x/dbc")
            self.assertEqual(db.show(5), ("COMPLETED", "0:0", "bb text"))
            self.assertEqual(db.set(5, "t", "lab", array="4_1"), 0)
        self.assertEqual(calls, [["/x/dbc", "--system", "--show", "5"],
                                 ["/x/dbc", "--system", "--cluster", "lab", "--set", "4_1"]])


class Fakes(unittest.TestCase):
    """A collection directory, a fake dbcomment tool and a fake sacct."""

    def setUp(self) -> None:
        self._td = tempfile.TemporaryDirectory()
        self.tmp = Path(self._td.name)
        os.chmod(self.tmp, 0o755)
        self.collect = self.tmp / "records"
        self.collect.mkdir()
        self.cfg = siteconf.Config(collect_dir=str(self.collect))
        # comment/dbcomment: the SystemComment in slurmctld / slurmdbd;
        # admin: the AdminComment, jobstats' field, which must never change
        self.db = {"state": "CANCELLED", "exit": "0:15", "comment": 'admin "note"',
                   "dbcomment": 'admin "note"', "sacct_state": "CANCELLED",
                   "admin": JOBSTATS}
        self.writes: List[str] = []
        self.err = io.StringIO()
        self.sacct_hook = self.fake_sacct_one

    def tearDown(self) -> None:
        self._td.cleanup()

    def publish(self, job: int, node: str, rec: dict) -> None:
        d = self.collect / str(job)
        d.mkdir(exist_ok=True)
        (d / f"node.{node}.json").write_bytes(noderecord.encode(rec))

    def fake_show(self, job: int, timeout: float = 30):  # noqa: ANN201
        return self.db["state"], self.db["exit"], self.db["comment"]

    def fake_set(self, job: int, text: str, cluster=None, timeout: float = 60) -> int:  # noqa
        self.writes.append(text)
        self.db["dbcomment"] = text
        return 0

    def fake_sacct_one(self, job: int, timeout: float = 30):  # noqa: ANN201
        return slurm.SacctJob(str(job), str(job), self.db["sacct_state"], "0:15", "00:00:15",
                              "n[1-2]", admin_comment=self.db["admin"],
                              system_comment=self.db["dbcomment"])

    def patches(self):  # noqa: ANN201
        return [mock.patch.object(slurm.DbTool, "show", lambda s, j, timeout=30: self.fake_show(j)),
                mock.patch.object(slurm.DbTool, "set",
                                  lambda s, j, t, c=None, timeout=60, array=None: self.fake_set(j, t)),
                mock.patch.object(slurm, "sacct_one",
                                  lambda j, timeout=30: self.sacct_hook(j, timeout)),
                mock.patch.object(log, "_stream", [self.err])]

    def run_ctld(self, job: int, nodelist: str = "n[1-2]", wait: float = 0.5,
                 flush_for: float = 5.0, extra_env: Optional[Dict[str, str]] = None) -> None:
        """The EpilogSlurmctld (queues the job), then the flusher it would
        start, here in this process."""
        a = argparse.Namespace(collect_dir=str(self.collect), runtime_dir=None, slurm_conf=None,
                               wait=wait, flush_for=flush_for, quiet=False)
        env = {"SLURM_JOB_ID": str(job), "SLURM_JOB_NODELIST": nodelist, "SLURM_JOB_UID": "1000",
               "SLURM_CONF": str(self.tmp / "none.conf"), "PATH": os.environ["PATH"],
               **(extra_env or {})}
        ps = self.patches()
        spawned: list = []
        with mock.patch.dict(os.environ, env, clear=True):
            for p in ps:
                p.start()
            try:
                self.assertEqual(spool.epilog_slurmctld(a, "/fake/dbcomment", spawn=spawned.append), 0)
                self.assertEqual(len(spawned), 1)
                self.assertIn("flush", spawned[0])
                spool.flush(self.cfg, slurm.DbTool("/fake"), {0, os.geteuid()}, flush_for,
                            wait=wait, sleep=lambda t: time.sleep(min(t, 0.05)))
            finally:
                for p in ps:
                    p.stop()


class EpilogSlurmctld(Fakes):
    def test_merges_writes_detail_and_keeps_admin_text(self) -> None:
        self.publish(21, "n1", fx.node_record(21, "n1", [fx.rank("n1", 0)]))
        self.publish(21, "n2", fx.node_record(21, "n2", [fx.rank("n2", 1)]))
        self.run_ctld(21)
        self.assertEqual(len(self.writes), 1)
        self.assertTrue(self.writes[0].startswith('admin "note" mpi-pstate/2:{'))
        s, _ = summary.find(self.writes[0])
        self.assertEqual((s["state"], s["job_state"], s["ranks"]), ("complete", "CANCELLED", 2))
        self.assertEqual((s["wall_s"], s["wall_src"]), (15.0, "sacct"))  # Elapsed 00:00:15
        self.assertEqual(self.db["admin"], JOBSTATS)
        detail = json.loads((self.collect / "21" / layout.JOB_FILE).read_text())
        self.assertEqual((detail["format"], len(detail["ranks"])), ("mpi-pstate-job", 2))
        self.assertIn("summary written", self.err.getvalue())

    def test_missing_node_waits_bounded_then_partial(self) -> None:
        self.publish(22, "n1", fx.node_record(22, "n1", [fx.rank("n1", 0)]))
        import time
        t0 = time.monotonic()
        self.run_ctld(22, wait=0.6)
        self.assertLess(time.monotonic() - t0, 6.0)
        s, _ = summary.find(self.writes[0])
        self.assertEqual((s["state"], s["missing"]), ("partial", "n2"))

    def test_job_without_tool_leaves_nothing(self) -> None:
        for n in ("n1", "n2"):
            self.publish(23, n, fx.node_record(23, n, [], joules=None))
        self.run_ctld(23)
        self.assertEqual(self.writes, [])
        self.assertFalse((self.collect / "23").exists())

    def test_a_job_whose_records_all_come_late_is_not_lost(self) -> None:
        """Submitted with mpi-pstate on (the plugin's job control variable)
        and no node's record there yet (a share down): it waits apart and
        its summary is written once the records come; without the
        variable, a job with no record is one without mpi-pstate."""
        self.run_ctld(26, nodelist="n1", wait=0.1, flush_for=0.5,
                      extra_env={"SPANK_MPI_PSTATE_MODE": "on"})
        self.assertEqual(self.writes, [])
        late = self.collect / layout.QUEUE_DIR / layout.LATE_DIR / "26.json"
        self.assertTrue(late.exists(), self.err.getvalue())
        self.publish(26, "n1", fx.node_record(26, "n1", [fx.rank("n1", 0)]))
        self.run_ctld(27, nodelist="n1", wait=0.1, flush_for=0.5)  # the next job's flusher
        s, _ = summary.find(self.writes[0])
        self.assertEqual((s["state"], s["ranks"]), ("complete", 1), s)
        self.assertFalse((self.collect / layout.QUEUE_DIR / "27.json").exists())  # dropped: no tool

    def test_hostile_records_are_refused_not_followed(self) -> None:
        self.publish(24, "n1", fx.node_record(24, "n1", [fx.rank("n1", 0)]))
        secret = self.tmp / "secret.json"
        secret.write_bytes(noderecord.encode(fx.node_record(24, "n2", [fx.rank("n2", 9)])))
        (self.collect / "24" / "node.n2.json").symlink_to(secret)
        big = self.collect / "24" / "node.n3.json"
        with open(big, "wb") as f:
            f.truncate(noderecord.MAX_BYTES + 1)
        (self.collect / "24" / "node.n4.json").write_text('{"format": "mpi-pstate-node"')
        self.run_ctld(24, nodelist="n[1-4]")
        s, _ = summary.find(self.writes[0])
        self.assertEqual((s["state"], s["ranks"], s["missing"], s["bad_n"]),
                         ("partial", 1, "n[2-4]", 3))
        log_text = self.err.getvalue()
        self.assertIn("node record of n2 refused", log_text)
        self.assertIn("symlink", log_text)
        self.assertIn("more than", log_text)

    def test_waits_for_the_database_end_record(self) -> None:
        self.publish(25, "n1", fx.node_record(25, "n1", [fx.rank("n1", 0)]))
        self.db["state"] = "COMPLETED"
        calls = []

        def late(job: int, timeout: float = 30):  # noqa: ANN202
            calls.append(job)
            self.db["sacct_state"] = "RUNNING" if len(calls) < 3 else "COMPLETED"
            return self.fake_sacct_one(job)
        self.sacct_hook = late
        self.run_ctld(25, nodelist="n1")
        self.assertGreaterEqual(len(calls), 3)
        self.assertEqual(len(self.writes), 1)

    def test_bad_environment(self) -> None:
        a = argparse.Namespace(collect_dir=str(self.collect), runtime_dir=None, slurm_conf=None,
                               wait=0.1, db_wait=0.1, quiet=False)
        with mock.patch.dict(os.environ, {"SLURM_JOB_ID": "x"}, clear=True), \
                mock.patch.object(log, "_stream", [self.err]):
            self.assertEqual(spool.epilog_slurmctld(a, "/fake", spawn=None), 0)
        self.assertIn("bad Slurm environment", self.err.getvalue())


class Backfill(Fakes):
    def test_idempotent(self) -> None:
        self.publish(31, "n1", fx.node_record(31, "n1", [fx.rank("n1", 0)]))
        self.publish(31, "n2", fx.node_record(31, "n2", [fx.rank("n2", 1)]))
        self.db["sacct_state"] = "COMPLETED"
        ps = self.patches()
        for p in ps:
            p.start()
        try:
            db = slurm.DbTool("/fake")
            args = (self.cfg, db, 31, ["n1", "n2"], {0}, ctld.Deadline(1), "COMPLETED", "0:0")
            self.assertEqual(ctld.finish(*args, self.db["dbcomment"], None, dry_run=True),
                             "would write")
            self.assertEqual(self.writes, [])
            self.assertEqual(ctld.finish(*args, self.db["dbcomment"], None), "written")
            self.assertEqual(ctld.finish(*args, self.db["dbcomment"], None), "up to date")
            self.assertEqual(len(self.writes), 1)
            self.publish(31, "n3", fx.node_record(31, "n3", [fx.rank("n3", 2)]))
            args = (self.cfg, db, 31, ["n1", "n2", "n3"], {0}, ctld.Deadline(1), "COMPLETED",
                    "0:0")
            self.assertEqual(ctld.finish(*args, self.db["dbcomment"], None), "written")
            self.assertEqual(self.db["dbcomment"].count("mpi-pstate/"), 1)  # replaced
            self.assertTrue(self.db["dbcomment"].startswith('admin "note" '))
            self.assertEqual(summary.find(self.db["dbcomment"])[0]["ranks"], 3)
            self.assertEqual(self.db["admin"], JOBSTATS)  # never read, never written
        finally:
            for p in ps:
                p.stop()


class SacctRows(unittest.TestCase):
    """Which sacct row is the job's, and what of it a node record must match."""

    @staticmethod
    def row(uid: int, submit: str, start: str = "2026-11-28T04:15:09") -> slurm.SacctJob:
        return slurm.SacctJob("547", "547", "COMPLETED", "0:0", "00:00:01", "n2", "",
                              uid=uid, start=start, submit=submit)

    def test_newest_row_by_submit_time_not_by_order(self) -> None:
        old = self.row(0, "2026-11-20T10:00:00")
        new = self.row(1001, "2026-11-28T04:15:09")
        self.assertIs(slurm.newest([new, old])["547"], new)
        self.assertIs(slurm.newest([old, new])["547"], new)
        unknown = self.row(7, "Unknown")
        self.assertIs(slurm.newest([new, unknown])["547"], new)
        twin = self.row(1002, new.submit)
        self.assertIs(slurm.newest([new, twin])["547"], twin)  # equal: the later row

    def test_uid_zero_of_a_job_just_ended_refuses_nothing(self) -> None:
        start = slurm.epoch("2026-11-28T04:15:09")
        rec = {"uid": 1001, "written": start + 1}
        self.assertIsNone(ctld.accept_row(self.row(0, "2026-11-28T04:15:08"))(rec))
        self.assertIsNone(ctld.accept_row(self.row(1001, "2026-11-28T04:15:08"))(rec))
        self.assertIn("uid 1001", ctld.accept_row(self.row(1002, "2026-11-28T04:15:08"))(rec))
        # an earlier job's record of the same id is still refused by its time
        stale = {"uid": 1001, "written": start - 86400}
        self.assertIn("before the job ran",
                      ctld.accept_row(self.row(0, "2026-11-28T04:15:08"))(stale))


@unittest.skipUnless(DBCOMMENT.exists(), f"{DBCOMMENT} not built")
class DbCommentTool(unittest.TestCase):
    def run_tool(self, *args: str, stdin: bytes = b"") -> subprocess.CompletedProcess:
        return subprocess.run([str(DBCOMMENT), *args], input=stdin,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                              timeout=30, env={"SLURM_CONF": "/nonexistent/slurm.conf"})

    def test_usage_errors(self) -> None:
        for argv in ((), ("--set",), ("--set", "abc"), ("--set", "0"), ("--show", "-1"),
                     ("--set", "1", "--show", "2"), ("--set", "4294967295"), ("--bogus",),
                     ("--cluster", "", "--set", "1"), ("--system",),
                     ("--system", "--show", "x")):
            with self.subTest(argv=argv):
                r = self.run_tool(*argv)
                self.assertEqual(r.returncode, 2, r.stderr)
                self.assertIn(b"usage", r.stderr)

    def test_text_is_bounded_and_nul_free_before_any_connection(self) -> None:
        r = self.run_tool("--cluster", "x", "--set", "5", stdin=b"a" * 65536)
        self.assertEqual(r.returncode, 1)
        self.assertIn(b"longer than 65535", r.stderr)
        r = self.run_tool("--cluster", "x", "--set", "5", stdin=b"a\0b")
        self.assertEqual(r.returncode, 1)


if __name__ == "__main__":
    unittest.main()
