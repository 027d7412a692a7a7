# SPDX-License-Identifier: BSD-3-Clause
"""What sites import from watch/, as a real site scrapes the metrics:
node_exporter's textfile collector reads files that name no host, and
Prometheus adds `instance` (host:port) and `job`, no `node`.

The alerting rules pass promtool and fire on series shaped that way
(tests/data/prometheus-rules-test.yml); every alert has such a case; their
text names the node by a label the alert carries, so no summary reads
"... on " with an empty name.  The dashboard takes its data source from a
variable, so it works provisioned from a file as well as imported; its
per-node panels draw a line per instance; it and the rules name only
metrics mpi-pstate writes (metrics.py): a renamed metric fails here, not
in a site's Grafana.  The lab runs every panel's query against a real
Prometheus (tests/integration/test_watch.py).

Python 3.6 and the standard library: the rules' test file is read by
rule_tests(), which knows its one shape and refuses any other."""
import json
import re
import shutil
import subprocess
import unittest
from pathlib import Path
from typing import Any, Dict, Iterator, List, NamedTuple, Optional, Set, Tuple

from mpi_pstate.site import metrics

TOP = Path(__file__).resolve().parents[2]
RULES = TOP / "watch" / "prometheus-rules.yml"
RULES_TEST = TOP / "tests" / "data" / "prometheus-rules-test.yml"
DASHBOARD = TOP / "watch" / "grafana-dashboard.json"
METRIC_RE = re.compile(r"\bmpi_pstate_[a-z_]+")
# labels a plain scrape of node_exporter gives every series
SCRAPE_LABELS = {"instance", "job"}
INSTANCE_RE = re.compile(r"[A-Za-z0-9.-]+:[0-9]+")
TEMPLATE_LABEL_RE = re.compile(r"(?:\$labels|\.Labels)\.([A-Za-z_][A-Za-z0-9_]*)")
DATASOURCE = {"type": "prometheus", "uid": "${datasource}"}

Alert = NamedTuple("Alert", [("name", str), ("expr", str), ("annotations", Dict[str, str])])
Labels = Dict[str, str]


def written_metrics() -> Set[str]:
    """Every metric name metrics.py writes."""
    text = metrics.job_text(1, {"energy": "ok", "energy_j": 1.0, "saved_j": [1.0, 1.0, 1.0],
                                "full_j": [2.0, 2.0, 2.0], "time_added_s": [0.0, 0.0, 0.0],
                                **{k: 1 for _, _, k in metrics.JOB_METRICS if isinstance(k, str)}},
                            {}, (100.0, {}))
    text += metrics.queue_text([1.0], 2.0) + metrics.node_text(1, 1, 1, 1, 1.0)
    return set(re.findall(r"^# TYPE (\S+) ", text, re.M))


# ---- reading the two YAML files (no YAML parser in the standard library)

def scalar(text: str) -> str:
    """A YAML scalar as these files write them: double-quoted (JSON's
    escapes), single-quoted or plain."""
    text = text.strip()
    if text.startswith('"'):
        return str(json.loads(text))
    if text.startswith("'"):
        if len(text) < 2 or not text.endswith("'"):
            raise ValueError(f"unterminated quote: {text}")
        return text[1:-1].replace("''", "'")
    return text


def _pairs(body: str, pair_re: "re.Pattern[str]", what: str) -> Iterator[Tuple[str, str]]:
    pos = 0
    while pos < len(body):
        m = pair_re.match(body, pos)
        if not m or m.end() == pos:
            raise ValueError(f"{what}: cannot read {body[pos:]!r}")
        yield m.group(1), m.group(2)
        pos = m.end()


FLOW_PAIR_RE = re.compile(r"""\s*([A-Za-z_]\w*):\s*("(?:[^"\\]|\\.)*"|'(?:[^']|'')*'|[^,{}"']*?)"""
                          r"""\s*(?:,|$)""")
SERIES_RE = re.compile(r"([A-Za-z_:][A-Za-z0-9_:]*)(?:\{(.*)\})?")
SERIES_LABEL_RE = re.compile(r'\s*([A-Za-z_]\w*)="((?:[^"\\]|\\.)*)"\s*(?:,|$)')


def flow_map(text: str) -> Labels:
    """{severity: critical, instance: "n1:9100"} (exp_labels)."""
    text = text.strip()
    if not (text.startswith("{") and text.endswith("}")):
        raise ValueError(f"not a flow mapping: {text}")
    return {k: scalar(v) for k, v in _pairs(text[1:-1], FLOW_PAIR_RE, text)}


