# SPDX-License-Identifier: BSD-3-Clause
"""`mpi-pstate report` and the command line, without a cluster: text, JSON,
CSV and SVG of synthetic jobs (sacct mocked), array jobs, jobs without the
tool, a job whose summary the epilog missed, the summary in SystemComment
beside jobstats' AdminComment, version 1 summaries in AdminComment, energy
labelled by its meter, and the CLI's argument handling, audit and exec
delegation."""
import contextlib
import csv
import io
import json
import os
import subprocess
import tempfile
import time
import unittest
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Dict, List, Tuple
from unittest import mock

import test_epilog_fixtures as fx
from mpi_pstate.core import noderecord, slurm
from mpi_pstate.model import summary
from mpi_pstate.user import command, report, report_list

CLI = fx.TOP / "epilog" / "mpi-pstate"
JOBSTATS = "JS1:H4sIAAAAAAACA6tWystPSS1WslKoVsozBFPJBaUgvlFtbS0AINb4JB4AAAA="


class Fixture(unittest.TestCase):
    """Synthetic jobs: their node records and details in a collection
    directory, their sacct rows in self.rows; report() runs the CLI."""

    def setUp(self) -> None:
        self._td = tempfile.TemporaryDirectory()
        self.tmp = Path(self._td.name)
        os.chmod(self.tmp, 0o755)
        self.collect = self.tmp / "records"
        self.collect.mkdir()
        self.rows: List[slurm.SacctJob] = []

    def tearDown(self) -> None:
        self._td.cleanup()

    def job(self, raw: int, job_id: str, nodes: Dict[str, List[dict]], state: str = "COMPLETED",
            in_db: bool = True, detail: bool = True, meter: str = "rapl",
            admin: str = JOBSTATS) -> None:
        built = {n: fx.node_record(raw, n, r) for n, r in nodes.items()}
        for r in built.values():
            if r["energy"].get("joules") is not None:
                r["energy"]["meter"] = meter
        recs = {n: noderecord.validate(json.loads(json.dumps(r)), raw, n) for n, r in built.items()}
        d = self.collect / str(raw)
        d.mkdir()
        for n in nodes:
            (d / f"node.{n}.json").write_bytes(noderecord.encode(built[n]))
        det = summary.merge(raw, list(nodes), recs, {}, state, "0:0",
                            job_id if "_" in job_id else None, 60)
        if detail:
            (d / "job.json").write_bytes(noderecord.encode(det))
        comment = 'bb text ' + summary.encode(det["summary"]) if in_db else ""
        self.rows.append(slurm.SacctJob(str(raw), job_id, state, "0:0", "00:01:00",
                                        ",".join(nodes), admin_comment=admin,
                                        system_comment=comment))

    def report(self, *args: str) -> Tuple[int, str, str]:
        out, err = io.StringIO(), io.StringIO()
        with mock.patch.object(slurm, "sacct_jobs", lambda specs, timeout=60: self.rows), \
                contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            rc = command.main(["report", "--collect-dir", str(self.collect),
                               "--slurm-conf", str(self.tmp / "none.conf"), *args])
        return rc, out.getvalue(), err.getvalue()

    def two_node_job(self) -> None:
        self.job(501, "501", {"n1": [fx.rank("n1", 0, mpi=1.0), fx.rank("n1", 1, mpi=7.0)],
                              "n2": [fx.rank("n2", 2, mpi=3.0, down=2.5, transitions=40)]})


