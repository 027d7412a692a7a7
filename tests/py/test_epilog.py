# SPDX-License-Identifier: BSD-3-Clause
"""Node side of the epilog tooling, without a cluster: strict parsers,
hostile-safe file access, the plugstack reader, the node audit on fake sysfs
trees, per-rank figures from real segments (written with preload's slot
module), the node record and its validation, and the whole node Epilog run
against planted hostile files."""
import argparse
import io
import json
import os
import re
import shutil
import stat
import struct
import subprocess
import tempfile
import time
import unittest
from pathlib import Path
from typing import Dict
from unittest import mock

import test_epilog_fixtures as fx
from mpi_pstate.core import (audit, layout, log, noderecord, parse, plugincheck, safeio, siteconf,
                             steprecords)
from mpi_pstate.site import node_epilog, pending, rankfigures

slotlib = fx.slotlib
NOBODY = 65534
BUILD = Path(os.environ.get("MPI_PSTATE_BUILD", Path(__file__).resolve().parents[2] / "build"))


class Parsers(unittest.TestCase):
    def test_u64_strict(self) -> None:
        self.assertEqual(parse.u64(" 42\n"), 42)
        for bad in ("", "-1", "0x10", "1e3", "4 2", "12a", "+5"):
            with self.subTest(bad=bad), self.assertRaises(ValueError):
                parse.u64(bad)
        with self.assertRaises(ValueError):
            parse.u64("11", 0, 10)

    def test_freq_and_duration(self) -> None:
        self.assertEqual(parse.freq_khz("1.2GHz"), 1200000)
        self.assertEqual(parse.freq_khz("800MHz"), 800000)
        self.assertEqual(parse.freq_khz("1200000"), 1200000)
        self.assertEqual(parse.duration_us("1.5ms"), 1500)
        self.assertEqual(parse.duration_us("2s"), 2000000)
        for bad in ("1.2THz", "1.0000001GHz", "fast"):
            with self.assertRaises(ValueError):
                parse.freq_khz(bad)
        for bad in ("0.5us", "2 days", "86401s"):
            with self.assertRaises(ValueError):
                parse.duration_us(bad)

    def test_job_ids(self) -> None:
        self.assertEqual(parse.job_id("4242"), 4242)
        for bad in ("0", "042", "4242_1", "4294967296", "-1", "12 3", "../1"):
            with self.subTest(bad=bad), self.assertRaises(ValueError):
                parse.job_id(bad)
        for ok in ("4242", "4242_3", "4242_[1-3,7]"):
            self.assertEqual(parse.job_spec(ok), ok)
        for bad in ("4242;rm", "a", "4242_", "4242_[x]"):
            with self.assertRaises(ValueError):
                parse.job_spec(bad)

    def test_hostlists(self) -> None:
        self.assertEqual(parse.expand_hostlist("n[1-3,05],login,gpu[08-10]x"),
                         ["n1", "n2", "n3", "n05", "login", "gpu08x", "gpu09x", "gpu10x"])
        names = [f"c{i:03d}" for i in range(1, 101)] + ["a1", "a2", "a4"]
        self.assertEqual(sorted(parse.expand_hostlist(parse.compress_hostlist(names))),
                         sorted(names))
        self.assertEqual(parse.compress_hostlist(["n2", "n1", "n3", "n7"]), "n[1-3,7]")
        for bad in ("n[1-", "n[3-1]", "n[1-2]]", "a b", "n[1-200000]"):
            with self.subTest(bad=bad), self.assertRaises(ValueError):
                parse.expand_hostlist(bad)

    def test_names_and_lists(self) -> None:
        self.assertEqual(parse.safe_name("n1.cluster"), "n1.cluster")
        for bad in ("..", "a/b", "", "x" * 65, "a b"):
            with self.assertRaises(ValueError):
                parse.safe_name(bad)
        self.assertEqual(parse.cpu_list("0-2,5"), [0, 1, 2, 5])
        self.assertEqual(parse.compress_list([5, 0, 1, 2]), "0-2,5")
        with self.assertRaises(ValueError):
            parse.cpu_list("3-1")


class Tmp(unittest.TestCase):
    def setUp(self) -> None:
        self._td = tempfile.TemporaryDirectory()
        self.tmp = Path(self._td.name)
        os.chmod(self.tmp, 0o755)

    def tearDown(self) -> None:
        self._td.cleanup()


