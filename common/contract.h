/* SPDX-License-Identifier: BSD-3-Clause */
/* The environment contract between the SPANK plugin, the node agent, the
 * `mpi-pstate exec` launcher and the preload library: the names of the
 * variables that are not user options.  The user options' variables
 * (MPI_PSTATE_MODE, _THRESHOLD, _LOW, _GOVERNOR, _BIND) are the env column
 * of common/options.def, which parses them; the front library, which reads
 * the mode before it can load anything, names it below too, and
 * tests/unit/common/test_slot_contract.c checks the two agree.  Every name here is
 * documented in mpi-pstate-preload(7), ENVIRONMENT
 * (tests/py/test_preload_slot.py checks that).  Values are read once, when
 * MPI is initialised; a bad value makes the library print one message
 * (rank 0) and pass every call through. */
#ifndef MPI_PSTATE_CONTRACT_H
#define MPI_PSTATE_CONTRACT_H

/* String macros, so that a typo in a name is a compile error. */
#define MPI_PSTATE_ENV_MODE "MPI_PSTATE_MODE" /* = options.def's MODE env */
#define MPI_PSTATE_ENV_SHM "MPI_PSTATE_SHM"
#define MPI_PSTATE_ENV_PROFILE_DIR "MPI_PSTATE_PROFILE_DIR"
#define MPI_PSTATE_ENV_VERBOSE "MPI_PSTATE_VERBOSE"
#define MPI_PSTATE_ENV_LOCAL_RANK "MPI_PSTATE_LOCAL_RANK"
#define MPI_PSTATE_ENV_ABI "MPI_PSTATE_ABI"
#define MPI_PSTATE_ENV_CLOCK "MPI_PSTATE_CLOCK"
#define MPI_PSTATE_ENV_PRELOAD "MPI_PSTATE_PRELOAD"
#define MPI_PSTATE_ENV_UNMEASURED "MPI_PSTATE_UNMEASURED"

/* Launcher variables that give the local rank, most specific first: the
 * innermost launcher sets its own, while SLURM_LOCALID (and a plugin-set
 * MPI_PSTATE_LOCAL_RANK) are inherited unchanged by every rank an mpirun or
 * mpiexec inside a job step starts. */
#define MPI_PSTATE_LOCAL_RANK_VARS                                                                 \
        "OMPI_COMM_WORLD_LOCAL_RANK", "MPI_LOCALRANKID", "PMI_LOCAL_RANK",                         \
            MPI_PSTATE_ENV_LOCAL_RANK, "SLURM_LOCALID"

/* The plugin's runtime_dir default (spank/plugstack.h) is also the agent's
 * when no --runtime-dir is given, so both read it from here.  The length
 * bounds a path either of them copies: fixed so that the admin's settings
 * struct can be copied and stays small, and far above any sane spool path. */
#define MPI_PSTATE_CONFIG_PATH_MAX 256
#define MPI_PSTATE_CONFIG_RUNTIME_DIR "/run/mpi-pstate"

#endif
