/* SPDX-License-Identifier: BSD-3-Clause */
/* The node agent's decision core (common/agent.h) against scripted fakes:
 * every side effect is appended to a log ("M0" mark rank 0, "L1" lower
 * domain 1, ...) so that each case asserts the exact sequence, and the
 * fake slots can change under the core at the moments the protocol must
 * cope with (a rank leaving between scan and mark, or during the write). */
#include <check.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "agent.h"
#include "check_main.h"

#define MAXR 128

static struct fake {
        char log[16384];
        uint64_t now;               /* the clock */
        uint64_t tick;              /* added to the clock at each write (write cost) */
        uint64_t since[MAXR];       /* the slots' wait_since as the ranks see it */
        int flag[MAXR];             /* clocked_down */
        uint64_t slot_down[MAXR];   /* down_ns added by unmark */
        int leave_on_lower;         /* rank that leaves during the next lower write, -1 */
        int fail_lower, fail_raise; /* errno for the next writes, 0 = succeed */
        unsigned lowers, raises;
} fk;

static void logf_(const char *fmt, unsigned v)
{
        size_t n = strlen(fk.log);

        snprintf(fk.log + n, sizeof(fk.log) - n, "%s", n ? " " : "");
        n = strlen(fk.log);
        snprintf(fk.log + n, sizeof(fk.log) - n, fmt, v);
}

static int op_mark(void *ctx, unsigned r, uint64_t since)
{
        (void)ctx;
        logf_("M%u", r);
        fk.flag[r] = 1;
        if (since && fk.since[r] == since)
                return 1;
        fk.flag[r] = 0;
        return 0;
}

static int op_still(void *ctx, unsigned r, uint64_t since)
{
        (void)ctx;
        logf_("S%u", r);
        return since && fk.since[r] == since;
}

static void op_unmark(void *ctx, unsigned r, uint64_t down_ns)
{
        (void)ctx;
        logf_("U%u", r);
        fk.flag[r] = 0;
        fk.slot_down[r] += down_ns;
}

static void op_clear(void *ctx, unsigned r)
{
        (void)ctx;
        logf_("C%u", r);
        fk.flag[r] = 0;
}

static int op_lower(void *ctx, unsigned d)
{
        (void)ctx;
        logf_("L%u", d);
        fk.now += fk.tick;
        if (fk.fail_lower)
                return -fk.fail_lower;
        fk.lowers++;
        if (fk.leave_on_lower >= 0) {
                fk.since[fk.leave_on_lower] = 0;
                fk.leave_on_lower = -1;
        }
        return 0;
}

static int op_raise(void *ctx, unsigned d)
{
        (void)ctx;
        logf_("R%u", d);
        fk.now += fk.tick;
        if (fk.fail_raise)
                return -fk.fail_raise;
        fk.raises++;
        return 0;
}

static uint64_t op_now(void *ctx)
{
        (void)ctx;
        return fk.now;
}

static const struct mpi_pstate_agent_ops ops = {op_mark,  op_still, op_unmark, op_clear,
                                                op_lower, op_raise, op_now,    NULL};

static struct mpi_pstate_agent_core core;
static struct mpi_pstate_agent_obs obs[MAXR];

#define US UINT64_C(1000)
#define MS UINT64_C(1000000)
#define THR (500 * US)

static void reset(void)
{
        memset(&fk, 0, sizeof(fk));
        fk.leave_on_lower = -1;
        fk.now = 1000 * MS;
        memset(obs, 0, sizeof(obs));
}

static void setup_core(unsigned nranks, unsigned ndomains)
{
        reset();
        ck_assert_int_eq(mpi_pstate_agent_init(&core, nranks, ndomains, 5 * MS, &ops), 0);
}

/* two ranks, two domains, no rank in any domain yet */
static void setup2(void)
{
        setup_core(2, 2);
}

static void teardown_core(void)
{
        mpi_pstate_agent_free(&core);
}

static void put(unsigned r, unsigned d)
{
        uint64_t m[MPI_PSTATE_AGENT_MASK_WORDS] = {0};

        m[d / 64] |= UINT64_C(1) << (d % 64);
        ck_assert_int_eq(mpi_pstate_agent_set_domains(&core, r, m), 0);
}

/* Rank r enters a wait at the current time (its slot clock = ns here). */
static void enter(unsigned r, uint64_t since_ns, uint64_t thr)
{
        fk.since[r] = since_ns;
        obs[r].live = 1;
        obs[r].lowerable = 1;
        obs[r].since = since_ns;
        obs[r].deadline_ns = since_ns + thr;
}

static void leave(unsigned r)
{
        fk.since[r] = 0;
        obs[r].since = 0;
}

static void running(unsigned r)
{
        obs[r].live = 1;
        obs[r].lowerable = 1;
}

static uint64_t step(void)
{
        return mpi_pstate_agent_step(&core, obs, fk.now);
}

