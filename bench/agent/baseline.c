/* SPDX-License-Identifier: BSD-3-Clause */
/* baseline: what waking up costs on this machine, without any agent logic.
 *
 *   baseline PERIOD_US SECONDS [RT_PRIO]
 *
 * Sleeps on a futex until absolute CLOCK_MONOTONIC deadlines PERIOD_US
 * apart, exactly as the agent's loop does (timer slack 1 ns, optionally
 * SCHED_FIFO), and prints one JSON object: how late each wake-up came
 * (log2 histogram quantiles, ns) and how much CPU time each cost.  The
 * agent's drop lateness and CPU share are reported as ratios to these. */
#include <linux/futex.h>
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "agent.h"

static uint64_t ns(clockid_t c)
{
        struct timespec ts;

        clock_gettime(c, &ts);
        return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

int main(int argc, char **argv)
{
        static uint32_t word;
        struct mpi_pstate_agent_hist late = {0};
        uint64_t period, end, dl, cpu0, t0, cpu;

        if (argc < 3) {
                fprintf(stderr, "usage: baseline PERIOD_US SECONDS [RT_PRIO]\n");
                return 2;
        }
        period = strtoull(argv[1], NULL, 10) * 1000u;
        prctl(PR_SET_TIMERSLACK, 1UL, 0, 0, 0);
        if (argc > 3 && atoi(argv[3]) > 0) {
                struct sched_param sp = {.sched_priority = atoi(argv[3])};

                if (sched_setscheduler(0, SCHED_FIFO, &sp) != 0)
                        perror("baseline: SCHED_FIFO");
        }
        t0 = ns(CLOCK_MONOTONIC);
        cpu0 = ns(CLOCK_PROCESS_CPUTIME_ID);
        end = t0 + strtoull(argv[2], NULL, 10) * 1000000000u;
        for (dl = t0 + period; dl < end; dl += period) {
                struct timespec ts = {.tv_sec = (time_t)(dl / 1000000000u),
                                      .tv_nsec = (long)(dl % 1000000000u)};
                uint64_t t;

                syscall(SYS_futex, &word, FUTEX_WAIT_BITSET, 0, &ts, NULL, FUTEX_BITSET_MATCH_ANY);
                t = ns(CLOCK_MONOTONIC);
                mpi_pstate_agent_hist_add(&late, t > dl ? t - dl : 0);
                if (t > dl + period)
                        dl = t - t % period; /* do not queue up missed periods */
        }
        cpu = ns(CLOCK_PROCESS_CPUTIME_ID) - cpu0;
        printf(
            "{\"period_us\": %llu, \"wakes\": %llu, \"cpu_ns\": %llu, \"cpu_per_wake_ns\": %llu, "
            "\"cpu_share\": %.6f, \"late_p50\": %llu, \"late_p99\": %llu, \"late_max\": %llu, "
            "\"log2\": [",
            (unsigned long long)(period / 1000u), (unsigned long long)late.count,
            (unsigned long long)cpu, (unsigned long long)(late.count ? cpu / late.count : 0),
            (double)cpu / (double)(ns(CLOCK_MONOTONIC) - t0),
            (unsigned long long)mpi_pstate_agent_hist_quantile(&late, 500),
            (unsigned long long)mpi_pstate_agent_hist_quantile(&late, 990),
            (unsigned long long)late.max);
        for (unsigned b = 0, first = 1; b < MPI_PSTATE_AGENT_HIST_BUCKETS; b++) {
                if (!late.bucket[b])
                        continue;
                printf("%s[%u, %llu]", first ? "" : ", ", b, (unsigned long long)late.bucket[b]);
                first = 0;
        }
        printf("]}\n");
        return 0;
}