class SafeIO(Tmp):
    def test_read_checks(self) -> None:
        f = self.tmp / "rec"
        f.write_bytes(b"hello")
        self.assertEqual(safeio.read_file(None, str(f), 10), b"hello")
        with self.assertRaises(safeio.UnsafeFile) as e:
            safeio.read_file(None, str(f), 4)
        self.assertIn("more than 4", str(e.exception))
        (self.tmp / "link").symlink_to(f)
        with self.assertRaises(safeio.UnsafeFile) as e:
            safeio.read_file(None, str(self.tmp / "link"), 10)
        self.assertIn("symlink", str(e.exception))
        os.chown(f, NOBODY, -1)
        with self.assertRaises(safeio.UnsafeFile):
            safeio.read_file(None, str(f), 10, owners={0})
        self.assertEqual(safeio.read_file(None, str(f), 10, owners={0, NOBODY}), b"hello")
        os.chown(f, 0, -1)
        os.chmod(f, 0o666)
        with self.assertRaises(safeio.UnsafeFile):
            safeio.read_file(None, str(f), 10)
        os.mkfifo(self.tmp / "fifo")
        t0 = time.monotonic()
        with self.assertRaises(safeio.UnsafeFile):
            safeio.read_file(None, str(self.tmp / "fifo"), 10)
        self.assertLess(time.monotonic() - t0, 10.0)  # a FIFO must not block us (a ceiling for a busy machine)

    def test_open_dir_walks_without_symlinks(self) -> None:
        real = self.tmp / "real" / "dir"
        real.mkdir(parents=True)
        os.close(safeio.open_dir(str(real)))
        (self.tmp / "alias").symlink_to(self.tmp / "real")
        with self.assertRaises(safeio.UnsafeFile) as e:
            safeio.open_dir(str(self.tmp / "alias" / "dir"))
        self.assertIn("symlink", str(e.exception))
        os.chmod(self.tmp / "real", 0o777)
        with self.assertRaises(safeio.UnsafeFile):
            safeio.open_dir(str(real))
        os.chmod(self.tmp / "real", 0o1777)  # sticky: fine as an ancestor
        os.close(safeio.open_dir(str(real)))
        with self.assertRaises(safeio.UnsafeFile):  # ... but not as the directory itself
            safeio.open_dir(str(self.tmp / "real"))
        os.close(safeio.open_dir(str(self.tmp / "real"), shared=True))
        os.chown(real, NOBODY, -1)
        with self.assertRaises(safeio.UnsafeFile):
            safeio.open_dir(str(real))
        os.close(safeio.open_dir(str(real), final_owner={NOBODY}))
        with self.assertRaises(FileNotFoundError):
            safeio.open_dir(str(self.tmp / "absent"))

    def test_write_atomic(self) -> None:
        fd = safeio.open_dir(str(self.tmp))
        try:
            safeio.write_atomic(fd, "x.json", b"one", mode=0o644)
            safeio.write_atomic(fd, "x.json", b"two", mode=0o640)
            with self.assertRaises(FileExistsError):
                safeio.write_atomic(fd, "x.json", b"three", replace=False)
        finally:
            os.close(fd)
        self.assertEqual((self.tmp / "x.json").read_bytes(), b"two")
        self.assertEqual(stat.S_IMODE((self.tmp / "x.json").stat().st_mode), 0o640)
        self.assertEqual([p.name for p in self.tmp.iterdir()], ["x.json"])  # no temporaries


class Config(Tmp):
    def conf(self, plug_line: str, slurm_user: str = "slurm") -> str:
        etc = self.tmp / "etc"
        (etc / "plugstack.conf.d").mkdir(parents=True)
        (etc / "slurm.conf").write_text(f"ClusterName=x\nSlurmUser={slurm_user} # comment\n"
                                        f"PlugStackConfig={etc}/plugstack.conf\n")
        (etc / "plugstack.conf").write_text(f"include {etc}/plugstack.conf.d/*.conf\n")
        (etc / "plugstack.conf.d" / "other.conf").write_text("optional /x/other.so a=b\n")
        (etc / "plugstack.conf.d" / "z.conf").write_text(plug_line + "\n")
        return str(etc / "slurm.conf")

    def test_plugstack_line_gives_the_directories(self) -> None:
        sc = self.conf("optional /lib/slurm/spank_mpi_pstate.so default_mode=on collect_dir=/srv/rec "
                       "runtime_dir=/run/mp-%h agent=/usr/sbin/mpi-pstate-agent")
        c = siteconf.load(sc)
        self.assertEqual((c.collect_dir, c.runtime_dir, c.agent, c.slurm_user),
                         ("/srv/rec", "/run/mp-%h", "/usr/sbin/mpi-pstate-agent", "slurm"))
        self.assertTrue(c.plugstack.endswith("z.conf"))
        self.assertEqual(siteconf.expand_host(c.runtime_dir, "n1"), "/run/mp-n1")
        c = siteconf.load(sc, collect_dir="/other")
        self.assertEqual(c.collect_dir, "/other")

    def test_plugin_found_by_content_whatever_its_name(self) -> None:
        built = BUILD / "spank" / "spank_mpi_pstate.so"
        if not built.exists():
            self.skipTest(f"{built} not built")
        lib = self.tmp / "lib"
        lib.mkdir()
        shutil.copy(built, lib / "site-power-v2.so")
        # ELF holding our names as bytes, but no plugin_name symbol: not ours
        (lib / "spank_mpi_pstate_lookalike.so").write_bytes(
            Path("/bin/true").read_bytes() + b"\0mpi_pstate\0mpi-pstate-threshold\0")
        sc = self.conf(f"optional {lib}/spank_mpi_pstate_lookalike.so collect_dir=/wrong\n"
                       f"optional site-power-v2.so collect_dir=/srv/right")
        self.assertEqual(siteconf.load(sc).collect_dir, layout.COLLECT_DIR)  # relative: not in dirs
        with open(sc, "a") as f:
            f.write(f"PluginDir=/nonexistent:{lib}\n")
        c = siteconf.load(sc)
        self.assertEqual((c.collect_dir, c.problems), ("/srv/right", []))

    def test_plugin_known_by_its_plugin_name_symbol(self) -> None:
        built = BUILD / "spank" / "spank_mpi_pstate.so"
        if not built.exists():
            self.skipTest(f"{built} not built")
        self.assertEqual(plugincheck.plugin_name(built.read_bytes()), siteconf.PLUGIN_NAME)
        self.assertIsNone(plugincheck.plugin_name(Path("/bin/true").read_bytes()))
        src = self.tmp / "other.c"
        src.write_text('const char plugin_name[] = "mpi_pstate_not";\n'
                       'const char plugin_type[] = "spank";\n')
        other = self.tmp / "spank_mpi_pstate.so"  # our file name, another plugin
        subprocess.run(["gcc", "-shared", "-fPIC", "-o", str(other), str(src)], check=True)
        self.assertEqual(plugincheck.plugin_name(other.read_bytes()), "mpi_pstate_not")
        self.assertIsNone(siteconf.our_plugin(str(other), []))
        self.assertEqual(siteconf.our_plugin(str(built), []), str(built))
        self.assertIsNone(siteconf.our_plugin(str(self.tmp / "absent.so"), []))
        self.assertEqual(siteconf.our_plugin("spank_mpi_pstate.so", [str(self.tmp / "none")]),
                         "spank_mpi_pstate.so")  # unreadable here: known by its name

    def test_bad_values_keep_defaults(self) -> None:
        sc = self.conf("optional spank_mpi_pstate.so collect_dir=relative runtime_dir=/a/../b")
        c = siteconf.load(sc)
        self.assertEqual((c.collect_dir, c.runtime_dir), (layout.COLLECT_DIR, layout.RUNTIME_DIR))
        self.assertEqual(len(c.problems), 2)
        c = siteconf.load(str(self.tmp / "missing.conf"))
        self.assertEqual((c.collect_dir, c.slurm_user), (layout.COLLECT_DIR, "root"))
        for bad in ("/a b", "/a//b", "x", "/" + "a" * 300):
            with self.assertRaises(ValueError):
                siteconf.check_dir_path(bad)
        with self.assertRaises(ValueError):
            siteconf.expand_host("/run/%x", "n1")
        with self.assertRaises(ValueError):
            siteconf.expand_host("/run/%h", "../evil")


