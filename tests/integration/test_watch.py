# SPDX-License-Identifier: BSD-3-Clause
"""mpi-pstate's metrics where sites look (docs/watching.md): the lab's real
Prometheus scrapes real node_exporters (Debian's packages, `lab watch
start`), one on each node's metrics_dir and one on the controller's.  One
job of the test user clocks down on n2; meanwhile the node-metrics timer's
command runs there; then Prometheus' HTTP API must hold the job's series
with its user, account and partition, the node gauges seen during the
job, the shipped alerting rules, and data for every panel of the shipped
Grafana dashboard."""
from __future__ import annotations

import json
import shutil
import time
import unittest
import urllib.parse
import urllib.request
from pathlib import Path
from typing import Any

import labtools as lt
import test_accounting as ta
import test_faults as ft

from mpi_pstate.core import layout

PROM = "http://127.0.0.1:16990"
MODEL = layout.DEFAULT_MODEL
ON = "--mpi-pstate=on --mpi-pstate-threshold=1ms"
DASHBOARD = Path(__file__).resolve().parents[2] / "watch" / "grafana-dashboard.json"
# Grafana's variables as a dashboard of every user and partition over the
# last hour sends them
GRAFANA_VARS = {"$user": ".*", "$partition": ".*", "$__range": "1h",
                "$__rate_interval": "1m", "$__interval": "15s"}


def api(path: str, **params: str) -> Any:
    url = f"{PROM}/api/v1/{path}" + (f"?{urllib.parse.urlencode(params)}" if params else "")
    with urllib.request.urlopen(url, timeout=30) as r:
        out = json.load(r)
    assert out["status"] == "success", out
    return out["data"]


def query(expr: str) -> list[dict[str, Any]]:
    return api("query", query=expr)["result"]


def wait_query(expr: str, timeout: float = 60) -> list[dict[str, Any]]:
    t_end = time.monotonic() + timeout
    while True:
        got = query(expr)
        if got or time.monotonic() > t_end:
            return got
        time.sleep(1)


