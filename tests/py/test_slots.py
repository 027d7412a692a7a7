# SPDX-License-Identifier: BSD-3-Clause
"""The pure parts of the Epilog's slot reader (epilog/mpi_pstate/site/rankfigures.py):
a slot's function table reduced to its MPI totals, the checks that refuse
a listed segment that is not the plugin's file, and the reasons a listed
segment is skipped before it is opened.  Reading real segments is
test_epilog's and test_epilog_adversarial's."""
import os
import stat
import unittest
from typing import Any, Dict, List

from mpi_pstate.site import rankfigures


def fn(calls: int, time_ns: int, nbytes: int = 0) -> Dict[str, int]:
    return {"calls": calls, "time_ns": time_ns, "bytes": nbytes}


class FunctionTotals(unittest.TestCase):
    def test_life_cycle_calls_are_calls_not_time_in_mpi(self) -> None:
        hist = [0] * 64
        init_bucket = rankfigures._bucket(2_000_000)
        hist[init_bucket] = 1
        hist[rankfigures._bucket(5_000)] = 10
        got = rankfigures.function_totals({"MPI_Init": fn(1, 2_000_000),
                                           "MPI_Recv": fn(10, 50_000, 800),
                                           "MPI_Barrier": fn(2, 90_000),
                                           "MPI_Finalize": fn(1, 0)}, hist)
        self.assertEqual(got, (140_000, 14, 800,
                               [(90_000, "MPI_Barrier", 2), (50_000, "MPI_Recv", 10)]))
        # MPI_Init left the wait histogram; the waits stayed
        self.assertEqual(hist[init_bucket], 0)
        self.assertEqual(hist[rankfigures._bucket(5_000)], 10)

    def test_names_that_are_no_function_are_skipped(self) -> None:
        hist = [0] * 64
        got = rankfigures.function_totals({"MPI_Send": fn(1, 10), "1bad": fn(5, 10**9),
                                           "a b": fn(5, 10**9), "MPI_Wait": fn(0, 0)}, hist)
        self.assertEqual(got, (10, 1, 0, [(10, "MPI_Send", 1)]))

    def test_at_most_the_top_functions(self) -> None:
        table = {f"MPI_F{i}": fn(1, i) for i in range(1, 10)}
        top = rankfigures.function_totals(table, [0] * 64)[3]
        self.assertEqual([n for _, n, _ in top], ["MPI_F9", "MPI_F8", "MPI_F7"])
        self.assertEqual(len(top), rankfigures.TOP_FUNCS)


def st(mode: int = stat.S_IFREG | 0o600, ino: int = 7, dev: int = 3, nlink: int = 1,
       uid: int = 1000, size: int = 4096) -> os.stat_result:
    return os.stat_result((mode, ino, dev, nlink, uid, uid, size, 0, 0, 0))


SEG: Dict[str, Any] = {"name": "mpi-pstate.5.0", "step": "0", "dev": 3, "ino": 7,
                       "nslots": 4, "bytes": 4096}


class Refusal(unittest.TestCase):
    def test_the_plugins_file_is_accepted(self) -> None:
        self.assertIsNone(rankfigures.refusal(st(), SEG, 1000))
        self.assertIsNone(rankfigures.refusal(st(uid=0), SEG, 1000))  # root's
        # a version 1 step record names no inode and no size
        self.assertIsNone(rankfigures.refusal(st(ino=9, size=1), dict(SEG, dev=None, bytes=None),
                                              1000))

    def test_each_difference_is_named(self) -> None:
        for kw, why in (({"mode": stat.S_IFDIR | 0o700}, "not a regular file"),
                        ({"mode": stat.S_IFIFO | 0o600}, "not a regular file"),
                        ({"ino": 8}, "not the file the plugin made (device/inode differ)"),
                        ({"dev": 4}, "not the file the plugin made (device/inode differ)"),
                        ({"nlink": 2}, "2 links (hard-linked): refused"),
                        ({"uid": 1001}, "owned by uid 1001"),
                        ({"size": 8192}, "size 8192, the plugin made 4096")):
            self.assertEqual(rankfigures.refusal(st(**kw), SEG, 1000), why, kw)


class SkipReason(unittest.TestCase):
    def test_names_of_another_job_or_step_or_read_twice(self) -> None:
        self.assertIsNone(rankfigures.skip_reason(SEG, 5, [], [1]))
        self.assertIsNone(rankfigures.skip_reason(
            dict(SEG, name="mpi-pstate.5.batch.0123456789abcdef", step="batch"), 5, [], [1]))
        for seg, names in ((dict(SEG, name="mpi-pstate.6.0"), []),
                           (dict(SEG, step="1"), []),
                           (dict(SEG, name="../mpi-pstate.5.0"), []),
                           (SEG, ["mpi-pstate.5.0"])):
            why = rankfigures.skip_reason(seg, 5, names, [1])
            self.assertRegex(why or "", r"^segment .*: not a name of job 5 step ", seg)

    def test_a_name_is_clipped_to_printable(self) -> None:
        why = rankfigures.skip_reason(dict(SEG, name="x\n" * 100), 5, [], [1]) or ""
        self.assertNotIn("\n", why)
        self.assertLess(len(why), 140)

    def test_the_nodes_allowance_spent(self) -> None:
        self.assertEqual(rankfigures.skip_reason(SEG, 5, [], [0]),
                         f"segment mpi-pstate.5.0: not read, the node's {rankfigures.MAX_NODE_RANKS} "
                         "ranks are reached")


class RankSink(unittest.TestCase):
    def test_a_bad_slot_is_a_problem_by_index(self) -> None:
        ranks: List[Dict[str, Any]] = []
        problems: List[str] = []
        sink = rankfigures.rank_sink("seg", "0", {}, ranks, problems, None)
        sink(3, ValueError("bad magic"))
        sink(4, None)
        sink(5, {"rank": 1})  # a slot the validator would never pass: no crash
        self.assertEqual(problems, ["segment seg slot 3: bad magic",
                                    "segment seg slot 5: KeyError"])
        self.assertEqual(ranks, [])


if __name__ == "__main__":
    unittest.main()
