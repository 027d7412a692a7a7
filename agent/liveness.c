/* SPDX-License-Identifier: BSD-3-Clause */
/* Whether each slot's rank still lives.  A slot names a pid the job's
 * user wrote: it is watched only when that pid is one of the step's own
 * processes (own_process: the job's uid, and this job's Slurm cgroup when
 * it names one), through a pidfd the watcher thread waits on, or, where
 * pidfd_open is missing, by its /proc/<pid>/stat start time every 100 ms.
 * A slot naming any other pid is a gone rank, so the record says nothing
 * about processes that are not the job's. */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "agentd.h"
#include "safeio.h"

#define NS_PER_S UINT64_C(1000000000)
#define GONE_LINES 8u /* "is gone" lines per second */

/* The start time (clock ticks since boot) in a /proc/<pid>/stat text:
 * field 22, counted after the command's closing parenthesis (the command
 * is the process's to choose, parentheses included). */
static int stat_start(const char *buf, uint64_t *start)
{
        const char *p = strrchr(buf, ')');
        char *end;

        if (!p)
                return -EINVAL;
        for (int field = 2; field < 22; field++) {
                p = strchr(p + 1, ' ');
                if (!p)
                        return -EINVAL;
        }
        errno = 0;
        *start = strtoull(p + 1, &end, 10);
        return errno || end == p + 1 ? -EINVAL : 0;
}

/* pid's start time, which tells a pid reused later apart; -errno when it
 * is gone. */
static int proc_start(int32_t pid, uint64_t *start)
{
        char path[64], buf[4096];
        int rc;

        snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
        rc = mpi_pstate_safeio_read_small(AT_FDCWD, path, buf, sizeof(buf), 0, 0);
        return rc < 0 ? rc : stat_start(buf, start);
}

/* True when pid is one of the step's own processes: its real uid is the
 * job's (the segment's owner), and a Slurm cgroup it names is this job's.
 * *start: its start time (proc_start). */
static bool own_process(const struct agentd *a, int32_t pid, uint64_t *start)
{
        char path[64], buf[4096], want[32];
        const char *u;
        uint64_t uid;

        snprintf(path, sizeof(path), "/proc/%d/status", (int)pid);
        if (mpi_pstate_safeio_read_small(AT_FDCWD, path, buf, sizeof(buf), 0, 0) < 0 ||
            !(u = strstr(buf, "\nUid:\t")) || sscanf(u + 6, "%" SCNu64, &uid) != 1 ||
            uid != (uint64_t)a->rank_uid)
                return false;
        snprintf(path, sizeof(path), "/proc/%d/cgroup", (int)pid);
        if (mpi_pstate_safeio_read_small(AT_FDCWD, path, buf, sizeof(buf), 0, 0) >= 0 &&
            strstr(buf, "/job_")) {
                int n = snprintf(want, sizeof(want), "/job_%u", a->o.job);
                const char *j = buf;
                bool mine = false;

                while (!mine && (j = strstr(j, want)) != NULL) {
                        mine = j[n] == '/' || j[n] == '\n' || j[n] == '\0';
                        j += n;
                }
                if (!mine)
                        return false;
        }
        return proc_start(pid, start) == 0;
}

void mpi_pstate_agentd_slot_watch(struct agentd *a, unsigned i, int32_t pid)
{
        struct agentd_slot *si = &a->slots[i];
        uint64_t again = 0;
        int fd;

        if (si->pidfd >= 0)
                close(si->pidfd); /* also leaves the epoll set */
        si->pidfd = -1;
        si->gen++;
        si->dead = false;
        si->pid = pid;
        si->checked_ns = 0;
        if (pid <= 0 || !own_process(a, pid, &si->start_ticks)) {
                si->dead = pid > 0; /* gone already, or not the step's */
                return;
        }
        if (!a->watch.pidfd_ok)
                return;
        fd = (int)syscall(SYS_pidfd_open, (pid_t)pid, 0);
        if (fd < 0) {
                if (errno == ESRCH || errno == EINVAL || errno == ENOENT)
                        si->dead = true; /* gone already, or not a process */
                else if (errno == ENOSYS)
                        a->watch.pidfd_ok = false;
                return;
        }
        /* The pid may have been reused between the look and the pidfd:
         * the pidfd is the step's process only if it still is the same. */
        if (!own_process(a, pid, &again) || again != si->start_ticks) {
                close(fd);
                si->dead = true;
                return;
        }
        if (!mpi_pstate_agentd_watcher_add(&a->watch, fd, i, si->gen)) {
                close(fd);
                return;
        }
        si->pidfd = fd;
}

/* A rank can write a new fake pid into its slot as often as it likes: at
 * most GONE_LINES lines a second. */
static void say_gone(struct agentd *a, unsigned i, uint64_t now)
{
        const struct agentd_slot *si = &a->slots[i];

        if (now - a->gone_t0 >= NS_PER_S) {
                if (a->gone_dropped)
                        mpi_pstate_agentd_log(LOG_INFO, "%llu more \"is gone\" lines not logged",
                                              (unsigned long long)a->gone_dropped);
                a->gone_t0 = now;
                a->gone_n = 0;
                a->gone_dropped = 0;
        }
        if (a->gone_n++ < GONE_LINES)
                mpi_pstate_agentd_log(LOG_INFO, "slot %u: rank %d (pid %d) is gone%s", i,
                                      (int)si->rank, (int)si->pid,
                                      si->state == MPI_PSTATE_SLOT_RUNNING ? " while running" : "");
        else
                a->gone_dropped++;
}

void mpi_pstate_agentd_liveness(struct agentd *a, unsigned i, uint64_t now)
{
        struct agentd_slot *si = &a->slots[i];
        bool was = si->dead;

        atomic_store_explicit(&si->dead_pending, false, memory_order_relaxed);
        if (si->pid <= 0 || si->dead)
                return;
        if (si->pidfd >= 0) {
                if (atomic_load_explicit(&si->dead_gen, memory_order_acquire) == si->gen)
                        si->dead = true;
        } else if (now - si->checked_ns >= AGENTD_PROC_CHECK_NS) {
                uint64_t start = 0;

                /* watched only once it was found the step's: the same
                 * process while its start time is */
                si->checked_ns = now;
                if (proc_start(si->pid, &start) != 0 || start != si->start_ticks)
                        si->dead = true;
        }
        if (si->dead && !was) {
                static const uint64_t none[MPI_PSTATE_AGENT_MASK_WORDS];

                say_gone(a, i, now);
                /* its domains go up at once if it held them down */
                mpi_pstate_agentd_set_rank_domains(a, i, none);
        }
}

bool mpi_pstate_agentd_need_pid_checks(const struct agentd *a)
{
        for (unsigned i = 0; i < a->seg.nslots; i++)
                if (a->slots[i].pid > 0 && !a->slots[i].dead && a->slots[i].pidfd < 0)
                        return true;
        return false;
}
