/* SPDX-License-Identifier: BSD-3-Clause */
/* The node agent's decision core (agent.h): per wake-up, which domains go
 * down or up and what that cost.  Pure: side effects go through the ops
 * table the daemon (coreops.c) and the unit tests implement. */
#include "agent.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#define NS_PER_S UINT64_C(1000000000)
/* A domain whose raise failed is retried after RETRY_NS, then twice as
 * long after each further failure, up to RETRY_NS << RETRY_MAX_SHIFT (about
 * 1 s): a transient error is over within the first retries, while an
 * offline CPU's policy refuses every write until the CPU is back (EBUSY on
 * current kernels) and must not cost a write each millisecond for the rest
 * of the step.  mpi_pstate_agent_raise_all does not wait: it is the last
 * chance before a ceiling or the exit. */
#define RETRY_NS UINT64_C(1000000)
#define RETRY_MAX_SHIFT 10u
/* Passes of one step: a lowering that finds a rank gone can make another
 * domain of that rank due for raising in the same step. */
#define MAX_PASSES 3

static unsigned bucket_of(uint64_t v)
{
        unsigned b = v ? 64u - (unsigned)__builtin_clzll(v) : 0u;

        return b < MPI_PSTATE_AGENT_HIST_BUCKETS ? b : MPI_PSTATE_AGENT_HIST_BUCKETS - 1;
}

void mpi_pstate_agent_hist_add(struct mpi_pstate_agent_hist *h, uint64_t v)
{
        h->count++;
        h->sum = h->sum + v < h->sum ? UINT64_MAX : h->sum + v;
        if (v > h->max)
                h->max = v;
        h->bucket[bucket_of(v)]++;
}

uint64_t mpi_pstate_agent_hist_quantile(const struct mpi_pstate_agent_hist *h, unsigned permille)
{
        uint64_t want, seen = 0;

        if (!h->count)
                return 0;
        if (permille > 1000)
                permille = 1000;
        want = (uint64_t)(((unsigned __int128)h->count * permille + 999) / 1000);
        if (want == 0)
                want = 1;
        for (unsigned b = 0; b < MPI_PSTATE_AGENT_HIST_BUCKETS; b++) {
                uint64_t upper;

                seen += h->bucket[b];
                if (seen < want)
                        continue;
                upper = b == 0                                   ? 0
                        : b == MPI_PSTATE_AGENT_HIST_BUCKETS - 1 ? UINT64_MAX
                                                                 : (UINT64_C(1) << b) - 1;
                return upper < h->max ? upper : h->max;
        }
        return h->max;
}

static unsigned mask_words(const struct mpi_pstate_agent_core *c)
{
        return (c->ndomains + 63u) / 64u;
}

static int has_domain(const struct mpi_pstate_agent_rank *r, unsigned d)
{
        return (r->mask[d / 64u] >> (d % 64u)) & 1u;
}

/* The rank is no longer in the wait its mark refers to. */
static int rank_left(const struct mpi_pstate_agent_rank *r)
{
        return !r->obs.live || !r->obs.lowerable || r->marked_since == 0 ||
               r->obs.since != r->marked_since;
}

/* Builds the per-domain index of the ranks (counting, then filling), once
 * per step after a membership change; on allocation failure the index
 * stays off until the next step and every rank is visited. */
static void build_index(struct mpi_pstate_agent_core *c)
{
        unsigned words = mask_words(c), total = 0, *start, *list;

        free(c->dom_start);
        free(c->dom_ranks);
        c->dom_start = c->dom_ranks = NULL;
        c->index_ok = 0;
        start = calloc(c->ndomains + 1, sizeof(*start));
        if (!start)
                return;
        for (unsigned i = 0; i < c->nranks; i++)
                for (unsigned w = 0; w < words; w++)
                        for (uint64_t m = c->ranks[i].mask[w]; m; m &= m - 1) {
                                unsigned d = w * 64u + (unsigned)__builtin_ctzll(m);

                                if (d < c->ndomains) {
                                        start[d + 1]++;
                                        total++;
                                }
                        }
        for (unsigned d = 0; d < c->ndomains; d++)
                start[d + 1] += start[d];
        list = malloc((total ? total : 1) * sizeof(*list));
        if (!list) {
                free(start);
                return;
        }
        for (unsigned i = 0; i < c->nranks; i++)
                for (unsigned w = 0; w < words; w++)
                        for (uint64_t m = c->ranks[i].mask[w]; m; m &= m - 1) {
                                unsigned d = w * 64u + (unsigned)__builtin_ctzll(m);

                                if (d < c->ndomains)
                                        list[start[d]++] = i;
                        }
        /* the fill moved each start to the next domain's: shift back */
        for (unsigned d = c->ndomains; d > 0; d--)
                start[d] = start[d - 1];
        start[0] = 0;
        c->dom_start = start;
        c->dom_ranks = list;
        c->index_ok = 1;
}