class Report(Fixture):

    def test_text(self) -> None:
        self.two_node_job()
        rc, out, _ = self.report("501")
        self.assertEqual(rc, 0)
        self.assertIn("job 501 (raw 501): COMPLETED", out)
        self.assertIn("mpi-pstate: complete", out)
        self.assertIn("ranks 3 on 2 nodes, steps 1 (3 rank-steps); job wall time 60.0 s, "
                      "longest step 10.000 s", out)
        self.assertIn("energy: 200.0 J (ok; measured: RAPL)", out)
        # compute 9, 3, 7: (9 - 19/3) / 9
        self.assertIn(f"imbalance {(9 - 19 / 3) / 9:.1%}", out)
        self.assertIn("ranks that wait most: 1@n1 70.0%, 2@n2 30.0%, 0@n1 10.0%", out)
        self.assertIn("driver acpi-cpufreq, governor performance", out)
        self.assertEqual(len([l for l in out.splitlines() if "finalized" in l]), 3)

    def test_text_when_no_agent_vouched_for_the_clocked_down_time(self) -> None:
        # The node Epilog leaves down_s and transitions null for a rank whose
        # agent record is missing; the text must print "-", not fail.
        self.job(502, "502", {"n1": [fx.rank("n1", 0, down=None, transitions=None),
                                     fx.rank("n1", 1)]})
        rc, out, err = self.report("502")
        self.assertEqual((rc, err), (0, ""))
        rows = [l.split() for l in out.splitlines() if "finalized" in l]
        self.assertEqual(len(rows), 2, out)
        self.assertIn("-", rows[0][8:11], out)

    def test_how_long_waits_were_found(self) -> None:
        # long_calls 3 a rank (fixture); step 1's ranks announced
        ranks = [fx.rank("n1", 0, mpi=2.0, down=1.2), fx.rank("n1", 1, mpi=4.0, down=3.0)]
        ranks[0].update(announced=3, mispredicted=1)  # 2 long announced, 1 polled
        ranks[1].update(announced=0, mispredicted=0)  # 3 polled
        later = [dict(r, step="1", announced=3, mispredicted=0) for r in ranks]
        self.job(510, "510", {"n1": ranks + later})
        rc, out, _ = self.report("510", "--json")
        rx = json.loads(out)["jobs"][0]["reaction"]
        self.assertEqual({k: rx[k] for k in ("long_waits", "announced", "mispredicted", "polled")},
                         {"long_waits": 12, "announced": 9, "mispredicted": 1, "polled": 4})
        self.assertEqual(rx["steps"]["0"]["polled"], 4)
        self.assertEqual(rx["steps"]["1"]["polled"], 0)
        # over_s is mpi * 0.8 a rank (fixture): the ideal clocked-down time
        self.assertAlmostEqual(rx["down_of_ideal"], 2 * 4.2 / (2 * 4.8), places=3)
        rc, out, _ = self.report("510")
        self.assertIn("waits: 12 long waits: 9 announced by the ranks (1 of those stayed short), "
                      "4 found by the agent's polls; clocked down 87.5% of the time past the "
                      "threshold", out)
        self.assertIn("    step 1: 6 long waits: 6 announced", out)
        # records of older releases have no counters: no line, no key
        self.two_node_job()
        rc, out, _ = self.report("501", "--json")
        self.assertNotIn("reaction", json.loads(out)["jobs"][0])

    def test_says_when_waits_sleep_and_that_yield_is_busy(self) -> None:
        ranks = [fx.rank("n1", i) for i in range(7)]
        ranks[0].update(wait_mode="poll", wait_cpu_share=0.05)  # measured asleep: the verdict
        ranks[1].update(wait_mode="sleep", wait_cpu_share=None)  # set to sleep, not measured
        ranks[2].update(wait_mode="yield", wait_cpu_share=0.98)  # yields: still busy
        ranks[3].update(wait_mode="yield", wait_cpu_share=0.1)  # yields, measured asleep
        ranks[4].update(wait_mode="sleep", wait_cpu_share=0.9)  # set to sleep, measured busy
        ranks[5].update(wait_mode="poll", wait_cpu_share=0.99)  # nothing to say
        ranks[6].update(wait_mode="unknown", wait_cpu_share=None)
        self.job(520, "520", {"n1": ranks})
        rc, out, err = self.report("520")
        self.assertEqual((rc, err), (0, ""))
        self.assertIn("waits sleep on 3 ranks (0@n1, 1@n1, 3@n1; long waits used "
                      "5.0%-10.0% of a core): their cores already idle while they wait, so "
                      "clocking them down during waits buys little", out)
        self.assertIn("the MPI library yields in its waits on 1 rank (2@n1; long waits used 98.0% of a core): "
                      "yield is not sleep, the core stays busy and clocking it down still "
                      "saves", out)
        self.assertIn("set to sleep in waits but measured busy on 1 rank (4@n1; long waits "
                      "used 90.0% of a core)", out)
        self.assertEqual([report.wait_verdict(r) for r in ranks],
                         ["sleep", "sleep", "yield", "sleep", "busy_not_sleep", "busy", None])

    def test_no_wait_line_for_busy_ranks_or_older_records(self) -> None:
        busy = [fx.rank("n1", 0), fx.rank("n1", 1)]
        busy[0].update(wait_mode="poll", wait_cpu_share=0.97)
        self.job(521, "521", {"n1": busy})  # rank 1: a record of an older release
        rc, out, _ = self.report("521")
        self.assertEqual(rc, 0)
        self.assertNotIn("sleep", out)
        self.assertNotIn("yield", out)

    def test_a_rank_cannot_forge_a_sleep_verdict_with_a_bad_share(self) -> None:
        for share in (-0.5, 1.5, "0.01", True, float("nan")):
            with self.subTest(share=share):
                self.assertEqual(report.wait_verdict({"wait_mode": "poll",
                                                      "wait_cpu_share": share}), "busy")
        self.assertIsNone(report.wait_verdict({"wait_mode": "nap", "wait_cpu_share": None}))
        # the names are bounded, the count is whole
        self.assertTrue(report.wait_text([{"wait_mode": "sleep", "step": "0", "rank": 0,
                                           "node": "n1"}] * 7, False)[0].startswith(
            "waits sleep on 7 ranks (0@n1, 0@n1, 0@n1, 0@n1, 0@n1 and 2 more; not "
            "measured)"))

    def test_svg_of_a_job_with_announced_waits(self) -> None:
        # the waits line belongs to the text; the chart of such a job draws
        ranks = [fx.rank("n1", 0), fx.rank("n1", 1)]
        for r in ranks:
            r.update(announced=3, mispredicted=0)
        self.job(511, "511", {"n1": ranks})
        rc, out, err = self.report("511", "--svg", "-")
        self.assertEqual((rc, err), (0, ""))
        ET.fromstring(out)

    def test_totals_per_user_account_and_partition(self) -> None:
        def comment(saved: List[float], energy: float, src: str = "rapl") -> str:
            return "x " + summary.encode({"v": summary.SUMMARY_VERSION, "state": "complete",
                                          "energy": "ok", "energy_j": energy, "down_s": 2.0,
                                          "wait_s": 3.0, "saved_j": saved, "saved_src": src})
        rows = [("1", "alice", "phys", "cpu", "COMPLETED", comment([10.0, 8.0, 12.0], 100.0)),
                ("2", "alice", "chem", "cpu", "FAILED", comment([5.0, 4.0, 6.0], 50.0, "simulated")),
                ("3", "bob", "phys", "gpu", "COMPLETED", ""),  # ran without the tool
                ("4", "bob", "phys", "cpu", "COMPLETED", "x mpi-pstate/2:{bad")]
        asked = {}

        def fake(**kw: str) -> list:
            asked.update(kw)
            return rows
        out, err = io.StringIO(), io.StringIO()
        with mock.patch.object(slurm, "sacct_totals", fake), contextlib.redirect_stdout(out), \
                contextlib.redirect_stderr(err):
            rc = command.main(["report", "--collect-dir", str(self.collect), "--slurm-conf",
                               str(self.tmp / "none.conf"), "--totals", "user", "--since",
                               "2026-11-01", "--json"])
        self.assertEqual((rc, err.getvalue()), (0, ""))
        self.assertEqual(asked, {"since": "2026-11-01"})
        g = {x["group"]: x for x in json.loads(out.getvalue())["groups"]}
        self.assertEqual((g["alice"]["jobs"], g["alice"]["with_tool"]), (2, 2))
        self.assertEqual(g["alice"]["saved_j"], [15.0, 12.0, 18.0])
        self.assertEqual((g["alice"]["energy_j"], g["alice"]["simulated"]), (150.0, 1))
        self.assertEqual((g["bob"]["jobs"], g["bob"]["with_tool"], g["bob"]["saved_jobs"]),
                         (2, 0, 0))
        by_part = {x["group"]: x for x in report_list.totals(rows, "partition")}
        self.assertEqual(by_part["cpu"]["saved_j"], [15.0, 12.0, 18.0])
        self.assertEqual(by_part["gpu"]["with_tool"], 0)
        self.assertEqual([x["group"] for x in report_list.totals(rows, "account")], ["phys", "chem"])
        text = report_list.totals_text(report_list.totals(rows, "user"), "user", "2026-11-01")
        self.assertIn("4 jobs, 2 with mpi-pstate", text)
        self.assertIn("15.0 (12.0 .. 18.0)*", text)
        self.assertIn("SIMULATED", text)
        self.assertEqual(report_list.totals_csv(report_list.totals(rows, "user")).splitlines()[0],
                         ",".join(report_list.TOTALS_CSV))
        # a JOBID with --totals is refused, naming the options
        rc, _, err2 = self.report("501", "--totals", "user")
        self.assertEqual(rc, 2)
        self.assertIn("--totals takes no JOBID", err2)

    def test_json_and_csv(self) -> None:
        self.two_node_job()
        rc, out, _ = self.report("501", "--json")
        doc = json.loads(out)
        j = doc["jobs"][0]
        self.assertEqual((doc["format"], j["status"], j["summary"]["ranks"]),
                         ("mpi-pstate-report", "ok", 3))
        self.assertEqual((j["summary_in"], j["summary"]["v"], j["summary"]["wall_s"]),
                         ("SystemComment", 2, 60.0))
        self.assertEqual(sorted(j["detail"]["nodes"]), ["n1", "n2"])
        rc, out, _ = self.report("501", "--csv")
        rows = list(csv.DictReader(io.StringIO(out)))
        self.assertEqual([(r["node"], r["rank"]) for r in rows], [("n1", "0"), ("n1", "1"),
                                                                  ("n2", "2")])
        self.assertEqual((rows[2]["down_s"], rows[2]["transitions"]), ("2.5", "40"))

    def test_svg_is_well_formed_with_a_bar_per_rank(self) -> None:
        self.two_node_job()
        path = self.tmp / "chart.svg"
        rc, out, _ = self.report("501", "--svg", str(path))
        self.assertEqual(rc, 0)
        root = ET.parse(path).getroot()
        ns = "{http://www.w3.org/2000/svg}"
        titles = [t.text for t in root.iter(f"{ns}title")]
        self.assertEqual(len([t for t in titles if t.startswith("compute")]), 3)
        self.assertIn("clocked down 2.500 s", titles)
        rc, out, _ = self.report("501", "--svg", "-")
        ET.fromstring(out)

    def test_array_jobs_and_jobs_without_the_tool(self) -> None:
        self.job(601, "600_1", {"n1": [fx.rank("n1", 0)]})
        self.job(602, "600_2", {"n2": [fx.rank("n2", 0)]})
        self.rows.append(slurm.SacctJob("603", "600_3", "COMPLETED", "0:0", "00:00:01", "n1",
                                        JOBSTATS))
        self.rows.append(slurm.SacctJob("604", "600_4", "RUNNING", "0:0", "00:00:01", "n1", ""))
        rc, out, _ = self.report("600", "--json")
        jobs = {j["job_id"]: j for j in json.loads(out)["jobs"]}
        self.assertEqual(sorted(jobs), ["600_1", "600_2", "600_3", "600_4"])
        self.assertEqual(jobs["600_1"]["summary"]["array"], "600_1")
        self.assertEqual(jobs["600_2"]["detail"]["ranks"][0]["node"], "n2")
        self.assertEqual(jobs["600_3"]["status"], "none")
        self.assertEqual(jobs["600_4"]["status"], "running")
        rc, out, _ = self.report("600")
        self.assertIn("job 600_3 (raw 603): COMPLETED", out)
        self.assertIn("ran without mpi-pstate", out)
        rc, out, _ = self.report("600", "--svg", str(self.tmp / "c-%j.svg"))
        self.assertTrue((self.tmp / "c-601.svg").exists())

    def test_simulated_energy_is_never_shown_as_measured(self) -> None:
        self.job(801, "801", {"n1": [fx.rank("n1", 0)]}, meter="simulated")
        rc, out, _ = self.report("801")
        self.assertIn("energy: 100.0 J (ok; SIMULATED: powercap is not the kernel's sysfs", out)
        self.assertNotIn("measured: RAPL", out)
        self.assertIn("100.0 J ok SIMULATED  ok", out)  # the node line says it too
        rc, out, _ = self.report("801", "--json")
        j = json.loads(out)["jobs"][0]
        self.assertEqual((j["summary"]["energy_src"],
                          j["detail"]["nodes"]["n1"]["energy"]["meter"]), ("simulated", "simulated"))

    def test_version_1_summary_in_the_admin_comment(self) -> None:
        """Jobs summarised by an earlier mpi-pstate: read from AdminComment,
        shown in version 2 terms, rank-steps not passed off as ranks."""
        v1 = ('mpi-pstate/1:{"v":1,"state":"complete","job_state":"COMPLETED","nodes":1,'
              '"ranks":32,"steps":8,"wall_s":17.0,"imbalance":1.18,"energy_j":5.0,'
              '"energy":"ok"}')
        self.rows.append(slurm.SacctJob("811", "811", "COMPLETED", "0:0", "00:02:03", "n1",
                                        admin_comment=f"ticket 9 {v1}", system_comment=""))
        rc, out, _ = self.report("811", "--json")
        j = json.loads(out)["jobs"][0]
        self.assertEqual((j["status"], j["summary_in"]), ("ok", "AdminComment"))
        s = j["summary"]
        self.assertEqual((s["rank_steps"], s["converted_from"], s["imbalance"]), (32, 1, 0.541))
        self.assertNotIn("ranks", s)
        rc, out, _ = self.report("811")
        self.assertIn("ranks ? on 1 nodes, steps 8 (32 rank-steps); job wall time -, longest "
                      "step 17.000 s", out)
        self.assertIn("source unknown", out)
        # the SystemComment wins when both hold one
        self.rows[0] = slurm.SacctJob("811", "811", "COMPLETED", "0:0", "00:02:03", "n1",
                                      admin_comment=v1, system_comment=summary.encode(
                                          {"v": 2, "state": "partial", "ranks": 4}))
        rc, out, _ = self.report("811", "--json")
        j = json.loads(out)["jobs"][0]
        self.assertEqual((j["summary_in"], j["summary"]["state"]), ("SystemComment", "partial"))

    def test_summary_of_a_newer_version(self) -> None:
        self.rows.append(slurm.SacctJob("821", "821", "COMPLETED", "0:0", "00:00:03", "n1",
                                        admin_comment="", system_comment=(
                                            'mpi-pstate/3:{"v":3,"state":"complete"}')))
        rc, out, _ = self.report("821", "--json")
        j = json.loads(out)["jobs"][0]
        self.assertNotEqual(j["status"], "ok")
        self.assertIn("written by a newer mpi-pstate", j["note"])

    def test_summary_missed_by_the_epilog(self) -> None:
        self.job(701, "701", {"n1": [fx.rank("n1", 0)]}, in_db=False, detail=False)
        rc, out, _ = self.report("701")
        self.assertIn("mpi-pstate backfill 701", out)
        self.assertIn("mpi-pstate: complete", out)

    def test_records_of_an_earlier_job_of_the_same_id_are_not_merged(self) -> None:
        """report applies the flusher's uid/time check: a reused job id
        never mixes two jobs' records."""
        self.job(702, "702", {"n1": [fx.rank("n1", 0)], "n2": [fx.rank("n2", 1)]},
                 in_db=False, detail=False)
        rec = json.loads((self.collect / "702" / "node.n2.json").read_text())
        rec["uid"] = 2000  # another user's job of that id
        (self.collect / "702" / "node.n2.json").write_bytes(noderecord.encode(rec))
        self.rows[-1] = self.rows[-1]._replace(uid=1000, start="2000-01-01T00:00:00",
                                               end="2000-01-01T00:01:00")
        rc, out, _ = self.report("702", "--json")
        j = json.loads(out)["jobs"][0]
        self.assertEqual((j["detail"]["state"], j["detail"]["missing"]), ("partial", ["n2"]))
        self.assertEqual(j["detail"]["elapsed_s"], 60.0)
        self.rows[-1] = self.rows[-1]._replace(start=time.strftime(
            "%Y-%m-%dT%H:%M:%S", time.localtime(time.time() + 7200)))  # a later job's
        rc, out, _ = self.report("702", "--json")
        self.assertNotIn("detail", json.loads(out)["jobs"][0])

    def test_unknown_job_and_bad_ids(self) -> None:
        rc, out, err = self.report("999")
        self.assertEqual(rc, 1)
        self.assertIn("job 999 not found", err)
        rc, out, err = self.report("12;rm")
        self.assertEqual(rc, 2)
        self.assertIn("not a job or step id", err)

    def test_summary_only_when_detail_is_unreadable(self) -> None:
        self.two_node_job()
        os.chmod(self.collect, 0o777)  # writable by anyone: not trusted, not read
        rc, out, _ = self.report("501")
        self.assertIn("mpi-pstate: complete", out)
        self.assertIn("per-rank detail not available", out)