class LeftoverAgents(Tmp):
    """An agent that outlived its step (Slurm 26.05: the plugin lost its
    pidfd) is stopped by the job's node Epilog, and nothing else is."""

    def spawn(self, exe: str, job: str, ignore_term: bool = False) -> "subprocess.Popen[bytes]":
        body = ('trap "" TERM; ' if ignore_term else "") + "sleep 30 & wait; :"
        p = subprocess.Popen([exe, "-c", body, "agent", "--job", job])
        self.addCleanup(lambda: (p.kill(), p.wait()))
        t_end = time.monotonic() + 10  # the trap is set once bash reads the body
        while time.monotonic() < t_end and b"sleep" not in subprocess.run(
                ["ps", "-o", "args=", "--ppid", str(p.pid)],
                stdout=subprocess.PIPE, stderr=subprocess.PIPE).stdout:
            time.sleep(0.02)
        return p

    def test_only_this_jobs_agents(self) -> None:
        agent = str(self.tmp / "mpi-pstate-agent")
        shutil.copy("/bin/bash", agent)
        mine = self.spawn(agent, "77")
        stubborn = self.spawn(agent, "77", ignore_term=True)
        other_job = self.spawn(agent, "778")
        not_agent = self.spawn("/bin/bash", "77")
        with mock.patch.object(node_epilog, "AGENT_STOP_S", 0.5):
            done = node_epilog.stop_leftover_agents(agent, 77)
        self.assertEqual(sorted(done), sorted([
            f"agent {mine.pid} of job 77 outlived its step: stopped",
            f"agent {stubborn.pid} of job 77 outlived its step: killed (ignored SIGTERM)"]))
        self.assertEqual(mine.wait(5), -15)
        self.assertEqual(stubborn.wait(5), -9)
        self.assertIsNone(other_job.poll())
        self.assertIsNone(not_agent.poll())
        self.assertEqual(node_epilog.stop_leftover_agents(agent, 77), [])


class PluginCheck(Tmp):
    def test_release_the_plugin_was_built_for(self) -> None:
        built = BUILD / "spank" / "spank_mpi_pstate.so"
        if not built.exists():
            self.skipTest(f"{built} not built")
        hdr = Path("/usr/include/slurm/slurm_version.h").read_text()
        num = int(re.search(r"#define SLURM_VERSION_NUMBER (0x[0-9a-fA-F]+)", hdr).group(1), 16)
        want = f"{num >> 16 & 255}.{num >> 8 & 255:02d}.{num & 255}"
        self.assertEqual(plugincheck.built_for(str(built)), (want, None))
        self.assertTrue(plugincheck.check(str(built), want)["ok"])
        major, minor, _ = want.split(".")
        other = f"{major}.{int(minor) + 6:02d}.1"
        bad = plugincheck.check(str(built), other)
        self.assertFalse(bad["ok"])
        self.assertIn(f"built for Slurm {want}, this node runs {other}", bad["problem"])
        self.assertIn("unrecognized option", bad["problem"])
        self.assertTrue(plugincheck.check(str(built), f"{major}.{minor}.99")["ok"])  # point release

    def test_not_a_plugin(self) -> None:
        (self.tmp / "text.so").write_text("not ELF")
        for path in ("/bin/true", str(self.tmp / "text.so"), str(self.tmp / "missing.so")):
            with self.subTest(path=path):
                rel, problem = plugincheck.built_for(path)
                self.assertIsNone(rel)
                self.assertIn(path, problem)
        self.assertIn("no plugstack line", plugincheck.check(None, "22.05.8")["problem"])