/* ---- histogram and helpers ---- */

START_TEST(hist_buckets_and_quantiles)
{
        struct mpi_pstate_agent_hist h;

        memset(&h, 0, sizeof(h));
        ck_assert_uint_eq(mpi_pstate_agent_hist_quantile(&h, 500), 0);
        mpi_pstate_agent_hist_add(&h, 0);
        mpi_pstate_agent_hist_add(&h, 1);
        mpi_pstate_agent_hist_add(&h, 3);
        mpi_pstate_agent_hist_add(&h, 1000);
        ck_assert_uint_eq(h.bucket[0], 1);
        ck_assert_uint_eq(h.bucket[1], 1);
        ck_assert_uint_eq(h.bucket[2], 1);
        ck_assert_uint_eq(h.bucket[10], 1); /* 512 <= 1000 < 1024 */
        ck_assert_uint_eq(h.count, 4);
        ck_assert_uint_eq(h.sum, 1004);
        ck_assert_uint_eq(h.max, 1000);
        ck_assert_uint_eq(mpi_pstate_agent_hist_quantile(&h, 250), 0);
        ck_assert_uint_eq(mpi_pstate_agent_hist_quantile(&h, 500), 1);
        ck_assert_uint_eq(mpi_pstate_agent_hist_quantile(&h, 750), 3);
        /* the upper bound of the top bucket is capped by the largest value */
        ck_assert_uint_eq(mpi_pstate_agent_hist_quantile(&h, 990), 1000);
        ck_assert_uint_eq(mpi_pstate_agent_hist_quantile(&h, 5000), 1000);
        memset(&h, 0, sizeof(h));
        for (int i = 0; i < 99; i++)
                mpi_pstate_agent_hist_add(&h, 10);
        mpi_pstate_agent_hist_add(&h, UINT64_MAX);
        ck_assert_uint_eq(h.bucket[63], 1);
        ck_assert_uint_eq(h.sum, UINT64_MAX); /* saturates */
        ck_assert_uint_eq(mpi_pstate_agent_hist_quantile(&h, 990), 15);
        ck_assert_uint_eq(mpi_pstate_agent_hist_quantile(&h, 1000), UINT64_MAX);
}
END_TEST

START_TEST(ticks_conversion)
{
        /* 2.5 GHz TSC: 2500 ticks per microsecond */
        const uint64_t tps = 2500000000u;

        ck_assert_uint_eq(mpi_pstate_agent_ticks_len_ns(2500, tps), 1000);
        ck_assert_uint_eq(mpi_pstate_agent_ticks_len_ns(2500, 0), 2500); /* 0: ns */
        ck_assert_uint_eq(mpi_pstate_agent_ticks_len_ns(UINT64_MAX, 1), UINT64_MAX);
        /* an entry 1 ms of ticks before the reference */
        ck_assert_uint_eq(
            mpi_pstate_agent_ticks_to_ns(10000000u - 2500000u, 10000000u, 5 * MS, tps), 4 * MS);
        ck_assert_uint_eq(mpi_pstate_agent_ticks_to_ns(10000000u + 2500u, 10000000u, 5 * MS, tps),
                          5 * MS + 1000);
        ck_assert_uint_eq(mpi_pstate_agent_ticks_to_ns(0, UINT64_MAX, 5 * MS, tps), 0);
        ck_assert_uint_eq(mpi_pstate_agent_ticks_to_ns(UINT64_MAX, 0, UINT64_MAX - 5, 1),
                          UINT64_MAX);
        /* monotonic slots: ticks are ns */
        ck_assert_uint_eq(mpi_pstate_agent_ticks_to_ns(777, 1000, 1000, 1000000000u), 777);
}
END_TEST

START_TEST(scan_interval)
{
        ck_assert_uint_eq(mpi_pstate_agent_scan_ns(500 * US, 50 * US, 100 * MS), 500 * US);
        ck_assert_uint_eq(mpi_pstate_agent_scan_ns(0, 50 * US, 100 * MS), 50 * US);
        ck_assert_uint_eq(mpi_pstate_agent_scan_ns(10000 * MS, 50 * US, 100 * MS), 100 * MS);
}
END_TEST

