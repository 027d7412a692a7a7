/* SPDX-License-Identifier: BSD-3-Clause */
/* The agent's main loop: scan the slots, let the decision core act, sleep
 * on the segment's futex until the next deadline.
 *
 * Everything in the segment is written by the job's user.  The loop reads
 * only a few words per slot per scan (state, pid, wait_since); a slot's
 * identity (CPU set, clock, threshold, mode) comes from a validated copy
 * (mpi_pstate_slot_snapshot), taken when the slot's state or pid changes
 * and once a second.  A user can also shrink the file under the mapping:
 * the next access raises SIGBUS, which is caught while the loop is inside
 * the segment, and the agent then puts every domain back up and stops
 * using the segment.
 *
 * Dead ranks: one pidfd per slot owner, watched by a thread blocked in
 * epoll_wait; when a process ends, the thread wakes the loop through the
 * futex.  Where pidfd_open is missing, /proc/<pid>/stat every 100 ms.
 * Only the step's own processes are watched (own_process): a slot that
 * names any other pid is a gone rank, so the record says nothing about
 * processes that are not the job's. */
#include <errno.h>
#include <inttypes.h>
#include <fcntl.h>
#include <linux/futex.h>
#include <setjmp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "agentd.h"
#include "safeio.h"

#define NS_PER_S UINT64_C(1000000000)
#define REFRESH_NS NS_PER_S               /* re-validate every slot's identity */
#define PROC_CHECK_NS UINT64_C(100000000) /* liveness without pidfd */
/* A flood of wake-ups (a rank bumping the futex in a loop) is cut to at
 * most THROTTLE_WAKES early wake-ups per window; the rest of the window is
 * slept through.  A legitimate burst (a barrier releasing many clocked-down
 * ranks at once) needs a handful. */
#define THROTTLE_WINDOW_NS UINT64_C(10000000)
#define THROTTLE_WAKES 50u
#define STOP_EVENT UINT64_MAX
/* The CPU budget is checked this often (the first time sooner, so that a
 * slow platform does not pay a whole second of too frequent scans). */
#define BUDGET_PERIOD_NS NS_PER_S
#define BUDGET_FIRST_NS (NS_PER_S / 10)

#define ANNOUNCE_HOLD_MAX 64u /* budget periods */

#define CAP_WINDOW_NS (NS_PER_S / 10)
#define GONE_LINES 8u /* "is gone" lines per second */

static sigjmp_buf bus_jmp;
static void sleep_until(uint64_t abs_ns);
static volatile sig_atomic_t in_segment;

static uint64_t tsc_now(void)
{
#if defined(MPI_PSTATE_HAVE_COUNTER)
        return mpi_pstate_slot_counter();
#else
        return 0;
#endif
}

static void on_sigbus(int sig, siginfo_t *info, void *uc)
{
        (void)info;
        (void)uc;
        if (in_segment)
                siglongjmp(bus_jmp, 1);
        signal(sig, SIG_DFL);
        raise(sig);
}

/* Bumps the futex word inside the kernel (a truncated segment gives
 * EFAULT there, not SIGBUS here) and wakes the loop.  Async-signal-safe. */
static void wake_loop(struct mpi_pstate_seg_header *hdr)
{
        if (!hdr)
                return;
        syscall(SYS_futex, &hdr->agent_futex, FUTEX_WAKE_OP, 1, (void *)0, &hdr->agent_futex,
                FUTEX_OP(FUTEX_OP_ADD, 1, FUTEX_OP_CMP_EQ, 0));
}

void mpi_pstate_agentd_poke(struct agentd *a)
{
        if (a && !a->seg_lost)
                wake_loop(a->seg.hdr);
}

/* ---- the decision core's side effects ---- */

static struct mpi_pstate_slot *slot_of(struct agentd *a, unsigned r)
{
        return a->seg_lost ? NULL : mpi_pstate_slot_at(&a->seg, r);
}

static int op_mark(void *ctx, unsigned r, uint64_t since)
{
        struct mpi_pstate_slot *s = slot_of(ctx, r);

        return s ? mpi_pstate_slot_agent_lower(s, since) : 0;
}

static int op_still(void *ctx, unsigned r, uint64_t since)
{
        struct mpi_pstate_slot *s = slot_of(ctx, r);

        return s ? mpi_pstate_slot_agent_still_waiting(s, since) : 0;
}

static void op_unmark(void *ctx, unsigned r, uint64_t down_ns)
{
        struct mpi_pstate_slot *s = slot_of(ctx, r);

        if (s)
                mpi_pstate_slot_agent_raise(s, down_ns);
}

static void op_clear(void *ctx, unsigned r)
{
        struct mpi_pstate_slot *s = slot_of(ctx, r);

        if (s)
                atomic_store_explicit(&s->clocked_down, 0, memory_order_release);
}

/* Said once: the core leaves a gone domain alone from then on. */
static int said_gone(struct agentd *a, unsigned d, int rc)
{
        if (rc == -ENODEV && !a->dom[d].gone_logged) {
                a->dom[d].gone_logged = true;
                mpi_pstate_agentd_log(LOG_WARNING,
                                      "%s: its files were removed under the step (the cpufreq "
                                      "driver was re-registered): left alone from now on",
                                      a->dom[d].name);
        }
        return rc;
}