/* Ranks to visit for domain d: its own, or every rank without an index. */
static unsigned ranks_in(const struct mpi_pstate_agent_core *c, unsigned d)
{
        return c->index_ok ? c->dom_start[d + 1] - c->dom_start[d] : c->nranks;
}

static unsigned rank_at(const struct mpi_pstate_agent_core *c, unsigned d, unsigned k)
{
        return c->index_ok ? c->dom_ranks[c->dom_start[d] + k] : k;
}

/* Each rank i of domain d (has_domain still checked by the loops: the
 * index-less fallback visits every rank). */
#define FOR_RANKS_OF(c, d, i)                                                                      \
        for (unsigned k_ = 0, n_ = ranks_in(c, d), i = 0; k_ < n_ && ((i = rank_at(c, d, k_)), 1); \
             k_++)

int mpi_pstate_agent_init(struct mpi_pstate_agent_core *c, unsigned nranks, unsigned ndomains,
                          uint64_t scan_ns, const struct mpi_pstate_agent_ops *ops)
{
        if (!c || !ops || ndomains == 0 || ndomains > MPI_PSTATE_AGENT_MAX_DOMAINS || scan_ns == 0)
                return -EINVAL;
        memset(c, 0, sizeof(*c));
        c->nranks = nranks;
        c->ndomains = ndomains;
        c->scan_ns = scan_ns;
        c->max_errs = 8;
        c->ops = *ops;
        c->ranks = calloc(nranks ? nranks : 1, sizeof(*c->ranks));
        c->domains = calloc(ndomains, sizeof(*c->domains));
        c->dl = calloc(ndomains, sizeof(*c->dl));
        c->waiting = calloc(ndomains, 1);
        c->left = calloc(ndomains, 1);
        c->fresh = calloc(nranks ? nranks : 1, 1);
        if (!c->ranks || !c->domains || !c->dl || !c->waiting || !c->left || !c->fresh) {
                mpi_pstate_agent_free(c);
                return -ENOMEM;
        }
        for (unsigned d = 0; d < ndomains; d++)
                c->domains[d].usable = 1;
        return 0;
}

void mpi_pstate_agent_free(struct mpi_pstate_agent_core *c)
{
        if (!c)
                return;
        free(c->ranks);
        free(c->domains);
        free(c->dl);
        free(c->waiting);
        free(c->left);
        free(c->fresh);
        free(c->dom_start);
        free(c->dom_ranks);
        c->dom_start = c->dom_ranks = NULL;
        c->index_ok = 0;
        c->ranks = NULL;
        c->domains = NULL;
        c->dl = NULL;
        c->waiting = c->left = c->fresh = NULL;
}

static void hist_write(struct mpi_pstate_agent_core *c, uint64_t t0, uint64_t t1)
{
        mpi_pstate_agent_hist_add(&c->stats.write_ns, t1 > t0 ? t1 - t0 : 0);
}

/* Raises domain d.  wake_ns 0: not a reaction to a rank leaving (no
 * restore latency recorded).  touch_slots 0: leave the slots alone.
 * Returns 0, or the write's error (the domain then stays down and is
 * retried).  A domain found gone counts as raised: retrying a write into
 * a removed file would only spin. */