/* 0.5 % budget (aim 0.4 %), 25 us of CPU per wake-up, 1 s periods */
START_TEST(budget_gap)
{
        const uint64_t B = 5000, MIN = 50 * US, MAX = 100 * MS;

        /* scans every 500 us cost 5 %: at once the spacing of 0.4 % */
        ck_assert_uint_eq(mpi_pstate_agent_budget_gap(0, 500 * US, 2000 * 25 * US, 1000 * MS, B,
                                                      500 * US, MIN, MAX),
                          6250 * US);
        /* held there: 160 wake-ups of 25 us are the aim */
        ck_assert_uint_eq(mpi_pstate_agent_budget_gap(6250 * US, 6250 * US, 160 * 25 * US,
                                                      1000 * MS, B, 500 * US, MIN, MAX),
                          6250 * US);
        /* scans every 20 ms cost 0.125 %: no spacing (the deadlines were
         * spaced 6.25 ms after each scan before) */
        ck_assert_uint_eq(
            mpi_pstate_agent_budget_gap(0, 20 * MS, 50 * 25 * US, 1000 * MS, B, 20 * MS, MIN, MAX),
            0);
        /* under with a spacing: smaller, at most half off per period */
        ck_assert_uint_eq(
            mpi_pstate_agent_budget_gap(8 * MS, 8 * MS, 2 * MS, 1000 * MS, B, 500 * US, MIN, MAX),
            4 * MS);
        ck_assert_uint_eq(
            mpi_pstate_agent_budget_gap(8 * MS, 8 * MS, 1 * MS, 1000 * MS, B, 500 * US, MIN, MAX),
            4 * MS);
        /* ... and none once it is a quarter of the scan interval */
        ck_assert_uint_eq(
            mpi_pstate_agent_budget_gap(8 * MS, 8 * MS, 1 * MS, 1000 * MS, B, 20 * MS, MIN, MAX),
            0);
        /* over with a spacing, timers rarer than it (deadlines apart) */
        ck_assert_uint_eq(
            mpi_pstate_agent_budget_gap(1 * MS, 2 * MS, 8 * MS, 1000 * MS, B, 500 * US, MIN, MAX),
            4 * MS);
        ck_assert_uint_eq(
            mpi_pstate_agent_budget_gap(0, 500 * US, 900 * MS, 1000 * MS, B, 50 * US, MIN, MAX),
            MAX);
        ck_assert_uint_eq(
            mpi_pstate_agent_budget_gap(0, 500 * US, 900 * MS, 1000 * MS, 0, 500 * US, MIN, MAX),
            0);
        ck_assert_uint_eq(
            mpi_pstate_agent_budget_gap(0, 500 * US, 900 * MS, 0, B, 500 * US, MIN, MAX), 0);
}
END_TEST

START_TEST(init_rejects)
{
        struct mpi_pstate_agent_core c;
        uint64_t m[MPI_PSTATE_AGENT_MASK_WORDS] = {0};

        ck_assert_int_eq(mpi_pstate_agent_init(&c, 1, 0, MS, &ops), -EINVAL);
        ck_assert_int_eq(mpi_pstate_agent_init(&c, 1, MPI_PSTATE_AGENT_MAX_DOMAINS + 1, MS, &ops),
                         -EINVAL);
        ck_assert_int_eq(mpi_pstate_agent_init(&c, 1, 1, 0, &ops), -EINVAL);
        ck_assert_int_eq(mpi_pstate_agent_init(&c, 2, 70, MS, &ops), 0);
        ck_assert_int_eq(mpi_pstate_agent_set_domains(&c, 2, m), -EINVAL);
        /* bits past ndomains are dropped */
        m[1] = ~UINT64_C(0);
        ck_assert_int_eq(mpi_pstate_agent_set_domains(&c, 0, m), 0);
        ck_assert_uint_eq(c.ranks[0].mask[1], (UINT64_C(1) << 6) - 1);
        ck_assert_uint_eq(c.ranks[0].mask[2], 0);
        mpi_pstate_agent_free(&c);
}
END_TEST

/* ---- one rank, one domain ---- */

START_TEST(sleeps_until_deadline_then_lowers)
{
        uint64_t t0 = fk.now, next;

        put(0, 0);
        running(0);
        next = step();
        ck_assert_uint_eq(next, t0 + 5 * MS); /* nothing waits: the scan interval */
        enter(0, t0, THR);
        fk.now += 100 * US;
        next = step();
        ck_assert_str_eq(fk.log, "");
        ck_assert_uint_eq(next, t0 + THR); /* wakes exactly at the deadline */
        fk.now = t0 + THR + 7 * US;        /* woke 7 us late */
        step();
        ck_assert_str_eq(fk.log, "M0 L0 S0");
        ck_assert_int_eq(fk.flag[0], 1);
        ck_assert(core.domains[0].down);
        ck_assert_uint_eq(core.ranks[0].drop_late_ns.count, 1);
        ck_assert_uint_eq(core.ranks[0].drop_late_ns.max, 7 * US);
        /* still waiting: nothing more to do, next wake is a plain scan */
        fk.log[0] = '\0';
        next = step();
        ck_assert_str_eq(fk.log, "");
        ck_assert_uint_eq(next, fk.now + 5 * MS);
}
END_TEST

/* What a caller spacing its own polls must still wake for, so that an
 * announced wait is lowered on time: the deadline of a known wait, never
 * the scan interval; nothing once it is lowered or when nothing waits. */