class Audit(Tmp):
    def test_settings_and_grouping(self) -> None:
        root = fx.fake_sysfs(self.tmp, ncpus=8, smt=2, numa=2, uncore=True,
                             disabled={c: {"C6"} for c in range(4, 8)})
        s = audit.node_settings(str(root))
        cf = s["cpufreq"]
        self.assertEqual((cf["driver"], cf["governors"], cf["boost"], cf["policies"]),
                         ("acpi-cpufreq", ["performance"], True, 8))
        self.assertEqual([g["cpus"] for g in cf["groups"]], ["0-7"])  # one group, not 8
        c6 = [st for st in s["cstates"]["states"] if st["name"] == "C6"][0]
        self.assertEqual((c6["exit_latency_us"], c6["enabled_cpus"], c6["disabled_cpus"]),
                         (133, "0-3", "4-7"))
        self.assertEqual(s["smt"]["threads_per_core"], 2)
        self.assertEqual(s["numa"]["nodes"], 2)
        self.assertEqual(s["numa"]["distances"]["1"], [21, 10])
        self.assertEqual(s["uncore"][0]["max_freq_khz"], 1800000)
        self.assertEqual(s["rapl"]["status"], "ok")
        self.assertTrue(any("uncore" in w for w in s["warnings"]))
        b = audit.brief(s)
        self.assertEqual((b["driver"], b["boost"], b["cstate_max_us"], b["smt"], b["numa"]),
                         ("acpi-cpufreq", True, 133, 2, 2))

    def test_warnings_for_slow_settings(self) -> None:
        root = fx.fake_sysfs(self.tmp, governor="powersave", max_khz=2000000, boost=0)
        w = audit.node_settings(str(root))["warnings"]
        self.assertTrue(any("below the hardware maximum" in x for x in w), w)
        self.assertTrue(any("powersave" in x for x in w), w)
        self.assertIn("turbo/boost is off", w)

    def test_no_driver_and_malformed_values(self) -> None:
        root = fx.fake_sysfs(self.tmp, driver="", rapl=False)
        s = audit.node_settings(str(root))
        self.assertIsNone(s["cpufreq"]["driver"])
        self.assertEqual(s["rapl"]["status"], "absent")
        self.assertTrue(s["warnings"][0].startswith("no cpufreq driver"))
        fx.write(self.tmp, "devices/system/cpu/cpu0/cpuidle/state2/latency", "lots")
        fx.write(self.tmp, "devices/system/node/node0/distance", "10 -1")
        s = audit.node_settings(str(root))  # reported as malformed, never fatal
        self.assertIn(None, [st["exit_latency_us"] for st in s["cstates"]["states"]])
        self.assertEqual(s["numa"]["distances"]["0"], "<malformed>")

    def test_size_does_not_grow_with_cpus(self) -> None:
        a = len(json.dumps(audit.node_settings(str(fx.fake_sysfs(self.tmp / "a", ncpus=4)))))
        b = len(json.dumps(audit.node_settings(str(fx.fake_sysfs(self.tmp / "b", ncpus=64)))))
        self.assertLess(b - a, 40)  # only the CPU ranges' digits differ


