# SPDX-License-Identifier: BSD-3-Clause
"""Root trusts only root's files (a user's file read or run as root is a
way to root): the node Epilog
runs agent= and every program only after the SPANK plugin's trusted-path
rule (safeio.trusted_path, the rule of spank/agentctl.c), reads its
configuration and the power model O_NOFOLLOW|O_NONBLOCK and owner-checked,
honours MPI_PSTATE_AGENT/_BUILD/_DBCOMMENT/_MODEL only from a source
checkout, a benchmark never runs git in another user's checkout, and
`calibrate` refuses a node where a job may hold a core.  Run as root, as the
Epilog is."""
import contextlib
import importlib.util
import io
import json
import os
import shutil
import signal
import subprocess
import sys
import unittest
from pathlib import Path
from types import SimpleNamespace
from typing import Any, Iterator, Tuple
from unittest import mock

import test_epilog
import test_epilog_fixtures as fx
from mpi_pstate.core import layout, log, safeio, siteconf
from mpi_pstate.model import calibrate, powermodel
from mpi_pstate.site import entry
from mpi_pstate.user import launcher


def _bench_checkout() -> Any:
    """bench/checkout.py: a benchmark's commit (not in the installed package)."""
    if sys.version_info < (3, 7):
        return None  # dev-machine code (from __future__ import annotations)
    path = Path(__file__).resolve().parents[2] / "bench" / "checkout.py"
    spec = importlib.util.spec_from_file_location("bench_checkout", path)
    assert spec and spec.loader
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


checkout = _bench_checkout()

NOBODY = 65534
MODEL = {"format": "mpi-pstate-model", "version": 1, "node": "n1", "idle_w": 43.0,
         "noise_w": 0.1, "domain_cpus": 1, "meter": "simulated",
         "points": [{"khz": 3000000, "busy_w": 58.0, "poll_w": 58.0},
                    {"khz": 1200000, "busy_w": 45.4, "poll_w": 45.4}],
         "transition": {"write_us": 50.0, "energy_uj": 0.0}}


@contextlib.contextmanager
def no_hang(seconds: int = 20) -> Iterator[None]:
    """A read that would block on a FIFO fails the test instead of hanging
    the suite (a guard, not a timing)."""
    def stop(*_: Any) -> None:
        raise AssertionError("blocked: the file was opened without O_NONBLOCK")
    old = signal.signal(signal.SIGALRM, stop)
    signal.alarm(seconds)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, old)


def program(path: Path, marker: Path) -> Path:
    """A program that leaves its arguments in marker when it runs."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(f"#!/bin/sh\necho \"$@\" > {marker}\n")
    path.chmod(0o755)
    return path


@unittest.skipUnless(os.geteuid() == 0, "root's rules: run as root, as the Epilog is")
class Tmp(test_epilog.Tmp):
    pass


class TrustedPath(Tmp):
    """safeio.trusted_path: spank/agentctl.c's rule, entry by entry."""

    def test_root_files_in_root_directories_pass(self) -> None:
        prog = program(self.tmp / "bin" / "tool", self.tmp / "ran")
        self.assertEqual(safeio.trusted_exec(str(prog)), str(prog))
        (self.tmp / "link").symlink_to(prog)  # root's link in root's directory
        self.assertEqual(safeio.trusted_exec(str(self.tmp / "link")), str(self.tmp / "link"))
        os.chown(prog, 0, 0)
        prog.chmod(0o775)  # group root may write: the plugin allows it
        safeio.trusted_exec(str(prog))

    def test_each_untrusted_entry_is_named(self) -> None:
        prog = program(self.tmp / "bin" / "tool", self.tmp / "ran")
        os.chown(prog, NOBODY, -1)
        with self.assertRaisesRegex(OSError, "owned by uid 65534, not root"):
            safeio.trusted_exec(str(prog))
        os.chown(prog, 0, NOBODY)
        prog.chmod(0o775)
        with self.assertRaisesRegex(OSError, r"tool: writable by its group \(mode 0775\)"):
            safeio.trusted_exec(str(prog))
        prog.chmod(0o755)
        os.chown(prog.parent, NOBODY, -1)
        with self.assertRaisesRegex(OSError, r"/bin: owned by uid 65534"):
            safeio.trusted_exec(str(prog))
        os.chown(prog.parent, 0, 0)
        prog.parent.chmod(0o777)  # world-writable, not sticky: the file can be replaced
        with self.assertRaisesRegex(OSError, r"/bin: writable by everybody \(mode 0777\)"):
            safeio.trusted_exec(str(prog))
        prog.parent.chmod(0o755)
        other = program(self.tmp / "user" / "tool", self.tmp / "ran")
        os.chown(other, NOBODY, -1)
        (self.tmp / "bin" / "ln").symlink_to(other)  # root's link to a user's file
        with self.assertRaisesRegex(OSError, "owned by uid 65534"):
            safeio.trusted_exec(str(self.tmp / "bin" / "ln"))
        (self.tmp / "bin" / "data").write_text("x")
        with self.assertRaisesRegex(OSError, "not an executable file"):
            safeio.trusted_exec(str(self.tmp / "bin" / "data"))
        with self.assertRaises(safeio.Missing):
            safeio.trusted_exec(str(self.tmp / "bin" / "absent"))
        with self.assertRaisesRegex(OSError, "not an absolute path"):
            safeio.trusted_exec("bin/tool")