START_TEST(next_event_is_a_deadline_or_none)
{
        uint64_t t0 = fk.now;

        put(0, 0);
        running(0);
        step();
        ck_assert_uint_eq(core.next_event, UINT64_MAX);
        enter(0, t0, THR);
        fk.now += 100 * US;
        step();
        ck_assert_uint_eq(core.next_event, t0 + THR);
        fk.now = t0 + THR;
        step();
        ck_assert(core.domains[0].down);
        ck_assert_uint_eq(core.next_event, UINT64_MAX);
}
END_TEST

START_TEST(leave_raises_and_accounts)
{
        uint64_t t0 = fk.now, wake;

        fk.tick = 2 * US; /* each write costs 2 us */
        put(0, 0);
        enter(0, t0, THR);
        fk.now = t0 + THR;
        step();
        ck_assert_str_eq(fk.log, "M0 L0 S0");
        fk.log[0] = '\0';
        fk.now += 10 * MS;
        leave(0); /* the rank left and woke the agent */
        wake = fk.now;
        fk.now += 3 * US; /* scanning took 3 us */
        mpi_pstate_agent_step(&core, obs, wake);
        ck_assert_str_eq(fk.log, "R0 U0");
        ck_assert_int_eq(fk.flag[0], 0);
        ck_assert(!core.domains[0].down);
        ck_assert_uint_eq(core.domains[0].transitions, 1);
        ck_assert_uint_eq(core.ranks[0].transitions, 1);
        ck_assert_uint_eq(core.ranks[0].restore_ns.count, 1);
        ck_assert_uint_eq(core.ranks[0].restore_ns.max, 3 * US);
        /* down from the start of the lowering write to the start of the raise */
        ck_assert_uint_eq(core.ranks[0].down_ns, 10 * MS + 5 * US);
        ck_assert_uint_eq(fk.slot_down[0], 10 * MS + 5 * US);
        ck_assert_uint_eq(core.domains[0].down_ns, 10 * MS + 5 * US);
        ck_assert_uint_eq(core.stats.write_ns.count, 2);
        ck_assert_uint_eq(core.stats.write_ns.max, 2 * US);
}
END_TEST

START_TEST(short_calls_never_transition)
{
        uint64_t t = fk.now;

        put(0, 0);
        running(0);
        /* a thousand calls of 499 us, each seen twice by the agent */
        for (int i = 0; i < 1000; i++) {
                enter(0, t, THR);
                fk.now = t + 1;
                ck_assert_uint_eq(step(), t + THR);
                fk.now = t + THR - 1;
                step();
                leave(0);
                t += THR;
                fk.now = t;
                step();
        }
        ck_assert_str_eq(fk.log, "");
        ck_assert_uint_eq(fk.lowers + fk.raises, 0);
}
END_TEST

START_TEST(threshold_zero_switches_every_call)
{
        put(0, 0);
        running(0);
        for (int i = 0; i < 3; i++) {
                enter(0, fk.now, 0);
                step(); /* seen: due at once */
                fk.now += MS;
                leave(0);
                step();
        }
        ck_assert_str_eq(fk.log, "M0 L0 S0 R0 U0 M0 L0 S0 R0 U0 M0 L0 S0 R0 U0");
        ck_assert_uint_eq(core.ranks[0].transitions, 3);
}
END_TEST

START_TEST(new_wait_after_leave_is_a_new_deadline)
{
        uint64_t t0 = fk.now, next;

        put(0, 0);
        enter(0, t0, THR);
        fk.now = t0 + THR;
        step();
        /* left and entered the next wait before the agent looked */
        fk.now += MS;
        enter(0, fk.now, THR);
        next = step();
        ck_assert_str_eq(fk.log, "M0 L0 S0 R0 U0");
        ck_assert_uint_eq(next, fk.now + THR);
        fk.now = next;
        step();
        ck_assert_str_eq(fk.log, "M0 L0 S0 R0 U0 M0 L0 S0");
}
END_TEST

/* ---- the protocol's races ---- */

START_TEST(left_before_mark_no_write)
{
        put(0, 0);
        put(1, 0);
        enter(0, fk.now, THR);
        enter(1, fk.now, THR);
        fk.now += THR;
        fk.since[1] = 0; /* rank 1 left after the scan, before the mark */
        step();
        /* rank 0's mark is dropped again, nothing is written */
        ck_assert_str_eq(fk.log, "M0 M1 C0");
        ck_assert_int_eq(fk.flag[0], 0);
        ck_assert_int_eq(fk.flag[1], 0);
        ck_assert_uint_eq(fk.lowers, 0);
        ck_assert_uint_eq(core.stats.leaves_seen, 1);
}
END_TEST

