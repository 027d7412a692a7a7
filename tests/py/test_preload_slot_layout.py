# SPDX-License-Identifier: BSD-3-Clause
"""The slot layout in Python (epilog/mpi_pstate/core/segment.py) against the C
compiler's view of common/slot.h: every field's offset, size and
signedness, the structures' sizes, the magics, version and counts, and
the order of the enumerations core/segment.py names (a slot stores their index).
A field added to core/segment.py or changed in slot.h without the other fails
here, and so does a member added to slot.h that core/segment.py neither reads nor
lists in C_ONLY with its reason.  Named test_preload* so that `make check-arm64` runs it on aarch64
too, where the compiler lays the structures out on its own."""
from __future__ import annotations

import re
import shutil
import subprocess
import struct
import sys
import tempfile
import unittest
from pathlib import Path

TOP = Path(__file__).resolve().parents[2]
if str(TOP / "epilog") not in sys.path:
    sys.path.insert(0, str(TOP / "epilog"))
from mpi_pstate.core import segment  # noqa: E402

CC = shutil.which("gcc") or shutil.which("cc")

LAYOUT_C = r"""
#include <stdio.h>
#include <stddef.h>
#include "slot.h"
#include "backend.h"
/* offset, size and signedness (the ?: converts an atomic member to its
 * plain type, never evaluated) of one member */
#define M(kind, type, f) printf(kind " %s %zu %zu %d\n", #f, offsetof(struct type, f), \
        sizeof(((struct type *)0)->f), (0 ? ((struct type *)0)->f : -1) < 0);
#define C(name) printf("const %s %llu\n", #name, (unsigned long long)(name));
int main(void) {
    BODY
    return 0;
}
"""

STRUCTS = {"slot": "mpi_pstate_slot", "header": "mpi_pstate_seg_header",
           "fn": "mpi_pstate_fn_stats"}
# core/segment.py's enumeration lists and the prefix of their C names
ENUMS = {"STATES": "MPI_PSTATE_SLOT_", "CLOCKS": "MPI_PSTATE_CLOCK_",
         "MODES": "MPI_PSTATE_SLOT_MODE_", "ABIS": "MPI_PSTATE_ABI_",
         "WAIT_MODES": "MPI_PSTATE_WAIT_"}
CONSTANTS = {"SEG_MAGIC": "MPI_PSTATE_SEG_MAGIC", "SLOT_MAGIC": "MPI_PSTATE_SLOT_MAGIC",
             "VERSION": "MPI_PSTATE_SLOT_VERSION", "HEADER_SIZE": "MPI_PSTATE_SEG_HEADER_SIZE",
             "SLOT_SIZE": "MPI_PSTATE_SLOT_SIZE", "MAX_FUNCS": "MPI_PSTATE_SLOT_MAX_FUNCS",
             "NAME_LEN": "MPI_PSTATE_SLOT_NAME_LEN", "BUCKETS": "MPI_PSTATE_SLOT_HIST_BUCKETS",
             "CPUSET_WORDS": "MPI_PSTATE_SLOT_CPUSET_WORDS",
             "MAX_SLOTS": "MPI_PSTATE_SEG_MAX_SLOTS",
             "FN_SIZE": "sizeof(struct mpi_pstate_fn_stats)",
             "CPUSET_OFFSET": "offsetof(struct mpi_pstate_slot, cpuset)",
             "HIST_BYTES_OFFSET": "offsetof(struct mpi_pstate_slot, hist_bytes)",
             "HIST_NS_OFFSET": "offsetof(struct mpi_pstate_slot, hist_ns)",
             "FN_OFFSET": "offsetof(struct mpi_pstate_slot, fn)"}

# Members of slot.h that core/segment.py does not read as scalars, and why.  The
# arrays are read at their *_OFFSET constant, checked above.
C_ONLY = {
    ("header", "agent_wake_ns"): "the agent's own sleep deadline, read by ranks only",
    ("header", "announce_off"): "the agent's own back-pressure flag, read by ranks only",
    ("header", "announce"): "a bit per slot, consumed by the agent; no figure in it",
    ("slot", "cpuset"): "read at CPUSET_OFFSET",
    ("slot", "hist_bytes"): "read at HIST_BYTES_OFFSET",
    ("slot", "hist_ns"): "read at HIST_NS_OFFSET",
    ("slot", "fn"): "read at FN_OFFSET with FN_FIELDS",
    ("fn", "name"): "read as NAME_LEN bytes at offset 0",
}
PADDING = re.compile(r"pad\d+|reserved")


