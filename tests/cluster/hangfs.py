#!/usr/bin/python3
# SPDX-License-Identifier: BSD-3-Clause
"""A share that hangs, for the lab: a FUSE file system passing every call
through to BACKING, except while the file FLAG exists, when every call
blocks until it is removed, as on a hard NFS mount whose server is gone
(the caller sits in the kernel; only the FUSE server can let it go).

    hangfs.py BACKING MOUNTPOINT FLAG

Runs in the foreground (start it in the background inside the node's mount
namespace).  Files and directories are made with the caller's uid and gid,
as a network file system does; the kernel checks modes (default_permissions),
and calls from other users than root are allowed (allow_other), so the node
Epilog's SlurmUser child reaches it as it would reach NFS.  Unmount with
`umount -l MOUNTPOINT` after removing FLAG; killing the server also
releases every blocked caller (ENOTCONN)."""
import errno
import os
import sys
import threading
import time
from typing import Any, Dict, Iterator

from fusepy import FUSE, FuseOSError, Operations, fuse_get_context  # Debian python3-fusepy


class HangFS(Operations):  # type: ignore[misc]

    def __init__(self, backing: str, flag: str) -> None:
        self.root = os.path.realpath(backing)
        self.flag = flag
        self.lock = threading.Lock()

    def _wait(self) -> None:
        while os.path.lexists(self.flag):
            time.sleep(0.2)

    def __call__(self, op: str, path: str, *args: Any) -> Any:
        if op in ("init", "destroy"):  # the mount itself never waits
            return None
        self._wait()
        try:
            return super().__call__(op, self.root + path, *args)
        except OSError as e:
            raise FuseOSError(e.errno or errno.EIO) from None

    def _owned(self, path: str) -> None:
        uid, gid, _ = fuse_get_context()
        os.lchown(path, uid, gid)

    def getattr(self, path: str, fh: Any = None) -> Dict[str, Any]:
        st = os.lstat(path)
        return {k: getattr(st, k) for k in ("st_atime", "st_ctime", "st_gid", "st_mode",
                                            "st_mtime", "st_nlink", "st_size", "st_uid")}

    def readdir(self, path: str, fh: Any) -> Iterator[str]:
        yield from [".", "..", *os.listdir(path)]

    def mkdir(self, path: str, mode: int) -> None:
        os.mkdir(path, mode)
        self._owned(path)

    def create(self, path: str, mode: int, fi: Any = None) -> int:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, mode)
        self._owned(path)
        return fd

    def open(self, path: str, flags: int) -> int:
        return os.open(path, flags)

    def read(self, path: str, size: int, offset: int, fh: int) -> bytes:
        return os.pread(fh, size, offset)

    def write(self, path: str, data: bytes, offset: int, fh: int) -> int:
        return os.pwrite(fh, data, offset)

    def truncate(self, path: str, length: int, fh: Any = None) -> None:
        os.truncate(path, length)

    def flush(self, path: str, fh: int) -> None:
        pass

    def fsync(self, path: str, datasync: bool, fh: int) -> None:
        os.fsync(fh)

    def fsyncdir(self, path: str, datasync: bool, fh: Any) -> None:
        pass

    def release(self, path: str, fh: int) -> None:
        os.close(fh)

    def rename(self, old: str, new: str) -> None:
        os.rename(old, self.root + new)

    def unlink(self, path: str) -> None:
        os.unlink(path)

    def rmdir(self, path: str) -> None:
        os.rmdir(path)

    def chmod(self, path: str, mode: int) -> None:
        os.chmod(path, mode)

    def chown(self, path: str, uid: int, gid: int) -> None:
        os.lchown(path, uid, gid)

    def utimens(self, path: str, times: Any = None) -> None:
        os.utime(path, times)

    def readlink(self, path: str) -> str:
        return os.readlink(path)

    def statfs(self, path: str) -> Dict[str, Any]:
        st = os.statvfs(path)
        return {k: getattr(st, k) for k in ("f_bavail", "f_bfree", "f_blocks", "f_bsize",
                                            "f_favail", "f_ffree", "f_files", "f_flag",
                                            "f_frsize", "f_namemax")}


def main() -> int:
    if len(sys.argv) != 4:
        print(__doc__, file=sys.stderr)
        return 2
    backing, mnt, flag = sys.argv[1:]
    # nonempty: it covers the share's own directory; no caching: every
    # access reaches the server, as NFS's revalidation does once it hangs
    FUSE(HangFS(backing, flag), mnt, foreground=True, allow_other=True, default_permissions=True,
         nothreads=False, nonempty=True, attr_timeout=0, entry_timeout=0, fsname="hangfs")
    return 0


if __name__ == "__main__":
    sys.exit(main())
