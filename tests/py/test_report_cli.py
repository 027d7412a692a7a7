# SPDX-License-Identifier: BSD-3-Clause
"""`mpi-pstate report` as sacct, seff and reportseff users expect it: step
ids (4242.0, 4242.batch) and array ids select what sacct selects; list
mode (--user, --account, --partition, --since, --until, --state) with
--format, --parsable, --parsable2, --noheader and a one-line-per-job CSV
and JSON; every error one line with one prefix and no traceback; unknown
figures empty in CSV, null in JSON, "-" in text; a what-if without a power
model refused; no Python repr (None, True, False) in any output form; and
the man page and README kept in step with the options and the summary's
size.  sacct is mocked; no cluster."""
import contextlib
import csv
import io
import json
import re
import subprocess
import sys
import unittest
from pathlib import Path
from typing import Any, Dict, List, Tuple
from unittest import mock

import test_epilog_fixtures as fx
import test_report as tr
import test_whatif as tw
from mpi_pstate.core import noderecord, slurm
from mpi_pstate.model import summary
from mpi_pstate.user import command, report, report_list

MAN = fx.TOP / "man" / "mpi-pstate.1"
README = fx.TOP / "README.md"
REPR = re.compile(r"\b(None|True|False)\b")


class Cli(tr.Fixture):
    """The Fixture's jobs, with every sacct call the report makes mocked:
    sacct_jobs (JOBIDs), sacct_list (list mode), sacct_select (what-if over
    a selection), sacct_totals; self.asked holds each selection."""

    def setUp(self) -> None:
        super().setUp()
        self.asked: List[Tuple[str, Dict[str, Any]]] = []
        self.totals_rows: List[Tuple[str, str, str, str, str, str]] = []
        self.model = self.tmp / "model.json"
        self.model.write_text(json.dumps(tw.MODEL))

    def sacct_jobs(self, specs: List[str], timeout: float = 60) -> List[slurm.SacctJob]:
        out = []
        for r in self.rows:
            j = {"job_id": r.job_id, "raw": r.raw}
            if any(report.spec_matches(s, j) for s in specs):
                out.append(r)
        return out

    def report(self, *args: str) -> Tuple[int, str, str]:
        out, err = io.StringIO(), io.StringIO()

        def listing(**kw: Any) -> List[slurm.SacctJob]:
            self.asked.append(("list", kw))
            return list(self.rows)

        def select(**kw: Any) -> List[str]:
            self.asked.append(("select", kw))
            return [r.raw for r in self.rows]

        def totals(**kw: Any) -> List[Tuple[str, str, str, str, str, str]]:
            self.asked.append(("totals", kw))
            return self.totals_rows
        with mock.patch.object(slurm, "sacct_jobs", self.sacct_jobs), \
                mock.patch.object(slurm, "sacct_list", listing), \
                mock.patch.object(slurm, "sacct_select", select), \
                mock.patch.object(slurm, "sacct_totals", totals), \
                contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            rc = command.main(["report", "--collect-dir", str(self.collect),
                               "--slurm-conf", str(self.tmp / "none.conf"), *args])
        return rc, out.getvalue(), err.getvalue()

    def steps_job(self) -> None:
        """Job 510: steps 0 and 1 on n1, each with its agent's energy."""
        ranks = [fx.rank("n1", 0, mpi=2.0, down=1.0), fx.rank("n1", 1, mpi=4.0, down=3.0)]
        later = [dict(fx.rank("n1", 0, step="1", mpi=6.0, down=5.0, transitions=11)),
                 dict(fx.rank("n1", 1, step="1", mpi=8.0, down=7.0, transitions=13))]
        self.job(510, "510", {"n1": ranks + later})
        det = json.loads((self.collect / "510" / "job.json").read_text())
        steps = det["nodes"]["n1"]["steps"]
        for st in steps:
            st["agent"] = {"step": int(st["step"]), "energy": {
                "status": "ok", "package_j": 30.0 if st["step"] == "0" else 60.0,
                "dram_j": 10.0}}
        if not any(st["step"] == "1" for st in steps):
            steps.append({"step": "1", "agent": {"step": 1, "energy": {
                "status": "ok", "package_j": 60.0, "dram_j": 10.0}}})
        (self.collect / "510" / "job.json").write_bytes(noderecord.encode(det))

    def attributed(self) -> None:
        """Every row with a user, account, partition and times."""
        self.rows = [r._replace(user="alice", account="phys", partition="cpu",
                                start="2026-11-27T02:45:12", end="2026-11-27T02:46:12")
                     for r in self.rows]

    def one_line_error(self, rc: int, out: str, err: str, status: int) -> None:
        self.assertEqual(rc, status, err)
        self.assertEqual(len(err.splitlines()), 1, err)
        self.assertTrue(err.startswith("mpi-pstate report: "), err)
        self.assertEqual(err.count("mpi-pstate report:"), 1, err)
        self.assertNotIn("Traceback", err + out)


