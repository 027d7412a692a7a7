# SPDX-License-Identifier: BSD-3-Clause
"""The evaluation tool (bench/eval/evaluate.py) without a cluster: its parsers (threshold
lists, hpccinf.txt, mountinfo), the
interleaved plan, and whole runs of main() against a scripted fake Slurm
that checks the submitted options and answers with canned records."""
from __future__ import annotations

import csv
import importlib
import importlib.util
import io
import json
import re
import shutil
import sys
import tempfile
import unittest
from contextlib import redirect_stderr, redirect_stdout
from pathlib import Path
from types import ModuleType
from typing import Any, Dict, List, Optional
from unittest import mock

TOP = Path(__file__).resolve().parents[2]
TOP_EPILOG = TOP / "epilog"


def load() -> ModuleType:
    for d in (TOP_EPILOG, TOP / "bench" / "eval"):
        if str(d) not in sys.path:
            sys.path.insert(0, str(d))
    return importlib.import_module("evaluate")


mb = load()

FUSE_MOUNTS = """\
22 1 0:21 / /sys rw,nosuid,nodev,noexec,relatime shared:7 - sysfs sysfs rw
49 45 0:39 /cpufreq /sys/devices/system/cpu/cpufreq rw,relatime - fuse FakeSys rw,user_id=0
50 48 0:39 /powercap /sys/class/powercap rw,nosuid,nodev,relatime - fuse FakeSys rw,user_id=0
"""
REAL_MOUNTS = """\
1 0 8:1 / / rw,relatime - ext4 /dev/sda1 rw
22 1 0:21 / /sys rw,nosuid,nodev,noexec,relatime shared:7 - sysfs sysfs rw
30 22 0:26 / /sys/fs/cgroup rw - cgroup2 cgroup2 rw
"""


class Durations(unittest.TestCase):
    def test_format_round_trips(self) -> None:
        for us, text in ((0, "0"), (100, "100us"), (500, "500us"), (2000, "2ms"),
                         (1500, "1500us"), (3_000_000, "3s")):
            with self.subTest(us=us):
                self.assertEqual(mb.format_us(us), text)
                self.assertEqual(mb.parse.duration_us(text), us)
        self.assertEqual(mb.format_us(None), "default")

    def test_threshold_list(self) -> None:
        self.assertEqual(mb.parse_thresholds("0,100us,500us,2ms"), [0, 100, 500, 2000])
        self.assertEqual(mb.parse_thresholds("default, 1ms"), [None, 1000])
        for bad in ("0,,2ms", "1ms,1000us", "0,x", ""):
            with self.subTest(bad=bad), self.assertRaises(ValueError):
                mb.parse_thresholds(bad)


class Hpcc(unittest.TestCase):
    def test_grid(self) -> None:
        for n, pq in ((1, (1, 1)), (2, (1, 2)), (4, (2, 2)), (6, (2, 3)), (7, (1, 7)),
                      (12, (3, 4)), (64, (8, 8))):
            with self.subTest(n=n):
                self.assertEqual(mb.process_grid(n), pq)
        with self.assertRaises(ValueError):
            mb.process_grid(0)

    def template(self) -> str:
        if mb.HPCC_TEMPLATE.is_file():
            return mb.HPCC_TEMPLATE.read_text()
        return ("HPLinpack benchmark input file\nx\nHPL.out      output file name (if any)\n"
                "8            device out (6=stdout,7=stderr,file)\n"
                "1            # of problems sizes (N)\n1000         Ns\n1            # of NBs\n"
                "80           NBs\n0            PMAP process mapping (0=Row-,1=Column-major)\n"
                "1            # of process grids (P x Q)\n2            Ps\n2            Qs\n")

    def test_input_file(self) -> None:
        text = mb.hpccinf(self.template(), 600, 1, 2)
        lines = text.splitlines()
        self.assertEqual(lines[5].split(), ["600", "Ns"])
        self.assertEqual(lines[10].split(), ["1", "Ps"])
        self.assertEqual(lines[11].split(), ["2", "Qs"])
        self.assertEqual(len(lines), len(self.template().splitlines()))

    def test_foreign_template_refused(self) -> None:
        with self.assertRaises(ValueError):
            mb.hpccinf("nothing\nhere\n", 500, 1, 2)


