/* SPDX-License-Identifier: BSD-3-Clause */
/* Small-file IO for root code that may meet files a user could have planted.
 *
 * Every function returns a negative errno on failure.  Paths are resolved
 * relative to dirfd (AT_FDCWD for absolute or cwd-relative paths); the last
 * component is never followed if it is a symlink (-ELOOP). */
#ifndef MPI_PSTATE_SAFEIO_H
#define MPI_PSTATE_SAFEIO_H
#include <stddef.h>
#include <sys/types.h>

/* Flags for mpi_pstate_safeio_read_small(). */
enum {
        /* The file must be owned by `owner`, must not be writable by group or
         * others, and its st_size must fit the buffer.  Use for state files;
         * not for sysfs, where st_size is always 4096. */
        MPI_PSTATE_SAFEIO_OWNED = 1 << 0,
};

/* Reads a whole small regular file into buf (NUL-terminated) and strips the
 * trailing newlines.  Returns the length kept (>= 0), or -ELOOP (symlink),
 * -EINVAL (not a regular file), -EPERM (owner/mode check failed), -EFBIG
 * (content does not fit in bufsz - 1 bytes), -EILSEQ (NUL byte in content),
 * or the errno of open/read. */
int mpi_pstate_safeio_read_small(int dirfd, const char *path, char *buf, size_t bufsz, int flags,
                                 uid_t owner);

/* One-shot write of a sysfs-style attribute: open(O_WRONLY|O_TRUNC|O_NOFOLLOW),
 * one write() of the whole string, close.  O_TRUNC is ignored by sysfs and
 * gives plain-file fakes the kernel's "write replaces" result. */
int mpi_pstate_safeio_write_attr(int dirfd, const char *path, const char *value);

/* Atomic replacement of dirfd/name: a temporary file in the same directory
 * (O_CREAT|O_EXCL, mode), write, fsync, rename, fsync of the directory.
 * flags: MPI_PSTATE_SAFEIO_NOREPLACE (1, so a true "noreplace" argument
 * still means it) leaves an existing name alone and returns -EEXIST;
 * MPI_PSTATE_SAFEIO_NOSYNC skips both fsyncs, for state that means nothing
 * after a crash of the node (a pidfile, a running step's records on a
 * runtime directory that may be on disk): readers still see the old or the
 * new file whole, never a part.  Temporary names start with ".tmp." so
 * directory scans can skip them. */
enum {
        MPI_PSTATE_SAFEIO_NOREPLACE = 1 << 0,
        MPI_PSTATE_SAFEIO_NOSYNC = 1 << 1,
};
int mpi_pstate_safeio_write_atomic(int dirfd, const char *name, const void *data, size_t len,
                                   mode_t mode, int flags);

/* Opens the directory `path` (absolute) for use with the *at() calls,
 * walking it one component at a time with O_NOFOLLOW, so no symlink anywhere
 * in the path is followed (-ELOOP).  Every component must be owned by root or
 * by the effective user, and be writable by group or others only if sticky;
 * the final directory must be owned by the effective user and not writable by
 * group or others (-EPERM).  With create, missing components are made with
 * `mode`.  Returns the fd (O_RDONLY|O_DIRECTORY|O_CLOEXEC). */
int mpi_pstate_safeio_open_dir(const char *path, int create, mode_t mode);

/* Name-only check used before building paths from untrusted text: non-empty,
 * at most maxlen bytes, only [A-Za-z0-9_.:-], not "." or "..".  Returns 0 or
 * -EINVAL. */
int mpi_pstate_safeio_check_name(const char *name, size_t maxlen);

#endif