static int op_lower(void *ctx, unsigned d)
{
        struct agentd *a = ctx;

        return d < a->ndom ? said_gone(a, d, mpi_pstate_cpufreq_domain_lower(&a->dom[d].h))
                           : -EINVAL;
}

static int op_raise(void *ctx, unsigned d)
{
        struct agentd *a = ctx;

        return d < a->ndom ? said_gone(a, d, mpi_pstate_cpufreq_domain_raise(&a->dom[d].h))
                           : -EINVAL;
}

static uint64_t op_now(void *ctx)
{
        (void)ctx;
        return mpi_pstate_agentd_mono_ns();
}

/* A rank's domains, for the core clock and for the uncore. */
static void set_rank_domains(struct agentd *a, unsigned i, const uint64_t *mask)
{
        mpi_pstate_agent_set_domains(&a->core, i, mask);
        mpi_pstate_agentd_uncore_set_rank(a, i, mask);
}

/* ---- liveness ---- */

static void *watcher_main(void *arg)
{
        struct agentd *a = arg;
        struct epoll_event ev[64];

        /* Started by mpi_pstate_agentd_harden(): it was born with no
         * capability and under Landlock, and gets the seccomp filter by
         * TSYNC. */
        for (;;) {
                int n = epoll_wait(a->epfd, ev, 64, -1);

                if (n < 0 && errno == EINTR)
                        continue;
                if (n < 0)
                        return NULL;
                for (int i = 0; i < n; i++) {
                        uint64_t tag = ev[i].data.u64;
                        unsigned slot = (unsigned)(tag & 0xffffffffu);

                        if (tag == STOP_EVENT)
                                return NULL;
                        if (slot < a->seg.nslots) {
                                atomic_store(&a->slots[slot].dead_gen, (uint32_t)(tag >> 32));
                                atomic_store(&a->slots[slot].dead_pending, true);
                        }
                        mpi_pstate_agentd_poke(a);
                }
        }
}

int mpi_pstate_agentd_watcher_start(void *agentd)
{
        struct agentd *a = agentd;
        struct epoll_event ev = {.events = EPOLLIN, .data.u64 = STOP_EVENT};
        sigset_t all, old;
        int rc;

        a->epfd = epoll_create1(EPOLL_CLOEXEC);
        a->stopfd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
        if (a->epfd < 0 || a->stopfd < 0 || epoll_ctl(a->epfd, EPOLL_CTL_ADD, a->stopfd, &ev))
                return -errno;
        /* Signals go to the main loop, never to the watcher. */
        sigfillset(&all);
        pthread_sigmask(SIG_SETMASK, &all, &old);
        rc = pthread_create(&a->watcher, NULL, watcher_main, a);
        pthread_sigmask(SIG_SETMASK, &old, NULL);
        if (rc)
                return -rc;
        a->watcher_on = true;
        return 0;
}

static void watcher_stop(struct agentd *a)
{
        uint64_t one = 1;

        if (a->watcher_on) {
                ssize_t w = write(a->stopfd, &one, sizeof(one));

                (void)w;
                pthread_join(a->watcher, NULL);
                a->watcher_on = false;
        }
        if (a->epfd >= 0)
                close(a->epfd);
        if (a->stopfd >= 0)
                close(a->stopfd);
        a->epfd = a->stopfd = -1;
}

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

/* Starts watching the process that now owns slot i. */
static void slot_watch(struct agentd *a, unsigned i, int32_t pid)
{
        struct agentd_slot *si = &a->slots[i];
        struct epoll_event ev;
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
        if (!a->pidfd_ok)
                return;
        fd = (int)syscall(SYS_pidfd_open, (pid_t)pid, 0);
        if (fd < 0) {
                if (errno == ESRCH || errno == EINVAL || errno == ENOENT)
                        si->dead = true; /* gone already, or not a process */
                else if (errno == ENOSYS)
                        a->pidfd_ok = false;
                return;
        }
        /* The pid may have been reused between the look and the pidfd:
         * the pidfd is the step's process only if it still is the same. */
        if (!own_process(a, pid, &again) || again != si->start_ticks) {
                close(fd);
                si->dead = true;
                return;
        }
        ev.events = EPOLLIN | EPOLLONESHOT;
        ev.data.u64 = ((uint64_t)si->gen << 32) | i;
        if (epoll_ctl(a->epfd, EPOLL_CTL_ADD, fd, &ev) != 0) {
                close(fd);
                return;
        }
        si->pidfd = fd;
}

static void liveness(struct agentd *a, unsigned i, uint64_t now)
{
        struct agentd_slot *si = &a->slots[i];
        bool was = si->dead;

        atomic_store_explicit(&si->dead_pending, false, memory_order_relaxed);
        if (si->pid <= 0 || si->dead)
                return;
        if (si->pidfd >= 0) {
                if (atomic_load_explicit(&si->dead_gen, memory_order_acquire) == si->gen)
                        si->dead = true;
        } else if (now - si->checked_ns >= PROC_CHECK_NS) {
                uint64_t start = 0;

                /* watched only once it was found the step's: the same
                 * process while its start time is */
                si->checked_ns = now;
                if (proc_start(si->pid, &start) != 0 || start != si->start_ticks)
                        si->dead = true;
        }
        if (si->dead && !was) {
                static const uint64_t none[MPI_PSTATE_AGENT_MASK_WORDS];

                /* A rank can write a new fake pid into its slot as often
                 * as it likes: at most GONE_LINES lines a second. */
                if (now - a->gone_t0 >= NS_PER_S) {
                        if (a->gone_dropped)
                                mpi_pstate_agentd_log(LOG_INFO,
                                                      "%llu more \"is gone\" lines not logged",
                                                      (unsigned long long)a->gone_dropped);
                        a->gone_t0 = now;
                        a->gone_n = 0;
                        a->gone_dropped = 0;
                }
                if (a->gone_n++ < GONE_LINES)
                        mpi_pstate_agentd_log(
                            LOG_INFO, "slot %u: rank %d (pid %d) is gone%s", i, (int)si->rank,
                            (int)si->pid,
                            si->state == MPI_PSTATE_SLOT_RUNNING ? " while running" : "");
                else
                        a->gone_dropped++;
                /* its domains go up at once if it held them down */
                set_rank_domains(a, i, none);
        }
}