class StepsAndArrays(Cli):
    def test_step_id_shows_that_steps_figures(self) -> None:
        self.steps_job()
        rc, out, err = self.report("510.1")
        self.assertEqual((rc, err), (0, ""))
        self.assertIn("job 510.1 (raw 510): COMPLETED", out)
        self.assertIn("step 1: the figures below are this step's", out)
        self.assertIn("ranks 2 on 1 nodes, steps 1 (2 rank-steps); step wall time 10.0 s "
                      "(the step's longest rank)", out)
        self.assertIn("clocked down 12.000 s", out)
        self.assertIn("energy: 70.0 J (ok; measured: RAPL)", out)  # step 1's agent
        rows = [line.split() for line in out.splitlines() if "finalized" in line]
        self.assertEqual([r[0] for r in rows], ["1", "1"])
        rc, out, _ = self.report("510.0", "--json")
        j = json.loads(out)["jobs"][0]
        self.assertEqual((j["step"], j["job_id"], j["summary"]["down_s"],
                          j["summary"]["energy_j"], j["summary"]["transitions"]),
                         ("0", "510.0", 4.0, 40.0, 14))
        self.assertEqual(j["job_summary"]["down_s"], 16.0)  # the whole job beside it
        self.assertEqual({r["step"] for r in j["detail"]["ranks"]}, {"0"})
        rc, out, _ = self.report("510.1", "--csv")
        self.assertEqual({r["step"] for r in csv.DictReader(io.StringIO(out))}, {"1"})
        # both, and the job whole, once each
        rc, out, _ = self.report("510", "510.0", "510.1", "510.0", "--json")
        self.assertEqual([j["job_id"] for j in json.loads(out)["jobs"]],
                         ["510", "510.0", "510.1"])

    def test_step_without_records_says_only_job_figures_exist(self) -> None:
        self.steps_job()
        rc, out, _ = self.report("510.batch")
        self.assertEqual(rc, 0)
        self.assertIn("step batch: only job-level figures exist: no rank of step batch is in "
                      "the records (steps with records: 0, 1)", out)
        self.two_node_job()
        import os
        os.chmod(self.collect, 0o777)  # not trusted: no detail at all
        rc, out, _ = self.report("501.extern")
        self.assertIn("step extern: only job-level figures exist: per-step figures come from "
                      "the per-rank detail, which is not available", out)
        rc, out, _ = self.report("501.0", "--json")
        self.assertIn("only job-level figures", json.loads(out)["jobs"][0]["step_note"])

    def test_array_ids_select_what_sacct_selects(self) -> None:
        self.job(601, "600_1", {"n1": [fx.rank("n1", 0)]})
        self.job(602, "600_2", {"n2": [fx.rank("n2", 0)]})
        self.job(603, "600_3", {"n1": [fx.rank("n1", 0)]})

        def ids(*args: str) -> List[str]:
            rc, out, err = self.report(*args, "--json")
            self.assertEqual(rc, 0, err)
            return [j["job_id"] for j in json.loads(out)["jobs"]]
        self.assertEqual(ids("600"), ["600_1", "600_2", "600_3"])
        self.assertEqual(ids("600_2"), ["600_2"])
        self.assertEqual(ids("600_[1-2]"), ["600_1", "600_2"])
        self.assertEqual(ids("602"), ["600_2"])  # a task by its raw id
        self.assertEqual(ids("600_3.0"), ["600_3.0"])
        self.assertEqual(ids("-j", "600_1,600_3"), ["600_1", "600_3"])

    def test_bad_ids_are_one_line(self) -> None:
        for bad in ("12;rm", "4242.", "4242.x", "0", "4242_[3-1]", "4242.0.1"):
            with self.subTest(bad=bad):
                self.one_line_error(*self.report(bad), status=2)


