# SPDX-License-Identifier: BSD-3-Clause
"""The collection directory (collect_dir, shared by the compute nodes and
the controller):

    <collect_dir>/                 owned by SlurmUser, mode 0755
    <collect_dir>/<jobid>/         one per job (raw job id), owned by SlurmUser;
                                   with PrivateData=jobs mode 0700 plus an
                                   ACL for the job's user (open_job_dir)
        node.<node>.json           node record, written by root (node Epilog)
        job.json                   merged detail, written by SlurmUser
                                   (EpilogSlurmctld) or root (backfill)

Node epilogs (root) create the job directory and hand it to the owner of
collect_dir, so that EpilogSlurmctld (SlurmUser) can write job.json beside
the node records.  Nothing here follows a symlink; every file read is
checked for type, owner and size."""
import contextlib
import errno
import os
import stat
from typing import Any, Dict, Iterator, List, Optional, Set, Tuple

from . import layout, noderecord, parse, safeio

JOB_MAX_BYTES = 64 << 20
# What one job's node records may cost the controller in all, whatever the
# number of nodes (each is already at most noderec.MAX_BYTES and MAX_RANKS):
# the job's user shapes every one of them.  256 MiB hold 64 nodes of 4096
# honest ranks (about 450 bytes each) with room to spare; a record past it
# is refused as bad, not read, and the summary is partial naming it.  Past
# JOB_MAX_RANKS rank entries a record is still read, one at a time, but its
# ranks are summed into its "rest" (noderec, "Aggregate"), not kept: the
# merged job.json stays under JOB_MAX_BYTES and the controller's memory
# bounded, and every rank still counts (64 nodes x 4096 ranks are merged
# whole: tests/py/test_epilog_scale.py).
JOB_MAX_RECORD_BYTES = 256 << 20
JOB_MAX_RANKS = 65536


def node_file(node: str) -> str:
    return layout.node_record_name(parse.safe_name(node))


def open_collect(path: str, trusted: Set[int], create_mode: Optional[int] = None) -> int:
    """collect_dir itself: ancestors root-owned, the directory owned by a uid
    in `trusted` and not writable by group/others."""
    return safeio.open_dir(path, trusted={0}, final_owner=trusted, create_mode=create_mode)


def open_job_dir(cfd: int, job: int, trusted: Set[int], create: bool = False,
                 private: bool = False, reader: Optional[int] = None,
                 problems: Optional[List[str]] = None) -> Optional[int]:
    """The job's directory (None if absent).  With create, make it owned by
    the owner of collect_dir (root hands it over with fchown), mode 0755; or,
    private (slurm.conf's PrivateData=jobs), mode 0700 and searchable by the
    job's user (`reader`) alone through an ACL: the records inside stay
    0644, and the directory is what hides them from other users, as sacct
    hides the job.  Where the ACL cannot be set, why is added to problems."""
    name = str(job)
    if create:
        try:
            os.mkdir(name, 0o700, dir_fd=cfd)
            created = True
        except FileExistsError:
            created = False
    try:
        fd = os.open(name, safeio.O_DIR, dir_fd=cfd)
    except FileNotFoundError:
        return None
    except OSError as e:
        if e.errno in (errno.ELOOP, errno.ENOTDIR):
            raise safeio.UnsafeFile(errno.ELOOP, f"{name}: symlink or not a directory") from None
        raise
    try:
        st = os.fstat(fd)
        cst = os.fstat(cfd)
        if create and created and st.st_uid != cst.st_uid:
            os.fchown(fd, cst.st_uid, cst.st_gid)
            st = os.fstat(fd)
        # Not only when made: job ids are reused (a database reset, a wrap
        # at MaxJobId), and the directory of an old job of that id must not
        # stay readable by its user, nor locked to them, for the new one.
        # A chmod rewrites an ACL's mask (0700: the reader's entry counts
        # for nothing), so the mode is set only with the ACL after it.
        ours = create and (created or st.st_uid == os.geteuid())
        acl = ours and private and reader is not None and reader != st.st_uid
        if ours and (created or acl):
            os.fchmod(fd, 0o700 if private else 0o755)
        if acl:
            assert reader is not None
            why = safeio.set_dir_reader(fd, reader)
            if why and problems is not None:
                problems.append(f"{name}: {why}: only its owner reads the records")
        if ours:
            st = os.fstat(fd)
        if st.st_uid not in trusted:
            raise safeio.UnsafeFile(errno.EPERM, f"{name}: owned by uid {st.st_uid}")
        if st.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
            raise safeio.UnsafeFile(errno.EPERM, f"{name}: writable by others")
        return fd
    except BaseException:
        os.close(fd)
        raise


