# SPDX-License-Identifier: BSD-3-Clause
"""Prometheus metrics (epilog/mpi_pstate/metrics.py): the text format as
Prometheus' own checker reads it, labels that cannot break out of their
quotes, files aged out and bounded in number, a directory refused unless
root's alone, node gauges from a fake runtime directory and sysfs, and the
flusher publishing a job's metrics with its user, account and partition."""
import os
import re
import shutil
import subprocess
import tempfile
import time
import unittest
from pathlib import Path
from typing import Dict
from unittest import mock

import test_epilog_fixtures as fx
import test_epilog_summary as tes
from mpi_pstate.core import layout, livesteps, siteconf
from mpi_pstate.site import metrics, node_epilog

SUMMARY = {"state": "complete", "job_state": "COMPLETED", "mpi_share": 0.42,
           "down_share": 0.3, "wall_s": 12.0, "mpi_s": 10.1, "wait_s": 8.0, "down_s": 7.5,
           "transitions": 40, "ranks": 4, "nodes": 2, "steps": 1, "energy": "ok",
           "energy_j": 1234.5, "energy_src": "rapl", "saved_j": [12.0, 8.0, 15.0],
           "saved_src": "simulated", "full_j": [1246.5, 1242.5, 1249.5],
           "time_added_s": [0.01, 0.0, 0.02], "agent_capped_s": 1.5}
LABELS = {"user": "alice", "account": "phys", "partition": "debug"}


def samples(text: str) -> Dict[str, str]:
    """name{labels} -> value of every sample line."""
    return dict(line.rsplit(" ", 1) for line in text.splitlines()
                if line and not line.startswith("#"))


class Text(unittest.TestCase):
    def test_every_figure_with_the_jobs_labels(self) -> None:
        text = metrics.job_text(42, SUMMARY, LABELS, (350.0, {"gpu": 100.0}), 1000.0)
        got = samples(text)
        lab = '{jobid="42",user="alice",account="phys",partition="debug"}'
        self.assertEqual(got[f"mpi_pstate_job_mpi_ratio{lab}"], "0.42")
        self.assertEqual(got[f"mpi_pstate_job_saved_joules{lab}"], "12.0")
        self.assertEqual(got[f"mpi_pstate_job_saved_low_joules{lab}"], "8.0")
        self.assertEqual(got[f"mpi_pstate_job_saved_high_joules{lab}"], "15.0")
        self.assertEqual(got[f"mpi_pstate_job_energy_joules{lab}"], "1234.5")
        self.assertEqual(got[f"mpi_pstate_job_transitions{lab}"], "40")
        self.assertEqual(got[f"mpi_pstate_job_agent_capped_seconds{lab}"], "1.5")
        # 1234.5 J at 350 g/kWh (debug has no figure of its own)
        self.assertEqual(got[f"mpi_pstate_job_carbon_grams{lab}"], "0.12")
        info = [k for k in got if k.startswith("mpi_pstate_job_info")]
        self.assertEqual(len(info), 1)
        self.assertIn('state="complete"', info[0])
        self.assertIn('saved_src="simulated"', info[0])
        # every family once, with its HELP and TYPE
        names = re.findall(r"^# TYPE (\S+) gauge$", text, re.M)
        self.assertEqual(len(names), len(set(names)))
        self.assertEqual(len(names), len({k.split("{")[0] for k in got}))

    def test_unknown_figures_are_left_out_not_zero(self) -> None:
        s = {"state": "partial", "energy": "no_access", "energy_j": None, "ranks": 2}
        got = samples(metrics.job_text(7, s, LABELS))
        self.assertFalse([k for k in got if not k.startswith("mpi_pstate_job_info") and
                          ("energy_joules" in k or "saved" in k or "carbon" in k)])
        self.assertIn('mpi_pstate_job_ranks{jobid="7",user="alice",account="phys",'
                      'partition="debug"}', got)

    def test_labels_cannot_break_out(self) -> None:
        hostile = {"user": 'x"} 1\nmpi_pstate_job_info{jobid="9', "account": "a\\",
                   "partition": "p" * 500}
        text = metrics.job_text(8, SUMMARY, hostile)
        for line in text.splitlines():
            if not line.startswith("#"):
                self.assertRegex(line, r'^mpi_pstate_[a-z_]+\{jobid="8",user=".*",'
                                 r'account="a\\\\",partition="p{128}"(,[a-z_]+="[^"]*")*\} '
                                 r'[0-9.e+-]+$')
        self.assertEqual(text.count("\n"), len(text.splitlines()))

    @unittest.skipUnless(shutil.which("promtool"), "promtool (Debian's prometheus) not installed")
    def test_promtool_accepts_every_file(self) -> None:
        for text in (metrics.job_text(42, SUMMARY, LABELS, (350.0, {}), 1.0),
                     metrics.queue_text([5.0, 3.0], 10.0), metrics.queue_text([], 10.0),
                     metrics.node_text(1, 2, 3, 4, 11.0)):
            r = subprocess.run(["promtool", "check", "metrics"], input=text, universal_newlines=True,
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE)
            self.assertEqual(r.returncode, 0, r.stdout + r.stderr + text)

    def test_queue_gauge_says_since_when(self) -> None:
        got = samples(metrics.queue_text([50.0, 30.0], 100.0))
        self.assertEqual(got["mpi_pstate_summaries_queued"], "2")
        self.assertEqual(got["mpi_pstate_summaries_oldest_queued_timestamp_seconds"], "30.0")
        got = samples(metrics.queue_text([], 100.0))
        self.assertEqual(got["mpi_pstate_summaries_queued"], "0")
        self.assertNotIn("mpi_pstate_summaries_oldest_queued_timestamp_seconds", got)


