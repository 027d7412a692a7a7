/* SPDX-License-Identifier: BSD-3-Clause */
/* simranks: simulated MPI ranks for the node agent's tests and benchmarks.
 *
 * One thread per simulated rank claims slot i of an existing segment and
 * follows the rank side of the slot protocol with the inline functions of
 * common/slot.h, exactly as the preload library's wrappers do: compute
 * (sleep outside any call), then one "blocking call" (wait_begin, sleep,
 * wait_end, FUTEX_WAKE when the agent had clocked the core down).
 *
 * Measured here, from the rank's side:
 *   restore_ns   time from leaving a clocked-down call until the agent has
 *                raised the domain and cleared the flag (--spin: the rank
 *                spins on its flag after waking the agent, as a rank would
 *                compute on that core anyway)
 *   violations   calls shorter than the threshold during which the flag was
 *                set (must be 0)
 * With --sync every rank computes compute_us +- 50 % and then all meet in a
 * barrier (the "blocking call"): the imbalance of a collective.
 * and, with --baseline-wake, the same round trip to a bare process that only
 * waits on a futex and answers (the platform's floor for restore_ns).
 *
 * usage: simranks --shm PATH --slots N [--first 0]
 *        [--threshold-us 500] [--seconds 5] [--compute-us 2000] [--short-us 50]
 *        [--long-us 5000] [--long-every 4] [--clock tsc|monotonic] [--spin]
 *        [--baseline-wake [--baseline-rt PRIO]] [--mode on|profile] [--sync]
 *        [--no-announce] [--spread-us MIN,MAX]
 * --spread-us: every call a wait of MIN..MAX us, log-uniform, from one call
 * site per power of two of its length (a code's call sites each have
 * their typical wait); "ideal_down_ns" is what a perfect agent lowers:
 * every wait past the threshold, from its deadline to its end.
 * Long and short calls come from two call sites, as in a real code: each
 * wait is predicted and, predicted long, announced as the preload library
 * does (common/slot.h, "Reaction"); --no-announce never announces (the
 * agent then finds every wait by its polls, as it did before announcing).
 * Prints one JSON object on stdout. */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <linux/futex.h>
#include <math.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "agent.h"
#include "slot.h"

#define NS UINT64_C(1000000000)
#define SPIN_LIMIT_NS UINT64_C(50000000)

static const char *const fn_names[] = {"MPI_Recv"};

static struct {
        const char *shm;
        unsigned slots, first;
        uint64_t threshold_us, seconds, compute_us, short_us, long_us, spread_min, spread_max;
        unsigned long_every;
        enum mpi_pstate_clock clock;
        int spin, baseline, profile, baseline_rt, sync, no_announce;
        uint64_t tps;
} cfg = {.slots = 1,
         .threshold_us = 500,
         .seconds = 5,
         .compute_us = 2000,
         .short_us = 50,
         .long_us = 5000,
         .long_every = 4,
         .clock = MPI_PSTATE_CLOCK_MONOTONIC};

struct rank_stats {
        uint64_t calls, long_calls, short_calls, wakes, violations, spin_timeouts, ideal_down_ns;
        struct mpi_pstate_agent_hist restore_ns;
};

static volatile int stop_all;
static pthread_barrier_t sync_barrier;

/* the bare waiter of --baseline-wake: one shared page */
struct bare {
        _Atomic uint32_t word;
        _Atomic uint32_t ack;
};
static struct bare *bare;

static uint64_t mono(void)
{
        struct timespec ts;

        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (uint64_t)ts.tv_sec * NS + (uint64_t)ts.tv_nsec;
}

static void sleep_us(uint64_t us)
{
        struct timespec ts = {.tv_sec = (time_t)(us / 1000000u),
                              .tv_nsec = (long)(us % 1000000u) * 1000};

        while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
                ;
}

static void cpu_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
        __builtin_ia32_pause();
#endif
}

/* A process that sleeps on bare->word and answers each wake-up. */
static void bare_waiter(void)
{
        uint32_t seen = 0;

        if (cfg.baseline_rt) {
                struct sched_param sp = {.sched_priority = cfg.baseline_rt};

                if (sched_setscheduler(0, SCHED_FIFO, &sp) != 0)
                        perror("simranks: SCHED_FIFO");
        }

        for (;;) {
                syscall(SYS_futex, &bare->word, FUTEX_WAIT, seen, NULL, NULL, 0);
                seen = atomic_load(&bare->word);
                if (seen == UINT32_MAX)
                        _exit(0);
                atomic_store(&bare->ack, seen);
        }
}