def series(text: str) -> Tuple[str, Labels]:
    """name{label="value",...} (input_series)."""
    m = SERIES_RE.fullmatch(text.strip())
    if not m:
        raise ValueError(f"not a series: {text}")
    return m.group(1), dict(_pairs(m.group(2) or "", SERIES_LABEL_RE, text))


def alerts() -> List[Alert]:
    """The alerting rules of watch/prometheus-rules.yml, in order."""
    out = []
    for block in re.split(r"^\s*- alert: ", RULES.read_text(), flags=re.M)[1:]:
        expr = re.search(r"^\s*expr: (.*)$", block, re.M)
        assert expr, block
        ann = {k: scalar(v) for k, v in
               re.findall(r"^\s+(summary|description): (.*)$", block, re.M)}
        out.append(Alert(block.split("\n", 1)[0].strip(), expr.group(1), ann))
    return out


TEST_LINE_RE = re.compile(r"(\s*)(- )?([a-z_]+):(?: (.*))?")
TEST_KEYS = {"rule_files", "evaluation_interval", "tests", "interval", "input_series", "series",
             "values", "alert_rule_test", "eval_time", "alertname", "exp_alerts", "exp_labels",
             "exp_annotations", "summary", "description"}


def rule_tests() -> List[Dict[str, Any]]:
    """The promtool test groups of tests/data/prometheus-rules-test.yml:
    [{"series": [(name, labels)], "cases": [{"alertname", "eval_time",
    "exp": [{"labels", "annotations"}]}]}].  A key or layout this does
    not know raises, so a change of the file's shape fails loudly rather
    than leaving cases unread."""
    groups = []  # type: List[Dict[str, Any]]
    group = case = exp = None  # type: Optional[Dict[str, Any]]
    for n, line in enumerate(RULES_TEST.read_text().split("\n"), 1):
        bare = line.strip()
        if not bare or bare.startswith("#") or re.fullmatch(r"- [^:\s]+", bare):
            continue
        m = TEST_LINE_RE.fullmatch(line)
        if not m or m.group(3) not in TEST_KEYS:
            raise ValueError(f"{RULES_TEST.name}:{n}: unknown line {line!r}: teach rule_tests()")
        key, value = m.group(3), m.group(4) or ""
        try:
            if key == "interval" and m.group(2):
                group = {"series": [], "cases": []}
                groups.append(group)
            elif key == "series":
                group["series"].append(series(scalar(value)))  # type: ignore[index]
            elif key == "eval_time":
                case = {"alertname": None, "eval_time": scalar(value), "exp": []}
                group["cases"].append(case)  # type: ignore[index]
            elif key == "alertname":
                case["alertname"] = scalar(value)  # type: ignore[index]
            elif key == "exp_labels":
                exp = {"labels": flow_map(value), "annotations": {}}
                case["exp"].append(exp)  # type: ignore[index]
            elif key in ("summary", "description"):
                exp["annotations"][key] = scalar(value)  # type: ignore[index]
        except (TypeError, ValueError) as e:
            raise ValueError(f"{RULES_TEST.name}:{n}: {e}") from e
    return groups


def is_plain_scrape(labels: Labels) -> bool:
    """The labels a plain node_exporter scrape gives a textfile series:
    instance (host:port) and job, with no node label."""
    return SCRAPE_LABELS <= set(labels) and "node" not in labels and \
        bool(INSTANCE_RE.fullmatch(labels["instance"]))


def template_labels(text: str) -> Set[str]:
    return set(TEMPLATE_LABEL_RE.findall(text))