class SearchPath(Tmp):
    """A Slurm command is found in PATH's absolute directories and the
    system's, never in the working directory: Slurm runs the Epilogs and
    the flusher with PATH unset."""

    def test_no_relative_directory_is_searched(self) -> None:
        from mpi_pstate.core import slurm
        planted = self.tmp / "scontrol-mpst-test"
        planted.write_text("#!/bin/sh\necho planted\n")
        planted.chmod(0o755)
        old = os.getcwd()
        os.chdir(self.tmp)
        self.addCleanup(os.chdir, old)
        for path in (None, "", ":/usr/bin", ".:/usr/bin", "bin:/usr/bin", "/usr/bin::"):
            env = {} if path is None else {"PATH": path}
            with self.subTest(PATH=path), mock.patch.dict(os.environ, env, clear=True):
                self.assertTrue(all(d.startswith("/")
                                    for d in slurm.search_path().split(os.pathsep)))
                with self.assertRaises(slurm.SlurmError):
                    slurm.which("scontrol-mpst-test")
        with mock.patch.dict(os.environ, {"PATH": str(self.tmp)}, clear=True):
            self.assertEqual(slurm.which("scontrol-mpst-test"), str(planted))  # absolute: fine


class ReadTrusted(Tmp):
    """Every file root reads by name: a FIFO, a symlink and a user-owned file
    are each refused with a message that says which."""

    def test_fifo_symlink_and_user_file_refused(self) -> None:
        good = self.tmp / "good.conf"
        good.write_text("SlurmUser=root\n")
        self.assertEqual(safeio.read_trusted(str(good), 1 << 20), b"SlurmUser=root\n")
        fifo = self.tmp / "fifo.conf"
        os.mkfifo(fifo)
        with no_hang(), self.assertRaisesRegex(OSError, "fifo.conf: not a regular file "
                                                        r"\(a FIFO\)"):
            safeio.read_trusted(str(fifo), 1 << 20)
        link = self.tmp / "link.conf"
        link.symlink_to(good)
        with self.assertRaisesRegex(OSError, "link.conf: is a symlink"):
            safeio.read_trusted(str(link), 1 << 20)
        mine = self.tmp / "user.conf"
        mine.write_text("SlurmUser=root\n")
        os.chown(mine, NOBODY, -1)
        with self.assertRaisesRegex(OSError, "user.conf: owned by uid 65534"):
            safeio.read_trusted(str(mine), 1 << 20)
        d = self.tmp / "userdir"
        d.mkdir()
        (d / "x.conf").write_text("x")
        os.chown(d, NOBODY, -1)
        with self.assertRaisesRegex(OSError, "x.conf: directory .*userdir: owned by uid 65534"):
            safeio.read_trusted(str(d / "x.conf"), 1 << 20)
        big = self.tmp / "big"
        big.write_bytes(b"x" * 100)
        with self.assertRaisesRegex(OSError, "more than 10"):
            safeio.read_trusted(str(big), 10)

    def test_config_files_of_another_user_are_not_read(self) -> None:
        plug = self.tmp / "stack.conf"  # not the default beside slurm.conf
        plug.write_text("required /usr/lib/slurm/mpi_pstate.so runtime_dir=/srv/rt\n")
        conf = self.tmp / "slurm.conf"
        conf.write_text(f"PlugStackConfig={plug}\n")
        self.assertEqual(siteconf.load(str(conf)).runtime_dir, "/srv/rt")
        for victim in (plug, conf):
            os.chown(victim, NOBODY, -1)
            c = siteconf.load(str(conf))
            self.assertEqual(c.runtime_dir, layout.RUNTIME_DIR)
            self.assertTrue(any(f"{victim.name}: owned by uid 65534" in p for p in c.problems),
                            c.problems)
            os.chown(victim, 0, -1)
        os.unlink(plug)
        os.mkfifo(plug)
        with no_hang():
            c = siteconf.load(str(conf))
        self.assertTrue(any("a FIFO" in p for p in c.problems), c.problems)

    def test_power_model_fifo_symlink_and_user_file_refused(self) -> None:
        good = self.tmp / "model.json"
        good.write_text(json.dumps(MODEL))
        self.assertEqual(powermodel.load_model(str(good))["idle_w"], 43.0)
        self.assertEqual(powermodel.model_for_record(str(good))["idle_w"], 43.0)
        fifo, link, user = self.tmp / "fifo.json", self.tmp / "link.json", self.tmp / "u.json"
        os.mkfifo(fifo)
        link.symlink_to(good)
        user.write_text(json.dumps(MODEL))
        os.chown(user, NOBODY, -1)
        for p, why in ((fifo, "not a regular file \\(a FIFO\\)"), (link, "is a symlink"),
                       (user, "owned by uid 65534")):
            with self.subTest(why=why), no_hang():
                with self.assertRaisesRegex(powermodel.ModelError, f"model not read: .*{p.name}: "
                                                               f"{why}"):
                    powermodel.load_model(str(p))
                with self.assertRaisesRegex(ValueError, why):  # the Epilog's warning
                    powermodel.model_for_record(str(p))
        self.assertIsNone(powermodel.model_for_record(str(self.tmp / "absent.json")))


