/* SPDX-License-Identifier: BSD-3-Clause */
/* Where a set-up agent goes before its loop: SCHED_FIFO on the step's
 * CPUs, the fence of what it may still change, the root remover of a
 * segment it made, and the drop to its own uid with the hardening of
 * harden.c (docs/security.md). */
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "agentd.h"

/* Where the hardened agent may still change files.  Started as root, it
 * writes only through the descriptors root opened for it, and may read
 * only /proc (its ranks' status).  Started as a user (mpi-pstate exec on
 * a node where the user may write cpufreq): its domains' sysfs
 * directories (lower, raise, restore from memory) and the segment's
 * directory when it removes the segment it made. */
static size_t fence(struct agentd *a, struct agentd_fence *f, size_t max, char *shm_dir,
                    size_t shm_len)
{
        size_t n = 0;

        if (a->records) {
                f[n++] = (struct agentd_fence){"/proc", AGENTD_FENCE_READ};
                return n;
        }
        for (unsigned i = 0; i < a->ndom && n + 2 < max; i++)
                if (a->dom[i].saved || a->dom[i].status == AGENTD_DOM_MANAGED)
                        f[n++] = (struct agentd_fence){a->node->policies[a->dom[i].policy].dir,
                                                       AGENTD_FENCE_WRITE};
        for (unsigned i = 0; i < a->nudom && n + 2 < max; i++)
                if (a->udom[i].saved)
                        f[n++] = (struct agentd_fence){a->udom[i].d->dir, AGENTD_FENCE_WRITE};
        if (a->created && !a->o.keep_shm &&
            mpi_pstate_agentd_parent_dir(a->o.shm, shm_dir, shm_len) == 0)
                f[n++] = (struct agentd_fence){shm_dir, AGENTD_FENCE_REMOVE};
        return n;
}

/* A segment the agent made (--create without --keep-shm) is removed when
 * the agent ends; once it runs as its own uid it may not remove the job
 * user's file from /dev/shm, so a root process that reads nothing does:
 * it holds only the read end of a pipe whose write end is the agent's,
 * and on EOF (the agent is gone, however it ended) removes the name if it
 * is still the segment's inode. */
static void spawn_remover(const struct agentd *a)
{
        struct stat made;
        int p[2];
        pid_t pid;
        char c;

        if (!a->records || !a->created || a->o.keep_shm || stat(a->o.shm, &made) != 0 ||
            pipe2(p, O_CLOEXEC) != 0)
                return;
        pid = fork();
        if (pid == 0) {
                struct stat now;

                close(p[1]);
                /* the pipe alone: not even the standard descriptors */
                close_range(0, (unsigned)p[0] - 1, 0);
                close_range((unsigned)p[0] + 1, ~0u, 0);
                while (read(p[0], &c, 1) < 0 && errno == EINTR)
                        ;
                if (lstat(a->o.shm, &now) == 0 && now.st_dev == made.st_dev &&
                    now.st_ino == made.st_ino)
                        unlink(a->o.shm);
                _exit(0);
        }
        close(p[0]);
        if (pid < 0) {
                close(p[1]);
                mpi_pstate_agentd_log(LOG_WARNING, "no remover for %s: %s", a->o.shm,
                                      strerror(errno));
        }
        /* p[1] stays open, unused, until the agent exits */
}

/* Scheduling and privileges for the loop, once setup is done; the liveness
 * watcher is started in between (mpi_pstate_agentd_harden()).  Fails only
 * when the watcher cannot start. */
int mpi_pstate_agentd_confine(struct agentd *a)
{
        struct agentd_fence f[MPI_PSTATE_AGENT_MAX_DOMAINS + MPI_PSTATE_UNCORE_MAX + 2];
        const struct agentd_identity who = {a->o.run_uid, a->o.run_gid,
                                            AGENTD_FILE_MAX_BYTES +
                                                (uint64_t)a->seg.nslots * AGENTD_FILE_SLOT_BYTES};
        struct agentd_hardening *h = &a->hard;
        char shm_dir[4096];
        size_t n;
        int rc;

        if (a->o.rt_prio) {
                struct sched_param sp = {.sched_priority = a->o.rt_prio};

                /* A rank that computes on every core must not delay a
                 * restore by a scheduler time slice. */
                if (sched_setscheduler(0, SCHED_FIFO, &sp) != 0)
                        mpi_pstate_agentd_log(LOG_WARNING, "SCHED_FIFO %d: %s", a->o.rt_prio,
                                              strerror(errno));
        }
        /* Everything that needs root is done (the user's segment mapped,
         * SCHED_FIFO and affinity set, every file opened): the loop, the
         * restore and the record need only the descriptors.  The time zone
         * is read now, while /etc may still be read. */
        tzset();
        spawn_remover(a);
        n = fence(a, f, sizeof(f) / sizeof(f[0]), shm_dir, sizeof(shm_dir));
        rc = mpi_pstate_agentd_harden(f, n, a->records ? &who : NULL,
                                      mpi_pstate_agentd_watcher_start, &a->watch, h);
        if (h->uid_rc) {
                mpi_pstate_agentd_log(LOG_ERR, "running as uid %u gid %u: %s: not started",
                                      (unsigned)who.uid, (unsigned)who.gid, strerror(-h->uid_rc));
                return h->uid_rc;
        }
        if (h->caps_rc)
                mpi_pstate_agentd_log(LOG_WARNING, "dropping capabilities: %s",
                                      strerror(-h->caps_rc));
        if (h->landlock_rc)
                mpi_pstate_agentd_log(
                    LOG_WARNING, "Landlock: %s: the agent's writes are not confined", h->landlock);
        if (h->seccomp_rc)
                mpi_pstate_agentd_log(LOG_WARNING, "seccomp allow-list: %s",
                                      strerror(-h->seccomp_rc));
        return rc;
}
