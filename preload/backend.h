/* SPDX-License-Identifier: BSD-3-Clause */
/* The interface between the front library (libmpi-pstate.so, ABI-neutral,
 * preloaded into every process) and an ABI backend
 * (libmpi-pstate-<abi>.so, dlopen()ed by the front once it knows which MPI
 * the process uses).  Both sides are built from the same generated symbol
 * list; syms_hash proves it. */
#ifndef MPI_PSTATE_PRELOAD_BACKEND_H
#define MPI_PSTATE_PRELOAD_BACKEND_H
#include <stdint.h>

#define MPI_PSTATE_BACKEND_VERSION 1u

enum mpi_pstate_abi {
        MPI_PSTATE_ABI_NONE = 0,
        MPI_PSTATE_ABI_OMPI = 1,  /* Open MPI: handles are pointers */
        MPI_PSTATE_ABI_MPICH = 2, /* MPICH, Intel MPI, MVAPICH, Cray MPICH: int handles */
};

struct mpi_pstate_backend {
        uint32_t version;   /* MPI_PSTATE_BACKEND_VERSION */
        uint32_t nsyms;     /* MPI_PSTATE_NSYMS of the backend's build */
        uint64_t syms_hash; /* MPI_PSTATE_SYMS_HASH of the backend's build */
        uint32_t abi;       /* enum mpi_pstate_abi */
        const char *abi_name;
        /* Called once, before any wrapper can be reached.  next[i] is the
         * definition symbol i had before the front interposed it (NULL while
         * unknown; the front fills entries lazily and only routes symbol i to
         * the backend once next[i] is set).  mpi_lib names the MPI library
         * found.  Returns 0, or non-zero to make the front pass through. */
        int (*attach)(void *const *next, const char *mpi_lib);
        /* nsyms entries in the front's slot order; NULL: not wrapped. */
        void *const *wrappers;
};

#endif
