/* SPDX-License-Identifier: BSD-3-Clause */
/* The agent's CPU: the budget that spaces its timer wake-ups, the switch
 * that turns the ranks' announcements off when it nears its ceiling, and
 * the ceiling itself, a token bucket of CPU time (docs/agent.md,
 * "Budgets").  Knows the agent's own clocks and the segment header's
 * announce_off word, nothing of slots or domains. */
#include <time.h>

#include "agentd.h"

#define NS_PER_S UINT64_C(1000000000)
/* The budget is checked this often (the first time sooner, so that a slow
 * platform does not pay a whole second of too frequent scans). */
#define BUDGET_PERIOD_NS NS_PER_S
#define BUDGET_FIRST_NS (NS_PER_S / 10)
#define ANNOUNCE_HOLD_MAX 64u /* budget periods */
#define CAP_WINDOW_NS (NS_PER_S / 10)

static uint64_t process_cpu_ns(void)
{
        struct timespec ts;

        clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
        return (uint64_t)ts.tv_sec * NS_PER_S + (uint64_t)ts.tv_nsec;
}

/* The timer gap that keeps the last period's CPU share near 80 % of the
 * budget, logged when it changes. */
static void gap_adjust(struct agentd_budget *b, uint64_t used, uint64_t wall, uint64_t timers)
{
        uint64_t want;

        b->cpu_sum += used;
        b->timer_sum += timers;
        want = mpi_pstate_agent_budget_gap(b->gap_ns, wall / timers, used, wall, b->budget_ppm,
                                           b->scan_ns, AGENTD_SCAN_MIN_NS, AGENTD_SCAN_MAX_NS);
        if (want != b->gap_ns) {
                mpi_pstate_agentd_log(
                    LOG_DEBUG,
                    "CPU %llu ppm of a core over %llu timer wake-ups: timer "
                    "gap %llu -> %llu us",
                    (unsigned long long)(used * 1000000u / wall), (unsigned long long)timers,
                    (unsigned long long)(b->gap_ns / 1000u), (unsigned long long)(want / 1000u));
                b->gap_ns = want;
                b->adjusts++;
        }
        if (want > b->gap_max_ns)
                b->gap_max_ns = want;
}

/* Reactions (announced waits, their deadlines, their transitions) are
 * what savings cost; they are bought while the agent stays under three
 * quarters of its hard ceiling.  Past that, ranks stop announcing and the
 * polls, spaced by the budget, find the waits, until the agent is back
 * under half that: the ceiling, which holds every wait up, is not what
 * limits a busy node.  Not half the ceiling: on the lab's FUSE sysfs (a
 * write 150-300 us) a 2-rank job crossed it, and announcements then went
 * off for a job that the ceiling never held up. */
static void announce_adjust(struct agentd_budget *b, struct mpi_pstate_seg_header *hdr,
                            uint64_t now, uint64_t used, uint64_t wall)
{
        uint64_t share_ppm = (uint64_t)((unsigned __int128)used * 1000000u / wall);
        uint64_t off_ppm = b->cap_ppm * AGENTD_ANNOUNCE_OFF_PCT / 100u;
        bool off = atomic_load_explicit(&hdr->announce_off, memory_order_relaxed) != 0;

        /* A node whose ranks are over it when announcing and under half of
         * it when not would switch every other period (128 simulated ranks:
         * 15 times in 30 s): each turn off holds twice as long as the last,
         * up to a minute, and each period spent announcing under the limit
         * halves the hold again. */
        if (!off && share_ppm > off_ppm) {
                off = true;
                b->announce_offs++;
                b->announce_hold = b->announce_hold ? 2 * b->announce_hold : 1u;
                if (b->announce_hold > ANNOUNCE_HOLD_MAX)
                        b->announce_hold = ANNOUNCE_HOLD_MAX;
                b->announce_hold_until_ns = now + (uint64_t)b->announce_hold * BUDGET_PERIOD_NS;
        } else if (off && share_ppm < off_ppm / 2 && now >= b->announce_hold_until_ns) {
                off = false;
        } else if (!off) {
                b->announce_hold /= 2;
        }
        atomic_store_explicit(&hdr->announce_off, off, memory_order_relaxed);
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
void mpi_pstate_agentd_budget_adjust(struct agentd_budget *b, struct mpi_pstate_seg_header *hdr,
                                     uint64_t now, uint64_t timeouts)
{
        uint64_t cpu, used, wall, timers;

        if (!b->budget_ppm || now < b->next_ns)
                return;
        cpu = process_cpu_ns();
        timers = timeouts - b->timers0;
        if (b->t0 && now > b->t0 && timers) {
                used = cpu - b->cpu0;
                wall = now - b->t0;
                gap_adjust(b, used, wall, timers);
                /* not judged on the first, short period: it holds the start-up */
                if (b->cap_ppm && wall >= BUDGET_PERIOD_NS / 2)
                        announce_adjust(b, hdr, now, used, wall);
        }
        b->next_ns = now + (b->t0 ? BUDGET_PERIOD_NS : BUDGET_FIRST_NS);
        b->t0 = now;
        b->cpu0 = cpu;
        b->timers0 = timeouts;
}

/* The hard ceiling, whatever the ranks write: CPU time (the process's,
 * watcher thread included), not wake-ups, is metered by a token bucket
 * that fills at cap_ppm of a core and holds at most one window's worth
 * (a legitimate burst); a pass of the loop that leaves it in debt is
 * answered with the wall time that pays the debt back, which the loop
 * sleeps deaf to the futex (loop.c).  A rank toggling its slot and bumping
 * the futex in a loop therefore costs the node at most cap_ppm of a core
 * over any window, paid by the step's own CPUs (the agent is confined to
 * them). */
uint64_t mpi_pstate_agentd_cap_debt_ns(struct agentd_budget *b, uint64_t now)
{
        const int64_t burst = (int64_t)(CAP_WINDOW_NS / 1000000u * b->cap_ppm);
        uint64_t cpu, pay;

        if (!b->cap_ppm)
                return 0;
        cpu = process_cpu_ns();
        if (b->cap_t0) {
                b->cap_credit +=
                    (int64_t)((unsigned __int128)(now - b->cap_t0) * b->cap_ppm / 1000000u);
                b->cap_credit -= (int64_t)(cpu - b->cap_cpu0);
                if (b->cap_credit > burst)
                        b->cap_credit = burst;
        } else {
                b->cap_credit = burst;
        }
        b->cap_t0 = now;
        b->cap_cpu0 = cpu;
        if (b->cap_credit >= 0)
                return 0;
        pay = (uint64_t)((unsigned __int128)(uint64_t)(-b->cap_credit) * 1000000u / b->cap_ppm);
        if (!pay)
                pay = 1; /* in debt however little: the loop holds and sleeps */
        b->capped++;
        b->capped_ns += pay;
        return pay;
}
