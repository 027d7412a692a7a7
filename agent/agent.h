/* SPDX-License-Identifier: BSD-3-Clause */
/* The node agent's decision core: which frequency domain goes down or up,
 * when, and what that cost, given what the agent saw in the ranks' slots.
 *
 * Pure: no system call, no Slurm, no MPI, no sysfs.  Everything with a
 * side effect (marking a slot clocked down, writing a frequency, reading
 * the clock) goes through struct mpi_pstate_agent_ops, which the daemon
 * (agent/) implements with common/slot.h and common/cpufreq.h and
 * the unit tests implement with scripted fakes.  See docs/agent.md.
 *
 * Model.  A rank is one slot of the segment.  It belongs to every domain
 * whose CPUs it may run on (its affinity, intersected with the step's CPUs
 * by the caller): one for a pinned rank, several for an unpinned one.  A
 * domain goes down only while every rank that belongs to it waits, each
 * past its own deadline (entry of the wait + threshold), and comes back up
 * as soon as one of them leaves that wait or dies.  A domain without ranks
 * never goes down: nobody is known to be idle on it.
 *
 * One call of mpi_pstate_agent_step() per wake-up of the agent:
 *   1. raise every down domain one of whose ranks left its wait or died;
 *   2. lower every domain all of whose ranks wait past their deadlines,
 *      following the slot protocol (common/slot.h): mark every rank, write,
 *      re-check every rank, raise again at once if one left meanwhile;
 *   3. tell when to wake up next: the earliest deadline of a domain whose
 *      ranks all wait, or the next periodic scan, whichever comes first.
 * Times are nanoseconds of the agent's clock (CLOCK_MONOTONIC). */
#ifndef MPI_PSTATE_AGENT_H
#define MPI_PSTATE_AGENT_H
#include <stddef.h>
#include <stdint.h>

/* log2 histogram, same buckets as the slot's: bucket 0 counts the value 0,
 * bucket b >= 1 counts [2^(b-1), 2^b), the last one everything above. */
#define MPI_PSTATE_AGENT_HIST_BUCKETS 64u

struct mpi_pstate_agent_hist {
        uint64_t count, sum, max;
        uint64_t bucket[MPI_PSTATE_AGENT_HIST_BUCKETS];
};

void mpi_pstate_agent_hist_add(struct mpi_pstate_agent_hist *h, uint64_t v);
/* Upper bound of the bucket that holds the q-quantile (permille 0..1000),
 * never above the largest value seen; 0 for an empty histogram. */
uint64_t mpi_pstate_agent_hist_quantile(const struct mpi_pstate_agent_hist *h, unsigned permille);

/* Most domains one agent handles (one per CPU at most). */
#define MPI_PSTATE_AGENT_MAX_DOMAINS 1024u
#define MPI_PSTATE_AGENT_MASK_WORDS (MPI_PSTATE_AGENT_MAX_DOMAINS / 64u)

/* What the caller saw in one slot at one scan, from a validated copy. */
struct mpi_pstate_agent_obs {
        uint8_t live;         /* attached, running, process alive */
        uint8_t lowerable;    /* its mode allows frequency changes */
        uint64_t since;       /* wait_since as read (the slot's clock), 0 = not waiting */
        uint64_t deadline_ns; /* when that wait crosses the threshold; valid if since */
        /* The wait concerns one of the rank's domains only: a hybrid rank
         * whose waiting thread sits on a per-core domain of its block while
         * its other threads may compute (docs/agent.md, "Hybrid ranks").
         * The rank then counts as waiting for `domain` alone. */
        uint8_t one_domain;
        unsigned domain;
};

/* Side effects.  mark/still_waiting/unmark are the agent's side of the
 * slot protocol (mpi_pstate_slot_agent_lower/_still_waiting/_raise);
 * clear drops a mark without a transition (a lowering that never
 * happened).  lower/raise write one domain's frequency and return 0 or a
 * negative errno.  now reads the clock. */