class CommandLine(unittest.TestCase):
    def run_cli(self, *args: str) -> subprocess.CompletedProcess:
        return subprocess.run(["/usr/bin/python3", str(CLI), *args], stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, universal_newlines=True, timeout=60)

    def test_help_lists_every_subcommand(self) -> None:
        r = self.run_cli("--help")
        self.assertEqual(r.returncode, 0)
        for sub in ("report", "backfill", "audit", "epilog", "epilog-slurmctld", "exec"):
            self.assertIn(sub, r.stdout)
        self.assertNotIn("bench", r.stdout)  # a project tool: bench/eval/run.py
        self.assertEqual(self.run_cli("frobnicate").returncode, 2)
        self.assertEqual(self.run_cli("report").returncode, 2)

    def test_audit_on_a_fake_tree(self) -> None:
        with tempfile.TemporaryDirectory() as td:
            root = fx.fake_sysfs(Path(td), boost=0)
            r = self.run_cli("audit", "--sysroot", str(root), "--json")
            s = json.loads(r.stdout)
            self.assertEqual(s["cpufreq"]["driver"], "acpi-cpufreq")
            r = self.run_cli("audit", "--sysroot", str(root))
            self.assertIn("C6: exit latency 133 us", r.stdout)
            self.assertIn("WARNING: turbo/boost is off", r.stdout)

    def test_man_pages_lint(self) -> None:
        for page in ("mpi-pstate.1", "mpi-pstate-epilog.8"):
            r = subprocess.run(["groff", "-t", "-ww", "-z", "-man", str(fx.TOP / "man" / page)],
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                               universal_newlines=True)
            self.assertEqual((r.returncode, r.stderr), (0, ""), page)

    def test_install_layout_runs(self) -> None:
        """make install-epilog into a DESTDIR: the installed command finds its
        package and preload's slot reader, the entry points call it."""
        build = Path(os.environ.get("MPI_PSTATE_BUILD", fx.TOP / "build"))
        if not (build / "epilog" / "mpi-pstate-dbcomment").exists():
            self.skipTest("not built")
        with tempfile.TemporaryDirectory() as td:
            r = subprocess.run(["make", "-s", "-C", str(fx.TOP), f"B={build}", "install-epilog",
                                f"DESTDIR={td}", "prefix=/opt/mps"], stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, universal_newlines=True)
            self.assertEqual(r.returncode, 0, r.stderr)
            root = Path(td) / "opt" / "mps"
            for rel in ("bin/mpi-pstate", "sbin/mpi-pstate-epilog",
                        "sbin/mpi-pstate-epilog-slurmctld",
                        "libexec/mpi-pstate/mpi-pstate-dbcomment",
                        "share/mpi-pstate/python/mpi_pstate/user/command.py",
                        "share/mpi-pstate/python/mpi_pstate/core/segment.py",
                        "share/mpi-pstate/python/mpi_pstate/user/launcher.py",
                        "bin/mpi-pstate-exec",
                        "share/man/man1/mpi-pstate.1", "share/man/man8/mpi-pstate-epilog.8"):
                self.assertTrue((root / rel).exists(), rel)
            # the evaluation tool is the project's (bench/eval/), not the product's
            self.assertFalse((root / "libexec" / "mpi-pstate" / "mpi-pstate-bench").exists())
            self.assertEqual(list(root.rglob("*bench*")), [])
            text = (root / "bin" / "mpi-pstate").read_text()
            self.assertIn('PYDIR = "/opt/mps/share/mpi-pstate/python"', text)
            self.assertIn("exec /opt/mps/bin/mpi-pstate epilog-slurmctld",
                          (root / "sbin" / "mpi-pstate-epilog-slurmctld").read_text())
            # run it with its package dir pointed into the DESTDIR tree
            (root / "bin" / "mpi-pstate").write_text(text.replace(
                "/opt/mps/share", str(root / "share")))
            r = subprocess.run(["/usr/bin/python3", str(root / "bin" / "mpi-pstate"), "audit",
                                "--json"], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                               universal_newlines=True, cwd="/", env={"PATH": "/usr/bin:/bin"})
            self.assertEqual(r.returncode, 0, r.stderr)
            self.assertIn("cpufreq", json.loads(r.stdout))
            r = subprocess.run(["/usr/bin/python3", "-I", "-c",
                                "import sys; sys.path.insert(0, sys.argv[1]); "
                                "import mpi_pstate.site.rankfigures as s; print(s.segment.__file__)",
                                str(root / "share" / "mpi-pstate" / "python")],
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                               universal_newlines=True, cwd="/")
            self.assertEqual(r.stdout.strip(),
                             str(root / "share" / "mpi-pstate" / "python" / "mpi_pstate" / "core" /
                                 "segment.py"))
            # every module of every subpackage imports from the installed tree alone
            installed = root / "share" / "mpi-pstate" / "python"
            mods = sorted(".".join(p.relative_to(installed).with_suffix("").parts)
                          for p in (installed / "mpi_pstate").rglob("*.py"))
            self.assertEqual(mods, sorted(".".join(
                p.relative_to(fx.TOP / "epilog").with_suffix("").parts)
                for p in (fx.TOP / "epilog" / "mpi_pstate").rglob("*.py")))
            r = subprocess.run(["/usr/bin/python3", "-I", "-B", "-c",
                                "import importlib, sys; sys.path.insert(0, sys.argv[1]); "
                                "[importlib.import_module(m.replace('.__init__', '')) "
                                "for m in sys.argv[2:]]; print(sys.modules['mpi_pstate'].__file__)",
                                str(installed)] + mods, stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, universal_newlines=True, cwd="/")
            self.assertEqual(r.returncode, 0, r.stderr)
            self.assertEqual(r.stdout.strip(), str(installed / "mpi_pstate" / "__init__.py"))

    def test_exec_delegates_to_the_launcher(self) -> None:
        # a subcommand names itself as one; under its own name, by that name
        r = self.run_cli("exec", "--help")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertTrue(r.stdout.startswith("usage: mpi-pstate exec [options]"), r.stdout)
        self.assertNotIn("mpi-pstate-exec", r.stdout)
        with tempfile.TemporaryDirectory() as td:
            link = Path(td) / "mpi-pstate-exec"
            link.symlink_to(CLI)
            r = subprocess.run(["/usr/bin/python3", str(link), "--help"],
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                               universal_newlines=True, timeout=60)
            self.assertEqual(r.returncode, 0, r.stderr)
            self.assertTrue(r.stdout.startswith("usage: mpi-pstate-exec [options]"), r.stdout)

    def test_the_evaluation_tool_runs_from_the_checkout(self) -> None:
        self.assertEqual(self.run_cli("bench", "--help").returncode, 2)  # not a subcommand
        r = subprocess.run(["/usr/bin/python3", str(fx.TOP / "bench" / "eval" / "run.py"),
                            "--help"], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                           universal_newlines=True, timeout=60)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn("usage: bench/eval/run.py", r.stdout)
        self.assertIn("--thresholds", r.stdout)


if __name__ == "__main__":
    unittest.main()
