# SPDX-License-Identifier: BSD-3-Clause
"""What sites import from watch/: the alerting rules pass promtool and fire
on the series meant to raise them (tests/data/prometheus-rules-test.yml),
and the dashboard and the rules name only metrics mpi-pstate writes
(metrics.py): a renamed metric fails here, not in a site's Grafana.  The
lab runs every panel's query against a real Prometheus
(tests/integration/test_watch.py)."""
from __future__ import annotations

import json
import re
import shutil
import subprocess
import unittest
from pathlib import Path

from mpi_pstate import metrics

TOP = Path(__file__).resolve().parents[2]
RULES = TOP / "watch" / "prometheus-rules.yml"
DASHBOARD = TOP / "watch" / "grafana-dashboard.json"
METRIC_RE = re.compile(r"\bmpi_pstate_[a-z_]+")


def written_metrics() -> set[str]:
    """Every metric name metrics.py writes."""
    text = metrics.job_text(1, {"energy": "ok", "energy_j": 1.0, "saved_j": [1.0, 1.0, 1.0],
                                "full_j": [2.0, 2.0, 2.0], "time_added_s": [0.0, 0.0, 0.0],
                                **{k: 1 for _, _, k in metrics.JOB_METRICS if isinstance(k, str)}},
                            {}, (100.0, {}))
    text += metrics.queue_text([1.0], 2.0) + metrics.node_text(1, 1, 1, 1, 1.0)
    return set(re.findall(r"^# TYPE (\S+) ", text, re.M))


def dashboard_exprs() -> list[tuple[str, str]]:
    d = json.loads(DASHBOARD.read_text())
    return [(p["title"], t["expr"]) for p in d["panels"] for t in p["targets"]]


class Rules(unittest.TestCase):
    @unittest.skipUnless(shutil.which("promtool"), "promtool (Debian's prometheus) not installed")
    def test_promtool_checks_and_unit_tests(self) -> None:
        for args in (["check", "rules", str(RULES)],
                     ["test", "rules", str(TOP / "tests/data/prometheus-rules-test.yml")]):
            r = subprocess.run(["promtool", *args], capture_output=True, text=True)
            self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
            self.assertIn("SUCCESS", r.stdout)

    def test_rules_name_only_metrics_we_write(self) -> None:
        exprs = re.findall(r"^\s*expr: (.*)$", RULES.read_text(), re.M)
        self.assertEqual(len(exprs), 4)
        names = {n for e in exprs for n in METRIC_RE.findall(e)}
        self.assertGreaterEqual(len(names), 6)
        self.assertEqual(names - written_metrics(), set())


class Dashboard(unittest.TestCase):
    def test_import_shape(self) -> None:
        d = json.loads(DASHBOARD.read_text())
        self.assertEqual(d["uid"], "mpi-pstate")
        self.assertEqual([i["name"] for i in d["__inputs"]], ["DS_PROMETHEUS"])
        ids = [p["id"] for p in d["panels"]]
        self.assertEqual(len(ids), len(set(ids)))
        for p in d["panels"]:
            self.assertTrue(p["targets"], p["title"])
            self.assertEqual(p["datasource"]["uid"], "${DS_PROMETHEUS}", p["title"])
            self.assertTrue({"x", "y", "w", "h"} <= set(p["gridPos"]), p["title"])
            self.assertLessEqual(p["gridPos"]["x"] + p["gridPos"]["w"], 24, p["title"])
        self.assertEqual([v["name"] for v in d["templating"]["list"]], ["user", "partition"])

    def test_panels_show_what_the_issue_asked(self) -> None:
        exprs = " ".join(e for _, e in dashboard_exprs())
        for m in ("mpi_pstate_job_saved_joules", "mpi_pstate_job_mpi_ratio",
                  "mpi_pstate_job_down_ratio", "mpi_pstate_node_agents_running",
                  "mpi_pstate_node_domains_down", "mpi_pstate_node_restore_failures_total"):
            self.assertIn(m, exprs)
        self.assertIn("sum by (user)", exprs)
        self.assertIn("sum by (partition)", exprs)

    def test_panels_name_only_metrics_we_write(self) -> None:
        names = {n for _, e in dashboard_exprs() for n in METRIC_RE.findall(e)}
        self.assertEqual(names - written_metrics(), set())


if __name__ == "__main__":
    unittest.main()