/* ---- slots ---- */

static void slot_mask(const struct agentd *a, const struct agentd_slot *si, uint64_t *mask)
{
        bool any = false;

        memset(mask, 0, MPI_PSTATE_AGENT_MASK_WORDS * sizeof(uint64_t));
        if (!a->node || si->dead)
                return;
        for (unsigned w = 0; w < MPI_PSTATE_SLOT_CPUSET_WORDS; w++) {
                uint64_t m = si->cpuset[w];

                while (m) {
                        unsigned cpu = w * 64u + (unsigned)__builtin_ctzll(m);
                        int pi, d;

                        m &= m - 1;
                        if (cpu >= CPU_SETSIZE || !CPU_ISSET(cpu, &a->o.cpus))
                                continue;
                        pi = a->node->cpu_policy[cpu];
                        d = pi >= 0 ? a->pol2dom[pi] : -1;
                        if (d < 0)
                                continue;
                        mask[d / 64] |= UINT64_C(1) << (d % 64);
                        any = true;
                }
        }
        if (!any && si->cpu >= 0 && si->cpu < CPU_SETSIZE && CPU_ISSET(si->cpu, &a->o.cpus)) {
                int pi = a->node->cpu_policy[si->cpu], d = pi >= 0 ? a->pol2dom[pi] : -1;

                if (d >= 0)
                        mask[d / 64] |= UINT64_C(1) << (d % 64);
        }
}

/* Re-reads slot i's identity from a validated copy. */
static void slot_refresh(struct agentd *a, unsigned i, const struct mpi_pstate_slot *s,
                         uint32_t state, int32_t pid, uint64_t now)
{
        struct agentd_slot *si = &a->slots[i];
        const struct mpi_pstate_slot *c = a->copy;
        uint64_t mask[MPI_PSTATE_AGENT_MASK_WORDS];
        int rc;

        si->refreshed_ns = now;
        si->state = state; /* even when invalid: refresh again on a change only */
        if (pid != si->pid)
                slot_watch(a, i, pid);
        /* A slot nobody claimed is not worth a 16 KiB copy every second. */
        if (__atomic_load_n(&s->magic, __ATOMIC_ACQUIRE) == 0 && !si->valid)
                rc = -ENOENT;
        else
                rc = mpi_pstate_slot_snapshot(s, a->copy);
        if (rc) {
                if (rc == -EPROTO && !si->bad_logged) {
                        mpi_pstate_agentd_log(LOG_WARNING, "slot %u: invalid content, ignored", i);
                        si->bad_logged = true;
                }
                si->valid = false;
                memset(mask, 0, sizeof(mask));
                set_rank_domains(a, i, mask);
                return;
        }
        si->valid = true;
        si->seen = si->seen || si->pid > 0;
        si->state = atomic_load_explicit(&c->state, memory_order_relaxed);
        si->rank = c->rank;
        si->cpu = c->cpu;
        si->clock = c->clock;
        si->mode = c->mode;
        if (c->clock == MPI_PSTATE_CLOCK_TSC)
                si->thr_ns = mpi_pstate_agent_ticks_len_ns(c->threshold_ticks, a->tsc_rate);
        else
                si->thr_ns = c->clock == MPI_PSTATE_CLOCK_MONOTONIC ? c->threshold_ticks : 0;
        memcpy(si->cpuset, c->cpuset, sizeof(si->cpuset));
        si->long_calls = atomic_load_explicit(&c->long_calls, memory_order_relaxed);
        si->long_ns = atomic_load_explicit(&c->long_ns, memory_order_relaxed);
        si->wakeups = atomic_load_explicit(&c->wakeups, memory_order_relaxed);
        si->slot_down_ns = atomic_load_explicit(&c->down_ns, memory_order_relaxed);
        si->slot_transitions = atomic_load_explicit(&c->transitions, memory_order_relaxed);
        si->announced = atomic_load_explicit(&c->announced, memory_order_relaxed);
        si->announced_short = atomic_load_explicit(&c->announced_short, memory_order_relaxed);
        slot_mask(a, si, mask);
        si->ndoms = 0;
        for (unsigned w = 0; w < MPI_PSTATE_AGENT_MASK_WORDS; w++) {
                si->ever_mask[w] |= mask[w];
                si->ndoms += (unsigned)__builtin_popcountll(mask[w]);
        }
        set_rank_domains(a, i, mask);
}