class ListMode(Cli):
    def jobs3(self) -> None:
        self.two_node_job()
        self.job(502, "502", {"n1": [fx.rank("n1", 0, down=None, transitions=None)]})
        self.rows.append(slurm.SacctJob("503", "503", "COMPLETED", "0:0", "00:00:01", "n1",
                                        tr.JOBSTATS))  # ran without the tool
        self.attributed()

    def test_a_selection_lists_one_line_per_job(self) -> None:
        self.jobs3()
        rc, out, err = self.report("--user", "alice", "--since", "now-7days")
        self.assertEqual((rc, err), (0, ""))
        lines = out.splitlines()
        self.assertEqual(lines[0].split(), list(report_list.DEFAULT_LIST))
        self.assertTrue(set(lines[1]) <= {"-", " "})
        self.assertEqual(len(lines), 5, out)
        self.assertEqual(lines[2].split()[:6], ["501", "alice", "cpu", "COMPLETED", "00:01:00",
                                                "complete"])
        self.assertIn("200.0", lines[2])
        self.assertEqual(lines[4].split()[5:], ["none"] + ["-"] * 5)
        self.assertEqual(self.asked, [("list", {"user": "alice", "since": "now-7days"})])

    def test_until_state_account_partition_reach_sacct(self) -> None:
        self.jobs3()
        rc, _, err = self.report("-A", "phys", "-r", "cpu", "-S", "2026-11-01", "-E",
                                 "2026-11-30T23:59", "-s", "cd,failed,TO")
        self.assertEqual((rc, err), (0, ""))
        self.assertEqual(self.asked, [("list", {
            "account": "phys", "partition": "cpu", "since": "2026-11-01",
            "until": "2026-11-30T23:59", "state": ["COMPLETED", "FAILED", "TIMEOUT"]})])

    def test_format_width_parsable_noheader(self) -> None:
        self.jobs3()
        rc, out, _ = self.report("-u", "alice", "-o", "jobid%4,EnergyJ,downs,MPIShare%6,Mode")
        lines = out.splitlines()
        self.assertEqual(lines[0].split(), ["Job+", "EnergyJ", "DownS", "MPISh+", "Mode"])
        self.assertEqual(lines[1], "---- ---------- --------- ------ -------")
        self.assertEqual(lines[2].split(), ["501", "200.0", "3.500", "36.7%", "on"])
        self.assertEqual(lines[3].split(), ["502", "100.0", "-", "20.0%", "on"])
        rc, out, _ = self.report("-u", "alice", "-o", "JobID,EnergyJ,DownS,Ranks", "-p")
        self.assertEqual(out.splitlines(), ["JobID|EnergyJ|DownS|Ranks|", "501|200.0|3.5|3|",
                                            "502|100.0||1|", "503||||"])
        rc, out, _ = self.report("-u", "alice", "-o", "JobID,DownS", "-P", "-n")
        self.assertEqual(out.splitlines(), ["501|3.5", "502|", "503|"])
        # named jobs in list mode too
        rc, out, _ = self.report("502", "-o", "JobID,DownS", "-P")
        self.assertEqual(out.splitlines(), ["JobID|DownS", "502|"])

    def test_one_line_per_job_csv_and_json(self) -> None:
        self.jobs3()
        rc, out, _ = self.report("-u", "alice", "--csv")
        rows = list(csv.DictReader(io.StringIO(out)))
        self.assertEqual([r["JobID"] for r in rows], ["501", "502", "503"])
        self.assertEqual((rows[0]["EnergyJ"], rows[2]["EnergyJ"], rows[2]["Record"]),
                         ("200.0", "", "none"))
        rc, out, _ = self.report("501", "--list", "--csv", "-o", "JobID,MPIShare")
        self.assertEqual(out.splitlines()[1:], ["501,0.367"])
        rc, out, _ = self.report("-u", "alice", "--json", "-o", "JobID,DownS,SavedJ")
        doc = json.loads(out)
        self.assertEqual((doc["format"], doc["fields"]), ("mpi-pstate-list",
                                                           ["JobID", "DownS", "SavedJ"]))
        self.assertEqual(doc["jobs"][1], {"JobID": "502", "DownS": None, "SavedJ": None})

    def test_helpformat_names_every_field(self) -> None:
        rc, out, _ = self.report("--helpformat")
        self.assertEqual(rc, 0)
        self.assertEqual([line.split()[0] for line in out.splitlines()],
                         [f[0] for f in report_list.LIST_FIELDS.values()])