START_TEST(left_during_write_raises_at_once)
{
        put(0, 0);
        enter(0, fk.now, THR);
        fk.now += THR;
        fk.leave_on_lower = 0;
        step();
        ck_assert_str_eq(fk.log, "M0 L0 S0 R0 U0");
        ck_assert(!core.domains[0].down);
        ck_assert_int_eq(fk.flag[0], 0);
        ck_assert_uint_eq(core.domains[0].aborted, 1);
        ck_assert_uint_eq(core.domains[0].transitions, 1);
        /* nothing left to do afterwards */
        fk.log[0] = '\0';
        leave(0);
        step();
        ck_assert_str_eq(fk.log, "");
}
END_TEST

START_TEST(dead_rank_restored_at_once)
{
        put(0, 0);
        enter(0, fk.now, THR);
        fk.now += THR;
        step();
        /* SIGKILL inside the wait: the slot still says waiting */
        obs[0].live = 0;
        step();
        ck_assert_str_eq(fk.log, "M0 L0 S0 R0 U0");
        ck_assert(!core.domains[0].down);
        /* and never lowered again while it is dead */
        fk.now += 10 * MS;
        step();
        ck_assert_str_eq(fk.log, "M0 L0 S0 R0 U0");
}
END_TEST

START_TEST(profile_rank_or_domain_never_lowered)
{
        put(0, 0);
        put(1, 1);
        enter(0, fk.now, THR);
        enter(1, fk.now, THR);
        obs[0].lowerable = 0;       /* the rank runs in profile mode */
        core.domains[1].usable = 0; /* the agent does not own domain 1 */
        fk.now += 10 * THR;
        step();
        ck_assert_str_eq(fk.log, "");
}
END_TEST

START_TEST(domain_without_ranks_never_lowered)
{
        uint64_t next;

        put(0, 0);
        enter(0, fk.now, THR);
        fk.now += 10 * THR;
        next = step();
        ck_assert_str_eq(fk.log, "M0 L0 S0"); /* domain 1 has nobody */
        ck_assert_uint_eq(next, fk.now + 5 * MS);
}
END_TEST

/* ---- shared domains ---- */

START_TEST(shared_domain_needs_all_ranks)
{
        uint64_t t0 = fk.now, next;

        put(0, 0);
        put(1, 0); /* SMT siblings, or a package-wide policy */
        running(1);
        enter(0, t0, THR);
        fk.now = t0 + 10 * MS;
        next = step();
        ck_assert_str_eq(fk.log, ""); /* rank 1 computes */
        ck_assert_uint_eq(next, fk.now + 5 * MS);
        enter(1, fk.now, THR);
        next = step();
        ck_assert_uint_eq(next, fk.now + THR); /* the later of the two deadlines */
        fk.now = next;
        step();
        ck_assert_str_eq(fk.log, "M0 M1 L0 S0 S1");
        ck_assert_int_eq(fk.flag[0] + fk.flag[1], 2);
        ck_assert_uint_eq(core.ranks[0].drop_late_ns.max, 0);
        /* one leaves: up for both, both flags cleared, one restore latency */
        fk.now += MS;
        leave(1);
        step();
        ck_assert_str_eq(fk.log, "M0 M1 L0 S0 S1 R0 U0 U1");
        ck_assert_int_eq(fk.flag[0] + fk.flag[1], 0);
        ck_assert_uint_eq(core.ranks[1].restore_ns.count, 1);
        ck_assert_uint_eq(core.ranks[0].restore_ns.count, 0);
        ck_assert_uint_eq(core.ranks[0].transitions, 1);
        ck_assert_uint_eq(core.ranks[1].transitions, 1);
        /* rank 0 still waits but rank 1 does not: stays up */
        fk.now += 10 * MS;
        step();
        ck_assert_str_eq(fk.log, "M0 M1 L0 S0 S1 R0 U0 U1");
}
END_TEST

START_TEST(unpinned_rank_holds_every_domain)
{
        uint64_t both[MPI_PSTATE_AGENT_MASK_WORDS] = {3};

        /* rank 0 may run on domains 0 and 1, rank 1 on domain 1 only */
        ck_assert_int_eq(mpi_pstate_agent_set_domains(&core, 0, both), 0);
        put(1, 1);
        enter(0, fk.now, THR);
        enter(1, fk.now, THR);
        fk.now += THR;
        step();
        ck_assert_str_eq(fk.log, "M0 L0 S0 M0 M1 L1 S0 S1");
        ck_assert_uint_eq(core.ranks[0].ndown, 2);
        /* rank 1 leaves: domain 1 up; rank 0 keeps its flag for domain 0 */
        fk.now += MS;
        leave(1);
        step();
        ck_assert_str_eq(fk.log, "M0 L0 S0 M0 M1 L1 S0 S1 R1 U1");
        ck_assert_int_eq(fk.flag[0], 1);
        ck_assert_uint_eq(core.ranks[0].transitions, 0);
        /* rank 0 leaves: domain 0 up, now its flag goes */
        fk.now += MS;
        leave(0);
        step();
        ck_assert_str_eq(fk.log, "M0 L0 S0 M0 M1 L1 S0 S1 R1 U1 R0 U0");
        ck_assert_int_eq(fk.flag[0], 0);
        ck_assert_uint_eq(core.ranks[0].transitions, 1);
        ck_assert_uint_eq(core.ranks[0].down_ns, 2 * MS);
}
END_TEST