/* Hybrid ranks (docs/agent.md): the one domain a wait concerns, or -1 for
 * the rank's whole block.  Only the waiting thread's core goes down when
 * the rank's block spans several domains and that CPU's domain is one
 * core's.  cpu comes from the user's slot: it counts only inside the
 * rank's validated CPU set and the step's CPUs. */
static int wait_domain(const struct agentd *a, const struct agentd_slot *si, int32_t cpu)
{
        int pi, d;

        if (si->ndoms < 2 || !a->node || cpu < 0 || cpu >= CPU_SETSIZE ||
            cpu >= (int32_t)(64 * MPI_PSTATE_SLOT_CPUSET_WORDS) ||
            !((si->cpuset[cpu / 64] >> (cpu % 64)) & 1u) || !CPU_ISSET(cpu, &a->o.cpus))
                return -1;
        pi = a->node->cpu_policy[cpu];
        d = pi >= 0 ? a->pol2dom[pi] : -1;
        return d >= 0 && (unsigned)d < a->ndom && a->dom[d].per_core ? d : -1;
}

/* Reads slot i into its observation; returns when its wait began (agent
 * clock), 0 when it does not wait. */
static uint64_t observe(struct agentd *a, unsigned i, uint64_t now, uint64_t ref_tsc,
                        uint64_t ref_ns)
{
        struct mpi_pstate_slot *s = mpi_pstate_slot_at(&a->seg, i);
        struct agentd_slot *si = &a->slots[i];
        struct mpi_pstate_agent_obs *o = &a->obs[i];
        uint32_t state = atomic_load_explicit(&s->state, memory_order_acquire);
        int32_t pid = atomic_load_explicit(&s->pid, memory_order_relaxed);
        uint64_t since, since_ns, thr;

        if (state != si->state || pid != si->pid || now - si->refreshed_ns >= REFRESH_NS)
                slot_refresh(a, i, s, state, pid, now);
        liveness(a, i, now);
        memset(o, 0, sizeof(*o));
        if (!si->valid || si->dead || si->pid <= 0 || si->state != MPI_PSTATE_SLOT_RUNNING)
                return 0;
        o->live = 1;
        o->lowerable = !a->o.profile && si->mode == MPI_PSTATE_SLOT_MODE_ON &&
                       si->clock != MPI_PSTATE_CLOCK_NONE;
        since = atomic_load_explicit(&s->wait_since, memory_order_acquire);
        if (!since)
                return 0;
        o->since = since;
        {
                int d =
                    wait_domain(a, si, atomic_load_explicit(&s->wait_cpu, memory_order_relaxed));

                if (d >= 0) {
                        o->one_domain = 1;
                        o->domain = (unsigned)d;
                }
        }
        since_ns = si->clock == MPI_PSTATE_CLOCK_TSC
                       ? mpi_pstate_agent_ticks_to_ns(since, ref_tsc, ref_ns, a->tsc_rate)
                       : since;
        /* Never before the rank's own threshold: a rank leaving a shorter
         * call does not look at its flag, so it would not wake us. */
        thr = si->thr_ns > a->thr_ns ? si->thr_ns : a->thr_ns;
        o->deadline_ns = since_ns + thr < since_ns ? UINT64_MAX : since_ns + thr;
        return since_ns;
}

static void scan_one(struct agentd *a, unsigned i, uint64_t now, uint64_t ref_tsc, uint64_t ref_ns)
{
        uint64_t since_ns = observe(a, i, now, ref_tsc, ref_ns);

        if (a->ucore_on)
                mpi_pstate_agentd_uncore_obs(a, i, since_ns);
}

/* A full scan reads every slot; the wake-ups in between (a deadline, a
 * rank leaving a clocked-down call, a death) re-read only the ranks known
 * to wait, which hold every deadline and every mark.  The others keep their
 * last observation: a stale "waiting" is harmless, because a lowering marks
 * each rank first and the mark re-checks the wait (common/slot.h).  Every
 * slot is in its own page: on a virtual machine the TLB misses, not the
 * loads, are the cost, so the next slots are prefetched. */
static void scan(struct agentd *a, uint64_t now, bool full)
{
        uint64_t ref_tsc = tsc_now(), ref_ns = mpi_pstate_agentd_mono_ns();
        unsigned n = a->seg.nslots;

        for (unsigned i = 0; i < n; i++) {
                if (!full && !a->obs[i].since && !a->slots[i].dead_pending &&
                    !((a->ann[i / 64] >> (i % 64)) & 1u))
                        continue;
                if (full && i + 4 < n) {
                        const struct mpi_pstate_slot *ahead = mpi_pstate_slot_at(&a->seg, i + 4);

                        __builtin_prefetch(&ahead->state);
                        __builtin_prefetch(&ahead->wait_since);
                }
                scan_one(a, i, now, ref_tsc, ref_ns);
        }
}

/* The waits announced since the last pass (common/slot.h, "Reaction"):
 * each word of the header's map taken with an exchange, only the words of
 * this segment's slots.  The map is the user's: a bit set for a slot that
 * is not waiting costs one read of that slot, and the wake-ups that carry
 * them are throttled like any other. */