struct mpi_pstate_agent_ops {
        int (*mark)(void *ctx, unsigned rank, uint64_t since);
        int (*still_waiting)(void *ctx, unsigned rank, uint64_t since);
        void (*unmark)(void *ctx, unsigned rank, uint64_t down_ns);
        void (*clear)(void *ctx, unsigned rank);
        int (*lower)(void *ctx, unsigned domain);
        int (*raise)(void *ctx, unsigned domain);
        uint64_t (*now)(void *ctx);
        void *ctx;
};

struct mpi_pstate_agent_rank {
        uint64_t mask[MPI_PSTATE_AGENT_MASK_WORDS]; /* domains it belongs to */
        struct mpi_pstate_agent_obs obs;
        uint64_t marked_since; /* the wait its clocked_down flag refers to, 0 = none */
        uint64_t held_since;   /* a wait raised by mpi_pstate_agent_hold_all: never lowered again */
        unsigned ndown;        /* its domains that are down now */
        uint64_t down_start_ns; /* when the first of them went down */
        /* figures */
        uint64_t transitions; /* periods with at least one of its domains down */
        uint64_t down_ns;     /* their total length */
        uint64_t drops;       /* domain lowerings it took part in */
        struct mpi_pstate_agent_hist drop_late_ns; /* write start - its deadline */
        struct mpi_pstate_agent_hist restore_ns;   /* raise write start - wake-up */
};

struct mpi_pstate_agent_domain {
        uint8_t usable;   /* the caller can write it (mode on, handle open) */
        uint8_t down;     /* written low and not raised since */
        uint8_t disabled; /* gave up after repeated write errors, or gone */
        /* Its file vanished under a write (-ENODEV): the driver was
         * re-registered and the kernel's new policy starts with its own
         * limits, so the cap is not down any more and nothing is retried
         * (an EPP written low may live on in intel's HWP register, which
         * the new driver reads back: docs/cpufreq.md §4). */
        uint8_t gone;
        unsigned nranks; /* ranks that belong to it (as of the last step) */
        uint64_t down_at_ns;
        /* figures */
        uint64_t transitions; /* lower+raise pairs */
        uint64_t down_ns;
        uint64_t aborted;      /* lowerings undone because a rank left during the write */
        uint64_t write_errors; /* failed writes */
        int last_error;        /* errno of the last failed write, negative */
        unsigned err_streak;   /* consecutive failed writes */
        uint64_t retry_at;     /* a failed raise is not retried before, 0 = none */
};

/* Global figures. */
struct mpi_pstate_agent_stats {
        uint64_t steps;
        uint64_t lowers, raises;               /* successful writes */
        uint64_t leaves_seen;                  /* marked ranks found out of their wait */
        struct mpi_pstate_agent_hist write_ns; /* duration of each frequency write */
};

struct mpi_pstate_agent_core {
        unsigned nranks, ndomains;
        struct mpi_pstate_agent_rank *ranks;
        struct mpi_pstate_agent_domain *domains;
        uint64_t scan_ns; /* longest sleep between two scans */
        /* set by mpi_pstate_agent_step: its next deadline or write retry,
         * UINT64_MAX for none (what a caller that spaces its polls itself
         * must still wake for) */
        uint64_t next_event;
        unsigned max_errs; /* consecutive write errors before a domain is disabled */
        struct mpi_pstate_agent_stats stats;
        struct mpi_pstate_agent_ops ops;
        /* scratch, one entry per domain */
        uint64_t *dl;     /* latest deadline of its ranks */
        uint8_t *waiting; /* every rank waits (and there is one) */
        uint8_t *left;    /* a marked rank left or died */
        uint8_t *fresh;   /* per rank: marked by the lowering in progress */
        /* per-domain index of the ranks (rebuilt after a membership
         * change): a lowering or raise visits its domain's ranks only */
        unsigned *dom_start, *dom_ranks;
        int index_ok;
};

