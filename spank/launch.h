/* SPDX-License-Identifier: BSD-3-Clause */
/* How the ranks of a step are reached: the LD_PRELOAD value a task gets, and
 * whether the step's task is an MPI launcher's daemon rather than a rank.
 * Pure string work: no Slurm, no environment access. */
#ifndef MPI_PSTATE_SPANK_LAUNCH_H
#define MPI_PSTATE_SPANK_LAUNCH_H
#include <stdbool.h>
#include <stddef.h>

/* The LD_PRELOAD of a task: lib first, then every entry of current (the
 * user's own value, entries separated by ':' or blanks as ld.so accepts) in
 * their order, minus any copy of lib, joined with ':'.  current may be NULL.
 * Returns the length written, or -ENOSPC / -EINVAL (lib empty or holding a
 * separator). */
int mpi_pstate_launch_preload(const char *lib, const char *current, char *out, size_t len);

/* True when argv0 (a path or a name) is the per-node daemon an MPI launcher
 * starts through srun (Open MPI's orted and prted, MPICH's hydra_pmi_proxy,
 * Intel MPI's pmi_proxy and hydra_bstrap_proxy).  Such a step has one task
 * per node that forks the ranks: the ranks, not the daemon, are what the
 * plugin serves, so the step gets the job's cores on the node and a slot
 * per CPU. */
bool mpi_pstate_launch_is_daemon(const char *argv0);

#endif
