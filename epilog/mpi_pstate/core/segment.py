# SPDX-License-Identifier: BSD-3-Clause
"""Reader (and, for tests and tools, writer) of mpi-pstate shared-memory
segments and slot files: the layout of common/slot.h in Python, stdlib only.

A segment file is a 4096-byte header followed by nslots slots of 16384
bytes; a private slot file written by the preload library (rank-<R>.slot in
a profile directory) is a segment with one slot.  Everything is untrusted:
parse_slot() validates like mpi_pstate_slot_snapshot() and raises
SlotError; no length or count read from the file is used unchecked.

    hdr, slots = read_segment("/dev/shm/mpi-pstate.42.0")
    for s in slots:           # None for a free slot
        print(s["rank"], s["state"], s["functions"]["MPI_Barrier"]["calls"])

tests/py/test_preload_slot_layout.py checks every offset, size, constant
and enumeration order here against the C compiler's view of common/slot.h,
and that every member of slot.h is read here or named there as C-only.
"""
import mmap
import os
import struct
from typing import Any, Dict, List, Optional, Tuple

SEG_MAGIC = 0x316765737473706D  # "mpstseg1"
SLOT_MAGIC = 0x746F6C737473706D  # "mpstslot"
VERSION = 2
# Version 1 (no wait_cpu) is still read: slot files of an older library in a
# profile directory.  Its wait_cpu reads as -1.
READABLE_VERSIONS = (1, 2)
HEADER_SIZE = 4096
SLOT_SIZE = 16384
MAX_FUNCS = 128
NAME_LEN = 32
BUCKETS = 64
CPUSET_WORDS = 16
MAX_SLOTS = 16384

STATES = ["free", "attached", "running", "finalized", "aborted", "exited", "disabled"]
CLOCKS = ["none", "tsc", "monotonic"]
MODES = ["off", "on", "profile"]
ABIS = ["none", "ompi", "mpich"]
# slot.wait_mode (enum mpi_pstate_wait_mode): how the MPI library was set to
# wait, from the rank's environment; a value past the list reads "unknown"
WAIT_MODES = ["unknown", "poll", "yield", "sleep"]

# name: (offset, struct format), little-endian (x86-64 and aarch64)
HEADER_FIELDS: Dict[str, Tuple[int, str]] = {
    "magic": (0, "Q"), "version": (8, "I"), "header_size": (12, "I"), "slot_size": (16, "I"),
    "nslots": (20, "I"), "creator_pid": (24, "i"), "flags": (28, "I"), "created_ns": (32, "Q"),
    "agent_futex": (64, "I"), "wakeups": (72, "Q"),
}
SLOT_FIELDS: Dict[str, Tuple[int, str]] = {
    "magic": (0, "Q"), "version": (8, "I"), "slot_size": (12, "I"), "pid": (16, "i"),
    "rank": (20, "i"), "size": (24, "i"), "local_index": (28, "I"), "nfuncs": (32, "I"),
    "clock": (36, "I"), "ticks_per_sec": (40, "Q"), "threshold_ticks": (48, "Q"),
    "mode": (56, "I"), "thread_level": (60, "I"),
    "state": (64, "I"), "cpu": (68, "i"), "start_ns": (72, "Q"), "init_ticks": (80, "Q"),
    "app_start_ticks": (88, "Q"), "app_end_ticks": (96, "Q"), "threshold_ns": (104, "Q"),
    "abi": (112, "I"), "wait_mode": (116, "I"), "wait_samples": (120, "Q"),
    "wait_since": (128, "Q"), "wait_fn": (136, "I"), "wait_cpu": (140, "i"),
    "clocked_down": (192, "I"), "down_ns": (200, "Q"), "transitions": (208, "Q"),
    "long_calls": (256, "Q"), "long_ns": (264, "Q"), "over_ns": (272, "Q"), "wakeups": (280, "Q"),
    "announced": (288, "Q"), "announced_short": (296, "Q"),
    "wait_cpu_ns": (304, "Q"), "wait_sampled_ns": (312, "Q"),
}
CPUSET_OFFSET = 320
HIST_BYTES_OFFSET = 512
HIST_NS_OFFSET = 1024
FN_OFFSET = 2048
FN_SIZE = 64
FN_FIELDS: Dict[str, Tuple[int, str]] = {
    "calls": (32, "Q"), "time_ns": (40, "Q"), "bytes": (48, "Q"), "long_calls": (56, "Q"),
}


class SlotError(ValueError):
    """The bytes are not a valid slot or segment of this version."""