class Errors(Cli):
    def test_bad_dates_states_formats(self) -> None:
        for args in (["--since", "yesterday"], ["--since", "2026-13-01"], ["--until", "25:00"],
                     ["-u", "alice", "--state", "done"], ["-u", "alice", "-o", "JobID,Joules"],
                     ["-u", "alice", "-o", "JobID%x"], ["-u", "alice", "-p", "--csv"],
                     ["-u", "alice", "--html", "x.html"], ["501", "--threshold", "2ms"]):
            with self.subTest(args=args):
                self.one_line_error(*self.report(*args), status=2)
        for ok in ("now-7days", "now", "2026-11-01T08:00:00", "midnight", "11/01", "1101",
                   "08:00", "today", "NOW-2hours"):
            self.assertEqual(report.parse.sacct_time(ok), ok)

    def test_unwritable_pages_and_unreadable_files(self) -> None:
        self.two_node_job()
        for form in ("--html", "--svg"):
            with self.subTest(form=form):
                rc, out, err = self.report("501", form, str(self.tmp / "no" / "such" / "p"))
                self.one_line_error(rc, out, err, 1)
                self.assertIn("cannot write", err)
                self.assertIn("No such file or directory", err)

    def test_a_planted_symlink_is_replaced_not_followed(self) -> None:
        """--html/--svg into a shared directory: a symlink planted under the
        page's name (to a file root owns, when root runs the report) is
        replaced by the page; its target is untouched."""
        self.two_node_job()
        victim = self.tmp / "victim"
        victim.write_text("keep me")
        for form, name in (("--html", "p.html"), ("--svg", "p.svg")):
            with self.subTest(form=form):
                page = self.tmp / name
                page.symlink_to(victim)
                rc, out, err = self.report("501", form, str(page))
                self.assertEqual(rc, 0, err)
                self.assertEqual(victim.read_text(), "keep me")
                self.assertFalse(page.is_symlink())
                self.assertGreater(page.stat().st_size, 100)
                self.assertEqual([p.name for p in self.tmp.iterdir() if ".tmp." in p.name], [])

    def test_sacct_failing_is_said_once(self) -> None:
        done = subprocess.CompletedProcess(["sacct"], 1, "", "sacct: error: Invalid user: "
                                           "bob\nsacct: fatal: giving up\n")
        out, err = io.StringIO(), io.StringIO()
        with mock.patch.object(slurm, "run", lambda *a, **k: done), \
                mock.patch.object(slurm, "which", lambda c: "/usr/bin/" + c), \
                contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            for args in (["--user", "bob"], ["501"], ["--totals", "user"],
                         ["--what-if", "--user", "bob"]):
                err.seek(0)
                err.truncate()
                rc = command.main(["report", "--slurm-conf", str(self.tmp / "none.conf"), *args])
                self.one_line_error(rc, "", err.getvalue(), 1)
                self.assertEqual(err.getvalue(), "mpi-pstate report: sacct: Invalid user: bob; "
                                 "giving up\n")
        with mock.patch.object(slurm, "which", lambda c: "/nonexistent/" + c):
            e = io.StringIO()
            with contextlib.redirect_stderr(e):
                rc = command.main(["report", "--slurm-conf", str(self.tmp / "none.conf"), "501"])
            self.one_line_error(rc, "", e.getvalue(), 1)
            self.assertNotIn("[", e.getvalue())  # no argument list quoted as a Python list

    def test_what_if_without_a_model_cannot_predict(self) -> None:
        self.two_node_job()
        for form in ([], ["--csv"], ["--html", str(self.tmp / "p.html")]):
            with self.subTest(form=form):
                rc, out, err = self.report("501", "--what-if", "--model",
                                           str(self.tmp / "absent.json"), *form)
                self.one_line_error(rc, out, err, 1)
                self.assertIn("cannot predict the what-if: no power model for n1,n2", err)
                self.assertNotIn("0.0 J", out + err)
        rc, out, err = self.report("501", "--what-if", "--model", str(self.tmp / "absent.json"),
                                   "--json")
        j = json.loads(out)["jobs"][0]
        self.assertEqual((rc, j["what_if"]), (1, None))
        self.assertIn("no power model", j["what_if_why"])