/* A hybrid rank over two per-core domains whose waiting thread is on
 * domain 1: only domain 1 goes down (its other threads may compute on
 * domain 0); a wait without a usable CPU takes the whole block. */
START_TEST(hybrid_rank_lowers_the_waiting_threads_domain)
{
        uint64_t both[MPI_PSTATE_AGENT_MASK_WORDS] = {3};

        ck_assert_int_eq(mpi_pstate_agent_set_domains(&core, 0, both), 0);
        running(1);
        enter(0, fk.now, THR);
        obs[0].one_domain = 1;
        obs[0].domain = 1;
        fk.now += THR;
        step();
        ck_assert_str_eq(fk.log, "M0 L1 S0");
        ck_assert(!core.domains[0].down && core.domains[1].down);
        /* the same wait goes on: nothing else */
        fk.now += MS;
        step();
        ck_assert_str_eq(fk.log, "M0 L1 S0");
        fk.now += MS;
        leave(0);
        obs[0].one_domain = 0;
        step();
        ck_assert_str_eq(fk.log, "M0 L1 S0 R1 U0");
        ck_assert_uint_eq(core.ranks[0].transitions, 1);
        /* a new wait, no CPU known: both domains */
        fk.log[0] = '\0';
        enter(0, fk.now, THR);
        fk.now += THR;
        step();
        ck_assert_str_eq(fk.log, "M0 L0 S0 M0 L1 S0");
}
END_TEST

START_TEST(mark_failure_raises_other_domain_of_that_rank)
{
        uint64_t both[MPI_PSTATE_AGENT_MASK_WORDS] = {3};

        ck_assert_int_eq(mpi_pstate_agent_set_domains(&core, 0, both), 0);
        put(1, 1);
        enter(0, fk.now, THR);
        running(1);
        fk.now += THR;
        step();
        ck_assert_str_eq(fk.log, "M0 L0 S0"); /* domain 1 waits for rank 1 */
        enter(1, fk.now, THR);
        fk.now += THR;
        fk.since[0] = 0; /* rank 0 leaves just before the agent marks it again */
        step();
        /* the failed mark dropped rank 0's flag: domain 0 must come up now */
        ck_assert_str_eq(fk.log, "M0 L0 S0 M0 R0 U0");
        ck_assert(!core.domains[0].down);
        ck_assert(!core.domains[1].down);
        ck_assert_int_eq(fk.flag[1], 0);
}
END_TEST

/* ---- errors ---- */

START_TEST(lower_errors_disable_domain)
{
        put(0, 0);
        fk.fail_lower = EINVAL;
        for (unsigned i = 0; i < 20; i++) {
                enter(0, fk.now, THR);
                fk.now += THR;
                step();
                ck_assert_int_eq(fk.flag[0], 0); /* mark dropped after the failure */
                leave(0);
                step();
        }
        ck_assert_uint_eq(core.domains[0].write_errors, core.max_errs);
        ck_assert_int_eq(core.domains[0].last_error, -EINVAL);
        ck_assert(core.domains[0].disabled);
        ck_assert(!core.domains[0].down);
        ck_assert_uint_eq(core.ranks[0].transitions, 0);
}
END_TEST

START_TEST(raise_error_retried)
{
        uint64_t next;

        put(0, 0);
        enter(0, fk.now, THR);
        fk.now += THR;
        step();
        fk.fail_raise = EIO;
        leave(0);
        next = step();
        ck_assert(core.domains[0].down);
        ck_assert_int_eq(fk.flag[0], 1); /* the rank stays marked while it is down */
        ck_assert_uint_le(next, fk.now + MS);
        fk.fail_raise = 0;
        fk.now = next;
        step();
        ck_assert_str_eq(fk.log, "M0 L0 S0 R0 R0 U0");
        ck_assert(!core.domains[0].down);
        ck_assert_uint_eq(core.domains[0].write_errors, 1);
}
END_TEST

/* An offline CPU's policy answers EBUSY until the CPU is back: the raise
 * is retried after 1, 2, 4 ... ms up to about a second, and a wake-up
 * inside the back-off writes nothing. */