static int do_raise(struct mpi_pstate_agent_core *c, unsigned d, uint64_t wake_ns, int touch_slots)
{
        struct mpi_pstate_agent_domain *dom = &c->domains[d];
        uint64_t t0, t1;
        int rc;

        t0 = c->ops.now(c->ops.ctx);
        rc = c->ops.raise(c->ops.ctx, d);
        t1 = c->ops.now(c->ops.ctx);
        hist_write(c, t0, t1);
        if (rc) {
                dom->write_errors++;
                dom->last_error = rc;
                dom->err_streak++;
                if (rc != -ENODEV) {
                        dom->retry_at = t1 + (RETRY_NS << (dom->err_streak - 1 < RETRY_MAX_SHIFT
                                                               ? dom->err_streak - 1
                                                               : RETRY_MAX_SHIFT));
                        return rc;
                }
                dom->gone = dom->disabled = 1;
        } else {
                c->stats.raises++;
        }
        dom->err_streak = 0;
        dom->retry_at = 0;
        dom->down = 0;
        dom->transitions++;
        dom->down_ns += t0 > dom->down_at_ns ? t0 - dom->down_at_ns : 0;
        FOR_RANKS_OF(c, d, i)
        {
                struct mpi_pstate_agent_rank *r = &c->ranks[i];
                uint64_t dn;

                if (!has_domain(r, d) || r->ndown == 0)
                        continue;
                if (wake_ns && rank_left(r))
                        mpi_pstate_agent_hist_add(&r->restore_ns, t0 > wake_ns ? t0 - wake_ns : 0);
                if (--r->ndown)
                        continue;
                dn = t0 > r->down_start_ns ? t0 - r->down_start_ns : 0;
                r->down_ns += dn;
                r->transitions++;
                if (touch_slots && r->marked_since)
                        c->ops.unmark(c->ops.ctx, i, dn);
                r->marked_since = 0;
        }
        return 0;
}

/* Drops the marks this lowering attempt set (no transition happened). */
static void undo_marks(struct mpi_pstate_agent_core *c, unsigned d)
{
        FOR_RANKS_OF(c, d, i)
        {
                struct mpi_pstate_agent_rank *r = &c->ranks[i];

                if (!has_domain(r, d) || !c->fresh[i])
                        continue;
                c->fresh[i] = 0;
                if (r->ndown == 0) {
                        c->ops.clear(c->ops.ctx, i);
                        r->marked_since = 0;
                }
        }
}

/* Marks every rank of domain d before its write, so that a rank leaving
 * its wait from now on wakes the agent.  Returns 1 when one had already
 * left (its marks undone), else 0. */
static int mark_ranks(struct mpi_pstate_agent_core *c, unsigned d)
{
        FOR_RANKS_OF(c, d, i) c->fresh[i] = 0;
        FOR_RANKS_OF(c, d, i)
        {
                struct mpi_pstate_agent_rank *r = &c->ranks[i];

                if (!has_domain(r, d))
                        continue;
                if (!c->ops.mark(c->ops.ctx, i, r->obs.since)) {
                        /* Left between the scan and now; mark() dropped its
                         * flag, so other domains it holds down must go up. */
                        r->obs.since = 0;
                        c->stats.leaves_seen++;
                        undo_marks(c, d);
                        return 1;
                }
                if (r->marked_since == 0) {
                        r->marked_since = r->obs.since;
                        c->fresh[i] = 1;
                }
        }
        return 0;
}

/* Domain d went down at t0 for ranks whose deadline was dl. */
static void count_drop(struct mpi_pstate_agent_core *c, unsigned d, uint64_t t0, uint64_t dl)
{
        struct mpi_pstate_agent_domain *dom = &c->domains[d];

        dom->err_streak = 0;
        dom->down = 1;
        dom->down_at_ns = t0;
        c->stats.lowers++;
        FOR_RANKS_OF(c, d, i)
        {
                struct mpi_pstate_agent_rank *r = &c->ranks[i];

                if (!has_domain(r, d))
                        continue;
                c->fresh[i] = 0;
                if (r->ndown++ == 0)
                        r->down_start_ns = t0;
                r->drops++;
                mpi_pstate_agent_hist_add(&r->drop_late_ns, t0 > dl ? t0 - dl : 0);
        }
}

/* The protocol's re-check after the write: a rank that left during it did
 * not see its flag in time to wake us, or did and we must not wait for the
 * next wake-up anyway.  Returns 1 when one left. */
static int any_left(struct mpi_pstate_agent_core *c, unsigned d)
{
        int gone = 0;

        FOR_RANKS_OF(c, d, i)
        {
                struct mpi_pstate_agent_rank *r = &c->ranks[i];

                if (has_domain(r, d) && !c->ops.still_waiting(c->ops.ctx, i, r->marked_since)) {
                        r->obs.since = 0;
                        gone = 1;
                }
        }
        return gone;
}

/* Lowers domain d, all of whose ranks wait past deadline dl.  Returns 1
 * when a rank was found gone (the caller runs another pass), else 0. */