/* Allocates a core for nranks slots and ndomains domains (1..MAX_DOMAINS),
 * every domain usable, no rank in any.  scan_ns: the longest sleep.
 * Returns 0, -EINVAL or -ENOMEM. */
int mpi_pstate_agent_init(struct mpi_pstate_agent_core *c, unsigned nranks, unsigned ndomains,
                          uint64_t scan_ns, const struct mpi_pstate_agent_ops *ops);
void mpi_pstate_agent_free(struct mpi_pstate_agent_core *c);

/* Sets the domains rank r belongs to (mask of MPI_PSTATE_AGENT_MASK_WORDS
 * words; bits beyond ndomains are ignored).  If the rank holds domains
 * down, they are raised first, as if the rank had left.  Returns 0 or
 * -EINVAL. */
int mpi_pstate_agent_set_domains(struct mpi_pstate_agent_core *c, unsigned r, const uint64_t *mask);

/* One wake-up: obs[] holds one observation per rank (nranks of them);
 * wake_ns is when the agent woke (the start of restore latencies).
 * Returns the time of the next wake-up. */
uint64_t mpi_pstate_agent_step(struct mpi_pstate_agent_core *c,
                               const struct mpi_pstate_agent_obs *obs, uint64_t wake_ns);

/* Raises every down domain (stop, or losing the segment).  With
 * touch_slots 0 the slots are left alone (unmark/clear are not called).
 * Returns the number of domains that could not be raised. */
unsigned mpi_pstate_agent_raise_all(struct mpi_pstate_agent_core *c, int touch_slots);

/* Raises every down domain, touching the slots, and holds every wait seen
 * at the last step: none of them counts as waiting again, so none is
 * lowered a second time (the CPU ceiling's sleep: a wait is lowered at most
 * once, and a ceiling reached never turns into a transition per sleep).
 * A rank's next wait is lowered as usual.  Returns what raise_all does. */
unsigned mpi_pstate_agent_hold_all(struct mpi_pstate_agent_core *c);

/* ---- helpers of the daemon, pure too ---- */

/* Converts a tick count of a slot's clock into agent nanoseconds, given
 * one reference pair read back to back (ref_ticks on that clock, ref_ns on
 * the agent's) and the clock's rate.  Saturates at 0 and UINT64_MAX. */
uint64_t mpi_pstate_agent_ticks_to_ns(uint64_t ticks, uint64_t ref_ticks, uint64_t ref_ns,
                                      uint64_t ticks_per_sec);

/* Duration of n ticks at ticks_per_sec, in ns (saturating). */
uint64_t mpi_pstate_agent_ticks_len_ns(uint64_t n, uint64_t ticks_per_sec);

/* Scan interval for a threshold: the threshold itself, so that a wait
 * started right after a scan is seen by its deadline, kept within
 * [min_ns, max_ns]. */
uint64_t mpi_pstate_agent_scan_ns(uint64_t threshold_ns, uint64_t min_ns, uint64_t max_ns);

/* The CPU budget's least spacing of two timer wake-ups, for the next
 * period, from the last one: `used` ns of CPU over `wall` ns in which the
 * timer woke the agent every `interval` ns on average, under the spacing
 * `gap` (0: none).  budget_ppm is the budget in millionths of a core, aimed
 * at 80 %.  No spacing while the agent stays within that aim without one
 * (a spacing then only makes drops late); when over, at once the spacing
 * that brings it back; when under, smaller, at most half off per period.  A
 * spacing of scan_ns / 4 or less is none; one is at most max_ns. */
uint64_t mpi_pstate_agent_budget_gap(uint64_t gap, uint64_t interval, uint64_t used, uint64_t wall,
                                     uint64_t budget_ppm, uint64_t scan_ns, uint64_t min_ns,
                                     uint64_t max_ns);

#endif