static void take_announced(struct agentd *a)
{
        struct mpi_pstate_seg_header *hdr = a->seg.hdr;
        unsigned words = (a->seg.nslots + 63) / 64;

        for (unsigned w = 0; w < words; w++) {
                a->ann[w] = 0;
                if (!atomic_load_explicit(&hdr->announce[w], memory_order_relaxed))
                        continue;
                a->ann[w] = atomic_exchange_explicit(&hdr->announce[w], 0, memory_order_acquire);
                a->announced += (uint64_t)__builtin_popcountll(a->ann[w]);
        }
}

/* Whether a rank announced a wait since take_announced(). */
static bool announce_pending(const struct agentd *a)
{
        const struct mpi_pstate_seg_header *hdr = a->seg.hdr;
        unsigned words = (a->seg.nslots + 63) / 64;

        for (unsigned w = 0; w < words; w++)
                if (atomic_load(&hdr->announce[w]))
                        return true;
        return false;
}

static bool all_done(const struct agentd *a)
{
        for (unsigned i = 0; i < a->seg.nslots; i++) {
                const struct agentd_slot *si = &a->slots[i];

                if (!si->seen)
                        return false;
                if (si->dead)
                        continue;
                if (si->state != MPI_PSTATE_SLOT_FINALIZED &&
                    si->state != MPI_PSTATE_SLOT_ABORTED && si->state != MPI_PSTATE_SLOT_EXITED)
                        return false;
        }
        return a->seg.nslots > 0;
}

static bool need_kill_checks(const struct agentd *a)
{
        for (unsigned i = 0; i < a->seg.nslots; i++)
                if (a->slots[i].pid > 0 && !a->slots[i].dead && a->slots[i].pidfd < 0)
                        return true;
        return false;
}

static uint64_t process_cpu_ns(void)
{
        struct timespec ts;

        clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
        return (uint64_t)ts.tv_sec * NS_PER_S + (uint64_t)ts.tv_nsec;
}

/* The timer gap that keeps the last period's CPU share near 80 % of the
 * budget, logged when it changes. */
static void gap_adjust(struct agentd *a, uint64_t used, uint64_t wall, uint64_t timers)
{
        uint64_t want;

        a->budget_cpu_sum += used;
        a->budget_timer_sum += timers;
        want = mpi_pstate_agent_budget_gap(a->gap_ns, wall / timers, used, wall, a->o.budget_ppm,
                                           a->scan_ns, AGENTD_SCAN_MIN_NS, AGENTD_SCAN_MAX_NS);
        if (want != a->gap_ns) {
                mpi_pstate_agentd_log(
                    LOG_DEBUG,
                    "CPU %llu ppm of a core over %llu timer wake-ups: timer "
                    "gap %llu -> %llu us",
                    (unsigned long long)(used * 1000000u / wall), (unsigned long long)timers,
                    (unsigned long long)(a->gap_ns / 1000u), (unsigned long long)(want / 1000u));
                a->gap_ns = want;
                a->budget_adjusts++;
        }
        if (want > a->gap_max_ns)
                a->gap_max_ns = want;
}

/* Reactions (announced waits, their deadlines, their transitions) are
 * what savings cost; they are bought while the agent stays under three
 * quarters of its hard ceiling.  Past that, ranks stop announcing and the
 * polls, spaced by the budget, find the waits, until the agent is back
 * under half that: the ceiling, which holds every wait up, is not what
 * limits a busy node.  Not half the ceiling: on the lab's FUSE sysfs (a
 * write 150-300 us) a 2-rank job crossed it, and announcements then went
 * off for a job that the ceiling never held up. */
static void announce_adjust(struct agentd *a, uint64_t now, uint64_t used, uint64_t wall)
{
        uint64_t share_ppm = (uint64_t)((unsigned __int128)used * 1000000u / wall);
        uint64_t off_ppm = a->o.cap_ppm * AGENTD_ANNOUNCE_OFF_PCT / 100u;
        bool off = atomic_load_explicit(&a->seg.hdr->announce_off, memory_order_relaxed) != 0;

        /* A node whose ranks are over it when announcing and under half of
         * it when not would switch every other period (128 simulated ranks:
         * 15 times in 30 s): each turn off holds twice as long as the last,
         * up to a minute, and each period spent announcing under the limit
         * halves the hold again. */
        if (!off && share_ppm > off_ppm) {
                off = true;
                a->announce_offs++;
                a->announce_hold = a->announce_hold ? 2 * a->announce_hold : 1u;
                if (a->announce_hold > ANNOUNCE_HOLD_MAX)
                        a->announce_hold = ANNOUNCE_HOLD_MAX;
                a->announce_hold_until_ns = now + (uint64_t)a->announce_hold * BUDGET_PERIOD_NS;
        } else if (off && share_ppm < off_ppm / 2 && now >= a->announce_hold_until_ns) {
                off = false;
        } else if (!off) {
                a->announce_hold /= 2;
        }
        atomic_store_explicit(&a->seg.hdr->announce_off, off, memory_order_relaxed);
}

/* Keeps the agent within its CPU budget.  Nearly all of its time goes
 * into waking up (tens of microseconds each on a virtual machine, a few on
 * bare metal), so the lever is how often the timer may wake it: timer
 * wake-ups (scans and deadlines) are spaced at least gap_ns apart, and
 * gap_ns follows the measured CPU share once a period, aiming at 80 % of
 * the budget (the next period is noisy; the budget is a ceiling).  What it
 * costs: drops come up to gap_ns after their deadline, and a wait is seen
 * up to max(scan, gap) after it starts (the record's drop_late_ns shows
 * it).  Restores are never delayed: a rank leaving a clocked-down call
 * wakes the agent through the futex, which no gap holds back. */