START_TEST(raise_errors_back_off)
{
        uint64_t gap = MS;

        put(0, 0);
        enter(0, fk.now, THR);
        fk.now += THR;
        step();
        fk.fail_raise = EBUSY;
        leave(0);
        step();
        for (unsigned i = 0; i < 14; i++) {
                ck_assert_uint_eq(core.next_event, fk.now + gap);
                fk.now += gap / 2; /* woken early (another rank, the scan) */
                step();
                ck_assert_uint_eq(core.next_event, fk.now + gap / 2);
                ck_assert_uint_eq(core.domains[0].write_errors, i + 1);
                fk.now += gap / 2;
                step();
                gap = gap < 1024 * MS ? 2 * gap : gap;
        }
        ck_assert_uint_eq(core.domains[0].write_errors, 15);
        ck_assert(core.domains[0].down);
        fk.fail_raise = 0;
        fk.now = core.next_event;
        step();
        ck_assert(!core.domains[0].down);
        ck_assert_uint_eq(core.domains[0].retry_at, 0);
        ck_assert_uint_eq(core.domains[0].write_errors, 15);
}
END_TEST

/* A driver re-registered under the step: the kept fd's file is gone.  The
 * kernel's new policy is at its defaults, so the domain counts as up and is
 * neither retried every millisecond nor lowered again. */
START_TEST(raise_into_a_gone_file_is_not_retried)
{
        uint64_t next;

        put(0, 0);
        enter(0, fk.now, THR);
        fk.now += THR;
        step();
        fk.fail_raise = ENODEV;
        leave(0);
        next = step();
        ck_assert(!core.domains[0].down);
        ck_assert(core.domains[0].gone);
        ck_assert(core.domains[0].disabled);
        ck_assert_int_eq(fk.flag[0], 0); /* unmarked: its down time ended */
        ck_assert_uint_eq(core.ranks[0].transitions, 1);
        ck_assert_uint_gt(next, fk.now + MS); /* no retry */
        ck_assert_uint_eq(core.stats.raises, 0);
        fk.fail_raise = 0;
        enter(0, fk.now, THR);
        fk.now += 2 * THR;
        step();
        ck_assert_str_eq(fk.log, "M0 L0 S0 R0 U0");
        ck_assert_uint_eq(core.domains[0].write_errors, 1);
}
END_TEST

START_TEST(lower_into_a_gone_file_disables_at_once)
{
        put(0, 0);
        fk.fail_lower = ENODEV;
        enter(0, fk.now, THR);
        fk.now += THR;
        step();
        ck_assert(core.domains[0].gone);
        ck_assert(core.domains[0].disabled);
        ck_assert(!core.domains[0].down);
        ck_assert_int_eq(fk.flag[0], 0);
        leave(0);
        step();
        enter(0, fk.now, THR);
        fk.now += THR;
        step();
        ck_assert_uint_eq(core.domains[0].write_errors, 1);
}
END_TEST

/* ---- membership changes and shutdown ---- */

START_TEST(set_domains_raises_first)
{
        put(0, 0);
        enter(0, fk.now, THR);
        fk.now += THR;
        step();
        put(0, 1); /* the rank moved */
        ck_assert_str_eq(fk.log, "M0 L0 S0 R0 U0");
        ck_assert(!core.domains[0].down);
        ck_assert_uint_eq(core.ranks[0].restore_ns.count, 0);
        /* still the same wait, past its deadline: domain 1 now */
        step();
        ck_assert_str_eq(fk.log, "M0 L0 S0 R0 U0 M0 L1 S0");
}
END_TEST

START_TEST(raise_all_without_slots)
{
        put(0, 0);
        put(1, 1);
        enter(0, fk.now, THR);
        enter(1, fk.now, THR);
        fk.now += THR;
        step();
        fk.log[0] = '\0';
        ck_assert_uint_eq(mpi_pstate_agent_raise_all(&core, 0), 0);
        ck_assert_str_eq(fk.log, "R0 R1"); /* the segment is gone: no U */
        ck_assert(!core.domains[0].down && !core.domains[1].down);
        fk.log[0] = '\0';
        fk.fail_raise = EIO;
        leave(1);
        enter(0, fk.now, 0);
        step();
        fk.log[0] = '\0';
        ck_assert_uint_eq(mpi_pstate_agent_raise_all(&core, 1), 1);
        ck_assert_str_eq(fk.log, "R0");
}
END_TEST

/* The CPU ceiling's sleep: every wait seen so far goes up and stays up
 * until it ends, lowered or not yet; the next wait is lowered as usual. */
START_TEST(hold_all_lowers_a_wait_once)
{
        uint64_t t0 = fk.now;

        put(0, 0);
        put(1, 1);
        enter(0, t0, THR);
        fk.now = t0 + THR;
        enter(1, fk.now, THR); /* not due yet */
        step();
        ck_assert_str_eq(fk.log, "M0 L0 S0");
        fk.log[0] = '\0';
        ck_assert_uint_eq(mpi_pstate_agent_hold_all(&core), 0);
        ck_assert_str_eq(fk.log, "R0 U0");
        fk.log[0] = '\0';
        for (int i = 0; i < 5; i++) { /* both still in the same waits, both past due */
                fk.now += THR;
                step();
        }
        ck_assert_str_eq(fk.log, "");
        ck_assert_uint_eq(core.ranks[0].transitions, 1);
        leave(0);
        step();
        enter(0, fk.now, THR);
        fk.now += THR;
        step();
        ck_assert_str_eq(fk.log, "M0 L0 S0");
        ck_assert(!core.domains[1].down);
}
END_TEST