class EnvOverrides(Tmp):
    """MPI_PSTATE_AGENT, _BUILD, _DBCOMMENT and _MODEL steer root and SlurmUser
    only from a source checkout; the installed package names its files from
    root's configuration and its installed paths."""

    def test_checkout_is_a_dev_tree_and_honours_them(self) -> None:
        self.assertTrue(safeio.dev_tree())  # the tests run from the source tree
        with mock.patch.dict(os.environ, {"MPI_PSTATE_MODEL": "/x/m.json"}):
            self.assertEqual(safeio.env_override("MPI_PSTATE_MODEL", privileged=True),
                             "/x/m.json")
            self.assertEqual(powermodel.model_path(privileged=True), "/x/m.json")

    def test_installed_root_ignores_them_users_keep_them(self) -> None:
        env = {"MPI_PSTATE_MODEL": "/x/m.json", "MPI_PSTATE_BUILD": str(self.tmp),
               "MPI_PSTATE_AGENT": "/x/agent"}
        with mock.patch.dict(os.environ, env), \
                mock.patch.object(safeio, "dev_tree", return_value=False):
            self.assertIsNone(safeio.env_override("MPI_PSTATE_AGENT", privileged=True))
            self.assertEqual(powermodel.model_path(privileged=True), layout.DEFAULT_MODEL)
            # a user's own `mpi-pstate report --what-if` still takes it
            self.assertEqual(powermodel.model_path(privileged=False), "/x/m.json")
            dirs = entry.tool_dirs({"libexecdir": "/usr/libexec", "sbindir": "/usr/sbin"})
            self.assertFalse(any(d.startswith(str(self.tmp)) or d.endswith("/build/agent")
                                 for d in dirs["agent"] + dirs["dbcomment"]), dirs)

    def test_installed_layout_is_not_a_dev_tree(self) -> None:
        """The files `make install` copies (epilog/rules.mk: the package's
        *.py, each subpackage's) in their installed layout, in a child
        interpreter as Slurm runs it (-I): no override reaches root."""
        pkg = self.tmp / "share" / "mpi-pstate" / "python" / "mpi_pstate"
        src = fx.TOP / "epilog" / "mpi_pstate"
        for f in src.rglob("*.py"):
            (pkg / f.relative_to(src)).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy(f, pkg / f.relative_to(src))
        code = ("import sys; sys.path.insert(0, sys.argv[1]);"
                "from mpi_pstate.core import safeio; from mpi_pstate.model import powermodel;"
                "from mpi_pstate.site import entry;"
                "print(safeio.dev_tree(), safeio.env_override('MPI_PSTATE_AGENT', True),"
                " powermodel.model_path(privileged=True),"
                " any('build' in d for d in entry.tool_dirs({})['agent']))")
        env = {"PATH": "/usr/bin:/bin", "MPI_PSTATE_AGENT": "/x/agent",
               "MPI_PSTATE_MODEL": "/x/m.json", "MPI_PSTATE_BUILD": "/x/build"}
        r = subprocess.run([sys.executable, "-I", "-c", code, str(pkg.parent)], env=env,
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                           universal_newlines=True, timeout=60)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(r.stdout.split(), ["False", "None", layout.DEFAULT_MODEL, "False"])