class Slots(Tmp):
    def test_rank_figures_from_a_real_segment(self) -> None:
        fx.segment(self.tmp / "mpi-pstate.77.0", [
            {"rank": 0, "wall": 10.0, "mpi": 2.0, "wait": 1.5, "down": 1.0, "transitions": 9},
            {"rank": 1, "wall": 10.0, "mpi": 6.0, "state": "aborted"},
            {"rank": 2, "state": "running"}], nslots=4)
        listed = [{"step": "0", "name": "mpi-pstate.77.0", "dev": None, "ino": None,
                   "nslots": None, "bytes": None}]  # a version 1 step record's
        agent = {0: {"down_s": 0.75, "transitions": 4}}  # what root measured of slot 0
        steps, problems, names = rankfigures.job_segments(77, os.getuid(), listed, str(self.tmp),
                                                          agent=agent)
        self.assertEqual((problems, names), ([], ["mpi-pstate.77.0"]))
        self.assertEqual((steps[0]["step"], steps[0]["slots"]), ("0", 4))
        r0, r1, r2 = steps[0]["ranks"]
        # clocked-down time and transitions are the agent's, never the slot's (1.0, 9)
        self.assertEqual((r0["rank"], r0["wall_s"], r0["mpi_s"], r0["wait_s"], r0["down_s"],
                          r0["transitions"], r0["state"]), (0, 10.0, 2.25, 1.5, 0.75, 4,
                                                             "finalized"))
        self.assertEqual((r1["down_s"], r1["transitions"]), (None, None))  # no agent figure
        self.assertEqual(r0["mpi_share"], 0.225)  # MPI_Init does not count as MPI time
        self.assertEqual(r0["top"][0], ["MPI_Barrier", 2.0, 11])
        self.assertEqual(r1["state"], "aborted")
        self.assertEqual((r2["state"], r2["wall_s"], r2["mpi_share"]), ("killed", None, None))
        self.assertIn("note", r2)

    def test_wait_mode_and_wait_cpu_share_from_the_slot(self) -> None:
        """The rank writes both: a mode past the list is unknown, a CPU time
        above the wall time reads as a share of one, nothing measured is
        null, and a figure beyond any real time is dropped, never the rank."""
        fx.segment(self.tmp / "mpi-pstate.79.0", [{"rank": i} for i in range(5)], nslots=5)
        seg = slotlib.LiveSegment(str(self.tmp / "mpi-pstate.79.0"))
        try:
            for i, (mode, cpu, wall) in enumerate([(3, 50_000_000, 10**9), (2, 2 * 10**9, 10**9),
                                                   (99, 0, 0), (1, 2**63, 10**9),
                                                   (1, 999_000_000, 10**9)]):
                seg.set_slot_field(i, "wait_mode", mode)
                seg.set_slot_field(i, "wait_cpu_ns", cpu)
                seg.set_slot_field(i, "wait_sampled_ns", wall)
                seg.set_slot_field(i, "wait_samples", 4 if wall else 0)
        finally:
            seg.close()
        listed = [{"step": "0", "name": "mpi-pstate.79.0", "dev": None, "ino": None,
                   "nslots": 5, "bytes": None}]
        steps, problems, _ = rankfigures.job_segments(79, os.getuid(), listed, str(self.tmp))
        got = [(r["wait_mode"], r["wait_cpu_share"]) for r in steps[0]["ranks"]]
        self.assertEqual(got, [("sleep", 0.05), ("yield", 1.0), ("unknown", None),
                               ("poll", None), ("poll", 0.999)])
        self.assertEqual(steps[0]["ranks"][3]["dropped"], ["wait_cpu_ns"])
        self.assertEqual(problems, ["segment mpi-pstate.79.0 slot 3: out of range, dropped: "
                                    "wait_cpu_ns"])
        # and through the record's validation, which keeps exact JSON types
        r = noderecord.validate_rank(json.loads(json.dumps(steps[0]["ranks"][0])))
        self.assertEqual((r["wait_mode"], r["wait_cpu_share"]), ("sleep", 0.05))
        bad = noderecord.validate_rank(dict(steps[0]["ranks"][0], wait_mode=3, wait_cpu_share="x"))
        self.assertEqual((bad["wait_mode"], bad["wait_cpu_share"]), (None, None))

    def test_a_rank_field_is_produced_validated_and_documented(self) -> None:
        """A per-rank field is three lines (docs/CONTRIBUTING.md, 'Adding a record
        field'): rank_figures makes it, RANK_FIELDS lets it through, the per-rank
        table of docs/records.md says what it is; one without the others fails here."""
        fx.segment(self.tmp / "mpi-pstate.78.0", [
            {"rank": 0, "wall": 10.0, "mpi": 2.0, "wait": 1.5, "down": 1.0, "transitions": 9},
            {"rank": 1, "state": "running"}], nslots=2)
        listed = [{"step": "0", "name": "mpi-pstate.78.0", "dev": None, "ino": None,
                   "nslots": None, "bytes": None}]
        steps, _, _ = rankfigures.job_segments(78, os.getuid(), listed, str(self.tmp))
        produced = set().union(*(r.keys() for r in steps[0]["ranks"]))
        produced.add("dropped")  # present only when a field was out of range
        self.assertEqual(produced, set(noderecord.RANK_FIELDS))
        doc = (fx.TOP / "docs" / "records.md").read_text(encoding="utf-8")
        table = doc.split("**Per rank**", 1)[1].split("\n\n", 2)[1]
        documented = set(re.findall(r"`([a-z_]+)`", "\n".join(
            ln.split("|")[1] for ln in table.splitlines() if ln.startswith("| `"))))
        self.assertEqual(documented, set(noderecord.RANK_FIELDS))

    def test_hostile_segments(self) -> None:
        secret = self.tmp / "secret"
        secret.write_bytes(b"root only")
        (self.tmp / "mpi-pstate.5.0").symlink_to(secret)
        fx.segment(self.tmp / "mpi-pstate.5.1", [{"rank": 0}])
        os.chown(self.tmp / "mpi-pstate.5.1", NOBODY, -1)  # another user's file
        (self.tmp / "mpi-pstate.5.2").write_bytes(b"\xff" * 5000)  # garbage
        fx.segment(self.tmp / "mpi-pstate.5.3", [{"rank": 0}, {"rank": 1}])
        with open(self.tmp / "mpi-pstate.5.3", "r+b") as f:  # garbage in slot 1 only
            f.seek(slotlib.HEADER_SIZE + slotlib.SLOT_SIZE)
            f.write(os.urandom(slotlib.SLOT_SIZE))
        with open(self.tmp / "mpi-pstate.5.4", "wb") as f:  # sparse and huge
            f.truncate(slotlib.HEADER_SIZE + 20000 * slotlib.SLOT_SIZE)
        os.mkfifo(self.tmp / "mpi-pstate.5.5")
        fx.segment(self.tmp / "mpi-pstate.6.0", [{"rank": 0}])  # another job
        listed = [{"step": str(i), "name": f"mpi-pstate.5.{i}", "dev": None, "ino": None,
                   "nslots": None, "bytes": None} for i in range(6)]
        listed.append({"step": "0", "name": "mpi-pstate.6.0", "dev": None, "ino": None,
                       "nslots": None, "bytes": None})
        steps, problems, names = rankfigures.job_segments(5, 1000, listed, str(self.tmp))
        self.assertEqual([s["step"] for s in steps], ["3"])
        self.assertEqual([r["rank"] for r in steps[0]["ranks"]], [0])
        text = "\n".join(problems)
        for frag in ("mpi-pstate.5.0: is a symlink", "mpi-pstate.5.1: owned by uid",
                     "mpi-pstate.5.2:", "mpi-pstate.5.3 slot 1", "mpi-pstate.5.4:",
                     "mpi-pstate.5.5: not a regular file", "mpi-pstate.6.0: not a name of job 5"):
            self.assertIn(frag, text)
        self.assertNotIn("mpi-pstate.6.0", names)
        self.assertEqual(secret.read_bytes(), b"root only")
        n = rankfigures.remove_segments(5, names, str(self.tmp))
        self.assertEqual(n, 5)  # the FIFO stays; the symlink goes, its target stays
        self.assertTrue(secret.exists())
        self.assertTrue((self.tmp / "mpi-pstate.6.0").exists())
        self.assertTrue((self.tmp / "mpi-pstate.5.5").exists())