class Watching(ft.AccountingJobs, unittest.TestCase):
    job: int
    during: str

    @classmethod
    def setUpClass(cls) -> None:
        if not (shutil.which("prometheus") and shutil.which("prometheus-node-exporter")):
            raise unittest.SkipTest("Prometheus and node_exporter are not installed here "
                                    "(the host's tests/cluster/deps.sh installs them)")
        ft.AccountingJobs.setUpClass.__func__(cls)  # type: ignore[attr-defined]
        lt.lab("watch", "start")
        cls.addClassCleanup(lt.lab, "watch", "stop", check=False)
        # a power model, as `mpi-pstate calibrate` stores it on a real node,
        # for the job's estimate of energy saved (summary saved_j); /var/lib
        # is the nodes' shared one here
        cls.addClassCleanup(lt.node_exec, "n2", f"rm -f {MODEL}", check=False)
        lt.node_exec("n2", f"{ta.CLI} calibrate --seconds 0.2 --reps 1 --points 2 --quiet")
        with lt.plugstack_args("carbon_g_per_kwh=350"):
            cls.job, cls.during = cls.run_job()
            lt.settle()

    @classmethod
    def run_job(cls) -> tuple[int, str]:
        """One rank a node; rank 1 (n2) waits 8 s in barriers, clocked down,
        while node-metrics runs there as its timer would."""
        script = cls.script(cls.family(), 2, 2, iters=3, ms=1, hold=8).replace(ta.PLUGIN, ON)
        job = cls.submit_as_user(["-N2", "--ntasks-per-node=1", "-t", "5"], script, "watch")
        during = ""
        t_end = time.monotonic() + 120
        while time.monotonic() < t_end:
            r = lt.node_exec("n2", f"{ta.CLI} node-metrics", check=False)
            if r.returncode == 0 and "mpi_pstate_node_agents_running 1" in r.stdout and \
                    "mpi_pstate_node_domains_down 0" not in r.stdout:
                during = r.stdout
                break
            if lt.root(["squeue", "-h", "-j", str(job)], check=False).stdout.strip() == "":
                break
            time.sleep(0.3)
        assert lt.wait_job(job, 120) == "COMPLETED", lt.daemon_log_tail(10)
        return job, during

    def test_node_gauges_while_the_job_waits(self) -> None:
        self.assertIn("mpi_pstate_node_agents_running 1", self.during)
        got = wait_query('max_over_time(mpi_pstate_node_agents_running{node="n2"}[10m])')
        self.assertEqual(got[0]["value"][1], "1", got)
        got = wait_query('max_over_time(mpi_pstate_node_domains_down{node="n2"}[10m])')
        self.assertGreaterEqual(float(got[0]["value"][1]), 1, got)
        # the node Epilog wrote them again at the job's end
        got = wait_query('mpi_pstate_node_agents_running{node="n2"} == 0')
        self.assertTrue(got, "n2's gauge never went back to 0 agents")
        self.assertEqual(query('mpi_pstate_node_restore_failures_total{node="n2"}')[0]
                         ["value"][1], "0")

    def test_job_series_with_user_account_partition(self) -> None:
        s = self.wait_summary(self.job)
        got = wait_query(f'mpi_pstate_job_ranks{{jobid="{self.job}"}}')
        self.assertEqual(len(got), 1, got)
        m = got[0]["metric"]
        self.assertEqual((m["user"], m["partition"], m["node"]), (lt.TEST_USER, "debug", "ctld"))
        self.assertTrue(m["account"], m)
        self.assertEqual(got[0]["value"][1], str(s["ranks"]))
        for name in ("mpi_ratio", "down_seconds", "wait_seconds", "transitions",
                     "saved_joules", "energy_joules", "carbon_saved_grams"):
            got = query(f'mpi_pstate_job_{name}{{jobid="{self.job}"}}')
            self.assertEqual(len(got), 1, f"{name}: {got}")
        down = float(query(f'mpi_pstate_job_down_seconds{{jobid="{self.job}"}}')[0]["value"][1])
        self.assertAlmostEqual(down, s["down_s"], places=2)
        self.assertGreater(down, 1.0)
        info = query(f'mpi_pstate_job_info{{jobid="{self.job}"}}')[0]["metric"]
        self.assertEqual(info["state"], s["state"])
        got = query("mpi_pstate_summaries_queued")
        self.assertTrue(got, "the flusher's queue gauge is not scraped")

    def test_every_dashboard_panel_returns_data(self) -> None:
        self.wait_summary(self.job)
        wait_query(f'mpi_pstate_job_info{{jobid="{self.job}"}}')
        d = json.loads(DASHBOARD.read_text())
        empty, one_line = [], []
        for p in d["panels"]:
            for t in p["targets"]:
                expr = t["expr"]
                for k in sorted(GRAFANA_VARS, key=len, reverse=True):
                    expr = expr.replace(k, GRAFANA_VARS[k])
                got = query(expr)
                if not got:
                    empty.append(f"{p['title']}: {expr}")
                # n1's and n2's node gauges: a line per instance, not one
                # for all (the job ran on both, and their Epilogs wrote)
                if "mpi_pstate_node_" in expr and \
                        len({r["metric"].get("instance") for r in got} - {None}) < 2:
                    one_line.append(f"{p['title']}: {expr}: {got}")
        self.assertEqual(empty, [])
        self.assertEqual(one_line, [])
        for v in d["templating"]["list"]:
            if v["type"] == "datasource":
                continue
            name = v["query"]["query"].split(",")[1].strip(" )")
            vals = api("label/" + name + "/values", **{"match[]": "mpi_pstate_job_info"})
            self.assertTrue(vals, f"variable {v['name']}: no values")

    def test_shipped_alerting_rules_are_loaded(self) -> None:
        groups = api("rules")["groups"]
        names = {r["name"] for g in groups for r in g["rules"]}
        self.assertEqual(names, {"MpiPstateRestoreFailed", "MpiPstateRestoreRecordsLeft",
                                 "MpiPstateAgentAtCeiling", "MpiPstateSummariesQueued"})
        self.assertTrue(all(r["health"] == "ok" for g in groups for r in g["rules"]),
                        groups)


if __name__ == "__main__":
    unittest.main()