class Probe(unittest.TestCase):
    def probe(self, mounts: str, rapl: bool = True) -> Dict[str, Any]:
        text = "host n1\ncpu  AMD EPYC\nncpu 2\nkernel 6.1\n"
        if rapl:
            text += "rapl /sys/class/powercap/intel-rapl:0\n"
        text += "".join("mount " + m + "\n" for m in mounts.splitlines())
        return mb.parse_probe(text)

    def test_fake_powercap_is_simulated(self) -> None:
        kind, why = mb.rapl_kind(self.probe(FUSE_MOUNTS))
        self.assertEqual(kind, "simulated")
        self.assertIn("fuse", why)

    def test_sysfs_powercap_is_real(self) -> None:
        self.assertEqual(mb.rapl_kind(self.probe(REAL_MOUNTS))[0], "real")

    def test_no_zone_or_no_probe(self) -> None:
        self.assertEqual(mb.rapl_kind(self.probe(REAL_MOUNTS, rapl=False))[0], "absent")
        self.assertEqual(mb.rapl_kind({})[0], "unknown")

    def test_longest_and_last_mount_wins(self) -> None:
        m = mb.parse_mountinfo(REAL_MOUNTS
                               + "60 22 0:40 / /sys/class/power\\040cap rw - tmpfs x rw\n"
                               "61 22 0:41 / /sys/class rw - overlay ov rw\n"
                               "62 22 0:42 / /sys/class rw - tmpfs later rw\n")
        self.assertEqual(mb.fs_of("/sys/class/powercap", m), ("tmpfs", "later"))
        self.assertEqual(mb.fs_of("/sys/class/power cap/x", m), ("tmpfs", "x"))
        self.assertEqual(mb.fs_of("/sysfoo", m), ("ext4", "/dev/sda1"))

    def test_time_and_env_files(self) -> None:
        self.assertEqual(mb.parse_time_file("t0=100.25 t1=101.75 rc=0\n"),
                         {"wall_s": 1.5, "rc": 0})
        self.assertEqual(mb.parse_time_file("t0=100,5 t1=101,0 rc=3"), {"wall_s": 0.5, "rc": 3})
        self.assertEqual(mb.parse_time_file("t0=5 rc=0"), {})
        self.assertEqual(mb.parse_time_file("t0=5 t1=4 rc=0"), {})
        self.assertEqual(mb.parse_env_file("MPI_PSTATE_MODE=on\nPATH=/bin\nMPI_PSTATE_X=a=b\n"
                                           f"{mb.SPANK_OPT}mpi_pstate=on\nSLURM_SPANK_X=1\n"),
                         {"MPI_PSTATE_MODE": "on", "MPI_PSTATE_X": "a=b",
                          f"{mb.SPANK_OPT}mpi_pstate": "on"})


class Summary(unittest.TestCase):
    def test_found_among_other_text(self) -> None:
        s, _ = mb.summary.find('site note mpi-pstate/1:{"v":1,"transitions":4} tail')
        self.assertEqual(s, {"v": 1, "transitions": 4})

    def test_refused(self) -> None:
        for text in ("", "mpi-pstate/1:{broken", 'mpi-pstate/2:{"v":1}', 'mpi-pstate/1:[1]'):
            with self.subTest(text=text):
                self.assertIsNone(mb.summary.find(text)[0])

    def test_metrics_from_summary_only(self) -> None:
        m = mb.record_metrics(None, {"v": 1, "mpi_share": 0.5, "down_share": 0.25,
                                     "transitions": 7, "energy": "ok", "energy_j": 10.0})
        self.assertEqual(m["record"], "admin_comment")
        self.assertEqual((m["mpi_share"], m["down_share"], m["transitions"]), (0.5, 0.25, 7))
        self.assertNotIn("long_calls", m)
        self.assertEqual(mb.record_metrics({"status": "none"}, None), {"record": None})


class Stats(unittest.TestCase):
    def test_plan_interleaves_and_rotates(self) -> None:
        vs = mb.variants("none", "on", [0, 100, 2000])
        p = [(r, v.key) for r, v in mb.plan(3, vs)]
        self.assertEqual(len(p), 12)
        self.assertEqual([k for _, k in p[0:4]], ["base", "t0", "t100us", "t2ms"])
        self.assertEqual([k for _, k in p[4:8]], ["base", "t100us", "t2ms", "t0"])
        self.assertEqual([k for _, k in p[8:12]], ["base", "t2ms", "t0", "t100us"])
        self.assertEqual([r for r, _ in p], [0] * 4 + [1] * 4 + [2] * 4)

    def test_variant_options(self) -> None:
        base, t0, dflt = mb.variants("none", "on", [0, None])
        self.assertEqual(base.sbatch_args(), [])
        self.assertEqual(t0.sbatch_args(), ["--mpi-pstate=on", "--mpi-pstate-threshold=0us"])
        self.assertEqual(dflt.sbatch_args(), ["--mpi-pstate=on"])
        self.assertEqual(mb.variants("profile", "on", [0])[0].sbatch_args(),
                         ["--mpi-pstate=profile"])


