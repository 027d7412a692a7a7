# SPDX-License-Identifier: BSD-3-Clause
"""File access for code that runs as root (or SlurmUser) and meets files a
user could have planted or written: the rules of common/safeio.h in Python.

* Nothing is ever followed through a symlink: directories are walked one
  component at a time with O_NOFOLLOW, files are opened O_NOFOLLOW.
* Files are opened O_NONBLOCK (a planted FIFO cannot block us), must be
  regular files, owned by an expected uid, and are read up to a bound
  (st_size is checked first, then what is actually read).
* Writes are atomic: temporary file in the same directory, fsync, rename,
  fsync of the directory; temporary names start with ".tmp.".

* What root runs or reads by name (the agent, mpi-pstate-dbcomment, slurm.conf,
  plugstack.conf, the power model) passes the SPANK plugin's trusted-path
  rule (spank/agentctl.c, mpi_pstate_agentctl_trusted): the path as given and
  as resolved, every directory up to "/", owned by root (or by the caller
  itself) and writable by nobody else; then the file is opened as above.
* Environment variables that name such a file (MPI_PSTATE_AGENT, _BUILD,
  _DBCOMMENT, _MODEL) steer root or SlurmUser only in a source checkout
  (env_override).

Errors are UnsafeFile (an OSError with an errno) so callers can log one line
and carry on."""
import errno
import os
import stat
import struct
from typing import Iterable, List, Optional, Set

O_READ = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
O_DIR = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC


class UnsafeFile(OSError):
    """A file or directory failed a safety check, or could not be read."""


class Missing(UnsafeFile, FileNotFoundError):
    """A path component or file does not exist."""


def _fail(code: int, what: str, why: str) -> UnsafeFile:
    cls = Missing if code == errno.ENOENT else UnsafeFile
    return cls(code, f"{what}: {why}")


def _describe(e: OSError, what: str) -> UnsafeFile:
    if e.errno == errno.ELOOP:
        return _fail(errno.ELOOP, what, "is a symlink")
    return _fail(e.errno or errno.EIO, what, e.strerror or str(e))


def open_dir(path: str, trusted: Optional[Iterable[int]] = (0,),
             create_mode: Optional[int] = None, final_owner: Optional[Iterable[int]] = None,
             shared: bool = False) -> int:
    """Opens the absolute directory `path` without following any symlink.
    Every component must be owned by a uid in `trusted` (None: anyone, for
    a final directory whose owner alone matters: walked without symlinks,
    the parents can redirect nothing but to directories final_owner owns)
    and be writable by group/others only if sticky; the final directory
    must be owned by a uid in final_owner (default: trusted) and not be
    group/other writable (shared: like /dev/shm, sticky world-writable is
    fine: each file in it is then checked on its own).
    With create_mode, missing components are created (by the caller's uid).
    Returns an O_DIRECTORY fd; raises UnsafeFile."""
    if not path.startswith("/"):
        raise _fail(errno.EINVAL, path, "not an absolute path")
    parts = [p for p in path.split("/") if p]
    if any(p in (".", "..") for p in parts):
        raise _fail(errno.EINVAL, path, "has . or .. components")
    anyone = trusted is None
    trusted = set(trusted or ())
    final = set(final_owner) if final_owner is not None else trusted
    fd = os.open("/", O_DIR)
    try:
        for i, name in enumerate(parts):
            last = i == len(parts) - 1
            try:
                nfd = os.open(name, O_DIR, dir_fd=fd)
            except FileNotFoundError:
                if create_mode is None:
                    raise _fail(errno.ENOENT, path, f"{name} does not exist") from None
                try:
                    os.mkdir(name, create_mode, dir_fd=fd)
                except FileExistsError:
                    pass
                nfd = os.open(name, O_DIR, dir_fd=fd)
            except OSError as e:
                if e.errno in (errno.ELOOP, errno.ENOTDIR):
                    raise _fail(errno.ELOOP, path, f"{name} is a symlink or not a directory") \
                        from None
                raise _describe(e, path) from None
            os.close(fd)
            fd = nfd
            st = os.fstat(fd)
            owners = final if last else trusted
            if st.st_uid not in owners and not (anyone and not last):
                raise _fail(errno.EPERM, path, f"{name} is owned by uid {st.st_uid}")
            loose = st.st_mode & (stat.S_IWGRP | stat.S_IWOTH)
            if loose and ((last and not shared) or not st.st_mode & stat.S_ISVTX):
                raise _fail(errno.EPERM, path, f"{name} is writable by others")
        return fd
    except BaseException:
        os.close(fd)
        raise


