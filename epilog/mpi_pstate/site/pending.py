# SPDX-License-Identifier: BSD-3-Clause
"""Node records the node Epilog could not publish (collect_dir full,
unreachable or unsafe), kept on the node until a later pass delivers them:
the next Epilog on the node, or `mpi-pstate node-prune`: otherwise a
failed publish would lose the job's figures for good, or keep every
segment in tmpfs with nothing to retry.

    <runtime>/pending/            root's, 0700
    <runtime>/pending/<job>.<node>.json   the encoded record, as it would
                                          have been published

The record is whole (noderec.build() bounded it), so the job's segments
and step directories can go once it is here."""
import errno
import os
from typing import Callable, List

from ..core import layout, noderecord, parse, safeio

MAX_FILES = 4096  # records waiting on one node; past it the Epilog keeps the segments
DELIVER_PER_PASS = 64  # a pass stops there (and at the first failure): bounded Epilog time

Publish = Callable[[int, str, bytes], None]


def _open(runtime: str, create: bool) -> int:
    return safeio.open_dir(os.path.join(runtime, layout.PENDING_DIR), trusted={0},
                           create_mode=0o700 if create else None)


def keep(runtime: str, job: int, node: str, data: bytes) -> None:
    """Stores the record; OSError when it cannot (then nothing is stored)."""
    dfd = _open(runtime, True)
    try:
        name = layout.pending_name(job, parse.safe_name(node))
        if name not in os.listdir(dfd) and count(dfd) >= MAX_FILES:
            raise OSError(errno.ENOSPC, f"{MAX_FILES} records already wait in "
                          f"{runtime}/{layout.PENDING_DIR}")
        safeio.write_atomic(dfd, name, data, mode=0o600)
    finally:
        os.close(dfd)


def count(dfd: int) -> int:
    return sum(1 for n in os.listdir(dfd) if layout.PENDING_RE.fullmatch(n))


def deliver(runtime: str, publish: Publish, limit: int = DELIVER_PER_PASS) -> List[str]:
    """Publishes waiting records, oldest job first, and removes each once
    published; stops at the first failure (collect_dir is most likely
    still unusable) and after `limit`.  Returns problems, one line each."""
    problems: List[str] = []
    try:
        dfd = _open(runtime, False)
    except OSError as e:
        return [] if e.errno == errno.ENOENT else \
            [f"{runtime}/{layout.PENDING_DIR}: {e.strerror}"]
    try:
        safeio.remove_stale_tmp(dfd)
        names = sorted((int(m.group(1)), m.group(2), n) for n in os.listdir(dfd)
                       for m in [layout.PENDING_RE.fullmatch(n)] if m)
        for job, node, n in names[:limit]:
            try:
                data = safeio.read_file(dfd, n, noderecord.MAX_BYTES + 1, owners={0})
                publish(job, node, data)
            except OSError as e:
                problems.append(f"{layout.PENDING_DIR}/{n} not delivered: {e.strerror or e}")
                break
            os.unlink(n, dir_fd=dfd)
    finally:
        os.close(dfd)
    return problems


def waiting(runtime: str) -> List[str]:
    """Names of the records that wait (tests, node-prune's report)."""
    try:
        dfd = _open(runtime, False)
    except OSError:
        return []
    try:
        return sorted(n for n in os.listdir(dfd) if layout.PENDING_RE.fullmatch(n))
    finally:
        os.close(dfd)
