/* SPDX-License-Identifier: BSD-3-Clause */
/* Where the plugin's per-step time goes: a monotonic stopwatch split into
 * the phases of a step's start (slurm_spank_init_post_opt and the first
 * task_post_fork, which hold up the launch of every task) and of its end (task_exit and exit, which
 * hold up the step's completion).  step_shared.c logs both splits at debug level, one line each
 * ("step start (ms): topology=1.234 ..."); bench/step/ reads them. Always on: a phase costs one
 * clock_gettime (vDSO, tens of ns), nothing next to the milliseconds being measured, and the line
 * is only formatted when a step starts or ends. */
#ifndef MPI_PSTATE_SPANK_STEPTIME_H
#define MPI_PSTATE_SPANK_STEPTIME_H
#include <stddef.h>
#include <stdint.h>

enum mpi_pstate_steptime_phase {
        /* step start */
        MPI_PSTATE_STEPTIME_TOPOLOGY, /* hwloc topology init and load */
        MPI_PSTATE_STEPTIME_CORES,    /* allocated cores to CPUs, pinning plan */
        MPI_PSTATE_STEPTIME_DIRS,     /* runtime directories */
        MPI_PSTATE_STEPTIME_POLICY,   /* cpufreq discovery, restore records, policy writes */
        MPI_PSTATE_STEPTIME_SEGMENT,  /* preload check, slot segment */
        MPI_PSTATE_STEPTIME_AGENT,    /* agent fork and hand-off, pidfile */
        MPI_PSTATE_STEPTIME_RECORD,   /* plugin.json */
        /* step end */
        MPI_PSTATE_STEPTIME_AGENT_STOP, /* SIGTERM until the agent is gone */
        MPI_PSTATE_STEPTIME_RESTORE,    /* restore records of the step */
        MPI_PSTATE_STEPTIME_END_RECORD, /* plugin.json, final */
        MPI_PSTATE_STEPTIME_COUNT
};

#define MPI_PSTATE_STEPTIME_START_FIRST MPI_PSTATE_STEPTIME_TOPOLOGY
#define MPI_PSTATE_STEPTIME_END_FIRST MPI_PSTATE_STEPTIME_AGENT_STOP

struct mpi_pstate_steptime {
        uint64_t last_ns;
        uint64_t ns[MPI_PSTATE_STEPTIME_COUNT];
};

/* Starts (or restarts) the stopwatch: the next phase is timed from now. */
void mpi_pstate_steptime_begin(struct mpi_pstate_steptime *t);

/* Adds the time since the last begin or end to phase p. */
void mpi_pstate_steptime_end(struct mpi_pstate_steptime *t, enum mpi_pstate_steptime_phase p);

/* "name=ms name=ms ... total=ms" for the phases first..last-1, milliseconds
 * with three decimals.  Length written or -ENOSPC/-EINVAL. */
int mpi_pstate_steptime_format(const struct mpi_pstate_steptime *t, unsigned first, unsigned last,
                               char *buf, size_t len);

#endif