static int do_lower(struct mpi_pstate_agent_core *c, unsigned d, uint64_t dl)
{
        struct mpi_pstate_agent_domain *dom = &c->domains[d];
        uint64_t t0, t1;
        int rc;

        if (mark_ranks(c, d))
                return 1;
        t0 = c->ops.now(c->ops.ctx);
        rc = c->ops.lower(c->ops.ctx, d);
        t1 = c->ops.now(c->ops.ctx);
        hist_write(c, t0, t1);
        if (rc) {
                dom->write_errors++;
                dom->last_error = rc;
                if (++dom->err_streak >= c->max_errs || rc == -ENODEV)
                        dom->disabled = 1;
                dom->gone = rc == -ENODEV;
                undo_marks(c, d);
                return 0;
        }
        count_drop(c, d, t0, dl);
        if (any_left(c, d)) {
                dom->aborted++;
                c->stats.leaves_seen++;
                do_raise(c, d, t1, 1);
                return 1;
        }
        return 0;
}

/* Per-domain view of the ranks: how many, do all wait, the latest
 * deadline, did a marked rank leave. */
static void aggregate(struct mpi_pstate_agent_core *c)
{
        unsigned words = mask_words(c);

        for (unsigned d = 0; d < c->ndomains; d++) {
                c->domains[d].nranks = 0;
                c->waiting[d] = 1;
                c->left[d] = 0;
                c->dl[d] = 0;
        }
        for (unsigned i = 0; i < c->nranks; i++) {
                const struct mpi_pstate_agent_rank *r = &c->ranks[i];
                int waits = r->obs.live && r->obs.lowerable && r->obs.since != 0 &&
                            r->obs.since != r->held_since;

                for (unsigned w = 0; w < words; w++) {
                        uint64_t m = r->mask[w];

                        while (m) {
                                unsigned d = w * 64u + (unsigned)__builtin_ctzll(m);

                                m &= m - 1;
                                if (d >= c->ndomains)
                                        break;
                                c->domains[d].nranks++;
                                if (!waits || (r->obs.one_domain && r->obs.domain != d))
                                        c->waiting[d] = 0;
                                else if (r->obs.deadline_ns > c->dl[d])
                                        c->dl[d] = r->obs.deadline_ns;
                                if (c->domains[d].down && rank_left(r))
                                        c->left[d] = 1;
                        }
                }
        }
        for (unsigned d = 0; d < c->ndomains; d++)
                if (c->domains[d].nranks == 0) {
                        c->waiting[d] = 0;
                        /* a down domain nobody belongs to any more */
                        if (c->domains[d].down)
                                c->left[d] = 1;
                }
}

/* Whether d's raise waits out its back-off; *now is read once, when a
 * domain in back-off first needs it. */
static int backing_off(struct mpi_pstate_agent_core *c, unsigned d, uint64_t *now)
{
        uint64_t at = c->domains[d].retry_at;

        if (!at)
                return 0;
        if (!*now)
                *now = c->ops.now(c->ops.ctx);
        return *now < at;
}

uint64_t mpi_pstate_agent_step(struct mpi_pstate_agent_core *c,
                               const struct mpi_pstate_agent_obs *obs, uint64_t wake_ns)
{
        uint64_t now = 0, next, event = UINT64_MAX;

        c->stats.steps++;
        if (!c->index_ok)
                build_index(c);
        for (unsigned i = 0; i < c->nranks; i++)
                c->ranks[i].obs = obs[i];
        for (int pass = 0; pass < MAX_PASSES; pass++) {
                int again = 0;

                aggregate(c);
                for (unsigned d = 0; d < c->ndomains; d++)
                        if (c->domains[d].down && c->left[d] && !backing_off(c, d, &now))
                                do_raise(c, d, wake_ns, 1);
                now = c->ops.now(c->ops.ctx);
                for (unsigned d = 0; d < c->ndomains; d++) {
                        struct mpi_pstate_agent_domain *dom = &c->domains[d];

                        if (dom->down || !dom->usable || dom->disabled || !c->waiting[d] ||
                            c->dl[d] > now)
                                continue;
                        if (do_lower(c, d, c->dl[d])) {
                                again = 1;
                                break; /* the aggregates are stale now */
                        }
                }
                if (!again)
                        break;
        }
        aggregate(c);
        now = c->ops.now(c->ops.ctx);
        for (unsigned d = 0; d < c->ndomains; d++) {
                const struct mpi_pstate_agent_domain *dom = &c->domains[d];

                if (dom->down && c->left[d] && dom->retry_at && dom->retry_at < event)
                        event = dom->retry_at > now ? dom->retry_at : now;
                if (!dom->down && dom->usable && !dom->disabled && c->waiting[d] &&
                    c->dl[d] < event)
                        event = c->dl[d] > now ? c->dl[d] : now;
        }
        c->next_event = event;
        next = now + c->scan_ns < now ? UINT64_MAX : now + c->scan_ns;
        return event < next ? event : next;
}

