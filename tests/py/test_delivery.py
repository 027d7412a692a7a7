# SPDX-License-Identifier: BSD-3-Clause
"""How a node writes collect_dir (epilog/mpi_pstate/delivery.py, node.publish):
as SlurmUser with no supplementary group, never past the pass's deadline,
with no output an Epilog's reader waits on, never creating a missing
collect_dir, and never again in a pass once the share failed.  Run as root
(make check); as another user the uid drop cannot be shown and the suite is
skipped."""

import errno
import json
import os
import pwd
import shutil
import stat
import sys
import tempfile
import unittest
from pathlib import Path

TOP = Path(__file__).resolve().parents[2]
if str(TOP / "epilog") not in sys.path:
    sys.path.insert(0, str(TOP / "epilog"))

from mpi_pstate.core import noderecord, siteconf
from mpi_pstate.site import delivery, node_epilog, pending  # noqa: E402

NOBODY = pwd.getpwnam("nobody")


@unittest.skipUnless(os.geteuid() == 0, "the uid drop needs root")
class Delivery(unittest.TestCase):

    def setUp(self) -> None:
        # /tmp is sticky: the walk from / is one SlurmUser may take
        self.tmp = Path(tempfile.mkdtemp(prefix="mpst-delivery-", dir="/tmp"))
        self.addCleanup(shutil.rmtree, self.tmp, True)
        os.chmod(self.tmp, 0o755)
        self.collect = self.tmp / "records"
        self.collect.mkdir()
        os.chown(self.collect, NOBODY.pw_uid, NOBODY.pw_gid)
        self.cfg = siteconf.Config(collect_dir=str(self.collect), slurm_user="nobody",
                                   runtime_dir=str(self.tmp / "run"))

    def share(self, timeout: float = 30.0) -> delivery.Share:
        return delivery.Share(str(self.collect), NOBODY.pw_uid, timeout)

    def record(self, job: int) -> bytes:
        rec = noderecord.build(job, "n1", 1000, settings=None, steps=[], infos=[],
                               restore={"status": "ok"}, problems=[], written=0.0)
        return noderecord.encode(rec)

    def test_the_child_is_slurm_user_with_no_group_and_no_output(self) -> None:
        out = self.collect / "ids.json"

        def work() -> None:
            ids = {"uid": os.getresuid(), "gid": os.getresgid(), "groups": os.getgroups(),
                   "fds": [os.readlink(f"/proc/self/fd/{fd}") for fd in (0, 1, 2)],
                   "others": sorted(int(fd) for fd in os.listdir("/proc/self/fd"))}
            out.write_text(json.dumps(ids))

        # fd 63, inheritable: where bash leaves a process substitution's pipe
        low = os.open(os.devnull, os.O_RDONLY)
        os.dup2(low, 63)
        planted = 63
        os.close(low)
        self.addCleanup(os.close, planted)
        self.assertEqual(self.share().write(work), [])
        ids = json.loads(out.read_text())
        self.assertEqual(ids["uid"], [NOBODY.pw_uid] * 3)
        self.assertEqual(ids["gid"], [NOBODY.pw_gid] * 3)
        self.assertEqual(ids["groups"], [])
        # slurmd reads an Epilog's output to its end: a child left blocked in
        # a mount must hold none of it
        self.assertEqual(ids["fds"], [os.devnull] * 3)
        # 3: the answer pipe; nothing inherited (the planted descriptor
        # stands for a shell's process substitution); under qemu-user the
        # emulator may hold descriptors of its own
        self.assertNotIn(planted, ids["others"], ids)
        self.assertIn(3, ids["others"], ids)
        if not os.environ.get("MPI_PSTATE_TEST_EMULATED"):
            self.assertEqual(ids["others"], [0, 1, 2, 3, 4], ids)
        self.assertEqual(out.stat().st_uid, NOBODY.pw_uid)

    def test_a_hung_write_is_given_up_and_the_pass_tries_no_more(self) -> None:
        tried = self.tmp / "tried"
        fifo = self.tmp / "never-written"
        os.mkfifo(fifo)
        os.chmod(self.tmp, 0o777)  # the child (nobody) notes it was run
        self.addCleanup(os.chmod, self.tmp, 0o755)
        share = self.share(timeout=0.5)

        def hang() -> None:
            tried.write_text("1")
            with open(fifo) as f:  # blocks: nobody opens the other end
                f.read()

        with self.assertRaises(delivery.ShareUnusable) as cm:
            share.write(hang)
        self.assertEqual(cm.exception.errno, errno.ETIMEDOUT)
        self.assertIn("hung mount", str(cm.exception))
        tried.unlink()
        with self.assertRaises(delivery.ShareUnusable):
            share.write(hang)
        self.assertFalse(tried.exists(), "a second access in the same pass")

    def test_an_error_is_the_childs_errno_and_text(self) -> None:
        def full() -> None:
            raise OSError(errno.ENOSPC, "No space left on device")

        with self.assertRaises(delivery.ShareUnusable) as cm:
            self.share().write(full)
        self.assertEqual(cm.exception.errno, errno.ENOSPC)
        self.assertIn("No space left", str(cm.exception))

    def test_an_exception_in_the_child_is_an_answer_too(self) -> None:
        def broken() -> None:
            raise ValueError("bad")

        with self.assertRaises(delivery.ShareUnusable) as cm:
            self.share().write(broken)
        self.assertIn("ValueError: bad", str(cm.exception))

    def test_publish_writes_as_slurm_user(self) -> None:
        node_epilog.publish(self.cfg, 42, "n1", self.record(42), share=self.share())
        jd = self.collect / "42"
        rec = jd / "node.n1.json"
        self.assertEqual((jd.stat().st_uid, rec.stat().st_uid), (NOBODY.pw_uid,) * 2)
        self.assertEqual(stat.S_IMODE(rec.stat().st_mode), 0o644)
        self.assertEqual(json.loads(rec.read_text())["job"], 42)

    def test_a_missing_collect_dir_is_never_created(self) -> None:
        shutil.rmtree(self.collect)
        with self.assertRaises(delivery.ShareUnusable) as cm:
            node_epilog.publish(self.cfg, 43, "n1", self.record(43), share=self.share())
        self.assertEqual(cm.exception.errno, errno.ENOENT)
        self.assertIn("mounted", str(cm.exception))
        self.assertFalse(self.collect.exists())

    def test_a_root_owned_collect_dir_is_refused(self) -> None:
        """What an unmounted share's mount point looks like."""
        os.chown(self.collect, 0, 0)
        with self.assertRaises(delivery.ShareUnusable) as cm:
            node_epilog.publish(self.cfg, 44, "n1", self.record(44), share=self.share())
        self.assertEqual(cm.exception.errno, errno.EACCES)
        self.assertIn("SlurmUser", str(cm.exception))
        self.assertEqual(list(self.collect.iterdir()), [])

    def test_pending_records_wait_then_arrive_whole(self) -> None:
        runtime = self.tmp / "run"
        runtime.mkdir(mode=0o755)
        shutil.rmtree(self.collect)
        share = self.share()
        data = self.record(45)
        with self.assertRaises(OSError):
            node_epilog.publish(self.cfg, 45, "n1", data, share=share)
        pending.keep(str(runtime), 45, "n1", data)
        self.assertEqual(pending.waiting(str(runtime)), ["45.n1.json"])
        self.collect.mkdir()
        os.chown(self.collect, NOBODY.pw_uid, NOBODY.pw_gid)
        share = self.share()  # the next pass
        probs = pending.deliver(str(runtime),
                                lambda j, n, d: node_epilog.publish(self.cfg, j, n, d, share=share))
        self.assertEqual(probs, [])
        self.assertEqual(pending.waiting(str(runtime)), [])
        self.assertEqual((self.collect / "45" / "node.n1.json").read_bytes(), data)


