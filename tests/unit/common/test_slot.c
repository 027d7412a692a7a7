/* SPDX-License-Identifier: BSD-3-Clause */
/* The slot segment of common/slot_segment.c and common/slot.c: creating,
 * mapping and attaching (hostile files, take-over, SIGKILL, a full
 * /dev/shm), the snapshot's validation, the wait protocol and its futex,
 * the clock, the totals, wait prediction and the MPI library's wait mode. */
#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/futex.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sched.h>
#include <sys/mman.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "slot.h"
#include "check_main.h"
#include "shortcuts.h"

static char dir[] = "/tmp/test_slot.XXXXXX";
static char seg_path[512];

static const char *const names3[] = {"MPI_Send", "MPI_Recv", "MPI_Barrier"};

static void setup_dir(void)
{
        ck_assert_ptr_nonnull(mkdtemp(dir));
        snprintf(seg_path, sizeof(seg_path), "%s/seg", dir);
}

static void teardown_dir(void)
{
        char cmd[600];

        snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
        ck_assert_int_eq(system(cmd), 0);
        strcpy(dir, "/tmp/test_slot.XXXXXX");
}

START_TEST(create_and_map)
{
        struct mpi_pstate_segment seg;
        struct stat st;

        ck_assert_int_eq(mpi_pstate_slot_create_segment(seg_path, 4, (uid_t)-1, (gid_t)-1), 0);
        ck_assert_int_eq(stat(seg_path, &st), 0);
        ck_assert_int_eq(st.st_size, 4096 + 4 * 16384);
        ck_assert_int_eq(st.st_mode & 0777, 0600);
        /* never over an existing file */
        ck_assert_int_eq(mpi_pstate_slot_create_segment(seg_path, 4, (uid_t)-1, (gid_t)-1),
                         -EEXIST);
        ck_assert_int_eq(mpi_pstate_slot_create_segment(seg_path, 0, (uid_t)-1, (gid_t)-1),
                         -EINVAL);
        ck_assert_int_eq(mpi_pstate_slot_map_segment(seg_path, 1, getuid(), &seg), 0);
        ck_assert_uint_eq(seg.nslots, 4);
        ck_assert_uint_eq(seg.hdr->magic, MPI_PSTATE_SEG_MAGIC);
        ck_assert_uint_eq(seg.hdr->creator_pid, getpid());
        ck_assert_ptr_nonnull(mpi_pstate_slot_at(&seg, 3));
        ck_assert_ptr_null(mpi_pstate_slot_at(&seg, 4));
        ck_assert_int_eq((char *)mpi_pstate_slot_at(&seg, 1) - (char *)seg.hdr, 4096 + 16384);
        mpi_pstate_slot_unmap_segment(&seg);
        ck_assert_int_eq(mpi_pstate_slot_map_segment(seg_path, 0, getuid() + 1, &seg), -EPERM);
}
END_TEST

/* nslots is the creator's: a header rewritten by the user between the
 * plugin's fchown and the agent's mapping is refused, never followed. */
START_TEST(map_with_the_creators_nslots)
{
        struct mpi_pstate_segment seg;
        struct stat made, now;
        uint32_t forged = 16384;
        int fd;

        ck_assert_int_eq(
            mpi_pstate_slot_create_segment_stat(seg_path, 2, (uid_t)-1, (gid_t)-1, &made), 0);
        ck_assert_int_eq(stat(seg_path, &now), 0);
        ck_assert_uint_eq(made.st_ino, now.st_ino);
        ck_assert_uint_eq(made.st_dev, now.st_dev);
        ck_assert_int_eq(made.st_size, 4096 + 2 * 16384);
        ck_assert_int_eq(mpi_pstate_slot_map_segment_n(seg_path, 1, (uid_t)-1, 2, &seg), 0);
        ck_assert_uint_eq(seg.nslots, 2);
        mpi_pstate_slot_unmap_segment(&seg);
        ck_assert_int_eq(mpi_pstate_slot_map_segment_n(seg_path, 1, (uid_t)-1, 3, &seg), -EPROTO);
        /* The user grows the file and rewrites nslots to match it. */
        fd = open(seg_path, O_RDWR);
        ck_assert_int_ge(fd, 0);
        ck_assert_int_eq(ftruncate(fd, (off_t)4096 + (off_t)forged * 16384), 0);
        ck_assert_int_eq(pwrite(fd, &forged, sizeof(forged), 20), (ssize_t)sizeof(forged));
        close(fd);
        ck_assert_int_eq(mpi_pstate_slot_map_segment_n(seg_path, 1, (uid_t)-1, 2, &seg), -EPROTO);
        ck_assert_int_eq(mpi_pstate_slot_map_segment_n(seg_path, 1, (uid_t)-1, 16385, &seg),
                         -EINVAL);
}
END_TEST

