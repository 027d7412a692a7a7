# SPDX-License-Identifier: BSD-3-Clause
"""The agent's records agent.json and sums.json, created empty by root
before the agent drops its privileges (the agent fills them through the
open descriptor at its exit): an empty one is read exactly as a missing
one, with no problem line, by every reader (the node Epilog's step_dir()
and read_sums(), the cheap path past the detail bound); a non-empty but
truncated one stays a problem."""
import argparse
import io
import json
import os
import tempfile
import unittest
from pathlib import Path
from typing import Any, Dict, List, Optional, Tuple
from unittest import mock

import test_epilog_fixtures as fx
from mpi_pstate.core import log, noderecord, safeio
from mpi_pstate.site import node_epilog, stepscan

AGENT = {"format": "mpi-pstate-agent", "version": 1, "host": "n1", "job": 4242, "step": 0,
         "energy": {"status": "ok", "package_j": 70.0, "dram_j": 7.5, "sockets": []},
         "mechanism": "max_freq"}
VOLATILE = ("written", "ino", "dev")  # the time, the inode each run's new segment has


def same_files(v: Any) -> Any:
    """A record without what differs between two runs on equal files."""
    if isinstance(v, dict):
        return {k: same_files(x) for k, x in v.items() if k not in VOLATILE}
    if isinstance(v, list):
        return [same_files(x) for x in v]
    return v


class EmptyRecords(unittest.TestCase):
    def setUp(self) -> None:
        self._td = tempfile.TemporaryDirectory()
        self.tmp = Path(self._td.name)
        os.chmod(self.tmp, 0o755)
        self.collect, self.runtime, self.shm, self.sys = fx.epilog_dirs(self.tmp)
        self.err = io.StringIO()

    def tearDown(self) -> None:
        self._td.cleanup()

    def plant(self, step: str, agent: Optional[bytes], sums: Optional[bytes]) -> Path:
        """A step of job 4242 with its segment and plugin.json; agent.json
        and sums.json with the given bytes (None: no file)."""
        seg = self.shm / f"mpi-pstate.4242.{step}.0123456789abcde{step}"
        fx.segment(seg, [{"rank": 0}, {"rank": 1, "mpi": 5.0}])
        os.chown(seg, 1000, -1)
        d = fx.plugin_json(self.runtime, 4242, step, seg, nslots=2)
        for name, data in (("agent.json", agent), ("sums.json", sums)):
            if data is not None:
                (d / name).write_bytes(data)
                os.chmod(d / name, 0o600)  # as root creates it for the agent
        return d

    def run_epilog(self) -> Dict[str, Any]:
        """The node Epilog of job 4242; its record without what changes
        from run to run."""
        a = argparse.Namespace(collect_dir=str(self.collect), runtime_dir=str(self.runtime),
                               slurm_conf=None, sysroot=str(self.sys), shm_dir=str(self.shm),
                               keep_segments=False, quiet=False)
        env = {"SLURM_JOB_ID": "4242", "SLURMD_NODENAME": "n1", "SLURM_JOB_UID": "1000",
               "SLURM_CONF": str(self.tmp / "none.conf"), "PATH": os.environ["PATH"]}
        with mock.patch.dict(os.environ, env, clear=True), \
                mock.patch.object(log, "_stream", [self.err]):
            self.assertEqual(node_epilog.run(a, {"agent": []}), 0)
        path = self.collect / "4242" / "node.n1.json"
        rec = json.loads(path.read_text())
        path.unlink()
        return same_files(rec)

    def test_an_empty_agent_record_is_a_missing_one(self) -> None:
        self.plant("0", None, None)
        missing = self.run_epilog()
        self.assertEqual(missing["problems"], [])
        self.plant("0", b"", b"")
        self.assertEqual(self.run_epilog(), missing)
        # only one of the two empty, the other missing
        for agent, sums in ((b"", None), (None, b"")):
            with self.subTest(agent=agent, sums=sums):
                self.plant("0", agent, sums)
                self.assertEqual(self.run_epilog(), missing)
        # with an agent record, an empty sums.json is no sums.json
        self.plant("0", json.dumps(AGENT).encode(), None)
        with_agent = self.run_epilog()
        self.assertEqual(with_agent["energy"]["joules"], 77.5)
        self.plant("0", json.dumps(AGENT).encode(), b"")
        self.assertEqual(self.run_epilog(), with_agent)
        self.assertNotIn("warning", self.err.getvalue())

    def test_past_the_detail_bound_an_empty_sums_record_is_a_missing_one(self) -> None:
        """A step past the detail bound is read from its sums.json alone
        when it has one; an empty one sends it the long way, as none does."""
        with mock.patch.object(noderecord, "MAX_DETAIL_STEPS", 1):
            self.plant("0", None, None)
            self.plant("1", None, None)
            missing = self.run_epilog()
            self.plant("0", b"", b"")
            self.plant("1", b"", b"")
            self.assertEqual(self.run_epilog(), missing)
        self.assertEqual(missing["problems"], [])
        self.assertEqual(missing["rest"]["steps"], 1)

    def step_dir(self, d: Path) -> Tuple[Optional[Dict[str, Any]], List[str]]:
        """node.step_dir() of the step directory d, and its problems."""
        problems: List[str] = []
        sfd = safeio.open_dir(str(self.runtime / "steps"), trusted={0})
        try:
            return stepscan.step_dir(sfd, d.name, "0", "n1", problems), problems
        finally:
            os.close(sfd)

    def test_a_truncated_record_stays_a_problem(self) -> None:
        d = self.plant("0", json.dumps(AGENT).encode()[:20], b'{"format": "mpi-pst')
        info, problems = self.step_dir(d)
        assert info is not None
        self.assertEqual((info["agent"], info["sums"]), (None, None))
        self.assertEqual([p.split(":")[0] for p in problems],
                         ["4242.0/agent.json", "4242.0/sums.json"])
        # the same files empty: nothing to say
        (d / "agent.json").write_bytes(b"")
        (d / "sums.json").write_bytes(b"")
        info, problems = self.step_dir(d)
        assert info is not None
        self.assertEqual((info["agent"], info["sums"], problems), (None, None, []))
        dfd = os.open(str(d), safeio.O_DIR)
        try:
            self.assertEqual(stepscan.read_sums(dfd, d.name, "n1", problems), None)
        finally:
            os.close(dfd)
        self.assertEqual(problems, [])

if __name__ == "__main__":
    unittest.main()
