# SPDX-License-Identifier: BSD-3-Clause
"""The agent's sums.json (how a step past the Epilog's bounds is still
counted): the real agent, run on a segment of
honest, odd and hostile slots, writes the very totals the node Epilog
would have made of the same slots (slots.rank_figures, noderec.rest_add),
and the life-cycle calls both leave out are the .def's."""
import json
import os
import re
import signal
import struct
import subprocess
import sys
import tempfile
import time
import unittest
from pathlib import Path
from typing import Any, Dict, Tuple

import test_epilog_fixtures as fx
from mpi_pstate.core import noderecord, steprecords
from mpi_pstate.site import rankfigures

slotlib = fx.slotlib
TOP = Path(__file__).resolve().parents[2]
BUILD = Path(os.environ.get("MPI_PSTATE_BUILD", TOP / "build"))
# tests/agent/mkfakesys.py, a dev-machine helper, needs 3.7+: where this
# suite itself runs on Python 3.6 (as the node Epilog's EL8 python3), the
# helper runs on the system's python3.
HELPER_PYTHON = sys.executable if sys.version_info >= (3, 7) else "/usr/bin/python3"


def set_fn(seg: slotlib.LiveSegment, i: int, j: int, name: bytes, time_ns: int) -> None:
    fb = slotlib.HEADER_SIZE + i * slotlib.SLOT_SIZE + slotlib.FN_OFFSET + j * slotlib.FN_SIZE
    seg.map[fb:fb + slotlib.NAME_LEN] = name.ljust(slotlib.NAME_LEN, b"\0")
    struct.pack_into("<Q", seg.map, fb + slotlib.FN_FIELDS["time_ns"][0], time_ns)
    struct.pack_into("<Q", seg.map, fb + slotlib.FN_FIELDS["calls"][0], 3)


def reference(path: Path, agent: Dict[int, Dict[str, Any]]) -> Dict[str, Any]:
    """What the node Epilog makes of the segment itself."""
    data = path.read_bytes()
    ranks = []
    for i in range(slotlib.parse_header(data)["nslots"]):
        try:
            s = slotlib.parse_slot(data, slotlib.HEADER_SIZE + i * slotlib.SLOT_SIZE,
                                   cpuset=False)
        except slotlib.SlotError:
            continue
        if s is not None:
            ranks.append(rankfigures.rank_figures(s, "0", agent.get(i)))
    rest = noderecord.new_rest()
    noderecord.rest_add(rest, "0", ranks, "")
    return rest