@contextlib.contextmanager
def job_dir(collect_dir: str, job: int, trusted: Set[int]) -> Iterator[Optional[int]]:
    """The job's directory under collect_dir for the with block (None when
    it does not exist); both descriptors are closed after it, whatever it
    raised, so that a reader keeps no directory open on an error path."""
    cfd = open_collect(collect_dir, trusted)
    try:
        jfd = open_job_dir(cfd, job, trusted)
        try:
            yield jfd
        finally:
            if jfd is not None:
                os.close(jfd)
    finally:
        os.close(cfd)


def present_nodes(jfd: int) -> Set[str]:
    out = set()
    for n in os.listdir(jfd):
        node = layout.node_of_record_name(n)
        if node is not None and not n.startswith(".tmp."):
            out.add(node)
    return out


def read_node_records(jfd: int, job: int, nodes: List[str], trusted: Set[int]
                      ) -> Tuple[Dict[str, Dict[str, Any]], Dict[str, str]]:
    """Validated records of `nodes` (plus any other node found), and the
    reasons for the ones refused."""
    records: Dict[str, Dict[str, Any]] = {}
    bad: Dict[str, str] = {}
    names = list(dict.fromkeys(list(nodes) + sorted(present_nodes(jfd))))
    left_bytes, left_ranks = JOB_MAX_RECORD_BYTES, JOB_MAX_RANKS
    for n in names:
        try:
            fname = node_file(n)
        except ValueError as e:
            bad[n] = str(e)
            continue
        if left_bytes <= 0:
            if safeio.entry_stat(jfd, fname) is not None:
                bad[n] = f"{fname}: not read, the job's budget of node records is spent"
            continue
        try:
            data = safeio.read_file(jfd, fname, min(noderecord.MAX_BYTES, left_bytes), owners=trusted)
        except FileNotFoundError:
            continue
        except OSError as e:
            if e.errno == errno.ENOENT:
                continue
            if e.errno == errno.EFBIG and left_bytes < noderecord.MAX_BYTES:
                left_bytes = 0  # what is left would hold a part of it only
            bad[n] = noderecord.clip(e.strerror or str(e))
            continue
        left_bytes -= len(data)
        try:
            rec = noderecord.validate(noderecord.decode(data), job, n)
        except (ValueError, UnicodeDecodeError) as e:
            bad[n] = noderecord.clip(f"{fname}: {e}")
            continue
        if len(rec["ranks"]) > left_ranks:
            sum_past(rec, left_ranks)
        left_ranks -= len(rec["ranks"])
        records[n] = rec
    return records, bad


def sum_past(rec: Dict[str, Any], keep: int) -> None:
    """Keeps the first `keep` rank entries of a validated record and sums
    the others into its "rest"."""
    rest = rec.get("rest") or noderecord.validate_rest(noderecord.new_rest())
    by_step: Dict[str, List[Dict[str, Any]]] = {}
    for r in rec["ranks"][keep:]:
        by_step.setdefault(r["step"], []).append(r)
    for step, rs in by_step.items():
        noderecord.rest_add(rest, step, rs, f"job over {JOB_MAX_RANKS} ranks: summed")
    del rec["ranks"][keep:]
    rec["rest"] = rest


def read_job_detail(jfd: int, trusted: Optional[Set[int]]) -> Optional[Dict[str, Any]]:
    try:
        data = safeio.read_file(jfd, layout.JOB_FILE, JOB_MAX_BYTES, owners=trusted)
        obj = noderecord.decode(data)
    except (OSError, ValueError, UnicodeDecodeError):
        return None
    if isinstance(obj, dict) and obj.get("format") == "mpi-pstate-job" and obj.get("version") == 1:
        return obj
    return None


def remove_job_dir(cfd: int, job: int) -> bool:
    """Deletes a job's directory (a job that ran without mpi-pstate)."""
    name = str(job)
    try:
        fd = os.open(name, safeio.O_DIR, dir_fd=cfd)
    except OSError:
        return False
    try:
        for n in os.listdir(fd):
            st = safeio.entry_stat(fd, n)
            if st is not None and not stat.S_ISDIR(st.st_mode):
                try:
                    os.unlink(n, dir_fd=fd)
                except OSError:
                    pass
    finally:
        os.close(fd)
    try:
        os.rmdir(name, dir_fd=cfd)
        return True
    except OSError:
        return False


def job_dirs(cfd: int) -> List[int]:
    out = []
    for n in os.listdir(cfd):
        try:
            out.append(parse.job_id(n))
        except ValueError:
            continue
    return sorted(out)