def _get(buf: bytes, base: int, spec: Tuple[int, str]) -> int:
    off, fmt = spec
    return struct.unpack_from("<" + fmt, buf, base + off)[0]


def parse_header(buf: bytes) -> Dict[str, int]:
    if len(buf) < HEADER_SIZE:
        raise SlotError("short header")
    h = {k: _get(buf, 0, v) for k, v in HEADER_FIELDS.items()}
    if (h["magic"] != SEG_MAGIC or h["version"] not in READABLE_VERSIONS
            or h["header_size"] != HEADER_SIZE
            or h["slot_size"] != SLOT_SIZE):
        raise SlotError("not an mpi-pstate segment of version %d" % VERSION)
    if not 0 < h["nslots"] <= MAX_SLOTS:
        raise SlotError("bad slot count %d" % h["nslots"])
    return h


# One unpack per part (the node Epilog parses up to 16384 slots as root:
# docs/security.md bounds its CPU time): the fixed fields in one Struct
# (offset order, gaps as pad bytes), then only the nfuncs function entries
# in use, each (name, calls, time_ns, bytes, long_calls).
def _fixed() -> Tuple[struct.Struct, Tuple[str, ...]]:
    fmt, at, keys = "<", 0, []
    for k, (o, f) in sorted(SLOT_FIELDS.items(), key=lambda kv: kv[1][0]):
        assert o >= at, k
        fmt += "%dx%s" % (o - at, f) if o > at else f
        at = o + struct.calcsize("<" + f)
        keys.append(k)
    return struct.Struct(fmt), tuple(keys)


_SLOT_FIXED, _SLOT_KEYS = _fixed()
_FN_KEYS = ("calls", "time_ns", "bytes", "long_calls")
_FN_TABLES = [struct.Struct("<" + "%dsQQQQ" % NAME_LEN * n) for n in range(MAX_FUNCS + 1)]
_CPUSET = struct.Struct("<%dQ" % CPUSET_WORDS)
_HIST = struct.Struct("<%dQ" % BUCKETS)
# Every name of the table, used or not, must hold a NUL (as the C reader
# checks): the 128 names joined by NULs, each other byte made 1, hold a run
# of NAME_LEN ones exactly where a name has none (one linear find).
_NAMES_ONLY = struct.Struct("<" + "%ds%dx" % (NAME_LEN, FN_SIZE - NAME_LEN) * MAX_FUNCS)
_NONZERO = bytes([0] + [1] * 255)
_ONES = b"\x01" * NAME_LEN
assert FN_SIZE == NAME_LEN + 8 * len(_FN_KEYS) and \
    [FN_FIELDS[k][0] for k in _FN_KEYS] == [NAME_LEN + 8 * i for i in range(len(_FN_KEYS))]


_NAMES: Dict[bytes, str] = {}  # the 32 name bytes of a function entry -> its name


def _name(raw: bytes) -> str:
    """The name of a function entry: every rank of a program has the same
    table, so the decoding is cached (bounded)."""
    n = _NAMES.get(raw)
    if n is None:
        if len(_NAMES) >= 4096:
            _NAMES.clear()
        n = _NAMES[raw] = raw.split(b"\0", 1)[0].decode("ascii", "replace")
    return n


def _bits(words: Tuple[int, ...]) -> List[int]:
    out = []
    for w, x in enumerate(words):
        while x:
            low = x & -x
            out.append(w * 64 + low.bit_length() - 1)
            x ^= low
    return out


