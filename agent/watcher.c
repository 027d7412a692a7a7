/* SPDX-License-Identifier: BSD-3-Clause */
/* The liveness watcher: one thread blocked in epoll_wait on a pidfd per
 * rank (liveness.c adds them).  When a rank's process ends it marks the
 * slot dead for that generation and wakes the loop through the segment's
 * futex, so that the rank's domains go up at once rather than at the next
 * scan.  It touches only its struct agentd_watch and the slots' two
 * atomic words. */
#include <errno.h>
#include <signal.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "agentd.h"

#define STOP_EVENT UINT64_MAX

static void *watcher_main(void *arg)
{
        struct agentd_watch *w = arg;
        struct epoll_event ev[64];

        /* Started by mpi_pstate_agentd_harden(): it was born with no
         * capability and under Landlock, and gets the seccomp filter by
         * TSYNC. */
        for (;;) {
                int n = epoll_wait(w->epfd, ev, 64, -1);

                if (n < 0 && errno == EINTR)
                        continue;
                if (n < 0)
                        return NULL;
                for (int i = 0; i < n; i++) {
                        uint64_t tag = ev[i].data.u64;
                        unsigned slot = (unsigned)(tag & 0xffffffffu);

                        if (tag == STOP_EVENT)
                                return NULL;
                        if (slot < w->nslots) {
                                atomic_store(&w->slots[slot].dead_gen, (uint32_t)(tag >> 32));
                                atomic_store(&w->slots[slot].dead_pending, true);
                        }
                        /* a segment shrunk under us answers EFAULT, never SIGBUS */
                        mpi_pstate_agentd_wake(w->hdr);
                }
        }
}

int mpi_pstate_agentd_watcher_start(void *watch)
{
        struct agentd_watch *w = watch;
        struct epoll_event ev = {.events = EPOLLIN, .data.u64 = STOP_EVENT};
        sigset_t all, old;
        int rc;

        w->epfd = epoll_create1(EPOLL_CLOEXEC);
        w->stopfd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
        if (w->epfd < 0 || w->stopfd < 0 || epoll_ctl(w->epfd, EPOLL_CTL_ADD, w->stopfd, &ev))
                return -errno;
        /* Signals go to the main loop, never to the watcher. */
        sigfillset(&all);
        pthread_sigmask(SIG_SETMASK, &all, &old);
        rc = pthread_create(&w->thread, NULL, watcher_main, w);
        pthread_sigmask(SIG_SETMASK, &old, NULL);
        if (rc)
                return -rc;
        w->on = true;
        return 0;
}

void mpi_pstate_agentd_watcher_stop(struct agentd_watch *w)
{
        uint64_t one = 1;

        if (w->on) {
                ssize_t n = write(w->stopfd, &one, sizeof(one));

                (void)n;
                pthread_join(w->thread, NULL);
                w->on = false;
        }
        if (w->epfd >= 0)
                close(w->epfd);
        if (w->stopfd >= 0)
                close(w->stopfd);
        w->epfd = w->stopfd = -1;
}

/* Watches pidfd for slot i's generation gen; false when it cannot. */
bool mpi_pstate_agentd_watcher_add(struct agentd_watch *w, int pidfd, unsigned i, uint32_t gen)
{
        struct epoll_event ev = {.events = EPOLLIN | EPOLLONESHOT,
                                 .data.u64 = ((uint64_t)gen << 32) | i};

        return epoll_ctl(w->epfd, EPOLL_CTL_ADD, pidfd, &ev) == 0;
}