def c_members() -> dict[str, list[str]]:
    """Every member name of the three structures, as slot.h declares them."""
    text = re.sub(r"/\*.*?\*/", "", (TOP / "common" / "slot.h").read_text(), flags=re.S)
    out: dict[str, list[str]] = {}
    for kind, name in STRUCTS.items():
        body = re.search(r"struct " + name + r" \{(.*?)\n\};", text, re.S)
        assert body, f"struct {name} not found in slot.h"
        decls = [d.strip() for d in body.group(1).split(";") if d.strip()]
        out[kind] = [re.match(r".*?(\w+)\s*(\[[^\]]*\])?$", d, re.S).group(1)
                     for d in decls]
    return out


def py_fields() -> dict[str, dict[str, tuple[int, str]]]:
    return {"slot": segment.SLOT_FIELDS, "header": segment.HEADER_FIELDS, "fn": segment.FN_FIELDS}


def enum_names() -> list[tuple[str, int, str]]:
    """(core/segment.py list, index, C name) of every enumeration value core/segment.py names."""
    return [(lst, i, prefix + word.upper()) for lst, prefix in ENUMS.items()
            for i, word in enumerate(getattr(segment, lst))]


def c_layout() -> dict[tuple[str, str], list[int]]:
    body = []
    for kind, fields in py_fields().items():
        body += [f'M("{kind}", {STRUCTS[kind]}, {f})' for f in fields]
    body += [f"C({c})" for c in CONSTANTS.values()]
    body += [f"C({c})" for _, _, c in enum_names()]
    body += [f'C(sizeof(struct {s}))' for s in STRUCTS.values()]
    with tempfile.TemporaryDirectory() as d:
        src, exe = Path(d) / "layout.c", Path(d) / "layout"
        src.write_text(LAYOUT_C.replace("BODY", "\n    ".join(body)))
        subprocess.run([str(CC), "-std=c11", "-D_GNU_SOURCE", "-I", str(TOP / "common"),
                        "-I", str(TOP / "preload"), "-o", str(exe), str(src)], check=True,
                       timeout=120)
        out = subprocess.run([str(exe)], capture_output=True, text=True, check=True,
                             timeout=30).stdout
    c: dict[tuple[str, str], list[int]] = {}
    for line in out.splitlines():
        kind, rest = line.split(" ", 1)
        name, _, values = rest.rpartition(" ") if kind == "const" else rest.partition(" ")
        c[(kind, name)] = [int(v) for v in values.split()]
    return c


@unittest.skipUnless(CC, "no C compiler")
class Layout(unittest.TestCase):
    @classmethod
    def setUpClass(cls) -> None:
        cls.c = c_layout()

    def test_every_field_where_c_puts_it(self) -> None:
        for kind, fields in py_fields().items():
            for f, (off, fmt) in fields.items():
                with self.subTest(struct=kind, field=f):
                    self.assertEqual(self.c[(kind, f)],
                                     [off, struct.calcsize("<" + fmt), int(fmt.islower())])

    def test_every_c_member_read_or_said_why_not(self) -> None:
        members = c_members()
        self.assertIn("wait_sampled_ns", members["slot"], "the parse found the members")
        for kind, names in members.items():
            for name in names:
                with self.subTest(struct=kind, member=name):
                    self.assertTrue(name in py_fields()[kind] or (kind, name) in C_ONLY
                                    or PADDING.fullmatch(name),
                                    f"slot.h's {kind}.{name} is neither in core/segment.py nor C_ONLY")
        for kind, name in C_ONLY:
            with self.subTest(c_only=name):
                self.assertIn(name, members[kind], "C_ONLY names a member slot.h lacks")

    def test_sizes_magics_and_counts(self) -> None:
        for name, expr in CONSTANTS.items():
            with self.subTest(name=name):
                self.assertEqual(self.c[("const", expr)], [getattr(segment, name)])
        self.assertEqual(self.c[("const", "sizeof(struct mpi_pstate_slot)")], [segment.SLOT_SIZE])
        self.assertEqual(self.c[("const", "sizeof(struct mpi_pstate_seg_header)")],
                         [segment.HEADER_SIZE])

    def test_enumerations_in_c_order(self) -> None:
        for lst, i, cname in enum_names():
            with self.subTest(name=cname):
                self.assertEqual(self.c[("const", cname)], [i], f"segment.{lst}[{i}]")


if __name__ == "__main__":
    unittest.main()