def read_file(dirfd: Optional[int], name: str, max_bytes: int,
              owners: Optional[Iterable[int]] = (0,), strict_mode: bool = True,
              sysfs: bool = False, root_group_ok: bool = False) -> bytes:
    """The whole content of a small regular file (dirfd None: name is a
    path).  owners None skips the owner check; strict_mode refuses
    group/other-writable files (root_group_ok: group-writable is fine when
    the group is root's, the plugin's rule); sysfs skips the st_size check
    (sysfs always says 4096) and bounds only what is read."""
    what = name
    try:
        fd = os.open(name, O_READ, dir_fd=dirfd) if dirfd is not None else os.open(name, O_READ)
    except OSError as e:
        raise _describe(e, what) from None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise _fail(errno.EINVAL, what, f"not a regular file ({_kind(st.st_mode)})")
        if owners is not None and st.st_uid not in set(owners):
            raise _fail(errno.EPERM, what, f"owned by uid {st.st_uid}")
        if strict_mode and (_loose(st, False) if root_group_ok
                            else st.st_mode & (stat.S_IWGRP | stat.S_IWOTH)):
            raise _fail(errno.EPERM, what, "writable by group or others")
        if not sysfs and st.st_size > max_bytes:
            raise _fail(errno.EFBIG, what, f"{st.st_size} bytes, more than {max_bytes}")
        chunks: List[bytes] = []
        total = 0
        while True:
            b = os.read(fd, min(1 << 20, max_bytes + 1 - total))
            if not b:
                break
            chunks.append(b)
            total += len(b)
            if total > max_bytes:
                raise _fail(errno.EFBIG, what, f"more than {max_bytes} bytes")
        return b"".join(chunks)
    except OSError as e:
        if isinstance(e, UnsafeFile):
            raise
        raise _describe(e, what) from None
    finally:
        os.close(fd)


def _kind(mode: int) -> str:
    for test, name in ((stat.S_ISFIFO, "a FIFO"), (stat.S_ISDIR, "a directory"),
                       (stat.S_ISSOCK, "a socket"), (stat.S_ISCHR, "a character device"),
                       (stat.S_ISBLK, "a block device"), (stat.S_ISLNK, "a symlink")):
        if test(mode):
            return name
    return "not a file"


# ---- what root runs and reads by name: the plugin's trusted-path rule ------

PATH_MAX = 4096
# `make install` copies only the package's *.py files (epilog/rules.mk): a
# package directory beside epilog/rules.mk is a source checkout, that is a
# development or test run (tests/run, the unit suites, bench/).
DEV_MARKER = "rules.mk"
PKG_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))  # mpi_pstate/


def dev_tree() -> bool:
    """Whether this package runs from a source checkout, not an installation."""
    return os.path.isfile(os.path.join(os.path.dirname(PKG_DIR), DEV_MARKER))


def env_override(name: str, privileged: Optional[bool] = None) -> Optional[str]:
    """$name where the environment may steer this process: always for a
    user's own command, for root and SlurmUser (privileged; default: euid 0)
    only from a source checkout.  Slurm, cron and systemd run the installed
    package, whose root code then names its files only from root's
    configuration and the installed paths."""
    v = os.environ.get(name)
    if not v:
        return None
    if privileged is None:
        privileged = os.geteuid() == 0
    return v if not privileged or dev_tree() else None


def trusted_owners() -> Set[int]:
    """Root, and the caller itself (the same set when root runs it: a user's
    own command may use the user's own files, root's only root's)."""
    return {0, os.geteuid()}


