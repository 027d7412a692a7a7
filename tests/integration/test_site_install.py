# SPDX-License-Identifier: BSD-3-Clause
"""The product installed on the cluster's own Slurm exactly as docs/admin.md
tells an admin (`tests/cluster/lab install`: `make install` into the system
paths and Slurm's plugin directory, the example line uncommented, every
daemon restarted): every daemon starts and serves jobs with it, without it
after `make uninstall`, and with it again; nothing it installs into a Slurm
directory carries a Slurm plugin-type prefix -- and such a name really does
stop slurmctld, which is why."""
from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import tempfile
import unittest
from pathlib import Path

import labtools as lt

def users_job(with_plugin: bool, name: str) -> tuple[int, str]:
    """The demo's job (tests/cluster/demo.sh): one rank per node, rank 0
    computes while rank 1 waits in MPI_Barrier."""
    wd = lt.workdir(f"site-install-{name}")
    fam, mpi = lt.srun_family()
    lt.give(lt.BUILD / "tests" / "mpi" / f"imbalance.{fam}", wd)
    job = lt.sbatch(["-N", "2", "--ntasks-per-node=1", "-c", "2", "-J", f"site-{name}",
                     *(["--mpi-pstate"] if with_plugin else [])],
                    f"srun --mpi={mpi} ./imbalance.{fam} 10 50\n", wd)
    return job, lt.wait_job(job)