@unittest.skipUnless(os.geteuid() == 0, "root's rules: run as root, as the Epilog is")
class NodeEpilogAgent(test_epilog.NodeEpilog):
    """node.run(): the restore backstop runs agent= (or $MPI_PSTATE_AGENT in
    a checkout) only when the plugin would run it."""

    def setUp(self) -> None:
        super().setUp()
        self.ran = self.tmp / "ran"
        self.agent = program(self.tmp / "sbin" / "mpi-pstate-agent", self.ran)
        self.conf = self.tmp / "slurm.conf"
        self.plug = self.tmp / "plugstack.conf"
        self.conf.write_text(f"PlugStackConfig={self.plug}\n")
        self.plug.write_text(f"required /usr/lib/slurm/mpi_pstate.so agent={self.agent}\n")
        self.env["SLURM_CONF"] = str(self.conf)

    def restore_of(self, **extra: str) -> dict:
        """The node record's restore entry of a job that left a restore record."""
        (self.runtime / "restore").mkdir(parents=True, exist_ok=True)
        (self.runtime / "restore" / "policy3").write_text("version=1\njob=4242\n")
        fx.plugin_json(self.runtime, 4242, "0", None)
        self.assertEqual(self.run_epilog(**extra), 0)
        return self.record()["restore"]

    def test_trusted_agent_runs(self) -> None:
        self.assertEqual(self.restore_of()["status"], "ok")
        self.assertEqual(self.ran.read_text().split()[0], "--restore")

    def test_user_owned_agent_is_not_run(self) -> None:
        os.chown(self.agent, NOBODY, -1)
        self.assertEqual(self.restore_of()["status"], "skipped")
        self.assertFalse(self.ran.exists())
        self.assertIn(f"mpi-pstate-agent not run: {self.agent}: owned by uid 65534, not root",
                      self.err.getvalue())

    def test_agent_in_a_directory_others_may_change_is_not_run(self) -> None:
        self.agent.parent.chmod(0o777)
        self.assertEqual(self.restore_of()["status"], "skipped")
        self.assertFalse(self.ran.exists())
        self.assertIn("writable by everybody (mode 0777)", self.err.getvalue())

    def test_agent_from_the_environment_only_in_a_checkout(self) -> None:
        self.plug.write_text("required /usr/lib/slurm/mpi_pstate.so\n")
        other = program(self.tmp / "dev" / "mpi-pstate-agent", self.tmp / "dev-ran")
        with mock.patch.object(safeio, "dev_tree", return_value=False):
            self.assertEqual(self.restore_of(MPI_PSTATE_AGENT=str(other))["status"], "skipped")
        self.assertFalse((self.tmp / "dev-ran").exists())
        self.assertEqual(self.restore_of(MPI_PSTATE_AGENT=str(other))["status"], "ok")
        self.assertTrue((self.tmp / "dev-ran").exists())