static void bare_round_trip(struct rank_stats *st)
{
        uint32_t v = atomic_fetch_add(&bare->word, 1) + 1;
        uint64_t t0 = mono(), t;

        syscall(SYS_futex, &bare->word, FUTEX_WAKE, 1, NULL, NULL, 0);
        while (atomic_load(&bare->ack) != v) {
                cpu_relax();
                if ((t = mono()) - t0 > SPIN_LIMIT_NS) {
                        st->spin_timeouts++;
                        return;
                }
        }
        mpi_pstate_agent_hist_add(&st->restore_ns, mono() - t0);
}

struct rank_arg {
        unsigned index;
        struct rank_stats st;
        pthread_t th;
};

static void *rank_main(void *p)
{
        struct rank_arg *ra = p;
        struct mpi_pstate_attach att;
        struct mpi_pstate_pred pred = {0};
        struct mpi_pstate_slot *s;
        uint64_t thr_ticks = cfg.threshold_us * cfg.tps / 1000000u, end;
        unsigned cpu = cfg.first + ra->index, n = 0, seed = ra->index + 1;
        unsigned sync_iters =
            cfg.compute_us ? (unsigned)(cfg.seconds * 1000000u / cfg.compute_us) : 0;
        int rc;

        if (cfg.baseline) {
                end = mono() + cfg.seconds * NS;
                while (mono() < end && !stop_all) {
                        sleep_us(cfg.compute_us);
                        bare_round_trip(&ra->st);
                        ra->st.calls++;
                }
                return NULL;
        }
        rc = mpi_pstate_slot_attach(cfg.shm, ra->index, &att);
        if (rc) {
                fprintf(stderr, "simranks: slot %u: %s\n", ra->index, strerror(-rc));
                exit(1);
        }
        s = att.slot;
        mpi_pstate_slot_setup(s, ra->index, fn_names, 1);
        s->mode = cfg.profile ? MPI_PSTATE_SLOT_MODE_PROFILE : MPI_PSTATE_SLOT_MODE_ON;
        s->clock = cfg.clock;
        s->ticks_per_sec = cfg.tps;
        s->threshold_ticks = thr_ticks;
        s->threshold_ns = cfg.threshold_us * 1000u;
        s->rank = (int32_t)ra->index;
        s->size = (int32_t)cfg.slots;
        s->cpu = (int32_t)cpu;
        if (cpu < 64 * MPI_PSTATE_SLOT_CPUSET_WORDS)
                s->cpuset[cpu / 64] = UINT64_C(1) << (cpu % 64);
        atomic_store(&s->state, MPI_PSTATE_SLOT_RUNNING);
        end = mono() + cfg.seconds * NS;
        while (cfg.sync ? n < sync_iters : mono() < end && !stop_all) {
                bool is_long = cfg.long_every && ++n % cfg.long_every == 0;
                uint64_t t0, t1, t_left, dur_ns, wait_us = is_long ? cfg.long_us : cfg.short_us;
                unsigned site = is_long ? 1u : 2u;
                int flagged, woke, leftover;

                if (cfg.sync) {
                        /* imbalance: compute_us +- 50 %, then everybody meets */
                        n += !cfg.long_every;
                        sleep_us(cfg.compute_us / 2 +
                                 (uint64_t)rand_r(&seed) % (cfg.compute_us + 1));
                } else {
                        sleep_us(cfg.compute_us);
                }
                /* a raise of the previous call may still be on its way: only
                 * a flag that appears during this call counts */
                leftover = atomic_load(&s->clocked_down) != 0;
                t0 = mpi_pstate_slot_now(cfg.clock);
                mpi_pstate_slot_wait_begin(s, 0, t0);
                if (cfg.spread_min) {
                        double u = (double)rand_r(&seed) / RAND_MAX;

                        wait_us =
                            (uint64_t)((double)cfg.spread_min *
                                       pow((double)cfg.spread_max / (double)cfg.spread_min, u));
                        site = 64u - (unsigned)__builtin_clzll(wait_us | 1u);
                }
                mpi_pstate_pred_begin(&pred, site, cfg.no_announce || cfg.profile ? NULL : att.hdr,
                                      s, cfg.threshold_us * 1000u);
                if (cfg.sync)
                        pthread_barrier_wait(&sync_barrier);
                else
                        sleep_us(wait_us);
                flagged = atomic_load(&s->clocked_down) != 0;
                t1 = mpi_pstate_slot_now(cfg.clock);
                t_left = mono();
                mpi_pstate_pred_end(&pred, s, t1 - t0 >= thr_ticks);
                woke = mpi_pstate_slot_wait_end(s, t0, t1, thr_ticks);
                dur_ns = (uint64_t)((unsigned __int128)(t1 - t0) * NS / cfg.tps);
                ra->st.calls++;
                if (dur_ns < cfg.threshold_us * 1000u) {
                        ra->st.short_calls++;
                        ra->st.violations += flagged && !leftover;
                } else {
                        ra->st.long_calls++;
                        ra->st.ideal_down_ns += dur_ns - cfg.threshold_us * 1000u;
                }
                if (!woke)
                        continue;
                mpi_pstate_slot_wake_agent(att.hdr, s);
                ra->st.wakes++;
                if (!cfg.spin)
                        continue;
                while (atomic_load_explicit(&s->clocked_down, memory_order_acquire)) {
                        cpu_relax();
                        if (mono() - t_left > SPIN_LIMIT_NS) {
                                ra->st.spin_timeouts++;
                                break;
                        }
                }
                if (!atomic_load(&s->clocked_down))
                        mpi_pstate_agent_hist_add(&ra->st.restore_ns, mono() - t_left);
        }
        s->app_end_ticks = mpi_pstate_slot_now(cfg.clock);
        atomic_store(&s->state, MPI_PSTATE_SLOT_FINALIZED);
        mpi_pstate_slot_detach(&att);
        return NULL;
}

