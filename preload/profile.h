/* SPDX-License-Identifier: BSD-3-Clause */
/* Profile mode output: rank-<R>.json and rank-<R>.csv in a directory,
 * written at MPI_Finalize (or MPI_Abort, or exit without finalize) from the
 * rank's slot.  Pure: no MPI.  Format documented in docs/preload.md. */
#ifndef MPI_PSTATE_PRELOAD_PROFILE_H
#define MPI_PSTATE_PRELOAD_PROFILE_H
#include "slot.h"

struct mpi_pstate_profile_meta {
        const char *abi;               /* "ompi" / "mpich" */
        const char *mpi_library;       /* first line of MPI_Get_library_version */
        const char *state;             /* "finalized", "aborted", "exited" */
        const unsigned char *app_time; /* per function id: 1 when it counts as MPI time */
};

/* Creates dir (and missing parents) if needed and writes both files
 * atomically (temporary name, then rename).  Returns 0 or -errno. */
int mpi_pstate_profile_write(const char *dir, const struct mpi_pstate_slot *slot,
                             const struct mpi_pstate_profile_meta *m);

/* The word of slot.wait_mode (enum mpi_pstate_wait_mode), "unknown"
 * out of range: epilog/mpi_pstate/slot.py's WAIT_MODES. */
const char *mpi_pstate_profile_wait_word(uint32_t mode);

/* mkdir -p with mode 0777 & ~umask; 0 or -errno. */
int mpi_pstate_profile_mkdirs(const char *dir);

#endif