static void budget_adjust(struct agentd *a, uint64_t now)
{
        uint64_t cpu, used, wall, timers;

        if (!a->o.budget_ppm || now < a->budget_next_ns)
                return;
        cpu = process_cpu_ns();
        timers = a->timeouts - a->budget_timers0;
        if (a->budget_t0 && now > a->budget_t0 && timers) {
                used = cpu - a->budget_cpu0;
                wall = now - a->budget_t0;
                gap_adjust(a, used, wall, timers);
                /* not judged on the first, short period: it holds the start-up */
                if (a->o.cap_ppm && wall >= BUDGET_PERIOD_NS / 2)
                        announce_adjust(a, now, used, wall);
        }
        a->budget_next_ns = now + (a->budget_t0 ? BUDGET_PERIOD_NS : BUDGET_FIRST_NS);
        a->budget_t0 = now;
        a->budget_cpu0 = cpu;
        a->budget_timers0 = a->timeouts;
}

/* The hard ceiling, whatever the ranks write: CPU time (the process's,
 * watcher thread included), not wake-ups, is metered by a token bucket
 * that fills at cap_ppm of a core and holds at most one window's worth
 * (a legitimate burst); when a pass of the loop leaves it in debt, the loop
 * sleeps, deaf to the futex, until the debt is paid.  A rank toggling its
 * slot and bumping the futex in a loop therefore costs the node at most
 * cap_ppm of a core over any window, paid by the step's own CPUs (main.c
 * confines the agent to them).  Before such a sleep every domain it lowered
 * goes back up: a rank leaving its wait during the sleep would otherwise
 * compute clocked down until the end of it (bench/security measured restore
 * p99 at 985 us against 119 us before the ceiling, on an honest load that
 * reached it), so the ceiling costs the step savings, never speed.  The
 * waits it raised stay up until they end (hold_all): lowered again after
 * the sleep, a long wait would pay a transition per sleep (13 per 10 ms
 * call at threshold 0, tests/integration/test_agent_daemon.py). */
static void cpu_cap(struct agentd *a)
{
        const int64_t burst = (int64_t)(CAP_WINDOW_NS / 1000000u * a->o.cap_ppm);
        uint64_t now, cpu;

        if (!a->o.cap_ppm)
                return;
        now = mpi_pstate_agentd_mono_ns();
        cpu = process_cpu_ns();
        if (a->cap_t0) {
                a->cap_credit +=
                    (int64_t)((unsigned __int128)(now - a->cap_t0) * a->o.cap_ppm / 1000000u);
                a->cap_credit -= (int64_t)(cpu - a->cap_cpu0);
                if (a->cap_credit > burst)
                        a->cap_credit = burst;
        } else {
                a->cap_credit = burst;
        }
        a->cap_t0 = now;
        a->cap_cpu0 = cpu;
        if (a->cap_credit >= 0)
                return;
        /* the wall time that refills the debt */
        uint64_t pay =
            (uint64_t)((unsigned __int128)(uint64_t)(-a->cap_credit) * 1000000u / a->o.cap_ppm);
        a->capped++;
        a->capped_ns += pay;
        for (unsigned d = 0; d < a->core.ndomains; d++)
                a->capped_raises += a->core.domains[d].down;
        in_segment = 1; /* the raise updates the ranks' slots */
        mpi_pstate_agent_hold_all(&a->core);
        if (a->ucore_on)
                mpi_pstate_agent_hold_all(&a->ucore);
        in_segment = 0;
        sleep_until(now + pay);
}

static int futex_wait_until(struct mpi_pstate_seg_header *hdr, uint32_t v, uint64_t abs_ns)
{
        struct timespec ts = {.tv_sec = (time_t)(abs_ns / NS_PER_S),
                              .tv_nsec = (long)(abs_ns % NS_PER_S)};

        if (syscall(SYS_futex, &hdr->agent_futex, FUTEX_WAIT_BITSET, v, &ts, NULL,
                    FUTEX_BITSET_MATCH_ANY) == 0)
                return 0;
        return -errno;
}

static void sleep_until(uint64_t abs_ns)
{
        struct timespec ts = {.tv_sec = (time_t)(abs_ns / NS_PER_S),
                              .tv_nsec = (long)(abs_ns % NS_PER_S)};

        clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL);
}

