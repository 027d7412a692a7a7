# SPDX-License-Identifier: BSD-3-Clause
"""The shared-memory contract seen from the node agent's side: a segment
created as the plugin/agent would, real MPI ranks publishing their waits in
it, an agent stand-in following the wake protocol with a real futex, and a
rank killed with SIGKILL leaving a complete slot, and the Python reader
(epilog/mpi_pstate/core/segment.py) refusing what is not a slot; that reader's
layout is checked against common/slot.h by test_preload_slot_layout.py."""
from __future__ import annotations

import ctypes
import os
import re
import select
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import unittest
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "tests" / "preload"))
import preload_helpers as ph  # noqa: E402

slotmod = ph.slot_module()

libc = ctypes.CDLL(None, use_errno=True)
# futex's system call number: x86-64's, else the generic table's (aarch64)
SYS_futex, FUTEX_WAIT = (202 if os.uname().machine == "x86_64" else 98), 0


class Timespec(ctypes.Structure):
    _fields_ = [("tv_sec", ctypes.c_long), ("tv_nsec", ctypes.c_long)]


def setUpModule() -> None:
    ph.build()


class Layout(unittest.TestCase):
    def test_reader_rejects_garbage(self) -> None:
        with tempfile.TemporaryDirectory() as d:
            p = Path(d) / "seg"
            slotmod.create_segment(str(p), 2)
            h, slots = slotmod.read_segment(str(p))
            self.assertEqual((h["nslots"], slots), (2, [None, None]))
            data = bytearray(p.read_bytes())
            data[4096:4104] = (slotmod.SLOT_MAGIC).to_bytes(8, "little")
            data[4096 + 8] = 1
            data[4096 + 12:4096 + 16] = (16384).to_bytes(4, "little")
            data[4096 + 2048:4096 + 2080] = b"A" * 32  # unterminated name
            p.write_bytes(bytes(data))
            with self.assertRaises(slotmod.SlotError):
                slotmod.read_segment(str(p))
            p.write_bytes(bytes(data[:-1]))
            with self.assertRaises(slotmod.SlotError):
                slotmod.read_segment(str(p))
            os.symlink(str(p), str(Path(d) / "link"))
            with self.assertRaises(OSError):
                slotmod.read_segment(str(Path(d) / "link"))


class EnvironmentDocumented(unittest.TestCase):
    """Every variable of the contract (common/contract.h) and of the option
    table is documented in mpi-pstate-preload(7), ENVIRONMENT."""

    def test_every_variable_in_the_man_page(self) -> None:
        names = re.findall(r'^#define MPI_PSTATE_ENV_[A-Z_]+ "(MPI_PSTATE_[A-Z_]+)"',
                           (ph.TOP / "common" / "contract.h").read_text(), re.M)
        names += re.findall(r'"(MPI_PSTATE_[A-Z_]+)"', (ph.TOP / "common" / "options.def").read_text())
        self.assertGreaterEqual(len(set(names)), 13, names)
        man = (ph.TOP / "man" / "mpi-pstate-preload.7").read_text()
        env = man[man.index(".SH ENVIRONMENT"):]
        for n in sorted(set(names)):
            self.assertIn(f".B {n}\n", env, f"{n} is not documented in mpi-pstate-preload(7)")


