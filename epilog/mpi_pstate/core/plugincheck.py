# SPDX-License-Identifier: BSD-3-Clause
"""Is the installed plugin the one this Slurm loads?  A SPANK plugin loads
only into the Slurm release (major.minor) it was built against; after a
Slurm upgrade without a rebuild, Slurm refuses it at info level and users
only see "unrecognized option '--mpi-pstate'".  `mpi-pstate audit` says it
plainly instead: the release the plugin was built for (its `plugin_version`
symbol, SLURM_VERSION_NUMBER, read from the ELF file without loading it)
against the release of this node's Slurm commands.

Reads at most a bounded number of bytes of one root-owned file
(safeio.read_trusted); never executes or loads it."""
import re
import struct
import subprocess
from typing import Any, Dict, Optional, Tuple

from . import safeio

MAX_BYTES = 64 << 20
SHT_DYNSYM = 11


def _version_text(num: int) -> str:
    return f"{num >> 16 & 255}.{num >> 8 & 255:02d}.{num & 255}"


def built_for(path: str) -> Tuple[Optional[str], Optional[str]]:
    """(Slurm release the plugin file was built for, problem)."""
    try:  # root's file in root's directories, as the plugin itself checks what it loads
        data = safeio.read_trusted(path, MAX_BYTES)
    except OSError as e:
        return None, e.strerror if path in (e.strerror or "") else f"{path}: {e.strerror}"
    try:
        num = _plugin_version(data)
    except (ValueError, struct.error) as e:
        return None, f"{path}: not a readable 64-bit ELF plugin ({e})"
    if num is None:
        return None, f"{path}: no plugin_version symbol: not a Slurm plugin"
    return _version_text(num), None


def _symbol(data: bytes, name: bytes) -> Optional[Tuple[int, int, str]]:
    """(file offset, size, struct byte order) of the data of the dynamic
    symbol name in an ELF64 file, or None when it has none; ValueError or
    struct.error when the file is not a readable ELF64 file."""
    if data[:4] != b"\x7fELF" or data[4] != 2:
        raise ValueError("not ELF64")
    end = "<" if data[5] == 1 else ">"
    shoff, = struct.unpack_from(end + "Q", data, 0x28)
    shentsize, shnum = struct.unpack_from(end + "HH", data, 0x3A)
    if shnum > 4096 or shentsize < 64:
        raise ValueError("implausible section table")
    sections = [struct.unpack_from(end + "IIQQQQIIQQ", data, shoff + i * shentsize) for i in range(shnum)]
    for _name, stype, _fl, _addr, off, size, link, _info, _al, entsize in sections:
        if stype != SHT_DYNSYM or entsize < 24 or link >= shnum:
            continue
        stroff, strsize = sections[link][4], sections[link][5]
        for i in range(min(size // entsize, 65536)):
            st_name, _st_info, _st_other, st_shndx, st_value, st_size = \
                struct.unpack_from(end + "IBBHQQ", data, off + i * entsize)
            if st_name >= strsize:
                continue
            nul = data.find(b"\0", stroff + st_name)
            if data[stroff + st_name:nul] != name or not 0 < st_shndx < shnum:
                continue
            sec = sections[st_shndx]
            pos = st_value - sec[3] + sec[4]
            if not 0 <= pos <= len(data) - st_size:
                raise ValueError(f"symbol {name.decode()} outside the file")
            return pos, st_size, end
    return None


def _plugin_version(data: bytes) -> Optional[int]:
    sym = _symbol(data, b"plugin_version")
    return None if sym is None else struct.unpack_from(sym[2] + "I", data, sym[0])[0]


def plugin_name(data: bytes) -> Optional[str]:
    """The name a Slurm plugin file gives itself (its plugin_name symbol:
    SPANK_PLUGIN's first argument), or None when it has none; ValueError
    or struct.error when the file is not a readable ELF64 file."""
    sym = _symbol(data, b"plugin_name")
    if sym is None:
        return None
    pos, size, _ = sym
    return data[pos:pos + min(size, 256)].split(b"\0", 1)[0].decode("ascii", "replace")


def slurm_release(cmd: str = "srun") -> Optional[str]:
    """This node's Slurm release, as its commands report it ("22.05.8")."""
    try:
        # no capture_output/text: config.py reaches this module from the
        # Epilog, which runs on Python 3.6
        r = subprocess.run([cmd, "--version"], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                           universal_newlines=True, timeout=10)
    except (OSError, subprocess.TimeoutExpired):
        return None
    m = re.search(r"\b(\d+)\.(\d+)\.(\d+)", r.stdout)
    return ".".join(m.groups()) if m else None


def check(plugin: Optional[str], slurm: Optional[str]) -> Dict[str, Any]:
    """The audit's plugin entry: ok is True when both are known and the
    releases (major.minor) agree."""
    out: Dict[str, Any] = {"path": plugin, "built_for": None, "slurm": slurm, "ok": False, "problem": None}
    if not plugin:
        out["problem"] = "no plugstack line loads the mpi-pstate plugin"
        return out
    out["built_for"], out["problem"] = built_for(plugin)
    if out["problem"]:
        return out
    if slurm is None:
        out["problem"] = "this node's Slurm release is unknown (no srun --version)"
    elif out["built_for"].split(".")[:2] != slurm.split(".")[:2]:
        out["problem"] = (f"built for Slurm {out['built_for']}, this node runs {slurm}: Slurm refuses "
                          "to load it and users get \"unrecognized option '--mpi-pstate'\"; rebuild "
                          "and reinstall mpi-pstate against this Slurm (make deb / make install)")
    else:
        out["ok"] = True
    return out
