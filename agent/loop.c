/* SPDX-License-Identifier: BSD-3-Clause */
/* The agent's main loop: look at the ranks (slots.c), let both decision
 * cores act (coreops.c carries it out), keep to the CPU budget and
 * ceiling (budget.c), sleep on the segment's futex until the next
 * deadline; and the end, every domain up, while the segment is mapped.
 *
 * A user can shrink the segment's file under the mapping: the next access
 * raises SIGBUS, which is caught while the loop is inside the segment, and
 * the agent then puts every domain back up and stops using the segment. */
#include <errno.h>
#include <linux/futex.h>
#include <setjmp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "agentd.h"

#define NS_PER_S UINT64_C(1000000000)
/* A flood of wake-ups (a rank bumping the futex in a loop) is cut to at
 * most THROTTLE_WAKES early wake-ups per window; the rest of the window is
 * slept through.  A legitimate burst (a barrier releasing many clocked-down
 * ranks at once) needs a handful. */
#define THROTTLE_WINDOW_NS UINT64_C(10000000)
#define THROTTLE_WAKES 50u

static sigjmp_buf bus_jmp;
static volatile sig_atomic_t in_segment;

static void on_sigbus(int sig, siginfo_t *info, void *uc)
{
        (void)info;
        (void)uc;
        if (in_segment)
                siglongjmp(bus_jmp, 1);
        signal(sig, SIG_DFL);
        raise(sig);
}

void mpi_pstate_agentd_poke(struct agentd *a)
{
        if (a && !a->seg_lost)
                mpi_pstate_agentd_wake(a->seg.hdr);
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

/* A pass that left the CPU ceiling's bucket in debt (budget.c) sleeps,
 * deaf to the futex, until the debt is paid.  Before such a sleep every
 * domain it lowered goes back up: a rank leaving its wait during the sleep
 * would otherwise compute clocked down until the end of it (bench/security
 * measured restore p99 at 985 us against 119 us before the ceiling, on an
 * honest load that reached it), so the ceiling costs the step savings,
 * never speed.  The waits it raised stay up until they end (hold_all):
 * lowered again after the sleep, a long wait would pay a transition per
 * sleep (13 per 10 ms call at threshold 0,
 * tests/integration/test_agent_daemon.py). */
static void cpu_cap(struct agentd *a)
{
        uint64_t now = mpi_pstate_agentd_mono_ns();
        uint64_t pay = mpi_pstate_agentd_cap_debt_ns(&a->budget, now);

        if (!pay)
                return;
        for (unsigned d = 0; d < a->core.ndomains; d++)
                a->budget.capped_raises += a->core.domains[d].down;
        in_segment = 1; /* the raise updates the ranks' slots */
        mpi_pstate_agent_hold_all(&a->core);
        if (a->ucore_on)
                mpi_pstate_agent_hold_all(&a->ucore);
        in_segment = 0;
        sleep_until(now + pay);
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

                        mpi_pstate_agentd_slot_refresh(a, i, s, atomic_load(&s->state),
                                                       atomic_load(&s->pid),
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

        mpi_pstate_agentd_take_announced(a);
        mpi_pstate_agentd_scan(a, wake, full);
        if (full) {
                a->full_scans++;
                *next_full = wake + (a->core.scan_ns > a->budget.gap_ns ? a->core.scan_ns
                                                                        : a->budget.gap_ns);
                *kill_checks = mpi_pstate_agentd_need_pid_checks(a);
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
                done = a->o.exit_when_done && mpi_pstate_agentd_all_done(a);
                in_segment = 0;
                if (done) {
                        a->exit_reason = "done";
                        return;
                }
                in_segment = 1; /* it may turn the ranks' announcements off */
                mpi_pstate_agentd_budget_adjust(&a->budget, hdr, wake, a->timeouts);
                in_segment = 0;
                next = rapl_due(a, wake, next);
                if (kill_checks && next > wake + AGENTD_PROC_CHECK_NS)
                        next = wake + AGENTD_PROC_CHECK_NS;
                cpu_cap(a);
                if (*stop)
                        return;
                /* Ranks whose deadline comes later need not wake us; one
                 * that announced before this store but after the map was
                 * taken is seen by the load (seq_cst on both sides,
                 * mpi_pstate_slot_announce). */
                in_segment = 1;
                atomic_store(&hdr->agent_wake_ns, next);
                pending = mpi_pstate_agentd_announce_pending(a);
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
        mpi_pstate_agentd_watcher_stop(&a->watch);
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