class AgentView(unittest.TestCase):
    def setUp(self) -> None:
        self.tmp = Path(tempfile.mkdtemp(prefix="test_preload_slot."))

    def tearDown(self) -> None:
        shutil.rmtree(self.tmp, ignore_errors=True)

    def agent_run(self, abi: str) -> None:
        """Rank 1 computes 1.5 s before the last barrier, so rank 0 waits in
        it.  The stand-in agent sees the wait, 'clocks down' (sets the flag
        after re-checking the wait, as mpi_pstate_slot_agent_lower does),
        sleeps on the header futex and is woken by rank 0 leaving."""
        if not ph.have_abi(abi):
            self.skipTest(f"{abi} not built")
        seg_path = self.tmp / "seg"
        slotmod.create_segment(str(seg_path), 4)
        seg = slotmod.LiveSegment(str(seg_path))
        seen = {}

        def agent() -> None:
            deadline = time.monotonic() + 60
            while time.monotonic() < deadline:
                since = seg.slot_field(0, "wait_since")
                if since and seg.slot_field(0, "state") == 2:
                    fn = seg.slot(0)["wait_fn_name"]
                    if fn == "MPI_Barrier" and seg.slot(0)["functions"]["MPI_Barrier"]["calls"] >= 3:
                        time.sleep(0.2)  # longer than the threshold
                        seg.set_slot_field(0, "clocked_down", 1)
                        if seg.slot_field(0, "wait_since") != since:
                            seg.set_slot_field(0, "clocked_down", 0)
                            continue
                        seen["fn"] = fn
                        futex = seg.header_field("agent_futex")
                        addr = ctypes.addressof(ctypes.c_char.from_buffer(seg.map, 64))
                        ts = Timespec(20, 0)
                        t0 = time.monotonic()
                        rc = libc.syscall(SYS_futex, ctypes.c_void_p(addr), FUTEX_WAIT,
                                          ctypes.c_uint(futex), ctypes.byref(ts), None, 0)
                        seen["futex_rc"] = rc
                        seen["slept"] = time.monotonic() - t0
                        seen["since_after"] = seg.slot_field(0, "wait_since")
                        seg.set_slot_field(0, "clocked_down", 0)
                        return
                time.sleep(0.001)

        th = threading.Thread(target=agent)
        th.start()
        env = {"LD_PRELOAD": str(ph.front()), "MPI_PSTATE_MODE": "on",
               "MPI_PSTATE_SHM": str(seg_path), "MPI_PSTATE_THRESHOLD": "100ms"}
        r = ph.run_mpi(abi, [ph.program("c_calls", abi), "--sleep", "1.5"], env=env)
        th.join(70)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(r.stderr.strip(), "")
        self.assertEqual(seen.get("fn"), "MPI_Barrier", seen)
        self.assertEqual(seen["futex_rc"], 0, seen)  # woken, not timed out
        self.assertLess(seen["slept"], 5.0)
        self.assertEqual(seen["since_after"], 0)  # the rank had left the call
        hdr, slots = slotmod.read_segment(str(seg_path))
        self.assertEqual(hdr["agent_futex"], 1)
        self.assertEqual(hdr["wakeups"], 1)
        want = ph.parse_counts(r.stdout)
        for i in (0, 1):
            s = slots[i]
            self.assertEqual(s["local_index"], i)
            self.assertEqual(s["rank"], i)
            self.assertEqual(s["size"], 2)
            self.assertEqual(s["state"], "finalized")
            self.assertEqual(s["mode"], "on")
            self.assertEqual(s["abi"], abi)
            self.assertEqual(s["wait_since"], 0)
            self.assertEqual({k: v["calls"] for k, v in s["functions"].items() if v["calls"]},
                             want[i])
            self.assertEqual(s["threshold_ns"], 100_000_000)
        self.assertEqual(slots[0]["wakeups"], 1)
        self.assertEqual(slots[1]["wakeups"], 0)
        self.assertGreaterEqual(slots[0]["long_calls"], 1)
        self.assertGreaterEqual(slots[0]["long_ns"], 1.0e9)  # the barrier wait
        self.assertGreaterEqual(slots[0]["functions"]["MPI_Barrier"]["long_calls"], 1)
        self.assertEqual((slots[2], slots[3]), (None, None))
        seg.close()

    def test_agent_protocol_ompi(self) -> None:
        self.agent_run("ompi")

    def test_agent_protocol_mpich(self) -> None:
        self.agent_run("mpich")

    def test_sigkill_leaves_complete_slot(self) -> None:
        """Rank 0 prints its counts and then spins in MPI_Iprobe; killed with
        SIGKILL, its private slot file still holds every count."""
        abi = "mpich" if ph.have_abi("mpich") else "ompi"
        if not ph.have_abi(abi):
            self.skipTest("no MPI built")
        prof = self.tmp / "prof"
        env = {k: v for k, v in os.environ.items()
               if k != "LD_PRELOAD" and (not k.startswith("MPI_PSTATE_") or k == "MPI_PSTATE_BUILD")}
        cmd = ph.launcher(abi, 2) + ph.exec_argv(prof, [ph.program("c_calls", abi), "--hang"])
        p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                             env=env, start_new_session=True)
        out = ""
        try:
            deadline = time.monotonic() + 60
            while "COUNTS 0" not in out and time.monotonic() < deadline:
                ready, _, _ = select.select([p.stdout], [], [], 1)
                if ready:
                    out += p.stdout.readline()
            self.assertIn("COUNTS 0", out)
            slot_file = prof / "rank-0.slot"
            for _ in range(100):
                if slot_file.exists():
                    break
                time.sleep(0.05)
            _, slots = slotmod.read_segment(str(slot_file))
            pid = slots[0]["pid"]
            before = slots[0]["functions"]["MPI_Iprobe"]["calls"]
            time.sleep(0.2)
            os.kill(pid, signal.SIGKILL)
            p.wait(60)
        finally:
            if p.poll() is None:
                os.killpg(p.pid, signal.SIGKILL)
                p.wait()
            p.stdout.close()
            p.stderr.close()
        _, slots = slotmod.read_segment(str(slot_file))
        s = slots[0]
        self.assertEqual(s["pid"], pid)
        self.assertEqual(s["rank"], 0)
        self.assertEqual(s["state"], "running")  # nobody could tell it otherwise
        want = ph.parse_counts(out)[0]
        got = {k: v["calls"] for k, v in s["functions"].items() if v["calls"]}
        self.assertGreater(got.pop("MPI_Iprobe"), before)  # still counting when killed
        want.pop("MPI_Finalize")
        self.assertEqual(got, want)
        self.assertFalse((prof / "rank-0.json").exists())


if __name__ == "__main__":
    unittest.main()
