"""The product installed on the cluster's own Slurm exactly as docs/admin.md
tells an admin (`tests/cluster/lab install`: `make install` into the system
paths and Slurm's plugin directory, the example line uncommented, every
daemon restarted): every daemon starts and serves jobs with it, without it
after `make uninstall`, and with it again; nothing it installs into a Slurm
directory carries a Slurm plugin-type prefix -- and such a name really does
stop slurmctld, which is why."""
from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import tempfile
import unittest
from pathlib import Path

import labtools as lt

# Slurm's plugin types (`<type>_<name>.so`), 22.05 to 25.x; the prefixes of
# the plugins installed beside ours are added at run time.
SLURM_TYPES = {
    "accounting_storage", "acct_gather_energy", "acct_gather_filesystem", "acct_gather_interconnect",
    "acct_gather_profile", "auth", "bb", "burst_buffer", "certgen", "certmgr", "cgroup", "cli_filter",
    "core_spec", "cred", "data_parser", "ext_sensors", "gpu", "gres", "hash", "job_container",
    "job_submit", "jobacct_gather", "jobcomp", "mcs", "mpi", "namespace", "node_features", "power",
    "preempt", "prep", "priority", "proctrack", "route", "sched", "select", "serializer",
    "site_factor", "switch", "task", "tls", "topology",
}


def type_prefixes(plugindir: Path) -> set[str]:
    """Every `<type>_` a Slurm plugin name in plugindir may stand for: each
    underscore-delimited head of every .so there that is not ours."""
    heads = set(SLURM_TYPES)
    for p in plugindir.glob("*.so"):
        if "pstate" in p.name or p.name.startswith("spank_"):  # SPANK plugins: no type
            continue
        parts = p.name[:-3].split("_")
        heads.update("_".join(parts[:i]) for i in range(1, len(parts)))
    return heads


def users_job(args: list[str], name: str) -> tuple[int, str]:
    wd = lt.workdir(f"site-install-{name}")
    job = lt.sbatch(["-N", "2", "--ntasks-per-node=1", "-J", f"site-{name}", *args],
                    "srun --mpi=pmix hostname\n", wd)
    return job, lt.wait_job(job)


class SiteInstall(unittest.TestCase):
    def assert_cluster_serves(self, with_plugin: bool) -> None:
        st = lt.lab("status", check=False)
        self.assertEqual(st.returncode, 0, st.stdout)
        job, state = users_job(["--mpi-pstate"] if with_plugin else [], "on" if with_plugin else "off")
        self.assertEqual(state, "COMPLETED", lt.daemon_log_tail(10))
        if with_plugin:
            self.assertRegex(lt.sacct(job, ["AdminComment"])[0]["AdminComment"], r"^mpi-pstate/\d+:")

    def test_installed_names_outside_slurm_plugin_types(self) -> None:
        inst = lt.installed()
        plugindir = inst.plugin.parent
        ours = sorted(p.name for p in plugindir.iterdir() if "pstate" in p.name)
        self.assertEqual(ours, ["spank_mpi_pstate.so"])
        for prefix in type_prefixes(plugindir):
            with self.subTest(prefix=prefix):
                self.assertFalse(inst.plugin.name.startswith(prefix + "_"))
        # The check can fail: the name this project used to install under.
        self.assertTrue(any("mpi_pstate.so".startswith(p + "_") for p in type_prefixes(plugindir)))

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
            lt.lab("install")
        self.assert_cluster_serves(with_plugin=True)

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