class DbTool(Tmp):
    def test_untrusted_dbcomment_is_not_run(self) -> None:
        tool = program(self.tmp / "libexec" / "mpi-pstate-dbcomment", self.tmp / "ran")
        dirs = {"dbcomment": [str(tool.parent)]}
        err = io.StringIO()
        with mock.patch.object(log, "_stream", [err]), \
                mock.patch.dict(os.environ, {"MPI_PSTATE_DBCOMMENT": ""}):
            self.assertEqual(entry._dbtool({}, dirs), str(tool))
            os.chown(tool, NOBODY, -1)
            self.assertIsNone(entry._dbtool({}, dirs))
        self.assertIn("mpi-pstate-dbcomment not run", err.getvalue())


class LauncherAsRoot(Tmp):
    """mpi-pstate-exec --node-agent as root runs only a trusted agent, and
    takes $MPI_PSTATE_AGENT only from a checkout."""

    def find(self, **env: str) -> tuple:
        err = io.StringIO()
        with mock.patch.dict(os.environ, env), contextlib.redirect_stderr(err), \
                mock.patch.dict(launcher.PATHS, {"here": "/nonexistent"}, clear=True):
            return launcher.find_agent(), err.getvalue()

    def test_agent_from_the_environment(self) -> None:
        agent = program(self.tmp / "sbin" / "mpi-pstate-agent", self.tmp / "ran")
        self.assertEqual(self.find(MPI_PSTATE_AGENT=str(agent)), (str(agent), ""))
        with mock.patch.object(safeio, "dev_tree", return_value=False):
            found, err = self.find(MPI_PSTATE_AGENT=str(agent))
        self.assertIsNone(found)
        self.assertIn("MPI_PSTATE_AGENT ignored: root uses the installed files only", err)
        os.chown(agent, NOBODY, -1)
        found, err = self.find(MPI_PSTATE_AGENT=str(agent))
        self.assertIsNone(found)
        self.assertIn("owned by uid 65534, not root: not used as root", err)


def git(*args: str, cwd: Path) -> str:
    r = subprocess.run(["git", "-c", "user.name=t", "-c", "user.email=t@t", *args], cwd=cwd,
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                       universal_newlines=True, timeout=60)
    if r.returncode != 0:
        raise AssertionError(f"git {args}: {r.stderr}")
    return r.stdout.strip()


@unittest.skipUnless(shutil.which("git"), "git not installed")
@unittest.skipIf(checkout is None, "bench/checkout.py is dev-machine code (Python 3.7+), "
                 "not installed")
class BenchSourceVersion(Tmp):
    """A benchmark (bench/checkout.py) records the commit it runs from without ever
    running git in another user's checkout as root (a foreign checkout's
    fsmonitor hook would run as root through safe.directory=*)."""

    def setUp(self) -> None:
        super().setUp()
        self.repo = self.tmp / "checkout"
        self.repo.mkdir()
        git("init", "-q", cwd=self.repo)
        (self.repo / "f").write_text("1\n")
        git("add", "f", cwd=self.repo)
        git("commit", "-q", "-m", "one", cwd=self.repo)
        self.sha = git("rev-parse", "HEAD", cwd=self.repo)
        self.marker = self.tmp / "hook-ran-as-root"
        hook = self.tmp / "fsmonitor"
        hook.write_text(f"#!/bin/sh\nid -u > {self.marker}\nexit 1\n")
        hook.chmod(0o755)
        git("config", "core.fsmonitor", str(hook), cwd=self.repo)
        (self.repo / "f").write_text("2\n")  # dirty: describe --dirty refreshes the index

    def test_foreign_checkout_is_read_without_git(self) -> None:
        for dirpath, dirnames, filenames in os.walk(self.repo):
            for n in dirnames + filenames + ["."]:
                os.chown(os.path.join(dirpath, n), NOBODY, NOBODY, follow_symlinks=False)
        # the hook is armed: the old command ran it as root
        subprocess.run(["git", "-c", "safe.directory=*", "-C", str(self.repo), "describe",
                        "--always", "--dirty"], stdout=subprocess.DEVNULL,
                       stderr=subprocess.DEVNULL, timeout=60)
        self.assertEqual(self.marker.read_text().strip(), "0")
        self.marker.unlink()
        v = checkout.source_version(self.repo)
        self.assertFalse(self.marker.exists(), "a foreign checkout's hook ran as root")
        self.assertEqual(v, f"{self.sha[:12]} (read from .git, dirty state unknown)")

    def test_packed_and_worktree_refs_are_read(self) -> None:
        git("pack-refs", "--all", cwd=self.repo)
        self.assertEqual(checkout.head_commit(self.repo), self.sha)
        wt = self.tmp / "wt"
        git("worktree", "add", "-q", "-b", "side", str(wt), cwd=self.repo)
        self.assertTrue((wt / ".git").is_file())
        self.assertEqual(checkout.head_commit(wt), self.sha)
        (self.repo / ".git" / "HEAD").write_text("ref: refs/../../etc/passwd\n")
        self.assertIsNone(checkout.head_commit(self.repo))

    def test_own_checkout_is_described_by_git(self) -> None:
        git("config", "--unset", "core.fsmonitor", cwd=self.repo)
        self.assertEqual(checkout.source_version(self.repo), self.sha[:7] + "-dirty")