static void put_hist(const char *name, const struct mpi_pstate_agent_hist *h)
{
        int first = 1;

        printf("\"%s\": {\"count\": %llu, \"p50\": %llu, \"p99\": %llu, \"max\": %llu, \"mean\": "
               "%llu, "
               "\"log2\": [",
               name, (unsigned long long)h->count,
               (unsigned long long)mpi_pstate_agent_hist_quantile(h, 500),
               (unsigned long long)mpi_pstate_agent_hist_quantile(h, 990),
               (unsigned long long)h->max, (unsigned long long)(h->count ? h->sum / h->count : 0));
        for (unsigned b = 0; b < MPI_PSTATE_AGENT_HIST_BUCKETS; b++) {
                if (!h->bucket[b])
                        continue;
                printf("%s[%u, %llu]", first ? "" : ", ", b, (unsigned long long)h->bucket[b]);
                first = 0;
        }
        printf("]}");
}

static int parse(int argc, char **argv)
{
        static const struct option lo[] = {
            {"shm", 1, NULL, 's'},        {"slots", 1, NULL, 'n'},
            {"first", 1, NULL, 'f'},      {"threshold-us", 1, NULL, 't'},
            {"seconds", 1, NULL, 'S'},    {"compute-us", 1, NULL, 'c'},
            {"short-us", 1, NULL, 'o'},   {"long-us", 1, NULL, 'l'},
            {"long-every", 1, NULL, 'e'}, {"clock", 1, NULL, 'k'},
            {"spin", 0, NULL, 'P'},       {"baseline-wake", 0, NULL, 'b'},
            {"mode", 1, NULL, 'm'},       {"baseline-rt", 1, NULL, 'R'},
            {"sync", 0, NULL, 'Y'},       {"no-announce", 0, NULL, 'A'},
            {"spread-us", 1, NULL, 'D'},  {NULL, 0, NULL, 0}};
        int c;

        while ((c = getopt_long(argc, argv, "", lo, NULL)) != -1) {
                switch (c) {
                case 's':
                        cfg.shm = optarg;
                        break;
                case 'n':
                        cfg.slots = (unsigned)strtoul(optarg, NULL, 10);
                        break;
                case 'f':
                        cfg.first = (unsigned)strtoul(optarg, NULL, 10);
                        break;
                case 't':
                        cfg.threshold_us = strtoull(optarg, NULL, 10);
                        break;
                case 'S':
                        cfg.seconds = strtoull(optarg, NULL, 10);
                        break;
                case 'c':
                        cfg.compute_us = strtoull(optarg, NULL, 10);
                        break;
                case 'o':
                        cfg.short_us = strtoull(optarg, NULL, 10);
                        break;
                case 'l':
                        cfg.long_us = strtoull(optarg, NULL, 10);
                        break;
                case 'e':
                        cfg.long_every = (unsigned)strtoul(optarg, NULL, 10);
                        break;
                case 'k':
                        if (mpi_pstate_slot_clock_choose(optarg, &cfg.clock))
                                return -1;
                        break;
                case 'P':
                        cfg.spin = 1;
                        break;
                case 'b':
                        cfg.baseline = 1;
                        break;
                case 'm':
                        cfg.profile = strcmp(optarg, "profile") == 0;
                        break;
                case 'R':
                        cfg.baseline_rt = atoi(optarg);
                        break;
                case 'Y':
                        cfg.sync = 1;
                        break;
                case 'A':
                        cfg.no_announce = 1;
                        break;
                case 'D':
                        if (sscanf(optarg, "%" SCNu64 ",%" SCNu64, &cfg.spread_min,
                                   &cfg.spread_max) != 2 ||
                            !cfg.spread_min || cfg.spread_max < cfg.spread_min)
                                return -1;
                        break;
                default:
                        return -1;
                }
        }
        return (cfg.shm || cfg.baseline) && cfg.slots > 0 ? 0 : -1;
}

