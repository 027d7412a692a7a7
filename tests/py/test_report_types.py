# SPDX-License-Identifier: BSD-3-Clause
"""`mpi-pstate report` on accounting summaries whose keys have the wrong
type: real summaries (summary.summarize of the fixtures' jobs) mutated key
by key (a string for a number, a list for an object, an object for a list,
a boolean for an integer, a negative or non-finite number, a triple of
two, a nested key of the wrong type, the state missing) and read through
every output form: text, JSON, CSV, SVG, HTML, list mode, the totals and
the what-if.  No traceback escapes, the job is shown as having an
unreadable summary, the problem is one line naming the key, and the
other jobs of the same report are shown as before.  A key null is
unknown, as one absent: shown as "-", no problem.  sacct is mocked; no
cluster."""
import csv
import io
import json
import math
import unittest
from typing import Any, Dict, List, Tuple

import test_epilog_fixtures as fx
import test_report as tr
import test_report_cli as trc
import test_whatif as tw
from mpi_pstate.core import noderecord, slurm
from mpi_pstate.model import summary
from mpi_pstate.user import report_list

SETTINGS = {"cpufreq": {"driver": "acpi-cpufreq", "governors": ["performance"], "boost": True},
            "cstates": {"states": [{"name": "C6", "exit_latency_us": 133,
                                    "enabled_cpus": "0-1"}]},
            "smt": {"threads_per_core": 1}, "numa": {"nodes": 1}, "warnings": ["slow"],
            "power_model": tw.MODEL}
BAD = 901  # the job whose summary is mutated
GOOD = 902  # a job shown beside it, as before


def wrong_values(v: Any) -> List[Any]:
    """Values of other types than v (what summarize wrote there), and the
    numbers a figure of its kind never is."""
    if isinstance(v, bool):
        return ["true", 1, [v]]
    if isinstance(v, int):
        return [str(v), True, 1.5, -1, [v], {"v": v}]
    if isinstance(v, float):
        return [str(v), False, -1.0, math.inf, math.nan, [v]] + ([1.5] if v <= 1 else [])
    if isinstance(v, str):
        return [7, True, [v], {"text": v}]
    if isinstance(v, list):  # a triple of two items; a list of triples: mutations()
        return ["x", {"0": v}, 3] + ([v[:-1]] if all(isinstance(x, (int, float)) for x in v)
                                     else [])
    if isinstance(v, dict):
        return [[v], "x", 1]
    raise AssertionError(f"a summary value of type {type(v).__name__}")


