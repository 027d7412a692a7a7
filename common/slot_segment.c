/* SPDX-License-Identifier: BSD-3-Clause */
/* The slot segment's file and mappings (slot.h): the plugin creating it
 * whole and owned by the job's user, the agent and readers mapping it whole
 * and checked, a rank attaching to its own slot (claimed by pid, taken over
 * from a dead process), a segment of its own without an agent, and a
 * claimed slot's identity set up. */
#include "slot.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

static size_t segment_size(uint32_t nslots)
{
        return (size_t)MPI_PSTATE_SEG_HEADER_SIZE + (size_t)nslots * MPI_PSTATE_SLOT_SIZE;
}

static uint64_t realtime_ns(void)
{
        struct timespec ts;

        clock_gettime(CLOCK_REALTIME, &ts);
        return (uint64_t)ts.tv_sec * UINT64_C(1000000000) + (uint64_t)ts.tv_nsec;
}

static void header_init(struct mpi_pstate_seg_header *h, uint32_t nslots, uint32_t flags)
{
        memset(h, 0, sizeof(*h));
        h->magic = MPI_PSTATE_SEG_MAGIC;
        h->version = MPI_PSTATE_SLOT_VERSION;
        h->header_size = MPI_PSTATE_SEG_HEADER_SIZE;
        h->slot_size = MPI_PSTATE_SLOT_SIZE;
        h->nslots = nslots;
        h->creator_pid = (int32_t)getpid();
        h->flags = flags;
        h->created_ns = realtime_ns();
}

/* Validates a header copy read from an untrusted file of file_size bytes. */
static int header_check(const struct mpi_pstate_seg_header *h, off_t file_size)
{
        if (h->magic != MPI_PSTATE_SEG_MAGIC || h->version != MPI_PSTATE_SLOT_VERSION ||
            h->header_size != MPI_PSTATE_SEG_HEADER_SIZE || h->slot_size != MPI_PSTATE_SLOT_SIZE)
                return -EPROTO;
        if (h->nslots == 0 || h->nslots > MPI_PSTATE_SEG_MAX_SLOTS)
                return -EPROTO;
        if (file_size < 0 || (uint64_t)file_size != (uint64_t)segment_size(h->nslots))
                return -EPROTO;
        return 0;
}

static int pwrite_all(int fd, const void *buf, size_t len, off_t off)
{
        const char *p = buf;

        while (len) {
                ssize_t n = pwrite(fd, p, len, off);

                if (n < 0 && errno == EINTR)
                        continue;
                if (n <= 0)
                        return n < 0 ? -errno : -EIO;
                p += n;
                off += n;
                len -= (size_t)n;
        }
        return 0;
}

/* Opens an existing segment file and returns its fd with a validated copy of
 * the header; the caller closes the fd. */
static int open_checked(const char *path, int writable, uid_t owner,
                        struct mpi_pstate_seg_header *h)
{
        struct stat st;
        ssize_t n;
        int fd, rc;

        if (!path || !*path)
                return -EINVAL;
        /* O_NONBLOCK: a FIFO planted under the name must not hang the opener. */
        fd = open(path, (writable ? O_RDWR : O_RDONLY) | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK);
        if (fd < 0)
                return -errno;
        if (fstat(fd, &st) != 0) {
                rc = -errno;
                goto fail;
        }
        if (!S_ISREG(st.st_mode)) {
                rc = -EINVAL;
                goto fail;
        }
        if (owner != (uid_t)-1 && st.st_uid != owner) {
                rc = -EPERM;
                goto fail;
        }
        n = pread(fd, h, sizeof(*h), 0);
        if (n != (ssize_t)sizeof(*h)) {
                rc = n < 0 ? -errno : -EPROTO;
                goto fail;
        }
        rc = header_check(h, st.st_size);
        if (rc)
                goto fail;
        return fd;
fail:
        close(fd);
        return rc;
}

/* Every page of a new segment is allocated now, not at a rank's first
 * store: on a /dev/shm that another user has filled, the creation fails
 * with ENOSPC (the step is then unmeasured, and says why) where a sparse
 * file would raise SIGBUS in the rank.  Sets the size too. */
static int allocate(int fd, size_t len)
{
        int rc = posix_fallocate(fd, 0, (off_t)len);

        return rc ? -rc : 0;
}

int mpi_pstate_slot_create_segment(const char *path, uint32_t nslots, uid_t uid, gid_t gid)
{
        return mpi_pstate_slot_create_segment_stat(path, nslots, uid, gid, NULL);
}