START_TEST(many_ranks_many_domains)
{
        enum { N = 128 };
        struct mpi_pstate_agent_core c;
        struct mpi_pstate_agent_obs o[N];
        uint64_t m[MPI_PSTATE_AGENT_MASK_WORDS];
        unsigned down = 0;

        reset();
        ck_assert_int_eq(mpi_pstate_agent_init(&c, N, N, 5 * MS, &ops), 0);
        memset(o, 0, sizeof(o));
        for (unsigned r = 0; r < N; r++) {
                memset(m, 0, sizeof(m));
                m[r / 64] = UINT64_C(1) << (r % 64);
                ck_assert_int_eq(mpi_pstate_agent_set_domains(&c, r, m), 0);
                o[r].live = o[r].lowerable = 1;
        }
        /* every other rank waits, each with its own deadline */
        for (unsigned r = 0; r < N; r += 2) {
                o[r].since = fk.since[r] = fk.now + r;
                o[r].deadline_ns = fk.now + r + THR;
        }
        ck_assert_uint_eq(mpi_pstate_agent_step(&c, o, fk.now), fk.now + THR);
        fk.now += THR + N;
        mpi_pstate_agent_step(&c, o, fk.now);
        for (unsigned d = 0; d < N; d++) {
                down += c.domains[d].down;
                ck_assert_int_eq(c.domains[d].down, d % 2 == 0);
        }
        ck_assert_uint_eq(down, 64);
        ck_assert_uint_eq(fk.lowers, 64);
        /* a quarter leave: exactly their domains come up */
        for (unsigned r = 0; r < N; r += 4)
                o[r].since = fk.since[r] = 0;
        fk.now += MS;
        mpi_pstate_agent_step(&c, o, fk.now);
        ck_assert_uint_eq(fk.raises, 32);
        for (unsigned d = 0; d < N; d++)
                ck_assert_int_eq(c.domains[d].down, d % 4 == 2);
        ck_assert_uint_eq(mpi_pstate_agent_raise_all(&c, 1), 0);
        ck_assert_uint_eq(fk.raises, 64);
        for (unsigned r = 0; r < N; r++)
                ck_assert_int_eq(fk.flag[r], 0);
        mpi_pstate_agent_free(&c);
}
END_TEST

static Suite *agent_suite(void)
{
        Suite *s = suite_create("agent");
        TCase *t = tcase_create("helpers");

        tcase_add_test(t, hist_buckets_and_quantiles);
        tcase_add_test(t, ticks_conversion);
        tcase_add_test(t, scan_interval);
        tcase_add_test(t, budget_gap);
        tcase_add_test(t, init_rejects);
        suite_add_tcase(s, t);

        t = tcase_create("decisions");
        tcase_add_checked_fixture(t, setup2, teardown_core);
        tcase_add_test(t, sleeps_until_deadline_then_lowers);
        tcase_add_test(t, next_event_is_a_deadline_or_none);
        tcase_add_test(t, leave_raises_and_accounts);
        tcase_add_test(t, short_calls_never_transition);
        tcase_add_test(t, threshold_zero_switches_every_call);
        tcase_add_test(t, new_wait_after_leave_is_a_new_deadline);
        tcase_add_test(t, left_before_mark_no_write);
        tcase_add_test(t, left_during_write_raises_at_once);
        tcase_add_test(t, dead_rank_restored_at_once);
        tcase_add_test(t, profile_rank_or_domain_never_lowered);
        tcase_add_test(t, domain_without_ranks_never_lowered);
        tcase_add_test(t, shared_domain_needs_all_ranks);
        tcase_add_test(t, unpinned_rank_holds_every_domain);
        tcase_add_test(t, hybrid_rank_lowers_the_waiting_threads_domain);
        tcase_add_test(t, mark_failure_raises_other_domain_of_that_rank);
        tcase_add_test(t, lower_errors_disable_domain);
        tcase_add_test(t, raise_error_retried);
        tcase_add_test(t, raise_errors_back_off);
        tcase_add_test(t, raise_into_a_gone_file_is_not_retried);
        tcase_add_test(t, lower_into_a_gone_file_disables_at_once);
        tcase_add_test(t, set_domains_raises_first);
        tcase_add_test(t, raise_all_without_slots);
        tcase_add_test(t, hold_all_lowers_a_wait_once);
        suite_add_tcase(s, t);

        t = tcase_create("scale");
        tcase_add_test(t, many_ranks_many_domains);
        suite_add_tcase(s, t);
        return s;
}

int main(void)
{
        return mpi_pstate_check_main(agent_suite(), false);
}
