/* SPDX-License-Identifier: BSD-3-Clause */
/* Where a step's state lives on a compute node.  Pure: string work only, no
 * I/O beyond gethostname(), no Slurm.
 *
 *   <runtime_dir>/restore/            restore records of every step on the
 *                                     node (common/restore.h), root, 0700
 *   <runtime_dir>/steps/<job>.<step>/ the step's agent pidfile, agent
 *                                     record and log, and the plugin's step
 *                                     record (plugin.json)
 *   /dev/shm/mpi-pstate.<job>.<step>.<rand>
 *                                     the step's slot segment (common/slot.h),
 *                                     owned by the job's user; kept after the
 *                                     step for the node epilog, which finds it
 *                                     through the step record (plugin.json),
 *                                     never by name: <rand> is 16 hex digits
 *                                     of getrandom(2), so that no other user
 *                                     can squat or pre-block the name
 *
 * runtime_dir may hold "%h", replaced by the host name up to its first dot:
 * several slurmd on one machine (each in its own UTS namespace, as in the
 * test cluster) then keep their restore records apart, as SlurmdSpoolDir's
 * %n does for Slurm's own state.  "%%" is a literal "%". */
#ifndef MPI_PSTATE_SPANK_PATHS_H
#define MPI_PSTATE_SPANK_PATHS_H
#include <stddef.h>
#include <stdint.h>

#include "plugstack.h"

#define MPI_PSTATE_PATHS_SHM_DIR "/dev/shm"
#define MPI_PSTATE_PATHS_LEN (MPI_PSTATE_CONFIG_PATH_MAX + 64)
#define MPI_PSTATE_PATHS_SHM_RAND 16 /* hex digits of the segment name's suffix */

struct mpi_pstate_paths {
        char runtime[MPI_PSTATE_PATHS_LEN]; /* runtime_dir with %h expanded */
        char restore[MPI_PSTATE_PATHS_LEN]; /* <runtime>/restore */
        char steps[MPI_PSTATE_PATHS_LEN];   /* <runtime>/steps */
        char step[MPI_PSTATE_PATHS_LEN];    /* <runtime>/steps/<job>.<step> */
        char shm[MPI_PSTATE_PATHS_LEN];     /* /dev/shm/mpi-pstate.<job>.<step>[.<rand>] */
        size_t shm_base;                    /* strlen of shm without the suffix */
        char pidfile[MPI_PSTATE_PATHS_LEN]; /* <step>/agent.pid */
        char record[MPI_PSTATE_PATHS_LEN];  /* <step>/agent.json */
        char log[MPI_PSTATE_PATHS_LEN];     /* <step>/agent.log */
};

/* The short host name: gethostname() up to the first dot, checked to be a
 * plain name ([A-Za-z0-9_-], 1..63 bytes).  0 or a negative errno. */
int mpi_pstate_paths_host(char *buf, size_t len);

/* Expands %h and %% of tmpl into out.  Any other "%" sequence, a host that is
 * not a plain name, or a result that does not fit is -EINVAL / -ENAMETOOLONG. */
int mpi_pstate_paths_expand(const char *tmpl, const char *host, char *out, size_t len);

/* The name of a step in paths: its number, or "batch", "extern",
 * "interactive" for Slurm's special step ids. */
const char *mpi_pstate_paths_step_name(uint32_t step, char *buf, size_t len);

/* Every path of job/step under runtime_dir (%h is expanded with host).
 * 0 or a negative errno. */
int mpi_pstate_paths_step(const char *runtime_dir, const char *host, uint32_t job, uint32_t step,
                          struct mpi_pstate_paths *out);

/* Appends (or replaces) the random suffix of p->shm: ".%016x" of rnd.
 * mpi_pstate_paths_step() leaves shm without one. */
int mpi_pstate_paths_shm_unique(struct mpi_pstate_paths *p, uint64_t rnd);

#endif
