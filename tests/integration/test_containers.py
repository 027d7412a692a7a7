# SPDX-License-Identifier: BSD-3-Clause
"""Slurm's own --container (an OCI bundle run by rootless runc, oci.conf
beside the lab's slurm.conf) with the plugin active: where the bundle's root
lacks the preload library the job runs with no ld.so message and the step
record says it is not measured (container); where the bundle bind-mounts the
library's directory (a site's line, docs/admin.md "Containers") the step
record keeps the library and the rank is measured: its slot is used and
finalized.  Slurm 22.05 writes the container's config.json, environment
included, when slurmstepd sets the step up, before any SPANK hook: task_init's
LD_PRELOAD never reaches the container there, so that release skips the
measured part (naming it); 24.11 writes a config.json per task after
task_init and must measure.

The bundle's root is an empty directory with the host's /usr (a tmpfs over
/usr/local, where the lab installs mpi-pstate), /etc and the /lib* links: a
root without the library, made from nothing but the host, so the test needs
no image.  runc comes from
Debian (tests/cluster/deps.sh)."""
from __future__ import annotations

import json
import os
import pwd
import re
import shutil
import unittest
from functools import lru_cache
from pathlib import Path

import labtools as lt
import test_plugin as tp

NODE = "n1"
OCI_CONF = lt.LAB / "etc" / "oci.conf"
RUNC = shutil.which("runc")
LDSO_ERROR = re.compile(r"ERROR: ld\.so: object .* from LD_PRELOAD cannot be preloaded")
# The ids runc gives the container: %n.%u.%j.%s.%t (node, user, job, step, task).
OCI = """# mpi-pstate integration test (tests/integration/test_containers.py)
RunTimeQuery="runc --rootless=true --root=/tmp/runc-%u state %n.%u.%j.%s.%t"
RunTimeRun="runc --rootless=true --root=/tmp/runc-%u run %n.%u.%j.%s.%t -b %b"
RunTimeKill="runc --rootless=true --root=/tmp/runc-%u kill -a %n.%u.%j.%s.%t"
RunTimeDelete="runc --rootless=true --root=/tmp/runc-%u delete --force %n.%u.%j.%s.%t"
"""


@lru_cache(maxsize=None)
def slurm_release() -> tuple[int, int]:
    """(major, minor) of the lab's Slurm: "slurm 22.05.8" -> (22, 5)."""
    out = lt.root(["srun", "--version"]).stdout
    m = re.match(r"slurm(?:-wlm)? (\d+)\.(\d+)", out)
    if not m:
        raise AssertionError(f"srun --version: {out!r}")
    return int(m.group(1)), int(m.group(2))


def bind(src: str, dst: str | None = None) -> dict:
    return {"destination": dst or src, "type": "bind", "source": src,
            "options": ["rbind", "ro", "nosuid", "nodev"]}


def bundle(wd: Path, name: str, extra_mounts: list[dict]) -> Path:
    """A rootless OCI bundle owned by the test user: an empty root, the host's
    /usr and /etc bound in, /dev/shm of the host (the step's segment)."""
    b = wd / name
    (b / "rootfs").mkdir(parents=True)
    pw = pwd.getpwnam(lt.TEST_USER)
    for p in (b, b / "rootfs"):
        os.chown(p, pw.pw_uid, pw.pw_gid)
    lt.as_user(["runc", "spec", "--rootless"], cwd=b, check=True)
    cfg = json.loads((b / "config.json").read_text())
    mounts = [m for m in cfg["mounts"] if m["destination"] not in ("/sys/fs/cgroup", "/dev/shm")]
    # the host's /usr without /usr/local, where the lab installs mpi-pstate
    mounts += [bind("/usr"), {"destination": "/usr/local", "type": "tmpfs", "source": "tmpfs",
                              "options": ["nosuid", "nodev", "mode=755"]},
               bind("/etc"), bind("/tmp"),
               {"destination": "/dev/shm", "type": "bind", "source": "/dev/shm",
                "options": ["rbind", "nosuid", "nodev"]}]
    # merged-/usr links of Debian's root: /bin -> usr/bin and so on
    for link in ("bin", "lib", "lib64", "sbin"):
        target = os.readlink(f"/{link}") if os.path.islink(f"/{link}") else None
        if target:
            (b / "rootfs" / link).symlink_to(target)
    mounts += extra_mounts
    cfg["mounts"] = mounts
    cfg["root"] = {"path": "rootfs", "readonly": True}
    cfg["process"]["terminal"] = False
    cfg["linux"].pop("resources", None)
    cfg["linux"]["namespaces"] = [n for n in cfg["linux"]["namespaces"]
                                  if n["type"] not in ("cgroup", "network")]
    (b / "config.json").write_text(json.dumps(cfg, indent=1))
    for p in [b, *b.rglob("*")]:
        os.lchown(p, pw.pw_uid, pw.pw_gid)
    return b