/* Everything a user could plant instead of a segment is refused. */
START_TEST(map_refuses_hostile_files)
{
        struct mpi_pstate_segment seg;
        char p[600];
        int fd;

        ck_assert_int_eq(mpi_pstate_slot_create_segment(seg_path, 2, (uid_t)-1, (gid_t)-1), 0);
        snprintf(p, sizeof(p), "%s/link", dir);
        ck_assert_int_eq(symlink(seg_path, p), 0);
        ck_assert_int_eq(mpi_pstate_slot_map_segment(p, 0, (uid_t)-1, &seg), -ELOOP);
        ck_assert_int_eq(mpi_pstate_slot_create_segment(p, 1, (uid_t)-1, (gid_t)-1), -EEXIST);

        snprintf(p, sizeof(p), "%s/fifo", dir);
        ck_assert_int_eq(mkfifo(p, 0600), 0);
        ck_assert_int_eq(mpi_pstate_slot_map_segment(p, 0, (uid_t)-1, &seg), -EINVAL);

        /* truncated: header says 2 slots, file holds 1 */
        ck_assert_int_eq(truncate(seg_path, 4096 + 16384), 0);
        ck_assert_int_eq(mpi_pstate_slot_map_segment(seg_path, 0, (uid_t)-1, &seg), -EPROTO);
        ck_assert_int_eq(truncate(seg_path, 4096 + 2 * 16384), 0);
        ck_assert_int_eq(mpi_pstate_slot_map_segment(seg_path, 0, (uid_t)-1, &seg), 0);
        mpi_pstate_slot_unmap_segment(&seg);

        /* wrong version, then absurd slot count */
        fd = open(seg_path, O_RDWR);
        ck_assert_int_ge(fd, 0);
        uint32_t v = 99;
        ck_assert_int_eq(pwrite(fd, &v, 4, 8), 4);
        ck_assert_int_eq(mpi_pstate_slot_map_segment(seg_path, 0, (uid_t)-1, &seg), -EPROTO);
        v = MPI_PSTATE_SLOT_VERSION;
        ck_assert_int_eq(pwrite(fd, &v, 4, 8), 4);
        v = 0xffffffffu;
        ck_assert_int_eq(pwrite(fd, &v, 4, 20), 4);
        ck_assert_int_eq(mpi_pstate_slot_map_segment(seg_path, 0, (uid_t)-1, &seg), -EPROTO);
        close(fd);

        snprintf(p, sizeof(p), "%s/short", dir);
        fd = open(p, O_CREAT | O_WRONLY, 0600);
        ck_assert_int_eq(write(fd, "mpstseg1", 8), 8);
        close(fd);
        ck_assert_int_eq(mpi_pstate_slot_map_segment(p, 0, (uid_t)-1, &seg), -EPROTO);
        ck_assert_int_eq(mpi_pstate_slot_map_segment(dir, 0, (uid_t)-1, &seg), -EINVAL);
}
END_TEST

START_TEST(attach_claims_and_sets_up)
{
        struct mpi_pstate_attach a, b;
        struct mpi_pstate_segment seg;

        ck_assert_int_eq(mpi_pstate_slot_create_segment(seg_path, 2, (uid_t)-1, (gid_t)-1), 0);
        ck_assert_int_eq(mpi_pstate_slot_attach(seg_path, 2, &a), -ERANGE);
        ck_assert_int_eq(mpi_pstate_slot_attach(seg_path, 1, &a), 0);
        ck_assert_int_eq(atomic_load(&a.slot->pid), getpid());
        ck_assert_int_eq(mpi_pstate_slot_setup(a.slot, 1, names3, 3), 0);
        ck_assert_str_eq(a.slot->fn[2].name, "MPI_Barrier");
        ck_assert_int_eq(a.slot->rank, -1);
        atomic_store(&a.slot->fn[0].calls, 5);

        /* the agent's view of the same slot */
        ck_assert_int_eq(mpi_pstate_slot_map_segment(seg_path, 1, (uid_t)-1, &seg), 0);
        struct mpi_pstate_slot *s = mpi_pstate_slot_at(&seg, 1);
        ck_assert_uint_eq(atomic_load(&s->fn[0].calls), 5);
        ck_assert_uint_eq(s->local_index, 1);
        ck_assert_uint_eq(s->magic, MPI_PSTATE_SLOT_MAGIC);
        ck_assert_uint_eq(mpi_pstate_slot_at(&seg, 0)->magic, 0);

        /* same names: counters kept; other names: zeroed */
        ck_assert_int_eq(mpi_pstate_slot_setup(a.slot, 1, names3, 3), 0);
        ck_assert_uint_eq(atomic_load(&s->fn[0].calls), 5);
        ck_assert_int_eq(mpi_pstate_slot_setup(a.slot, 1, names3, 2), 0);
        ck_assert_uint_eq(atomic_load(&s->fn[0].calls), 0);
        ck_assert_str_eq(s->fn[2].name, "");
        ck_assert_int_eq(atomic_load(&s->pid), getpid());
        ck_assert_int_eq(mpi_pstate_slot_setup(a.slot, 1, names3, 129), -EINVAL);

        /* the same process may attach again */
        ck_assert_int_eq(mpi_pstate_slot_attach(seg_path, 1, &b), 0);
        mpi_pstate_slot_detach(&b);
        mpi_pstate_slot_detach(&a);
        ck_assert_ptr_null(a.slot);
        mpi_pstate_slot_unmap_segment(&seg);
}
END_TEST

/* A slot held by a live process is busy; one left by a dead process is
 * taken over with its counters. */
