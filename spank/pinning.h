/* SPDX-License-Identifier: BSD-3-Clause */
/* The plugin's side of pinning: turns what Slurm says about a step (its
 * allocated cores as a list, tasks, CPUs per task) and the user's --mpi-pstate-bind
 * into one request of spank/placement.h per task, and applies the answer to the
 * calling process.  No Slurm types: step_prepare.c reads the items and passes them
 * in, so the unit tests drive this with hwloc XML topologies.
 *
 * Prepared once per step in slurmstepd (root, before the tasks are forked),
 * used in every forked task, which inherits the loaded topology. */
#ifndef MPI_PSTATE_SPANK_PINNING_H
#define MPI_PSTATE_SPANK_PINNING_H
#include <sched.h>
#include <stdbool.h>
#include <stddef.h>

#include <hwloc.h>

#include "options.h"
#include "placement.h"

struct mpi_pstate_pinning {
        hwloc_topology_t topo;
        hwloc_bitmap_t cores; /* allocated cores, hwloc logical core indices */
        hwloc_bitmap_t cpus;  /* every PU of those cores, OS indices */
        unsigned ntasks;
        unsigned cores_per_task;
        enum mpi_pstate_placement_mode mode;
};

/* Prepares p from a topology (taken over: freed by _fini, also on failure),
 * the allocated cores in Slurm's list syntax ("0-3,8"), the local task count
 * and Slurm's CPUs per task (hardware threads; converted to cores).  bind
 * selects the mode; a step the user bound with --cpu-bind uses
 * MPI_PSTATE_PLACEMENT_USER instead (user_bound), and an MPI launcher's daemon is
 * never narrowed below the allocation (mode none).  0 or a negative errno
 * with a reason in err. */
int mpi_pstate_pinning_init(struct mpi_pstate_pinning *p, hwloc_topology_t topo, const char *cores,
                            unsigned ntasks, unsigned cpus_per_task, enum mpi_pstate_bind bind,
                            bool user_bound, bool daemon, char *err, size_t errlen);

/* Whether mpi-pstate places the step's tasks at all (docs/pinning.md,
 * "Who places the tasks").  Only mode on pins: profile measures and must
 * leave every job exactly where it would run without mpi-pstate, also when
 * a site makes it the default.  An explicit binding (cpu_bind_type: the
 * step's SLURM_CPU_BIND_TYPE, which srun exports only for --cpu-bind or
 * SLURM_CPU_BIND, "none" included; NULL when absent) is the user's and
 * wins; "verbose"/"quiet" alone choose no binding.  An MPI launcher's
 * daemon in mode on is widened to the job's cores whatever its srun line
 * says (Open MPI starts it with --cpu-bind=none). */
bool mpi_pstate_pinning_ours(enum mpi_pstate_mode mode, const char *cpu_bind_type, bool daemon);

/* Loads this machine's topology for _init (mpi_pstate_placement_topology_load). */
int mpi_pstate_pinning_load(hwloc_topology_t *topo);

void mpi_pstate_pinning_fini(struct mpi_pstate_pinning *p);

/* The CPUs of local task `task`.  current is the task's affinity as the
 * task plugin left it (only read in USER mode).  0 or a negative errno with a
 * reason in err (spank/placement.h's errors). */
int mpi_pstate_pinning_task(const struct mpi_pstate_pinning *p, unsigned task,
                            const cpu_set_t *current, cpu_set_t *out,
                            struct mpi_pstate_placement_info *info, char *err, size_t errlen);

/* The step's CPUs (every PU of the allocated cores) as a cpu_set_t. */
int mpi_pstate_pinning_cpus(const struct mpi_pstate_pinning *p, cpu_set_t *out);

#endif