def _loose(st: os.stat_result, is_dir: bool) -> bool:
    """Writable by somebody but the owner: group-writable is fine when the
    group is root's; world-writable only for a sticky directory (/tmp),
    where nobody but root can rename or remove root's entries."""
    return bool((st.st_mode & stat.S_IWGRP and st.st_gid != 0) or
                (st.st_mode & stat.S_IWOTH and not (is_dir and st.st_mode & stat.S_ISVTX)))


def _trusted_entry(p: str, is_dir: bool, owners: Set[int]) -> None:
    try:
        st = os.stat(p)
    except OSError as e:
        raise _describe(e, p) from None
    if st.st_uid not in owners:
        who = "root" if owners == {0} else "root or uid " + \
            ", ".join(str(u) for u in sorted(owners - {0}))
        raise _fail(errno.EPERM, p, f"owned by uid {st.st_uid}, not {who}")
    if _loose(st, is_dir):
        raise _fail(errno.EPERM, p, "writable by %s (mode %04o)" % (
            "everybody" if st.st_mode & stat.S_IWOTH else "its group", st.st_mode & 0o7777))


def _plain_path(path: str) -> str:
    """path without repeated or trailing slashes; "." and ".." refused
    (normalising them away could skip a directory the kernel walks)."""
    if not path.startswith("/") or len(path) >= PATH_MAX or "\0" in path:
        raise _fail(errno.EINVAL, path, "not an absolute path")
    parts = [p for p in path.split("/") if p]
    if any(p in (".", "..") for p in parts):
        raise _fail(errno.EINVAL, path, "has . or .. components")
    return "/" + "/".join(parts)


def trusted_path(path: str, is_dir: bool = False,
                 owners: Optional[Iterable[int]] = None) -> str:
    """spank/agentctl.c's rule: `path` as given (its directories: where a
    link could be swapped) and as resolved (the entry itself and every
    directory up to "/") are owned by a uid in owners (default
    trusted_owners()) and writable by nobody else.  Root's symlinks are
    followed (/sbin -> usr/sbin).  Returns path; raises UnsafeFile."""
    given = _plain_path(path)
    own = set(owners) if owners is not None else trusted_owners()
    try:
        os.stat(path)
    except OSError as e:
        raise _describe(e, path) from None
    real = os.path.realpath(path)
    for form, last in ((given, False), (real, True)):
        if last:
            _trusted_entry(form, is_dir, own)
        d = form
        while d != "/":
            d = os.path.dirname(d)
            _trusted_entry(d, True, own)
    return path


def trusted_exec(path: str, owners: Optional[Iterable[int]] = None) -> str:
    """trusted_path() of a program root runs: also a regular executable file."""
    trusted_path(path, False, owners)
    st = os.stat(path)
    if not stat.S_ISREG(st.st_mode) or not st.st_mode & stat.S_IXUSR:
        raise _fail(errno.EACCES, path, "not an executable file")
    return path


def read_trusted(path: str, max_bytes: int, owners: Optional[Iterable[int]] = None) -> bytes:
    """A file root (or SlurmUser) reads by name: its directories pass
    trusted_path(), the file itself is opened O_NOFOLLOW|O_NONBLOCK (a
    symlink or a FIFO is refused, never followed or waited on), is regular,
    owned by a uid in owners (default trusted_owners()), writable by nobody
    else, and at most max_bytes."""
    own = set(owners) if owners is not None else trusted_owners()
    d = os.path.dirname(_plain_path(path))
    try:
        trusted_path(d, True, own)
    except UnsafeFile as e:
        raise _fail(e.errno or errno.EPERM, path, f"directory {e.strerror}") from None
    return read_file(None, path, max_bytes, owners=own, strict_mode=True, root_group_ok=True)


def read_sysfs(path: str, max_bytes: int = 4096) -> Optional[str]:
    """First line of a sysfs attribute, or None when absent/unreadable.
    sysfs is the kernel's: no owner check, but never through a symlink at the
    last component and never more than max_bytes."""
    try:
        data = read_file(None, path, max_bytes, owners=None, strict_mode=False, sysfs=True)
    except OSError:
        return None
    text = data.decode("ascii", "replace")
    return text.split("\n", 1)[0]