START_TEST(attach_busy_and_takeover)
{
        struct mpi_pstate_attach a;
        int pipefd[2], st;
        char c;

        ck_assert_int_eq(mpi_pstate_slot_create_segment(seg_path, 1, (uid_t)-1, (gid_t)-1), 0);
        ck_assert_int_eq(pipe(pipefd), 0);
        pid_t child = fork();
        ck_assert_int_ge(child, 0);
        if (child == 0) {
                if (mpi_pstate_slot_attach(seg_path, 0, &a) != 0)
                        _exit(1);
                mpi_pstate_slot_setup(a.slot, 0, names3, 3);
                atomic_store(&a.slot->fn[1].calls, 7);
                if (write(pipefd[1], "x", 1) != 1)
                        _exit(2);
                pause();
                _exit(0);
        }
        ck_assert_int_eq(read(pipefd[0], &c, 1), 1);
        ck_assert_int_eq(mpi_pstate_slot_attach(seg_path, 0, &a), -EBUSY);
        kill(child, SIGKILL);
        ck_assert_int_eq(waitpid(child, &st, 0), child);
        ck_assert_int_eq(mpi_pstate_slot_attach(seg_path, 0, &a), 0);
        ck_assert_int_eq(atomic_load(&a.slot->pid), getpid());
        ck_assert_int_eq(mpi_pstate_slot_setup(a.slot, 0, names3, 3), 0);
        ck_assert_uint_eq(atomic_load(&a.slot->fn[1].calls), 7);
        mpi_pstate_slot_detach(&a);
        close(pipefd[0]);
        close(pipefd[1]);
}
END_TEST

/* Counters live in the file: a rank killed with SIGKILL leaves them all. */
START_TEST(survives_sigkill)
{
        struct mpi_pstate_segment seg;
        struct mpi_pstate_slot copy;
        int st;

        ck_assert_int_eq(mpi_pstate_slot_create_segment(seg_path, 2, (uid_t)-1, (gid_t)-1), 0);
        pid_t child = fork();
        ck_assert_int_ge(child, 0);
        if (child == 0) {
                struct mpi_pstate_attach a;

                if (mpi_pstate_slot_attach(seg_path, 1, &a) != 0)
                        _exit(1);
                mpi_pstate_slot_setup(a.slot, 1, names3, 3);
                for (int i = 0; i < 1000; i++) {
                        atomic_fetch_add(&a.slot->fn[2].calls, 1);
                        atomic_fetch_add(&a.slot->hist_ns[mpi_pstate_slot_bucket(i)], 1);
                }
                mpi_pstate_slot_wait_begin(a.slot, 2, 12345);
                raise(SIGKILL);
                _exit(3);
        }
        ck_assert_int_eq(waitpid(child, &st, 0), child);
        ck_assert(WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL);
        ck_assert_int_eq(mpi_pstate_slot_map_segment(seg_path, 0, (uid_t)-1, &seg), 0);
        ck_assert_int_eq(mpi_pstate_slot_snapshot(mpi_pstate_slot_at(&seg, 1), &copy), 0);
        ck_assert_uint_eq(atomic_load(&copy.fn[2].calls), 1000);
        ck_assert_int_eq(atomic_load(&copy.pid), child);
        ck_assert_uint_eq(atomic_load(&copy.wait_since), 12345); /* died waiting: visible */
        ck_assert_uint_eq(atomic_load(&copy.hist_ns[10]), 1000 - 512);
        ck_assert_int_eq(mpi_pstate_slot_snapshot(mpi_pstate_slot_at(&seg, 0), &copy), -ENOENT);
        mpi_pstate_slot_unmap_segment(&seg);
}
END_TEST

START_TEST(snapshot_validates)
{
        struct mpi_pstate_attach a;
        struct mpi_pstate_slot *copy = malloc(sizeof(*copy));

        ck_assert_int_eq(mpi_pstate_slot_attach_private(NULL, &a), 0);
        ck_assert_int_eq(mpi_pstate_slot_snapshot(a.slot, copy), -ENOENT);
        ck_assert_int_eq(mpi_pstate_slot_setup(a.slot, 0, names3, 3), 0);
        ck_assert_int_eq(mpi_pstate_slot_snapshot(a.slot, copy), 0);
        ck_assert_str_eq(copy->fn[0].name, "MPI_Send");

        memset(a.slot->fn[5].name, 'A', MPI_PSTATE_SLOT_NAME_LEN); /* unterminated */
        ck_assert_int_eq(mpi_pstate_slot_snapshot(a.slot, copy), -EPROTO);
        a.slot->fn[5].name[31] = '\0';
        ck_assert_int_eq(mpi_pstate_slot_snapshot(a.slot, copy), 0);
        a.slot->nfuncs = 500;
        ck_assert_int_eq(mpi_pstate_slot_snapshot(a.slot, copy), -EPROTO);
        a.slot->nfuncs = 3;
        atomic_store(&a.slot->state, 77);
        ck_assert_int_eq(mpi_pstate_slot_snapshot(a.slot, copy), -EPROTO);
        atomic_store(&a.slot->state, MPI_PSTATE_SLOT_RUNNING);
        a.slot->version = MPI_PSTATE_SLOT_VERSION + 1;
        ck_assert_int_eq(mpi_pstate_slot_snapshot(a.slot, copy), -EPROTO);
        a.slot->version = 1; /* no wait_cpu yet: refused too */
        ck_assert_int_eq(mpi_pstate_slot_snapshot(a.slot, copy), -EPROTO);
        a.slot->version = MPI_PSTATE_SLOT_VERSION;
        a.slot->clock = 9;
        ck_assert_int_eq(mpi_pstate_slot_snapshot(a.slot, copy), -EPROTO);
        mpi_pstate_slot_detach(&a);
        free(copy);
}
END_TEST