class AgentSums(unittest.TestCase):
    def setUp(self) -> None:
        self.agent = BUILD / "agent" / "mpi-pstate-agent"
        if not self.agent.exists():
            self.fail(f"{self.agent} not built (make all)")
        self._td = tempfile.TemporaryDirectory()
        self.tmp = Path(self._td.name)

    def tearDown(self) -> None:
        self._td.cleanup()

    def run_agent(self, seg: Path, nslots: int) -> Tuple[Dict[str, Any], Dict[str, Any]]:
        subprocess.run([HELPER_PYTHON, str(TOP / "tests/agent/mkfakesys.py"),
                        str(self.tmp / "sys"), "--cpus", "2"], check=True,
                       stdout=subprocess.DEVNULL)
        run = self.tmp / "run"
        run.mkdir(mode=0o700)
        subprocess.run([str(self.agent), "--shm", str(seg), "--nslots", str(nslots),
                        "--cpus", "0-1", "--job", "1", "--step", "0", "--sysroot",
                        str(self.tmp / "sys"), "--runtime-dir", str(run / "1"), "--record",
                        str(run / "agent.json"), "--pidfile", str(run / "pid"), "--log",
                        str(run / "log"), "--mode", "profile", "--rt-prio", "0"],
                       check=True, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        pid = int((run / "pid").read_text())
        os.kill(pid, signal.SIGTERM)
        end = time.monotonic() + 60
        while Path(f"/proc/{pid}").exists() and time.monotonic() < end:
            time.sleep(0.02)
        return (json.loads((run / "agent.json").read_text()),
                json.loads((run / "sums.json").read_text()))

    def test_the_agents_sums_are_the_epilogs_own_reduction(self) -> None:
        seg = self.tmp / "seg"
        fx.segment(seg, [{"rank": 0, "wall": 3.0, "mpi": 1.5, "wait": 1.25},
                         {"rank": 1, "state": "running"},
                         {"rank": 2, "wall": 7.5, "mpi": 0.75},
                         {"rank": 3, "wall": 2.0},
                         {"rank": 4, "wall": 1.0}], nslots=7)
        live = slotlib.LiveSegment(str(seg))
        try:
            # rank 2: a repeated name (the last counts), a bad name, every
            # life-cycle call, a lower-case name that is valid
            for j, (name, t) in enumerate(((b"MPI_Barrier", 10**9), (b"9bad", 5 * 10**9),
                                           (b"MPI_Init_thread", 10**9), (b"MPI_Finalize", 10**9),
                                           (b"MPI_Abort", 10**9), (b"mpi_send_", 250000000))):
                set_fn(live, 2, 3 + j, name, t)
            live.set_slot_field(2, "nfuncs", 9)
            # rank 3: a time past ten years, a wait past ten years
            set_fn(live, 3, 1, b"MPI_Barrier", 1 << 63)
            live.set_slot_field(3, "long_ns", (1 << 64) - 1)
            # rank 4: times whose sum wraps in 64 bits
            set_fn(live, 4, 1, b"MPI_Barrier", (1 << 64) - 1)
            set_fn(live, 4, 2, b"MPI_Send", (1 << 64) - 1)
            # rank 0 announced 7 waits as predicted long, 2 of them short
            live.set_slot_field(0, "announced", 7)
            live.set_slot_field(0, "announced_short", 2)
            # slot 5: invalid (an unterminated name); slot 6: free
            base = slotlib.HEADER_SIZE + 5 * slotlib.SLOT_SIZE
            live.map[base:base + slotlib.SLOT_SIZE] = \
                live.map[slotlib.HEADER_SIZE:slotlib.HEADER_SIZE + slotlib.SLOT_SIZE]
            fb = base + slotlib.FN_OFFSET + 100 * slotlib.FN_SIZE
            live.map[fb:fb + slotlib.NAME_LEN] = b"A" * slotlib.NAME_LEN
        finally:
            live.close()
        agent, sums = self.run_agent(seg, 7)
        ref = reference(seg, steprecords.agent_ranks(agent["ranks"]))
        self.assertEqual((sums["ranks"], sums["invalid"]), (ref["rank_steps"], 1))
        self.assertEqual(sums["ranks"], 5)
        self.assertEqual(sums["transitions"], ref["transitions"])
        for k in noderecord.SUMS_FIGURES:
            self.assertAlmostEqual(sums[k], ref[k], places=5, msg=k)
        self.assertAlmostEqual(sums["wall_s"], 13.5, places=5)  # the running rank has none
        # rank 0 1.5 + 0.25; the running one 2.0 + 0.25; rank 2 its last
        # MPI_Barrier 1.0, MPI_Send, mpi_send_; ranks 3 and 4 none (garbage)
        self.assertAlmostEqual(sums["mpi_s"], 1.75 + 2.25 + 1.5, places=5)
        parsed = steprecords.parse_sums(json.dumps(sums).encode(), sums["node"])
        self.assertIsNotNone(parsed)
        # the prediction's accuracy reaches the agent record and the rank entry
        self.assertEqual((agent["ranks"][0]["reported"]["announced"],
                          agent["ranks"][0]["reported"]["announced_short"]), (7, 2))
        r0 = rankfigures.rank_figures(slotlib.parse_slot(seg.read_bytes(), slotlib.HEADER_SIZE), "0")
        self.assertEqual((r0["announced"], r0["mispredicted"]), (7, 2))
        self.assertEqual(noderecord.validate_rank(r0)["announced"], 7)

    def test_frame_functions_are_the_defs_life_cycle_calls(self) -> None:
        kinds = set()
        for line in (TOP / "preload" / "mpi_functions.def").read_text().splitlines():
            m = re.match(r"(\w+) \|.*\| kind=(init|finalize|abort) ", line)
            if m:
                kinds.add(m.group(1))
        self.assertEqual(kinds, set(rankfigures.FRAME_FUNCS))
        c = (TOP / "common" / "slot.c").read_text()
        listed = re.search(r"frame_funcs\[\] = \{([^}]*)\}", c)
        assert listed is not None
        self.assertEqual(set(re.findall(r'"(\w+)"', listed.group(1))), kinds)


if __name__ == "__main__":
    unittest.main()