class NodeRecord(unittest.TestCase):
    def test_round_trip_and_validation(self) -> None:
        rec = fx.node_record(9, "n1", [fx.rank("n1", 0), fx.rank("n1", 1)])
        back = noderecord.validate(noderecord.decode(noderecord.encode(rec)), 9, "n1")
        self.assertEqual(len(back["ranks"]), 2)
        self.assertEqual(back["energy"], {"status": "ok", "joules": 100.0, "meter": "rapl"})
        self.assertEqual(back["ranks"][0]["node"], "n1")
        for mutate, why in (
                (lambda r: r.update(job=10), "expected 9"),
                (lambda r: r.update(node="n2"), "expected n1"),
                (lambda r: r.update(version=2), "version"),
                (lambda r: r.update(format="x"), "not a node record"),
                (lambda r: r.update(ranks=[{}] * (noderecord.MAX_RANKS + 1)), "bad rank list")):
            bad = json.loads(json.dumps(rec))
            mutate(bad)
            with self.subTest(why=why), self.assertRaises(ValueError) as e:
                noderecord.validate(bad, 9, "n1")
            self.assertIn(why, str(e.exception))
        # A bad field is dropped and named, never the node's record: one absurd
        # value must not hide the job's other figures
        for field, value in (("wall_s", "10"), ("wall_s", True), ("calls", 10**30),
                             ("transitions", 2**64 - 1), ("top", [["x;y", 1, 1]])):
            bad = json.loads(json.dumps(rec))
            bad["ranks"][0][field] = value
            with self.subTest(field=field, value=value):
                got = noderecord.validate(bad, 9, "n1")
                self.assertEqual(len(got["ranks"]), 2)
                self.assertIn(field, got["ranks"][0]["dropped"])
                self.assertIn(got["ranks"][0][field], (None, []))
                self.assertEqual(got["ranks"][1][field], rec["ranks"][1][field])
        # A rank that cannot be placed is refused alone, and said so
        for mutate, why in ((lambda x: x.update(state="zombie"), "state"),
                            (lambda x: x.update(step="../x"), "bad step"),
                            (lambda x: x.pop("rank"), "missing")):
            bad = json.loads(json.dumps(rec))
            mutate(bad["ranks"][0])
            with self.subTest(why=why):
                got = noderecord.validate(bad, 9, "n1")
                self.assertEqual([r["rank"] for r in got["ranks"]], [1])
                self.assertIn(why, got["problems"][-1])
        with self.assertRaises(ValueError):
            noderecord.decode(b'{"x": NaN}')
        with self.assertRaises(ValueError):
            noderecord.decode(b"[" * 100000 + b"]" * 100000)

    def test_energy_never_made_up(self) -> None:
        a = steprecords.parse_agent(b'{"format": "mpi-pstate-agent", "host": "x", "step": 0, '
                                   b'"energy": {"status": "ok", "package_j": 10.25, "dram_j": 2.25,'
                                   b' "sockets": []}}', "n1")
        self.assertEqual(a["energy"], {"status": "ok", "joules": 12.5})
        self.assertIsNone(steprecords.parse_agent(b'{"step": 0, "node": "n2"}', "n1"))
        b = steprecords.parse_agent(b'{"step": 4294967291, "energy": {"status": "no_access", '
                                   b'"package_j": null, "dram_j": null}}', "n1", "batch")
        self.assertEqual((b["step"], b["energy"]["status"]), ("batch", "no_access"))
        c = steprecords.parse_agent(b'{"step": 1, "energy": {"status": "ok", "package_j": null}}',
                                   "n1")
        self.assertEqual(c["energy"], {"status": "unknown", "joules": None})
        big = {"step": 2, "ranks": [{"hist": list(range(100))}] * 2000, "energy": {}}
        d = steprecords.parse_agent(json.dumps(big).encode(), "n1")
        self.assertNotIn("ranks", d["record"])
        self.assertEqual(d["record"]["truncated"]["dropped"], ["ranks", "domains"])
        self.assertEqual(noderecord.energy_of([a], None)["joules"], 12.5)
        self.assertEqual(noderecord.energy_of([a, b], None)["status"], "partial")
        self.assertEqual(noderecord.energy_of([b], None)["status"], "no_access")
        self.assertEqual(noderecord.energy_of([], {"rapl": {"status": "absent"}}),
                         {"status": "absent", "joules": None, "source": None})
        for bad in (b"[1]", b'{"step": "x/y"}', b"{"):
            with self.assertRaises(ValueError):
                steprecords.parse_agent(bad, "n1")