class SiteInstall(unittest.TestCase):
    def assert_cluster_serves(self, with_plugin: bool) -> None:
        st = lt.lab("status", check=False)
        self.assertEqual(st.returncode, 0, st.stdout)
        job, state = users_job(with_plugin, "on" if with_plugin else "off")
        self.assertEqual(state, "COMPLETED", lt.daemon_log_tail(10))
        # where the summary lives (docs/records.md §5), written just after the job
        comment = lt.summary_comment(job, timeout=60 if with_plugin else 0)
        if not with_plugin:
            self.assertNotRegex(comment, r"^mpi-pstate/")
            return
        m = re.match(r"^mpi-pstate/\d+:(\{.*\})$", comment)
        self.assertIsNotNone(m, comment)
        summary = json.loads(m.group(1))
        self.assertEqual((summary["state"], summary["nodes"], summary["ranks"]), ("complete", 2, 2), comment)
        self.assertGreater(summary["transitions"], 0, comment)  # 10 waits of 50 ms, threshold 500 us

    def test_installed_plugin_dir_holds_only_the_spank_name(self) -> None:
        # Which names are outside every Slurm plugin type is checked on the
        # same file list in tests/py/test_packaging.py (the package is exactly
        # `make install`); here: what really landed in this Slurm's directory.
        inst = lt.installed()
        ours = sorted(p.name for p in inst.plugin.parent.iterdir() if "pstate" in p.name)
        self.assertEqual(ours, ["spank_mpi_pstate.so"])

    def test_plugin_asks_for_job_failure_not_node_failure(self) -> None:
        """Slurm 25.05 and later drain the node on a failed remote
        slurm_spank_init unless the plugin exports
        slurm_spank_init_failure_mode (ESPANK_JOB_FAILURE): the installed
        plugin does, built against such a release."""
        r = lt.root(["nm", "-D", "--defined-only", str(lt.installed().plugin)])
        exported = {ln.split()[-1] for ln in r.stdout.splitlines() if ln.strip()}
        self.assertIn("slurm_spank_init", exported)
        if lt.slurm_version() >= (25, 5):
            self.assertIn("slurm_spank_init_failure_mode", exported)
        else:
            self.assertNotIn("slurm_spank_init_failure_mode", exported)

    def test_daemons_serve_jobs_installed_uninstalled_reinstalled(self) -> None:
        self.assert_cluster_serves(with_plugin=True)
        try:
            lt.lab("uninstall")
            plugindir = Path(lt.root(["make", "-s", "-C", str(lt.TOP), "print-dirs"]).stdout
                             .split("SLURM_PLUGINDIR=")[1].split()[0])
            self.assertEqual([p.name for p in plugindir.iterdir() if "pstate" in p.name], [])
            self.assert_cluster_serves(with_plugin=False)
            r = lt.as_user(["sbatch", "--mpi-pstate", "--wrap", "true"])
            self.assertNotEqual(r.returncode, 0)
            self.assertIn("mpi-pstate", r.stderr)  # the option is named in the refusal
        finally:
            lt.lab("install", timeout=900)
        self.assert_cluster_serves(with_plugin=True)

    def test_package_installs_serves_and_purges(self) -> None:
        """docs/admin.md "Install from the package": make deb, apt install, the
        same activation; the demo job is measured; dpkg --purge leaves a
        cluster that starts and serves jobs."""
        try:
            lt.lab("install", "--deb", timeout=900)
            inst = lt.installed()
            owner = lt.root(["dpkg", "-S", str(inst.plugin)]).stdout
            self.assertTrue(owner.startswith("mpi-pstate:"), owner)
            self.assertTrue(str(inst.front).startswith("/usr/lib/mpi-pstate/"), inst.front)
            self.assert_cluster_serves(with_plugin=True)
            lt.lab("uninstall")
            st = lt.root(["dpkg-query", "-W", "-f=${db:Status-Status}", "mpi-pstate"], check=False).stdout
            self.assertIn(st, ("", "not-installed"))
            self.assertFalse(inst.plugin.exists())
            self.assert_cluster_serves(with_plugin=False)
        finally:
            lt.lab("install", timeout=900)

    def test_type_prefixed_plugin_name_stops_slurmctld(self) -> None:
        """What a real site saw: a SPANK plugin installed as mpi_<x>.so is
        loaded by slurmctld as an MPI plugin at start, and slurmctld dies.  A
        private controller (own ports and state) starts with our installation
        and dies with a copy of our plugin under an mpi_ name."""
        inst = lt.installed()
        self.assertIn("Running as primary controller", self.private_ctld(None))
        bad = inst.plugin.parent / "mpi_pstatetest.so"
        try:
            shutil.copy(inst.plugin, bad)
            out = self.private_ctld(bad)
        finally:
            bad.unlink(missing_ok=True)
        self.assertRegex(out, r"fatal:.*(missing symbols|[Cc]orrupt)")

    def private_ctld(self, bad: Path | None) -> str:
        with tempfile.TemporaryDirectory() as tmp:
            conf = Path(tmp) / "slurm.conf"
            text = (lt.LAB / "etc" / "slurm.conf").read_text()
            repl = {"SlurmUser": "root", "SlurmctldPort": "16837", "SlurmdPort": "16838",
                    "StateSaveLocation": tmp, "SlurmctldPidFile": f"{tmp}/ctld.pid",
                    "SlurmctldLogFile": f"{tmp}/ctld.log", "AccountingStorageType":
                    "accounting_storage/none", "ClusterName": "mpstprivate",
                    "EpilogSlurmctld": "/bin/true", "SlurmctldDebug": "verbose"}
            for k, v in repl.items():
                text = re.sub(rf"(?m)^{k}=.*$", f"{k}={v}", text)
            text = re.sub(r"(?m)^Accounting(StorageHost|StoragePort|StorageEnforce)=.*$", "", text)
            # Its nodes at ports nobody listens on: it must never talk to the lab's slurmd.
            text = re.sub(r"(?m)^(NodeName=.*) Port=\d+", r"\1 Port=16839", text)
            conf.write_text(text)
            p = subprocess.Popen(["/usr/sbin/slurmctld", "-D", "-i", "-f", str(conf)], stdout=subprocess.DEVNULL,
                                 stderr=subprocess.DEVNULL, env=dict(os.environ, SLURM_CONF=str(conf)),
                                 start_new_session=True)
            log = Path(tmp) / "ctld.log"
            try:
                for _ in range(600):
                    text = log.read_text(errors="replace") if log.exists() else ""
                    if "Running as primary controller" in text or p.poll() is not None:
                        break
                    try:
                        p.wait(timeout=0.1)
                    except subprocess.TimeoutExpired:
                        pass
            finally:
                if p.poll() is None:
                    os.killpg(p.pid, signal.SIGTERM)
                    p.wait(timeout=30)
            return log.read_text(errors="replace") if log.exists() else ""


if __name__ == "__main__":
    unittest.main()