START_TEST(private_file_segment)
{
        struct mpi_pstate_attach a;
        struct mpi_pstate_segment seg;
        struct stat st;

        ck_assert_int_eq(mpi_pstate_slot_attach_private(seg_path, &a), 0);
        ck_assert_int_eq(stat(seg_path, &st), 0);
        ck_assert_int_eq(st.st_size, 4096 + 16384);
        ck_assert_int_eq(st.st_mode & 0777, 0600);
        ck_assert_uint_eq(a.hdr->flags & MPI_PSTATE_SEG_PRIVATE, MPI_PSTATE_SEG_PRIVATE);
        mpi_pstate_slot_setup(a.slot, 0, names3, 3);
        atomic_store(&a.slot->fn[0].bytes, 42);
        ck_assert_int_eq(mpi_pstate_slot_map_segment(seg_path, 0, (uid_t)-1, &seg), 0);
        ck_assert_uint_eq(atomic_load(&mpi_pstate_slot_at(&seg, 0)->fn[0].bytes), 42);
        mpi_pstate_slot_unmap_segment(&seg);
        mpi_pstate_slot_detach(&a);
        ck_assert_int_eq(mpi_pstate_slot_attach_private(seg_path, &a), -EEXIST);
}
END_TEST

START_TEST(wait_protocol)
{
        struct mpi_pstate_attach a;

        ck_assert_int_eq(mpi_pstate_slot_attach_private(NULL, &a), 0);
        struct mpi_pstate_slot *s = a.slot;

        mpi_pstate_slot_wait_begin_cpu(s, 2, 1000, 5);
        ck_assert_uint_eq(atomic_load(&s->wait_fn), 2);
        ck_assert_int_eq(atomic_load(&s->wait_cpu), 5);
        ck_assert_uint_eq(atomic_load(&s->wait_since), 1000);
        /* the agent only lowers for the wait it saw */
        ck_assert_int_eq(mpi_pstate_slot_agent_lower(s, 999), 0);
        ck_assert_uint_eq(atomic_load(&s->clocked_down), 0);
        ck_assert_int_eq(mpi_pstate_slot_agent_lower(s, 1000), 1);
        ck_assert_uint_eq(atomic_load(&s->clocked_down), 1);
        ck_assert_int_eq(mpi_pstate_slot_agent_still_waiting(s, 1000), 1);
        /* a long call ending while clocked down asks for the wake */
        ck_assert_int_eq(mpi_pstate_slot_wait_end(s, 1000, 1600, 500), 1);
        ck_assert_uint_eq(atomic_load(&s->wait_since), 0);
        ck_assert_int_eq(mpi_pstate_slot_agent_still_waiting(s, 1000), 0);
        mpi_pstate_slot_agent_raise(s, 77);
        ck_assert_uint_eq(atomic_load(&s->clocked_down), 0);
        ck_assert_uint_eq(atomic_load(&s->down_ns), 77);
        ck_assert_uint_eq(atomic_load(&s->transitions), 1);
        /* a short call never fences or wakes, even with the flag set */
        mpi_pstate_slot_wait_begin(s, 1, 2000);
        ck_assert_int_eq(atomic_load(&s->wait_cpu), -1);
        atomic_store(&s->clocked_down, 1);
        ck_assert_int_eq(mpi_pstate_slot_wait_end(s, 2000, 2100, 500), 0);
        /* a long call without the flag: no wake either */
        atomic_store(&s->clocked_down, 0);
        mpi_pstate_slot_wait_begin(s, 1, 3000);
        ck_assert_int_eq(mpi_pstate_slot_wait_end(s, 3000, 9000, 500), 0);
        /* threshold 0: every call checks */
        atomic_store(&s->clocked_down, 1);
        mpi_pstate_slot_wait_begin(s, 1, 3000);
        ck_assert_int_eq(mpi_pstate_slot_wait_end(s, 3000, 3000, 0), 1);
        ck_assert_int_eq(mpi_pstate_slot_agent_lower(s, 0), 0);
        mpi_pstate_slot_detach(&a);
}
END_TEST

struct waiter {
        struct mpi_pstate_seg_header *hdr;
        uint32_t seen;
        int woken;
};

static void *agent_thread(void *p)
{
        struct waiter *w = p;
        struct timespec to = {.tv_sec = 5};
        long rc = syscall(SYS_futex, &w->hdr->agent_futex, FUTEX_WAIT, w->seen, &to, NULL, 0);

        w->woken = (rc == 0 || errno == EAGAIN) ? 1 : -1;
        return NULL;
}

/* The agent sleeping on the header futex of a file segment is woken by a
 * rank in another mapping of the same file. */
START_TEST(futex_wakes_agent)
{
        struct mpi_pstate_segment seg;
        struct mpi_pstate_attach a;
        struct waiter w;
        pthread_t th;

        ck_assert_int_eq(mpi_pstate_slot_create_segment(seg_path, 1, (uid_t)-1, (gid_t)-1), 0);
        ck_assert_int_eq(mpi_pstate_slot_map_segment(seg_path, 1, (uid_t)-1, &seg), 0);
        ck_assert_int_eq(mpi_pstate_slot_attach(seg_path, 0, &a), 0);
        w.hdr = seg.hdr;
        w.seen = atomic_load(&seg.hdr->agent_futex);
        w.woken = 0;
        ck_assert_int_eq(pthread_create(&th, NULL, agent_thread, &w), 0);
        usleep(100000);
        mpi_pstate_slot_wake_agent(a.hdr, a.slot);
        ck_assert_int_eq(pthread_join(th, NULL), 0);
        ck_assert_int_eq(w.woken, 1);
        ck_assert_uint_eq(atomic_load(&seg.hdr->agent_futex), w.seen + 1);
        ck_assert_uint_eq(atomic_load(&seg.hdr->wakeups), 1);
        ck_assert_uint_eq(atomic_load(&a.slot->wakeups), 1);
        mpi_pstate_slot_detach(&a);
        mpi_pstate_slot_unmap_segment(&seg);
}
END_TEST