int mpi_pstate_slot_create_segment_stat(const char *path, uint32_t nslots, uid_t uid, gid_t gid,
                                        struct stat *made)
{
        struct mpi_pstate_seg_header h;
        int fd, rc;

        if (!path || !*path || nslots == 0 || nslots > MPI_PSTATE_SEG_MAX_SLOTS)
                return -EINVAL;
        fd = open(path, O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
        if (fd < 0)
                return -errno;
        rc = allocate(fd, segment_size(nslots));
        if (rc)
                goto fail;
        header_init(&h, nslots, 0);
        rc = pwrite_all(fd, &h, sizeof(h), 0);
        if (rc)
                goto fail;
        if (uid != (uid_t)-1 && fchown(fd, uid, gid) != 0) {
                rc = -errno;
                goto fail;
        }
        if (made && fstat(fd, made) != 0) {
                rc = -errno;
                goto fail;
        }
        close(fd);
        return 0;
fail:
        close(fd);
        unlink(path);
        return rc;
}

int mpi_pstate_slot_map_segment_n(const char *path, int writable, uid_t owner, uint32_t nslots,
                                  struct mpi_pstate_segment *seg)
{
        struct mpi_pstate_seg_header h;
        void *base;
        int fd;

        if (!seg || nslots > MPI_PSTATE_SEG_MAX_SLOTS)
                return -EINVAL;
        fd = open_checked(path, writable, owner, &h);
        if (fd < 0)
                return fd;
        if (nslots && h.nslots != nslots) {
                close(fd);
                return -EPROTO;
        }
        base = mmap(NULL, segment_size(h.nslots), PROT_READ | (writable ? PROT_WRITE : 0),
                    MAP_SHARED, fd, 0);
        if (base == MAP_FAILED) {
                int rc = -errno;
                close(fd);
                return rc;
        }
        seg->fd = fd;
        seg->nslots = h.nslots; /* from the validated copy, never re-read from the mapping */
        seg->size = segment_size(h.nslots);
        seg->hdr = base;
        return 0;
}

void mpi_pstate_slot_unmap_segment(struct mpi_pstate_segment *seg)
{
        if (!seg || !seg->hdr)
                return;
        munmap(seg->hdr, seg->size);
        if (seg->fd >= 0)
                close(seg->fd);
        seg->hdr = NULL;
        seg->fd = -1;
}

struct mpi_pstate_slot *mpi_pstate_slot_at(const struct mpi_pstate_segment *seg, uint32_t i)
{
        if (!seg || !seg->hdr || i >= seg->nslots)
                return NULL;
        return (struct mpi_pstate_slot *)((char *)seg->hdr + MPI_PSTATE_SEG_HEADER_SIZE +
                                          (size_t)i * MPI_PSTATE_SLOT_SIZE);
}

/* Claims s for this process; see mpi_pstate_slot_attach. */
static int claim(struct mpi_pstate_slot *s)
{
        int32_t me = (int32_t)getpid(), seen = 0;

        if (atomic_compare_exchange_strong(&s->pid, &seen, me) || seen == me)
                return 0;
        /* EPERM means the process exists under another user: still busy. */
        if (kill((pid_t)seen, 0) == 0 || errno != ESRCH)
                return -EBUSY;
        return atomic_compare_exchange_strong(&s->pid, &seen, me) ? 0 : -EBUSY;
}

int mpi_pstate_slot_attach(const char *path, uint32_t index, struct mpi_pstate_attach *a)
{
        struct mpi_pstate_seg_header h;
        void *hdr = MAP_FAILED, *slot = MAP_FAILED;
        int fd, rc;

        if (!a)
                return -EINVAL;
        memset(a, 0, sizeof(*a));
        fd = open_checked(path, 1, (uid_t)-1, &h);
        if (fd < 0)
                return fd;
        if (index >= h.nslots) {
                rc = -ERANGE;
                goto fail;
        }
        /* Only the header page and this rank's own slot: a rank cannot
         * scribble over another rank's slot by accident. */
        hdr = mmap(NULL, MPI_PSTATE_SEG_HEADER_SIZE, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
        if (hdr == MAP_FAILED) {
                rc = -errno;
                goto fail;
        }
        slot = mmap(NULL, MPI_PSTATE_SLOT_SIZE, PROT_READ | PROT_WRITE, MAP_SHARED, fd,
                    (off_t)MPI_PSTATE_SEG_HEADER_SIZE + (off_t)index * MPI_PSTATE_SLOT_SIZE);
        if (slot == MAP_FAILED) {
                rc = -errno;
                goto fail;
        }
        rc = claim(slot);
        if (rc)
                goto fail;
        close(fd);
        a->hdr = hdr;
        a->slot = slot;
        a->hdr_len = MPI_PSTATE_SEG_HEADER_SIZE;
        a->slot_len = MPI_PSTATE_SLOT_SIZE;
        return 0;
fail:
        if (slot != MAP_FAILED)
                munmap(slot, MPI_PSTATE_SLOT_SIZE);
        if (hdr != MAP_FAILED)
                munmap(hdr, MPI_PSTATE_SEG_HEADER_SIZE);
        close(fd);
        return rc;
}

int mpi_pstate_slot_attach_private(const char *path, struct mpi_pstate_attach *a)
{
        const size_t len = segment_size(1);
        char *base;
        int fd = -1, rc;

        if (!a)
                return -EINVAL;
        memset(a, 0, sizeof(*a));
        if (path) {
                fd = open(path, O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
                if (fd < 0)
                        return -errno;
                rc = allocate(fd, len);
                if (rc)
                        goto fail;
                base = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
        } else {
                base = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
        }
        if (base == MAP_FAILED) {
                rc = -errno;
                goto fail;
        }
        header_init((struct mpi_pstate_seg_header *)base, 1, MPI_PSTATE_SEG_PRIVATE);
        if (fd >= 0)
                close(fd);
        a->hdr = (struct mpi_pstate_seg_header *)base;
        a->slot = (struct mpi_pstate_slot *)(base + MPI_PSTATE_SEG_HEADER_SIZE);
        a->hdr_len = MPI_PSTATE_SEG_HEADER_SIZE;
        a->slot_len = MPI_PSTATE_SLOT_SIZE;
        a->anonymous = 1;
        return claim(a->slot);
fail:
        if (fd >= 0) {
                close(fd);
                unlink(path);
        }
        return rc;
}

void mpi_pstate_slot_detach(struct mpi_pstate_attach *a)
{
        if (!a || !a->hdr)
                return;
        if (a->anonymous) {
                munmap(a->hdr, a->hdr_len + a->slot_len);
        } else {
                munmap(a->slot, a->slot_len);
                munmap(a->hdr, a->hdr_len);
        }
        memset(a, 0, sizeof(*a));
}

static bool names_match(const struct mpi_pstate_slot *s, const char *const *names, uint32_t n)
{
        if (s->magic != MPI_PSTATE_SLOT_MAGIC || s->version != MPI_PSTATE_SLOT_VERSION ||
            s->nfuncs != n)
                return false;
        for (uint32_t i = 0; i < n; i++)
                if (strncmp(s->fn[i].name, names[i] ? names[i] : "", MPI_PSTATE_SLOT_NAME_LEN))
                        return false;
        return true;
}

int mpi_pstate_slot_setup(struct mpi_pstate_slot *s, uint32_t index, const char *const *names,
                          uint32_t nfuncs)
{
        if (!s || !names || nfuncs > MPI_PSTATE_SLOT_MAX_FUNCS)
                return -EINVAL;
        if (!names_match(s, names, nfuncs)) {
                int32_t pid = atomic_load(&s->pid);

                memset(s, 0, sizeof(*s));
                atomic_store(&s->pid, pid);
                for (uint32_t i = 0; i < nfuncs; i++) {
                        size_t len = names[i] ? strlen(names[i]) : 0;

                        if (len < MPI_PSTATE_SLOT_NAME_LEN)
                                memcpy(s->fn[i].name, names[i], len);
                }
        }
        s->version = MPI_PSTATE_SLOT_VERSION;
        s->slot_size = MPI_PSTATE_SLOT_SIZE;
        s->rank = -1;
        s->size = 0;
        s->local_index = index;
        s->nfuncs = nfuncs;
        s->cpu = -1;
        s->start_ns = realtime_ns();
        s->app_end_ticks = 0;
        atomic_store(&s->wait_since, 0);
        atomic_store(&s->wait_cpu, -1);
        atomic_store(&s->state, MPI_PSTATE_SLOT_ATTACHED);
        /* Last: a reader that sees the magic sees a complete identity. */
        atomic_thread_fence(memory_order_release);
        s->magic = MPI_PSTATE_SLOT_MAGIC;
        return 0;
}