class Unknowns(Cli):
    def test_totals_unknown_is_empty_null_and_dash(self) -> None:
        self.totals_rows = [("1", "bob", "phys", "gpu", "COMPLETED", ""),
                            ("2", "bob", "phys", "gpu", "COMPLETED",
                             summary.encode({"v": 2, "state": "complete", "energy": "absent"}))]
        rc, out, _ = self.report("--totals", "user", "--csv")
        row = list(csv.DictReader(io.StringIO(out)))[0]
        self.assertEqual((row["jobs"], row["with_tool"]), ("2", "1"))
        for k in ("energy_j", "saved_j", "saved_j_lo", "saved_j_hi", "down_s", "wait_s"):
            self.assertEqual(row[k], "", k)
        rc, out, _ = self.report("--totals", "user", "--json")
        g = json.loads(out)["groups"][0]
        self.assertEqual((g["energy_j"], g["saved_j"], g["down_s"]), (None, None, None))
        rc, out, _ = self.report("--totals", "user")
        line = [ln for ln in out.splitlines() if ln.strip().startswith("bob")][0]
        self.assertEqual(line.split()[1:], ["2", "1", "-", "-", "-"])
        self.assertNotIn("0.0", line)


def _audit_text_with_unknowns() -> str:
    return command.audit_text({"cpufreq": {"driver": None, "boost": None}})


class NoRepr(Cli):
    """Every output form, on jobs with and without figures, summaries with
    keys missing or null, settings unknown: no None, True or False."""

    def fixtures(self) -> None:
        self.two_node_job()
        self.steps_job()
        # a rank without the agent's figures, a node whose boost is unknown
        st = {"cpufreq": {"driver": None, "governors": None, "boost": None},
              "cstates": {}, "warnings": []}
        self.job(502, "502", {"n1": [fx.rank("n1", 0, down=None, transitions=None)]},
                 meter="simulated")
        det = json.loads((self.collect / "502" / "job.json").read_text())
        det["nodes"]["n1"]["settings"] = st
        for r in det["ranks"]:
            r.update(mpi_share=None, wall_s=None, cpu=None, mode=None)
        (self.collect / "502" / "job.json").write_bytes(noderecord.encode(det))
        # summaries alone: nulls and missing keys, a version 1, a newer one
        bare = summary.encode({"v": 2, "state": "partial", "ranks": None, "nodes": None,
                               "energy": None, "energy_j": None, "settings": {"boost": None,
                                                                             "same": False}})
        self.rows.append(slurm.SacctJob("520", "520", "COMPLETED", "0:0", "", "", "",
                                        system_comment=bare))
        self.rows.append(slurm.SacctJob("521", "521", "FAILED", "1:0", "00:00:01", "n1",
                                        'mpi-pstate/1:{"v":1,"state":"complete","ranks":4}'))
        self.rows.append(slurm.SacctJob("522", "522", "COMPLETED", "0:0", "00:00:01", "n1",
                                        "", system_comment='mpi-pstate/3:{"v":3}'))
        self.rows.append(slurm.SacctJob("523", "523", "RUNNING", "0:0", "00:00:01", "n1", ""))
        self.rows.append(slurm.SacctJob("524", "524", "COMPLETED", "0:0", "00:00:01", "n1", ""))
        self.attributed()
        self.totals_rows = [(r.raw, "alice", "phys", "cpu", r.state, r.system_comment)
                            for r in self.rows]

    def outputs(self) -> List[Tuple[str, str]]:
        ids = ["501", "502", "510", "510.0", "510.batch", "520", "521", "522", "523", "524"]
        pages = self.tmp / "pages"
        pages.mkdir()
        forms: List[Tuple[str, List[str]]] = [
            ("text", ids), ("json", ids + ["--json"]), ("csv", ids + ["--csv"]),
            ("list", ["-u", "alice", "-o", ",".join(f[0] for f in report_list.LIST_FIELDS.values())]),
            ("list -p", ["-u", "alice", "-p", "-o",
                         ",".join(f[0] for f in report_list.LIST_FIELDS.values())]),
            ("list csv", ["-u", "alice", "--csv"]), ("list json", ["-u", "alice", "--json"]),
            ("html", ids + ["--html", str(pages / "%j.html")]),
            ("svg", ids + ["--svg", str(pages / "%j.svg")]),
            ("totals", ["--totals", "user"]), ("totals csv", ["--totals", "partition", "--csv"]),
            ("totals json", ["--totals", "account", "--json"]),
            ("what-if", ["501", "502", "510", "--what-if", "--model", str(self.model)]),
            ("what-if one", ["510.1", "--what-if", "--model", str(self.model)]),
            ("what-if csv", ["501", "510", "--what-if", "--csv", "--model", str(self.model)]),
            ("what-if json", ["501", "--what-if", "--json", "--model", str(self.model)]),
            ("what-if html", ["501", "502", "--what-if", "--model", str(self.model), "--html",
                              str(pages / "w%j.html")]),
            ("what-if svg", ["501", "--what-if", "--model", str(self.model), "--svg", "-"]),
            ("what-if no model", ["501", "--what-if", "--model", str(self.tmp / "x.json")]),
            ("helpformat", ["--helpformat"])]
        got = []
        for name, args in forms:
            rc, out, err = self.report(*args)
            self.assertNotIn("Traceback", err, name)
            got.append((name, out + err))
        for p in sorted(pages.iterdir()):
            got.append((p.name, p.read_text()))
        got.append(("audit", _audit_text_with_unknowns()))
        return got

    def test_no_python_repr_in_any_output(self) -> None:
        self.fixtures()
        outs = self.outputs()
        self.assertGreaterEqual(len(outs), 30)
        for name, text in outs:
            with self.subTest(form=name):
                self.assertTrue(text.strip(), name)
                # JSON's own words are true, false and null: lower case
                self.assertIsNone(REPR.search(text), f"{name}: {REPR.findall(text)[:5]}\n"
                                  f"{text[:3000]}")
        text = dict(outs)["text"]
        self.assertIn("turbo/boost unknown", text)
        self.assertIn("turbo/boost on", text)
        self.assertIn("SIMULATED", text)
        self.assertNotIn(" * ", text)