START_TEST(clock_and_buckets)
{
        enum mpi_pstate_clock c = MPI_PSTATE_CLOCK_NONE;
        struct mpi_pstate_clock_sample s;

        ck_assert_int_eq(mpi_pstate_slot_clock_choose("sundial", &c), -EINVAL);
        ck_assert_int_eq(mpi_pstate_slot_clock_choose("monotonic", &c), 0);
        ck_assert_int_eq(c, MPI_PSTATE_CLOCK_MONOTONIC);
        mpi_pstate_slot_clock_sample(c, &s);
        ck_assert_uint_eq(mpi_pstate_slot_clock_rate(c, &s, 1000), 1000000000u);
        ck_assert_int_eq(mpi_pstate_slot_clock_choose(NULL, &c), 0);
        ck_assert(c == MPI_PSTATE_CLOCK_TSC || c == MPI_PSTATE_CLOCK_MONOTONIC);
#if defined(__aarch64__)
        /* the rate is cntfrq_el0's, exactly, at once */
        uint64_t frq;

        __asm__ volatile("mrs %0, cntfrq_el0" : "=r"(frq));
        ck_assert_int_eq(mpi_pstate_slot_clock_choose("tsc", &c), 0);
        mpi_pstate_slot_clock_sample(c, &s);
        ck_assert_uint_ne(frq, 0);
        ck_assert_uint_eq(mpi_pstate_slot_clock_rate(c, &s, 2000000), frq);
#endif
#if defined(MPI_PSTATE_HAVE_COUNTER)
        ck_assert_int_eq(mpi_pstate_slot_clock_choose("tsc", &c), 0);
        mpi_pstate_slot_clock_sample(c, &s);
        uint64_t hz = mpi_pstate_slot_clock_rate(c, &s, 2000000);
        ck_assert_uint_gt(hz, 1000000u); /* aarch64: 1 GHz on Armv8.6+, tens of MHz before */
        ck_assert_uint_lt(hz, 10000000000u);
        uint64_t t0 = mpi_pstate_slot_now(c);
        usleep(20000);
        double ms = (double)(mpi_pstate_slot_now(c) - t0) * 1e3 / (double)hz;
        ck_assert(ms > 19.0 && ms < 200.0);
#endif
        ck_assert_uint_eq(mpi_pstate_slot_bucket(0), 0);
        ck_assert_uint_eq(mpi_pstate_slot_bucket(1), 1);
        ck_assert_uint_eq(mpi_pstate_slot_bucket(2), 2);
        ck_assert_uint_eq(mpi_pstate_slot_bucket(3), 2);
        ck_assert_uint_eq(mpi_pstate_slot_bucket(4), 3);
        ck_assert_uint_eq(mpi_pstate_slot_bucket(1023), 10);
        ck_assert_uint_eq(mpi_pstate_slot_bucket(1024), 11);
        ck_assert_uint_eq(mpi_pstate_slot_bucket(UINT64_MAX), 63);
}
END_TEST

/* A full /dev/shm fails the creation, never a rank's first store: in a
 * mount namespace of its own (root only), a 1 MiB tmpfs filled to leave a
 * dozen pages takes a 1-slot segment and refuses a 64-slot one (1 MiB) with
 * ENOSPC, leaving no file; a sparse segment would have been made, and its
 * first store past the free pages would have raised SIGBUS. */
static int full_tmpfs_child(void)
{
        char mnt[] = "/tmp/test_slot_full.XXXXXX", path[128];
        struct stat st;
        int fd, rc = 77;

        if (unshare(CLONE_NEWNS) != 0 || mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) != 0 ||
            !mkdtemp(mnt))
                return 77;
        if (mount("tmpfs", mnt, "tmpfs", 0, "size=1m") != 0)
                goto out;
        snprintf(path, sizeof(path), "%s/hog", mnt);
        fd = open(path, O_RDWR | O_CREAT | O_EXCL, 0600);
        rc = 1;
        if (fd < 0 || posix_fallocate(fd, 0, (1 << 20) - 12 * 4096) != 0)
                goto out;
        snprintf(path, sizeof(path), "%s/seg1", mnt);
        rc = 2;
        if (mpi_pstate_slot_create_segment(path, 1, (uid_t)-1, (gid_t)-1) != 0)
                goto out;
        snprintf(path, sizeof(path), "%s/seg64", mnt);
        rc = 3;
        if (mpi_pstate_slot_create_segment(path, 64, (uid_t)-1, (gid_t)-1) != -ENOSPC)
                goto out;
        rc = stat(path, &st) == 0 || errno != ENOENT ? 4 : 0;
out:
        umount2(mnt, MNT_DETACH);
        rmdir(mnt);
        return rc;
}

START_TEST(full_shm_fails_creation_not_a_rank)
{
        pid_t pid;
        int st;

        if (geteuid() != 0) {
                fprintf(stderr, "full_shm_fails_creation_not_a_rank: not root, not run\n");
                return;
        }
        pid = fork();
        ck_assert_int_ge(pid, 0);
        if (pid == 0)
                _exit(full_tmpfs_child());
        ck_assert_int_eq(waitpid(pid, &st, 0), pid);
        ck_assert(WIFEXITED(st));
        if (WEXITSTATUS(st) == 77) {
                fprintf(stderr, "full_shm_fails_creation_not_a_rank: no mount namespace here\n");
                return;
        }
        /* 1: could not fill; 2: the small one failed; 3: the big one made; 4: left a file */
        ck_assert_int_eq(WEXITSTATUS(st), 0);
}
END_TEST

