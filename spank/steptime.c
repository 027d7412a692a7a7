/* SPDX-License-Identifier: BSD-3-Clause */
/* The plugin's per-step stopwatch (steptime.h): the time of each phase of
 * a step's start and end, and the one debug line that gives it. */
#include "steptime.h"

#include <errno.h>
#include <stdio.h>
#include <time.h>

static const char *const names[MPI_PSTATE_STEPTIME_COUNT] = {
    [MPI_PSTATE_STEPTIME_TOPOLOGY] = "topology", [MPI_PSTATE_STEPTIME_CORES] = "cores",
    [MPI_PSTATE_STEPTIME_DIRS] = "dirs",         [MPI_PSTATE_STEPTIME_POLICY] = "policy",
    [MPI_PSTATE_STEPTIME_SEGMENT] = "segment",   [MPI_PSTATE_STEPTIME_AGENT] = "agent",
    [MPI_PSTATE_STEPTIME_RECORD] = "record",     [MPI_PSTATE_STEPTIME_AGENT_STOP] = "agent_stop",
    [MPI_PSTATE_STEPTIME_RESTORE] = "restore",   [MPI_PSTATE_STEPTIME_END_RECORD] = "record",
};

static uint64_t now_ns(void)
{
        struct timespec ts;

        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (uint64_t)ts.tv_sec * UINT64_C(1000000000) + (uint64_t)ts.tv_nsec;
}

void mpi_pstate_steptime_begin(struct mpi_pstate_steptime *t)
{
        t->last_ns = now_ns();
}

void mpi_pstate_steptime_end(struct mpi_pstate_steptime *t, enum mpi_pstate_steptime_phase p)
{
        uint64_t n = now_ns();

        if ((unsigned)p < MPI_PSTATE_STEPTIME_COUNT && t->last_ns && n >= t->last_ns)
                t->ns[p] += n - t->last_ns;
        t->last_ns = n;
}

int mpi_pstate_steptime_format(const struct mpi_pstate_steptime *t, unsigned first, unsigned last,
                               char *buf, size_t len)
{
        uint64_t total = 0;
        size_t o = 0;
        int n;

        if (!buf || len == 0 || first > last || last > MPI_PSTATE_STEPTIME_COUNT)
                return -EINVAL;
        buf[0] = '\0';
        for (unsigned p = first; p <= last; p++) {
                uint64_t v = p < last ? t->ns[p] : total;

                n = snprintf(buf + o, len - o, "%s%s=%llu.%03llu", o ? " " : "",
                             p < last ? names[p] : "total", (unsigned long long)(v / 1000000),
                             (unsigned long long)(v / 1000 % 1000));
                if (n < 0 || (size_t)n >= len - o)
                        return -ENOSPC;
                o += (size_t)n;
                total += p < last ? v : 0;
        }
        return (int)o;
}