int main(int argc, char **argv)
{
        struct mpi_pstate_clock_sample first;
        struct rank_arg *ra;
        struct rank_stats tot;
        pid_t waiter = -1;

        if (parse(argc, argv)) {
                fprintf(stderr,
                        "usage: simranks --shm PATH --slots N [options] (see the source)\n");
                return 2;
        }
        mpi_pstate_slot_clock_sample(cfg.clock, &first);
        cfg.tps = mpi_pstate_slot_clock_rate(cfg.clock, &first, 20000000);
        if (cfg.baseline) {
                bare = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
                if (bare == MAP_FAILED)
                        return 1;
                waiter = fork();
                if (waiter == 0)
                        bare_waiter();
        }
        if (cfg.sync)
                pthread_barrier_init(&sync_barrier, NULL, cfg.slots);
        ra = calloc(cfg.slots, sizeof(*ra));
        if (!ra)
                return 1;
        for (unsigned i = 0; i < cfg.slots; i++) {
                ra[i].index = i;
                if (pthread_create(&ra[i].th, NULL, rank_main, &ra[i]) != 0)
                        return 1;
        }
        memset(&tot, 0, sizeof(tot));
        for (unsigned i = 0; i < cfg.slots; i++) {
                pthread_join(ra[i].th, NULL);
                tot.calls += ra[i].st.calls;
                tot.long_calls += ra[i].st.long_calls;
                tot.short_calls += ra[i].st.short_calls;
                tot.wakes += ra[i].st.wakes;
                tot.violations += ra[i].st.violations;
                tot.spin_timeouts += ra[i].st.spin_timeouts;
                tot.ideal_down_ns += ra[i].st.ideal_down_ns;
                for (unsigned b = 0; b < MPI_PSTATE_AGENT_HIST_BUCKETS; b++)
                        tot.restore_ns.bucket[b] += ra[i].st.restore_ns.bucket[b];
                tot.restore_ns.count += ra[i].st.restore_ns.count;
                tot.restore_ns.sum += ra[i].st.restore_ns.sum;
                if (ra[i].st.restore_ns.max > tot.restore_ns.max)
                        tot.restore_ns.max = ra[i].st.restore_ns.max;
        }
        if (waiter > 0) {
                atomic_store(&bare->word, UINT32_MAX);
                syscall(SYS_futex, &bare->word, FUTEX_WAKE, 1, NULL, NULL, 0);
                waitpid(waiter, NULL, 0);
        }
        printf("{\"slots\": %u, \"threshold_us\": %llu, \"calls\": %llu, \"long_calls\": %llu, "
               "\"short_calls\": %llu, \"wakes\": %llu, \"violations\": %llu, "
               "\"spin_timeouts\": %llu, \"ideal_down_ns\": %llu, ",
               cfg.slots, (unsigned long long)cfg.threshold_us, (unsigned long long)tot.calls,
               (unsigned long long)tot.long_calls, (unsigned long long)tot.short_calls,
               (unsigned long long)tot.wakes, (unsigned long long)tot.violations,
               (unsigned long long)tot.spin_timeouts, (unsigned long long)tot.ideal_down_ns);
        put_hist("restore_ns", &tot.restore_ns);
        printf("}\n");
        free(ra);
        return 0;
}
