/* SPDX-License-Identifier: BSD-3-Clause */
/* The plugin's only way to log: every message starts with "mpi-pstate: ".
 * These map to the logging functions slurmd, slurmstepd, srun and sbatch
 * export to plugins, so tests/unit/spank/spank_stub.c can replace them all.
 *
 * Where the output goes depends on the context (measured on Slurm 22.05):
 * in sbatch/salloc/srun, error and info reach the user's terminal; in
 * slurmstepd and slurmd they reach the slurmd log only.  The format must be
 * a string literal (it is joined with the prefix at compile time). */
#ifndef MPI_PSTATE_SPANK_LOG_H
#define MPI_PSTATE_SPANK_LOG_H
#include <slurm/spank.h>

#define MP_PREFIX "mpi-pstate: "

#define mp_error(...) slurm_error(MP_PREFIX __VA_ARGS__)
#define mp_info(...) slurm_info(MP_PREFIX __VA_ARGS__)
#define mp_verbose(...) slurm_verbose(MP_PREFIX __VA_ARGS__)
#define mp_debug(...) slurm_debug(MP_PREFIX __VA_ARGS__)

/* Messages built elsewhere (common/options.c, spank/plugstack.c) already
 * carry the prefix. */
#define mp_error_msg(msg) slurm_error("%s", (msg))
#define mp_info_msg(msg) slurm_info("%s", (msg))
#define mp_verbose_msg(msg) slurm_verbose("%s", (msg))

#endif