class Container(unittest.TestCase):
    @classmethod
    def setUpClass(cls) -> None:
        if not RUNC:
            raise unittest.SkipTest("runc not installed (tests/cluster/deps.sh installs it)")
        cls.front = lt.installed().front
        OCI_CONF.write_text(OCI)
        lt.lab("configless", NODE, "off")  # restarts the node's slurmd: oci.conf is read at start

    @classmethod
    def tearDownClass(cls) -> None:
        OCI_CONF.unlink(missing_ok=True)
        lt.lab("configless", NODE, "off")

    def run_in(self, b: Path, wd: Path) -> tuple[int, str]:
        script = ("MPI_PSTATE_VERBOSE=1 srun --mpi-pstate=profile --mpi=none -n1 "
                  f"--container={b} /bin/sh -c 'echo LD=$LD_PRELOAD UNMEASURED=$MPI_PSTATE_UNMEASURED; "
                  "grep -c libmpi-pstate /proc/self/maps; "
                  f"{wd}/imbalance.mpich 2 5 && echo RAN-OK'\n")
        job = lt.sbatch(["-t", "2", "-w", NODE, "-N1", "-n1", "--mpi-pstate=profile"], script, wd)
        state = lt.wait_job(job, timeout=150)
        out = (wd / f"slurm-{job}.out").read_text()
        self.assertEqual(state, "COMPLETED", out)
        return job, out

    def step_record(self, job: int) -> dict:
        # The node Epilog keeps the plugin's step record in the node's
        # record and removes the step directory (docs/records.md).
        return tp.step_record(NODE, job, "0")

    def ranks_seen(self, job: int) -> list[tuple[int, int, str]]:
        """(slot, rank, state) of every rank the agent found in the step's
        segment: what the library wrote from inside the container."""
        step = tp.node_step(NODE, job, "0")
        return [(r["slot"], r["rank"], r["state"]) for r in step["agent"]["ranks"]]

    def test_root_without_library(self) -> None:
        wd = lt.workdir("container-missing")
        lt.give(lt.BUILD / "tests" / "mpi" / "imbalance.mpich", wd)
        b = bundle(wd, "bundle", [bind(str(wd))])
        job, out = self.run_in(b, wd)
        self.assertIsNone(LDSO_ERROR.search(out), out)
        self.assertIn("LD= ", out)
        self.assertIn("RAN-OK", out)
        rec = self.step_record(job)
        self.assertEqual((rec["container"], rec["unmeasured"], rec["preload"]), ("oci", "container", None), rec)
        self.assertEqual(self.ranks_seen(job), [])

    def test_site_bind_mount_is_measured(self) -> None:
        wd = lt.workdir("container-bound")
        lt.give(lt.BUILD / "tests" / "mpi" / "imbalance.mpich", wd)
        libdir = str(self.front.parent)
        b = bundle(wd, "bundle", [bind(str(wd)), bind(libdir)])
        job, out = self.run_in(b, wd)
        self.assertIsNone(LDSO_ERROR.search(out), out)
        self.assertIn("RAN-OK", out)
        rec = self.step_record(job)
        self.assertEqual((rec["container"], rec["unmeasured"], rec["preload"]), ("oci", None, str(self.front)),
                         rec)
        if slurm_release() < (23, 2) and "LD= " in out:
            # Slurm 22.05 (seen on 22.05.8 with runc) writes the container's
            # config.json, its process.env taken from the step's environment,
            # in slurmstepd's step setup (setup_container), before any SPANK
            # hook runs; the variables the plugin sets in task_init
            # (LD_PRELOAD, MPI_PSTATE_*) reach only the runtime's own process.
            # 24.11 writes a config.json per task when it starts the task,
            # after task_init (tested); the per-task config.json came with
            # 23.02 (NEWS: "create per task spool directory"), hence the bound.
            self.skipTest("Slurm %d.%02d --container" % slurm_release() + " writes the container's "
                          "environment (config.json process.env) at step setup, before SPANK task_init sets "
                          f"LD_PRELOAD: nothing is preloaded in the container (seen: {out.splitlines()[0]!r})")
        # the library ran in the container and used the step's segment
        self.assertIn(f"LD={self.front} UNMEASURED=", out)
        self.assertRegex(out, rf"mpi-pstate: rank 0/1: mpich backend, /dev/shm/mpi-pstate\.{job}\.0\.[0-9a-f]{{16}} slot 0")
        self.assertEqual(self.ranks_seen(job), [(0, 0, "finalized")])


if __name__ == "__main__":
    unittest.main()