class Deadline(unittest.TestCase):

    def test_a_quarter_of_the_epilog_timeout_at_most(self) -> None:
        self.assertEqual(delivery.deadline(10.0, None), 10.0)
        self.assertEqual(delivery.deadline(10.0, 20.0), 5.0)
        self.assertEqual(delivery.deadline(10.0, 600.0), 10.0)

    def test_the_key_and_slurm_conf_are_read(self) -> None:
        with tempfile.TemporaryDirectory() as d:
            conf = Path(d) / "slurm.conf"
            plug = Path(d) / "plugstack.conf"
            conf.write_text(f"PlugStackConfig={plug}\nPrologEpilogTimeout=40\n")
            plug.write_text("optional /x/spank_mpi_pstate.so publish_timeout=3s\n")
            c = siteconf.load(str(conf))
            self.assertEqual((c.publish_timeout_s, c.epilog_timeout_s), (3.0, 40.0), c.problems)
            conf.write_text(f"PlugStackConfig={plug}\nEpilogTimeout=8\nPrologEpilogTimeout=40\n")
            plug.write_text("optional /x/spank_mpi_pstate.so publish_timeout=200ms\n")
            c = siteconf.load(str(conf))
            self.assertEqual((c.publish_timeout_s, c.epilog_timeout_s), (10.0, 8.0))
            self.assertTrue(any("publish_timeout" in p for p in c.problems), c.problems)


if __name__ == "__main__":
    unittest.main()
