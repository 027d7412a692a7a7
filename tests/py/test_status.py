# SPDX-License-Identifier: BSD-3-Clause
"""`mpi-pstate status` on a fake runtime directory: restore records (the
layout of common/restore.c's records), node records waiting in pending/
(pending.py's names), step directories with plugin.json and agent.pid (as
the plugin writes them, test_epilog_fixtures.plugin_json), an agent that
runs (a copy of sleep named as the agent, as test_metrics.py does), and a
fake squeue first on PATH.  The command runs as the installed script does
(-I, the C locale, PATH only), so that a traceback or a name the locale
cannot print would show; its text, its JSON, its exit status, the failure
count the node Epilog keeps, and hostile runtime directories: a symlink, a
huge file, a file not root's, 10000 files, names with newlines and bytes
that are not UTF-8.  Runs on Python 3.6 too (test_python36_real.py)."""
import argparse
import io
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import unittest
from pathlib import Path
from typing import Any, Dict, List, Optional, Tuple
from unittest import mock

import test_epilog_fixtures as fx
from mpi_pstate.core import layout, log
from mpi_pstate.site import failcount, metrics, status

TOP = Path(__file__).resolve().parents[2]
CLI = TOP / "epilog" / "mpi-pstate"
MAN = TOP / "man" / "mpi-pstate-epilog.8"
NOBODY = 65534
RECORD = ("version=1\njob={job}\nstep={step}\npolicy={name}\ndriver=acpi-cpufreq\n"
          "governor=performance\nmin_khz=1200000\nmax_khz=3000000\nsetspeed_khz=0\n")
UNCORE = "version=1\njob={job}\nstep={step}\nuncore={dom}\nmin_khz=800000\nmax_khz=2400000\n"