int mpi_pstate_agentd_segment_open(struct agentd *a, char *err, size_t errlen)
{
        uid_t owner = a->o.uid;
        int rc;

        a->epfd = a->stopfd = -1;
        if (a->o.create) {
                rc = mpi_pstate_slot_create_segment(a->o.shm, a->o.create, a->o.uid, a->o.gid);
                if (rc) {
                        snprintf(err, errlen, "creating the segment %s: %s", a->o.shm,
                                 strerror(-rc));
                        return rc;
                }
                a->created = true;
                if (owner == (uid_t)-1)
                        owner = geteuid();
        }
        /* Whose processes the ranks are: fixed now, before the agent
         * leaves root. */
        a->rank_uid = owner == (uid_t)-1 ? getuid() : owner;
        /* The creator's slot count when known: the user may rewrite the
         * header between the plugin's fchown and this mapping, and what we
         * allocate and record must not follow. */
        rc = mpi_pstate_slot_map_segment_n(a->o.shm, 1, owner,
                                           a->o.nslots ? a->o.nslots : a->o.create, &a->seg);
        if (rc) {
                snprintf(err, errlen, "mapping the segment %s: %s", a->o.shm,
                         rc == -EPROTO ? "not a segment of this version, or not the slot count "
                                         "it was made with"
                                       : strerror(-rc));
                goto fail;
        }
        a->slots = calloc(a->seg.nslots, sizeof(*a->slots));
        a->obs = calloc(a->seg.nslots, sizeof(*a->obs));
        a->copy = malloc(sizeof(*a->copy));
        a->ann = calloc((a->seg.nslots + 63) / 64, sizeof(*a->ann));
        if (!a->slots || !a->obs || !a->copy || !a->ann) {
                snprintf(err, errlen, "out of memory for %u slots", a->seg.nslots);
                rc = -ENOMEM;
                goto fail;
        }
        for (unsigned i = 0; i < a->seg.nslots; i++)
                a->slots[i].pidfd = -1;
        a->pidfd_ok = true;
        return 0;
fail:
        if (a->created)
                unlink(a->o.shm);
        a->created = false;
        return rc;
}

/* A domain whose CPUs are all hardware threads of one core (sysfs
 * thread_siblings_list of its first CPU); a one-CPU domain is one core's
 * when the file cannot be read. */
static bool domain_per_core(const struct agentd *a, const struct agentd_domain *d)
{
        char path[512], buf[256];
        cpu_set_t sib, both;
        int first = -1;

        for (int c = 0; c < CPU_SETSIZE && first < 0; c++)
                if (CPU_ISSET(c, &d->related))
                        first = c;
        if (first < 0)
                return false;
        snprintf(path, sizeof(path), "%s/devices/system/cpu/cpu%d/topology/thread_siblings_list",
                 a->o.sysroot ? a->o.sysroot : "/sys", first);
        if (mpi_pstate_safeio_read_small(AT_FDCWD, path, buf, sizeof(buf), 0, 0) < 0 ||
            mpi_pstate_cpufreq_parse_cpulist(buf, &sib) != 0)
                return CPU_COUNT(&d->related) == 1;
        CPU_AND(&both, &d->related, &sib);
        return CPU_EQUAL(&both, &d->related);
}

int mpi_pstate_agentd_core_setup(struct agentd *a)
{
        const struct mpi_pstate_agent_ops ops = {op_mark,  op_still, op_unmark, op_clear,
                                                 op_lower, op_raise, op_now,    a};
        int rc =
            mpi_pstate_agent_init(&a->core, a->seg.nslots, a->ndom ? a->ndom : 1, a->scan_ns, &ops);

        if (rc)
                return rc;
        for (unsigned d = 0; d < a->core.ndomains; d++)
                a->core.domains[d].usable = d < a->ndom && a->dom[d].status == AGENTD_DOM_MANAGED;
        for (unsigned d = 0; d < a->ndom; d++)
                a->dom[d].per_core = domain_per_core(a, &a->dom[d]);
        return mpi_pstate_agentd_uncore_core_setup(a);
}

/* The end, while the segment is still mapped: every domain up, and the
 * ranks' last figures for the record. */
static void final_pass(struct agentd *a)
{
        if (sigsetjmp(bus_jmp, 0)) {
                in_segment = 0;
                a->seg_lost = true;
                mpi_pstate_agent_raise_all(&a->core, 0);
                if (a->ucore_on)
                        mpi_pstate_agent_raise_all(&a->ucore, 0);
                return;
        }
        in_segment = 1;
        if (!a->seg_lost) {
                mpi_pstate_agent_raise_all(&a->core, 1);
                if (a->ucore_on)
                        mpi_pstate_agent_raise_all(&a->ucore, 0);
                for (unsigned i = 0; i < a->seg.nslots; i++) {
                        const struct mpi_pstate_slot *s = mpi_pstate_slot_at(&a->seg, i);

                        slot_refresh(a, i, s, atomic_load(&s->state), atomic_load(&s->pid),
                                     mpi_pstate_agentd_mono_ns());
                }
        }
        in_segment = 0;
}

/* What the ranks do: the announced and waiting slots at every wake-up,
 * every slot when a full scan is due (which also decides whether pid
 * checks must stand in for pidfds). */
static void look(struct agentd *a, uint64_t wake, uint64_t *next_full, bool *kill_checks)
{
        bool full = wake >= *next_full;

        take_announced(a);
        scan(a, wake, full);
        if (full) {
                a->full_scans++;
                *next_full = wake + (a->core.scan_ns > a->gap_ns ? a->core.scan_ns : a->gap_ns);
                *kill_checks = need_kill_checks(a);
        }
}

/* The energy counters sampled when due; the next wake-up no later than
 * the next sample. */
static uint64_t rapl_due(struct agentd *a, uint64_t wake, uint64_t next)
{
        if (!a->rapl_interval_ns)
                return next;
        if (wake >= a->rapl_next_ns)
                mpi_pstate_agentd_rapl_sample(a);
        return next > a->rapl_next_ns ? a->rapl_next_ns : next;
}

/* Both decision cores for one wake-up; returns when to wake next.  The
 * budget spaces the polls (next_full) alone: a deadline the agent knows of,
 * announced or polled, is kept to the microsecond (docs/agent.md,
 * "Budgets"). */