class NodeEpilog(Tmp):
    """node.run() end to end on planted files (run as root, like the Epilog)."""

    def setUp(self) -> None:
        super().setUp()
        self.collect, self.runtime, self.shm, self.sys = fx.epilog_dirs(self.tmp)
        self.env = {"SLURM_JOB_ID": "4242", "SLURMD_NODENAME": "n1", "SLURM_JOB_UID": "1000",
                    "SLURM_CONF": str(self.tmp / "none.conf"), "PATH": os.environ["PATH"]}
        self.err = io.StringIO()

    def run_epilog(self, **extra: str) -> int:
        a = argparse.Namespace(collect_dir=str(self.collect), runtime_dir=str(self.runtime),
                               slurm_conf=None, sysroot=str(self.sys), shm_dir=str(self.shm),
                               keep_segments=False, quiet=False)
        with mock.patch.dict(os.environ, {**self.env, **extra}, clear=True), \
                mock.patch.object(log, "_stream", [self.err]):
            return node_epilog.run(a, {"agent": []})

    def record(self) -> dict:
        return json.loads((self.collect / "4242" / "node.n1.json").read_text())

    def test_publishes_ranks_agent_energy_and_settings(self) -> None:
        seg = self.shm / "mpi-pstate.4242.0.0123456789abcdef"
        fx.segment(seg, [{"rank": 0}, {"rank": 1, "mpi": 5.0}])
        os.chown(seg, 1000, -1)
        step = fx.plugin_json(self.runtime, 4242, "0", seg, nslots=2)
        (step / "agent.json").write_text(json.dumps(
            {"format": "mpi-pstate-agent", "version": 1, "host": "n1", "job": 4242, "step": 0,
             "energy": {"status": "ok", "package_j": 70.0, "dram_j": 7.5, "sockets": []},
             "mechanism": "max_freq"}))
        batch = self.runtime / "steps" / "4242.batch"
        batch.mkdir()
        (batch / "plugin.json").write_text(json.dumps({"version": 1, "node": "n1",
                                                       "mode": "profile"}))
        other = self.runtime / "steps" / "4243.0"  # another job: not ours
        other.mkdir()
        (other / "agent.json").write_text(json.dumps({"step": 0, "energy": {
            "status": "ok", "package_j": 1e9}}))
        self.assertEqual(self.run_epilog(), 0)
        rec = self.record()
        self.assertEqual((rec["status"], len(rec["ranks"]), rec["energy"]["joules"]),
                         ("ok", 2, 77.5))
        self.assertEqual(rec["steps"][0]["agent"]["mechanism"], "max_freq")
        self.assertEqual(rec["steps"][0]["plugin"]["mode"], "on")
        self.assertEqual([s["step"] for s in rec["steps"]], ["0", "batch"])
        self.assertEqual(rec["steps"][1]["plugin"]["mode"], "profile")
        self.assertEqual(rec["settings"]["cpufreq"]["driver"], "acpi-cpufreq")
        self.assertEqual(rec["restore"]["status"], "ok")  # no restore record: no backstop run
        self.assertEqual(noderecord.validate(rec, 4242, "n1")["status"], "ok")
        self.assertFalse(seg.exists())  # consumed
        self.assertFalse(step.exists())  # step directories removed once read
        self.assertFalse(batch.exists())
        self.assertTrue(other.exists())  # another job's stays
        self.assertEqual(stat.S_IMODE((self.collect / "4242").stat().st_mode), 0o755)
        self.assertIn("record of job 4242 published: status ok, 2 ranks", self.err.getvalue())

    def test_job_without_the_plugin_writes_nothing(self) -> None:
        self.assertEqual(self.run_epilog(), 0)
        self.assertEqual(list(self.collect.iterdir()), [])
        self.assertEqual(self.err.getvalue(), "")

    def test_backstop_is_called_and_its_failure_logged(self) -> None:
        agent = self.tmp / "mpi-pstate-agent"
        argv_log = self.tmp / "argv"
        agent.write_text(f"#!/bin/sh\necho \"$@\" > {argv_log}\necho 'cpu3: EBUSY' >&2\nexit 3\n")
        agent.chmod(0o755)
        (self.runtime / "restore").mkdir(parents=True)
        (self.runtime / "restore" / "policy3").write_text("version=1\njob=4242\n")
        fx.plugin_json(self.runtime, 4242, "0", None)
        self.assertEqual(self.run_epilog(MPI_PSTATE_AGENT=str(agent)), 0)
        self.assertEqual(argv_log.read_text().split(),
                         ["--restore", str(self.runtime / "restore"), "--job", "4242"])
        rec = self.record()
        self.assertEqual((rec["restore"]["status"], rec["restore"]["rc"],
                          rec["restore"]["message"]), ("failed", 3, "cpu3: EBUSY"))
        self.assertIn("restore backstop failed", self.err.getvalue())

    def test_hostile_inputs_do_not_break_it_or_touch_anything(self) -> None:
        victim = self.tmp / "victim"
        victim.write_text("keep me")
        (self.shm / "mpi-pstate.4242.0").symlink_to(victim)
        with open(self.shm / "mpi-pstate.4242.1", "wb") as f:
            f.write(b"\0" * slotlib.HEADER_SIZE + os.urandom(3 * slotlib.SLOT_SIZE))
        step = fx.plugin_json(self.runtime, 4242, "0", None, version=1)
        (step / "plugin.json").write_text(json.dumps({"version": 1, "node": "n1",
                                                      "shm": "/dev/shm/mpi-pstate.4242.0"}))
        (step / "agent.json").symlink_to(victim)
        step1 = fx.plugin_json(self.runtime, 4242, "1", None, version=1)
        (step1 / "plugin.json").write_text(json.dumps({"version": 1, "node": "n1",
                                                       "shm": "/dev/shm/mpi-pstate.4242.1"}))
        (self.collect / "4242").symlink_to(self.tmp)  # planted job directory
        self.assertEqual(self.run_epilog(), 0)
        self.assertEqual(victim.read_text(), "keep me")
        self.assertFalse((self.tmp / "node.n1.json").exists())  # nothing written through it
        self.assertIn("failed", self.err.getvalue())
        # not published: the record waits on the node for a later pass
        self.assertEqual(pending.waiting(str(self.runtime)), ["4242.n1.json"])
        self.assertFalse(step.exists())
        (self.collect / "4242").unlink()
        self.err.truncate(0)
        self.assertEqual(self.run_epilog(SLURM_JOB_ID="4243"), 0)  # the next job's Epilog
        self.assertEqual(pending.waiting(str(self.runtime)), [])
        rec = self.record()
        self.assertEqual((rec["status"], rec["ranks"]), ("ok", []))
        self.assertTrue(any("symlink" in p for p in rec["problems"]), rec["problems"])
        self.assertTrue(any("not an mpi-pstate segment" in p for p in rec["problems"]))
        self.assertEqual(victim.read_text(), "keep me")

    def test_bad_environment_is_logged_not_fatal(self) -> None:
        self.assertEqual(self.run_epilog(SLURM_JOB_ID="42;rm -rf /"), 0)
        self.assertIn("bad Slurm environment", self.err.getvalue())
        self.assertEqual(list(self.collect.iterdir()), [])

    def slurm_user_nobody(self, *lines: str) -> str:
        """slurm.conf with SlurmUser=nobody, collect_dir nobody's (as the
        admin makes it) and reachable by nobody; the slurm.conf path."""
        etc = self.tmp / "etc"
        etc.mkdir()
        (etc / "slurm.conf").write_text("".join(f"{ln}\n" for ln in ("SlurmUser=nobody", *lines)))
        os.chmod(self.tmp, 0o755)
        os.chown(self.collect, NOBODY, -1)
        return str(etc / "slurm.conf")

    def test_writes_collect_dir_as_slurm_user(self) -> None:
        """Root squashing on the share does not matter: every file and
        directory there is SlurmUser's."""
        fx.plugin_json(self.runtime, 4242, "0", None)
        self.assertEqual(self.run_epilog(SLURM_CONF=self.slurm_user_nobody()), 0)
        self.assertEqual((self.collect / "4242").stat().st_uid, NOBODY)
        self.assertEqual((self.collect / "4242" / "node.n1.json").stat().st_uid, NOBODY)

    def test_never_creates_collect_dir(self) -> None:
        """A missing collect_dir is a share not mounted: the record waits in
        the node's pending directory, and the log says why."""
        fx.plugin_json(self.runtime, 4242, "0", None)
        self.collect.rmdir()
        self.assertEqual(self.run_epilog(), 0)
        self.assertFalse(self.collect.exists())
        self.assertEqual(pending.waiting(str(self.runtime)), ["4242.n1.json"])
        self.assertRegex(self.err.getvalue(), r"does not exist.*mounted.*kept for a later pass")
        self.collect.mkdir()
        self.env["SLURM_JOB_ID"] = "4243"  # the next job's Epilog delivers it
        self.assertEqual(self.run_epilog(), 0)
        self.assertEqual(pending.waiting(str(self.runtime)), [])
        self.assertEqual(self.record()["job"], 4242)

    def test_a_full_share_is_said_once_per_epilog(self) -> None:
        """A record already waits and the share still fails: one error line,
        not one per record."""
        fx.plugin_json(self.runtime, 4242, "0", None)
        data = noderecord.encode(fx.node_record(4000, "n1", []))
        pending.keep(str(self.runtime), 4000, "n1", data)
        self.collect.rmdir()
        self.assertEqual(self.run_epilog(), 0)
        self.assertEqual(self.err.getvalue().count("does not exist"), 1, self.err.getvalue())
        self.assertEqual(pending.waiting(str(self.runtime)), ["4000.n1.json", "4242.n1.json"])

    def test_private_data_hides_the_job_from_other_users(self) -> None:
        """PrivateData=jobs: the job's directory is SlurmUser's and the job's
        user's alone (an ACL); another user cannot even list it."""
        fx.plugin_json(self.runtime, 4242, "0", None)
        conf = self.slurm_user_nobody("PrivateData=accounts,JOBS")
        self.assertEqual(self.run_epilog(SLURM_CONF=conf), 0)
        jd = self.collect / "4242"
        st = jd.stat()
        self.assertEqual((st.st_uid, st.st_mode & 0o007), (NOBODY, 0), oct(st.st_mode))
        try:
            acl = os.getxattr(jd, "system.posix_acl_access")
        except OSError as e:
            self.assertIn("no ACL for uid 1000", self.err.getvalue())
            self.skipTest(f"no POSIX ACLs on {self.tmp}: {e}")
        self.assertEqual(acl_users(acl), {1000: 5})
        self.assertEqual(as_uid(1000, lambda: sorted(os.listdir(jd))), ["node.n1.json"])
        self.assertEqual(as_uid(4243, lambda: sorted(os.listdir(jd))), "PermissionError")
        # the default, without PrivateData: world-readable as before
        Path(conf).write_text("SlurmUser=nobody\n")
        self.env["SLURM_JOB_ID"] = "4243"
        fx.plugin_json(self.runtime, 4243, "0", None)
        self.assertEqual(self.run_epilog(SLURM_CONF=conf), 0)
        self.assertEqual((self.collect / "4243").stat().st_mode & 0o777, 0o755)

    def test_a_reused_job_id_is_the_new_users_alone(self) -> None:
        """PrivateData=jobs and job 4242 again, of another user (ids are
        reused): the directory's ACL is set anew on delivery, the old user
        is out and the new one in."""
        conf = self.slurm_user_nobody("PrivateData=jobs")
        fx.plugin_json(self.runtime, 4242, "0", None)
        self.assertEqual(self.run_epilog(SLURM_CONF=conf), 0)
        jd = self.collect / "4242"
        try:
            os.getxattr(jd, "system.posix_acl_access")
        except OSError as e:
            self.skipTest(f"no POSIX ACLs on {self.tmp}: {e}")
        fx.plugin_json(self.runtime, 4242, "0", None)
        self.assertEqual(self.run_epilog(SLURM_CONF=conf, SLURM_JOB_UID="1001"), 0)
        self.assertEqual(acl_users(os.getxattr(jd, "system.posix_acl_access")), {1001: 5})
        self.assertEqual(as_uid(1000, lambda: sorted(os.listdir(jd))), "PermissionError")
        self.assertEqual(as_uid(1001, lambda: sorted(os.listdir(jd))), ["node.n1.json"])


