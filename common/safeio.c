/* SPDX-License-Identifier: BSD-3-Clause */
/* Small-file IO for root code (safeio.h): reads, attribute writes, atomic
 * replacements and directory opens that never follow a link a user may have
 * planted. */
#include "safeio.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* A regular file, and with MPI_PSTATE_SAFEIO_OWNED the owner's alone and
 * no bigger than the buffer. */
static int check_small_file(int fd, int flags, uid_t owner, size_t bufsz)
{
        struct stat st;

        if (fstat(fd, &st) != 0)
                return -errno;
        if (!S_ISREG(st.st_mode))
                return -EINVAL;
        if (!(flags & MPI_PSTATE_SAFEIO_OWNED))
                return 0;
        if (st.st_uid != owner || (st.st_mode & (S_IWGRP | S_IWOTH)))
                return -EPERM;
        if (st.st_size < 0 || (size_t)st.st_size > bufsz - 1)
                return -EFBIG;
        return 0;
}

/* Reads the whole file into buf (bufsz - 1 bytes at most): its length, or
 * -EFBIG when more follows. */
static ssize_t read_whole(int fd, char *buf, size_t bufsz)
{
        size_t len = 0;

        for (;;) {
                ssize_t n = read(fd, buf + len, bufsz - 1 - len);

                if (n < 0 && errno == EINTR)
                        continue;
                if (n < 0)
                        return -errno;
                if (n == 0)
                        return (ssize_t)len;
                len += (size_t)n;
                if (len == bufsz - 1) {
                        /* Full buffer: only a clean EOF proves nothing was cut off. */
                        char extra;

                        do {
                                n = read(fd, &extra, 1);
                        } while (n < 0 && errno == EINTR);
                        if (n != 0)
                                return n > 0 ? -EFBIG : -errno;
                        return (ssize_t)len;
                }
        }
}

