# SPDX-License-Identifier: BSD-3-Clause
"""Which commit of the source tree a benchmark measured.

Imported by the bench/<component>/run.py scripts (each puts bench/ and
epilog/ on its path).  Only a checkout has a commit: an installed package has
none, which is why this lives beside the benchmarks and not in it.

git runs only in the caller's own checkout: a checkout's configuration can
make git run programs (core.fsmonitor, filter drivers for --dirty), and
another user's must not run them as root, so neither safe.directory nor any
-c is used to get around git's ownership check.  Another user's checkout is
read without git: the commit HEAD names, its dirty state unknown
(tests/py/test_root_trust.py, BenchSourceVersion).
"""
from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path
from typing import Optional, Set, Tuple

from mpi_pstate.core import safeio

GIT_MAX_BYTES = 1 << 20
HEX_RE = re.compile(r"[0-9a-f]{40}([0-9a-f]{24})?")


def _git_text(path: Path) -> Optional[str]:
    """A small file of a checkout's git directory, whoever owns it: never
    through a final symlink, never a FIFO, bounded (safeio.read_file)."""
    try:
        return safeio.read_file(None, str(path), GIT_MAX_BYTES, owners=None,
                                strict_mode=False).decode("utf-8", "replace")
    except OSError:
        return None


def git_dirs(top: Path) -> Optional[Tuple[Path, Path]]:
    """(git directory, common directory) of the checkout at top: .git, or
    the directory a worktree's .git file names, and its commondir."""
    dotgit = top / ".git"
    if dotgit.is_dir():
        return dotgit, dotgit
    text = _git_text(dotgit)
    if not text or not text.startswith("gitdir: "):
        return None
    gd = Path(text[8:].strip())
    gd = gd if gd.is_absolute() else top / gd
    common = _git_text(gd / "commondir")
    cd = Path(common.strip()) if common else gd
    return gd, (cd if cd.is_absolute() else gd / cd)


def head_commit(top: Path) -> Optional[str]:
    """The commit HEAD names, read from the files (HEAD, the loose ref,
    packed-refs) without running git."""
    dirs = git_dirs(top)
    if dirs is None:
        return None
    gd, cd = dirs
    head = (_git_text(gd / "HEAD") or "").strip()
    for _ in range(5):  # a symbolic ref may name another
        if not head.startswith("ref: "):
            break
        ref = head[5:].strip()
        if not re.fullmatch(r"refs/[A-Za-z0-9._/\-]{1,200}", ref) or ".." in ref:
            return None
        head = (_git_text(gd / ref) or _git_text(cd / ref) or "").strip()
        if not head:
            for line in (_git_text(cd / "packed-refs") or "").splitlines():
                parts = line.split(" ", 1)
                if len(parts) == 2 and parts[1] == ref:
                    head = parts[0]
                    break
    return head if HEX_RE.fullmatch(head) else None


def _owners(top: Path) -> Set[int]:
    dirs = git_dirs(top)
    paths = [top, top / ".git"] + (list(dirs) if dirs else [])
    out = set()
    for p in paths:
        try:
            out.add(p.stat().st_uid)
        except OSError:
            out.add(-1)
    return out


def source_version(top: Path) -> Optional[str]:
    """The commit of the checkout at top (`git describe --always --dirty`
    when the caller owns it), or None when top is no checkout."""
    if not (top / ".git").exists():
        return None
    if _owners(top) == {os.geteuid()} and shutil.which("git"):
        r = subprocess.run(["git", "-C", str(top), "describe", "--always", "--dirty"],
                           capture_output=True, text=True)
        if r.returncode == 0 and r.stdout.strip():
            return r.stdout.strip()
    sha = head_commit(top)
    return f"{sha[:12]} (read from .git, dirty state unknown)" if sha else None