def acl_users(blob: bytes) -> Dict[int, int]:
    """{uid: perm} of the named-user entries (tag 2) of an access ACL's xattr."""
    return {uid: perm for tag, perm, uid in struct.iter_unpack("<HHI", blob[4:]) if tag == 2}


def as_uid(uid: int, fn: "object") -> object:
    """fn() in a child process running as uid: its result, or the name of
    the exception it raised."""
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(r)
        try:
            os.setgroups([])
            os.setgid(uid)
            os.setuid(uid)
            out = json.dumps(fn())  # type: ignore[operator]
        except Exception as e:  # noqa: BLE001 (reported to the parent by name)
            out = json.dumps(type(e).__name__)
        os.write(w, out.encode())
        os._exit(0)
    os.close(w)
    with os.fdopen(r) as f:
        text = f.read()
    os.waitpid(pid, 0)
    return json.loads(text)


class PrivateData(unittest.TestCase):
    def test_jobs_word_of_private_data(self) -> None:
        for v, want in (("jobs", True), ("accounts,Jobs", True), (" usage , jobs ", True),
                        ("usage", False), ("", False), ("jobsx", False)):
            with self.subTest(v=v):
                self.assertEqual(siteconf.private_jobs(v), want)

    def test_acl_blob(self) -> None:
        blob = safeio.acl_owner_and(1234, 5)
        self.assertEqual(len(blob), 4 + 5 * 8)
        self.assertEqual(acl_users(blob), {1234: 5})

    def test_uid_read_from_the_records_head(self) -> None:
        rec = noderecord.build(77, "n-1.x", 4321, settings=None, steps=[], infos=[],
                               restore={"status": "ok"}, problems=[], written=1.0)
        self.assertEqual(noderecord.head_uid(noderecord.encode(rec)), 4321)
        self.assertIsNone(noderecord.head_uid(b'{"format":"x","uid":1}'))


if __name__ == "__main__":
    unittest.main()