class Rules(unittest.TestCase):
    @unittest.skipUnless(shutil.which("promtool"), "promtool (Debian's prometheus) not installed")
    def test_promtool_checks_and_unit_tests(self) -> None:
        for args in (["check", "rules", str(RULES)], ["test", "rules", str(RULES_TEST)]):
            r = subprocess.run(["promtool"] + args, stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, universal_newlines=True)
            self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
            self.assertIn("SUCCESS", r.stdout)

    def test_rules_name_only_metrics_we_write(self) -> None:
        rules = alerts()
        self.assertEqual(len(rules), len(re.findall(r"^\s*expr: ", RULES.read_text(), re.M)))
        self.assertGreaterEqual(len(rules), 4)
        names = {n for a in rules for n in METRIC_RE.findall(a.expr)}
        self.assertGreaterEqual(len(names), 6)
        self.assertEqual(names - written_metrics(), set())

    def test_text_names_only_labels_a_scrape_gives(self) -> None:
        """The files write no node label: an alert's text may name only
        instance and job, and a job's own labels on job series.  All but
        the job alerts name the node or controller by instance."""
        for a in alerts():
            self.assertEqual(set(a.annotations), {"summary", "description"}, a.name)
            job = all(n.startswith("mpi_pstate_job_") for n in METRIC_RE.findall(a.expr))
            allowed = SCRAPE_LABELS | (set(metrics.JOB_LABELS) if job else set())
            for key, text in a.annotations.items():
                self.assertLessEqual(template_labels(text), allowed, f"{a.name} {key}")
                if not job:
                    self.assertIn("instance", template_labels(text), f"{a.name} {key}")

    def test_every_alert_fires_on_a_plain_scrape(self) -> None:
        groups = rule_tests()
        self.assertGreaterEqual(len(groups), 4)
        fired = set()
        for g in groups:
            if all(is_plain_scrape(labels) for _, labels in g["series"]):
                fired |= {c["alertname"] for c in g["cases"] if c["exp"]}
        self.assertEqual({a.name for a in alerts()} - fired, set(),
                         "alerts with no promtool case on a plain scrape's series")
        tested = {c["alertname"] for g in groups for c in g["cases"]}
        self.assertLessEqual(tested, {a.name for a in alerts()}, "cases of no alert")

    def test_input_series_are_shaped_as_a_scrape(self) -> None:
        """Every series has instance and job; a node label only as the
        documented relabelling derives it (instance less its port)."""
        written = written_metrics()
        for g in rule_tests():
            self.assertTrue(g["series"])
            for name, labels in g["series"]:
                self.assertIn(name, written)
                self.assertLessEqual(SCRAPE_LABELS, set(labels), name)
                self.assertRegex(labels["instance"], INSTANCE_RE, name)
                if "node" in labels:
                    self.assertEqual(labels["node"], labels["instance"].rsplit(":", 1)[0], name)
                if name.startswith("mpi_pstate_job_"):
                    self.assertEqual(set(metrics.JOB_LABELS) - set(labels), set(), name)

    def test_text_names_commands_that_exist(self) -> None:
        """An alert sends the admin to a command: each `mpi-pstate X` its
        text names is a subcommand the parsers define (read as text, as
        test_docs_names.py does); the restore alerts name `mpi-pstate
        status`, which shows a node's records, whose they are and the last
        restore error, and runs on the node the alert names."""
        parsers = "".join((TOP / "epilog" / "mpi_pstate" / f).read_text()
                          for f in ("user/command.py", "site/entry.py"))
        subs = set(re.findall(r"\.add_parser\(\s*\"([a-z][a-z0-9-]*)\"", parsers))
        self.assertIn("status", subs)
        named = {}  # type: Dict[str, Set[str]]
        for a in alerts():
            named[a.name] = set(re.findall(r"`mpi-pstate ([a-z][a-z0-9-]*)",
                                           a.annotations["description"]))
            self.assertLessEqual(named[a.name], subs, a.name)
        for name in ("MpiPstateRestoreFailed", "MpiPstateRestoreRecordsLeft"):
            self.assertIn("status", named[name], name)

    def test_expected_text_holds_every_label_it_names(self) -> None:
        """promtool compares the alerts' labels and text whole with the
        expected ones; here every label a text names is among those labels,
        not empty, and appears in the expected text: a text that renders
        an empty node name cannot pass both."""
        rules = {a.name: a for a in alerts()}
        seen = 0
        for g in rule_tests():
            for c in g["cases"]:
                a = rules[c["alertname"]]
                for exp in c["exp"]:
                    seen += 1
                    where = f"{a.name} at {c['eval_time']}"
                    self.assertLessEqual(SCRAPE_LABELS, set(exp["labels"]), where)
                    self.assertEqual(set(exp["annotations"]), set(a.annotations), where)
                    for key, text in a.annotations.items():
                        for label in template_labels(text):
                            value = exp["labels"].get(label, "")
                            self.assertTrue(value, f"{where}: {key} names {label}, not on the alert")
                            self.assertIn(value, exp["annotations"][key], f"{where}: {key}")
        self.assertGreaterEqual(seen, len(rules))


# ---- the dashboard

def dashboard() -> Dict[str, Any]:
    return dict(json.loads(DASHBOARD.read_text()))


def dashboard_targets() -> List[Tuple[str, Dict[str, Any]]]:
    return [(p["title"], t) for p in dashboard()["panels"] for t in p["targets"]]