/* The reduction a node Epilog takes for a step it does not detail: life
 * cycle out, bad names out, a repeated name counted once (its last entry),
 * garbage past ten years absent, never wrapped. */
START_TEST(totals_reduce_like_the_epilog)
{
        static struct mpi_pstate_slot s;
        struct mpi_pstate_slot_totals t;
        static const char *const names[] = {"MPI_Init", "MPI_Send",     "MPI_Send",
                                            "9bad",     "MPI_Finalize", "MPI_Recv"};
        static const uint64_t ns[] = {7000, 100, 200, 400, 9000, 30};

        memset(&s, 0, sizeof(s));
        s.nfuncs = 6;
        for (unsigned i = 0; i < 6; i++) {
                strcpy(s.fn[i].name, names[i]);
                atomic_store(&s.fn[i].time_ns, ns[i]);
        }
        s.ticks_per_sec = 2000000000u; /* 2 GHz: 5e9 ticks are 2.5 s */
        s.app_start_ticks = 1000;
        s.app_end_ticks = 1000 + UINT64_C(5000000000);
        atomic_store(&s.long_ns, 123);
        mpi_pstate_slot_totals(&s, &t);
        ck_assert(t.has_wall && t.has_mpi && t.has_wait);
        ck_assert_uint_eq(t.wall_ns, UINT64_C(2500000000));
        ck_assert_uint_eq(t.mpi_ns, 230); /* the second MPI_Send, MPI_Recv */
        ck_assert_uint_eq(t.wait_ns, 123);

        s.app_end_ticks = 0; /* killed before its end */
        atomic_store(&s.fn[5].time_ns, UINT64_MAX);
        atomic_store(&s.fn[2].time_ns, UINT64_MAX); /* the sum would wrap in 64 bits */
        atomic_store(&s.long_ns, MPI_PSTATE_SLOT_NS_MAX + 1);
        mpi_pstate_slot_totals(&s, &t);
        ck_assert(!t.has_wall && !t.has_mpi && !t.has_wait);
        ck_assert_uint_eq(t.mpi_ns + t.wall_ns + t.wait_ns, 0);
}
END_TEST

/* Wait prediction (a wait announced as long is lowered at its deadline,
 * not at the next scan): long from the first long wait at a site until
 * two short ones in a row; an announced wait sets its slot's bit, counts
 * and bumps the futex; a short one announced is counted as such; no
 * header, no announcement. */
START_TEST(prediction_announces_waits_predicted_long)
{
        static struct mpi_pstate_seg_header hdr;
        static struct mpi_pstate_slot s;
        struct mpi_pstate_pred p = {0};
        unsigned site = mpi_pstate_pred_site((uintptr_t)&p), other = (site + 1) % 256;
        const uint32_t idx = 70;

        ck_assert_uint_lt(site, MPI_PSTATE_PRED_SITES);
        s.local_index = idx;
        mpi_pstate_pred_begin(&p, site, &hdr, &s, 0);
        ck_assert(!p.announced);
        mpi_pstate_pred_end(&p, &s, true);
        mpi_pstate_pred_begin(&p, site, &hdr, &s, 0);
        ck_assert(p.announced);
        ck_assert_uint_eq(atomic_load(&hdr.announce[1]), UINT64_C(1) << 6);
        ck_assert_uint_eq(atomic_load(&s.announced), 1);
        ck_assert_uint_eq(atomic_load(&hdr.agent_futex), 0); /* agent_wake_ns 0: awake */
        mpi_pstate_pred_end(&p, &s, false);                  /* mispredicted */
        ck_assert_uint_eq(atomic_load(&s.announced_short), 1);
        mpi_pstate_pred_begin(&p, other, &hdr, &s, 0); /* another site: its own history */
        ck_assert(!p.announced);
        mpi_pstate_pred_end(&p, &s, false);
        mpi_pstate_pred_begin(&p, site, &hdr, &s, 0); /* one short: still long */
        ck_assert(p.announced);
        mpi_pstate_pred_end(&p, &s, false);
        mpi_pstate_pred_begin(&p, site, &hdr, &s, 0); /* two short: not any more */
        ck_assert(!p.announced);
        mpi_pstate_pred_end(&p, &s, true);
        mpi_pstate_pred_begin(&p, site, NULL, &s, 0); /* nobody to announce to */
        ck_assert(!p.announced);
        ck_assert_uint_eq(atomic_load(&s.announced), 2);
        ck_assert_uint_eq(atomic_load(&s.announced_short), 2);
        s.local_index = MPI_PSTATE_SEG_MAX_SLOTS; /* out of the map */
        mpi_pstate_slot_announce(&hdr, &s, 0);
        ck_assert_uint_eq(atomic_load(&s.announced), 2);
        s.local_index = idx;
        /* an agent asleep until after the deadline is woken */
        atomic_store(&hdr.agent_wake_ns, UINT64_MAX);
        ck_assert(mpi_pstate_slot_announce(&hdr, &s, 0));
        ck_assert_uint_eq(atomic_load(&hdr.agent_futex), 1);
        /* one asleep until before it is not */
        atomic_store(&hdr.agent_wake_ns, 1);
        ck_assert(mpi_pstate_slot_announce(&hdr, &s, 0));
        ck_assert_uint_eq(atomic_load(&hdr.agent_futex), 1);
        /* the agent asked for none */
        atomic_store(&hdr.announce_off, 1);
        ck_assert(!mpi_pstate_slot_announce(&hdr, &s, 0));
        ck_assert_uint_eq(atomic_load(&s.announced), 4);
}
END_TEST

