"""File access for code that runs as root (or SlurmUser) and meets files a
user could have planted or written: the rules of common/safeio.h in Python.

* Nothing is ever followed through a symlink: directories are walked one
  component at a time with O_NOFOLLOW, files are opened O_NOFOLLOW.
* Files are opened O_NONBLOCK (a planted FIFO cannot block us), must be
  regular files, owned by an expected uid, and are read up to a bound
  (st_size is checked first, then what is actually read).
* Writes are atomic: temporary file in the same directory, fsync, rename,
  fsync of the directory; temporary names start with ".tmp.".

Errors are UnsafeFile (an OSError with an errno) so callers can log one line
and carry on."""
import errno
import os
import stat
from typing import Iterable, Iterator, List, Optional

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


def open_dir(path: str, trusted: Iterable[int] = (0,), create_mode: Optional[int] = None,
             final_owner: Optional[Iterable[int]] = None, shared: bool = False) -> int:
    """Opens the absolute directory `path` without following any symlink.
    Every component must be owned by a uid in `trusted` and be writable by
    group/others only if sticky; the final directory must be owned by a uid
    in final_owner (default: trusted) and not be group/other writable
    (shared: like /dev/shm, sticky world-writable is fine: each file in it
    is then checked on its own).
    With create_mode, missing components are created (by the caller's uid).
    Returns an O_DIRECTORY fd; raises UnsafeFile."""
    if not path.startswith("/"):
        raise _fail(errno.EINVAL, path, "not an absolute path")
    parts = [p for p in path.split("/") if p]
    if any(p in (".", "..") for p in parts):
        raise _fail(errno.EINVAL, path, "has . or .. components")
    trusted = set(trusted)
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
            if st.st_uid not in owners:
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
              sysfs: bool = False) -> bytes:
    """The whole content of a small regular file (dirfd None: name is a
    path).  owners None skips the owner check; strict_mode refuses
    group/other-writable files; sysfs skips the st_size check (sysfs always
    says 4096) and bounds only what is read."""
    what = name
    try:
        fd = os.open(name, O_READ, dir_fd=dirfd) if dirfd is not None else os.open(name, O_READ)
    except OSError as e:
        raise _describe(e, what) from None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise _fail(errno.EINVAL, what, "not a regular file")
        if owners is not None and st.st_uid not in set(owners):
            raise _fail(errno.EPERM, what, f"owned by uid {st.st_uid}")
        if strict_mode and st.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
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


def list_dir(dirfd: int) -> List[str]:
    """Names in a directory opened with open_dir (sorted, no temporaries)."""
    return sorted(n for n in os.listdir(dirfd) if not n.startswith(".tmp."))


def entry_stat(dirfd: int, name: str) -> Optional[os.stat_result]:
    try:
        return os.stat(name, dir_fd=dirfd, follow_symlinks=False)
    except OSError:
        return None


_tmp_counter = iter(range(1, 1 << 62))


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


def walk_names(dirfd: int, prefix: str) -> Iterator[str]:
    for n in list_dir(dirfd):
        if n.startswith(prefix):
            yield n