def datasource_refs(node: Any, path: str = "") -> Iterator[Tuple[str, Any]]:
    """Every "datasource" value anywhere in the dashboard, with where."""
    if isinstance(node, dict):
        for k, v in node.items():
            if k == "datasource":
                yield f"{path}/{k}", v
            yield from datasource_refs(v, f"{path}/{k}")
    elif isinstance(node, list):
        for i, v in enumerate(node):
            yield from datasource_refs(v, f"{path}/{i}")


class Dashboard(unittest.TestCase):
    def test_import_shape(self) -> None:
        d = dashboard()
        self.assertEqual(d["uid"], "mpi-pstate")
        ids = [p["id"] for p in d["panels"]]
        self.assertEqual(len(ids), len(set(ids)))
        for p in d["panels"]:
            self.assertTrue(p["targets"], p["title"])
            self.assertTrue({"x", "y", "w", "h"} <= set(p["gridPos"]), p["title"])
            self.assertLessEqual(p["gridPos"]["x"] + p["gridPos"]["w"], 24, p["title"])
        self.assertEqual([v["name"] for v in d["templating"]["list"]],
                         ["datasource", "user", "partition"])

    def test_data_source_is_a_variable(self) -> None:
        """Provisioned from a file, Grafana resolves no __inputs: every
        panel, target and query variable takes the datasource variable."""
        text = DASHBOARD.read_text()
        self.assertNotIn("__inputs", text)
        self.assertNotIn("${DS_", text)
        d = dashboard()
        var = d["templating"]["list"][0]
        self.assertEqual((var["type"], var["query"]), ("datasource", "prometheus"))
        self.assertNotIn("datasource", var)
        for p in d["panels"]:
            self.assertEqual(p["datasource"], DATASOURCE, p["title"])
            for t in p["targets"]:
                self.assertEqual(t["datasource"], DATASOURCE, f"{p['title']} {t['refId']}")
        for v in d["templating"]["list"][1:]:
            self.assertEqual(v["datasource"], DATASOURCE, v["name"])
        refs = list(datasource_refs(d))
        self.assertGreater(len(refs), len(d["panels"]))
        for where, ref in refs:
            self.assertEqual(ref, DATASOURCE, where)

    def test_per_node_panels_group_by_instance(self) -> None:
        """A scrape gives no node label: grouped by it, every node would
        fall into one line."""
        per_node = [(title, t) for title, t in dashboard_targets()
                    if "mpi_pstate_node_" in t["expr"]]
        self.assertGreaterEqual(len(per_node), 3)
        for title, t in per_node:
            groupings = re.findall(r"\b(by|without)\s*\(([^)]*)\)", t["expr"])
            self.assertTrue(groupings, title)
            self.assertEqual({(k, tuple(x.strip() for x in ls.split(","))) for k, ls in groupings},
                             {("by", ("instance",))}, title)
            self.assertIn("{{instance}}", t["legendFormat"], title)
        for title, t in dashboard_targets():
            self.assertNotRegex(t["expr"], r"\bnode\s*(=|!=|=~|!~)", title)
            self.assertNotIn("{{node}}", t.get("legendFormat", ""), title)

    def test_panels_show_what_sites_need(self) -> None:
        exprs = " ".join(t["expr"] for _, t in dashboard_targets())
        for m in ("mpi_pstate_job_saved_joules", "mpi_pstate_job_mpi_ratio",
                  "mpi_pstate_job_down_ratio", "mpi_pstate_node_agents_running",
                  "mpi_pstate_node_domains_down", "mpi_pstate_node_restore_failures_total"):
            self.assertIn(m, exprs)
        self.assertIn("sum by (user)", exprs)
        self.assertIn("sum by (partition)", exprs)

    def test_panels_name_only_metrics_we_write(self) -> None:
        d = dashboard()
        queried = [t["expr"] for _, t in dashboard_targets()] + \
            [v["query"]["query"] for v in d["templating"]["list"] if v["type"] == "query"]
        names = {n for e in queried for n in METRIC_RE.findall(e)}
        self.assertGreaterEqual(len(names), 10)
        self.assertEqual(names - written_metrics(), set())
        for v in d["templating"]["list"]:
            if v["type"] == "query":
                label = re.fullmatch(r"label_values\((\w+), (\w+)\)", v["query"]["query"])
                self.assertTrue(label, v["name"])
                self.assertIn(label.group(2), metrics.JOB_LABELS, v["name"])  # type: ignore


if __name__ == "__main__":
    unittest.main()