class CalibrateBusyNode(Tmp):
    """calibrate refuses a node where a job may hold a core: what it would
    put back "as found" would be the job's lowered maximum."""

    def setUp(self) -> None:
        super().setUp()
        self.root = fx.fake_sysfs(self.tmp / "sys", ncpus=2)
        self.pol = self.root / "devices/system/cpu/cpufreq/policy1"
        self.runtime = self.tmp / "run"
        self.model = self.tmp / "var" / "model.json"

    def run_cal(self) -> Tuple[int, str]:
        a = SimpleNamespace(sysroot=str(self.root), sysroot_given=True, cpu=1, seconds=0.02,
                            reps=1, points=2, model=str(self.model), json=False, quiet=True,
                            runtime_dir=str(self.runtime), slurm_conf=str(self.tmp / "none"))
        out, err = io.StringIO(), io.StringIO()
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            rc = calibrate.run(a)
        return rc, err.getvalue()

    def assert_refused(self, why: str) -> None:
        before = (self.pol / "scaling_max_freq").read_text()
        rc, err = self.run_cal()
        self.assertEqual(rc, 1, err)
        self.assertIn("this node is not idle: ", err)
        self.assertIn(why, err)
        self.assertIn("nothing stored", err)
        self.assertFalse(self.model.exists())
        self.assertEqual((self.pol / "scaling_max_freq").read_text(), before)

    def test_restore_records_refuse(self) -> None:
        (self.runtime / "restore").mkdir(parents=True)
        (self.runtime / "restore" / "policy1").write_text("version=1\njob=4242\n")
        self.assert_refused(f"restore records in {self.runtime}/restore (policy1)")

    def test_a_running_agent_refuses_a_finished_step_does_not(self) -> None:
        step = fx.plugin_json(self.runtime, 4242, "0", None)
        (step / "agent.pid").write_text(f"{os.getpid()}\n")  # a live process
        self.assert_refused(f"job 4242 step 0 has a running agent (pid {os.getpid()})")
        child = subprocess.Popen(["true"])
        child.wait()
        (step / "agent.pid").write_text(f"{child.pid}\n")  # its agent is gone
        rc, err = self.run_cal()
        self.assertEqual(rc, 0, err)
        self.assertTrue(self.model.exists())

    def test_untrusted_runtime_dir_refuses(self) -> None:
        (self.runtime / "restore").mkdir(parents=True)
        os.chown(self.runtime / "restore", NOBODY, -1)
        self.assert_refused("cannot be read (")


def load_tests(loader: unittest.TestLoader, tests: unittest.TestSuite,
               pattern: Any) -> unittest.TestSuite:
    """This module's own tests: NodeEpilogAgent reuses test_epilog's
    NodeEpilog fixture, not its tests."""
    suite = unittest.TestSuite()
    for cls in (TrustedPath, ReadTrusted, EnvOverrides, NodeEpilogAgent, DbTool,
                LauncherAsRoot, BenchSourceVersion, CalibrateBusyNode):
        suite.addTests(cls(n) for n in loader.getTestCaseNames(cls) if n in vars(cls))
    return suite


if __name__ == "__main__":
    unittest.main()