class Status(unittest.TestCase):
    def setUp(self) -> None:
        self._td = tempfile.TemporaryDirectory()
        self.tmp = Path(self._td.name)
        os.chmod(self.tmp, 0o755)
        self.runtime = self.tmp / "run"
        self.bin = self.tmp / "bin"
        self.bin.mkdir()
        self.cgroups = self.tmp / "cgroup"
        self.cgroups.mkdir()
        self.squeue("")
        self.agent = self.tmp / "mpi-pstate-agent"
        shutil.copy2(shutil.which("sleep") or "/bin/sleep", self.agent)

    def tearDown(self) -> None:
        self._td.cleanup()

    # ---- the fake node

    def squeue(self, lines: str, rc: int = 0) -> None:
        """squeue -h -t all -o '%A %T' as slurmctld would answer it."""
        out = self.tmp / "squeue.out"
        out.write_text(lines)
        sq = self.bin / "squeue"
        sq.write_text(f"#!/bin/sh\ncat {out}\n" + (f"echo 'slurm_load_jobs error: Unable to "
                                                    f"contact slurm controller' >&2\n"
                                                    f"exit {rc}\n" if rc else ""))
        sq.chmod(0o755)

    def dir(self, rel: str) -> Path:
        d = self.runtime / rel
        d.mkdir(parents=True, exist_ok=True, mode=0o700)
        return d

    def record(self, name: str, job: int, step: int = 0, text: Optional[str] = None) -> Path:
        p = self.dir("restore") / name
        if text is None:
            text = UNCORE.format(job=job, step=step, dom=name[len("uncore-"):]) \
                if name.startswith("uncore-") else RECORD.format(job=job, step=step, name=name)
        p.write_bytes(text.encode("latin-1"))
        p.chmod(0o600)
        return p

    def waiting(self, job: int, node: str = "n1") -> Path:
        p = self.dir("pending") / f"{job}.{node}.json"
        p.write_bytes(noderec_bytes(job, node))
        p.chmod(0o600)
        return p

    def step(self, job: int, step: str, pid: Optional[int]) -> Path:
        d = fx.plugin_json(self.runtime, job, step, None)
        if pid is not None:
            (d / "agent.pid").write_text(f"{pid}\n")
        return d

    def live_agent(self) -> int:
        proc = subprocess.Popen([str(self.agent), "60"])
        self.addCleanup(proc.wait)
        self.addCleanup(proc.kill)
        return proc.pid

    def dead_pid(self) -> int:
        proc = subprocess.Popen(["true"])
        proc.wait()
        return proc.pid

    # ---- the command

    def run_status(self, *args: str, agent: bool = True) -> Tuple[int, str, str]:
        env = {"PATH": f"{self.bin}:/usr/sbin:/usr/bin:/sbin:/bin", "LC_ALL": "C"}
        if agent:
            env["MPI_PSTATE_AGENT"] = str(self.agent)
        r = subprocess.run([sys.executable, "-I", str(CLI), "status", "--runtime-dir",
                            str(self.runtime), "--slurm-conf", str(self.tmp / "none.conf"),
                            "--cgroup-root", str(self.cgroups)] + list(args),
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                           universal_newlines=True, timeout=120, env=env)
        self.assertNotIn("Traceback", r.stderr)
        return r.returncode, r.stdout, r.stderr

    def status_json(self, **kw: Any) -> Tuple[int, Dict[str, Any]]:
        rc, out, err = self.run_status("--json", **kw)
        self.assertEqual(err, "")
        s = json.loads(out)
        self.assertEqual((s["format"], s["version"], s["exit"]), ("mpi-pstate-status", 1, rc))
        return rc, s

    def problem_lines(self, out: str) -> List[str]:
        return [line for line in out.splitlines() if line.startswith(("problem:", "ATTENTION:"))]

    # ---- all well

    def test_a_node_that_ran_nothing_is_well(self) -> None:
        rc, out, err = self.run_status()
        self.assertEqual((rc, err), (0, ""))
        self.assertIn("restore records:  0\n", out)
        self.assertIn("restore failures: 0 since boot\n", out)
        self.assertTrue(out.endswith("status:           ok\n"), out)
        rc, s = self.status_json()
        self.assertEqual((s["restore_records"], s["pending"], s["steps"], s["attention"],
                          s["problems"], s["status"]), ([], [], [], [], [], "ok"))
        self.assertEqual(s["restore_failures"]["since_boot"], 0)
        self.assertIsNone(s["jobs_known"])  # nothing to ask squeue about: not asked

    def test_a_running_steps_records_are_held_not_reported(self) -> None:
        pid = self.live_agent()
        self.step(4243, "0", pid)
        self.record("policy10", 4243)
        self.record("policy2", 4243)
        self.record("uncore-package_00_die_00", 4243)
        self.squeue("", rc=1)  # not asked: the agent shows the job runs
        rc, s = self.status_json()
        self.assertEqual(rc, 0, s)
        self.assertEqual(s["agents_running"], 1)
        self.assertEqual(s["steps"], [{"job": 4243, "step": "0", "pid": pid, "alive": True,
                                       "job_running": True}])
        self.assertEqual([(r["name"], r["kind"], r["job"], r["step"], r["job_running"])
                          for r in s["restore_records"]],
                         [("policy2", "cpufreq", 4243, "0", True),
                          ("policy10", "cpufreq", 4243, "0", True),  # in the numbers' order
                          ("uncore-package_00_die_00", "uncore", 4243, "0", True)])
        rc, out, _ = self.run_status()
        self.assertIn(f"  job 4243 step 0      agent pid {pid:<8} running, job running\n", out)
        self.assertNotIn("LEFT", out)

    # ---- what needs the admin

    def test_a_record_of_a_finished_job_needs_the_admin(self) -> None:
        self.record("policy3", 4242)
        self.record("policy5", 4242, 0xFFFFFFFB)  # the batch step's number
        self.step(4242, "0", self.dead_pid())
        self.step(4244, "batch", None)
        self.waiting(4240)
        self.squeue("4242 COMPLETED\n4244 RUNNING\n")
        rc, s = self.status_json()
        self.assertEqual(rc, 1)
        self.assertEqual((s["status"], s["jobs_known"], s["agents_running"]),
                         ("attention", True, 0))
        self.assertEqual([(r["name"], r["job"], r["step"], r["job_running"], r["problem"])
                          for r in s["restore_records"]],
                         [("policy3", 4242, "0", False, None),
                          ("policy5", 4242, "batch", False, None)])
        self.assertEqual([(x["job"], x["step"], x["alive"], x["job_running"])
                          for x in s["steps"]],
                         [(4242, "0", False, False), (4244, "batch", False, True)])
        self.assertIsNone(s["steps"][1]["pid"])
        self.assertEqual([(p["name"], p["job"], p["node"], p["problem"]) for p in s["pending"]],
                         [("4240.n1.json", 4240, "n1", None)])
        self.assertGreater(s["pending"][0]["bytes"], 0)
        self.assertEqual(len(s["attention"]), 2)
        rc, out, _ = self.run_status()
        self.assertEqual(rc, 1)
        self.assertRegex(out, r"\n  policy3 +job 4242 step 0 +cpufreq +job not running: LEFT\n")
        self.assertIn("pending records:  1 (node records waiting", out)
        self.assertIn(f"ATTENTION: restore record policy3 of job 4242, which no longer runs: "
                      f"put it back with mpi-pstate-agent --restore {self.runtime}/restore "
                      "--job 4242\n", out)
        self.assertIn("  job 4244 step batch  no agent, job running\n", out)
        self.assertTrue(out.endswith("status:           needs the admin\n"), out)

    def test_failures_since_boot_with_the_last_error(self) -> None:
        self.dir("")
        failcount.note_epilog(str(self.runtime), 4242, 1, {
            "status": "failed", "rc": 1, "message": "mpi-pstate-agent: restore /run/mpi-pstate/"
            "restore: 0 restored, 0 foreign, 1 failed: policy3: reading current settings: No "
            "such file or directory"}, [])
        failcount.note_epilog(str(self.runtime), 4250, 0, {"status": "ok"}, [])  # nothing failed
        failcount.note_epilog(str(self.runtime), 4251, 2, {"status": "ok"}, [
            "step 0 agent: nothing", "step 1 agent: policy7: restore failed: Input/output error "
            "(the record stays for the backstop)\nATTENTION: forged"])
        st = (self.runtime / layout.FAILURES_FILE).stat()
        self.assertEqual((st.st_uid, st.st_mode & 0o777), (0, 0o600))
        rc, s = self.status_json()
        self.assertEqual(rc, 1)
        f = s["restore_failures"]
        self.assertEqual((f["since_boot"], f["source"], f["last_job"]),
                         (3, layout.FAILURES_FILE, 4251))
        self.assertEqual(f["last_error"], "step 1 agent: policy7: restore failed: Input/output "
                         "error (the record stays for the backstop)\\nATTENTION: forged")
        self.assertIsInstance(f["last_time"], float)
        rc, out, _ = self.run_status()
        self.assertIn("restore failures: 3 since boot; last: job 4251 at ", out)
        self.assertIn("ATTENTION: 3 restore failures since boot: once dealt with, mpi-pstate "
                      "status --ack\n", out)
        self.assertNotIn("\nATTENTION: forged", out)  # a message is one line, escaped
        # after a reboot the count starts again
        with mock.patch.object(metrics, "boot_time", lambda proc="/proc": 1):
            self.assertEqual(failcount.read_failures(str(self.runtime), 1, [])["since_boot"], 0)
            failcount.note_failures(str(self.runtime), 4300, 1, "x")
            self.assertEqual(failcount.read_failures(str(self.runtime), 1, [])["since_boot"], 1)

    def test_acknowledged_failures_need_the_admin_no_more(self) -> None:
        self.dir("")
        failcount.note_failures(str(self.runtime), 4242, 2, "policy3: EIO")
        rc, out, err = self.run_status("--ack")
        self.assertEqual((rc, err), (0, ""), out)
        self.assertIn("restore failures: 2 since boot (2 acknowledged); last: job 4242 at ", out)
        self.assertTrue(out.endswith("status:           ok\n"), out)
        failcount.note_failures(str(self.runtime), 4243, 1, "policy4: EIO")  # a new one
        rc, s = self.status_json()
        self.assertEqual((rc, s["restore_failures"]["since_boot"],
                          s["restore_failures"]["acknowledged"]), (1, 3, 2))
        self.assertEqual(s["attention"], ["1 restore failure since boot (and 2 acknowledged): "
                                          "once dealt with, mpi-pstate status --ack"])

    def test_acknowledging_metrics_json_s_count(self) -> None:
        """Where only metrics.json counts (metrics_dir= set), --ack keeps
        its count, and a later failure counted there needs the admin again."""
        self.dir("")
        metrics.node_failures(str(self.runtime), 2)
        self.assertEqual(self.run_status("--ack")[0], 0)
        self.assertEqual(json.loads((self.runtime / layout.FAILURES_FILE).read_text())["acked"],
                         2)
        metrics.node_failures(str(self.runtime), 1)
        rc, s = self.status_json()
        self.assertEqual((rc, s["restore_failures"]["since_boot"],
                          s["restore_failures"]["source"]), (1, 3, layout.NODE_STATE_FILE))

    def test_the_backstop_message_is_the_error_kept(self) -> None:
        self.assertEqual(failcount.epilog_error({"status": "failed", "message": "policy3: EIO"},
                                             ["step 0 agent: policy1: restore failed: x"]),
                         "restore backstop failed: policy3: EIO")
        self.assertEqual(failcount.epilog_error({"status": "ok"}, ["step 0 agent: policy1: restore "
                                                                "failed: x", "other"]),
                         "step 0 agent: policy1: restore failed: x")
        self.assertIsNone(failcount.epilog_error({"status": "ok"}, []))

    def test_metrics_json_counts_where_the_epilog_kept_no_file(self) -> None:
        self.dir("")
        metrics.node_failures(str(self.runtime), 2)  # what the Epilog writes with metrics_dir=
        rc, s = self.status_json()
        self.assertEqual(rc, 1)
        self.assertEqual((s["restore_failures"]["since_boot"], s["restore_failures"]["source"],
                          s["restore_failures"]["last_error"]), (2, layout.NODE_STATE_FILE, None))

    def test_counting_never_fails_the_epilog(self) -> None:
        (self.tmp / "elsewhere").mkdir()
        self.runtime.symlink_to(self.tmp / "elsewhere")
        err = io.StringIO()
        with mock.patch.object(log, "_stream", [err]):
            failcount.note_epilog(str(self.runtime), 1, 1, {"status": "failed"}, [])
            failcount.note_epilog(str(self.tmp / "missing"), 1, 1, {"status": "failed"}, [])
        self.assertEqual(os.listdir(self.tmp / "elsewhere"), [])
        self.assertEqual(err.getvalue().count("warning: mpi-pstate: restore failures not "
                                              "counted in "), 2, err.getvalue())

    # ---- what cannot be told

    def test_squeue_failing_leaves_the_job_unknown(self) -> None:
        self.record("policy3", 4242)
        self.squeue("", rc=1)
        rc, s = self.status_json()
        self.assertEqual((rc, s["status"], s["jobs_known"]), (2, "unknown", False))
        self.assertIsNone(s["restore_records"][0]["job_running"])
        self.assertRegex(s["problems"][0], r"^which jobs run is not known \(squeue: "
                         r"slurm_load_jobs error")
        rc, out, _ = self.run_status()
        self.assertIn("cpufreq  job ?\n", out)
        self.assertTrue(out.endswith("status:           not all could be read\n"), out)

    def test_a_running_pid_without_a_known_agent(self) -> None:
        """No agent found (not installed, refused): a pid that runs may be
        the agent, one that does not is none."""
        alive = status.agent_alive(None)
        self.assertEqual((alive(os.getpid()), alive(self.dead_pid())), (None, False))
        self.step(4243, "0", os.getpid())
        s = status.gather(str(self.runtime), alive, lambda: {4243}, str(self.cgroups), "n1")
        self.assertEqual((s["exit"], s["steps"][0]["alive"], s["agents_running"]), (2, None, 0))
        self.assertIn("mpi-pstate-agent is not found", s["problems"][-1])

    def test_a_pid_file_naming_another_process_is_no_agent(self) -> None:
        self.step(4243, "0", os.getpid())
        self.squeue("4243 COMPLETED\n")
        rc, s = self.status_json()
        self.assertEqual((rc, s["agents_running"], s["steps"][0]["alive"]), (0, 0, False))

    # ---- hostile runtime directories

    def test_hostile_restore_records_are_named_problems(self) -> None:
        self.record("policy1", 4242)
        (self.runtime / "restore" / "policy2").symlink_to("/etc/shadow")
        big = self.record("policy3", 4242, text="version=1\n" + "x" * (1 << 20))
        self.assertGreater(big.stat().st_size, status.RECORD_MAX_BYTES)
        theirs = self.record("policy4", 4242)
        os.chown(theirs, NOBODY, -1)
        loose = self.record("policy5", 4242)
        loose.chmod(0o666)
        os.mkfifo(str(self.runtime / "restore" / "policy6"), 0o600)
        self.record("policy7", 4242, text="version=9\njob=4242\nstep=0\npolicy=policy7\n")
        self.record("policy8", 4242, text="version=1\njob=04242\nstep=0\npolicy=policy8\n")
        self.record("policy9", 4242, text="\xff\xfe")
        self.record("evil\nATTENTION: all is well", 4242)
        os.close(os.open(os.path.join(os.fsencode(self.runtime / "restore"), b"bad\xff"),
                         os.O_CREAT | os.O_WRONLY, 0o600))
        self.squeue("4242 RUNNING\n")
        rc, out, err = self.run_status()
        self.assertEqual((rc, err), (1, ""))
        want = {"policy2": "is a symlink", "policy3": f"more than {status.RECORD_MAX_BYTES}",
                "policy4": f"owned by uid {NOBODY}", "policy5": "writable by group or others",
                "policy6": "not a regular file (a FIFO)", "policy7": "record version 9",
                "policy8": "is not a number", "policy9": "not ASCII text",
                "evil\\nATTENTION: all is well": "not a restore record's name",
                "bad\\xff": "not a restore record's name"}
        for name, why in want.items():
            with self.subTest(record=name):
                self.assertRegex(out, re.escape(f"\n  {name}") + r" +PROBLEM: .*" +
                                 re.escape(why))
                self.assertIn(f"ATTENTION: restore record {name}: ", out)
        self.assertNotIn("\nATTENTION: all is well", out)
        self.assertRegex(out, r"\n  policy1 +job 4242 step 0 +cpufreq +job running\n")
        rc, s = self.status_json()
        self.assertEqual(len(s["restore_records"]), 11)
        self.assertEqual(sum(1 for r in s["restore_records"] if r["problem"]), 10)

    def test_ten_thousand_files_are_looked_at_up_to_the_bound(self) -> None:
        d = self.dir("restore")
        text = RECORD.format(job=4242, step=0, name="policy0").encode()
        for i in range(10000):
            fd = os.open(str(d / f"policy{i}"), os.O_CREAT | os.O_WRONLY, 0o600)
            os.write(fd, text)
            os.close(fd)
        self.squeue("4242 RUNNING\n")
        rc, s = self.status_json()
        self.assertEqual(len(s["restore_records"]), status.MAX_ENTRIES)
        self.assertIn(f"restore/: more than {status.MAX_ENTRIES} entries; the rest not looked "
                      "at", s["problems"])
        self.assertEqual(rc, 2)
        rc, out, _ = self.run_status()
        self.assertIn(f"restore records:  {status.MAX_ENTRIES}\n", out)
        self.assertIn(f"  ... {status.MAX_ENTRIES - status.TEXT_LINES} more (--json lists them "
                      "all)\n", out)
        self.assertLess(len(out.splitlines()), 3 * status.TEXT_LINES)

    def test_a_symlinked_runtime_dir_is_refused(self) -> None:
        real = self.tmp / "real"
        (real / "restore").mkdir(parents=True)
        (real / "restore" / "policy1").write_text(RECORD.format(job=1, step=0, name="policy1"))
        self.runtime.symlink_to(real)
        rc, out, err = self.run_status()
        self.assertEqual((rc, err), (1, ""))
        self.assertRegex(out, r"ATTENTION: runtime_dir .* refused: .*symlink")
        self.assertIn("restore records:  0\n", out)

    def test_a_runtime_dir_not_roots_is_refused(self) -> None:
        self.dir("restore")
        os.chown(self.runtime, NOBODY, -1)
        rc, s = self.status_json()
        self.assertEqual((rc, s["restore_failures"]), (1, None))
        self.assertRegex(s["attention"][0], f"owned by uid {NOBODY}")

    def test_hostile_steps_and_pending(self) -> None:
        self.step(4242, "0", None)
        (self.runtime / "steps" / "4242.0" / "agent.pid").write_text("1\n2\n")
        self.step(4242, "1", None)
        (self.runtime / "steps" / "4242.1" / "agent.pid").write_bytes(b"7" * 100)
        self.step(4242, "2", 1)
        os.chown(self.runtime / "steps" / "4242.2" / "agent.pid", NOBODY, -1)
        self.step(4242, "3", 1)
        os.chown(self.runtime / "steps" / "4242.3", NOBODY, -1)
        os.chmod(self.runtime / "steps" / "4242.3", 0o755)
        (self.tmp / "away").mkdir()
        (self.runtime / "steps" / "4242.4").symlink_to(self.tmp / "away")
        (self.runtime / "steps" / "junk").mkdir()  # not a step directory's name: not looked at
        p = self.waiting(4240)
        os.chown(p, NOBODY, -1)
        (self.runtime / "pending" / "4241.n1.json").symlink_to("/etc/passwd")
        (self.runtime / "pending" / "notes.txt").write_text("not one of ours")
        self.squeue("4242 RUNNING\n")
        rc, out, err = self.run_status()
        self.assertEqual((rc, err), (2, ""))
        problems = self.problem_lines(out)
        for line in ("problem: steps/4242.0/agent.pid: agent.pid holds no process id",
                     "problem: steps/4242.1/agent.pid: 100 bytes, more than 64",
                     f"problem: steps/4242.2/agent.pid: owned by uid {NOBODY}",
                     f"problem: steps/4242.3: not root's alone (uid {NOBODY}, mode 0755): "
                     "not read",
                     "problem: steps/4242.4: is a symlink: not read"):
            self.assertIn(line, problems)
        self.assertIn(f"  4240.n1.json             job 4240: PROBLEM: owned by uid {NOBODY}: "
                      "never delivered\n", out)
        self.assertIn("  4241.n1.json             job 4241: PROBLEM: not a regular file: never "
                      "delivered\n", out)
        self.assertNotIn("notes.txt", out)
        self.assertNotIn("junk", out)

    def test_not_root(self) -> None:
        err = io.StringIO()
        with mock.patch.object(os, "geteuid", lambda: 1000), mock.patch.object(sys, "stderr", err):
            rc = status.run(argparse.Namespace(runtime_dir=str(self.runtime), slurm_conf=None,
                                               json=False, cgroup_root=str(self.cgroups),
                                               proc="/proc"), [])
        self.assertEqual(rc, 2)
        self.assertEqual(err.getvalue(), "mpi-pstate status: run it as root (the runtime "
                         "directory is root's)\n")

    # ---- documented

    def test_every_json_field_is_documented(self) -> None:
        """The man page's status section names every field of a full
        object, and no field the object lacks."""
        self.record("policy3", 4242)
        self.step(4242, "0", None)
        self.waiting(4240)
        self.dir("")
        failcount.note_failures(str(self.runtime), 4242, 1, "x")
        self.squeue("4242 COMPLETED\n")
        _, s = self.status_json()
        fields = set()
        for k, v in s.items():
            fields.add(k)
            if isinstance(v, dict):
                fields |= {f"{k}.{kk}" for kk in v}
            if isinstance(v, list) and v and isinstance(v[0], dict):
                fields |= {f"{k}[].{kk}" for kk in v[0]}
        man = MAN.read_text(encoding="utf-8").replace("\\-", "-").replace("\\&", "")
        section = man[man.index("\n.SH STATUS\n"):]
        section = section[:section.index("\n.SH ", 1)]
        documented = set(re.findall(r"^\.B ([a-z_]+(?:\[\])?(?:\.[a-z_]+)?)$", section, re.M))
        self.assertEqual(fields - documented, set(), "fields missing from the man page")
        self.assertEqual(documented - fields, set(), "documented fields the object lacks")


def noderec_bytes(job: int, node: str) -> bytes:
    from mpi_pstate.core import noderecord
    return noderecord.encode(fx.node_record(job, node, [fx.rank(node, 0)]))


if __name__ == "__main__":
    unittest.main()