class Types(trc.Cli):
    """Job 901 (partial: a node missing, an array task) and 902 (complete,
    with a power model: what it saved), made as the Epilog and the
    flusher make them; 901's SystemComment is then mutated."""

    def setUp(self) -> None:
        super().setUp()
        self.real: Dict[int, Dict[str, Any]] = {}
        nodes = {"n1": [fx.rank("n1", 0, mpi=1.0, down=2.0, transitions=30),
                        fx.rank("n1", 1, mpi=7.0, down=3.0)],
                 "n2": [fx.rank("n2", 2, mpi=3.0, down=2.5, transitions=40)]}
        self.make(BAD, "900_1", nodes, ["n1", "n2", "n3"])
        self.make(GOOD, "902", nodes, ["n1", "n2"])
        self.attributed()
        self.pages = self.tmp / "pages"
        self.pages.mkdir()

    def make(self, raw: int, job_id: str, nodes: Dict[str, List[Dict[str, Any]]],
             expected: List[str]) -> None:
        built = {n: fx.node_record(raw, n, r, settings=json.loads(json.dumps(SETTINGS)))
                 for n, r in nodes.items()}
        recs = {n: noderecord.validate(json.loads(json.dumps(r)), raw, n) for n, r in built.items()}
        d = self.collect / str(raw)
        d.mkdir()
        for n in nodes:
            (d / f"node.{n}.json").write_bytes(noderecord.encode(built[n]))
        det = summary.merge(raw, expected, recs, {}, "COMPLETED", "0:0",
                            job_id if "_" in job_id else None, 60)
        (d / "job.json").write_bytes(noderecord.encode(det))
        self.real[raw] = det["summary"]
        self.rows.append(slurm.SacctJob(str(raw), job_id, "COMPLETED", "0:0", "00:01:00",
                                        ",".join(nodes), admin_comment=tr.JOBSTATS,
                                        system_comment="bb " + summary.encode(det["summary"])))

    def comment(self, s: Dict[str, Any]) -> None:
        """Job 901's SystemComment := s, as written (not through encode(),
        which would cut it)."""
        text = "bb " + summary.PREFIX + json.dumps(s, separators=(",", ":"))
        self.rows = [r._replace(system_comment=text) if r.raw == str(BAD) else r
                     for r in self.rows]
        self.totals_rows = [(r.raw, r.user, r.account, r.partition, r.state, r.system_comment)
                            for r in self.rows]

    def mutations(self) -> List[Tuple[str, Dict[str, Any]]]:
        """(the key the problem must name, the mutated summary): every key
        of the two real summaries with each wrong value, nested keys, the
        keys neither summary has (written by summarize for refused nodes,
        by encode() when it cut, by normalize()), and the state missing."""
        out: List[Tuple[str, Dict[str, Any]]] = []
        base = dict(self.real[GOOD], **self.real[BAD])  # full_j is the complete job's
        self.assertLessEqual({"saved_j", "full_j", "time_added_s", "settings", "top_wait",
                              "missing", "array", "why"}, set(base))
        for k, v in base.items():
            if k == "v":
                continue  # another v is another version (test_report: a newer one)
            for bad in wrong_values(v):
                out.append((k, dict(base, **{k: bad})))
        for k, sub in base["settings"].items():
            for bad in wrong_values(sub):
                out.append((f"settings.{k}", dict(base, settings=dict(base["settings"],
                                                                      **{k: bad}))))
        tw0 = base["top_wait"]
        out += [("top_wait[0]", dict(base, top_wait=[tw0[0][:2]] + tw0[1:])),
                ("top_wait[1][2]", dict(base, top_wait=[tw0[0], [tw0[1][0], tw0[1][1], "0.3"]])),
                ("top_wait[0][0]", dict(base, top_wait=[[{"rank": 1}, "n1", 0.5]])),
                ("top_wait[2]", dict(base, top_wait=tw0[:2] + ["1 n1 0.5"])),
                ("saved_j[1]", dict(base, saved_j=[1.0, "2", 3.0])),
                ("saved_j[2]", dict(base, saved_j=[1.0, 2.0, None])),
                ("time_added_s[0]", dict(base, time_added_s=[-0.5, 0.0, 1.0])),
                ("full_j[0]", dict(base, full_j=[[240.0], 230.0, 250.0])),
                ("bad_n", dict(base, bad_n="1")), ("bad_n", dict(base, bad_n=-2)),
                ("cut", dict(base, cut="yes")), ("converted_from", dict(base, converted_from=[1])),
                ("state", {k: v for k, v in base.items() if k != "state"})]
        return out

    def forms(self) -> List[Tuple[str, List[str]]]:
        ids = [str(BAD), str(GOOD)]
        model = ["--model", str(self.model)]
        return [
            ("text", ids), ("json", ids + ["--json"]), ("csv", ids + ["--csv"]),
            ("step", [f"{BAD}.0", f"{GOOD}.0"]),
            ("svg", ids + ["--svg", str(self.pages / "%j.svg")]),
            ("html", ids + ["--html", str(self.pages / "%j.html")]),
            ("list", ["-u", "alice", "-o", ",".join(f[0] for f in report_list.LIST_FIELDS.values())]),
            ("list -p", ["-u", "alice", "-p"]), ("list csv", ["-u", "alice", "--csv"]),
            ("list json", ["-u", "alice", "--json"]), ("list ids", ids + ["--list"]),
            ("totals", ["--totals", "user"]), ("totals csv", ["--totals", "partition", "--csv"]),
            ("totals json", ["--totals", "account", "--json"]),
            ("what-if", ids + ["--what-if"] + model),
            ("what-if json", ids + ["--what-if", "--json"] + model),
            ("what-if csv", ids + ["--what-if", "--csv"] + model),
            ("what-if html", ids + ["--what-if", "--html", str(self.pages / "w%j.html")] + model)]

    def check_form(self, name: str, key: str, rc: int, out: str, err: str) -> None:
        """One output form of a report of job 901 (mutated at key) and 902."""
        self.assertNotIn("Traceback", out + err)
        self.assertEqual(rc, 0, err)
        named = f"summary: {key} "
        line = [ln for ln in err.splitlines() if named in ln]
        self.assertEqual(len(line), 1, f"the problem named once on stderr:\n{err}")
        job = BAD if "totals" in name else "900_1"  # the totals know raw ids only
        self.assertTrue(line[0].startswith(f"mpi-pstate report: job {job}: the summary in the "
                                           "SystemComment is unreadable: "), line[0])
        if name == "text":
            self.assertIn(f"job 900_1 (raw {BAD}): COMPLETED", out)
            self.assertIn(named, out)  # in the job's own lines too
            self.assertIn(f"job 902 (raw {GOOD}): COMPLETED", out)
            self.assertIn("mpi-pstate: complete", out)  # the other job as before
        elif name == "json":
            jobs = {j["raw"]: j for j in json.loads(out)["jobs"]}
            self.assertEqual(jobs[str(BAD)]["status"], "unreadable")
            self.assertIn(named, jobs[str(BAD)]["problem"])
            self.assertNotIn("summary", jobs[str(BAD)])
            self.assertEqual((jobs[str(GOOD)]["status"], jobs[str(GOOD)]["summary"]),
                             ("ok", self.real[GOOD]))
        elif name == "list csv":
            rows = {r["JobID"]: r for r in csv.DictReader(io.StringIO(out))}
            self.assertEqual((rows["900_1"]["Record"], rows["902"]["Record"]),
                             ("unreadable", "complete"))
            self.assertEqual(rows["900_1"]["Ranks"], "")
        elif name == "totals json":
            g = json.loads(out)["groups"][0]
            self.assertEqual((g["jobs"], g["with_tool"], g["unreadable"]), (2, 1, 1))
            self.assertEqual(g["energy_j"], self.real[GOOD]["energy_j"])
        elif name == "html":
            page = (self.pages / f"{BAD}.html").read_text()
            self.assertIn(named, page)
            self.assertIn("Figures", (self.pages / f"{GOOD}.html").read_text())

    def check_null(self, name: str, rc: int, out: str, err: str) -> None:
        """One output form with a key of job 901 null: unknown, as absent."""
        self.assertNotIn("Traceback", out + err)
        self.assertEqual((rc, err), (0, ""))
        if name == "json":
            self.assertEqual([j["status"] for j in json.loads(out)["jobs"]], ["ok", "ok"])

    def test_every_wrong_type_is_named_in_every_output(self) -> None:
        muts = self.mutations()
        self.assertGreater(len(muts), 100)
        for key, s in muts:
            self.comment(s)
            top = key.split(".")[0].split("[")[0]
            for name, args in self.forms():
                with self.subTest(key=key, value=json.dumps(s.get(top))[:60], form=name):
                    self.check_form(name, key, *self.report(*args))
        # null is JSON's unknown (summarize leaves such a key out): shown as
        # "-", like a key absent, in every form
        base = dict(self.real[GOOD], **self.real[BAD])
        for key in [k for k in base if k not in ("v", "state")] + ["settings.boost"]:
            if key == "settings.boost":
                self.comment(dict(base, settings=dict(base["settings"], boost=None)))
            else:
                self.comment(dict(base, **{key: None}))
            for name, args in self.forms():
                with self.subTest(key=key, value=None, form=name):
                    self.check_null(name, *self.report(*args))

    def test_a_summary_of_another_type_in_the_jobs_detail(self) -> None:
        """No summary in accounting (the flusher missed it): the one of
        job.json is read with the same rules."""
        self.rows = [r._replace(system_comment="") if r.raw == str(BAD) else r
                     for r in self.rows]
        path = self.collect / str(BAD) / "job.json"
        det = json.loads(path.read_text())
        det["summary"]["wait_s"] = "9.9"
        path.write_bytes(noderecord.encode(det))
        for name, args in self.forms()[:6]:
            with self.subTest(form=name):
                rc, out, err = self.report(*args)
                self.assertNotIn("Traceback", out + err)
                self.assertEqual(rc, 0, err)
                self.assertIn("the summary in the job's detail (job.json) is unreadable: "
                              "summary: wait_s is a string, expected a number", err)
        rc, out, _ = self.report(str(BAD), "--json")
        j = json.loads(out)["jobs"][0]
        self.assertEqual((j["status"], sorted(j["detail"]["nodes"])),
                         ("unreadable", ["n1", "n2", "n3"]))

    def test_what_summarize_writes_reads_back_unchanged(self) -> None:
        """The schema refuses nothing summarize, encode or normalize writes:
        both real summaries, a cut one, a version 1 one, a step's."""
        cut = summary.find(summary.encode(dict(self.real[BAD], missing="n" * 2000)))[0]
        v1 = summary.find('mpi-pstate/1:{"v":1,"state":"complete","job_state":"COMPLETED",'
                          '"nodes":1,"ranks":32,"steps":8,"wall_s":17.0,"imbalance":1.18,'
                          '"energy_j":5.0,"energy":"ok"}')[0]
        nulls = {"v": 2, "state": "partial", "ranks": None, "energy_j": None,
                 "settings": {"boost": None, "same": False}}  # unknown: shown as "-"
        for s in (self.real[BAD], self.real[GOOD], cut, v1, nulls,
                  dict(self.real[GOOD], wall_src="step", future_key={"any": ["thing"]})):
            with self.subTest(s=json.dumps(s)[:80]):
                got, why = summary.read(s)
                self.assertIsNone(why)
                self.assertEqual(got, summary.normalize(s))
        self.assertTrue(cut["cut"])
        self.assertEqual(summary.read({"v": 3, "state": "complete"}), (None, None))  # newer
        self.assertEqual(summary.read({"v": True, "state": "complete"})[1],
                         "summary: v is a boolean, expected an integer >= 0")


if __name__ == "__main__":
    unittest.main()