class FakeSlurm:
    """sbatch/squeue/sacct/scancel and `mpi-pstate report --json` for main().
    A job "runs" at submission: it writes the files the real job script
    writes, with a walltime and records chosen by the variant."""

    def __init__(self, mounts: str = FUSE_MOUNTS, agent: bool = True,
                 fail: Optional[set[int]] = None, record_delay: int = 0,
                 slurm_energy: Optional[float] = None, clamp_min_us: int = 0) -> None:
        self.clamp_min_us = clamp_min_us
        self.mounts, self.agent, self.fail = mounts, agent, fail or set()
        self.record_delay, self.slurm_energy = record_delay, slurm_energy
        self.jobs: Dict[int, Dict[str, Any]] = {}
        self.order: List[str] = []
        self.calls: List[List[str]] = []
        self.now = 0.0
        self.next_id = 100

    def clock(self) -> float:
        return self.now

    def sleep(self, s: float) -> None:
        self.now += s

    def cp(self, out: str = "", rc: int = 0) -> Any:
        import subprocess
        return subprocess.CompletedProcess([], rc, out, "")

    def run(self, argv: List[str], timeout: float = 60) -> Any:
        self.calls.append(list(argv))
        if argv[0] == "sbatch":
            return self.sbatch(argv)
        if argv[0] == "squeue":
            return self.cp("")
        if argv[0] == "scancel":
            return self.cp("")
        if argv[0] == "sacct":
            j = self.jobs[int(argv[argv.index("-j") + 1])]
            adm = ""
            if j["threshold"] is not None and j["n_report"] > self.record_delay:
                adm = "mpi-pstate/1:" + json.dumps(self.summary(j), separators=(",", ":"))
            energy = "" if self.slurm_energy is None else str(int(self.slurm_energy * j["wall"]))
            return self.cp(f"{j['id']}|{j['state']}|{j['exit']}|{int(j['wall'])}|{energy}|n1|"
                           f"{adm}\n")
        if argv[-3:-1] == ["report", "--json"]:
            j = self.jobs[int(argv[-1])]
            j["n_report"] += 1
            entry: Dict[str, Any] = {"raw": str(j["id"]), "status": "none"}
            if j["threshold"] is not None and j["n_report"] > self.record_delay:
                entry = {"raw": str(j["id"]), "status": "ok", "summary": self.summary(j),
                         "detail": self.detail(j)}
            return self.cp(json.dumps({"format": "mpi-pstate-report", "jobs": [entry]}))
        raise AssertionError(f"unexpected command {argv}")

    def sbatch(self, argv: List[str]) -> Any:
        d = Path(argv[argv.index("--chdir") + 1])
        opts = [a for a in argv if a.startswith("--mpi-pstate")]
        thr: Optional[int] = None
        for o in opts:
            if o.startswith("--mpi-pstate-threshold="):
                thr = mb.parse.duration_us(o.split("=", 1)[1])
        mode = next((o.split("=", 1)[1] for o in opts if o.startswith("--mpi-pstate=")), None)
        jid = self.next_id
        self.next_id += 1
        wall = 1.0 if mode is None else 1.0 + (0.1 if thr == 0 else 0.02)
        state, rc = ("FAILED", 1) if jid in self.fail else ("COMPLETED", 0)
        self.jobs[jid] = {"id": jid, "mode": mode, "threshold": thr if mode else None,
                          "wall": wall, "state": state, "exit": f"{rc}:0", "n_report": 0}
        self.order.append("base" if mode is None else f"t{mb.format_us(thr)}")
        assert (d / "job.sh").is_file()
        (d / mb.TIME_FILE).write_text(f"t0=1000.0 t1={1000.0 + wall} rc={rc}\n")
        env = "" if mode is None else (f"{mb.SPANK_OPT}mpi_pstate={mode}\n"
                                       f"{mb.SPANK_OPT}mpi_pstate_threshold={thr}us\n")
        # what the script exports reaches the job's environment, as in bash
        bind = re.search(r"^export SLURM_CPU_BIND=(\S+)$", (d / "job.sh").read_text(), re.M)
        if bind:
            env += f"SLURM_CPU_BIND={bind.group(1)}\n"
        (d / mb.ENV_FILE).write_text(env)
        (d / mb.PROBE_FILE).write_text(
            "host n1\ncpu AMD EPYC\nncpu 2\nkernel 6.1\nrapl /sys/class/powercap/intel-rapl:0\n"
            + "".join("mount " + m + "\n" for m in self.mounts.splitlines()))
        return self.cp(f"{jid}\n")

    def transitions(self, j: Dict[str, Any]) -> int:
        if not self.agent:
            return 0
        return {0: 200, 100: 100, 500: 40, 2000: 20}.get(j["threshold"], 10)

    def long_calls(self, j: Dict[str, Any]) -> int:
        return {0: 400, 100: 200, 500: 80, 2000: 40}.get(j["threshold"], 20)

    def summary(self, j: Dict[str, Any]) -> Dict[str, Any]:
        t = self.transitions(j)
        return {"v": 1, "state": "complete", "ranks": 2, "mpi_share": 0.5, "wait_s": 1.0,
                "down_s": t / 400, "down_share": t / 800, "transitions": t,
                "energy": "ok" if self.agent else "unknown",
                "energy_j": (100.0 - t / 10) if self.agent else None}

    def detail(self, j: Dict[str, Any]) -> Dict[str, Any]:
        t, lc = self.transitions(j), self.long_calls(j)
        rank = {"threshold_us": max(j["threshold"], self.clamp_min_us), "wall_s": 1.0,
                "mpi_s": 0.5, "wait_s": 0.5,
                "over_s": 0.5 * lc / 400, "down_s": t / 800, "transitions": t // 2,
                "long_calls": lc // 2, "calls": 1000}
        return {"ranks": [dict(rank, rank=0), dict(rank, rank=1)],
                "nodes": {"n1": {"steps": [{"step": "0", "agent": {"pid": 1} if self.agent
                                            else None}],
                                 "restore": {"status": "ok" if self.agent else "skipped",
                                             "why": None if self.agent else "no agent"},
                                 "settings": {"cpufreq": {"driver": "acpi-cpufreq",
                                                          "governors": ["performance"]}}}}}


class WholeRun(unittest.TestCase):
    def setUp(self) -> None:
        self.wd = Path(tempfile.mkdtemp(prefix="test_bench_eval."))
        self.addCleanup(shutil.rmtree, self.wd, True)

    def run_main(self, fake: FakeSlurm, *args: str, command: tuple[str, ...] = ("./app", "3"),
                 source: Optional[str] = None) -> tuple[int, str, str]:
        cl = mb.Cluster(["mpi-pstate"], run=fake.run, sleep=fake.sleep, clock=fake.clock)
        out, err = io.StringIO(), io.StringIO()
        warm = [] if "--warmup" in args else ["--warmup", "0"]
        argv = ["--workdir", str(self.wd / "w"), *warm, *args, "--", *command]
        with redirect_stdout(out), redirect_stderr(err):
            rc = mb.main(argv, cl, source=source)
        return rc, out.getvalue(), err.getvalue()

    def test_source_is_what_the_caller_knows(self) -> None:
        # an installed command knows no commit; the project's wrapper gives its checkout's
        _, out, _ = self.run_main(FakeSlurm(), "--reps", "1", "--thresholds", "0", "--json")
        self.assertIsNone(json.loads(out)["source"])
        _, out, _ = self.run_main(FakeSlurm(), "--reps", "1", "--thresholds", "0",
                                  source="abc1234")
        self.assertIn("source abc1234", out.splitlines()[0])

    def test_project_wrapper_stamps_the_checkout(self) -> None:
        spec = importlib.util.spec_from_file_location("bench_eval_run",
                                                      TOP / "bench" / "eval" / "run.py")
        assert spec and spec.loader
        run = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(run)
        seen: Dict[str, Any] = {}

        def fake_main(argv: List[str], source: Optional[str] = None) -> int:
            seen.update(argv=argv, source=source)
            return 0
        with mock.patch.object(run.evaluate, "main", fake_main):
            self.assertEqual(run.main(["--reps", "1"]), 0)
        self.assertEqual(seen, {"argv": ["--reps", "1"],
                                "source": run.checkout.source_version(TOP)})

    def test_json_interleaved_with_sweep(self) -> None:
        fake = FakeSlurm()
        rc, out, err = self.run_main(fake, "--reps", "2", "--json", "--partition", "debug",
                                     "--extra-sbatch-args", "-t 5 --comment 'a b'")
        self.assertEqual(rc, 0, err)
        self.assertEqual(fake.order, ["base", "t0", "t100us", "t500us", "t2ms",
                                      "base", "t100us", "t500us", "t2ms", "t0"])
        sb = [c for c in fake.calls if c[0] == "sbatch"]
        for c in sb:
            self.assertIn("--exclusive", c)
            self.assertEqual(c[c.index("-p") + 1], "debug")
            self.assertEqual(c[c.index("--comment") + 1], "a b")
            self.assertIn("--ntasks-per-node=2", c)
        self.assertFalse(any(a.startswith("--mpi-pstate") for a in sb[0]))
        res = json.loads(out)
        self.assertEqual(res["format"], "mpi-pstate-bench")
        rows = {r["variant"]: r for r in res["rows"]}
        self.assertEqual(list(rows), ["base", "t0", "t100us", "t500us", "t2ms"])
        self.assertAlmostEqual(rows["t0"]["wall_delta_pct"], 10.0, places=6)
        self.assertAlmostEqual(rows["t2ms"]["wall_delta_pct"], 2.0, places=6)
        self.assertIsNone(rows["base"]["wall_delta_pct"])
        self.assertEqual(rows["base"]["records"], 0)
        self.assertEqual(rows["t0"]["transitions"], 200)
        self.assertAlmostEqual(rows["t2ms"]["avoided_pct"], 90.0)
        self.assertEqual(rows["t2ms"]["avoided_basis"], "transitions")
        self.assertAlmostEqual(rows["t0"]["covered_pct"], 50.0)
        self.assertAlmostEqual(rows["t2ms"]["over_pct"], 10.0)
        self.assertAlmostEqual(rows["t0"]["mpi_wait_pct"], 50.0)
        self.assertTrue(rows["t0"]["agent"])
        self.assertEqual(res["sweep"], ["t0", "t100us", "t500us", "t2ms"])
        # simulated RAPL: never a real energy delta, and the baseline has none anyway
        for r in res["rows"]:
            self.assertIsNone(r["energy_delta_pct"])
        self.assertTrue(any("SIMULATED" in n for n in res["notes"]))
        self.assertEqual({r["rapl"] for r in res["runs"]}, {"simulated"})

    def test_warmup_not_counted(self) -> None:
        fake = FakeSlurm()
        rc, out, _ = self.run_main(fake, "--reps", "1", "--thresholds", "0", "--warmup", "2",
                                   "--json")
        self.assertEqual(rc, 0)
        self.assertEqual(fake.order, ["base", "base", "base", "t0"])
        res = json.loads(out)
        self.assertEqual([r["job"] for r in res["warmup_runs"]], [100, 101])
        self.assertEqual([r["job"] for r in res["runs"]], [102, 103])
        self.assertEqual(res["rows"][0]["runs"], 1)
        self.assertTrue((self.wd / "w" / "w02-base" / "job.sh").is_file())

    def test_text_table(self) -> None:
        rc, out, _ = self.run_main(FakeSlurm(), "--reps", "1", "--thresholds", "0,2ms")
        self.assertEqual(rc, 0)
        lines = out.splitlines()
        head = next(i for i, l in enumerate(lines) if l.startswith("variant"))
        for col in ("threshold", "runs", "wall s", "wall Δ%", "energy Δ%", "MPI wait %",
                    "clocked down %", "transitions"):
            self.assertIn(col, lines[head])
        base = lines[head + 2].split()
        self.assertEqual(base[0], "without")
        self.assertEqual(base[-1], "-")  # no record, so no transitions column value
        on0 = re.split(r"\s{2,}", lines[head + 3])
        self.assertEqual(on0[0], "on @ 0")
        self.assertEqual(on0[4], "+10.0%")
        self.assertEqual(on0[5], "+10..+10")
        self.assertEqual(on0[6], "n/a")
        self.assertEqual(on0[-1], "200")
        self.assertIn("threshold sweep", out)
        sweep = lines[next(i for i, l in enumerate(lines) if l.startswith("threshold  "))
                      + 3]
        self.assertTrue(sweep.startswith("2ms"), sweep)
        self.assertIn("90.0%", sweep)
        self.assertIn("SIMULATED", out)

    def test_markdown(self) -> None:
        rc, out, _ = self.run_main(FakeSlurm(), "--reps", "1", "--thresholds", "0,2ms",
                                   "--markdown")
        self.assertEqual(rc, 0)
        rows = [l for l in out.splitlines() if l.startswith("|")]
        self.assertEqual(rows[0].count("|"), 11)  # 10 columns
        self.assertEqual(rows[1], "| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: "
                                  "| ---: |")
        self.assertTrue(rows[2].startswith("| without | - | 1/1 |"))
        self.assertIn("| on @ 0 | 0 | 1/1 | 1.100 | +10.0% |", rows[3])
        self.assertEqual(len(rows), 3 + 2 + 2 + 2)  # table, then the sweep's own
        self.assertIn("\n* energy: RAPL is SIMULATED", out)

    def test_real_energy_with_profile_baseline(self) -> None:
        fake = FakeSlurm(mounts=REAL_MOUNTS)
        real_sbatch = fake.sbatch

        def sbatch(argv: List[str]) -> Any:  # the profile baseline records energy too
            r = real_sbatch(argv)
            j = fake.jobs[int(r.stdout)]
            if j["mode"] == "profile":
                j["threshold"] = -1
            return r
        fake.sbatch = sbatch  # type: ignore[method-assign]
        rc, out, err = self.run_main(fake, "--reps", "2", "--thresholds", "0",
                                     "--baseline", "profile", "--json")
        self.assertEqual(rc, 0, err)
        rows = {r["variant"]: r for r in json.loads(out)["rows"]}
        # profile baseline: 100 - 10/10 = 99 J; on @ 0: 100 - 200/10 = 80 J
        self.assertAlmostEqual(rows["t0"]["energy_delta_pct"], (80 / 99 - 1) * 100)
        self.assertIsNone(rows["t0"]["energy_delta_simulated_pct"])
        self.assertEqual(rows["base"]["records"], 2)
        notes = json.loads(out)["notes"]
        self.assertFalse(any(n.startswith("baseline:") for n in notes), notes)

    def test_slurm_energy_is_used_when_mpi_pstate_has_none(self) -> None:
        fake = FakeSlurm(mounts=REAL_MOUNTS, agent=False, slurm_energy=100.0)
        rc, out, _ = self.run_main(fake, "--reps", "1", "--thresholds", "0", "--json")
        self.assertEqual(rc, 0)
        res = json.loads(out)
        rows = {r["variant"]: r for r in res["rows"]}
        self.assertAlmostEqual(rows["t0"]["energy_delta_pct"], 10.0)

    def test_no_agent_sweep_falls_back_to_long_calls(self) -> None:
        rc, out, _ = self.run_main(FakeSlurm(agent=False), "--reps", "1", "--json",
                                   "--thresholds", "0,2ms")
        self.assertEqual(rc, 0)
        res = json.loads(out)
        rows = {r["variant"]: r for r in res["rows"]}
        self.assertEqual(rows["t0"]["transitions"], 0)
        self.assertFalse(rows["t0"]["agent"])
        self.assertAlmostEqual(rows["t2ms"]["avoided_pct"], 90.0)
        self.assertEqual(rows["t2ms"]["avoided_basis"], "long calls")
        self.assertTrue(any(n.startswith("agent: no node agent") for n in res["notes"]))

    def test_site_clamp_is_noted(self) -> None:
        rc, out, _ = self.run_main(FakeSlurm(clamp_min_us=100), "--reps", "1", "--json",
                                   "--thresholds", "0,2ms")
        self.assertEqual(rc, 0)
        res = json.loads(out)
        rows = {r["variant"]: r for r in res["rows"]}
        self.assertEqual(rows["t0"]["threshold_effective_us"], [100])
        self.assertEqual(rows["t2ms"]["threshold_effective_us"], [2000])
        clamp = [n for n in res["notes"] if n.startswith("threshold:")]
        self.assertEqual(len(clamp), 1, res["notes"])
        self.assertIn("on @ 0 asked for 0, the site ran 100us", clamp[0])

    def test_site_default_on_is_noted(self) -> None:
        fake = FakeSlurm()
        real_sbatch = fake.sbatch

        def sbatch(argv: List[str]) -> Any:  # a site whose default_mode is on
            r = real_sbatch(argv)
            j = fake.jobs[int(r.stdout)]
            if j["mode"] is None:
                j["threshold"] = 500
            return r
        fake.sbatch = sbatch  # type: ignore[method-assign]
        rc, out, _ = self.run_main(fake, "--reps", "1", "--thresholds", "0", "--json")
        self.assertEqual(rc, 0)
        notes = json.loads(out)["notes"]
        self.assertTrue(any(n.startswith("baseline: 1 baseline runs have") for n in notes), notes)

    def test_csv(self) -> None:
        rc, out, _ = self.run_main(FakeSlurm(), "--reps", "1", "--thresholds", "0,2ms", "--csv")
        self.assertEqual(rc, 0)
        rows = list(csv.DictReader(io.StringIO(out)))
        self.assertEqual([r["variant"] for r in rows], ["base", "t0", "t2ms"])
        self.assertEqual(rows[1]["transitions"], "200")
        self.assertEqual(rows[0]["wall_delta_pct"], "")

    def test_failed_job_is_reported_and_excluded(self) -> None:
        fake = FakeSlurm(fail={101})  # the first on run
        rc, out, _ = self.run_main(fake, "--reps", "2", "--thresholds", "0", "--json")
        self.assertEqual(rc, 1)
        res = json.loads(out)
        rows = {r["variant"]: r for r in res["rows"]}
        self.assertEqual((rows["t0"]["runs"], rows["t0"]["runs_ok"]), (2, 1))
        self.assertTrue(any(n.startswith("failed: job 101") for n in res["notes"]))

    def test_broken_workload_stops_after_first_repetition(self) -> None:
        fake = FakeSlurm(fail=set(range(100, 200)))
        real_sbatch = fake.sbatch

        def sbatch(argv: List[str]) -> Any:
            r = real_sbatch(argv)
            d = Path(argv[argv.index("--chdir") + 1])
            (d / f"slurm-{int(r.stdout)}.out").write_text("a\nb\nexecve(): ./app: No such file\n")
            return r
        fake.sbatch = sbatch  # type: ignore[method-assign]
        rc, out, err = self.run_main(fake, "--reps", "3", "--thresholds", "0,2ms", "--json")
        self.assertEqual(rc, 1)
        self.assertEqual(len(fake.order), 3)  # one repetition, not nine runs
        res = json.loads(out)
        self.assertIn("stopped after 3 of 9 runs", res["notes"])
        self.assertIn("first failure's output: a / b / execve(): ./app: No such file",
                      res["notes"])
        self.assertIn("No such file", err)

    def test_record_waited_for(self) -> None:
        fake = FakeSlurm(record_delay=3)
        rc, out, _ = self.run_main(fake, "--reps", "1", "--thresholds", "0", "--json")
        self.assertEqual(rc, 0)
        rows = {r["variant"]: r for r in json.loads(out)["rows"]}
        self.assertEqual(rows["t0"]["records"], 1)
        self.assertGreaterEqual(fake.jobs[101]["n_report"], 4)
        self.assertEqual(fake.jobs[100]["n_report"], 1)  # the baseline is not waited for

    def test_sbatch_refused(self) -> None:
        def run(argv: List[str], timeout: float = 60) -> Any:
            import subprocess
            return subprocess.CompletedProcess(argv, 1, "", "sbatch: unrecognized option")
        cl = mb.Cluster(["mpi-pstate"], run=run, sleep=lambda s: None)
        err = io.StringIO()
        with redirect_stderr(err), redirect_stdout(io.StringIO()):
            rc = mb.main(["--workdir", str(self.wd / "w"), "--", "./app"], cl)
        self.assertEqual(rc, 1)
        self.assertIn("unrecognized option", err.getvalue())

    def test_usage_errors(self) -> None:
        for args in (["--thresholds", "1ms,1000us"], ["--reps", "0"], ["--thresholds", "5x"]):
            with self.subTest(args=args), redirect_stderr(io.StringIO()), \
                    self.assertRaises(SystemExit) as cm:
                mb.main(args + ["--", "./app"], mb.Cluster(None))
            self.assertEqual(cm.exception.code, 2)

    def scripts(self, fake: FakeSlurm) -> Dict[str, str]:
        """The job script each variant ran, by variant (the last of each)."""
        out = {}
        for c in fake.calls:
            if c[0] == "sbatch":  # the run directory is r<rep>-<variant>
                out[Path(c[-1]).parent.name.split("-", 1)[1]] = Path(c[-1]).read_text()
        return out

    def test_every_run_is_placed_alike_by_default(self) -> None:
        """The baseline (no --mpi-pstate) and the on runs get the same
        explicit binding, so mpi-pstate keeps Slurm's placement in the on
        runs (docs/pinning.md) and the delta is the clocking down alone."""
        for baseline in ("none", "profile"):
            with self.subTest(baseline=baseline):
                fake = FakeSlurm()
                rc, out, err = self.run_main(fake, "--reps", "1", "--thresholds", "0,2ms",
                                             "--baseline", baseline, "--json")
                self.assertEqual(rc, 0, err)
                scripts = self.scripts(fake)
                self.assertEqual(sorted(scripts), ["base", "t0", "t2ms"])
                for key, text in scripts.items():
                    binds = re.findall(r"^export SLURM_CPU_BIND=(\S+)$", text, re.M)
                    self.assertEqual(binds, ["cores"], (key, text))
                    # before the launcher starts, outside the timed part
                    self.assertLess(text.index("export SLURM_CPU_BIND"),
                                    text.index("t0=$EPOCHREALTIME"))
                res = json.loads(out)
                self.assertEqual(res["config"]["placement"], "cores")
                self.assertIn("cores in every run", res["config"]["placement_label"])
                self.assertEqual({r["variant"]: r["cpu_bind"] for r in res["runs"]},
                                 {"base": "cores", "t0": "cores", "t2ms": "cores"})
                self.assertFalse(any(n.startswith("placement:") for n in res["notes"]))
        _, out, _ = self.run_main(FakeSlurm(), "--reps", "1", "--thresholds", "0")
        self.assertIn("placement cores in every run (SLURM_CPU_BIND=cores)",
                      out.splitlines()[0])

    def test_placement_none_unbinds_every_run(self) -> None:
        fake = FakeSlurm()
        rc, out, _ = self.run_main(fake, "--reps", "1", "--thresholds", "0",
                                   "--placement", "none", "--json")
        self.assertEqual(rc, 0)
        for key, text in self.scripts(fake).items():
            self.assertIn("\nexport SLURM_CPU_BIND=none\n", text, key)
        self.assertEqual({r["cpu_bind"] for r in json.loads(out)["runs"]}, {"none"})

    def test_native_placement_is_today_and_says_what_it_mixes(self) -> None:
        fake = FakeSlurm()
        rc, out, _ = self.run_main(fake, "--reps", "1", "--thresholds", "0",
                                   "--placement", "native", "--json")
        self.assertEqual(rc, 0)
        for key, text in self.scripts(fake).items():
            self.assertNotIn("export SLURM_CPU_BIND", text, key)
        res = json.loads(out)
        self.assertEqual({r["cpu_bind"] for r in res["runs"]}, {None})
        self.assertIn("mpi-pstate's own pinning", res["config"]["placement_label"])
        mixed = [n for n in res["notes"] if n.startswith("placement: native")]
        self.assertEqual(len(mixed), 1, res["notes"])
        self.assertIn("mixes the effect of pinning", mixed[0])
        # profile never pins: nothing is mixed, and nothing is said
        _, out, _ = self.run_main(FakeSlurm(), "--reps", "1", "--thresholds", "0",
                                  "--placement", "native", "--mode", "profile", "--json")
        self.assertFalse(any(n.startswith("placement:") for n in json.loads(out)["notes"]))

    def test_launcher_binding_is_named(self) -> None:
        self.assertEqual(mb.launcher_binding(["srun", "--cpu-bind=map_cpu:0,1"]),
                         "--cpu-bind=map_cpu:0,1")
        self.assertEqual(mb.launcher_binding(["srun", "--cpu-bind", "none"]), "--cpu-bind=none")
        self.assertIsNone(mb.launcher_binding(["srun", "--mpi=pmix"]))
        rc, out, _ = self.run_main(FakeSlurm(), "--reps", "1", "--thresholds", "0", "--json",
                                   "--launcher", "srun --mpi=pmix --cpu-bind=rank")
        self.assertEqual(rc, 0)
        c = json.loads(out)["config"]
        self.assertEqual(c["launcher_cpu_bind"], "--cpu-bind=rank")
        self.assertEqual(c["placement_label"], "the launcher's --cpu-bind=rank in every run")

    def test_placement_usage(self) -> None:
        with redirect_stderr(io.StringIO()), self.assertRaises(SystemExit) as cm:
            mb.main(["--placement", "map_cpu", "--", "./app"], mb.Cluster(None))
        self.assertEqual(cm.exception.code, 2)

    def test_job_script(self) -> None:
        s = mb.job_script("on @ 0", 0, ["srun", "--mpi=pmix", "./my app", "$HOME"])
        self.assertIn("srun --mpi=pmix './my app' '$HOME'\n", s)
        self.assertIn("/proc/self/mountinfo", s)
        self.assertLess(s.index(mb.PROBE_FILE), s.index("t0=$EPOCHREALTIME"))
        self.assertTrue(s.startswith("#!/bin/bash\n"))
        self.assertIn("\nexport SLURM_CPU_BIND=cores\n", s)  # the default placement
        self.assertNotIn("export SLURM_CPU_BIND",
                         mb.job_script("on @ 0", 0, ["./app"], placement="native"))


if __name__ == "__main__":
    unittest.main()