/* The wait mode from the rank's environment: each library's own variables
 * only, boolean spellings beyond atoi's (enable, yes, on, true), garbage as
 * unknown rather than a guess, the first definition of a name as getenv
 * finds it, and the MPICH device named in the library's version string. */
START_TEST(wait_mode_from_the_environment)
{
        static const char ompi[] = "Open MPI v4.1.4, package: Debian OpenMPI";
        static const char ch4[] = "MPICH Version:\t4.0.2\nMPICH Device:\tch4:ucx";
        static const char ch3[] = "MPICH Version:\t3.3\nMPICH Device:\tch3:nemesis";
        static const char ch4v5[] = "MPICH Version:      5.0.2\nMPICH Device:\tch4:ofi";
        static const char ch4v10[] = "MPICH Version:\t10.1\nMPICH Device:\tch4:ucx";
        static const char ch4bad[] = "MPICH Version:\t5x.0\nMPICH Device:\tch4:ucx";
        static const char impi[] = "Intel(R) MPI Library 2021.10 for Linux* OS";
        static const char mv2[] = "MVAPICH2 Version      :\t2.3.7";
        static const struct {
                uint32_t abi;
                const char *library;
                const char *env[4];
                enum mpi_pstate_wait_mode want;
        } cases[] = {
            /* Open MPI */
            {1, ompi, {NULL}, MPI_PSTATE_WAIT_POLL},
            {1, ompi, {"OMPI_MCA_mpi_yield_when_idle=1"}, MPI_PSTATE_WAIT_YIELD},
            {1, ompi, {"OMPI_MCA_mpi_yield_when_idle=true"}, MPI_PSTATE_WAIT_YIELD},
            {1, ompi, {"OMPI_MCA_mpi_yield_when_idle=Enabled"}, MPI_PSTATE_WAIT_YIELD},
            {1, ompi, {"OMPI_MCA_mpi_yield_when_idle=0"}, MPI_PSTATE_WAIT_POLL},
            {1, ompi, {"OMPI_MCA_mpi_yield_when_idle=no"}, MPI_PSTATE_WAIT_POLL},
            {1, ompi, {"OMPI_MCA_mpi_yield_when_idle=2"}, MPI_PSTATE_WAIT_UNKNOWN},
            {1, ompi, {"OMPI_MCA_mpi_yield_when_idle="}, MPI_PSTATE_WAIT_UNKNOWN},
            {1, ompi, {"OMPI_MCA_mpi_yield_when_idle= 1"}, MPI_PSTATE_WAIT_UNKNOWN},
            {1, NULL, {"OMPI_MCA_mpi_oversubscribe=1"}, MPI_PSTATE_WAIT_YIELD},
            {1,
             ompi,
             {"OMPI_MCA_mpi_oversubscribe=1", "OMPI_MCA_mpi_yield_when_idle=0"},
             MPI_PSTATE_WAIT_YIELD},
            {1, ompi, {"OMPI_MCA_mpi_oversubscribe=0"}, MPI_PSTATE_WAIT_POLL},
            /* a name that only begins like one, and the first of two */
            {1, ompi, {"OMPI_MCA_mpi_yield_when_idle_x=1"}, MPI_PSTATE_WAIT_POLL},
            {1,
             ompi,
             {"OMPI_MCA_mpi_yield_when_idle=1", "OMPI_MCA_mpi_yield_when_idle=0"},
             MPI_PSTATE_WAIT_YIELD},
            /* another library's variable says nothing of this one */
            {1, ompi, {"MV2_USE_BLOCKING=1", "I_MPI_THREAD_YIELD=3"}, MPI_PSTATE_WAIT_POLL},
            /* MPICH ch3: polls before a yield, 0 never; CVAR over PARAM over MPICH_ */
            {2, ch3, {NULL}, MPI_PSTATE_WAIT_POLL},
            {2, ch3, {"MPIR_CVAR_POLLS_BEFORE_YIELD=1000"}, MPI_PSTATE_WAIT_YIELD},
            {2, ch3, {"MPICH_POLLS_BEFORE_YIELD=10"}, MPI_PSTATE_WAIT_YIELD},
            {2, ch3, {"MPIR_PARAM_POLLS_BEFORE_YIELD=0"}, MPI_PSTATE_WAIT_POLL},
            {2,
             ch3,
             {"MPICH_POLLS_BEFORE_YIELD=10", "MPIR_CVAR_POLLS_BEFORE_YIELD=0"},
             MPI_PSTATE_WAIT_POLL},
            {2, ch3, {"MPIR_CVAR_POLLS_BEFORE_YIELD=-1"}, MPI_PSTATE_WAIT_UNKNOWN},
            {2, ch3, {"MPIR_CVAR_POLLS_BEFORE_YIELD=lots"}, MPI_PSTATE_WAIT_UNKNOWN},
            {2, NULL, {"MPIR_CVAR_POLLS_BEFORE_YIELD=5"}, MPI_PSTATE_WAIT_YIELD},
            /* ch4 has no such variable */
            {2, ch4, {"MPIR_CVAR_POLLS_BEFORE_YIELD=1000"}, MPI_PSTATE_WAIT_POLL},
            {2, ch4, {"OMPI_MCA_mpi_yield_when_idle=1"}, MPI_PSTATE_WAIT_POLL},
            /* from 5.0 ch4 yields all through a wait, whatever is set */
            {2, ch4v5, {NULL}, MPI_PSTATE_WAIT_YIELD},
            {2, ch4v5, {"MPIR_CVAR_POLLS_BEFORE_YIELD=0"}, MPI_PSTATE_WAIT_YIELD},
            {2, ch4v10, {NULL}, MPI_PSTATE_WAIT_YIELD},
            {2, ch4bad, {NULL}, MPI_PSTATE_WAIT_POLL},
            /* MVAPICH2 */
            {2, mv2, {NULL}, MPI_PSTATE_WAIT_POLL},
            {2, mv2, {"MV2_USE_BLOCKING=1"}, MPI_PSTATE_WAIT_SLEEP},
            {2, mv2, {"MV2_USE_BLOCKING=yes"}, MPI_PSTATE_WAIT_SLEEP},
            {2, mv2, {"MV2_USE_BLOCKING=0"}, MPI_PSTATE_WAIT_POLL},
            {2, mv2, {"MV2_USE_BLOCKING=maybe"}, MPI_PSTATE_WAIT_UNKNOWN},
            /* Intel MPI: enable is on (atoi would say 0), THREAD_YIELD decides */
            {2, impi, {NULL}, MPI_PSTATE_WAIT_POLL},
            {2, impi, {"I_MPI_WAIT_MODE=enable"}, MPI_PSTATE_WAIT_YIELD},
            {2, impi, {"I_MPI_WAIT_MODE=on"}, MPI_PSTATE_WAIT_YIELD},
            {2, impi, {"I_MPI_WAIT_MODE=1"}, MPI_PSTATE_WAIT_YIELD},
            {2, impi, {"I_MPI_WAIT_MODE=disable"}, MPI_PSTATE_WAIT_POLL},
            {2, impi, {"I_MPI_WAIT_MODE=0"}, MPI_PSTATE_WAIT_POLL},
            {2, impi, {"I_MPI_WAIT_MODE=sometimes"}, MPI_PSTATE_WAIT_UNKNOWN},
            {2, impi, {"I_MPI_THREAD_YIELD=0"}, MPI_PSTATE_WAIT_POLL},
            {2, impi, {"I_MPI_THREAD_YIELD=1"}, MPI_PSTATE_WAIT_POLL},
            {2, impi, {"I_MPI_THREAD_YIELD=2"}, MPI_PSTATE_WAIT_YIELD},
            {2, impi, {"I_MPI_THREAD_YIELD=3"}, MPI_PSTATE_WAIT_SLEEP},
            {2, impi, {"I_MPI_WAIT_MODE=enable", "I_MPI_THREAD_YIELD=3"}, MPI_PSTATE_WAIT_SLEEP},
            {2, impi, {"I_MPI_WAIT_MODE=1", "I_MPI_THREAD_YIELD=0"}, MPI_PSTATE_WAIT_POLL},
            {2, impi, {"I_MPI_THREAD_YIELD=4"}, MPI_PSTATE_WAIT_UNKNOWN},
            {2, impi, {"I_MPI_THREAD_YIELD=3x"}, MPI_PSTATE_WAIT_UNKNOWN},
            /* UCX has no variable that makes a wait block */
            {2, ch4, {"UCX_ASYNC_MODE=signal"}, MPI_PSTATE_WAIT_POLL},
            /* no known library */
            {0, NULL, {"OMPI_MCA_mpi_yield_when_idle=1"}, MPI_PSTATE_WAIT_UNKNOWN},
            {7, impi, {NULL}, MPI_PSTATE_WAIT_UNKNOWN},
        };

        for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
                char *env[6] = {"PATH=/usr/bin", NULL};
                size_t n = 1;

                for (size_t k = 0; k < 4 && cases[i].env[k]; k++)
                        env[n++] = (char *)cases[i].env[k];
                ck_assert_msg(
                    mpi_pstate_slot_wait_mode(cases[i].abi, cases[i].library, env) == cases[i].want,
                    "case %zu (%s): got %d, want %d", i, cases[i].env[0] ? cases[i].env[0] : "-",
                    mpi_pstate_slot_wait_mode(cases[i].abi, cases[i].library, env), cases[i].want);
        }
        ck_assert_int_eq(mpi_pstate_slot_wait_mode(1, ompi, NULL), MPI_PSTATE_WAIT_POLL);
}
END_TEST

static Suite *slot_suite(void)
{
        Suite *s = suite_create("slot");
        TCase *tc = tcase_create("segment");

        tcase_add_checked_fixture(tc, setup_dir, teardown_dir);
        tcase_add_test(tc, create_and_map);
        tcase_add_test(tc, full_shm_fails_creation_not_a_rank);
        tcase_add_test(tc, map_with_the_creators_nslots);
        tcase_add_test(tc, map_refuses_hostile_files);
        tcase_add_test(tc, attach_claims_and_sets_up);
        tcase_add_test(tc, attach_busy_and_takeover);
        tcase_add_test(tc, survives_sigkill);
        tcase_add_test(tc, snapshot_validates);
        tcase_add_test(tc, private_file_segment);
        tcase_add_test(tc, wait_protocol);
        tcase_add_test(tc, futex_wakes_agent);
        tcase_add_test(tc, clock_and_buckets);
        tcase_add_test(tc, totals_reduce_like_the_epilog);
        tcase_add_test(tc, prediction_announces_waits_predicted_long);
        tcase_add_test(tc, wait_mode_from_the_environment);
        suite_add_tcase(s, tc);
        return s;
}

int main(void)
{
        return mpi_pstate_check_main(slot_suite(), false);
}