def process_running(pid: int, proc: str = "/proc") -> bool:
    """Running, not a zombie (a zombie's parent reaps it; it holds nothing)."""
    try:
        with open(os.path.join(proc, str(pid), "stat"), "rb") as f:
            st = f.read(4096)
        return st[st.rindex(b")") + 2:][:1] != b"Z"
    except (OSError, ValueError):
        return False


def list_dir(dirfd: int) -> List[str]:
    """Names in a directory opened with open_dir (sorted, no temporaries)."""
    return sorted(n for n in os.listdir(dirfd) if not n.startswith(".tmp."))


def entry_stat(dirfd: int, name: str) -> Optional[os.stat_result]:
    try:
        return os.stat(name, dir_fd=dirfd, follow_symlinks=False)
    except OSError:
        return None


_tmp_counter = iter(range(1, 1 << 62))


# POSIX ACL in its xattr form (linux/posix_acl_xattr.h): a version word,
# then (tag, perm, id) entries sorted by tag, then id.
_ACL_VERSION, _ACL_UNDEFINED = 2, 0xFFFFFFFF
_ACL_USER_OBJ, _ACL_USER, _ACL_GROUP_OBJ, _ACL_MASK, _ACL_OTHER = 0x01, 0x02, 0x04, 0x10, 0x20


def acl_owner_and(uid: int, perm: int) -> bytes:
    """An access ACL: the owner all rights, `uid` perm (4 r, 2 w, 1 x),
    the owning group and others nothing."""
    ents = [(_ACL_USER_OBJ, 7, _ACL_UNDEFINED), (_ACL_USER, perm, uid),
            (_ACL_GROUP_OBJ, 0, _ACL_UNDEFINED), (_ACL_MASK, perm, _ACL_UNDEFINED),
            (_ACL_OTHER, 0, _ACL_UNDEFINED)]
    return struct.pack("<I", _ACL_VERSION) + b"".join(struct.pack("<HHI", *e) for e in ents)


def set_dir_reader(fd: int, uid: int) -> Optional[str]:
    """fd (a directory of ours, mode 0700) also readable and searchable by
    uid, through a POSIX ACL; None, or why not (a file system without
    ACLs: the directory stays its owner's alone)."""
    try:
        os.setxattr(fd, "system.posix_acl_access", acl_owner_and(uid, 5))
        return None
    except OSError as e:
        return f"no ACL for uid {uid}: {e.strerror or e}"


def write_atomic(dirfd: int, name: str, data: bytes, mode: int = 0o644,
                 uid: int = -1, gid: int = -1, replace: bool = True) -> None:
    """dirfd/name := data, atomically; an existing name is replaced (or kept
    with replace=False: FileExistsError)."""
    tmp = f".tmp.{name}.{os.getpid()}.{next(_tmp_counter)}"
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC,
                 mode, dir_fd=dirfd)
    try:
        try:
            view = memoryview(data)
            while view:
                n = os.write(fd, view)
                view = view[n:]
            os.fchmod(fd, mode)
            if uid != -1 or gid != -1:
                os.fchown(fd, uid, gid)
            os.fsync(fd)
        finally:
            os.close(fd)
        if replace:
            os.rename(tmp, name, src_dir_fd=dirfd, dst_dir_fd=dirfd)
        else:
            os.link(tmp, name, src_dir_fd=dirfd, dst_dir_fd=dirfd, follow_symlinks=False)
            os.unlink(tmp, dir_fd=dirfd)
    except BaseException:
        try:
            os.unlink(tmp, dir_fd=dirfd)
        except OSError:
            pass
        raise
    os.fsync(dirfd)


def remove_stale_tmp(dirfd: int, max_age_s: float = 3600.0) -> int:
    """Removes temporaries left by a writer that died (older than max_age_s)."""
    import time
    n = 0
    now = time.time()
    for name in os.listdir(dirfd):
        if not name.startswith(".tmp."):
            continue
        st = entry_stat(dirfd, name)
        if st and stat.S_ISREG(st.st_mode) and now - st.st_mtime > max_age_s:
            try:
                os.unlink(name, dir_fd=dirfd)
                n += 1
            except OSError:
                pass
    return n