class Documents(unittest.TestCase):
    def report_parser(self) -> Any:
        sub = [a for a in command.build_parser()._actions if a.dest == "cmd"][0]
        return sub.choices["report"]

    def man_report_section(self) -> str:
        text = MAN.read_text()
        a = text.index(".BI report")
        return text[a:text.index("\n.B calibrate", a)]

    def test_man_page_names_every_report_option_and_field(self) -> None:
        man = self.man_report_section().replace("\\-", "-")
        whole = MAN.read_text().replace("\\-", "-")
        common = ("--collect-dir", "--runtime-dir", "--slurm-conf")  # OPTIONS, for every command
        for o in common:
            self.assertIn(o, whole)
        opts = [o for a in self.report_parser()._actions for o in a.option_strings
                if a.help != "==SUPPRESS==" and o not in ("-h", "--help") + common]
        self.assertIn("--parsable2", opts)
        self.assertIn("--until", opts)
        for o in opts:
            self.assertTrue(re.search(r"(?<![\w-])" + re.escape(o) + r"(?![\w-])", man),
                            f"{o} is not in the report section of {MAN.name}")
        for f in report_list.LIST_FIELDS.values():
            self.assertTrue(re.search(r"\b" + f[0] + r"\b", man),
                            f"field {f[0]} is not in the report section of {MAN.name}")

    def test_sacct_examples_are_wide_enough_for_a_summary(self) -> None:
        """sacct cuts a field at its %WIDTH: the examples' width must hold
        a summary of ours whole (at most summary.MAX_SUMMARY bytes; the
        fixture's two-node job measures what a real one takes)."""
        t = tr.Fixture("run")
        t.setUp()
        try:
            t.two_node_job()
            real = summary.find(t.rows[0].system_comment)[1]
            length = real[1] - real[0]
        finally:
            t.tearDown()
        self.assertGreater(length, 300)
        widths = []
        for doc in (README, MAN):
            text = doc.read_text().replace("\\-", "-")
            for m in re.finditer(r"sacct [^\n`]*SystemComment%([0-9]+)", text):
                widths.append((doc.name, int(m.group(1))))
        self.assertGreaterEqual(len(widths), 2, widths)
        for doc, w in widths:
            self.assertGreaterEqual(w, summary.MAX_SUMMARY, (doc, w, length))

    def test_help_runs_on_this_python(self) -> None:
        r = subprocess.run([sys.executable, str(tr.CLI), "report", "--help"],
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                           universal_newlines=True, timeout=60)
        self.assertEqual(r.returncode, 0, r.stderr)
        for o in ("--format", "--parsable", "--until", "--state", "--list"):
            self.assertIn(o, r.stdout)


if __name__ == "__main__":
    unittest.main()