int mpi_pstate_safeio_read_small(int dirfd, const char *path, char *buf, size_t bufsz, int flags,
                                 uid_t owner)
{
        ssize_t got;
        size_t len;
        int fd, rc;

        if (!path || !buf || bufsz < 2 || bufsz > INT_MAX)
                return -EINVAL;
        buf[0] = '\0';
        /* O_NONBLOCK: a FIFO planted under the expected name must not hang us in open(). */
        fd = openat(dirfd, path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
        if (fd < 0)
                return -errno;
        rc = check_small_file(fd, flags, owner, bufsz);
        if (rc)
                goto out;
        got = read_whole(fd, buf, bufsz);
        if (got < 0) {
                rc = (int)got;
                goto out;
        }
        len = (size_t)got;
        if (memchr(buf, '\0', len)) {
                rc = -EILSEQ;
                goto out;
        }
        while (len > 0 && buf[len - 1] == '\n')
                len--;
        buf[len] = '\0';
        rc = (int)len;
out:
        close(fd);
        if (rc < 0)
                buf[0] = '\0';
        return rc;
}

int mpi_pstate_safeio_write_attr(int dirfd, const char *path, const char *value)
{
        size_t len;
        ssize_t n;
        int fd, rc = 0;

        if (!path || !value)
                return -EINVAL;
        len = strlen(value);
        fd = openat(dirfd, path, O_WRONLY | O_TRUNC | O_NOFOLLOW | O_CLOEXEC | O_NOCTTY);
        if (fd < 0)
                return -errno;
        /* sysfs takes one write() as one value: never split it. */
        do {
                n = write(fd, value, len);
        } while (n < 0 && errno == EINTR);
        if (n < 0)
                rc = -errno;
        else if ((size_t)n != len)
                rc = -EIO;
        if (close(fd) != 0 && rc == 0)
                rc = -errno;
        return rc;
}

int mpi_pstate_safeio_check_name(const char *name, size_t maxlen)
{
        size_t len;

        if (!name)
                return -EINVAL;
        len = strlen(name);
        if (len == 0 || len > maxlen || strcmp(name, ".") == 0 || strcmp(name, "..") == 0)
                return -EINVAL;
        if (strspn(name, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_.:-") !=
            len)
                return -EINVAL;
        return 0;
}

static int write_all(int fd, const void *data, size_t len)
{
        const char *p = data;

        while (len > 0) {
                ssize_t n = write(fd, p, len);

                if (n < 0 && errno == EINTR)
                        continue;
                if (n < 0)
                        return -errno;
                if (n == 0)
                        return -EIO;
                p += n;
                len -= (size_t)n;
        }
        return 0;
}

/* The umask must not decide the mode of a state file; fchmod only when it
 * did, so that the hardened agent, which may not call fchmod, writes its
 * record under the usual umask. */
static int exact_mode(int fd, mode_t mode)
{
        struct stat st;

        if (fstat(fd, &st) != 0)
                return -errno;
        if ((st.st_mode & 07777) != mode && fchmod(fd, mode) != 0)
                return -errno;
        return 0;
}

static int publish(int dirfd, const char *tmp, const char *name, int noreplace)
{
        if (!noreplace)
                return renameat(dirfd, tmp, dirfd, name) == 0 ? 0 : -errno;
        if (renameat2(dirfd, tmp, dirfd, name, RENAME_NOREPLACE) == 0)
                return 0;
        if (errno != EINVAL && errno != ENOSYS)
                return -errno;
        /* File systems without RENAME_NOREPLACE: link() never replaces either. */
        if (linkat(dirfd, tmp, dirfd, name, 0) != 0)
                return -errno;
        unlinkat(dirfd, tmp, 0);
        return 0;
}

int mpi_pstate_safeio_write_atomic(int dirfd, const char *name, const void *data, size_t len,
                                   mode_t mode, int flags)
{
        const int noreplace = flags & MPI_PSTATE_SAFEIO_NOREPLACE,
                  sync = !(flags & MPI_PSTATE_SAFEIO_NOSYNC);
        static atomic_ulong seq;
        char tmp[NAME_MAX + 1];
        int fd = -1, rc, n;

        if (mpi_pstate_safeio_check_name(name, 128) != 0 || (!data && len))
                return -EINVAL;
        n = snprintf(tmp, sizeof(tmp), ".tmp.%s.%ld.%lu", name, (long)getpid(),
                     atomic_fetch_add(&seq, 1));
        if (n < 0 || (size_t)n >= sizeof(tmp))
                return -ENAMETOOLONG;
        fd = openat(dirfd, tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, mode);
        if (fd < 0)
                return -errno;
        rc = exact_mode(fd, mode);
        if (rc)
                goto fail;
        rc = write_all(fd, data, len);
        if (rc)
                goto fail;
        if (sync && fsync(fd) != 0) {
                rc = -errno;
                goto fail;
        }
        if (close(fd) != 0) {
                fd = -1;
                rc = -errno;
                goto fail;
        }
        fd = -1;
        rc = publish(dirfd, tmp, name, noreplace);
        if (rc)
                goto fail;
        /* The rename is durable only once the directory itself is synced. */
        if (sync)
                fsync(dirfd);
        return 0;
fail:
        if (fd >= 0)
                close(fd);
        unlinkat(dirfd, tmp, 0);
        return rc;
}

static int check_dir(int fd, int last)
{
        struct stat st;
        uid_t me = geteuid();

        if (fstat(fd, &st) != 0)
                return -errno;
        if (!S_ISDIR(st.st_mode))
                return -ENOTDIR;
        if (last)
                return st.st_uid == me && !(st.st_mode & (S_IWGRP | S_IWOTH)) ? 0 : -EPERM;
        if (st.st_uid != 0 && st.st_uid != me)
                return -EPERM;
        /* A directory others may write is safe to pass only if sticky (/tmp):
         * then nobody else can rename or remove what we own inside it. */
        if ((st.st_mode & (S_IWGRP | S_IWOTH)) && !(st.st_mode & S_ISVTX))
                return -EPERM;
        return 0;
}

/* Opens directory comp under fd, made with mode when create allows and it
 * is missing (*made says so).  A symlink in its place is -ELOOP. */
static int open_component(int fd, const char *comp, int create, mode_t mode, int *made)
{
        int nfd = openat(fd, comp, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        struct stat st;
        int rc;

        *made = 0;
        if (nfd < 0 && errno == ENOENT && create) {
                if (mkdirat(fd, comp, mode) == 0)
                        *made = 1;
                else if (errno != EEXIST)
                        return -errno;
                nfd = openat(fd, comp, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        }
        if (nfd >= 0)
                return nfd;
        rc = -errno;
        /* O_DIRECTORY reports a symlink as ENOTDIR: say what it is. */
        if (fstatat(fd, comp, &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISLNK(st.st_mode))
                rc = -ELOOP;
        return rc;
}

int mpi_pstate_safeio_open_dir(const char *path, int create, mode_t mode)
{
        char buf[PATH_MAX];
        char *save = NULL, *comp, *next;
        size_t len;
        int fd = -1, rc;

        if (!path || path[0] != '/')
                return -EINVAL;
        len = strlen(path);
        if (len >= sizeof(buf))
                return -ENAMETOOLONG;
        memcpy(buf, path, len + 1);
        fd = open("/", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (fd < 0)
                return -errno;
        comp = strtok_r(buf, "/", &save);
        rc = check_dir(fd, comp == NULL);
        if (rc)
                goto fail;
        while (comp) {
                int nfd, made;

                next = strtok_r(NULL, "/", &save);
                if (strcmp(comp, ".") == 0 || strcmp(comp, "..") == 0) {
                        rc = -EINVAL;
                        goto fail;
                }
                nfd = open_component(fd, comp, create, mode, &made);
                if (nfd < 0) {
                        rc = nfd;
                        goto fail;
                }
                close(fd);
                fd = nfd;
                if (made && (rc = exact_mode(fd, mode)) != 0)
                        goto fail;
                rc = check_dir(fd, next == NULL);
                if (rc)
                        goto fail;
                comp = next;
        }
        return fd;
fail:
        if (fd >= 0)
                close(fd);
        return rc;
}
