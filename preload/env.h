/* SPDX-License-Identifier: BSD-3-Clause */
/* The preload library's environment: its configuration, every MPI_PSTATE_*
 * variable of common/contract.h it reads, parsed once at MPI_Init.  Pure:
 * no MPI. */
#ifndef MPI_PSTATE_PRELOAD_ENV_H
#define MPI_PSTATE_PRELOAD_ENV_H
#include <limits.h>
#include <stdint.h>

#include "options.h"
#include "slot.h"

struct mpi_pstate_pconf {
        struct mpi_pstate_options opt; /* mode, threshold_us, low_khz, governor, bind */
        char shm[PATH_MAX];            /* "" when MPI_PSTATE_SHM is unset */
        char profile_dir[PATH_MAX];    /* "" when no profile is wanted */
        unsigned verbose;
        int local_rank;             /* -1: no variable gave one */
        const char *local_rank_var; /* the variable it came from */
        enum mpi_pstate_clock clock;
        char err[512]; /* the first problem, one line, "" when none */
};

/* Reads the environment.  Returns 0, or a negative errno with c->err set;
 * on error the caller passes every call through. */
int mpi_pstate_env_load(struct mpi_pstate_pconf *c);

#endif