static uint64_t decide(struct agentd *a, uint64_t wake, uint64_t next_full)
{
        uint64_t next;

        (void)mpi_pstate_agent_step(&a->core, a->obs, wake);
        next = a->core.next_event < next_full ? a->core.next_event : next_full;
        if (a->ucore_on) {
                (void)mpi_pstate_agent_step(&a->ucore, a->uobs, wake);
                if (a->ucore.next_event < next)
                        next = a->ucore.next_event;
        }
        return next;
}

/* Futex wake-ups beyond THROTTLE_WAKES in a window sleep out the window: a
 * user who wakes the agent in a loop gets a bounded share of its CPU. */
static void throttle(struct agentd *a, uint64_t *win_start, unsigned *early,
                     volatile sig_atomic_t *stop)
{
        uint64_t now = mpi_pstate_agentd_mono_ns();

        if (now - *win_start >= THROTTLE_WINDOW_NS) {
                *win_start = now;
                *early = 0;
        }
        if (++*early > THROTTLE_WAKES && !*stop) {
                a->throttled++;
                sleep_until(*win_start + THROTTLE_WINDOW_NS);
        }
}

/* Scan, act, sleep, until told to stop or done.  A SIGBUS inside the
 * segment jumps out of here into mpi_pstate_agentd_run(). */
static void loop(struct agentd *a, volatile sig_atomic_t *stop)
{
        uint64_t win_start = 0, next_full = 0;
        unsigned early = 0;
        bool kill_checks = false;

        while (!*stop) {
                struct mpi_pstate_seg_header *hdr = a->seg.hdr;
                uint64_t wake, next;
                uint32_t v;
                bool done, pending;
                int rc;

                in_segment = 1;
                atomic_store(&hdr->agent_wake_ns, 0); /* awake: no rank need wake us */
                /* Read before the scan: a wake-up during the scan makes the
                 * wait below return at once. */
                v = atomic_load_explicit(&hdr->agent_futex, memory_order_acquire);
                wake = mpi_pstate_agentd_mono_ns();
                a->wakeups++;
                look(a, wake, &next_full, &kill_checks);
                next = decide(a, wake, next_full);
                done = a->o.exit_when_done && all_done(a);
                in_segment = 0;
                if (done) {
                        a->exit_reason = "done";
                        return;
                }
                budget_adjust(a, wake);
                next = rapl_due(a, wake, next);
                if (kill_checks && next > wake + PROC_CHECK_NS)
                        next = wake + PROC_CHECK_NS;
                cpu_cap(a);
                if (*stop)
                        return;
                /* Ranks whose deadline comes later need not wake us; one
                 * that announced before this store but after the map was
                 * taken is seen by the load (seq_cst on both sides,
                 * mpi_pstate_slot_announce). */
                in_segment = 1;
                atomic_store(&hdr->agent_wake_ns, next);
                pending = announce_pending(a);
                in_segment = 0;
                if (pending) {
                        a->eagain++; /* as if the futex had moved: pass again */
                        continue;
                }
                rc = futex_wait_until(hdr, v, next);
                if (rc == -ETIMEDOUT) {
                        a->timeouts++;
                        continue;
                }
                if (rc == 0)
                        a->woken++;
                else if (rc == -EAGAIN)
                        a->eagain++;
                throttle(a, &win_start, &early, stop);
        }
}

int mpi_pstate_agentd_run(struct agentd *a, volatile sig_atomic_t *stop)
{
        struct sigaction sa;

        memset(&sa, 0, sizeof(sa));
        sa.sa_sigaction = on_sigbus;
        sa.sa_flags = SA_SIGINFO | SA_NODEFER;
        sigaction(SIGBUS, &sa, NULL);
        if (sigsetjmp(bus_jmp, 0)) {
                in_segment = 0;
                a->seg_lost = true;
                mpi_pstate_agentd_log(LOG_ERR,
                                      "the segment %s was shrunk under the agent: every "
                                      "domain goes back up, the ranks are no longer followed",
                                      a->o.shm);
                mpi_pstate_agent_raise_all(&a->core, 0);
                if (a->ucore_on)
                        mpi_pstate_agent_raise_all(&a->ucore, 0);
                a->exit_reason = "segment_lost";
                return 0;
        }
        loop(a, stop);
        if (!a->exit_reason)
                a->exit_reason = "signal";
        final_pass(a);
        return 0;
}

void mpi_pstate_agentd_teardown(struct agentd *a)
{
        watcher_stop(a);
        for (unsigned i = 0; a->slots && i < a->seg.nslots; i++)
                if (a->slots[i].pidfd >= 0)
                        close(a->slots[i].pidfd);
        if (a->seg.hdr)
                mpi_pstate_slot_unmap_segment(&a->seg);
        if (a->created && !a->o.keep_shm)
                unlink(a->o.shm);
        mpi_pstate_agent_free(&a->core);
        mpi_pstate_agentd_uncore_free(a);
        free(a->slots);
        free(a->obs);
        free(a->copy);
        free(a->ann);
        a->ann = NULL;
        free(a->dom);
        free(a->pol2dom);
        mpi_pstate_cpufreq_free(a->node);
        a->slots = NULL;
        a->obs = NULL;
        a->copy = NULL;
        a->dom = NULL;
        a->pol2dom = NULL;
        a->node = NULL;
}