class Files(unittest.TestCase):
    def setUp(self) -> None:
        self._td = tempfile.TemporaryDirectory()
        self.top = Path(self._td.name)
        os.chmod(self.top, 0o755)
        self.dir = self.top / "node-exporter"
        self.dir.mkdir(mode=0o755)
        self.cfg = siteconf.Config()
        self.cfg.metrics_dir = str(self.dir)

    def tearDown(self) -> None:
        self._td.cleanup()

    def test_written_atomically_and_aged_out(self) -> None:
        now = time.time()
        metrics.write_job(self.cfg, 5, SUMMARY, LABELS, now)
        self.assertEqual(os.listdir(self.dir), ["mpi_pstate_job_5.prom"])
        self.assertEqual(os.stat(self.dir / "mpi_pstate_job_5.prom").st_mode & 0o777, 0o644)
        old = self.dir / "mpi_pstate_job_4.prom"
        old.write_text("x 1\n")
        os.utime(old, (now - metrics.KEEP_S - 5,) * 2)
        (self.dir / ".tmp.mpi_pstate_job_3.prom.1.1").write_text("half")
        os.utime(self.dir / ".tmp.mpi_pstate_job_3.prom.1.1", (now - 3600,) * 2)
        (self.dir / "node_other.prom").write_text("other 1\n")  # another collector's file
        metrics.write_job(self.cfg, 6, SUMMARY, LABELS, now)
        self.assertEqual(sorted(os.listdir(self.dir)),
                         ["mpi_pstate_job_5.prom", "mpi_pstate_job_6.prom", "node_other.prom"])

    def test_bounded_in_number_oldest_first(self) -> None:
        fd = os.open(self.dir, os.O_RDONLY | os.O_DIRECTORY)
        try:
            now = time.time()
            for j in range(10):
                p = self.dir / f"mpi_pstate_job_{j}.prom"
                p.write_text("x 1\n")
                os.utime(p, (now - 100 + j,) * 2)
            self.assertEqual(metrics.prune_jobs(fd, now, max_jobs=4), 6)
        finally:
            os.close(fd)
        self.assertEqual(sorted(os.listdir(self.dir)),
                         [f"mpi_pstate_job_{j}.prom" for j in range(6, 10)])

    def test_parents_may_be_anyones_the_directory_root_s_alone(self) -> None:
        os.chown(self.top, 65534, 65534)  # as /var/lib/prometheus is prometheus'
        metrics.write_job(self.cfg, 1, SUMMARY, LABELS)
        os.chmod(self.dir, 0o775)
        with self.assertRaises(OSError):
            metrics.write_job(self.cfg, 2, SUMMARY, LABELS)
        os.chmod(self.dir, 0o755)
        os.chown(self.dir, 65534, 65534)
        with self.assertRaises(OSError):
            metrics.write_job(self.cfg, 3, SUMMARY, LABELS)
        os.chown(self.dir, 0, 0)
        self.dir.rename(self.top / "real")
        self.dir.symlink_to(self.top / "real")
        with self.assertRaises(OSError):
            metrics.write_job(self.cfg, 4, SUMMARY, LABELS)
        self.assertEqual(os.listdir(self.top / "real"), ["mpi_pstate_job_1.prom"])

    def test_host_name_in_the_path(self) -> None:
        (self.top / "n7").mkdir(mode=0o755)
        self.cfg.metrics_dir = str(self.top / "%h")
        with mock.patch.object(siteconf, "short_host", lambda: "n7"):
            metrics.write_queue(self.cfg, [1.0], 2.0)
        self.assertEqual(os.listdir(self.top / "n7"), [layout.QUEUE_METRICS_FILE])