def parse_slot(buf: bytes, base: int = 0, cpuset: bool = True) -> Optional[Dict[str, Any]]:
    """The slot at buf[base:base+SLOT_SIZE] as a dict, None for a free slot.
    cpuset=False leaves the CPU list out (the node Epilog has no use for it)."""
    if len(buf) < base + SLOT_SIZE:
        raise SlotError("short slot")
    s: Dict[str, Any] = dict(zip(_SLOT_KEYS, _SLOT_FIXED.unpack_from(buf, base)))
    if s["magic"] == 0:
        return None
    if (s["magic"] != SLOT_MAGIC or s["version"] not in READABLE_VERSIONS
            or s["slot_size"] != SLOT_SIZE):
        raise SlotError("bad slot magic or version")
    if s["version"] == 1:
        s["wait_cpu"] = -1
    if s["nfuncs"] > MAX_FUNCS or s["state"] >= len(STATES) or s["clock"] >= len(CLOCKS) \
            or s["mode"] >= len(MODES):
        raise SlotError("slot field out of range")
    s["state"] = STATES[s["state"]]
    s["clock"] = CLOCKS[s["clock"]]
    s["mode"] = MODES[s["mode"]]
    s["abi"] = ABIS[s["abi"]] if s["abi"] < len(ABIS) else "unknown"
    s["wait_mode"] = WAIT_MODES[s["wait_mode"]] if s["wait_mode"] < len(WAIT_MODES) \
        else "unknown"
    if cpuset:
        s["cpuset"] = _bits(_CPUSET.unpack_from(buf, base + CPUSET_OFFSET))
    s["hist_bytes"] = list(_HIST.unpack_from(buf, base + HIST_BYTES_OFFSET))
    s["hist_ns"] = list(_HIST.unpack_from(buf, base + HIST_NS_OFFSET))
    bad = b"\0".join(_NAMES_ONLY.unpack_from(buf, base + FN_OFFSET)).translate(_NONZERO) \
        .find(_ONES)
    if bad >= 0:
        raise SlotError("unterminated function name %d" % (bad // (NAME_LEN + 1)))
    nf = s["nfuncs"]
    table = _FN_TABLES[nf].unpack_from(buf, base + FN_OFFSET)
    funcs: Dict[str, Dict[str, int]] = {}
    names: List[str] = [_name(r) for r in table[0::5]]
    for i, name in enumerate(names):
        if name:
            k = 5 * i
            funcs[name] = {"calls": table[k + 1], "time_ns": table[k + 2],
                           "bytes": table[k + 3], "long_calls": table[k + 4], "id": i}
    s["function_names"] = names
    s["functions"] = funcs
    s["wait_fn_name"] = names[s["wait_fn"]] if s["wait_since"] and s["wait_fn"] < len(names) \
        else None
    return s


def read_segment(path: str) -> Tuple[Dict[str, int], List[Optional[Dict[str, Any]]]]:
    """Header and every slot of a segment or slot file (a consistent copy)."""
    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    try:
        st = os.fstat(fd)
        if not (st.st_mode & 0o170000) == 0o100000:
            raise SlotError("not a regular file")
        size = st.st_size
        if size < HEADER_SIZE or size > HEADER_SIZE + MAX_SLOTS * SLOT_SIZE:
            raise SlotError("bad size %d" % size)
        buf = os.pread(fd, size, 0)
    finally:
        os.close(fd)
    h = parse_header(buf)
    if len(buf) != HEADER_SIZE + h["nslots"] * SLOT_SIZE:
        raise SlotError("size does not match %d slots" % h["nslots"])
    return h, [parse_slot(buf, HEADER_SIZE + i * SLOT_SIZE) for i in range(h["nslots"])]


def create_segment(path: str, nslots: int, mode: int = 0o600) -> None:
    """What the plugin/agent does (common/slot_segment.c mpi_pstate_slot_create_segment)."""
    if not 0 < nslots <= MAX_SLOTS:
        raise ValueError("nslots")
    hdr = bytearray(HEADER_SIZE)
    struct.pack_into("<QIIIIiIQ", hdr, 0, SEG_MAGIC, VERSION, HEADER_SIZE, SLOT_SIZE, nslots,
                     os.getpid(), 0, 0)
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, mode)
    try:
        os.ftruncate(fd, HEADER_SIZE + nslots * SLOT_SIZE)
        os.pwrite(fd, bytes(hdr), 0)
    finally:
        os.close(fd)


class LiveSegment:
    """A writable mapping of a segment, for an agent stand-in in tests."""

    def __init__(self, path: str) -> None:
        self.fd = os.open(path, os.O_RDWR | os.O_NOFOLLOW)
        self.map = mmap.mmap(self.fd, 0)
        self.header = parse_header(self.map[:HEADER_SIZE])

    def close(self) -> None:
        self.map.close()
        os.close(self.fd)

    def slot_field(self, i: int, name: str) -> int:
        return _get(self.map, HEADER_SIZE + i * SLOT_SIZE, SLOT_FIELDS[name])

    def set_slot_field(self, i: int, name: str, value: int) -> None:
        off, fmt = SLOT_FIELDS[name]
        struct.pack_into("<" + fmt, self.map, HEADER_SIZE + i * SLOT_SIZE + off, value)

    def header_field(self, name: str) -> int:
        return _get(self.map, 0, HEADER_FIELDS[name])

    def slot(self, i: int) -> Optional[Dict[str, Any]]:
        return parse_slot(self.map[HEADER_SIZE + i * SLOT_SIZE:HEADER_SIZE + (i + 1) * SLOT_SIZE])