int mpi_pstate_agent_set_domains(struct mpi_pstate_agent_core *c, unsigned r, const uint64_t *mask)
{
        struct mpi_pstate_agent_rank *rk;
        uint64_t m[MPI_PSTATE_AGENT_MASK_WORDS] = {0};
        unsigned words;

        if (!c || r >= c->nranks || !mask)
                return -EINVAL;
        rk = &c->ranks[r];
        words = mask_words(c);
        memcpy(m, mask, words * sizeof(uint64_t));
        if (c->ndomains % 64u)
                m[words - 1] &= (UINT64_C(1) << (c->ndomains % 64u)) - 1;
        if (memcmp(m, rk->mask, sizeof(m)) == 0)
                return 0;
        /* Membership of a down domain never changes: raise what is down
         * among the old and the new domains first. */
        for (unsigned d = 0; d < c->ndomains; d++) {
                int in_old = has_domain(rk, d), in_new = (m[d / 64u] >> (d % 64u)) & 1u;

                if ((in_old || in_new) && c->domains[d].down)
                        do_raise(c, d, 0, 1);
        }
        memcpy(rk->mask, m, sizeof(m));
        c->index_ok = 0;
        return 0;
}

unsigned mpi_pstate_agent_raise_all(struct mpi_pstate_agent_core *c, int touch_slots)
{
        unsigned failed = 0;

        for (unsigned d = 0; d < c->ndomains; d++)
                if (c->domains[d].down && do_raise(c, d, 0, touch_slots) != 0)
                        failed++;
        return failed;
}

unsigned mpi_pstate_agent_hold_all(struct mpi_pstate_agent_core *c)
{
        for (unsigned i = 0; i < c->nranks; i++)
                if (c->ranks[i].obs.since)
                        c->ranks[i].held_since = c->ranks[i].obs.since;
        return mpi_pstate_agent_raise_all(c, 1);
}

uint64_t mpi_pstate_agent_ticks_len_ns(uint64_t n, uint64_t ticks_per_sec)
{
        unsigned __int128 v;

        if (ticks_per_sec == 0)
                ticks_per_sec = NS_PER_S;
        v = (unsigned __int128)n * NS_PER_S / ticks_per_sec;
        return v > UINT64_MAX ? UINT64_MAX : (uint64_t)v;
}

uint64_t mpi_pstate_agent_ticks_to_ns(uint64_t ticks, uint64_t ref_ticks, uint64_t ref_ns,
                                      uint64_t ticks_per_sec)
{
        uint64_t d;

        if (ticks <= ref_ticks) {
                d = mpi_pstate_agent_ticks_len_ns(ref_ticks - ticks, ticks_per_sec);
                return d > ref_ns ? 0 : ref_ns - d;
        }
        d = mpi_pstate_agent_ticks_len_ns(ticks - ref_ticks, ticks_per_sec);
        return ref_ns + d < ref_ns ? UINT64_MAX : ref_ns + d;
}

uint64_t mpi_pstate_agent_scan_ns(uint64_t threshold_ns, uint64_t min_ns, uint64_t max_ns)
{
        if (threshold_ns < min_ns)
                return min_ns;
        return threshold_ns > max_ns ? max_ns : threshold_ns;
}

uint64_t mpi_pstate_agent_budget_gap(uint64_t gap, uint64_t interval, uint64_t used, uint64_t wall,
                                     uint64_t budget_ppm, uint64_t scan_ns, uint64_t min_ns,
                                     uint64_t max_ns)
{
        unsigned __int128 aim = (unsigned __int128)wall * budget_ppm * 4; /* x 5e6: 0.8 budget */
        unsigned __int128 share = (unsigned __int128)used * 1000000u * 5;
        uint64_t want;

        if (!budget_ppm || !wall)
                return 0;
        /* Under the aim without a spacing, the rate of wake-ups it has is
         * one it can afford: scaling the interval by the share would give a
         * spacing below the interval, which spaces only the deadlines. */
        if (!gap && share <= aim)
                return 0;
        /* Over: the interval it would need (wake-ups the spacing did not
         * hold back count too); under: the spacing it could do with. */
        want = (uint64_t)((unsigned __int128)(share > aim && interval > gap ? interval : gap) *
                          share / aim);
        if (want < gap / 2)
                want = gap / 2;
        if (want > max_ns)
                want = max_ns;
        if (want < min_ns || want <= scan_ns / 4)
                want = 0;
        return want;
}