class NodeGauges(unittest.TestCase):
    """A runtime directory with two steps, one whose agent runs (a process
    of the agent's executable: a copy of sleep) with two domains set, one
    clocked down now; a leftover step whose pid is not an agent."""

    def setUp(self) -> None:
        self._td = tempfile.TemporaryDirectory()
        self.tmp = Path(self._td.name)
        os.chmod(self.tmp, 0o755)
        self.sysroot = self.tmp / "sys"
        fx.fake_sysfs(self.sysroot, ncpus=2)
        self.runtime = self.tmp / "run"
        for d in ("steps/10.0", "steps/11.0", "restore"):
            (self.runtime / d).mkdir(parents=True, mode=0o755)
        self.agent = self.tmp / "mpi-pstate-agent"
        shutil.copy2(shutil.which("sleep"), self.agent)
        self.proc = subprocess.Popen([str(self.agent), "60"])
        self.addCleanup(self.proc.wait)
        self.addCleanup(self.proc.kill)
        (self.runtime / "steps/10.0/agent.pid").write_text(f"{self.proc.pid}\n")
        (self.runtime / "steps/11.0/agent.pid").write_text(f"{os.getpid()}\n")
        doms = [{"policy": "policy0", "status": "set", "max_khz": 3000000},
                {"policy": "policy1", "status": "set", "max_khz": 3000000}]
        (self.runtime / "steps/10.0/plugin.json").write_text(
            __import__("json").dumps({"domains": doms}))
        (self.runtime / "steps/11.0/plugin.json").write_text(
            __import__("json").dumps({"domains": doms}))
        fx.write(self.sysroot, "devices/system/cpu/cpufreq/policy0/scaling_max_freq", "1200000")
        fx.write(self.sysroot, "devices/system/cpu/cpufreq/policy1/scaling_max_freq", "3000000")
        (self.runtime / "restore/policy0").write_text("version=1\n")
        self.out = self.tmp / "prom"
        self.out.mkdir(mode=0o755)
        self.cfg = siteconf.Config()
        self.cfg.metrics_dir = str(self.out)

    def tearDown(self) -> None:
        self._td.cleanup()

    def test_gauges(self) -> None:
        text = node_epilog.node_gauges(self.cfg, str(self.runtime), str(self.sysroot),
                                  livesteps.agent_checker(str(self.agent)), now=5.0)
        got = samples((self.out / layout.NODE_METRICS_FILE).read_text())
        self.assertEqual(got, samples(text))
        self.assertEqual(got["mpi_pstate_node_agents_running"], "1")
        self.assertEqual(got["mpi_pstate_node_domains_down"], "1")
        self.assertEqual(got["mpi_pstate_node_restore_records"], "1")
        self.assertEqual(got["mpi_pstate_node_restore_failures_total"], "0")
        self.proc.kill()
        self.proc.wait()
        got = samples(node_epilog.node_gauges(self.cfg, str(self.runtime), str(self.sysroot),
                                         livesteps.agent_checker(str(self.agent))))
        self.assertEqual((got["mpi_pstate_node_agents_running"],
                          got["mpi_pstate_node_domains_down"]), ("0", "0"))

    def test_failures_count_until_reboot(self) -> None:
        self.assertEqual(metrics.node_failures(str(self.runtime), 2), 2)
        self.assertEqual(metrics.node_failures(str(self.runtime), 1), 3)
        self.assertEqual(metrics.node_failures(str(self.runtime)), 3)
        with mock.patch.object(metrics, "boot_time", lambda proc="/proc": 1):
            self.assertEqual(metrics.node_failures(str(self.runtime)), 0)

    def test_an_agents_pid_file_is_not_believed(self) -> None:
        (self.runtime / "steps/10.0/agent.pid").write_text(f"{os.getpid()}\n")
        got = samples(node_epilog.node_gauges(self.cfg, str(self.runtime), str(self.sysroot),
                                         livesteps.agent_checker(str(self.agent))))
        self.assertEqual(got["mpi_pstate_node_agents_running"], "0")


class Flusher(tes.Fakes):
    def test_written_summary_publishes_the_jobs_metrics(self) -> None:
        prom = self.tmp / "prom"
        prom.mkdir(mode=0o755)
        self.cfg.metrics_dir = str(prom)
        self.sacct_hook = lambda j, timeout=30: self.fake_sacct_one(j)._replace(
            user="alice", account="phys", partition="debug")
        self.publish(21, "n1", fx.node_record(21, "n1", [fx.rank("n1", 0)]))
        self.publish(21, "n2", fx.node_record(21, "n2", [fx.rank("n2", 1)]))
        self.run_ctld(21)
        got = samples((prom / "mpi_pstate_job_21.prom").read_text())
        lab = '{jobid="21",user="alice",account="phys",partition="debug"}'
        self.assertEqual(got[f"mpi_pstate_job_ranks{lab}"], "2")
        self.assertEqual(samples((prom / layout.QUEUE_METRICS_FILE).read_text())
                         ["mpi_pstate_summaries_queued"], "0")

    def test_a_refused_directory_costs_the_summary_nothing(self) -> None:
        self.cfg.metrics_dir = str(self.tmp / "absent")
        self.publish(22, "n1", fx.node_record(22, "n1", [fx.rank("n1", 0)]))
        self.publish(22, "n2", fx.node_record(22, "n2", [fx.rank("n2", 1)]))
        self.run_ctld(22)
        self.assertEqual(len(self.writes), 1)
        self.assertIn("metrics not written", self.err.getvalue())


if __name__ == "__main__":
    unittest.main()
